#!/usr/bin/python3
"""Runs tunec bench-op next to OpenBLAS (cblas_sgemm) and oneDNN (dnnl_sgemm, convolution
primitive) on GEMM and ResNet-50 convolution shapes, alternating per shape in one run, and
writes a Markdown table. Use scripts/bench_ops.sh, which builds the baseline program first.

OpenBLAS runs with OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset (this workplace sets them for old
OpenBLAS builds; they force the slower Haswell kernel), so it picks its own kernel.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

GEMMS = [(256, 256, 256), (512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048),
         (128, 768, 768), (128, 3072, 768), (128, 768, 3072)]
# ResNet-50 (torchvision v1.5) convolutions at batch 1: (name, ic, hw, oc, k, stride, pad).
RESNET50 = [
    ("conv1", 3, 224, 64, 7, 2, 3),
    ("l1.1x1a", 64, 56, 64, 1, 1, 0), ("l1.3x3", 64, 56, 64, 3, 1, 1), ("l1.1x1b", 64, 56, 256, 1, 1, 0),
    ("l1.1x1c", 256, 56, 64, 1, 1, 0),
    ("l2.1x1a", 256, 56, 128, 1, 1, 0), ("l2.3x3s2", 128, 56, 128, 3, 2, 1), ("l2.1x1b", 128, 28, 512, 1, 1, 0),
    ("l2.down", 256, 56, 512, 1, 2, 0), ("l2.1x1c", 512, 28, 128, 1, 1, 0), ("l2.3x3", 128, 28, 128, 3, 1, 1),
    ("l3.1x1a", 512, 28, 256, 1, 1, 0), ("l3.3x3s2", 256, 28, 256, 3, 2, 1), ("l3.1x1b", 256, 14, 1024, 1, 1, 0),
    ("l3.down", 512, 28, 1024, 1, 2, 0), ("l3.1x1c", 1024, 14, 256, 1, 1, 0), ("l3.3x3", 256, 14, 256, 3, 1, 1),
    ("l4.1x1a", 1024, 14, 512, 1, 1, 0), ("l4.3x3s2", 512, 14, 512, 3, 2, 1), ("l4.1x1b", 512, 7, 2048, 1, 1, 0),
    ("l4.down", 1024, 14, 2048, 1, 2, 0), ("l4.1x1c", 2048, 7, 512, 1, 1, 0), ("l4.3x3", 512, 7, 512, 3, 1, 1),
]


def run_json(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def baseline_env(threads):
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    env["OMP_NUM_THREADS"] = str(threads)
    env["OPENBLAS_NUM_THREADS"] = str(threads)
    return env


def median_of(runs, key):
    return statistics.median(r[key] for r in runs)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tunec", default="build/src/tunec")
    parser.add_argument("--baselines", default="build/bench_baselines")
    parser.add_argument("--sweep", type=int, default=40, help="configs per sweep (default 40)")
    parser.add_argument("--db", default="", help="take the best config of each shape from this tuning "
                        "database (e.g. after `tunec tune`) instead of a sweep, where it has a record")
    parser.add_argument("--repeats", type=int, default=3, help="alternating rounds per shape; medians are reported")
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument("--out", default="docs/benchmarks.md")
    parser.add_argument("--only", choices=["gemm", "conv", "threads", "compile"], help="run one section")
    args = parser.parse_args()
    s = str(args.seconds)
    sections = []
    compile_ms = {}

    def progress(msg):
        print(msg, file=sys.stderr, flush=True)

    if args.only in (None, "gemm"):
        rows = ["| M x N x K | tunec default | tunec best of sweep | OpenBLAS | oneDNN | best / OpenBLAS | best / oneDNN |",
                "| --- | --- | --- | --- | --- | --- | --- |"]
        for m, n, k in GEMMS:
            shape = ["--m", str(m), "--n", str(n), "--k", str(k)]
            best = run_json([args.tunec, "bench-op", "matmul", *shape, "--sweep", str(args.sweep), "--seconds", s, "--json"])
            d, b, base = [], [], []
            for _ in range(args.repeats):
                d.append(run_json([args.tunec, "bench-op", "matmul", *shape, "--seconds", s, "--json"]))
                b.append(run_json([args.tunec, "bench-op", "matmul", *shape, "--seconds", s, "--json",
                                   "--config", json.dumps(best["config"])]))
                base.append(run_json([args.baselines, "gemm", str(m), str(n), str(k), s], baseline_env(1)))
            compile_ms.setdefault("matmul", []).extend(r["compile_ms"] for r in d)
            dg, bg = median_of(d, "gflops"), median_of(b, "gflops")
            # The default is a member of the sweep: the finalists are decided by these rounds.
            picked = "" if bg >= dg else " (default)"
            bp = median_of(b, "percent_of_peak") if bg >= dg else median_of(d, "percent_of_peak")
            bg = max(bg, dg)
            ob, od = median_of(base, "openblas_gflops"), median_of(base, "onednn_gflops")
            rows.append(f"| {m}x{n}x{k} | {dg:.1f} ({median_of(d, 'percent_of_peak'):.0f}%) | {bg:.1f} "
                        f"({bp:.0f}%){picked} | {ob:.1f} | {od:.1f} | {bg / ob:.2f} | {bg / od:.2f} |")
            progress(rows[-1])
        sections.append(("fp32 GEMM, one thread (GFLOP/s; % of the measured FMA peak)", rows))

    if args.only in (None, "conv"):
        rows = ["| layer | IC→OC, HxW, k, stride | tunec default | tunec best of sweep | oneDNN | best / oneDNN |",
                "| --- | --- | --- | --- | --- | --- |"]
        ratios = []
        for name, ic, hw, oc, k, stride, pad in RESNET50:
            shape = ["--ic", str(ic), "--h", str(hw), "--w", str(hw), "--oc", str(oc), "--kh", str(k), "--kw", str(k),
                     "--stride", str(stride), "--pad", str(pad)]
            # A 1x1 stride-1 convolution on NHWC is a matmul (M = H*W, N = OC, K = IC): the compiler
            # gives it to whichever template is faster, so both are swept here.
            candidates = [("conv2d", shape)]
            if k == 1 and stride == 1:
                candidates.append(("matmul", ["--m", str(hw * hw), "--n", str(oc), "--k", str(ic)]))
            results = []
            for op, args_ in candidates:
                best = None
                if args.db:
                    try:
                        best = run_json([args.tunec, "bench-op", op, *args_, "--db", args.db, "--seconds", s, "--json"])
                    except subprocess.CalledProcessError:
                        best = None  # no record of this shape: sweep it
                if best is None:
                    best = run_json([args.tunec, "bench-op", op, *args_, "--sweep", str(args.sweep), "--seconds", s, "--json"])
                results.append((op, args_, best))
            d, b, base = {}, {}, []
            for _ in range(args.repeats):
                for op, args_, best in results:
                    d.setdefault(op, []).append(run_json([args.tunec, "bench-op", op, *args_, "--seconds", s, "--json"]))
                    b.setdefault(op, []).append(run_json([args.tunec, "bench-op", op, *args_, "--seconds", s, "--json",
                                                          "--config", json.dumps(best["config"])]))
                base.append(run_json([args.baselines, "conv", "1", str(ic), str(hw), str(hw), str(oc), str(k), str(k),
                                      str(stride), str(pad), s], baseline_env(1)))
            for op in d:
                compile_ms.setdefault(op, []).extend(r["compile_ms"] for r in d[op])
            default_op = max(d, key=lambda op: median_of(d[op], "gflops"))
            # The finalists: each template's tuned or swept config and its default (a member of
            # every sweep and tuning job), decided by these alternating rounds.
            finalists = [(op, "", b[op]) for op in b] + [(op, " default", d[op]) for op in d]
            best_op, kind, best_runs = max(finalists, key=lambda f: median_of(f[2], "gflops"))
            dg, bg, og = median_of(d[default_op], "gflops"), median_of(best_runs, "gflops"), median_of(base, "onednn_gflops")
            ratios.append(bg / og)
            via = f" ({best_op}{kind})" if best_op == "matmul" or kind else ""
            rows.append(f"| {name} | {ic}→{oc}, {hw}x{hw}, {k}x{k}, s{stride} | {dg:.1f} ({median_of(d[default_op], 'percent_of_peak'):.0f}%) "
                        f"| {bg:.1f} ({median_of(best_runs, 'percent_of_peak'):.0f}%){via} | {og:.1f} | {bg / og:.2f} |")
            progress(rows[-1])
        geo = 1.0
        for r in ratios:
            geo *= r
        geo **= 1.0 / len(ratios)
        rows.append(f"| **geometric mean** | | | | | **{geo:.3f}** (min {min(ratios):.2f}) |")
        sections.append(("ResNet-50 convolutions, batch 1, one thread, NHWC activations (GFLOP/s; % of the measured "
                         "FMA peak; \"(matmul)\": a 1x1 stride-1 layer run by the matmul template)", rows))

    if args.only in (None, "threads"):
        rows = ["| GEMM | 1 thread | 2 threads | speed-up |", "| --- | --- | --- | --- |"]
        shape = ["--m", "2048", "--n", "2048", "--k", "2048"]
        one, two = [], []
        for _ in range(args.repeats):
            one.append(run_json([args.tunec, "bench-op", "matmul", *shape, "--seconds", s, "--json"]))
            two.append(run_json([args.tunec, "bench-op", "matmul", *shape, "--threads", "2", "--seconds", s, "--json"]))
        g1, g2 = median_of(one, "gflops"), median_of(two, "gflops")
        rows.append(f"| 2048x2048x2048 (default configs) | {g1:.1f} | {g2:.1f} | {g2 / g1:.2f}x |")
        progress(rows[-1])
        sections.append(("Two threads", rows))

    if args.only in (None, "compile"):
        rows = ["| pipeline | kernel | compile ms (median of 5) | GFLOP/s |", "| --- | --- | --- | --- |"]
        probes = [("matmul", ["--m", "1024", "--n", "1024", "--k", "1024"], "GEMM 1024^3"),
                  ("conv2d", ["--ic", "64", "--h", "56", "--w", "56", "--oc", "64", "--kh", "3", "--kw", "3", "--pad", "1"],
                   "ResNet-50 l1.3x3")]
        for pipeline in ["lean", "o3"]:
            for op, args_, label in probes:
                runs = [run_json([args.tunec, "bench-op", op, *args_, "--seconds", "0.3", "--pipeline", pipeline, "--json"])
                        for _ in range(5)]
                rows.append(f"| {pipeline} | {label} | {median_of(runs, 'compile_ms'):.1f} | {median_of(runs, 'gflops'):.1f} |")
                progress(rows[-1])
        for op, values in sorted(compile_ms.items()):
            rows.append(f"| lean | every {op} kernel of the tables above ({len(values)} compiles) | "
                        f"median {statistics.median(values):.1f}, max {max(values):.1f} | |")
        sections.append(("JIT compile time of one kernel (IR generation, optimization, machine code, weight packing)", rows))

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cmd = "bash scripts/bench_ops.sh" + ("" if len(sys.argv) == 1 else " " + " ".join(sys.argv[1:]))
    text = [f"## Kernel benchmarks ({now})", "",
            f"Command: `{cmd}`. Machine: {platform.node()}, {os.cpu_count()} vCPUs. Every number is a median of "
            f"{args.repeats} alternating rounds (tunec default, tunec best config, baselines) of repeated timing "
            f"for at least {args.seconds} s each; the best config comes from "
            + (f"the tuning database {args.db} (`tunec bench-op ... --db`), or where it has no record of a shape "
               "from " if args.db else "")
            + f"a sweep of {args.sweep} random valid "
            "configs plus the default (`tunec bench-op ... --sweep`); the default stays a finalist, so the "
            "best column is the faster of the two in these rounds (marked \"default\" where the default won). "
            "% of peak is against the FMA-throughput probe "
            "that `tunec bench-op` runs at start (times the thread count).", ""]
    for title, rows in sections:
        text += [f"### {title}", ""] + rows + [""]
    block = "\n".join(text)
    header = "# Benchmarks\n\nResults are appended by the scripts that produce them, newest last, with their commands.\n\n"
    old = open(args.out).read() if os.path.exists(args.out) else header
    with open(args.out, "w") as f:
        f.write(old.rstrip("\n") + "\n\n" + block)
    print(block)


if __name__ == "__main__":
    sys.exit(main())
