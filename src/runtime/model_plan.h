// The plan of a compiled model: its tensors (where each lives), its steps in order, its inputs
// and outputs, and the layout of the blob that carries the plan and the packed constants in
// model.so. Written by the compiler (src/driver), read by the runtime; no LLVM, no IR.
#pragma once

#include "support/dtype.h"
#include "support/error.h"
#include "support/target.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tunec::rt {

/// Where a tensor's bytes are.
enum class Region : int32_t {
  Arena = 0,    ///< offset in bytes into the per-run arena
  Constant = 1, ///< offset in bytes into the constants of the blob
  Input = 2,    ///< `offset` is the model input's index
  Output = 3,   ///< `offset` is the model output's index
};

struct TensorRef {
  Region region = Region::Arena;
  int64_t offset = 0;
  /// In a plan run once per image (ModelPlan::imageExtent): the bytes from one image's copy of
  /// the tensor to the next (0: one copy for every image, a constant).
  int64_t imageStride = 0;
};

enum class StepKind : int32_t {
  Kernel = 0,      ///< a generated kernel: one tensor per slot of its KernelArgs (kernel_args.h)
  Elementwise = 1, ///< a strided elementwise program (light_kernels.h)
  Softmax = 2,     ///< tensors {out, in}; ints {outer, axis, inner, log}
  LayerNorm = 3,   ///< tensors {out, in, scale, bias, mean, inv_std}; ints {rows, cols[, rms 0/1]};
                   ///< floats {eps}
  Pool = 4,        ///< tensors {out, in}; ints: PoolParams
  Gather = 5,      ///< tensors {out, data, indices}; ints {outer, axis, inner, count, elem, index}
  Reduce = 6,      ///< tensors {out, in}; ints {rows, length, ReduceKind}
  Typed = 7,       ///< tensors {out, inputs...}; a typed elementwise op (typed_kernels.h)
  ArgReduce = 8,   ///< tensors {out, in}; ints {outer, len, inner, is_max, select_last, ElemType}
  GatherElements = 9, ///< tensors {out, data, indices}; ints {rank, axis, elem, index, dims, idims}
  /// tensors {out, in}; ints {pixels, in_ld, out_ld, runs, then (src, dst, len) per run}: per
  /// pixel p, in[p*in_ld + src, +len) to out[p*out_ld + dst, +len), 4-byte elements (channel
  /// ranges of NHWC activations: the parts of a Concat that no producer wrote in place).
  ChannelRuns = 10,
  /// tensors {out, a, b}; ints {batch, m, n, k, a_batch_stride, b_batch_stride[, b_transposed]}:
  /// dense f32 row-major C[m, n] = A[m, k] B[k, n] per batch (C's batch stride m * n; B stored
  /// [n, k] when transposed): a matmul of computed operands at run-time extents (the attention
  /// of a symbolic sequence).
  BatchedMatmul = 11,
  /// tensors {out, a, packed weights}; ints {rows, k, n, bits, block[, int8 activations]}:
  /// out = A W^T with W blockwise-quantized in runtime/weight_only.h's layout (the int8
  /// activations' layout when the last int is 1).
  WeightOnlyMatmul = 12,
  /// tensors {out, in}; ints {matrices, rows, cols, k, upper, element bytes}: each matrix's
  /// upper (j - i >= k) or lower (j - i <= k) triangle copied, the rest zero.
  Trilu = 13,
  /// tensors {out, a, b[, b packed]}; ints {batch, m, n, k, a_batch_stride, b_batch_stride}: i32
  /// C[m, n] = A[m, k] B[k, n] per batch, the sums modulo 2^32 (MatMulInteger's exact form); a
  /// shared constant B of int16 values also packed at compile time (rt::packIntegerPairs).
  IntegerMatmul = 14,
  /// tensors {out, x, w[, w packed]}; ints: IntegerConvParams (light_kernels.h): ConvInteger's
  /// exact form; constant weights of one group also packed at compile time.
  IntegerConv = 15,
  /// tensors {out, in}; ints: ResampleParams (light_kernels.h), then outLength x taps input
  /// indices; floats: their weights (none when taps is 1): one axis of a Resize.
  Resample = 16,
};

