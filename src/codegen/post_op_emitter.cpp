// Post-ops in LLVM IR. exp follows src/runtime/vector_math.h constant for constant; GELU in an
// epilogue uses PyTorch's formula with a rational erf, cheaper than the loop kernel's erfc tail.
#include "codegen/post_op_emitter.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <llvm/IR/Intrinsics.h>

namespace tunec::codegen {

namespace {

llvm::Value* splat(llvm::Value* like, float value) {
  return llvm::ConstantFP::get(like->getType(), value);
}

// a * b + c, fused where the target has an FMA (llvm.fmuladd): one instruction, one rounding.
llvm::Value* mulAdd(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y, llvm::Value* z) {
  return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {x->getType()}, {x, y, z});
}

// Horner's scheme: ((c0 * x + c1) * x + c2) ..., each step one mulAdd.
llvm::Value* horner(llvm::IRBuilder<>& b, llvm::Value* x, std::initializer_list<float> coeffs) {
  llvm::Value* p = nullptr;
  for (float c : coeffs) p = p ? mulAdd(b, p, x, splat(x, c)) : splat(x, c);
  return p;
}

constexpr float kLog2e = 1.44269504088896341f;

// exp(r) for r = xc - n ln 2, n the integer nearest xc / ln 2 (|r| <= ln2 / 2; ln 2 split so
// that its high part times n is exact), by the degree-7 Taylor polynomial.
llvm::Value* expOfRemainder(llvm::IRBuilder<>& b, llvm::Value* xc, llvm::Value* n) {
  llvm::Value* r = mulAdd(b, n, splat(xc, -0.693145751953125f), xc);
  r = mulAdd(b, n, splat(xc, -1.428606765330187e-06f), r);
  return horner(b, r,
                {1.f / 5040.f, 1.f / 720.f, 1.f / 120.f, 1.f / 24.f, 1.f / 6.f, 0.5f, 1.f, 1.f});
}

llvm::Value* minKeepingNan(llvm::IRBuilder<>& b, llvm::Value* bound, llvm::Value* v) {
  return b.CreateSelect(b.CreateFCmpOLT(bound, v), bound, v);
}

// 2^n as a float vector for integer lanes n + 127 in [1, 254]: the exponent field alone. The
// shift drops bits above the field, so n may sit in the low bits of a wider pattern.
llvm::Value* powerOfTwo(llvm::IRBuilder<>& b, llvm::Value* n, llvm::Type* vecTy) {
  llvm::Value* biased = b.CreateAdd(n, llvm::ConstantInt::get(n->getType(), 127));
  return b.CreateBitCast(b.CreateShl(biased, 23), vecTy);
}

} // namespace

llvm::Value* maxKeepingNan(llvm::IRBuilder<>& b, llvm::Value* bound, llvm::Value* v) {
  return b.CreateSelect(b.CreateFCmpOGT(bound, v), bound, v);
}

llvm::Value* emitExp(llvm::IRBuilder<>& b, llvm::Value* x) {
  auto* vecTy = llvm::cast<llvm::FixedVectorType>(x->getType());
  llvm::Type* intTy = llvm::FixedVectorType::get(b.getInt32Ty(), vecTy->getNumElements());
  llvm::Value* lo = splat(x, -87.33654f);
  llvm::Value* hi = splat(x, 88.72283f);
  llvm::Value* xc = b.CreateMinNum(b.CreateMaxNum(x, lo), hi);
  // rint (one vroundps), not round (four instructions): a tie may go either way.
  llvm::Value* n =
      b.CreateUnaryIntrinsic(llvm::Intrinsic::rint, b.CreateFMul(xc, splat(xc, kLog2e)));
  llvm::Value* p = expOfRemainder(b, xc, n);
  // 2^n in two halves so that n = 128 does not overflow the exponent.
  llvm::Value* ni = b.CreateFPToSI(n, intTy);
  llvm::Value* half = b.CreateAShr(ni, 1);
  llvm::Value* y = b.CreateFMul(b.CreateFMul(p, powerOfTwo(b, half, vecTy)),
                                powerOfTwo(b, b.CreateSub(ni, half), vecTy));
  y = b.CreateSelect(b.CreateFCmpOLT(x, lo), splat(x, 0.f), y);
  return b.CreateSelect(b.CreateFCmpOGT(x, hi), splat(x, std::numeric_limits<float>::infinity()),
                        y);
}

