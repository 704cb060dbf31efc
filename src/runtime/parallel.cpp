// parallel_for on oneTBB task arenas (one per thread count) and thread-local scratch.
#include "runtime/parallel.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

namespace {

tbb::task_arena& arenaFor(int threads) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<tbb::task_arena>> arenas;
  std::lock_guard lock(mutex);
  auto& arena = arenas[threads];
  if (!arena) arena = std::make_unique<tbb::task_arena>(threads);
  return *arena;
}

struct Scratch {
  void* data = nullptr;
  int64_t size = 0;
  ~Scratch() { std::free(data); }
};

thread_local int32_t threadLimit = 0;

} // namespace

extern "C" void tunec_set_thread_limit(int32_t threads) {
  threadLimit = threads;
}

extern "C" void tunec_parallel_for(void (*body)(void*, int64_t), void* ctx, int64_t tasks,
                                   int32_t threads) {
  if (threadLimit > 0 && threads > threadLimit) threads = threadLimit;
  if (threads <= 1 || tasks <= 1) {
    for (int64_t t = 0; t < tasks; ++t) body(ctx, t);
    return;
  }
  arenaFor(threads).execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<int64_t>(0, tasks, 1),
        [&](const tbb::blocked_range<int64_t>& r) {
          for (int64_t t = r.begin(); t < r.end(); ++t) body(ctx, t);
        },
        tbb::static_partitioner());
  });
}

extern "C" void* tunec_scratch(int32_t slot, int64_t bytes) {
  thread_local Scratch slots[4];
  Scratch& scratch = slots[slot & 3];
  if (bytes > scratch.size) {
    std::free(scratch.data);
    int64_t rounded = (bytes + 4095) / 4096 * 4096;
    scratch.data = std::aligned_alloc(64, static_cast<size_t>(rounded));
    scratch.size = rounded;
  }
  return scratch.data;
}
