// The lowering driver: tensors, steps, constants and the arena plan of a compiled model.
#include "driver/lowering.h"
#include "ir/op_registry.h"
#include "passes/memory_plan.h"
#include "passes/rewriter.h"
#include "runtime/typed_kernels.h"
#include "support/terminal_text.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>

namespace tunec::driver {

namespace {

// Bytes of the constants the nodes read (each counted once).
size_t constantBytesRead(const Graph& graph) {
  std::vector<bool> counted(graph.values().size(), false);
  size_t bytes = 0;
  for (const Node& n : graph.nodes())
    for (ValueId v : n.inputs)
      if (v != kNoValue && graph.value(v).constant && !counted[static_cast<size_t>(v)]) {
        counted[static_cast<size_t>(v)] = true;
        bytes += graph.value(v).constant->byteSize();
      }
  return bytes;
}

} // namespace

// Channels below which an NHWC elementwise step iterates along W innermost.
constexpr int64_t kShortChannels = 8;

Lowering::Lowering(const Graph& graph, const CompileOptions& options, ModelModule* module)
    : graph_(graph), options_(options), module_(module), fusion_(passes::planFusion(graph)),
      views_(passes::planOperandViews(graph, fusion_)),
      channelViews_(passes::planChannelViews(graph, fusion_)), uses_(passes::useCounts(graph)),
      readers_(passes::readersOf(graph)),
      weightsCold_(constantBytesRead(graph) > static_cast<size_t>(options.target.l3)) {}

bool Lowering::sameBytes(const Shape& s) {
  // A 4-d tensor with 1x1 spatial size, or one channel, is laid out the same in NCHW and NHWC.
  return s.rank() != 4 || (s[2] == 1 && s[3] == 1) || s[1] == 1;
}

std::vector<int64_t> Lowering::logicalStrides(const Shape& shape, Phys phys) {
  if (phys == Phys::Nhwc && shape.rank() == 4) return nhwcStrides(shape, shape[1]);
  return shape.strides();
}

std::vector<int64_t> Lowering::nhwcStrides(const Shape& shape, int64_t ld) {
  return {shape[2] * shape[3] * ld, 1, shape[3] * ld, ld};
}

std::vector<int64_t> Lowering::broadcastStrides(const Shape& shape,
                                                const std::vector<int64_t>& strides,
                                                const Shape& outShape) {
  std::vector<int64_t> out(static_cast<size_t>(outShape.rank()), 0);
  int shift = outShape.rank() - shape.rank();
  for (int d = 0; d < shape.rank(); ++d)
    out[static_cast<size_t>(d + shift)] = shape[d] == 1 ? 0 : strides[static_cast<size_t>(d)];
  return out;
}

int Lowering::addArenaTensor(int64_t bytes) {
  tensors_.push_back({{rt::Region::Arena, 0}, bytes});
  return static_cast<int>(tensors_.size()) - 1;
}

void Lowering::definePart(ValueId v, int parent, int64_t byteOffset) {
  // A part of a part is a part of the tensor both lie in.
  const TensorInfo& of = tensors_[static_cast<size_t>(parent)];
  if (of.parent >= 0) {
    byteOffset += of.offsetInParent;
    parent = of.parent;
  }
  TensorInfo part = tensors_[static_cast<size_t>(parent)];
  part.parent = parent;
  part.offsetInParent = byteOffset;
  tensors_.push_back(part);
  produced_[v] = {static_cast<int>(tensors_.size()) - 1, Phys::Plain};
}

int Lowering::concatBuffer(NodeId concat) {
  if (auto it = concatBuffers_.find(concat); it != concatBuffers_.end()) return it->second;
  ValueId y = graph_.node(concat).outputs[0];
  int t = defineOutput(y, Phys::Nhwc);
  concatBuffers_[concat] = t;
  return t;
}

int Lowering::channelSlot(ValueId v, int64_t& ld) {
  const passes::ChannelSlot& slot = channelViews_.writtenInPlace.at(v);
  int buffer = concatBuffer(slot.concat);
  ld = defineStridedPart(v, buffer, slot.offset,
                         graph_.value(graph_.node(slot.concat).outputs[0]).type.shape[1]);
  inPlace_.insert(v);
  return produced_[v].first;
}

int64_t Lowering::defineStridedPart(ValueId v, int source, int64_t offset, int64_t ld) {
  definePart(v, source, offset * static_cast<int64_t>(dtypeSize(graph_.value(v).type.dtype)));
  produced_[v].second = Phys::Nhwc;
  // A part as wide as the tensor it lies in is that tensor's dense bytes.
  if (ld == graph_.value(v).type.shape[1]) return 0;
  pixelStride_[v] = ld;
  return ld;
}

void Lowering::defineChannelView(ValueId v, int source, int64_t offset, int64_t ld) {
  defineStridedPart(v, source, offset, ld);
  ++stats_.aliases;
}

int Lowering::tensorStrided(ValueId v, int64_t& ld) {
  if (auto it = pixelStride_.find(v); it != pixelStride_.end()) {
    ld = it->second;
    return produced_.at(v).first;
  }
  ld = 0;
  return tensorIn(v, Phys::Nhwc);
}

int Lowering::addConstant(const void* data, size_t bytes) {
  size_t offset = (constants_.size() + 63) / 64 * 64;
  constants_.resize(offset + bytes);
  if (bytes) std::memcpy(constants_.data() + offset, data, bytes);
  // Its bytes count in the profile's cost of the steps that read it (packed weights).
  tensors_.push_back(
      {{rt::Region::Constant, static_cast<int64_t>(offset)}, static_cast<int64_t>(bytes)});
  return static_cast<int>(tensors_.size()) - 1;
}

int Lowering::tensorAny(ValueId v, Phys& phys) {
  if (auto strided = pixelStride_.find(v); strided != pixelStride_.end()) {
    // A channel view, for a consumer that reads dense tensors: copied dense once.
    phys = Phys::Nhwc;
    auto key = std::make_pair(v, Phys::Nhwc);
    if (auto it = reordered_.find(key); it != reordered_.end()) return it->second;
    const Shape& shape = graph_.value(v).type.shape;
    int out =
        addArenaTensor(shape.numel() * static_cast<int64_t>(dtypeSize(graph_.value(v).type.dtype)));
    copyTensor(*this, "copy '" + graph_.value(v).name + "' dense", out, shape,
               logicalStrides(shape, Phys::Nhwc), produced_.at(v).first,
               nhwcStrides(shape, strided->second), graph_.value(v).type.dtype);
    reordered_[key] = out;
    return out;
  }
  auto it = produced_.find(v);
  if (it != produced_.end()) {
    phys = it->second.second;
    return it->second.first;
  }
  const Value& value = graph_.value(v);
  phys = Phys::Plain;
  int t;
  if (value.constant) {
    t = addConstant(value.constant->data(), value.constant->byteSize());
  } else {
    // A model input: the caller's buffer.
    auto pos = std::find(graph_.inputs().begin(), graph_.inputs().end(), v);
    TUNEC_ASSERT(pos != graph_.inputs().end(), "value '" << value.name << "' is not produced yet");
    tensors_.push_back({{rt::Region::Input, pos - graph_.inputs().begin()}, 0});
    t = static_cast<int>(tensors_.size()) - 1;
  }
  produced_[v] = {t, phys};
  return t;
}

Phys Lowering::producedPhys(ValueId v) const {
  auto it = produced_.find(v);
  return it == produced_.end() ? Phys::Plain : it->second.second;
}

int Lowering::tensorIn(ValueId v, Phys want) {
  if (cacheLayoutReaders_ == 0 && cacheLayouts_.count(v)) {
    // planCaches admitted only readers that read the cache layout: this is a lowering bug, and
    // an error rather than a wrong result.
    unsupported_.push_back("K/V cache '" + graph_.value(v).name +
                           "' is read by a step that does not read its in-place layout");
  }
  Phys have;
  int t = tensorAny(v, have);
  const Shape& shape = graph_.value(v).type.shape;
  if (have == want || Lowering::sameBytes(shape)) return t;
  auto key = std::make_pair(v, want);
  if (auto it = reordered_.find(key); it != reordered_.end()) return it->second;
  const DType dtype = graph_.value(v).type.dtype;
  TUNEC_ASSERT(storedType(v) == dtype, "bf16 activation '"
                                           << graph_.value(v).name
                                           << "' read in another layout (plan_bf16_activations)");
  int64_t bytes = shape.numel() * static_cast<int64_t>(dtypeSize(dtype));
  tensors_.push_back({{rt::Region::Arena, 0}, bytes});
  int out = static_cast<int>(tensors_.size()) - 1;
  std::string label =
      "reorder '" + graph_.value(v).name + "' to " + (want == Phys::Nhwc ? "NHWC" : "plain");
  if (dtype == DType::F32) {
    addElementwise(label, out, shape, want, 0, logicalStrides(shape, want),
                   {{t, logicalStrides(shape, have), 0}}, {{rt::EwOp::Copy, 0, -1, -1000}});
  } else { // another element type (a u8 activation between int8 kernels): a typed copy
    rt::TypedProgram p;
    p.op = rt::TypedOp::Cast;
    p.out = dtype;
    p.in = {dtype};
    p.dims = shape.dims();
    p.outStrides = logicalStrides(shape, want);
    p.inStrides = {logicalStrides(shape, have)};
    p.inOffsets = {0};
    rt::Step step;
    step.label = label;
    p.encode(step);
    step.tensors = {out, t};
    addStep(std::move(step), {t}, {out});
  }
  ++stats_.reorders;
  reordered_[key] = out;
  std::string consumer =
      currentKernel_ < 0
          ? "the model output"
          : "'" + graph_.node(fusion_.kernels[static_cast<size_t>(currentKernel_)].nodes[0]).name +
                "'";
  reorderNotes_.push_back({graph_.value(v).name, want == Phys::Nhwc, consumer});
  return out;
}

int Lowering::defineOutput(ValueId v, Phys phys) {
  const Value& value = graph_.value(v);
  const auto& outs = graph_.outputs();
  auto pos = std::find(outs.begin(), outs.end(), v);
  if (pos != outs.end() && (phys == Phys::Plain || Lowering::sameBytes(value.type.shape))) {
    tensors_.push_back({{rt::Region::Output, pos - outs.begin()}, 0});
    phys = Phys::Plain;
  } else {
    int64_t bytes = value.type.shape.numel() * static_cast<int64_t>(dtypeSize(storedType(v)));
    tensors_.push_back({{rt::Region::Arena, 0}, bytes});
  }
  int t = static_cast<int>(tensors_.size()) - 1;
  produced_[v] = {t, phys};
  return t;
}

void Lowering::defineAlias(ValueId v, int source, Phys phys) {
  produced_[v] = {source, phys};
  ++stats_.aliases;
}

namespace {

/// Arithmetic per run of a loop kernel from its parameters, counting one operation per element
/// and step of the computation (exp as one): softmax's max, subtract, exp, sum and scale; layer
/// norm's mean, variance (3) and normalize with scale and shift (4); a reduction's one per input.
double loopKernelFlops(const rt::Step& step) {
  auto product = [&](size_t first, size_t count) {
    double p = 1;
    for (size_t i = first; i < first + count && i < step.ints.size(); ++i)
      p *= static_cast<double>(step.ints[i]);
    return step.ints.size() >= first + count ? p : 0.0;
  };
  switch (step.kind) {
  case rt::StepKind::Softmax:
    return 5 * product(0, 3);
  case rt::StepKind::LayerNorm:
    return 8 * product(0, 2);
  case rt::StepKind::Reduce:
    return product(0, 2);
  default:
    return 0;
  }
}

} // namespace

void Lowering::addStep(rt::Step step, std::vector<int> reads, std::vector<int> writes) {
  int index = static_cast<int>(steps_.size());
  // A part lives as long as the tensor it lies in.
  auto root = [&](int t) {
    return tensors_[static_cast<size_t>(t)].parent >= 0 ? tensors_[static_cast<size_t>(t)].parent
                                                        : t;
  };
  for (int t : reads)
    if (t >= 0) tensors_[static_cast<size_t>(root(t))].last = index;
  for (int t : writes) {
    if (t < 0) continue;
    TensorInfo& info = tensors_[static_cast<size_t>(root(t))];
    if (info.first < 0) info.first = index;
    info.last = std::max(info.last, index);
  }
  // The step's cost for profiles: the bytes of its distinct operands, and the arithmetic of the
  // loop kernels whose parameters give it (generated kernels and elementwise programs set it).
  if (step.bytes == 0) {
    std::vector<int> all = reads;
    all.insert(all.end(), writes.begin(), writes.end());
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    for (int t : all)
      if (t >= 0) step.bytes += tensors_[static_cast<size_t>(t)].bytes;
  }
  if (step.flops == 0) step.flops = loopKernelFlops(step);
  stepKernel_.push_back(currentKernel_);
  if (step.kind == rt::StepKind::Kernel)
    ++stats_.generatedKernels;
  else
    ++stats_.loopKernels;
  steps_.push_back(std::move(step));
}

void Lowering::addElementwise(const std::string& label, int out, const Shape& outShape,
                              Phys outPhys, int64_t outOffset,
                              const std::vector<int64_t>& outLogicalStrides,
                              const std::vector<EwOperand>& inputs, std::vector<rt::EwInstr> code) {
  // Iterate in the output's physical order: NHWC walks (n, h, w, c). With few channels (an
  // image's 3) that inner loop is too short to pay for its setup: walk (n, c, h, w) and store
  // C apart instead (a 3 x 224 x 224 input reorder: 0.78 -> 0.09 ms).
  std::vector<int> order(static_cast<size_t>(outShape.rank()));
  for (size_t d = 0; d < order.size(); ++d) order[d] = static_cast<int>(d);
  if (outPhys == Phys::Nhwc && outShape.rank() == 4 && outShape[1] >= kShortChannels)
    order = {0, 2, 3, 1};
  // A plain 4-d output read from an NHWC operand (a reorder back, a model output): walk
  // (n, h, c, w), so that the C passes over one input row of W x C stay in L1.
  bool nhwcInput = false;
  for (const EwOperand& in : inputs)
    nhwcInput |= in.strides.size() == 4 && in.strides[1] == 1 && in.strides[3] == outShape[1] &&
                 outShape[1] > 1;
  if (outPhys == Phys::Plain && outShape.rank() == 4 && nhwcInput) order = {0, 2, 1, 3};
  rt::EwProgram p;
  for (int d : order) {
    p.dims.push_back(outShape[d]);
    p.outStrides.push_back(outLogicalStrides[static_cast<size_t>(d)]);
  }
  if (p.dims.empty()) {
    p.dims = {1};
    p.outStrides = {1};
  }
  p.outOffset = outOffset;
  std::vector<int> reads;
  for (const EwOperand& in : inputs) {
    std::vector<int64_t> s;
    for (int d : order) s.push_back(in.strides[static_cast<size_t>(d)]);
    if (s.empty()) s = {0};
    p.inStrides.push_back(s);
    p.inOffsets.push_back(in.offset);
    reads.push_back(in.tensor);
  }
  p.code = std::move(code);
  p.coalesce();
  rt::Step step;
  step.label = label;
  p.encode(step);
  step.tensors.push_back(out);
  for (const EwOperand& in : inputs) step.tensors.push_back(in.tensor);
  double elements = 1;
  for (int64_t d : p.dims) elements *= static_cast<double>(d);
  step.flops = elements * static_cast<double>(
                              std::count_if(p.code.begin(), p.code.end(), [](const rt::EwInstr& i) {
                                return i.op != rt::EwOp::Copy;
                              }));
  addStep(std::move(step), reads, {out});
}

void Lowering::unsupported(const Node& node, const std::string& why) {
  unsupported_.push_back("node '" + node.name + "' (" + std::string(opName(node.kind)) +
                         "): " + why);
}

void Lowering::lowerKernel(const passes::FusedKernel& kernel) {
  // A node that cannot be lowered is reported; its outputs get placeholder buffers so that the
  // rest of the graph is still lowered and every unsupported node is named in one error.
  auto skip = [&](NodeId id) {
    for (ValueId out : graph_.node(id).outputs) defineOutput(out, Phys::Plain);
  };
  size_t at = 0;
  if (kernel.anchor >= 0) {
    at = kernel.nodesInKernel(); // then the views of its result
    if (!lowerAnchor(*this, kernel))
      for (size_t i = 0; i < at; ++i) skip(kernel.nodes[i]);
  }
  while (at < kernel.nodes.size()) {
    if (views_.folded[static_cast<size_t>(kernel.nodes[at])]) { // a MatMul reads or writes it
      ++stats_.foldedTransposes;
      ++at;
      continue;
    }
    size_t next = lowerLight(*this, kernel.nodes, at);
    if (next == at) skip(kernel.nodes[next++]);
    at = next;
  }
}

void Lowering::bindOutputs() {
  const auto& outs = graph_.outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    Phys phys;
    int t = tensorAny(outs[i], phys);
    const rt::TensorRef& ref = tensors_[static_cast<size_t>(t)].ref;
    if (ref.region == rt::Region::Output && ref.offset == static_cast<int64_t>(i)) continue;
    // A model input, a constant (Dropout's mask) or a value another output also names: copied
    // into the caller's buffer, of any element type.
    const Value& v = graph_.value(outs[i]);
    tensors_.push_back({{rt::Region::Output, static_cast<int64_t>(i)}, 0});
    int out = static_cast<int>(tensors_.size()) - 1;
    const Shape& shape = v.type.shape;
    if (!copyTensor(*this, "output '" + graph_.outputName(i) + "'", out, shape, shape.strides(), t,
                    logicalStrides(shape, phys), v.type.dtype))
      unsupported_.push_back("model output '" + graph_.outputName(i) + "' of dtype " +
                             std::string(dtypeName(v.type.dtype)) + " cannot be copied");
  }
}

