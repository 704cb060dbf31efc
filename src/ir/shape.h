// Shapes whose dimensions are constants or bounded symbols (DESIGN.md, decision 1), and memory
// layouts (plain row-major or blocked such as NCHW16c).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tunec {

/// A polynomial with integer coefficients over named symbols: the extents exporters form from
/// the dynamic axes of a model (`sequence`, `batch*sequence`, `past+sequence`,
/// `12*sequence`). Canonical: two equal polynomials compare equal, whatever built them.
class DimExpr {
public:
  /// The constant 0.
  DimExpr() = default;
  /// A constant.
  DimExpr(int64_t value); // NOLINT(google-explicit-constructor): constants are dims
  /// One symbol (a name such as "sequence").
  static DimExpr symbol(const std::string& name);

  /// The value when no symbol is read.
  std::optional<int64_t> constant() const;
  bool isConstant() const { return constant().has_value(); }
  /// The symbols read, sorted, each once.
  std::vector<std::string> symbols() const;
  /// The value for the given symbol values (every symbol read must have one).
  int64_t evaluate(const std::map<std::string, int64_t>& values) const;

  DimExpr operator+(const DimExpr& other) const;
  DimExpr operator-(const DimExpr& other) const;
  DimExpr operator*(const DimExpr& other) const;
  /// this / divisor when it is exact for every value of the symbols (the divisor one term that
  /// divides each of this one's: `batch*sequence*768 / 12` is `64*batch*sequence`); nullopt
  /// otherwise.
  std::optional<DimExpr> divideExactly(const DimExpr& divisor) const;
  /// "batch*sequence*768", "past+sequence", "7".
  std::string toString() const;
  bool operator==(const DimExpr& other) const = default;

  using Monomial = std::vector<std::string>; ///< sorted; a symbol repeated for its power
  /// The terms: monomial -> coefficient (never 0; the empty monomial is the constant term).
  const std::map<Monomial, int64_t>& terms() const { return terms_; }

private:
  std::map<Monomial, int64_t> terms_;
};

/// A dimension: a constant, or a polynomial over symbols with the range it takes within the
/// symbols' bounds (`--dim sequence=1..512`). Everything sized at compile time is sized at
/// `max`, the bound.
struct Dim {
  DimExpr expr;
  int64_t min = 0, max = 0;

  Dim() = default;
  Dim(int64_t value) : expr(value), min(value), max(value) {} // NOLINT: constants are dims
  Dim(DimExpr e, int64_t lo, int64_t hi) : expr(std::move(e)), min(lo), max(hi) {}
  /// A symbol with its bounds.
  static Dim symbol(const std::string& name, int64_t lo, int64_t hi) {
    return Dim(DimExpr::symbol(name), lo, hi);
  }
  bool isStatic() const { return expr.isConstant(); }
  /// Sums and products of non-negative extents, with their ranges.
  Dim operator+(const Dim& o) const { return Dim(expr + o.expr, min + o.min, max + o.max); }
  Dim operator*(const Dim& o) const { return Dim(expr * o.expr, min * o.min, max * o.max); }
  /// The exact quotient by a positive constant; nullopt when it is not exact for every value.
  std::optional<Dim> divideExactly(int64_t divisor) const;
  /// "768", "sequence", "batch*sequence".
  std::string toString() const { return expr.toString(); }
  bool operator==(const Dim& other) const = default;
};

/// The bounds of each symbol, by name (`--dim sequence=1..512`).
using SymbolRanges = std::map<std::string, std::pair<int64_t, int64_t>>;

/// `e` with the range it takes within the symbols' bounds (every symbol it reads must have
/// one): a term's smallest value is its coefficient times the symbols' minima, or maxima for a
/// negative coefficient, and the reverse for its largest.
Dim dimWithin(const DimExpr& e, const SymbolRanges& ranges);

/// A tensor shape. Every dimension has a bound, its size today (`operator[]`, `dims()`,
/// `numel()` are the bounds); a dimension of a dynamic axis is also a `Dim` over symbols
/// (`dim()`), which the kernels read at run time. A shape without symbols is static.
class Shape {
public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}
  /// Static when every dimension is a constant.
  explicit Shape(const std::vector<Dim>& dims);

  int rank() const { return static_cast<int>(dims_.size()); }
  /// The bound of a dimension: its size when static.
  int64_t operator[](int axis) const { return dims_[static_cast<size_t>(axis)]; }
  /// The bounds.
  const std::vector<int64_t>& dims() const { return dims_; }
  /// Every dimension is a constant.
  bool isStatic() const { return symbolic_.empty(); }
  /// A dimension, symbolic or constant.
  Dim dim(int axis) const;
  /// Every dimension.
  std::vector<Dim> symbolicDims() const;
  /// Number of elements at the bound (1 for a scalar).
  int64_t numel() const;
  /// Row-major strides in elements, at the bound.
  std::vector<int64_t> strides() const;
  /// "1x3x224x224"; "scalar" for rank 0; "batch x sequence x 768" when symbolic.
  std::string toString() const;
  bool operator==(const Shape& other) const = default;

private:
  std::vector<int64_t> dims_;
  std::vector<Dim> symbolic_; ///< empty when static; else one per dimension
};

/// Parses "1x3x224x224" (non-negative dims only); false when it is not of that form.
bool parseShape(const std::string& text, Shape& out);

/// Memory layout of a tensor, oneDNN-style: the logical dims in `outerOrder`, then inner blocks
/// (logical dim, block size) innermost. Plain row-major has the identity order and no blocks;
/// NCHW16c is outerOrder {0,1,2,3} with innerBlocks {(1,16)}; NHWC is outerOrder {0,2,3,1}.
struct Layout {
  std::vector<int> outerOrder;                      ///< empty means identity order
  std::vector<std::pair<int, int64_t>> innerBlocks; ///< (logical dim, block size), outer to inner

  static Layout plain() { return {}; }
  bool isPlain() const;
  /// "plain", or letters for rank <= 6 ("nChw16c", "nhwc"): capital = blocked dim.
  std::string toString(int rank) const;
  bool operator==(const Layout& other) const = default;
};

} // namespace tunec
