// ONNX model import: parse, check op support, build the Graph node by node with inference.
#include "frontend/onnx_importer.h"

#include "frontend/onnx_ops.h"
#include "frontend/onnx_tensor.h"
#include "ir/op_registry.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <onnx/defs/schema.h>
#include <set>
#include <sstream>

namespace tunec {

using namespace onnx_import;

namespace {

/// Outputs of at most this many elements are folded at import when all inputs are constant:
/// enough for shape arithmetic, small enough never to bloat the model.
constexpr int64_t kFoldLimit = 4096;

// The op a node runs: its type, qualified by its domain unless that is ONNX's
// ("com.microsoft.QLinearAdd").
std::string qualifiedOp(const onnx::NodeProto& node) {
  bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
  return defaultDomain ? node.op_type() : node.domain() + "." + node.op_type();
}

Status checkOpsSupported(const onnx::GraphProto& graph) {
  std::map<std::string, std::pair<int, std::string>> missing; // op -> (count, first node)
  for (const auto& node : graph.node()) {
    const std::string op = qualifiedOp(node);
    bool known = findConverter(op) || op == "Constant" || op == "Shape" || op == "Size";
    if (known) continue;
    auto& entry = missing[op];
    if (entry.first++ == 0) entry.second = node.name();
  }
  if (missing.empty()) return {};
  std::ostringstream os;
  os << "unsupported ops (" << missing.size() << "): ";
  bool first = true;
  for (const auto& [op, info] : missing) {
    os << (first ? "" : ", ") << op << " (" << info.first << (info.first == 1 ? " node" : " nodes");
    if (!info.second.empty()) os << ", e.g. '" << info.second << "'";
    os << ")";
    first = false;
  }
  os << "; see docs/ops.md for the supported set";
  return Error(os.str());
}

// The flags that fix or bound dimension `axis` of input `name`, for error messages.
std::string dimFixes(const std::string& input, int axis, const std::string& symbol,
                     const std::string& example) {
  std::string bound = symbol.empty() ? "name it with --dim " + input + ":" + std::to_string(axis) +
                                           "=NAME and bound it with --dim NAME=MIN..MAX"
                                     : "bound it with --dim " + symbol + "=MIN..MAX";
  return bound + " (a symbolic compile), or fix it with --input-shape " + input + "=" + example;
}

// The input's type: its dimensions fixed by --input-shape, constant in the model, or symbols
// bounded by --dim. `symbols` collects the names of its dynamic dimensions.
Expected<TensorType> inputTypeOf(const onnx::ValueInfoProto& info, const ImportOptions& options,
                                 std::set<std::string>& symbols) {
  if (!info.type().has_tensor_type())
    return makeError("input '", info.name(),
                     "' is not a tensor (sequences, maps and optionals are not supported)");
  const auto& tt = info.type().tensor_type();
  auto dtype = dtypeFromOnnx(tt.elem_type());
  if (!dtype)
    return makeError("input '", info.name(), "' has unsupported element type ",
                     onnxTypeName(tt.elem_type()));
  const InputDims& given = options.inputDims;
  auto fixed = given.shapes.find(info.name());
  if (fixed != given.shapes.end()) {
    if (tt.has_shape() && tt.shape().dim_size() != fixed->second.rank())
      return makeError("--input-shape ", info.name(), "=", fixed->second.toString(), " has rank ",
                       fixed->second.rank(), " but the model declares rank ",
                       tt.shape().dim_size());
    return TensorType{*dtype, fixed->second, {}};
  }
  if (!tt.has_shape())
    return makeError("input '", info.name(), "' has no shape; give one with --input-shape ",
                     info.name(), "=1x3x224x224");
  std::string example;
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto& d = tt.shape().dim(i);
    example +=
        (i ? "x" : "") + (d.has_dim_value() ? std::to_string(d.dim_value()) : std::string("1"));
  }
  std::vector<Dim> dims;
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto& d = tt.shape().dim(i);
    auto named = given.names.find({info.name(), i});
    if (d.has_dim_value() && d.dim_value() >= 0) {
      if (named != given.names.end())
        return makeError("--dim ", info.name(), ":", i, "=", named->second, " names dimension ", i,
                         " of '", info.name(), "', which the model fixes at ", d.dim_value());
      dims.push_back(Dim(d.dim_value()));
      continue;
    }
    std::string symbol = named != given.names.end() ? named->second
                         : d.has_dim_param()        ? d.dim_param()
                                                    : std::string();
    if (!symbol.empty()) symbols.insert(symbol);
    if (auto eq = given.equal.find(symbol); !symbol.empty() && eq != given.equal.end()) {
      for (const std::string& used : eq->second.symbols())
        if (!given.ranges.count(used))
          return makeError("'", symbol, "' is ", eq->second.toString(), ", but '", used,
                           "' has no bounds: bound it with --dim ", used, "=MIN..MAX");
      dims.push_back(dimWithin(eq->second, given.ranges));
      continue;
    }
    auto range = symbol.empty() ? given.ranges.end() : given.ranges.find(symbol);
    if (range == given.ranges.end()) {
      std::string what = symbol.empty() ? "unnamed" : "'" + symbol + "'";
      return makeError("input '", info.name(), "' has a dynamic dimension ", what, " (dim ", i,
                       ") without bounds: ", dimFixes(info.name(), i, symbol, example));
    }
    auto [lo, hi] = range->second;
    dims.push_back(lo == hi ? Dim(lo) : Dim::symbol(symbol, lo, hi));
  }
  return TensorType{*dtype, Shape(dims), {}};
}

