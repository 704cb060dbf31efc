// Tensor files: NumPy .npy and ONNX TensorProto .pb, read and written.
#pragma once

#include "ir/tensor.h"
#include "support/error.h"

#include <string>

namespace tunec {

/// Reads a .npy (by its magic bytes) or a serialized ONNX TensorProto file (regular files only,
/// read by size).
Expected<Tensor> readTensorFile(const std::string& path);
/// Parses the bytes of a .npy or TensorProto file; errors are prefixed with `name`.
Expected<Tensor> parseTensorBytes(const std::string& bytes, const std::string& name);
/// Writes a .npy file (version 1.0, little-endian, C order); bf16 is written as f32.
Status writeNpy(const std::string& path, const Tensor& tensor);
/// Writes a serialized ONNX TensorProto with the given name.
Status writeTensorProto(const std::string& path, const Tensor& tensor, const std::string& name);

} // namespace tunec
