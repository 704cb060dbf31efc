#!/usr/bin/env python3
"""One model.so compiled with symbolic dimensions against a static compile at each size.

For every sequence length, the dynamic model.so (compiled once, `--dim sequence=1..BOUND`) and a
static model.so compiled for that length (`--dim sequence=N..N`) are timed by `tunec bench` on
the same input file, in alternating rounds of one run; the result is the median of the per-round
ratios static / dynamic (above 1: the dynamic model is faster). Pin it to one core for one-thread
figures: `taskset -c 0 scripts/bench_dynamic.py ...`.

With NODE_PATH set to an onnxruntime-node install (npm install onnxruntime-node@1.30.0
--ignore-scripts), ONNX Runtime runs the same dynamic model in the same rounds (one thread,
scripts/bench/ort_run.js), and tunec's dynamic output is checked against it.

usage: bench_dynamic.py --tunec build/src/tunec --model ffn.onnx --input x --hidden 768
         [--kind ffn|bert|cnn] [--batch 1] [--bound 512] [--lengths 1,7,16,...] [--rounds 5]
         [--runs 20] [--db tuning.db]
  --kind bert: the inputs are input_ids, attention_mask and token_type_ids [batch, sequence]
  --kind cnn: --input is an image batch [N, 3, 224, 224] whose dynamic batch axis is --symbol
      (default batch_size); --lengths are the batch sizes, and each row also gives the time per
      image
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np


HERE = os.path.dirname(os.path.abspath(__file__))


def bench(tunec, so, feeds, runs):
    cmd = [tunec, "bench", so, "--threads", "1", "--runs", str(runs), "--warmup", "3", "--json"]
    for feed in feeds:
        cmd += ["--input", feed]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["median_ms"]


def ort(model, feeds, runs, output=None):
    cmd = ["node", os.path.join(HERE, "bench", "ort_run.js"), model] + feeds + ["--runs", str(runs)]
    if output:
        cmd += ["--output", output]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["median_ms"]


def tunec_output(tunec, so, feeds, work):
    out = os.path.join(work, "out")
    cmd = [tunec, "run", so, "--threads", "1", "--output", out]
    for feed in feeds:
        cmd += ["--input", feed]
    subprocess.run(cmd, check=True, capture_output=True)
    return np.load(os.path.join(out, sorted(os.listdir(out))[0]))


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
    p.add_argument("--kind", choices=["ffn", "bert", "cnn"], default="ffn")
    p.add_argument("--symbol", default="batch_size", help="--kind cnn: the batch axis's name")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--bound", type=int, default=512)
    p.add_argument("--lengths", default="1,7,16,33,64,100,128,200,384,512")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--db", default="")
    a = p.parse_args()
    lengths = [int(s) for s in a.lengths.split(",")]
    work = tempfile.mkdtemp(prefix="bench_dynamic_")
    symbol = a.symbol if a.kind == "cnn" else "sequence"
    fixed = [] if a.kind == "cnn" else [f"batch={a.batch}..{a.batch}"]
    dynamic = os.path.join(work, "dynamic.so")
    compile_model(a.tunec, a.model, dynamic, fixed + [f"{symbol}=1..{a.bound}"], a.db)
    rng = np.random.default_rng(0)
    with_ort = bool(os.environ.get("NODE_PATH"))
    ort_head = " ONNX Runtime (the dynamic model) | ORT / tunec dynamic | tunec vs ORT (rel. L2) |"
    per_image = " dynamic per image |" if a.kind == "cnn" else ""
    print(f"| {symbol} | static | dynamic (one model.so, 1..{a.bound}) | static / dynamic "
          f"(median of {a.rounds} rounds) |" + per_image + (ort_head if with_ort else ""))
    print("| --- | --- | --- | --- |" + (" --- |" if per_image else "") +
          (" --- | --- | --- |" if with_ort else ""))
    for n in lengths:
        static = os.path.join(work, f"static_{n}.so")
        compile_model(a.tunec, a.model, static, fixed + [f"{symbol}={n}..{n}"], a.db)
        if a.kind == "cnn":
            x = os.path.join(work, f"x_{n}.npy")
            np.save(x, rng.standard_normal((n, 3, 224, 224)).astype(np.float32))
            feeds = [f"{a.input}={x}"]
        elif a.kind == "ffn":
            x = os.path.join(work, f"x_{n}.npy")
            np.save(x, rng.standard_normal((a.batch, n, a.hidden)).astype(np.float32))
            feeds = [f"{a.input}={x}"]
        else:
            feeds = []
            ids = rng.integers(1, 1000, (a.batch, n)).astype(np.int64)
            mask = np.ones((a.batch, n), np.int64)
            types = np.zeros((a.batch, n), np.int64)
            for name, value in [("input_ids", ids), ("attention_mask", mask),
                                ("token_type_ids", types)]:
                path = os.path.join(work, f"{name}_{n}.npy")
                np.save(path, value)
                feeds.append(f"{name}={path}")
        s_ms, d_ms, o_ms, ratios, ort_ratios = [], [], [], [], []
        for _ in range(a.rounds):
            s = bench(a.tunec, static, feeds, a.runs)
            d = bench(a.tunec, dynamic, feeds, a.runs)
            s_ms.append(s)
            d_ms.append(d)
            ratios.append(s / d)
            if with_ort:
                o = ort(a.model, feeds, a.runs)
                o_ms.append(o)
                ort_ratios.append(o / d)
        row = (f"| {n} | {statistics.median(s_ms):.3f} ms | {statistics.median(d_ms):.3f} ms | "
               f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) |")
        if per_image:
            row += f" {statistics.median(d_ms) / n:.3f} ms |"
        if with_ort:
            want = os.path.join(work, "ort.npy")
            ort(a.model, feeds, 1, want)
            got = tunec_output(a.tunec, dynamic, feeds, work)
            ref = np.load(want)
            err = np.linalg.norm(got.astype(np.float64) - ref) / np.linalg.norm(ref)
            row += (f" {statistics.median(o_ms):.3f} ms | {statistics.median(ort_ratios):.2f}x "
                    f"({min(ort_ratios):.2f}-{max(ort_ratios):.2f}) | {err:.1e} |")
        print(row)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
