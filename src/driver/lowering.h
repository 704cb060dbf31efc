// Internal to the driver: the state of lowering one graph to steps. lower_anchor.cpp turns an
// anchor and the post-ops its epilogue absorbs into a generated kernel; lower_light.cpp turns
// the other nodes into loop-kernel steps; compile_model.cpp drives both and plans the arena.
#pragma once

#include "driver/compile_model.h"
#include "passes/channel_views.h"
#include "passes/fusion_plan.h"
#include "passes/operand_views.h"
#include "runtime/kernel_args.h"
#include "runtime/light_kernels.h"

#include <map>
#include <set>

namespace tunec::driver {

/// Physical layouts the lowering tracks: plain row-major or NHWC (4-d).
enum class Phys { Plain, Nhwc };

class Lowering {
public:
  Lowering(const Graph& graph, const CompileOptions& options, ModelModule* module);
  Status run();
  CompiledModel finish();
  /// The steps built so far, each with its plan kernel, and the reorders (for outlineCompile).
  CompileOutline outline() const;

  // Used by the anchor and light lowerers.
  const Graph& graph() const { return graph_; }
  const CompileOptions& options() const { return options_; }
  ModelModule* module() { return module_; }
  /// The kernels the fusion plan decided, and each node's kernel.
  const passes::FusionPlan& fusion() const { return fusion_; }
  /// Transposes that MatMuls read or write in place (strided operands).
  const passes::OperandViews& operandViews() const { return views_; }
  /// Concat inputs written in place and channel Slices read in place (NHWC channel ranges).
  const passes::ChannelViews& channelViews() const { return channelViews_; }
  /// The constants the nodes read exceed this machine's L3, so every heavy kernel reads its
  /// weights from memory: its workload is marked cold_weights (tuned and looked up as such).
  bool weightsCold() const { return weightsCold_; }
  /// The tensor holding `v` in layout `want` (reordering it once, on demand).
  int tensorIn(ValueId v, Phys want);
  /// The tensor holding `v` in whatever layout it was produced in.
  int tensorAny(ValueId v, Phys& phys);
  /// The layout `v` was produced in (plain for model inputs, constants and values not lowered
  /// yet); materializes nothing.
  Phys producedPhys(ValueId v) const;
  /// A new tensor for a node's output `v` in layout `phys` (the model output buffer when `v` is
  /// a model output and the layout is plain).
  int defineOutput(ValueId v, Phys phys);
  /// `v` shares the bytes of `source` (reshape-like ops).
  void defineAlias(ValueId v, int source, Phys phys);
  /// `v` held NHWC, and its pixel stride when it is a channel range of a wider tensor (`ld`;
  /// 0 when dense): for kernels that read channel slices in place.
  int tensorStrided(ValueId v, int64_t& ld);
  /// The NHWC buffer of a Concat of channel views (created on first use; the Concat's output).
  int concatBuffer(NodeId concat);
  /// For a Concat input its producer writes in place: its part of the Concat's buffer, whose
  /// pixel stride is `ld` (0 when the part is the whole buffer); `v` is defined as that part.
  int channelSlot(ValueId v, int64_t& ld);
  /// True when `v`'s producer wrote it in place (channelSlot was called for it).
  bool wroteInPlace(ValueId v) const { return inPlace_.count(v) > 0; }
  /// The element type `v` is stored in: its graph type, or bf16 for an activation between
  /// bf16 kernels that its producer writes as bf16 (storeAsBf16).
  DType storedType(ValueId v) const {
    return bf16Stored_.count(v) ? DType::BF16 : graph_.value(v).type.dtype;
  }
  /// The kernel producing `v` writes it as bf16 (storeResult decided it); before its output is
  /// defined.
  void storeAsBf16(ValueId v) {
    bf16Stored_.insert(v);
    ++stats_.bf16Activations;
  }
  /// How many nodes read `v` (model outputs count as a read).
  int uses(ValueId v) const { return uses_[static_cast<size_t>(v)]; }
  /// The nodes that read `v`, in node order (once per input slot).
  const std::vector<NodeId>& readers(ValueId v) const { return readers_[static_cast<size_t>(v)]; }
  /// `v` is channels [offset, offset + C) of `source`, an NHWC tensor of pixel stride `ld`.
  void defineChannelView(ValueId v, int source, int64_t offset, int64_t ld);
  /// A new arena tensor (a temporary between steps).
  int addArenaTensor(int64_t bytes);
  /// `v` is the bytes of arena tensor `parent` from `byteOffset` on, plain (a part of a split
  /// output: the part's own dense tensor, placed with its siblings).
  void definePart(ValueId v, int parent, int64_t byteOffset);
  /// A constant tensor from raw bytes (64-byte aligned in the blob).
  int addConstant(const void* data, size_t bytes);
  /// A constant of the vector's elements (their size from the element type, never a literal).
  template <typename T> int addConstant(const std::vector<T>& v) {
    return addConstant(v.data(), v.size() * sizeof(T));
  }
  /// Appends a step; records the uses and definitions of its tensors for the arena plan.
  void addStep(rt::Step step, std::vector<int> reads, std::vector<int> writes);
  void noteHeavy(HeavyKernel k) { kernels_.push_back(std::move(k)); }
  void noteQuantizeStep() { ++stats_.quantizeSteps; }
  void noteExactIntegerStep(const std::string& label) {
    if (stats_.exactIntegerSteps++ == 0) stats_.firstExactIntegerStep = label;
  }
  void noteInt8Kernel(bool halvedWeights) {
    ++stats_.int8Kernels;
    stats_.halvedInt8Kernels += halvedWeights;
  }
  void unsupported(const Node& node, const std::string& why);
  /// Logical row-major strides of a tensor of `shape` stored in layout `phys`.
  static std::vector<int64_t> logicalStrides(const Shape& shape, Phys phys);
  /// Whether `shape` has the same bytes in both layouts (not 4-d, 1x1 spatial, or 1 channel).
  static bool sameBytes(const Shape& shape);
  /// Logical strides of a 4-d tensor stored NHWC with `ld` elements between pixels.
  static std::vector<int64_t> nhwcStrides(const Shape& shape, int64_t ld);
  CompileStats& stats() { return stats_; }