Expected<Tensor> constantNodeValue(const onnx::NodeProto& node, const std::string& baseDir) {
  AttrReader attrs(node);
  if (const auto* t = attrs.getTensor("value")) return tensorFromProto(*t, baseDir);
  if (attrs.has("value_float")) {
    Tensor t(DType::F32, Shape());
    t.setDouble(0, attrs.getFloat("value_float", 0));
    return t;
  }
  if (auto v = attrs.getFloats("value_floats")) {
    Tensor t(DType::F32, Shape({static_cast<int64_t>(v->size())}));
    for (size_t i = 0; i < v->size(); ++i) t.setDouble(static_cast<int64_t>(i), (*v)[i]);
    return t;
  }
  if (attrs.has("value_int")) {
    Tensor t(DType::I64, Shape());
    t.setInt(0, attrs.getInt("value_int", 0));
    return t;
  }
  if (auto v = attrs.getInts("value_ints")) {
    Tensor t(DType::I64, Shape({static_cast<int64_t>(v->size())}));
    for (size_t i = 0; i < v->size(); ++i) t.setInt(static_cast<int64_t>(i), (*v)[i]);
    return t;
  }
  return makeError(
      "Constant has no supported value attribute (value, value_float(s), value_int(s))");
}

bool validUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    i += n;
  }
  return true;
}

// A name with its bytes outside printable ASCII shown as \xNN.
std::string escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      char hex[5];
      std::snprintf(hex, sizeof(hex), "\\x%02X", u);
      out += hex;
    }
  }
  return out;
}

// ONNX names are UTF-8 strings: one that is not is a damaged file, said before any of it is used
// (the plan's JSON, the report and the output file names carry names).
Status checkNames(const onnx::GraphProto& g) {
  auto check = [](const std::string& name, const char* what) -> Status {
    if (validUtf8(name)) return {};
    return makeError(what, " name '", escaped(name),
                     "' is not valid UTF-8 (a damaged model file?)");
  };
  for (const auto& v : g.input()) TUNEC_TRY(check(v.name(), "input"));
  for (const auto& v : g.output()) TUNEC_TRY(check(v.name(), "output"));
  for (const auto& t : g.initializer()) TUNEC_TRY(check(t.name(), "initializer"));
  for (const auto& n : g.node()) {
    TUNEC_TRY(check(n.name(), "node"));
    TUNEC_TRY(check(n.op_type(), "op type"));
    for (const auto& v : n.input()) TUNEC_TRY(check(v, "value"));
    for (const auto& v : n.output()) TUNEC_TRY(check(v, "value"));
  }
  return {};
}

// The nodes in an order where each value is produced before it is read: the file's order where
// it already is one (ONNX requires it, but onnxconverter-common's float16 conversion appends its
// input Casts at the end, and ONNX Runtime sorts), else the file's order among the nodes whose
// inputs are ready (Kahn's algorithm, lowest index first). A value read but produced by no node
// is left to the import to name; a cycle is an error naming a node on it.
Expected<std::vector<int>> topologicalOrder(const onnx::GraphProto& g) {
  const int n = g.node_size();
  std::map<std::string, int> producer;
  for (int i = 0; i < n; ++i)
    for (const auto& out : g.node(i).output())
      if (!out.empty() && !producer.emplace(out, i).second)
        return makeError("value '", out, "' is produced by two nodes ('",
                         g.node(producer.at(out)).name(), "' and '", g.node(i).name(), "')");
  std::vector<int> waiting(static_cast<size_t>(n), 0);
  std::vector<std::vector<int>> readers(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    std::set<int> from;
    for (const auto& in : g.node(i).input())
      if (auto it = producer.find(in); it != producer.end() && it->second != i)
        from.insert(it->second);
    waiting[static_cast<size_t>(i)] = static_cast<int>(from.size());
    for (int p : from) readers[static_cast<size_t>(p)].push_back(i);
  }
  std::set<int> ready;
  for (int i = 0; i < n; ++i)
    if (waiting[static_cast<size_t>(i)] == 0) ready.insert(i);
  std::vector<int> order;
  while (!ready.empty()) {
    int i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (int r : readers[static_cast<size_t>(i)])
      if (--waiting[static_cast<size_t>(r)] == 0) ready.insert(r);
  }
  if (static_cast<int>(order.size()) < n)
    for (int i = 0; i < n; ++i)
      if (waiting[static_cast<size_t>(i)] > 0)
        return makeError("the graph has a cycle through node '", g.node(i).name(), "' (",
                         g.node(i).op_type(), ")");
  return order;
}

class Importer {
public:
  Importer(const onnx::ModelProto& model, std::string baseDir, const ImportOptions& options)
      : model_(model), baseDir_(std::move(baseDir)), options_(options) {}

