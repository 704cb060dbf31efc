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
  return j;
}

nlohmann::json ioToJson(const IoSpec& io) {
  return {
      {"name", io.name}, {"dtype", dtypeName(io.dtype)}, {"shape", io.shape}, {"bytes", io.bytes}};
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
  return io;
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
  for (const TensorRef& t : plan.tensors) tensors.push_back({static_cast<int>(t.region), t.offset});
  j["tensors"] = std::move(tensors);
  nlohmann::json steps = nlohmann::json::array();
  for (const Step& s : plan.steps) steps.push_back(stepToJson(s));
  j["steps"] = std::move(steps);
  for (const IoSpec& io : plan.inputs) j["inputs"].push_back(ioToJson(io));
  for (const IoSpec& io : plan.outputs) j["outputs"].push_back(ioToJson(io));
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
      plan.tensors.push_back(
          {static_cast<Region>(integer<int>(t.at(0))), integer<int64_t>(t.at(1))});
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
  } catch (const std::exception& e) {
    return makeError("corrupt model plan: ", e.what());
  }
  int64_t header = static_cast<int64_t>((16 + length + 63) / 64 * 64);
  if (header + parsed.constantBytes > size)
    return makeError("truncated model: constants need ", parsed.constantBytes, " bytes, ",
                     size - header, " present");
  parsed.constants = blob + header;
  // Every reference in range, so that a corrupt plan fails here and never in a kernel.
  for (const TensorRef& t : plan.tensors) {
    bool ok = true;
    switch (t.region) {
    case Region::Arena:
      ok = t.offset >= 0 && t.offset <= plan.arenaBytes;
      break;
    case Region::Constant:
      ok = t.offset >= 0 && t.offset <= parsed.constantBytes;
      break;
    case Region::Input:
      ok = t.offset >= 0 && t.offset < std::ssize(plan.inputs);
      break;
    case Region::Output:
      ok = t.offset >= 0 && t.offset < std::ssize(plan.outputs);
      break;
    default:
      ok = false;
    }
    if (!ok) return makeError("corrupt model plan: a tensor reference is out of range");
  }
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
