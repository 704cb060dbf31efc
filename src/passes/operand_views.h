// Operand views: Transposes that a MatMul reads or writes in place, as strided operands of the
// matmul template, instead of copying them (the head split and merge of attention: Q, K and V
// read per head from [tokens, heads*dim], the context written back into it).
#pragma once

#include "ir/graph.h"
#include "passes/fusion_plan.h"

#include <map>
#include <vector>

namespace tunec::passes {

/// Element (b, r, c) of an operand's batched matrices [batch, rows, cols] (rows and cols as
/// MatMul reads them) is element b*batchStride + r*rowStride + c*colStride of `base`, a dense
/// row-major tensor. One of rowStride and colStride is 1.
struct MatrixView {
  ValueId base = kNoValue;
  int64_t batchStride = 0, rowStride = 0, colStride = 0;
};

struct OperandViews {
  std::map<NodeId, MatrixView> a, b; ///< MatMul inputs read in place of a Transpose's output
  std::map<NodeId, MatrixView> c;    ///< MatMul outputs written into the Transpose's output
  std::vector<bool> folded;          ///< per node: a Transpose no copy is lowered for
  /// MatMuls of symbolic shape whose computed B is a Transpose of the last two axes of a dense
  /// tensor (attention's K^T over the run's keys): B read as that tensor, [..., n, k].
  std::map<NodeId, ValueId> bTransposed;
};

/// Finds the Transposes to fold: a Transpose whose output only a MatMul reads (as A, or as a
/// computed B), or which alone reads the output of a MatMul that ends its kernel (no post-ops),
/// when the permuted strides still make each batch a matrix with unit stride along rows or columns
/// and the batch dimensions collapse to one stride.
OperandViews planOperandViews(const Graph& graph, const FusionPlan& fusion);

/// The batched-matrix view of a tensor of `shape` whose element strides are `strides` (rank >= 2;
/// the leading dimensions are the batch): false when the batch dimensions do not collapse into
/// one stride or neither of the last two dimensions has stride 1.
bool matrixView(const Shape& shape, const std::vector<int64_t>& strides, MatrixView& view);

} // namespace tunec::passes
