// A Concat read only by Gathers along its axis whose constant indices split its channels into
// parts (ShuffleNet's shuffle and chunk after recognize-channel-shuffle and
// fold-slice-of-gather: each half takes a quarter of each input) is rebuilt from slices of its
// inputs, ordered so that each Gather reads one contiguous range of the new Concat, in an order
// of its own: [x1's first quarter, the branch, x1's last quarter] for two halves. Each Gather
// is then a permutation of a range, which a convolution absorbs into its weights and reads in
// place, and each input is one range the producer writes in place (passes/channel_views.h).
#include "ir/op_registry.h"
#include "passes/passes.h"
#include "passes/pattern.h"
#include "passes/rewriter.h"

#include <map>

namespace tunec::passes {

namespace {

// The part of input `input` (channels [lo, hi) of it) placed at `at` in the new Concat.
struct Piece {
  size_t input;
  int64_t lo, hi, at;
};

struct Order {
  std::vector<Piece> pieces;
  std::map<NodeId, Tensor> indices; ///< per Gather, its indices into the new Concat
};

// A part that is not a whole input is only worth cutting when the cut costs no copy: the
// input is a Gather by constant indices (fold-slice-of-gather cuts its indices) or a Conv, maybe
// through one-to-one activations, read by nothing else (split-conv-for-slices splits it).
bool cuttable(const Graph& graph, ValueId v, const std::vector<int>& uses) {
  const Node* p = producerOf(graph, v);
  if (p && p->kind == OpKind::Gather) return true;
  while (p && uses[static_cast<size_t>(v)] == 1 && isChannelwiseActivation(p->kind)) {
    v = p->inputs[0];
    p = producerOf(graph, v);
  }
  return p && uses[static_cast<size_t>(v)] == 1 && splitsByOutputChannels(graph, *p);
}

std::optional<Order> orderFor(const Graph& graph, const Node& concat,
                              const std::vector<std::vector<NodeId>>& readers,
                              const std::vector<int>& uses) {
  const Shape& ys = graph.value(concat.outputs[0]).type.shape;
  auto axis = normalizeAxis(std::get<AxisAttrs>(concat.attrs).axis, ys.rank());
  const std::vector<NodeId>& gathers = readers[static_cast<size_t>(concat.outputs[0])];
  if (!axis || gathers.size() < 2 ||
      uses[static_cast<size_t>(concat.outputs[0])] != static_cast<int>(gathers.size()))
    return std::nullopt;
  // Where each channel of the Concat comes from.
  std::vector<std::pair<size_t, int64_t>> source;
  for (size_t i = 0; i < concat.inputs.size(); ++i)
    for (int64_t c = 0; c < graph.value(concat.inputs[i]).type.shape[static_cast<int>(*axis)]; ++c)
      source.emplace_back(i, c);
  std::vector<std::vector<int64_t>> idx;
  std::vector<int> taken(source.size(), 0);
  for (NodeId gid : gathers) {
    const Node& g = graph.node(gid);
    if (g.kind != OpKind::Gather || g.inputs[0] != concat.outputs[0]) return std::nullopt;
    auto indices = constantGatherIndices(graph, g, *axis);
    if (!indices) return std::nullopt;
    for (int64_t i : *indices) ++taken[static_cast<size_t>(i)];
    idx.push_back(std::move(*indices));
  }
  for (int t : taken)
    if (t != 1) return std::nullopt; // not a partition of the channels
  // Per Gather and input, the input's channels it reads: one range, or no rewrite.
  const size_t inputs = concat.inputs.size();
  std::vector<std::vector<std::pair<int64_t, int64_t>>> range(
      gathers.size(), std::vector<std::pair<int64_t, int64_t>>(inputs, {0, 0}));
  for (size_t j = 0; j < gathers.size(); ++j) {
    std::vector<int64_t> count(inputs, 0), lo(inputs, INT64_MAX), hi(inputs, -1);
    for (int64_t t : idx[j]) {
      auto [i, c] = source[static_cast<size_t>(t)];
      ++count[i];
      lo[i] = std::min(lo[i], c);
      hi[i] = std::max(hi[i], c + 1);
    }
    for (size_t i = 0; i < inputs; ++i) {
      if (!count[i]) continue;
      if (hi[i] - lo[i] != count[i]) return std::nullopt;
      range[j][i] = {lo[i], hi[i]};
    }
  }
  // Gathers in order; the inputs forwards in even ones and backwards in odd ones, so that
  // neighbouring Gathers meet in one input, whose two parts join into one piece.
  Order order;
  bool reordered = false;
  int64_t at = 0;
  for (size_t j = 0; j < gathers.size(); ++j)
    for (size_t k = 0; k < inputs; ++k) {
      size_t i = j % 2 ? inputs - 1 - k : k;
      auto [lo, hi] = range[j][i];
      if (lo == hi) continue;
      if (!order.pieces.empty() && order.pieces.back().input == i && order.pieces.back().hi == lo)
        order.pieces.back().hi = hi;
      else
        order.pieces.push_back({i, lo, hi, at});
      at += hi - lo;
    }
  for (size_t p = 0; p < order.pieces.size(); ++p) {
    const Piece& piece = order.pieces[p];
    int64_t whole = graph.value(concat.inputs[piece.input]).type.shape[static_cast<int>(*axis)];
    reordered |= p != piece.input || piece.lo != 0 || piece.hi != whole;
    if ((piece.lo != 0 || piece.hi != whole) && !cuttable(graph, concat.inputs[piece.input], uses))
      return std::nullopt;
  }
  if (!reordered) return std::nullopt; // each Gather already reads in place
  for (size_t j = 0; j < gathers.size(); ++j) {
    Tensor t(DType::I64, Shape{static_cast<int64_t>(idx[j].size())});
    for (size_t k = 0; k < idx[j].size(); ++k) {
      auto [i, c] = source[static_cast<size_t>(idx[j][k])];
      for (const Piece& piece : order.pieces)
        if (piece.input == i && c >= piece.lo && c < piece.hi)
          t.dataAs<int64_t>()[k] = piece.at + c - piece.lo;
    }
    order.indices.emplace(gathers[j], std::move(t));
  }
  return order;
}

} // namespace

Expected<Graph> orderConcatForGathers(const Graph& graph) {
  std::vector<int> uses = useCounts(graph);
  std::vector<std::vector<NodeId>> readers = readersOf(graph);
  std::map<NodeId, Order> orders;
  for (size_t n = 0; n < graph.nodes().size(); ++n)
    if (const Node& node = graph.nodes()[n]; node.kind == OpKind::Concat)
      if (auto order = orderFor(graph, node, readers, uses))
        orders.emplace(static_cast<NodeId>(n), std::move(*order));
  if (orders.empty()) return graph;
  std::map<NodeId, std::pair<ValueId, const Tensor*>> regathered; // Gather -> (source, indices)
  GraphRewriter rw(graph);
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    auto id = static_cast<NodeId>(n);
    if (auto it = orders.find(id); it != orders.end()) {
      const Shape& ys = graph.value(node.outputs[0]).type.shape;
      auto axis =
          static_cast<size_t>(*normalizeAxis(std::get<AxisAttrs>(node.attrs).axis, ys.rank()));
      std::vector<ValueId> parts;
      for (const Piece& piece : it->second.pieces) {
        ValueId in = node.inputs[piece.input];
        const Shape& is = graph.value(in).type.shape;
        if (piece.lo == 0 && piece.hi == is[static_cast<int>(axis)]) {
          parts.push_back(rw.map(in));
          continue;
        }
        std::string name = node.name + ".part" + std::to_string(parts.size());
        TUNEC_ASSIGN_OR_RETURN(auto outs, rw.add(name, OpKind::Slice,
                                                 sliceAlong(is, static_cast<int64_t>(axis),
                                                            piece.lo, piece.hi - piece.lo),
                                                 {rw.map(in)}, {name + "_output"}));
        parts.push_back(outs[0]);
      }
      TUNEC_ASSIGN_OR_RETURN(auto outs, rw.add(node.name + ".ordered", OpKind::Concat, node.attrs,
                                               parts, {graph.value(node.outputs[0]).name}));
      for (const auto& [gather, indices] : it->second.indices)
        regathered[gather] = {outs[0], &indices};
      continue;
    }
    if (auto it = regathered.find(id); it != regathered.end()) {
      ValueId indices = rw.constant(node.name + ".indices", *it->second.second);
      TUNEC_ASSIGN_OR_RETURN(auto outs, rw.add(node.name, OpKind::Gather, node.attrs,
                                               {it->second.first, indices},
                                               {graph.value(node.outputs[0]).name}));
      rw.replace(node.outputs[0], outs[0]);
      continue;
    }
    TUNEC_TRY(rw.copy(node));
  }
  return rw.finish();
}

} // namespace tunec::passes
