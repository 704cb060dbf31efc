// `tunec bench-op`: times one heavy kernel (default, given or swept config) and reports
// GFLOP/s and the percentage of this machine's measured FMA peak.
#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/timing.h"
#include "codegen/matmul_kernel.h"
#include "codegen/peak_probe.h"

#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>

namespace tunec::cli {

namespace {

const CommandSpec kBenchOpSpec{
    "bench-op",
    "tunec bench-op matmul --m M --n N --k K [flags]",
    "Times one kernel with the template's analytical default config, a given config, or the best\n"
    "of a sweep over the knob space, and prints the median time, GFLOP/s and the percentage of\n"
    "this machine's measured fp32 FMA peak (probed at start, times the thread count).",
    {
        {"m", "M", "rows of A and C"},
        {"n", "N", "columns of B and C"},
        {"k", "K", "inner dimension"},
        {"batch", "B", "batch count (default 1)"},
        {"trans-a", "", "A is stored K x M"},
        {"trans-b", "", "B is stored N x K"},
        {"runtime-b", "", "B is an activation packed at run time, not a pre-packed constant"},
        {"threads", "T", "threads (default 1)"},
        {"isa", "avx512|avx2", "instruction set (default: the widest the CPU has)"},
        {"config", "JSON", "config to time instead of the default"},
        {"sweep", "N",
         "time N random valid configs from the knob space plus the default; report the best"},
        {"seconds", "S", "minimum timed duration per measurement (default 1.0)"},
        {"json", "", "print one JSON object instead of text"},
    },
    1,
    1};

Expected<int64_t> intFlag(const Arguments& args, const std::string& name, int64_t fallback,
                          bool required) {
  if (!args.has(name)) {
    if (required) return makeError("tunec bench-op: --", name, " is required");
    return fallback;
  }
  std::string v = args.get(name);
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || x < 1)
    return makeError("tunec bench-op: --", name, " must be a positive integer, not '", v, "'");
  return static_cast<int64_t>(x);
}

struct Measured {
  MatmulConfig config;
  Timing timing;
};

Expected<Measured> timeMatmul(Jit& jit, const MatmulWorkload& w, const MatmulConfig& c,
                              const std::vector<float>& a, const std::vector<float>& b,
                              std::vector<float>& out, double seconds) {
  TUNEC_ASSIGN_OR_RETURN(MatmulKernel kernel, compileMatmul(jit, w, c, {}, b.data()));
  Timing t = timeRepeated([&] { kernel.run(a.data(), b.data(), out.data()); }, seconds);
  return Measured{c, t};
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
  if (op != "matmul") return fail("tunec bench-op: unknown op '" + op + "' (matmul)");
  MatmulWorkload w;
  for (auto [flag, field, required] : {std::tuple{"m", &w.m, true},
                                       {"n", &w.n, true},
                                       {"k", &w.k, true},
                                       {"batch", &w.batch, false}}) {
    auto v = intFlag(*args, flag, 1, required);
    if (!v) return fail(v.error().message());
    *field = *v;
  }
  auto threads = intFlag(*args, "threads", 1, false);
  if (!threads) return fail(threads.error().message());
  w.threads = static_cast<int>(*threads);
  w.transA = args->has("trans-a");
  w.transB = args->has("trans-b");
  w.constantB = !args->has("runtime-b");
  Isa isa = hostIsa();
  if (args->has("isa")) {
    auto parsed = parseIsa(args->get("isa"));
    if (!parsed) return fail("tunec bench-op: --isa must be avx512 or avx2");
    if (!hostSupports(*parsed))
      return fail("tunec bench-op: this CPU cannot run " + args->get("isa") + " code");
    isa = *parsed;
  }
  double seconds = std::atof(args->get("seconds", "1.0").c_str());
  if (seconds <= 0) return fail("tunec bench-op: --seconds must be positive");

  auto jit = Jit::create();
  if (!jit) return fail(jit.error().message());
  auto peak = measureFmaPeak(**jit, isa);
  if (!peak) return fail(peak.error().message());

  MatmulConfig config = defaultMatmulConfig(w, isa, hostInfo());
  std::string source = "default";
  if (args->has("config")) {
    nlohmann::json j = nlohmann::json::parse(args->get("config"), nullptr, false);
    if (j.is_discarded()) return fail("tunec bench-op: --config is not valid JSON");
    auto parsed = MatmulConfig::fromJson(j);
    if (!parsed) return fail(parsed.error().message());
    config = *parsed;
    source = "given";
  }
  if (Status s = validateMatmulConfig(w, config); !s) return fail(s.error().message());

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> a(static_cast<size_t>(w.batch * w.m * w.k)),
      b(static_cast<size_t>((w.broadcastB ? 1 : w.batch) * w.k * w.n)),
      out(static_cast<size_t>(w.batch * w.m * w.n));
  for (auto& x : a) x = dist(rng);
  for (auto& x : b) x = dist(rng);

  if (args->has("sweep")) {
    auto n = intFlag(*args, "sweep", 1, true);
    if (!n) return fail(n.error().message());
    KnobSpace space = matmulKnobSpace(w, isa);
    std::set<std::string> seen{config.toJson().dump()};
    auto best = timeMatmul(**jit, w, config, a, b, out, seconds / 10);
    if (!best) return fail(best.error().message());
    int tried = 1;
    for (int attempt = 0; tried < *n + 1 && attempt < *n * 50; ++attempt) {
      std::vector<nlohmann::json> values;
      for (const Knob& knob : space) values.push_back(knob.values[rng() % knob.values.size()]);
      auto c = matmulConfigFromKnobs(w, isa, values);
      if (!c || !validateMatmulConfig(w, *c) || !seen.insert(c->toJson().dump()).second) continue;
      auto m = timeMatmul(**jit, w, *c, a, b, out, seconds / 10);
      if (!m) return fail(m.error().message());
      ++tried;
      if (m->timing.medianSeconds < best->timing.medianSeconds) best = m;
      if (!args->has("json"))
        std::fprintf(stderr, "\rsweep: %d/%lld configs, best %.1f GFLOP/s", tried,
                     static_cast<long long>(*n + 1), w.flops() / best->timing.medianSeconds / 1e9);
    }
    if (!args->has("json")) std::fprintf(stderr, "\n");
    config = best->config;
    source = "best of sweep";
  }
  auto measured = timeMatmul(**jit, w, config, a, b, out, seconds);
  if (!measured) return fail(measured.error().message());
  double gflops = w.flops() / measured->timing.medianSeconds / 1e9;
  double machinePeak = *peak * w.threads;
  if (args->has("json")) {
    nlohmann::json j = {{"workload", w.toJson()},
                        {"config", config.toJson()},
                        {"config_source", source},
                        {"median_ms", measured->timing.medianSeconds * 1e3},
                        {"min_ms", measured->timing.minSeconds * 1e3},
                        {"gflops", gflops},
                        {"peak_gflops", machinePeak},
                        {"percent_of_peak", 100 * gflops / machinePeak}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("workload %s\n", w.toJson().dump().c_str());
  std::printf("config   %s (%s)\n", config.toJson().dump().c_str(), source.c_str());
  std::printf("median %.3f ms, min %.3f ms over %d runs: %.1f GFLOP/s, %.1f%% of the measured peak "
              "(%.1f GFLOP/s x %d thread%s)\n",
              measured->timing.medianSeconds * 1e3, measured->timing.minSeconds * 1e3,
              measured->timing.runs, gflops, 100 * gflops / machinePeak, *peak, w.threads,
              w.threads == 1 ? "" : "s");
  return 0;
}

} // namespace tunec::cli
