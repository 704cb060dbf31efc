// Per-element typed ops.
#include "runtime/typed_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <emmintrin.h>
#include <type_traits>

namespace tunec::rt {

namespace {

struct Scalar {
  double f = 0;
  int64_t i = 0;
};

Scalar load(const void* base, int64_t index, DType t) {
  const auto* p = static_cast<const uint8_t*>(base) + index * static_cast<int64_t>(dtypeSize(t));
  Scalar s;
  auto get = [&](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  switch (t) {
  case DType::F32:
    s.f = get(float{});
    s.i = static_cast<int64_t>(s.f);
    return s;
  case DType::F64:
    s.f = get(double{});
    s.i = static_cast<int64_t>(s.f);
    return s;
  case DType::F16:
    s.f = halfToFloat(get(uint16_t{}));
    s.i = std::isfinite(s.f) ? static_cast<int64_t>(s.f) : 0;
    return s;
  case DType::BF16:
    s.f = bf16ToFloat(get(uint16_t{}));
    s.i = std::isfinite(s.f) ? static_cast<int64_t>(s.f) : 0;
    return s;
  case DType::I8:
    s.i = get(int8_t{});
    break;
  case DType::U8:
    s.i = get(uint8_t{});
    break;
  case DType::I16:
    s.i = get(int16_t{});
    break;
  case DType::U16:
    s.i = get(uint16_t{});
    break;
  case DType::I32:
    s.i = get(int32_t{});
    break;
  case DType::U32:
    s.i = get(uint32_t{});
    break;
  case DType::I64:
    s.i = get(int64_t{});
    break;
  case DType::U64:
    s.i = static_cast<int64_t>(get(uint64_t{}));
    break;
  case DType::Bool:
    s.i = get(uint8_t{}) != 0;
    break;
  }
  s.f = static_cast<double>(s.i);
  return s;
}

void store(void* base, int64_t index, DType t, double f, int64_t i, bool fromFloat) {
  auto* p = static_cast<uint8_t*>(base) + index * static_cast<int64_t>(dtypeSize(t));
  auto put = [&](auto v) { std::memcpy(p, &v, sizeof(v)); };
  // Floats convert to integers truncating toward zero (C++ rules, as the reference).
  int64_t asInt = fromFloat ? (std::isfinite(f) ? static_cast<int64_t>(f) : 0) : i;
  switch (t) {
  case DType::F32:
    put(static_cast<float>(fromFloat ? f : static_cast<double>(i)));
    return;
  case DType::F64:
    put(fromFloat ? f : static_cast<double>(i));
    return;
  case DType::F16:
    put(floatToHalf(static_cast<float>(fromFloat ? f : static_cast<double>(i))));
    return;
  case DType::BF16:
    put(floatToBf16(static_cast<float>(fromFloat ? f : static_cast<double>(i))));
    return;
  case DType::I8:
    put(static_cast<int8_t>(asInt));
    return;
  case DType::U8:
    put(static_cast<uint8_t>(asInt));
    return;
  case DType::I16:
    put(static_cast<int16_t>(asInt));
    return;
  case DType::U16:
    put(static_cast<uint16_t>(asInt));
    return;
  case DType::I32:
    put(static_cast<int32_t>(asInt));
    return;
  case DType::U32:
    put(static_cast<uint32_t>(asInt));
    return;
  case DType::I64:
    put(asInt);
    return;
  case DType::U64:
    put(static_cast<uint64_t>(asInt));
    return;
  case DType::Bool:
    put(static_cast<uint8_t>(fromFloat ? f != 0 : i != 0));
    return;
  }
}

bool isBool(TypedOp op) {
  switch (op) {
  case TypedOp::Equal:
  case TypedOp::Less:
  case TypedOp::LessOrEqual:
  case TypedOp::Greater:
  case TypedOp::GreaterOrEqual:
  case TypedOp::And:
  case TypedOp::Or:
  case TypedOp::Xor:
  case TypedOp::Not:
  case TypedOp::IsNaN:
  case TypedOp::IsInfPositive:
  case TypedOp::IsInfNegative:
  case TypedOp::IsInf:
    return true;
  default:
    return false;
  }
}

} // namespace

void TypedProgram::encode(Step& step) const {
  step.kind = StepKind::Typed;
  BasicTypedProgram<int64_t>::encode(step.ints);
}

Expected<TypedProgram> TypedProgram::decode(const Step& step) {
  const auto& v = step.ints;
  auto bad = [&] { return makeError("corrupt typed step '", step.label, "'"); };
  if (v.size() < 5) return bad();
  TypedProgram p;
  int64_t n = v[2], rank = v[3];
  if (v[0] < 0 || v[0] > static_cast<int64_t>(TypedOp::kLast) || v[1] < 0 ||
      v[1] > static_cast<int64_t>(kLastDType) || n < 1 || n > 3 || rank < 0 || rank > 8 ||
      v.size() != static_cast<size_t>(5 + n + 2 * rank + n * (1 + rank)) ||
      step.tensors.size() != static_cast<size_t>(1 + n))
    return bad();
  p.op = static_cast<TypedOp>(v[0]);
  p.out = static_cast<DType>(v[1]);
  p.outOffset = v[4];
  IntCursor at(v, 5);
  for (int64_t i = 0; i < n; ++i) {
    int64_t type = at.next();
    if (type < 0 || type > static_cast<int64_t>(kLastDType)) return bad();
    p.in.push_back(static_cast<DType>(type));
  }
  p.dims = at.take(rank);
  p.outStrides = at.take(rank);
  for (int64_t i = 0; i < n; ++i) {
    p.inOffsets.push_back(at.next());
    p.inStrides.push_back(at.take(rank));
  }
  for (int64_t d : p.dims)
    if (d < 0) return bad();
  return p;
}

Status runGatherElements(const void* data, const void* indices, void* out,
                         const std::vector<int64_t>& dataDims,
                         const std::vector<int64_t>& indexDims, int64_t axis, int64_t elemBytes,
                         int64_t indexBytes, const std::string& label) {
  size_t rank = indexDims.size();
  std::vector<int64_t> strides(rank, 1);
  for (size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * dataDims[d];
  int64_t total = 1;
  for (int64_t d : indexDims) total *= d;
  std::vector<int64_t> idx(rank, 0);
  int64_t axisLen = dataDims[static_cast<size_t>(axis)];
  for (int64_t e = 0; e < total; ++e) {
    int64_t j;
    if (indexBytes == 8) {
      std::memcpy(&j, static_cast<const uint8_t*>(indices) + e * 8, 8);
    } else {
      int32_t v;
      std::memcpy(&v, static_cast<const uint8_t*>(indices) + e * 4, 4);
      j = v;
    }
    if (j < -axisLen || j >= axisLen)
      return makeError(label, ": index ", j, " is out of range for an axis of ", axisLen);
    if (j < 0) j += axisLen;
    int64_t src = 0;
    for (size_t d = 0; d < rank; ++d)
      src += (d == static_cast<size_t>(axis) ? j : idx[d]) * strides[d];
    std::memcpy(static_cast<uint8_t*>(out) + e * elemBytes,
                static_cast<const uint8_t*>(data) + src * elemBytes,
                static_cast<size_t>(elemBytes));
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < indexDims[d]) break;
      idx[d] = 0;
    }
  }
  return {};
}

void runArgReduce(const void* in, int64_t* out, int64_t outer, int64_t len, int64_t inner,
                  bool isMax, bool selectLast, DType type) {
  bool integer = !isFloat(type);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      Scalar bv = load(in, o * len * inner + i, type);
      for (int64_t j = 1; j < len; ++j) {
        Scalar v = load(in, (o * len + j) * inner + i, type);
        bool greater = integer ? v.i > bv.i : v.f > bv.f;
        bool less = integer ? v.i < bv.i : v.f < bv.f;
        bool equal = integer ? v.i == bv.i : v.f == bv.f;
        bool better = (isMax ? greater : less) || (selectLast && equal);
        if (better) {
          best = j;
          bv = v;
        }
      }
      out[o * inner + i] = best;
    }
}

