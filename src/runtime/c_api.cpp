// The C API of include/tunec/runtime.h: model.so is dlopen'ed, its blob parsed and checked, its
// kernel table bound to a ModelExecutor.
#include "runtime/artifact_file.h"
#include "runtime/generator.h"
#include "runtime/model_executor.h"
#include "runtime/tile_permission.h"
#include "support/host.h"
#include "tunec/runtime.h"

#include <dlfcn.h>
#include <memory>
#include <string>
#include <utility>
#include <vector>

struct tunec_model {
  std::unique_ptr<tunec::rt::ModelExecutor> executor;
  std::string features; ///< the features the code requires, as tunec_model_isa returns them
  /// Per input and output, per dimension: "" or its extent's name (tunec_model_dim_name).
  std::vector<std::vector<std::string>> inputDimNames, outputDimNames;
};

struct tunec_generator {
  std::unique_ptr<tunec::rt::Generator> generator;
};

namespace {

thread_local std::string lastError;

int fail(const std::string& message) {
  lastError = message;
  return 1;
}

void fillInfo(const tunec::rt::IoSpec& io, tunec_tensor_info* info) {
  info->name = io.name.c_str();
  info->dtype = tunec::dtypeName(io.dtype).data(); // a string literal: NUL-terminated
  info->rank = static_cast<int32_t>(io.shape.size());
  info->dims = io.shape.data();
  info->bytes = io.bytes;
}

// A step's operation count `field` for the profiling entry point `entry`.
int stepOperations(const tunec_model* model, int32_t step, double* out, const char* entry,
                   double tunec::rt::Step::*field) {
  if (!model || !out) return fail(std::string(entry) + ": null argument");
  const auto& steps = model->executor->plan().steps;
  if (step < 0 || step >= static_cast<int32_t>(steps.size()))
    return fail(std::string(entry) + ": step " + std::to_string(step) + " out of range (" +
                std::to_string(steps.size()) + " steps)");
  *out = steps[static_cast<size_t>(step)].*field;
  return 0;
}

} // namespace

extern "C" {

const char* tunec_last_error(void) {
  return lastError.c_str();
}

int tunec_model_load(const char* path, int32_t threads, tunec_model** model) {
  if (!path || !model) return fail("tunec_model_load: path and model must not be null");
  *model = nullptr;
  // dlopen searches the library path for a name without a slash; a user who names a file in
  // the current directory means that file.
  std::string file = std::string(path).find('/') == std::string::npos ? "./" + std::string(path)
                                                                      : std::string(path);
  // Before dlopen: a truncated or edited file would fault inside the dynamic loader.
  if (tunec::Status s = tunec::rt::checkArtifactFile(path); !s) return fail(s.error().message());
  // The model's code calls this library (tunec_parallel_for, ...) by name: its symbols must be
  // global, also when the host loaded it with RTLD_LOCAL (a Python extension module does).
  static const bool runtimeGlobal = [] {
    Dl_info self;
    return dladdr(reinterpret_cast<void*>(&tunec_model_load), &self) && self.dli_fname &&
           dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL) != nullptr;
  }();
  (void)runtimeGlobal;
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return fail(std::string(path) + ": cannot load: " + dlerror());
  std::shared_ptr<void> keep(handle, [](void* h) { dlclose(h); });
  auto* blob = static_cast<const uint8_t*>(dlsym(handle, "tunec_model_blob"));
  auto* size = static_cast<const int64_t*>(dlsym(handle, "tunec_model_blob_size"));
  auto* table = static_cast<void* const*>(dlsym(handle, "tunec_model_kernels"));
  auto* count = static_cast<const int64_t*>(dlsym(handle, "tunec_model_kernel_count"));
  if (!blob || !size || !table || !count)
    return fail(std::string(path) + ": not a tunec model (no model blob); compile one with " +
                "`tunec compile MODEL.onnx -o model.so`");
  auto parsed = tunec::rt::parseModel(blob, *size);
  if (!parsed) return fail(std::string(path) + ": " + parsed.error().message());
  const tunec::CpuFeatures& required = parsed->plan.requiredFeatures;
  if (tunec::CpuFeatures missing = required.missingFrom(tunec::hostTarget().features());
      !missing.empty())
    return fail(std::string(path) + ": compiled for a CPU with " + required.text() +
                "; this CPU lacks " + missing.text() +
                "; compile the model on (or for) this machine");
  if (required.has(tunec::CpuFeature::amx))
    if (tunec::Status s = tunec::requestAmxPermission(); !s)
      return fail(std::string(path) + ": " + s.error().message());
  std::vector<void*> kernels(table, table + *count);
  auto executor =
      tunec::rt::ModelExecutor::create(std::move(*parsed), std::move(kernels), threads, keep);
  if (!executor) return fail(std::string(path) + ": " + executor.error().message());
  *model = new tunec_model{std::move(*executor), required.text(), {}, {}};
  const tunec::rt::ModelPlan& plan = (*model)->executor->plan();
  for (const auto& [ios, names] : {std::pair{&plan.inputs, &(*model)->inputDimNames},
                                   std::pair{&plan.outputs, &(*model)->outputDimNames}})
    for (const tunec::rt::IoSpec& io : *ios) {
      names->emplace_back(io.shape.size());
      for (size_t d = 0; d < io.dimExtents.size(); ++d)
        if (io.dimExtents[d] >= 0) names->back()[d] = tunec::rt::extentName(plan, io.dimExtents[d]);
    }
  return 0;
}

