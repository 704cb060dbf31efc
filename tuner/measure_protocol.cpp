// JSON lines of the measurement worker.
#include "tuner/measure_protocol.h"

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

} // namespace tunec::tuner
