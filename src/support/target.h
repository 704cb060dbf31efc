// The machine code is chosen and emitted for (DESIGN.md, decision 10): ISA features, cores,
// caches and CPU model. Built once in src/cli, from this machine or from a file that
// `tunec target --json` wrote on another, and passed to everything that chooses or emits code.
#pragma once

#include "support/error.h"

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tunec {

/// The CPU features tunec's code generation distinguishes: (field, name in target files and
/// records, LLVM target features it enables). A new feature is a new row here.
#define TUNEC_CPU_FEATURE_LIST(X)                                                                  \
  X(avx2, "avx2", "+avx2")                                                                         \
  X(fma, "fma", "+fma")                                                                            \
  X(avx512f, "avx512f", "+avx512f")                                                                \
  X(avx512bw, "avx512bw", "+avx512bw")                                                             \
  X(avx512vl, "avx512vl", "+avx512vl")                                                             \
  X(avx512dq, "avx512dq", "+avx512dq")                                                             \
  X(avx512bf16, "avx512_bf16", "+avx512bf16")                                                      \
  X(avx512vnni, "avx512_vnni", "+avx512vnni")                                                      \
  X(amx, "amx", "+amx-tile,+amx-bf16,+amx-int8")

/// One feature of TUNEC_CPU_FEATURE_LIST.
enum class CpuFeature {
#define TUNEC_FEATURE_ENUM(field, name, llvm) field,
  TUNEC_CPU_FEATURE_LIST(TUNEC_FEATURE_ENUM)
#undef TUNEC_FEATURE_ENUM
};

/// A set of CPU features: what a target has, or what a model's code needs (the model plan's
/// `requires`, checked against the host when a model.so is loaded).
class CpuFeatures {
public:
  CpuFeatures() = default;
  CpuFeatures(std::initializer_list<CpuFeature> features) {
    for (CpuFeature f : features) add(f);
  }
  bool has(CpuFeature f) const { return bits_ >> static_cast<unsigned>(f) & 1u; }
  CpuFeatures& add(CpuFeature f) {
    bits_ |= 1u << static_cast<unsigned>(f);
    return *this;
  }
  CpuFeatures& add(const CpuFeatures& other) {
    bits_ |= other.bits_;
    return *this;
  }
  /// The features of this set that `have` lacks.
  CpuFeatures missingFrom(const CpuFeatures& have) const {
    CpuFeatures m;
    m.bits_ = bits_ & ~have.bits_;
    return m;
  }
  bool empty() const { return bits_ == 0; }
  bool operator==(const CpuFeatures&) const = default;

  /// Their names in the list's order ("avx2", "fma", ...).
  std::vector<std::string> names() const;
  /// The names joined by ", " ("" for none).
  std::string text() const;
  /// The set of these names; an unknown name is an error that lists the known ones (so a file
  /// from a newer tunec is refused rather than misread).
  static Expected<CpuFeatures> parse(const std::vector<std::string>& names);

private:
  uint32_t bits_ = 0;
};

/// A target machine. Its key (tuning_db/keys.h) is made of the features, cores, caches and
/// model: what the machine is, never what one process may use (an affinity mask, a cgroup cpuset
/// or a container CPU limit does not change it; the thread count lives in the workload).
struct Target {
#define TUNEC_FEATURE_FIELD(field, name, llvm) bool field = false;
  TUNEC_CPU_FEATURE_LIST(TUNEC_FEATURE_FIELD)
#undef TUNEC_FEATURE_FIELD
  std::string model;   ///< "AMD EPYC ...", the cpuid brand string
  std::string llvmCpu; ///< LLVM's CPU name ("znver3"): the scheduling model; not in the key
  int cores = 1;       ///< logical CPUs of the machine (online), not the process's affinity mask
  int64_t l1d = 32 * 1024, l2 = 1024 * 1024, l3 = 32 * 1024 * 1024; ///< bytes; L1d, L2 per core

  /// The features that are set.
  CpuFeatures features() const;
  /// Names of the features that are set, in the list's order ("avx2", "fma", ...).
  std::vector<std::string> featureNames() const {
    return features().names();
  }
  /// The LLVM target-feature string of the set features ("+avx2,+fma,...").
  std::string llvmFeatures() const;

  /// The target file format of `tunec target --json`: {"isa": [...], "cores", "l1d", "l2",
  /// "l3", "model", "cpu"}.
  nlohmann::json toJson() const;
  /// The LLVM features of every row of TUNEC_CPU_FEATURE_LIST ("+avx2,+fma,...").
  std::string knownLlvmFeatures();

  /// Reads a target file's JSON; an error names the field and what is wrong with it (an unknown
  /// ISA feature is an error, so a file from a newer tunec is refused rather than misread).
  static Expected<Target> fromJson(const nlohmann::json& j);
};

/// The LLVM features of every row of TUNEC_CPU_FEATURE_LIST ("+avx2,+fma,...").
std::string knownLlvmFeatures();

/// Reads a target file (`tunec target --json > FILE`); errors name the file and the field.
Expected<Target> readTargetFile(const std::string& path);

} // namespace tunec
