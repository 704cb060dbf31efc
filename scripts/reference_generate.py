#!/usr/bin/python3
"""Greedy generation on tunec's reference executor (double precision, the ONNX definitions),
one `tunec run --reference` per token at that step's static shapes: the model's own reference
tokens, for a decoder export of scripts/export_decoder.py (its config.json names the layers,
K/V heads and head size) or its quantized forms, to compare with `tunec generate`'s.

usage: scripts/reference_generate.py EXPORT_DIR MODEL.onnx [--tokens 64] [--tunec build/src/tunec]
Prints the tokens, one line.
"""
import argparse
import json
import os
import subprocess
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("export")
    parser.add_argument("model")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--tunec", default=os.path.join(ROOT, "build", "src", "tunec"))
    args = parser.parse_args()
    config = json.load(open(os.path.join(args.export, "config.json")))
    layers, heads, dim = config["layers"], config["kv_heads"], config["head_dim"]
    positions = config.get("attention", "plain") != "gqa"
    ids = np.load(os.path.join(args.export, "prompt.npy")).astype(np.int64)
    past = {f"past_key_values.{i}.{n}": np.zeros((1, heads, 0, dim), np.float32)
            for i in range(layers) for n in ("key", "value")}
    length, out = 0, []
    with tempfile.TemporaryDirectory() as tmp:
        for step in range(args.tokens):
            n = ids.shape[1]
            feed = {"input_ids": ids, "attention_mask": np.ones((1, length + n), np.int64)}
            if positions:
                feed["position_ids"] = np.arange(length, length + n, dtype=np.int64)[None, :]
            feed.update(past)
            cmd = [args.tunec, "run", args.model, "--reference", "--output", tmp]
            for name, value in feed.items():
                path = os.path.join(tmp, "in_" + name + ".npy")
                np.save(path, value)
                cmd += ["--input", f"{name}={path}",
                        "--input-shape", f"{name}={'x'.join(map(str, value.shape))}"]
            subprocess.run(cmd, check=True, capture_output=True)
            logits = np.load(os.path.join(tmp, "logits.npy"))
            past = {k: np.load(os.path.join(tmp, k.replace("past_key_values", "present") + ".npy"))
                    for k in past}
            length += n
            ids = logits[:, -1:, :].argmax(-1).astype(np.int64)
            out.append(int(ids[0, 0]))
            print(f"token {step}: {out[-1]}", flush=True, file=__import__("sys").stderr)
    print(" ".join(map(str, out)))


if __name__ == "__main__":
    main()
