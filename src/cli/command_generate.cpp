// `tunec generate`: greedy generation with a decoder exported with past/present K/V: the
// prompt's prefill, then one token per run, each run's presents the next run's past.
#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/flag_values.h"
#include "cli/model_session.h"
#include "ir/tensor.h"

#include <algorithm>
#include <cstdio>
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
    "token, and where the model keeps its K/V caches in place (its compile report says so)\n"
    "each token writes only its own rows of the cache, copying nothing of the past. A prompt\n"
    "longer than the sequence bound is prefilled in several runs. An ONNX model is compiled\n"
    "in memory first (give its --dim bounds).",
    {
        {"prompt-ids", "IDS", "the prompt's token ids, comma-separated (required)"},
        {"tokens", "N", "tokens to generate (default 64)"},
        {"threads", "N", "threads per run (default: the machine's cores)"},
        {"db", "FILE",
         "ONNX models: tuned configs (default: $TUNEC_DB or ./tuning.db if it exists)"},
        {"dim", "NAME=MIN..MAX", kDimFlagHelp, true},
        {"buckets", "NAME=E1,E2,...", kBucketsFlagHelp, true},
        {"input-shape", "NAME=SHAPE", "static shape for a dynamic input", true},
        precisionFlag(),
    },
    1,
    1};

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
  auto generator = openGenerator(*session);
  if (!generator) return fail("tunec generate: " + generator.error().message());
  rt::Generator& g = **generator;
  std::vector<double> ms;
  auto tokens = g.greedy(prompt, *count, &ms);
  if (!tokens) return fail("tunec generate: " + tokens.error().message());
  const std::vector<int64_t>& generated = *tokens;
  std::printf("tokens:");
  for (int64_t t : generated) std::printf(" %lld", static_cast<long long>(t));
  std::printf("\n");
  std::vector<double> decode(ms.begin() + 1, ms.end());
  std::sort(decode.begin(), decode.end());
  std::printf("time to first token %.2f ms (prefill of %zu tokens)", ms[0], prompt.size());
  if (!decode.empty())
    std::printf("; decode %.2f ms per token (median of %zu), %.1f tokens/s",
                decode[decode.size() / 2], decode.size(), 1e3 / decode[decode.size() / 2]);
  std::printf("; %d thread%s; K/V caches %s\n", options->threads, options->threads == 1 ? "" : "s",
              g.inPlace() ? "in place" : "copied each token (the model keeps none in place)");
  return 0;
}

} // namespace tunec::cli