/// A dynamic dimension of the model's inputs (`--dim NAME=MIN..MAX`).
struct SymbolSpec {
  std::string name;
  int64_t min = 1, max = 1;
};

/// An extent of a run: the sum of `coefficient` times the product of the symbols' values
/// (`symbols` indexes ModelPlan::symbols, a symbol repeated for its power), one term each.
struct ExtentTerm {
  int64_t coefficient = 0;
  std::vector<int32_t> symbols;
};
struct Extent {
  std::vector<ExtentTerm> terms;
  /// The value for the run's symbol values (checked against the symbols at parse time).
  int64_t evaluate(const std::vector<int64_t>& symbolValues) const;
};

/// A step parameter read at run time: the step's `ints[position]` is the run's value of
/// `ModelPlan::extents[extent]` (the plan holds its bound there).
struct RunTimeInt {
  int32_t position = 0;
  int32_t extent = 0;
};

/// A step that runs only when the run's extent is within [min, max]: one size bucket's variant of
/// a kernel (the buckets of one kernel cover its extent's range once).
struct StepGuard {
  int32_t extent = -1; ///< -1: the step always runs
  int64_t min = 0, max = 0;
};

struct Step {
  StepKind kind = StepKind::Kernel;
  std::string label; ///< what it computes, for errors and profiles
  int32_t kernel = -1;
  std::vector<int32_t> tensors; ///< tensor ids, -1 for none
  std::vector<int64_t> ints;
  /// The ints that are extents of the run (their bound in `ints`); empty for a static step.
  std::vector<RunTimeInt> runTimeInts;
  StepGuard when;
  std::vector<float> floats;
  /// For profiles (`tunec profile`): the arithmetic operations of one run (a generated kernel's
  /// workloads, 2mnk each; a loop kernel's one per element and operation; 0 for data movement)
  /// and the bytes of its distinct operands, the traffic it cannot avoid. 0 when unknown (a plan
  /// written before they were recorded).
  double flops = 0;
  int64_t bytes = 0;
  /// Of `flops`, those of bf16 kernels (vdpbf16ps), whose roof is that instruction's peak.
  double bf16Flops = 0;
  /// Of `flops`, the operations of int8 kernels (u8 x s8 multiply-adds, 2 per product), whose
  /// roof is the int8 dot product's peak (vpdpbusd, vpmaddubsw or tdpbusd).
  double int8Ops = 0;
};

/// Reads a step's ints in order; decoders check the total length first, so reads stay in
/// bounds.
class IntCursor {
public:
  IntCursor(const std::vector<int64_t>& ints, size_t at) : ints_(ints), at_(at) {}
  int64_t next() { return ints_[at_++]; }
  std::vector<int64_t> take(int64_t count) {
    auto first = ints_.begin() + static_cast<std::ptrdiff_t>(at_);
    at_ += static_cast<size_t>(count);
    return {first, first + static_cast<std::ptrdiff_t>(count)};
  }

private:
  const std::vector<int64_t>& ints_;
  size_t at_;
};

struct IoSpec {
  std::string name;
  DType dtype = DType::F32;   ///< spelled "f32", "i64", ... in the plan
  std::vector<int64_t> shape; ///< the bound of each dimension
  int64_t bytes = 0;          ///< at the bound
  /// Per dimension, the extent it is (ModelPlan::extents), or -1 for a static one; empty when
  /// every dimension is static.
  std::vector<int32_t> dimExtents;
  bool isStatic() const {
    for (int32_t e : dimExtents)
      if (e >= 0) return false;
    return true;
  }
};

/// A decoder's K/V cache kept in place: model input `input` (the past) and output `output` (the
/// present, Concat(past, the run's new rows) along `axis`) are both stored in the cache layout,
/// the present's bound shape, so `capacity` rows along `axis` whatever the run's length: the
/// steps read and write them at that pitch. A run of dense buffers (ModelExecutor::run) copies the
/// past into the arena's copy of the cache (at byte `scratch`) and the present out of it; a cached
/// run (RunMode::Cached) takes the caller's buffers in the cache layout, and where past and present
/// are one buffer it writes only the run's new rows (the past is not copied).
struct KvCache {
  int32_t input = 0, output = 0, axis = 0;
  int64_t capacity = 0;
  int64_t scratch = 0; ///< arena offset of the dense runs' copy
  int64_t bytes = 0;   ///< of the cache layout: the present's bytes at its bound
};

