// Canonical JSON, stable hashes, target descriptions.
#include "tuning_db/keys.h"

#include <algorithm>
#include <cstdio>

namespace tunec::db {

std::string canonicalJson(const nlohmann::json& j) {
  return j.dump();
}

std::string stableHash(const std::string& text) {
  uint64_t h = 14695981039346656037ull; // FNV-1a 64-bit offset basis
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string workloadKey(const nlohmann::json& workload) {
  return stableHash(canonicalJson(workload));
}

TargetInfo TargetInfo::fromTarget(const Target& target) {
  TargetInfo t;
  t.isaFeatures = target.featureNames();
  std::sort(t.isaFeatures.begin(), t.isaFeatures.end());
  t.cores = target.cores;
  t.l1d = target.l1d;
  t.l2 = target.l2;
  t.l3 = target.l3;
  t.model = target.model;
  return t;
}

nlohmann::json TargetInfo::toJson() const {
  return {{"isa", isaFeatures}, {"cores", cores}, {"l1d", l1d},
          {"l2", l2},           {"l3", l3},       {"model", model}};
}

bool TargetInfo::fromJson(const nlohmann::json& j, TargetInfo& out, std::string& error) {
  try {
    if (!j.is_object()) throw std::runtime_error("not an object");
    out.isaFeatures = j.at("isa").get<std::vector<std::string>>();
    std::sort(out.isaFeatures.begin(), out.isaFeatures.end());
    out.cores = j.at("cores").get<int>();
    out.l1d = j.at("l1d").get<int64_t>();
    out.l2 = j.at("l2").get<int64_t>();
    out.l3 = j.at("l3").get<int64_t>();
    out.model = j.at("model").get<std::string>();
  } catch (const std::exception& e) {
    error = std::string("target: ") + e.what();
    return false;
  }
  if (out.cores < 1) {
    error = "target: cores must be positive";
    return false;
  }
  return true;
}

std::string TargetInfo::key() const {
  return stableHash(canonicalJson(toJson()));
}

std::string TargetInfo::isaKey() const {
  std::string s;
  for (const auto& f : isaFeatures) s += (s.empty() ? "" : ",") + f;
  return s;
}

} // namespace tunec::db
