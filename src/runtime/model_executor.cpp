// The step loop of a compiled model.
#include "runtime/model_executor.h"

#include "runtime/parallel.h"
#include "runtime/weight_only.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace tunec::rt {

namespace {

struct ThreadLimit {
  explicit ThreadLimit(int threads) { tunec_set_thread_limit(threads); }
  ~ThreadLimit() { tunec_set_thread_limit(0); }
};

// A ChannelRuns step's ints: the header, then whole triples that stay within a pixel.
// An IntegerConv step's parameters (its ints, whose count the decoder checks first).
IntegerConvParams integerConvParams(const Step& s) {
  IntegerConvParams p{};
  if (s.ints.size() == sizeof(p) / sizeof(int64_t)) std::memcpy(&p, s.ints.data(), sizeof(p));
  return p;
}

// A Resample step's ints: its parameters, then outLength x taps indices within the input's
// length; its floats: a weight per index when it sums.
bool validResample(const Step& s) {
  constexpr size_t kHead = sizeof(ResampleParams) / sizeof(int64_t);
  ResampleParams p{};
  if (s.ints.size() < kHead) return false;
  std::memcpy(&p, s.ints.data(), sizeof(p));
  if (!p.valid() || p.outLength > (int64_t{1} << 32)) return false;
  const auto count = static_cast<size_t>(p.outLength * p.taps);
  if (s.ints.size() != kHead + count || s.floats.size() != (p.taps == 1 ? 0 : count)) return false;
  return std::all_of(s.ints.begin() + kHead, s.ints.end(),
                     [&](int64_t i) { return i >= 0 && i < p.inLength; });
}

bool validChannelRuns(const Step& s) {
  const std::vector<int64_t>& v = s.ints;
  if (v.size() < 4 || v[0] < 0 || v[1] < 1 || v[2] < 1 || v[3] < 0 ||
      v[3] > static_cast<int64_t>((v.size() - 4) / 3) ||
      v.size() != 4 + 3 * static_cast<size_t>(v[3]))
    return false;
  for (size_t r = 4; r < v.size(); r += 3) {
    int64_t src = v[r], dst = v[r + 1], len = v[r + 2];
    if (src < 0 || dst < 0 || len < 0 || src > v[1] || dst > v[2] || len > v[1] - src ||
        len > v[2] - dst)
      return false;
  }
  return true;
}

// Rows of a K/V cache between its dense form at the run's shape `dims` and its cache layout (the
// same, `capacity` rows along `axis`): the tensor is `outer` blocks of `rows` rows of `rowBytes`.
void copyCacheRows(const KvCache& c, const std::vector<int64_t>& dims, DType dtype,
                   const uint8_t* from, uint8_t* to, bool intoCache) {
  int64_t outer = 1, rowBytes = static_cast<int64_t>(dtypeSize(dtype));
  for (size_t d = 0; d < dims.size(); ++d) {
    if (static_cast<int32_t>(d) < c.axis) outer *= dims[d];
    if (static_cast<int32_t>(d) > c.axis) rowBytes *= dims[d];
  }
  const int64_t rows = dims[static_cast<size_t>(c.axis)];
  const auto block = static_cast<size_t>(rows * rowBytes);
  if (block == 0) return;
  for (int64_t i = 0; i < outer; ++i) {
    const int64_t dense = i * rows * rowBytes, cache = i * c.capacity * rowBytes;
    std::memcpy(to + (intoCache ? cache : dense), from + (intoCache ? dense : cache), block);
  }
}

// A copy onto itself (the same address, offsets and strides): a past already in place in its
// present (one buffer for both, a cached run) needs no copy.
bool copiesOntoItself(const TypedProgram& p, const void* out, const void* in) {
  return out == in && p.op == TypedOp::Cast && p.in.size() == 1 && p.in[0] == p.out &&
         p.inOffsets[0] == p.outOffset && p.inStrides[0] == p.outStrides;
}

} // namespace

