// Tuning-database benchmark (not a test): 1,000,000 records over 10,000 workloads; median
// best-record lookup; export and import of 100,000 JSONL records. Prints one JSON object.
// usage: tunec_db_bench DIR
#include "support/host.h"
#include "tuning_db/database.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>

using namespace tunec::db;
using Clock = std::chrono::steady_clock;

static double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: tunec_db_bench DIR\n");
    return 2;
  }
  std::string dir = argv[1];
  std::string path = dir + "/bench.db", path2 = dir + "/bench_import.db";
  for (const auto& p : {path, path2})
    for (const char* s : {"", "-wal", "-shm"}) std::remove((p + s).c_str());
  auto db = TuningDatabase::open(path);
  if (!db) {
    std::fprintf(stderr, "%s\n", db.error().message().c_str());
    return 1;
  }
  TargetInfo target = TargetInfo::fromTarget(tunec::hostTarget());
  const int workloads = 10000, perWorkload = 100;
  std::mt19937 rng(1);
  auto t0 = Clock::now();
  for (int w0 = 0; w0 < workloads; w0 += 100) {
    std::vector<Record> batch;
    for (int w = w0; w < w0 + 100; ++w)
      for (int i = 0; i < perWorkload; ++i) {
        Record r;
        r.workload = {{"template", "matmul"}, {"m", 1 + w}, {"n", 64}, {"k", 64}};
        r.config = {{"mr", 1 + i % 14}, {"nr", 16 * (1 + i / 14 % 4)}, {"kc", 64 * (1 + i / 56)}};
        r.target = target;
        r.templateVersion = 1;
        r.medianUs = 1 + (rng() % 100000) / 100.0;
        r.minUs = r.medianUs;
        r.gflops = 1000 / r.medianUs;
        r.repeats = 5;
        r.tunecVersion = "0.1.0";
        r.host = "bench";
        r.createdAt = "2026-11-30T00:00:00Z";
        batch.push_back(std::move(r));
      }
    if (!db->insert(batch)) return 1;
  }
  double insertSeconds = since(t0);
  std::vector<std::string> keys;
  for (int w = 0; w < workloads; ++w)
    keys.push_back(workloadKey({{"template", "matmul"}, {"m", 1 + w}, {"n", 64}, {"k", 64}}));
  std::vector<double> lookups;
  for (int i = 0; i < 2000; ++i) {
    const std::string& key = keys[rng() % keys.size()];
    auto t = Clock::now();
    auto best = db->best(key, target, 1);
    lookups.push_back(since(t));
    if (!best || !best->has_value()) return 1;
  }
  std::sort(lookups.begin(), lookups.end());
  // Export 100,000 records (1,000 workloads' worth) and import them into a fresh database.
  std::stringstream all;
  t0 = Clock::now();
  if (!db->exportJsonl(all, "", false)) return 1;
  double exportSeconds = since(t0);
  std::stringstream subset;
  std::string line;
  for (int i = 0; i < 100000 && std::getline(all, line); ++i) subset << line << '\n';
  auto fresh = TuningDatabase::open(path2);
  t0 = Clock::now();
  auto report = fresh->importJsonl(subset, nullptr);
  double importSeconds = since(t0);
  if (!report || report->imported != 100000) return 1;
  std::printf("{\"records\": %d, \"workloads\": %d, \"insert_s\": %.2f, \"lookup_median_us\": "
              "%.1f, \"lookup_p99_us\": %.1f, "
              "\"export_1m_s\": %.2f, \"import_100k_s\": %.2f}\n",
              workloads * perWorkload, workloads, insertSeconds, lookups[lookups.size() / 2] * 1e6,
              lookups[lookups.size() * 99 / 100] * 1e6, exportSeconds, importSeconds);
  return 0;
}
