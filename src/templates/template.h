// The closed set of heavy-kernel templates behind one typed interface: a workload is a variant
// of the templates' workloads and a config a variant of their configs, dispatched with
// std::visit. Adding a template is adding an alternative to both variants; every function here
// is then a compile error until it handles it, instead of an if-chain on the template's name
// that falls through.
//
// JSON is read only at the edges: the tuning database and the tuner's worker pipe call
// parseWorkload / parseConfig, everything between (search, features, measurement, codegen)
// takes the typed values.
#pragma once

#include "support/error.h"
#include "support/target.h"
#include "templates/conv2d_template.h"
#include "templates/depthwise_template.h"
#include "templates/isa.h"
#include "templates/knobs.h"
#include "templates/matmul_template.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace tunec {

enum class TemplateKind : uint8_t { Matmul, Conv2d, Depthwise };

template <> struct Spellings<TemplateKind> {
  static constexpr std::pair<TemplateKind, std::string_view> values[] = {
      {TemplateKind::Matmul, "matmul"},
      {TemplateKind::Conv2d, "conv2d"},
      {TemplateKind::Depthwise, "depthwise"}};
};

using Workload = std::variant<MatmulWorkload, Conv2dWorkload, DepthwiseWorkload>;
using Config = std::variant<MatmulConfig, Conv2dConfig, DepthwiseConfig>;

TemplateKind templateKind(const Workload& w);
TemplateKind templateKind(const Config& c);
/// "matmul", "conv2d", "depthwise": the "template" field of workloads and records.
std::string_view templateName(TemplateKind kind);
std::optional<TemplateKind> parseTemplateName(std::string_view name);
/// The template's version (bumped when its code or a knob's meaning changes).
int templateVersion(TemplateKind kind);

/// Reads a workload JSON; its "template" field picks the alternative. The error names the
/// template and the field.
Expected<Workload> parseWorkload(const nlohmann::json& j);
/// Reads a config JSON of the given template.
Expected<Config> parseConfig(TemplateKind kind, const nlohmann::json& j);
/// Canonical JSON: the workload key (DESIGN.md, decision 4) and the config of a record.
nlohmann::json toJson(const Workload& w);
nlohmann::json toJson(const Config& c);
/// How many times parseWorkload and parseConfig ran in this process (tests count the JSON a
/// typed path reads: none).
uint64_t templateJsonParses();

double workloadFlops(const Workload& w);
int workloadThreads(const Workload& w);
/// The element types of a workload's kernel (src, wei, acc, dst).
KernelTypes workloadTypes(const Workload& w);
/// A short description for progress lines ("matmul 128x768x768 t1").
std::string workloadLabel(const Workload& w);

/// Candidate values of every knob for this workload on `isa`.
KnobSpace knobSpace(const Workload& w, Isa isa);
/// The ISA a kernel of `w` runs on when the compile's vector ISA is `vectorIsa`: on a target
/// with AMX, AMX for a bf16 matmul with constant weights (its B is packed at compile time), an
/// int8 matmul, and an int8 or bf16 convolution whose channels fill tile rows (amxRunsConv2d);
/// else the vector ISA (AVX2 for int8 on AVX-512 without VNNI). The one choice for the
/// lowering, the tuner's tasks and bench-op.
Isa kernelIsa(const Workload& w, Isa vectorIsa, const Target& target);
/// Whether --precision bf16 runs `w` (its bf16 types) in bf16 on `target`: on AMX (kernelIsa),
/// or on vdpbf16ps where that beats the FMA (vectorBf16Pays); else the kernel stays fp32 with
/// kVectorBf16SlowerNote in the compile report. The one decision for the lowering.
bool bf16Pays(const Workload& w, const Target& target);
/// The analytical default for `target`.
Config defaultConfig(const Workload& w, Isa isa, const Target& target);
/// One value per knob of `space` (knobSpace(w, isa)) to a config; not yet validated.
Expected<Config> configFromKnobs(const Workload& w, Isa isa, const KnobSpace& space,
                                 const std::vector<nlohmann::json>& values);
/// Checks the config against the workload; a config of another template is an error.
Status validateConfig(const Workload& w, const Config& c);
/// The ISA a config's code uses.
Isa configIsa(const Config& c);

} // namespace tunec
