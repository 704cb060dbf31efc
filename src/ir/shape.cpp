// Symbolic dimensions, shape arithmetic and Layout printing.
#include "ir/shape.h"

#include "support/error.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace tunec {

// ---- DimExpr -------------------------------------------------------------------------------

DimExpr::DimExpr(int64_t value) {
  if (value != 0) terms_[{}] = value;
}

DimExpr DimExpr::symbol(const std::string& name) {
  DimExpr e;
  e.terms_[{name}] = 1;
  return e;
}

std::optional<int64_t> DimExpr::constant() const {
  if (terms_.empty()) return 0;
  if (terms_.size() == 1 && terms_.begin()->first.empty()) return terms_.begin()->second;
  return std::nullopt;
}

std::vector<std::string> DimExpr::symbols() const {
  std::vector<std::string> out;
  for (const auto& [monomial, coefficient] : terms_)
    for (const auto& name : monomial)
      if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

int64_t DimExpr::evaluate(const std::map<std::string, int64_t>& values) const {
  int64_t total = 0;
  for (const auto& [monomial, coefficient] : terms_) {
    int64_t term = coefficient;
    for (const auto& name : monomial) {
      auto it = values.find(name);
      TUNEC_ASSERT(it != values.end(), "DimExpr::evaluate: no value for symbol " + name);
      term *= it->second;
    }
    total += term;
  }
  return total;
}

DimExpr DimExpr::operator+(const DimExpr& other) const {
  DimExpr out = *this;
  for (const auto& [monomial, coefficient] : other.terms_) {
    int64_t& c = out.terms_[monomial];
    c += coefficient;
    if (c == 0) out.terms_.erase(monomial);
  }
  return out;
}

DimExpr DimExpr::operator-(const DimExpr& other) const {
  return *this + other * DimExpr(-1);
}

DimExpr DimExpr::operator*(const DimExpr& other) const {
  DimExpr out;
  for (const auto& [ma, ca] : terms_)
    for (const auto& [mb, cb] : other.terms_) {
      Monomial m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      std::sort(m.begin(), m.end());
      DimExpr term;
      term.terms_[m] = ca * cb;
      out = out + term;
    }
  return out;
}

std::optional<DimExpr> DimExpr::divideExactly(const DimExpr& divisor) const {
  if (divisor.terms_.size() != 1) return std::nullopt;
  const auto& [dm, dc] = *divisor.terms_.begin();
  DimExpr out;
  for (const auto& [monomial, coefficient] : terms_) {
    if (coefficient % dc != 0) return std::nullopt;
    Monomial rest = monomial;
    for (const auto& name : dm) {
      auto it = std::find(rest.begin(), rest.end(), name);
      if (it == rest.end()) return std::nullopt;
      rest.erase(it);
    }
    out.terms_[rest] = coefficient / dc;
  }
  return out;
}

std::string DimExpr::toString() const {
  if (terms_.empty()) return "0";
  // Terms by descending degree, so "past+sequence+1" and "2*batch*sequence" read naturally;
  // a constant factor is written last ("batch*sequence*768") as exporters' shapes read.
  std::vector<std::pair<Monomial, int64_t>> ordered(terms_.begin(), terms_.end());
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  std::string out;
  for (const auto& [monomial, coefficient] : ordered) {
    int64_t c = coefficient;
    if (!out.empty())
      out += c < 0 ? "-" : "+";
    else if (c < 0)
      out += "-";
    c = c < 0 ? -c : c;
    std::string term;
    for (const auto& name : monomial) term += (term.empty() ? "" : "*") + name;
    if (term.empty())
      term = std::to_string(c);
    else if (c != 1)
      term += "*" + std::to_string(c);
    out += term;
  }
  return out;
}

std::optional<Dim> Dim::divideExactly(int64_t divisor) const {
  TUNEC_ASSERT(divisor > 0, "Dim::divideExactly: the divisor must be positive");
  auto e = expr.divideExactly(DimExpr(divisor));
  if (!e) return std::nullopt;
  return Dim(*e, min / divisor, max / divisor);
}

Dim dimWithin(const DimExpr& e, const SymbolRanges& ranges) {
  if (auto c = e.constant()) return Dim(*c);
  int64_t lo = 0, hi = 0;
  for (const auto& [monomial, coefficient] : e.terms()) {
    int64_t small = coefficient, large = coefficient;
    for (const std::string& name : monomial) {
      auto it = ranges.find(name);
      TUNEC_ASSERT(it != ranges.end(), "dimWithin: no bounds for symbol " + name);
      small *= coefficient > 0 ? it->second.first : it->second.second;
      large *= coefficient > 0 ? it->second.second : it->second.first;
    }
    lo += small;
    hi += large;
  }
  return Dim(e, lo, hi);
}

// ---- Shape ---------------------------------------------------------------------------------

Shape::Shape(const std::vector<Dim>& dims) {
  bool symbolic = false;
  for (const Dim& d : dims) {
    dims_.push_back(d.max);
    symbolic = symbolic || !d.isStatic();
  }
  if (symbolic) symbolic_ = dims;
}

Dim Shape::dim(int axis) const {
  return symbolic_.empty() ? Dim(dims_[static_cast<size_t>(axis)])
                           : symbolic_[static_cast<size_t>(axis)];
}

std::vector<Dim> Shape::symbolicDims() const {
  if (!symbolic_.empty()) return symbolic_;
  return {dims_.begin(), dims_.end()};
}

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
    if (i) out += symbolic_.empty() ? "x" : " x ";
    out += symbolic_.empty() ? std::to_string(dims_[i]) : symbolic_[i].toString();
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
