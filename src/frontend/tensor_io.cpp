// .npy and TensorProto (.pb) tensor files.
#include "frontend/tensor_io.h"

#include "frontend/onnx_tensor.h"
#include "support/atomic_file.h"

#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace tunec {

namespace {

struct NpyType {
  const char* descr;
  DType dtype;
};
constexpr NpyType kNpyTypes[] = {{"<f4", DType::F32}, {"<f8", DType::F64}, {"<f2", DType::F16},
                                 {"|i1", DType::I8},  {"|u1", DType::U8},  {"<i2", DType::I16},
                                 {"<u2", DType::U16}, {"<i4", DType::I32}, {"<u4", DType::U32},
                                 {"<i8", DType::I64}, {"<u8", DType::U64}, {"|b1", DType::Bool}};

Expected<Tensor> parseNpy(const std::string& bytes, const std::string& path) {
  auto bad = [&](const std::string& why) {
    return makeError(path, ": not a valid .npy file: ", why);
  };
  if (bytes.size() < 10) return bad("too short");
  int major = static_cast<unsigned char>(bytes[6]);
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = static_cast<unsigned char>(bytes[8]) |
                (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    headerStart = 10;
  } else {
    if (bytes.size() < 12) return bad("too short");
    headerLen = 0;
    for (int i = 3; i >= 0; --i)
      headerLen = (headerLen << 8) | static_cast<unsigned char>(bytes[8 + static_cast<size_t>(i)]);
    headerStart = 12;
  }
  if (headerStart + headerLen > bytes.size()) return bad("header is truncated");
  std::string header = bytes.substr(headerStart, headerLen);
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr':\\s*'([^']+)'")))
    return bad("no 'descr' in header");
  std::string descr = m[1];
  if (descr == "<i1" || descr == "i1") descr = "|i1";
  if (descr == "<u1" || descr == "u1") descr = "|u1";
  std::optional<DType> dtype;
  for (const auto& t : kNpyTypes)
    if (descr == t.descr) dtype = t.dtype;
  if (!dtype)
    return bad("unsupported element type '" + descr +
               "' (big-endian or object arrays are not supported)");
  if (std::regex_search(header, std::regex("'fortran_order':\\s*True")))
    return bad("Fortran order is not supported; save with np.ascontiguousarray");
  if (!std::regex_search(header, m, std::regex("'shape':\\s*\\(([^)]*)\\)")))
    return bad("no 'shape' in header");
  std::vector<int64_t> dims;
  std::stringstream ss(m[1].str());
  std::string item;
  // Each dimension a whole number, and the element count overflow-checked, before anything is
  // allocated: the data that follows the header must hold exactly that many bytes.
  size_t dataStart = headerStart + headerLen;
  uint64_t needed = dtypeSize(*dtype);
  while (std::getline(ss, item, ',')) {
    size_t first = item.find_first_not_of(" "), last = item.find_last_not_of(" ");
    if (first == std::string::npos) continue;
    std::string digits = item.substr(first, last - first + 1);
    int64_t d = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), d);
    if (ec != std::errc() || end != digits.data() + digits.size() || d < 0)
      return bad("shape dimension '" + digits + "' is not a whole number");
    if (d > 0 && needed > (uint64_t{1} << 62) / static_cast<uint64_t>(d))
      return bad("shape (" + m[1].str() + ") is too large for any file");
    needed *= static_cast<uint64_t>(d);
    dims.push_back(d);
  }
  if (bytes.size() - dataStart != needed)
    return bad("data has " + std::to_string(bytes.size() - dataStart) + " bytes, shape " +
               Shape(dims).toString() + " needs " + std::to_string(needed));
  Tensor t(*dtype, Shape(dims));
  std::memcpy(t.data(), bytes.data() + dataStart, t.byteSize());
  return t;
}

// Tensor files are read by size, and only regular files: /dev/zero or a FIFO would be read
// until memory runs out or forever.
Expected<std::string> readFile(const std::string& path) {
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) return makeError(path, ": cannot open file");
  if (!std::filesystem::is_regular_file(status))
    return makeError(path, ": not a regular file (a tensor is read from a .npy or .pb file)");
  std::ifstream file(path, std::ios::binary);
  if (!file) return makeError(path, ": cannot open file");
  std::ostringstream os;
  os << file.rdbuf();
  return os.str();
}

} // namespace

Expected<Tensor> readTensorFile(const std::string& path) {
  TUNEC_ASSIGN_OR_RETURN(std::string bytes, readFile(path));
  return parseTensorBytes(bytes, path);
}

Expected<Tensor> parseTensorBytes(const std::string& bytes, const std::string& path) {
  if (bytes.rfind("\x93NUMPY", 0) == 0) return parseNpy(bytes, path);
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes))
    return makeError(path, ": neither a .npy file nor a serialized ONNX TensorProto");
  auto t = onnx_import::tensorFromProto(proto, "");
  if (!t) return t.error().withContext(path);
  return t;
}

Status writeNpy(const std::string& path, const Tensor& tensor) {
  Tensor t = tensor;
  if (t.dtype() == DType::BF16) {
    Tensor f(DType::F32, t.shape());
    for (int64_t i = 0; i < t.numel(); ++i) f.setDouble(i, t.getDouble(i));
    t = f;
  }
  const char* descr = nullptr;
  for (const auto& e : kNpyTypes)
    if (e.dtype == t.dtype()) descr = e.descr;
  std::string shape = "(";
  for (int64_t d : t.shape().dims()) shape += std::to_string(d) + ",";
  if (t.shape().rank() > 1) shape.pop_back();
  shape += ")";
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  return writeFileAtomically(path, [&](std::ostream& file) -> Status {
    file.write("\x93NUMPY\x01\x00", 8);
    char len[2] = {static_cast<char>(header.size() & 0xff), static_cast<char>(header.size() >> 8)};
    file.write(len, 2);
    file << header;
    file.write(reinterpret_cast<const char*>(t.data()), static_cast<std::streamsize>(t.byteSize()));
    return {};
  });
}

Status writeTensorProto(const std::string& path, const Tensor& tensor, const std::string& name) {
  onnx::TensorProto proto;
  onnx_import::tensorToProto(tensor, name, proto);
  return writeFileAtomically(path, [&](std::ostream& file) -> Status {
    if (!proto.SerializeToOstream(&file)) return makeError(path, ": write failed");
    return {};
  });
}

} // namespace tunec
