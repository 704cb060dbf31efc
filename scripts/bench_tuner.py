#!/usr/bin/python3
"""Search quality of the tuner, on workloads kept out of the cost model's training data.

1. Training data: a random sweep of --train-trials configs on each of 12 *training* workloads
   (other GEMM and conv shapes), merged into one database.
2. For each of 8 held-out workloads:
   - a long random sweep (--sweep configs, `tunec tune-op --random` on a fresh database): its
     curve is random search, and its best (with the guided run's) is the reference "best";
   - the XGBoost-guided search (`tunec tune-op`, --trials) on a copy of the training database,
     so its cost model starts from the training workloads' records (transfer, never this
     workload's); trials to reach 95% of the best for both;
   - the cost model's Spearman rank correlation on held-out configs: trained on the training
     database only, tested on this workload's sweep.
   Neither search measures the analytical default first (it is often within 5% of the best, so
   this measures the search alone).
Prints a markdown table (docs/benchmarks.md).

With --throughput OTHER_TUNEC it measures instead the tuner's throughput (trials/s) of two
builds side by side: guided tune-op jobs on THROUGHPUT_WORKLOADS from fresh databases, the two
builds alternating for --rounds rounds; prints the median trials/s of each and their ratio.

usage: scripts/bench_tuner.py --tunec build/src/tunec [--eval build/tests/tunec_cost_model_eval]
       [--train-trials 60] [--sweep 200] [--trials 100] [--work build/bench_tuner]
       scripts/bench_tuner.py --tunec build/src/tunec --throughput OLD/tunec [--rounds 5]
       [--trials 48] [--min-seconds 0.005]
"""
import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys

TRAINING = [
    ["matmul", "--m", "128", "--n", "768", "--k", "768"],
    ["matmul", "--m", "128", "--n", "3072", "--k", "768"],
    ["matmul", "--m", "512", "--n", "512", "--k", "512"],
    ["matmul", "--m", "64", "--n", "2048", "--k", "256"],
    ["matmul", "--m", "777", "--n", "333", "--k", "555"],
    ["matmul", "--m", "2048", "--n", "128", "--k", "512"],
    ["conv2d", "--ic", "64", "--h", "56", "--w", "56", "--oc", "64", "--kh", "3", "--kw", "3", "--pad", "1"],
    ["conv2d", "--ic", "256", "--h", "28", "--w", "28", "--oc", "128", "--kh", "1", "--kw", "1"],
    ["conv2d", "--ic", "128", "--h", "28", "--w", "28", "--oc", "128", "--kh", "3", "--kw", "3", "--pad", "1"],
    ["conv2d", "--ic", "512", "--h", "7", "--w", "7", "--oc", "512", "--kh", "3", "--kw", "3", "--pad", "1"],
    ["conv2d", "--ic", "64", "--h", "56", "--w", "56", "--oc", "128", "--kh", "3", "--kw", "3", "--pad", "1", "--stride", "2"],
    ["conv2d", "--ic", "3", "--h", "224", "--w", "224", "--oc", "64", "--kh", "7", "--kw", "7", "--pad", "3", "--stride", "2"],
]

WORKLOADS = [
    ("gemm 256x1024x512", ["matmul", "--m", "256", "--n", "1024", "--k", "512"]),
    ("gemm 384x768x768", ["matmul", "--m", "384", "--n", "768", "--k", "768"]),
    ("gemm 1024x256x1024", ["matmul", "--m", "1024", "--n", "256", "--k", "1024"]),
    ("gemm 200x500x300", ["matmul", "--m", "200", "--n", "500", "--k", "300"]),
    ("conv 28x28x64->128 3x3", ["conv2d", "--ic", "64", "--h", "28", "--w", "28", "--oc", "128", "--kh", "3", "--kw", "3", "--pad", "1"]),
    ("conv 14x14x128->256 3x3 s2", ["conv2d", "--ic", "128", "--h", "28", "--w", "28", "--oc", "256", "--kh", "3", "--kw", "3", "--pad", "1", "--stride", "2"]),
    ("conv 14x14x256->256 1x1", ["conv2d", "--ic", "256", "--h", "14", "--w", "14", "--oc", "256", "--kh", "1", "--kw", "1"]),
    ("conv 56x56x32->64 3x3", ["conv2d", "--ic", "32", "--h", "56", "--w", "56", "--oc", "64", "--kh", "3", "--kw", "3", "--pad", "1"]),
]


def tune(tunec, shape, db, trials, seed, random_search, min_seconds):
    cmd = [tunec, "tune-op", *shape, "--threads", "1", "--trials", str(trials), "--db", db,
           "--seed", str(seed), "--json", "--quiet", "--min-seconds", str(min_seconds), "--no-default"]
    if random_search:
        cmd.append("--random")
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


THROUGHPUT_WORKLOADS = [
    ["matmul", "--m", "128", "--n", "768", "--k", "768"],
    ["conv2d", "--ic", "64", "--h", "28", "--w", "28", "--oc", "64", "--kh", "3", "--kw", "3", "--pad", "1"],
]


