// Writing a file so that readers see the old file or the complete new one, never a part, and so
// that nothing is written anywhere but the asked path.
#pragma once

#include "support/error.h"

#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace tunec {

/// Refuses an output path that exists and is not a regular file (a device, FIFO, directory or
/// socket, also behind a symlink), or that is the same file (device and inode) as one of the
/// command's `inputs`, naming both.
Status checkOutputPath(const std::string& path, const std::vector<std::string>& inputs = {});

/// A private directory beside an output (mode 0700, made by mkdtemp in the output's directory),
/// removed with its contents when destroyed: where a writer stages files before one of them is
/// renamed onto the output. Nobody else can create or plant a symlink in it, so the staged
/// names cannot be redirected, and the rename stays on the output's file system.
/// Nothing is left behind: SIGINT, SIGTERM or SIGHUP (where the program left them to their
/// default action) remove the live directories and their files before the process dies of the
/// signal; a directory a killed process left (`.tunec-OUTPUT-XXXXXX`, its `.pid` naming a
/// process that no longer runs) is removed by the next staging for the same output.
class StagingDir {
public:
  static Expected<StagingDir> beside(const std::string& output);
  StagingDir(StagingDir&& other) noexcept : dir_(std::move(other.dir_)), slot_(other.slot_) {
    other.dir_.clear();
    other.slot_ = -1;
  }
  StagingDir& operator=(StagingDir&&) = delete;
  ~StagingDir();
  /// A path inside the directory (registered for removal on a signal).
  std::string file(const std::string& name) const;
  const std::string& path() const { return dir_; }
  /// fsync's `staged` (a file inside) and renames it onto `output`.
  Status publish(const std::string& staged, const std::string& output) const;

private:
  StagingDir(std::string dir, int slot) : dir_(std::move(dir)), slot_(slot) {}
  std::string dir_;
  int slot_ = -1; ///< its entry in the signal handler's table, or -1 (the table was full)
};

/// Writes `path` through a file staged beside it (StagingDir): `write` fills the stream, then
/// the file is flushed, fsync'ed and renamed over `path`. `path` is checked first
/// (checkOutputPath, against `inputs`). On any failure (a full disk, a write error, an Error from
/// `write`) the staged file is removed, `path` is left as it was, and the error names the path.
Status writeFileAtomically(const std::string& path,
                           const std::function<Status(std::ostream&)>& write,
                           const std::vector<std::string>& inputs = {});

} // namespace tunec
