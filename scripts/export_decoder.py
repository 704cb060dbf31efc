#!/usr/bin/python3
"""Exports a Llama-style decoder with random weights to ONNX, as users export theirs.

The model is written the way HuggingFace's LlamaForCausalLM computes it (transformers 4.3x):
token embeddings, per layer an RMSNorm (pow, mean, add, rsqrt, mul), rotary embeddings with
cos/sin tables gathered by position_ids and rotate_half (slice, neg, concat), grouped-query
attention (the K/V heads repeated through expand and reshape), the past K/V concatenated
before the attention and returned as present K/V, the 4-d causal mask built from the 2-d
attention mask (full, triu-like comparison of aranges, masked_fill, expand), SwiGLU
(silu(gate) * up -> down), a final RMSNorm and the LM head. Inputs and outputs are named as
optimum names them: input_ids, attention_mask, position_ids, past_key_values.N.key/value ->
logits, present.N.key/value, with dynamic batch, sequence and past_sequence axes.

usage: scripts/export_decoder.py OUT_DIR [--size tiny|125m|1b] [--opset 17]
       [--reference PROMPT_LEN:TOKENS] [--mask arange|triu] [--attention plain|gqa]

--attention gqa writes each layer's attention as ONNX Runtime's generation builder does: one
com.microsoft.GroupQueryAttention (do_rotary with cos/sin caches of [positions, head/2], the
past and present K/V in BNSH), seqlens_k and total_sequence_length computed from the
attention mask (ReduceSum - 1, and its shape), and no position_ids input.

--reference also writes the greedy generation PyTorch makes from a fixed random prompt:
prompt.npy (int64 ids), tokens.npy (the generated ids) and logits_prefill.npy (the prefill's
logits), for checking a compiler's generation against PyTorch. config.json has the sizes and the
bytes of the Linear weights, which each decode step reads (the embedding table is gathered).
"""
import argparse
import json
import math
import os

import numpy as np
import torch
import torch.nn as nn

SIZES = {
    # hidden, layers, heads, kv heads, intermediate, vocab, positions
    "tiny": (64, 2, 4, 2, 176, 256, 128),
    "125m": (768, 12, 12, 4, 2048, 32000, 2048),
    "1b": (2048, 16, 32, 8, 5632, 32000, 2048),
}


