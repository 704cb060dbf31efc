// `tunec bench-op`: times one heavy kernel (default, given or swept config) and reports
// GFLOP/s and the percentage of this machine's measured FMA peak.
#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/flag_values.h"
#include "cli/op_flags.h"
#include "cli/target_flag.h"
#include "codegen/conv2d_kernel.h"
#include "codegen/matmul_kernel.h"
#include "codegen/peak_probe.h"
#include "support/timing.h"
#include "templates/template.h"
#include "tuning_db/database.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <set>

namespace tunec::cli {

namespace {

// Before every timed run of a cold_weights workload: its packed weights leave the caches.
template <typename W>
std::function<void()> evictionOf(const W& w, std::span<const std::byte> weights) {
  if (!w.coldWeights || weights.empty()) return {};
  return [weights] { evictFromCaches(weights.data(), weights.size_bytes()); };
}

CommandSpec makeBenchOpSpec() {
  CommandSpec spec{
      "bench-op",
      "tunec bench-op matmul|conv2d [shape flags] [flags]",
      "Times one kernel with the template's analytical default config, a given config, or the "
      "best\n"
      "of a sweep over the knob space, and prints the median time, GFLOP/s and the percentage of\n"
      "this machine's measured peak of the kernel's instruction (probed at start, times the\n"
      "thread count): the fp32 FMA, vdpbf16ps or tdpbf16ps for --dtype bf16, vpdpbusd,\n"
      "vpmaddubsw or tdpbusd for --dtype u8s8.\n"
      "matmul shape: --m --n --k [--batch] [--trans-a] [--trans-b] [--runtime-b] [--lda ...]\n"
      "conv2d shape (NHWC): --n --ic --h --w --oc --kh --kw [--stride] [--pad] [--dilation]",
      {
          {"threads", "T", "threads (default 1)"},
          {"isa", "avx512|avx2", "instruction set (default: the widest the CPU has)"},
          {"config", "JSON", "config to time instead of the default"},
          {"sweep", "N",
           "time N random valid configs from the knob space plus the default; report the best"},
          {"seconds", "S", "minimum timed duration per measurement (default 1.0)"},
          {"json", "", "print one JSON object instead of text"},
          {"pipeline", "lean|o3",
           "LLVM IR pipeline before codegen (default lean; o3: LLVM's full O3)"},
          targetFlag("refuse to run unless this machine is the one the file describes"),
          {"db", "FILE", "time the best config recorded for this workload and machine in FILE"},
          {"record", "", "with --sweep and --db: record every measured config in the database"},
      },
      1,
      1};
  std::vector<FlagSpec> shape = opShapeFlags();
  spec.flags.insert(spec.flags.begin(), shape.begin(), shape.end());
  return spec;
}

const CommandSpec kBenchOpSpec = makeBenchOpSpec();

/// A workload with its operands: the template interface gives its knob space, default and
/// validation; `time` compiles a config (validated, of the workload's template) and times it.
struct OpBench {
  Workload workload;
  std::function<Expected<Timing>(const Config&, double seconds)> time;
  /// Seconds the last `time` call spent generating and JIT-compiling the kernel.
  std::shared_ptr<double> compileSeconds = std::make_shared<double>(0);
};

/// Runs `compile` and records how long it took.
template <typename F> auto timedCompile(double& seconds, F&& compile) {
  auto t0 = std::chrono::steady_clock::now();
  auto result = compile();
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

std::vector<float> randomData(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

Expected<OpBench> matmulBench(const Arguments& args, Jit& jit, int threads) {
  TUNEC_ASSIGN_OR_RETURN(MatmulWorkload parsed, matmulFromFlags(args, threads));
  auto w = std::make_shared<MatmulWorkload>(parsed);
  std::mt19937 rng(7);
  auto a = std::make_shared<std::vector<float>>(randomData(static_cast<size_t>(w->aExtent()), rng));
  auto b = std::make_shared<std::vector<float>>(randomData(static_cast<size_t>(w->bExtent()), rng));
  auto out = std::make_shared<std::vector<float>>(static_cast<size_t>(w->cExtent()));
  // bf16 operands are 2-byte values: A (and a runtime B) rounded from the same random floats;
  // a C of either type fits in `out`.
  auto aBf16 = std::make_shared<std::vector<uint16_t>>(),
       bBf16 = std::make_shared<std::vector<uint16_t>>();
  if (w->types.src == DType::BF16)
    for (float x : *a) aBf16->push_back(floatToBf16(x));
  if (w->types.wei == DType::BF16)
    for (float x : *b) bBf16->push_back(floatToBf16(x));
  // The int8 GEMM: u8 A over its whole range, and the s8 weights as the compiler passes them
  // (integer floats, packed to i8 at compile time), 7-bit as the measurer's: every int8
  // strategy takes them (the AVX2 one needs them), and the timing does not depend on them.
  auto aU8 = std::make_shared<std::vector<uint8_t>>();
  if (isInt8Gemm(w->types)) {
    for (float x : *a) aU8->push_back(static_cast<uint8_t>(std::lround((x + 1) * 127.5f)));
    for (float& x : *b) x = std::round(x * static_cast<float>(kAvx2Int8WeightLimit));
  }
  OpBench bench;
  bench.workload = *w;
  bench.time = [w, a, b, out, aBf16, bBf16, aU8, &jit, compile = bench.compileSeconds](
                   const Config& config, double seconds) -> Expected<Timing> {
    const MatmulConfig& c = std::get<MatmulConfig>(config);
    TUNEC_ASSIGN_OR_RETURN(MatmulKernel kernel, timedCompile(*compile, [&] {
                             return compileMatmul(jit, *w, c, {}, b->data());
                           }));
    const void* aIn = !aU8->empty()     ? static_cast<const void*>(aU8->data())
                      : !aBf16->empty() ? static_cast<const void*>(aBf16->data())
                                        : a->data();
    const void* bIn = bBf16->empty() ? static_cast<const void*>(b->data()) : bBf16->data();
    return timeRepeated([&] { kernel.runTyped(aIn, bIn, out->data()); }, seconds, 5,
                        evictionOf(*w, kernel.packedWeights()));
  };
  return bench;
}

Expected<OpBench> conv2dBench(const Arguments& args, Jit& jit, int threads) {
  TUNEC_ASSIGN_OR_RETURN(Conv2dWorkload parsed, conv2dFromFlags(args, threads));
  auto w = std::make_shared<Conv2dWorkload>(parsed);
  std::mt19937 rng(7);
  auto in = std::make_shared<std::vector<float>>(
      randomData(static_cast<size_t>(w->n * w->h * w->w * w->ic), rng));
  auto weights = std::make_shared<std::vector<float>>(
      randomData(static_cast<size_t>(w->oc * w->icPerGroup() * w->kh * w->kw), rng));
  auto out =
      std::make_shared<std::vector<float>>(static_cast<size_t>(w->n * w->oh() * w->ow() * w->oc));
  // The int8 convolution: a u8 input over its whole range and 7-bit integer weights, as the
  // matmul's (every int8 strategy takes them).
  auto inU8 = std::make_shared<std::vector<uint8_t>>();
  if (isInt8Gemm(w->types)) {
    for (float x : *in) inU8->push_back(static_cast<uint8_t>(std::lround((x + 1) * 127.5f)));
    for (float& x : *weights) x = std::round(x * static_cast<float>(kAvx2Int8WeightLimit));
  }
  OpBench bench;
  bench.workload = *w;
  bench.time = [w, in, inU8, weights, out, &jit, compile = bench.compileSeconds](
                   const Config& config, double seconds) -> Expected<Timing> {
    const Conv2dConfig& c = std::get<Conv2dConfig>(config);
    TUNEC_ASSIGN_OR_RETURN(Conv2dKernel kernel, timedCompile(*compile, [&] {
                             return compileConv2d(jit, *w, c, {}, weights->data());
                           }));
    const void* input = inU8->empty() ? static_cast<const void*>(in->data()) : inU8->data();
    return timeRepeated([&] { kernel.run(input, out->data()); }, seconds, 5,
                        evictionOf(*w, kernel.packedWeights()));
  };
  return bench;
}

} // namespace

int commandBenchOp(const std::vector<std::string>& argv) {
  auto args = Arguments::parse(kBenchOpSpec, argv);
  if (!args) return fail(args.error().message());
  if (args->helpRequested()) {
    std::fputs(helpText(kBenchOpSpec).c_str(), stdout);
    return 0;
  }
  std::string op = args->positionals()[0];
  if (op != "matmul" && op != "conv2d")
    return fail("tunec bench-op: unknown op '" + op + "' (matmul, conv2d)");
  auto threads = intFlag(*args, "threads", 1, false);
  if (!threads) return fail(threads.error().message());
  auto machine = measuringTarget(*args, "tunec bench-op");
  if (!machine) return fail(machine.error().message());
  Isa isa = widestIsa(*machine);
  if (args->has("isa")) {
    auto parsed = parseIsa(args->get("isa"));
    if (!parsed) return fail("tunec bench-op: --isa must be amx, avx512 or avx2");
    if (Status s = checkTargetSupports(*machine, *parsed); !s)
      return fail("tunec bench-op: --isa " + s.error().message());
    isa = *parsed;
  }
  auto secondsFlag = parseDuration("seconds", args->get("seconds", "1.0"), 3600);
  if (!secondsFlag) return fail("tunec bench-op: " + secondsFlag.error().message());
  double seconds = *secondsFlag;
  bool json = args->has("json");

  std::string pipeline = args->get("pipeline", "lean");
  if (pipeline != "lean" && pipeline != "o3")
    return fail("tunec bench-op: --pipeline must be lean or o3");
  auto jit = Jit::create(*machine, pipeline == "o3" ? JitPipeline::O3 : JitPipeline::Lean);
  if (!jit) return fail(jit.error().message());
  auto bench = op == "matmul" ? matmulBench(*args, **jit, static_cast<int>(*threads))
                              : conv2dBench(*args, **jit, static_cast<int>(*threads));
  if (!bench) return fail(bench.error().message());
  const Workload& workload = bench->workload;
  // A bf16 or int8 GEMM or convolution runs on AMX where the machine has it (kernelIsa), else
  // on the vector ISA's dot; the roof is the chosen strategy's.
  const bool bf16 = isBf16Gemm(workloadTypes(workload)), int8 = isInt8Gemm(workloadTypes(workload));
  const TemplateKind kind = templateKind(workload);
  if (!args->has("isa")) isa = kernelIsa(workload, isa, *machine);
  if (bf16 && isa == Isa::Avx2)
    return fail("tunec bench-op: bf16 kernels are AMX or AVX-512 (vdpbf16ps); drop --isa avx2");
  if (isa == Isa::Amx && !(bf16 || int8))
    return fail("tunec bench-op: --isa amx runs bf16 and u8s8 kernels (--dtype bf16, --src f32 "
                "--dtype bf16 or --dtype u8s8)");
  if (Status s = checkTargetSupports(*machine, isa, workloadTypes(workload)); !s)
    return fail("tunec bench-op: " + s.error().message());
  auto roof = measureReductionPeak(**jit, isa, workloadTypes(workload));
  if (!roof) return fail(roof.error().message());
  const double* peak = &roof->gflops;
  const char* peakName = roof->instruction;
  const nlohmann::json workloadJson = toJson(workload);
  const double flops = workloadFlops(workload);
  const int benchThreads = workloadThreads(workload);
  const KnobSpace space = knobSpace(workload, isa);

  Config config = defaultConfig(workload, isa, *machine);
  std::string source = "default";
  if (args->has("config")) {
    auto given = nlohmann::json::parse(args->get("config"), nullptr, false);
    if (given.is_discarded()) return fail("tunec bench-op: --config is not valid JSON");
    auto parsed = parseConfig(kind, given);
    if (!parsed) return fail("tunec bench-op: --config: " + parsed.error().message());
    config = *parsed;
    source = "given";
  }
  std::optional<db::TuningDatabase> database;
  db::TargetInfo target = db::TargetInfo::fromTarget(*machine);
  if (args->has("db")) {
    auto opened = args->has("record") ? db::TuningDatabase::open(args->get("db"), true)
                                      : db::TuningDatabase::openReadOnly(args->get("db"));
    if (!opened) return fail(opened.error().message());
    database.emplace(std::move(*opened));
    if (!args->has("sweep")) {
      std::string key = db::workloadKey(workloadJson);
      auto best = database->best(key, target, templateVersion(kind));
      if (!best) return fail(best.error().message());
      if (!best->has_value())
        return fail("no record of workload " + key + " for this machine (target " + target.key() +
                    ") in " + args->get("db") +
                    "; record some with 'tunec bench-op ... --sweep N --db FILE --record'");
      auto parsed = parseConfig(kind, (*best)->record.config);
      if (!parsed)
        return fail("the best record in " + args->get("db") + ": " + parsed.error().message());
      config = *parsed;
      source = "best in " + args->get("db");
    }
  } else if (args->has("record")) {
    return fail("tunec bench-op: --record needs --db FILE");
  }
  if (Status s = validateConfig(workload, config); !s) return fail(s.error().message());

  if (args->has("sweep")) {
    auto n = intFlag(*args, "sweep", 1, true, 1, "tunec bench-op", 1'000'000);
    if (!n) return fail(n.error().message());
    std::mt19937 rng(7);
    std::set<std::string> seen{toJson(config).dump()};
    // Short timings rank the candidates; the best few are then re-timed at full length, so that
    // one lucky short run does not pick the config.
    std::vector<std::pair<double, Config>> ranked;
    auto first = bench->time(config, seconds / 10);
    if (!first) return fail(first.error().message());
    ranked.emplace_back(first->medianSeconds, config);
    int tried = 1;
    for (int attempt = 0; tried < *n + 1 && attempt < *n * 50; ++attempt) {
      std::vector<nlohmann::json> values;
      for (const Knob& knob : space) values.push_back(knob.values[rng() % knob.values.size()]);
      auto c = configFromKnobs(workload, isa, space, values);
      if (!c || !validateConfig(workload, *c) || !seen.insert(toJson(*c).dump()).second) continue;
      auto t = bench->time(*c, seconds / 10);
      if (!t) return fail(t.error().message());
      ++tried;
      ranked.emplace_back(t->medianSeconds, *c);
      if (!json) {
        double bestSeconds = std::min_element(ranked.begin(), ranked.end(), [](auto& x, auto& y) {
                               return x.first < y.first;
                             })->first;
        std::fprintf(stderr, "\rsweep: %d/%lld configs, best %.1f GFLOP/s", tried,
                     static_cast<long long>(*n + 1), flops / bestSeconds / 1e9);
      }
    }
    if (!json) std::fprintf(stderr, "\n");
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    if (database && args->has("record")) {
      std::vector<db::Record> records;
      for (const auto& [secondsTaken, c] : ranked) {
        db::Record r;
        r.workload = workloadJson;
        r.config = toJson(c);
        r.target = target;
        r.templateVersion = templateVersion(kind);
        r.medianUs = secondsTaken * 1e6;
        r.minUs = r.medianUs;
        r.gflops = flops / secondsTaken / 1e9;
        r.repeats = 1;
        r.tunecVersion = "0.1.0";
        r.host = machine->model;
        r.createdAt = utcTimestamp();
        records.push_back(std::move(r));
      }
      auto added = database->insert(records);
      if (!added) return fail(added.error().message());
      if (!json)
        std::fprintf(stderr, "recorded %lld new configs in %s\n", static_cast<long long>(*added),
                     args->get("db").c_str());
    }
    Config best = ranked.front().second;
    double bestSeconds = 1e30;
    for (size_t i = 0; i < ranked.size() && i < 3; ++i) {
      auto t = bench->time(ranked[i].second, seconds / 2);
      if (!t) return fail(t.error().message());
      if (t->medianSeconds < bestSeconds) {
        bestSeconds = t->medianSeconds;
        best = ranked[i].second;
      }
    }
    config = best;
    source = "best of sweep";
  }
  auto measured = bench->time(config, seconds);
  if (!measured) return fail(measured.error().message());
  double gflops = flops / measured->medianSeconds / 1e9;
  double machinePeak = *peak * benchThreads;
  if (json) {
    nlohmann::json j = {{"workload", workloadJson},
                        {"config", toJson(config)},
                        {"config_source", source},
                        {"median_ms", measured->medianSeconds * 1e3},
                        {"min_ms", measured->minSeconds * 1e3},
                        {"gflops", gflops},
                        {"peak_gflops", machinePeak},
                        {"percent_of_peak", 100 * gflops / machinePeak},
                        {"peak_probe", peakName},
                        {"compile_ms", *bench->compileSeconds * 1e3}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("workload %s\n", workloadJson.dump().c_str());
  std::printf("config   %s (%s)\n", toJson(config).dump().c_str(), source.c_str());
  // Integer products are operations, not floating-point ones (the JSON keys keep one name).
  const char* unit = int8 ? "GOP/s" : "GFLOP/s";
  std::printf("median %.3f ms, min %.3f ms over %d runs: %.1f %s, %.1f%% of the measured %s "
              "peak (%.1f %s x %d thread%s)\n",
              measured->medianSeconds * 1e3, measured->minSeconds * 1e3, measured->runs, gflops,
              unit, 100 * gflops / machinePeak, peakName, *peak, unit, benchThreads,
              benchThreads == 1 ? "" : "s");
  std::printf("generated and JIT-compiled in %.1f ms\n", *bench->compileSeconds * 1e3);
  return 0;
}

} // namespace tunec::cli
