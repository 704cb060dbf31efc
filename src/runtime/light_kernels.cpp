// Loop kernels. The inner loops are plain array code over one chunk, compiled once per ISA
// (function multi-versioning) so that the compiler vectorizes them for AVX-512 or AVX2.
#include "runtime/light_kernels.h"

#include "runtime/parallel.h"
#include "runtime/vector_math.h"
#include "support/dtype.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <immintrin.h>
#include <limits>
#include <type_traits>

#define TUNEC_MULTIVERSION                                                                         \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
// Helpers inlined into the multiversioned loops, so that each clone compiles them for its ISA.
#define TUNEC_INLINE inline __attribute__((always_inline))

namespace tunec::rt {

namespace {

constexpr int64_t kChunk = 512;

// rint in the default rounding mode, branch-free so that the loops vectorize: below 2^23 in
// magnitude, |x| + 2^23 rounds |x| to an integer, ties to even, and subtracting 2^23 is exact;
// from 2^23 on (and infinities, NaN) x is its own rounding. The sign is x's (-0.3 gives -0).
TUNEC_INLINE float roundHalfEven(float x) {
  constexpr float kTwo23 = 8388608.f;
  float m = std::fabs(x);
  return m < kTwo23 ? std::copysign((m + kTwo23) - kTwo23, x) : x;
}

TUNEC_MULTIVERSION
void applyChunk(EwOp op, float p0, float p1, const float* a, const float* b, float* d, int64_t n) {
  switch (op) {
  case EwOp::Copy:
    for (int64_t i = 0; i < n; ++i) d[i] = a[i];
    break;
  case EwOp::Add:
    for (int64_t i = 0; i < n; ++i) d[i] = a[i] + b[i];
    break;
  case EwOp::Sub:
    for (int64_t i = 0; i < n; ++i) d[i] = a[i] - b[i];
    break;
  case EwOp::Mul:
    for (int64_t i = 0; i < n; ++i) d[i] = a[i] * b[i];
    break;
  case EwOp::Div:
    for (int64_t i = 0; i < n; ++i) d[i] = a[i] / b[i];
    break;
  // NaN propagates from either operand, as in ONNX Runtime and PyTorch (a != a: a is NaN).
  case EwOp::Max:
    for (int64_t i = 0; i < n; ++i) d[i] = a[i] > b[i] || a[i] != a[i] ? a[i] : b[i];
    break;
  case EwOp::Min:
    for (int64_t i = 0; i < n; ++i) d[i] = a[i] < b[i] || a[i] != a[i] ? a[i] : b[i];
    break;
  case EwOp::Pow:
    for (int64_t i = 0; i < n; ++i) d[i] = std::pow(a[i], b[i]);
    break;
  case EwOp::Relu: // 0 > x ? 0 : x is one maxps(0, x), which passes a NaN x through
    for (int64_t i = 0; i < n; ++i) d[i] = 0.f > a[i] ? 0.f : a[i];
    break;
  case EwOp::LeakyRelu:
    for (int64_t i = 0; i < n; ++i) d[i] = a[i] >= 0.f ? a[i] : a[i] * p0;
    break;
  case EwOp::Clip:
    for (int64_t i = 0; i < n; ++i) d[i] = std::min(std::max(a[i], p0), p1);
    break;
  case EwOp::Sigmoid:
    for (int64_t i = 0; i < n; ++i) d[i] = fast_sigmoid(a[i]);
    break;
  case EwOp::Tanh:
    for (int64_t i = 0; i < n; ++i) d[i] = fast_tanh(a[i]);
    break;
  case EwOp::Exp:
    for (int64_t i = 0; i < n; ++i) d[i] = fast_exp(a[i]);
    break;
  case EwOp::Log:
    for (int64_t i = 0; i < n; ++i) d[i] = std::log(a[i]);
    break;
  case EwOp::Sqrt:
    for (int64_t i = 0; i < n; ++i) d[i] = std::sqrt(a[i]);
    break;
  case EwOp::Neg:
    for (int64_t i = 0; i < n; ++i) d[i] = -a[i];
    break;
  case EwOp::Abs:
    for (int64_t i = 0; i < n; ++i) d[i] = std::fabs(a[i]);
    break;
  case EwOp::Erf:
    for (int64_t i = 0; i < n; ++i) d[i] = fast_erf(a[i]);
    break;
  case EwOp::Gelu:
    for (int64_t i = 0; i < n; ++i) d[i] = fast_gelu(a[i]);
    break;
  case EwOp::Reciprocal:
    for (int64_t i = 0; i < n; ++i) d[i] = 1.f / a[i];
    break;
  case EwOp::HardSigmoid:
    for (int64_t i = 0; i < n; ++i) d[i] = std::min(std::max(a[i] * p0 + p1, 0.f), 1.f);
    break;
  case EwOp::HardSwish:
    for (int64_t i = 0; i < n; ++i)
      d[i] = a[i] * std::min(std::max(a[i] * (1.f / 6.f) + 0.5f, 0.f), 1.f);
    break;
  case EwOp::Softplus:
    for (int64_t i = 0; i < n; ++i) d[i] = a[i] > 20.f ? a[i] : std::log1p(fast_exp(a[i]));
    break;
  case EwOp::Floor:
    for (int64_t i = 0; i < n; ++i) d[i] = std::floor(a[i]);
    break;
  case EwOp::Ceil:
    for (int64_t i = 0; i < n; ++i) d[i] = std::ceil(a[i]);
    break;
  case EwOp::Round: // half to even: roundevenf is a libm call per element here, not vroundps
    if (p0 != 0.f)  // a NaN becomes 0 (a quantization round trip's)
      for (int64_t i = 0; i < n; ++i) d[i] = a[i] == a[i] ? roundHalfEven(a[i]) : 0.f;
    else
      for (int64_t i = 0; i < n; ++i) d[i] = roundHalfEven(a[i]);
    break;
  case EwOp::Sign:
    for (int64_t i = 0; i < n; ++i) d[i] = a[i] > 0.f ? 1.f : (a[i] < 0.f ? -1.f : 0.f);
    break;
  case EwOp::Swish:
    for (int64_t i = 0; i < n; ++i) d[i] = a[i] * fast_sigmoid(p0 * a[i]);
    break;
  case EwOp::Elu:
    for (int64_t i = 0; i < n; ++i) d[i] = a[i] > 0.f ? a[i] : p0 * (fast_exp(a[i]) - 1.f);
    break;
  case EwOp::Cos:
    for (int64_t i = 0; i < n; ++i) d[i] = std::cos(a[i]);
    break;
  case EwOp::Sin:
    for (int64_t i = 0; i < n; ++i) d[i] = std::sin(a[i]);
    break;
  case EwOp::Tan:
    for (int64_t i = 0; i < n; ++i) d[i] = std::tan(a[i]);
    break;
  case EwOp::Acos:
    for (int64_t i = 0; i < n; ++i) d[i] = std::acos(a[i]);
    break;
  case EwOp::Asin:
    for (int64_t i = 0; i < n; ++i) d[i] = std::asin(a[i]);
    break;
  case EwOp::Atan:
    for (int64_t i = 0; i < n; ++i) d[i] = std::atan(a[i]);
    break;
  case EwOp::Sinh:
    for (int64_t i = 0; i < n; ++i) d[i] = std::sinh(a[i]);
    break;
  case EwOp::Cosh:
    for (int64_t i = 0; i < n; ++i) d[i] = std::cosh(a[i]);
    break;
  case EwOp::Asinh:
    for (int64_t i = 0; i < n; ++i) d[i] = std::asinh(a[i]);
    break;
  case EwOp::Acosh:
    for (int64_t i = 0; i < n; ++i) d[i] = std::acosh(a[i]);
    break;
  case EwOp::Atanh:
    for (int64_t i = 0; i < n; ++i) d[i] = std::atanh(a[i]);
    break;
  case EwOp::Softsign:
    for (int64_t i = 0; i < n; ++i) d[i] = a[i] / (1.f + std::fabs(a[i]));
    break;
  case EwOp::Selu:
    for (int64_t i = 0; i < n; ++i) d[i] = p1 * (a[i] > 0.f ? a[i] : p0 * (fast_exp(a[i]) - 1.f));
    break;
  case EwOp::Celu:
    for (int64_t i = 0; i < n; ++i)
      d[i] = std::max(0.f, a[i]) + std::min(0.f, p0 * (fast_exp(a[i] / p0) - 1.f));
    break;
  case EwOp::ThresholdedRelu:
    for (int64_t i = 0; i < n; ++i) d[i] = a[i] > p0 ? a[i] : 0.f;
    break;
  case EwOp::Mish:
    for (int64_t i = 0; i < n; ++i)
      d[i] = a[i] * fast_tanh(a[i] > 20.f ? a[i] : std::log1p(fast_exp(a[i])));
    break;
  case EwOp::Scale:
    for (int64_t i = 0; i < n; ++i) d[i] = a[i] * p0;
    break;
  case EwOp::PRelu:
    for (int64_t i = 0; i < n; ++i) d[i] = a[i] >= 0.f ? a[i] : a[i] * b[i];
    break;
  }
}

struct EwTask {
  const EwProgram* p;
  float* out;
  const float* const* inputs;
  int64_t outer, chunks, perTask, total;
};

// One chunk of one row: gather strided inputs, run the program, store.
void runEwRange(const EwTask& t, int64_t begin, int64_t end) {
  const EwProgram& p = *t.p;
  int rank = static_cast<int>(p.dims.size());
  int64_t inner = p.dims.back();
  size_t numInputs = p.inOffsets.size();
  alignas(64) float inBuf[8][kChunk];
  alignas(64) float reg[8][kChunk];
  for (int64_t item = begin; item < end; ++item) {
    int64_t row = item / t.chunks, j0 = (item % t.chunks) * kChunk;
    int64_t len = std::min(kChunk, inner - j0);
    // Offsets of this row (the outer multi-index) for every operand.
    int64_t outOff = p.outOffset, rest = row;
    int64_t inOff[8];
    for (size_t i = 0; i < numInputs; ++i) inOff[i] = p.inOffsets[i];
    for (int d = rank - 2; d >= 0; --d) {
      int64_t idx = rest % p.dims[static_cast<size_t>(d)];
      rest /= p.dims[static_cast<size_t>(d)];
      outOff += idx * p.outStrides[static_cast<size_t>(d)];
      for (size_t i = 0; i < numInputs; ++i)
        inOff[i] += idx * p.inStrides[i][static_cast<size_t>(d)];
    }
    const float* src[8];
    for (size_t i = 0; i < numInputs; ++i) {
      int64_t s = p.inStrides[i].back();
      const float* base = t.inputs[i] + inOff[i] + j0 * s;
      if (s == 1) {
        src[i] = base;
      } else if (s == 0) {
        std::fill(inBuf[i], inBuf[i] + len, *base);
        src[i] = inBuf[i];
      } else {
        for (int64_t j = 0; j < len; ++j) inBuf[i][j] = base[j * s];
        src[i] = inBuf[i];
      }
    }
    int64_t os = p.outStrides.back();
    float* outPtr = t.out + outOff + j0 * os;
    for (size_t k = 0; k < p.code.size(); ++k) {
      const EwInstr& in = p.code[k];
      const float* a = in.a >= 0 ? reg[in.a] : src[-1 - in.a];
      const float* b = in.b >= 0 ? reg[in.b] : (in.b == -1000 ? a : src[-1 - in.b]);
      bool last = k + 1 == p.code.size();
      float* d = last && os == 1 ? outPtr : reg[in.dst];
      applyChunk(in.op, in.p0, in.p1, a, b, d, len);
      if (last && os != 1)
        for (int64_t j = 0; j < len; ++j) outPtr[j * os] = d[j];
    }
  }
}

template <typename F> void parallelRange(int64_t items, int threads, int64_t minPerTask, F&& f) {
  int64_t tasks =
      std::min<int64_t>(threads, std::max<int64_t>(1, items / std::max<int64_t>(1, minPerTask)));
  if (tasks <= 1) {
    f(0, items);
    return;
  }
  struct Ctx {
    F* f;
    int64_t items, tasks;
  } ctx{&f, items, tasks};
  tunec_parallel_for(
      [](void* c, int64_t task) {
        auto* x = static_cast<Ctx*>(c);
        int64_t lo = x->items * task / x->tasks, hi = x->items * (task + 1) / x->tasks;
        (*x->f)(lo, hi);
      },
      &ctx, tasks, threads);
}

} // namespace

bool isBinary(EwOp op) {
  return (op >= EwOp::Add && op <= EwOp::Pow) || op == EwOp::PRelu;
}

void EwProgram::encode(Step& step) const {
  step.kind = StepKind::Elementwise;
  BasicEwProgram<int64_t>::encode(step.ints, step.floats);
}

Expected<EwProgram> EwProgram::decode(const Step& step) {
  const auto& v = step.ints;
  auto bad = [&] { return makeError("corrupt elementwise step '", step.label, "'"); };
  if (v.size() < 3) return bad();
  int64_t rank = v[0], inputs = v[1], instrs = v[2];
  if (rank < 1 || rank > kMaxRank || inputs < 0 || inputs > kMaxEwInputs || instrs < 1 ||
      instrs > kMaxEwInstructions)
    return bad();
  size_t need = static_cast<size_t>(3 + rank + 1 + rank + inputs * (1 + rank) + 4 * instrs);
  if (v.size() != need || step.floats.size() != static_cast<size_t>(2 * instrs) ||
      step.tensors.size() != static_cast<size_t>(1 + inputs))
    return bad();
  EwProgram p;
  IntCursor at(v, 3);
  p.dims = at.take(rank);
  p.outOffset = at.next();
  p.outStrides = at.take(rank);
  for (int64_t i = 0; i < inputs; ++i) {
    p.inOffsets.push_back(at.next());
    p.inStrides.push_back(at.take(rank));
  }
  for (int64_t k = 0; k < instrs; ++k) {
    // Braced initializers are evaluated left to right: op, dst, a, b in stream order.
    EwInstr in{static_cast<EwOp>(at.next()),
               static_cast<int32_t>(at.next()),
               static_cast<int32_t>(at.next()),
               static_cast<int32_t>(at.next()),
               step.floats[static_cast<size_t>(2 * k)],
               step.floats[static_cast<size_t>(2 * k + 1)]};
    auto operandOk = [&](int32_t r, bool allowNone) {
      return (r >= 0 && r < 8) || (r < 0 && -1 - r < inputs) || (allowNone && r == -1000);
    };
    if (static_cast<int>(in.op) < 0 || in.op > EwOp::kLast || in.dst < 0 || in.dst >= 8 ||
        !operandOk(in.a, false) || !operandOk(in.b, !isBinary(in.op)))
      return bad();
    p.code.push_back(in);
  }
  for (int64_t d : p.dims)
    if (d < 0) return bad();
  return p;
}

namespace {

// A copy that transposes: the output contiguous along dimension `da`, the input along `db`.
// Row by row one side moves one element per cache line, tens of streams at once; in 16 x 16
// tiles both sides move whole lines (the reorders between plain and NHWC, and the Concat of a
// plain activation into an NHWC buffer).
void transposeCopy(const EwProgram& p, size_t da, size_t db, float* out, const float* in,
                   int threads) {
  constexpr int64_t kTile = 16;
  const int64_t na = p.dims[da], nb = p.dims[db];
  const int64_t inA = p.inStrides[0][da], outB = p.outStrides[db];
  std::vector<size_t> others;
  int64_t outer = 1;
  for (size_t d = 0; d < p.dims.size(); ++d)
    if (d != da && d != db) others.push_back(d), outer *= p.dims[d];
  const int64_t tilesA = (na + kTile - 1) / kTile, tilesB = (nb + kTile - 1) / kTile;
  parallelRange(outer * tilesB, threads, std::max<int64_t>(1, 64 / std::max<int64_t>(1, tilesA)),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t task = lo; task < hi; ++task) {
                    int64_t rest = task / tilesB, inOff = p.inOffsets[0], outOff = p.outOffset;
                    for (size_t k = others.size(); k-- > 0;) {
                      const size_t d = others[k];
                      const int64_t idx = rest % p.dims[d];
                      rest /= p.dims[d];
                      inOff += idx * p.inStrides[0][d];
                      outOff += idx * p.outStrides[d];
                    }
                    const int64_t b0 = task % tilesB * kTile, b1 = std::min(nb, b0 + kTile);
                    for (int64_t a0 = 0; a0 < na; a0 += kTile) {
                      const int64_t a1 = std::min(na, a0 + kTile);
                      for (int64_t b = b0; b < b1; ++b) {
                        const float* src = in + inOff + b;
                        float* dst = out + outOff + b * outB;
                        for (int64_t a = a0; a < a1; ++a) dst[a] = src[a * inA];
                      }
                    }
                  }
                });
}

} // namespace

