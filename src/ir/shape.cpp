// Shape arithmetic and Layout printing.
#include "ir/shape.h"

#include <cctype>
#include <cstdlib>

namespace tunec {

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

std::vector<int64_t> Shape::strides() const {
  std::vector<int64_t> s(dims_.size(), 1);
  for (int i = rank() - 2; i >= 0; --i) s[i] = s[i + 1] * dims_[i + 1];
  return s;
}

std::string Shape::toString() const {
  if (dims_.empty()) return "scalar";
  std::string out;
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) out += 'x';
    out += std::to_string(dims_[i]);
  }
  return out;
}

bool parseShape(const std::string& text, Shape& out) {
  std::vector<int64_t> dims;
  size_t pos = 0;
  if (text == "scalar") {
    out = Shape();
    return true;
  }
  while (pos <= text.size()) {
    size_t end = text.find('x', pos);
    if (end == std::string::npos) end = text.size();
    std::string part = text.substr(pos, end - pos);
    if (part.empty()) return false;
    for (char c : part)
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    int64_t d = std::strtoll(part.c_str(), nullptr, 10);
    if (d < 0) return false;
    dims.push_back(d);
    pos = end + 1;
  }
  out = Shape(std::move(dims));
  return true;
}

bool Layout::isPlain() const {
  if (!innerBlocks.empty()) return false;
  for (size_t i = 0; i < outerOrder.size(); ++i)
    if (outerOrder[i] != static_cast<int>(i)) return false;
  return true;
}

std::string Layout::toString(int rank) const {
  if (isPlain()) return "plain";
  static const char kLetters4[] = "nchw";
  auto letter = [&](int dim) {
    char c = rank == 4 ? kLetters4[dim] : static_cast<char>('a' + dim);
    return c;
  };
  std::string out;
  for (int i = 0; i < rank; ++i) {
    int dim = outerOrder.empty() ? i : outerOrder[static_cast<size_t>(i)];
    bool blocked = false;
    for (const auto& b : innerBlocks) blocked |= b.first == dim;
    char c = letter(dim);
    out += blocked ? static_cast<char>(std::toupper(c)) : c;
  }
  for (const auto& [dim, size] : innerBlocks) out += std::to_string(size) + letter(dim);
  return out;
}

} // namespace tunec
