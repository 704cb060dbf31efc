// The host CPU as codegen and the tuner see it: ISA features (cpuid), cores and cache sizes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tunec {

/// Facts about a CPU read from cpuid and sysfs.
struct HostInfo {
  std::string modelName; ///< "AMD EPYC ..." from cpuid brand string
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512bf16 = false, avx512vnni = false, amx = false;
  int cores = 1; ///< logical CPUs available to this process
  int64_t l1d = 32 * 1024, l2 = 1024 * 1024, l3 = 32 * 1024 * 1024; ///< bytes, per core for L1/L2
  /// Feature names that are set, e.g. {"avx2", "fma", "avx512f", ...}.
  std::vector<std::string> featureNames() const;
};

/// Reads the host once (cached).
const HostInfo& hostInfo();

} // namespace tunec