struct ModelPlan {
  /// 2: element types are numbered as support/dtype.h lists them (f16 and bf16 included), and
  /// kernels take one KernelArgs pointer (runtime/kernel_args.h).
  /// 3: kernel steps have the slots of fused attention's V, of a row normalization's
  /// parameters and of an input channel scale (KernelArgs::values, normParams, channelScale).
  /// 4: ChannelRuns steps, and kernels that read or write channel slices in place.
  /// 5: Pool steps name their tensors' element type (a max pool of u8 or s8 values).
  /// 6: the plan names the CPU features its code requires (`requires`) instead of an ISA string.
  /// 7: a Pool step of u8 or s8 values averages too (a quantized GlobalAveragePool), and kernels
  /// call the runtime's padded copies with a source stride and row phases (tunec_pad_to_nhwc_u8,
  /// tunec_pad_nhwc_f32_to_bf16) and its subsampling copies (AMX convolutions).
  /// 8: kernels call the runtime's packers of k-pair panels in AMX's slots
  /// (tunec_pack_b_f32_to_bf16_slots, tunec_pack_b_bf16_slots: the attention and a computed B on
  /// AMX tiles).
  /// 9: symbolic dimensions: the plan's symbols and extents, inputs and outputs of symbolic
  /// shape, steps with run-time ints and guards (a size bucket's variant), the kernels' slot
  /// of the run's extents (KernelArgs::extents), and BatchedMatmul steps.
  /// 10: plans run once per image (imageExtent, TensorRef::imageStride): a dynamic batch of
  /// independent images.
  /// 11: K/V caches kept in place (ModelPlan::caches), IntegerMatmul's pre-packed B.
  /// 12: Resample steps (Resize).
  static constexpr int kFormatVersion = 12;
  /// Every CPU feature the model's code uses: its vector ISA's, and those of its kernels' dot
  /// products (avx512_bf16, avx512_vnni, amx). A host that lacks one does not load the model.
  CpuFeatures requiredFeatures;
  int threads = 1; ///< the thread count the kernels were compiled for
  std::vector<TensorRef> tensors;
  std::vector<Step> steps;
  std::vector<IoSpec> inputs, outputs;
  /// The symbols of the inputs' dynamic dimensions, and the extents steps and shapes read: the
  /// run binds the symbols from its input shapes and evaluates every extent once.
  std::vector<SymbolSpec> symbols;
  std::vector<Extent> extents;
  /// -1, or the extent of a dynamic batch of independent images (a CNN exported with a dynamic
  /// batch axis): the steps are one image's, compiled for a batch of 1, and run in order once
  /// per image of the run, each tensor at its address + image x TensorRef::imageStride (an
  /// input's or output's image; the arena is reused).
  int32_t imageExtent = -1;
  /// The K/V caches kept in place (a decoder compiled with symbolic past lengths).
  std::vector<KvCache> caches;
  int64_t arenaBytes = 0; ///< at the bounds
  int64_t kernelCount = 0;
};

/// "sequence", "batch*sequence*768", "past+sequence": plan.extents[extent] over the symbols'
/// names.
std::string extentName(const ModelPlan& plan, int32_t extent);

/// The blob: "TUNECMD1", the plan's JSON length (u64), the JSON, zero padding to 64 bytes, then
/// the constants (each 64-byte aligned at its offset).
std::vector<uint8_t> serializeModel(const ModelPlan& plan, const std::vector<uint8_t>& constants);

struct ParsedModel {
  ModelPlan plan;
  const uint8_t* constants = nullptr; ///< points into the blob
  int64_t constantBytes = 0;
};
/// Parses and checks a blob (every tensor reference and step operand in range).
Expected<ParsedModel> parseModel(const uint8_t* blob, int64_t size);

} // namespace tunec::rt
