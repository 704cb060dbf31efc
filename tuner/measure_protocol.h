// What the tuner asks its measurement worker and what the worker answers: one JSON object per
// line each way (the worker is `tunec tune-worker`, a child process, DESIGN.md decision 10).
#pragma once

#include "templates/knobs.h"
#include "tuning_db/database.h"

#include <nlohmann/json.hpp>
#include <string>

namespace tunec::tuner {

struct MeasureRequest {
  nlohmann::json workload;
  nlohmann::json config;
  double minSeconds = 0.1; ///< repeat until this much time has passed...
  int minRepeats = 3;      ///< ...and at least this many runs
  bool flushCache = false; ///< write a buffer larger than the L3 before every timed run

  nlohmann::json toJson() const;
  static MeasureRequest fromJson(const nlohmann::json& j);
};

struct MeasureResult {
  db::MeasureStatus status = db::MeasureStatus::Ok; ///< as tuning records spell it
  std::string error;
  double medianUs = 0, minUs = 0;
  int64_t repeats = 0;
  double compileSeconds = 0;

  nlohmann::json toJson() const;
  static MeasureResult fromJson(const nlohmann::json& j);
};

/// An ok record faster than its target's FMA units allow (every used core at 6 GHz, two fp32
/// FMAs per cycle at the widest vector the target has; twice that for bf16) is a mistyped,
/// forged or mismeasured time: an error naming the rate, which `tune` records as a failed
/// measurement and `db import`/`merge`/`verify` reject. Ok for other records.
Status checkPlausible(const db::Record& r, double flops, int threads, const KernelTypes& types);

} // namespace tunec::tuner
