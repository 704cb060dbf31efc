// `tunec inspect` and `tunec ops`: print a model's graph, and the supported op set.
#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/load_model.h"
#include "cli/model_session.h"
#include "cli/pipeline.h"
#include "cli/target_flag.h"
#include "driver/compile_model.h"
#include "frontend/onnx_ops.h"
#include "ir/op_registry.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/fusion_plan.h"
#include "passes/memory_plan.h"
#include "passes/passes.h"
#include "support/terminal_text.h"

#include <cstdio>
#include <map>

namespace tunec::cli {

namespace {

const CommandSpec kInspectSpec{
    "inspect",
    "tunec inspect MODEL.onnx [flags]",
    "Prints the imported graph (typed attributes, static shapes), then op counts and FLOPs.",
    {
        {"input-shape", "NAME=SHAPE", "static shape for a dynamic input, e.g. x=1x3x224x224", true},
        {"dim", "NAME=MIN..MAX", kDimFlagHelp, true},
        precisionFlag(),
        {"summary", "", "print only the summary, not the graph"},
        {"print-after-all", "",
         "run the graph passes and print the graph after each one that changes it"},
        {"memory", "", "print the arena plan: peak, sum of intermediates, live-set lower bound"},
        {"layouts", "",
         "run the graph passes and print the layouts compile gives: NHWC tensors and reorders"},
        {"fusion", "",
         "run the graph passes and print the steps compile builds: each fused kernel, its "
         "anchor's template and epilogue, its steps, and why boundaries were not fused"},
    },
    1,
    1};

const CommandSpec kOpsSpec{"ops",
                           "tunec ops [--markdown]",
                           "Lists the ONNX ops tunec imports, with their DNNFusion mapping type.",
                           {{"markdown", "", "print a Markdown table (docs/ops.md)"}},
                           0,
                           0};

// The steps of the compile outline grouped by the fusion-plan kernel they lower, then the reasons
// of the boundaries.
void printFusion(const Graph& graph, const driver::CompileOutline& o, bool detailed,
                 const std::vector<std::pair<std::string, std::string>>& quantizedKeptFloat) {
  const passes::FusionPlan& plan = o.fusion;
  int anchored = 0;
  for (const auto& k : plan.kernels) anchored += k.anchor >= 0;
  std::printf("fusion: %zu nodes -> %zu kernels (%d anchored); the steps compile builds:\n  %s\n",
              graph.nodes().size(), plan.kernels.size(), anchored,
              driver::stepsSummary(o.stats).c_str());
  // The int8 kernels (each step's label says "in int8"); the quantized layers that stay fp32,
  // and why (what the compile report counts).
  if (o.stats.int8Kernels)
    std::printf("  %lld kernels run in int8 (u8 activations, s8 weights)\n",
                static_cast<long long>(o.stats.int8Kernels));
  for (const auto& [layer, why] : quantizedKeptFloat)
    std::printf("  quantized layer in fp32: %s: %s\n", forTerminal(layer).c_str(), why.c_str());
  if (!detailed) return;
  // Steps come in kernel order; a kernel whose nodes are all views or read in place has none.
  std::vector<std::vector<size_t>> stepsOf(plan.kernels.size() + 1);
  for (size_t i = 0; i < o.steps.size(); ++i) {
    int k = o.steps[i].kernel;
    stepsOf[k < 0 ? plan.kernels.size() : static_cast<size_t>(k)].push_back(i);
  }
  auto printSteps = [&](const std::vector<size_t>& steps) {
    for (size_t i : steps)
      std::printf("    step %zu %s %s\n", i, o.steps[i].generated ? "generated" : "loop     ",
                  forTerminal(o.steps[i].label).c_str());
    if (steps.empty())
      std::printf(
          "    no step (views, parts of a Concat written in place or with it, or transposes a "
          "matmul reads in place)\n");
  };
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    const passes::FusedKernel& kernel = plan.kernels[k];
    std::string what =
        kernel.anchor >= 0 ? std::string(templateName(kernel.templ)) + " anchor" : "loop";
    std::printf("  kernel %zu (%s):", k, what.c_str());
    for (NodeId n : kernel.nodes)
      std::printf(" %s", std::string(opName(graph.node(n).kind)).c_str());
    if (kernel.prologue >= 0)
      std::printf(" (prologue: %s)", std::string(opName(graph.node(kernel.prologue).kind)).c_str());
    if (kernel.dequantizedAddend >= 0) std::printf(" (its addend's DequantizeLinear, read as u8)");
    std::printf("\n");
    printSteps(stepsOf[k]);
  }
  if (!stepsOf.back().empty()) {
    std::printf("  model outputs:\n");
    printSteps(stepsOf.back());
  }
  for (const auto& b : plan.boundaries)
    std::printf("  not fused: %s (%s) -> %s (%s): %s\n", graph.node(b.producer).name.c_str(),
                std::string(opName(graph.node(b.producer).kind)).c_str(),
                graph.node(b.consumer).name.c_str(),
                std::string(opName(graph.node(b.consumer).kind)).c_str(), b.reason.c_str());
}

} // namespace

