// A fast 64-bit checksum of a byte range (four independent multiply-rotate lanes over 8-byte
// words, then a final avalanche): integrity of model.so files, not cryptography.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tunec {

/// The checksum of `size` bytes at `data`.
uint64_t checksum64(const void* data, size_t size);

} // namespace tunec
