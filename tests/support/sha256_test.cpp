// SHA-256 and base64 against the standards' test vectors (FIPS 180-4's examples, RFC 4648's),
// and the CSP hash of a page's script as browsers compute it.
#include "support/sha256.h"

#include <gtest/gtest.h>
#include <string>

namespace tunec {
namespace {

std::string hex(const std::array<uint8_t, 32>& d) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) s += digits[b >> 4], s += digits[b & 15];
  return s;
}

TEST(Sha256, StandardVectors) {
  EXPECT_EQ(hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // Lengths around the padding boundary (55, 56, 64 bytes) and a long message.
  EXPECT_EQ(hex(sha256(std::string(55, 'a'))),
            "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(hex(sha256(std::string(56, 'a'))),
            "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(hex(sha256(std::string(64, 'a'))),
            "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
  EXPECT_EQ(hex(sha256(std::string(1000000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, Base64AndTheCspSource) {
  const uint8_t f[] = {'f', 'o', 'o', 'b', 'a', 'r'};
  EXPECT_EQ(base64(f, 0), "");
  EXPECT_EQ(base64(f, 1), "Zg==");
  EXPECT_EQ(base64(f, 2), "Zm8=");
  EXPECT_EQ(base64(f, 3), "Zm9v");
  EXPECT_EQ(base64(f, 6), "Zm9vYmFy");
  EXPECT_EQ(cspHash("abc"), "'sha256-ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0='");
}

} // namespace
} // namespace tunec
