// Proposing the next batch of a task: simulated annealing (several chains) over the cost model's
// predictions, then the best predicted candidates with diversity, plus a fraction of random
// exploration (epsilon-greedy). Configs already measured are never proposed again.
#pragma once

#include "tuner/cost_model.h"
#include "tuner/search_space.h"

#include <random>
#include <set>
#include <vector>

namespace tunec::tuner {

struct SearchOptions {
  int batchSize = 16;
  double epsilon = 0.2; ///< fraction of the batch drawn at random
  int chains = 8;
  int steps = 60;
};

/// `seeds`: measured points of this task, fastest first (chains start there). `measured`: texts
/// of every config measured (any status). An untrained model gives random candidates.
std::vector<Point> proposeBatch(const SearchSpace& space, const CostModel& model,
                                const Target& target, const std::vector<Point>& seeds,
                                const std::set<std::string>& measured, const SearchOptions& options,
                                std::mt19937& rng);

} // namespace tunec::tuner
