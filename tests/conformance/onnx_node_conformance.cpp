// Runs the ONNX backend node tests (Debian's libonnx-testdata) through tunec's importer and
// reference executor; prints passed/failed/skipped counts with skip reasons grouped by op.
#include "driver/compile_model.h"
#include "frontend/onnx_importer.h"
#include "frontend/tensor_io.h"
#include "reference/reference.h"
#include "support/host.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <onnx/onnx_pb.h>
#include <set>
#include <sstream>

namespace fs = std::filesystem;
using namespace tunec;

namespace {

/// ONNX backend-test defaults (onnx/backend/test/runner): rtol 1e-3, atol 1e-7.
constexpr double kRtol = 1e-3;
constexpr double kAtol = 1e-7;

struct Options {
  std::string data = "/usr/share/libonnx-testdata/data/node";
  std::string excludeFile;
  std::string filter;
  int minPassed = 0;
  bool verbose = false;
};

std::string readAll(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

std::map<std::string, std::string> readExcluded(const std::string& path) {
  std::map<std::string, std::string> out;
  if (path.empty()) return out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto hash = line.find('#');
    std::string name = line.substr(0, line.find_first_of(" \t#"));
    out[name] = hash == std::string::npos ? "" : line.substr(hash + 1);
  }
  return out;
}

/// Reinterprets uint16 bit patterns as bf16 (same bytes).
Tensor asBf16(const Tensor& bits) {
  Tensor t(DType::BF16, bits.shape());
  std::memcpy(t.data(), bits.data(), bits.byteSize());
  return t;
}

/// Compares with a tolerance suited to the dtype: exact for integers and bool, rtol/atol for
/// floats (with NaN matching NaN). Returns "" when equal, else the first mismatch.
std::string compare(const Tensor& got, const Tensor& wantIn) {
  Tensor want = wantIn;
  // The ONNX test data stores bfloat16 tensors as uint16 bit patterns (numpy has no bf16).
  if (got.dtype() == DType::BF16 && want.dtype() == DType::U16) want = asBf16(want);
  if (got.dtype() != want.dtype())
    return "dtype " + std::string(dtypeName(got.dtype())) +
           " != " + std::string(dtypeName(want.dtype()));
  if (!(got.shape() == want.shape()))
    return "shape " + got.shape().toString() + " != " + want.shape().toString();
  bool exact = !isFloat(want.dtype());
  for (int64_t i = 0; i < want.numel(); ++i) {
    if (exact) {
      if (got.getInt(i) != want.getInt(i))
        return "element " + std::to_string(i) + ": " + std::to_string(got.getInt(i)) +
               " != " + std::to_string(want.getInt(i));
      continue;
    }
    double g = got.getDouble(i), w = want.getDouble(i);
    if (std::isnan(w) && std::isnan(g)) continue;
    if (std::isinf(w) && g == w) continue;
    double tol = kAtol + kRtol * std::fabs(w);
    if (want.dtype() == DType::F16 || want.dtype() == DType::BF16) tol = 1e-3 + 1e-2 * std::fabs(w);
    if (!(std::fabs(g - w) <= tol)) {
      std::ostringstream os;
      os << "element " << i << ": " << g << " != " << w << " (tolerance " << tol << ")";
      return os.str();
    }
  }
  return "";
}

enum class Outcome { Passed, Failed, Skipped };

struct CaseResult {
  Outcome outcome;
  std::string reason; ///< skip group or failure detail
};

bool isUnsupported(const std::string& message) {
  return message.find("unsupported") != std::string::npos ||
         message.find("not supported") != std::string::npos;
}

// The skip group of an import error: the op named in it, or the first op of the model.
std::string skipGroup(const std::string& message, const onnx::ModelProto& model) {
  const std::string tag = "unsupported ops (";
  if (auto p = message.find(tag); p != std::string::npos) {
    auto colon = message.find(": ", p);
    auto paren = message.find(" (", colon + 2);
    return "unsupported op " + message.substr(colon + 2, paren - colon - 2);
  }
  std::string op = model.graph().node_size() ? model.graph().node(0).op_type() : "?";
  for (const auto& node : model.graph().node())
    if (message.find("(" + node.op_type() + ")") != std::string::npos) op = node.op_type();
  std::string why = message.substr(message.rfind(": ") + 2);
  if (why.size() > 70) why = why.substr(0, 70) + "...";
  return op + ": " + why;
}

// The compiled path (--compiled): the graph compiled with the JIT and run by the runtime.
Expected<std::vector<Tensor>> runCompiled(const Graph& graph, const std::vector<Tensor>& inputs) {
  static std::shared_ptr<Jit> jit = [] {
    auto j = Jit::create(hostTarget());
    if (!j) std::abort();
    return std::shared_ptr<Jit>(std::move(*j));
  }();
  driver::CompileOptions options;
  options.target = hostTarget();
  options.isa = widestIsa(options.target);
  TUNEC_ASSIGN_OR_RETURN(driver::CompiledModel compiled,
                         driver::compileModel(graph, *jit, options));
  TUNEC_ASSIGN_OR_RETURN(auto executor, driver::loadInProcess(std::move(compiled), jit, 1));
  std::vector<const void*> in;
  for (const Tensor& t : inputs) in.push_back(t.data());
  std::vector<Tensor> outputs;
  std::vector<void*> out;
  for (ValueId v : graph.outputs())
    outputs.emplace_back(graph.value(v).type.dtype, graph.value(v).type.shape);
  for (Tensor& t : outputs) out.push_back(t.data());
  TUNEC_TRY(executor->run(in.data(), out.data()));
  return outputs;
}

bool compiledMode = false;

CaseResult runCase(const fs::path& dir) {
  std::string bytes = readAll(dir / "model.onnx");
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) return {Outcome::Failed, "model.onnx does not parse"};
  std::set<std::string> initializers;
  for (const auto& init : model.graph().initializer()) initializers.insert(init.name());
  std::vector<std::string> inputNames;
  for (const auto& in : model.graph().input())
    if (!initializers.count(in.name())) inputNames.push_back(in.name());

  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return {Outcome::Skipped, "no test data"};