llvm::Value* emitExpNonPositive(llvm::IRBuilder<>& b, llvm::Value* x) {
  auto* vecTy = llvm::cast<llvm::FixedVectorType>(x->getType());
  llvm::Type* intTy = llvm::FixedVectorType::get(b.getInt32Ty(), vecTy->getNumElements());
  llvm::Value* lo = splat(x, -87.33654f);
  // The clamp keeps a NaN (vmaxps with the bound first); p is then NaN, and so is p 2^n.
  llvm::Value* xc = maxKeepingNan(b, lo, x);
  // n by the 1.5 * 2^23 shift: t = xc / ln 2 + 1.5 * 2^23 rounds to an integer, t - 1.5 * 2^23
  // is n, and n sits in the low bits of t's pattern (no float-to-int conversion, defined for
  // NaN). -126 <= n <= 0, so 2^n is a normal float.
  llvm::Value* magic = splat(x, 12582912.f);
  llvm::Value* t = mulAdd(b, xc, splat(x, kLog2e), magic);
  llvm::Value* p = expOfRemainder(b, xc, b.CreateFSub(t, magic));
  llvm::Value* scale = powerOfTwo(b, b.CreateBitCast(t, intTy), vecTy);
  return b.CreateSelect(b.CreateFCmpOLT(x, lo), splat(x, 0.f), b.CreateFMul(p, scale));
}

llvm::Value* emitErf(llvm::IRBuilder<>& b, llvm::Value* x) {
  // Eigen's rational minimax form on [-4, 4] (erf(+-4) is +-1 in float): x P(x^2) / Q(x^2).
  llvm::Value* xc = b.CreateMinNum(b.CreateMaxNum(x, splat(x, -4.f)), splat(x, 4.f));
  llvm::Value* x2 = b.CreateFMul(xc, xc);
  llvm::Value* p = horner(b, x2,
                          {-2.72614225801306e-10f, 2.77068142495902e-08f, -2.10102402082508e-06f,
                           -5.69250639462346e-05f, -7.34990630326855e-04f, -2.95459980854025e-03f,
                           -1.60960333262415e-02f});
  llvm::Value* q = horner(b, x2,
                          {-1.45660718464996e-05f, -2.13374055278905e-04f, -1.68282697438203e-03f,
                           -7.37332916720468e-03f, -1.42647390514189e-02f});
  return b.CreateFDiv(b.CreateFMul(xc, p), q);
}

llvm::Value* emitTanh(llvm::IRBuilder<>& b, llvm::Value* x) {
  // rt::fast_tanh's rational form on [-9, 9] (tanh(+-9) = +-1 in float), x itself below 4e-4;
  // the clamp keeps NaN out of the polynomial, so a NaN is selected back.
  llvm::Value* xc = b.CreateMinNum(b.CreateMaxNum(x, splat(x, -9.f)), splat(x, 9.f));
  llvm::Value* x2 = b.CreateFMul(xc, xc);
  llvm::Value* p =
      b.CreateFMul(horner(b, x2,
                          {-2.76076847742355e-16f, 2.00018790482477e-13f, -8.60467152213735e-11f,
                           5.12229709037114e-08f, 1.48572235717979e-05f, 6.37261928875436e-04f,
                           4.89352455891786e-03f}),
                   xc);
  llvm::Value* q = horner(
      b, x2,
      {1.19825839466702e-06f, 1.18534705686654e-04f, 2.26843463243900e-03f, 4.89352518554385e-03f});
  llvm::Value* small =
      b.CreateFCmpOLT(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x), splat(x, 4e-4f));
  llvm::Value* y = b.CreateSelect(small, x, b.CreateFDiv(p, q));
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, y);
}

