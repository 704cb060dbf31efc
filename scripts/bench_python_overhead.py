#!/usr/bin/env python3
"""The per-call overhead of tunec.Model.run over the C API, on a small model.

Alternating rounds: the C API's time per run (Model.bench: tunec_model_run in a C++ loop on
preallocated buffers) and Model.run's from Python (dict in, new output arrays out, the checks of
every input), each the median of per-call times; the overhead is their difference, the median
over rounds.

usage: PYTHONPATH=build/python /usr/bin/python3 scripts/bench_python_overhead.py model.so
"""
import statistics
import sys
import time

import numpy as np

import tunec


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "build/tiny_cnn.so"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    calls = 2000
    model = tunec.load(path, threads=1)
    rng = np.random.default_rng(1)
    feeds = {i["name"]: rng.uniform(-1, 1, i["shape"]).astype(i["dtype"]) for i in model.inputs}
    for _ in range(200):
        model.run(feeds)
    c_us, py_us = [], []
    for _ in range(rounds):
        c_us.append(model.bench(runs=calls, warmup=10)["median_ms"] * 1e3)
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            model.run(feeds)
            times.append(time.perf_counter() - t0)
        py_us.append(statistics.median(times) * 1e6)
    overhead = [p - c for p, c in zip(py_us, c_us)]
    print(f"{path}: C API {statistics.median(c_us):.1f} us per run, Model.run "
          f"{statistics.median(py_us):.1f} us: overhead {statistics.median(overhead):.1f} us "
          f"(median of {rounds} alternating rounds of {calls} calls; per round "
          + ", ".join(f"{o:.1f}" for o in overhead) + ")")


if __name__ == "__main__":
    main()
