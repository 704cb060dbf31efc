// Cost-model quality (scripts/bench_tuner.py runs it; not a test): trains the XGBoost model on
// the ok records of TRAIN.db, predicts the records of TEST.db that TRAIN.db does not hold, and
// prints the Spearman rank correlation between predicted scores and measured GFLOP/s for each
// workload of TEST.db, as one JSON object.
#include "support/host.h"
#include "tuner/cost_model.h"
#include "tuning_db/database.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

using namespace tunec;

namespace {

std::vector<db::Record> okRecords(db::TuningDatabase& d) {
  std::vector<db::Record> out;
  auto stats = d.stats();
  if (!stats) return out;
  for (const auto& w : stats->perWorkload) {
    auto records = d.recordsOf(w.key);
    if (!records) continue;
    for (const auto& r : *records)
      if (r.status == db::MeasureStatus::Ok) out.push_back(r);
  }
  return out;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: tunec_cost_model_eval TRAIN.db TEST.db\n");
    return 2;
  }
  auto train = db::TuningDatabase::open(argv[1], false);
  auto test = db::TuningDatabase::open(argv[2], false);
  if (!train || !test) {
    std::fprintf(stderr, "cannot open the databases\n");
    return 1;
  }
  const Target& host = hostTarget();
  std::vector<db::Record> trainRecords = okRecords(*train);
  std::set<std::string> seen;
  std::map<std::string, std::vector<db::Record>> byTemplate;
  for (const auto& r : trainRecords) {
    seen.insert(r.workloadKey() + r.config.dump());
    byTemplate[r.templateName()].push_back(r);
  }
  std::map<std::string, std::vector<tuner::TrainingRow>> rowsByTemplate;
  for (const auto& [templ, records] : byTemplate)
    rowsByTemplate[templ] = tuner::trainingRows(records, host);
  std::map<std::string, std::unique_ptr<tuner::CostModel>> models;
  for (auto& [templ, rows] : rowsByTemplate) {
    models[templ] = std::make_unique<tuner::CostModel>();
    if (auto s = models[templ]->train(rows); !s) {
      std::fprintf(stderr, "%s\n", s.error().message().c_str());
      return 1;
    }
  }
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> byWorkload;
  for (const auto& r : okRecords(*test)) {
    if (seen.count(r.workloadKey() + r.config.dump()) || !models.count(r.templateName())) continue;
    auto w = parseWorkload(r.workload); // records from the database: read here
    if (!w) continue;
    auto c = parseConfig(templateKind(*w), r.config);
    if (!c) continue;
    auto f = tuner::extractFeatures(*w, *c, host);
    if (!f) continue;
    auto s = models[r.templateName()]->predict({*f});
    if (!s) continue;
    byWorkload[r.workloadKey()].first.push_back((*s)[0]);
    byWorkload[r.workloadKey()].second.push_back(r.gflops);
  }
  std::printf("{");
  bool first = true;
  for (const auto& [key, v] : byWorkload) {
    if (v.first.size() < 5) continue;
    std::printf("%s\"%s\": {\"spearman\": %.4f, \"configs\": %zu}", first ? "" : ", ", key.c_str(),
                tuner::spearman(v.first, v.second), v.first.size());
    first = false;
  }
  std::printf("}\n");
  return 0;
}
