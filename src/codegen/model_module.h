// The code of a whole model in one LLVM module (DESIGN.md, the flow): every heavy kernel of the
// model, each from its template and config with its fused epilogue. The module is either
// JIT-compiled in this process (`tunec run MODEL.onnx`) or emitted as a position-independent
// object that carries the model's plan and packed weights (`tunec compile` links it into
// model.so). LLVM types stay inside codegen.
#pragma once

#include "codegen/attention_kernel.h"
#include "codegen/jit.h"
#include "codegen/weight_packing.h"
#include "templates/conv2d_template.h"
#include "templates/depthwise_template.h"
#include "templates/matmul_template.h"
#include "templates/post_ops.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tunec {

/// Symbols of a model object, read by the runtime from model.so.
inline constexpr const char* kModelBlobSymbol = "tunec_model_blob";
inline constexpr const char* kModelBlobSizeSymbol = "tunec_model_blob_size";
inline constexpr const char* kModelKernelsSymbol = "tunec_model_kernels";
inline constexpr const char* kModelKernelCountSymbol = "tunec_model_kernel_count";

class ModelModule {
public:
  /// A module for `isa` whose kernels are compiled by `jit`'s target machine.
  ModelModule(Jit& jit, Isa isa);
  ~ModelModule();
  ModelModule(const ModelModule&) = delete;
  ModelModule& operator=(const ModelModule&) = delete;

  /// Each adds one kernel (validated config) and returns its index; `packed` receives the
  /// constant weights in the layout the kernel reads (empty if it reads none).
  /// Fused attention (codegen/attention_kernel.h): reads no constants.
  Expected<int> addAttention(const AttentionParts& parts);
  /// `rows` active: M is an extent of the run (emitMatmulKernel).
  Expected<int> addMatmul(const MatmulWorkload& w, const MatmulConfig& c, const Epilogue& e,
                          const float* constantB, codegen::PackedWeights& packed,
                          RunTimeRows rows = {});
  Expected<int> addConv2d(const Conv2dWorkload& w, const Conv2dConfig& c, const Epilogue& e,
                          const float* weights, codegen::PackedWeights& packed);
  Expected<int> addDepthwise(const DepthwiseWorkload& w, const DepthwiseConfig& c,
                             const Epilogue& e, const float* weights,
                             codegen::PackedWeights& packed);
  int kernelCount() const { return static_cast<int>(symbols_.size()); }

  /// JIT-compiles the module; returns the entry of every kernel in index order. Consumes the
  /// module.
  Expected<std::vector<void*>> compile();
  /// Adds the blob and the kernel table as globals and writes a PIC object file. Consumes the
  /// module.
  Status emitObject(const std::string& path, const std::vector<uint8_t>& blob);

private:
  std::string nextSymbol() const;
  /// Emits one kernel through `emit(module, symbol)` and records it.
  template <typename Emit> Expected<int> add(Emit emit, codegen::PackedWeights& packed);
  Jit& jit_;
  std::unique_ptr<codegen::ModuleBuilder> module_;
  std::vector<std::string> symbols_;
};

} // namespace tunec
