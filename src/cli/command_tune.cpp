// `tunec tune` (a model's heavy kernels), `tunec tune-op` (one workload) and the hidden
// `tunec tune-worker` (the measurement child process).
#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/flag_values.h"
#include "cli/model_session.h"
#include "cli/model_tasks.h"
#include "cli/op_flags.h"
#include "cli/target_flag.h"
#include "codegen/peak_probe.h"
#include "support/terminal_text.h"
#include "tuner/candidate_runner.h"
#include "tuner/shard.h"
#include "tuner/tuning_job.h"

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <unistd.h>

namespace tunec::cli {

namespace {

std::atomic<bool> interrupted{false};

void onInterrupt(int) {
  interrupted.store(true);
}

std::vector<FlagSpec> tuneFlags() {
  return {
      {"db", "FILE",
       "tuning database to read and record into (created if missing; default: "
       "$TUNEC_DB or ./tuning.db)"},
      {"trials", "N", "configs to measure in this run, over all tasks (default 1000)"},
      {"time-budget", "T", "stop after this long: 90s, 30m, 2h (default: no limit)"},
      {"threads", "N", "threads of the kernels (default: the machine's cores)"},
      {"early-stopping", "N", "stop a task after N trials without improvement (default: off)"},
      {"batch", "N", "candidates per measured batch (default 16)"},
      {"min-seconds", "S", "minimum timed duration per candidate (default 0.1)"},
      {"timeout", "S",
       "a candidate that takes longer is killed and recorded as timeout (default 30)"},
      {"flush-cache", "", "flush the caches before every timed run"},
      {"random", "", "random search without the cost model (for comparisons)"},
      {"no-default", "", "do not measure the analytical default config first (for comparisons)"},
      {"seed", "N", "random seed (default 1)"},
      {"quiet", "", "no progress lines"},
      targetFlag("refuse to run unless this machine is the one the file describes (with "
                 "--list-tasks: list the tasks of that machine)"),
  };
}

const CommandSpec& tuneSpec() {
  static CommandSpec spec = [] {
    CommandSpec s{
        "tune",
        "tunec tune MODEL.onnx... [--db tuning.db] [--trials N] [--time-budget 30m] "
        "[--shard I/N] [flags]",
        "Tunes the tile and blocking parameters of the models' heavy kernels on this\n"
        "machine and records every measurement in the tuning database. Several models\n"
        "share one task list (a workload they have in common is tuned once). The trial\n"
        "budget goes to the kernels whose speed-up shortens the models most. Ctrl-C (or\n"
        "SIGTERM) stops after the running candidate, with everything measured saved; the\n"
        "same command again resumes. Then: tunec compile MODEL.onnx --db tuning.db -o "
        "model.so\n\n"
        "--shard I/N tunes the I-th of N disjoint parts of the task list, split the same\n"
        "way on every machine and balanced by expected gain, so N machines of one target\n"
        "tune a job together (scripts/tune_slurm.sh, docs/fleet.md). --trials and\n"
        "--time-budget are then the whole job's: a shard takes its share of them, and\n"
        "the trials its database already holds count toward it, so a shard run again\n"
        "after it was killed measures only what it has left. Merge the shards' databases\n"
        "with 'tunec db merge'.",
        tuneFlags(),
        1,
        1 << 20};
    s.flags.push_back(precisionFlag());
    s.flags.push_back({"input-shape", "NAME=SHAPE",
                       "static shape for a dynamic input, e.g. x=1x3x224x224", true});
    s.flags.push_back({"dim", "NAME=MIN..MAX", kDimFlagHelp, true});
    s.flags.push_back({"buckets", "NAME=E1,E2,...", kBucketsFlagHelp, true});
    s.flags.push_back({"histogram", "NAME=FILE",
                       "how often the served runs take each value of a --dim symbol (a line per "
                       "value: LENGTH or LENGTH COUNT): each size bucket's kernels weigh as the "
                       "share of the runs in their bucket, so the job spends its trials where the "
                       "runs are (--list-tasks shows the weights)"});
    s.flags.push_back({"list-tasks", "",
                       "print the tasks (workload key, occurrences, label) and measure nothing"});
    s.flags.push_back({"shard", "I/N",
                       "tune only shard I (0-based) of N of the task list; the budgets are the "
                       "job's (see above)"});
    return s;
  }();
  return spec;
}

const CommandSpec& tuneOpSpec() {
  static CommandSpec spec = [] {
    CommandSpec s{"tune-op",
                  "tunec tune-op matmul|conv2d [shape flags] [--db tuning.db] [--trials N] [flags]",
                  "Tunes one workload (the shape flags of 'tunec bench-op') and records every\n"
                  "measurement; 'tunec bench-op ... --db FILE' then times the best config.",
                  tuneFlags(),
                  1,
                  1};
    std::vector<FlagSpec> shape = opShapeFlags();
    s.flags.insert(s.flags.end(), shape.begin(), shape.end());
    s.flags.push_back({"json", "", "print the result as one JSON object"});
    return s;
  }();
  return spec;
}

// XGBoost's OpenMP threads spin while waiting unless OMP_WAIT_POLICY=PASSIVE is in the
// environment at start-up (setenv later is too late): run the command again with it set.
void ensurePassiveOpenMp(const std::vector<std::string>& argv, const char* command) {
  if (std::getenv("OMP_WAIT_POLICY")) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  std::vector<std::string> all = {"/proc/self/exe", command};
  all.insert(all.end(), argv.begin(), argv.end());
  std::vector<char*> args;
  for (std::string& a : all) args.push_back(a.data());
  args.push_back(nullptr);
  execv("/proc/self/exe", args.data()); // on failure, go on as we are
}

std::vector<std::string> workerCommand() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return {ec ? std::string("tunec") : self.string(), "tune-worker"};
}

Expected<tuner::TuneOptions> tuneOptions(const Arguments& args, const Target& target) {
  tuner::TuneOptions o;
  o.target = target;
  constexpr int64_t kMaxCount = 1'000'000'000;
  TUNEC_ASSIGN_OR_RETURN(int64_t trials,
                         intFlag(args, "trials", 1000, false, 1, "tunec tune", kMaxCount));
  TUNEC_ASSIGN_OR_RETURN(int64_t early,
                         intFlag(args, "early-stopping", 0, false, 0, "tunec tune", kMaxCount));
  TUNEC_ASSIGN_OR_RETURN(int64_t batch,
                         intFlag(args, "batch", 16, false, 1, "tunec tune", 100'000));
  TUNEC_ASSIGN_OR_RETURN(int64_t seed,
                         intFlag(args, "seed", 1, false, 0, "tunec tune", UINT32_MAX));
  // A duration flag, or its default when absent.
  auto duration = [&](const char* flag, double fallback, double most) -> Expected<double> {
    if (!args.has(flag)) return fallback;
    return parseDuration(flag, args.get(flag), most);
  };
  TUNEC_ASSIGN_OR_RETURN(o.timeBudgetSeconds, duration("time-budget", 0, 365.0 * 24 * 3600));
  TUNEC_ASSIGN_OR_RETURN(o.minSeconds, duration("min-seconds", 0.1, 60));
  TUNEC_ASSIGN_OR_RETURN(o.timeoutSeconds, duration("timeout", 30, 86400));
  o.trials = static_cast<int>(trials);
  o.earlyStopping = static_cast<int>(early);
  o.search.batchSize = static_cast<int>(batch);
  o.seed = static_cast<uint32_t>(seed);
  o.flushCache = args.has("flush-cache");
  o.randomSearch = args.has("random");
  o.measureDefault = !args.has("no-default");
  o.progress = !args.has("quiet");
  o.workerArgv = workerCommand();
  auto jit = Jit::create(target);
  if (!jit) return jit.error();
  auto roofs = std::make_shared<ReductionRoofs>(std::move(*jit));
  o.roofOf = [roofs](const Workload& w) { return roofs->of(w); };
  return o;
}

/// `shardShare`: this run is a shard of a job and takes this share of the job's budgets; the
/// trials its database already holds count toward them (a re-submitted shard resumes).
int runJob(std::vector<tuner::Task> tasks, const Arguments& args, const Target& target,
           std::optional<double> shardShare = std::nullopt) {
  std::string dbPath = args.get("db", defaultDatabasePath());
  auto database = db::TuningDatabase::open(dbPath, true);
  if (!database) return fail(database.error().message());
  auto options = tuneOptions(args, target);
  if (!options) return fail(options.error().message());
  if (shardShare) {
    options->countRecorded = true;
    options->trials = std::max(static_cast<int>(tasks.size()),
                               static_cast<int>(std::lround(options->trials * *shardShare)));
    options->timeBudgetSeconds *= *shardShare;
  }
  // SIGTERM (a scheduler's stop, kill) and SIGHUP (a closed terminal) stop the job as Ctrl-C
  // does: the batch in flight is committed and the job can be resumed.
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, onInterrupt);
  auto summary = tuner::runTuningJob(std::move(tasks), *database, *options, interrupted);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, SIG_DFL);
  if (!summary) return fail(summary.error().message());
  if (args.has("json")) {
    const auto& t = summary->tasks.front();
    nlohmann::json j = {{"trials", summary->trials},
                        {"errors", summary->errors},
                        {"seconds", summary->seconds},
                        {"best_gflops", t.bestGflops},
                        {"default_gflops", t.defaultGflops},
                        {"best_config", t.bestConfig},
                        {"best_after_trial", summary->bestAfterTrial}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  if (summary->recordedBefore > 0)
    std::printf("resumed: %d configs of these tasks were already measured in %s%s\n",
                summary->recordedBefore, dbPath.c_str(),
                options->countRecorded ? " (they count toward this shard's trials)" : "");
  std::printf("%s%d trials (%d errors) in %.1f s, %.2f trials/s; recorded in %s\n",
              summary->interrupted ? "interrupted: " : "", summary->trials, summary->errors,
              summary->seconds, summary->trials / std::max(summary->seconds, 1e-9), dbPath.c_str());
  std::printf("%-48s %8s %10s %10s %8s\n", "task", "trials", "default", "best", "speedup");
  auto gflops = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), v > 0 ? "%.1f" : "-", v);
    return std::string(buf);
  };
  for (const auto& t : summary->tasks)
    std::printf("%-48s %8d %10s %10s %8s\n", t.label.c_str(), t.trials,
                gflops(t.defaultGflops).c_str(), gflops(t.bestGflops).c_str(),
                t.defaultGflops > 0 && t.bestGflops > 0
                    ? (gflops(t.bestGflops / t.defaultGflops) + "x").c_str()
                    : "-");
  std::printf("(GFLOP/s, GOP/s for u8xi8 tasks; default = the template's analytical config)\n");
  return summary->interrupted ? 130 : 0;
}

} // namespace

