#!/usr/bin/python3
"""Memory soak of a model of symbolic dimensions: one model.so run in-process (the Python
package) on --runs inputs of random shapes within its bounds, the resident set size read from
/proc/self/status every --every runs. The arena is planned for the bounds once, so after the
first runs the resident set must stay flat: exits 1 when it grows by more than --slack MB
between the first sample after warm-up and the last.

  PYTHONPATH=build/python /usr/bin/python3 scripts/soak_dynamic.py \
      --model tests/fixtures/bert_dynamic/model.onnx --kind bert --dim batch=1..4 \
      --dim sequence=1..32 --runs 10000
  PYTHONPATH=build/python /usr/bin/python3 scripts/soak_dynamic.py \
      --model tests/fixtures/cnn_dynamic_batch/model.onnx --kind cnn --dim batch_size=1..8

--kind bert: inputs input_ids, attention_mask (a padded tail), token_type_ids [batch, sequence];
--kind cnn: one image batch [batch, C, H, W] (the model's).
"""
import argparse
import sys

import numpy as np

import tunec


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--kind", choices=["bert", "cnn"], required=True)
    p.add_argument("--dim", action="append", default=[], help="NAME=MIN..MAX (repeatable)")
    p.add_argument("--runs", type=int, default=10000)
    p.add_argument("--every", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--slack", type=float, default=4.0, help="MB of growth allowed")
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    dims = {}
    for d in a.dim:
        name, rng = d.split("=")
        lo, hi = rng.split("..")
        dims[name] = (int(lo), int(hi))
    model = tunec.compile(a.model, threads=a.threads, dims=dims)
    rng = np.random.default_rng(0)
    samples = []
    for run in range(1, a.runs + 1):
        if a.kind == "bert":
            b = int(rng.integers(1, dims["batch"][1] + 1))
            s = int(rng.integers(1, dims["sequence"][1] + 1))
            mask = np.ones((b, s), np.int64)
            for row in range(b):
                mask[row, int(rng.integers(1, s + 1)):] = 0
            feeds = {"input_ids": rng.integers(0, 50, (b, s)).astype(np.int64),
                     "attention_mask": mask, "token_type_ids": rng.integers(0, 2, (b, s)).astype(np.int64)}
        else:
            image = model.inputs[0]
            b = int(rng.integers(1, image["bounds"][0] + 1))
            feeds = {image["name"]: rng.standard_normal((b,) + tuple(image["bounds"][1:])).astype(np.float32)}
        model.run(feeds)
        if run == a.warmup or run % a.every == 0:
            samples.append((run, rss_mb()))
            print(f"run {run:6d}: resident {samples[-1][1]:.1f} MB", flush=True)
    base = next(mb for run, mb in samples if run >= a.warmup)
    growth = samples[-1][1] - base
    print(f"resident set after warm-up {base:.1f} MB, after {a.runs} runs {samples[-1][1]:.1f} MB: "
          f"{growth:+.1f} MB ({'flat' if growth <= a.slack else 'GROWS'}, slack {a.slack} MB)")
    return 0 if growth <= a.slack else 1


if __name__ == "__main__":
    sys.exit(main())
