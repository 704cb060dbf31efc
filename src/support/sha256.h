// SHA-256 (FIPS 180-4), for the pages' Content-Security-Policy: a browser runs an inline script
// or style only when the policy names the SHA-256 of its text ('sha256-BASE64').
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tunec {

/// The SHA-256 digest of `data`.
std::array<uint8_t, 32> sha256(std::string_view data);

/// Standard base64 (RFC 4648, with '=' padding) of `n` bytes.
std::string base64(const uint8_t* bytes, size_t n);

/// The CSP source expression of an inline element's text: 'sha256-<base64 of its SHA-256>'.
std::string cspHash(std::string_view text);

} // namespace tunec
