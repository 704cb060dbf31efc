// requestAmxPermission: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), once per process.
#include "runtime/tile_permission.h"

#include <cerrno>
#include <cstring>
#include <sys/syscall.h>
#include <unistd.h>

namespace tunec {

namespace {
constexpr int kArchReqXcompPerm = 0x1023; // 0x1022 is the GET
constexpr int kXfeatureXtiledata = 18;
} // namespace

Status requestAmxPermission() {
  static const int result = [] {
    long rc = syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata);
    return rc == 0 ? 0 : errno;
  }();
  if (result == 0) return {};
  return makeError("the kernel refused this process the AMX tile state (arch_prctl "
                   "ARCH_REQ_XCOMP_PERM: ",
                   std::strerror(result),
                   "); AMX kernels need Linux 5.16 or newer with AMX enabled: compile for a "
                   "target without amx (tunec target --json, remove \"amx\") to run here");
}

} // namespace tunec
