// TensorProto <-> Tensor: typed fields, raw_data and external data files.
#include "frontend/onnx_tensor.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace tunec::onnx_import {

std::optional<DType> dtypeFromOnnx(int elemType) {
  using TP = onnx::TensorProto;
  switch (elemType) {
  case TP::FLOAT:
    return DType::F32;
  case TP::DOUBLE:
    return DType::F64;
  case TP::FLOAT16:
    return DType::F16;
  case TP::BFLOAT16:
    return DType::BF16;
  case TP::INT8:
    return DType::I8;
  case TP::UINT8:
    return DType::U8;
  case TP::INT16:
    return DType::I16;
  case TP::UINT16:
    return DType::U16;
  case TP::INT32:
    return DType::I32;
  case TP::UINT32:
    return DType::U32;
  case TP::INT64:
    return DType::I64;
  case TP::UINT64:
    return DType::U64;
  case TP::BOOL:
    return DType::Bool;
  default:
    return std::nullopt;
  }
}

int dtypeToOnnx(DType dtype) {
  using TP = onnx::TensorProto;
  switch (dtype) {
  case DType::F32:
    return TP::FLOAT;
  case DType::F64:
    return TP::DOUBLE;
  case DType::F16:
    return TP::FLOAT16;
  case DType::BF16:
    return TP::BFLOAT16;
  case DType::I8:
    return TP::INT8;
  case DType::U8:
    return TP::UINT8;
  case DType::I16:
    return TP::INT16;
  case DType::U16:
    return TP::UINT16;
  case DType::I32:
    return TP::INT32;
  case DType::U32:
    return TP::UINT32;
  case DType::I64:
    return TP::INT64;
  case DType::U64:
    return TP::UINT64;
  case DType::Bool:
    return TP::BOOL;
  }
  return TP::UNDEFINED;
}

std::string onnxTypeName(int elemType) {
  if (onnx::TensorProto_DataType_IsValid(elemType))
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(elemType));
  return "type " + std::to_string(elemType);
}

namespace {

Expected<int64_t> externalField(const onnx::TensorProto& proto, const std::string& key,
                                const std::string& text) {
  int64_t v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0)
    return makeError("tensor '", proto.name(), "': external data ", key, " '", text,
                     "' is not a non-negative whole number");
  return v;
}

// External data is confined to the model's directory, as ONNX Runtime does: a relative
// location without '..', resolving (symlinks too) inside that directory, to a regular file that
// holds offset + the tensor's bytes. Nothing is read before all of that is checked.
Expected<std::string> readExternal(const onnx::TensorProto& proto, const std::string& baseDir,
                                   size_t expectedBytes) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : proto.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset") {
      TUNEC_ASSIGN_OR_RETURN(offset, externalField(proto, "offset", kv.value()));
    } else if (kv.key() == "length") {
      TUNEC_ASSIGN_OR_RETURN(length, externalField(proto, "length", kv.value()));
    }
  }
  if (location.empty())
    return makeError("tensor '", proto.name(), "' has external data without a location");
  std::filesystem::path rel(location);
  bool upward = false;
  for (const auto& part : rel) upward |= part == "..";
  if (rel.is_absolute() || upward)
    return makeError("tensor '", proto.name(), "': external data location '", location,
                     "' must be a relative path inside the model's directory (no '/' at the "
                     "start, no '..')");
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::canonical(baseDir.empty() ? "." : baseDir, ec);
  std::filesystem::path path = std::filesystem::weakly_canonical(dir / rel, ec);
  auto [outside, rest] = std::mismatch(dir.begin(), dir.end(), path.begin(), path.end());
  if (ec || outside != dir.end())
    return makeError("tensor '", proto.name(), "': external data location '", location,
                     "' leads outside the model's directory");
  auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status))
    return makeError("tensor '", proto.name(), "': external data file ", path.string(),
                     " does not exist");
  if (!std::filesystem::is_regular_file(status))
    return makeError("tensor '", proto.name(), "': external data ", path.string(),
                     " is not a regular file");
  int64_t size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  if (length < 0) length = static_cast<int64_t>(expectedBytes);
  if (static_cast<size_t>(length) != expectedBytes)
    return makeError("tensor '", proto.name(), "': external data length ", length,
                     " is not the tensor's ", expectedBytes, " bytes");
  if (ec || offset > size || length > size - offset)
    return makeError("tensor '", proto.name(), "': external data file ", path.string(), " has ",
                     size, " bytes, fewer than offset ", offset, " + length ", length);
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return makeError("tensor '", proto.name(), "': cannot open external data file ", path.string());
  std::string bytes(static_cast<size_t>(length), '\0');
  file.seekg(offset);
  file.read(bytes.data(), length);
  if (file.gcount() != length)
    return makeError("tensor '", proto.name(), "': external data file ", path.string(),
                     " could not be read in full");
  return bytes;
}

} // namespace

