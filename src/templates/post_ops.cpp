// Epilogue naming and queries.
#include "templates/post_ops.h"

namespace tunec {

std::string epilogueName(const Epilogue& epilogue) {
  std::string s;
  for (const PostOp& p : epilogue) {
    if (!s.empty()) s += "+";
    switch (p.kind) {
    case PostOpKind::BiasPerColumn:
      s += "bias";
      break;
    case PostOpKind::Relu:
      s += "relu";
      break;
    case PostOpKind::Clip:
      s += "clip";
      break;
    case PostOpKind::AddTensor:
      s += "add";
      break;
    case PostOpKind::Gelu:
      s += "gelu";
      break;
    case PostOpKind::Scale:
      s += "scale";
      break;
    case PostOpKind::LeakyRelu:
      s += "leakyrelu";
      break;
    case PostOpKind::HardSigmoid:
      s += "hardsigmoid";
      break;
    case PostOpKind::HardSwish:
      s += "hardswish";
      break;
    case PostOpKind::Sigmoid:
      s += "sigmoid";
      break;
    case PostOpKind::Swish:
      s += p.lo == 1.f ? "silu" : "swish";
      break;
    case PostOpKind::Tanh:
      s += "tanh";
      break;
    case PostOpKind::Exp:
      s += "exp";
      break;
    case PostOpKind::Round:
      s += "round";
      break;
    case PostOpKind::LayerNormRow:
      s += "layernorm";
      break;
    case PostOpKind::ScalePerColumn:
      s += "mul";
      break;
    case PostOpKind::PReluPerColumn:
      s += "prelu";
      break;
    case PostOpKind::QuantizeU8:
      s += "quantize";
      break;
    case PostOpKind::AddDequantizedU8:
      s += "addu8";
      break;
    }
  }
  return s;
}

bool epilogueNeedsBias(const Epilogue& epilogue) {
  for (const PostOp& p : epilogue)
    if (p.kind == PostOpKind::BiasPerColumn) return true;
  return false;
}

bool epilogueNeedsColumnScale(const Epilogue& epilogue) {
  for (const PostOp& p : epilogue)
    if (readsColumnScale(p.kind)) return true;
  return false;
}

bool epilogueNeedsAddend(const Epilogue& epilogue) {
  for (const PostOp& p : epilogue)
    if (readsAddend(p.kind)) return true;
  return false;
}

DType epilogueAddendType(const Epilogue& epilogue, DType dst) {
  for (const PostOp& p : epilogue)
    if (p.kind == PostOpKind::AddDequantizedU8) return DType::U8;
  return dst == DType::U8 ? DType::F32 : dst;
}

Status checkEpilogueStores(const Epilogue& epilogue, DType dst) {
  const bool quantizes = !epilogue.empty() && epilogue.back().kind == PostOpKind::QuantizeU8;
  if ((dst == DType::U8) != quantizes)
    return Error("a u8 C is written by a requantizing epilogue (quantize last), and only a u8 C "
                 "is; this one is " +
                 std::string(dtypeName(dst)) + " with " +
                 (epilogue.empty() ? std::string("no epilogue") : epilogueName(epilogue)));
  return {};
}

Status epilogueAccepts(const Epilogue& sofar, const PostOp& next) {
  if (!sofar.empty() && sofar.back().kind == PostOpKind::LayerNormRow)
    return Error("nothing follows a row normalization in an epilogue");
  if (!sofar.empty() && sofar.back().kind == PostOpKind::QuantizeU8)
    return Error("nothing follows the quantization to u8 in an epilogue (it is how C is stored)");
  if (next.kind == PostOpKind::BiasPerColumn && epilogueNeedsBias(sofar))
    return Error("the kernel reads one bias vector and its epilogue has one already (a "
                 "per-channel add right after it merges into it)");
  if (readsColumnScale(next.kind) && epilogueNeedsColumnScale(sofar))
    return Error("the kernel reads one column-scale vector and its epilogue has one already");
  if (readsAddend(next.kind) && epilogueNeedsAddend(sofar))
    return Error("the kernel reads one addend tensor and its epilogue adds one already");
  return {};
}

} // namespace tunec
