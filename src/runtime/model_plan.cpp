// The model blob: plan as JSON, then the constants.
#include "runtime/model_plan.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

namespace tunec::rt {

namespace {

constexpr char kMagic[8] = {'T', 'U', 'N', 'E', 'C', 'M', 'D', '1'};

// JSON has no infinities or NaN: those floats are written as strings.
nlohmann::json floatsToJson(const std::vector<float>& v) {
  nlohmann::json out = nlohmann::json::array();
  for (float f : v) {
    if (std::isfinite(f))
      out.push_back(f);
    else
      out.push_back(std::isnan(f) ? "nan" : (f > 0 ? "inf" : "-inf"));
  }
  return out;
}

/// An integer field, or an exception the parser reports as a corrupt plan: a float, or a value
/// out of T's range, converted by a plain get<T>() would be undefined behaviour.
template <typename T> T integer(const nlohmann::json& v) {
  if (!v.is_number_integer()) throw std::runtime_error("a number that must be an integer is not");
  if (v.is_number_unsigned()
          ? v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max())
          : (v.get<int64_t>() < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
             v.get<int64_t>() > static_cast<int64_t>(std::numeric_limits<T>::max())))
    throw std::runtime_error("an integer out of range");
  return static_cast<T>(v.is_number_unsigned() ? static_cast<int64_t>(v.get<uint64_t>())
                                               : v.get<int64_t>());
}

template <typename T> std::vector<T> integers(const nlohmann::json& v) {
  std::vector<T> out;
  for (const auto& e : v) out.push_back(integer<T>(e));
  return out;
}

std::vector<float> floatsFromJson(const nlohmann::json& j) {
  std::vector<float> out;
  for (const auto& f : j) {
    if (f.is_string()) {
      std::string t = f.get<std::string>();
      out.push_back(t == "inf"    ? std::numeric_limits<float>::infinity()
                    : t == "-inf" ? -std::numeric_limits<float>::infinity()
                                  : std::numeric_limits<float>::quiet_NaN());
    } else {
      double d = f.get<double>();
      if (!(std::abs(d) <= std::numeric_limits<float>::max()))
        throw std::runtime_error("a float out of range");
      out.push_back(static_cast<float>(d));
    }
  }
  return out;
}

nlohmann::json runTimeIntsToJson(const std::vector<RunTimeInt>& v) {
  nlohmann::json out = nlohmann::json::array();
  for (const RunTimeInt& r : v) out.push_back({r.position, r.extent});
  return out;
}

nlohmann::json stepToJson(const Step& s) {
  nlohmann::json j = {{"kind", static_cast<int>(s.kind)},
                      {"label", s.label},
                      {"kernel", s.kernel},
                      {"tensors", s.tensors},
                      {"ints", s.ints},
                      {"floats", floatsToJson(s.floats)},
                      {"flops", s.flops},
                      {"bytes", s.bytes}};
  if (s.bf16Flops > 0) j["bf16_flops"] = s.bf16Flops; // absent: an fp32 step, as before
  if (s.int8Ops != 0) j["int8_ops"] = s.int8Ops;      // absent: no int8 kernels
  if (!s.runTimeInts.empty()) j["run_time_ints"] = runTimeIntsToJson(s.runTimeInts);
  if (s.when.extent >= 0) j["when"] = {s.when.extent, s.when.min, s.when.max};
  return j;
}

nlohmann::json ioToJson(const IoSpec& io) {
  nlohmann::json j = {
      {"name", io.name}, {"dtype", dtypeName(io.dtype)}, {"shape", io.shape}, {"bytes", io.bytes}};
  if (!io.dimExtents.empty()) j["dim_extents"] = io.dimExtents;
  return j;
}

IoSpec ioFromJson(const nlohmann::json& j) {
  IoSpec io;
  io.name = j.at("name").get<std::string>();
  std::string dtype = j.at("dtype").get<std::string>();
  auto parsed = parseDType(dtype);
  if (!parsed)
    throw std::runtime_error("tensor '" + io.name + "' has an unknown dtype '" + dtype + "'");
  io.dtype = *parsed;
  io.shape = integers<int64_t>(j.at("shape"));
  io.bytes = integer<int64_t>(j.at("bytes"));
  if (j.contains("dim_extents")) io.dimExtents = integers<int32_t>(j.at("dim_extents"));
  if (!io.dimExtents.empty() && io.dimExtents.size() != io.shape.size())
    throw std::runtime_error("tensor '" + io.name + "' has dimension extents of another rank");
  return io;
}

} // namespace

