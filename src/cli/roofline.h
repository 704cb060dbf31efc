// Where each step of a model is against the machine's limits (`tunec profile`): its time, its
// arithmetic and memory rates, and the roofline bound it is closest to.
#pragma once

#include "cli/model_session.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tunec::cli {

/// The roofs, measured on this machine for the run's thread count.
struct Roofs {
  std::string isa;
  int threads = 1;
  /// Generated kernels: the measured fp32 FMA peak (2 operations per lane per FMA) times the
  /// threads, what their broadcast-FMA microkernels can reach.
  double kernelGflops = 0;
  /// Loop kernels: one operation per lane per instruction, half the FMA peak.
  double loopGflops = 0;
  /// bf16 kernels (--precision bf16): the measured vdpbf16ps peak times the threads; 0 when the
  /// model has none.
  double bf16Gflops = 0;
  const char* bf16Instruction = "vdpbf16ps"; ///< what the bf16 roof measured (tdpbf16ps on AMX)
  /// int8 kernels: the measured peak of their dot product times the threads, in GOP/s; 0 when
  /// the model has none.
  double int8Gops = 0;
  const char* int8Instruction = "vpdpbusd"; ///< what it measured (vpmaddubsw, tdpbusd)
  double bandwidthGBs = 0; ///< the triad probe over 4x the last-level cache (memory)
  /// The triad over half the last-level cache: the roof of a step whose operands fit in it
  /// (they were just written by the step before, or are small weights read every run).
  double cacheGBs = 0;
  int64_t cacheBytes = 0;
};

struct StepBound {
  StepInfo step;
  double seconds = 0; ///< median over the profiled runs
  double gflops = 0, gbs = 0;
  double computeSeconds = 0, memorySeconds = 0; ///< each roof's lower bound on the time
  double boundSeconds = 0;                      ///< the larger of the two
  /// "compute", "memory", or "unknown" (a model compiled before steps carried their costs).
  std::string bound;
  double ofPeak = 0, ofBandwidth = 0; ///< achieved / roof (the step's memory roof), fractions
};

struct Profile {
  Roofs roofs;
  std::vector<StepBound> steps; ///< in run order
  double stepsSeconds = 0;      ///< Σ step medians
  double runSeconds = 0;        ///< median of whole (unprofiled) runs
  double boundSeconds = 0;      ///< Σ step bounds: the model at its roofline
  int runs = 0;
};

/// Bounds of every step from its median time.
Profile boundSteps(const std::vector<StepInfo>& steps, const std::vector<double>& medianSeconds,
                   const Roofs& roofs);

std::string profileText(const Profile& p, const std::string& model);
nlohmann::json profileJson(const Profile& p, const std::string& model);
/// The page: summary, an SVG roofline (a point per step, its area by time) and the steps in a
/// sortable table.
std::string profileHtml(const Profile& p, const std::string& model);

} // namespace tunec::cli
