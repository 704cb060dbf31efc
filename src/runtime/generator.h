// Generation with a decoder exported with its K/V cache as inputs and outputs (the form of
// optimum, torch.onnx and ONNX Runtime's generation builder: input_ids, attention_mask and
// position_ids when the model has them, past_key_values.N.key/value -> logits,
// present.N.key/value): a prompt is appended in runs of at most the sequence bound, then one
// token at a time, the caller choosing each from the logits. Used by the C API
// (tunec_generator_*), `tunec generate` and Python's tunec.Generator.
//
// A model whose caches are kept in place (ModelPlan::caches) has one buffer per K/V, in the cache
// layout, given as both its past and its present: a run writes only its new rows, and nothing is
// allocated or copied per token. A model without (compiled before them, or whose presents another
// op reads) has two buffers per K/V that swap each run, the past copied into the present.
#pragma once

#include "runtime/model_plan.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tunec::rt {

/// What a generator needs of a model. `run` runs it at the given input shapes, writing the output
/// shapes; `cached` (only when `caches` is not empty) means the caches' pasts and presents are
/// buffers in their layout (ModelExecutor::run).
struct GenerationModel {
  std::vector<IoSpec> inputs, outputs; ///< shapes at their bounds
  /// Per input, per dimension: "" when static, else its extent's name.
  std::vector<std::vector<std::string>> inputDimNames;
  std::vector<KvCache> caches;
  std::function<Status(const void* const*, const std::vector<std::vector<int64_t>>&, void* const*,
                       std::vector<std::vector<int64_t>>&, bool cached)>
      run;
};

class Generator {
public:
  /// The error names what the model lacks for generation (input_ids, a past for each present,
  /// symbolic lengths) or the input no generation fills.
  static Expected<std::unique_ptr<Generator>> create(GenerationModel model);
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;
  ~Generator();

  /// Appends `count` (>= 1) tokens to the context, in runs of at most the model's sequence bound,
  /// and returns the logits of the last one (vocab() floats, valid until the next call). Nothing
  /// runs when the tokens do not fit (the error says how many the model holds); a failed run
  /// leaves the context as it was before that run.
  Expected<const float*> append(const int64_t* ids, int64_t count);
  /// Greedy generation: appends `prompt`, then the token of the largest logit, `tokens` times in
  /// all; returns the tokens chosen, and each append's milliseconds in `stepMs` when given. The
  /// error says which token's run failed.
  Expected<std::vector<int64_t>> greedy(const std::vector<int64_t>& prompt, int64_t tokens,
                                        std::vector<double>* stepMs = nullptr);
  /// Tokens in the context.
  int64_t length() const { return length_; }
  /// The most tokens the context can hold: the past's bound (what the last run may read) plus
  /// that run's one token.
  int64_t capacity() const { return pastBound_ + 1; }
  int64_t vocab() const { return vocab_; }
  /// Whether the K/V caches are kept in place (no copy of the past per token).
  bool inPlace() const { return !model_.caches.empty(); }
  /// Empties the context (the buffers are kept).
  void reset();

private:
  Generator() = default;
  struct Pair {
    int input = 0, output = 0, axis = 0;
    bool inPlace = false;
  };
  GenerationModel model_;
  int ids_ = -1, mask_ = -1, positions_ = -1, logits_ = 0;
  std::vector<Pair> pairs_;
  int64_t sequenceBound_ = 0, pastBound_ = 0, maskBound_ = 0, vocab_ = 0, length_ = 0;
  std::vector<std::unique_ptr<uint8_t[], void (*)(void*)>> buffers_;
  std::vector<const void*> in_;
  std::vector<void*> out_;
  std::vector<std::vector<int64_t>> shapes_, outShapes_;
};

/// The past input a present output feeds, by the exporters' names: "present.0.key" (or
/// "present_key_values.0.key") -> "past_key_values.0.key"; "" for any other name.
std::string pastNameOf(const std::string& present);

} // namespace tunec::rt