int64_t Extent::evaluate(const std::vector<int64_t>& symbolValues) const {
  int64_t total = 0;
  for (const ExtentTerm& t : terms) {
    int64_t v = t.coefficient;
    for (int32_t s : t.symbols) v *= symbolValues[static_cast<size_t>(s)];
    total += v;
  }
  return total;
}

std::string extentName(const ModelPlan& plan, int32_t extent) {
  std::string out;
  for (const ExtentTerm& t : plan.extents[static_cast<size_t>(extent)].terms) {
    std::string term;
    for (int32_t s : t.symbols)
      term += (term.empty() ? "" : "*") + plan.symbols[static_cast<size_t>(s)].name;
    int64_t c = t.coefficient < 0 ? -t.coefficient : t.coefficient;
    if (term.empty())
      term = std::to_string(c);
    else if (c != 1)
      term += "*" + std::to_string(c);
    out += (out.empty() ? (t.coefficient < 0 ? "-" : "") : (t.coefficient < 0 ? "-" : "+")) + term;
  }
  return out.empty() ? "0" : out;
}

namespace {

// Each cache pairs an input and an output of one element type and rank whose bounds agree but
// along the axis, where the output's is the capacity and the input's at most that; its arena copy
// lies in the arena; no input or output is in two pairs.
Status checkCaches(const ModelPlan& plan) {
  if (!plan.caches.empty() && (plan.symbols.empty() || plan.imageExtent >= 0))
    return makeError("corrupt model plan: K/V caches in a plan without symbols or run per image");
  std::vector<bool> inputUsed(plan.inputs.size()), outputUsed(plan.outputs.size());
  for (const KvCache& c : plan.caches) {
    bool ok = c.input >= 0 && c.input < std::ssize(plan.inputs) && c.output >= 0 &&
              c.output < std::ssize(plan.outputs);
    if (ok) {
      const IoSpec& in = plan.inputs[static_cast<size_t>(c.input)];
      const IoSpec& out = plan.outputs[static_cast<size_t>(c.output)];
      ok = !inputUsed[static_cast<size_t>(c.input)] && !outputUsed[static_cast<size_t>(c.output)] &&
           in.dtype == out.dtype && in.shape.size() == out.shape.size() && c.axis >= 0 &&
           c.axis < std::ssize(out.shape) && c.capacity == out.shape[static_cast<size_t>(c.axis)] &&
           c.bytes == out.bytes && c.scratch >= 0 && c.bytes >= 0 &&
           c.scratch <= plan.arenaBytes - c.bytes;
      for (size_t d = 0; ok && d < in.shape.size(); ++d)
        ok = static_cast<int32_t>(d) == c.axis ? in.shape[d] <= c.capacity
                                               : in.shape[d] == out.shape[d];
      if (ok) {
        inputUsed[static_cast<size_t>(c.input)] = true;
        outputUsed[static_cast<size_t>(c.output)] = true;
      }
    }
    if (!ok)
      return makeError("corrupt model plan: a K/V cache (input ", c.input, ", output ", c.output,
                       ") does not pair an input and an output of one layout");
  }
  return {};
}

} // namespace