Expected<Precision> parsePrecision(const std::string& name) {
  if (name == "fp32") return Precision::Fp32;
  if (name == "bf16") return Precision::Bf16;
  return makeError("precision '", name, "' is not one of fp32, bf16");
}

std::string bf16Unavailable(const CompileOptions& options) {
  const Target& t = options.target;
  if (options.precision != Precision::Bf16 || (options.isa == Isa::Avx512 && t.avx512bf16))
    return "";
  std::string has;
  for (const std::string& f : t.featureNames()) has += (has.empty() ? "" : ", ") + f;
  return "the target '" + t.model + "' (" + has + ") has no bf16 instruction at " +
         std::string(spell(options.isa)) +
         " (vdpbf16ps needs AVX-512 with avx512_bf16, AMX's tdpbf16ps a CPU with AMX); compile "
         "for a target that has one (--target FILE) to run bf16 there";
}

int64_t Lowering::bound(const DimExpr& e) const {
  return dimWithin(e, symbolRanges_).max;
}

int32_t Lowering::extentIndex(const DimExpr& e) {
  auto [it, fresh] = extentIndex_.emplace(e.toString(), static_cast<int32_t>(extents_.size()));
  if (fresh) {
    rt::Extent extent;
    for (const auto& [monomial, coefficient] : e.terms()) {
      rt::ExtentTerm term{coefficient, {}};
      for (const std::string& name : monomial) term.symbols.push_back(symbolIndex_.at(name));
      extent.terms.push_back(std::move(term));
    }
    extents_.push_back(std::move(extent));
  }
  return it->second;
}