  Expected<Graph> run() {
    const onnx::GraphProto& g = model_.graph();
    TUNEC_TRY(checkNames(g));
    TUNEC_TRY(checkOpsSupported(g));
    for (const auto& op : model_.opset_import())
      if (op.domain().empty() || op.domain() == "ai.onnx") opset_ = static_cast<int>(op.version());
    if (opset_ == 0) return makeError("the model imports no default-domain (ai.onnx) opset");
    // Opsets 18 to 21 (torch 2.x exports 18 by default; int4 QDQ needs 21) are newer than the
    // onnx library's (17 on Debian 12); what they changed in the ops tunec converts was reviewed:
    // converters read the moved inputs by ctx.opset (Reduce* axes, Split's num_outputs), new
    // attributes are errors where unread, new modes errors by name (Pad's wrap), new types
    // (int4, block_size) read by DequantizeLinear, and schemas for arity are the newest known.
    constexpr int kNewestReviewed = 21;
    int newest =
        std::max(kNewestReviewed,
                 onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at("").second);
    if (opset_ > newest)
      return makeError("the model imports ai.onnx opset ", opset_, ", newer than the newest this ",
                       "tunec knows (", newest, "); export it with opset ", newest, " or lower");
    for (const auto& init : g.initializer()) {
      auto t = tensorFromProto(init, baseDir_);
      if (!t) return t.error().withContext("initializer '" + init.name() + "'");
      names_[init.name()] = graph_.addConstant(init.name(), std::move(*t));
    }
    std::set<std::string> inputNames, symbols;
    for (const auto& input : g.input())
      if (!names_.count(input.name())) inputNames.insert(input.name()); // not an initializer
    TUNEC_TRY(checkInputNames(inputNames));
    for (const auto& input : g.input()) {
      if (!inputNames.count(input.name())) continue;
      TUNEC_ASSIGN_OR_RETURN(TensorType type, inputTypeOf(input, options_, symbols));
      names_[input.name()] = graph_.addInput(input.name(), type);
    }
    TUNEC_TRY(checkSymbols(symbols));
    TUNEC_ASSIGN_OR_RETURN(std::vector<int> order, topologicalOrder(g));
    for (const auto& node : g.node())
      for (const auto& in : node.input()) readers_[in].push_back(&node);
    for (const auto& output : g.output()) readers_[output.name()].push_back(nullptr);
    for (int index : order) {
      const onnx::NodeProto& node = g.node(index);
      std::string name =
          node.name().empty() ? node.op_type() + "_" + std::to_string(index) : node.name();
      Status s = importNode(node, name);
      if (!s) {
        equation_ = equationAt(node, symbols);
        if (s.error().message().rfind("node '", 0) == 0) return s.error();
        return s.error().withContext("node '" + name + "' (" + node.op_type() + ")");
      }
    }
    for (const auto& output : g.output()) {
      auto it = names_.find(output.name());
      if (it == names_.end())
        return makeError("graph output '", output.name(), "' is produced by no node");
      if (auto sv = shapeValues_.find(it->second); sv != shapeValues_.end())
        return makeError("graph output '", output.name(),
                         "' is a shape computed from the symbolic ", "dimensions [",
                         dimsText(sv->second.elements),
                         "]: tunec does not output shape values yet; fix the dimensions with ",
                         "--input-shape or --dim NAME=N..N");
      // The model's name, also for a value a converter's expansion computes under its own
      // (DynamicQuantizeLinear's zero point).
      graph_.addOutput(it->second, output.name());
    }
    return std::move(graph_);
  }

  /// After a failed run: an input symbol the failing node's operands show to be another extent
  /// (attention_mask's total_sequence added to scores of past_sequence+sequence keys).
  const std::optional<std::pair<std::string, DimExpr>>& equation() const { return equation_; }

private:
  // Two operands of the node whose aligned dimensions differ where one is a bounded input
  // symbol alone and the other an extent without it: exporters name one extent twice (a mask's
  // total_sequence is past_sequence + sequence), and ONNX Runtime takes them equal at run time.
  std::optional<std::pair<std::string, DimExpr>> equationAt(const onnx::NodeProto& node,
                                                            const std::set<std::string>& inputs) {
    std::vector<std::vector<Dim>> operands;
    for (const auto& in : node.input()) {
      auto it = names_.find(in);
      if (in.empty() || it == names_.end()) continue;
      operands.push_back(graph_.value(it->second).type.shape.symbolicDims());
      if (auto sv = shapeValues_.find(it->second); sv != shapeValues_.end())
        operands.push_back(sv->second.elements);
    }
    const auto& ranges = options_.inputDims.ranges;
    auto lone = [&](const Dim& d) -> std::optional<std::string> {
      const auto& terms = d.expr.terms();
      if (terms.size() != 1 || terms.begin()->second != 1 || terms.begin()->first.size() != 1)
        return std::nullopt;
      const std::string& name = terms.begin()->first[0];
      if (!inputs.count(name) || !ranges.count(name)) return std::nullopt;
      return name;
    };
    for (size_t a = 0; a < operands.size(); ++a)
      for (size_t b = 0; b < operands.size(); ++b) {
        const auto &x = operands[a], &y = operands[b];
        for (size_t i = 1; i <= std::min(x.size(), y.size()); ++i) {
          const Dim &dx = x[x.size() - i], &dy = y[y.size() - i];
          if (dx.isStatic() || dy.isStatic() || dx == dy) continue;
          auto name = lone(dx);
          if (!name) continue;
          auto used = dy.expr.symbols();
          if (std::find(used.begin(), used.end(), *name) != used.end()) continue;
          return std::pair{*name, dy.expr};
        }
      }
    return std::nullopt;
  }