std::vector<uint8_t> serializeModel(const ModelPlan& plan, const std::vector<uint8_t>& constants) {
  nlohmann::json j;
  j["format"] = ModelPlan::kFormatVersion;
  j["requires"] = plan.requiredFeatures.names();
  j["threads"] = plan.threads;
  j["arena_bytes"] = plan.arenaBytes;
  j["kernel_count"] = plan.kernelCount;
  j["constant_bytes"] = constants.size();
  nlohmann::json tensors = nlohmann::json::array();
  for (const TensorRef& t : plan.tensors) {
    nlohmann::json ref = {static_cast<int>(t.region), t.offset};
    if (t.imageStride != 0) ref.push_back(t.imageStride);
    tensors.push_back(std::move(ref));
  }
  if (plan.imageExtent >= 0) j["image_extent"] = plan.imageExtent;
  for (const KvCache& c : plan.caches)
    j["caches"].push_back({c.input, c.output, c.axis, c.capacity, c.scratch, c.bytes});
  j["tensors"] = std::move(tensors);
  nlohmann::json steps = nlohmann::json::array();
  for (const Step& s : plan.steps) steps.push_back(stepToJson(s));
  j["steps"] = std::move(steps);
  for (const IoSpec& io : plan.inputs) j["inputs"].push_back(ioToJson(io));
  for (const IoSpec& io : plan.outputs) j["outputs"].push_back(ioToJson(io));
  if (!plan.symbols.empty()) {
    for (const SymbolSpec& s : plan.symbols)
      j["symbols"].push_back({{"name", s.name}, {"min", s.min}, {"max", s.max}});
    for (const Extent& e : plan.extents) {
      nlohmann::json terms = nlohmann::json::array();
      for (const ExtentTerm& t : e.terms) terms.push_back({t.coefficient, t.symbols});
      j["extents"].push_back(std::move(terms));
    }
  }
  // Names come from the model: a byte that is not UTF-8 is replaced rather than thrown on.
  std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  uint64_t length = text.size();
  size_t header = (sizeof(kMagic) + sizeof(length) + text.size() + 63) / 64 * 64;
  std::vector<uint8_t> blob(header + constants.size(), 0);
  std::memcpy(blob.data(), kMagic, sizeof(kMagic));
  std::memcpy(blob.data() + sizeof(kMagic), &length, sizeof(length));
  std::memcpy(blob.data() + sizeof(kMagic) + sizeof(length), text.data(), text.size());
  if (!constants.empty()) std::memcpy(blob.data() + header, constants.data(), constants.size());
  return blob;
}

