// Splitting a tuning job's tasks into shards that run as separate jobs (a Slurm array, a
// Kubernetes Indexed Job), each into its own database, merged afterwards. The split is a pure
// function of the task list, so every shard computes the same one without talking to the others.
#pragma once

#include "support/error.h"
#include "tuner/task.h"

#include <string>
#include <vector>

namespace tunec::tuner {

/// Shard `index` of `count` ("I/N" on the command line, 0 <= I < N).
struct Shard {
  int index = 0;
  int count = 1;
};

Expected<Shard> parseShard(const std::string& text);

/// A task's expected share of the model's kernel time before anything is measured: its
/// occurrences times its FLOPs (every task at the same GFLOP/s), what the first batches of a
/// single job are ordered by.
double expectedLoad(const Task& task);

struct ShardPlan {
  std::vector<int> shardOf;      ///< per task (in the job's order)
  std::vector<double> shardLoad; ///< per shard, Σ expectedLoad
};

/// Balances the tasks over `count` shards: heaviest first, each to the least-loaded shard (ties
/// by workload key and shard index, so the plan does not depend on the task order).
ShardPlan planShards(const std::vector<Task>& tasks, int count);

/// A shard's part of a job-wide budget (trials or seconds): the budget times the shard's share of
/// the expected load, as a single job gives the busiest kernels the most trials.
double shardShare(const ShardPlan& plan, const Shard& shard);

} // namespace tunec::tuner
