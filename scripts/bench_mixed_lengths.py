#!/usr/bin/python3
"""A mixed-length text workload: --requests requests of one sequence each, their lengths drawn
from a lognormal distribution (median --median tokens, sigma --sigma, seeded) and clipped to
1..--pad, run by

  - the dynamic model.so (compiled once with --dim sequence=1..PAD): each request at its length;
  - the static model.so compiled for PAD tokens: each request padded to PAD (every request costs
    the same, so --padded-sample requests are timed per round and the total extrapolated);
  - ONNX Runtime on the same dynamic ONNX model (with NODE_PATH set: scripts/bench/ort_workload.js);

in alternating rounds (the requests split into --rounds chunks, each engine runs a chunk in
turn), one thread; prints the total time of each and the ratios. tunec runs in this process
through the Python package (PYTHONPATH=build/python). The inputs are input_ids (random ids
below --vocab), attention_mask (ones) and token_type_ids (zeros), batch 1.

  PYTHONPATH=build/python NODE_PATH=/tmp/ort/node_modules taskset -c 0 \\
      scripts/bench_mixed_lengths.py --model bert.onnx --dynamic dyn.so --padded s128.so
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

import numpy as np

import tunec

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="the ONNX model with dynamic axes (for ONNX Runtime)")
    p.add_argument("--dynamic", required=True, help="its model.so compiled with --dim sequence=1..PAD")
    p.add_argument("--padded", required=True, help="its model.so compiled for PAD tokens")
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--median", type=float, default=40.0)
    p.add_argument("--sigma", type=float, default=0.7)
    p.add_argument("--pad", type=int, default=128)
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--padded-sample", type=int, default=50, help="padded requests timed per round")
    a = p.parse_args()
    rng = np.random.default_rng(7)
    lengths = np.clip(np.round(rng.lognormal(np.log(a.median), a.sigma, a.requests)), 1, a.pad)
    lengths = [int(n) for n in lengths]
    work = tempfile.mkdtemp(prefix="mixed_lengths_")
    with open(os.path.join(work, "lengths.json"), "w") as f:
        json.dump(lengths, f)
    dynamic = tunec.load(a.dynamic, threads=1)
    padded = tunec.load(a.padded, threads=1)
    with_ort = bool(os.environ.get("NODE_PATH"))

    def feeds(n):
        return {"input_ids": rng.integers(1, a.vocab, (1, n)).astype(np.int64),
                "attention_mask": np.ones((1, n), np.int64),
                "token_type_ids": np.zeros((1, n), np.int64)}

    for model, n in ((dynamic, 16), (padded, a.pad)):  # warm up
        model.run(feeds(n))
    totals = {"tunec dynamic": 0.0, "tunec padded": 0.0, "ONNX Runtime": 0.0}
    ratios_pad, ratios_ort = [], []
    chunk = (a.requests + a.rounds - 1) // a.rounds
    for r in range(a.rounds):
        lo, hi = r * chunk, min(a.requests, (r + 1) * chunk)
        inputs = [feeds(n) for n in lengths[lo:hi]]
        t = 0.0
        for x in inputs:
            start = time.perf_counter()
            dynamic.run(x)
            t += time.perf_counter() - start
        d_ms = t * 1e3
        sample = [feeds(a.pad) for _ in range(a.padded_sample)]
        t = 0.0
        for x in sample:
            start = time.perf_counter()
            padded.run(x)
            t += time.perf_counter() - start
        p_ms = t * 1e3 / a.padded_sample * (hi - lo)
        totals["tunec dynamic"] += d_ms
        totals["tunec padded"] += p_ms
        ratios_pad.append(p_ms / d_ms)
        if with_ort:
            out = subprocess.run(["node", os.path.join(HERE, "bench", "ort_workload.js"), a.model,
                                  os.path.join(work, "lengths.json"), "--from", str(lo), "--to",
                                  str(hi), "--vocab", str(a.vocab)],
                                 check=True, capture_output=True, text=True).stdout
            o_ms = json.loads(out.strip().splitlines()[-1])["total_ms"]
            totals["ONNX Runtime"] += o_ms
            ratios_ort.append(o_ms / d_ms)
        print(f"round {r}: requests {lo}..{hi - 1}: dynamic {d_ms:.0f} ms, padded to {a.pad} "
              f"{p_ms:.0f} ms" + (f", ONNX Runtime {o_ms:.0f} ms" if with_ort else ""), flush=True)
    print(f"\n{a.requests} requests, lengths lognormal (median {a.median}, sigma {a.sigma}) clipped "
          f"to 1..{a.pad}: mean {np.mean(lengths):.1f}, median {np.median(lengths):.0f}, p90 "
          f"{np.percentile(lengths, 90):.0f}, max {max(lengths)}")
    print("| engine | total | per request | padded / it | ONNX Runtime / it |")
    print("| --- | --- | --- | --- | --- |")
    for k, v in totals.items():
        if k == "ONNX Runtime" and not with_ort:
            continue
        row = f"| {k} | {v / 1e3:.1f} s | {v / a.requests:.1f} ms |"
        if k == "tunec dynamic":
            row += f" {totals['tunec padded'] / v:.2f}x (rounds {min(ratios_pad):.2f}-{max(ratios_pad):.2f}) |"
            row += (f" {totals['ONNX Runtime'] / v:.2f}x (rounds {min(ratios_ort):.2f}-"
                    f"{max(ratios_ort):.2f}) |" if with_ort else " |")
        else:
            row += " | |"
        print(row)


if __name__ == "__main__":
    main()