int32_t tunec_model_num_inputs(const tunec_model* model) {
  return static_cast<int32_t>(model->executor->plan().inputs.size());
}

int32_t tunec_model_num_outputs(const tunec_model* model) {
  return static_cast<int32_t>(model->executor->plan().outputs.size());
}

int tunec_model_input_info(const tunec_model* model, int32_t index, tunec_tensor_info* info) {
  const auto& ios = model->executor->plan().inputs;
  if (index < 0 || index >= static_cast<int32_t>(ios.size()))
    return fail("input index " + std::to_string(index) + " is out of range (the model has " +
                std::to_string(ios.size()) + ")");
  fillInfo(ios[static_cast<size_t>(index)], info);
  return 0;
}

int tunec_model_output_info(const tunec_model* model, int32_t index, tunec_tensor_info* info) {
  const auto& ios = model->executor->plan().outputs;
  if (index < 0 || index >= static_cast<int32_t>(ios.size()))
    return fail("output index " + std::to_string(index) + " is out of range (the model has " +
                std::to_string(ios.size()) + ")");
  fillInfo(ios[static_cast<size_t>(index)], info);
  return 0;
}

int tunec_model_run(tunec_model* model, const void* const* inputs, void* const* outputs) {
  if (!model || !inputs || !outputs) return fail("tunec_model_run: null argument");
  tunec::Status status = model->executor->run(inputs, outputs);
  if (!status) return fail(status.error().message());
  return 0;
}

int32_t tunec_model_num_symbols(const tunec_model* model) {
  return static_cast<int32_t>(model->executor->plan().symbols.size());
}

int tunec_model_symbol_info(const tunec_model* model, int32_t index, const char** name,
                            int64_t* min, int64_t* max) {
  if (!model || !name || !min || !max) return fail("tunec_model_symbol_info: null argument");
  const auto& symbols = model->executor->plan().symbols;
  if (index < 0 || index >= static_cast<int32_t>(symbols.size()))
    return fail("tunec_model_symbol_info: symbol " + std::to_string(index) + " out of range (" +
                std::to_string(symbols.size()) + " symbols)");
  const auto& s = symbols[static_cast<size_t>(index)];
  *name = s.name.c_str();
  *min = s.min;
  *max = s.max;
  return 0;
}

const char* tunec_model_dim_name(const tunec_model* model, int32_t is_output, int32_t index,
                                 int32_t dim) {
  if (!model) return nullptr;
  const auto& plan = model->executor->plan();
  const auto& ios = is_output ? plan.outputs : plan.inputs;
  if (index < 0 || index >= static_cast<int32_t>(ios.size())) return nullptr;
  const auto& io = ios[static_cast<size_t>(index)];
  if (dim < 0 || dim >= static_cast<int32_t>(io.shape.size())) return nullptr;
  const auto& names =
      (is_output ? model->outputDimNames : model->inputDimNames)[static_cast<size_t>(index)];
  return names[static_cast<size_t>(dim)].c_str();
}

