// Compiling a whole model (DESIGN.md, the flow): the optimized graph is lowered, kernel by
// kernel of the fusion plan, to a runtime plan (steps over tensors in one arena), packed
// constants, and one LLVM module with every heavy kernel and its fused epilogue. The result runs
// in this process through the JIT or is written as model.so.
#pragma once

#include "codegen/model_module.h"
#include "ir/graph.h"
#include "passes/fusion_plan.h"
#include "runtime/model_executor.h"
#include "runtime/model_plan.h"
#include "templates/template.h"
#include "tuning_db/database.h"

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tunec::driver {

/// What the heavy kernels compute in. bf16 (automatic mixed precision, as PyTorch's CPU
/// autocast): a MatMul or Gemm with constant weights multiplies them packed to bf16 with its A
/// rounded to bf16, accumulating in f32 (vdpbf16ps); a convolution (an even number of input
/// channels per group, no fused channel scale) reads a bf16 copy of its input with weights in
/// bf16 input-channel pairs; a fused attention multiplies Q, K, P and V rounded to bf16 (an even
/// key count), with f32 scores, softmax and output. Their outputs, the other ops (depthwise
/// convolutions, normalizations) and the model's inputs and outputs stay f32.
enum class Precision { Fp32, Bf16 };

struct CompileOptions {
  int threads = 1;     ///< threads of every kernel (part of the workload key)
  Target target;       ///< the machine the model is for: caches, record lookup (the Jit's target)
  Isa isa = Isa::Avx2; ///< the ISA of every kernel: widestIsa(target) unless restricted
  db::TuningDatabase* database = nullptr; ///< tuned configs; defaults without one
  db::TargetMatch targetMatch = db::TargetMatch::Exact;
  Precision precision = Precision::Fp32;
  /// --precision bf16: an activation that only bf16 kernels read is stored as bf16 by its
  /// producer (plan_bf16_activations.cpp); false stores every activation in f32 (the tests that
  /// compare the two: the same values, rounded by the reader instead).
  bool bf16Activations = true;
  /// --buckets: a symbol's size buckets (each one's largest value) for the heavy kernels whose
  /// run-time M is that symbol; default cuts elsewhere (mBuckets).
  std::map<std::string, std::vector<int64_t>> buckets;
};

/// "fp32" or "bf16" (the --precision flag); an error names the spellings.
Expected<Precision> parsePrecision(const std::string& name);
/// Why --precision bf16 has no bf16 kernel on the options' target and ISA (no avx512_bf16 at
/// AVX-512): the reason, naming the target's features; empty when it has one or the precision is
/// fp32. The lowering then compiles every kernel in fp32 (as on a CPU where bf16 would be slower:
/// --precision bf16 is never slower than fp32) and the compile report says why.
std::string bf16Unavailable(const CompileOptions& options);

/// One heavy kernel of the model, for the compile report and for task extraction.
struct HeavyKernel {
  std::string label; ///< "Conv 'conv1' + bias+relu" (" in bf16" for a bf16 kernel)
  Workload workload; ///< the tuning key (toJson: its canonical JSON)
  Config config;
  bool tuned = false; ///< the config came from the database
  /// Untuned, while the database has records of this workload for these other target keys.
  std::set<std::string> otherTargets;
  /// Untuned, while the database has records for this machine of this workload compiled for
  /// these other thread counts, or in the other precision (fp32 for a bf16 kernel and back).
  std::set<int64_t> otherThreads;
  bool otherPrecision = false;
  /// --precision bf16 kept this kernel fp32: its bf16 form would be slower here (bf16Pays).
  bool bf16Slower = false;
  /// A size bucket's variant of a kernel of run-time M: the extent M is ("sequence") and the
  /// bucket's range of it; empty for a kernel every run runs.
  std::string bucketExtent;
  int64_t bucketLo = 0, bucketHi = 0;
};

struct CompileStats {
  int64_t graphNodes = 0, steps = 0, generatedKernels = 0, loopKernels = 0, reorders = 0,
          aliases = 0;
  int64_t foldedTransposes = 0; ///< read or written in place by a matmul (strided operands)
  /// QuantizeLinear / DequantizeLinear run as element steps, and those of the imported model
  /// (set by whoever imported it; the passes turn round trips into f32 arithmetic). Quantized
  /// matmuls run as int8 kernels (some with their weights halved to 7 bits for AVX2); the other
  /// quantized anchors run dequantized (the report says so).
  int64_t quantizeSteps = 0, quantizeNodesImported = 0, int8Kernels = 0, halvedInt8Kernels = 0;
  /// Quantized layers of the imported model left in fp32, "Op 'name'" and why (set by whoever
  /// imported it, from passes::quantizedLayersKeptFloat).
  std::vector<std::pair<std::string, std::string>> quantizedKeptFloat;
  /// Integer products (MatMulInteger, ConvInteger) summed exactly in int32 on the runtime's
  /// integer steps, and the first one's label.
  int64_t exactIntegerSteps = 0;
  std::string firstExactIntegerStep;
  /// Activations between bf16 kernels stored as bf16 (--precision bf16).
  int64_t bf16Activations = 0;
  /// --precision bf16 compiled in fp32: why (bf16Unavailable); empty otherwise.
  std::string bf16Unavailable;
  int64_t arenaBytes = 0, arenaLowerBound = 0, intermediateBytes = 0, constantBytes = 0;
  /// K/V caches kept in place (rt::KvCache): how many, their capacity along the cache axis (the
  /// largest), their arena copy's bytes; and for a past/present pair left dense, why.
  int64_t kvCaches = 0, kvCapacity = 0, kvCacheBytes = 0;
  std::string kvCacheDense;
};

struct CompiledModel {
  std::string targetKey; ///< the key of the target it was compiled for
  rt::ModelPlan plan;
  std::vector<uint8_t> constants;
  std::unique_ptr<ModelModule> module;
  std::vector<HeavyKernel> kernels;
  CompileStats stats;
};

/// Lowers an optimized graph (after the pass pipeline). Unsupported ops are reported together,
/// by node, in one error.
Expected<CompiledModel> compileModel(const Graph& graph, Jit& jit, const CompileOptions& options);

/// JIT-compiles the model's module and returns an executor for it (`jit` must outlive it).
Expected<std::unique_ptr<rt::ModelExecutor>> loadInProcess(CompiledModel model,
                                                           std::shared_ptr<Jit> jit, int threads);

/// Emits the object and links model.so (with the system's C compiler driver, `cc`), staged
/// beside `path` and renamed onto it; `path` must not be a non-regular file or one of `inputs`
/// (checkOutputPath).
Status writeSharedLibrary(CompiledModel model, const std::string& path,
                          const std::vector<std::string>& inputs = {});

/// The workload of the heavy kernels a graph would compile to, without generating code (the
/// tuner's task extraction).
Expected<std::vector<HeavyKernel>> extractHeavyKernels(const Graph& graph,
                                                       const CompileOptions& options);

/// "12 heavy kernels: 9 tuned, 3 with defaults" plus one line per kernel.
std::string compileReport(const CompiledModel& model);

/// "351 graph nodes -> 135 steps (96 generated kernels, ...)": the compile report's step line.
std::string stepsSummary(const CompileStats& stats);

/// One step compile builds, with the fusion-plan kernel it lowers (-1: a model output's copy).
struct StepOutline {
  std::string label;
  bool generated = false; ///< a generated kernel (else a loop kernel)
  int kernel = -1;
};

/// A layout change compile inserts: `value` copied to NHWC or to plain for `consumer`.
struct ReorderOutline {
  std::string value;
  bool toNhwc = false;
  std::string consumer; ///< the first node of the kernel that reads it, or "the model output"
};

/// What compile builds for a graph, without generating code: the fusion plan it lowers, every
/// step, the reorders and the NHWC tensors (`tunec inspect --fusion` and `--layouts` print it,
/// so that they show what `compile` builds, not another plan).
struct CompileOutline {
  passes::FusionPlan fusion;
  std::vector<StepOutline> steps;
  std::vector<ReorderOutline> reorders;
  int64_t nhwcTensors = 0;
  CompileStats stats;
};

Expected<CompileOutline> outlineCompile(const Graph& graph, const CompileOptions& options);

} // namespace tunec::driver
