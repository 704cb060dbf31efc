// .npy and TensorProto files: round trips of every dtype and clear errors for bad files.
#include "frontend/tensor_io.h"

#include <cstdio>
#include <fstream>
#include <gtest/gtest.h>

namespace tunec {
namespace {

std::string tempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + name;
}

TEST(TensorIo, NpyAndPbRoundTripEveryDType) {
  for (DType dtype : {DType::F32, DType::F64, DType::F16, DType::I8, DType::U8, DType::I16,
                      DType::I32, DType::I64, DType::U64, DType::Bool}) {
    Tensor t(dtype, Shape{2, 3});
    for (int64_t i = 0; i < t.numel(); ++i)
      t.setDouble(i,
                  static_cast<double>((i * 7) % 5) -
                      (dtype == DType::Bool || dtype == DType::U8 || dtype == DType::U64 ? 0 : 2));
    for (const char* ext : {".npy", ".pb"}) {
      std::string path = tempPath(std::string("t_") + std::string(dtypeName(dtype)) + ext);
      Status s = std::string(ext) == ".npy" ? writeNpy(path, t) : writeTensorProto(path, t, "t");
      ASSERT_TRUE(s.isOk()) << s.error().message();
      auto back = readTensorFile(path);
      ASSERT_TRUE(back.isOk()) << back.error().message();
      EXPECT_EQ(back->dtype(), dtype) << path;
      EXPECT_EQ(back->shape(), t.shape()) << path;
      for (int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(back->getDouble(i), t.getDouble(i)) << path;
    }
  }
}

TEST(TensorIo, ScalarNpyRoundTrips) {
  Tensor t(DType::F32, Shape{});
  t.setDouble(0, 4.5);
  std::string path = tempPath("scalar.npy");
  ASSERT_TRUE(writeNpy(path, t).isOk());
  auto back = readTensorFile(path);
  ASSERT_TRUE(back.isOk()) << back.error().message();
  EXPECT_EQ(back->shape().rank(), 0);
  EXPECT_EQ(back->getDouble(0), 4.5);
}

TEST(TensorIo, TruncatedNpyIsRejectedWithSizes) {
  Tensor t(DType::F32, Shape{4, 4});
  std::string path = tempPath("trunc.npy");
  ASSERT_TRUE(writeNpy(path, t).isOk());
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() - 8);
  auto back = readTensorFile(path);
  ASSERT_FALSE(back.isOk());
  EXPECT_NE(back.error().message().find("shape 4x4 needs 64"), std::string::npos)
      << back.error().message();
}

TEST(TensorIo, MissingFileNamesThePath) {
  auto r = readTensorFile("/nonexistent/x.npy");
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.error().message(), "/nonexistent/x.npy: cannot open file");
}

} // namespace
} // namespace tunec