namespace {

// QuantizeLinear of a dense f32 tensor to u8 or s8 with one scale and zero point (how a QDQ
// model quantizes the input of each int8 kernel): the element loop below, without its per-element
// indexing and dispatch, 16 elements at a time in SSE2 (the x86-64 baseline, so model.so runs
// it on any target). Returns false when not applicable.
template <typename Q>
void quantizeDense(const float* x, float scale, float zp, float lo, float hi, Q* y, int64_t n) {
  // x / scale is clamped to +-2^22 first, past the type's range (so the saturation is the same),
  // then rounded to the nearest integer, ties to even: by cvtps2dq in the default rounding mode
  // (as nearbyint), or by adding and subtracting 1.5 * 2^23 in the tail.
  const float magic = 12582912.f, bound = 4194304.f;
  const __m128 divisor = _mm_set1_ps(scale), low = _mm_set1_ps(-bound), high = _mm_set1_ps(bound);
  const __m128i zero = _mm_set1_epi32(static_cast<int32_t>(zp));
  int64_t e = 0;
  for (; e + 16 <= n; e += 16) {
    __m128i q[4];
    for (int j = 0; j < 4; ++j) {
      __m128 v = _mm_div_ps(_mm_loadu_ps(x + e + 4 * j), divisor);
      __m128i nan = _mm_castps_si128(_mm_cmpunord_ps(v, v));
      v = _mm_min_ps(_mm_max_ps(v, low), high);
      __m128i r = _mm_add_epi32(_mm_cvtps_epi32(v), zero);
      q[j] = _mm_or_si128(_mm_andnot_si128(nan, r), _mm_and_si128(nan, zero)); // NaN: zp
    }
    // Saturating packs: i32 to i16, then to u8 or s8, the type's range.
    __m128i lowHalf = _mm_packs_epi32(q[0], q[1]), highHalf = _mm_packs_epi32(q[2], q[3]);
    __m128i bytes = std::is_same_v<Q, uint8_t> ? _mm_packus_epi16(lowHalf, highHalf)
                                               : _mm_packs_epi16(lowHalf, highHalf);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + e), bytes);
  }
  for (; e < n; ++e) {
    float v = x[e] / scale;
    v = v < -bound ? -bound : (v > bound ? bound : v);
    float q = (v + magic) - magic + zp;
    q = q < lo ? lo : (q > hi ? hi : q);
    y[e] = static_cast<Q>(q != q ? zp : q); // NaN (of x or of x / scale): the zero point
  }
}

