// Host detection with cpuid (features, brand), sysfs (caches) and the online CPU count (cores).
#include "support/host.h"

#include <algorithm>
#include <cpuid.h>
#include <cstring>
#include <fstream>
#include <sched.h>
#include <unistd.h>

namespace tunec {

namespace {

int64_t readCacheSize(int index) {
  std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
  std::string s;
  if (!(f >> s) || s.empty()) return -1;
  int64_t v = std::atoll(s.c_str());
  char unit = s.back();
  if (unit == 'K') v *= 1024;
  if (unit == 'M') v *= 1024 * 1024;
  return v;
}

std::string readCacheType(int index) {
  std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/type");
  std::string s;
  f >> s;
  return s;
}

int readCacheLevel(int index) {
  std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/level");
  int l = 0;
  f >> l;
  return l;
}

Target detect() {
  Target h;
  unsigned a, b, c, d;
  if (__get_cpuid_count(1, 0, &a, &b, &c, &d)) {
    h.fma = c & (1u << 12);
    bool osxsave = c & (1u << 27);
    if (!osxsave) return h;
  }
  unsigned xcr0lo = 0, xcr0hi = 0;
  __asm__("xgetbv" : "=a"(xcr0lo), "=d"(xcr0hi) : "c"(0));
  bool ymmOs = (xcr0lo & 0x6) == 0x6, zmmOs = (xcr0lo & 0xe6) == 0xe6;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    h.avx2 = ymmOs && (b & (1u << 5));
    h.avx512f = zmmOs && (b & (1u << 16));
    h.avx512dq = h.avx512f && (b & (1u << 17));
    h.avx512bw = h.avx512f && (b & (1u << 30));
    h.avx512vl = h.avx512f && (b & (1u << 31));
    h.avx512vnni = h.avx512f && (c & (1u << 11));
    // AMX: the tile unit with its bf16 and int8 dots (CPUID.7.0:EDX bits 24, 22, 25), and the
    // OS saving the tile state (XCR0 bits 17 XTILECFG and 18 XTILEDATA).
    bool tileOs = (xcr0lo & 0x60000u) == 0x60000u;
    h.amx = tileOs && (d & (1u << 24)) && (d & (1u << 22)) && (d & (1u << 25));
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) h.avx512bf16 = h.avx512f && (a & (1u << 5));
  char brand[49] = {};
  for (unsigned i = 0; i < 3; ++i)
    if (__get_cpuid(0x80000002 + i, &a, &b, &c, &d)) {
      std::memcpy(brand + 16 * i, &a, 4);
      std::memcpy(brand + 16 * i + 4, &b, 4);
      std::memcpy(brand + 16 * i + 8, &c, 4);
      std::memcpy(brand + 16 * i + 12, &d, 4);
    }
  h.model = brand;
  while (!h.model.empty() && h.model.back() == ' ') h.model.pop_back();
  // The machine's CPUs, whatever this process may use: a target key must not change under
  // taskset, a cgroup cpuset or a container CPU limit.
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (online > 0) h.cores = static_cast<int>(online);
  for (int i = 0; i < 8; ++i) {
    int64_t size = readCacheSize(i);
    if (size <= 0) continue;
    int level = readCacheLevel(i);
    std::string type = readCacheType(i);
    if (level == 1 && type == "Data") h.l1d = size;
    if (level == 2) h.l2 = size;
    if (level == 3) h.l3 = size;
  }
  return h;
}

} // namespace

const Target& hostTarget() {
  static const Target target = detect();
  return target;
}

int availableCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, hostTarget().cores);
}

} // namespace tunec
