// XGBoost through its C API.
#include "tuner/cost_model.h"

#include <algorithm>
#include <map>
#include <optional>
#include <xgboost/c_api.h>

namespace tunec::tuner {

namespace {

Error xgbError(const char* what) {
  return makeError("XGBoost ", what, ": ", XGBGetLastError());
}

struct Matrix {
  DMatrixHandle handle = nullptr;
  ~Matrix() {
    if (handle) XGDMatrixFree(handle);
  }
};

} // namespace

std::vector<TrainingRow> trainingRows(const std::vector<db::Record>& records,
                                      const Target& target) {
  std::map<std::string, double> best;
  std::map<std::string, uint32_t> group;
  for (const db::Record& r : records) {
    if (r.status != db::MeasureStatus::Ok) continue;
    std::string key = r.workloadKey();
    best[key] = std::max(best[key], r.gflops);
    group.emplace(key, static_cast<uint32_t>(group.size()));
  }
  // Records are JSON from the database: each workload is read once, each config once.
  std::map<std::string, std::optional<Workload>> workloads;
  std::vector<TrainingRow> rows;
  for (const db::Record& r : records) {
    if (r.status != db::MeasureStatus::Ok) continue;
    std::string key = r.workloadKey();
    auto [it, fresh] = workloads.try_emplace(key);
    if (fresh)
      if (auto w = parseWorkload(r.workload)) it->second = std::move(*w);
    if (!it->second) continue;
    auto config = parseConfig(templateKind(*it->second), r.config);
    if (!config) continue;
    auto f = extractFeatures(*it->second, *config, target);
    if (!f) continue;
    rows.push_back({*f, static_cast<float>(best[key] > 0 ? r.gflops / best[key] : 0), group[key]});
  }
  return rows;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  auto ranks = [](const std::vector<double>& v) {
    std::vector<size_t> idx(v.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::sort(idx.begin(), idx.end(), [&](size_t x, size_t y) { return v[x] < v[y]; });
    std::vector<double> r(v.size());
    for (size_t i = 0; i < idx.size(); ++i) r[idx[i]] = static_cast<double>(i);
    return r;
  };
  auto ra = ranks(a), rb = ranks(b);
  double n = static_cast<double>(a.size()), d2 = 0;
  for (size_t i = 0; i < a.size(); ++i) d2 += (ra[i] - rb[i]) * (ra[i] - rb[i]);
  return 1 - 6 * d2 / (n * (n * n - 1));
}

CostModel::CostModel() = default;

CostModel::~CostModel() {
  if (booster_) XGBoosterFree(booster_);
}

Status CostModel::train(std::vector<TrainingRow> rows, int rounds) {
  if (booster_) {
    XGBoosterFree(booster_);
    booster_ = nullptr;
  }
  if (rows.size() < 4) return {};
  // Rows of a group must be contiguous for XGBoost's ranking objectives.
  std::stable_sort(rows.begin(), rows.end(),
                   [](const TrainingRow& a, const TrainingRow& b) { return a.group < b.group; });
  std::vector<float> data, labels;
  std::vector<unsigned> groups;
  for (size_t i = 0; i < rows.size(); ++i) {
    data.insert(data.end(), rows[i].features.begin(), rows[i].features.end());
    labels.push_back(rows[i].label);
    if (i == 0 || rows[i].group != rows[i - 1].group)
      groups.push_back(1);
    else
      ++groups.back();
  }
  Matrix m;
  if (XGDMatrixCreateFromMat(data.data(), rows.size(), kFeatureLength, -1e30f, &m.handle))
    return xgbError("matrix");
  if (XGDMatrixSetFloatInfo(m.handle, "label", labels.data(), labels.size()))
    return xgbError("labels");
  if (XGDMatrixSetUIntInfo(m.handle, "group", groups.data(), groups.size()))
    return xgbError("groups");
  BoosterHandle booster;
  if (XGBoosterCreate(&m.handle, 1, &booster)) return xgbError("create");
  const std::pair<const char*, const char*> params[] = {{"objective", "rank:pairwise"},
                                                        {"eta", "0.2"},
                                                        {"max_depth", "6"},
                                                        {"min_child_weight", "1"},
                                                        {"subsample", "0.9"},
                                                        {"lambda", "1"},
                                                        {"nthread", "2"},
                                                        {"verbosity", "0"},
                                                        {"seed", "7"}};
  for (auto [k, v] : params)
    if (XGBoosterSetParam(booster, k, v)) {
      XGBoosterFree(booster);
      return xgbError("parameters");
    }
  for (int i = 0; i < rounds; ++i)
    if (XGBoosterUpdateOneIter(booster, i, m.handle)) {
      XGBoosterFree(booster);
      return xgbError("training");
    }
  booster_ = booster;
  return {};
}

Expected<std::vector<float>> CostModel::predict(const std::vector<Features>& rows) const {
  std::vector<float> out(rows.size(), 0.f);
  if (!booster_ || rows.empty()) return out;
  std::vector<float> data;
  for (const Features& f : rows) data.insert(data.end(), f.begin(), f.end());
  Matrix m;
  if (XGDMatrixCreateFromMat(data.data(), rows.size(), kFeatureLength, -1e30f, &m.handle))
    return xgbError("matrix");
  bst_ulong length = 0;
  const float* result = nullptr;
  if (XGBoosterPredict(booster_, m.handle, 0, 0, 0, &length, &result)) return xgbError("predict");
  if (length != rows.size())
    return makeError("XGBoost predicted ", length, " rows of ", rows.size());
  std::copy(result, result + length, out.begin());
  return out;
}

Status CostModel::save(const std::string& path) const {
  if (!booster_) return makeError("the cost model is not trained");
  if (XGBoosterSaveModel(booster_, path.c_str())) return xgbError("save");
  return {};
}

Status CostModel::load(const std::string& path) {
  BoosterHandle booster;
  if (XGBoosterCreate(nullptr, 0, &booster)) return xgbError("create");
  if (XGBoosterLoadModel(booster, path.c_str())) {
    XGBoosterFree(booster);
    return xgbError("load").withContext(path);
  }
  if (booster_) XGBoosterFree(booster_);
  booster_ = booster;
  return {};
}

} // namespace tunec::tuner