int commandTune(const std::vector<std::string>& argv) {
  auto args = Arguments::parse(tuneSpec(), argv);
  if (!args) return fail(args.error().message());
  if (args->helpRequested()) {
    std::fputs(helpText(tuneSpec()).c_str(), stdout);
    return 0;
  }
  ensurePassiveOpenMp(argv, "tune");
  bool listOnly = args->has("list-tasks");
  auto target = listOnly ? targetFromArgs(*args) : measuringTarget(*args, "tunec tune");
  if (!target) return fail(target.error().message());
  // The machine's cores, whatever this process may use: what `tunec compile` builds for.
  auto threads = args->has("threads") ? parseThreads(args->get("threads")) : target->cores;
  if (!threads) return fail(threads.error().message());
  auto shapes =
      parseInputDims(args->getAll("input-shape"), args->getAll("dim"), args->getAll("buckets"));
  if (!shapes) return fail(shapes.error().message());
  std::optional<tuner::Shard> shard;
  if (args->has("shard")) {
    auto parsed = tuner::parseShard(args->get("shard"));
    if (!parsed) return fail(parsed.error().message());
    shard = *parsed;
  }
  // Distinct workloads over all the models, weighted by how often the models run them.
  auto precision = precisionFromArgs(*args);
  if (!precision) return fail(precision.error().message());
  std::optional<LengthHistogram> histogram;
  if (args->has("histogram")) {
    auto read = readHistogram(args->get("histogram"), *shapes);
    if (!read) return fail(read.error().message());
    histogram = std::move(*read);
  }
  auto found = modelTasks(args->positionals(), *shapes, *target, *threads, *precision,
                          histogram ? &*histogram : nullptr);
  if (!found) return fail(found.error().message());
  std::vector<tuner::Task> tasks = std::move(found->tasks);
  size_t heavyKernels = found->heavyKernels;
  std::string what = args->positionals().size() == 1
                         ? args->positionals()[0]
                         : std::to_string(args->positionals().size()) + " models";
  std::optional<double> share;
  if (shard) {
    tuner::ShardPlan plan = tuner::planShards(tasks, shard->count);
    share = tuner::shardShare(plan, *shard);
    std::vector<tuner::Task> mine;
    for (size_t i = 0; i < tasks.size(); ++i)
      if (plan.shardOf[i] == shard->index) mine.push_back(std::move(tasks[i]));
    std::fprintf(stderr,
                 "%s: shard %d/%d: %zu of %zu distinct tasks, %.0f%% of the expected load\n",
                 what.c_str(), shard->index, shard->count, mine.size(), tasks.size(), 100 * *share);
    tasks = std::move(mine);
  }
  if (listOnly) {
    // What a job would tune, measuring nothing: workload key, occurrences, label.
    for (const tuner::Task& t : tasks)
      std::printf("%s %3g  %s\n", t.key.c_str(), t.weight, forTerminal(t.label).c_str());
    return 0;
  }
  std::fprintf(stderr, "%s: %zu heavy kernels, %zu distinct tasks%s\n", what.c_str(), heavyKernels,
               tasks.size(), shard ? " in this shard" : "");
  return runJob(std::move(tasks), *args, *target, share);
}

