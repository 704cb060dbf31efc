#!/usr/bin/python3
"""tunec --precision bf16 against tunec fp32 on the same model, one thread pinned to one core,
the two alternating in every round; prints one Markdown row per model: the medians of the
rounds' medians, the ratio fp32 / bf16 per round (median and range; > 1: bf16 is faster), the
number of bf16 kernels, and each output's relative L2 against PyTorch's fp32 output that
scripts/export_models.py saved beside the model (expected_*.npy).

  scripts/bench_bf16.py --tunec build/src/tunec --models resnet50,bert_base,mobilenet_v2 \
      --work build/models --rounds 5 --runs 10

Models missing from --work are exported first (scripts/export_models.py).
"""
import argparse
import glob
import os
import re
import statistics
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_int8 import rel_l2, tunec_time  # noqa: E402  (pinned `tunec bench`, relative L2)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tunec", default="build/src/tunec")
    p.add_argument("--models", default="resnet50,bert_base,mobilenet_v2")
    p.add_argument("--work", default="build/models")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--core", default="0")
    args = p.parse_args()
    env = dict(os.environ, TUNEC_DB=os.path.join(args.work, "no-such.db"))  # the defaults
    rows = []
    for name in args.models.split(","):
        d = os.path.join(args.work, name)
        if not os.path.exists(os.path.join(d, "model.onnx")):
            subprocess.run(["/usr/bin/python3", os.path.join(HERE, "export_models.py"), "--out",
                            args.work, "--only", name], check=True)
        inputs = [f"{os.path.basename(f)[:-4]}={f}" for f in sorted(glob.glob(os.path.join(d, "*.npy")))
                  if not os.path.basename(f).startswith("expected_")]
        so, errors, kernels = {}, {}, 0
        for precision in ["fp32", "bf16"]:
            so[precision] = os.path.join(d, f"bench_{precision}.so")
            report = subprocess.run([args.tunec, "compile", os.path.join(d, "model.onnx"), "-o",
                                     so[precision], "--threads", "1", "--precision", precision],
                                    check=True, capture_output=True, text=True, env=env).stdout
            if precision == "bf16":
                found = re.search(r"(\d+) of them in bf16", report)
                kernels = int(found.group(1)) if found else 0
            out = os.path.join(d, f"bench_{precision}_out")
            subprocess.run([args.tunec, "run", so[precision], "--threads", "1", "--output", out] +
                           sum([["--input", i] for i in inputs], []), check=True, capture_output=True)
            errors[precision] = max(rel_l2(np.load(os.path.join(out, f[len("expected_"):])), np.load(
                os.path.join(d, f))) for f in os.listdir(d) if f.startswith("expected_"))
        fp32, bf16, ratio = [], [], []
        for r in range(args.rounds):
            fp32.append(tunec_time(args, so["fp32"], args.runs)[0])
            bf16.append(tunec_time(args, so["bf16"], args.runs)[0])
            ratio.append(fp32[-1] / bf16[-1])
            print(f"{name} round {r + 1}: fp32 {fp32[-1]:.2f} ms, bf16 {bf16[-1]:.2f} ms",
                  file=sys.stderr)
        rows.append((name, statistics.median(fp32), statistics.median(bf16), statistics.median(ratio),
                     min(ratio), max(ratio), kernels, errors["fp32"], errors["bf16"]))
    print("| model | tunec fp32 ms | tunec bf16 ms | fp32 / bf16 per round (median, range) "
          "| bf16 kernels | fp32 vs PyTorch fp32 | bf16 vs PyTorch fp32 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, f, b, r, lo, hi, k, ef, eb in rows:
        print(f"| {name} | {f:.2f} | {b:.2f} | {r:.2f}x ({lo:.2f}-{hi:.2f}) | {k} | {ef:.1e} | {eb:.1e} |")


if __name__ == "__main__":
    sys.exit(main())