namespace {

// The number of values in the typed field that holds a `dtype` tensor without raw_data.
int64_t typedValueCount(const onnx::TensorProto& proto, DType dtype) {
  switch (dtype) {
  case DType::F32:
    return proto.float_data_size();
  case DType::F64:
    return proto.double_data_size();
  case DType::I64:
    return proto.int64_data_size();
  case DType::U32:
  case DType::U64:
    return proto.uint64_data_size();
  default:
    return proto.int32_data_size();
  }
}

// ONNX's 4-bit integers (UINT4 = 21, INT4 = 22, IR 10; newer than the onnx library's enum):
// packed two a byte, the low nibble first, in raw_data or an external file; one value a byte
// here, u8 0..15 or i8 -8..7 (what a blockwise DequantizeLinear reads, onnx_ops.cpp).
constexpr int kOnnxUint4 = 21, kOnnxInt4 = 22;

Expected<Tensor> nibblesFromProto(const onnx::TensorProto& proto, const std::string& baseDir,
                                  const std::vector<int64_t>& dims, int64_t n) {
  const bool isSigned = proto.data_type() == kOnnxInt4;
  const size_t bytes = static_cast<size_t>((n + 1) / 2);
  std::string external;
  const std::string* packed = &proto.raw_data();
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    TUNEC_ASSIGN_OR_RETURN(external, readExternal(proto, baseDir, bytes));
    packed = &external;
  } else if (!proto.has_raw_data()) {
    return makeError("tensor '", proto.name(), "' of 4-bit integers keeps them in typed fields: ",
                     "only raw_data and external data are read");
  }
  if (packed->size() != bytes)
    return makeError("tensor '", proto.name(), "' of shape ", Shape(dims).toString(), " holds ",
                     packed->size(), " bytes of 4-bit values, expected ", bytes);
  Tensor t(isSigned ? DType::I8 : DType::U8, Shape(dims));
  for (int64_t i = 0; i < n; ++i) {
    const auto byte = static_cast<uint8_t>((*packed)[static_cast<size_t>(i / 2)]);
    const int nibble = (i % 2 ? byte >> 4 : byte) & 15;
    t.setInt(i, isSigned && nibble >= 8 ? nibble - 16 : nibble);
  }
  return t;
}

} // namespace

