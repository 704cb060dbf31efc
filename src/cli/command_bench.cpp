// `tunec bench`: warm-up, then latency statistics over N runs on random inputs.
#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/flag_values.h"
#include "cli/model_session.h"
#include "ir/tensor.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>

namespace tunec::cli {

namespace {

const CommandSpec kBenchSpec{
    "bench",
    "tunec bench model.so|MODEL.onnx [--runs N] [--warmup N] [--threads N]",
    "Times whole-model runs on random inputs (floats uniform in [-1, 1], integers in [0, 10)),\n"
    "or on the tensor files --input gives for some inputs (token ids, a real image):\n"
    "warm-up runs, then the median, p90 and minimum latency of --runs runs. An ONNX model is\n"
    "compiled in memory first.",
    {
        {"runs", "N", "timed runs (default 50)"},
        {"warmup", "N", "untimed runs first (default 5)"},
        {"threads", "N", "threads per run (default: the machine's cores)"},
        {"db", "FILE",
         "ONNX models: tuned configs (default: $TUNEC_DB or ./tuning.db if it exists)"},
        {"json", "", "print the statistics as one JSON object"},
        {"profile", "",
         "also time every step; print the slowest steps and the steps grouped by computation"},
        {"input-shape", "NAME=SHAPE",
         "static shape for a dynamic input, e.g. x=1x3x224x224; for a model.so of symbolic "
         "dimensions, the shape of the timed runs' random input (within its bounds)",
         true},
        {"dim", "NAME=MIN..MAX", kDimFlagHelp, true},
        {"buckets", "NAME=E1,E2,...", kBucketsFlagHelp, true},
        {"input", "NAME=FILE",
         "time on this tensor file (.npy or .pb) for a model input instead of random values "
         "(token ids within a vocabulary, a real image)",
         true},
        precisionFlag(),
    },
    1,
    1};

Expected<int> positive(const std::string& flag, const std::string& text, int fallback) {
  if (text.empty()) return fallback;
  TUNEC_ASSIGN_OR_RETURN(int64_t n, parseInteger(flag, text, 0, 1'000'000'000));
  return static_cast<int>(n);
}

} // namespace

int commandBench(const std::vector<std::string>& argv) {
  auto args = Arguments::parse(kBenchSpec, argv);
  if (!args) return fail(args.error().message());
  if (args->helpRequested()) {
    std::fputs(helpText(kBenchSpec).c_str(), stdout);
    return 0;
  }
  auto runs = positive("runs", args->get("runs"), 50);
  auto warmup = positive("warmup", args->get("warmup"), 5);
  if (!runs) return fail(runs.error().message());
  if (!warmup) return fail(warmup.error().message());
  auto options = timingSessionOptions(*args);
  if (!options) return fail(options.error().message());
  if (*runs < 1) return fail("--runs must be at least 1");
  const int threads = options->threads;
  auto session = openModel(args->positionals()[0], *options);
  if (!session) return fail(session.error().message());
  RunBuffers buffers = randomRunBuffers(*session, 7);
  // A model of symbolic dimensions: --input-shape is also the timed run's shape.
  if (session->symbolic())
    if (Status s = useInputShapes(*session, options->inputDims.shapes, buffers); !s)
      return fail(s.error().message());
  auto files = parseInputFiles(args->getAll("input"));
  if (!files) return fail(files.error().message());
  if (Status s = useInputFiles(*session, *files, buffers); !s) return fail(s.error().message());
  auto stats = timeRuns(*session, buffers, *warmup, *runs);
  if (!stats) return fail(stats.error().message());
  if (args->has("profile")) {
    std::vector<double> seconds(session->steps.size(), 0.0);
    for (int i = 0; i < *runs; ++i)
      if (Status s = runBuffers(*session, buffers, &seconds); !s) return fail(s.error().message());
    std::vector<size_t> order(seconds.size());
    double total = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      order[i] = i;
      total += seconds[i];
    }
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return seconds[a] > seconds[b]; });
    std::printf("step profile (mean per run; %zu steps, %.3f ms in steps):\n", order.size(),
                total * 1e3 / *runs);
    for (size_t i = 0; i < std::min<size_t>(order.size(), 25); ++i)
      std::printf("  %8.3f ms %5.1f%%  %s\n", seconds[order[i]] * 1e3 / *runs,
                  100.0 * seconds[order[i]] / total, session->steps[order[i]].label.c_str());
    // The same steps grouped by what they compute (the label without the node name), so
    // that twelve identical layers read as one line.
    std::map<std::string, std::pair<double, int>> groups;
    for (size_t i = 0; i < seconds.size(); ++i) {
      std::string key = session->steps[i].label;
      if (size_t open = key.find('\''); open != std::string::npos)
        if (size_t close = key.find('\'', open + 1); close != std::string::npos)
          key.erase(open, close - open + 2);
      groups[key].first += seconds[i];
      groups[key].second += 1;
    }
    std::vector<std::pair<std::string, std::pair<double, int>>> grouped(groups.begin(),
                                                                        groups.end());
    std::sort(grouped.begin(), grouped.end(),
              [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    std::printf("grouped by computation (%zu groups):\n", grouped.size());
    for (size_t i = 0; i < std::min<size_t>(grouped.size(), 15); ++i)
      std::printf("  %8.3f ms %5.1f%%  %3dx %s\n", grouped[i].second.first * 1e3 / *runs,
                  100.0 * grouped[i].second.first / total, grouped[i].second.second,
                  grouped[i].first.c_str());
  }
  if (args->has("json")) {
    std::printf("{\"median_ms\": %.4f, \"p90_ms\": %.4f, \"min_ms\": %.4f, \"runs\": %d, "
                "\"threads\": %d}\n",
                stats->medianMs, stats->p90Ms, stats->minMs, *runs, threads);
  } else {
    std::printf("%s: %d runs on %d thread%s: median %.3f ms, p90 %.3f ms, min %.3f ms\n",
                args->positionals()[0].c_str(), *runs, threads, threads > 1 ? "s" : "",
                stats->medianMs, stats->p90Ms, stats->minMs);
  }
  return 0;
}

} // namespace tunec::cli
