// The tuner's parts: search space, features, cost model, scheduler, the measurer's isolation
// (a crashing and a hanging candidate, injected), and a resumable job against a real database.
#include "../codegen/test_support.h" // test::hostRunsBf16
#include "codegen/jit.h"
#include "support/host.h"
#include "support/timing.h"
#include "templates/conv2d_template.h"
#include "templates/depthwise_template.h"
#include "templates/matmul_template.h"
#include "tuner/candidate_runner.h"
#include "tuner/cost_model.h"
#include "tuner/features.h"
#include "tuner/measurer.h"
#include "tuner/search.h"
#include "tuner/search_space.h"
#include "tuner/task_scheduler.h"
#include "tuner/tuning_job.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <gtest/gtest.h>
#include <unistd.h>

namespace tunec::tuner {
namespace {

Task matmulTask(int64_t m, int64_t n, int64_t k, int threads = 1) {
  MatmulWorkload w;
  w.m = m, w.n = n, w.k = k, w.threads = threads;
  auto t = makeTask(w.toJson(), hostTarget());
  EXPECT_TRUE(t.isOk()) << t.error().message();
  return *t;
}

Task convTask() {
  Conv2dWorkload w;
  w.ic = 16, w.h = 14, w.w = 14, w.oc = 32, w.kh = 3, w.kw = 3, w.padTop = w.padLeft = 1;
  w.padBottom = w.padRight = 1;
  auto t = makeTask(w.toJson(), hostTarget());
  EXPECT_TRUE(t.isOk()) << t.error().message();
  return *t;
}

TEST(SearchSpace, SamplesAndNeighboursAreValidConfigs) {
  for (const Task& task : {matmulTask(100, 70, 50, 2), convTask()}) {
    SearchSpace space(task);
    std::mt19937 rng(3);
    std::set<std::string> seen;
    for (int i = 0; i < 50; ++i) {
      auto p = space.sample(rng);
      ASSERT_TRUE(p.has_value()) << task.label;
      EXPECT_TRUE(validateConfig(task.workload, p->config).isOk()) << p->text;
      seen.insert(p->text);
      auto q = space.mutate(*p, rng);
      if (!q) continue;
      EXPECT_TRUE(validateConfig(task.workload, q->config).isOk()) << q->text;
      int changed = 0;
      for (size_t k = 0; k < p->indices.size(); ++k) changed += p->indices[k] != q->indices[k];
      EXPECT_EQ(changed, 1) << "a neighbour differs in one knob";
    }
    EXPECT_GT(seen.size(), 20u) << "samples are spread over the space";
    // A recorded config maps back to a point near it (blocks are clamped to the problem, so
    // several knob values can give one config).
    auto p = space.sample(rng);
    auto back = space.fromConfig(p->config);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->text, p->text);
    EXPECT_TRUE(space.at(back->indices).has_value());
  }
}

TEST(SearchSpace, EnumeratesSmallSpacesCompletely) {
  DepthwiseWorkload w;
  w.c = 32, w.h = 8, w.w = 8;
  w.padTop = w.padLeft = w.padBottom = w.padRight = 1;
  auto task = makeTask(w.toJson(), hostTarget());
  ASSERT_TRUE(task.isOk());
  SearchSpace space(*task);
  auto all = space.enumerate(1e4);
  ASSERT_TRUE(all.has_value());
  EXPECT_GT(all->size(), 4u);
  std::set<std::string> texts;
  for (const Point& p : *all) texts.insert(p.text);
  EXPECT_EQ(texts.size(), all->size()) << "no duplicates";
  EXPECT_FALSE(SearchSpace(matmulTask(512, 512, 512)).enumerate(100).has_value());
}

TEST(Features, FixedLengthDeterministicAndInformative) {
  Task task = matmulTask(256, 256, 256);
  SearchSpace space(task);
  std::mt19937 rng(5);
  auto p = space.sample(rng), q = space.sample(rng);
  auto f1 = extractFeatures(task.workload, p->config, hostTarget());
  auto f2 = extractFeatures(task.workload, p->config, hostTarget());
  auto f3 = extractFeatures(task.workload, q->config, hostTarget());
  ASSERT_TRUE(f1 && f2 && f3);
  EXPECT_EQ(*f1, *f2);
  if (p->text != q->text) {
    EXPECT_NE(*f1, *f3);
  }
  for (float v : *f1) EXPECT_TRUE(std::isfinite(v));
  // A matmul config for a conv2d workload has no features: an error, not a guess.
  auto bad = extractFeatures(convTask().workload, p->config, hostTarget());
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.error().message(), "features: a matmul config for a conv2d workload");
  // The element types and the AMX core are features of their own: the same knobs of an f32, a
  // bf16 and an int8 GEMM, on vectors or tiles, are four points for the model, not one.
  const auto& names = featureNames(TemplateKind::Matmul);
  EXPECT_STREQ(names[33], "int8 (u8 x s8 quads)");
  EXPECT_STREQ(names[34], "AMX tiles");
  MatmulWorkload w;
  w.m = w.n = w.k = 256, w.constantB = true;
  MatmulConfig c = defaultMatmulConfig(w, Isa::Avx2, hostTarget());
  std::vector<Features> seen;
  for (KernelTypes types :
       {KernelTypes{}, KernelTypes{DType::F32, DType::BF16, DType::F32, DType::F32},
        KernelTypes{DType::U8, DType::I8, DType::I32, DType::F32}}) {
    w.types = types;
    auto f = extractFeatures(w, c, hostTarget());
    ASSERT_TRUE(f.isOk());
    EXPECT_EQ((*f)[32], isBf16Gemm(types) ? 1.f : 0.f);
    EXPECT_EQ((*f)[33], isInt8Gemm(types) ? 1.f : 0.f);
    EXPECT_EQ((*f)[34], 0.f);
    seen.push_back(*f);
  }
  c.isa = Isa::Amx;
  auto amx = extractFeatures(w, c, hostTarget());
  ASSERT_TRUE(amx.isOk());
  EXPECT_EQ((*amx)[34], 1.f);
  EXPECT_NE(seen[0], seen[1]);
  EXPECT_NE(seen[1], seen[2]);
}