// x and y dense and alike: the same strides, which lay the elements out contiguously in some
// order of the dimensions (plain, or NHWC between int8 convolutions); strides of dimensions of
// 1 do not matter. The scale and zero point are scalars.
bool denseAndAlike(const TypedProgram& p) {
  if (p.outOffset || p.inOffsets[0]) return false;
  std::vector<std::pair<int64_t, int64_t>> strided; // (stride, extent)
  for (size_t d = 0; d < p.dims.size(); ++d) {
    if (p.dims[d] == 1) continue;
    if (p.outStrides[d] != p.inStrides[0][d]) return false;
    strided.emplace_back(p.outStrides[d], p.dims[d]);
  }
  std::sort(strided.begin(), strided.end());
  int64_t expect = 1;
  for (auto [stride, extent] : strided) {
    if (stride != expect) return false;
    expect *= extent;
  }
  for (size_t k = 1; k < p.inStrides.size(); ++k)
    for (size_t d = 0; d < p.dims.size(); ++d)
      if (p.dims[d] > 1 && p.inStrides[k][d] != 0) return false; // a per-axis parameter
  return true;
}

// DequantizeLinear of a dense u8 or s8 tensor with one scale and zero point: (x - zp) * scale
// in f32, as the element loop computes it (the difference is exact), 16 at a time in SSE2.
template <typename Q>
void dequantizeDense(const Q* x, float scale, int32_t zp, float* y, int64_t n) {
  const __m128 s = _mm_set1_ps(scale);
  const __m128i z = _mm_set1_epi32(zp), zero = _mm_setzero_si128();
  int64_t e = 0;
  for (; e + 16 <= n; e += 16) {
    __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + e));
    if constexpr (std::is_same_v<Q, int8_t>) // s8 to u8 order: flip the sign bit, then -128
      bytes = _mm_xor_si128(bytes, _mm_set1_epi8(static_cast<char>(0x80)));
    const int32_t shift = std::is_same_v<Q, int8_t> ? 128 : 0;
    __m128i lo = _mm_unpacklo_epi8(bytes, zero), hi = _mm_unpackhi_epi8(bytes, zero);
    __m128i q[4] = {_mm_unpacklo_epi16(lo, zero), _mm_unpackhi_epi16(lo, zero),
                    _mm_unpacklo_epi16(hi, zero), _mm_unpackhi_epi16(hi, zero)};
    for (int j = 0; j < 4; ++j) {
      __m128i d = _mm_sub_epi32(_mm_sub_epi32(q[j], _mm_set1_epi32(shift)), z);
      _mm_storeu_ps(y + e + 4 * j, _mm_mul_ps(_mm_cvtepi32_ps(d), s));
    }
  }
  for (; e < n; ++e) y[e] = static_cast<float>(static_cast<int32_t>(x[e]) - zp) * scale;
}