Expected<RunExtents> bindRunExtents(const ModelPlan& plan,
                                    const std::vector<std::vector<int64_t>>& inputShapes) {
  if (inputShapes.size() != plan.inputs.size())
    return makeError("the model has ", plan.inputs.size(), " inputs, ", inputShapes.size(),
                     " shapes were given");
  RunExtents run;
  const size_t unbound = static_cast<size_t>(-1);            // no input has bound it yet
  std::vector<size_t> boundBy(plan.symbols.size(), unbound); // the input that bound it
  run.symbols.assign(plan.symbols.size(), 0);
  auto dimName = [&](size_t i, size_t d) {
    return "dimension " + std::to_string(d) + " of input '" + plan.inputs[i].name + "'";
  };
  // First the dimensions that are one symbol: they bind it.
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const IoSpec& io = plan.inputs[i];
    const std::vector<int64_t>& dims = inputShapes[i];
    if (dims.size() != io.shape.size())
      return makeError("input '", io.name, "' has rank ", dims.size(), ", the model takes rank ",
                       io.shape.size());
    for (size_t d = 0; d < dims.size(); ++d) {
      int32_t e = io.dimExtents.empty() ? -1 : io.dimExtents[d];
      const Extent* extent = e < 0 ? nullptr : &plan.extents[static_cast<size_t>(e)];
      if (!extent || extent->terms.size() != 1 || extent->terms[0].coefficient != 1 ||
          extent->terms[0].symbols.size() != 1)
        continue;
      auto sym = static_cast<size_t>(extent->terms[0].symbols[0]);
      const SymbolSpec& spec = plan.symbols[sym];
      if (dims[d] < spec.min || dims[d] > spec.max)
        return makeError(dimName(i, d), " is ", dims[d], ", outside the bounds of '", spec.name,
                         "' (", spec.min, "..", spec.max, ") it was compiled for");
      if (boundBy[sym] != unbound && run.symbols[sym] != dims[d])
        return makeError(dimName(i, d), " is ", dims[d], ", but '", spec.name, "' is ",
                         run.symbols[sym], " in input '", plan.inputs[boundBy[sym]].name,
                         "': the inputs disagree on it");
      boundBy[sym] = i;
      run.symbols[sym] = dims[d];
    }
  }
  for (size_t sym = 0; sym < plan.symbols.size(); ++sym)
    if (boundBy[sym] == unbound)
      return makeError("no input dimension is '", plan.symbols[sym].name,
                       "' alone: its value cannot be read from the input shapes");
  run.extents.reserve(plan.extents.size());
  for (const Extent& e : plan.extents) run.extents.push_back(e.evaluate(run.symbols));
  // Then every dimension must be what the symbols make it.
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    std::vector<int64_t> want = runShape(plan.inputs[i], run);
    for (size_t d = 0; d < want.size(); ++d)
      if (inputShapes[i][d] != want[d])
        return makeError(dimName(i, d), " is ", inputShapes[i][d], ", the model takes ", want[d]);
  }
  // And every output within the buffer its bounds size (the K/V caches' layouts too).
  for (const IoSpec& io : plan.outputs)
    for (size_t d = 0; d < io.dimExtents.size(); ++d) {
      if (io.dimExtents[d] < 0) continue;
      const int64_t v = run.extents[static_cast<size_t>(io.dimExtents[d])];
      if (v < 0 || v > io.shape[d])
        return makeError("corrupt model plan: output '", io.name, "' has ", v, " along dimension ",
                         d, " in this run, past its bound ", io.shape[d]);
    }
  return run;
}

StepCost stepCostAt(const Step& step, const RunExtents& run) {
  StepCost c{step.flops, step.bf16Flops, step.int8Ops, step.bytes};
  if (step.runTimeInts.empty() && step.when.extent < 0) return c;
  std::vector<int64_t> ints = step.ints;
  for (const RunTimeInt& r : step.runTimeInts)
    if (r.position >= 0 && r.position < std::ssize(ints) && r.extent >= 0 &&
        r.extent < std::ssize(run.extents))
      ints[static_cast<size_t>(r.position)] = run.extents[static_cast<size_t>(r.extent)];
  auto d = [](int64_t v) { return static_cast<double>(v); };
  if (step.kind == StepKind::WeightOnlyMatmul && ints.size() >= 5) {
    const WeightOnlyShape shape{ints[1], ints[2], ints[3], ints[4]};
    const bool q8 = ints.size() == 6 && ints[5] == 1;
    c.flops = 2 * d(ints[0]) * d(ints[1]) * d(ints[2]);
    c.int8Ops = q8 ? c.flops : 0; // vpdpbusd's products
    c.bytes =
        (q8 ? shape.packedBytesQ8() : shape.packedBytes()) + 4 * ints[0] * (ints[1] + ints[2]);
    return c;
  }
  if (step.kind == StepKind::BatchedMatmul && ints.size() >= 6) {
    const int64_t batch = ints[0], m = ints[1], n = ints[2], k = ints[3];
    c.flops = 2 * d(batch) * d(m) * d(n) * d(k);
    c.bytes = 4 * (batch * m * n + (ints[4] ? batch : 1) * m * k + (ints[5] ? batch : 1) * k * n);
    return c;
  }
  if (step.kind == StepKind::Kernel && step.runTimeInts.empty() && step.when.extent >= 0 &&
      step.when.extent < std::ssize(run.extents) && step.when.max > 0) {
    const double share = d(run.extents[static_cast<size_t>(step.when.extent)]) / d(step.when.max);
    c.flops *= share;
    c.bf16Flops *= share;
    c.int8Ops *= share;
    return c;
  }
  return {};
}

