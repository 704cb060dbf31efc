// Simulated annealing over predicted scores, then top-k with diversity plus random exploration.
#include "tuner/search.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace tunec::tuner {

namespace {

// Scores of points by the model (0 for points whose features fail).
std::vector<float> score(const CostModel& model, const SearchSpace& space, const Target& target,
                         const std::vector<Point>& points) {
  std::vector<Features> rows;
  for (const Point& p : points) {
    auto f = extractFeatures(space.task().workload, p.config, target);
    rows.push_back(f ? *f : Features{});
  }
  auto s = model.predict(rows);
  return s ? *s : std::vector<float>(points.size(), 0.f);
}

} // namespace

std::vector<Point> proposeBatch(const SearchSpace& space, const CostModel& model,
                                const Target& target, const std::vector<Point>& seeds,
                                const std::set<std::string>& measured, const SearchOptions& options,
                                std::mt19937& rng) {
  std::vector<Point> batch;
  std::set<std::string> taken = measured;
  auto take = [&](const Point& p) {
    if (taken.insert(p.text).second) batch.push_back(p);
  };
  int exploit = model.trained()
                    ? static_cast<int>(std::lround(options.batchSize * (1.0 - options.epsilon)))
                    : 0;
  if (exploit > 0) {
    // Candidate pool: every point of a small space, else the points the chains visit.
    std::vector<Point> pool;
    if (auto all = space.enumerate(4000)) {
      pool = std::move(*all);
    } else {
      std::vector<Point> current;
      for (const Point& s : seeds) {
        if (static_cast<int>(current.size()) >= options.chains / 2) break;
        current.push_back(s);
      }
      while (static_cast<int>(current.size()) < options.chains)
        if (auto p = space.sample(rng))
          current.push_back(*p);
        else
          break;
      std::vector<float> cur = score(model, space, target, current);
      pool = current;
      // Temperature relative to the spread of the scores, cooling geometrically.
      float lo = *std::min_element(cur.begin(), cur.end()),
            hi = *std::max_element(cur.begin(), cur.end());
      double t0 = std::max(1e-3, static_cast<double>(hi - lo));
      for (int step = 0; step < options.steps; ++step) {
        double temperature = t0 * std::pow(0.05, static_cast<double>(step) / options.steps);
        std::vector<Point> next;
        std::vector<size_t> which;
        for (size_t c = 0; c < current.size(); ++c)
          if (auto p = space.mutate(current[c], rng)) {
            next.push_back(*p);
            which.push_back(c);
          }
        std::vector<float> ns = score(model, space, target, next);
        for (size_t i = 0; i < next.size(); ++i) {
          size_t c = which[i];
          double delta = ns[i] - cur[c];
          if (delta >= 0 ||
              std::uniform_real_distribution<double>(0, 1)(rng) < std::exp(delta / temperature)) {
            current[c] = next[i];
            cur[c] = ns[i];
          }
          pool.push_back(next[i]);
        }
      }
    }
    // Best predicted first, skipping measured configs; at most a quarter of the batch shares
    // one register tile (the first two knobs), for diversity.
    std::vector<float> s = score(model, space, target, pool);
    std::vector<size_t> order(pool.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return s[a] > s[b]; });
    std::map<std::pair<int, int>, int> perTile;
    int cap = std::max(2, options.batchSize / 4);
    for (size_t i : order) {
      if (static_cast<int>(batch.size()) >= exploit) break;
      const Point& p = pool[i];
      auto tile = std::make_pair(p.indices.empty() ? 0 : p.indices[0],
                                 p.indices.size() > 1 ? p.indices[1] : 0);
      if (taken.count(p.text) || perTile[tile] >= cap) continue;
      ++perTile[tile];
      take(p);
    }
  }
  // Exploration (and everything while the model is untrained): uniform random valid points.
  for (int tries = 0;
       static_cast<int>(batch.size()) < options.batchSize && tries < 50 * options.batchSize;
       ++tries)
    if (auto p = space.sample(rng)) take(*p);
  return batch;
}

} // namespace tunec::tuner