void runElementwise(const EwProgram& p, float* out, const float* const* inputs, int threads) {
  for (int64_t d : p.dims)
    if (d == 0) return; // an empty tensor
  // A plain copy whose output and input are contiguous along different dimensions: tiles.
  if (p.code.size() == 1 && p.code[0].op == EwOp::Copy && p.inOffsets.size() == 1 &&
      p.code[0].a == -1 && p.dims.size() >= 2) {
    size_t da = p.dims.size(), db = p.dims.size();
    for (size_t d = 0; d < p.dims.size(); ++d) {
      if (p.outStrides[d] == 1 && p.dims[d] >= 8) da = d;
      if (p.inStrides[0][d] == 1 && p.dims[d] >= 8) db = d;
    }
    if (da < p.dims.size() && db < p.dims.size() && da != db) {
      transposeCopy(p, da, db, out, inputs[0], threads);
      return;
    }
  }
  int64_t inner = p.dims.back();
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < p.dims.size(); ++d) outer *= p.dims[d];
  EwTask t{&p, out, inputs, outer, (inner + kChunk - 1) / kChunk, 0, 0};
  t.total = outer * t.chunks;
  int64_t perItem = std::min(inner, kChunk);
  parallelRange(t.total, threads, std::max<int64_t>(1, 32768 / perItem),
                [&](int64_t lo, int64_t hi) { runEwRange(t, lo, hi); });
}

