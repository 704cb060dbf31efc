// Static shapes and memory layouts (plain row-major or blocked such as NCHW16c).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace tunec {

/// A static tensor shape; every dimension is known (DESIGN.md, decision 1).
class Shape {
public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t operator[](int axis) const { return dims_[static_cast<size_t>(axis)]; }
  int64_t& operator[](int axis) { return dims_[static_cast<size_t>(axis)]; }
  const std::vector<int64_t>& dims() const { return dims_; }
  /// Number of elements (1 for a scalar).
  int64_t numel() const;
  /// Row-major strides in elements.
  std::vector<int64_t> strides() const;
  /// "1x3x224x224"; "scalar" for rank 0.
  std::string toString() const;
  bool operator==(const Shape& other) const = default;

private:
  std::vector<int64_t> dims_;
};

/// Parses "1x3x224x224" (positive dims only); nullopt-like empty result sets ok=false.
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
