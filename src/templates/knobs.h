// A template's knob space as data: each knob with its candidate values. Search (the tuner, the
// sweep in bench-op) samples and enumerates it; validation decides which points are legal.
#pragma once

#include "support/error.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tunec {

struct Knob {
  std::string name;
  std::vector<nlohmann::json> values;
};

using KnobSpace = std::vector<Knob>;

/// Number of points in the cross product (before validation).
double knobSpaceSize(const KnobSpace& space);

/// Reads a required field of a config or workload object; the error names the field.
template <typename T>
bool readField(const nlohmann::json& j, const char* name, T& out, std::string& error) {
  if (!j.is_object() || !j.contains(name)) {
    error = std::string("missing field '") + name + "'";
    return false;
  }
  try {
    out = j.at(name).get<T>();
  } catch (const nlohmann::json::exception&) {
    error = std::string("field '") + name + "' has the wrong type";
    return false;
  }
  return true;
}

/// Reads a workload's "dtype" and refuses one the template's kernels do not implement (today
/// every heavy kernel is fp32, spelled "f32" as in every existing workload key).
inline Status checkWorkloadDtype(const nlohmann::json& j, const char* templ) {
  std::string dtype, error;
  if (!readField(j, "dtype", dtype, error)) return makeError(templ, " workload: ", error);
  if (dtype != "f32")
    return makeError(templ, " workload: dtype '", dtype, "' is not supported (", templ,
                     " kernels are f32 in this tunec)");
  return {};
}

} // namespace tunec