  // Every --input-shape and --dim names something of the model: a mistyped name is an error,
  // never a flag silently ignored. First the inputs they name, then (once the inputs are read)
  // the symbols they bound.
  Status checkInputNames(const std::set<std::string>& inputNames) const {
    std::string all;
    for (const auto& n : inputNames) all += (all.empty() ? "" : ", ") + n;
    const InputDims& given = options_.inputDims;
    for (const auto& [name, shape] : given.shapes)
      if (!inputNames.count(name))
        return makeError("--input-shape names '", name,
                         "', which is not a model input (inputs: ", all, ")");
    for (const auto& [where, symbol] : given.names)
      if (!inputNames.count(where.first))
        return makeError("--dim ", where.first, ":", where.second, "=", symbol, " names '",
                         where.first, "', which is not a model input (inputs: ", all, ")");
    return {};
  }

  Status checkSymbols(const std::set<std::string>& symbols) const {
    for (const auto& [symbol, range] : options_.inputDims.ranges) {
      if (symbols.count(symbol)) continue;
      std::string known;
      for (const auto& s : symbols) known += (known.empty() ? "" : ", ") + s;
      return makeError(
          "--dim ", symbol, "=", range.first, "..", range.second,
          " names no dynamic dimension of the model (",
          known.empty() ? std::string("it has none") : "its dynamic dimensions: " + known, ")");
    }
    return {};
  }

  Expected<ValueId> lookup(const std::string& name) {
    auto it = names_.find(name);
    if (it == names_.end()) return makeError("input '", name, "' is not defined before use");
    return it->second;
  }

  Status importNode(const onnx::NodeProto& node, const std::string& name) {
    const std::string& op = node.op_type();
    if (op == "Constant") {
      if (node.output_size() != 1) return makeError("Constant must have one output");
      TUNEC_ASSIGN_OR_RETURN(Tensor t, constantNodeValue(node, baseDir_));
      names_[node.output(0)] = graph_.addConstant(node.output(0), std::move(t));
      return {};
    }
    std::vector<ValueId> inputs;
    for (const auto& in : node.input()) {
      if (in.empty()) {
        inputs.push_back(kNoValue);
        continue;
      }
      TUNEC_ASSIGN_OR_RETURN(ValueId id, lookup(in));
      inputs.push_back(id);
    }
    TUNEC_TRY(checkArity(node, inputs));
    if (op == "Shape" || op == "Size") return importShapeOf(node, inputs);
    // Shape arithmetic on symbolic dimensions is folded here, into shape values; a reader that
    // takes a shape value (Reshape's target) gets its dimensions; any other is an error.
    for (size_t i = 0; i < inputs.size(); ++i) {
      auto sv = shapeValues_.find(inputs[i]);
      if (sv == shapeValues_.end()) continue;
      if (auto folded = foldShapeArithmetic(node, inputs)) return *folded;
      if (readsShapeValue(op, i)) continue;
      return makeError("reads '", graph_.value(inputs[i]).name, "', a shape computed from the ",
                       "symbolic dimensions [", dimsText(sv->second.elements),
                       "], and tunec does not carry it through ", op,
                       " yet: fix the dimensions with --input-shape or --dim NAME=N..N");
    }
    int numOutputs = 0;
    for (int i = 0; i < node.output_size(); ++i)
      if (!node.output(i).empty()) numOutputs = i + 1;
    ConvertContext ctx{graph_,           node,     opset_,   inputs,        numOutputs,
                       AttrReader(node), options_, baseDir_, &shapeValues_, &blockQuantized_,
                       &readers_};
    Converter convert = findConverter(qualifiedOp(node));
    TUNEC_ASSERT(convert, "checkOpsSupported let " << qualifiedOp(node) << " through");
    TUNEC_ASSIGN_OR_RETURN(Conversion conv, convert(ctx));
    for (const std::string& attr : ctx.attrs.unread())
      return makeError("unsupported attribute '", attr, "'");
    // Trailing outputs that are constants or values of the expansion; the op has the others.
    int opOutputs = numOutputs;
    for (auto [index, value] : conv.valueOutputs) {
      TUNEC_ASSERT(index < numOutputs, "a computed output beyond the node's outputs");
      if (!node.output(index).empty()) names_[node.output(index)] = value;
      opOutputs = std::min(opOutputs, index);
    }
    for (auto& [index, value] : conv.constantOutputs) {
      TUNEC_ASSERT(index < numOutputs, "a constant output beyond the node's outputs");
      if (!node.output(index).empty())
        names_[node.output(index)] = graph_.addConstant(node.output(index), std::move(value));
      opOutputs = std::min(opOutputs, index);
    }
    numOutputs = opOutputs;
    std::vector<std::string> outNames;
    for (int i = 0; i < numOutputs; ++i)
      outNames.push_back(node.output(i).empty() ? name + ":" + std::to_string(i) : node.output(i));
    TUNEC_ASSIGN_OR_RETURN(NodeId id,
                           graph_.addNode(name, conv.kind, conv.attrs, conv.inputs, outNames));
    for (int i = 0; i < numOutputs; ++i)
      names_[outNames[static_cast<size_t>(i)]] = graph_.node(id).outputs[static_cast<size_t>(i)];
    return foldIfConstant(id);
  }

