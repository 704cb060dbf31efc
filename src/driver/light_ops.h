// Internal to the driver: the light lowerers, one per op family (lower_data_movement.cpp,
// lower_normalization.cpp, lower_pool.cpp, lower_reduce.cpp), and the helpers they share;
// lower_light.cpp dispatches a node to its family.
#pragma once

#include "driver/lowering.h"

#include <string>
#include <vector>

namespace tunec::driver {

/// Reshapes (views), transposes, tiles, depth/space rearrangements, pads, expands, slices,
/// splits, concats, Gather and GatherElements: strided copies of any element type, or views.
bool lowerDataMovement(Lowering& l, const Node& n);
/// Softmax, LogSoftmax, Hardmax, LayerNormalization and InstanceNormalization (f32).
bool lowerNormalization(Lowering& l, const Node& n);
/// Softmax, LogSoftmax and Hardmax over an axis (f32), of static or symbolic shape: rows at the
/// run's extents.
bool lowerSoftmax(Lowering& l, const Node& n);
/// MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool (f32, or quantized u8/s8 values).
bool lowerPool(Lowering& l, const Node& n);
/// The Reduce* ops (f32), ArgMax and ArgMin (the dispatcher sends nothing else).
bool lowerReduction(Lowering& l, const Node& n);
/// Resize (and Upsample) of a static shape, in its input's layout (lower_resize.cpp).
bool lowerResize(Lowering& l, const Node& n);
/// Trilu, of static or symbolic shape (lower_run_time.cpp).
bool lowerTrilu(Lowering& l, const Node& n);
/// A MatMul or Conv of integer type (passes::isIntegerProduct) on the runtime's integer steps
/// (lower_integer.cpp).
bool lowerIntegerProduct(Lowering& l, const Node& n);
/// MatMulNBits on the weight-only kernel, of static or symbolic rows (lower_weight_only.cpp).
bool lowerMatMulNBits(Lowering& l, const Node& n);

/// A light op of symbolic shape, over the run's extents: reshapes and prefix slices (views),
/// Gather, Transpose, LayerNormalization and Softmax (lower_run_time.cpp); any other op is
/// reported, naming it. (Elementwise runs and typed ops of symbolic shape are lowerLight's.)
bool lowerRunTimeLight(Lowering& l, const Node& n);
/// A fused kernel of symbolic shape that the templates do not run at run-time extents (the
/// attention: Q K^T, its scale and mask, Softmax, P V), lowered node by node: its matmuls as
/// BatchedMatmul steps over the run's extents, the rest as light ops.
bool lowerRunTimeKernelNodes(Lowering& l, const passes::FusedKernel& kernel);
/// The product of extents [from, to).
DimExpr extentProduct(const std::vector<DimExpr>& d, size_t from, size_t to);
/// An input or output of `n` has a symbolic shape.
bool hasSymbolicShape(const Graph& g, const Node& n);
/// The runtime's reduction of a Reduce* op (ReduceSum -> Sum, ...), and whether an op is one.
rt::ReduceKind reduceKindOf(OpKind kind);
bool isReduceOp(OpKind kind);
/// The strides of a dense plain tensor of `shape` broadcast to `outShape` (0 along a broadcast
/// dimension), as extents of the run.
std::vector<DimExpr> runTimeBroadcastStrides(const Shape& shape, const Shape& outShape);

/// A LayerNorm step over rows x cols (extents of the run where symbolic): tensors {out, in,
/// scale, bias, mean, invStd} (-1: absent).
void addLayerNormStep(Lowering& l, const std::string& label, std::vector<int> tensors,
                      const DimExpr& rows, const DimExpr& cols, float epsilon, bool rms = false);
/// "Op 'name'": a light step's label.
std::string lightLabel(const Node& n);
/// Every input and output of `n` is f32.
bool allF32(const Graph& g, const Node& n);
/// A plain f32 copy program: `out` element idx = in[offset + sum(idx[d] * strides[d])].
void copyProgram(Lowering& l, const std::string& label, int out, const Shape& outShape,
                 int64_t outOffset, const std::vector<int64_t>& outStrides, int in,
                 std::vector<int64_t> inStrides, int64_t inOffset);
/// A strided copy of any element type: the vectorized program for f32, a typed one otherwise.
bool copyAny(Lowering& l, const std::string& label, int out, const Shape& outShape,
             int64_t outOffset, const std::vector<int64_t>& outStrides, int in,
             std::vector<int64_t> inStrides, int64_t inOffset, DType dtype);
/// A pool step (rt::PoolParams) reading `in` and writing `out`.
void addPoolStep(Lowering& l, const std::string& label, const rt::PoolParams& p, int in, int out);

inline int64_t normalizeAxis(int64_t axis, int rank) {
  return axis < 0 ? axis + rank : axis;
}

/// The product of d[from..to).
inline int64_t product(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= d[i];
  return p;
}

} // namespace tunec::driver