TEST(CostModel, LearnsARankingAndTransfersAcrossGroups) {
  // Synthetic throughput: a smooth function of three features, as groups of 40 configs each.
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(0, 4);
  auto truth = [](const Features& f) {
    return std::exp(-(f[0] - 2) * (f[0] - 2)) + 0.5 * f[1] - 0.2 * f[2] * f[2];
  };
  std::vector<TrainingRow> rows;
  for (uint32_t g = 0; g < 6; ++g) {
    std::vector<Features> fs(40);
    double best = -1e9;
    for (Features& f : fs) {
      f = Features{};
      f[0] = u(rng), f[1] = u(rng), f[2] = u(rng);
      best = std::max(best, truth(f));
    }
    for (const Features& f : fs) rows.push_back({f, static_cast<float>(truth(f) - best + 10), g});
  }
  CostModel model;
  ASSERT_TRUE(model.train(rows).isOk());
  ASSERT_TRUE(model.trained());
  std::vector<Features> heldOut(200);
  std::vector<double> want;
  for (Features& f : heldOut) {
    f = Features{};
    f[0] = u(rng), f[1] = u(rng), f[2] = u(rng);
    want.push_back(truth(f));
  }
  auto scores = model.predict(heldOut);
  ASSERT_TRUE(scores.isOk());
  std::vector<double> got(scores->begin(), scores->end());
  EXPECT_GT(tuner::spearman(got, want), 0.8);
  std::string path = std::filesystem::temp_directory_path() /
                     ("tunec_model_" + std::to_string(getpid()) + ".json");
  ASSERT_TRUE(model.save(path).isOk());
  CostModel loaded;
  ASSERT_TRUE(loaded.load(path).isOk());
  auto again = loaded.predict(heldOut);
  ASSERT_TRUE(again.isOk());
  EXPECT_EQ(*again, *scores);
  std::filesystem::remove(path);
}

