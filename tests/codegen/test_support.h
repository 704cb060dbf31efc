// Shared by the codegen tests: one JIT for the test binary and deterministic random tensors.
#pragma once

#include "codegen/jit.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "reference/reference.h"
#include "support/host.h"
#include "templates/post_ops.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <gtest/gtest.h>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace tunec::test {

/// The test binary's JIT (created once; a failure is reported and aborts the test).
inline Jit& jit() {
  static std::unique_ptr<Jit> instance = [] {
    auto j = Jit::create(hostTarget());
    if (!j) ADD_FAILURE() << j.error().message();
    return std::move(*j);
  }();
  return *instance;
}

/// The twin JIT: a target with every feature of tunec's table (AVX-512, BF16, VNNI, AMX) and this
/// CPU's caches, whose AMX, BF16 and VNNI instructions are emitted as their twins; LLVM legalizes
/// the wide vectors to this CPU's, so its kernels run, with the target's arithmetic bit for bit,
/// on any x86-64 machine (codegen/jit.h). For tests only.
/// Shared, for code that keeps the JIT alive with what it compiled (driver::loadInProcess).
inline std::shared_ptr<Jit> sharedTwinJit() {
  static std::shared_ptr<Jit> instance = [] {
    Target t = hostTarget();
    t.avx512f = t.avx512bw = t.avx512vl = t.avx512dq = t.avx512bf16 = t.avx512vnni = t.amx = true;
    auto j = Jit::create(t, JitPipeline::Lean, JitInstructions::Twins);
    if (!j) ADD_FAILURE() << j.error().message();
    return j ? std::shared_ptr<Jit>(std::move(*j)) : nullptr;
  }();
  return instance;
}
inline Jit& twinJit() {
  return *sharedTwinJit();
}

/// Whether this CPU runs the real AMX tile instructions.
inline bool hostHasAmx() {
  return targetSupports(hostTarget(), Isa::Amx);
}

/// Skips a test of the real tile instructions on a machine without AMX, saying so (their twins
/// are tested everywhere); TUNEC_REQUIRE_AMX=1 makes the skip a failure.
#define SKIP_WITHOUT_REAL_AMX()                                                                    \
  do {                                                                                             \
    if (!::tunec::test::hostHasAmx()) {                                                            \
      if (std::getenv("TUNEC_REQUIRE_AMX") &&                                                      \
          std::string(std::getenv("TUNEC_REQUIRE_AMX")) == "1")                                    \
        FAIL() << "TUNEC_REQUIRE_AMX=1 but this machine has no AMX (amx_tile, amx_bf16)";          \
      GTEST_SKIP()                                                                                 \
          << "this machine has no AMX: the real tile instructions cannot run here (their "         \
             "twins are tested on every machine)";                                                 \
    }                                                                                              \
  } while (0)

/// Whether this CPU runs the real vdpbf16ps (AVX-512 with avx512_bf16).
inline bool hostRunsBf16() {
  return hostTarget().avx512bf16 && targetSupports(hostTarget(), Isa::Avx512);
}

/// Skips a test that runs the real vdpbf16ps (a model.so, the measurer's worker) on a CPU without
/// it, saying so (the bf16 kernels' twins are tested by tunec_codegen_tests on every machine).
#define SKIP_WITHOUT_REAL_BF16(what)                                                               \
  do {                                                                                             \
    if (!::tunec::test::hostRunsBf16())                                                            \
      GTEST_SKIP() << "this machine has no avx512_bf16: " << what                                  \
                   << " runs the real vdpbf16ps, which cannot run here (the bf16 kernels' twins "  \
                      "are tested by tunec_codegen_tests)";                                        \
  } while (0)

/// The twins of a target with AVX512-BF16 and no AMX (where bf16 convolutions and matmuls run on
/// vdpbf16ps), shared.
inline std::shared_ptr<Jit> sharedVectorBf16TwinJit() {
  static std::shared_ptr<Jit> instance = [] {
    Target t = sharedTwinJit()->target();
    t.amx = false;
    auto j = Jit::create(t, JitPipeline::Lean, JitInstructions::Twins);
    if (!j) ADD_FAILURE() << j.error().message();
    return j ? std::shared_ptr<Jit>(std::move(*j)) : nullptr;
  }();
  return instance;
}

/// A kernel that stores its output as bf16 (`gotBits`) or f32 (`got`) against its all-f32 form's
/// output `want`, rounded once to bf16 for a bf16 output: "" when equal bit for bit, else the
/// first difference.
inline std::string differenceFromRoundedOnce(const std::vector<float>& want,
                                             const std::vector<float>& got,
                                             const std::vector<uint16_t>& gotBits, bool outBf16) {
  for (size_t i = 0; i < want.size(); ++i) {
    const uint32_t expect = outBf16 ? floatToBf16(want[i]) : std::bit_cast<uint32_t>(want[i]);
    const uint32_t actual = outBf16 ? gotBits[i] : std::bit_cast<uint32_t>(got[i]);
    if (actual != expect)
      return "element " + std::to_string(i) + ": bits " + std::to_string(actual) + ", want " +
             std::to_string(expect);
  }
  return "";
}

/// The JIT for bf16 kernels: the real instructions where this CPU has them, else the twins (the
/// same kernels, exactly, on a CPU without AVX512-BF16).
inline Jit& bf16Jit() {
  return hostRunsBf16() ? jit() : twinJit();
}

/// Uniform values in [-1, 1): random data, never zeros.
inline Tensor randomTensor(Shape shape, std::mt19937& rng) {
  Tensor t(DType::F32, std::move(shape));
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.dataAs<float>()[i] = dist(rng);
  return t;
}