// Reductions over a row in kLanes independent partial results, which the compiler keeps in one
// vector register (a single running float is a dependency chain it may not reorder without
// -ffast-math). Sums differ from the sequential order only by rounding.
constexpr int kLanes = 16;

TUNEC_INLINE float rowMax(const float* x, int64_t n) {
  float acc[kLanes];
  for (float& a : acc) a = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] = acc[j] < x[i + j] ? x[i + j] : acc[j];
  float m = -std::numeric_limits<float>::infinity();
  for (; i < n; ++i) m = std::max(m, x[i]);
  for (float a : acc) m = std::max(m, a);
  return m;
}

// Sum of (x[i] - shift)^power over a row, power 1 or 2.
template <int power> TUNEC_INLINE float rowSum(const float* x, int64_t n, float shift = 0.f) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) {
      float d = x[i + j] - shift;
      acc[j] += power == 2 ? d * d : d;
    }
  float s = 0.f;
  for (; i < n; ++i) {
    float d = x[i] - shift;
    s += power == 2 ? d * d : d;
  }
  for (float a : acc) s += a;
  return s;
}

TUNEC_MULTIVERSION
static void softmaxRow(const float* in, float* out, int64_t n, int mode) {
  float mx = rowMax(in, n);
  if (mode == 2) { // hardmax: 1 at the first maximum
    bool found = false;
    for (int64_t i = 0; i < n; ++i) {
      bool hit = !found && in[i] == mx;
      out[i] = hit ? 1.f : 0.f;
      found |= hit;
    }
    return;
  }
  bool log = mode == 1;
  for (int64_t i = 0; i < n; ++i) out[i] = fast_exp(in[i] - mx);
  float sum = rowSum<1>(out, n);
  if (log) {
    float shift = mx + std::log(sum);
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] - shift;
    return;
  }
  float inv = 1.f / sum;
  for (int64_t i = 0; i < n; ++i) out[i] *= inv;
}

void runSoftmax(const float* in, float* out, int64_t outer, int64_t axis, int64_t inner, int mode,
                int threads) {
  if (outer * axis * inner == 0) return;
  parallelRange(outer * inner, threads, std::max<int64_t>(1, 16384 / axis),
                [&](int64_t lo, int64_t hi) {
                  std::vector<float> a(inner == 1 ? 0 : static_cast<size_t>(axis)), b(a.size());
                  for (int64_t r = lo; r < hi; ++r) {
                    int64_t o = r / inner, i = r % inner;
                    const float* src = in + o * axis * inner + i;
                    float* dst = out + o * axis * inner + i;
                    if (inner == 1) {
                      softmaxRow(src, dst, axis, mode);
                      continue;
                    }
                    for (int64_t k = 0; k < axis; ++k) a[static_cast<size_t>(k)] = src[k * inner];
                    softmaxRow(a.data(), b.data(), axis, mode);
                    for (int64_t k = 0; k < axis; ++k) dst[k * inner] = b[static_cast<size_t>(k)];
                  }
                });
}

TUNEC_MULTIVERSION
static float reduceRow(const float* in, int64_t n, ReduceKind kind) {
  float acc = 0.f;
  switch (kind) {
  case ReduceKind::Max:
    return rowMax(in, n);
  case ReduceKind::Min:
    acc = std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) acc = std::min(acc, in[i]);
    return acc;
  case ReduceKind::Prod:
    acc = 1.f;
    for (int64_t i = 0; i < n; ++i) acc *= in[i];
    return acc;
  case ReduceKind::L1:
    for (int64_t i = 0; i < n; ++i) acc += std::fabs(in[i]);
    return acc;
  case ReduceKind::L2:
  case ReduceKind::SumSquare:
    acc = rowSum<2>(in, n);
    return kind == ReduceKind::L2 ? std::sqrt(acc) : acc;
  case ReduceKind::LogSumExp: {
    float mx = rowMax(in, n);
    if (!std::isfinite(mx)) return mx;
    for (int64_t i = 0; i < n; ++i) acc += fast_exp(in[i] - mx);
    return mx + std::log(acc);
  }
  default:
    acc = rowSum<1>(in, n);
    if (kind == ReduceKind::Mean) return acc / static_cast<float>(n);
    if (kind == ReduceKind::LogSum) return std::log(acc);
    return acc;
  }
}

void runReduce(const float* in, float* out, int64_t outer, int64_t len, ReduceKind kind,
               int threads) {
  parallelRange(outer, threads, std::max<int64_t>(1, 16384 / std::max<int64_t>(len, 1)),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t r = lo; r < hi; ++r) out[r] = reduceRow(in + r * len, len, kind);
                });
}

TUNEC_MULTIVERSION
static void layerNormRow(const float* in, float* out, const float* scale, const float* bias,
                         int64_t n, float epsilon, float& meanOut, float& invOut) {
  float mean = rowSum<1>(in, n) / static_cast<float>(n);
  float sq = rowSum<2>(in, n, mean);
  float inv = 1.f / std::sqrt(sq / static_cast<float>(n) + epsilon);
  if (bias)
    for (int64_t i = 0; i < n; ++i) out[i] = (in[i] - mean) * inv * scale[i] + bias[i];
  else
    for (int64_t i = 0; i < n; ++i) out[i] = (in[i] - mean) * inv * scale[i];
  meanOut = mean;
  invOut = inv;
}

// Rows [0, rows) of one C, in tiles of 4 rows x 64 columns; a narrower last tile of columns
// takes the same loop with its width. (Portable form; matmulRowsAvx512 is the one AVX-512 runs.)
template <int64_t W>
TUNEC_INLINE void matmulTile(const float* a, const float* b, float* c, int64_t r, int64_t n,
                             int64_t k, int64_t width) {
  float acc[4][W];
  for (int64_t rr = 0; rr < 4; ++rr)
    for (int64_t j = 0; j < W; ++j) acc[rr][j] = 0.f;
  for (int64_t p = 0; p < k; ++p) {
    const float* bp = b + p * n;
    float bv[W];
    for (int64_t j = 0; j < W; ++j) bv[j] = j < width ? bp[j] : 0.f;
    for (int64_t rr = 0; rr < 4; ++rr) {
      const float av = rr < r ? a[rr * k + p] : 0.f;
      for (int64_t j = 0; j < W; ++j) acc[rr][j] += av * bv[j];
    }
  }
  for (int64_t rr = 0; rr < r; ++rr)
    for (int64_t j = 0; j < width; ++j) c[rr * n + j] = acc[rr][j];
}

TUNEC_MULTIVERSION
static void matmulRowsPortable(const float* a, const float* b, float* c, int64_t rows, int64_t n,
                               int64_t k) {
  for (int64_t i = 0; i < rows; i += 4) {
    const int64_t r = std::min<int64_t>(4, rows - i);
    int64_t j = 0;
    for (; j + 64 <= n; j += 64) matmulTile<64>(a + i * k, b + j, c + i * n + j, r, n, k, 64);
    if (j < n) matmulTile<64>(a + i * k, b + j, c + i * n + j, r, n, k, n - j);
  }
}

// R rows x 64 columns (the last tile's columns masked) with the R x 4 sums in zmm registers
// over all of k: 4 B loads, R broadcasts and 4R FMAs a step. The portable tile's sums, an array
// GCC kept on the stack (an FMA with a load and a store each), ran BERT-base's attention at a
// run-time length at 37 GFLOP/s on Zen 4.
template <int R>
__attribute__((target("avx512f"))) void matmulTileAvx512(const float* a, const float* b, float* c,
                                                         int64_t n, int64_t k, int64_t width) {
  __mmask16 mask[4];
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q)
    mask[q] =
        static_cast<__mmask16>((uint32_t{1} << std::clamp<int64_t>(width - 16 * q, 0, 16)) - 1);
  __m512 acc[R][4];
#pragma GCC unroll 4
  for (int rr = 0; rr < R; ++rr)
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) acc[rr][q] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    const float* bp = b + p * n;
    __m512 bv[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) bv[q] = _mm512_maskz_loadu_ps(mask[q], bp + 16 * q);