TEST(Search, ProposesUnmeasuredDistinctValidConfigs) {
  Task task = matmulTask(128, 128, 128);
  SearchSpace space(task);
  std::mt19937 rng(1);
  std::set<std::string> measured;
  std::vector<TrainingRow> rows;
  for (int i = 0; i < 30; ++i) {
    auto p = space.sample(rng);
    measured.insert(p->text);
    auto f = extractFeatures(task.workload, p->config, hostTarget());
    rows.push_back({*f, static_cast<float>(p->indices[0]) / 16.f, 0});
  }
  CostModel model;
  ASSERT_TRUE(model.train(rows).isOk());
  SearchOptions options;
  options.batchSize = 12;
  // A batch is proposed on typed workloads and configs: thousands of candidates sampled,
  // mutated and scored (their features extracted), and not one JSON parse.
  uint64_t parsesBefore = templateJsonParses();
  auto batch = proposeBatch(space, model, hostTarget(), {}, measured, options, rng);
  EXPECT_EQ(templateJsonParses(), parsesBefore);
  EXPECT_EQ(batch.size(), 12u);
  std::set<std::string> texts;
  for (const Point& p : batch) {
    EXPECT_FALSE(measured.count(p.text)) << "never re-measures";
    EXPECT_TRUE(validateConfig(task.workload, p.config).isOk());
    texts.insert(p.text);
  }
  EXPECT_EQ(texts.size(), batch.size());
}

TEST(TaskScheduler, WarmsUpHeaviestFirstThenFollowsTheGain) {
  std::vector<TaskProgress> t(3);
  t[0].weight = 1, t[0].bestSeconds = 1e-3;
  t[1].weight = 5, t[1].bestSeconds = 1e-3;
  t[2].weight = 1, t[2].bestSeconds = 1e-4;
  EXPECT_EQ(pickNextTask(t), 1);
  for (auto& x : t) {
    x.bestHistory = {x.bestSeconds};
    x.trials = 16;
  }
  // Task 0 keeps improving fast; the others do not.
  t[0].bestHistory = {2e-3, 1.5e-3, 1e-3};
  t[0].trials = 48;
  EXPECT_EQ(pickNextTask(t), 0);
  t[0].finished = t[1].finished = t[2].finished = true;
  EXPECT_EQ(pickNextTask(t), -1);
  EXPECT_NEAR(estimatedLatency(t), 1e-3 + 5e-3 + 1e-4, 1e-12);
}

std::vector<std::string> worker() {
  return {TUNEC_BINARY, "tune-worker"};
}

// A candidate timed during a burst (most runs slow) is timed again and keeps the calm median;
// a steady one is timed once.
TEST(Measurer, ADisturbedTimingIsRepeatedOnce) {
  auto busyFor = [](double seconds) {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
    }
  };
  int calls = 0;
  // Calls 1-21 (the warm-up and the first 20 timed runs): three of every four take 4 ms.
  Timing t = timeSteady(
      [&] {
        ++calls;
        busyFor(calls <= 21 && calls % 4 != 0 ? 4e-3 : 4e-4);
      },
      0.0, 20);
  EXPECT_EQ(calls, 42);
  EXPECT_LT(t.medianSeconds, 2e-3);
  calls = 0;
  Timing steady = timeSteady(
      [&] {
        ++calls;
        busyFor(1e-3);
      },
      0.0, 20);
  EXPECT_GE(steady.medianSeconds, 1e-3);
  EXPECT_EQ(calls, 21);
}

TEST(Measurer, CrashAndHangAreRecordedAndTheWorkerRestarts) {
  setenv("TUNEC_TUNER_INJECT", "1", 1);
  Task task = matmulTask(64, 64, 64);
  Measurer m(worker(), 3.0);
  MeasureRequest ok{task.workloadJson, toJson(task.defaultConfig), 0.01, 2, false};
  MeasureResult r = m.measure(ok);
  EXPECT_EQ(r.status, db::MeasureStatus::Ok) << r.error;
  EXPECT_GT(r.medianUs, 0);
  nlohmann::json crash = toJson(task.defaultConfig);
  crash["inject"] = "crash";
  r = m.measure({task.workloadJson, crash, 0.01, 2, false});
  EXPECT_EQ(r.status, db::MeasureStatus::Error);
  EXPECT_NE(r.error.find("crashed"), std::string::npos) << r.error;
  nlohmann::json hang = toJson(task.defaultConfig);
  hang["inject"] = "hang";
  r = m.measure({task.workloadJson, hang, 0.01, 2, false});
  EXPECT_EQ(r.status, db::MeasureStatus::Timeout) << r.error;
  r = m.measure(ok);
  EXPECT_EQ(r.status, db::MeasureStatus::Ok) << "the worker was restarted: " << r.error;
  // An invalid config is an error result, not a crash.
  nlohmann::json bad = toJson(task.defaultConfig);
  bad["mr"] = 999;
  r = m.measure({task.workloadJson, bad, 0.01, 2, false});
  EXPECT_EQ(r.status, db::MeasureStatus::Error);
  unsetenv("TUNEC_TUNER_INJECT");
}