bool dequantizeFast(const TypedProgram& p, void* out, const void* const* inputs, int64_t total) {
  if (p.op != TypedOp::DequantizeLinear || (p.in[0] != DType::U8 && p.in[0] != DType::I8) ||
      p.out != DType::F32 || p.in[1] != DType::F32 || p.in.size() < 3 || !denseAndAlike(p))
    return false;
  const auto scale = static_cast<float>(load(inputs[1], p.inOffsets[1], DType::F32).f);
  const auto zp = static_cast<int32_t>(load(inputs[2], p.inOffsets[2], p.in[2]).i);
  if (p.in[0] == DType::U8)
    dequantizeDense(static_cast<const uint8_t*>(inputs[0]), scale, zp, static_cast<float*>(out),
                    total);
  else
    dequantizeDense(static_cast<const int8_t*>(inputs[0]), scale, zp, static_cast<float*>(out),
                    total);
  return true;
}

bool quantizeFast(const TypedProgram& p, void* out, const void* const* inputs, int64_t total) {
  if (p.op != TypedOp::QuantizeLinear || p.in[0] != DType::F32 ||
      (p.out != DType::U8 && p.out != DType::I8) || p.in[1] != DType::F32 || !denseAndAlike(p))
    return false;
  const float scale = load(inputs[1], p.inOffsets[1], DType::F32).f;
  const float zp = static_cast<float>(load(inputs[2], p.inOffsets[2], p.in[2]).i);
  auto [lo, hi] = integerRange(p.out);
  const auto* x = static_cast<const float*>(inputs[0]);
  if (p.out == DType::U8)
    quantizeDense(x, scale, zp, static_cast<float>(lo), static_cast<float>(hi),
                  static_cast<uint8_t*>(out), total);
  else
    quantizeDense(x, scale, zp, static_cast<float>(lo), static_cast<float>(hi),
                  static_cast<int8_t*>(out), total);
  return true;
}

// A Cast of dense 8-bit codes to i32, and an Add, Sub or Mul of a dense i32 tensor and an i32
// scalar (MatMulInteger's and ConvInteger's exact form: the codes minus their zero point): plain
// loops the compiler vectorizes, the element loop's values (int64 arithmetic, stored wrapping).
bool integerFast(const TypedProgram& p, void* out, const void* const* inputs, int64_t total) {
  if (p.out != DType::I32 || p.in.empty() || !denseAndAlike(p)) return false;
  auto* y = static_cast<int32_t*>(out);
  if (p.op == TypedOp::Cast && p.in.size() == 1 && p.in[0] == DType::U8) {
    const auto* x = static_cast<const uint8_t*>(inputs[0]);
    for (int64_t e = 0; e < total; ++e) y[e] = x[e];
    return true;
  }
  if (p.op == TypedOp::Cast && p.in.size() == 1 && p.in[0] == DType::I8) {
    const auto* x = static_cast<const int8_t*>(inputs[0]);
    for (int64_t e = 0; e < total; ++e) y[e] = x[e];
    return true;
  }
  const bool arithmetic = p.op == TypedOp::Add || p.op == TypedOp::Sub || p.op == TypedOp::Mul;
  if (!arithmetic || p.in.size() != 2 || p.in[0] != DType::I32 || p.in[1] != DType::I32)
    return false;
  const auto* x = static_cast<const int32_t*>(inputs[0]);
  const auto b = static_cast<uint32_t>(load(inputs[1], p.inOffsets[1], DType::I32).i);
  auto* u = reinterpret_cast<uint32_t*>(y); // unsigned: the int64 result's low 32 bits
  const auto* ux = reinterpret_cast<const uint32_t*>(x);
  if (p.op == TypedOp::Add)
    for (int64_t e = 0; e < total; ++e) u[e] = ux[e] + b;
  else if (p.op == TypedOp::Sub)
    for (int64_t e = 0; e < total; ++e) u[e] = ux[e] - b;
  else
    for (int64_t e = 0; e < total; ++e) u[e] = ux[e] * b;
  return true;
}

