// Gradient-style task selection.
#include "tuner/task_scheduler.h"

#include <algorithm>
#include <cmath>

namespace tunec::tuner {

int pickNextTask(const std::vector<TaskProgress>& tasks) {
  // Warm-up: every task gets a first batch, heaviest first.
  int pick = -1;
  double heaviest = -1;
  for (size_t i = 0; i < tasks.size(); ++i)
    if (!tasks[i].finished && tasks[i].bestHistory.empty()) {
      double load =
          tasks[i].weight * (std::isfinite(tasks[i].bestSeconds) ? tasks[i].bestSeconds : 1.0);
      if (load > heaviest) {
        heaviest = load;
        pick = static_cast<int>(i);
      }
    }
  if (pick >= 0) return pick;
  // Expected gain: the backward gradient (recent improvement per trial) blended with an
  // optimistic forward term (a task's latency shrinks like 1/trials), both weighted by its
  // share of the model's latency.
  constexpr double alpha = 0.5;
  double bestGain = -1;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const TaskProgress& t = tasks[i];
    if (t.finished) continue;
    double now = std::isfinite(t.bestSeconds) ? t.bestSeconds : 1.0;
    double backward = 0;
    if (t.bestHistory.size() >= 2) {
      size_t n = t.bestHistory.size();
      size_t from = n >= 4 ? n - 4 : 0;
      double before = t.bestHistory[from];
      if (std::isfinite(before)) backward = (before - now) / static_cast<double>(n - from);
    }
    double forward = now / (t.trials + 1.0);
    double gain = t.weight * (alpha * backward + (1 - alpha) * forward);
    if (gain > bestGain) {
      bestGain = gain;
      pick = static_cast<int>(i);
    }
  }
  return pick;
}

double estimatedLatency(const std::vector<TaskProgress>& tasks) {
  double sum = 0;
  for (const TaskProgress& t : tasks)
    if (std::isfinite(t.bestSeconds)) sum += t.weight * t.bestSeconds;
  return sum;
}

} // namespace tunec::tuner
