// Post-training static quantization of an ONNX model into the standard QDQ form (what ONNX
// Runtime's quantize_static writes): every Conv, MatMul and Gemm whose weights are an f32
// initializer gets QuantizeLinear/DequantizeLinear on its activation input (u8 or i8, per
// tensor, the range calibrated on sample inputs) and int8 weights behind a DequantizeLinear
// (symmetric, per tensor or per output channel). Any ONNX runtime runs the result; tunec imports
// it like any QDQ model.
#pragma once

#include "ir/tensor.h"
#include "support/error.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tunec {

struct QuantizeOptions {
  bool perChannel = false;       ///< weights: one scale per output channel
  int weightLimit = 127;         ///< weights in [-limit, limit]: 127 (8 bits), or 64 (7 bits,
                                 ///< which AVX2's int8 kernel takes as they are)
  DType activations = DType::U8; ///< u8 (asymmetric) or i8 (symmetric around 0)
  std::string method = "minmax"; ///< calibration: minmax, percentile or entropy (RangeCalibrator)
  double percentile = 99.99;     ///< percentile: the kept share of each activation's values
  /// Dynamic quantization (transformer encoders): MatMul/Gemm activations quantized per run by
  /// DynamicQuantizeLinear (u8, the run's range), no calibration; convolutions stay float.
  bool dynamic = false;
};

/// The range of each calibrated activation over the samples. minmax: the smallest and largest
/// value seen. percentile: the (100 - p)-th and p-th percentiles of its values (outliers beyond
/// them saturate instead of widening every other value's step). entropy: the threshold T whose
/// quantization loses the least information (TensorRT's calibration: the histogram of |x| in
/// 2048 bins; for each candidate T, the distribution clipped at T against its quantization to
/// the activation's levels, 256 over [0, T] for a non-negative activation, 128 per sign
/// otherwise; the smallest KL divergence wins), the range [0, T] or [-T, T] within the observed
/// one. Both read a uniform reservoir of up to 2^20 values per activation (fixed seed: the
/// same samples give the same model).
class RangeCalibrator {
public:
  explicit RangeCalibrator(const QuantizeOptions& options);
  /// One sample's values of activation `name`; non-finite values are left out.
  void observe(const std::string& name, const Tensor& values);
  /// Per activation with a finite value: (lo, hi).
  std::map<std::string, std::pair<double, double>> ranges() const;

private:
  struct Seen {
    double lo, hi;
    int64_t count = 0;
    std::vector<float> reservoir;
  };
  std::string method_;
  bool sampled_; ///< percentile and entropy read a reservoir of the values; minmax does not
  double p_;
  uint64_t state_ = 0x9e3779b97f4a7c15ull; // the reservoir's random stream (splitmix64)
  std::map<std::string, Seen> seen_;
};

/// The entropy calibration's threshold for values of which `absValues` are the magnitudes (a
/// sample of them), quantized to `levels` steps from 0: the upper end of the histogram bin
/// range (of 2048 bins over [0, max], or [0, 8 q] with q the 99.9th percentile when that is
/// smaller) whose clipped distribution's KL divergence from its quantization is smallest. 0 for
/// no values or all zeros.
double entropyThreshold(std::vector<float> absValues, int levels);

/// The activations to calibrate: ONNX tensor names of the quantized nodes' activation inputs.
struct QuantizePlan {
  std::vector<std::string> activations;
  int nodes = 0; ///< Conv/MatMul/Gemm nodes to quantize
};

/// Reads the model and lists what quantize would change (names as the model spells them).
Expected<QuantizePlan> planQuantization(const std::string& modelPath);

/// Weight-only quantization (what ONNX Runtime's MatMulNBitsQuantizer writes): every MatMul whose
/// B is a 2-d f32 initializer [K, N] with K >= 16 becomes a com.microsoft MatMulNBits of `bits`
/// (4 or 8) codes in blocks of `block` along K, asymmetric per block (the block's range widened
/// to contain 0 over 2^bits - 1 steps; u8 zero points packed like the codes), with its
/// accuracy_level (4: int8 activations allowed, 0: f32); activations stay float in the model.
/// Returns how many were quantized; `keptFloat` gets each MatMul left float with why.
Expected<int> writeWeightOnlyModel(const std::string& modelPath, const std::string& outPath,
                                   int bits, int block, std::vector<std::string>* keptFloat,
                                   int accuracyLevel = 4);

/// Rewrites the model at `modelPath` into `outPath` with the calibrated ranges (per activation
/// name: min, max over the calibration samples). The model's opset is raised to 13 when lower
/// (per-axis DequantizeLinear needs it). Returns how many nodes were quantized (a node whose
/// activation has no range, or whose weight is 1-d, stays in float; `keptFloat`, when given, gets
/// each such layer, "Op 'name' stays float: why").
Expected<int> writeQuantizedModel(const std::string& modelPath, const std::string& outPath,
                                  const std::map<std::string, std::pair<double, double>>& ranges,
                                  const QuantizeOptions& options,
                                  std::vector<std::string>* keptFloat = nullptr);

} // namespace tunec