void Lowering::setInts(rt::Step& step, const std::vector<DimExpr>& ints) {
  step.ints.clear();
  step.runTimeInts.clear();
  for (const DimExpr& e : ints) {
    if (auto c = e.constant()) {
      step.ints.push_back(*c);
      continue;
    }
    step.runTimeInts.push_back({static_cast<int32_t>(step.ints.size()), extentIndex(e)});
    step.ints.push_back(bound(e));
  }
}

std::vector<DimExpr> Lowering::extentsOf(const Shape& shape) {
  std::vector<DimExpr> out;
  for (const Dim& d : shape.symbolicDims()) out.push_back(d.expr);
  return out;
}

std::vector<DimExpr> Lowering::denseStrides(const Shape& shape) {
  std::vector<DimExpr> dims = extentsOf(shape), s(dims.size(), DimExpr(1));
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

std::vector<DimExpr> Lowering::storageStrides(ValueId v) const {
  const Shape& shape = graph_.value(v).type.shape;
  auto it = cacheLayouts_.find(v);
  if (it == cacheLayouts_.end()) return denseStrides(shape);
  std::vector<DimExpr> dims = extentsOf(shape), s(dims.size(), DimExpr(1));
  dims[static_cast<size_t>(it->second.axis)] = DimExpr(it->second.capacity);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

std::string Lowering::cacheReadersBlock(ValueId present) const {
  // The attention's matmuls read a present as their B (K^T through a Transpose read in place,
  // or V): the run-time batched matmul takes its head stride from storageStrides.
  auto matmulB = [&](NodeId m, ValueId b) {
    const Node& n = graph_.node(m);
    return n.kind == OpKind::MatMul && n.inputs.size() == 2 && n.inputs[1] == b && n.inputs[0] != b;
  };
  const auto& outs = graph_.outputs();
  for (NodeId r : readers(present)) {
    const Node& n = graph_.node(r);
    if (matmulB(r, present)) continue;
    bool viewed = n.kind == OpKind::Transpose &&
                  std::find(outs.begin(), outs.end(), n.outputs[0]) == outs.end() &&
                  !readers(n.outputs[0]).empty();
    for (NodeId m : viewed ? readers(n.outputs[0]) : std::vector<NodeId>{}) {
      auto t = views_.bTransposed.find(m);
      viewed = viewed && matmulB(m, n.outputs[0]) && t != views_.bTransposed.end() &&
               t->second == present;
    }
    if (!viewed)
      return std::string(opName(n.kind)) + " '" + n.name +
             "' reads it other than as a matmul's B (the attention's keys or values)";
  }
  return "";
}

void Lowering::planCaches() {
  // A present output that is Concat(past input, the run's rows) along a symbolic axis: past and
  // present share the cache layout, the present's bound (rt::KvCache).
  const auto& ins = graph_.inputs();
  const auto& outs = graph_.outputs();
  if (!symbolic()) return;
  for (size_t o = 0; o < outs.size(); ++o) {
    const ValueId present = outs[o];
    const NodeId producer = graph_.value(present).producer;
    if (producer < 0 || std::count(outs.begin(), outs.end(), present) != 1) continue;
    const Node& concat = graph_.node(producer);
    if (concat.kind != OpKind::Concat || concat.inputs.size() != 2) continue;
    const ValueId past = concat.inputs[0];
    auto in = std::find(ins.begin(), ins.end(), past);
    if (in == ins.end() || cacheLayouts_.count(past)) continue;
    const Shape& ps = graph_.value(past).type.shape;
    const Shape& os = graph_.value(present).type.shape;
    const int64_t attr = std::get<AxisAttrs>(concat.attrs).axis;
    const int axis = static_cast<int>(attr < 0 ? attr + os.rank() : attr);
    if (ps.rank() != os.rank() || os.rank() < 3 || axis < 0 || axis >= os.rank() ||
        ps.dim(axis).isStatic())
      continue;
    std::string why;
    if (readers(past).size() != 1 || std::count(outs.begin(), outs.end(), past) != 0)
      why = "its past '" + graph_.value(past).name + "' is read by more than the Concat";
    else if (concat.inputs[1] == past)
      why = "its Concat repeats the past";
    else
      why = cacheReadersBlock(present);
    if (!why.empty()) {
      if (stats_.kvCacheDense.empty())
        stats_.kvCacheDense = "present '" + graph_.outputName(o) + "': " + why;
      continue;
    }
    const int64_t capacity = bound(os.dim(axis).expr);
    cacheLayouts_[past] = {axis, capacity};
    cacheLayouts_[present] = {axis, capacity};
    rt::KvCache c;
    c.input = static_cast<int32_t>(in - ins.begin());
    c.output = static_cast<int32_t>(o);
    c.axis = axis;
    c.capacity = capacity;
    int64_t bytes = static_cast<int64_t>(dtypeSize(graph_.value(present).type.dtype));
    for (const Dim& d : os.symbolicDims()) bytes *= bound(d.expr);
    c.bytes = bytes;
    caches_.push_back(c);
  }
  // A cache is pointless unless every present of the model is one: then pasts and presents are
  // the caller's cache buffers throughout.
  if (!stats_.kvCacheDense.empty()) {
    cacheLayouts_.clear();
    caches_.clear();
  }
}

void Lowering::addRunTimeElementwise(
    const std::string& label, int out, const Shape& outShape,
    const std::vector<std::pair<int, std::vector<DimExpr>>>& inputs,
    std::vector<rt::EwInstr> code) {
  rt::BasicEwProgram<DimExpr> p;
  p.dims = extentsOf(outShape);
  p.outStrides = denseStrides(outShape);
  if (p.dims.empty()) {
    p.dims = {DimExpr(1)};
    p.outStrides = {DimExpr(1)};
  }
  std::vector<int> reads;
  for (const auto& [tensor, strides] : inputs) {
    p.inStrides.push_back(strides.empty() ? std::vector<DimExpr>{DimExpr(0)} : strides);
    p.inOffsets.push_back(DimExpr(0));
    reads.push_back(tensor);
  }
  p.code = std::move(code);
  p.coalesce();
  rt::Step step;
  step.label = label;
  step.kind = rt::StepKind::Elementwise;
  std::vector<DimExpr> ints;
  p.encode(ints, step.floats);
  setInts(step, ints);
  step.tensors.push_back(out);
  step.tensors.insert(step.tensors.end(), reads.begin(), reads.end());
  double elements = static_cast<double>(outShape.numel()); // at the bound
  step.flops = elements * static_cast<double>(
                              std::count_if(p.code.begin(), p.code.end(), [](const rt::EwInstr& i) {
                                return i.op != rt::EwOp::Copy;
                              }));
  addStep(std::move(step), reads, {out});
}

Status Lowering::run() {
  // The symbols of the inputs' dynamic dimensions: each run binds them from its input shapes.
  for (ValueId in : graph_.inputs())
    for (const Dim& d : graph_.value(in).type.shape.symbolicDims()) {
      const auto& terms = d.expr.terms();
      if (d.isStatic() || terms.size() != 1 || terms.begin()->second != 1 ||
          terms.begin()->first.size() != 1)
        continue;
      const std::string& name = terms.begin()->first[0];
      if (symbolIndex_.emplace(name, static_cast<int32_t>(symbols_.size())).second) {
        symbols_.push_back({name, d.min, d.max});
        symbolRanges_[name] = {d.min, d.max};
      }
    }
  // --precision bf16 on a target without a bf16 instruction: every kernel in fp32, said once.
  stats_.bf16Unavailable = bf16Unavailable(options_);
  if (!stats_.bf16Unavailable.empty()) options_.precision = Precision::Fp32;
  stats_.graphNodes = static_cast<int64_t>(graph_.nodes().size());
  for (ValueId in : graph_.inputs()) {
    Phys phys;
    tensorAny(in, phys);
  }
  planCaches();
  for (size_t k = 0; k < fusion_.kernels.size(); ++k) {
    currentKernel_ = static_cast<int>(k);
    lowerKernel(fusion_.kernels[k]);
  }
  currentKernel_ = -1;
  if (unsupported_.empty()) bindOutputs();
  if (!unsupported_.empty()) {
    std::ostringstream os;
    os << "the compiled path does not support " << unsupported_.size() << " node"
       << (unsupported_.size() > 1 ? "s" : "") << ":";
    for (const std::string& u : unsupported_) os << "\n  " << u;
    os << "\n(`tunec run --reference` runs any supported ONNX model on the reference executor)";
    return Error(os.str());
  }
  return {};
}

CompiledModel Lowering::finish() {
  CompiledModel m;
  // Arena offsets by liveness over the steps.
  std::vector<passes::ArenaRequest> requests;
  std::vector<size_t> which;
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const TensorInfo& info = tensors_[t];
    if (info.ref.region != rt::Region::Arena || info.parent >= 0) continue;
    int first = std::max(info.first, 0);
    requests.push_back({info.bytes, first, std::max(info.last, first)});
    which.push_back(t);
  }
  passes::ArenaLayout arena = passes::planArena(requests);
  for (size_t i = 0; i < which.size(); ++i) tensors_[which[i]].ref.offset = arena.offsets[i];
  for (TensorInfo& info : tensors_)
    if (info.parent >= 0)
      info.ref.offset = tensors_[static_cast<size_t>(info.parent)].ref.offset + info.offsetInParent;
  stats_.arenaBytes = arena.peakBytes;
  stats_.arenaLowerBound = arena.lowerBoundBytes;
  stats_.intermediateBytes = arena.totalBytes;
  stats_.constantBytes = static_cast<int64_t>(constants_.size());
  stats_.steps = static_cast<int64_t>(steps_.size());

  rt::ModelPlan& plan = m.plan;
  // The features of the model's vector ISA (loop kernels) and of each kernel's dot product:
  // model.so refuses to load on a CPU that lacks one, and asks for AMX's permission at load.
  plan.requiredFeatures = isaInfo(options_.isa).needs;
  for (const HeavyKernel& k : kernels_)
    plan.requiredFeatures.add(kernelNeeds(configIsa(k.config), workloadTypes(k.workload)));
  plan.threads = options_.threads;
  plan.arenaBytes = arena.peakBytes;
  // Each cache's arena copy for runs of dense buffers, after the planned tensors.
  for (rt::KvCache c : caches_) {
    c.scratch = (plan.arenaBytes + 63) / 64 * 64;
    plan.arenaBytes = c.scratch + c.bytes;
    plan.caches.push_back(c);
    ++stats_.kvCaches;
    stats_.kvCapacity = std::max(stats_.kvCapacity, c.capacity);
    stats_.kvCacheBytes += c.bytes;
  }
  plan.kernelCount = module_ ? module_->kernelCount() : 0;
  for (const TensorInfo& info : tensors_) plan.tensors.push_back(info.ref);
  plan.steps = std::move(steps_);
  auto io = [&](ValueId v, const std::string& name) {
    const Value& value = graph_.value(v);
    const Shape& shape = value.type.shape;
    rt::IoSpec spec{name,
                    value.type.dtype,
                    shape.dims(),
                    shape.numel() * static_cast<int64_t>(dtypeSize(value.type.dtype)),
                    {}};
    if (!shape.isStatic())
      for (const Dim& d : shape.symbolicDims())
        spec.dimExtents.push_back(d.isStatic() ? -1 : extentIndex(d.expr));
    return spec;
  };
  for (ValueId v : graph_.inputs()) plan.inputs.push_back(io(v, graph_.value(v).name));
  for (size_t i = 0; i < graph_.outputs().size(); ++i)
    plan.outputs.push_back(io(graph_.outputs()[i], graph_.outputName(i)));
  plan.symbols = symbols_;
  plan.extents = extents_;
  m.constants = std::move(constants_);
  m.kernels = std::move(kernels_);
  m.stats = stats_;
  return m;
}

Expected<CompiledModel> compileModel(const Graph& graph, Jit& jit, const CompileOptions& options) {
  TUNEC_ASSERT(jit.target().toJson() == options.target.toJson(),
               "the Jit and the compile options name different targets");
  TUNEC_TRY(checkTargetSupports(options.target, options.isa));
  auto module = std::make_unique<ModelModule>(jit, options.isa);
  Lowering lowering(graph, options, module.get());
  TUNEC_TRY(lowering.run());
  CompiledModel m = lowering.finish();
  m.targetKey = db::TargetInfo::fromTarget(options.target).key();
  m.module = std::move(module);
  return m;
}

Expected<std::vector<HeavyKernel>> extractHeavyKernels(const Graph& graph,
                                                       const CompileOptions& options) {
  Lowering lowering(graph, options, nullptr);
  TUNEC_TRY(lowering.run());
  return lowering.finish().kernels;
}

std::string stepsSummary(const CompileStats& s) {
  std::ostringstream os;
  os << s.graphNodes << " graph nodes -> " << s.steps << " steps (" << s.generatedKernels
     << " generated kernels, " << s.loopKernels << " loop kernels; " << s.reorders << " reorders, "
     << s.aliases << " views, " << s.foldedTransposes << " transposes read in place by matmuls)";
  return os.str();
}

CompileOutline Lowering::outline() const {
  CompileOutline o;
  o.fusion = fusion_;
  for (size_t i = 0; i < steps_.size(); ++i)
    o.steps.push_back({steps_[i].label, steps_[i].kind == rt::StepKind::Kernel, stepKernel_[i]});
  o.reorders = reorderNotes_;
  for (const auto& [value, produced] : produced_) o.nhwcTensors += produced.second == Phys::Nhwc;
  o.stats = stats_;
  o.stats.steps = static_cast<int64_t>(steps_.size());
  return o;
}

Expected<CompileOutline> outlineCompile(const Graph& graph, const CompileOptions& options) {
  Lowering lowering(graph, options, nullptr);
  TUNEC_TRY(lowering.run());
  return lowering.outline();
}

std::string compileReport(const CompiledModel& model) {
  std::ostringstream os;
  int tuned = 0;
  for (const HeavyKernel& k : model.kernels) tuned += k.tuned;
  os << model.kernels.size() << " heavy kernels: " << tuned << " tuned, "
     << model.kernels.size() - static_cast<size_t>(tuned) << " with the analytical default\n";
  if (!model.stats.bf16Unavailable.empty())
    os << "--precision bf16: every kernel in fp32: " << model.stats.bf16Unavailable << "\n";
  size_t bf16 = static_cast<size_t>(
      std::count_if(model.kernels.begin(), model.kernels.end(),
                    [](const HeavyKernel& k) { return isBf16Gemm(workloadTypes(k.workload)); }));
  if (bf16) {
    const auto slower =
        static_cast<size_t>(std::count_if(model.kernels.begin(), model.kernels.end(),
                                          [](const HeavyKernel& k) { return k.bf16Slower; }));
    os << bf16 << " of them in bf16 (f32 accumulation)";
    if (slower)
      os << ", " << slower << " in fp32 where vdpbf16ps is slower than the FMA (marked below)";
    if (bf16 + slower < model.kernels.size())
      os << ", " << (slower ? "" : "the other ") << model.kernels.size() - bf16 - slower
         << " in fp32 (no bf16 form: depthwise, an odd number of input channels, a fused channel "
            "scale, a matmul of computed operands outside attention)";
    os << "\n";
    if (model.stats.bf16Activations)
      os << model.stats.bf16Activations
         << (model.stats.bf16Activations > 1 ? " activations" : " activation")
         << " between bf16 kernels stored in bf16 (rounded once, by the producer)\n";
  }
  for (const HeavyKernel& k : model.kernels)
    os << "  " << (k.tuned ? "tuned  " : "default") << "  " << k.label << "\n";
  std::set<std::string> others;
  int elsewhere = 0;
  for (const HeavyKernel& k : model.kernels) {
    others.insert(k.otherTargets.begin(), k.otherTargets.end());
    elsewhere += !k.otherTargets.empty();
  }
  if (elsewhere) {
    std::string keys;
    for (const std::string& key : others) keys += (keys.empty() ? "" : ", ") + key;
    os << "warning: " << elsewhere << " kernel" << (elsewhere > 1 ? "s" : "")
       << " left at the default " << (elsewhere > 1 ? "have" : "has")
       << " records in the database for another target (" << keys << ") but none for this one ("
       << model.targetKey
       << "); records apply to the machine they were measured on: tune on this machine, or "
          "compile with --target FILE for the machine they came from\n";
  }
  // Records of this machine the compile's flags did not reach.
  std::set<int64_t> threadCounts;
  int atOtherThreads = 0, atOtherPrecision = 0;
  for (const HeavyKernel& k : model.kernels) {
    if (k.tuned) continue;
    threadCounts.insert(k.otherThreads.begin(), k.otherThreads.end());
    atOtherThreads += !k.otherThreads.empty();
    atOtherPrecision += k.otherPrecision;
  }
  if (atOtherThreads) {
    std::string counts;
    for (int64_t t : threadCounts) counts += (counts.empty() ? "" : ", ") + std::to_string(t);
    os << "warning: " << atOtherThreads << " kernel" << (atOtherThreads > 1 ? "s" : "")
       << " left at the default " << (atOtherThreads > 1 ? "have" : "has")
       << " records for this machine at another thread count (" << counts
       << ") but none at this compile's; kernels are tuned per thread count: compile "
       << "with --threads " << *threadCounts.begin() << " to use them, or tune at this count\n";
  }
  if (atOtherPrecision)
    os << "warning: " << atOtherPrecision << " kernel" << (atOtherPrecision > 1 ? "s" : "")
       << " left at the default " << (atOtherPrecision > 1 ? "have" : "has")
       << " records for this machine in the other precision; compile "
          "with the --precision they were tuned with to use them, or tune at this one\n";
  const CompileStats& s = model.stats;
  os << stepsSummary(s) << "\n";
  if (s.quantizeSteps || s.quantizeNodesImported) {
    os << "quantized model (" << s.quantizeNodesImported
       << " QuantizeLinear/DequantizeLinear nodes): " << s.int8Kernels
       << " Conv/MatMul/Gemm layers of u8 activations and constant s8 weights run as int8 "
          "kernels; the other heavy kernels run dequantized in fp32 (constant weights "
          "dequantized at compile time), activation round trips as f32 arithmetic, and "
       << s.quantizeSteps << " quantize steps as element steps\n";
    // Which quantized layers stay fp32, and why (the first ones; the count of all).
    std::map<std::string, std::pair<std::string, int>> reasons; // why -> first layer, count
    for (const auto& [layer, why] : s.quantizedKeptFloat)
      ++reasons.try_emplace(why, layer, 0).first->second.second;
    for (const auto& [why, firstAndCount] : reasons) {
      const auto& [first, count] = firstAndCount;
      os << "  " << count << " quantized layer" << (count > 1 ? "s" : "") << " in fp32 ("
         << forTerminal(first) << (count > 1 ? ", ..." : "") << "): " << why << "\n";
    }
    if (s.halvedInt8Kernels)
      os << "warning: " << s.halvedInt8Kernels << " int8 kernel"
         << (s.halvedInt8Kernels > 1 ? "s have" : " has")
         << " 8-bit weights, which AVX2's vpmaddubsw kernel halves to 7 bits (one bit of each "
            "weight lost); quantize with 'tunec quantize --weight-bits 7' to keep them exact on "
            "AVX2 targets\n";
  }
  if (s.exactIntegerSteps)
    os << s.exactIntegerSteps << " integer product" << (s.exactIntegerSteps > 1 ? "s" : "")
       << " summed exactly in int32 on the runtime's integer steps ("
       << forTerminal(s.firstExactIntegerStep) << (s.exactIntegerSteps > 1 ? ", ..." : "")
       << "): the int8 kernels' f32 sums are not exact for them (sums past 2^24 that the "
          "model reads as int32, or operands that are not u8 x constant 8-bit weights)\n";
  char line[200];
  std::snprintf(
      line, sizeof(line),
      "arena %.2f MB (live-set lower bound %.2f MB, %.3fx; %.2f MB without reuse); "
      "constants %.2f MB\n",
      static_cast<double>(s.arenaBytes) / 1e6, static_cast<double>(s.arenaLowerBound) / 1e6,
      s.arenaLowerBound ? static_cast<double>(s.arenaBytes) / static_cast<double>(s.arenaLowerBound)
                        : 1.0,
      static_cast<double>(s.intermediateBytes) / 1e6, static_cast<double>(s.constantBytes) / 1e6);
  os << line;
  if (s.kvCaches > 0) {
    std::snprintf(line, sizeof(line),
                  "K/V caches kept in place: %lld (capacity %lld positions, %.2f MB in all): "
                  "past and present one buffer, only a run's new rows written\n",
                  static_cast<long long>(s.kvCaches), static_cast<long long>(s.kvCapacity),
                  static_cast<double>(s.kvCacheBytes) / 1e6);
    os << line;
  } else if (!s.kvCacheDense.empty()) {
    os << "K/V caches copied each run (the past into the present): " << forTerminal(s.kvCacheDense)
       << "\n";
  }
  const rt::ModelPlan& plan = model.plan;
  if (plan.imageExtent >= 0) {
    const rt::SymbolSpec& images = plan.symbols.at(0);
    std::snprintf(line, sizeof(line),
                  "dynamic batch '%s' (%lld..%lld): the plan of one image runs once per image "
                  "of the run; the arena is one image's, %.2f MB at any batch\n",
                  images.name.c_str(), static_cast<long long>(images.min),
                  static_cast<long long>(images.max), static_cast<double>(plan.arenaBytes) / 1e6);
    os << line;
  }
  return os.str();
}

} // namespace tunec::driver
