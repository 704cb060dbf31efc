// A template's knob space as data: each knob with its candidate values. Search (the tuner, the
// sweep in bench-op) samples and enumerates it; validation decides which points are legal.
#pragma once

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

} // namespace tunec