#pragma GCC unroll 4
    for (int rr = 0; rr < R; ++rr) {
      const __m512 av = _mm512_set1_ps(a[rr * k + p]);
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) acc[rr][q] = _mm512_fmadd_ps(av, bv[q], acc[rr][q]);
    }
  }
#pragma GCC unroll 4
  for (int rr = 0; rr < R; ++rr)
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) _mm512_mask_storeu_ps(c + rr * n + 16 * q, mask[q], acc[rr][q]);
}

// The same at AVX2: R rows x 16 columns, 2R ymm sums (16 registers in all).
template <int R>
__attribute__((target("avx2,fma"))) void matmulTileAvx2(const float* a, const float* b, float* c,
                                                        int64_t n, int64_t k, int64_t width) {
  __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i mask[2];
#pragma GCC unroll 2
  for (int q = 0; q < 2; ++q)
    mask[q] = _mm256_cmpgt_epi32(
        _mm256_set1_epi32(static_cast<int32_t>(std::clamp<int64_t>(width - 8 * q, 0, 8))), lanes);
  __m256 acc[R][2];
#pragma GCC unroll 4
  for (int rr = 0; rr < R; ++rr)
#pragma GCC unroll 2
    for (int q = 0; q < 2; ++q) acc[rr][q] = _mm256_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    const float* bp = b + p * n;
    __m256 bv[2];
#pragma GCC unroll 2
    for (int q = 0; q < 2; ++q) bv[q] = _mm256_maskload_ps(bp + 8 * q, mask[q]);
#pragma GCC unroll 4
    for (int rr = 0; rr < R; ++rr) {
      const __m256 av = _mm256_broadcast_ss(a + rr * k + p);
#pragma GCC unroll 2
      for (int q = 0; q < 2; ++q) acc[rr][q] = _mm256_fmadd_ps(av, bv[q], acc[rr][q]);
    }
  }
#pragma GCC unroll 4
  for (int rr = 0; rr < R; ++rr)
#pragma GCC unroll 2
    for (int q = 0; q < 2; ++q) _mm256_maskstore_ps(c + rr * n + 8 * q, mask[q], acc[rr][q]);
}

// Rows [0, rows) of one C in R x `width` tiles (R up to 4: the last row block's), each the
// tile function of its row count; the tiles carry their ISA's target, the loop none.
using RowTile = void (*)(const float*, const float*, float*, int64_t, int64_t, int64_t);
template <int64_t Width, RowTile One, RowTile Two, RowTile Three, RowTile Four>
void matmulRowsTiled(const float* a, const float* b, float* c, int64_t rows, int64_t n, int64_t k) {
  static constexpr RowTile kTiles[] = {nullptr, One, Two, Three, Four};
  for (int64_t i = 0; i < rows; i += 4) {
    const int64_t r = std::min<int64_t>(4, rows - i);
    for (int64_t j = 0; j < n; j += Width)
      kTiles[r](a + i * k, b + j, c + i * n + j, n, k, std::min<int64_t>(Width, n - j));
  }
}

static void matmulRows(const float* a, const float* b, float* c, int64_t rows, int64_t n, int64_t k,
                       RowsIsa isa) {
  static const RowsIsa best = __builtin_cpu_supports("avx512f") ? RowsIsa::Avx512
                              : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
                                  ? RowsIsa::Avx2
                                  : RowsIsa::Portable;
  switch (isa == RowsIsa::Auto ? best : isa) {
  case RowsIsa::Avx512:
  case RowsIsa::Avx512Vnni:
    return matmulRowsTiled<64, matmulTileAvx512<1>, matmulTileAvx512<2>, matmulTileAvx512<3>,
                           matmulTileAvx512<4>>(a, b, c, rows, n, k);
  case RowsIsa::Avx2:
    return matmulRowsTiled<16, matmulTileAvx2<1>, matmulTileAvx2<2>, matmulTileAvx2<3>,
                           matmulTileAvx2<4>>(a, b, c, rows, n, k);
  default:
    return matmulRowsPortable(a, b, c, rows, n, k);
  }
}

