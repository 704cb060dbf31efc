#!/usr/bin/python3
"""Times tunec's low-precision matmuls (bench-op --dtype bf16 --dst f32, or --dtype u8s8) against
oneDNN's matmul primitive of the same types (build/bench_baselines matmul bf16|u8s8, built by
scripts/bench_ops.sh), alternating tunec and oneDNN in every round on one pinned core, and prints
one Markdown row per shape: the medians of the rounds' medians, the median of the per-round
ratios, and the best single runs (on a shared machine the least disturbed ones).

  scripts/bench_low_precision.py --dtype u8s8 --rounds 5 1024x1024x1024 128x768x768
  scripts/bench_low_precision.py --dtype u8s8 --isa avx512 128x768x768    # VNNI against VNNI
"""
import argparse
import json
import os
import statistics
import subprocess


def tunec(args, m, n, k):
    cmd = ["taskset", "-c", args.core, args.tunec, "bench-op", "matmul", "--m", m, "--n", n, "--k", k,
           "--seconds", str(args.seconds), "--json"]
    cmd += ["--dtype", "u8s8"] if args.dtype == "u8s8" else ["--dtype", "bf16", "--dst", "f32"]
    if args.isa:
        cmd += ["--isa", args.isa]
    j = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
    ops = 2.0 * int(m) * int(n) * int(k)
    return j["gflops"], ops / (j["min_ms"] * 1e6), j["percent_of_peak"], j["peak_probe"]


def onednn(args, m, n, k):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if args.isa == "avx512":  # oneDNN held to the same instructions (VNNI, AVX512-BF16)
        env["ONEDNN_MAX_CPU_ISA"] = env["DNNL_MAX_CPU_ISA"] = "AVX512_CORE_BF16"
    out = subprocess.run(["taskset", "-c", args.core, args.baselines, "matmul", args.dtype, m, n, k,
                          str(args.seconds)], check=True, capture_output=True, text=True, env=env).stdout
    j = json.loads(out.strip().splitlines()[-1])
    return j["onednn_gflops"], j["onednn_best_gflops"], j["onednn_impl"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("shapes", nargs="+", help="MxNxK")
    p.add_argument("--dtype", choices=["bf16", "u8s8"], default="u8s8")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=0.4)
    p.add_argument("--core", default="0")
    p.add_argument("--isa", choices=["avx512"], help="tunec's AVX-512 kernels (VNNI, vdpbf16ps) "
                   "instead of AMX, and oneDNN held to AVX-512 too")
    p.add_argument("--tunec", default="build/src/tunec")
    p.add_argument("--baselines", default="build/bench_baselines")
    args = p.parse_args()
    unit = "GOP/s" if args.dtype == "u8s8" else "GFLOP/s"
    print(f"| shape | tunec {unit} (median, % of peak) | oneDNN {unit} (median) | ratio per round | "
          f"best tunec | best oneDNN | oneDNN impl |")
    print("|---|---|---|---|---|---|---|")
    for shape in args.shapes:
        m, n, k = shape.split("x")
        t, tb, pct, d, db, ratios = [], [], [], [], [], []
        for _ in range(args.rounds):
            a, ab, pc, probe = tunec(args, m, n, k)
            o, ob, impl = onednn(args, m, n, k)
            t.append(a), tb.append(ab), pct.append(pc), d.append(o), db.append(ob), ratios.append(a / o)
        print(f"| {shape} | {statistics.median(t):.0f} ({statistics.median(pct):.0f}% of {probe}) | "
              f"{statistics.median(d):.0f} | {statistics.median(ratios):.2f} | {max(tb):.0f} | {max(db):.0f} | "
              f"{impl} |", flush=True)


if __name__ == "__main__":
    main()
