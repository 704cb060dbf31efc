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
#include <vector>

namespace tunec::rt {

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
  Status run(const void* const* inputs, void* const* outputs,
             std::vector<double>* stepSeconds = nullptr);

private:
  ModelExecutor() = default;
  Status runStep(size_t index, std::vector<void*>& pointers);
  std::unique_ptr<uint8_t, void (*)(void*)> takeArena();
  void giveArena(std::unique_ptr<uint8_t, void (*)(void*)> arena);

  ParsedModel model_;
  std::vector<KernelFn> kernels_;
  std::vector<EwProgram> programs_; ///< per step (empty unless elementwise)
  std::vector<TypedProgram> typed_; ///< per step (empty unless typed)
  int threads_ = 1;
  std::shared_ptr<void> keepAlive_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<uint8_t, void (*)(void*)>> arenas_;
};

} // namespace tunec::rt
