// The tuning loop: pick a task, propose a batch, measure it in the worker, commit, retrain.
#include "tuner/tuning_job.h"

#include "support/timing.h"
#include "tuner/task_scheduler.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>

namespace tunec::tuner {

namespace {

std::string duration(double seconds) {
  char buf[32];
  int s = static_cast<int>(seconds);
  if (s >= 3600)
    std::snprintf(buf, sizeof(buf), "%dh%02dm", s / 3600, s / 60 % 60);
  else
    std::snprintf(buf, sizeof(buf), "%dm%02ds", s / 60, s % 60);
  return buf;
}

struct TaskState {
  Task task;
  std::unique_ptr<SearchSpace> space;
  std::set<std::string> measured;
  std::set<std::string> timedOut;           ///< configs that timed out in an earlier job (retried)
  std::vector<std::pair<double, Point>> ok; ///< (gflops, point), for SA seeds
  double defaultGflops = 0;
  int sinceImprovement = 0;
  int runTrials = 0;
};

} // namespace

Expected<TuneSummary> runTuningJob(std::vector<Task> tasks, db::TuningDatabase& database,
                                   const TuneOptions& options, const std::atomic<bool>& stop) {
  const Target& host = options.target;
  db::TargetInfo target = db::TargetInfo::fromTarget(host);
  std::mt19937 rng(options.seed);
  // States live at stable addresses: each search space refers to its task.
  std::vector<std::unique_ptr<TaskState>> states;
  std::vector<TaskProgress> progress;
  for (Task& t : tasks) {
    auto owned = std::make_unique<TaskState>();
    TaskState& s = *owned;
    s.task = std::move(t);
    s.space = std::make_unique<SearchSpace>(s.task);
    TaskProgress p;
    p.weight = s.task.weight;
    // Resume: what this target already measured for this workload and template version.
    TUNEC_ASSIGN_OR_RETURN(std::vector<db::Record> records, database.recordsOf(s.task.key));
    for (const db::Record& r : records) {
      if (r.target.key() != target.key() || r.templateVersion != s.task.templateVersion) continue;
      // A timeout may have been a busy machine: this job measures it again, with twice the
      // limit, when the search (or the default's turn) proposes it.
      if (r.status == db::MeasureStatus::Timeout) {
        s.timedOut.insert(r.config.dump());
        continue;
      }
      s.measured.insert(r.config.dump());
      if (r.status != db::MeasureStatus::Ok) continue;
      p.bestSeconds = std::min(p.bestSeconds, r.medianUs * 1e-6);
      // The database's JSON, read once here; the search works on typed configs.
      auto config = parseConfig(s.task.kind, r.config);
      if (!config) continue;
      if (auto point = s.space->fromConfig(*config)) s.ok.emplace_back(r.gflops, *point);
      if (*config == s.task.defaultConfig) s.defaultGflops = r.gflops;
    }
    std::sort(s.ok.begin(), s.ok.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    states.push_back(std::move(owned));
    progress.push_back(p);
  }
  std::map<TemplateKind, std::unique_ptr<CostModel>> models;
  auto retrain = [&](TemplateKind kind, int version) -> Status {
    if (options.randomSearch) return {};
    auto& model = models[kind];
    if (!model) model = std::make_unique<CostModel>();
    TUNEC_ASSIGN_OR_RETURN(
        std::vector<db::Record> records,
        database.recordsForTemplate(std::string(templateName(kind)), target, version));
    return model->train(trainingRows(records, host));
  };
  for (const auto& s : states)
    if (!models.count(s->task.kind)) TUNEC_TRY(retrain(s->task.kind, s->task.templateVersion));

  Measurer measurer(options.workerArgv, options.timeoutSeconds);
  TuneSummary summary;
  for (const auto& s : states)
    summary.recordedBefore += static_cast<int>(s->measured.size() + s->timedOut.size());
  // The trials this run may measure.
  const int budget =
      options.countRecorded ? std::max(0, options.trials - summary.recordedBefore) : options.trials;
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  while (summary.trials < budget && !stop.load()) {
    if (options.timeBudgetSeconds > 0 && elapsed() >= options.timeBudgetSeconds) break;
    int pick = pickNextTask(progress);
    if (pick < 0) break;
    TaskState& s = *states[static_cast<size_t>(pick)];
    TaskProgress& p = progress[static_cast<size_t>(pick)];
    // The batch: the default config first (the baseline every report compares with).
    std::vector<Point> batch;
    std::string defaultText = configText(s.task.defaultConfig);
    if (options.measureDefault && !s.measured.count(defaultText))
      batch.push_back({{}, s.task.defaultConfig, defaultText});
    SearchOptions so = options.search;
    // While tasks are still untried, a warm-up batch leaves each of them a share of the budget:
    // a tight budget measures every kernel once rather than a few of them thoroughly.
    int remaining = budget - summary.trials, untried = 0;
    for (const TaskProgress& q : progress) untried += q.trials == 0 && !q.finished;
    if (p.trials == 0 && untried > 1) remaining = std::max(1, remaining / untried);
    so.batchSize = std::min(so.batchSize, remaining) - static_cast<int>(batch.size());
    std::vector<Point> seeds;
    for (const auto& [g, point] : s.ok) seeds.push_back(point);
    static const CostModel untrained;
    const CostModel& model =
        models.count(s.task.kind) && models[s.task.kind] ? *models[s.task.kind] : untrained;
    std::set<std::string> taken = s.measured;
    if (!batch.empty()) taken.insert(batch[0].text);
    if (so.batchSize > 0)
      for (Point& point : proposeBatch(*s.space, model, host, seeds, taken, so, rng))
        batch.push_back(std::move(point));
    if (batch.empty()) {
      p.finished = true; // every config of the space is measured
      continue;
    }
    std::vector<db::Record> records;
    for (const Point& point : batch) {
      if (stop.load()) break;
      if (options.timeBudgetSeconds > 0 && elapsed() >= options.timeBudgetSeconds) break;
      // The worker pipe: JSON again, one line each way.
      nlohmann::json config = toJson(point.config);
      MeasureRequest request{s.task.workloadJson, config, options.minSeconds, options.minRepeats,
                             options.flushCache};
      MeasureResult m = measurer.measure(request, s.timedOut.count(point.text) ? 2.0 : 1.0);
      db::Record r;
      r.workload = s.task.workloadJson;
      r.config = std::move(config);
      r.target = target;
      r.templateVersion = s.task.templateVersion;
      r.status = m.status;
      r.error = m.error;
      r.medianUs = m.medianUs;
      r.minUs = m.minUs;
      r.repeats = m.repeats;
      r.gflops = m.status == db::MeasureStatus::Ok && m.medianUs > 0
                     ? s.task.flops / (m.medianUs * 1e-6) / 1e9
                     : 0;
      // A worker that reports a time its target cannot reach (a broken timer, a kernel that
      // skipped its work) is a failed measurement, never a best record.
      if (Status plausible =
              checkPlausible(r, s.task.flops, s.task.threads, workloadTypes(s.task.workload));
          !plausible) {
        r.status = m.status = db::MeasureStatus::Error;
        r.error = plausible.error().message();
        r.gflops = 0;
      }
      r.tunecVersion = "0.1.0";
      r.host = host.model;
      r.createdAt = utcTimestamp();
      s.measured.insert(point.text);
      ++summary.trials;
      ++s.runTrials;
      ++p.trials;
      if (m.status == db::MeasureStatus::Ok) {
        if (m.medianUs * 1e-6 < p.bestSeconds) {
          p.bestSeconds = m.medianUs * 1e-6;
          s.sinceImprovement = 0;
        } else {
          ++s.sinceImprovement;
        }
        if (point.config == s.task.defaultConfig) s.defaultGflops = r.gflops;
        if (auto pt = s.space->fromConfig(point.config)) s.ok.emplace_back(r.gflops, *pt);
      } else {
        ++summary.errors;
        ++s.sinceImprovement;
      }
      if (pick == 0) summary.bestAfterTrial.push_back(s.task.flops / p.bestSeconds / 1e9);
      records.push_back(std::move(r));
    }
    // Commit the batch at once (also a partial one, when stopped).
    if (!records.empty()) TUNEC_TRY(database.insert(records).status());
    std::sort(s.ok.begin(), s.ok.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    p.bestHistory.push_back(p.bestSeconds);
    if (options.earlyStopping > 0 && s.sinceImprovement >= options.earlyStopping) p.finished = true;
    // Retrain between batches, never while a measurement runs.
    TUNEC_TRY(retrain(s.task.kind, s.task.templateVersion));
    double best = std::isfinite(p.bestSeconds) ? s.task.flops / p.bestSeconds / 1e9 : 0;
    if (options.onBatch)
      options.onBatch({summary.trials, budget, s.task.label, p.trials, best,
                       estimatedLatency(progress) * 1e3, elapsed()});
    if (options.progress) {
      double peak = (options.roofOf ? options.roofOf(s.task.workload) : 0.0) * s.task.threads;
      double rate = summary.trials / std::max(elapsed(), 1e-9);
      double left = options.timeBudgetSeconds > 0
                        ? options.timeBudgetSeconds - elapsed()
                        : (budget - summary.trials) / std::max(rate, 1e-9);
      // A shard counts the trials of its earlier runs: [done so far/the shard's total].
      int before = options.countRecorded ? summary.recordedBefore : 0;
      std::fprintf(stderr,
                   "[%5d/%d] %s (x%g): %d trials, best %.1f %s (%.0f%% of peak) | %.1f "
                   "trials/s, kernels %.2f ms, %s left\n",
                   before + summary.trials, before + budget, s.task.label.c_str(), s.task.weight,
                   p.trials, best, isInt8Gemm(workloadTypes(s.task.workload)) ? "GOP/s" : "GFLOP/s",
                   peak > 0 ? 100 * best / peak : 0.0, rate, estimatedLatency(progress) * 1e3,
                   duration(std::max(left, 0.0)).c_str());
    }
  }
  summary.interrupted = stop.load();
  summary.seconds = elapsed();
  for (const auto& state : states) {
    TaskOutcome o;
    o.label = state->task.label;
    o.trials = state->runTrials;
    o.defaultGflops = state->defaultGflops;
    if (!state->ok.empty()) {
      o.bestGflops = state->ok.front().first;
      o.bestConfig = toJson(state->ok.front().second.config);
    }
    summary.tasks.push_back(o);
  }
  return summary;
}

} // namespace tunec::tuner
