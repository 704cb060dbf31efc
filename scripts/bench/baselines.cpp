// Baselines for scripts/bench_ops.sh: OpenBLAS cblas_sgemm, oneDNN dnnl_sgemm and oneDNN's
// convolution primitive (formats chosen by oneDNN, weights and input reordered once outside the
// timing), timed like `tunec bench-op`: warm-up, repeats for a minimum duration, median.
//
// usage: baselines gemm M N K SECONDS
//        baselines matmul f32|bf16|u8s8 M N K SECONDS   (oneDNN's matmul primitive: A and B of
//                that type (u8s8: u8 A, s8 B, full-range integers), f32 C, weights in the layout
//                oneDNN picks, reordered once = pre-packed)
//        baselines conv N IC H W OC KH KW STRIDE PAD SECONDS
// Prints one JSON object. Threads come from OMP_NUM_THREADS / OPENBLAS_NUM_THREADS.
#include "dnnl.hpp"

#include <algorithm>
#include <cblas.h>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

// The fastest sample of the last medianSeconds: on a shared machine the least disturbed run.
double gBestSeconds = 0;

double medianSeconds(const std::function<void()>& fn, double minSeconds) {
  using Clock = std::chrono::steady_clock;
  fn();
  std::vector<double> samples;
  auto start = Clock::now();
  while (samples.size() < 5 ||
         std::chrono::duration<double>(Clock::now() - start).count() < minSeconds) {
    auto t0 = Clock::now();
    fn();
    samples.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(samples.begin(), samples.end());
  gBestSeconds = samples.front();
  return samples[samples.size() / 2];
}

std::vector<float> randomVector(size_t n) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

int gemm(long m, long n, long k, double seconds) {
  auto a = randomVector(static_cast<size_t>(m * k)), b = randomVector(static_cast<size_t>(k * n));
  std::vector<float> c(static_cast<size_t>(m * n));
  double flops = 2.0 * m * n * k;
  double blas = medianSeconds(
      [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.f, a.data(), k, b.data(),
                    n, 0.f, c.data(), n);
      },
      seconds);
  double dnnl = medianSeconds(
      [&] { dnnl_sgemm('N', 'N', m, n, k, 1.f, a.data(), k, b.data(), n, 0.f, c.data(), n); },
      seconds);
  std::printf("{\"openblas_gflops\": %.2f, \"onednn_gflops\": %.2f}\n", flops / blas / 1e9,
              flops / dnnl / 1e9);
  return 0;
}

int onednnMatmul(const std::string& type, long m, long n, long k, double seconds) {
  using namespace dnnl;
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  const bool int8 = type == "u8s8";
  memory::data_type aType = int8             ? memory::data_type::u8
                            : type == "bf16" ? memory::data_type::bf16
                                             : memory::data_type::f32,
                    bType = int8 ? memory::data_type::s8 : aType;
  memory::dims a{m, k}, b{k, n}, c{m, n};
  memory::desc aDesc(a, aType, memory::format_tag::ab), bAny(b, bType, memory::format_tag::any),
      cDesc(c, memory::data_type::f32, memory::format_tag::ab);
  auto pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(aDesc, bAny, cDesc), eng);
  auto aF32 = randomVector(static_cast<size_t>(m * k)),
       bF32 = randomVector(static_cast<size_t>(k * n));
  if (int8) { // integers over the whole u8 and s8 ranges, as tunec bench-op --dtype u8s8 uses
    for (float& x : aF32) x = std::round((x + 1) * 127.5f);
    for (float& x : bF32) x = std::round(x * 127.f);
  }
  memory aPlain({a, memory::data_type::f32, memory::format_tag::ab}, eng, aF32.data());
  memory bPlain({b, memory::data_type::f32, memory::format_tag::ab}, eng, bF32.data());
  memory aMem(aDesc, eng), bMem(pd.weights_desc(), eng), cMem(cDesc, eng);
  reorder(aPlain, aMem).execute(s, aPlain, aMem);
  reorder(bPlain, bMem).execute(s, bPlain, bMem);
  dnnl::matmul prim(pd);
  double t = medianSeconds(
      [&] {
        prim.execute(s, {{DNNL_ARG_SRC, aMem}, {DNNL_ARG_WEIGHTS, bMem}, {DNNL_ARG_DST, cMem}});
        s.wait();
      },
      seconds);
  std::printf("{\"onednn_gflops\": %.2f, \"onednn_best_gflops\": %.2f, \"onednn_impl\": \"%s\"}\n",
              2.0 * m * n * k / t / 1e9, 2.0 * m * n * k / gBestSeconds / 1e9, pd.impl_info_str());
  return 0;
}

