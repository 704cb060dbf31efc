#!/usr/bin/python3
"""Whole-model latency, tunec against PyTorch's best CPU path, side by side in one run.

PyTorch: torch.jit.trace, torch.jit.freeze and torch.jit.optimize_for_inference (Debian's
python3-torch), torch.set_num_threads(T). tunec: `tunec compile --threads T` with the analytical
defaults, and with --db FILE also with the tuned records of FILE, then `tunec bench --threads T`. Rounds alternate between the two so that
machine noise hits both; each round is a median over --runs runs, and the table reports the median
of the rounds. Prints a markdown table (docs/benchmarks.md).

With --baseline OTHER_TUNEC (another build, e.g. the previous commit's), each model is also
compiled and timed with that build in the same alternating rounds: the table gains its latency
and the ratio baseline / tunec (> 1: this build is faster).

usage: scripts/bench_models.py --tunec build/src/tunec [--models resnet50,bert_base]
       [--threads 1,2] [--rounds 3] [--runs 20] [--db tuning.db] [--baseline OTHER_TUNEC]
       [--precision fp32|bf16] [--work DIR]

--precision bf16 compiles tunec with --precision bf16 and runs PyTorch under its CPU autocast
(torch.autocast("cpu", dtype=torch.bfloat16), traced and frozen under it).
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


def torch_model(name, precision="fp32"):
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    model, inputs = export_models.build(name, generator)
    model.eval()
    if precision == "bf16":  # PyTorch's CPU autocast, traced and frozen under it
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=False):
            traced = torch.jit.trace(model, tuple(inputs.values()), check_trace=False)
            frozen = torch.jit.freeze(traced)
        return frozen, tuple(inputs.values())
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
    parser.add_argument("--baseline", default="", help="another tunec build to time side by side")
    parser.add_argument("--skip-pytorch", action="store_true",
                        help="time only tunec (and the baseline build): PyTorch's column is '-'")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                        help="bf16: tunec --precision bf16 against PyTorch's bf16 autocast")
    parser.add_argument("--work", default="build/bench_models")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rows = []
    for name in args.models.split(","):
        onnx = os.path.join(args.work, name, "model.onnx")
        if not os.path.exists(onnx):
            export_models.export(name, args.work)
        model, inputs = (None, None) if args.skip_pytorch else torch_model(name, args.precision)
        for threads in [int(t) for t in args.threads.split(",")]:
            # The defaults (no database: TUNEC_DB points nowhere), and the tuned records.
            env = dict(os.environ, TUNEC_DB=os.path.join(args.work, "no-such.db"))
            so = os.path.join(args.work, name, f"model_t{threads}.so")
            start = time.perf_counter()
            subprocess.run([args.tunec, "compile", onnx, "-o", so, "--threads", str(threads),
                            "--precision", args.precision], check=True, capture_output=True,
                           env=env)
            compile_s = time.perf_counter() - start
            tuned_so = None
            if args.db:
                tuned_so = os.path.join(args.work, name, f"model_t{threads}_tuned.so")
                out = subprocess.run([args.tunec, "compile", onnx, "-o", tuned_so, "--threads",
                                      str(threads), "--db", args.db], check=True,
                                     capture_output=True, text=True).stdout
                print(out.splitlines()[0], file=sys.stderr)
            base_so = None
            if args.baseline:
                base_so = os.path.join(args.work, name, f"model_t{threads}_baseline.so")
                subprocess.run([args.baseline, "compile", onnx, "-o", base_so, "--threads",
                                str(threads)], check=True, capture_output=True, env=env)
            torch.set_num_threads(threads)
            pt, tc, tt, tb = [], [], [], []
            for r in range(args.rounds):
                pt.append(float("nan") if args.skip_pytorch else time_torch(model, inputs, args.runs))
                tc.append(time_tunec(args.tunec, so, threads, args.runs))
                if tuned_so:
                    tt.append(time_tunec(args.tunec, tuned_so, threads, args.runs))
                if base_so:
                    tb.append(time_tunec(args.baseline, base_so, threads, args.runs))
                print(f"{name} t={threads} round {r + 1}: pytorch {pt[-1]:.2f} ms, "
                      f"tunec {tc[-1]:.2f} ms" + (f", tuned {tt[-1]:.2f} ms" if tt else "") +
                      (f", baseline {tb[-1]:.2f} ms" if tb else ""), file=sys.stderr)
            p, t = statistics.median(pt), statistics.median(tc)
            tuned = statistics.median(tt) if tt else None
            base = statistics.median(tb) if tb else None
            rows.append((name, threads, p, t, tuned, base, compile_s))
    tuned_cols = args.db != ""
    pytorch_path = ("bf16 autocast, jit trace + freeze" if args.precision == "bf16"
                    else "jit freeze + optimize_for_inference")
    print(f"| model | threads | PyTorch ({pytorch_path}) ms | tunec defaults ms "
          "| PyTorch / tunec defaults |" + (" tunec tuned ms | PyTorch / tuned | defaults / tuned |"
                                          if tuned_cols else "") +
          (" baseline build ms | baseline / tunec |" if args.baseline else "") + " tunec compile s |")
    print("| --- | --- | --- | --- | --- |" + (" --- | --- | --- |" if tuned_cols else "") +
          (" --- | --- |" if args.baseline else "") + " --- |")
    for name, threads, p, t, tuned, base, compile_s in rows:
        extra = f" {tuned:.2f} | {p / tuned:.2f}x | {t / tuned:.2f}x |" if tuned_cols else ""
        if base is not None:
            extra += f" {base:.2f} | {base / t:.2f}x |"
        pytorch = "-" if p != p else f"{p:.2f}"  # NaN: --skip-pytorch
        ratio = "-" if p != p else f"{p / t:.2f}x"
        print(f"| {name} | {threads} | {pytorch} | {t:.2f} | {ratio} |{extra} {compile_s:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
