#!/usr/bin/python3
"""A long generation with tunec.Generator: the decode time per token and the resident memory as
the context grows (a K/V cache kept in place copies nothing of the past, so the per-token cost
grows only by the attention's reads of the longer past, and nothing is allocated per token).

usage: scripts/bench_generate_long.py MODEL.so PROMPT.npy [--tokens 2000] [--threads 1]
Run pinned (taskset -c 0 for one thread). Prints the median decode time of tokens in windows of
the context, and the process's resident set (VmRSS) at 10%, 50% and 100% of the run.
"""
import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("prompt")
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(ROOT, "build", "python"))
    import tunec
    model = tunec.load(args.model, threads=args.threads)
    gen = tunec.Generator(model)
    prompt = [int(t) for t in np.load(args.prompt).reshape(-1)]
    print(f"{args.model}: K/V caches {'in place' if gen.in_place else 'copied'}, context "
          f"capacity {gen.capacity}, prompt {len(prompt)} tokens")
    times, rss, ids = [], {}, prompt
    marks = {max(1, args.tokens // 10): "10%", args.tokens // 2: "50%", args.tokens: "100%"}
    for i in range(1, args.tokens + 1):
        t0 = time.perf_counter()
        logits = gen.append(ids)
        times.append((time.perf_counter() - t0) * 1e3)
        ids = [int(logits.argmax())]
        if i in marks:
            rss[marks[i]] = rss_mb()
    decode = times[1:]
    n = len(decode)
    for lo, hi in [(0, 100), (n // 2 - 50, n // 2 + 50), (n - 100, n)]:
        lo, hi = max(lo, 0), min(hi, n)
        print(f"  decode tokens {lo + 1}-{hi} (context {len(prompt) + lo + 1}-"
              f"{len(prompt) + hi}): median {np.median(decode[lo:hi]):.2f} ms/token")
    print("  resident set: " + ", ".join(f"{k} of the run {v:.1f} MB" for k, v in rss.items()))
    print(f"  context {gen.length} tokens")


if __name__ == "__main__":
    main()
