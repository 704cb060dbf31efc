#!/usr/bin/python3
"""Times a quantized (QDQ) model against its fp32 original, in tunec and in ONNX Runtime, one
thread pinned to one core, alternating the four in every round; prints one Markdown row per
engine and precision (median of the rounds' medians, the best run, the ratio to tunec fp32 per
round) and the agreement of the outputs (relative L2 of tunec int8 against ONNX Runtime int8
and of each against its fp32 original).

  NODE_PATH=/tmp/ort/node_modules scripts/bench_int8.py --tunec build/src/tunec \
      --fp32 build/models/bert_base/model.onnx --int8 bert_q7.onnx \
      --input input_ids=build/models/bert_base/input_ids.npy --rounds 5

ONNX Runtime is its CPU library from the npm registry (npm install onnxruntime-node@1.30.0
--ignore-scripts), driven by scripts/bench/ort_run.js; without NODE_PATH it is left out.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def tunec_time(args, so, runs):
    cmd = ["taskset", "-c", args.core, args.tunec, "bench", so, "--runs", str(runs), "--threads", "1",
           "--json"]
    j = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
    return j["median_ms"], j["min_ms"]


def ort_time(args, model, runs, output=None):
    cmd = ["taskset", "-c", args.core, "node", os.path.join(HERE, "bench", "ort_run.js"), model] + args.input
    cmd += ["--runs", str(runs)] + (["--output", output] if output else [])
    j = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
    return j["median_ms"], j["min_ms"]


def tunec_output(args, so, work, tag):
    out = os.path.join(work, tag)
    subprocess.run([args.tunec, "run", so, "--output", out, "--threads", "1"] +
                   sum([["--input", i] for i in args.input], []), check=True, capture_output=True)
    return np.load(os.path.join(out, sorted(os.listdir(out))[0]))


def rel_l2(a, b):
    return float(np.linalg.norm(a.astype(np.float64) - b) / max(np.linalg.norm(b.astype(np.float64)), 1e-30))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tunec", default="build/src/tunec")
    p.add_argument("--fp32", required=True, help="the original model")
    p.add_argument("--int8", required=True, help="its QDQ form (tunec quantize)")
    p.add_argument("--input", action="append", default=[], help="NAME=FILE.npy (repeatable)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--core", default="0")
    p.add_argument("--target", default="", help="compile both for this target file (`tunec target "
                   "--json`), e.g. an AVX2-only CPU's, to time its kernels on this CPU")
    p.add_argument("--db", default="", help="tuning records for both tunec compiles (default: none, "
                   "the analytical defaults)")
    args = p.parse_args()
    ort = bool(os.environ.get("NODE_PATH"))
    with tempfile.TemporaryDirectory() as work:
        so = {}
        for tag, model in (("fp32", args.fp32), ("int8", args.int8)):
            so[tag] = os.path.join(work, tag + ".so")
            env = dict(os.environ, TUNEC_DB=args.db or os.path.join(work, "no-such.db"))
            target = ["--target", args.target] if args.target else []
            subprocess.run([args.tunec, "compile", model, "-o", so[tag], "--threads", "1"] + target,
                           check=True, capture_output=True, env=env)
        times = {k: [] for k in ("tunec fp32", "tunec int8", "ORT fp32", "ORT int8")}
        best = {k: float("inf") for k in times}
        ratios = {k: [] for k in times}
        for _ in range(args.rounds):
            r = {"tunec fp32": tunec_time(args, so["fp32"], args.runs),
                 "tunec int8": tunec_time(args, so["int8"], args.runs)}
            if ort:
                r["ORT fp32"] = ort_time(args, args.fp32, args.runs)
                r["ORT int8"] = ort_time(args, args.int8, args.runs)
            for k, (med, low) in r.items():
                times[k].append(med)
                best[k] = min(best[k], low)
                ratios[k].append(med / r["tunec fp32"][0])
        print("| engine | median ms | best ms | time / tunec fp32 (median per round) |")
        print("|---|---|---|---|")
        for k in times:
            if times[k]:
                print(f"| {k} | {statistics.median(times[k]):.1f} | {best[k]:.1f} | "
                      f"{statistics.median(ratios[k]):.2f} |")
        y32, y8 = tunec_output(args, so["fp32"], work, "y32"), tunec_output(args, so["int8"], work, "y8")
        line = f"\ntunec int8 against tunec fp32: relative L2 {rel_l2(y8, y32):.2e}"
        if ort:
            ort8 = os.path.join(work, "ort8.npy")
            ort_time(args, args.int8, 1, ort8)
            o8 = np.load(ort8)
            line += (f"; against ONNX Runtime int8: {rel_l2(y8, o8):.2e}; ONNX Runtime int8 against "
                     f"tunec fp32: {rel_l2(o8, y32):.2e}")
        print(line)


if __name__ == "__main__":
    main()