Expected<Tensor> tensorFromProto(const onnx::TensorProto& proto, const std::string& baseDir) {
  const bool nibbles = proto.data_type() == kOnnxUint4 || proto.data_type() == kOnnxInt4;
  auto dtype = nibbles
                   ? std::optional<DType>(proto.data_type() == kOnnxInt4 ? DType::I8 : DType::U8)
                   : dtypeFromOnnx(proto.data_type());
  if (!dtype)
    return makeError("tensor '", proto.name(), "' has unsupported element type ",
                     onnxTypeName(proto.data_type()));
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  // Check the element count before allocating: a corrupt file must not exhaust memory.
  constexpr int64_t kMaxElements = int64_t{1} << 36;
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0) return makeError("tensor '", proto.name(), "' has a negative dimension");
    if (d > 0 && count > kMaxElements / d)
      return makeError(
          "tensor '", proto.name(),
          "' has an implausible shape (over 2^36 elements); the file is corrupt or not a tensor");
    count *= d;
  }
  const int64_t n = count;
  if (nibbles) return nibblesFromProto(proto, baseDir, dims, n);
  const size_t bytes = static_cast<size_t>(n) * dtypeSize(*dtype);
  auto sizeError = [&](int64_t got) {
    return makeError("tensor '", proto.name(), "' of shape ", Shape(dims).toString(), " holds ",
                     got, " values, expected ", n);
  };
  // The values the file holds are counted before anything is allocated: a corrupt shape must
  // neither exhaust memory nor zero a gigabyte before its size check fails.
  std::string external;
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    TUNEC_ASSIGN_OR_RETURN(external, readExternal(proto, baseDir, bytes));
  } else {
    if (proto.has_raw_data()) {
      if (proto.raw_data().size() != bytes)
        return sizeError(static_cast<int64_t>(proto.raw_data().size() / dtypeSize(*dtype)));
    } else if (int64_t held = typedValueCount(proto, *dtype); held != n) {
      return sizeError(held);
    }
  }
  Tensor t(*dtype, Shape(dims));
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    std::memcpy(t.data(), external.data(), bytes);
    return t;
  }
  if (proto.has_raw_data()) {
    if (proto.raw_data().size() != bytes)
      return sizeError(static_cast<int64_t>(proto.raw_data().size() / dtypeSize(*dtype)));
    std::memcpy(t.data(), proto.raw_data().data(), bytes);
    return t;
  }
  switch (*dtype) {
  case DType::F32:
    if (proto.float_data_size() != n) return sizeError(proto.float_data_size());
    for (int64_t i = 0; i < n; ++i) t.dataAs<float>()[i] = proto.float_data(static_cast<int>(i));
    break;
  case DType::F64:
    if (proto.double_data_size() != n) return sizeError(proto.double_data_size());
    for (int64_t i = 0; i < n; ++i) t.dataAs<double>()[i] = proto.double_data(static_cast<int>(i));
    break;
  case DType::I64:
    if (proto.int64_data_size() != n) return sizeError(proto.int64_data_size());
    for (int64_t i = 0; i < n; ++i) t.dataAs<int64_t>()[i] = proto.int64_data(static_cast<int>(i));
    break;
  case DType::U32:
  case DType::U64:
    if (proto.uint64_data_size() != n) return sizeError(proto.uint64_data_size());
    for (int64_t i = 0; i < n; ++i)
      t.setInt(i, static_cast<int64_t>(proto.uint64_data(static_cast<int>(i))));
    break;
  case DType::F16:
  case DType::BF16:
    if (proto.int32_data_size() != n) return sizeError(proto.int32_data_size());
    for (int64_t i = 0; i < n; ++i)
      t.dataAs<uint16_t>()[i] = static_cast<uint16_t>(proto.int32_data(static_cast<int>(i)));
    break;
  default:
    if (proto.int32_data_size() != n) return sizeError(proto.int32_data_size());
    for (int64_t i = 0; i < n; ++i) t.setInt(i, proto.int32_data(static_cast<int>(i)));
    break;
  }
  return t;
}

void tensorToProto(const Tensor& tensor, const std::string& name, onnx::TensorProto& proto) {
  proto.set_name(name);
  proto.set_data_type(dtypeToOnnx(tensor.dtype()));
  for (int64_t d : tensor.shape().dims()) proto.add_dims(d);
  proto.set_raw_data(std::string(reinterpret_cast<const char*>(tensor.data()), tensor.byteSize()));
}

} // namespace tunec::onnx_import
