#!/usr/bin/python3
"""One workload end to end: `tunec tune-op` on a fresh database, then the best recorded config
(`tunec bench-op --db`) against oneDNN's sgemm, measured alternately in one run, and the
tuner's throughput in trials per second.

usage: scripts/bench_tune_op.py --tunec build/src/tunec [--baselines build/bench_baselines]
       [--m 512 --n 1024 --k 1024] [--trials 96] [--rounds 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run_json(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tunec", required=True)
    parser.add_argument("--baselines", default="build/bench_baselines")
    parser.add_argument("--m", type=int, default=512)
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--k", type=int, default=1024)
    parser.add_argument("--trials", type=int, default=96)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    shape = ["--m", str(args.m), "--n", str(args.n), "--k", str(args.k)]
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "tuning.db")
        env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
        tuned = run_json([args.tunec, "tune-op", "matmul", *shape, "--threads", "1", "--trials",
                          str(args.trials), "--db", db, "--json", "--quiet"], env)
        base_env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        base_env.pop("OPENBLAS_CORETYPE", None)
        ours, dnnl = [], []
        for _ in range(args.rounds):
            ours.append(run_json([args.tunec, "bench-op", "matmul", *shape, "--db", db, "--json",
                                  "--seconds", "1"])["gflops"])
            dnnl.append(run_json([args.baselines, "gemm", str(args.m), str(args.n), str(args.k), "1.0"],
                                 base_env)["onednn_gflops"])
        o, d = statistics.median(ours), statistics.median(dnnl)
        print(f"tune-op matmul {args.m}x{args.n}x{args.k}, {args.trials} trials in "
              f"{tuned['seconds']:.1f} s ({tuned['trials'] / tuned['seconds']:.1f} trials/s, "
              f"{tuned['errors']} errors); default {tuned['default_gflops']:.1f} GFLOP/s, "
              f"best measured while tuning {tuned['best_gflops']:.1f}")
        print(f"best config: {json.dumps(tuned['best_config'])}")
        print(f"bench-op --db (median of {args.rounds}): {o:.1f} GFLOP/s; oneDNN sgemm: {d:.1f} "
              f"GFLOP/s; ratio {o / d:.3f}")


if __name__ == "__main__":
    sys.exit(main())
