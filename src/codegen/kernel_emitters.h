// Internal to codegen: each template's kernel emitted into a given module under a given symbol,
// with its constant weights packed into the layout that kernel reads. The single-kernel
// compilers (compileMatmul, ...) and the whole-model module (ModelModule) both use these.
#pragma once

#include "codegen/weight_packing.h"
#include "support/error.h"
#include "templates/conv2d_template.h"
#include "templates/depthwise_template.h"
#include "templates/matmul_template.h"
#include "templates/post_ops.h"

#include <functional>
#include <llvm/IR/IRBuilder.h>
#include <memory>
#include <string>

namespace tunec::codegen {

class ModuleBuilder;

/// Every generated kernel is an rt::KernelFn named `symbol`; each returns its constant weights
/// packed (weight_packing.h), empty when the kernel reads none.
Expected<PackedWeights> emitMatmulKernel(ModuleBuilder& mb, const std::string& symbol,
                                         const MatmulWorkload& w, const MatmulConfig& c,
                                         const Epilogue& e, const float* constantB,
                                         RunTimeRows rows = {});
Expected<PackedWeights> emitConv2dKernel(ModuleBuilder& mb, const std::string& symbol,
                                         const Conv2dWorkload& w, const Conv2dConfig& c,
                                         const Epilogue& e, const float* weights);
/// The loops of a conv2d task (conv2d_kernel.cpp), shared by the vector and the AMX loop nests:
/// images, then output-channel panels and row trips (row blocks, or AMX tiles) in the config's
/// order, the config's parallel loop covering only trip `task`; body(n, panel, trip).
void emitConv2dTaskLoops(ModuleBuilder& mb, llvm::IRBuilder<>& b, const Conv2dConfig& c,
                         llvm::Value* task, int64_t images, int64_t ohTrips, int64_t panels,
                         const std::function<void(llvm::Value*, llvm::Value*, llvm::Value*)>& body);
/// The dense copy of the input pixels that the strided 1x1 `from` reads (subsamplesInput), with
/// `extra` elements of slack: the input of its kernel subsampledWorkload(from).
llvm::Value* emitSubsampledInput(ModuleBuilder& mb, llvm::IRBuilder<>& b, llvm::Value* in,
                                 const Conv2dWorkload& from, int64_t extra);
/// The conv2d loop nest on AMX tiles (conv2d_amx_kernel.cpp), which emitConv2dKernel emits for a
/// validated config of Isa::Amx; its weights are packed as the vector kernel's. With
/// `subsampledFrom`, `w` is subsampledWorkload(*subsampledFrom) and the kernel's entry copies
/// that workload's input pixels (subsamplesInput).
void emitAmxConv2dLoopNest(ModuleBuilder& mb, const std::string& symbol, const Conv2dWorkload& w,
                           const Conv2dConfig& c, const Epilogue& e,
                           const Conv2dWorkload* subsampledFrom);
Expected<PackedWeights> emitDepthwiseKernel(ModuleBuilder& mb, const std::string& symbol,
                                            const DepthwiseWorkload& w, const DepthwiseConfig& c,
                                            const Epilogue& e, const float* weights);

} // namespace tunec::codegen
