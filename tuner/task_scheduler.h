// Sharing the trial budget among a model's tasks by expected gain to end-to-end latency
// (gradient-style, as Ansor's task scheduler), not round-robin: after one warm-up batch each, the
// next batch goes to the task whose weighted latency is expected to drop most.
#pragma once

#include <limits>
#include <vector>

namespace tunec::tuner {

struct TaskProgress {
  double weight = 1; ///< occurrences in the model
  double bestSeconds = std::numeric_limits<double>::infinity();
  int trials = 0;
  std::vector<double> bestHistory; ///< best seconds after each of its batches
  bool finished = false;           ///< space exhausted or early-stopped
};

/// The task to tune next, or -1 when every task is finished.
int pickNextTask(const std::vector<TaskProgress>& tasks);

/// Σ weight × best seconds over tasks with a measurement (the heavy kernels' share of latency).
double estimatedLatency(const std::vector<TaskProgress>& tasks);

} // namespace tunec::tuner