TEST(Measurer, StridedAttentionWorkloadsAreCheckedAgainstTheReference) {
  // Q K^T of 4 heads read in place from [tokens, heads*dim] tensors, as a compiled model
  // extracts it: the worker gathers dense copies for the reference and checks the gaps.
  MatmulWorkload w;
  w.batch = 4, w.m = 24, w.n = 24, w.k = 16, w.transB = true, w.constantB = false;
  w.broadcastB = false, w.lda = 64, w.strideA = 16, w.ldb = 64, w.strideB = 16;
  w.ldc = 100, w.strideC = 24; // heads side by side in C, with a gap of 4 columns per row
  auto task = makeTask(w.toJson(), hostTarget());
  ASSERT_TRUE(task.isOk()) << task.error().message();
  Measurer m(worker(), 10.0);
  MeasureResult r = m.measure({task->workloadJson, toJson(task->defaultConfig), 0.01, 2, false});
  EXPECT_EQ(r.status, db::MeasureStatus::Ok) << r.error;
  EXPECT_GT(r.medianUs, 0);
}

// Merged sibling projections (split_n: BERT's Q, K and V as one matmul writing three dense
// parts), in fp32 and in bf16 (--precision bf16): measured and checked, not a crashed worker
// (the C buffer is the parts, m x n, not m rows of split_n).
TEST(Measurer, SplitOutputWorkloadsAreMeasured) {
  MatmulWorkload w;
  w.m = 24, w.k = 32, w.splitN = 32, w.n = 96;
  w.coldWeights = true;
  std::vector<KernelTypes> types = {{}};
  if (test::hostRunsBf16()) // (the measurer runs the real vdpbf16ps)
    types.push_back({DType::F32, DType::BF16, DType::F32, DType::F32});
  Measurer m(worker(), 10.0);
  for (const KernelTypes& t : types) {
    w.types = t;
    auto task = makeTask(w.toJson(), hostTarget());
    ASSERT_TRUE(task.isOk()) << task.error().message();
    MeasureResult r = m.measure({task->workloadJson, toJson(task->defaultConfig), 0.01, 2, false});
    EXPECT_EQ(r.status, db::MeasureStatus::Ok) << task->label << ": " << r.error;
  }
}

// Workloads whose activations are stored as bf16 (--precision bf16 between bf16 kernels: a bf16
// input, a bf16 output, or both), convolutions (padded: the bf16 copy; 1x1: read in place),
// matmuls and depthwise convolutions (f32 arithmetic): measured and their results checked against
// the reference, as a model's tuning draws them (on real vdpbf16ps: the measurer runs what a
// model.so runs).
TEST(Measurer, Bf16ActivationWorkloadsAreMeasuredAndChecked) {
  SKIP_WITHOUT_REAL_BF16("the measurer");
  Conv2dWorkload padded;
  padded.ic = 32, padded.h = 9, padded.w = 8, padded.oc = 48, padded.kh = padded.kw = 3;
  padded.padTop = padded.padLeft = padded.padBottom = padded.padRight = 1;
  Conv2dWorkload pointwise;
  pointwise.ic = 64, pointwise.h = 7, pointwise.w = 7, pointwise.oc = 32;
  MatmulWorkload matmul;
  matmul.m = 24, matmul.k = 64, matmul.n = 48, matmul.coldWeights = true;
  DepthwiseWorkload depthwise; // f32 arithmetic on bf16 activations
  depthwise.c = 40, depthwise.h = 9, depthwise.w = 8, depthwise.kh = depthwise.kw = 3;
  depthwise.padTop = depthwise.padLeft = depthwise.padBottom = depthwise.padRight = 1;
  Measurer m(worker(), 10.0);
  int measured = 0;
  for (auto [src, dst] : {std::pair{DType::BF16, DType::BF16},
                          {DType::F32, DType::BF16},
                          {DType::BF16, DType::F32}}) {
    padded.types = pointwise.types = matmul.types = {src, DType::BF16, DType::F32, dst};
    depthwise.types = {src, DType::F32, DType::F32, dst};
    for (const nlohmann::json& w :
         {padded.toJson(), pointwise.toJson(), matmul.toJson(), depthwise.toJson()}) {
      auto task = makeTask(w, hostTarget());
      ASSERT_TRUE(task.isOk()) << task.error().message();
      MeasureResult r =
          m.measure({task->workloadJson, toJson(task->defaultConfig), 0.01, 2, false});
      EXPECT_EQ(r.status, db::MeasureStatus::Ok) << task->label << ": " << r.error;
      measured += r.status == db::MeasureStatus::Ok;
    }
  }
  EXPECT_EQ(measured, 12);
}