std::vector<int64_t> runShape(const IoSpec& io, const RunExtents& run) {
  std::vector<int64_t> dims = io.shape;
  for (size_t d = 0; d < io.dimExtents.size(); ++d)
    if (io.dimExtents[d] >= 0) dims[d] = run.extents[static_cast<size_t>(io.dimExtents[d])];
  return dims;
}

Expected<std::unique_ptr<ModelExecutor>> ModelExecutor::create(ParsedModel model,
                                                               std::vector<void*> kernels,
                                                               int threads,
                                                               std::shared_ptr<void> keepAlive) {
  if (threads < 1) return makeError("the thread count must be at least 1, not ", threads);
  if (static_cast<int64_t>(kernels.size()) != model.plan.kernelCount)
    return makeError("the model has ", kernels.size(), " kernels, its plan names ",
                     model.plan.kernelCount);
  std::unique_ptr<ModelExecutor> ex(new ModelExecutor());
  ex->threads_ = threads;
  ex->keepAlive_ = std::move(keepAlive);
  for (void* k : kernels) ex->kernels_.push_back(reinterpret_cast<KernelFn>(k));
  for (const Step& s : model.plan.steps) {
    if (s.kind == StepKind::Elementwise) {
      TUNEC_ASSIGN_OR_RETURN(EwProgram p, EwProgram::decode(s));
      ex->programs_.push_back(std::move(p));
    } else {
      ex->programs_.emplace_back();
    }
    if (s.kind == StepKind::Typed) {
      TUNEC_ASSIGN_OR_RETURN(TypedProgram p, TypedProgram::decode(s));
      ex->typed_.push_back(std::move(p));
    } else {
      ex->typed_.emplace_back();
    }
    size_t need = s.kind == StepKind::Kernel             ? static_cast<size_t>(kArgSlots)
                  : s.kind == StepKind::Softmax          ? 2
                  : s.kind == StepKind::LayerNorm        ? 6
                  : s.kind == StepKind::Pool             ? 2
                  : s.kind == StepKind::Gather           ? 3
                  : s.kind == StepKind::Reduce           ? 2
                  : s.kind == StepKind::ArgReduce        ? 2
                  : s.kind == StepKind::GatherElements   ? 3
                  : s.kind == StepKind::ChannelRuns      ? 2
                  : s.kind == StepKind::BatchedMatmul    ? 3
                  : s.kind == StepKind::WeightOnlyMatmul ? 3
                  : s.kind == StepKind::Trilu            ? 2
                  : s.kind == StepKind::IntegerMatmul    ? (s.tensors.size() == 4 ? 4 : 3)
                  : s.kind == StepKind::IntegerConv      ? (s.tensors.size() == 4 ? 4 : 3)
                  : s.kind == StepKind::Resample         ? 2
                                                         : s.tensors.size();
    size_t ints = s.kind == StepKind::Softmax            ? 4
                  : s.kind == StepKind::Reduce           ? 3
                  : s.kind == StepKind::ArgReduce        ? 6
                  : s.kind == StepKind::LayerNorm        ? (s.ints.size() == 3 ? 3 : 2)
                  : s.kind == StepKind::Pool             ? sizeof(PoolParams) / sizeof(int64_t)
                  : s.kind == StepKind::Gather           ? 6
                  : s.kind == StepKind::BatchedMatmul    ? (s.ints.size() == 7 ? 7 : 6)
                  : s.kind == StepKind::WeightOnlyMatmul ? (s.ints.size() == 6 ? 6 : 5)
                  : s.kind == StepKind::IntegerMatmul    ? 6
                  : s.kind == StepKind::IntegerConv ? sizeof(IntegerConvParams) / sizeof(int64_t)
                                                    : s.ints.size();
    if (s.tensors.size() != need || s.ints.size() != ints ||
        (s.kind == StepKind::LayerNorm && s.floats.size() != 1) || static_cast<int>(s.kind) < 0 ||
        s.kind > StepKind::Resample || (s.kind == StepKind::Resample && !validResample(s)) ||
        (s.kind == StepKind::Trilu &&
         (s.ints.size() != 6 || s.ints[0] < 0 || s.ints[1] < 0 || s.ints[2] < 0 ||
          (s.ints[5] != 1 && s.ints[5] != 2 && s.ints[5] != 4 && s.ints[5] != 8))) ||
        (s.kind == StepKind::WeightOnlyMatmul &&
         (s.ints[0] < 0 || !WeightOnlyShape{s.ints[1], s.ints[2], s.ints[3], s.ints[4]}.valid() ||
          s.ints[1] > (int64_t{1} << 24) || s.ints[2] > (int64_t{1} << 24) ||
          (s.ints.size() == 6 &&
           (s.ints[5] < 0 || s.ints[5] > 1 || (s.ints[5] && s.ints[4] > 256))))) ||
        (s.kind == StepKind::IntegerConv && !integerConvParams(s).valid()) ||
        ((s.kind == StepKind::BatchedMatmul || s.kind == StepKind::IntegerMatmul) &&
         std::any_of(s.ints.begin(), s.ints.end(), [](int64_t v) { return v < 0; })) ||
        (s.kind == StepKind::ChannelRuns && !validChannelRuns(s)) ||
        (s.kind == StepKind::GatherElements &&
         (s.ints.size() < 4 || s.ints[0] < 1 ||
          s.ints.size() != static_cast<size_t>(4 + 2 * s.ints[0]) || s.ints[1] < 0 ||
          s.ints[1] >= s.ints[0])) ||
        (s.kind == StepKind::Softmax && (s.ints[3] < 0 || s.ints[3] > 2)) ||
        (s.kind == StepKind::ArgReduce &&
         (s.ints[5] < 0 || s.ints[5] > static_cast<int64_t>(kLastDType))) ||
        (s.kind == StepKind::Reduce && (s.ints[2] < 0 || s.ints[2] > 9)))
      return makeError("corrupt model plan: step '", s.label, "' has the wrong operands");
  }
  ex->model_ = std::move(model);
  // The tensors that are a cache's past or present (a dense run points them at its arena copy).
  const ModelPlan& plan = ex->model_.plan;
  for (size_t t = 0; t < plan.tensors.size(); ++t)
    for (size_t c = 0; c < plan.caches.size(); ++c) {
      const TensorRef& ref = plan.tensors[t];
      if ((ref.region == Region::Input && ref.offset == plan.caches[c].input) ||
          (ref.region == Region::Output && ref.offset == plan.caches[c].output))
        ex->cacheTensors_.emplace_back(t, c);
    }
  // One arena at load, touched then (takeArena): the first run is not the one that pays for it.
  auto arena = ex->takeArena();
  if (!arena)
    return makeError("out of memory: the arena needs ", ex->model_.plan.arenaBytes, " bytes");
  ex->giveArena(std::move(arena));
  return ex;
}

