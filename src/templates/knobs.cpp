// Knob spaces and kernel element types as records spell them.
#include "templates/knobs.h"

namespace tunec {

double knobSpaceSize(const KnobSpace& space) {
  double n = 1;
  for (const Knob& k : space) n *= static_cast<double>(k.values.size());
  return n;
}

namespace {

// The accumulator a kernel of one element type uses: f32 for floats, i32 for integers.
DType naturalAccumulator(DType t) {
  return isFloat(t) ? DType::F32 : DType::I32;
}

} // namespace

nlohmann::json kernelTypesToJson(const KernelTypes& t) {
  if (t.src == t.wei && t.src == t.dst && t.acc == naturalAccumulator(t.src))
    return std::string(dtypeName(t.src)); // "f32": the spelling of every workload key so far
  return {{"src", dtypeName(t.src)},
          {"wei", dtypeName(t.wei)},
          {"acc", dtypeName(t.acc)},
          {"dst", dtypeName(t.dst)}};
}

Status readKernelTypes(const nlohmann::json& j, const char* templ, KernelTypes& out) {
  if (!j.is_object() || !j.contains("dtype"))
    return makeError(templ, " workload: missing field 'dtype'");
  const nlohmann::json& d = j.at("dtype");
  KernelTypes t;
  if (d.is_string()) {
    std::string spelled = d.get<std::string>();
    auto type = parseDType(spelled);
    if (!type) return makeError(templ, " workload: dtype '", spelled.substr(0, 40), "' is unknown");
    // One type for all four (the accumulator of a float kernel is f32).
    t = {*type, *type, naturalAccumulator(*type), *type};
  } else if (d.is_object()) {
    for (auto [name, field] :
         {std::pair{"src", &t.src}, {"wei", &t.wei}, {"acc", &t.acc}, {"dst", &t.dst}}) {
      if (!d.contains(name) || !d.at(name).is_string())
        return makeError(templ, " workload: dtype needs a '", name, "' type name");
      auto type = parseDType(d.at(name).get<std::string>());
      if (!type)
        return makeError(templ, " workload: dtype ", name, " '",
                         d.at(name).get<std::string>().substr(0, 40), "' is unknown");
      *field = *type;
    }
  } else {
    return makeError(templ, " workload: field 'dtype' has the wrong type");
  }
  out = t;
  return {};
}

Status checkKernelTypes(const KernelTypes& t, const char* templ, const char* supported) {
  if (t.allF32()) return {};
  nlohmann::json spelled = kernelTypesToJson(t);
  return makeError(templ, " workload: dtype '",
                   spelled.is_string() ? spelled.get<std::string>() : spelled.dump(),
                   "' is not supported (", templ, " kernels are ", supported, " in this tunec)");
}

} // namespace tunec
