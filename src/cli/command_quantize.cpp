// `tunec quantize`: post-training static quantization of an ONNX model into the QDQ form,
// calibrated on sample inputs run by the reference executor.
#include "cli/agreement.h"
#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/flag_values.h"
#include "cli/load_model.h"
#include "frontend/onnx_quantize.h"
#include "frontend/tensor_io.h"
#include "reference/reference.h"
#include "support/terminal_text.h"
#include "templates/isa.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <random>

namespace tunec::cli {

namespace {

const CommandSpec kQuantizeSpec{
    "quantize",
    "tunec quantize MODEL.onnx -o MODEL.int8.onnx (--calibration DIR | --random N | --dynamic | "
    "--weights-only int4|int8) [flags]",
    "Post-training static quantization: writes a standard QDQ ONNX model (QuantizeLinear and\n"
    "DequantizeLinear around every Conv, MatMul and Gemm with constant weights) that tunec and\n"
    "any ONNX runtime run. Activation ranges come from running the model on calibration\n"
    "samples: --calibration DIR takes every .npy file in DIR as one sample of the model's\n"
    "input (a model with several inputs: one subdirectory per sample, holding INPUT.npy per\n"
    "input); --random N draws N samples uniform in [-1, 1] for a quick start. Weights are int8,\n"
    "symmetric, per tensor or (--per-channel) per output channel.",
    {
        {"o", "FILE", "the quantized model to write (required)"},
        {"calibration", "DIR", "calibration samples (.npy files, or one folder per sample)"},
        {"random", "N", "calibrate on N random samples instead"},
        {"method", "minmax|percentile|entropy",
         "calibration method: minmax (the observed range, default), percentile (the range of "
         "the middle --percentile of the values; outliers saturate) or entropy (the clipping "
         "threshold that loses the least information, by the KL divergence of the clipped "
         "histogram from its quantization, as TensorRT calibrates)"},
        {"percentile", "P",
         "--method percentile: the share of each activation's values its range keeps, in "
         "(50, 100] (default 99.99)"},
        {"weights-only", "int4|int8",
         "weight-only quantization (decoder LLMs): every MatMul with constant 2-d weights "
         "becomes ONNX Runtime's com.microsoft MatMulNBits, 4- or 8-bit codes in blocks of "
         "--block along K with a scale and zero point each; activations stay float, no "
         "calibration samples"},
        {"block", "N",
         "--weights-only: the block of K per scale, a power of two >= 16 (default 32)"},
        {"accuracy-level", "4|0",
         "--weights-only: the MatMulNBits accuracy_level written: 4 (default) lets tunec and "
         "ONNX Runtime quantize the activations to int8 per block (tunec where the CPU has "
         "AVX512-VNNI), 0 keeps them f32"},
        {"dynamic", "",
         "dynamic quantization (transformer encoders): MatMul/Gemm activations quantized per "
         "run by DynamicQuantizeLinear, no calibration samples; convolutions stay float"},
        {"accuracy-samples", "N",
         "after writing, run the quantized model and the fp32 one on the first N calibration "
         "samples (reference executor) and print how far their outputs are (default 4; 0 "
         "skips it)"},
        {"skip-nonfinite", "",
         "skip a calibration sample holding a NaN or infinity, or one the fp32 model answers "
         "with one (3e38 pixels overflow), with a warning naming it (by default it is an "
         "error)"},
        {"per-channel", "", "one weight scale per output channel"},
        {"weight-bits", "8|7",
         "weight range: 8 bits ([-127, 127], default) or 7 ([-64, 64]): AVX2's int8 kernel "
         "(vpmaddubsw) takes 7-bit weights as they are and halves 8-bit ones at compile time"},
        {"activations", "u8|s8", "activation type: u8 asymmetric (default) or s8 symmetric"},
        {"input-shape", "NAME=SHAPE", "static shape for a dynamic input, e.g. x=1x3x224x224", true},
        {"dim", "NAME=MIN..MAX", kDimFlagHelp, true},
    },
    1,
    1};

// Every Conv/MatMul/Gemm left in float, with its reason.
void printKeptFloat(const std::vector<std::string>& keptFloat) {
  for (const std::string& layer : keptFloat)
    std::fprintf(stderr, "tunec: note: %s\n", forTerminal(layer).c_str());
}

// One calibration sample: a tensor per input name, and where it came from (for messages).
struct Sample {
  std::map<std::string, Tensor> inputs;
  std::string source;
};

// The calibration samples.
Expected<std::vector<Sample>> loadSamples(const Arguments& args, const Graph& g) {
  std::vector<Sample> samples;
  if (args.has("random")) {
    TUNEC_ASSIGN_OR_RETURN(int64_t n, parseInteger("random", args.get("random"), 1, 100'000));
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    for (int64_t s = 0; s < n; ++s) {
      std::map<std::string, Tensor> sample;
      for (ValueId in : g.inputs()) {
        const Value& v = g.value(in);
        Tensor t(v.type.dtype, v.type.shape);
        for (int64_t i = 0; i < t.numel(); ++i) t.setDouble(i, dist(rng));
        sample.emplace(v.name, std::move(t));
      }
      samples.push_back({std::move(sample), "random sample " + std::to_string(s + 1)});
    }
    return samples;
  }
  std::string dir = args.get("calibration");
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return makeError("--calibration ", dir, " is not a directory");
  std::vector<std::filesystem::path> entries;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  for (const auto& p : entries) {
    std::map<std::string, Tensor> sample;
    if (g.inputs().size() == 1 && p.extension() == ".npy") {
      TUNEC_ASSIGN_OR_RETURN(Tensor t, readTensorFile(p.string()));
      sample.emplace(g.value(g.inputs()[0]).name, std::move(t));
    } else if (std::filesystem::is_directory(p, ec)) {
      for (ValueId in : g.inputs()) {
        std::string name = g.value(in).name;
        TUNEC_ASSIGN_OR_RETURN(Tensor t, readTensorFile((p / (name + ".npy")).string()));
        sample.emplace(name, std::move(t));
      }
    } else {
      continue;
    }
    samples.push_back({std::move(sample), p.string()});
  }
  if (samples.empty())
    return makeError("--calibration ", dir, " holds no samples (.npy files, or one folder per ",
                     "sample with INPUT.npy for each input)");
  return samples;
}

} // namespace

int commandQuantize(const std::vector<std::string>& argv) {
  auto args = Arguments::parse(kQuantizeSpec, argv);
  if (!args) return fail(args.error().message());
  if (args->helpRequested()) {
    std::fputs(helpText(kQuantizeSpec).c_str(), stdout);
    return 0;
  }
  const std::string& model = args->positionals()[0];
  if (!args->has("o")) return fail("tunec quantize: say where to write the model with -o FILE");
  std::error_code same;
  if (std::filesystem::equivalent(model, args->get("o"), same))
    return fail("tunec quantize: -o " + args->get("o") + " is the input model; write another file");
  if (args->has("weights-only")) {
    const std::string kind = args->get("weights-only");
    if (kind != "int4" && kind != "int8")
      return fail("tunec quantize: --weights-only must be int4 or int8, not " + kind);
    if (args->has("calibration") || args->has("random") || args->has("dynamic"))
      return fail("tunec quantize: --weights-only keeps activations float and takes no "
                  "calibration samples; drop --calibration/--random/--dynamic");
    auto block = parseInteger("block", args->get("block", "32"), 16, 1 << 16);
    if (!block) return fail("tunec quantize: " + block.error().message());
    const std::string level = args->get("accuracy-level", "4");
    if (level != "4" && level != "0")
      return fail("tunec quantize: --accuracy-level must be 4 or 0, not " + level);
    std::vector<std::string> keptFloat;
    auto quantized = writeWeightOnlyModel(model, args->get("o"), kind == "int4" ? 4 : 8,
                                          static_cast<int>(*block), &keptFloat, std::stoi(level));
    if (!quantized) return fail(quantized.error().message());
    printKeptFloat(keptFloat);
    std::printf("quantized %d MatMul nodes to %s weights in blocks of %lld (com.microsoft "
                "MatMulNBits) -> %s\n",
                *quantized, kind.c_str(), static_cast<long long>(*block), args->get("o").c_str());
    return 0;
  }
  if (args->has("block") || args->has("accuracy-level"))
    return fail("tunec quantize: --block and --accuracy-level go with --weights-only");
  if (args->has("dynamic") && (args->has("calibration") || args->has("random")))
    return fail("tunec quantize: --dynamic quantizes activations per run and takes no "
                "calibration samples; drop --calibration/--random");
  if (!args->has("dynamic") && args->has("calibration") == args->has("random"))
    return fail("tunec quantize: give the calibration samples with --calibration DIR, or "
                "--random N for random ones (or --dynamic for per-run activation scales)");
  QuantizeOptions options;
  options.perChannel = args->has("per-channel");
  std::string bits = args->get("weight-bits", "8");
  if (bits != "8" && bits != "7") return fail("tunec quantize: --weight-bits must be 8 or 7");
  options.weightLimit = bits == "8" ? 127 : kAvx2Int8WeightLimit;
  std::string act = args->get("activations", "u8");
  if (act != "u8" && act != "s8") return fail("tunec quantize: --activations must be u8 or s8");
  options.activations = act == "u8" ? DType::U8 : DType::I8;
  options.method = args->get("method", "minmax");
  if (options.method != "minmax" && options.method != "percentile" && options.method != "entropy")
    return fail("tunec quantize: --method " + options.method +
                " is not one of minmax, percentile, entropy");
  if (args->has("percentile")) {
    if (options.method != "percentile")
      return fail("tunec quantize: --percentile needs --method percentile");
    auto p = parseNumber("percentile", args->get("percentile"), 50, 100);
    if (!p || *p == 50)
      return fail("tunec quantize: " +
                  (p ? std::string("--percentile must be above 50, not 50") : p.error().message()));
    options.percentile = *p;
  }

  auto checkSamples = parseInteger("accuracy-samples", args->get("accuracy-samples", "4"), 0, 1000);
  if (!checkSamples) return fail("tunec quantize: " + checkSamples.error().message());

  auto plan = planQuantization(model);
  if (!plan) return fail(plan.error().message());
  if (args->has("dynamic")) {
    if (act != "u8") return fail("tunec quantize: --dynamic quantizes activations to u8");
    options.dynamic = true;
    std::vector<std::string> keptFloat;
    auto quantized = writeQuantizedModel(model, args->get("o"), {}, options, &keptFloat);
    if (!quantized) return fail(quantized.error().message());
    printKeptFloat(keptFloat);
    std::printf("quantized %d of %d Conv/MatMul/Gemm nodes (dynamic: MatMul/Gemm activations "
                "quantized per run to u8, %s weights) -> %s\n",
                *quantized, plan->nodes, options.perChannel ? "per-channel" : "per-tensor",
                args->get("o").c_str());
    return 0;
  }
  auto shapes = parseInputDims(args->getAll("input-shape"), args->getAll("dim"));
  if (!shapes) return fail(shapes.error().message());
  auto graph = loadModel(model, *shapes);
  if (!graph) return fail(graph.error().message());
  // The activations to calibrate become extra outputs of the graph the reference runs.
  std::vector<std::string> observed;
  for (const std::string& name : plan->activations)
    for (size_t v = 0; v < graph->values().size(); ++v)
      if (graph->values()[v].name == name && !graph->values()[v].constant) {
        graph->addOutput(static_cast<ValueId>(v));
        observed.push_back(name);
        break;
      }
  auto samples = loadSamples(*args, *graph);
  if (!samples) return fail("tunec quantize: " + samples.error().message());
  size_t firstObserved = graph->outputs().size() - observed.size();
  RangeCalibrator calibrator(options);
  // The first samples and the fp32 model's outputs on them, for the accuracy report.
  std::vector<std::vector<Tensor>> checkInputs, checkOutputs;
  size_t used = 0;
  for (size_t s = 0; s < samples->size(); ++s) {
    const Sample& sample = (*samples)[s];
    std::vector<Tensor> inputs;
    std::string nonFinite;
    for (ValueId in : graph->inputs()) {
      auto it = sample.inputs.find(graph->value(in).name);
      const TensorType& want = graph->value(in).type;
      if (it == sample.inputs.end() || it->second.dtype() != want.dtype ||
          it->second.shape() != want.shape)
        return fail("tunec quantize: calibration sample " + sample.source +
                    " does not give input '" + graph->value(in).name + "' as " +
                    std::string(dtypeName(want.dtype)) + "[" + want.shape.toString() + "]" +
                    (it == sample.inputs.end() ? std::string()
                                               : ": it holds " + it->second.typeString() +
                                                     "; save the sample with that type and shape"));
      for (int64_t i = 0; i < it->second.numel() && nonFinite.empty(); ++i)
        if (!std::isfinite(it->second.getDouble(i)))
          nonFinite = "input '" + it->first + "' has " +
                      (std::isnan(it->second.getDouble(i)) ? "a NaN" : "an infinity") +
                      " at element " + std::to_string(i);
      inputs.push_back(it->second);
    }
    // A NaN or infinity in the sample, or in the fp32 model's answer to it (3e38 pixels
    // overflow), leaves the ranges it reaches undefined, or so wide that every other sample
    // quantizes to a few codes: an error, or skipped.
    Expected<std::vector<Tensor>> outs = std::vector<Tensor>{};
    if (nonFinite.empty()) {
      outs = runReference(*graph, inputs);
      if (!outs) return fail(outs.error().message());
      for (size_t o = 0; o < firstObserved && nonFinite.empty(); ++o)
        for (int64_t i = 0; i < (*outs)[o].numel() && nonFinite.empty(); ++i)
          if (!std::isfinite((*outs)[o].getDouble(i)))
            nonFinite = "the fp32 model's output '" + graph->value(graph->outputs()[o]).name +
                        "' is " + (std::isnan((*outs)[o].getDouble(i)) ? "NaN" : "infinite") +
                        " at element " + std::to_string(i) + " on it";
    }
    if (!nonFinite.empty()) {
      if (!args->has("skip-nonfinite"))
        return fail("tunec quantize: calibration sample " + sample.source + ": " + nonFinite +
                    "; fix or remove the sample, or give --skip-nonfinite to skip such samples");
      std::fprintf(stderr, "\ntunec: warning: skipped calibration sample %s: %s\n",
                   forTerminal(sample.source).c_str(), forTerminal(nonFinite).c_str());
      continue;
    }
    ++used;
    for (size_t o = 0; o < observed.size(); ++o)
      calibrator.observe(observed[o], (*outs)[firstObserved + o]);
    if (static_cast<int64_t>(checkInputs.size()) < *checkSamples) {
      checkInputs.push_back(inputs);
      checkOutputs.emplace_back(outs->begin(), outs->begin() + static_cast<int64_t>(firstObserved));
    }
    std::fprintf(stderr, "\rcalibrating: %zu/%zu samples", s + 1, samples->size());
  }
  std::fprintf(stderr, "\n");
  if (used == 0)
    return fail("tunec quantize: every calibration sample was skipped (non-finite inputs); give "
                "samples with finite values");
  std::map<std::string, std::pair<double, double>> ranges = calibrator.ranges();
  for (const std::string& name : observed)
    if (!ranges.count(name))
      std::fprintf(stderr,
                   "tunec: warning: activation '%s' had no finite value in any sample, so it has "
                   "no range: the layers reading it stay fp32\n",
                   forTerminal(name).c_str());
  std::vector<std::string> keptFloat;
  auto quantized = writeQuantizedModel(model, args->get("o"), ranges, options, &keptFloat);
  if (!quantized) return fail(quantized.error().message());
  printKeptFloat(keptFloat);
  char method[48] = "";
  if (options.method == "percentile")
    std::snprintf(method, sizeof(method), " (percentile %g)", options.percentile);
  if (options.method == "entropy") std::snprintf(method, sizeof(method), " (entropy)");
  std::printf("quantized %d of %d Conv/MatMul/Gemm nodes (%zu activations calibrated on %zu "
              "samples%s, %s activations, %s weights) -> %s\n",
              *quantized, plan->nodes, ranges.size(), used, method, act.c_str(),
              options.perChannel ? "per-channel" : "per-tensor", args->get("o").c_str());
  if (checkInputs.empty()) return 0;
  // How far the quantized model is from the fp32 one, on the samples it was calibrated on.
  auto written = loadModel(args->get("o"), *shapes);
  if (!written) return fail(written.error().message());
  std::vector<Agreement> agree(firstObserved);
  for (size_t s = 0; s < checkInputs.size(); ++s) {
    auto outs = runReference(*written, checkInputs[s]);
    if (!outs) return fail(outs.error().message());
    for (size_t o = 0; o < agree.size() && o < outs->size(); ++o)
      agree[o].add((*outs)[o], checkOutputs[s][o]);
    std::fprintf(stderr, "\rchecking: %zu/%zu samples", s + 1, checkInputs.size());
  }
  std::fprintf(stderr, "\n");
  std::printf("against the fp32 model on %zu calibration samples (reference executor):\n",
              checkInputs.size());
  for (size_t o = 0; o < agree.size(); ++o)
    std::printf("  %-24s %s\n", forTerminal(graph->value(graph->outputs()[o]).name).c_str(),
                agree[o].text().c_str());
  return 0;
}

} // namespace tunec::cli
