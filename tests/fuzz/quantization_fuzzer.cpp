// Differential fuzz target for quantization's edge arithmetic (issue 50): a small QDQ layer -- a
// Conv or MatMul between QuantizeLinear/DequantizeLinear pairs, with a bias, an activation and a
// requantized or f32 output -- whose quantization parameters the input bytes choose: scales from
// the ordinary to NaN, infinities, zero, negative, subnormal and 1e38; zero points; u8 or s8
// activations; per-tensor or per-channel weight scales; weight zero points; a NaN, infinite or
// huge bias, or an int32 one dequantized with the product's scale; the activation's scale given
// at run time; NaN, infinite and huge activations. Each case runs the whole pipeline (graph
// passes, compile, JIT) and compares with the reference executor on the unoptimized graph: the
// compiled result must be the reference's (NaN where it has NaN, the same infinities, within one
// output quantization step, or 1e-4 of the output's range for an f32 output), or the compile
// must fail with an error (a refused parameter); a crash, a mismatch or a model the reference
// refuses but the compiler runs is a finding.
//
// LLVMFuzzerTestOneInput is libFuzzer's entry point. The target needs LLVM's JIT, so it is
// built by CMake with its own driver (TUNEC_FUZZ_MAIN): `tunec_quantization_fuzz runs=N [SEED]`
// runs N inputs of random bytes from SEED (what ctest runs), `tunec_quantization_fuzz SECONDS`
// runs for that long, and a file argument replays that input.
#include "cli/pipeline.h"
#include "codegen/jit.h"
#include "driver/compile_model.h"
#include "ir/printer.h"
#include "reference/reference.h"
#include "runtime/model_executor.h"
#include "support/host.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace tunec;

// The input's bytes as choices (0 once they run out).
struct Choices {
  const uint8_t* data;
  size_t size, at = 0;
  uint8_t byte() { return at < size ? data[at++] : 0; }
  int pick(int n) { return byte() % n; }
  double unit() { return byte() / 255.0; }
};

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A scale: ordinary mostly, else one of the values that break arithmetic.
double scale(Choices& c, std::string& log, const char* what) {
  static const double special[] = {kNaN, kInf, -kInf, 0.0, -0.02, 1e-40, 1e38, 1e-30, 3e4};
  const int p = c.pick(24);
  const double s = p < 9 ? special[p] : 0.002 + 0.1 * c.unit();
  log += std::string(" ") + what + "=" + std::to_string(s);
  return s;
}

Tensor scalar(DType t, double v) {
  Tensor x(t, Shape{});
  x.setDouble(0, v);
  return x;
}

struct Case {
  Graph graph;
  std::vector<Tensor> inputs;
  std::string log;
  double outputStep = 0; ///< the output quantization's scale; 0 for an f32 output
  /// Per output column (channel): a bound on the magnitude of the layer's terms before they
  /// cancel, sa sb[n] (255 + |za|) sum_k |w - zw| + |bias[n]| (the int8 kernels sum the u8 codes
  /// and subtract the zero point's share after: f32 rounds each at this magnitude).
  std::vector<double> magnitude;
  /// Per output column: more that the result may differ by (a second layer's inputs tipping
  /// over their steps); empty: none.
  std::vector<double> slack;
  bool channelsFirst = false; ///< the output's columns: NCHW channels, or a matrix's last axis
  int64_t plane = 1;          ///< NCHW: the output's pixels
};

ValueId node(Graph& g, OpKind kind, OpAttrs attrs, std::vector<ValueId> in) {
  const std::string name = "n" + std::to_string(g.nodes().size());
  auto id = g.addNode(name, kind, std::move(attrs), std::move(in), {name});
  if (!id) {
    std::fprintf(stderr, "fuzz harness built an invalid node: %s\n", id.error().message().c_str());
    std::abort();
  }
  return g.node(*id).outputs[0];
}