// A cold_weights workload is timed with its packed weights evicted before every run: as a
// model with more weights than the L3 runs it, slower than with the same weights warm.
TEST(Measurer, ColdWeightsAreEvictedBeforeEveryTimedRun) {
  MatmulWorkload w;
  w.m = 4, w.n = 1024, w.k = 1024; // 4 MiB of weights read once per run: memory bound when cold
  auto warmTask = makeTask(w.toJson(), hostTarget());
  w.coldWeights = true;
  auto coldTask = makeTask(w.toJson(), hostTarget());
  ASSERT_TRUE(warmTask.isOk() && coldTask.isOk());
  EXPECT_NE(coldTask->label.find(" cold"), std::string::npos) << coldTask->label;
  Measurer m(worker(), 10.0);
  MeasureResult warm =
      m.measure({warmTask->workloadJson, toJson(warmTask->defaultConfig), 0.05, 5, false});
  MeasureResult cold =
      m.measure({coldTask->workloadJson, toJson(coldTask->defaultConfig), 0.05, 5, false});
  ASSERT_EQ(warm.status, db::MeasureStatus::Ok) << warm.error;
  ASSERT_EQ(cold.status, db::MeasureStatus::Ok) << cold.error;
  EXPECT_GT(cold.minUs, warm.minUs);
}

// A short job's options: `trials` in batches of 5, short timings, no progress lines.
TuneOptions shortJob(int trials) {
  TuneOptions options;
  options.target = hostTarget();
  options.trials = trials;
  options.search.batchSize = 5;
  options.minSeconds = 0.005;
  options.workerArgv = worker();
  options.progress = false;
  return options;
}

// A database path of this process, with no file left from an earlier process of the same pid:
// a stale -wal beside a fresh database would be replayed into it (records no job made).
std::string freshDatabasePath(const std::string& name) {
  std::string path = std::filesystem::temp_directory_path() /
                     ("tunec_" + name + "_" + std::to_string(getpid()) + ".db");
  for (const char* suffix : {"", "-wal", "-shm", "-journal"})
    std::filesystem::remove(path + suffix);
  return path;
}

/// Removes a test database with its -wal and -shm files.
void removeDatabase(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"})
    std::filesystem::remove(path + suffix);
}

// A worker that answers every request with a time no CPU reaches (0.001 us for a 48x64x32
// matmul: 196,608 GFLOP/s): each trial is recorded as a failed measurement naming the rate,
// never as the best record that `db verify` would then reject.
TEST(TuningJob, AnImplausibleTimeIsRecordedAsAFailedMeasurement) {
  std::string path = freshDatabasePath("implausible");
  auto database = db::TuningDatabase::open(path, true);
  ASSERT_TRUE(database.isOk()) << database.error().message();
  TuneOptions options = shortJob(3);
  options.workerArgv = {"/bin/sh", "-c",
                        "while read line; do echo '{\"status\": \"ok\", \"error\": \"\", "
                        "\"median_us\": 0.001, \"min_us\": 0.001, \"repeats\": 3, "
                        "\"compile_seconds\": 0}'; done"};
  std::atomic<bool> stop{false};
  const Task task = matmulTask(48, 64, 32);
  auto job = runTuningJob({task}, *database, options, stop);
  ASSERT_TRUE(job.isOk()) << job.error().message();
  EXPECT_EQ(job->errors, job->trials);
  auto records = database->recordsOf(task.key);
  ASSERT_TRUE(records.isOk());
  ASSERT_FALSE(records->empty());
  for (const auto& r : *records) {
    EXPECT_EQ(r.status, db::MeasureStatus::Error);
    EXPECT_NE(r.error.find("implausible time"), std::string::npos) << r.error;
  }
  removeDatabase(path);
}