  // ---- symbolic dimensions: extents of the run (DESIGN.md, decision 1) ----------------------
  /// The model has inputs of symbolic shape.
  bool symbolic() const { return !symbols_.empty(); }
  /// The largest value of `e` within the symbols' bounds (what is sized at compile time).
  int64_t bound(const DimExpr& e) const;
  /// The plan's index of the extent `e` (added on first use).
  int32_t extentIndex(const DimExpr& e);
  /// Sets a step's ints: constants as they are, a symbolic extent as its bound and a run-time
  /// int that the executor replaces by the run's value.
  void setInts(rt::Step& step, const std::vector<DimExpr>& ints);
  /// The dimensions of a shape as extents.
  static std::vector<DimExpr> extentsOf(const Shape& shape);
  /// Row-major strides of a dense tensor of `shape` at the run's extents.
  static std::vector<DimExpr> denseStrides(const Shape& shape);

  // ---- K/V caches kept in place (rt::KvCache) ------------------------------------------------
  /// The strides `v` is stored at: dense, but for a past or present of a K/V cache kept in place,
  /// whose cache axis has the capacity's pitch. Only the lowerers that read these strides
  /// (a run-time Concat and BatchedMatmul) may read such a value, inside a CacheLayoutRead.
  std::vector<DimExpr> storageStrides(ValueId v) const;
  /// While alive, tensorIn may return a value stored in a cache layout.
  struct CacheLayoutRead {
    explicit CacheLayoutRead(Lowering& l) : l_(l) { ++l_.cacheLayoutReaders_; }
    ~CacheLayoutRead() { --l_.cacheLayoutReaders_; }
    CacheLayoutRead(const CacheLayoutRead&) = delete;
    CacheLayoutRead& operator=(const CacheLayoutRead&) = delete;

  private:
    Lowering& l_;
  };
  /// A symbolic-shape elementwise step over plain dense tensors: `inputs` are (tensor, strides
  /// aligned to the output's dims, 0 along a broadcast one).
  void addRunTimeElementwise(const std::string& label, int out, const Shape& outShape,
                             const std::vector<std::pair<int, std::vector<DimExpr>>>& inputs,
                             std::vector<rt::EwInstr> code);

  /// Builds an elementwise step writing `out` (logical shape, layout) from the given operands.
  /// `inputs` are (tensor, logical strides aligned to the output's logical dims, offset).
  struct EwOperand {
    int tensor;
    std::vector<int64_t> strides;
    int64_t offset = 0;
  };
  void addElementwise(const std::string& label, int out, const Shape& outShape, Phys outPhys,
                      int64_t outOffset, const std::vector<int64_t>& outLogicalStrides,
                      const std::vector<EwOperand>& inputs, std::vector<rt::EwInstr> code);
  /// Broadcast strides of a tensor of `shape` (logical strides `strides`) against `outShape`.
  static std::vector<int64_t>
  broadcastStrides(const Shape& shape, const std::vector<int64_t>& strides, const Shape& outShape);

private:
  void lowerKernel(const passes::FusedKernel& kernel);
  /// Finds the K/V caches to keep in place (caches_, cacheLayouts_); before any lowering.
  void planCaches();
  /// Why `present`'s readers cannot read it in a cache layout ("" when they all can).
  std::string cacheReadersBlock(ValueId present) const;
  /// `v` as channels [offset, ..) of `source`, NHWC with pixel stride `ld`; returns the stride
  /// recorded for it (0: the part is as wide as `source`, dense).
  int64_t defineStridedPart(ValueId v, int source, int64_t offset, int64_t ld);
  void bindOutputs();