// A Cast to the same type is a strided copy (a slice, an expand, one input of a concat): rows
// of the innermost dimension, memcpy where both sides are contiguous in it.
bool copyFast(const TypedProgram& p, void* out, const void* const* inputs) {
  if (p.op != TypedOp::Cast || p.in.size() != 1 || p.in[0] != p.out || p.dims.empty()) return false;
  const auto size = static_cast<int64_t>(dtypeSize(p.out));
  const size_t rank = p.dims.size(), last = rank - 1;
  const int64_t len = p.dims[last], os = p.outStrides[last], is = p.inStrides[0][last];
  int64_t rows = 1;
  for (size_t d = 0; d < last; ++d) rows *= p.dims[d];
  auto* dst = static_cast<char*>(out);
  const auto* src = static_cast<const char*>(inputs[0]);
  std::vector<int64_t> idx(rank, 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t o = p.outOffset, i = p.inOffsets[0];
    for (size_t d = 0; d < last; ++d) {
      o += idx[d] * p.outStrides[d];
      i += idx[d] * p.inStrides[0][d];
    }
    if (os == 1 && is == 1) {
      std::memcpy(dst + o * size, src + i * size, static_cast<size_t>(len * size));
    } else {
      for (int64_t k = 0; k < len; ++k)
        std::memcpy(dst + (o + k * os) * size, src + (i + k * is) * size,
                    static_cast<size_t>(size));
    }
    for (size_t d = last; d-- > 0;) {
      if (++idx[d] < p.dims[d]) break;
      idx[d] = 0;
    }
  }
  return true;
}

} // namespace