  for (const fs::path& set : sets) {
    // Inputs are matched to model inputs by position; an input file may be absent when the
    // input is optional.
    std::map<std::string, Tensor> data;
    for (size_t i = 0; i < inputNames.size(); ++i) {
      fs::path file = set / ("input_" + std::to_string(i) + ".pb");
      if (!fs::exists(file)) continue;
      auto t = readTensorFile(file.string());
      if (!t)
        return {Outcome::Skipped,
                "input " + std::to_string(i) + ": " +
                    t.error().message().substr(t.error().message().rfind(": ") + 2)};
      data[inputNames[i]] = *t;
    }
    ImportOptions options;
    options.evaluator = runReferenceNode;
    options.bindInput = [&](const std::string& name) -> std::optional<Tensor> {
      auto it = data.find(name);
      return it == data.end() ? std::nullopt : std::optional<Tensor>(it->second);
    };
    auto graph = importOnnxBytes(bytes, dir.string(), options);
    if (!graph) {
      const std::string& m = graph.error().message();
      if (isUnsupported(m) || m.find("is not a tensor") != std::string::npos)
        return {Outcome::Skipped, skipGroup(m, model)};
      return {Outcome::Failed, "import: " + m};
    }
    std::vector<Tensor> inputs;
    for (ValueId id : graph->inputs()) {
      auto it = data.find(graph->value(id).name);
      if (it == data.end())
        return {Outcome::Failed, "no data for input '" + graph->value(id).name + "'"};
      bool bf16Bits =
          graph->value(id).type.dtype == DType::BF16 && it->second.dtype() == DType::U16;
      inputs.push_back(bf16Bits ? asBf16(it->second) : it->second);
    }
    auto outputs = compiledMode ? runCompiled(*graph, inputs) : runReference(*graph, inputs);
    if (!outputs) {
      const std::string& m = outputs.error().message();
      if (compiledMode && m.find("the compiled path does not support") != std::string::npos) {
        auto open = m.find("("), close = m.find(")", open);
        std::string op = open == std::string::npos ? "?" : m.substr(open + 1, close - open - 1);
        if (m.find("model output") != std::string::npos && m.find("(") > m.find("model output"))
          op = "non-float model output";
        return {Outcome::Skipped, "not compiled: " + op};
      }
      return {Outcome::Failed, "run: " + m};
    }
    for (size_t i = 0; i < outputs->size(); ++i) {
      fs::path file = set / ("output_" + std::to_string(i) + ".pb");
      auto want = readTensorFile(file.string());
      if (!want)
        return {Outcome::Failed,
                "expected output " + std::to_string(i) + ": " + want.error().message()};
      std::string diff = compare((*outputs)[i], *want);
      if (!diff.empty())
        return {Outcome::Failed,
                set.filename().string() + " output " + std::to_string(i) + ": " + diff};
    }
  }
  return {Outcome::Passed, ""};
}

