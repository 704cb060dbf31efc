// The model.so checksum: four lanes of (h ^ w * p1) rotated and multiplied, about 8 bytes a
// cycle, so that checking a BERT-size artifact at load costs a small part of reading it.
#include "support/checksum.h"

#include <cstring>

namespace tunec {

namespace {

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull, kP2 = 0xC2B2AE3D27D4EB4Full;

inline uint64_t rotl(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

inline uint64_t lane(uint64_t h, uint64_t w) {
  return rotl(h ^ (w * kP1), 31) * kP2;
}

} // namespace

uint64_t checksum64(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h[4] = {kP1, kP2, kP1 ^ kP2, ~kP1};
  size_t i = 0;
  for (; i + 32 <= size; i += 32)
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * k, 8);
      h[k] = lane(h[k], w);
    }
  uint64_t acc = rotl(h[0], 1) + rotl(h[1], 7) + rotl(h[2], 12) + rotl(h[3], 18) + size;
  for (; i < size; ++i) acc = lane(acc, p[i]);
  acc ^= acc >> 33;
  acc *= kP2;
  acc ^= acc >> 29;
  return acc;
}

} // namespace tunec