namespace {

// Rows [lo, hi) of C[m, n] = A[m, k] B[k, n] modulo 2^32 (unsigned arithmetic: the bits of
// int32's two's-complement wrap), in groups of 8 rows by 128 columns whose sums stay in L1
// while B's rows stream past once a group; the column loop vectorizes (vpmulld, vpaddd) in the
// ISA the caller was compiled for.
__attribute__((always_inline)) inline void integerRows(const int32_t* a, const int32_t* b,
                                                       int32_t* c, int64_t n, int64_t k, int64_t lo,
                                                       int64_t hi) {
  constexpr int64_t kRows = 8, kCols = 128;
  uint32_t sums[kRows][kCols];
  for (int64_t i0 = lo; i0 < hi; i0 += kRows) {
    const int64_t rows = std::min(kRows, hi - i0);
    for (int64_t j0 = 0; j0 < n; j0 += kCols) {
      const int64_t cols = std::min(kCols, n - j0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < cols; ++j) sums[r][j] = 0;
      for (int64_t p = 0; p < k; ++p) {
        const int32_t* brow = b + p * n + j0;
        for (int64_t r = 0; r < rows; ++r) {
          const auto av = static_cast<uint32_t>(a[(i0 + r) * k + p]);
          for (int64_t j = 0; j < cols; ++j) sums[r][j] += av * static_cast<uint32_t>(brow[j]);
        }
      }
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < cols; ++j)
          c[(i0 + r) * n + j0 + j] = static_cast<int32_t>(sums[r][j]);
    }
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void
integerRowsAvx512(const int32_t* a, const int32_t* b, int32_t* c, int64_t n, int64_t k, int64_t lo,
                  int64_t hi) {
  integerRows(a, b, c, n, k, lo, hi);
}
__attribute__((target("avx2"))) void integerRowsAvx2(const int32_t* a, const int32_t* b, int32_t* c,
                                                     int64_t n, int64_t k, int64_t lo, int64_t hi) {
  integerRows(a, b, c, n, k, lo, hi);
}
void integerRowsPortable(const int32_t* a, const int32_t* b, int32_t* c, int64_t n, int64_t k,
                         int64_t lo, int64_t hi) {
  integerRows(a, b, c, n, k, lo, hi);
}

// One output plane (image `image`, channel `o`) of an integer convolution.
__attribute__((always_inline)) inline void integerConvPlane(const int32_t* x, const int32_t* w,
                                                            int32_t* y, const IntegerConvParams& p,
                                                            int64_t image, int64_t o) {
  const int64_t cg = p.c / p.group, g = o / (p.oc / p.group), plane = p.oh * p.ow;
  auto* acc = reinterpret_cast<uint32_t*>(y + (image * p.oc + o) * plane);
  for (int64_t i = 0; i < plane; ++i) acc[i] = 0;
  for (int64_t ic = 0; ic < cg; ++ic) {
    const int32_t* in = x + (image * p.c + g * cg + ic) * p.h * p.w;
    for (int64_t ky = 0; ky < p.kh; ++ky)
      for (int64_t kx = 0; kx < p.kw; ++kx) {
        const auto wv = static_cast<uint32_t>(w[((o * cg + ic) * p.kh + ky) * p.kw + kx]);
        // The output columns whose tap ox * sw - padLeft + kx * dw is inside the row.
        const int64_t shift = kx * p.dw - p.padLeft;
        const int64_t first = shift >= 0 ? 0 : (-shift + p.sw - 1) / p.sw;
        const int64_t last =
            p.w - 1 - shift < 0 ? -1 : std::min(p.ow - 1, (p.w - 1 - shift) / p.sw);
        for (int64_t oy = 0; oy < p.oh; ++oy) {
          const int64_t iy = oy * p.sh - p.padTop + ky * p.dh;
          if (iy < 0 || iy >= p.h) continue;
          const int32_t* row = in + iy * p.w + shift;
          uint32_t* out = acc + oy * p.ow;
          for (int64_t ox = first; ox <= last; ++ox)
            out[ox] += wv * static_cast<uint32_t>(row[ox * p.sw]);
        }
      }
  }
}

__attribute__((target("avx2"))) void integerConvPlaneAvx2(const int32_t* x, const int32_t* w,
                                                          int32_t* y, const IntegerConvParams& p,
                                                          int64_t image, int64_t o) {
  integerConvPlane(x, w, y, p, image, o);
}
void integerConvPlanePortable(const int32_t* x, const int32_t* w, int32_t* y,
                              const IntegerConvParams& p, int64_t image, int64_t o) {
  integerConvPlane(x, w, y, p, image, o);
}

// The 16-bit form of the integer products, for operands that fit int16 (MatMulInteger's and
// ConvInteger's are differences of 8-bit codes): A packed as rows of int16 pairs [m][kp][2] and
// B as [kp][np][2] (k padded to even, n to whole tiles, with zeros), so that a 32-bit lane of B
// holds one column's (b[2p][j], b[2p+1][j]) and a broadcast 32-bit lane of A the row's
// (a[i][2p], a[i][2p+1]): vpmaddwd sums the two products in each lane, exact for int16 operands
// but for (-2^15)^2 + (-2^15)^2, which it wraps to -2^31, that sum modulo 2^32; vpaddd sums
// modulo 2^32 (vpdpwssd on AVX512-VNNI does both in one instruction, modulo 2^32 as they do: the
// one pair past int32 gives the same sum whether it wraps before or after the add).
// A register tile: 4 rows of A (pointers at the tile's first pair) by 4 vectors of columns of
// B (`bp` at the tile's first column), over `kp` pairs, added into C's rows (`ldc` apart) or
// stored when `first`. (A macro: each ISA's function needs its own target attribute, which a
// template would not carry.)
#define TUNEC_PAIR_TILE(VEC, LANES, SETZERO, LOAD, STORE, SET1, MADD)                              \
  VEC acc[4][4];                                                                                   \
  _Pragma("GCC unroll 4") for (int r = 0; r < 4; ++r)                                              \
      _Pragma("GCC unroll 4") for (int v = 0; v < 4; ++v) acc[r][v] =                              \
          first ? SETZERO() : LOAD(c + r * ldc + LANES * v);                                       \
  for (int64_t p = 0; p < kp; ++p) {                                                               \
    const int32_t* brow = bp + p * np;                                                             \
    VEC b[4];                                                                                      \
    _Pragma("GCC unroll 4") for (int v = 0; v < 4; ++v) b[v] = LOAD(brow + LANES * v);             \
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; ++r) {                                          \
      const VEC pair = SET1(aRows[r][p]);                                                          \
      _Pragma("GCC unroll 4") for (int v = 0; v < 4; ++v) acc[r][v] = MADD(acc[r][v], b[v], pair); \
    }                                                                                              \
  }                                                                                                \
  _Pragma("GCC unroll 4") for (int r = 0; r < 4; ++r)                                              \
      _Pragma("GCC unroll 4") for (int v = 0; v < 4; ++v)                                          \
          STORE(c + r * ldc + LANES * v, acc[r][v])

using PairTile = void (*)(const int32_t* const*, const int32_t*, int64_t, int64_t, int32_t*,
                          int64_t, bool);
#define TUNEC_LOAD512(p) _mm512_loadu_si512(p)
#define TUNEC_STORE512(p, v) _mm512_storeu_si512(p, v)
#define TUNEC_MADD512(acc, b, pair) _mm512_add_epi32(acc, _mm512_madd_epi16(b, pair))
#define TUNEC_LOAD256(p) _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))
#define TUNEC_STORE256(p, v) _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v)
#define TUNEC_MADD256(acc, b, pair) _mm256_add_epi32(acc, _mm256_madd_epi16(b, pair))
__attribute__((target("avx512f,avx512bw"))) void pairTile512(const int32_t* const* aRows,
                                                             const int32_t* bp, int64_t np,
                                                             int64_t kp, int32_t* c, int64_t ldc,
                                                             bool first) {
  TUNEC_PAIR_TILE(__m512i, 16, _mm512_setzero_si512, TUNEC_LOAD512, TUNEC_STORE512,
                  _mm512_set1_epi32, TUNEC_MADD512);
}
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void
pairTile512Vnni(const int32_t* const* aRows, const int32_t* bp, int64_t np, int64_t kp, int32_t* c,
                int64_t ldc, bool first) {
  TUNEC_PAIR_TILE(__m512i, 16, _mm512_setzero_si512, TUNEC_LOAD512, TUNEC_STORE512,
                  _mm512_set1_epi32, _mm512_dpwssd_epi32);
}
__attribute__((target("avx2"))) void pairTile256(const int32_t* const* aRows, const int32_t* bp,
                                                 int64_t np, int64_t kp, int32_t* c, int64_t ldc,
                                                 bool first) {
  TUNEC_PAIR_TILE(__m256i, 8, _mm256_setzero_si256, TUNEC_LOAD256, TUNEC_STORE256,
                  _mm256_set1_epi32, TUNEC_MADD256);
}
#undef TUNEC_LOAD512
#undef TUNEC_STORE512
#undef TUNEC_MADD512
#undef TUNEC_LOAD256
#undef TUNEC_STORE256
#undef TUNEC_MADD256
#undef TUNEC_PAIR_TILE

// Rows [lo, hi) of C from the packed operands: tiles of 4 rows by 4 vectors of `Lanes` columns.
template <int Lanes, PairTile Tile>
void pairRows(const int32_t* ap, const int32_t* bp, const int32_t* zeros, int32_t* c, int64_t n,
              int64_t np, int64_t kp, int64_t lo, int64_t hi) {
  constexpr int64_t kTile = 4 * Lanes;
  alignas(64) int32_t out[4 * kTile];
  for (int64_t i0 = lo; i0 < hi; i0 += 4) {
    const int32_t* rows[4];
    for (int r = 0; r < 4; ++r) rows[r] = i0 + r < hi ? ap + (i0 + r) * kp : zeros;
    for (int64_t j0 = 0; j0 < n; j0 += kTile) { // np: whole tiles past n (zeros)
      Tile(rows, bp + j0, np, kp, out, kTile, true);
      const int64_t cols = std::min(kTile, n - j0);
      for (int64_t r = 0; r < std::min<int64_t>(4, hi - i0); ++r)
        std::memcpy(c + (i0 + r) * n + j0, out + r * kTile, static_cast<size_t>(cols) * 4);
    }
  }
}

// Whether every one of the n values fits int16.
bool fitsInt16(const int32_t* v, int64_t n) {
  int32_t lo = 0, hi = 0;
  for (int64_t i = 0; i < n; ++i) lo = std::min(lo, v[i]), hi = std::max(hi, v[i]);
  return lo >= INT16_MIN && hi <= INT16_MAX;
}

// One int16 pair in a 32-bit lane: `first` in the low half (vpmaddwd's even element).
int32_t pairOf(int32_t first, int32_t second) {
  return static_cast<int32_t>((static_cast<uint32_t>(static_cast<uint16_t>(second)) << 16) |
                              static_cast<uint16_t>(first));
}

// B [k, n] as int16 pairs [kp][np] (zeros past k and n).
void packPairs(const int32_t* b, int64_t k, int64_t n, int64_t np, int32_t* bp) {
  const int64_t kp = (k + 1) / 2;
  for (int64_t p = 0; p < kp; ++p)
    for (int64_t j = 0; j < np; ++j) {
      const bool in = j < n;
      bp[p * np + j] =
          pairOf(in ? b[2 * p * n + j] : 0, in && 2 * p + 1 < k ? b[(2 * p + 1) * n + j] : 0);
    }
}

} // namespace

int64_t integerPairColumns(int64_t n) {
  return (n + 63) / 64 * 64; // whole tiles of 64 (AVX-512) and of 32 (AVX2) columns
}

std::vector<int32_t> packIntegerPairs(const int32_t* b, int64_t k, int64_t n) {
  if (k <= 0 || n <= 0 || !fitsInt16(b, k * n)) return {};
  const int64_t np = integerPairColumns(n);
  std::vector<int32_t> out(static_cast<size_t>((k + 1) / 2 * np));
  packPairs(b, k, n, np, out.data());
  return out;
}

namespace {

// The widest form of the integer products the CPU has, decided once (the 16-bit tiles need
// AVX-512 BW; vpdpwssd VNNI).
RowsIsa widestIntegerIsa() {
  static const RowsIsa best =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
              __builtin_cpu_supports("avx512vl")
          ? (__builtin_cpu_supports("avx512vnni") ? RowsIsa::Avx512Vnni : RowsIsa::Avx512)
      : __builtin_cpu_supports("avx2") ? RowsIsa::Avx2
                                       : RowsIsa::Portable;
  return best;
}

} // namespace