def throughput(args):
    """Trials/s of two builds in alternating rounds (each round: every workload, fresh DB)."""
    builds = {"this": args.tunec, "other": args.throughput}
    rates = {name: [] for name in builds}
    for r in range(args.rounds):
        order = list(builds.items()) if r % 2 == 0 else list(reversed(builds.items()))
        for name, tunec in order:
            trials, seconds = 0, 0.0
            for w, shape in enumerate(THROUGHPUT_WORKLOADS):
                db = os.path.join(args.work, f"throughput_{name}_{r}_{w}.db")
                out = tune(tunec, shape, db, args.trials, 7 + w, False, args.min_seconds)
                trials += out["trials"]
                seconds += out["seconds"]
            rates[name].append(trials / seconds)
            print(f"round {r + 1}: {name} {trials / seconds:.2f} trials/s", file=sys.stderr)
    this, other = statistics.median(rates["this"]), statistics.median(rates["other"])
    print(f"| build | median trials/s ({args.rounds} rounds, {args.trials} trials per workload) |")
    print("| --- | --- |")
    print(f"| {args.tunec} | {this:.2f} |")
    print(f"| {args.throughput} | {other:.2f} |")
    print(f"\nratio (this / other): {this / other:.3f}")


def spearman_text(row):
    if row["spearman"] is None:
        return "—"
    return f"{row['spearman']:.2f} ({row['held_out']} configs)"


def expected_random_trials(sweep_db, target):
    """Expected trials of uniform random search to the first config at or above target: 1/p,
    with p the fraction of the sweep's configs that reach it (None when none does)."""
    con = sqlite3.connect(sweep_db)
    values = [row[0] for row in con.execute("SELECT gflops FROM records WHERE status = 'ok'")]
    con.close()
    hits = sum(1 for v in values if v >= target)
    # None of the sweep reaches it: random search needs more than the sweep's length; that
    # length is used as a (conservative) lower bound.
    return (len(values) / hits, False) if hits else (float(len(values)), True)


def trials_to(curve, target):
    for i, g in enumerate(curve):
        if g >= target:
            return i + 1
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tunec", required=True)
    parser.add_argument("--eval", default="build/tests/tunec_cost_model_eval")
    parser.add_argument("--train-trials", type=int, default=60)
    parser.add_argument("--sweep", type=int, default=200)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--min-seconds", type=float, default=0.1)
    parser.add_argument("--work", default="build/bench_tuner")
    parser.add_argument("--throughput", metavar="OTHER_TUNEC",
                        help="compare the tuner's trials/s with this other build instead")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    if args.throughput:
        return throughput(args)
    # 1. The training database.
    train = os.path.join(args.work, "train.db")
    for t, shape in enumerate(TRAINING):
        part = os.path.join(args.work, f"train_part{t}.db")
        tune(args.tunec, shape, part, args.train_trials, 50 + t, True, args.min_seconds)
        if t == 0:
            shutil.copy(part, train)
        else:
            merged = os.path.join(args.work, f"train_merged{t}.db")
            subprocess.run([args.tunec, "db", "merge", train, part, "-o", merged], check=True,
                           capture_output=True)
            os.replace(merged, train)
        print(f"training workload {t + 1}/{len(TRAINING)} swept", file=sys.stderr)
    # 2. The held-out workloads.
    rows = []
    for i, (name, shape) in enumerate(WORKLOADS):
        sweep_db = os.path.join(args.work, f"sweep{i}.db")
        guided_db = os.path.join(args.work, f"guided{i}.db")
        shutil.copy(train, guided_db)
        sweep = tune(args.tunec, shape, sweep_db, args.sweep, 100 + i, True, args.min_seconds)
        guided = tune(args.tunec, shape, guided_db, args.trials, 1, False, args.min_seconds)
        best = max(sweep["best_gflops"], guided["best_gflops"])
        g = trials_to(guided["best_after_trial"], 0.95 * best)
        r = trials_to(sweep["best_after_trial"], 0.95 * best)
        expected, lower_bound = expected_random_trials(sweep_db, 0.95 * best)
        out = subprocess.run([args.eval, train, sweep_db], check=True, capture_output=True,
                             text=True).stdout
        values = list(json.loads(out).values())
        rows.append({"name": name, "best": best, "guided": g, "random": r, "expected": expected, "lower_bound": lower_bound,
                     "spearman": values[0]["spearman"] if values else None,
                     "held_out": values[0]["configs"] if values else 0})
        print(f"{name}: best {best:.1f} GFLOP/s; guided reaches 95% in {g} trials, random in {r}; "
              f"Spearman {rows[-1]['spearman']}", file=sys.stderr)
    print("| workload | best GFLOP/s | XGBoost trials to 95% | random: this run | random: expected (1/p) | ratio XGBoost / expected random | Spearman (held-out configs) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    ratios, rhos = [], []
    for row in rows:
        g, r, e = row["guided"], row["random"], row["expected"]
        ratio = (g / e) if g and e else None
        if ratio is not None:
            ratios.append(ratio)
        if row["spearman"] is not None:
            rhos.append(row["spearman"])
        fmt = lambda v: "—" if v is None else str(v)
        print(f"| {row['name']} | {row['best']:.1f} | {fmt(g)} | {fmt(r)} | "
              f"{'>' if row['lower_bound'] else ''}{e:.1f} | "
              f"{'—' if ratio is None else f'{ratio:.2f}'} | "
              f"{spearman_text(row)} |")
    if ratios:
        print(f"\nmedian trials ratio (XGBoost / expected random): {statistics.median(ratios):.2f}; "
              f"median Spearman: {statistics.median(rhos):.2f}")


if __name__ == "__main__":
    sys.exit(main())