inline std::vector<float> randomVector(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

/// The ISAs this machine can run.
inline std::vector<Isa> hostIsas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::Avx2, Isa::Avx512})
    if (targetSupports(hostTarget(), isa)) out.push_back(isa);
  return out;
}

/// Adds a node with a generated name and one output to a reference graph.
inline ValueId addOp(Graph& g, OpKind kind, OpAttrs attrs, std::vector<ValueId> inputs) {
  std::string id = std::to_string(g.nodes().size());
  auto n = g.addNode("n" + id, kind, std::move(attrs), std::move(inputs), {"v" + id});
  EXPECT_TRUE(n.isOk()) << n.error().message();
  return g.node(*n).outputs[0];
}

/// Applies an epilogue's post-ops to `y` with reference ops, in order; the bias is added only
/// when `bias` is given (a reference Conv takes it as an input instead); `scale` is the column
/// scale of a ScalePerColumn.
inline ValueId addPostOps(Graph& g, ValueId y, const Epilogue& epi, ValueId bias, ValueId addend,
                          ValueId scale = kNoValue) {
  for (const PostOp& op : epi) {
    if (op.kind == PostOpKind::ScalePerColumn) y = addOp(g, OpKind::Mul, NoAttrs{}, {y, scale});
    if (op.kind == PostOpKind::PReluPerColumn) y = addOp(g, OpKind::PRelu, NoAttrs{}, {y, scale});
    if (op.kind == PostOpKind::BiasPerColumn && bias != kNoValue)
      y = addOp(g, OpKind::Add, NoAttrs{}, {y, bias});
    if (op.kind == PostOpKind::Relu) y = addOp(g, OpKind::Relu, NoAttrs{}, {y});
    if (op.kind == PostOpKind::Clip) y = addOp(g, OpKind::Clip, ClipAttrs{op.lo, op.hi}, {y});
    if (op.kind == PostOpKind::AddTensor) y = addOp(g, OpKind::Add, NoAttrs{}, {y, addend});
    if (op.kind == PostOpKind::LeakyRelu)
      y = addOp(g, OpKind::LeakyRelu, AlphaBetaAttrs{op.lo, 0.f}, {y});
    if (op.kind == PostOpKind::HardSigmoid)
      y = addOp(g, OpKind::HardSigmoid, AlphaBetaAttrs{op.lo, op.hi}, {y});
    if (op.kind == PostOpKind::HardSwish) y = addOp(g, OpKind::HardSwish, NoAttrs{}, {y});
    if (op.kind == PostOpKind::Sigmoid) y = addOp(g, OpKind::Sigmoid, NoAttrs{}, {y});
    if (op.kind == PostOpKind::Swish) y = addOp(g, OpKind::Swish, AlphaBetaAttrs{op.lo, 0.f}, {y});
    if (op.kind == PostOpKind::Tanh) y = addOp(g, OpKind::Tanh, NoAttrs{}, {y});
    if (op.kind == PostOpKind::Gelu) y = addOp(g, OpKind::Gelu, GeluAttrs{false}, {y});
    if (op.kind == PostOpKind::Scale) {
      Tensor c(DType::F32, Shape{1});
      c.dataAs<float>()[0] = op.lo;
      y = addOp(g, OpKind::Mul, NoAttrs{}, {y, g.addConstant("scale" + std::to_string(y), c)});
    }
    if (op.kind == PostOpKind::Exp) y = addOp(g, OpKind::Exp, NoAttrs{}, {y});
    if (op.kind == PostOpKind::Round) y = addOp(g, OpKind::Round, NoAttrs{}, {y});
  }
  return y;
}

/// The tolerance of one output element `want` of an epilogue, given the accumulation's absolute
/// tolerance `tol`: exp passes an absolute error of y on as a relative error of exp(y).
inline double epilogueTolerance(const Epilogue& epi, double tol, double want) {
  for (const PostOp& op : epi)
    if (op.kind == PostOpKind::Exp) return tol * std::max(1.0, std::abs(want));
  return tol;
}

/// The reference result of an NHWC convolution and its epilogue: the input is transposed to
/// NCHW for the reference Conv (bias as its third input when the epilogue has one), the result
/// back to NHWC, then the post-ops.
inline Tensor referenceNhwcConv(const ConvAttrs& attrs, const Epilogue& epi, const Tensor& x,
                                const Tensor& weights, const Tensor& bias, const Tensor& addend,
                                const Tensor& scale) {
  Graph g;
  ValueId vx = g.addInput("x", {DType::F32, x.shape(), {}});
  ValueId vw = g.addInput("w", {DType::F32, weights.shape(), {}});
  ValueId vb = g.addInput("b", {DType::F32, bias.shape(), {}});
  ValueId va = g.addInput("addend", {DType::F32, addend.shape(), {}});
  ValueId vs = g.addInput("scale", {DType::F32, scale.shape(), {}});
  ValueId nchw = addOp(g, OpKind::Transpose, TransposeAttrs{{0, 3, 1, 2}}, {vx});
  std::vector<ValueId> in = {nchw, vw};
  if (epilogueNeedsBias(epi)) in.push_back(vb);
  ValueId y = addOp(g, OpKind::Conv, attrs, in);
  y = addOp(g, OpKind::Transpose, TransposeAttrs{{0, 2, 3, 1}}, {y});
  g.addOutput(addPostOps(g, y, epi, kNoValue, va, vs));
  auto out = runReference(g, {x, weights, bias, addend, scale});
  EXPECT_TRUE(out.isOk()) << out.error().message();
  return out.isOk() ? (*out)[0] : Tensor();
}

} // namespace tunec::test