  // The inputs that converters read as dimensions (ConvertContext::shapeInput), or not at all:
  // GroupQueryAttention's seqlens_k and total_sequence_length, whose lengths it takes from the
  // shapes of its query and past (convertGroupQueryAttention).
  static bool readsShapeValue(const std::string& op, size_t i) {
    return (op == "Reshape" && i == 1) || (op == "Slice" && i == 2) || (op == "Expand" && i == 1) ||
           (op == "ConstantOfShape" && i == 0) || op == "Range" ||
           (op == "GroupQueryAttention" && (i == 5 || i == 6));
  }

  // Every input the op's ONNX schema requires is present and named, and there are no more than
  // it allows: converters index their inputs without checking again.
  Status checkArity(const onnx::NodeProto& node, const std::vector<ValueId>& inputs) {
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(node.op_type(), opset_, "");
    // An op newer than the model's opset (tunec converts Gelu at any opset): its newest schema.
    if (!schema)
      schema = onnx::OpSchemaRegistry::Schema(node.op_type(), std::numeric_limits<int>::max(), "");
    if (!schema) {
      // No schema at all in this ONNX build (the com.microsoft ops): every converter reads a
      // first input and names its parts after a first output.
      if (inputs.empty() || inputs[0] == kNoValue)
        return makeError("input 0 is required but ", inputs.empty() ? "missing" : "empty");
      if (node.output_size() == 0 || node.output(0).empty())
        return makeError("output 0 is required but ",
                         node.output_size() == 0 ? "missing" : "unnamed");
      return {};
    }
    const auto& formals = schema->inputs();
    for (size_t i = 0; i < formals.size(); ++i) {
      if (formals[i].GetOption() != onnx::OpSchema::Single) continue;
      if (i >= inputs.size())
        return makeError("input ", i, " ('", formals[i].GetName(), "') is required but missing (",
                         node.op_type(), " takes at least ", schema->min_input(), ")");
      if (inputs[i] == kNoValue)
        return makeError("input ", i, " ('", formals[i].GetName(),
                         "') is required but has an empty name");
    }
    if (static_cast<int>(inputs.size()) < schema->min_input())
      return makeError(node.op_type(), " takes at least ", schema->min_input(), " inputs, not ",
                       inputs.size());
    if (static_cast<int>(inputs.size()) > schema->max_input())
      return makeError(node.op_type(), " takes at most ", schema->max_input(), " inputs, not ",
                       inputs.size());
    // The outputs likewise: the first (required) output named, no more than the op has.
    const auto& outs = schema->outputs();
    for (size_t i = 0; i < outs.size(); ++i)
      if (outs[i].GetOption() == onnx::OpSchema::Single &&
          (static_cast<int>(i) >= node.output_size() || node.output(static_cast<int>(i)).empty()))
        return makeError("output ", i, " ('", outs[i].GetName(), "') is required but ",
                         static_cast<int>(i) >= node.output_size() ? "missing" : "unnamed");
    if (node.output_size() > schema->max_output())
      return makeError(node.op_type(), " has at most ", schema->max_output(), " outputs, not ",
                       node.output_size());
    return {};
  }

  // Shape and Size of static dimensions are metadata: their results are constants.
  Status importShapeOf(const onnx::NodeProto& node, const std::vector<ValueId>& inputs) {
    AttrReader attrs(node);
    if (inputs.size() != 1 || inputs[0] == kNoValue) return makeError("needs one input");
    const Shape& s = graph_.value(inputs[0]).type.shape;
    Tensor t;
    // Of symbolic dimensions: a shape value (its elements the dimensions).
    ShapeValue value;
    if (node.op_type() == "Size") {
      Dim n(1);
      for (const Dim& d : s.symbolicDims()) n = n * d;
      value = {{n}, true};
      t = Tensor(DType::I64, Shape());
      t.setInt(0, s.numel());
    } else {
      int64_t start = attrs.getInt("start", 0), end = attrs.getInt("end", s.rank());
      if (start < 0) start += s.rank();
      if (end < 0) end += s.rank();
      start = std::clamp<int64_t>(start, 0, s.rank());
      end = std::clamp<int64_t>(end, start, s.rank());
      for (int64_t i = start; i < end; ++i) value.elements.push_back(s.dim(static_cast<int>(i)));
      t = Tensor(DType::I64, Shape({end - start}));
      for (int64_t i = start; i < end; ++i) t.setInt(i - start, s[static_cast<int>(i)]);
    }
    for (const std::string& attr : attrs.unread())
      return makeError("unsupported attribute '", attr, "'");
    defineShapeValue(node.output(0), std::move(value));
    return {};
  }

  static std::string dimsText(const std::vector<Dim>& dims) {
    std::string s;
    for (const Dim& d : dims) s += (s.empty() ? "" : ", ") + d.toString();
    return s;
  }

