// The measurement worker: compile, check against the reference, time.
#include "tuner/candidate_runner.h"

#include "codegen/conv2d_kernel.h"
#include "codegen/depthwise_kernel.h"
#include "codegen/matmul_kernel.h"
#include "reference/reference.h"
#include "support/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <span>
#include <thread>

namespace tunec::tuner {

namespace {

std::vector<float> randomData(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

Tensor tensorOf(const std::vector<float>& data, const Shape& shape) {
  Tensor t(DType::F32, shape);
  std::copy(data.begin(), data.end(), t.dataAs<float>());
  return t;
}

// NHWC <-> NCHW for the reference convolution.
std::vector<float> permute4(const std::vector<float>& src, int64_t d0, int64_t d1, int64_t d2,
                            int64_t d3, bool toNchw) {
  std::vector<float> dst(src.size());
  // toNchw: src is d0 x d2 x d3 x d1 (n, h, w, c) -> d0 x d1 x d2 x d3 (n, c, h, w).
  for (int64_t n = 0; n < d0; ++n)
    for (int64_t c = 0; c < d1; ++c)
      for (int64_t h = 0; h < d2; ++h)
        for (int64_t w = 0; w < d3; ++w) {
          int64_t nchw = ((n * d1 + c) * d2 + h) * d3 + w, nhwc = ((n * d2 + h) * d3 + w) * d1 + c;
          if (toNchw)
            dst[static_cast<size_t>(nchw)] = src[static_cast<size_t>(nhwc)];
          else
            dst[static_cast<size_t>(nhwc)] = src[static_cast<size_t>(nchw)];
        }
  return dst;
}

Expected<std::vector<float>> referenceConv(const std::vector<float>& inNhwc,
                                           const std::vector<float>& weights, Shape wShape,
                                           int64_t n, int64_t c, int64_t h, int64_t w,
                                           const ConvAttrs& attrs) {
  Graph g;
  Shape xs{n, c, h, w};
  ValueId x = g.addInput("x", {DType::F32, xs, {}});
  ValueId wt = g.addConstant("w", tensorOf(weights, wShape));
  TUNEC_ASSIGN_OR_RETURN(NodeId id, g.addNode("conv", OpKind::Conv, attrs, {x, wt}, {"y"}));
  g.addOutput(g.node(id).outputs[0]);
  TUNEC_ASSIGN_OR_RETURN(auto outs,
                         runReference(g, {tensorOf(permute4(inNhwc, n, c, h, w, true), xs)}));
  const Shape& ys = outs[0].shape();
  std::vector<float> y(outs[0].dataAs<float>(), outs[0].dataAs<float>() + outs[0].numel());
  return permute4(y, ys[0], ys[1], ys[2], ys[3], false);
}

double relativeL2(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) { // a gap of a strided C: the kernel must leave it alone
      if (!std::isnan(got[i])) return std::numeric_limits<double>::infinity();
      continue;
    }
    double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// Dense [batches, rows, cols] from a buffer of matrices `ld` apart by row, `stride` by batch.
std::vector<float> gatherMatrices(const std::vector<float>& buffer, const Shape& s, int64_t ld,
                                  int64_t stride) {
  std::vector<float> dense(static_cast<size_t>(s.numel()));
  for (int64_t b = 0; b < s[0]; ++b)
    for (int64_t r = 0; r < s[1]; ++r)
      for (int64_t c = 0; c < s[2]; ++c)
        dense[static_cast<size_t>((b * s[1] + r) * s[2] + c)] =
            buffer[static_cast<size_t>(b * stride + r * ld + c)];
  return dense;
}

void scatterMatrices(const float* dense, const Shape& s, int64_t ld, int64_t stride,
                     std::vector<float>& buffer) {
  for (int64_t b = 0; b < s[0]; ++b)
    for (int64_t r = 0; r < s[1]; ++r)
      for (int64_t c = 0; c < s[2]; ++c)
        buffer[static_cast<size_t>(b * stride + r * ld + c)] = dense[(b * s[1] + r) * s[2] + c];
}

// A workload whose C is u8 (the requantizing epilogue's): the kernel runs with a QuantizeU8 of
// a scale that spreads the reference's values over the u8 range around 128, and the expected
// output is the reference quantized alike; a u8 C rounds once more (one step in 255).
void requantizeExpected(const KernelTypes& types, CandidateRunner::Problem& p) {
  if (types.dst != DType::U8) return;
  float largest = 1.f;
  for (float v : p.expected)
    if (!std::isnan(v)) largest = std::max(largest, std::abs(v));
  const float scale = largest / 127.f, zero = 128.f;
  p.epilogue = {{PostOpKind::QuantizeU8, scale, zero}};
  for (float& v : p.expected)
    if (!std::isnan(v)) v = std::clamp(std::nearbyint(v / scale) + zero, 0.f, 255.f);
  p.outU8.assign(p.out.size(), 0);
  p.tolerance = 4e-3;
}

// Integers as the int8 kernels read them: A as u8 over its whole range (`a` the same values as
// floats), the weights 7-bit, which every int8 strategy takes (the AVX2 one needs them).
void toInt8Operands(CandidateRunner::Problem& p) {
  for (float& x : p.a) {
    p.aU8.push_back(static_cast<uint8_t>(std::lround((x + 1) * 127.5f)));
    x = p.aU8.back();
  }
  for (float& x : p.b) x = std::round(x * static_cast<float>(kAvx2Int8WeightLimit));
}

// Operands as a kernel of types `t` with bf16 in it reads them, and the reference the same
// values as floats: A rounded (an f32 A the kernel rounds itself is given rounded, a bf16 A as
// bits), bf16 weights rounded (as bits too when `weightBits`: a matmul's runtime B), and a bf16
// C rounded once more (2^-9 in the tolerance; f32 accumulation keeps the 1e-4 bound otherwise).
void toBf16Operands(const KernelTypes& t, CandidateRunner::Problem& p, bool weightBits) {
  auto round = [](std::vector<float>& values, std::vector<uint16_t>* bits) {
    for (float& x : values) {
      const uint16_t h = floatToBf16(x);
      if (bits) bits->push_back(h);
      x = bf16ToFloat(h);
    }
  };
  if (t.src == DType::BF16 || convertsA(t)) round(p.a, t.src == DType::BF16 ? &p.aBf16 : nullptr);
  if (t.wei == DType::BF16) round(p.b, weightBits ? &p.bBf16 : nullptr);
  if (t.dst == DType::BF16) {
    p.outBf16.assign(p.out.size(), 0);
    p.tolerance = 4e-3;
  }
}

// Random operands and the reference output of each template's workload.
Status fillProblem(const MatmulWorkload& w, CandidateRunner::Problem& p, std::mt19937& rng) {
  int64_t bBatches = w.broadcastB ? 1 : w.batch;
  // Buffers as the kernel reads them (strided operands span more than their elements); the
  // reference runs on dense copies.
  p.a = randomData(w.aExtent(), rng);
  p.b = randomData(w.bExtent(), rng);
  p.out.assign(static_cast<size_t>(w.cExtent()), 0.f);
  toBf16Operands(w.types, p, true);
  if (isInt8Gemm(w.types)) // exact integer sums, rounded once to f32: within the fp32 bound
    toInt8Operands(p);
  Graph g;
  Shape as = w.transA ? Shape{w.batch, w.k, w.m} : Shape{w.batch, w.m, w.k};
  Shape bs = w.transB ? Shape{bBatches, w.n, w.k} : Shape{bBatches, w.k, w.n};
  std::vector<float> aDense = gatherMatrices(p.a, as, w.aLd(), w.aStride());
  std::vector<float> bDense = gatherMatrices(p.b, bs, w.bLd(), w.bStride());
  ValueId a = g.addInput("a", {DType::F32, as, {}});
  ValueId b = g.addInput("b", {DType::F32, bs, {}});
  auto transpose = [&](ValueId v, const char* name) -> Expected<ValueId> {
    TUNEC_ASSIGN_OR_RETURN(
        NodeId id, g.addNode(name, OpKind::Transpose, TransposeAttrs{{0, 2, 1}}, {v}, {name}));
    return g.node(id).outputs[0];
  };
  if (w.transA) {
    TUNEC_ASSIGN_OR_RETURN(a, transpose(a, "at"));
  }
  if (w.transB) {
    TUNEC_ASSIGN_OR_RETURN(b, transpose(b, "bt"));
  }
  TUNEC_ASSIGN_OR_RETURN(NodeId mm, g.addNode("mm", OpKind::MatMul, NoAttrs{}, {a, b}, {"c"}));
  g.addOutput(g.node(mm).outputs[0]);
  TUNEC_ASSIGN_OR_RETURN(auto outs, runReference(g, {tensorOf(aDense, as), tensorOf(bDense, bs)}));
  p.expected.assign(p.out.size(), std::nanf("")); // NaN: gaps the kernel must not write
  const float* c = outs[0].dataAs<float>();
  if (w.splitN) { // parts of splitN columns, each a dense m x splitN matrix
    for (int64_t r = 0; r < w.m; ++r)
      for (int64_t j = 0; j < w.n; ++j)
        p.expected[static_cast<size_t>(j / w.splitN * w.m * w.splitN + r * w.splitN +
                                       j % w.splitN)] = c[r * w.n + j];
  } else {
    scatterMatrices(c, Shape{w.batch, w.m, w.n}, w.cLd(), w.cStride(), p.expected);
  }
  requantizeExpected(w.types, p);
  return {};
}

Status fillProblem(const Conv2dWorkload& w, CandidateRunner::Problem& p, std::mt19937& rng) {
  // A strided input (in_ld) is the first ic channels of each pixel of a wider buffer; a strided
  // output leaves NaN gaps the kernel must not write.
  const int64_t pixels = w.n * w.h * w.w, inLd = w.inPixelStride(), outLd = w.outPixelStride();
  p.a = randomData(pixels * inLd, rng);
  Shape ws{w.oc, w.icPerGroup(), w.kh, w.kw};
  p.b = randomData(ws.numel(), rng);
  p.out.assign(static_cast<size_t>(w.n * w.oh() * w.ow() * outLd), 0.f);
  toBf16Operands(w.types, p, false);
  if (isInt8Gemm(w.types)) toInt8Operands(p);
  ConvAttrs attrs{{w.kh, w.kw},
                  {w.strideH, w.strideW},
                  {w.padTop, w.padLeft, w.padBottom, w.padRight},
                  {w.dilationH, w.dilationW},
                  w.groups,
                  w.aZeroPoint}; // int8: the padding reads the zero point
  std::vector<float> in(static_cast<size_t>(pixels * w.ic));
  for (int64_t q = 0; q < pixels; ++q)
    for (int64_t ch = 0; ch < w.ic; ++ch) // an NCHW input is read as the same elements
      in[static_cast<size_t>(q * w.ic + ch)] =
          w.nchwInput ? p.a[static_cast<size_t>(((q / (w.h * w.w)) * w.ic + ch) * w.h * w.w +
                                                q % (w.h * w.w))]
                      : p.a[static_cast<size_t>(q * inLd + ch)];
  if (w.channelScale) { // the reference scales the NHWC input itself
    p.scale = randomData(w.n * w.ic, rng);
    for (size_t i = 0; i < in.size(); ++i)
      in[i] *= p.scale[i / static_cast<size_t>(w.h * w.w * w.ic) * static_cast<size_t>(w.ic) +
                       i % static_cast<size_t>(w.ic)];
  }
  TUNEC_ASSIGN_OR_RETURN(std::vector<float> dense,
                         referenceConv(in, p.b, ws, w.n, w.ic, w.h, w.w, attrs));
  p.expected.assign(p.out.size(), std::nanf(""));
  for (int64_t q = 0; q < w.n * w.oh() * w.ow(); ++q)
    std::copy_n(dense.begin() + q * w.oc, w.oc, p.expected.begin() + q * outLd);
  requantizeExpected(w.types, p);
  return {};
}

Status fillProblem(const DepthwiseWorkload& w, CandidateRunner::Problem& p, std::mt19937& rng) {
  p.a = randomData(w.n * w.h * w.w * w.c, rng);
  Shape ws{w.c, 1, w.kh, w.kw};
  p.b = randomData(ws.numel(), rng);
  p.out.assign(static_cast<size_t>(w.n * w.oh() * w.ow() * w.c), 0.f);
  if (isInt8Gemm(w.types)) toInt8Operands(p);
  toBf16Operands(w.types, p, false); // f32 arithmetic on bf16 activations
  ConvAttrs attrs{{w.kh, w.kw},
                  {w.strideH, w.strideW},
                  {w.padTop, w.padLeft, w.padBottom, w.padRight},
                  {w.dilationH, w.dilationW},
                  w.c,
                  w.aZeroPoint};
  TUNEC_ASSIGN_OR_RETURN(p.expected, referenceConv(p.a, p.b, ws, w.n, w.c, w.h, w.w, attrs));
  requantizeExpected(w.types, p);
  return {};
}

// A compiled candidate: how to run it once, and the packed weights a cold_weights workload
// evicts before each timed run.
struct Candidate {
  std::function<void()> run;
  std::span<const std::byte> evicted;
};

// A compiled kernel as a candidate; `run` calls it on the problem's buffers.
template <typename Kernel, typename Run>
Candidate candidateOf(Kernel k, bool coldWeights, Run run) {
  auto kernel = std::make_shared<Kernel>(std::move(k));
  Candidate out;
  if (coldWeights) out.evicted = kernel->packedWeights();
  out.run = [kernel, run] { run(*kernel); };
  return out;
}

// A and C as the kernel's types hold them: u8 or bf16 bits where filled, else f32.
const void* typedA(const CandidateRunner::Problem& p) {
  return !p.aU8.empty()     ? static_cast<const void*>(p.aU8.data())
         : !p.aBf16.empty() ? static_cast<const void*>(p.aBf16.data())
                            : p.a.data();
}
void* typedOut(CandidateRunner::Problem& p) {
  return !p.outU8.empty()     ? static_cast<void*>(p.outU8.data())
         : !p.outBf16.empty() ? static_cast<void*>(p.outBf16.data())
                              : p.out.data();
}

Expected<Candidate> compileCandidate(Jit& jit, const MatmulWorkload& w, const MatmulConfig& c,
                                     CandidateRunner::Problem& p) {
  TUNEC_ASSIGN_OR_RETURN(MatmulKernel k, compileMatmul(jit, w, c, p.epilogue, p.b.data()));
  return candidateOf(std::move(k), w.coldWeights, [&p](const MatmulKernel& kernel) {
    kernel.runTyped(typedA(p),
                    p.bBf16.empty() ? static_cast<const void*>(p.b.data()) : p.bBf16.data(),
                    typedOut(p));
  });
}

Expected<Candidate> compileCandidate(Jit& jit, const Conv2dWorkload& w, const Conv2dConfig& c,
                                     CandidateRunner::Problem& p) {
  TUNEC_ASSIGN_OR_RETURN(Conv2dKernel k, compileConv2d(jit, w, c, p.epilogue, p.b.data()));
  return candidateOf(std::move(k), w.coldWeights, [&p](const Conv2dKernel& kernel) {
    kernel.run(typedA(p), typedOut(p), nullptr, nullptr,
               p.scale.empty() ? nullptr : p.scale.data());
  });
}

Expected<Candidate> compileCandidate(Jit& jit, const DepthwiseWorkload& w, const DepthwiseConfig& c,
                                     CandidateRunner::Problem& p) {
  TUNEC_ASSIGN_OR_RETURN(DepthwiseKernel k, compileDepthwise(jit, w, c, p.epilogue, p.b.data()));
  return candidateOf(std::move(k), false,
                     [&p](const DepthwiseKernel& kernel) { kernel.run(typedA(p), typedOut(p)); });
}

} // namespace

Expected<CandidateRunner::Problem*> CandidateRunner::problem(const Workload& workload,
                                                             const std::string& key) {
  if (auto it = problems_.find(key); it != problems_.end()) return it->second.get();
  auto p = std::make_unique<Problem>();
  std::mt19937 rng(11);
  TUNEC_TRY(std::visit([&](const auto& w) { return fillProblem(w, *p, rng); }, workload));
  Problem* raw = p.get();
  problems_[key] = std::move(p);
  return raw;
}

MeasureResult CandidateRunner::measure(const MeasureRequest& request) {
  if (std::getenv("TUNEC_TUNER_INJECT") && request.config.contains("inject")) {
    std::string what = request.config.value("inject", std::string());
    if (what == "crash") std::raise(SIGSEGV);
    if (what == "hang")
      while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  // The worker pipe's JSON, read once; everything after is typed.
  auto w = parseWorkload(request.workload);
  if (!w) return {db::MeasureStatus::Error, w.error().message()};
  auto c = parseConfig(templateKind(*w), request.config);
  if (!c) return {db::MeasureStatus::Error, c.error().message()};
  return measure(*w, *c, request.workload.dump(), request);
}

MeasureResult CandidateRunner::measure(const Workload& workload, const Config& config,
                                       const std::string& key, const MeasureRequest& request) {
  MeasureResult result;
  auto fail = [&](db::MeasureStatus status, const std::string& error) {
    result.status = status;
    result.error = error;
    return result;
  };
  if (auto valid = validateConfig(workload, config); !valid)
    return fail(db::MeasureStatus::Error, valid.error().message());
  auto prob = problem(workload, key);
  if (!prob) return fail(db::MeasureStatus::Error, prob.error().message());
  Problem& p = **prob;
  auto start = std::chrono::steady_clock::now();
  auto candidate = std::visit(
      [&](const auto& w, const auto& c) -> Expected<Candidate> {
        if constexpr (requires { compileCandidate(jit_, w, c, p); })
          return compileCandidate(jit_, w, c, p);
        else
          return makeError("a config of another template than the workload's");
      },
      workload, config);
  if (!candidate) return fail(db::MeasureStatus::Error, candidate.error().message());
  const std::function<void()>& run = candidate->run;
  std::span<const std::byte> evicted = candidate->evicted;
  result.compileSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fill(p.out.begin(), p.out.end(), std::nanf(""));
  std::fill(p.outBf16.begin(), p.outBf16.end(), floatToBf16(std::nanf("")));
  std::fill(p.outU8.begin(), p.outU8.end(), uint8_t{0});
  run();
  for (size_t i = 0; i < p.outBf16.size(); ++i) p.out[i] = bf16ToFloat(p.outBf16[i]);
  for (size_t i = 0; i < p.outU8.size(); ++i)
    if (!std::isnan(p.expected[i])) p.out[i] = p.outU8[i];
  double error = relativeL2(p.out, p.expected);
  if (!(error < p.tolerance)) {
    char bound[32];
    std::snprintf(bound, sizeof bound, "%g", p.tolerance);
    return fail(db::MeasureStatus::WrongResult, "relative L2 error " + std::to_string(error) +
                                                    " against the reference (bound " + bound + ")");
  }
  // Before every timed run: with --flush-cache a buffer twice the L3 is written; for a
  // cold_weights workload the packed weights are evicted, so that they come from memory as in a
  // model whose constants exceed the L3, while the activations stay warm as the previous
  // layer's fresh output.
  std::vector<char> flush;
  if (request.flushCache)
    flush.resize(static_cast<size_t>(std::max<int64_t>(jit_.target().l3, 1 << 20) * 2));
  auto beforeEach = [&] {
    for (size_t i = 0; i < flush.size(); i += 64) flush[i] = static_cast<char>(i);
    if (!evicted.empty()) evictFromCaches(evicted.data(), evicted.size_bytes());
  };
  bool before = request.flushCache || !evicted.empty();
  Timing t = timeSteady(run, request.minSeconds, request.minRepeats,
                        before ? std::function<void()>(beforeEach) : nullptr);
  result.medianUs = t.medianSeconds * 1e6;
  result.minUs = t.minSeconds * 1e6;
  result.repeats = t.runs;
  return result;
}

int runMeasureWorker(const Target& target, std::istream& in, std::ostream& out) {
  // Ctrl-C, a closed terminal (SIGHUP) and a scheduler's SIGTERM reach the whole process group:
  // the tuner decides when to stop (it commits its batch, then closes this worker's input).
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, SIG_IGN);
  auto jit = Jit::create(target);
  if (!jit) {
    out << MeasureResult{db::MeasureStatus::Error, jit.error().message()}.toJson().dump()
        << std::endl;
    return 1;
  }
  CandidateRunner runner(**jit);
  std::string line;
  while (std::getline(in, line)) {
    MeasureResult r;
    try {
      r = runner.measure(MeasureRequest::fromJson(nlohmann::json::parse(line)));
    } catch (const std::exception& e) {
      r.status = db::MeasureStatus::Error;
      r.error = std::string("bad request: ") + e.what();
    }
    out << r.toJson().dump() << std::endl;
  }
  return 0;
}

} // namespace tunec::tuner
