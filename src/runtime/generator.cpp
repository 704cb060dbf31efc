// The generation loop of runtime/generator.h.
#include "runtime/generator.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace tunec::rt {

std::string pastNameOf(const std::string& present) {
  for (const char* p : {"present_key_values", "present"})
    if (present.rfind(p, 0) == 0) return "past_key_values" + present.substr(std::strlen(p));
  return "";
}

namespace {

int indexOf(const std::vector<IoSpec>& ios, const std::string& name) {
  for (size_t i = 0; i < ios.size(); ++i)
    if (ios[i].name == name) return static_cast<int>(i);
  return -1;
}

} // namespace

Generator::~Generator() = default;

Expected<std::unique_ptr<Generator>> Generator::create(GenerationModel model) {
  std::unique_ptr<Generator> g(new Generator());
  const auto& ins = model.inputs;
  const auto& outs = model.outputs;
  g->ids_ = indexOf(ins, "input_ids");
  g->mask_ = indexOf(ins, "attention_mask");
  g->positions_ = indexOf(ins, "position_ids");
  if (g->ids_ < 0 || ins[static_cast<size_t>(g->ids_)].dtype != DType::I64 ||
      ins[static_cast<size_t>(g->ids_)].shape.size() != 2)
    return makeError("the model has no int64 [batch, sequence] input 'input_ids': it does not ",
                     "look like a decoder export");
  for (int optional : {g->mask_, g->positions_})
    if (optional >= 0 && (ins[static_cast<size_t>(optional)].dtype != DType::I64 ||
                          ins[static_cast<size_t>(optional)].shape.size() != 2))
      return makeError("input '", ins[static_cast<size_t>(optional)].name,
                       "' is not int64 [batch, length], as a decoder export writes it");
  g->logits_ = std::max(indexOf(outs, "logits"), 0);
  const IoSpec& logits = outs.at(static_cast<size_t>(g->logits_));
  if (logits.dtype != DType::F32 || logits.shape.size() < 2)
    return makeError("output '", logits.name, "' is not f32 [..., sequence, vocabulary] logits");
  bool symbolic = false;
  for (const auto& names : model.inputDimNames)
    for (const std::string& name : names) symbolic = symbolic || !name.empty();
  if (!symbolic)
    return makeError("the model has static shapes: compile it with --dim bounds for the sequence ",
                     "and past lengths (e.g. --dim sequence=1..128 --dim past_sequence=0..1024)");
  // The pairs: the caches kept in place, then each other present and the past its name gives.
  for (const KvCache& c : model.caches) g->pairs_.push_back({c.input, c.output, c.axis, true});
  for (size_t o = 0; o < outs.size(); ++o) {
    bool paired = false;
    for (const Pair& p : g->pairs_) paired = paired || p.output == static_cast<int>(o);
    const int in = paired ? -1 : indexOf(ins, pastNameOf(outs[o].name));
    if (in < 0) continue;
    // The past's growing dimension: its last symbolic one (batch is the first).
    int axis = -1;
    const auto& names = model.inputDimNames.at(static_cast<size_t>(in));
    for (size_t d = 1; d < names.size(); ++d)
      if (!names[d].empty()) axis = static_cast<int>(d);
    if (axis < 0 || ins[static_cast<size_t>(in)].shape.size() != outs[o].shape.size())
      return makeError("past input '", ins[static_cast<size_t>(in)].name,
                       "' has no symbolic length to grow along, or not its present's rank");
    g->pairs_.push_back({in, static_cast<int>(o), axis, false});
  }
  if (g->pairs_.empty())
    return makeError("the model has no past/present K/V pairs (past_key_values.N.key -> ",
                     "present.N.key): it cannot carry a context from one run to the next");
  for (size_t i = 0; i < ins.size(); ++i) {
    bool known = static_cast<int>(i) == g->ids_ || static_cast<int>(i) == g->mask_ ||
                 static_cast<int>(i) == g->positions_;
    for (const Pair& p : g->pairs_) known = known || p.input == static_cast<int>(i);
    if (!known)
      return makeError("input '", ins[i].name, "' is none of input_ids, attention_mask, ",
                       "position_ids and a past fed by a present output");
  }
  g->sequenceBound_ = ins[static_cast<size_t>(g->ids_)].shape[1];
  g->pastBound_ = INT64_MAX;
  for (const Pair& p : g->pairs_)
    g->pastBound_ = std::min(g->pastBound_,
                             ins[static_cast<size_t>(p.input)].shape[static_cast<size_t>(p.axis)]);
  g->maskBound_ = g->mask_ >= 0 ? ins[static_cast<size_t>(g->mask_)].shape[1] : INT64_MAX;
  g->vocab_ = logits.shape.back();
  // Buffers at the bounds, allocated once: an input's, an output's, and per pair one buffer in
  // the cache layout (in place) or a second present to swap with.
  auto buffer = [&](int64_t bytes) -> void* {
    size_t size = static_cast<size_t>((std::max<int64_t>(bytes, 64) + 63) / 64 * 64);
    void* p = std::aligned_alloc(64, size);
    if (!p) return nullptr;
    std::memset(p, 0, size);
    g->buffers_.emplace_back(static_cast<uint8_t*>(p), std::free);
    return p;
  };
  for (const IoSpec& io : ins) {
    g->in_.push_back(buffer(io.bytes));
    if (!g->in_.back()) return makeError("out of memory for input '", io.name, "'");
  }
  for (const IoSpec& io : outs) {
    g->out_.push_back(buffer(io.bytes));
    if (!g->out_.back()) return makeError("out of memory for output '", io.name, "'");
  }
  for (const Pair& p : g->pairs_) {
    // In place: the present's buffer (its bound is the cache layout) is the past's too. Else the
    // past starts in a buffer of the present's size, swapped with the present after each run.
    void* b = buffer(outs[static_cast<size_t>(p.output)].bytes);
    if (!b)
      return makeError("out of memory for the cache '", outs[static_cast<size_t>(p.output)].name,
                       "'");
    g->in_[static_cast<size_t>(p.input)] = b;
    if (p.inPlace) g->out_[static_cast<size_t>(p.output)] = b;
  }
  g->model_ = std::move(model);
  g->reset();
  return g;
}