int commandInspect(const std::vector<std::string>& argv) {
  auto args = Arguments::parse(kInspectSpec, argv);
  if (!args) return fail(args.error().message());
  if (args->helpRequested()) {
    std::fputs(helpText(kInspectSpec).c_str(), stdout);
    return 0;
  }
  auto shapes = parseInputDims(args->getAll("input-shape"), args->getAll("dim"));
  if (!shapes) return fail(shapes.error().message());
  auto graph = loadModel(args->positionals()[0], *shapes);
  if (!graph) return fail(graph.error().message());
  if (Status s = verifyGraph(*graph); !s)
    return fail("internal: imported graph fails verification: " + s.error().message());
  if (!args->has("summary")) std::fputs(forTerminal(printGraph(*graph)).c_str(), stdout);
  bool outline = args->has("fusion") || args->has("layouts");
  // --fusion names the quantized layers left fp32 (the pipeline reads them off the graph
  // lower-quantized-layers is given).
  std::vector<std::pair<std::string, std::string>> keptFloat;
  if (args->has("print-after-all") || outline) {
    std::function<void(const std::string&, const Graph&, bool)> print;
    if (args->has("print-after-all"))
      print = [](const std::string& pass, const Graph& g, bool changed) {
        std::printf("// after %s%s\n", pass.c_str(), changed ? "" : " (unchanged)");
        if (changed) std::fputs(forTerminal(printGraph(g)).c_str(), stdout);
      };
    auto optimized = runGraphPipeline(std::move(*graph), print, &keptFloat);
    if (!optimized) return fail(optimized.error().message());
    graph = std::move(optimized);
  }
  std::map<std::string, int> counts;
  int64_t flops = 0;
  for (const Node& node : graph->nodes()) {
    ++counts[std::string(opName(node.kind))];
    flops += opInfo(node.kind).flops(node, *graph);
  }
  std::printf("%zu nodes, %.3f GFLOP\n", graph->nodes().size(), static_cast<double>(flops) / 1e9);
  for (const auto& [op, n] : counts) std::printf("  %-24s %d\n", op.c_str(), n);
  if (outline) {
    // What compile builds for this machine, without generating code.
    driver::CompileOptions options;
    options.target = thisMachine();
    options.isa = widestIsa(options.target);
    auto precision = precisionFromArgs(*args);
    if (!precision) return fail(precision.error().message());
    options.precision = *precision;
    auto o = driver::outlineCompile(*graph, options);
    if (!o) return fail(o.error().message());
    if (args->has("fusion")) printFusion(*graph, *o, !args->has("summary"), keptFloat);
    if (args->has("layouts")) {
      std::printf("layouts: %lld NHWC tensors, %zu reorders\n",
                  static_cast<long long>(o->nhwcTensors), o->reorders.size());
      for (const auto& r : o->reorders)
        std::printf("  reorder %s to %s for %s\n", forTerminal(r.value).c_str(),
                    r.toNhwc ? "NHWC" : "plain", forTerminal(r.consumer).c_str());
    }
  }
  if (args->has("memory")) {
    passes::MemoryPlan plan = passes::planMemory(*graph);
    auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); };
    std::printf(
        "arena: %lld tensors, peak %.2f MiB, sum of intermediates %.2f MiB, lower bound %.2f MiB "
        "(peak / bound %.3f)\n",
        static_cast<long long>(plan.tensors), mib(plan.peakBytes), mib(plan.totalBytes),
        mib(plan.lowerBoundBytes),
        plan.lowerBoundBytes
            ? static_cast<double>(plan.peakBytes) / static_cast<double>(plan.lowerBoundBytes)
            : 1.0);
  }
  return 0;
}

int commandOps(const std::vector<std::string>& argv) {
  auto args = Arguments::parse(kOpsSpec, argv);
  if (!args) return fail(args.error().message());
  if (args->helpRequested()) {
    std::fputs(helpText(kOpsSpec).c_str(), stdout);
    return 0;
  }
  bool md = args->has("markdown");
  if (md) std::puts("| ONNX op | tunec op | mapping type |\n| --- | --- | --- |");
  for (const std::string& name : onnx_import::supportedOnnxOps()) {
    auto kind = findOp(name);
    auto expansion = onnx_import::onnxOpExpansion(name);
    std::string mapping = kind        ? std::string(mappingTypeName(opInfo(*kind).mapping))
                          : expansion ? "rewritten at import"
                                      : "folded at import";
    std::string target = kind ? name : expansion ? std::string(*expansion) : "constant";
    if (md)
      std::printf("| %s | %s | %s |\n", name.c_str(), target.c_str(), mapping.c_str());
    else
      std::printf("%-24s %s\n", name.c_str(), mapping.c_str());
  }
  return 0;
}

} // namespace tunec::cli
