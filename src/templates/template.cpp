// The typed template interface: each function one std::visit over the workload or config.
#include "templates/template.h"

#include <atomic>
#include <sstream>
#include <type_traits>
#include <utility>

namespace tunec {

namespace {

std::atomic<uint64_t> gParses{0};

// What the interface needs of each template, by its workload type.
template <typename W> struct TemplateOf;

// Low-precision kernels say so in their label: "bf16" (all bf16), "f32xbf16" (f32 A, bf16
// weights), "u8xi8" (the int8 kernels); a bf16 kernel whose C is not of A's type names it
// ("f32xbf16->bf16", "bf16->f32": activations stored as bf16 on one side); an f32 kernel on bf16
// activations says which ("f32 (bf16 in and out)").
void labelTypes(std::ostream& os, const KernelTypes& t) {
  if (isF32OnBf16Activations(t)) { // a depthwise conv between bf16 kernels
    const bool in = t.src == DType::BF16, out = t.dst == DType::BF16;
    os << " f32 (bf16 " << (in && out ? "in and out" : in ? "in" : "out") << ")";
    return;
  }
  if (!t.allF32())
    os << " " << (t.src == t.wei ? "" : std::string(dtypeName(t.src)) + "x") << dtypeName(t.wei);
  if (isBf16Gemm(t) && t.dst != t.src) os << "->" << dtypeName(t.dst);
}

template <> struct TemplateOf<MatmulWorkload> {
  using ConfigType = MatmulConfig;
  static constexpr TemplateKind kind = TemplateKind::Matmul;
  static constexpr int version = kMatmulTemplateVersion;
  static KnobSpace space(const MatmulWorkload& w, Isa isa) { return matmulKnobSpace(w, isa); }
  static MatmulConfig defaults(const MatmulWorkload& w, Isa isa, const Target& target) {
    return defaultMatmulConfig(w, isa, target);
  }
  static Expected<MatmulConfig> fromKnobs(const MatmulWorkload& w, Isa isa, const KnobSpace& s,
                                          const std::vector<nlohmann::json>& v) {
    return matmulConfigFromKnobs(w, isa, s, v);
  }
  static Status validate(const MatmulWorkload& w, const MatmulConfig& c) {
    return validateMatmulConfig(w, c);
  }
  static void label(std::ostream& os, const MatmulWorkload& w) {
    os << "matmul " << (w.batch > 1 ? std::to_string(w.batch) + "x" : "") << w.m << "x" << w.n
       << "x" << w.k << (w.dense() ? "" : " strided");
    labelTypes(os, w.types);
  }
  static bool cold(const MatmulWorkload& w) { return w.coldWeights; }
};

template <> struct TemplateOf<Conv2dWorkload> {
  using ConfigType = Conv2dConfig;
  static constexpr TemplateKind kind = TemplateKind::Conv2d;
  static constexpr int version = kConv2dTemplateVersion;
  static KnobSpace space(const Conv2dWorkload& w, Isa isa) { return conv2dKnobSpace(w, isa); }
  static Conv2dConfig defaults(const Conv2dWorkload& w, Isa isa, const Target& target) {
    return defaultConv2dConfig(w, isa, target);
  }
  static Expected<Conv2dConfig> fromKnobs(const Conv2dWorkload& w, Isa isa, const KnobSpace& s,
                                          const std::vector<nlohmann::json>& v) {
    return conv2dConfigFromKnobs(w, isa, s, v);
  }
  static Status validate(const Conv2dWorkload& w, const Conv2dConfig& c) {
    return validateConv2dConfig(w, c);
  }
  static void label(std::ostream& os, const Conv2dWorkload& w) {
    os << "conv2d " << w.h << "x" << w.w << "x" << w.ic << "->" << w.oc << " k" << w.kh << "x"
       << w.kw << " s" << w.strideH;
    labelTypes(os, w.types);
  }
  static bool cold(const Conv2dWorkload& w) { return w.coldWeights; }
};

template <> struct TemplateOf<DepthwiseWorkload> {
  using ConfigType = DepthwiseConfig;
  static constexpr TemplateKind kind = TemplateKind::Depthwise;
  static constexpr int version = kDepthwiseTemplateVersion;
  static KnobSpace space(const DepthwiseWorkload& w, Isa isa) { return depthwiseKnobSpace(w, isa); }
  static DepthwiseConfig defaults(const DepthwiseWorkload& w, Isa isa, const Target&) {
    return defaultDepthwiseConfig(w, isa);
  }
  static Expected<DepthwiseConfig> fromKnobs(const DepthwiseWorkload& w, Isa isa,
                                             const KnobSpace& s,
                                             const std::vector<nlohmann::json>& v) {
    return depthwiseConfigFromKnobs(w, isa, s, v);
  }
  static Status validate(const DepthwiseWorkload& w, const DepthwiseConfig& c) {
    return validateDepthwiseConfig(w, c);
  }
  static void label(std::ostream& os, const DepthwiseWorkload& w) {
    os << "depthwise " << w.h << "x" << w.w << "x" << w.c << " k" << w.kh << "x" << w.kw << " s"
       << w.strideH;
    labelTypes(os, w.types);
  }
  static bool cold(const DepthwiseWorkload&) { return false; }
};

template <typename W> using Of = TemplateOf<std::decay_t<W>>;

// The workload alternative of a template kind, for parsing.
// Calls f(std::type_identity<W>{}) with the workload type W of template `kind`: the one walk
// from a kind to its types (the parsers and the version use it).
template <size_t I = 0, typename F> auto withWorkloadType(TemplateKind kind, F&& f) {
  using W = std::variant_alternative_t<I, Workload>;
  if constexpr (I + 1 == std::variant_size_v<Workload>) {
    TUNEC_ASSERT(TemplateOf<W>::kind == kind,
                 "template kind " << static_cast<int>(kind) << " has no workload type");
    return f(std::type_identity<W>{});
  } else {
    if (TemplateOf<W>::kind == kind) return f(std::type_identity<W>{});
    return withWorkloadType<I + 1>(kind, std::forward<F>(f));
  }
}

// The kind of a config type.
template <typename C> constexpr TemplateKind kindOfConfig() {
  TemplateKind kind{};
  [&]<size_t... I>(std::index_sequence<I...>) {
    ((std::is_same_v<typename TemplateOf<std::variant_alternative_t<I, Workload>>::ConfigType, C>
          ? (kind = TemplateOf<std::variant_alternative_t<I, Workload>>::kind, 0)
          : 0),
     ...);
  }
  (std::make_index_sequence<std::variant_size_v<Workload>>{});
  return kind;
}

} // namespace

TemplateKind templateKind(const Workload& w) {
  return std::visit([](const auto& x) { return Of<decltype(x)>::kind; }, w);
}

TemplateKind templateKind(const Config& c) {
  return std::visit([](const auto& x) { return kindOfConfig<std::decay_t<decltype(x)>>(); }, c);
}

std::string_view templateName(TemplateKind kind) {
  return spell(kind);
}

std::optional<TemplateKind> parseTemplateName(std::string_view name) {
  return parseSpelling<TemplateKind>(name);
}

int templateVersion(TemplateKind kind) {
  return withWorkloadType(kind,
                          [](auto w) { return TemplateOf<typename decltype(w)::type>::version; });
}

Expected<Workload> parseWorkload(const nlohmann::json& j) {
  gParses.fetch_add(1, std::memory_order_relaxed);
  std::string name, error;
  if (!readField(j, "template", name, error)) return makeError("workload: ", error);
  auto kind = parseTemplateName(name);
  if (!kind)
    return makeError("workload: template '", name, "' is not ", spellingList<TemplateKind>());
  return withWorkloadType(*kind, [&](auto type) -> Expected<Workload> {
    TUNEC_ASSIGN_OR_RETURN(auto w, decltype(type)::type::fromJson(j));
    return Workload(std::move(w));
  });
}

Expected<Config> parseConfig(TemplateKind kind, const nlohmann::json& j) {
  gParses.fetch_add(1, std::memory_order_relaxed);
  return withWorkloadType(kind, [&](auto type) -> Expected<Config> {
    using C = typename TemplateOf<typename decltype(type)::type>::ConfigType;
    TUNEC_ASSIGN_OR_RETURN(C c, C::fromJson(j));
    return Config(std::move(c));
  });
}

nlohmann::json toJson(const Workload& w) {
  return std::visit([](const auto& x) { return x.toJson(); }, w);
}

nlohmann::json toJson(const Config& c) {
  return std::visit([](const auto& x) { return x.toJson(); }, c);
}

uint64_t templateJsonParses() {
  return gParses.load(std::memory_order_relaxed);
}

double workloadFlops(const Workload& w) {
  return std::visit([](const auto& x) { return x.flops(); }, w);
}

int workloadThreads(const Workload& w) {
  return std::visit([](const auto& x) { return x.threads; }, w);
}

KernelTypes workloadTypes(const Workload& w) {
  return std::visit([](const auto& x) { return x.types; }, w);
}

std::string workloadLabel(const Workload& w) {
  return std::visit(
      [](const auto& x) {
        std::ostringstream os;
        Of<decltype(x)>::label(os, x);
        os << " t" << x.threads << (Of<decltype(x)>::cold(x) ? " cold" : "");
        return os.str();
      },
      w);
}

KnobSpace knobSpace(const Workload& w, Isa isa) {
  return std::visit([isa](const auto& x) { return Of<decltype(x)>::space(x, isa); }, w);
}

Config defaultConfig(const Workload& w, Isa isa, const Target& target) {
  return std::visit(
      [&](const auto& x) { return Config(Of<decltype(x)>::defaults(x, isa, target)); }, w);
}

Expected<Config> configFromKnobs(const Workload& w, Isa isa, const KnobSpace& space,
                                 const std::vector<nlohmann::json>& values) {
  return std::visit(
      [&](const auto& x) -> Expected<Config> {
        TUNEC_ASSIGN_OR_RETURN(auto c, Of<decltype(x)>::fromKnobs(x, isa, space, values));
        return Config(std::move(c));
      },
      w);
}

Status validateConfig(const Workload& w, const Config& c) {
  return std::visit(
      [&](const auto& x) -> Status {
        using C = typename Of<decltype(x)>::ConfigType;
        const C* config = std::get_if<C>(&c);
        if (!config)
          return makeError("a ", templateName(templateKind(c)), " config for a ",
                           templateName(Of<decltype(x)>::kind), " workload");
        return Of<decltype(x)>::validate(x, *config);
      },
      w);
}

Isa configIsa(const Config& c) {
  return std::visit([](const auto& x) { return x.isa; }, c);
}

Isa kernelIsa(const Workload& w, Isa vectorIsa, const Target& target) {
  const auto* m = std::get_if<MatmulWorkload>(&w);
  if (m && vectorIsa == Isa::Avx512 && isBf16Gemm(m->types) && m->constantB)
    return bf16GemmIsa(target);
  // The int8 GEMM: AMX's tdpbusd where the target has it, else vpdpbusd on AVX512-VNNI, else
  // vpmaddubsw on AVX2 (also on an AVX-512 target without VNNI). An int8 or bf16 convolution
  // runs on AMX where the target has it and its channels fill whole tile rows (amxRunsConv2d),
  // else on the vector ISAs; an int8 depthwise conv on vpdpbusd's row quads or, on AVX2, in
  // exact f32 sums.
  const auto* conv = std::get_if<Conv2dWorkload>(&w);
  const auto* depthwise = std::get_if<DepthwiseWorkload>(&w);
  const bool int8 = (m && isInt8Gemm(m->types)) || (conv && isInt8Gemm(conv->types)) ||
                    (depthwise && isInt8Gemm(depthwise->types));
  const bool amx = targetSupports(target, Isa::Amx);
  if (m && int8 && amx) return Isa::Amx;
  // A bf16 matmul of a computed B is one of the fused attention's (which packs K and V per head
  // itself): on AMX where the target has it.
  if (m && amx && vectorIsa != Isa::Avx2 && isBf16Gemm(m->types) && !m->constantB) return Isa::Amx;
  if (conv && amx && vectorIsa != Isa::Avx2 && amxRunsConv2d(*conv)) return Isa::Amx;
  if (int8 && vectorIsa == Isa::Avx512 && !target.avx512vnni) return Isa::Avx2;
  if (int8 && vectorIsa == Isa::Amx) return Isa::Avx512;
  return vectorIsa;
}

bool bf16Pays(const Workload& w, const Target& target) {
  return vectorBf16Pays(target) || kernelIsa(w, widestIsa(target), target) == Isa::Amx;
}

} // namespace tunec