void Generator::reset() {
  length_ = 0;
  shapes_.assign(model_.inputs.size(), {});
  for (size_t i = 0; i < model_.inputs.size(); ++i) {
    // The symbolic dimensions at 1 (the batch) until the run sets them; a past's length at 0.
    shapes_[i] = model_.inputs[i].shape;
    const auto& names = model_.inputDimNames[i];
    for (size_t d = 0; d < names.size(); ++d)
      if (!names[d].empty()) shapes_[i][d] = 1;
  }
  for (const Pair& p : pairs_)
    shapes_[static_cast<size_t>(p.input)][static_cast<size_t>(p.axis)] = 0;
}

Expected<const float*> Generator::append(const int64_t* ids, int64_t count) {
  if (count < 1 || !ids) return makeError("append needs at least one token");
  if (length_ + count - 1 > pastBound_)
    return makeError("the context holds ", length_, " tokens and ", count,
                     " more do not fit: ", "the model was compiled for a past of at most ",
                     pastBound_,
                     " tokens (recompile with a larger --dim bound for the past length)");
  if (length_ + count > maskBound_)
    return makeError("the context of ", length_ + count, " tokens passes the bound of ",
                     "attention_mask (", maskBound_, ")");
  const float* last = nullptr;
  for (int64_t at = 0; at < count;) {
    const int64_t n = std::min(count - at, sequenceBound_);
    auto set = [&](int input, int64_t length) { shapes_[static_cast<size_t>(input)][1] = length; };
    set(ids_, n);
    std::memcpy(const_cast<void*>(in_[static_cast<size_t>(ids_)]), ids + at,
                static_cast<size_t>(n) * sizeof(int64_t));
    if (mask_ >= 0) {
      set(mask_, length_ + n);
      auto* m = static_cast<int64_t*>(const_cast<void*>(in_[static_cast<size_t>(mask_)]));
      std::fill(m, m + length_ + n, int64_t{1});
    }
    if (positions_ >= 0) {
      set(positions_, n);
      auto* p = static_cast<int64_t*>(const_cast<void*>(in_[static_cast<size_t>(positions_)]));
      for (int64_t i = 0; i < n; ++i) p[i] = length_ + i;
    }
    TUNEC_TRY(model_.run(in_.data(), shapes_, out_.data(), outShapes_, !model_.caches.empty()));
    length_ += n;
    at += n;
    for (const Pair& p : pairs_) {
      auto& shape = shapes_[static_cast<size_t>(p.input)];
      shape[static_cast<size_t>(p.axis)] = length_;
      if (p.inPlace) continue;
      // The present becomes the past: the two buffers swap.
      const void* past = in_[static_cast<size_t>(p.input)];
      in_[static_cast<size_t>(p.input)] = out_[static_cast<size_t>(p.output)];
      out_[static_cast<size_t>(p.output)] = const_cast<void*>(past);
      shape = outShapes_[static_cast<size_t>(p.output)];
    }
    const std::vector<int64_t>& ls = outShapes_[static_cast<size_t>(logits_)];
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < ls.size(); ++d) rows *= ls[d];
    last = static_cast<const float*>(out_[static_cast<size_t>(logits_)]) + (rows - 1) * vocab_;
  }
  return last;
}

Expected<std::vector<int64_t>> Generator::greedy(const std::vector<int64_t>& prompt, int64_t tokens,
                                                 std::vector<double>* stepMs) {
  std::vector<int64_t> next = prompt, chosen;
  for (int64_t step = 0; step < tokens; ++step) {
    auto start = std::chrono::steady_clock::now();
    auto logits = append(next.data(), static_cast<int64_t>(next.size()));
    if (stepMs)
      stepMs->push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
    if (!logits) return makeError("token ", step, ": ", logits.error().message());
    next = {std::max_element(*logits, *logits + vocab_) - *logits};
    chosen.push_back(next[0]);
  }
  return chosen;
}

} // namespace tunec::rt
