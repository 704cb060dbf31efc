// Tasks for the matmul, conv2d and depthwise templates.
#include "tuner/task.h"

#include "templates/conv2d_template.h"
#include "templates/depthwise_template.h"
#include "templates/matmul_template.h"
#include "tuning_db/keys.h"

#include <sstream>

namespace tunec::tuner {

namespace {

template <typename W, typename C>
void bindConfig(Task& t, std::shared_ptr<W> w, Status (*validate)(const W&, const C&)) {
  t.validate = [w, validate](const nlohmann::json& j) -> Status {
    TUNEC_ASSIGN_OR_RETURN(C c, C::fromJson(j));
    return validate(*w, c);
  };
}

} // namespace

Expected<Task> makeTask(const nlohmann::json& workload, const Target& target) {
  Isa isa = widestIsa(target);
  Task t;
  t.templ = workload.value("template", std::string());
  t.workload = workload;
  t.key = db::workloadKey(workload);
  t.isa = isa;
  std::ostringstream label;
  if (t.templ == "matmul") {
    TUNEC_ASSIGN_OR_RETURN(MatmulWorkload w, MatmulWorkload::fromJson(workload));
    auto pw = std::make_shared<MatmulWorkload>(w);
    t.templateVersion = kMatmulTemplateVersion;
    t.flops = w.flops();
    t.threads = w.threads;
    t.space = matmulKnobSpace(w, isa);
    t.defaultConfig = defaultMatmulConfig(w, isa, target).toJson();
    t.fromKnobs = [pw, isa](const std::vector<nlohmann::json>& v) -> Expected<nlohmann::json> {
      TUNEC_ASSIGN_OR_RETURN(MatmulConfig c, matmulConfigFromKnobs(*pw, isa, v));
      return c.toJson();
    };
    bindConfig<MatmulWorkload, MatmulConfig>(t, pw, validateMatmulConfig);
    label << "matmul " << (w.batch > 1 ? std::to_string(w.batch) + "x" : "") << w.m << "x" << w.n
          << "x" << w.k << (w.dense() ? "" : " strided");
  } else if (t.templ == "conv2d") {
    TUNEC_ASSIGN_OR_RETURN(Conv2dWorkload w, Conv2dWorkload::fromJson(workload));
    auto pw = std::make_shared<Conv2dWorkload>(w);
    t.templateVersion = kConv2dTemplateVersion;
    t.flops = w.flops();
    t.threads = w.threads;
    t.space = conv2dKnobSpace(w, isa);
    t.defaultConfig = defaultConv2dConfig(w, isa, target).toJson();
    t.fromKnobs = [pw, isa](const std::vector<nlohmann::json>& v) -> Expected<nlohmann::json> {
      TUNEC_ASSIGN_OR_RETURN(Conv2dConfig c, conv2dConfigFromKnobs(*pw, isa, v));
      return c.toJson();
    };
    bindConfig<Conv2dWorkload, Conv2dConfig>(t, pw, validateConv2dConfig);
    label << "conv2d " << w.h << "x" << w.w << "x" << w.ic << "->" << w.oc << " k" << w.kh << "x"
          << w.kw << " s" << w.strideH;
  } else if (t.templ == "depthwise") {
    TUNEC_ASSIGN_OR_RETURN(DepthwiseWorkload w, DepthwiseWorkload::fromJson(workload));
    auto pw = std::make_shared<DepthwiseWorkload>(w);
    t.templateVersion = kDepthwiseTemplateVersion;
    t.flops = w.flops();
    t.threads = w.threads;
    t.space = depthwiseKnobSpace(w, isa);
    t.defaultConfig = defaultDepthwiseConfig(w, isa).toJson();
    KnobSpace space = t.space;
    t.fromKnobs = [space, isa](const std::vector<nlohmann::json>& v) -> Expected<nlohmann::json> {
      if (v.size() != space.size())
        return makeError("depthwise config needs ", space.size(), " knob values");
      nlohmann::json j = {{"isa", isaInfo(isa).name}};
      for (size_t i = 0; i < v.size(); ++i) j[space[i].name] = v[i];
      TUNEC_ASSIGN_OR_RETURN(DepthwiseConfig c, DepthwiseConfig::fromJson(j));
      return c.toJson();
    };
    bindConfig<DepthwiseWorkload, DepthwiseConfig>(t, pw, validateDepthwiseConfig);
    label << "depthwise " << w.h << "x" << w.w << "x" << w.c << " k" << w.kh << "x" << w.kw << " s"
          << w.strideH;
  } else {
    return makeError("no tuning task for template '", t.templ, "'");
  }
  label << " t" << t.threads << (workload.value("cold_weights", false) ? " cold" : "");
  t.label = label.str();
  return t;
}

} // namespace tunec::tuner
