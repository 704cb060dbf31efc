#!/usr/bin/env python3
"""One model.so compiled with symbolic dimensions against a static compile at each size.

For every sequence length, the dynamic model.so (compiled once, `--dim sequence=1..BOUND`) and a
static model.so compiled for that length (`--dim sequence=N..N`) are timed by `tunec bench` on
the same input file, in alternating rounds of one run; the result is the median of the per-round
ratios static / dynamic (above 1: the dynamic model is faster). Pin it to one core for one-thread
figures: `taskset -c 0 scripts/bench_dynamic.py ...`.

usage: bench_dynamic.py --tunec build/src/tunec --model ffn.onnx --input x --hidden 768
         [--batch 1] [--bound 512] [--lengths 1,7,16,...] [--rounds 5] [--runs 20] [--db tuning.db]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np


def bench(tunec, so, name, path, runs):
    out = subprocess.run([tunec, "bench", so, "--threads", "1", "--runs", str(runs), "--warmup",
                          "3", "--json", "--input", f"{name}={path}"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["median_ms"]


def compile_model(tunec, model, out, dims, db):
    cmd = [tunec, "compile", model, "--threads", "1", "-o", out]
    for d in dims:
        cmd += ["--dim", d]
    if db:
        cmd += ["--db", db]
    subprocess.run(cmd, check=True, capture_output=True, text=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tunec", required=True)
    p.add_argument("--model", required=True, help="ONNX model with dynamic batch and sequence")
    p.add_argument("--input", default="x", help="its input [batch, sequence, hidden]")
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--bound", type=int, default=512)
    p.add_argument("--lengths", default="1,7,16,33,64,100,128,200,384,512")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--db", default="")
    a = p.parse_args()
    lengths = [int(s) for s in a.lengths.split(",")]
    work = tempfile.mkdtemp(prefix="bench_dynamic_")
    batch = f"batch={a.batch}..{a.batch}"
    dynamic = os.path.join(work, "dynamic.so")
    compile_model(a.tunec, a.model, dynamic, [batch, f"sequence=1..{a.bound}"], a.db)
    rng = np.random.default_rng(0)
    print(f"| sequence | static | dynamic (one model.so, 1..{a.bound}) | static / dynamic "
          f"(median of {a.rounds} rounds) |")
    print("| --- | --- | --- | --- |")
    for n in lengths:
        static = os.path.join(work, f"static_{n}.so")
        compile_model(a.tunec, a.model, static, [batch, f"sequence={n}..{n}"], a.db)
        x = os.path.join(work, f"x_{n}.npy")
        np.save(x, rng.standard_normal((a.batch, n, a.hidden)).astype(np.float32))
        s_ms, d_ms, ratios = [], [], []
        for _ in range(a.rounds):
            s = bench(a.tunec, static, a.input, x, a.runs)
            d = bench(a.tunec, dynamic, a.input, x, a.runs)
            s_ms.append(s)
            d_ms.append(d)
            ratios.append(s / d)
        print(f"| {n} | {statistics.median(s_ms):.3f} ms | {statistics.median(d_ms):.3f} ms | "
              f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
