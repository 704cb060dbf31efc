// `tunec inspect` and `tunec ops`: print a model's graph, and the supported op set.
#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/load_model.h"
#include "cli/pipeline.h"
#include "frontend/onnx_ops.h"
#include "ir/op_registry.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/fusion_plan.h"
#include "passes/layout_plan.h"
#include "passes/memory_plan.h"

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
        {"summary", "", "print only the summary, not the graph"},
        {"print-after-all", "",
         "run the graph passes and print the graph after each one that changes it"},
        {"memory", "", "print the arena plan: peak, sum of intermediates, live-set lower bound"},
        {"layouts", "", "print the layout plan: NHWC activations and the reorders it needs"},
        {"fusion", "",
         "print the fusion plan: each kernel, its anchor and post-ops, and why boundaries were not "
         "fused"},
    },
    1,
    1};

const CommandSpec kOpsSpec{"ops",
                           "tunec ops [--markdown]",
                           "Lists the ONNX ops tunec imports, with their DNNFusion mapping type.",
                           {{"markdown", "", "print a Markdown table (docs/ops.md)"}},
                           0,
                           0};

} // namespace

int commandInspect(const std::vector<std::string>& argv) {
  auto args = Arguments::parse(kInspectSpec, argv);
  if (!args) return fail(args.error().message());
  if (args->helpRequested()) {
    std::fputs(helpText(kInspectSpec).c_str(), stdout);
    return 0;
  }
  auto shapes = parseInputShapes(args->getAll("input-shape"));
  if (!shapes) return fail(shapes.error().message());
  auto graph = loadModel(args->positionals()[0], *shapes);
  if (!graph) return fail(graph.error().message());
  if (Status s = verifyGraph(*graph); !s)
    return fail("internal: imported graph fails verification: " + s.error().message());
  if (!args->has("summary")) std::fputs(printGraph(*graph).c_str(), stdout);
  if (args->has("print-after-all")) {
    auto optimized = runGraphPipeline(
        std::move(*graph), [](const std::string& pass, const Graph& g, bool changed) {
          std::printf("// after %s%s\n", pass.c_str(), changed ? "" : " (unchanged)");
          if (changed) std::fputs(printGraph(g).c_str(), stdout);
        });
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
  if (args->has("fusion")) {
    passes::FusionPlan plan = passes::planFusion(*graph);
    int anchored = 0;
    for (const auto& k : plan.kernels) anchored += k.anchor >= 0;
    std::printf(
        "fusion: %zu nodes -> %zu kernels (%d anchored, %zu loop kernels), %.2f nodes per kernel\n",
        graph->nodes().size(), plan.kernels.size(), anchored,
        plan.kernels.size() - static_cast<size_t>(anchored),
        static_cast<double>(graph->nodes().size()) /
            static_cast<double>(std::max<size_t>(1, plan.kernels.size())));
    if (!args->has("summary")) {
      for (size_t k = 0; k < plan.kernels.size(); ++k) {
        const auto& kernel = plan.kernels[k];
        std::printf("  kernel %zu (%s):", k, kernel.anchor >= 0 ? "anchor" : "loop");
        for (NodeId n : kernel.nodes)
          std::printf(" %s", std::string(opName(graph->node(n).kind)).c_str());
        std::printf("\n");
      }
      for (const auto& b : plan.boundaries)
        std::printf("  not fused: %s (%s) -> %s (%s): %s\n", graph->node(b.producer).name.c_str(),
                    std::string(opName(graph->node(b.producer).kind)).c_str(),
                    graph->node(b.consumer).name.c_str(),
                    std::string(opName(graph->node(b.consumer).kind)).c_str(), b.reason.c_str());
    }
  }
  if (args->has("layouts")) {
    passes::LayoutPlan plan = passes::planLayouts(*graph);
    int nhwc = 0;
    for (const Layout& l : plan.layouts) nhwc += !l.isPlain();
    std::printf("layouts: %d NHWC tensors, %zu reorders\n", nhwc, plan.reorders.size());
    for (const auto& r : plan.reorders)
      std::printf("  reorder %s to %s for %s\n", graph->value(r.value).name.c_str(),
                  r.to.toString(4).c_str(),
                  r.consumer >= 0 ? ("'" + graph->node(r.consumer).name + "'").c_str()
                                  : "the model output");
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
