// A template's knob space as data: each knob with its candidate values. Search (the tuner, the
// sweep in bench-op) samples and enumerates it; validation decides which points are legal.
#pragma once

#include "support/dtype.h"
#include "support/error.h"
#include "support/spellings.h"
#include "templates/isa.h"

#include <array>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
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

/// Output positions of a window sliding over `padded` positions: (padded - span) / stride + 1
/// for the dilated kernel's span, 0 when the span is larger than the padded input (not the 1
/// that truncating a negative quotient toward zero would give).
inline int64_t outputSize(int64_t padded, int64_t kernel, int64_t dilation, int64_t stride) {
  const int64_t room = padded - ((kernel - 1) * dilation + 1);
  return room < 0 ? 0 : room / stride + 1;
}

/// The element types of a heavy kernel, named as oneDNN names them: source (activations),
/// weights, accumulator and destination. A workload carries them (they are part of its key) and
/// so does every microkernel spec; byte sizes come from them, never from a literal 4.
struct KernelTypes {
  DType src = DType::F32, wei = DType::F32, acc = DType::F32, dst = DType::F32;
  bool operator==(const KernelTypes&) const = default;
  /// Every type f32: the kernels tunec has today.
  bool allF32() const {
    return src == DType::F32 && wei == DType::F32 && acc == DType::F32 && dst == DType::F32;
  }
  size_t srcBytes() const { return dtypeSize(src); }
  size_t weiBytes() const { return dtypeSize(wei); }
  size_t accBytes() const { return dtypeSize(acc); }
  size_t dstBytes() const { return dtypeSize(dst); }
};

/// f32 operands and accumulators (the broadcast FMA) with an f32 C, or a u8 C written by a
/// requantizing epilogue (an f32 layer that feeds int8 layers, such as a quantized model's RGB
/// convolution).
inline bool isF32Gemm(const KernelTypes& t) {
  return t.src == DType::F32 && t.wei == DType::F32 && t.acc == DType::F32 &&
         (t.dst == DType::F32 || t.dst == DType::U8);
}
/// bf16 weights with f32 accumulators and an f32 or bf16 C: the bf16 GEMM (vdpbf16ps). A is
/// bf16, or f32 that the kernel converts to bf16 block by block (convertsA: a model's f32
/// activations times weights packed to bf16, `--precision bf16`).
inline bool isBf16Gemm(const KernelTypes& t) {
  return (t.src == DType::BF16 || t.src == DType::F32) && t.wei == DType::BF16 &&
         t.acc == DType::F32 && (t.dst == DType::F32 || t.dst == DType::BF16);
}
/// u8 activations times s8 weights (i8) with i32 accumulators and an f32 C, or a u8 C written
/// by a requantizing epilogue (PostOpKind::QuantizeU8 last): the int8 GEMM (AMX tdpbusd). The
/// i32 sums are exact; the epilogue converts them to f32 (round to nearest) before its bias,
/// scales and post-ops.
inline bool isInt8Gemm(const KernelTypes& t) {
  return t.src == DType::U8 && t.wei == DType::I8 && t.acc == DType::I32 &&
         (t.dst == DType::F32 || t.dst == DType::U8);
}
/// A C that is not f32 (bf16, or the u8 of a requantizing epilogue) is written once, after the
/// whole of K: K blocks accumulate through an f32 C only.
inline bool writesCOnce(const KernelTypes& t) {
  return t.dst != DType::F32;
}
/// A GEMM of k groups (pairs of bf16, quads of int8) packed into B's panels: a low-precision GEMM.
inline bool isLowPrecisionGemm(const KernelTypes& t) {
  return isBf16Gemm(t) || isInt8Gemm(t);
}
/// f32 weights and arithmetic on activations stored as bf16 on one side or both (a depthwise
/// convolution between bf16 kernels, --precision bf16): a bf16 input widened exactly, a bf16
/// output rounded to nearest even.
inline bool isF32OnBf16Activations(const KernelTypes& t) {
  return (t.src == DType::F32 || t.src == DType::BF16) && t.wei == DType::F32 &&
         t.acc == DType::F32 && (t.dst == DType::F32 || t.dst == DType::BF16) && !t.allF32();
}
/// A bf16 GEMM whose A is f32: rounded to bf16 (nearest even) into a scratch per block.
inline bool convertsA(const KernelTypes& t) {
  return isBf16Gemm(t) && t.src == DType::F32;
}