std::unique_ptr<uint8_t, void (*)(void*)> ModelExecutor::takeArena() {
  {
    std::lock_guard lock(mutex_);
    if (!arenas_.empty()) {
      auto arena = std::move(arenas_.back());
      arenas_.pop_back();
      return arena;
    }
  }
  size_t bytes =
      static_cast<size_t>((std::max<int64_t>(model_.plan.arenaBytes, 64) + 63) / 64 * 64);
  std::unique_ptr<uint8_t, void (*)(void*)> arena{
      static_cast<uint8_t*>(std::aligned_alloc(64, bytes)), std::free};
  // Touched once, here: a symbolic model's runs use more of the bound's arena as their extents
  // grow (a decoder's past), and the resident set is the bound's from the first run on (the
  // first arena is taken at load). The K/V caches' copies for dense runs lie at its end and are
  // left untouched: a generation keeps its caches in its own buffers and never reads them.
  size_t touched = bytes;
  for (const KvCache& c : model_.plan.caches)
    touched = std::min(touched, static_cast<size_t>(c.scratch));
  if (arena) std::memset(arena.get(), 0, touched);
  return arena;
}

void ModelExecutor::giveArena(std::unique_ptr<uint8_t, void (*)(void*)> arena) {
  std::lock_guard lock(mutex_);
  arenas_.push_back(std::move(arena));
}

