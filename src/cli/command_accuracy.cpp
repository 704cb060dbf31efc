// `tunec accuracy`: how far a compiled model's outputs are from a reference: the reference
// executor (double precision) running the same model, or another model (--against: the fp32
// original of a quantized model), on the same random inputs.
#include "cli/agreement.h"
#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/flag_values.h"
#include "cli/load_model.h"
#include "cli/model_session.h"
#include "reference/reference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

namespace tunec::cli {

namespace {

const CommandSpec kAccuracySpec{
    "accuracy",
    "tunec accuracy MODEL [--against ORIGINAL.onnx] [--random N] [flags]",
    "Runs MODEL (an ONNX model, compiled in memory, or a model.so) and a reference on the same\n"
    "random inputs, and prints for each output the relative L2 error, the largest absolute\n"
    "error and the top-1 agreement (the argmax over the last axis). The reference is the\n"
    "reference executor (double precision) running ORIGINAL.onnx, e.g. the fp32 model a\n"
    "quantized one was made from, or MODEL itself when it is ONNX and --against is not given.",
    {
        {"against", "FILE", "the reference model (default: MODEL, run by the reference executor)"},
        {"random", "N", "inputs: N random samples (default 4)"},
        {"threads", "N", "threads of the compiled model (default: the machine's cores)"},
        {"input-shape", "NAME=SHAPE", "static shape for a dynamic input, e.g. x=1x3x224x224", true},
        {"dim", "NAME=MIN..MAX", kDimFlagHelp, true},
        {"buckets", "NAME=E1,E2,...", kBucketsFlagHelp, true},
        precisionFlag(),
    },
    1,
    1};

} // namespace

int commandAccuracy(const std::vector<std::string>& argv) {
  auto args = Arguments::parse(kAccuracySpec, argv);
  if (!args) return fail(args.error().message());
  if (args->helpRequested()) {
    std::fputs(helpText(kAccuracySpec).c_str(), stdout);
    return 0;
  }
  const std::string& model = args->positionals()[0];
  std::string against = args->get("against", model);
  auto samples = parseInteger("random", args->get("random", "4"), 1, 100'000);
  if (!samples) return fail("tunec accuracy: " + samples.error().message());
  auto shapes =
      parseInputDims(args->getAll("input-shape"), args->getAll("dim"), args->getAll("buckets"));
  if (!shapes) return fail(shapes.error().message());
  SessionOptions options;
  options.inputDims = *shapes;
  auto precision = precisionFromArgs(*args);
  if (!precision) return fail(precision.error().message());
  options.precision = *precision;
  auto threads = args->has("threads") ? parseThreads(args->get("threads")) : defaultThreads();
  if (!threads) return fail(threads.error().message());
  options.threads = *threads;
  auto session = openModel(model, options);
  if (!session) return fail(session.error().message());
  auto reference = loadModel(against, *shapes);
  if (!reference) return fail(reference.error().message());
  const Graph& g = *reference;
  if (g.inputs().size() != session->inputs.size() || g.outputs().size() != session->outputs.size())
    return fail("tunec accuracy: " + model + " and " + against +
                " do not have the same inputs and outputs");
  std::mt19937 rng(11);
  std::vector<Agreement> agree(session->outputs.size());
  for (int64_t s = 0; s < *samples; ++s) {
    std::vector<Tensor> inputs;
    std::vector<const void*> in;
    for (size_t i = 0; i < session->inputs.size(); ++i) {
      const rt::IoSpec& io = session->inputs[i];
      const TensorType& want = g.value(g.inputs()[i]).type;
      if (want.dtype != io.dtype || want.shape.dims() != io.shape)
        return fail("tunec accuracy: input '" + io.name + "' differs between " + model + " and " +
                    against);
      inputs.push_back(randomInput(io, rng));
    }
    for (const Tensor& t : inputs) in.push_back(t.data());
    std::vector<Tensor> outputs;
    std::vector<void*> out;
    for (const rt::IoSpec& io : session->outputs) outputs.emplace_back(io.dtype, Shape(io.shape));
    for (Tensor& t : outputs) out.push_back(t.data());
    if (Status st = session->run(in.data(), out.data()); !st) return fail(st.error().message());
    auto want = runReference(g, inputs);
    if (!want) return fail(want.error().message());
    for (size_t o = 0; o < outputs.size(); ++o) {
      if ((*want)[o].shape() != outputs[o].shape())
        return fail("tunec accuracy: output '" + session->outputs[o].name + "' differs in shape");
      agree[o].add(outputs[o], (*want)[o]);
    }
  }
  std::printf("%s against %s (reference executor), %d random samples:\n", model.c_str(),
              against.c_str(), static_cast<int>(*samples));
  for (size_t o = 0; o < agree.size(); ++o)
    std::printf("  %-24s %s\n", session->outputs[o].name.c_str(), agree[o].text().c_str());
  return 0;
}

} // namespace tunec::cli
