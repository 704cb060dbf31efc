// Output checks, a private staging directory, fsync and rename.
#include "support/atomic_file.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace tunec {

namespace {

const char* kindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

} // namespace

Status checkOutputPath(const std::string& path, const std::vector<std::string>& inputs) {
  struct stat out;
  if (::stat(path.c_str(), &out) != 0) return {}; // a new file (or a dangling link: replaced)
  if (!S_ISREG(out.st_mode))
    return makeError(path, ": is ", kindOf(out.st_mode),
                     ", and tunec writes only regular files: give a file path for the output");
  for (const std::string& input : inputs) {
    struct stat in;
    if (::stat(input.c_str(), &in) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino)
      return makeError(path, ": is the same file as the input ", input,
                       ", which writing it would replace: give another output path");
  }
  return {};
}

Expected<StagingDir> StagingDir::beside(const std::string& output) {
  std::filesystem::path parent = std::filesystem::path(output).parent_path();
  std::string pattern = (parent.empty() ? std::string(".") : parent.string()) + "/.tunec-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr)
    return makeError(output, ": cannot write: cannot make a staging directory beside it (",
                     std::strerror(errno), ")");
  return StagingDir(pattern);
}

StagingDir::~StagingDir() {
  if (dir_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

Status StagingDir::publish(const std::string& staged, const std::string& output) const {
  int fd = ::open(staged.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  bool synced = fd >= 0 && ::fsync(fd) == 0;
  int error = errno;
  if (fd >= 0) ::close(fd);
  if (!synced) return makeError(output, ": cannot write: ", std::strerror(error));
  if (std::rename(staged.c_str(), output.c_str()) != 0)
    return makeError(output, ": cannot write: ", std::strerror(errno));
  return {};
}

Status writeFileAtomically(const std::string& path,
                           const std::function<Status(std::ostream&)>& write,
                           const std::vector<std::string>& inputs) {
  TUNEC_TRY(checkOutputPath(path, inputs));
  TUNEC_ASSIGN_OR_RETURN(StagingDir staging, StagingDir::beside(path));
  const std::string file = staging.file("output");
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    if (!out) return makeError(path, ": cannot write: ", std::strerror(errno));
    TUNEC_TRY(write(out));
    out.flush();
    if (!out) return makeError(path, ": cannot write: write failed (disk full?)");
  }
  return staging.publish(file, path);
}

} // namespace tunec
