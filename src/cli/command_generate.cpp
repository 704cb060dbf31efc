// `tunec generate`: greedy generation with a decoder exported with past/present K/V: the
// prompt's prefill, then one token per run, each run's presents the next run's past.
#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/flag_values.h"
#include "cli/model_session.h"
#include "ir/tensor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

namespace tunec::cli {

namespace {

const CommandSpec kGenerateSpec{
    "generate",
    "tunec generate model.so|MODEL.onnx --prompt-ids 1,2,3 [--tokens 64] [--threads N]",
    "Greedy generation with a decoder exported with its K/V cache as inputs and outputs (the\n"
    "form of optimum and torch.onnx exports: input_ids, attention_mask and position_ids when the\n"
    "model has them, past_key_values.N.key/value -> logits, present.N.key/value). The prompt is\n"
    "prefilled in one run, then each run takes the last token chosen (the largest logit) with the\n"
    "presents of the run before as the past. Prints the tokens, the time to the first token\n"
    "and the decode rate. The buffers are the bounds' and reused: nothing is allocated per\n"
    "token. An ONNX model is compiled in memory first (give its --dim bounds).",
    {
        {"prompt-ids", "IDS", "the prompt's token ids, comma-separated (required)"},
        {"tokens", "N", "tokens to generate (default 64)"},
        {"threads", "N", "threads per run (default: the machine's cores)"},
        {"db", "FILE",
         "ONNX models: tuned configs (default: $TUNEC_DB or ./tuning.db if it exists)"},
        {"dim", "NAME=MIN..MAX", kDimFlagHelp, true},
        {"input-shape", "NAME=SHAPE", "static shape for a dynamic input", true},
        precisionFlag(),
    },
    1,
    1};

// The past input a present output feeds: "present.0.key" (or "present_key_values.0.key") ->
// "past_key_values.0.key".
std::string pastNameOf(const std::string& present) {
  for (const char* p : {"present_key_values", "present"})
    if (present.rfind(p, 0) == 0) return "past_key_values" + present.substr(std::strlen(p));
  return "";
}

int indexOf(const std::vector<rt::IoSpec>& ios, const std::string& name) {
  for (size_t i = 0; i < ios.size(); ++i)
    if (ios[i].name == name) return static_cast<int>(i);
  return -1;
}

} // namespace

int commandGenerate(const std::vector<std::string>& argv) {
  auto args = Arguments::parse(kGenerateSpec, argv);
  if (!args) return fail(args.error().message());
  if (args->helpRequested()) {
    std::fputs(helpText(kGenerateSpec).c_str(), stdout);
    return 0;
  }
  if (!args->has("prompt-ids"))
    return fail("tunec generate: give the prompt with --prompt-ids 1,2,3");
  std::vector<int64_t> prompt;
  {
    const std::string text = args->get("prompt-ids");
    size_t at = 0;
    while (at <= text.size()) {
      size_t comma = text.find(',', at);
      std::string part =
          text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      auto id = parseInteger("prompt-ids", part, 0, (int64_t{1} << 40));
      if (!id) return fail("tunec generate: " + id.error().message());
      prompt.push_back(*id);
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
  }
  auto count = parseInteger("tokens", args->get("tokens", "64"), 1, 1'000'000);
  if (!count) return fail("tunec generate: " + count.error().message());
  auto options = timingSessionOptions(*args);
  if (!options) return fail(options.error().message());
  auto session = openModel(args->positionals()[0], *options);
  if (!session) return fail(session.error().message());
  const ModelSession& s = *session;
  const int ids = indexOf(s.inputs, "input_ids");
  const int mask = indexOf(s.inputs, "attention_mask");
  const int positions = indexOf(s.inputs, "position_ids");
  int logits = indexOf(s.outputs, "logits");
  if (ids < 0 || s.inputs[static_cast<size_t>(ids)].dtype != DType::I64 ||
      s.inputs[static_cast<size_t>(ids)].shape.size() != 2)
    return fail("tunec generate: the model has no int64 [batch, sequence] input 'input_ids': it "
                "does not look like a decoder export");
  if (logits < 0) logits = 0;
  // Each present output and the past input it feeds.
  std::vector<std::pair<int, int>> cache; // (output, input)
  for (size_t o = 0; o < s.outputs.size(); ++o) {
    std::string past = pastNameOf(s.outputs[o].name);
    int in = past.empty() ? -1 : indexOf(s.inputs, past);
    if (in >= 0) cache.emplace_back(static_cast<int>(o), in);
  }
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    bool known = static_cast<int>(i) == ids || static_cast<int>(i) == mask ||
                 static_cast<int>(i) == positions;
    for (auto [o, in] : cache) known = known || in == static_cast<int>(i);
    if (!known)
      return fail("tunec generate: input '" + s.inputs[i].name + "' is none of input_ids, " +
                  "attention_mask, position_ids and a past fed by a present output");
  }
  if (!s.symbolic())
    return fail("tunec generate: the model has static shapes: compile it with --dim bounds for "
                "the sequence and past lengths (e.g. --dim sequence=1..128 --dim "
                "past_sequence=0..1024)");
  // Buffers at the bounds, allocated once; the past and present of each K/V alternate between
  // two buffers of the present's bound (the larger).
  std::vector<Tensor> in, out, pastBuffers;
  // (A past input reads one of its K/V's two buffers, never a buffer of its own.)
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    bool past = false;
    for (auto [o, input] : cache) past = past || input == static_cast<int>(i);
    in.emplace_back(s.inputs[i].dtype, past ? Shape{0} : Shape(s.inputs[i].shape));
  }
  for (const rt::IoSpec& io : s.outputs) out.emplace_back(io.dtype, Shape(io.shape));
  std::vector<const void*> inPtrs;
  std::vector<void*> outPtrs;
  for (Tensor& t : in) inPtrs.push_back(t.data());
  for (Tensor& t : out) outPtrs.push_back(t.data());
  for (auto [o, i] : cache) {
    const rt::IoSpec& present = s.outputs[static_cast<size_t>(o)];
    pastBuffers.emplace_back(present.dtype, Shape(present.shape));
    inPtrs[static_cast<size_t>(i)] = pastBuffers.back().data();
  }
  std::vector<std::vector<int64_t>> shapes(s.inputs.size()), outShapes;
  // The first run's past: of length 0 along the dimension the present grows.
  for (auto [o, i] : cache) {
    shapes[static_cast<size_t>(i)] = s.inputs[static_cast<size_t>(i)].shape;
    const auto& names = s.inputDimNames[static_cast<size_t>(i)];
    for (size_t d = 0; d < names.size(); ++d)
      if (!names[d].empty()) shapes[static_cast<size_t>(i)][d] = d == 0 ? 1 : 0;
  }
  std::vector<int64_t> tokens = prompt, generated;
  int64_t past = 0;
  std::vector<double> ms;
  for (int64_t step = 0; step < *count; ++step) {
    const auto n = static_cast<int64_t>(tokens.size());
    shapes[static_cast<size_t>(ids)] = {1, n};
    std::memcpy(in[static_cast<size_t>(ids)].data(), tokens.data(),
                static_cast<size_t>(n) * sizeof(int64_t));
    if (mask >= 0) {
      shapes[static_cast<size_t>(mask)] = {1, past + n};
      auto* m = in[static_cast<size_t>(mask)].dataAs<int64_t>();
      if (past + n > in[static_cast<size_t>(mask)].numel())
        return fail("tunec generate: " + std::to_string(past + n) +
                    " tokens exceed the model's bound for attention_mask (" +
                    std::to_string(in[static_cast<size_t>(mask)].numel()) + ")");
      std::fill(m, m + past + n, int64_t{1});
    }
    if (positions >= 0) {
      shapes[static_cast<size_t>(positions)] = {1, n};
      auto* p = in[static_cast<size_t>(positions)].dataAs<int64_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = past + i;
    }
    auto start = std::chrono::steady_clock::now();
    Status st = s.runShaped(inPtrs.data(), shapes, outPtrs.data(), outShapes);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
    if (!st)
      return fail("tunec generate: token " + std::to_string(step) + ": " + st.error().message());
    // The largest logit of the last position.
    const std::vector<int64_t>& ls = outShapes[static_cast<size_t>(logits)];
    const int64_t vocab = ls.back();
    const float* row = out[static_cast<size_t>(logits)].dataAs<float>() + (n - 1) * vocab;
    const int64_t next = std::max_element(row, row + vocab) - row;
    generated.push_back(next);
    // The presents become the past: swap their buffers with the inputs'.
    for (size_t c = 0; c < cache.size(); ++c) {
      auto [o, i] = cache[c];
      void* present = outPtrs[static_cast<size_t>(o)];
      outPtrs[static_cast<size_t>(o)] = const_cast<void*>(inPtrs[static_cast<size_t>(i)]);
      inPtrs[static_cast<size_t>(i)] = present;
      shapes[static_cast<size_t>(i)] = outShapes[static_cast<size_t>(o)];
    }
    past += n;
    tokens = {next};
  }
  std::printf("tokens:");
  for (int64_t t : generated) std::printf(" %lld", static_cast<long long>(t));
  std::printf("\n");
  std::vector<double> decode(ms.begin() + 1, ms.end());
  std::sort(decode.begin(), decode.end());
  std::printf("time to first token %.2f ms (prefill of %zu tokens)", ms[0], prompt.size());
  if (!decode.empty())
    std::printf("; decode %.2f ms per token (median of %zu), %.1f tokens/s",
                decode[decode.size() / 2], decode.size(), 1e3 / decode[decode.size() / 2]);
  std::printf("; %d thread%s\n", options->threads, options->threads == 1 ? "" : "s");
  return 0;
}

} // namespace tunec::cli
