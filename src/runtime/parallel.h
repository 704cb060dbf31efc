// Threading for generated code: parallel_for on oneTBB and per-thread scratch buffers.
#pragma once

#include <cstdint>

extern "C" {

/// Runs body(ctx, t) for t in [0, tasks) on at most `threads` threads (a oneTBB task arena of
/// that size, static partitioning). One thread or one task runs inline.
void tunec_parallel_for(void (*body)(void* ctx, int64_t task), void* ctx, int64_t tasks,
                        int32_t threads);

/// Caps the threads of every tunec_parallel_for called from this thread (0: no cap); a loaded
/// model sets it to the thread count chosen at load around each run.
void tunec_set_thread_limit(int32_t threads);
/// A 64-byte aligned buffer of at least `bytes` owned by the calling thread, one per slot
/// (0..3; reused, grown on demand); valid until the thread's next call for that slot.
void* tunec_scratch(int32_t slot, int64_t bytes);
}
