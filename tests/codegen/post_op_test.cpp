// The epilogue's transcendental post-ops in LLVM IR against double-precision std:: math, on a
// sweep of inputs across their branches and clamps, with the bounds post_op_emitter.h states.
#include "codegen/module_builder.h"
#include "codegen/post_op_emitter.h"
#include "support/host.h"
#include "test_support.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <random>

namespace tunec {
namespace {

using ApplyFn = void (*)(const float* in, float* out, int64_t vectors);

// JIT-compiles out[i] = f(in[i]) over whole vectors of the host ISA.
ApplyFn compileApply(const std::string& name, llvm::Value* (*f)(llvm::IRBuilder<>&, llvm::Value*)) {
  auto module = test::jit().newModule(widestIsa(hostTarget()), name);
  std::string symbol = module->module().getModuleIdentifier();
  codegen::ModuleBuilder& mb = *module;
  auto* fnTy = llvm::FunctionType::get(llvm::Type::getVoidTy(mb.context()),
                                       {mb.ptr(), mb.ptr(), mb.i64()}, false);
  llvm::Function* fn = mb.createFunction(symbol, fnTy);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(mb.context(), "entry", fn));
  llvm::FixedVectorType* vec = mb.f32Vector();
  int64_t lanes = vec->getNumElements();
  mb.forLoop(b, b.getInt64(0), fn->getArg(2), 1, "v", [&](llvm::Value* v) {
    llvm::Value* offset = b.CreateMul(v, b.getInt64(lanes));
    llvm::Value* x =
        b.CreateAlignedLoad(vec, b.CreateGEP(mb.f32(), fn->getArg(0), offset), llvm::Align(4));
    b.CreateAlignedStore(f(b, x), b.CreateGEP(mb.f32(), fn->getArg(1), offset), llvm::Align(4));
  });
  b.CreateRetVoid();
  auto address = test::jit().addAndLookup(std::move(module), symbol);
  EXPECT_TRUE(address.isOk()) << address.error().message();
  return address ? reinterpret_cast<ApplyFn>(*address) : nullptr;
}

std::vector<float> sweep(float lo, float hi, int count) {
  std::vector<float> xs;
  for (int i = 0; i < count; ++i)
    xs.push_back(lo + (hi - lo) * static_cast<float>(i) / (count - 1));
  xs.resize((xs.size() + 15) / 16 * 16, 0.5f);
  return xs;
}

TEST(PostOpIr, GeluAndErfMatchDoublePrecision) {
  ApplyFn gelu = compileApply("gelu", codegen::emitGelu);
  ApplyFn erf = compileApply("erf", codegen::emitErf);
  ASSERT_NE(gelu, nullptr);
  ASSERT_NE(erf, nullptr);
  // Both tails (erf clamps at +-4), the middle and zero.
  std::vector<float> xs = sweep(-12.f, 12.f, 48001);
  std::vector<float> ys(xs.size()), es(xs.size());
  int64_t vectors = static_cast<int64_t>(xs.size()) / isaInfo(widestIsa(hostTarget())).f32Lanes();
  gelu(xs.data(), ys.data(), vectors);
  erf(xs.data(), es.data(), vectors);
  for (size_t i = 0; i < xs.size(); ++i) {
    double x = xs[i];
    ASSERT_LT(std::abs(es[i] - std::erf(x)), 4e-7) << "x = " << x;
    double exact = 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    ASSERT_LT(std::abs(ys[i] - exact), 3e-7 * std::max(1.0, std::abs(x))) << "x = " << x;
  }
}

TEST(PostOpIr, ExpMatchesStdExpIncludingTheClampedEnds) {
  ApplyFn exp = compileApply("exp", codegen::emitExp);
  ASSERT_NE(exp, nullptr);
  std::vector<float> xs = sweep(-100.f, 100.f, 40001);
  std::vector<float> ys(xs.size());
  exp(xs.data(), ys.data(),
      static_cast<int64_t>(xs.size()) / isaInfo(widestIsa(hostTarget())).f32Lanes());
  for (size_t i = 0; i < xs.size(); ++i) {
    double exact = std::exp(static_cast<double>(xs[i]));
    if (xs[i] < -87.33654f) {
      ASSERT_EQ(ys[i], 0.f) << "x = " << xs[i];
    } else if (xs[i] > 88.72283f) {
      ASSERT_TRUE(std::isinf(ys[i])) << "x = " << xs[i];
    } else if (exact >= 1.1754944e-38) {
      ASSERT_LT(std::abs(ys[i] - exact), 3e-7 * exact) << "x = " << xs[i];
    }
  }
}

TEST(PostOpIr, NonPositiveExpMatchesStdExpDownToZero) {
  ApplyFn exp = compileApply("exp_nonpositive", codegen::emitExpNonPositive);
  ASSERT_NE(exp, nullptr);
  // Every x <= 0 a softmax gives it (x - max): the whole normal range, the clamped end, -inf.
  std::vector<float> xs = sweep(-100.f, 0.f, 40001);
  xs.back() = -std::numeric_limits<float>::infinity();
  xs[xs.size() - 2] = std::numeric_limits<float>::quiet_NaN();
  xs[xs.size() - 3] = std::bit_cast<float>(0x7fc00001u); // a NaN with payload bits
  xs[xs.size() - 4] = -std::numeric_limits<float>::quiet_NaN();
  std::vector<float> ys(xs.size());
  exp(xs.data(), ys.data(),
      static_cast<int64_t>(xs.size()) / isaInfo(widestIsa(hostTarget())).f32Lanes());
  for (size_t i = 0; i < xs.size(); ++i) {
    double exact = std::exp(static_cast<double>(xs[i]));
    if (std::isnan(xs[i]))
      ASSERT_TRUE(std::isnan(ys[i]));
    else if (xs[i] < -87.33654f)
      ASSERT_EQ(ys[i], 0.f) << "x = " << xs[i];
    else if (exact >= 1.1754944e-38 * 2)
      ASSERT_LT(std::abs(ys[i] - exact), 3e-7 * exact) << "x = " << xs[i];
    else
      ASSERT_LT(std::abs(ys[i]), 2.4e-38) << "x = " << xs[i];
  }
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// An epilogue's post-op alone (lo = 1: SiLU for Swish), applied to a vector.
template <PostOpKind K> llvm::Value* postOpIr(llvm::IRBuilder<>& b, llvm::Value* x) {
  return codegen::emitPostOp(b, {K, 1.f}, x, nullptr, nullptr);
}

struct Activation {
  const char* name;
  ApplyFn (*compile)();
  double (*exact)(double);
  double (*tolerance)(double x, double exact);
};

template <PostOpKind K> ApplyFn compileOf() {
  return compileApply(epilogueName({{K, 1.f}}), postOpIr<K>);
}

// The epilogue's sigmoid, hard-swish, SiLU and tanh against double precision across their
// saturated ends and down to the tiny arguments where tanh(x) = x; a NaN stays NaN (exp alone
// would clamp it away).
TEST(PostOpIr, ActivationsMatchDoublePrecisionAndKeepNan) {
  const Activation activations[] = {
      {"sigmoid", compileOf<PostOpKind::Sigmoid>,
       [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, [](double, double) { return 1e-6; }},
      {"hardswish", compileOf<PostOpKind::HardSwish>,
       [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); },
       [](double x, double) { return 1e-6 * std::max(1.0, std::abs(x)); }},
      {"silu", compileOf<PostOpKind::Swish>, [](double x) { return x / (1.0 + std::exp(-x)); },
       [](double x, double) { return 1e-6 * std::max(1.0, std::abs(x)); }},
      {"tanh", compileOf<PostOpKind::Tanh>, [](double x) { return std::tanh(x); },
       [](double, double y) { return 4e-7 + 1e-6 * std::abs(y); }},
  };
  std::vector<float> xs = sweep(-100.f, 100.f, 40001);
  std::vector<float> tiny = sweep(-1e-3f, 1e-3f, 4001);
  xs.insert(xs.end(), tiny.begin(), tiny.end());
  while (xs.size() % 16 != 15) xs.push_back(0.5f);
  xs.push_back(std::nanf(""));
  int64_t vectors = static_cast<int64_t>(xs.size()) / isaInfo(widestIsa(hostTarget())).f32Lanes();
  for (const Activation& a : activations) {
    ApplyFn f = a.compile();
    ASSERT_NE(f, nullptr) << a.name;
    std::vector<float> ys(xs.size());
    f(xs.data(), ys.data(), vectors);
    for (size_t i = 0; i + 1 < xs.size(); ++i) {
      double x = xs[i], want = a.exact(x);
      ASSERT_LT(std::abs(ys[i] - want), a.tolerance(x, want)) << a.name << " x = " << x;
    }
    EXPECT_TRUE(std::isnan(ys.back())) << a.name;
  }
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// The epilogue requantizeIr builds into its kernel.
Epilogue gRequantize;

llvm::Value* requantizeIr(llvm::IRBuilder<>& b, llvm::Value* x) {
  return b.CreateSIToFP(
      codegen::emitEpilogue(b, gRequantize, x,
                            [](const PostOp&) {
                              return std::pair<llvm::Value*, llvm::Value*>{nullptr, nullptr};
                            }),
      x->getType());
}

// The requantizing end of an epilogue (emitEpilogue: a Relu or Clip folded into the clamp, the
// rounding by 1.5 * 2^23) against QuantizeLinear's formula after the activation, bit for bit:
// clamp(nearbyint(act(v) / scale) + zero point, 0, 255), the zero point for NaN. Scales from
// 2^-40 to 2^40, zero points 0, 3 and 255, no activation, ReLU and clips (ReLU6, one below 0, one
// empty); random bit patterns (subnormals, infinities, NaN), values at and one ulp beside the
// half-integer ties, and quotients near the clamps.
TEST(PostOpIr, RequantizingEpilogueEqualsQuantizeLinearBitForBit) {
  std::mt19937 rng(5);
  const int lanes = isaInfo(widestIsa(hostTarget())).f32Lanes();
  const std::vector<std::vector<PostOp>> activations = {{},
                                                        {{PostOpKind::Relu}},
                                                        {{PostOpKind::Clip, 0.f, 6.f}},
                                                        {{PostOpKind::Clip, -2.5f, -0.5f}},
                                                        {{PostOpKind::Clip, 1.f, -1.f}}};
  int64_t ties = 0, cases = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const float scale = trial == 0 ? 1.f
                        : trial == 1
                            ? 0.1f
                            : std::ldexp(1.f + static_cast<float>(rng() % 8388608) / 8388608.f,
                                         static_cast<int>(rng() % 81) - 40);
    const float zero = trial % 3 == 0 ? 0.f : trial % 3 == 1 ? 3.f : 255.f;
    const auto& act = activations[static_cast<size_t>(trial) % activations.size()];
    gRequantize = act;
    gRequantize.push_back({PostOpKind::QuantizeU8, scale, zero});
    ApplyFn quantize = compileApply("requantize_u8", requantizeIr);
    ASSERT_NE(quantize, nullptr);
    std::vector<float> xs;
    for (int i = 0; i < 20000; ++i)
      xs.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
    for (int k = -600; k <= 600; ++k) {
      float tie = static_cast<float>(k) * 0.5f * scale;
      xs.insert(xs.end(), {tie, std::nextafter(tie, -INFINITY), std::nextafter(tie, INFINITY)});
    }
    xs.insert(xs.end(), {INFINITY, -INFINITY, NAN, -NAN, 0.f, -0.f, 252.5f * scale,
                         std::numeric_limits<float>::denorm_min(), FLT_MAX, -FLT_MAX});
    xs.resize((xs.size() + static_cast<size_t>(lanes) - 1) / lanes * lanes, 1.f);
    std::vector<float> ys(xs.size());
    quantize(xs.data(), ys.data(), static_cast<int64_t>(xs.size()) / lanes);
    for (size_t i = 0; i < xs.size(); ++i) {
      float y = xs[i];
      for (const PostOp& op : act) { // min(max(y, lo), hi); NaN stays NaN, as in the reference
        const float lo = op.kind == PostOpKind::Relu ? 0.f : op.lo;
        const float hi = op.kind == PostOpKind::Relu ? INFINITY : op.hi;
        y = y < lo ? lo : y;
        y = y > hi ? hi : y;
      }
      float q = y / scale;
      ties += q == std::nearbyint(q) + 0.5f || q == std::nearbyint(q) - 0.5f;
      float expected = std::isnan(q) ? zero : std::clamp(std::nearbyint(q) + zero, 0.f, 255.f);
      ASSERT_EQ(ys[i], expected) << "v = " << std::hexfloat << xs[i] << ", scale = " << scale
                                 << ", epilogue " << epilogueName(gRequantize);
      ++cases;
    }
  }
  EXPECT_GT(ties, 40 * 1000); // the ties were exercised
  EXPECT_GT(cases, 40 * 20000);
}

} // namespace
} // namespace tunec