/// A workload's "dtype" field: one type name when source, weights and destination share it and
/// the accumulator is its natural one (f32 for floats, i32 for integers): "f32", the spelling of
/// every workload key so far, or "bf16"; else {"src": .., "wei": .., "acc": .., "dst": ..}.
nlohmann::json kernelTypesToJson(const KernelTypes& t);
/// Reads a workload's "dtype"; the error names the field or the unknown type name.
Status readKernelTypes(const nlohmann::json& j, const char* templ, KernelTypes& out);
/// Refuses types other than f32 (the templates check the others they implement first), naming
/// them and what the template implements (`supported`): part of every workload's check().
Status checkKernelTypes(const KernelTypes& t, const char* templ, const char* supported = "f32");

/// One field of a config: its name in records and how it is read and written. A template's
/// table of fields generates its config's toJson, fromJson and config-from-knobs (by name), so
/// a knob is named once.
template <typename C> struct ConfigField {
  const char* name;
  nlohmann::json (*get)(const C&);
  /// Sets the field from a JSON value; false with `error` (without the field's name) when the
  /// value has the wrong type or is not one of the spellings.
  bool (*set)(C&, const nlohmann::json&, std::string& error);
};

namespace detail {

template <typename T> nlohmann::json fieldToJson(const T& v) {
  if constexpr (std::is_enum_v<T>)
    return std::string(spell(v));
  else
    return v;
}

template <typename T> bool fieldFromJson(const nlohmann::json& j, T& out, std::string& error) {
  if constexpr (std::is_enum_v<T>) {
    if (!j.is_string()) {
      error = "has the wrong type";
      return false;
    }
    auto name = j.get<std::string>();
    std::optional<T> parsed = parseSpelling<T>(name);
    if (!parsed) {
      error = "is '" + name + "', not " + spellingList<T>();
      return false;
    }
    out = *parsed;
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!j.is_boolean()) {
      error = "has the wrong type";
      return false;
    }
    out = j.get<bool>();
  } else {
    static_assert(std::is_integral_v<T>, "config fields are integers, bools or enums");
    if (!j.is_number_integer()) {
      error = "has the wrong type";
      return false;
    }
    out = j.get<T>();
  }
  return true;
}

template <typename C, typename T> struct MemberOf;
template <typename C, typename T> struct MemberOf<C, T C::*> { using type = T; };

} // namespace detail

/// The field `Member` of config `C`, spelled `name` in records.
template <typename C, auto Member> constexpr ConfigField<C> configField(const char* name) {
  using T = typename detail::MemberOf<C, decltype(Member)>::type;
  return {name, [](const C& c) { return detail::fieldToJson<T>(c.*Member); },
          [](C& c, const nlohmann::json& j, std::string& error) {
            return detail::fieldFromJson<T>(j, c.*Member, error);
          }};
}

template <typename C, size_t N>
nlohmann::json configToJson(const C& c, const std::array<ConfigField<C>, N>& fields) {
  nlohmann::json j = nlohmann::json::object();
  for (const ConfigField<C>& f : fields) j[f.name] = f.get(c);
  return j;
}

/// Reads every field (all are required); the error names the template and the field.
template <typename C, size_t N>
Expected<C> configFromJson(const nlohmann::json& j, const std::array<ConfigField<C>, N>& fields,
                           const char* templ) {
  C c;
  for (const ConfigField<C>& f : fields) {
    std::string error;
    if (!j.is_object() || !j.contains(f.name))
      return makeError(templ, " config: missing field '", f.name, "'");
    if (!f.set(c, j.at(f.name), error))
      return makeError(templ, " config: field '", f.name, "' ", error);
  }
  return c;
}

/// Sets the fields named by the knobs of `space` from one value per knob; the other fields keep
/// their values in `c`.
template <typename C, size_t N>
Status configSetKnobs(C& c, const KnobSpace& space, const std::vector<nlohmann::json>& values,
                      const std::array<ConfigField<C>, N>& fields, const char* templ) {
  if (values.size() != space.size())
    return makeError(templ, " config needs ", space.size(), " knob values, got ", values.size());
  for (size_t i = 0; i < space.size(); ++i) {
    const ConfigField<C>* field = nullptr;
    for (const ConfigField<C>& f : fields)
      if (space[i].name == f.name) field = &f;
    if (!field) return makeError(templ, " config has no knob '", space[i].name, "'");
    std::string error;
    if (!field->set(c, values[i], error))
      return makeError(templ, " config: knob '", space[i].name, "' ", error);
  }
  return {};
}

} // namespace tunec
