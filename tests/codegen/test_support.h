// Shared by the codegen tests: one JIT for the test binary and deterministic random tensors.
#pragma once

#include "codegen/jit.h"
#include "ir/tensor.h"

#include <gtest/gtest.h>
#include <memory>
#include <random>
#include <vector>

namespace tunec::test {

/// The test binary's JIT (created once; a failure is reported and aborts the test).
inline Jit& jit() {
  static std::unique_ptr<Jit> instance = [] {
    auto j = Jit::create();
    if (!j) ADD_FAILURE() << j.error().message();
    return std::move(*j);
  }();
  return *instance;
}

/// Uniform values in [-1, 1): random data, never zeros.
inline Tensor randomTensor(Shape shape, std::mt19937& rng) {
  Tensor t(DType::F32, std::move(shape));
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.dataAs<float>()[i] = dist(rng);
  return t;
}

inline std::vector<float> randomVector(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

/// The ISAs this machine can run.
inline std::vector<Isa> hostIsas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::Avx2, Isa::Avx512})
    if (hostSupports(isa)) out.push_back(isa);
  return out;
}

} // namespace tunec::test