Status ModelExecutor::run(const void* const* inputs, void* const* outputs,
                          std::vector<double>* stepSeconds, const RunExtents* extents,
                          bool cached) {
  if ((!model_.plan.symbols.empty() || !model_.plan.extents.empty()) && !extents)
    return makeError("the model has symbolic dimensions: give the run's input shapes ",
                     "(tunec_model_run_shaped)");
  if (cached && model_.plan.caches.empty())
    return makeError("the model keeps no K/V cache in place: run it with dense buffers");
  auto arena = takeArena();
  if (!arena) return makeError("out of memory: the arena needs ", model_.plan.arenaBytes, " bytes");
  std::vector<void*> pointers(model_.plan.tensors.size());
  for (size_t t = 0; t < pointers.size(); ++t) {
    const TensorRef& ref = model_.plan.tensors[t];
    switch (ref.region) {
    case Region::Arena:
      pointers[t] = arena.get() + ref.offset;
      break;
    case Region::Constant:
      pointers[t] = const_cast<uint8_t*>(model_.constants) + ref.offset;
      break;
    case Region::Input:
      pointers[t] = const_cast<void*>(inputs[ref.offset]);
      break;
    case Region::Output:
      pointers[t] = outputs[ref.offset];
      break;
    }
  }
  ThreadLimit limit(threads_);
  Status status;
  if (stepSeconds) stepSeconds->resize(model_.plan.steps.size(), 0.0);
  // Dense pasts and presents: through the arena's copy of each cache, in its layout.
  if (!cached)
    for (const KvCache& c : model_.plan.caches) {
      const IoSpec& past = model_.plan.inputs[static_cast<size_t>(c.input)];
      uint8_t* scratch = arena.get() + c.scratch;
      copyCacheRows(c, runShape(past, *extents), past.dtype,
                    static_cast<const uint8_t*>(inputs[c.input]), scratch, true);
    }
  if (!cached)
    for (auto [tensor, cache] : cacheTensors_)
      pointers[tensor] = arena.get() + model_.plan.caches[cache].scratch;
  if (model_.plan.imageExtent < 0) {
    status = runSteps(pointers, extents, stepSeconds);
    if (!cached && status)
      for (const KvCache& c : model_.plan.caches) {
        const IoSpec& present = model_.plan.outputs[static_cast<size_t>(c.output)];
        copyCacheRows(c, runShape(present, *extents), present.dtype, arena.get() + c.scratch,
                      static_cast<uint8_t*>(outputs[c.output]), false);
      }
  } else {
    // A batch of independent images: the plan of one image, image by image, its inputs and
    // outputs one image apart and the arena reused.
    const std::vector<void*> base = pointers;
    const int64_t images = extents->extents[static_cast<size_t>(model_.plan.imageExtent)];
    for (int64_t image = 0; image < images && status; ++image) {
      for (size_t t = 0; t < pointers.size(); ++t)
        if (base[t])
          pointers[t] = static_cast<uint8_t*>(base[t]) + image * model_.plan.tensors[t].imageStride;
      status = runSteps(pointers, extents, stepSeconds);
    }
  }
  giveArena(std::move(arena));
  return status;
}

Status ModelExecutor::runShaped(const void* const* inputs,
                                const std::vector<std::vector<int64_t>>& inputShapes,
                                void* const* outputs,
                                std::vector<std::vector<int64_t>>* outputShapes,
                                std::vector<double>* stepSeconds, bool cached) {
  TUNEC_ASSIGN_OR_RETURN(RunExtents extents, bindRunExtents(model_.plan, inputShapes));
  TUNEC_TRY(run(inputs, outputs, stepSeconds, &extents, cached));
  if (outputShapes) {
    outputShapes->resize(model_.plan.outputs.size());
    for (size_t o = 0; o < outputShapes->size(); ++o)
      (*outputShapes)[o] = runShape(model_.plan.outputs[o], extents);
  }
  return {};
}

