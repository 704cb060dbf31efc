// The loop kernels of the runtime: the light ops that no anchor absorbed, each chain run as one
// pass over memory. An elementwise chain is a small program over strided operands: the chain's
// intermediate values live in L1-sized register buffers and never reach memory, and the same
// strided form expresses broadcasts, transposes, layout reorders, slices and concatenation.
#pragma once

#include "runtime/model_plan.h"

#include <cstdint>
#include <vector>

namespace tunec::rt {

/// The limits of a loop-kernel step (elementwise programs and typed copies), which the runtime's
/// decoders check and the compiler keeps (driver/lower_light.cpp): a step beyond them would be
/// a model.so that can never run.
inline constexpr int kMaxRank = 8;
inline constexpr int kMaxEwInputs = 8;
inline constexpr int kMaxEwInstructions = 64;

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
  Round, // half to even; p0 != 0: a NaN becomes 0 (a quantization round trip's)
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
/// iteration space `dims`; the result of the last instruction is stored to the output. `Int` is
/// int64_t in the runtime, and the compiler's symbolic extents where a dimension is one (the
/// same coalescing and the same int layout, each int an extent of the run).
template <typename Int> struct BasicEwProgram {
  std::vector<Int> dims;
  Int outOffset = 0;
  std::vector<Int> outStrides;
  std::vector<Int> inOffsets;
  std::vector<std::vector<Int>> inStrides;
  std::vector<EwInstr> code;

  /// Merges adjacent dimensions that every operand walks contiguously, drops size-1 ones.
  void coalesce() {
    std::vector<Int> d, os;
    std::vector<std::vector<Int>> is(inStrides.size());
    for (size_t k = 0; k < dims.size(); ++k) {
      if (dims[k] == Int(1) && dims.size() > 1) continue;
      bool merge = !d.empty() && os.back() == outStrides[k] * dims[k];
      for (size_t i = 0; merge && i < inStrides.size(); ++i)
        merge = is[i].back() == inStrides[i][k] * dims[k];
      if (merge) {
        d.back() = d.back() * dims[k];
        os.back() = outStrides[k];
        for (size_t i = 0; i < inStrides.size(); ++i) is[i].back() = inStrides[i][k];
      } else {
        d.push_back(dims[k]);
        os.push_back(outStrides[k]);
        for (size_t i = 0; i < inStrides.size(); ++i) is[i].push_back(inStrides[i][k]);
      }
    }
    if (d.empty()) {
      d.push_back(Int(1));
      os.push_back(Int(1));
      for (auto& s : is) s.push_back(Int(0));
    }
    dims = d;
    outStrides = os;
    inStrides = is;
  }

  /// The step's ints (rank, inputs, instructions, dims, the output's offset and strides, each
  /// input's offset and strides, each instruction's op and registers) and floats (p0, p1).
  void encode(std::vector<Int>& v, std::vector<float>& floats) const {
    v = {Int(static_cast<int64_t>(dims.size())), Int(static_cast<int64_t>(inOffsets.size())),
         Int(static_cast<int64_t>(code.size()))};
    v.insert(v.end(), dims.begin(), dims.end());
    v.push_back(outOffset);
    v.insert(v.end(), outStrides.begin(), outStrides.end());
    for (size_t i = 0; i < inOffsets.size(); ++i) {
      v.push_back(inOffsets[i]);
      v.insert(v.end(), inStrides[i].begin(), inStrides[i].end());
    }
    floats.clear();
    for (const EwInstr& in : code) {
      for (int64_t x : {static_cast<int64_t>(in.op), static_cast<int64_t>(in.dst),
                        static_cast<int64_t>(in.a), static_cast<int64_t>(in.b)})
        v.push_back(Int(x));
      floats.push_back(in.p0);
      floats.push_back(in.p1);
    }
  }
};

struct EwProgram : BasicEwProgram<int64_t> {
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
/// The register tiles runBatchedMatmul's rows run on: the widest the CPU has (Auto), or one
/// named (tests run each the CPU has against the portable form).
/// Avx512Vnni: the integer matmul's 16-bit tiles on vpdpwssd (AVX512-VNNI); the f32 matmuls
/// take it as Avx512.
enum class RowsIsa { Auto, Avx512, Avx2, Portable, Avx512Vnni };
/// C[m, n] = A[m, k] B[k, n] for each of `batch` matrices (dense f32, row-major; A and B advance
/// by their batch strides, 0 for one shared matrix; C by m * n). With `bTransposed`, B is stored
/// [n, k] (each output a dot product of two contiguous rows).
void runBatchedMatmul(const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t n,
                      int64_t k, int64_t aBatchStride, int64_t bBatchStride, int threads,
                      bool bTransposed = false, RowsIsa isa = RowsIsa::Auto);
/// The integer products of MatMulInteger and ConvInteger (q - zero point, as i32): C[m, n] =
/// A[m, k] B[k, n] per batch matrix (A and B advance by their batch strides, 0 for a shared
/// one; C by m * n), the sums modulo 2^32 (two's-complement wrapping, as ONNX Runtime's).
/// `packedB` (a shared B packed once by packIntegerPairs, or null): used where A fits int16 on a
/// vector ISA, instead of checking and packing B in the run.
void runIntegerMatmul(const int32_t* a, const int32_t* b, int32_t* c, int64_t batch, int64_t m,
                      int64_t n, int64_t k, int64_t aBatchStride, int64_t bBatchStride, int threads,
                      RowsIsa isa = RowsIsa::Auto, const int32_t* packedB = nullptr);
/// A constant B [k, n] whose values fit int16, packed as the 16-bit tiles read it: int16 pairs
/// [(k + 1) / 2][integerPairColumns(n)] (zeros past k and n); empty when a value does not fit.
int64_t integerPairColumns(int64_t n);
std::vector<int32_t> packIntegerPairs(const int32_t* b, int64_t k, int64_t n);
/// A 2-d convolution of i32 NCHW x by i32 w [oc, c / group, kh, kw] (Step ints in this order),
/// zero padding, the sums modulo 2^32.
struct IntegerConvParams {
  int64_t n, c, h, w, oc, kh, kw, oh, ow, sh, sw, padTop, padLeft, dh, dw, group;
  bool valid() const;
};
/// On AVX2 and AVX-512, a convolution of one group whose operands fit int16 runs as a matmul on
/// int16 pairs (vpmaddwd, or vpdpwssd with VNNI); `isa` forces a form (tests). `packedW`: the
/// weights packed once by packIntegerPairs as B = w^T [c kh kw, oc] (or null: checked and
/// packed in the run).
void runIntegerConv(const int32_t* x, const int32_t* w, int32_t* y, const IntegerConvParams& p,
                    int threads, RowsIsa isa = RowsIsa::Auto, const int32_t* packedW = nullptr);
/// A Resample step's parameters (StepKind::Resample): the tensor viewed as [outer, length,
/// inner], each output index along `length` the sum of `taps` inputs times their weights (f32
/// elements), or a copy of one input (`taps` 1: elements of any size).
struct ResampleParams {
  int64_t outer, inLength, outLength, inner, taps, elemBytes;
  bool valid() const;
};
/// `index` and `weight` hold outLength x taps entries (`weight` null when taps is 1).
void runResample(const ResampleParams& p, const int64_t* index, const float* weight,
                 const uint8_t* in, uint8_t* out, int threads);
/// Each of `matrices` rows x cols matrices of `elem`-byte elements: the upper (j - i >= k) or
/// lower (j - i <= k) triangle copied from `in`, the rest zero.
void runTrilu(const uint8_t* in, uint8_t* out, int64_t matrices, int64_t rows, int64_t cols,
              int64_t k, bool upper, int64_t elem);
/// Softmax (mode 0), log-softmax (1) or hardmax (2) over `axis` elements with stride `inner`.
void runSoftmax(const float* in, float* out, int64_t outer, int64_t axis, int64_t inner, int mode,
                int threads);

enum class ReduceKind : int64_t { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };
/// Reduces each of `outer` contiguous rows of `len` elements to one value.
void runReduce(const float* in, float* out, int64_t outer, int64_t len, ReduceKind kind,
               int threads);
/// Layer norm of each row; `bias`, `mean` and `invStd` (per-row outputs) may be null. With
/// `rms`, RMS normalization: the mean square about 0, no mean subtracted.
void runLayerNorm(const float* in, float* out, const float* scale, const float* bias, float* mean,
                  float* invStd, int64_t rows, int64_t cols, float epsilon, int threads,
                  bool rms = false);
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
