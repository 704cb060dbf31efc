// The cost model: gradient-boosted trees (XGBoost, C API) with a ranking objective
// (rank:pairwise) on throughput normalized per task, one query group per workload, so that the
// model learns which configs are faster than others of the same workload and transfers across
// workloads, shapes and models (DESIGN.md, decision 10).
#pragma once

#include "tuner/features.h"
#include "tuning_db/database.h"

#include <memory>
#include <vector>

namespace tunec::tuner {

struct TrainingRow {
  Features features;
  float label = 0;    ///< throughput / the best throughput of the same workload, in [0, 1]
  uint32_t group = 0; ///< rows of one workload share a group
};

/// Training rows from records of one template: ok records only, labels normalized by the best
/// throughput of their workload, one group per workload.
std::vector<TrainingRow> trainingRows(const std::vector<db::Record>& records, const Target& target);

/// Spearman rank correlation of two equally long series (no tie correction).
double spearman(const std::vector<double>& a, const std::vector<double>& b);

class CostModel {
public:
  CostModel();
  ~CostModel();
  CostModel(const CostModel&) = delete;
  CostModel& operator=(const CostModel&) = delete;

  /// Trains a fresh model on the rows (grouped by `group`); needs rows of at least two distinct
  /// labels to be useful, else the model stays untrained.
  Status train(std::vector<TrainingRow> rows, int rounds = 60);
  bool trained() const { return booster_ != nullptr; }
  /// Higher is predicted faster (scores rank configs of one workload; they are not times).
  Expected<std::vector<float>> predict(const std::vector<Features>& rows) const;
  /// Saves or loads the booster (XGBoost's JSON model format).
  Status save(const std::string& path) const;
  Status load(const std::string& path);

private:
  void* booster_ = nullptr;
};

} // namespace tunec::tuner
