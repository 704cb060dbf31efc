#include "ir/resize.h"

#include <algorithm>
#include <cmath>

namespace tunec {

namespace {

// The input coordinate of output index `x` (ONNX's coordinate_transformation_mode), with the
// resized length as ONNX's reference takes it: input length x scale.
double inputCoordinate(const ResizeAttrs& a, int axis, int64_t inLength, int64_t x) {
  const auto d = static_cast<size_t>(axis);
  const double scale = a.scales[d], length = static_cast<double>(inLength);
  const double resized = scale * length, xr = static_cast<double>(x);
  switch (a.coordinates) {
  case ResizeCoordinates::AlignCorners:
    return resized == 1 ? 0.0 : xr * (length - 1) / (resized - 1);
  case ResizeCoordinates::Asymmetric:
    return xr / scale;
  case ResizeCoordinates::PytorchHalfPixel:
    return resized == 1 ? -0.5 : (xr + 0.5) / scale - 0.5;
  case ResizeCoordinates::HalfPixel:
    return (xr + 0.5) / scale - 0.5;
  case ResizeCoordinates::TfHalfPixelForNn:
    return (xr + 0.5) / scale;
  case ResizeCoordinates::HalfPixelSymmetric: {
    const double adjustment = static_cast<double>(a.sizes[d]) / resized;
    const double offset = length / 2 * (1 - adjustment);
    return offset + (xr + 0.5) / scale - 0.5;
  }
  }
  return 0.0;
}

// The cubic convolution weights of the four inputs around a coordinate `ratio` past the second.
void cubicWeights(double ratio, double A, double* w) {
  const double s = ratio, t = 1 - ratio;
  w[0] = ((A * (s + 1) - 5 * A) * (s + 1) + 8 * A) * (s + 1) - 4 * A;
  w[1] = ((A + 2) * s - (A + 3)) * s * s + 1;
  w[2] = ((A + 2) * t - (A + 3)) * t * t + 1;
  w[3] = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
}

} // namespace

bool resizesAxis(const ResizeAttrs& a, int axis, int64_t inLength) {
  const auto d = static_cast<size_t>(axis);
  return a.sizes[d] != inLength || a.scales[d] != 1.0;
}

ResizeTaps resizeTaps(const ResizeAttrs& a, int axis, int64_t inLength) {
  ResizeTaps t;
  t.taps = a.mode == ResizeMode::Nearest ? 1 : a.mode == ResizeMode::Linear ? 2 : 4;
  const int64_t outLength = a.sizes[static_cast<size_t>(axis)];
  const bool shrinks = a.scales[static_cast<size_t>(axis)] < 1.0;
  auto clampIndex = [&](int64_t i) { return std::clamp<int64_t>(i, 0, inLength - 1); };
  for (int64_t o = 0; o < outLength; ++o) {
    const double x = inputCoordinate(a, axis, inLength, o);
    // ONNX takes the inputs around x preferring the lower ones: `base` and base + 1 bracket x
    // with x - base in (0, 1] (an integer x is the upper one, at ratio 1).
    const double fl = std::floor(x);
    const bool integral = fl == x;
    const auto base = static_cast<int64_t>(integral ? x - 1 : fl);
    const double ratio = integral ? 1.0 : x - fl;
    if (a.mode == ResizeMode::Nearest) {
      bool upper = false;
      switch (a.nearest) {
      case NearestRounding::RoundPreferFloor:
        upper = ratio > 0.5;
        break;
      case NearestRounding::RoundPreferCeil:
        upper = ratio >= 0.5;
        break;
      case NearestRounding::Floor:
        upper = integral;
        break;
      case NearestRounding::Ceil:
        upper = true;
        break;
      case NearestRounding::Simple: // ONNX Runtime: ceil when shrinking, else truncation
        upper = shrinks ? true : integral || x < 0;
        break;
      }
      t.index.push_back(clampIndex(upper ? base + 1 : base));
      t.weight.push_back(1.0);
      continue;
    }
    double w[4];
    int64_t first;
    if (a.mode == ResizeMode::Linear) {
      w[0] = 1 - ratio;
      w[1] = ratio;
      first = base;
    } else {
      cubicWeights(ratio, a.cubicA, w);
      first = base - 1;
      if (a.excludeOutside) {
        double sum = 0;
        for (int64_t k = 0; k < 4; ++k) {
          if (first + k < 0 || first + k >= inLength) w[k] = 0;
          sum += w[k];
        }
        for (double& v : w) v /= sum;
      }
    }
    for (int64_t k = 0; k < t.taps; ++k) {
      t.index.push_back(clampIndex(first + k));
      t.weight.push_back(w[k]);
    }
  }
  return t;
}

} // namespace tunec
