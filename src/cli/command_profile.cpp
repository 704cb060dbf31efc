// `tunec profile`: every step of a model against the machine's roofline.
#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/model_session.h"
#include "cli/op_flags.h"
#include "cli/roofline.h"
#include "codegen/peak_probe.h"
#include "support/atomic_file.h"
#include "support/bandwidth_probe.h"
#include "support/terminal_text.h"
#include "templates/isa.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>

namespace tunec::cli {

namespace {

const CommandSpec kProfileSpec{
    "profile",
    "tunec profile model.so|MODEL.onnx [--threads T] [--runs N] [--html FILE] [--json]",
    "Times every step of the model (the median of --runs profiled runs on random inputs) and\n"
    "places it against this machine's roofs, measured once at the start: the fp32 FMA peak of\n"
    "the model's ISA for generated kernels (half of it for loop kernels; for bf16 and int8\n"
    "kernels the peak of their dot product: vdpbf16ps or tdpbf16ps, vpdpbusd, vpmaddubsw or\n"
    "tdpbusd, int8 in GOP/s), and the bandwidths\n"
    "of a STREAM-like triad from memory and from the last-level cache (the roof of a step\n"
    "whose operands fit it, but for weight-only matmuls whose weights together pass it: each\n"
    "run streams them from memory), all for T threads. A model of symbolic dimensions is\n"
    "costed at the profiled run's shapes (--input-shape). Per step: time, GFLOP/s, GB/s, the\n"
    "percentage of each roof and the bound it is closest to; for the model, the steps' sum\n"
    "against the median whole run and against the sum of the bounds. --html writes a page with\n"
    "an SVG roofline and a sortable table (one self-contained file).",
    {
        {"runs", "N", "profiled runs, and as many whole runs, alternating (default 30)"},
        {"warmup", "N", "untimed runs first (default 3)"},
        {"threads", "N", "threads per run (default: the machine's cores)"},
        {"html", "FILE", "also write the page to FILE"},
        {"json", "", "print the profile as one JSON object instead of the table"},
        {"db", "FILE",
         "ONNX models: tuned configs (default: $TUNEC_DB or ./tuning.db if it exists)"},
        {"input-shape", "NAME=SHAPE",
         "static shape for a dynamic input, e.g. x=1x3x224x224; for a model.so of symbolic "
         "dimensions, the shape of the profiled runs' random input (within its bounds)",
         true},
        {"dim", "NAME=MIN..MAX", kDimFlagHelp, true},
        {"buckets", "NAME=E1,E2,...", kBucketsFlagHelp, true},
        precisionFlag(),
    },
    1,
    1};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

int commandProfile(const std::vector<std::string>& argv) {
  auto args = Arguments::parse(kProfileSpec, argv);
  if (!args) return fail(args.error().message());
  if (args->helpRequested()) {
    std::fputs(helpText(kProfileSpec).c_str(), stdout);
    return 0;
  }
  auto runs = intFlag(*args, "runs", 30, false, 1, "tunec profile", 1'000'000);
  auto warmup = intFlag(*args, "warmup", 3, false, 0, "tunec profile", 1'000'000);
  if (!runs) return fail(runs.error().message());
  if (!warmup) return fail(warmup.error().message());
  auto options = timingSessionOptions(*args);
  if (!options) return fail(options.error().message());
  const int threads = options->threads;
  const std::string path = args->positionals()[0];
  auto session = openModel(path, *options);
  if (!session) return fail(session.error().message());

  // The roofs, once.
  Roofs roofs;
  const CpuFeatures& uses = session->requiredFeatures;
  // The vector ISA and the dot products the model's code was compiled with (its plan says).
  const Isa isa = uses.has(CpuFeature::avx512f) ? Isa::Avx512 : Isa::Avx2;
  const bool amx = uses.has(CpuFeature::amx);
  roofs.isa = std::string(isaInfo(isa).name);
  roofs.threads = threads;
  auto jit = Jit::create(thisMachine());
  if (!jit) return fail(jit.error().message());
  auto fma = measureFmaPeak(**jit, isa);
  if (!fma) return fail(fma.error().message());
  int cores = std::min(threads, thisMachine().cores);
  roofs.kernelGflops = *fma * cores;
  roofs.loopGflops = roofs.kernelGflops / 2;
  bool bf16 = std::any_of(session->steps.begin(), session->steps.end(),
                          [](const StepInfo& s) { return s.bf16Flops > 0; });
  if (bf16) { // the roof of the model's bf16 kernels: AMX's tdpbf16ps where it has AMX kernels
    auto dot = amx ? measureAmxPeak(**jit, false) : measureBf16DotPeak(**jit);
    if (!dot) return fail(path + ": " + dot.error().message());
    roofs.bf16Gflops = *dot * cores;
    roofs.bf16Instruction = amx ? "tdpbf16ps" : "vdpbf16ps";
  }
  bool int8 = std::any_of(session->steps.begin(), session->steps.end(),
                          [](const StepInfo& s) { return s.int8Ops > 0; });
  if (int8) { // the roof of the int8 kernels: tdpbusd with AMX, vpdpbusd with VNNI, else AVX2's
    const Isa vector = uses.has(CpuFeature::avx512vnni) ? Isa::Avx512 : Isa::Avx2;
    auto dot = amx ? measureAmxPeak(**jit, true) : measureInt8DotPeak(**jit, vector);
    if (!dot) return fail(path + ": " + dot.error().message());
    roofs.int8Gops = *dot * cores;
    roofs.int8Instruction = amx ? "tdpbusd" : vector == Isa::Avx512 ? "vpdpbusd" : "vpmaddubsw";
  }
  roofs.bandwidthGBs = measureBandwidth(threads, thisMachine().l3 * 4);
  roofs.cacheBytes = thisMachine().l3;
  roofs.cacheGBs = measureBandwidth(threads, thisMachine().l3 / 2);

  RunBuffers buffers = randomRunBuffers(*session, 7);
  // A model of symbolic dimensions: --input-shape is also the profiled run's shape.
  if (session->symbolic())
    if (Status s = useInputShapes(*session, options->inputDims.shapes, buffers); !s)
      return fail(s.error().message());
  for (int i = 0; i < *warmup; ++i)
    if (Status s = runBuffers(*session, buffers); !s) return fail(s.error().message());
  // Whole runs and profiled runs alternate, so that both see the same machine.
  std::vector<double> whole;
  std::vector<std::vector<double>> perStep(session->steps.size());
  for (int r = 0; r < *runs; ++r) {
    auto start = std::chrono::steady_clock::now();
    if (Status s = runBuffers(*session, buffers); !s) return fail(s.error().message());
    whole.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    std::vector<double> seconds(session->steps.size(), 0.0);
    if (Status s = runBuffers(*session, buffers, &seconds); !s) return fail(s.error().message());
    for (size_t i = 0; i < seconds.size(); ++i) perStep[i].push_back(seconds[i]);
  }
  std::vector<double> medians;
  for (auto& v : perStep) medians.push_back(median(v));
  // A symbolic model's step costs at the profiled run's shapes (its bounds' are recorded).
  std::vector<StepInfo> steps = session->steps;
  if (session->symbolic() && session->stepsAt) {
    auto at = session->stepsAt(buffers.inputShapes);
    if (!at) return fail(at.error().message());
    steps = std::move(*at);
  }
  Profile profile = boundSteps(steps, medians, roofs);
  profile.runSeconds = median(whole);
  profile.runs = static_cast<int>(*runs);

  if (args->has("html")) {
    std::string page = profileHtml(profile, path);
    Status st = writeFileAtomically(args->get("html"),
                                    [&](std::ostream& os) -> Status {
                                      os << page;
                                      return {};
                                    },
                                    {path});
    if (!st) return fail(st.error().message());
  }
  if (args->has("json"))
    std::printf("%s\n", profileJson(profile, path).dump(2).c_str());
  else
    std::fputs(forTerminal(profileText(profile, path)).c_str(), stdout);
  if (args->has("html")) std::fprintf(stderr, "wrote %s\n", args->get("html").c_str());
  return 0;
}

} // namespace tunec::cli
