#!/usr/bin/python3
"""Whole-model latency, tunec against PyTorch's best CPU path, side by side in one run.

PyTorch: torch.jit.trace, torch.jit.freeze and torch.jit.optimize_for_inference (Debian's
python3-torch), torch.set_num_threads(T). tunec: `tunec compile --threads T` with the analytical
defaults (or --db FILE), then `tunec bench --threads T`. Rounds alternate between the two so that
machine noise hits both; each round is a median over --runs runs, and the table reports the median
of the rounds. Prints a markdown table (docs/benchmarks.md).

usage: scripts/bench_models.py --tunec build/src/tunec [--models resnet50,bert_base]
       [--threads 1,2] [--rounds 3] [--runs 20] [--db tuning.db] [--work DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_models  # noqa: E402


def torch_model(name):
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    model, inputs = export_models.build(name, generator)
    model.eval()
    with torch.no_grad():
        traced = torch.jit.trace(model, tuple(inputs.values()))
        frozen = torch.jit.optimize_for_inference(torch.jit.freeze(traced))
    return frozen, tuple(inputs.values())


def time_torch(model, inputs, runs, warmup=3):
    with torch.no_grad():
        for _ in range(warmup):
            model(*inputs)
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            model(*inputs)
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def time_tunec(tunec, so, threads, runs):
    out = subprocess.run([tunec, "bench", so, "--threads", str(threads), "--runs", str(runs),
                          "--warmup", "3", "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["median_ms"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tunec", required=True)
    parser.add_argument("--models", default="resnet50,bert_base,mobilenet_v2")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--db", default="")
    parser.add_argument("--work", default="build/bench_models")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rows = []
    for name in args.models.split(","):
        onnx = os.path.join(args.work, name, "model.onnx")
        if not os.path.exists(onnx):
            export_models.export(name, args.work)
        model, inputs = torch_model(name)
        for threads in [int(t) for t in args.threads.split(",")]:
            so = os.path.join(args.work, name, f"model_t{threads}.so")
            cmd = [args.tunec, "compile", onnx, "-o", so, "--threads", str(threads)]
            if args.db:
                cmd += ["--db", args.db]
            start = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            compile_s = time.perf_counter() - start
            torch.set_num_threads(threads)
            pt, tc = [], []
            for r in range(args.rounds):
                pt.append(time_torch(model, inputs, args.runs))
                tc.append(time_tunec(args.tunec, so, threads, args.runs))
                print(f"{name} t={threads} round {r + 1}: pytorch {pt[-1]:.2f} ms, "
                      f"tunec {tc[-1]:.2f} ms", file=sys.stderr)
            p, t = statistics.median(pt), statistics.median(tc)
            rows.append((name, threads, p, t, p / t, compile_s))
    print("| model | threads | PyTorch (jit freeze + optimize_for_inference) ms | tunec ms "
          "| speedup (PyTorch / tunec) | tunec compile s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, threads, p, t, ratio, compile_s in rows:
        print(f"| {name} | {threads} | {p:.2f} | {t:.2f} | {ratio:.2f}x | {compile_s:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
