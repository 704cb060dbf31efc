// The target's feature names, LLVM features and target-file JSON.
#include "support/target.h"

#include <fstream>
#include <sstream>
#include <sys/stat.h>

namespace tunec {

namespace {

struct FeatureRow {
  const char* name;
  const char* llvm;
  bool Target::*field;
  CpuFeature feature;
};

constexpr FeatureRow kFeatures[] = {
#define TUNEC_FEATURE_ROW(field, name, llvm) {name, llvm, &Target::field, CpuFeature::field},
    TUNEC_CPU_FEATURE_LIST(TUNEC_FEATURE_ROW)
#undef TUNEC_FEATURE_ROW
};

constexpr int64_t kMaxCacheBytes = int64_t(1) << 40;

Expected<int64_t> cacheBytes(const nlohmann::json& j, const char* field) {
  if (!j.contains(field)) return makeError("missing field '", field, "' (bytes)");
  const nlohmann::json& v = j.at(field);
  if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > kMaxCacheBytes)
    return makeError("field '", field, "' must be a positive byte count, not ", v.dump());
  return v.get<int64_t>();
}

} // namespace

std::vector<std::string> CpuFeatures::names() const {
  std::vector<std::string> names;
  for (const FeatureRow& f : kFeatures)
    if (has(f.feature)) names.push_back(f.name);
  return names;
}

std::string CpuFeatures::text() const {
  std::string s;
  for (const std::string& name : names()) s += (s.empty() ? "" : ", ") + name;
  return s;
}

Expected<CpuFeatures> CpuFeatures::parse(const std::vector<std::string>& names) {
  CpuFeatures set;
  for (const std::string& name : names) {
    const FeatureRow* row = nullptr;
    for (const FeatureRow& f : kFeatures)
      if (name == f.name) row = &f;
    if (!row) {
      std::string known;
      for (const FeatureRow& f : kFeatures)
        known += (known.empty() ? "" : ", ") + std::string(f.name);
      return makeError("unknown feature \"", name, "\" (tunec knows ", known, ")");
    }
    set.add(row->feature);
  }
  return set;
}

CpuFeatures Target::features() const {
  CpuFeatures set;
  for (const FeatureRow& f : kFeatures)
    if (this->*f.field) set.add(f.feature);
  return set;
}

std::string Target::llvmFeatures() const {
  std::string s;
  for (const FeatureRow& f : kFeatures)
    if (this->*f.field) s += (s.empty() ? "" : ",") + std::string(f.llvm);
  return s;
}

std::string knownLlvmFeatures() {
  std::string s;
  for (const FeatureRow& f : kFeatures) s += (s.empty() ? "" : ",") + std::string(f.llvm);
  return s;
}

nlohmann::json Target::toJson() const {
  return {{"isa", featureNames()}, {"cores", cores}, {"l1d", l1d}, {"l2", l2}, {"l3", l3},
          {"model", model},        {"cpu", llvmCpu}};
}

Expected<Target> Target::fromJson(const nlohmann::json& j) {
  if (!j.is_object()) return Error("a target is a JSON object (as 'tunec target --json' prints)");
  Target t;
  if (!j.contains("isa") || !j.at("isa").is_array())
    return Error("missing field 'isa' (a list of feature names such as \"avx2\")");
  std::vector<std::string> names;
  for (const nlohmann::json& name : j.at("isa")) {
    if (!name.is_string()) return makeError("field 'isa': ", name.dump(), " is not a feature name");
    names.push_back(name.get<std::string>());
  }
  auto set = CpuFeatures::parse(names);
  if (!set) return set.error().withContext("field 'isa'");
  for (const FeatureRow& f : kFeatures) t.*f.field = set->has(f.feature);
  if (!t.avx2 || !t.fma) return Error("field 'isa': tunec's kernels need at least avx2 and fma");
  if (!j.contains("cores") || !j.at("cores").is_number_integer() ||
      j.at("cores").get<int64_t>() < 1 || j.at("cores").get<int64_t>() > 65536)
    return Error("field 'cores' must be a positive number of logical CPUs");
  t.cores = j.at("cores").get<int>();
  auto l1d = cacheBytes(j, "l1d");
  if (!l1d) return l1d.error();
  auto l2 = cacheBytes(j, "l2");
  if (!l2) return l2.error();
  auto l3 = cacheBytes(j, "l3");
  if (!l3) return l3.error();
  t.l1d = *l1d, t.l2 = *l2, t.l3 = *l3;
  if (!j.contains("model") || !j.at("model").is_string())
    return Error("missing field 'model' (the CPU's name, a string)");
  t.model = j.at("model").get<std::string>();
  if (j.contains("cpu")) {
    if (!j.at("cpu").is_string()) return Error("field 'cpu' must be LLVM's CPU name, a string");
    t.llvmCpu = j.at("cpu").get<std::string>();
  }
  return t;
}

Expected<Target> readTargetFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return makeError(path, ": no such target file");
  if (!S_ISREG(st.st_mode)) return makeError(path, ": not a regular file");
  if (st.st_size > (1 << 20)) return makeError(path, ": too large for a target file");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return makeError(path, ": not JSON; write a target file with 'tunec target --json > FILE'");
  auto t = Target::fromJson(j);
  if (!t) return t.error().withContext(path);
  return t;
}

} // namespace tunec