int usage() {
  std::puts(
      "usage: tunec_conformance [--data DIR] [--exclude FILE] [--filter SUBSTRING] "
      "[--min-passed N] [--compiled] [--verbose]\n\nRuns the ONNX backend node tests through the "
      "importer and the reference executor, or with --compiled through the compiler (JIT) "
      "and the runtime.");
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--data")
      opt.data = next();
    else if (a == "--exclude")
      opt.excludeFile = next();
    else if (a == "--filter")
      opt.filter = next();
    else if (a == "--min-passed")
      opt.minPassed = std::stoi(next());
    else if (a == "--compiled")
      compiledMode = true;
    else if (a == "--verbose")
      opt.verbose = true;
    else
      return usage();
  }
  if (!fs::is_directory(opt.data)) {
    std::fprintf(stderr,
                 "conformance: test data directory %s not found; install libonnx-testdata "
                 "(scripts/setup.sh does)\n",
                 opt.data.c_str());
    return 1;
  }
  auto excluded = readExcluded(opt.excludeFile);
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(opt.data))
    if (fs::exists(e.path() / "model.onnx") &&
        e.path().filename().string().find(opt.filter) != std::string::npos)
      cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());

  int passed = 0, failed = 0, skipped = 0, excludedCount = 0;
  std::map<std::string, std::vector<std::string>> skipReasons;
  for (const fs::path& dir : cases) {
    std::string name = dir.filename().string();
    if (excluded.count(name)) {
      ++excludedCount;
      continue;
    }
    CaseResult r = runCase(dir);
    switch (r.outcome) {
    case Outcome::Passed:
      ++passed;
      if (opt.verbose) std::printf("PASS %s\n", name.c_str());
      break;
    case Outcome::Failed:
      ++failed;
      std::printf("FAIL %s: %s\n", name.c_str(), r.reason.c_str());
      break;
    case Outcome::Skipped:
      ++skipped;
      skipReasons[r.reason].push_back(name);
      if (opt.verbose) std::printf("SKIP %s: %s\n", name.c_str(), r.reason.c_str());
      break;
    }
  }
  std::printf("\nskipped as unsupported, by reason:\n");
  for (const auto& [reason, names] : skipReasons)
    std::printf("  %4zu  %s\n", names.size(), reason.c_str());
  std::printf("\nONNX node conformance: %d cases, %d passed, %d failed, %d skipped (unsupported), "
              "%d excluded\n",
              static_cast<int>(cases.size()), passed, failed, skipped, excludedCount);
  if (passed < opt.minPassed) {
    std::printf("conformance: only %d cases passed, fewer than the required %d\n", passed,
                opt.minPassed);
    return 1;
  }
  return failed == 0 ? 0 : 1;
}
