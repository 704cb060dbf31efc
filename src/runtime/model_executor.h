// Runs a compiled model: its steps in order over one arena per concurrent run (DESIGN.md,
// decision 9); generated kernels through their entry points, light ops through the runtime's
// loop kernels. Used by the C API (model.so) and by `tunec run MODEL.onnx` (JIT).
#pragma once

#include "runtime/kernel_args.h"
#include "runtime/light_kernels.h"
#include "runtime/model_plan.h"
#include "runtime/typed_kernels.h"

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace tunec::rt {

/// The extents of one run: the symbols' values, bound from its input shapes, and every extent
/// of the plan evaluated once for the steps and kernels to read.
struct RunExtents {
  std::vector<int64_t> symbols;
  std::vector<int64_t> extents;
};

/// Binds the plan's symbols from the run's input shapes (`inputShapes[i]`: input i's dims) and
/// evaluates its extents. The error, before any kernel runs, names the input and the dimension:
/// a wrong rank, a static dimension of another size, a symbol outside its bounds, two inputs
/// that disagree on one symbol; and an output whose extents pass its bound (a corrupt plan: the
/// run would write past the caller's buffer).
Expected<RunExtents> bindRunExtents(const ModelPlan& plan,
                                    const std::vector<std::vector<int64_t>>& inputShapes);
/// The shape of `io` in the run (its bound where it is static).
std::vector<int64_t> runShape(const IoSpec& io, const RunExtents& run);

/// A step's operations and operand bytes (Step::flops, bytes, bf16Flops, int8Ops) in a run of
/// these extents: as recorded for a static step; for the matmuls of run-time extents (weight-only
/// and batched) computed from the run's ints; a size bucket's generated kernel's operations
/// scaled from its largest M to the run's (its bytes as recorded, at that M: the weights dominate);
/// 0, unknown, for the other steps that read run-time ints.
struct StepCost {
  double flops = 0, bf16Flops = 0, int8Ops = 0;
  int64_t bytes = 0;
};
StepCost stepCostAt(const Step& step, const RunExtents& run);

class ModelExecutor {
public:
  /// `keepAlive` owns whatever the constants and kernels live in (a dlopen handle, a JIT).
  static Expected<std::unique_ptr<ModelExecutor>> create(ParsedModel model,
                                                         std::vector<void*> kernels, int threads,
                                                         std::shared_ptr<void> keepAlive);
  const ModelPlan& plan() const { return model_.plan; }
  int threads() const { return threads_; }
  /// Safe to call from several threads at once. With `stepSeconds`, adds each step's wall time
  /// to its entry (sized to the step count).
  /// A model with symbolic dimensions needs the run's extents (bindRunExtents); inputs and
  /// outputs are dense at the run's shapes.
  /// A model with K/V caches kept in place (ModelPlan::caches) takes their past inputs and present
  /// outputs dense too, copied into and out of the arena's copy of each cache; with `cached`, the
  /// caller's buffers of those inputs and outputs are in the cache layout instead (KvCache), and a
  /// past and present given as one buffer have only the run's new rows written.
  Status run(const void* const* inputs, void* const* outputs,
             std::vector<double>* stepSeconds = nullptr, const RunExtents* extents = nullptr,
             bool cached = false);
  /// run at the given input shapes (bindRunExtents), writing the output shapes when
  /// `outputShapes` is given.
  Status runShaped(const void* const* inputs, const std::vector<std::vector<int64_t>>& inputShapes,
                   void* const* outputs, std::vector<std::vector<int64_t>>* outputShapes,
                   std::vector<double>* stepSeconds = nullptr, bool cached = false);

private:
  ModelExecutor() = default;
  /// The plan's steps in order over `pointers` (one image's, in a plan run once per image).
  Status runSteps(std::vector<void*>& pointers, const RunExtents* extents,
                  std::vector<double>* stepSeconds);
  Status runStep(const Step& s, const EwProgram& program, const TypedProgram& typed,
                 std::vector<void*>& pointers, const int64_t* extents);
  std::unique_ptr<uint8_t, void (*)(void*)> takeArena();
  void giveArena(std::unique_ptr<uint8_t, void (*)(void*)> arena);

  ParsedModel model_;
  std::vector<KernelFn> kernels_;
  std::vector<EwProgram> programs_; ///< per step (empty unless elementwise)
  std::vector<TypedProgram> typed_; ///< per step (empty unless typed)
  /// (tensor, cache): the tensors that are a K/V cache's past or present (ModelPlan::caches).
  std::vector<std::pair<size_t, size_t>> cacheTensors_;
  int threads_ = 1;
  std::shared_ptr<void> keepAlive_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<uint8_t, void (*)(void*)>> arenas_;
};

} // namespace tunec::rt
