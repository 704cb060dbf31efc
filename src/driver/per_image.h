// A dynamic batch of independent images: a model exported with a dynamic batch axis (a CNN) whose
// every op treats each image alone is compiled for one image and its plan run once per image of
// the run.
//
// Why not kernels over a run-time batch: a convolution, a pool, an element-wise op and the
// classifier's Gemm of one image are each exact for a batch of 1, so a batch of n is the batch-1
// plan n times with the inputs and outputs moved on by one image; every kernel and tuned record
// of the static compile serves it unchanged, and the arena stays one image's, whatever the batch.
// Image by image rather than layer by layer: each image's activations stay in cache from one
// layer to the next as a batch of one's do, while a layer's weights gained nothing from the
// images after the first (ResNet-50 on an AMD EPYC Zen 4, one thread: layer by layer was 8%
// slower per image at batch 8, and a static compile for batch 8 no faster per image than for 1;
// docs/benchmarks.md).
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
/// bound), and each input's and output's image stride (one image of it; the arena and the
/// constants 0).
Status runOncePerImage(rt::ModelPlan& plan, const ImageBatch& batch);

} // namespace tunec::driver