void runIntegerMatmul(const int32_t* a, const int32_t* b, int32_t* c, int64_t batch, int64_t m,
                      int64_t n, int64_t k, int64_t aBatchStride, int64_t bBatchStride, int threads,
                      RowsIsa isa, const int32_t* packedB) {
  if (isa == RowsIsa::Auto) isa = widestIntegerIsa();
  // Operands that fit int16 (differences of 8-bit codes) on the vpmaddwd tiles, one matrix at
  // a time: A and B packed as int16 pairs in scratch, then tasks of 4-row groups.
  // A B packed at compile time (shared, fits int16) is used as it is.
  const bool prepacked = packedB && bBatchStride == 0;
  const bool pairs =
      isa != RowsIsa::Portable && k > 0 && n > 0 && m > 0 &&
      fitsInt16(a, (aBatchStride ? batch - 1 : 0) * aBatchStride + m * k) &&
      (prepacked || fitsInt16(b, (bBatchStride ? batch - 1 : 0) * bBatchStride + k * n));
  if (pairs) {
    const bool wide = isa == RowsIsa::Avx512 || isa == RowsIsa::Avx512Vnni;
    const int64_t lanes = wide ? 16 : 8, tile = 4 * lanes;
    const int64_t kp = (k + 1) / 2,
                  np = prepacked ? integerPairColumns(n) : (n + tile - 1) / tile * tile;
    auto* scratchB = prepacked ? nullptr : static_cast<int32_t*>(tunec_scratch(0, kp * np * 4));
    const int32_t* bp = prepacked ? packedB : scratchB;
    auto* ap = static_cast<int32_t*>(tunec_scratch(1, (m * kp + kp) * 4));
    int32_t* zeros = ap + m * kp;
    std::fill(zeros, zeros + kp, 0);
    auto* pairRowsFor = isa == RowsIsa::Avx512Vnni ? pairRows<16, pairTile512Vnni>
                        : isa == RowsIsa::Avx512   ? pairRows<16, pairTile512>
                                                   : pairRows<8, pairTile256>;
    for (int64_t bi = 0; bi < batch; ++bi) {
      const int32_t* ab = a + bi * aBatchStride;
      if (!prepacked && (bi == 0 || bBatchStride))
        packPairs(b + bi * bBatchStride, k, n, np, scratchB);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t p = 0; p < kp; ++p)
          ap[i * kp + p] = pairOf(ab[i * k + 2 * p], 2 * p + 1 < k ? ab[i * k + 2 * p + 1] : 0);
      const int64_t groups = (m + 3) / 4;
      parallelRange(
          groups, threads, std::max<int64_t>(1, 65536 / std::max<int64_t>(1, 4 * np * kp)),
          [&](int64_t lo, int64_t hi) {
            pairRowsFor(ap, bp, zeros, c + bi * m * n, n, np, kp, lo * 4, std::min(m, hi * 4));
          });
    }
    return;
  }
  auto* rows = isa == RowsIsa::Avx512 || isa == RowsIsa::Avx512Vnni ? integerRowsAvx512
               : isa == RowsIsa::Avx2                               ? integerRowsAvx2
                                                                    : integerRowsPortable;
  // Tasks of whole 8-row groups of one matrix.
  const int64_t groups = (m + 7) / 8;
  parallelRange(batch * groups, threads,
                std::max<int64_t>(1, 65536 / std::max<int64_t>(1, 8 * n * k)),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t t = lo; t < hi; ++t) {
                    const int64_t bi = t / groups, first = (t % groups) * 8;
                    rows(a + bi * aBatchStride, b + bi * bBatchStride, c + bi * m * n, n, k, first,
                         std::min(m, first + 8));
                  }
                });
}

namespace {

// The convolution of one group as a matmul on int16 pairs, for operands that fit int16 (the
// centered 8-bit codes of ConvInteger's exact form) on the matmul's pair tiles (`tileColumns`
// columns each: 64 on AVX-512, 32 on AVX2): the weights packed once per run
// as B [kp][np] (k = (ic, ky, kx), n the output channels, zeros past them), then chunks of
// output pixels in parallel, each im2col'd into pairs (padded taps 0) and multiplied K block by
// K block (B's block stays in L2 while the chunk's rows pass) into an [pixels][np] sum,
// scattered to the NCHW output. The same sums modulo 2^32 as the direct form.
void integerConvPairs(const int32_t* x, const int32_t* w, int32_t* y, const IntegerConvParams& p,
                      int threads, PairTile tile, int64_t tileColumns, const int32_t* packedW) {
  const int64_t k = p.c * p.kh * p.kw, kp = (k + 1) / 2, np = integerPairColumns(p.oc);
  const int64_t plane = p.oh * p.ow;
  const int32_t* bp = packedW;
  if (!bp) {
    auto* scratch = static_cast<int32_t*>(tunec_scratch(0, kp * np * 4));
    for (int64_t q = 0; q < kp; ++q)
      for (int64_t j = 0; j < np; ++j) {
        const bool in = j < p.oc;
        scratch[q * np + j] =
            pairOf(in ? w[j * k + 2 * q] : 0, in && 2 * q + 1 < k ? w[j * k + 2 * q + 1] : 0);
      }
    bp = scratch;
  }
  constexpr int64_t kChunkPixels = 32, kBlockPairs = 256;
  const int64_t chunks = (plane + kChunkPixels - 1) / kChunkPixels;
  parallelRange(p.n * chunks, threads, 1, [&](int64_t lo, int64_t hi) {
    auto* a = static_cast<int32_t*>(tunec_scratch(1, (kChunkPixels * kp + kp) * 4));
    auto* c = static_cast<int32_t*>(tunec_scratch(2, kChunkPixels * np * 4));
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t image = t / chunks, first = (t % chunks) * kChunkPixels;
      const int64_t pixels = std::min(kChunkPixels, plane - first);
      const int32_t* xi = x + image * p.c * p.h * p.w;
      // im2col into pairs: row i holds pixel first + i's taps in w's order (ic, ky, kx).
      for (int64_t i = 0; i < kChunkPixels; ++i) {
        int32_t* row = a + i * kp;
        if (i >= pixels) {
          std::fill(row, row + kp, 0);
          continue;
        }
        const int64_t oy = (first + i) / p.ow, ox = (first + i) % p.ow;
        auto* halves = reinterpret_cast<int16_t*>(row);
        int64_t at = 0;
        for (int64_t ic = 0; ic < p.c; ++ic)
          for (int64_t ky = 0; ky < p.kh; ++ky) {
            const int64_t iy = oy * p.sh - p.padTop + ky * p.dh;
            const bool rowIn = iy >= 0 && iy < p.h;
            const int32_t* src = xi + (ic * p.h + iy) * p.w;
            for (int64_t kx = 0; kx < p.kw; ++kx, ++at) {
              const int64_t ix = ox * p.sw - p.padLeft + kx * p.dw;
              halves[at] = rowIn && ix >= 0 && ix < p.w ? static_cast<int16_t>(src[ix]) : 0;
            }
          }
        if (k % 2) halves[k] = 0;
      }
      const int32_t* rows[4];
      for (int64_t kb = 0; kb < kp; kb += kBlockPairs) {
        const int64_t kc = std::min(kBlockPairs, kp - kb);
        for (int64_t j0 = 0; j0 < np; j0 += tileColumns)
          for (int64_t i0 = 0; i0 < kChunkPixels; i0 += 4) {
            for (int r = 0; r < 4; ++r) rows[r] = a + (i0 + r) * kp + kb;
            tile(rows, bp + kb * np + j0, np, kc, c + i0 * np + j0, np, kb == 0);
          }
      }
      int32_t* yi = y + image * p.oc * plane;
      for (int64_t o = 0; o < p.oc; ++o)
        for (int64_t i = 0; i < pixels; ++i) yi[o * plane + first + i] = c[i * np + o];
    }
  });
}

} // namespace

bool IntegerConvParams::valid() const {
  return n >= 0 && c >= 1 && h >= 1 && w >= 1 && oc >= 1 && kh >= 1 && kw >= 1 && oh >= 0 &&
         ow >= 0 && sh >= 1 && sw >= 1 && padTop >= 0 && padLeft >= 0 && dh >= 1 && dw >= 1 &&
         group >= 1 && c % group == 0 && oc % group == 0;
}

void runIntegerConv(const int32_t* x, const int32_t* w, int32_t* y, const IntegerConvParams& p,
                    int threads, RowsIsa isa, const int32_t* packedW) {
  if (isa == RowsIsa::Auto) isa = widestIntegerIsa();
  // One group whose operands fit int16 (always, for centered 8-bit codes) on the pair tiles.
  if (isa != RowsIsa::Portable && p.group == 1 && p.n > 0 && p.oh * p.ow > 0 &&
      fitsInt16(x, p.n * p.c * p.h * p.w) && (packedW || fitsInt16(w, p.oc * p.c * p.kh * p.kw))) {
    const bool wide = isa == RowsIsa::Avx512 || isa == RowsIsa::Avx512Vnni;
    integerConvPairs(x, w, y, p, threads,
                     isa == RowsIsa::Avx512Vnni ? pairTile512Vnni
                     : wide                     ? pairTile512
                                                : pairTile256,
                     wide ? 64 : 32, packedW);
    return;
  }
  static auto* const plane =
      __builtin_cpu_supports("avx2") ? integerConvPlaneAvx2 : integerConvPlanePortable;
  parallelRange(p.n * p.oc, threads, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) plane(x, w, y, p, t / p.oc, t % p.oc);
  });
}