  const Graph& graph_;
  CompileOptions options_;
  ModelModule* module_;
  passes::FusionPlan fusion_;
  int currentKernel_ = -1; ///< the plan kernel being lowered (-1: model inputs and outputs)
  std::vector<int> stepKernel_;
  std::vector<ReorderOutline> reorderNotes_;
  passes::OperandViews views_;
  passes::ChannelViews channelViews_;
  std::vector<int> uses_;                    ///< per value, its readers (passes::useCounts)
  std::vector<std::vector<NodeId>> readers_; ///< per value, the nodes reading it (readersOf)
  bool weightsCold_ = false;
  struct TensorInfo {
    rt::TensorRef ref;
    int64_t bytes = 0;
    int first = -1, last = -1; ///< steps that define and last use it (arena tensors)
    int parent = -1;           ///< a part: the arena tensor it lies in, at offsetInParent
    int64_t offsetInParent = 0;
  };
  std::vector<TensorInfo> tensors_;
  std::map<ValueId, std::pair<int, Phys>> produced_;
  std::map<std::pair<ValueId, Phys>, int> reordered_;
  std::map<ValueId, int64_t> pixelStride_; ///< NHWC channel views: their pixel stride
  std::set<ValueId> inPlace_;              ///< values their producer wrote into a Concat
  std::set<ValueId> bf16Stored_;           ///< f32 activations stored as bf16 (storeAsBf16)
  std::map<NodeId, int> concatBuffers_;
  std::vector<rt::Step> steps_;
  std::vector<uint8_t> constants_;
  std::vector<HeavyKernel> kernels_;
  std::vector<std::string> unsupported_;
  CompileStats stats_;
  std::vector<rt::SymbolSpec> symbols_;        ///< the inputs' symbols, in order of appearance
  std::map<std::string, int32_t> symbolIndex_; ///< by name
  SymbolRanges symbolRanges_;                  ///< their bounds, by name (for dimWithin)
  std::vector<rt::Extent> extents_;
  std::map<std::string, int32_t> extentIndex_; ///< by DimExpr::toString()
  struct CacheLayout {
    int axis = 0;
    int64_t capacity = 0;
  };
  std::map<ValueId, CacheLayout> cacheLayouts_; ///< pasts and presents kept in place
  std::vector<rt::KvCache> caches_;             ///< input and output indices, axis, capacity
  int cacheLayoutReaders_ = 0;                  ///< CacheLayoutRead scopes alive
};

/// --precision bf16's decision for an anchored kernel (a conv2d or a matmul outside attention):
/// whether it runs in bf16, as lowerAnchor decides, for a kernel whose input is not a model's
/// NCHW image (the kernels that read another bf16 kernel's output); for a depthwise conv, whether
/// it takes bf16 activations. Nothing is lowered or reported.
bool anchorRunsBf16(Lowering& l, const passes::FusedKernel& kernel);
/// The element type the result of `producer` (an anchored kernel that runs in bf16, or a
/// depthwise conv that takes bf16 activations) is stored in, decided as it is lowered
/// (plan_bf16_activations.cpp): bf16 when every reader is a bf16 kernel reading it as its A, so
/// it would round it to bf16 anyway (recorded: storedType says so from then on); else its graph
/// type.
DType storeResult(Lowering& l, const passes::FusedKernel& producer);
/// Lowers an anchored kernel of the fusion plan, its anchor with the epilogue the plan decided,
/// as one generated-kernel step; false when the anchor is not one the templates implement (after
/// reporting why).
bool lowerAnchor(Lowering& l, const passes::FusedKernel& kernel);
/// Lowers nodes[begin..] (light ops): a run of elementwise ops becomes one step; returns the
/// index after the nodes it consumed.
size_t lowerLight(Lowering& l, const std::vector<NodeId>& nodes, size_t begin);

/// A strided copy of a tensor of any supported dtype into `out`; false for unsupported dtypes.
bool copyTensor(Lowering& l, const std::string& label, int out, const Shape& shape,
                const std::vector<int64_t>& outStrides, int in,
                const std::vector<int64_t>& inStrides, DType dtype);

/// The elementwise op of a node when it is one the loop kernels run (f32 only).
std::optional<rt::EwOp> elementwiseOp(const Node& node, float& p0, float& p1);

} // namespace tunec::driver
