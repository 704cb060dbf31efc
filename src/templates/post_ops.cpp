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
    }
  }
  return s;
}

bool epilogueNeedsBias(const Epilogue& epilogue) {
  for (const PostOp& p : epilogue)
    if (p.kind == PostOpKind::BiasPerColumn) return true;
  return false;
}

bool epilogueNeedsAddend(const Epilogue& epilogue) {
  for (const PostOp& p : epilogue)
    if (p.kind == PostOpKind::AddTensor) return true;
  return false;
}

} // namespace tunec
