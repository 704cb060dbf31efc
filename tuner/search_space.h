// The search space of a task, generic over any template's knob space: uniform samples among
// valid configs, a valid neighbour by changing one knob, and enumeration when the space is small.
#pragma once

#include "tuner/task.h"

#include <optional>
#include <random>
#include <string>
#include <vector>

namespace tunec::tuner {

/// A point: one value index per knob, and the legal config it maps to.
struct Point {
  std::vector<int> indices;
  Config config;
  std::string text; ///< the config's JSON text: its identity, as records store it
};

/// The text identity of a config (toJson(config).dump()).
std::string configText(const Config& config);

class SearchSpace {
public:
  explicit SearchSpace(const Task& task) : task_(task) {}
  const Task& task() const { return task_; }
  /// Points in the knob cross product (before validation).
  double size() const;
  /// The point of these indices, if it maps to a valid config.
  std::optional<Point> at(const std::vector<int>& indices) const;
  /// A uniformly drawn valid point (rejection sampling; nullopt after `tries` invalid draws).
  std::optional<Point> sample(std::mt19937& rng, int tries = 200) const;
  /// A valid neighbour: one knob moved to an adjacent value (or, for unordered knobs such as
  /// loop orders, any other value).
  std::optional<Point> mutate(const Point& from, std::mt19937& rng, int tries = 20) const;
  /// Every valid point, when the cross product has at most `limit` points.
  std::optional<std::vector<Point>> enumerate(double limit) const;
  /// The point nearest to a config (each knob's closest value), for records measured before.
  std::optional<Point> fromConfig(const Config& config) const;

private:
  const Task& task_;
};

} // namespace tunec::tuner