Status ModelExecutor::runSteps(std::vector<void*>& pointers, const RunExtents* extents,
                               std::vector<double>* stepSeconds) {
  Status status;
  const int64_t* runExtents = extents ? extents->extents.data() : nullptr;
  for (size_t s = 0; s < model_.plan.steps.size() && status; ++s) {
    auto start = std::chrono::steady_clock::now();
    const Step& step = model_.plan.steps[s];
    if (step.when.extent >= 0) { // a size bucket's variant: only for runs in its bucket
      int64_t v = extents->extents[static_cast<size_t>(step.when.extent)];
      if (v < step.when.min || v > step.when.max) continue;
    }
    if (step.runTimeInts.empty()) {
      status = runStep(step, programs_[s], typed_[s], pointers, runExtents);
    } else {
      // The step at the run's extents: its ints patched, its program decoded from them.
      Step patched = step;
      for (const RunTimeInt& r : step.runTimeInts)
        patched.ints[static_cast<size_t>(r.position)] =
            extents->extents[static_cast<size_t>(r.extent)];
      EwProgram program;
      TypedProgram typed;
      if (step.kind == StepKind::Elementwise) {
        auto decoded = EwProgram::decode(patched);
        if (!decoded) {
          status = decoded.error();
          break;
        }
        program = std::move(*decoded);
      } else if (step.kind == StepKind::Typed) {
        auto decoded = TypedProgram::decode(patched);
        if (!decoded) {
          status = decoded.error();
          break;
        }
        typed = std::move(*decoded);
      }
      status = runStep(patched, program, typed, pointers, runExtents);
    }
    if (stepSeconds)
      (*stepSeconds)[s] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return status;
}

Status ModelExecutor::runStep(const Step& s, const EwProgram& program, const TypedProgram& typed,
                              std::vector<void*>& pointers, const int64_t* extents) {
  auto ptr = [&](size_t operand) -> void* {
    int32_t t = s.tensors[operand];
    return t < 0 ? nullptr : pointers[static_cast<size_t>(t)];
  };
  auto f = [&](size_t operand) { return static_cast<float*>(ptr(operand)); };
  switch (s.kind) {
  case StepKind::Kernel: {
    // The step's tensors are the kernel's argument slots in order (kernel_args.h).
    void* slots[kArgSlots] = {};
    for (size_t i = 0; i < s.tensors.size(); ++i) slots[i] = ptr(i);
    KernelArgs args;
    std::memcpy(&args, slots, sizeof(args));
    args.extents = extents;
    kernels_[static_cast<size_t>(s.kernel)](&args);
    return {};
  }
  case StepKind::Elementwise: {
    const float* in[8];
    for (size_t i = 1; i < s.tensors.size(); ++i) in[i - 1] = f(i);
    runElementwise(program, f(0), in, threads_);
    return {};
  }
  case StepKind::Softmax:
    runSoftmax(f(1), f(0), s.ints[0], s.ints[1], s.ints[2], static_cast<int>(s.ints[3]), threads_);
    return {};
  case StepKind::Typed: {
    const void* in[3] = {};
    for (size_t i = 1; i < s.tensors.size() && i <= 3; ++i) in[i - 1] = ptr(i);
    if (copiesOntoItself(typed, ptr(0), in[0])) return {};
    return runTyped(typed, ptr(0), in, s.label);
  }
  case StepKind::GatherElements: {
    auto rank = static_cast<size_t>(s.ints[0]);
    std::vector<int64_t> dataDims(s.ints.begin() + 4, s.ints.begin() + 4 + static_cast<long>(rank));
    std::vector<int64_t> indexDims(s.ints.begin() + 4 + static_cast<long>(rank), s.ints.end());
    return runGatherElements(ptr(1), ptr(2), ptr(0), dataDims, indexDims, s.ints[1], s.ints[2],
                             s.ints[3], s.label);
  }
  case StepKind::ArgReduce:
    runArgReduce(ptr(1), static_cast<int64_t*>(ptr(0)), s.ints[0], s.ints[1], s.ints[2],
                 s.ints[3] != 0, s.ints[4] != 0, static_cast<DType>(s.ints[5]));
    return {};
  case StepKind::Reduce:
    runReduce(f(1), f(0), s.ints[0], s.ints[1], static_cast<ReduceKind>(s.ints[2]), threads_);
    return {};
  case StepKind::LayerNorm:
    runLayerNorm(f(1), f(0), f(2), f(3), f(4), f(5), s.ints[0], s.ints[1], s.floats[0], threads_,
                 s.ints.size() > 2 && s.ints[2] == 1);
    return {};
  case StepKind::Pool: {
    PoolParams p;
    std::memcpy(&p, s.ints.data(), sizeof(p));
    runPool(p, ptr(1), ptr(0), threads_);
    return {};
  }
  case StepKind::ChannelRuns:
    runChannelRuns(static_cast<const uint8_t*>(ptr(1)), static_cast<uint8_t*>(ptr(0)), s.ints[0],
                   s.ints[1], s.ints[2], s.ints.data() + 4, s.ints[3], threads_);
    return {};
  case StepKind::Trilu:
    runTrilu(static_cast<const uint8_t*>(ptr(1)), static_cast<uint8_t*>(ptr(0)), s.ints[0],
             s.ints[1], s.ints[2], s.ints[3], s.ints[4] != 0, s.ints[5]);
    return {};
  case StepKind::WeightOnlyMatmul:
    if (s.ints.size() == 6 && s.ints[5] == 1)
      runWeightOnlyMatmulQ8(f(1), static_cast<const uint8_t*>(ptr(2)), f(0), s.ints[0],
                            WeightOnlyShape{s.ints[1], s.ints[2], s.ints[3], s.ints[4]}, threads_);
    else
      runWeightOnlyMatmul(f(1), static_cast<const uint8_t*>(ptr(2)), f(0), s.ints[0],
                          WeightOnlyShape{s.ints[1], s.ints[2], s.ints[3], s.ints[4]}, threads_);
    return {};
  case StepKind::IntegerMatmul:
    // A fourth tensor: B packed at compile time (a shared constant of int16 values).
    runIntegerMatmul(static_cast<const int32_t*>(ptr(1)), static_cast<const int32_t*>(ptr(2)),
                     static_cast<int32_t*>(ptr(0)), s.ints[0], s.ints[1], s.ints[2], s.ints[3],
                     s.ints[4], s.ints[5], threads_, RowsIsa::Auto,
                     s.tensors.size() == 4 ? static_cast<const int32_t*>(ptr(3)) : nullptr);
    return {};
  case StepKind::Resample: {
    ResampleParams p;
    std::memcpy(&p, s.ints.data(), sizeof(p));
    runResample(p, s.ints.data() + sizeof(p) / sizeof(int64_t),
                s.floats.empty() ? nullptr : s.floats.data(), static_cast<const uint8_t*>(ptr(1)),
                static_cast<uint8_t*>(ptr(0)), threads_);
    return {};
  }
  case StepKind::IntegerConv:
    // A fourth tensor: the weights packed at compile time (one group, int16 values).
    runIntegerConv(static_cast<const int32_t*>(ptr(1)), static_cast<const int32_t*>(ptr(2)),
                   static_cast<int32_t*>(ptr(0)), integerConvParams(s), threads_, RowsIsa::Auto,
                   s.tensors.size() == 4 ? static_cast<const int32_t*>(ptr(3)) : nullptr);
    return {};
  case StepKind::BatchedMatmul:
    runBatchedMatmul(f(1), f(2), f(0), s.ints[0], s.ints[1], s.ints[2], s.ints[3], s.ints[4],
                     s.ints[5], threads_, s.ints.size() == 7 && s.ints[6] == 1);
    return {};
  case StepKind::Gather: {
    Status st = runGather(static_cast<const uint8_t*>(ptr(1)), static_cast<const uint8_t*>(ptr(2)),
                          static_cast<uint8_t*>(ptr(0)), s.ints[0], s.ints[1], s.ints[2], s.ints[3],
                          s.ints[4], s.ints[5]);
    if (!st) return st.error().withContext(s.label);
    return {};
  }
  }
  return makeError("corrupt model plan: unknown step kind in '", s.label, "'");
}

} // namespace tunec::rt