TEST(TuningJob, CommitsEveryTrialAndResumesWithoutRemeasuring) {
  std::string path = freshDatabasePath("job");
  auto database = db::TuningDatabase::open(path, true);
  ASSERT_TRUE(database.isOk()) << database.error().message();
  TuneOptions options = shortJob(10);
  std::atomic<bool> stop{false};
  std::vector<Task> tasks = {matmulTask(48, 64, 32), convTask()};
  auto first = runTuningJob(tasks, *database, options, stop);
  ASSERT_TRUE(first.isOk()) << first.error().message();
  EXPECT_EQ(first->trials, 10);
  EXPECT_EQ(first->errors, 0);
  for (const TaskOutcome& t : first->tasks) EXPECT_GT(t.bestGflops, 0) << t.label;
  auto second = runTuningJob(tasks, *database, options, stop);
  ASSERT_TRUE(second.isOk()) << second.error().message();
  // Every record is distinct: the resumed job measured only new configs.
  for (const Task& t : tasks) {
    auto records = database->recordsOf(t.key);
    ASSERT_TRUE(records.isOk());
    std::set<std::string> configs;
    for (const auto& r : *records) configs.insert(r.config.dump());
    EXPECT_EQ(configs.size(), records->size()) << t.label;
  }
  auto stats = database->stats();
  ASSERT_TRUE(stats.isOk());
  EXPECT_EQ(stats->records, 20);
  removeDatabase(path);
}

// A config that timed out in an earlier job (here: the default, on a busy machine) is measured
// again, and its result replaces the timeout record.
TEST(TuningJob, ATimedOutConfigIsRetriedByTheNextJob) {
  std::string path = freshDatabasePath("retry");
  auto database = db::TuningDatabase::open(path, true);
  ASSERT_TRUE(database.isOk()) << database.error().message();
  TuneOptions options = shortJob(1);
  Task task = matmulTask(48, 64, 32);
  db::Record timeout;
  timeout.workload = task.workloadJson;
  timeout.config = toJson(task.defaultConfig);
  timeout.target = db::TargetInfo::fromTarget(options.target);
  timeout.templateVersion = task.templateVersion;
  timeout.status = db::MeasureStatus::Timeout;
  timeout.error = "no result within 30 s";
  timeout.tunecVersion = "0.1.0";
  timeout.host = "test";
  timeout.createdAt = "2026-12-01T00:00:00Z";
  ASSERT_TRUE(database->insert({timeout}).isOk());
  std::atomic<bool> stop{false};
  auto job = runTuningJob({task}, *database, options, stop);
  ASSERT_TRUE(job.isOk()) << job.error().message();
  EXPECT_EQ(job->trials, 1);
  auto records = database->recordsOf(task.key);
  ASSERT_TRUE(records.isOk());
  ASSERT_EQ(records->size(), 1u);
  EXPECT_EQ(records->front().status, db::MeasureStatus::Ok);
  EXPECT_EQ(records->front().config, toJson(task.defaultConfig));
  // A later timeout of the same config does not replace the result.
  ASSERT_TRUE(database->insert({timeout}).isOk());
  records = database->recordsOf(task.key);
  ASSERT_TRUE(records.isOk());
  EXPECT_EQ(records->front().status, db::MeasureStatus::Ok);
  removeDatabase(path);
}

TEST(TuningJob, ATightBudgetMeasuresEveryTask) {
  // 6 trials, batches of 5, three tasks: the warm-up batches leave each task its share.
  std::string path = freshDatabasePath("tight");
  auto database = db::TuningDatabase::open(path, true);
  ASSERT_TRUE(database.isOk()) << database.error().message();
  TuneOptions options = shortJob(6);
  std::atomic<bool> stop{false};
  std::vector<Task> tasks = {matmulTask(48, 64, 32), matmulTask(16, 32, 16), convTask()};
  auto job = runTuningJob(tasks, *database, options, stop);
  ASSERT_TRUE(job.isOk()) << job.error().message();
  EXPECT_EQ(job->trials, 6);
  for (const TaskOutcome& t : job->tasks) EXPECT_EQ(t.trials, 2) << t.label;
  removeDatabase(path);
}

} // namespace
} // namespace tunec::tuner

