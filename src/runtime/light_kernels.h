// The loop kernels of the runtime: the light ops that no anchor absorbed, each chain run as one
// pass over memory. An elementwise chain is a small program over strided operands: the chain's
// intermediate values live in L1-sized register buffers and never reach memory, and the same
// strided form expresses broadcasts, transposes, layout reorders, slices and concatenation.
#pragma once

#include "runtime/model_plan.h"

#include <cstdint>
#include <vector>

namespace tunec::rt {

inline constexpr int kMaxRank = 8;

enum class EwOp : int32_t {
  Copy,
  Add,
  Sub,
  Mul,
  Div,
  Max,
  Min,
  Pow, // a op b
  Relu,
  LeakyRelu,
  Clip,
  Sigmoid,
  Tanh,
  Exp,
  Log,
  Sqrt,
  Neg,
  Abs,
  Erf, // op a (p0, p1)
  Gelu,
  Reciprocal,
  HardSigmoid,
  HardSwish,
  Softplus,
  Floor,
  Ceil,
  Sign,
  Swish, // a * sigmoid(p0 a)
  Elu,
  Round,
  Cos,
  Sin,
  Tan,
  Acos,
  Asin,
  Atan,
  Sinh,
  Cosh,
  Asinh,
  Acosh,
  Atanh,
  Softsign,
  Selu,
  Celu,
  ThresholdedRelu,
  Mish,
  Scale, // Scale: a * p0
  PRelu, // binary, after the unary ops: a >= 0 ? a : a * b
  kLast = PRelu,
};
bool isBinary(EwOp op);

/// One instruction: dst = op(a, b) with parameters p0, p1. Operands: r >= 0 is register r,
/// r < 0 is input -1 - r.
struct EwInstr {
  EwOp op;
  int32_t dst, a, b;
  float p0 = 0.f, p1 = 0.f;
};

/// Every operand is addressed as base + offset + sum(index[d] * stride[d]) (elements) over the
/// iteration space `dims`; the result of the last instruction is stored to the output.
struct EwProgram {
  std::vector<int64_t> dims;
  int64_t outOffset = 0;
  std::vector<int64_t> outStrides;
  std::vector<int64_t> inOffsets;
  std::vector<std::vector<int64_t>> inStrides;
  std::vector<EwInstr> code;

  /// Merges adjacent dimensions that every operand walks contiguously, drops size-1 ones.
  void coalesce();
  void encode(Step& step) const;
  static Expected<EwProgram> decode(const Step& step);
};

/// Pool parameters (Step ints in this order).
struct PoolParams {
  int64_t isMax, countIncludePad, n, c, h, w, oh, ow;
  int64_t inStride[4], outStride[4]; ///< n, c, h, w element strides
  int64_t kh, kw, sh, sw, padTop, padLeft, dh, dw;
  int64_t dtype; ///< the tensors' DType: f32, or u8/s8 for a pool of quantized integers
};

void runElementwise(const EwProgram& p, float* out, const float* const* inputs, int threads);
/// Softmax (mode 0), log-softmax (1) or hardmax (2) over `axis` elements with stride `inner`.
void runSoftmax(const float* in, float* out, int64_t outer, int64_t axis, int64_t inner, int mode,
                int threads);

enum class ReduceKind : int64_t { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };
/// Reduces each of `outer` contiguous rows of `len` elements to one value.
void runReduce(const float* in, float* out, int64_t outer, int64_t len, ReduceKind kind,
               int threads);
/// Layer norm of each row; `bias`, `mean` and `invStd` (per-row outputs) may be null.
void runLayerNorm(const float* in, float* out, const float* scale, const float* bias, float* mean,
                  float* invStd, int64_t rows, int64_t cols, float epsilon, int threads);
/// A pool over the f32 tensors, or over u8/s8 ones (p.dtype): a max, or an average rounded to
/// the nearest integer.
void runPool(const PoolParams& p, const void* in, void* out, int threads);
/// Gather along one axis; indices are int64 or int32 (`indexBytes`), negative ones wrap.
/// Per pixel, each run (src, dst, len) of 4-byte channels from in[p*inLd + src] to
/// out[p*outLd + dst] (a ChannelRuns step; `runs` holds the triples).
void runChannelRuns(const uint8_t* in, uint8_t* out, int64_t pixels, int64_t inLd, int64_t outLd,
                    const int64_t* runs, int64_t count, int threads);
Status runGather(const uint8_t* data, const uint8_t* indices, uint8_t* out, int64_t outer,
                 int64_t axis, int64_t inner, int64_t count, int64_t elemBytes, int64_t indexBytes);

} // namespace tunec::rt

extern "C" {
/// Layer norm of `count` rows of `cols` floats, `ld` apart, in place: what a matmul kernel whose
/// epilogue ends in a row normalization runs on each block of its output rows. `params` holds
/// the scale (cols floats) then the bias (cols floats).
void tunec_layer_norm_rows_f32(float* rows, int64_t count, int64_t cols, int64_t ld,
                               const float* params, float epsilon);
}