llvm::Value* emitGelu(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Value* z = b.CreateFMul(x, splat(x, 0.70710678118654752f));
  llvm::Value* onePlusErf = b.CreateFAdd(splat(x, 1.f), emitErf(b, z));
  return b.CreateFMul(b.CreateFMul(splat(x, 0.5f), x), onePlusErf);
}

llvm::Value* emitPostOp(llvm::IRBuilder<>& b, const PostOp& op, llvm::Value* v, llvm::Value* column,
                        llvm::Value* addend) {
  switch (op.kind) {
  case PostOpKind::BiasPerColumn:
    return b.CreateFAdd(v, column);
  case PostOpKind::ScalePerColumn:
    return b.CreateFMul(v, column);
  case PostOpKind::PReluPerColumn: // NaN compares false and stays
    return b.CreateSelect(b.CreateFCmpOLT(v, splat(v, 0.f)), b.CreateFMul(v, column), v);
  // lo > v ? lo : v and hi < v ? hi : v are one vmaxps(lo, v) / vminps(hi, v) each, which pass a
  // NaN v through as the ONNX spec and the reference do (llvm.maxnum would turn it into lo).
  case PostOpKind::Relu:
    return maxKeepingNan(b, splat(v, 0.f), v);
  case PostOpKind::Clip:
    return minKeepingNan(b, splat(v, op.hi), maxKeepingNan(b, splat(v, op.lo), v));
  case PostOpKind::AddTensor:
    return b.CreateFAdd(v, addend);
  case PostOpKind::AddDequantizedU8: { // addend: the u8 lanes; (q - zp) is exact, then one fmul
    auto* ints = llvm::VectorType::getInteger(llvm::cast<llvm::VectorType>(v->getType()));
    llvm::Value* q = b.CreateSub(b.CreateZExt(addend, ints),
                                 llvm::ConstantInt::get(ints, static_cast<uint64_t>(op.hi)));
    return b.CreateFAdd(v, b.CreateFMul(b.CreateSIToFP(q, v->getType()), splat(v, op.lo)));
  }
  case PostOpKind::Gelu:
    return emitGelu(b, v);
  case PostOpKind::Scale:
    return b.CreateFMul(v, splat(v, op.lo));
  case PostOpKind::LeakyRelu: // NaN compares false and stays
    return b.CreateSelect(b.CreateFCmpOLT(v, splat(v, 0.f)), b.CreateFMul(v, splat(v, op.lo)), v);
  case PostOpKind::HardSigmoid: {
    llvm::Value* t = b.CreateFAdd(b.CreateFMul(v, splat(v, op.lo)), splat(v, op.hi));
    return minKeepingNan(b, splat(v, 1.f), maxKeepingNan(b, splat(v, 0.f), t));
  }
  case PostOpKind::HardSwish: {
    llvm::Value* t = b.CreateFAdd(b.CreateFMul(v, splat(v, 1.f / 6.f)), splat(v, 0.5f));
    return b.CreateFMul(v, minKeepingNan(b, splat(v, 1.f), maxKeepingNan(b, splat(v, 0.f), t)));
  }
  case PostOpKind::Sigmoid: {
    // 1 / (1 + exp(-y)): 0 below exp's range, 1 above; NaN stays NaN (exp clamps it away).
    llvm::Value* s =
        b.CreateFDiv(splat(v, 1.f), b.CreateFAdd(splat(v, 1.f), emitExp(b, b.CreateFNeg(v))));
    return b.CreateSelect(b.CreateFCmpUNO(v, v), v, s);
  }
  case PostOpKind::Swish: {
    // y / (1 + exp(-alpha y)): -0 far below (exp overflows to inf), y far above; NaN stays.
    llvm::Value* t = b.CreateFMul(v, splat(v, -op.lo));
    llvm::Value* s = b.CreateFDiv(v, b.CreateFAdd(splat(v, 1.f), emitExp(b, t)));
    return b.CreateSelect(b.CreateFCmpUNO(v, v), v, s);
  }
  case PostOpKind::Tanh:
    return emitTanh(b, v);
  case PostOpKind::Exp:
    return b.CreateSelect(b.CreateFCmpUNO(v, v), v, emitExp(b, v));
  case PostOpKind::Round: { // rint: half to even in the default rounding mode, as QuantizeLinear
    llvm::Value* r = b.CreateUnaryIntrinsic(llvm::Intrinsic::rint, v);
    return op.lo != 0.f ? b.CreateSelect(b.CreateFCmpUNO(v, v), splat(v, 0.f), r) : r; // NaN -> 0
  }
  case PostOpKind::LayerNormRow: // applied to whole rows by the loop nest, not per vector
    return v;
  case PostOpKind::QuantizeU8:
    return b.CreateSIToFP(
        emitEpilogue(b, {op}, v,
                     [](const PostOp&) {
                       return std::pair<llvm::Value*, llvm::Value*>{nullptr, nullptr};
                     }),
        v->getType());
  }
  return v;
}