class RMSNorm(nn.Module):
    def __init__(self, n, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


class GroupQueryAttention(torch.autograd.Function):
    """ONNX Runtime's com.microsoft.GroupQueryAttention: exported as the op, computed as the
    plain path computes it (positions past .. past + n - 1)."""

    @staticmethod
    def forward(ctx, q, k, v, past_k, past_v, seqlens_k, total, cos, sin, heads, kv_heads):
        b, n, _ = q.shape
        d = q.shape[2] // heads
        past = past_k.shape[2]
        q = q.view(b, n, heads, d).transpose(1, 2)
        k = k.view(b, n, kv_heads, d).transpose(1, 2)
        v = v.view(b, n, kv_heads, d).transpose(1, 2)
        c = torch.cat((cos, cos), -1)[past:past + n]
        s = torch.cat((sin, sin), -1)[past:past + n]
        q = q * c + rotate_half(q) * s
        k = k * c + rotate_half(k) * s
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        rep = heads // kv_heads
        kr = k[:, :, None].expand(b, kv_heads, rep, k.shape[2], d).reshape(b, heads, -1, d)
        vr = v[:, :, None].expand(b, kv_heads, rep, v.shape[2], d).reshape(b, heads, -1, d)
        scores = torch.matmul(q, kr.transpose(2, 3)) / math.sqrt(d)
        t = k.shape[2]
        later = torch.arange(t)[None, :] > (past + torch.arange(n))[:, None]
        scores = scores.masked_fill(later, torch.finfo(torch.float32).min)
        out = torch.matmul(torch.softmax(scores, -1), vr).transpose(1, 2).reshape(b, n, -1)
        return out, k, v

    @staticmethod
    def symbolic(g, q, k, v, past_k, past_v, seqlens_k, total, cos, sin, heads, kv_heads):
        out, pk, pv = g.op("com.microsoft::GroupQueryAttention", q, k, v, past_k, past_v,
                           seqlens_k, total, cos, sin, num_heads_i=heads,
                           kv_num_heads_i=kv_heads, do_rotary_i=1, rotary_interleaved_i=0,
                           outputs=3)
        out.setType(q.type())
        pk.setType(past_k.type())
        pv.setType(past_v.type())
        return out, pk, pv


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, hidden, heads, kv_heads, max_pos):
        super().__init__()
        self.heads, self.kv_heads, self.d = heads, kv_heads, hidden // heads
        self.q_proj = nn.Linear(hidden, heads * self.d, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.d, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.d, bias=False)
        self.o_proj = nn.Linear(heads * self.d, hidden, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, self.d, 2).float() / self.d))
        freqs = torch.outer(torch.arange(max_pos).float(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos(), persistent=False)
        self.register_buffer("sin_cached", emb.sin(), persistent=False)

    def repeat_kv(self, x):
        n_rep = self.heads // self.kv_heads
        if n_rep == 1:
            return x
        b, kvh, slen, d = x.shape
        x = x[:, :, None, :, :].expand(b, kvh, n_rep, slen, d)
        return x.reshape(b, kvh * n_rep, slen, d)

    def forward(self, x, mask, position_ids, past_k, past_v):
        b, n, _ = x.shape
        if isinstance(mask, tuple):  # (seqlens_k, total_sequence_length): GroupQueryAttention
            half = self.d // 2
            out, k, v = GroupQueryAttention.apply(
                self.q_proj(x), self.k_proj(x), self.v_proj(x), past_k, past_v, mask[0], mask[1],
                self.cos_cached[:, :half], self.sin_cached[:, :half], self.heads, self.kv_heads)
            return self.o_proj(out), (k, v)
        q = self.q_proj(x).view(b, n, self.heads, self.d).transpose(1, 2)
        k = self.k_proj(x).view(b, n, self.kv_heads, self.d).transpose(1, 2)
        v = self.v_proj(x).view(b, n, self.kv_heads, self.d).transpose(1, 2)
        cos = self.cos_cached[position_ids].unsqueeze(1)
        sin = self.sin_cached[position_ids].unsqueeze(1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        present = (k, v)
        k, v = self.repeat_kv(k), self.repeat_kv(v)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.d) + mask
        p = torch.softmax(scores, dim=-1)
        out = torch.matmul(p, v).transpose(1, 2).reshape(b, n, -1)
        return self.o_proj(out), present


class Layer(nn.Module):
    def __init__(self, hidden, heads, kv_heads, intermediate, max_pos):
        super().__init__()
        self.input_layernorm = RMSNorm(hidden)
        self.self_attn = Attention(hidden, heads, kv_heads, max_pos)
        self.post_attention_layernorm = RMSNorm(hidden)
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x, mask, position_ids, past_k, past_v):
        h, present = self.self_attn(self.input_layernorm(x), mask, position_ids, past_k, past_v)
        x = x + h
        y = self.post_attention_layernorm(x)
        x = x + self.down_proj(nn.functional.silu(self.gate_proj(y)) * self.up_proj(y))
        return x, present


def causal_mask(attention_mask, n, past, form="arange"):
    """HuggingFace's _prepare_4d_causal_attention_mask: [b, 1, n, past + n], 0 or min. form
    "arange" compares aranges (transformers 4.3x); "triu" is torch.triu of a full matrix
    (transformers 4.38's _update_causal_mask)."""
    b = attention_mask.shape[0]
    lowest = torch.finfo(torch.float32).min
    mask = torch.full((n, n), lowest)
    if form == "triu":
        mask = torch.triu(mask, diagonal=1)
    else:
        cond = torch.arange(n)
        mask = mask.masked_fill(cond < (cond + 1).view(n, 1), 0.0)
    mask = torch.cat([torch.zeros(n, past), mask], dim=-1)
    mask = mask[None, None, :, :].expand(b, 1, n, n + past)
    expanded = attention_mask[:, None, None, :].expand(b, 1, n, n + past).to(torch.float32)
    inverted = 1.0 - expanded
    padding = inverted.masked_fill(inverted.to(torch.bool), lowest)
    return (mask + padding).clamp(min=lowest)


class Decoder(nn.Module):
    def __init__(self, size, mask="arange", attention="plain"):
        super().__init__()
        self.mask_form = mask
        self.gqa = attention == "gqa"
        hidden, layers, heads, kv_heads, intermediate, vocab, max_pos = SIZES[size]
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(
            [Layer(hidden, heads, kv_heads, intermediate, max_pos) for _ in range(layers)])
        self.norm = RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.num_layers = layers
        self.kv_heads, self.head_dim = kv_heads, hidden // heads

    def forward(self, input_ids, attention_mask, *rest):
        if self.gqa:  # as ONNX Runtime's generation builder computes GroupQueryAttention's
            past, position_ids = rest, None
            seqlens = (attention_mask.sum(1) - 1).to(torch.int32)
            total = torch.tensor(attention_mask.shape[1]).to(torch.int32)
            mask = (seqlens, total)
        else:
            position_ids, past = rest[0], rest[1:]
            n, past_len = input_ids.shape[1], past[0].shape[2]
            mask = causal_mask(attention_mask, n, past_len, self.mask_form)
        x = self.embed_tokens(input_ids)
        presents = []
        for i, layer in enumerate(self.layers):
            x, (k, v) = layer(x, mask, position_ids, past[2 * i], past[2 * i + 1])
            presents += [k, v]
        return (self.lm_head(self.norm(x)), *presents)