  // `name` is a shape value: a constant when every element is static, else a placeholder
  // constant of the bounds marked as the shape value.
  void defineShapeValue(const std::string& name, ShapeValue value) {
    Tensor t(value.boolean ? DType::Bool : DType::I64,
             value.scalar ? Shape() : Shape({std::ssize(value.elements)}));
    bool symbolic = false;
    for (size_t i = 0; i < value.elements.size(); ++i) {
      t.setInt(static_cast<int64_t>(i), value.elements[i].max);
      symbolic = symbolic || !value.elements[i].isStatic();
    }
    ValueId id = graph_.addConstant(name, std::move(t));
    names_[name] = id;
    if (symbolic) shapeValues_[id] = std::move(value);
  }

  // Input i as a shape value: a marked one, or a small integer constant of rank <= 1.
  std::optional<ShapeValue> shapeValueOf(ValueId v) const {
    if (auto it = shapeValues_.find(v); it != shapeValues_.end()) return it->second;
    const Value& value = graph_.value(v);
    if (!value.constant || !(isInteger(value.type.dtype) || value.type.dtype == DType::Bool) ||
        value.type.shape.rank() > 1 || value.type.shape.numel() > 64)
      return std::nullopt;
    ShapeValue out{{}, value.type.shape.rank() == 0, value.type.dtype == DType::Bool};
    for (int64_t i = 0; i < value.type.shape.numel(); ++i)
      out.elements.push_back(Dim(value.constant->getInt(i)));
    return out;
  }

  // The shape arithmetic exporters write on a model's dimensions (Gather of an element,
  // Unsqueeze, Squeeze, Concat, Slice, Cast, Identity, and elementwise Add, Sub, Mul and exact
  // Div), folded on dimensions; nullopt when `node` is not such an op on shape values.
  std::optional<Status> foldShapeArithmetic(const onnx::NodeProto& node,
                                            const std::vector<ValueId>& inputs) {
    const std::string& op = node.op_type();
    std::vector<ShapeValue> in;
    for (ValueId v : inputs) {
      if (v == kNoValue) return std::nullopt;
      auto sv = shapeValueOf(v);
      if (!sv) return std::nullopt;
      in.push_back(std::move(*sv));
    }
    if (in.empty() || node.output_size() != 1) return std::nullopt;
    AttrReader attrs(node);
    const auto& ranges = options_.inputDims.ranges;
    ShapeValue out;
    if (op == "Identity" || op == "Cast") {
      attrs.getInt("to", 7);
      out = in[0];
    } else if (op == "Gather" && in.size() == 2) {
      int64_t n = std::ssize(in[0].elements);
      if (attrs.getInt("axis", 0) != 0 || in[0].scalar) return std::nullopt;
      out.scalar = in[1].scalar;
      for (const Dim& i : in[1].elements) {
        auto k = i.expr.constant();
        if (!k || *k < -n || *k >= n)
          return Status(makeError("gathers element ", i.toString(), " of a shape of ", n));
        out.elements.push_back(in[0].elements[static_cast<size_t>(*k < 0 ? *k + n : *k)]);
      }
    } else if (op == "Unsqueeze" || op == "Squeeze") {
      // Of a scalar or a 1-d shape value: to rank 1 and back.
      attrs.getInts("axes"); // (or an input from opset 13): a rank-1 value has one place for them
      out.elements = in[0].elements;
      out.scalar = op == "Squeeze" && in[0].elements.size() == 1;
      if (op == "Unsqueeze" && !in[0].scalar) return std::nullopt;
    } else if (op == "Concat") {
      if (attrs.getInt("axis", 0) != 0 && attrs.getInt("axis", 0) != -1) return std::nullopt;
      for (const ShapeValue& v : in) {
        if (v.scalar) return std::nullopt;
        out.elements.insert(out.elements.end(), v.elements.begin(), v.elements.end());
      }
    } else if (op == "Slice" && in.size() >= 3) {
      int64_t n = std::ssize(in[0].elements);
      auto bound = [&](const ShapeValue& v) -> std::optional<int64_t> {
        if (v.elements.size() != 1) return std::nullopt;
        auto c = v.elements[0].expr.constant();
        if (!c) return std::nullopt;
        return std::clamp<int64_t>(*c < 0 ? *c + n : *c, 0, n);
      };
      auto start = bound(in[1]), end = bound(in[2]);
      if (!start || !end || (in.size() > 4 && in[4].elements != std::vector<Dim>{Dim(1)}))
        return std::nullopt;
      for (int64_t i = *start; i < *end; ++i)
        out.elements.push_back(in[0].elements[static_cast<size_t>(i)]);
    } else if (op == "Reshape" && in.size() == 2 && !in[0].scalar) {
      // A shape value flattened (torch's expand writes Reshape(shape, [-1])).
      if (in[1].elements.size() != 1 ||
          (in[1].elements[0] != Dim(-1) && in[1].elements[0] != Dim(std::ssize(in[0].elements))))
        return std::nullopt;
      attrs.getInt("allowzero", 0);
      out.elements = in[0].elements;
    } else if (op == "Equal" && in.size() == 2) {
      // Decided when the dimensions are equal or one lies outside the other's range (a
      // dimension is never the -1 that torch's expand compares it with).
      size_t n = std::max(in[0].elements.size(), in[1].elements.size());
      out.scalar = in[0].scalar && in[1].scalar;
      out.boolean = true;
      for (size_t i = 0; i < n; ++i) {
        const Dim& a = in[0].elements[in[0].elements.size() == 1 ? 0 : i];
        const Dim& b = in[1].elements[in[1].elements.size() == 1 ? 0 : i];
        if (a.expr == b.expr)
          out.elements.push_back(Dim(1));
        else if (a.max < b.min || b.max < a.min)
          out.elements.push_back(Dim(0));
        else
          return Status(makeError("compares ", a.toString(), " with ", b.toString(),
                                  ", which are equal for some values of the symbols only"));
      }
    } else if (op == "Where" && in.size() == 3) {
      size_t n = std::max({in[0].elements.size(), in[1].elements.size(), in[2].elements.size()});
      out.scalar = in[0].scalar && in[1].scalar && in[2].scalar;
      auto at = [&](const ShapeValue& v, size_t i) -> const Dim& {
        return v.elements[v.elements.size() == 1 ? 0 : i];
      };
      for (size_t i = 0; i < n; ++i) {
        if (in[0].elements.size() != 1 && in[0].elements.size() != n) return std::nullopt;
        auto c = at(in[0], i).expr.constant();
        if (!c) return std::nullopt;
        out.elements.push_back(*c ? at(in[1], i) : at(in[2], i));
      }
    } else if ((op == "Add" || op == "Sub" || op == "Mul" || op == "Div") && in.size() == 2) {
      size_t n = std::max(in[0].elements.size(), in[1].elements.size());
      out.scalar = in[0].scalar && in[1].scalar;
      for (size_t i = 0; i < n; ++i) {
        const Dim& a = in[0].elements[in[0].elements.size() == 1 ? 0 : i];
        const Dim& b = in[1].elements[in[1].elements.size() == 1 ? 0 : i];
        std::optional<DimExpr> e;
        if (op == "Add") e = a.expr + b.expr;
        if (op == "Sub") e = a.expr - b.expr;
        if (op == "Mul") e = a.expr * b.expr;
        if (op == "Div") e = a.expr.divideExactly(b.expr);
        if (!e)
          return Status(makeError("divides ", a.toString(), " by ", b.toString(),
                                  ", which is not exact for every value of the symbols"));
        out.elements.push_back(dimWithin(*e, ranges));
      }
    } else {
      return std::nullopt;
    }
    for (const std::string& attr : attrs.unread())
      return Status(makeError("unsupported attribute '", attr, "'"));
    defineShapeValue(node.output(0), std::move(out));
    return Status();
  }