namespace {

// The run's input shapes from the caller's arrays (input i's dims, as many as its rank).
tunec::Expected<std::vector<std::vector<int64_t>>>
inputShapes(const tunec_model* model, const int64_t* const* input_dims, const char* what) {
  const auto& inputs = model->executor->plan().inputs;
  std::vector<std::vector<int64_t>> shapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!input_dims[i]) return tunec::makeError(what, ": no dims for input ", i);
    shapes.emplace_back(input_dims[i], input_dims[i] + inputs[i].shape.size());
  }
  return shapes;
}

int runShaped(const char* what, tunec_model* model, const void* const* inputs,
              const int64_t* const* input_dims, void* const* outputs, int64_t* const* output_dims,
              double* step_seconds, bool cached = false) {
  if (!model || !inputs || !outputs || !input_dims)
    return fail(std::string(what) + ": null argument");
  auto shapes = inputShapes(model, input_dims, what);
  if (!shapes) return fail(shapes.error().message());
  std::vector<double> seconds;
  std::vector<std::vector<int64_t>> outShapes;
  tunec::Status status = model->executor->runShaped(inputs, *shapes, outputs, &outShapes,
                                                    step_seconds ? &seconds : nullptr, cached);
  if (!status) return fail(status.error().message());
  for (size_t i = 0; step_seconds && i < seconds.size(); ++i) step_seconds[i] += seconds[i];
  for (size_t o = 0; output_dims && o < outShapes.size(); ++o)
    if (output_dims[o]) std::copy(outShapes[o].begin(), outShapes[o].end(), output_dims[o]);
  return 0;
}

} // namespace

int tunec_model_run_shaped(tunec_model* model, const void* const* inputs,
                           const int64_t* const* input_dims, void* const* outputs,
                           int64_t* const* output_dims) {
  return runShaped("tunec_model_run_shaped", model, inputs, input_dims, outputs, output_dims,
                   nullptr);
}

int tunec_model_run_shaped_profiled(tunec_model* model, const void* const* inputs,
                                    const int64_t* const* input_dims, void* const* outputs,
                                    int64_t* const* output_dims, double* step_seconds) {
  if (!step_seconds) return fail("tunec_model_run_shaped_profiled: null argument");
  return runShaped("tunec_model_run_shaped_profiled", model, inputs, input_dims, outputs,
                   output_dims, step_seconds);
}

int tunec_model_run_cached(tunec_model* model, const void* const* inputs,
                           const int64_t* const* input_dims, void* const* outputs,
                           int64_t* const* output_dims) {
  return runShaped("tunec_model_run_cached", model, inputs, input_dims, outputs, output_dims,
                   nullptr, true);
}

int32_t tunec_model_num_caches(const tunec_model* model) {
  return model ? static_cast<int32_t>(model->executor->plan().caches.size()) : 0;
}

int tunec_model_cache_info(const tunec_model* model, int32_t index, tunec_cache_info* info) {
  if (!model || !info) return fail("tunec_model_cache_info: null argument");
  const auto& caches = model->executor->plan().caches;
  if (index < 0 || index >= static_cast<int32_t>(caches.size()))
    return fail("tunec_model_cache_info: cache " + std::to_string(index) + " out of range (" +
                std::to_string(caches.size()) + " caches)");
  const tunec::rt::KvCache& c = caches[static_cast<size_t>(index)];
  info->input = c.input;
  info->output = c.output;
  info->axis = c.axis;
  info->capacity = c.capacity;
  info->bytes = c.bytes;
  return 0;
}

void tunec_model_free(tunec_model* model) {
  delete model;
}

int tunec_generator_create(tunec_model* model, tunec_generator** generator) {
  if (!model || !generator) return fail("tunec_generator_create: null argument");
  *generator = nullptr;
  const auto& plan = model->executor->plan();
  tunec::rt::GenerationModel g;
  g.inputs = plan.inputs;
  g.outputs = plan.outputs;
  g.inputDimNames = model->inputDimNames;
  g.caches = plan.caches;
  g.run = [model](const void* const* in, const std::vector<std::vector<int64_t>>& shapes,
                  void* const* out, std::vector<std::vector<int64_t>>& outShapes, bool cached) {
    return model->executor->runShaped(in, shapes, out, &outShapes, nullptr, cached);
  };
  auto created = tunec::rt::Generator::create(std::move(g));
  if (!created) return fail("tunec_generator_create: " + created.error().message());
  *generator = new tunec_generator{std::move(*created)};
  return 0;
}

