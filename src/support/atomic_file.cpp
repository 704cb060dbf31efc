// Output checks, a private staging directory, fsync and rename.
#include "support/atomic_file.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <mutex>
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

// The live staging directories, for the signal handler: fixed storage (a handler may not
// allocate), each slot a directory and the files staged in it, removed with unlink and rmdir
// (async-signal-safe).
constexpr int kSlots = 8, kFiles = 6, kPathBytes = 4096;
struct Slot {
  std::atomic<bool> used{false};
  std::atomic<int> files{0};
  char dir[kPathBytes];
  char file[kFiles][kPathBytes];
};
Slot gSlots[kSlots];

void removeSlot(Slot& s) {
  const int n = std::min(s.files.load(), kFiles);
  for (int i = 0; i < n; ++i) ::unlink(s.file[i]);
  ::rmdir(s.dir);
}

extern "C" void removeStagingAndDie(int sig) {
  for (Slot& s : gSlots)
    if (s.used.load()) removeSlot(s);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// Once: the terminating signals a program left at their default action remove the staging
// directories first (Python's own SIGINT handler raises KeyboardInterrupt instead, and the
// destructors remove them).
void installSignalCleanup() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction current {};
      if (::sigaction(sig, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) continue;
      struct sigaction cleanup {};
      cleanup.sa_handler = removeStagingAndDie;
      sigemptyset(&cleanup.sa_mask);
      ::sigaction(sig, &cleanup, nullptr);
    }
  });
}

bool copyPath(char* to, const std::string& from) {
  if (from.size() >= static_cast<size_t>(kPathBytes)) return false;
  std::memcpy(to, from.c_str(), from.size() + 1);
  return true;
}

// The name staging directories of `output` share: .tunec-NAME- (the name cut to 64 bytes).
std::string stagingPrefix(const std::filesystem::path& output) {
  return ".tunec-" + output.filename().string().substr(0, 64) + "-";
}

// Directories a killed process left for the same output: ours, named by the prefix, whose .pid
// names a process that no longer runs.
void removeStale(const std::filesystem::path& parent, const std::string& prefix) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    struct stat st;
    if (name.rfind(prefix, 0) != 0 || ::lstat(entry.path().c_str(), &st) != 0 ||
        !S_ISDIR(st.st_mode) || st.st_uid != ::getuid())
      continue;
    std::ifstream pidFile(entry.path() / ".pid");
    long pid = 0;
    if (!(pidFile >> pid) || pid <= 0) continue; // being made, or not ours to judge
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue; // alive
    std::error_code removeError;
    std::filesystem::remove_all(entry.path(), removeError);
  }
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
  installSignalCleanup();
  std::filesystem::path parent = std::filesystem::path(output).parent_path();
  if (parent.empty()) parent = ".";
  const std::string prefix = stagingPrefix(output);
  removeStale(parent, prefix);
  std::string pattern = parent.string() + "/" + prefix + "XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr)
    return makeError(output, ": cannot write: cannot make a staging directory beside it (",
                     std::strerror(errno), ")");
  int slot = -1;
  for (int i = 0; i < kSlots && slot < 0; ++i) {
    bool expected = false;
    if (!gSlots[i].used.compare_exchange_strong(expected, true)) continue;
    gSlots[i].files.store(0);
    if (copyPath(gSlots[i].dir, pattern))
      slot = i;
    else
      gSlots[i].used.store(false); // a path too long for the table: the destructor alone
  }
  StagingDir dir(pattern, slot);
  std::ofstream(dir.file(".pid")) << ::getpid() << "\n"; // for the next staging's stale check
  return dir;
}

std::string StagingDir::file(const std::string& name) const {
  std::string path = dir_ + "/" + name;
  if (slot_ >= 0) {
    Slot& s = gSlots[slot_];
    const int at = s.files.load();
    if (at < kFiles && copyPath(s.file[at], path)) s.files.store(at + 1);
  }
  return path;
}

StagingDir::~StagingDir() {
  if (dir_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  if (slot_ >= 0) gSlots[slot_].used.store(false);
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