def randomize(model, generator):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layernorm.weight") or name == "norm.weight":
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=generator))
            else:
                p.copy_(0.02 * torch.randn(p.shape, generator=generator))


def input_names(model):
    names = ["input_ids", "attention_mask"] + ([] if model.gqa else ["position_ids"])
    for i in range(model.num_layers):
        names += [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
    return names


def output_names(model):
    names = ["logits"]
    for i in range(model.num_layers):
        names += [f"present.{i}.key", f"present.{i}.value"]
    return names


def step_inputs(model, ids, past, past_len):
    b, n = ids.shape
    mask = torch.ones(b, past_len + n, dtype=torch.int64)
    positions = torch.arange(past_len, past_len + n, dtype=torch.int64).expand(b, n)
    if model.gqa:
        return (ids, mask, *past)
    return (ids, mask, positions, *past)


def empty_past(model, batch):
    shape = (batch, model.kv_heads, 0, model.head_dim)
    return [torch.zeros(shape) for _ in range(2 * model.num_layers)]


def export(model, path, opset):
    ids = torch.zeros(1, 4, dtype=torch.int64)
    past = [torch.zeros(1, model.kv_heads, 3, model.head_dim) for _ in range(2 * model.num_layers)]
    example = step_inputs(model, ids, past, 3)
    axes = {"input_ids": {0: "batch", 1: "sequence"},
            "attention_mask": {0: "batch", 1: "total_sequence"},
            "position_ids": {0: "batch", 1: "sequence"},
            "logits": {0: "batch", 1: "sequence"}}
    if model.gqa:
        del axes["position_ids"]
    for name in input_names(model)[2 if model.gqa else 3:]:
        axes[name] = {0: "batch", 2: "past_sequence"}
    for name in output_names(model)[1:]:
        axes[name] = {0: "batch", 2: "total_sequence"}
    torch.onnx.export(model, example, path, input_names=input_names(model),
                      output_names=output_names(model), dynamic_axes=axes, opset_version=opset,
                      custom_opsets={"com.microsoft": 1} if model.gqa else None)


def greedy(model, prompt, tokens):
    past, past_len, ids, out = empty_past(model, 1), 0, prompt, []
    prefill_logits = None
    with torch.no_grad():
        for _ in range(tokens):
            logits, *past = model(*step_inputs(model, ids, past, past_len))
            if prefill_logits is None:
                prefill_logits = logits
            past_len += ids.shape[1]
            ids = logits[:, -1:, :].argmax(-1)
            out.append(int(ids))
    return prefill_logits, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--opset", type=int, default=17)
    parser.add_argument("--reference", default="", help="PROMPT_LEN:TOKENS")
    parser.add_argument("--mask", choices=["arange", "triu"], default="arange",
                        help="how the causal mask is built (triu: torch.triu, an ONNX Trilu)")
    parser.add_argument("--attention", choices=["plain", "gqa"], default="plain",
                        help="gqa: com.microsoft.GroupQueryAttention, as ONNX Runtime's "
                             "generation builder writes it")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    model = Decoder(args.size, args.mask, args.attention).eval()
    randomize(model, generator)
    export(model, os.path.join(args.out, "model.onnx"), args.opset)
    if args.reference:
        prompt_len, tokens = (int(v) for v in args.reference.split(":"))
        vocab = SIZES[args.size][5]
        prompt = torch.randint(1, vocab, (1, prompt_len), generator=generator)
        logits, generated = greedy(model, prompt, tokens)
        np.save(os.path.join(args.out, "prompt.npy"), prompt.numpy())
        np.save(os.path.join(args.out, "tokens.npy"), np.array(generated, np.int64))
        np.save(os.path.join(args.out, "logits_prefill.npy"), logits.numpy())
    params = sum(p.numel() for p in model.parameters())
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    hidden, layers, heads, kv_heads, intermediate, vocab, max_pos = SIZES[args.size]
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump({"size": args.size, "parameters": params, "hidden": hidden, "layers": layers,
                   "heads": heads, "kv_heads": kv_heads, "head_dim": hidden // heads,
                   "intermediate": intermediate, "vocab": vocab, "max_positions": max_pos,
                   "opset": args.opset, "attention": args.attention,
                   "linear_weight_bytes_f32": 4 * linear}, f, indent=1)
    print(f"{args.out}/model.onnx: {args.size}, {params / 1e6:.1f}M parameters, opset {args.opset}")


if __name__ == "__main__":
    main()