int tunec_generator_append(tunec_generator* generator, const int64_t* ids, int64_t count,
                           const float** logits) {
  if (!generator || !ids || !logits) return fail("tunec_generator_append: null argument");
  auto last = generator->generator->append(ids, count);
  if (!last) return fail(last.error().message());
  *logits = *last;
  return 0;
}

int64_t tunec_generator_length(const tunec_generator* generator) {
  return generator ? generator->generator->length() : 0;
}

int64_t tunec_generator_capacity(const tunec_generator* generator) {
  return generator ? generator->generator->capacity() : 0;
}

int64_t tunec_generator_vocab(const tunec_generator* generator) {
  return generator ? generator->generator->vocab() : 0;
}

int32_t tunec_generator_in_place(const tunec_generator* generator) {
  return generator && generator->generator->inPlace() ? 1 : 0;
}

void tunec_generator_reset(tunec_generator* generator) {
  if (generator) generator->generator->reset();
}

void tunec_generator_free(tunec_generator* generator) {
  delete generator;
}

int32_t tunec_model_num_steps(const tunec_model* model) {
  return static_cast<int32_t>(model->executor->plan().steps.size());
}

const char* tunec_model_step_label(const tunec_model* model, int32_t step) {
  const auto& steps = model->executor->plan().steps;
  if (step < 0 || step >= static_cast<int32_t>(steps.size())) return "";
  return steps[static_cast<size_t>(step)].label.c_str();
}

int tunec_model_step_cost(const tunec_model* model, int32_t step, double* flops, int64_t* bytes,
                          int32_t* generated) {
  if (!model || !flops || !bytes || !generated) return fail("tunec_model_step_cost: null argument");
  const auto& steps = model->executor->plan().steps;
  if (step < 0 || step >= static_cast<int32_t>(steps.size()))
    return fail("tunec_model_step_cost: step " + std::to_string(step) + " out of range (" +
                std::to_string(steps.size()) + " steps)");
  const tunec::rt::Step& s = steps[static_cast<size_t>(step)];
  *flops = s.flops;
  *bytes = s.bytes;
  *generated = s.kind == tunec::rt::StepKind::Kernel;
  return 0;
}

int32_t tunec_model_step_kind(const tunec_model* model, int32_t step) {
  if (!model) return -1;
  const auto& steps = model->executor->plan().steps;
  if (step < 0 || step >= static_cast<int32_t>(steps.size())) return -1;
  return static_cast<int32_t>(steps[static_cast<size_t>(step)].kind);
}

int tunec_model_step_costs_at(const tunec_model* model, const int64_t* const* input_dims,
                              double* flops, int64_t* bytes, double* bf16_flops, double* int8_ops) {
  if (!model || !input_dims || !flops || !bytes || !bf16_flops || !int8_ops)
    return fail("tunec_model_step_costs_at: null argument");
  const auto& plan = model->executor->plan();
  auto shapes = inputShapes(model, input_dims, "tunec_model_step_costs_at");
  if (!shapes) return fail(shapes.error().message());
  auto run = tunec::rt::bindRunExtents(plan, *shapes);
  if (!run) return fail(run.error().message());
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    tunec::rt::StepCost c = tunec::rt::stepCostAt(plan.steps[s], *run);
    flops[s] = c.flops;
    bytes[s] = c.bytes;
    bf16_flops[s] = c.bf16Flops;
    int8_ops[s] = c.int8Ops;
  }
  return 0;
}

int tunec_model_step_bf16_flops(const tunec_model* model, int32_t step, double* flops) {
  return stepOperations(model, step, flops, "tunec_model_step_bf16_flops",
                        &tunec::rt::Step::bf16Flops);
}

int tunec_model_step_int8_ops(const tunec_model* model, int32_t step, double* ops) {
  return stepOperations(model, step, ops, "tunec_model_step_int8_ops", &tunec::rt::Step::int8Ops);
}

const char* tunec_model_isa(const tunec_model* model) {
  return model ? model->features.c_str() : "";
}

int tunec_model_run_profiled(tunec_model* model, const void* const* inputs, void* const* outputs,
                             double* step_seconds) {
  if (!model || !inputs || !outputs || !step_seconds)
    return fail("tunec_model_run_profiled: null argument");
  std::vector<double> seconds;
  tunec::Status status = model->executor->run(inputs, outputs, &seconds);
  if (!status) return fail(status.error().message());
  for (size_t i = 0; i < seconds.size(); ++i) step_seconds[i] += seconds[i];
  return 0;
}

} // extern "C"
