// Inside the measurement worker: compiles a candidate config, checks its output against the
// reference executor on random data (computed once per workload), then times it.
#pragma once

#include "codegen/jit.h"
#include "templates/post_ops.h"
#include "templates/template.h"
#include "tuner/measure_protocol.h"

#include <functional>
#include <istream>
#include <map>
#include <memory>
#include <ostream>
#include <vector>

namespace tunec::tuner {

class CandidateRunner {
public:
  explicit CandidateRunner(Jit& jit) : jit_(jit) {}
  /// Reads the request's workload and config (the pipe's JSON) and measures them.
  MeasureResult measure(const MeasureRequest& request);
  /// Measures a typed candidate; `key` names its workload's problem (its JSON text), the
  /// request gives the timing options.
  MeasureResult measure(const Workload& workload, const Config& config, const std::string& key,
                        const MeasureRequest& request);

  /// Random operands and the reference output of one workload.
  struct Problem {
    std::vector<float> a, b, out, expected; ///< in/weights/out as the kernel reads them
    std::vector<float> scale;               ///< a conv's input channel scale (n x ic)
    /// bf16 workloads: A, a runtime B and a bf16 C as the kernel reads and writes them (bits);
    /// `a` and `b` then hold the same values as floats, for the reference.
    std::vector<uint16_t> aBf16, bBf16, outBf16;
    /// The int8 GEMM: A as u8 (over its whole range; `a` the same integers as floats) and `b`
    /// integers in [-128, 127], as the compiler passes quantized weights.
    std::vector<uint8_t> aU8;
    /// A u8 C (a requantizing epilogue's, QuantizeU8 last): the kernel's output, and the
    /// epilogue that writes it (its scale spreads the reference's values over the u8 range).
    std::vector<uint8_t> outU8;
    Epilogue epilogue;
    double tolerance = 1e-4; ///< relative L2 bound against the reference (per dtype)
  };

private:
  Expected<Problem*> problem(const Workload& workload, const std::string& key);
  Jit& jit_;
  std::map<std::string, std::unique_ptr<Problem>> problems_;
};

/// The worker loop: one MeasureRequest per input line, one MeasureResult per output line, until
/// end of input. A config with "inject": "crash" or "hang" does that when TUNEC_TUNER_INJECT=1
/// (for tests of the measurer's isolation).
int runMeasureWorker(const Target& target, std::istream& in, std::ostream& out);

} // namespace tunec::tuner
