// Writing and checking the model.so trailer.
#include "runtime/artifact_file.h"

#include "support/checksum.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tunec::rt {

namespace {

constexpr char kMagic[8] = {'T', 'U', 'N', 'E', 'C', 'S', 'U', 'M'};
constexpr size_t kTrailerBytes = 16;

// The checksum of the first `size` bytes of an open file (mapped, read once).
Expected<uint64_t> fileChecksum(int fd, size_t size, const std::string& path) {
  if (size == 0) return checksum64(nullptr, 0);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) return makeError(path, ": cannot read: ", std::strerror(errno));
  ::madvise(map, size, MADV_SEQUENTIAL);
  uint64_t sum = checksum64(map, size);
  ::munmap(map, size);
  return sum;
}

} // namespace

Status appendArtifactTrailer(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return makeError(path, ": cannot open: ", std::strerror(errno));
  struct stat st;
  Status result;
  if (::fstat(fd, &st) != 0) {
    result = makeError(path, ": cannot stat: ", std::strerror(errno));
  } else {
    auto sum = fileChecksum(fd, static_cast<size_t>(st.st_size), path);
    if (!sum) {
      result = sum.error();
    } else {
      unsigned char trailer[kTrailerBytes];
      std::memcpy(trailer, kMagic, 8);
      for (int i = 0; i < 8; ++i) trailer[8 + i] = static_cast<unsigned char>(*sum >> (8 * i));
      if (::pwrite(fd, trailer, kTrailerBytes, st.st_size) != static_cast<ssize_t>(kTrailerBytes))
        result = makeError(path, ": cannot write: ", std::strerror(errno));
    }
  }
  ::close(fd);
  return result;
}

Status checkArtifactFile(const std::string& path) {
  // Non-blocking: opening a FIFO for reading would wait for a writer forever (fstat then
  // refuses it); reads of a regular file are unaffected.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return makeError(path, ": cannot load: ", std::strerror(errno));
  struct stat st;
  Status result;
  unsigned char trailer[kTrailerBytes];
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    result = makeError(path, ": cannot load: not a regular file");
  } else if (st.st_size < static_cast<off_t>(kTrailerBytes) ||
             ::pread(fd, trailer, kTrailerBytes, st.st_size - static_cast<off_t>(kTrailerBytes)) !=
                 static_cast<ssize_t>(kTrailerBytes) ||
             std::memcmp(trailer, kMagic, 8) != 0) {
    result = makeError(path, ": not a tunec model.so, or a truncated one (no integrity trailer); "
                             "compile it again with 'tunec compile MODEL.onnx -o model.so'");
  } else {
    uint64_t want = 0;
    for (int i = 0; i < 8; ++i) want |= static_cast<uint64_t>(trailer[8 + i]) << (8 * i);
    auto got = fileChecksum(fd, static_cast<size_t>(st.st_size) - kTrailerBytes, path);
    if (!got)
      result = got.error();
    else if (*got != want)
      result = makeError(path, ": the file was modified or damaged after it was compiled (its "
                               "checksum does not match); compile it again");
  }
  ::close(fd);
  return result;
}

} // namespace tunec::rt
