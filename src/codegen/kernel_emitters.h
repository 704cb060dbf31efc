// Internal to codegen: each template's kernel emitted into a given module under a given symbol,
// with its constant weights packed into the layout that kernel reads. The single-kernel
// compilers (compileMatmul, ...) and the whole-model module (ModelModule) both use these.
#pragma once

#include "support/error.h"
#include "templates/conv2d_template.h"
#include "templates/depthwise_template.h"
#include "templates/matmul_template.h"
#include "templates/post_ops.h"

#include <memory>
#include <string>

namespace tunec::codegen {

class ModuleBuilder;

/// Constant weights packed for one kernel (64-byte aligned); empty when the kernel reads none.
struct PackedWeights {
  std::shared_ptr<float> data;
  int64_t count = 0; ///< floats
};

/// Every generated kernel has the entry `void symbol(in, weights, out, bias, addend)`.
Expected<PackedWeights> emitMatmulKernel(ModuleBuilder& mb, const std::string& symbol,
                                         const MatmulWorkload& w, const MatmulConfig& c,
                                         const Epilogue& e, const float* constantB);
Expected<PackedWeights> emitConv2dKernel(ModuleBuilder& mb, const std::string& symbol,
                                         const Conv2dWorkload& w, const Conv2dConfig& c,
                                         const Epilogue& e, const float* weights);
Expected<PackedWeights> emitDepthwiseKernel(ModuleBuilder& mb, const std::string& symbol,
                                            const DepthwiseWorkload& w, const DepthwiseConfig& c,
                                            const Epilogue& e, const float* weights);

/// A 64-byte aligned float buffer.
std::shared_ptr<float> allocateFloats(int64_t count);

} // namespace tunec::codegen
