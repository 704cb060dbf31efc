// Reference executor: dispatches each node to its reference kernel and runs graphs in order.
#include "ir/op_registry.h"
#include "reference/kernels.h"
#include "reference/reference.h"

#include <cstdio>
#include <new>
#include <unistd.h>

namespace tunec {

Status runReferenceNode(const Node& node, std::span<const Tensor* const> inputs,
                        std::span<Tensor> outputs) {
  using namespace reference;
  switch (node.kind) {
  case OpKind::Conv:
  case OpKind::IntegerConv: // exact in double, the padding reading ConvAttrs::padValue
    return conv(node, inputs, outputs);
  case OpKind::Gemm:
    return gemm(node, inputs, outputs);
  case OpKind::MatMul:
  case OpKind::IntegerMatMul: // exact: the integer products and sums are exact in double
    return matmul(node, inputs, outputs);
  case OpKind::MatMulNBits:
    return matmulNBits(node, inputs, outputs);
  case OpKind::Resize:
    return resize(node, inputs, outputs);
  case OpKind::MaxPool:
  case OpKind::AveragePool:
  case OpKind::LpPool:
  case OpKind::GlobalAveragePool:
  case OpKind::GlobalMaxPool:
    return pool(node, inputs, outputs);
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
  case OpKind::Hardmax:
  case OpKind::LayerNormalization:
  case OpKind::RMSNormalization:
  case OpKind::BatchNormalization:
  case OpKind::InstanceNormalization:
    return normalize(node, inputs, outputs);
  case OpKind::ReduceMean:
  case OpKind::ReduceSum:
  case OpKind::ReduceMax:
  case OpKind::ReduceMin:
  case OpKind::ReduceProd:
  case OpKind::ReduceL1:
  case OpKind::ReduceL2:
  case OpKind::ReduceSumSquare:
  case OpKind::ReduceLogSum:
  case OpKind::ReduceLogSumExp:
  case OpKind::ArgMax:
  case OpKind::ArgMin:
    return reduce(node, inputs, outputs);
  default:
    break;
  }
  MappingType mapping = opInfo(node.kind).mapping;
  if (mapping == MappingType::OneToOne) return elementwise(node, inputs, outputs);
  return dataMovement(node, inputs, outputs);
}

namespace {

std::string gigabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GB", bytes / 1e9);
  return text;
}

} // namespace

Expected<std::vector<Tensor>> allocateOutputs(const Graph& graph, const Node& node) {
  static const double memory = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) *
                               static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  std::vector<Tensor> out;
  for (ValueId id : node.outputs) {
    const Value& v = graph.value(id);
    const double bytes =
        static_cast<double>(v.type.shape.numel()) * static_cast<double>(dtypeSize(v.type.dtype));
    const std::string what = "node '" + node.name + "' (" + std::string(opName(node.kind)) +
                             "): its output '" + v.name + "' " + v.type.toString() + " needs " +
                             gigabytes(bytes);
    if (memory > 0 && bytes > memory)
      return makeError(what, ", more than this machine's ", gigabytes(memory), " of memory");
    try {
      out.emplace_back(v.type.dtype, v.type.shape);
    } catch (const std::bad_alloc&) {
      return makeError(what, ", which could not be allocated (out of memory)");
    }
  }
  return out;
}

Expected<std::vector<Tensor>> runReference(const Graph& graph, const std::vector<Tensor>& inputs) {
  if (inputs.size() != graph.inputs().size())
    return makeError("the model has ", graph.inputs().size(), " inputs but ", inputs.size(),
                     " were given");
  std::vector<Tensor> values(graph.values().size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = graph.value(graph.inputs()[i]);
    if (inputs[i].dtype() != v.type.dtype || !(inputs[i].shape() == v.type.shape))
      return makeError("input '", v.name, "' must be ", v.type.toString(), " but ",
                       inputs[i].typeString(), " was given");
    values[static_cast<size_t>(graph.inputs()[i])] = inputs[i];
  }
  for (size_t v = 0; v < graph.values().size(); ++v)
    if (graph.values()[v].constant) values[v] = *graph.values()[v].constant;
  for (const Node& node : graph.nodes()) {
    std::vector<const Tensor*> in;
    for (ValueId id : node.inputs)
      in.push_back(id == kNoValue ? nullptr : &values[static_cast<size_t>(id)]);
    TUNEC_ASSIGN_OR_RETURN(std::vector<Tensor> out, allocateOutputs(graph, node));
    Status s = runReferenceNode(node, in, out);
    if (!s)
      return s.error().withContext("node '" + node.name + "' (" + std::string(opName(node.kind)) +
                                   ")");
    for (size_t i = 0; i < out.size(); ++i)
      values[static_cast<size_t>(node.outputs[i])] = std::move(out[i]);
  }
  std::vector<Tensor> result;
  for (ValueId id : graph.outputs()) result.push_back(values[static_cast<size_t>(id)]);
  return result;
}

} // namespace tunec