namespace tunec::tuner {
namespace {

// The candidate runner measures the conv2d workloads of channel views and of an NCHW input:
// each default config is checked against the reference (a strided output's gaps must stay
// unwritten) before it is timed, so Ok means it computed the right result.
TEST(CandidateRunner, MeasuresStridedAndNchwConvWorkloads) {
  auto jit = Jit::create(hostTarget());
  ASSERT_TRUE(jit.isOk()) << jit.error().message();
  CandidateRunner runner(**jit);
  std::vector<Conv2dWorkload> workloads(3);
  for (Conv2dWorkload& w : workloads) w.ic = 12, w.h = 7, w.w = 9, w.oc = 20;
  workloads[0].inLd = 29;
  workloads[1].outLd = 40;
  workloads[2].kh = workloads[2].kw = 3;
  workloads[2].padTop = workloads[2].padLeft = workloads[2].padBottom = workloads[2].padRight = 1;
  workloads[2].nchwInput = true;
  for (const Conv2dWorkload& w : workloads) {
    MeasureRequest request;
    request.workload = w.toJson();
    request.config = defaultConv2dConfig(w, widestIsa(hostTarget()), hostTarget()).toJson();
    request.minSeconds = 0.001;
    request.minRepeats = 1;
    MeasureResult r = runner.measure(request);
    EXPECT_EQ(r.status, db::MeasureStatus::Ok) << r.error << " " << request.workload.dump();
  }
}

// The int8 workloads of a quantized model: convolutions (padded with a nonzero zero point, or
// strided), a depthwise one and a matmul, each with an f32 C and with the u8 C of a requantizing
// epilogue, are measured and checked against the integer reference (Ok means right), on the ISA
// the compiler gives them.
TEST(CandidateRunner, MeasuresInt8WorkloadsWithAnF32OrARequantizedU8Output) {
  auto jit = Jit::create(hostTarget());
  ASSERT_TRUE(jit.isOk()) << jit.error().message();
  CandidateRunner runner(**jit);
  const Target& target = hostTarget();
  auto measure = [&](const Workload& w) {
    MeasureRequest request;
    request.workload = toJson(w);
    const Isa isa = kernelIsa(w, widestIsa(target), target);
    request.config = toJson(defaultConfig(w, isa, target));
    request.minSeconds = 0.001;
    request.minRepeats = 1;
    return runner.measure(request);
  };
  for (DType dst : {DType::F32, DType::U8}) {
    const KernelTypes types{DType::U8, DType::I8, DType::I32, dst};
    Conv2dWorkload padded;
    padded.types = types, padded.ic = 16, padded.h = 7, padded.w = 9, padded.oc = 24;
    padded.kh = padded.kw = 3;
    padded.padTop = padded.padLeft = padded.padBottom = padded.padRight = 1;
    padded.aZeroPoint = 77;
    Conv2dWorkload strided = padded;
    strided.kh = strided.kw = 1, strided.strideH = strided.strideW = 2, strided.aZeroPoint = 0;
    strided.padTop = strided.padLeft = strided.padBottom = strided.padRight = 0;
    MatmulWorkload mm;
    mm.types = types, mm.m = 24, mm.n = 40, mm.k = 64, mm.constantB = true;
    DepthwiseWorkload dw;
    dw.types = types, dw.c = 40, dw.h = 9, dw.w = 11, dw.aZeroPoint = 99;
    dw.padTop = dw.padLeft = dw.padBottom = dw.padRight = 1;
    for (const Workload& w : {Workload{padded}, Workload{strided}, Workload{mm}, Workload{dw}}) {
      MeasureResult r = measure(w);
      EXPECT_EQ(r.status, db::MeasureStatus::Ok) << r.error << " " << toJson(w).dump();
    }
  }
}

} // namespace
} // namespace tunec::tuner