Expected<ParsedModel> parseModel(const uint8_t* blob, int64_t size) {
  uint64_t length = 0;
  if (size < 16 || std::memcmp(blob, kMagic, sizeof(kMagic)) != 0)
    return makeError("not a tunec model (bad magic); compile one with `tunec compile`");
  std::memcpy(&length, blob + sizeof(kMagic), sizeof(length));
  if (length > static_cast<uint64_t>(size) - 16) return makeError("truncated model header");
  ParsedModel parsed;
  ModelPlan& plan = parsed.plan;
  try {
    auto j = nlohmann::json::parse(blob + 16, blob + 16 + length);
    if (integer<int>(j.at("format")) != ModelPlan::kFormatVersion)
      return makeError("model format ", integer<int>(j.at("format")), " is not the format ",
                       ModelPlan::kFormatVersion,
                       " this runtime reads; recompile the model with this tunec");
    auto required = CpuFeatures::parse(j.at("requires").get<std::vector<std::string>>());
    if (!required) return required.error().withContext("field 'requires'");
    plan.requiredFeatures = *required;
    plan.threads = integer<int>(j.at("threads"));
    plan.arenaBytes = integer<int64_t>(j.at("arena_bytes"));
    plan.kernelCount = integer<int64_t>(j.at("kernel_count"));
    parsed.constantBytes = integer<int64_t>(j.at("constant_bytes"));
    for (const auto& t : j.at("tensors"))
      plan.tensors.push_back({static_cast<Region>(integer<int>(t.at(0))), integer<int64_t>(t.at(1)),
                              t.size() > 2 ? integer<int64_t>(t.at(2)) : 0});
    if (j.contains("image_extent")) plan.imageExtent = integer<int32_t>(j.at("image_extent"));
    if (j.contains("caches"))
      for (const auto& c : j.at("caches"))
        plan.caches.push_back({integer<int32_t>(c.at(0)), integer<int32_t>(c.at(1)),
                               integer<int32_t>(c.at(2)), integer<int64_t>(c.at(3)),
                               integer<int64_t>(c.at(4)), integer<int64_t>(c.at(5))});
    for (const auto& s : j.at("steps")) {
      Step step;
      step.kind = static_cast<StepKind>(integer<int>(s.at("kind")));
      step.label = s.at("label").get<std::string>();
      step.kernel = integer<int32_t>(s.at("kernel"));
      step.tensors = integers<int32_t>(s.at("tensors"));
      step.ints = integers<int64_t>(s.at("ints"));
      step.floats = floatsFromJson(s.at("floats"));
      step.flops = s.value("flops", 0.0);
      step.bytes = (s.contains("bytes") ? integer<int64_t>(s.at("bytes")) : 0);
      step.bf16Flops = s.value("bf16_flops", 0.0);
      step.int8Ops = s.value("int8_ops", 0.0);
      if (s.contains("when"))
        step.when = {integer<int32_t>(s.at("when").at(0)), integer<int64_t>(s.at("when").at(1)),
                     integer<int64_t>(s.at("when").at(2))};
      if (s.contains("run_time_ints"))
        for (const auto& r : s.at("run_time_ints"))
          step.runTimeInts.push_back({integer<int32_t>(r.at(0)), integer<int32_t>(r.at(1))});
      if (!(step.flops >= 0) || step.bytes < 0 || !(step.bf16Flops >= 0) || !(step.int8Ops >= 0) ||
          step.bf16Flops + step.int8Ops > step.flops)
        return makeError("corrupt model plan: step '", step.label,
                         "' has a negative cost, or more bf16 and int8 operations than operations");
      plan.steps.push_back(std::move(step));
    }
    if (j.contains("inputs"))
      for (const auto& io : j.at("inputs")) plan.inputs.push_back(ioFromJson(io));
    if (j.contains("outputs"))
      for (const auto& io : j.at("outputs")) plan.outputs.push_back(ioFromJson(io));
    if (j.contains("symbols"))
      for (const auto& s : j.at("symbols"))
        plan.symbols.push_back({s.at("name").get<std::string>(), integer<int64_t>(s.at("min")),
                                integer<int64_t>(s.at("max"))});
    if (j.contains("extents"))
      for (const auto& e : j.at("extents")) {
        Extent extent;
        for (const auto& t : e)
          extent.terms.push_back({integer<int64_t>(t.at(0)), integers<int32_t>(t.at(1))});
        plan.extents.push_back(std::move(extent));
      }
  } catch (const std::exception& e) {
    return makeError("corrupt model plan: ", e.what());
  }
  int64_t header = static_cast<int64_t>((16 + length + 63) / 64 * 64);
  if (header + parsed.constantBytes > size)
    return makeError("truncated model: constants need ", parsed.constantBytes, " bytes, ",
                     size - header, " present");
  parsed.constants = blob + header;
  // Every reference in range, so that a corrupt plan fails here and never in a kernel.
  if (plan.imageExtent < -1 || plan.imageExtent >= std::ssize(plan.extents))
    return makeError("corrupt model plan: the image extent ", plan.imageExtent, " is out of range");
  // The last image's copy of a tensor: at most this many strides on.
  int64_t lastImage = 0;
  if (plan.imageExtent >= 0) {
    std::vector<int64_t> bounds;
    for (const SymbolSpec& s : plan.symbols) bounds.push_back(s.max);
    for (const ExtentTerm& t : plan.extents[static_cast<size_t>(plan.imageExtent)].terms)
      for (int32_t s : t.symbols)
        if (s < 0 || s >= std::ssize(plan.symbols))
          return makeError("corrupt model plan: an extent names symbol ", s);
    lastImage = plan.extents[static_cast<size_t>(plan.imageExtent)].evaluate(bounds) - 1;
    if (lastImage < 0 || lastImage > (int64_t{1} << 20))
      return makeError("corrupt model plan: the image extent's bound is ", lastImage + 1);
  }
  for (const TensorRef& t : plan.tensors) {
    bool ok = t.imageStride >= 0 && t.imageStride <= (int64_t{1} << 40) &&
              (t.imageStride == 0 || plan.imageExtent >= 0);
    const int64_t last = lastImage * t.imageStride;
    switch (t.region) {
    case Region::Arena:
      ok = ok && t.offset >= 0 && t.offset + last <= plan.arenaBytes;
      break;
    case Region::Constant:
      ok = ok && t.offset >= 0 && t.offset <= parsed.constantBytes && t.imageStride == 0;
      break;
    case Region::Input:
      ok = ok && t.offset >= 0 && t.offset < std::ssize(plan.inputs) &&
           last < std::max<int64_t>(plan.inputs[static_cast<size_t>(t.offset)].bytes, 1);
      break;
    case Region::Output:
      ok = ok && t.offset >= 0 && t.offset < std::ssize(plan.outputs) &&
           last < std::max<int64_t>(plan.outputs[static_cast<size_t>(t.offset)].bytes, 1);
      break;
    default:
      ok = false;
    }
    if (!ok) return makeError("corrupt model plan: a tensor reference is out of range");
  }
  // Symbols, extents and every reference to them in range.
  for (const SymbolSpec& s : plan.symbols)
    if (s.min < 0 || s.min > s.max)
      return makeError("corrupt model plan: symbol '", s.name, "' has the bounds ", s.min, "..",
                       s.max);
  for (const Extent& e : plan.extents)
    for (const ExtentTerm& t : e.terms)
      for (int32_t s : t.symbols)
        if (s < 0 || s >= std::ssize(plan.symbols) || t.symbols.size() > 8)
          return makeError("corrupt model plan: an extent names symbol ", s);
  for (const auto* ios : {&plan.inputs, &plan.outputs})
    for (const IoSpec& io : *ios)
      for (int32_t e : io.dimExtents)
        if (e < -1 || e >= std::ssize(plan.extents))
          return makeError("corrupt model plan: tensor '", io.name, "' names extent ", e);
  for (const Step& s : plan.steps)
    if (s.when.extent < -1 || s.when.extent >= std::ssize(plan.extents) ||
        (s.when.extent >= 0 && s.when.min > s.when.max))
      return makeError("corrupt model plan: step '", s.label, "' has a guard out of range");
  for (const Step& s : plan.steps)
    if (plan.imageExtent >= 0 && (!s.runTimeInts.empty() || s.when.extent >= 0))
      return makeError("corrupt model plan: step '", s.label, "' of a plan run once per image ",
                       "reads run-time ints");
  for (const Step& s : plan.steps)
    for (const RunTimeInt& r : s.runTimeInts)
      if (r.position < 0 || r.position >= std::ssize(s.ints) || r.extent < 0 ||
          r.extent >= std::ssize(plan.extents))
        return makeError("corrupt model plan: step '", s.label, "' reads a run-time int out of ",
                         "range");
  if (Status st = checkCaches(plan); !st) return st.error();
  for (const Step& s : plan.steps) {
    for (int32_t t : s.tensors)
      if (t < -1 || t >= std::ssize(plan.tensors))
        return makeError("corrupt model plan: step '", s.label, "' names tensor ", t);
    if (s.kind == StepKind::Kernel && (s.kernel < 0 || s.kernel >= plan.kernelCount))
      return makeError("corrupt model plan: step '", s.label, "' names kernel ", s.kernel);
  }
  return parsed;
}

} // namespace tunec::rt