llvm::Value* emitEpilogue(llvm::IRBuilder<>& b, const Epilogue& epilogue, llvm::Value* v,
                          PostOpOperands operands) {
  size_t tail = epilogue.size();
  float lower = -INFINITY, upper = INFINITY; // a folded Relu's or Clip's bounds, before scaling
  const bool requantize = !epilogue.empty() && epilogue.back().kind == PostOpKind::QuantizeU8;
  if (requantize) {
    tail = epilogue.size() - 1;
    const PostOp* before = tail ? &epilogue[tail - 1] : nullptr;
    if (before && before->kind == PostOpKind::Relu) lower = 0.f, --tail;
    if (before && before->kind == PostOpKind::Clip) lower = before->lo, upper = before->hi, --tail;
  }
  for (size_t i = 0; i < tail; ++i) {
    auto [column, addend] = operands(epilogue[i]);
    v = emitPostOp(b, epilogue[i], v, column, addend);
  }
  if (!requantize) return v;
  const float scale = epilogue.back().lo, zero = epilogue.back().hi;
  TUNEC_ASSERT(zero == std::nearbyint(zero) && zero >= 0.f && zero <= 255.f,
               "the u8 zero point " << zero << " is not an integer in [0, 255]");
  // round(min(max(y, lo), hi) / s) + z, clamped to [0, 255], is round(t) + z for t = y / s
  // clamped to round(lo / s) and round(hi / s), each clamped to [-z, 255 - z]: the division by
  // s > 0 rounds monotonically, and so does rounding to an integer; the bounds are integers.
  auto bound = [&](float x) { return std::clamp(std::nearbyint(x / scale), -zero, 255.f - zero); };
  const float lo = bound(lower), hi = bound(upper);
  llvm::Value* t = b.CreateFDiv(v, splat(v, scale));
  // t > lo ? t : lo is one vmaxps that gives lo for a NaN t; then one vminps.
  t = b.CreateSelect(b.CreateFCmpOGT(t, splat(t, lo)), t, splat(t, lo));
  t = b.CreateSelect(b.CreateFCmpOLT(t, splat(t, hi)), t, splat(t, hi));
  // |t| <= 255: t + 1.5 * 2^23 lies in [2^23, 2^24), where floats are the integers, so the add
  // rounds t half to even and the bits count up from the constant's (0x4b400000).
  auto* ints = llvm::VectorType::getInteger(llvm::cast<llvm::VectorType>(v->getType()));
  llvm::Value* q = b.CreateSub(b.CreateBitCast(b.CreateFAdd(t, splat(t, 0x1.8p23f)), ints),
                               llvm::ConstantInt::get(ints, 0x4b400000 - static_cast<int>(zero)));
  if (lo == 0.f && hi >= 0.f) return q; // a NaN was clamped to 0
  return b.CreateSelect(b.CreateFCmpUNO(v, v),
                        llvm::ConstantInt::get(ints, static_cast<uint64_t>(zero)), q);
}

} // namespace tunec::codegen