Status runTyped(const TypedProgram& p, void* out, const void* const* inputs,
                const std::string& label) {
  int64_t total = 1;
  for (int64_t d : p.dims) total *= d;
  if (total == 0) return {};
  if (quantizeFast(p, out, inputs, total) || dequantizeFast(p, out, inputs, total) ||
      integerFast(p, out, inputs, total) || copyFast(p, out, inputs))
    return {};
  size_t rank = p.dims.size(), n = p.in.size();
  // Integer math when every value operand is an integer or bool (Where's condition aside).
  bool intMath = true;
  for (size_t k = p.op == TypedOp::Where ? 1 : 0; k < n; ++k) intMath &= !isFloat(p.in[k]);
  std::vector<int64_t> idx(rank, 0);
  for (int64_t e = 0; e < total; ++e) {
    int64_t o = p.outOffset;
    Scalar s[3];
    for (size_t d = 0; d < rank; ++d) o += idx[d] * p.outStrides[d];
    for (size_t k = 0; k < n; ++k) {
      int64_t off = p.inOffsets[k];
      for (size_t d = 0; d < rank; ++d) off += idx[d] * p.inStrides[k][d];
      s[k] = load(inputs[k], off, p.in[k]);
    }
    const Scalar &a = s[0], &b = s[1], &c = s[2];
    double f = 0;
    int64_t i = 0;
    bool fromFloat = !intMath;
    switch (p.op) {
    case TypedOp::Cast:
      fromFloat = isFloat(p.in[0]);
      f = a.f, i = a.i;
      break;
    case TypedOp::Add:
      f = a.f + b.f, i = a.i + b.i;
      break;
    case TypedOp::Sub:
      f = a.f - b.f, i = a.i - b.i;
      break;
    case TypedOp::Mul:
      f = a.f * b.f, i = a.i * b.i;
      break;
    case TypedOp::Div:
      if (intMath && b.i == 0) return makeError(label, ": integer division by zero");
      f = a.f / b.f, i = intMath ? a.i / b.i : 0;
      break;
    case TypedOp::Mod:
    case TypedOp::FMod: {
      bool floored = p.op == TypedOp::Mod;
      if (intMath) {
        if (b.i == 0) return makeError(label, ": integer modulo by zero");
        i = a.i % b.i;
        if (floored && i != 0 && ((i < 0) != (b.i < 0))) i += b.i;
      } else {
        f = std::fmod(a.f, b.f);
        if (floored && f != 0 && ((f < 0) != (b.f < 0))) f += b.f;
      }
      break;
    }
    case TypedOp::Pow:
      f = std::pow(a.f, b.f);
      if (intMath) {
        i = 1;
        if (b.i < 0) i = a.i == 1 ? 1 : 0;
        for (int64_t k = 0; k < b.i; ++k) i *= a.i;
      }
      break;
    case TypedOp::Max:
      f = std::isnan(a.f) || std::isnan(b.f) ? NAN : std::max(a.f, b.f), i = std::max(a.i, b.i);
      break;
    case TypedOp::Min:
      f = std::isnan(a.f) || std::isnan(b.f) ? NAN : std::min(a.f, b.f), i = std::min(a.i, b.i);
      break;
    case TypedOp::Equal:
      i = intMath ? a.i == b.i : a.f == b.f;
      break;
    case TypedOp::Less:
      i = intMath ? a.i < b.i : a.f < b.f;
      break;
    case TypedOp::LessOrEqual:
      i = intMath ? a.i <= b.i : a.f <= b.f;
      break;
    case TypedOp::Greater:
      i = intMath ? a.i > b.i : a.f > b.f;
      break;
    case TypedOp::GreaterOrEqual:
      i = intMath ? a.i >= b.i : a.f >= b.f;
      break;
    case TypedOp::And:
      i = (a.i != 0) && (b.i != 0);
      break;
    case TypedOp::Or:
      i = (a.i != 0) || (b.i != 0);
      break;
    case TypedOp::Xor:
      i = (a.i != 0) != (b.i != 0);
      break;
    case TypedOp::Not:
      i = a.i == 0;
      break;
    case TypedOp::Neg:
      f = -a.f, i = -a.i;
      break;
    case TypedOp::Abs:
      f = std::fabs(a.f), i = a.i < 0 ? -a.i : a.i;
      break;
    case TypedOp::Sign:
      f = a.f > 0 ? 1 : (a.f < 0 ? -1 : 0);
      i = a.i > 0 ? 1 : (a.i < 0 ? -1 : 0);
      break;
    case TypedOp::Where: {
      const Scalar& pick = a.i != 0 ? s[1] : s[2];
      f = pick.f, i = pick.i;
      break;
    }
    case TypedOp::IsNaN:
      i = std::isnan(a.f);
      break;
    case TypedOp::IsInfPositive:
      i = std::isinf(a.f) && a.f > 0;
      break;
    case TypedOp::IsInfNegative:
      i = std::isinf(a.f) && a.f < 0;
      break;
    case TypedOp::IsInf:
      i = std::isinf(a.f);
      break;
    case TypedOp::BitAnd:
      i = a.i & b.i;
      break;
    case TypedOp::BitOr:
      i = a.i | b.i;
      break;
    case TypedOp::BitXor:
      i = a.i ^ b.i;
      break;
    case TypedOp::Relu:
      f = a.f > 0 ? a.f : 0, i = a.i > 0 ? a.i : 0;
      break;
    case TypedOp::QuantizeLinear: {
      // In float32 as ONNX defines it; rint rounds half to even (the default rounding mode).
      float q = std::nearbyint(static_cast<float>(a.f) / static_cast<float>(b.f));
      auto [lo, hi] = integerRange(p.out);
      i = std::isnan(q) ? c.i
                        : static_cast<int64_t>(std::clamp(static_cast<double>(q) + c.i, lo, hi));
      fromFloat = false;
      break;
    }
    case TypedOp::DequantizeLinear:
      f = static_cast<float>(a.i - c.i) * static_cast<float>(b.f);
      fromFloat = true;
      break;
    }
    if (isBool(p.op)) fromFloat = false;
    store(out, o, p.out, f, i, fromFloat);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < p.dims[d]) break;
      idx[d] = 0;
    }
  }
  return {};
}

} // namespace tunec::rt
