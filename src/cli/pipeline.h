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
/// after each pass (for --print-after-all).
Expected<Graph>
runGraphPipeline(Graph graph,
                 const std::function<void(const std::string&, const Graph&, bool)>& afterPass);

} // namespace tunec::cli
