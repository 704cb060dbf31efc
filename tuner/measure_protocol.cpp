// JSON lines of the measurement worker.
#include "tuner/measure_protocol.h"

#include <algorithm>
#include <cstdio>

namespace tunec::tuner {

nlohmann::json MeasureRequest::toJson() const {
  return {{"workload", workload},
          {"config", config},
          {"min_seconds", minSeconds},
          {"min_repeats", minRepeats},
          {"flush_cache", flushCache}};
}

MeasureRequest MeasureRequest::fromJson(const nlohmann::json& j) {
  MeasureRequest r;
  r.workload = j.at("workload");
  r.config = j.at("config");
  r.minSeconds = j.value("min_seconds", 0.1);
  r.minRepeats = j.value("min_repeats", 3);
  r.flushCache = j.value("flush_cache", false);
  return r;
}

nlohmann::json MeasureResult::toJson() const {
  return {{"status", spell(status)}, {"error", error},     {"median_us", medianUs},
          {"min_us", minUs},         {"repeats", repeats}, {"compile_seconds", compileSeconds}};
}

MeasureResult MeasureResult::fromJson(const nlohmann::json& j) {
  MeasureResult r;
  auto status = parseSpelling<db::MeasureStatus>(j.at("status").get<std::string>());
  if (!status) throw std::runtime_error("status '" + j.at("status").get<std::string>() + "'");
  r.status = *status;
  r.error = j.value("error", std::string());
  r.medianUs = j.value("median_us", 0.0);
  r.minUs = j.value("min_us", 0.0);
  r.repeats = j.value("repeats", int64_t{0});
  r.compileSeconds = j.value("compile_seconds", 0.0);
  return r;
}

Status checkPlausible(const db::Record& r, double flops, int threads, const KernelTypes& types) {
  if (r.status != db::MeasureStatus::Ok || !(r.medianUs > 0)) return {};
  bool wide = std::find(r.target.isaFeatures.begin(), r.target.isaFeatures.end(), "avx512f") !=
              r.target.isaFeatures.end();
  double lanes = wide ? 16 : 8;
  double cores = std::max(1, std::min(threads, r.target.cores));
  double peak = cores * 6e9 * 2 * 2 * lanes * (isBf16Gemm(types) ? 2 : 1);
  double achieved = flops / (r.medianUs * 1e-6);
  if (achieved > peak) {
    char text[200];
    std::snprintf(text, sizeof(text),
                  "implausible time: %.3g us is %.0f GFLOP/s, above the %.0f GFLOP/s that %g "
                  "core(s) of its target can reach",
                  r.medianUs, achieved / 1e9, peak / 1e9, cores);
    return Error(text);
  }
  return {};
}

} // namespace tunec::tuner