bool ResampleParams::valid() const {
  return outer >= 0 && inLength >= 1 && outLength >= 0 && inner >= 0 &&
         (taps == 1 || ((taps == 2 || taps == 4) && elemBytes == 4)) &&
         (elemBytes == 1 || elemBytes == 2 || elemBytes == 4 || elemBytes == 8);
}

namespace {

// One output row of `n` floats: the weighted sum of `taps` input rows.
TUNEC_MULTIVERSION
void resampleRow(const float* const* rows, const float* w, int64_t taps, float* out, int64_t n) {
  if (taps == 2) {
    const float w0 = w[0], w1 = w[1];
    const float *a = rows[0], *b = rows[1];
    for (int64_t i = 0; i < n; ++i) out[i] = w0 * a[i] + w1 * b[i];
    return;
  }
  const float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
  const float *a = rows[0], *b = rows[1], *c = rows[2], *d = rows[3];
  for (int64_t i = 0; i < n; ++i) out[i] = w0 * a[i] + w1 * b[i] + w2 * c[i] + w3 * d[i];
}

// A whole line of `n` outputs from one input line, one float each (the innermost axis).
TUNEC_MULTIVERSION
void resampleLine(const float* in, const int64_t* index, const float* w, int64_t taps, float* out,
                  int64_t n) {
  for (int64_t o = 0; o < n; ++o) {
    float sum = 0;
    for (int64_t k = 0; k < taps; ++k) sum += w[o * taps + k] * in[index[o * taps + k]];
    out[o] = sum;
  }
}

} // namespace

void runResample(const ResampleParams& p, const int64_t* index, const float* weight,
                 const uint8_t* in, uint8_t* out, int threads) {
  const int64_t rowBytes = p.inner * p.elemBytes;
  const int64_t taps = p.taps;
  if (p.inner == 1 && taps == 1) { // nearest along the innermost axis: a gather per line
    auto gatherLines = [&](auto element) {
      using E = decltype(element);
      parallelRange(p.outer, threads, std::max<int64_t>(1, 4096 / (p.outLength + 1)),
                    [&](int64_t lo, int64_t hi) {
                      for (int64_t q = lo; q < hi; ++q) {
                        const E* src = reinterpret_cast<const E*>(in) + q * p.inLength;
                        E* dst = reinterpret_cast<E*>(out) + q * p.outLength;
                        for (int64_t o = 0; o < p.outLength; ++o) dst[o] = src[index[o]];
                      }
                    });
    };
    switch (p.elemBytes) {
    case 1:
      return gatherLines(uint8_t{});
    case 2:
      return gatherLines(uint16_t{});
    case 4:
      return gatherLines(uint32_t{});
    default:
      return gatherLines(uint64_t{});
    }
  }
  if (p.inner == 1 && taps > 1) {
    parallelRange(p.outer, threads, std::max<int64_t>(1, 4096 / (p.outLength + 1)),
                  [&](int64_t lo, int64_t hi) {
                    for (int64_t q = lo; q < hi; ++q)
                      resampleLine(reinterpret_cast<const float*>(in) + q * p.inLength, index,
                                   weight, taps, reinterpret_cast<float*>(out) + q * p.outLength,
                                   p.outLength);
                  });
    return;
  }
  parallelRange(p.outer * p.outLength, threads, std::max<int64_t>(1, 16384 / (rowBytes + 1)),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t r = lo; r < hi; ++r) {
                    const int64_t q = r / p.outLength, o = r % p.outLength;
                    const uint8_t* plane = in + q * p.inLength * rowBytes;
                    uint8_t* dst = out + r * rowBytes;
                    const int64_t* idx = index + o * taps;
                    if (taps == 1) {
                      std::memcpy(dst, plane + idx[0] * rowBytes, static_cast<size_t>(rowBytes));
                      continue;
                    }
                    const float* rows[4];
                    for (int64_t k = 0; k < taps; ++k)
                      rows[k] = reinterpret_cast<const float*>(plane + idx[k] * rowBytes);
                    resampleRow(rows, weight + o * taps, taps, reinterpret_cast<float*>(dst),
                                p.inner);
                  }
                });
}

void runTrilu(const uint8_t* in, uint8_t* out, int64_t matrices, int64_t rows, int64_t cols,
              int64_t k, bool upper, int64_t elem) {
  for (int64_t m = 0; m < matrices; ++m)
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t at = (m * rows + i) * cols * elem;
      // Columns [from, to) are kept: j >= i + k (upper) or j <= i + k (lower).
      const int64_t from = upper ? std::clamp<int64_t>(i + k, 0, cols) : 0;
      const int64_t to = upper ? cols : std::clamp<int64_t>(i + k + 1, 0, cols);
      std::memset(out + at, 0, static_cast<size_t>(cols * elem));
      if (to > from)
        std::memcpy(out + at + from * elem, in + at + from * elem,
                    static_cast<size_t>((to - from) * elem));
    }
}

// C[i, j] = dot(A row i, B row j) with B stored [n, k]: 16 lanes of partial sums per dot
// (vectorized without reassociating a reduction), added pairwise at the end.
TUNEC_MULTIVERSION
static void matmulRowsTransposedB(const float* a, const float* b, float* c, int64_t rows, int64_t n,
                                  int64_t k) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const float* x = a + i * k;
      const float* y = b + j * k;
      float lanes[16] = {};
      int64_t p = 0;
      for (; p + 16 <= k; p += 16)
        for (int l = 0; l < 16; ++l) lanes[l] += x[p + l] * y[p + l];
      for (int l = 0; p + l < k; ++l) lanes[l] += x[p + l] * y[p + l];
      for (int w = 8; w > 0; w /= 2)
        for (int l = 0; l < w; ++l) lanes[l] += lanes[l + w];
      c[i * n + j] = lanes[0];
    }
}

void runBatchedMatmul(const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t n,
                      int64_t k, int64_t aBatchStride, int64_t bBatchStride, int threads,
                      bool bTransposed, RowsIsa isa) {
  // Many rows against a transposed B (a prompt's Q K^T): B transposed once per batch into this
  // thread's scratch, then the register-tiled rows; a few rows (a decode step's) read it as
  // stored, a dot product per output.
  if (bTransposed && m >= 16) {
    const int64_t perBatch = bBatchStride == 0 ? 1 : batch;
    auto* bt = static_cast<float*>(tunec_scratch(2, perBatch * n * k * 4));
    for (int64_t i = 0; i < perBatch; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t p = 0; p < k; ++p) bt[i * n * k + p * n + j] = b[i * bBatchStride + j * k + p];
    runBatchedMatmul(a, bt, c, batch, m, n, k, aBatchStride, bBatchStride == 0 ? 0 : n * k, threads,
                     false, isa);
    return;
  }
  const int64_t blocks = (m + 15) / 16; // 16 rows per task
  parallelRange(batch * blocks, threads, std::max<int64_t>(1, 4096 / std::max<int64_t>(n * k, 1)),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t t = lo; t < hi; ++t) {
                    int64_t i = t / blocks, row = t % blocks * 16;
                    int64_t rows = std::min<int64_t>(16, m - row);
                    if (bTransposed)
                      matmulRowsTransposedB(a + i * aBatchStride + row * k, b + i * bBatchStride,
                                            c + i * m * n + row * n, rows, n, k);
                    else
                      matmulRows(a + i * aBatchStride + row * k, b + i * bBatchStride,
                                 c + i * m * n + row * n, rows, n, k, isa);
                  }
                });
}

// x / sqrt(mean(x^2) + epsilon) * scale.
TUNEC_MULTIVERSION
static void rmsNormRow(const float* in, float* out, const float* scale, const float* bias,
                       int64_t n, float epsilon, float& meanOut, float& invOut) {
  float inv = 1.f / std::sqrt(rowSum<2>(in, n) / static_cast<float>(n) + epsilon);
  if (bias)
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] * inv * scale[i] + bias[i];
  else
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] * inv * scale[i];
  meanOut = 0.f;
  invOut = inv;
}

void runLayerNorm(const float* in, float* out, const float* scale, const float* bias, float* mean,
                  float* invStd, int64_t rows, int64_t cols, float epsilon, int threads, bool rms) {
  parallelRange(rows, threads, std::max<int64_t>(1, 16384 / cols), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      float m, inv;
      if (rms)
        rmsNormRow(in + r * cols, out + r * cols, scale, bias, cols, epsilon, m, inv);
      else
        layerNormRow(in + r * cols, out + r * cols, scale, bias, cols, epsilon, m, inv);
      if (mean) mean[r] = m;
      if (invStd) invStd[r] = inv;
    }
  });
}

