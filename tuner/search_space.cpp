// Sampling, mutation and enumeration over a knob space.
#include "tuner/search_space.h"

#include <cmath>

namespace tunec::tuner {

std::string configText(const Config& config) {
  return toJson(config).dump();
}

double SearchSpace::size() const {
  return knobSpaceSize(task_.space);
}

std::optional<Point> SearchSpace::at(const std::vector<int>& indices) const {
  std::vector<nlohmann::json> values;
  for (size_t k = 0; k < indices.size(); ++k)
    values.push_back(task_.space[k].values[static_cast<size_t>(indices[k])]);
  auto config = configFromKnobs(task_.workload, task_.isa, task_.space, values);
  if (!config || !validateConfig(task_.workload, *config)) return std::nullopt;
  return Point{indices, *config, configText(*config)};
}

std::optional<Point> SearchSpace::sample(std::mt19937& rng, int tries) const {
  for (int t = 0; t < tries; ++t) {
    std::vector<int> indices;
    for (const Knob& k : task_.space)
      indices.push_back(
          std::uniform_int_distribution<int>(0, static_cast<int>(k.values.size()) - 1)(rng));
    if (auto p = at(indices)) return p;
  }
  return std::nullopt;
}

std::optional<Point> SearchSpace::mutate(const Point& from, std::mt19937& rng, int tries) const {
  for (int t = 0; t < tries; ++t) {
    std::vector<int> indices = from.indices;
    auto k = static_cast<size_t>(
        std::uniform_int_distribution<int>(0, static_cast<int>(task_.space.size()) - 1)(rng));
    int n = static_cast<int>(task_.space[k].values.size());
    if (n < 2) continue;
    bool ordered = task_.space[k].values.front().is_number();
    if (ordered) {
      int step = std::uniform_int_distribution<int>(0, 1)(rng) ? 1 : -1;
      indices[k] = std::clamp(indices[k] + step, 0, n - 1);
      if (indices[k] == from.indices[k]) indices[k] = std::clamp(from.indices[k] - step, 0, n - 1);
    } else {
      indices[k] = (indices[k] + std::uniform_int_distribution<int>(1, n - 1)(rng)) % n;
    }
    if (indices == from.indices) continue;
    if (auto p = at(indices)) return p;
  }
  return std::nullopt;
}

std::optional<std::vector<Point>> SearchSpace::enumerate(double limit) const {
  if (size() > limit) return std::nullopt;
  std::vector<Point> out;
  std::vector<int> indices(task_.space.size(), 0);
  while (true) {
    if (auto p = at(indices)) out.push_back(std::move(*p));
    size_t k = 0;
    while (k < indices.size() && ++indices[k] == static_cast<int>(task_.space[k].values.size())) {
      indices[k] = 0;
      ++k;
    }
    if (k == indices.size()) break;
  }
  return out;
}

std::optional<Point> SearchSpace::fromConfig(const Config& typed) const {
  nlohmann::json config = toJson(typed);
  std::vector<int> indices;
  for (const Knob& k : task_.space) {
    if (!config.contains(k.name)) return std::nullopt;
    const nlohmann::json& v = config.at(k.name);
    int best = -1;
    double bestDistance = 1e300;
    for (size_t i = 0; i < k.values.size(); ++i) {
      double d;
      if (v.is_number() && k.values[i].is_number())
        d = std::fabs(std::log2(std::max(v.get<double>(), 1e-9)) -
                      std::log2(std::max(k.values[i].get<double>(), 1e-9)));
      else
        d = v == k.values[i] ? 0.0 : 1e100;
      if (d < bestDistance) {
        bestDistance = d;
        best = static_cast<int>(i);
      }
    }
    if (best < 0 || bestDistance >= 1e100) return std::nullopt;
    indices.push_back(best);
  }
  return Point{indices, typed, config.dump()};
}

} // namespace tunec::tuner
