#!/usr/bin/python3
"""Compares two .npy tensors: prints max abs error and relative L2 error; exits 1 over the bound.

usage: scripts/compare_outputs.py EXPECTED.npy ACTUAL.npy [--max-rel-l2 1e-4]
"""
import argparse
import sys

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("expected")
    parser.add_argument("actual")
    parser.add_argument("--max-rel-l2", type=float, default=1e-4)
    args = parser.parse_args()
    want = np.load(args.expected).astype(np.float64)
    got = np.load(args.actual).astype(np.float64)
    if want.shape != got.shape:
        print(f"compare: shape {got.shape} differs from expected {want.shape}")
        return 1
    max_abs = float(np.max(np.abs(got - want))) if want.size else 0.0
    rel_l2 = float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))
    ok = rel_l2 < args.max_rel_l2
    print(f"compare {args.actual}: max abs error {max_abs:.3e}, relative L2 error {rel_l2:.3e} "
          f"({'ok' if ok else 'FAIL'}, bound {args.max_rel_l2:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