int commandTuneOp(const std::vector<std::string>& argv) {
  auto args = Arguments::parse(tuneOpSpec(), argv);
  if (!args) return fail(args.error().message());
  if (args->helpRequested()) {
    std::fputs(helpText(tuneOpSpec()).c_str(), stdout);
    return 0;
  }
  ensurePassiveOpenMp(argv, "tune-op");
  auto target = measuringTarget(*args, "tunec tune-op");
  if (!target) return fail(target.error().message());
  auto threads = intFlag(*args, "threads", 1, false, 1, "tunec tune-op");
  if (!threads) return fail(threads.error().message());
  std::string op = args->positionals()[0];
  Workload workload;
  if (op == "matmul") {
    auto w = matmulFromFlags(*args, static_cast<int>(*threads));
    if (!w) return fail(w.error().message());
    workload = *w;
  } else if (op == "conv2d") {
    auto w = conv2dFromFlags(*args, static_cast<int>(*threads));
    if (!w) return fail(w.error().message());
    workload = *w;
  } else {
    return fail("tunec tune-op: unknown op '" + op + "' (matmul, conv2d)");
  }
  return runJob({tuner::makeTask(workload, *target)}, *args, *target);
}

int commandTuneWorker(const std::vector<std::string>& argv) {
  if (!argv.empty()) {
    std::puts("usage: tunec tune-worker\n\nThe tuner's measurement process (internal): reads one "
              "request per line on stdin,\nwrites one result per line on stdout.");
    return argv[0] == "--help" ? 0 : 2;
  }
  return tuner::runMeasureWorker(thisMachine(), std::cin, std::cout);
}

} // namespace tunec::cli