Case buildCase(Choices& c) {
  Case k;
  Graph& g = k.graph;
  std::mt19937 rng(c.byte() | (c.byte() << 8));
  std::normal_distribution<double> normal(0.0, 1.0);
  const bool conv = c.pick(2) == 0;
  const int64_t channels = 1 + c.pick(8), cols = 1 + c.pick(24);
  const int64_t side = 3 + c.pick(4), rows = 1 + c.pick(9), kernel = c.pick(2) ? 3 : 1;
  const Shape xs = conv ? Shape{1, channels, side, side} : Shape{rows, channels * 5};
  k.log = conv ? "conv" : "matmul";
  // The activation, with one special element maybe.
  Tensor x(DType::F32, xs);
  const double amplitude = c.pick(3) == 0 ? 1e-3 : c.pick(2) ? 1.0 : 30.0;
  for (int64_t i = 0; i < x.numel(); ++i) x.setDouble(i, amplitude * normal(rng));
  if (const int p = c.pick(8); p < 4) {
    const double v[] = {kNaN, kInf, -kInf, 3e38};
    x.setDouble(static_cast<int64_t>(c.byte()) % x.numel(), v[p]);
    k.log += " x[.]=" + std::to_string(v[p]);
  }
  ValueId xv = g.addInput("x", {DType::F32, xs, {}});
  k.inputs.push_back(x);
  // Its quantization: u8 or s8, the scale constant or given at run time.
  const bool s8 = c.pick(4) == 0;
  const DType qt = s8 ? DType::I8 : DType::U8;
  const double sx = scale(c, k.log, "sx");
  const int64_t zx = s8 ? c.pick(256) - 128 : c.pick(256);
  const bool runTimeScale = c.pick(4) == 0;
  ValueId sxv;
  if (runTimeScale) {
    sxv = g.addInput("sx", {DType::F32, Shape{}, {}});
    k.inputs.push_back(scalar(DType::F32, sx));
    k.log += " (at run time)";
  } else {
    sxv = g.addConstant("sx", scalar(DType::F32, sx));
  }
  ValueId zxv = g.addConstant("zx", scalar(qt, static_cast<double>(zx)));
  ValueId xq = node(g, OpKind::QuantizeLinear, QuantAttrs{0}, {xv, sxv, zxv});
  ValueId xd = node(g, OpKind::DequantizeLinear, QuantAttrs{0}, {xq, sxv, zxv});
  // The weights: s8, per tensor or per output channel, a zero point maybe.
  const int64_t k2 = conv ? channels : channels * 5;
  const Shape ws = conv ? Shape{cols, channels, kernel, kernel} : Shape{k2, cols};
  const int axis = conv ? 0 : 1;
  Tensor w(DType::I8, ws);
  for (int64_t i = 0; i < w.numel(); ++i)
    w.setInt(i, static_cast<int64_t>(std::uniform_int_distribution<int>(-127, 127)(rng)));
  const bool perChannel = c.pick(2) == 0;
  Tensor sw(DType::F32, perChannel ? Shape{cols} : Shape{});
  for (int64_t j = 0; j < sw.numel(); ++j) sw.setDouble(j, 0.001 + 0.05 * c.unit());
  if (c.pick(3) == 0) { // one special scale
    std::string l;
    const double s = scale(c, l, "");
    sw.setDouble(static_cast<int64_t>(c.byte()) % sw.numel(), s);
    k.log += " sw[.]=" + std::to_string(s);
  }
  Tensor zw(DType::I8, sw.shape());
  if (c.pick(4) == 0) {
    for (int64_t j = 0; j < zw.numel(); ++j) zw.setInt(j, c.pick(9) - 4);
    k.log += " zw!=0";
  }
  ValueId wd = node(g, OpKind::DequantizeLinear, QuantAttrs{perChannel ? axis : 0},
                    {g.addConstant("w", w), g.addConstant("sw", sw), g.addConstant("zw", zw)});
  // The bound on the terms' magnitude, per output column (a run-time scale: the f32 path).
  k.magnitude.assign(static_cast<size_t>(cols), 0.0);
  for (int64_t j = 0; j < cols; ++j) {
    double sum = 0;
    const int64_t terms = w.numel() / cols;
    for (int64_t t = 0; t < terms; ++t)
      sum += std::abs(static_cast<double>(w.getInt(conv ? j * terms + t : t * cols + j) -
                                          zw.getInt(perChannel ? j : 0)));
    k.magnitude[static_cast<size_t>(j)] = std::abs(static_cast<double>(static_cast<float>(sx))) *
                                          std::abs(sw.getDouble(perChannel ? j : 0)) *
                                          (255.0 + std::abs(static_cast<double>(zx))) * sum;
  }
  // The layer, its bias.
  ValueId y;
  const int biasForm = c.pick(4);
  ValueId bias = kNoValue;
  if (biasForm == 1 || (biasForm == 3 && runTimeScale)) { // f32, one special value maybe
    Tensor b(DType::F32, Shape{cols});
    for (int64_t j = 0; j < cols; ++j) b.setDouble(j, 0.1 * normal(rng));
    if (const int p = c.pick(6); p < 3) {
      const double v[] = {kNaN, kInf, 3e38};
      b.setDouble(static_cast<int64_t>(c.byte()) % cols, v[p]);
      k.log += " bias[.]=" + std::to_string(v[p]);
    }
    bias = g.addConstant("bias", b);
    for (int64_t j = 0; j < cols; ++j) // a NaN or infinite bias's column is checked by class
      if (std::isfinite(b.getDouble(j)))
        k.magnitude[static_cast<size_t>(j)] += std::abs(b.getDouble(j));
  } else if (biasForm == 3) { // int32, dequantized with sx sw
    Tensor b(DType::I32, Shape{cols}), bs(DType::F32, Shape{cols});
    for (int64_t j = 0; j < cols; ++j) {
      b.setInt(j, static_cast<int64_t>(std::uniform_int_distribution<int>(-5000, 5000)(rng)));
      bs.setDouble(j, static_cast<double>(static_cast<float>(sx) *
                                          static_cast<float>(sw.getDouble(perChannel ? j : 0))));
      k.magnitude[static_cast<size_t>(j)] +=
          std::abs(static_cast<double>(b.getInt(j)) * bs.getDouble(j));
    }
    k.log += " int32 bias";
    bias = node(g, OpKind::DequantizeLinear, QuantAttrs{0},
                {g.addConstant("bias_q", b), g.addConstant("bias_scale", bs),
                 g.addConstant("bias_zp", Tensor(DType::I32, Shape{cols}))});
  }
  if (conv) {
    const int64_t pad = kernel == 3 ? c.pick(2) : 0, stride = 1 + c.pick(2);
    ConvAttrs a{{kernel, kernel}, {stride, stride}, {pad, pad, pad, pad}, {1, 1}, 1};
    std::vector<ValueId> in = {xd, wd};
    if (bias != kNoValue) in.push_back(bias);
    y = node(g, OpKind::Conv, a, in);
    k.channelsFirst = true;
    const int64_t out = (side + 2 * pad - kernel) / stride + 1;
    k.plane = out * out;
  } else {
    y = node(g, OpKind::MatMul, NoAttrs{}, {xd, wd});
    if (bias != kNoValue) y = node(g, OpKind::Add, NoAttrs{}, {y, bias});
  }
  if (const int act = c.pick(3); act == 1)
    y = node(g, OpKind::Relu, NoAttrs{}, {y});
  else if (act == 2)
    y = node(g, OpKind::Clip, ClipAttrs{0.0, 6.0}, {y});
  // A second layer, maybe: the first's output requantized to u8 (which the int8 kernels write
  // in their epilogue) and read by a 1x1 convolution or a matmul of per-tensor s8 weights. A
  // first-layer value may tip over one of its steps (or more, where f32's rounding at its
  // magnitude exceeds a step): each flips the second layer's sums by up to s1 sw2 |w2|.
  if (c.pick(3) == 0) {
    const double s1 = scale(c, k.log, "s1");
    ValueId s1v = g.addConstant("s1", scalar(DType::F32, s1));
    ValueId z1v = g.addConstant("z1", scalar(DType::U8, static_cast<double>(c.pick(256))));
    y = node(g, OpKind::QuantizeLinear, QuantAttrs{0}, {y, s1v, z1v});
    y = node(g, OpKind::DequantizeLinear, QuantAttrs{0}, {y, s1v, z1v});
    const int64_t cols2 = 1 + c.pick(16);
    Tensor w2(DType::I8, conv ? Shape{cols2, cols, 1, 1} : Shape{cols, cols2});
    for (int64_t i = 0; i < w2.numel(); ++i)
      w2.setInt(i, static_cast<int64_t>(std::uniform_int_distribution<int>(-127, 127)(rng)));
    const double sw2 = 0.001 + 0.05 * c.unit();
    ValueId w2d = node(g, OpKind::DequantizeLinear, QuantAttrs{0},
                       {g.addConstant("w2", w2), g.addConstant("sw2", scalar(DType::F32, sw2)),
                        g.addConstant("zw2", Tensor(DType::I8, Shape{}))});
    y = conv ? node(g, OpKind::Conv, ConvAttrs{{1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1}, {y, w2d})
             : node(g, OpKind::MatMul, NoAttrs{}, {y, w2d});
    double firstRounding = 0;
    for (double m : k.magnitude)
      if (std::isfinite(m)) firstRounding = std::max(firstRounding, 1e-6 * m);
    const double step = std::abs(static_cast<double>(static_cast<float>(s1)));
    std::vector<double> magnitude(static_cast<size_t>(cols2)), slack(static_cast<size_t>(cols2));
    for (int64_t j = 0; j < cols2; ++j) {
      double sum = 0;
      for (int64_t t = 0; t < cols; ++t)
        sum += std::abs(static_cast<double>(w2.getInt(conv ? j * cols + t : t * cols2 + j)));
      magnitude[static_cast<size_t>(j)] = sw2 * sum * (255.0 + 255.0) * step;
      slack[static_cast<size_t>(j)] = sw2 * sum * (step + firstRounding);
    }
    k.magnitude = magnitude, k.slack = slack;
    k.log += " then a second layer";
  }
  // The output: requantized (u8) and dequantized, or f32.
  if (c.pick(3) != 0) {
    const double sy = scale(c, k.log, "sy");
    ValueId syv = g.addConstant("sy", scalar(DType::F32, sy));
    ValueId zyv = g.addConstant("zy", scalar(DType::U8, static_cast<double>(c.pick(256))));
    y = node(g, OpKind::QuantizeLinear, QuantAttrs{0}, {y, syv, zyv});
    y = node(g, OpKind::DequantizeLinear, QuantAttrs{0}, {y, syv, zyv});
    k.outputStep = std::abs(static_cast<double>(static_cast<float>(sy)));
  }
  g.addOutput(y, "y");
  return k;
}

std::shared_ptr<Jit> jit() {
  static std::shared_ptr<Jit> j = [] {
    auto made = Jit::create(hostTarget());
    if (!made) {
      std::fprintf(stderr, "no JIT: %s\n", made.error().message().c_str());
      std::abort();
    }
    return std::shared_ptr<Jit>(std::move(*made));
  }();
  return j;
}

[[noreturn]] void finding(const Case& k, const std::string& what) {
  std::fprintf(stderr, "FINDING: %s\n  case:%s\n", what.c_str(), k.log.c_str());
  if (std::getenv("TUNEC_FUZZ_GRAPHS")) {
    std::fprintf(stderr, "graph:\n%s", printGraph(k.graph).c_str());
    if (auto optimized = cli::runGraphPipeline(k.graph, nullptr, nullptr))
      std::fprintf(stderr, "after the passes:\n%s", printGraph(*optimized).c_str());
  }
  std::abort();
}

// Compiles and runs `k`, or returns false when the compile refuses it.
bool compileAndRun(const Case& k, Tensor& out) {
  auto optimized = cli::runGraphPipeline(k.graph, nullptr, nullptr);
  if (!optimized) return false;
  driver::CompileOptions options;
  options.target = hostTarget();
  options.isa = widestIsa(options.target);
  auto compiled = driver::compileModel(*optimized, *jit(), options);
  if (!compiled) return false;
  auto executor = driver::loadInProcess(std::move(*compiled), jit(), 1);
  if (!executor) finding(k, "a compiled model does not load: " + executor.error().message());
  std::vector<const void*> in;
  for (const Tensor& t : k.inputs) in.push_back(t.data());
  void* o = out.data();
  if (Status s = (*executor)->run(in.data(), &o); !s)
    finding(k, "a compiled model fails to run: " + s.error().message());
  return true;
}

long compared = 0, refused = 0; // inputs compared with the reference, refused by the compile

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Choices c{data, size};
  Case k = buildCase(c);
  auto want = runReference(k.graph, k.inputs);
  const TensorType& yt = k.graph.value(k.graph.outputs()[0]).type;
  Tensor got(yt.dtype, yt.shape);
  if (!compileAndRun(k, got)) { // refused: a clean error
    ++refused;
    return 0;
  }
  ++compared;
  if (!want)
    finding(k, "the reference refuses a model the compiler runs: " + want.error().message());
  const Tensor& w = (*want)[0];
  double range = 0;
  for (int64_t i = 0; i < w.numel(); ++i)
    if (std::isfinite(w.getDouble(i))) range = std::max(range, std::abs(w.getDouble(i)));
  const auto cols = static_cast<int64_t>(k.magnitude.size());
  for (int64_t i = 0; i < w.numel(); ++i) {
    // One output step (a rounding the f32 sums tip over), plus f32's rounding of the terms at
    // their magnitude (8 units in the last place of it), or 1e-4 of the output's range.
    const int64_t col = k.channelsFirst ? (i / k.plane) % cols : i % cols;
    const double m = k.magnitude[static_cast<size_t>(col)];
    const double rounding = (std::isfinite(m) ? 1e-6 * m : 0.0) + // a NaN scale: exactly
                            (k.slack.empty() ? 0.0 : k.slack[static_cast<size_t>(col)]);
    const double tolerance =
        k.outputStep > 0 ? k.outputStep * 1.0001 + rounding : 1e-4 * range + rounding + 1e-30;
    const double a = got.getDouble(i), b = w.getDouble(i);
    const bool same = std::isnan(b)       ? std::isnan(a)
                      : !std::isfinite(b) ? a == b
                                          : std::isfinite(a) && std::abs(a - b) <= tolerance;
    if (!same)
      finding(k, "element " + std::to_string(i) + " is " + std::to_string(a) +
                     ", the reference's " + std::to_string(b) + " (tolerance " +
                     std::to_string(tolerance) + ")");
  }
  return 0;
}

#ifdef TUNEC_FUZZ_MAIN
int main(int argc, char** argv) {
  const std::string arg = argc > 1 ? argv[1] : "runs=200";
  if (std::ifstream file{arg, std::ios::binary}) { // replay one input
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)), {});
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    std::printf("replayed %s: no finding\n", arg.c_str());
    return 0;
  }
  const bool counted = arg.rfind("runs=", 0) == 0;
  const long limit = std::atol(counted ? arg.c_str() + 5 : arg.c_str());
  std::mt19937 rng(argc > 2 ? static_cast<unsigned>(std::atol(argv[2])) : 1u);
  const auto start = std::chrono::steady_clock::now();
  long runs = 0;
  for (;; ++runs) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (counted ? runs >= limit : seconds >= static_cast<double>(limit)) break;
    std::vector<uint8_t> bytes(64);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    // A finding aborts; its bytes are written first so that it can be replayed.
    std::ofstream("quantization_fuzz_last.bin", std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  std::remove("quantization_fuzz_last.bin");
  std::printf("quantization fuzz: %ld inputs, no finding (%ld compared with the reference, %ld "
              "refused by the compile)\n",
              runs, compared, refused);
  return 0;
}
#endif
