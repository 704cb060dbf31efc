// A tuning job: tasks, the measurer, one cost model per template, the scheduler and the tuning
// database, in batches. The database is the job's state: every measured batch is committed at
// once, so an interrupted job loses nothing, and running it again resumes (measured configs are
// never measured again; the cost model is retrained from the records, warm-started by every
// record of the same template and target, from other workloads and models too).
#pragma once

#include "tuner/measurer.h"
#include "tuner/search.h"
#include "tuner/task.h"
#include "tuning_db/database.h"

#include <atomic>
#include <functional>
#include <string>
#include <vector>

namespace tunec::tuner {

/// What a job reports after each committed batch (to `TuneOptions::onBatch`).
struct TuneProgress {
  int trials = 0, budget = 0; ///< measured in this run, and this run's budget
  std::string task;           ///< the task of the batch
  int taskTrials = 0;
  double bestGflops = 0; ///< the task's best so far
  double kernelsMs = 0;  ///< the estimated latency of the heavy kernels (Σ weight x best)
  double elapsedSeconds = 0;
};

struct TuneOptions {
  Target target;     ///< this machine (a job measures where it runs): record keys, features
  int trials = 1000; ///< measured configs in this run (all tasks)
  /// Configs of these tasks already in the database (this target and template version) count
  /// toward `trials`: a sharded job's shard, run again after it was killed, measures only what
  /// it has left.
  bool countRecorded = false;
  double timeBudgetSeconds = 0; ///< 0: no limit
  int earlyStopping = 0;        ///< a task stops after this many trials without gain (0: off)
  SearchOptions search;
  double minSeconds = 0.1; ///< per measurement
  int minRepeats = 3;
  double timeoutSeconds = 30; ///< per candidate
  bool flushCache = false;
  bool randomSearch = false;  ///< no cost model (for search-quality comparisons)
  bool measureDefault = true; ///< measure the analytical default config first
  uint32_t seed = 1;
  /// One thread's measured roof of a task's kernel (its strategy: FMA, vdpbf16ps, tdpbf16ps,
  /// tdpbusd), for the progress lines' "% of peak"; unset or 0: not shown.
  std::function<double(const Workload&)> roofOf;
  std::vector<std::string> workerArgv;
  bool progress = true; ///< a line per batch on stderr
  /// Called after every committed batch (the Python package's progress callable).
  std::function<void(const TuneProgress&)> onBatch;
};

struct TaskOutcome {
  std::string label;
  int trials = 0; ///< measured in this run
  double bestGflops = 0, defaultGflops = 0;
  nlohmann::json bestConfig;
};

struct TuneSummary {
  int trials = 0, errors = 0;
  int recordedBefore = 0; ///< configs of the tasks already in the database when the job started
  double seconds = 0;
  bool interrupted = false;
  std::vector<TaskOutcome> tasks;
  /// Best GFLOP/s after each trial of the run (the first task's, for tune-op curves).
  std::vector<double> bestAfterTrial;
};

/// Runs the job until the trial or time budget is spent, every task is finished, or `stop` is
/// set (Ctrl-C); progress lines go to stderr.
Expected<TuneSummary> runTuningJob(std::vector<Task> tasks, db::TuningDatabase& database,
                                   const TuneOptions& options, const std::atomic<bool>& stop);

} // namespace tunec::tuner