// Calls visit(offset) with the element offset of each window cell of output pixel (oy, ox) of
// image n that lies in the input (padding left out), and returns the window's count: its cells
// in the input, and with countIncludePad those in the padded input too (ONNX semantics).
template <typename Visit>
inline int64_t forEachWindowCell(const PoolParams& p, int64_t n, int64_t oy, int64_t ox,
                                 Visit&& visit) {
  int64_t count = 0;
  for (int64_t ky = 0; ky < p.kh; ++ky) {
    int64_t y = oy * p.sh - p.padTop + ky * p.dh;
    for (int64_t kx = 0; kx < p.kw; ++kx) {
      int64_t x = ox * p.sw - p.padLeft + kx * p.dw;
      if (y < 0 || y >= p.h || x < 0 || x >= p.w) {
        if (p.countIncludePad && y < p.h + p.padTop && x < p.w + p.padLeft) ++count;
        continue;
      }
      ++count;
      visit(n * p.inStride[0] + y * p.inStride[2] + x * p.inStride[3]);
    }
  }
  return count;
}

// One output pixel for every channel: the window loops outside, the channel loop inside (unit
// stride in NHWC, so it vectorizes); `acc` holds one accumulator per channel.
TUNEC_MULTIVERSION
static void poolPixel(const PoolParams& p, const float* in, float* out, float* acc, int64_t n,
                      int64_t oy, int64_t ox) {
  float init = p.isMax ? -std::numeric_limits<float>::infinity() : 0.f;
  for (int64_t c = 0; c < p.c; ++c) acc[c] = init;
  const int64_t cs = p.inStride[1];
  int64_t count = forEachWindowCell(p, n, oy, ox, [&](int64_t offset) {
    const float* src = in + offset;
    if (p.isMax)
      for (int64_t c = 0; c < p.c; ++c) acc[c] = std::max(acc[c], src[c * cs]);
    else
      for (int64_t c = 0; c < p.c; ++c) acc[c] += src[c * cs];
  });
  float scale = p.isMax ? 1.f : 1.f / static_cast<float>(std::max<int64_t>(count, 1));
  float* dst = out + n * p.outStride[0] + oy * p.outStride[2] + ox * p.outStride[3];
  for (int64_t c = 0; c < p.c; ++c) dst[c * p.outStride[1]] = acc[c] * scale;
}

// One output pixel of a max pool over integers (u8 or s8), as poolPixel; padding is left out.
// The parameters are read into locals first: a byte store may alias them (char types alias
// everything), which would keep the channel loops from vectorizing.
template <typename T>
TUNEC_MULTIVERSION static void maxPoolPixel(const PoolParams& p, const T* in, T* out,
                                            T* __restrict acc, int64_t n, int64_t oy, int64_t ox) {
  const int64_t channels = p.c, cs = p.inStride[1], ocs = p.outStride[1];
  for (int64_t c = 0; c < channels; ++c) acc[c] = std::numeric_limits<T>::lowest();
  forEachWindowCell(p, n, oy, ox, [&](int64_t offset) {
    const T* __restrict src = in + offset;
    if (cs == 1) // NHWC: channels adjacent, one vector max per 32 or 64 of them
      for (int64_t c = 0; c < channels; ++c) acc[c] = std::max(acc[c], src[c]);
    else
      for (int64_t c = 0; c < channels; ++c) acc[c] = std::max(acc[c], src[c * cs]);
  });
  T* dst = out + n * p.outStride[0] + oy * p.outStride[2] + ox * p.outStride[3];
  if (ocs == 1)
    std::memcpy(dst, acc, static_cast<size_t>(channels) * sizeof(T));
  else
    for (int64_t c = 0; c < channels; ++c) dst[c * ocs] = acc[c];
}

// One output pixel of an average pool over integers (u8 or s8): the exact sum of the window,
// divided by its count and rounded to the nearest integer, ties to even (a quantized global
// average pool: move-quantized-values).
template <typename T>
static void averagePoolPixel(const PoolParams& p, const T* in, T* out, int64_t* __restrict acc,
                             int64_t n, int64_t oy, int64_t ox) {
  const int64_t channels = p.c, cs = p.inStride[1], ocs = p.outStride[1];
  for (int64_t c = 0; c < channels; ++c) acc[c] = 0;
  int64_t count = forEachWindowCell(p, n, oy, ox, [&](int64_t offset) {
    const T* __restrict src = in + offset;
    for (int64_t c = 0; c < channels; ++c) acc[c] += src[c * cs];
  });
  const double divisor = static_cast<double>(std::max<int64_t>(count, 1));
  T* dst = out + n * p.outStride[0] + oy * p.outStride[2] + ox * p.outStride[3];
  for (int64_t c = 0; c < channels; ++c) // |sum| < 2^40: the quotient rounds correctly
    dst[c * ocs] = static_cast<T>(std::nearbyint(static_cast<double>(acc[c]) / divisor));
}

template <typename T> void runPoolOf(const PoolParams& p, const void* in, void* out, int threads) {
  parallelRange(p.n * p.oh, threads, 1, [&](int64_t lo, int64_t hi) {
    std::vector<T> acc(static_cast<size_t>(p.c));
    std::vector<int64_t> sums(std::is_same_v<T, float> || p.isMax ? 0 : static_cast<size_t>(p.c));
    for (int64_t r = lo; r < hi; ++r)
      for (int64_t ox = 0; ox < p.ow; ++ox) {
        if constexpr (std::is_same_v<T, float>)
          poolPixel(p, static_cast<const float*>(in), static_cast<float*>(out), acc.data(),
                    r / p.oh, r % p.oh, ox);
        else if (p.isMax)
          maxPoolPixel<T>(p, static_cast<const T*>(in), static_cast<T*>(out), acc.data(), r / p.oh,
                          r % p.oh, ox);
        else
          averagePoolPixel<T>(p, static_cast<const T*>(in), static_cast<T*>(out), sums.data(),
                              r / p.oh, r % p.oh, ox);
      }
  });
}

void runPool(const PoolParams& p, const void* in, void* out, int threads) {
  switch (static_cast<DType>(p.dtype)) {
  case DType::U8:
    return runPoolOf<uint8_t>(p, in, out, threads);
  case DType::I8:
    return runPoolOf<int8_t>(p, in, out, threads);
  default:
    return runPoolOf<float>(p, in, out, threads);
  }
}

Status runGather(const uint8_t* data, const uint8_t* indices, uint8_t* out, int64_t outer,
                 int64_t axis, int64_t inner, int64_t count, int64_t elemBytes,
                 int64_t indexBytes) {
  // The indices, read and checked once.
  std::vector<int64_t> index(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    int64_t idx = 0;
    if (indexBytes == 8) {
      std::memcpy(&idx, indices + i * 8, 8);
    } else {
      int32_t v;
      std::memcpy(&v, indices + i * 4, 4);
      idx = v;
    }
    if (idx < 0) idx += axis;
    if (idx < 0 || idx >= axis)
      return makeError("Gather: index ", idx, " is out of range for an axis of ", axis);
    index[static_cast<size_t>(i)] = idx;
  }
  if (inner == 1 && elemBytes == 4) {
    // Single elements (the channels of an NHWC pixel: a channel shuffle or slice): row by row,
    // each source row and destination row in L1.
    for (int64_t o = 0; o < outer; ++o) {
      const uint32_t* src = reinterpret_cast<const uint32_t*>(data) + o * axis;
      uint32_t* dst = reinterpret_cast<uint32_t*>(out) + o * count;
      for (int64_t i = 0; i < count; ++i) dst[i] = src[index[static_cast<size_t>(i)]];
    }
    return {};
  }
  int64_t rowBytes = inner * elemBytes;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < count; ++i)
      std::memcpy(out + (o * count + i) * rowBytes,
                  data + (o * axis + index[static_cast<size_t>(i)]) * rowBytes,
                  static_cast<size_t>(rowBytes));
  return {};
}

void runChannelRuns(const uint8_t* in, uint8_t* out, int64_t pixels, int64_t inLd, int64_t outLd,
                    const int64_t* runs, int64_t count, int threads) {
  int64_t perPixel = 0;
  for (int64_t r = 0; r < count; ++r) perPixel += runs[3 * r + 2];
  parallelRange(pixels, threads, std::max<int64_t>(1, 16384 / std::max<int64_t>(perPixel, 1)),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t p = lo; p < hi; ++p)
                    for (int64_t r = 0; r < count; ++r)
                      std::memcpy(out + (p * outLd + runs[3 * r + 1]) * 4,
                                  in + (p * inLd + runs[3 * r]) * 4,
                                  static_cast<size_t>(runs[3 * r + 2]) * 4);
                });
}

} // namespace tunec::rt

extern "C" void tunec_layer_norm_rows_f32(float* rows, int64_t count, int64_t cols, int64_t ld,
                                          const float* params, float epsilon) {
  for (int64_t r = 0; r < count; ++r) {
    float mean, inv;
    tunec::rt::layerNormRow(rows + r * ld, rows + r * ld, params, params + cols, cols, epsilon,
                            mean, inv);
  }
}