int conv(long n, long ic, long h, long w, long oc, long kh, long kw, long stride, long pad,
         double seconds) {
  using namespace dnnl;
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  long oh = (h + 2 * pad - kh) / stride + 1, ow = (w + 2 * pad - kw) / stride + 1;
  memory::dims src{n, ic, h, w}, wei{oc, ic, kh, kw}, bia{oc}, dst{n, oc, oh, ow};
  auto any = [](const memory::dims& d) {
    return memory::desc(d, memory::data_type::f32, memory::format_tag::any);
  };
  auto desc = convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                        any(src), any(wei), any(bia), any(dst), {stride, stride},
                                        {pad, pad}, {pad, pad});
  auto pd = convolution_forward::primitive_desc(desc, eng);
  auto srcData = randomVector(static_cast<size_t>(n * ic * h * w)),
       weiData = randomVector(static_cast<size_t>(oc * ic * kh * kw)),
       biaData = randomVector(static_cast<size_t>(oc));
  memory srcPlain({src, memory::data_type::f32, memory::format_tag::nchw}, eng, srcData.data());
  memory weiPlain({wei, memory::data_type::f32, memory::format_tag::oihw}, eng, weiData.data());
  memory srcMem(pd.src_desc(), eng), weiMem(pd.weights_desc(), eng), dstMem(pd.dst_desc(), eng);
  memory biaMem({bia, memory::data_type::f32, memory::format_tag::x}, eng, biaData.data());
  reorder(srcPlain, srcMem).execute(s, srcPlain, srcMem);
  reorder(weiPlain, weiMem).execute(s, weiPlain, weiMem);
  convolution_forward prim(pd);
  double t = medianSeconds(
      [&] {
        prim.execute(s, {{DNNL_ARG_SRC, srcMem},
                         {DNNL_ARG_WEIGHTS, weiMem},
                         {DNNL_ARG_BIAS, biaMem},
                         {DNNL_ARG_DST, dstMem}});
        s.wait();
      },
      seconds);
  double flops = 2.0 * n * oc * oh * ow * ic * kh * kw;
  std::printf("{\"onednn_gflops\": %.2f, \"onednn_impl\": \"%s\"}\n", flops / t / 1e9,
              pd.impl_info_str());
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  auto arg = [&](int i) { return std::atol(argv[i]); };
  if (argc == 6 && std::string(argv[1]) == "gemm")
    return gemm(arg(2), arg(3), arg(4), std::atof(argv[5]));
  if (argc == 7 && std::string(argv[1]) == "matmul")
    return onednnMatmul(argv[2], arg(3), arg(4), arg(5), std::atof(argv[6]));
  if (argc == 12 && std::string(argv[1]) == "conv")
    return conv(arg(2), arg(3), arg(4), arg(5), arg(6), arg(7), arg(8), arg(9), arg(10),
                std::atof(argv[11]));
  std::fprintf(
      stderr,
      "usage: baselines gemm M N K SECONDS | matmul f32|bf16|u8s8 M N K SECONDS | conv N IC H "
      "W OC KH KW STRIDE PAD SECONDS\n");
  return 2;
}
