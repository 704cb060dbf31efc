// The epilogue's transcendental post-ops in LLVM IR against double-precision std:: math, on a
// sweep of inputs across their branches and clamps, with the bounds post_op_emitter.h states.
#include "codegen/module_builder.h"
#include "codegen/post_op_emitter.h"
#include "support/host.h"
#include "test_support.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

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
