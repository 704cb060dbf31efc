// Temporary file, fsync, rename.
#include "support/atomic_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <unistd.h>

namespace tunec {

Status writeFileAtomically(const std::string& path,
                           const std::function<Status(std::ostream&)>& write) {
  std::string staging = path + ".tmp" + std::to_string(::getpid());
  auto failed = [&](const std::string& why) {
    std::remove(staging.c_str());
    return makeError(path, ": cannot write: ", why);
  };
  {
    std::ofstream out(staging, std::ios::binary | std::ios::trunc);
    if (!out) return failed(std::strerror(errno));
    Status s = write(out);
    if (!s) {
      out.close();
      std::remove(staging.c_str());
      return s;
    }
    out.flush();
    if (!out) return failed("write failed (disk full?)");
  }
  int fd = ::open(staging.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return failed(std::strerror(errno));
  bool synced = ::fsync(fd) == 0;
  int syncError = errno;
  ::close(fd);
  if (!synced) return failed(std::strerror(syncError));
  if (std::rename(staging.c_str(), path.c_str()) != 0) return failed(std::strerror(errno));
  return {};
}

} // namespace tunec
