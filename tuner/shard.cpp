// Deterministic shard planning: longest-processing-time-first on expected load.
#include "tuner/shard.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>

namespace tunec::tuner {

Expected<Shard> parseShard(const std::string& text) {
  auto bad = [&] {
    return makeError("--shard must be I/N with 0 <= I < N (e.g. 0/4 is the first of four "
                     "shards), not '",
                     text, "'");
  };
  size_t slash = text.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size()) return bad();
  auto number = [](const std::string& s, long& out) {
    if (s.empty() || s.size() > 6 || !std::all_of(s.begin(), s.end(), ::isdigit)) return false;
    out = std::strtol(s.c_str(), nullptr, 10);
    return true;
  };
  long index = 0, count = 0;
  if (!number(text.substr(0, slash), index) || !number(text.substr(slash + 1), count)) return bad();
  if (count < 1) return bad();
  if (index >= count)
    return makeError("--shard ", text, ": index ", index, " is out of range; a job of ", count,
                     " shards has indices 0 to ", count - 1);
  return Shard{static_cast<int>(index), static_cast<int>(count)};
}

double expectedLoad(const Task& task) {
  return task.weight * task.flops;
}

ShardPlan planShards(const std::vector<Task>& tasks, int count) {
  std::vector<size_t> order(tasks.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    double la = expectedLoad(tasks[a]), lb = expectedLoad(tasks[b]);
    return la != lb ? la > lb : tasks[a].key < tasks[b].key;
  });
  ShardPlan plan;
  plan.shardOf.assign(tasks.size(), 0);
  plan.shardLoad.assign(static_cast<size_t>(std::max(count, 1)), 0.0);
  for (size_t t : order) {
    auto lightest = std::min_element(plan.shardLoad.begin(), plan.shardLoad.end());
    *lightest += expectedLoad(tasks[t]);
    plan.shardOf[t] = static_cast<int>(lightest - plan.shardLoad.begin());
  }
  return plan;
}

double shardShare(const ShardPlan& plan, const Shard& shard) {
  double total = std::accumulate(plan.shardLoad.begin(), plan.shardLoad.end(), 0.0);
  if (!(total > 0)) return 1.0 / static_cast<double>(plan.shardLoad.size());
  return plan.shardLoad[static_cast<size_t>(shard.index)] / total;
}

} // namespace tunec::tuner
