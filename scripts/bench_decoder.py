#!/usr/bin/python3
"""Greedy generation with a decoder (scripts/export_decoder.py's export), tunec against ONNX
Runtime on the same ONNX model, in alternating rounds.

Each round generates --tokens tokens from the export's prompt (prompt.npy): tunec with the
compiled model.so (loaded once, in this process, through tunec.Generator: its K/V caches in place;
--dense: Model.run with the presents fed back as the past), then ONNX
Runtime (scripts/bench/ort_generate.js, its own process). Per round: the time to the first
token (the prompt's prefill) and the median of the decode steps; then the medians over rounds,
their ratio, and the decode rate in GB/s of the Linear weights each step reads
(config.json's linear_weight_bytes_f32, scaled by --weight-bits). Both must generate the tokens
PyTorch did (tokens.npy, when the export wrote as many).

usage: scripts/bench_decoder.py EXPORT_DIR MODEL.so [--tokens 64] [--rounds 3] [--threads 1]
       [--weight-bits 32] [--onnx EXPORT_DIR/model.onnx] [--prompt-len N]
Run pinned (taskset -c 0 for one thread) with NODE_PATH at onnxruntime-node's node_modules.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tunec_generate(model, prompt, tokens, kv, positions=True, dense=False):
    """tunec.Generator (the K/V caches kept in place where the model keeps them), or with
    dense=True the presents fed back through Model.run as arrays (what any runtime's plain API
    does)."""
    if dense:
        return tunec_generate_dense(model, prompt, tokens, kv, positions)
    gen = tunec.Generator(model)
    ids, out, times = [int(t) for t in prompt[0]], [], []
    for _ in range(tokens):
        t0 = time.perf_counter()
        logits = gen.append(ids)
        times.append((time.perf_counter() - t0) * 1e3)
        ids = [int(logits.argmax())]
        out.append(ids[0])
    return out, times[0], times[1:]


def tunec_generate_dense(model, prompt, tokens, kv, positions=True):
    past = {i["name"]: np.zeros((1, i["shape"][1], 0, i["shape"][3]), np.float32) for i in kv}
    ids, past_len, out, times = prompt, 0, [], []
    for _ in range(tokens):
        n = ids.shape[1]
        feed = {"input_ids": ids.astype(np.int64),
                "attention_mask": np.ones((1, past_len + n), np.int64)}
        if positions:  # a GroupQueryAttention export counts them itself
            feed["position_ids"] = np.arange(past_len, past_len + n, dtype=np.int64)[None, :]
        feed.update(past)
        t0 = time.perf_counter()
        y = model.run(feed)
        times.append((time.perf_counter() - t0) * 1e3)
        past = {k: y[k.replace("past_key_values", "present")] for k in past}
        past_len += n
        ids = y["logits"][:, -1:, :].argmax(-1)
        out.append(int(ids[0, 0]))
    return out, times[0], times[1:]


def ort_generate(onnx, prompt, tokens, threads, config):
    cmd = ["node", os.path.join(ROOT, "scripts", "bench", "ort_generate.js"), onnx,
           "--prompt", ",".join(str(int(v)) for v in prompt[0]), "--tokens", str(tokens),
           "--threads", str(threads), "--kv-heads", str(config["kv_heads"]),
           "--head-dim", str(config["head_dim"])]
    r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return r["tokens"], r["ttft_ms"], r["decode_ms"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("export")
    parser.add_argument("model")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--weight-bits", type=float, default=32)
    parser.add_argument("--onnx", default="")
    parser.add_argument("--dense", action="store_true",
                        help="tunec through Model.run with the presents fed back as arrays "
                             "instead of tunec.Generator")
    parser.add_argument("--prompt-len", type=int, default=0,
                        help="a random prompt of this many tokens (seeded) instead of prompt.npy")
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(ROOT, "build", "python"))
    global tunec
    import tunec
    config = json.load(open(os.path.join(args.export, "config.json")))
    onnx = args.onnx or os.path.join(args.export, "model.onnx")
    prompt = np.load(os.path.join(args.export, "prompt.npy"))
    want = list(np.load(os.path.join(args.export, "tokens.npy")))
    if args.prompt_len:
        prompt = np.random.default_rng(1).integers(1, config["vocab"], (1, args.prompt_len))
        want = []
    model = tunec.load(args.model, threads=args.threads)
    kv = [i for i in model.inputs if i["name"].startswith("past_key_values")]
    rows = {"tunec": [], "onnxruntime": []}
    last = {}
    for r in range(args.rounds):
        for name in rows:
            if name == "tunec":
                tokens, ttft, decode = tunec_generate(model, prompt, args.tokens, kv,
                                                      config.get("attention") != "gqa",
                                                      args.dense)
            else:
                tokens, ttft, decode = ort_generate(onnx, prompt, args.tokens, args.threads,
                                                    config)
            last[name] = tokens
            n = min(len(want), len(tokens))
            same = tokens[:n] == want[:n]
            rows[name].append((ttft, float(np.median(decode))))
            print(f"round {r + 1} {name:12s} ttft {ttft:8.2f} ms  decode {np.median(decode):7.2f} "
                  f"ms/token  tokens {'= PyTorch' if same else 'DIFFER from PyTorch'} ({n})",
                  flush=True)
    weight_bytes = config["linear_weight_bytes_f32"] * args.weight_bits / 32
    med = {k: (np.median([t for t, _ in v]), np.median([d for _, d in v])) for k, v in rows.items()}
    print(f"\n{config['size']} decoder ({config['parameters'] / 1e6:.1f}M parameters), prompt "
          f"{prompt.shape[1]} tokens, {args.tokens} generated, {args.threads} thread(s), "
          f"{args.rounds} rounds")
    for k, (ttft, dec) in med.items():
        print(f"  {k:12s} ttft {ttft:8.2f} ms  decode {dec:7.2f} ms/token ({1e3 / dec:6.1f} "
              f"tokens/s, {weight_bytes / dec / 1e6:5.1f} GB/s of weights)")
    print(f"  onnxruntime / tunec: ttft {med['onnxruntime'][0] / med['tunec'][0]:.2f}x, decode "
          f"{med['onnxruntime'][1] / med['tunec'][1]:.2f}x")
    a, b = last["tunec"], last["onnxruntime"]
    agree = next((i for i in range(len(a)) if a[i] != b[i]), len(a))
    print(f"  tunec and ONNX Runtime generate the same first {agree} of {len(a)} tokens")


if __name__ == "__main__":
    main()
