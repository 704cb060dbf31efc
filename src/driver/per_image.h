// A dynamic batch of independent images: a model exported with a dynamic batch axis (a CNN) whose
// every op treats each image alone is compiled for one image and run once per image of the run,
// step by step, so that each layer's weights stay in cache for all images.
//
// Why not kernels over a run-time batch: a convolution, a pool, an element-wise op and the
// classifier's Gemm of one image are each exact for a batch of 1, so a batch of n is the batch-1
// plan n times with each tensor moved on by one image; every kernel and tuned record of the
// static compile serves it unchanged, and the arena is n copies of the batch-1 arena (planned for
// the bound). Layer by layer, the weights a layer streams are read from cache by the images after
// the first.
#pragma once

#include "ir/graph.h"
#include "runtime/model_plan.h"

#include <optional>
#include <set>
#include <string>

namespace tunec::driver {

/// The symbol of a dynamic batch of independent images and its bounds.
struct ImageBatch {
  std::string symbol;
  int64_t min = 1, max = 1;
  std::set<std::string> inputs, outputs; ///< the model inputs and outputs it is the batch of
};

/// The image batch of a graph imported with symbolic dimensions, when it has one: a single
/// symbol, the leading dimension of every value that depends on it and of no other dimension;
/// no op that mixes images (one whose output loses the symbol, or that normalizes, accumulates
/// or orders along the leading axis); and a convolution or pool, which only a static compile
/// runs. nullopt otherwise (the symbolic lowering's run-time extents handle the rest).
std::optional<ImageBatch> imageBatchOf(const Graph& graph);

/// Turns the plan compiled for one image into the plan run once per image: the batch symbol
/// and its extent, the inputs' and outputs' leading dimensions symbolic (their bytes at the
/// bound), and each tensor's image stride (one image's arena, one image of an input or output;
/// constants 0).
Status runOncePerImage(rt::ModelPlan& plan, const ImageBatch& batch);

} // namespace tunec::driver
