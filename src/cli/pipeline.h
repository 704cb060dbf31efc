// The one list of graph passes, in order (STYLE.md: the pipeline is one readable list).
#pragma once

#include "ir/graph.h"

#include <functional>
#include <string>
#include <vector>

namespace tunec::cli {

struct PassEntry {
  const char* name;
  Expected<Graph> (*run)(const Graph&);
};

/// The graph passes in pipeline order.
const std::vector<PassEntry>& graphPipeline();

/// Runs the pipeline, verifying after every pass; `afterPass(name, graph, changed)` is called
/// after each pass (for --print-after-all). When `keptFloat` is given, it receives the quantized
/// layers lower-quantized-layers leaves in fp32, each with why (for the compile report): read off
/// the graph that pass is given, after the rewrites before it have folded fake-quantized weights
/// and carried quantization through pools.
Expected<Graph>
runGraphPipeline(Graph graph,
                 const std::function<void(const std::string&, const Graph&, bool)>& afterPass,
                 std::vector<std::pair<std::string, std::string>>* keptFloat = nullptr);

} // namespace tunec::cli