  // Evaluates a node whose inputs are all constant and whose outputs are small (shape
  // arithmetic), replacing its outputs by constants so that later ops see static values. The
  // DequantizeLinear of constant integer weights stays: lower-quantized-layers reads the s8
  // weights of an int8 layer from it (fold-constants folds the others).
  Status foldIfConstant(NodeId id) {
    if (!options_.evaluator) return {};
    const Node& node = graph_.node(id);
    if (node.kind == OpKind::DequantizeLinear &&
        graph_.value(node.inputs[0]).type.dtype == DType::I8)
      return {};
    for (ValueId in : node.inputs)
      if (in != kNoValue && !graph_.value(in).constant) return {};
    for (ValueId out : node.outputs)
      if (graph_.value(out).type.shape.numel() > kFoldLimit ||
          !graph_.value(out).type.shape.isStatic())
        return {};
    std::vector<const Tensor*> in;
    for (ValueId v : node.inputs)
      in.push_back(v == kNoValue ? nullptr : &*graph_.value(v).constant);
    std::vector<Tensor> out;
    for (ValueId v : node.outputs)
      out.emplace_back(graph_.value(v).type.dtype, graph_.value(v).type.shape);
    TUNEC_TRY(options_.evaluator(node, in, out));
    for (size_t i = 0; i < out.size(); ++i) {
      ValueId v = node.outputs[i];
      std::string name = graph_.value(v).name;
      names_[name] = graph_.addConstant(name, std::move(out[i]));
    }
    // The node is left in place; dead-code removal drops it once nothing reads it.
    return {};
  }

  const onnx::ModelProto& model_;
  std::string baseDir_;
  const ImportOptions& options_;
  int opset_ = 0;
  Graph graph_;
  std::map<std::string, ValueId> names_;
  std::map<ValueId, ShapeValue> shapeValues_; ///< values computed from symbolic dimensions
  std::map<std::string, onnx_import::BlockQuantized> blockQuantized_; ///< ConvertContext's
  std::map<std::string, std::vector<const onnx::NodeProto*>> readers_;
  std::optional<std::pair<std::string, DimExpr>> equation_;
};

} // namespace

