// Workload and target keys (DESIGN.md, decisions 4 and 7).
#pragma once

#include "support/target.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tunec::db {

/// Canonical text of a JSON value: keys sorted, no whitespace (nlohmann::json orders keys).
std::string canonicalJson(const nlohmann::json& j);
/// Stable 64-bit FNV-1a hash of a string, as 16 hex digits.
std::string stableHash(const std::string& text);
/// The workload key: the hash of the anchor's canonical workload JSON. The same layer in two
/// models gives the same key, whatever post-ops follow it.
std::string workloadKey(const nlohmann::json& workload);

/// What a record was measured on: the ISA features codegen uses, cores, caches, CPU model.
struct TargetInfo {
  std::vector<std::string> isaFeatures; ///< sorted
  int cores = 1;
  int64_t l1d = 0, l2 = 0, l3 = 0;
  std::string model;

  /// The record view of a target: the fields of its key (llvmCpu is not one).
  static TargetInfo fromTarget(const Target& target);
  nlohmann::json toJson() const;
  static bool fromJson(const nlohmann::json& j, TargetInfo& out, std::string& error);
  /// Hash of the canonical JSON: records apply to exactly this kind of machine.
  std::string key() const;
  /// The ISA features joined ("avx2,avx512f,..."): the "compatible target" match.
  std::string isaKey() const;
};

} // namespace tunec::db