namespace {

// The named dynamic dimensions of the inputs that no flag bounds, fixes or defines.
std::set<std::string> unboundedSymbols(const onnx::GraphProto& g, const InputDims& given) {
  std::set<std::string> initializers, out;
  for (const auto& t : g.initializer()) initializers.insert(t.name());
  for (const auto& input : g.input()) {
    if (initializers.count(input.name()) || given.shapes.count(input.name()) ||
        !input.type().has_tensor_type() || !input.type().tensor_type().has_shape())
      continue;
    const auto& shape = input.type().tensor_type().shape();
    for (int i = 0; i < shape.dim_size(); ++i) {
      const auto& d = shape.dim(i);
      if (d.has_dim_value() && d.dim_value() >= 0) continue;
      auto named = given.names.find({input.name(), i});
      std::string symbol = named != given.names.end() ? named->second
                           : d.has_dim_param()        ? d.dim_param()
                                                      : std::string();
      if (!symbol.empty() && !given.ranges.count(symbol) && !given.equal.count(symbol))
        out.insert(symbol);
    }
  }
  return out;
}

// A provisional symbol that an output declares where the graph computes an extent of other
// symbols: present.N.key's total_sequence is past_sequence + sequence where nothing but the
// present reads the attention mask's (ONNX Runtime's GroupQueryAttention counts it itself).
std::optional<std::pair<std::string, DimExpr>>
declaredOutputEquation(const onnx::GraphProto& g, const Graph& graph,
                       const std::set<std::string>& provisional) {
  // The graph's outputs are the model's, in order (a value's name may be a converter's part).
  if (graph.outputs().size() != static_cast<size_t>(g.output_size())) return std::nullopt;
  for (int o = 0; o < g.output_size(); ++o) {
    const auto& output = g.output(o);
    if (!output.type().has_tensor_type() || !output.type().tensor_type().has_shape()) continue;
    const auto& declared = output.type().tensor_type().shape();
    const std::vector<Dim> dims =
        graph.value(graph.outputs()[static_cast<size_t>(o)]).type.shape.symbolicDims();
    if (declared.dim_size() != std::ssize(dims)) continue;
    for (int i = 0; i < declared.dim_size(); ++i) {
      const std::string& symbol = declared.dim(i).dim_param();
      const DimExpr& inferred = dims[static_cast<size_t>(i)].expr;
      if (!provisional.count(symbol) || inferred.isConstant() ||
          inferred == DimExpr::symbol(symbol))
        continue;
      bool others = true;
      for (const std::string& s : inferred.symbols()) others = others && !provisional.count(s);
      if (others) return std::make_pair(symbol, inferred);
    }
  }
  return std::nullopt;
}

} // namespace

Expected<Graph> importOnnxBytes(const std::string& bytes, const std::string& baseDir,
                                const ImportOptions& options) {
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes))
    return makeError("not an ONNX model: the file does not parse as an ONNX ModelProto (truncated "
                     "or another format?)");
  if (!model.has_graph() || model.graph().node_size() == 0)
    return makeError("not an ONNX model: it holds no graph (truncated or another format?)");
  // An import that finds an input symbol to be another extent runs again with it defined so
  // (each run can find one more; a symbol is defined once). A symbol without bounds is given
  // provisional ones, for the import to find it another's expression (a decoder's
  // total_sequence, past_sequence + sequence); one that stays a symbol of its own is the error
  // the plain import gives, naming the flag that bounds it.
  ImportOptions opts = options;
  const std::set<std::string> provisional = unboundedSymbols(model.graph(), options.inputDims);
  for (const std::string& s : provisional) opts.inputDims.ranges[s] = {0, int64_t{1} << 20};
  // The plain import with the symbols found so far defined: its error names a symbol that
  // still needs its bounds.
  auto plain = [&]() {
    ImportOptions found = options;
    found.inputDims.equal = opts.inputDims.equal;
    return Importer(model, baseDir, found).run();
  };
  for (;;) {
    Importer importer(model, baseDir, opts);
    auto graph = importer.run();
    if (graph) {
      graph->removeDeadCode();
      bool unbound = false;
      for (ValueId in : graph->inputs())
        for (const Dim& d : graph->value(in).type.shape.symbolicDims())
          for (const std::string& s : d.expr.symbols()) unbound = unbound || provisional.count(s);
      if (unbound) {
        auto declared = declaredOutputEquation(model.graph(), *graph, provisional);
        if (!declared || opts.inputDims.equal.count(declared->first)) return plain();
        opts.inputDims.equal.emplace(declared->first, declared->second);
        continue;
      }
      for (const auto& [symbol, expr] : opts.inputDims.equal)
        if (!options.inputDims.equal.count(symbol) && options.note)
          options.note(
              "'" + symbol + "' is taken as " + expr.toString() +
              " (the graph combines them elementwise, or an output declares it that extent; "
              "each run checks it)");
      return graph;
    }
    auto found = importer.equation();
    if (!found || opts.inputDims.equal.count(found->first))
      return provisional.empty() ? graph : plain();
    opts.inputDims.equal.emplace(found->first, found->second);
  }
}

Expected<std::string> readOnnxFile(const std::string& path) {
  // Checked before opening: a FIFO would block the open, a device or directory never end.
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    return makeError(path, ": not a regular file (a directory, FIFO or device): give the .onnx "
                           "model file");
  std::ifstream file(path, std::ios::binary);
  if (!file) return makeError(path, ": cannot open file");
  std::ostringstream os;
  os << file.rdbuf();
  return os.str();
}

Expected<Graph> importOnnxFile(const std::string& path, const ImportOptions& options) {
  TUNEC_ASSIGN_OR_RETURN(std::string bytes, readOnnxFile(path));
  std::string baseDir = std::filesystem::path(path).parent_path().string();
  auto graph = importOnnxBytes(bytes, baseDir, options);
  if (!graph) return graph.error().withContext(path);
  return graph;
}

} // namespace tunec
