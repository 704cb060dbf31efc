#!/usr/bin/python3
"""Exports the test models to ONNX with PyTorch (Debian's python3-torch/torchvision).

For each model: models/<name>/model.onnx, one <input>.npy per input and expected_<output>.npy
with PyTorch's outputs. Weights are random with a fixed seed (no download is possible here);
batch-norm statistics are randomized too so that folding them is really exercised.

usage: scripts/export_models.py [--out models]
       [--only resnet50,mobilenet_v2,bert_base,tiny_cnn,qdq_tiny_cnn,qdq_resnet50,
        qdq_mobilenet_v2,efficientnet_b0,convnext_tiny,shufflenet_v2] [--weight-bits 7]

qdq_resnet50 and qdq_mobilenet_v2 are quantized the way PyTorch users quantize them: torchvision's
quantizable models, conv-bn-relu fused, QAT fake quantization (u8 activations per tensor, s8
weights per output channel) calibrated on random batches, converted to int8 and exported; their
expected outputs are PyTorch's int8 ones, and fp32.onnx beside each is its fp32 original (the
same network with the fake quantization off). --weight-bits 7 (the default) keeps the weights in
[-64, 63], as oneDNN and ONNX Runtime advise for AVX2 CPUs without VNNI, so that every int8
strategy computes them exactly; 8 is the full range.
"""
import argparse
import copy
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn


def randomize_batchnorm(model, generator):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n, generator=generator) * 0.1)
            m.running_var.copy_(torch.rand(n, generator=generator) + 0.5)
            m.weight.data.copy_(torch.rand(n, generator=generator) + 0.5)
            m.bias.data.copy_(torch.randn(n, generator=generator) * 0.1)


class TinyCnn(nn.Module):
    """The bundled example: conv-bn-relu, a strided conv, a residual add, pooling and a Gemm."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.conv3 = nn.Conv2d(32, 32, 3, padding=1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.conv2(x))
        y = torch.relu(self.conv3(y) + y)
        y = torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1)
        return torch.softmax(self.fc(y), dim=1)


class BertLayer(nn.Module):
    """One BERT-base encoder layer, written out as HuggingFace's BertLayer computes it."""

    def __init__(self, hidden=768, heads=12, ffn=3072, eps=1e-12):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.q, self.k, self.v = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
        self.attn_out = nn.Linear(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden, eps=eps)
        self.ffn_in = nn.Linear(hidden, ffn)
        self.ffn_out = nn.Linear(ffn, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=eps)

    def split(self, x, seq):
        return x.view(1, seq, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x):
        seq = x.shape[1]
        q, k, v = self.split(self.q(x), seq), self.split(self.k(x), seq), self.split(self.v(x), seq)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        context = torch.matmul(torch.softmax(scores, dim=-1), v)
        context = context.permute(0, 2, 1, 3).reshape(1, seq, self.heads * self.head_dim)
        x = self.ln1(x + self.attn_out(context))
        return self.ln2(x + self.ffn_out(nn.functional.gelu(self.ffn_in(x))))


class BertEncoder(nn.Module):
    """BERT-base: embeddings (word, position, token type, LayerNorm) and 12 encoder layers."""

    def __init__(self, vocab=30522, hidden=768, layers=12, max_pos=512):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(max_pos, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.ln = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList([BertLayer(hidden) for _ in range(layers)])

    def forward(self, input_ids):
        seq = input_ids.shape[1]
        positions = torch.arange(seq).unsqueeze(0)
        x = self.word(input_ids) + self.position(positions) + self.token_type(torch.zeros_like(input_ids))
        x = self.ln(x)
        for layer in self.layers:
            x = layer(x)
        return x


def init_bert(model, generator):
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            m.weight.data.copy_(torch.randn(m.weight.shape, generator=generator) * 0.02)
        if isinstance(m, nn.Linear):
            m.bias.data.copy_(torch.randn(m.bias.shape, generator=generator) * 0.02)
        if isinstance(m, nn.LayerNorm):
            m.weight.data.copy_(torch.rand(m.weight.shape, generator=generator) + 0.5)
            m.bias.data.copy_(torch.randn(m.bias.shape, generator=generator) * 0.1)


class QdqTinyCnn(nn.Module):
    """TinyCnn quantized the way PyTorch users do it: eager-mode QAT fake quantization (u8
    activations per tensor, i8 weights per output channel), calibrated on random batches and
    exported as QuantizeLinear/DequantizeLinear (QDQ) pairs."""

    def __init__(self):
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.net = TinyCnn()
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        return self.dequant(self.net(self.quant(x)))


def quantize_qat(model, generator):
    Q = torch.ao.quantization
    model.qconfig = Q.QConfig(
        activation=Q.FakeQuantize.with_args(observer=Q.MovingAverageMinMaxObserver, quant_min=0,
                                            quant_max=255, dtype=torch.quint8),
        weight=Q.FakeQuantize.with_args(observer=Q.MovingAveragePerChannelMinMaxObserver,
                                        quant_min=-128, quant_max=127, dtype=torch.qint8,
                                        qscheme=torch.per_channel_symmetric, ch_axis=0))
    Q.prepare_qat(model.train(), inplace=True)
    with torch.no_grad():
        for _ in range(8):
            model(torch.randn(2, 3, 32, 32, generator=generator))
    model.apply(Q.disable_observer)
    return model


def scale_residual_branches(model, gain):
    """The last batch norm of every residual branch scaled by `gain` (as zero_init_residual
    starts them at 0): a random network whose blocks add small corrections to their input, as
    trained ones do, instead of one where the rounding of each block's int8 output compounds."""
    for m in model.modules():
        last = getattr(m, "bn3", None)
        if last is None and getattr(m, "use_res_connect", False):
            last = m.conv[-1]
        if last is not None:
            last.weight.data.mul_(gain)


def quantize_torchvision(name, generator, weight_bits):
    """torchvision's quantizable ResNet-50 or MobileNetV2 through PyTorch's eager QAT flow,
    converted to its int8 model (the quantized engine's kernels)."""
    from torchvision.models import quantization as tq

    Q = torch.ao.quantization
    model = {"qdq_resnet50": tq.resnet50, "qdq_mobilenet_v2": tq.mobilenet_v2}[name](
        weights=None, quantize=False)
    randomize_batchnorm(model, generator)
    scale_residual_branches(model, 0.2)
    model.eval()
    model.fuse_model(is_qat=True)
    lo, hi = -(1 << (weight_bits - 1)), (1 << (weight_bits - 1)) - 1
    model.qconfig = Q.QConfig(
        activation=Q.FakeQuantize.with_args(observer=Q.MovingAverageMinMaxObserver, quant_min=0,
                                            quant_max=255, dtype=torch.quint8),
        weight=Q.FakeQuantize.with_args(observer=Q.MovingAveragePerChannelMinMaxObserver,
                                        quant_min=lo, quant_max=hi, dtype=torch.qint8,
                                        qscheme=torch.per_channel_symmetric, ch_axis=0))
    Q.prepare_qat(model.train(), inplace=True)
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(2, 3, 224, 224, generator=generator))
    model.eval()
    model.apply(Q.disable_observer)
    engines = torch.backends.quantized.supported_engines
    torch.backends.quantized.engine = "onednn" if "onednn" in engines else "qnnpack"
    # Its fp32 original: the same network with the fake quantization off (for benchmarks).
    original = copy.deepcopy(model)
    original.apply(Q.disable_fake_quant)
    return Q.convert(model, inplace=False), original


# The fp32 originals of the quantized models build() made, by name (exported as fp32.onnx).
FP32_ORIGINALS = {}


def build(name, generator, weight_bits=7):
    import torchvision

    if name == "tiny_cnn":
        model = TinyCnn()
        randomize_batchnorm(model, generator)
        return model, {"x": torch.randn(1, 3, 32, 32, generator=generator)}
    if name == "qdq_tiny_cnn":
        model = QdqTinyCnn()
        randomize_batchnorm(model, generator)
        quantize_qat(model, generator)
        return model, {"x": torch.randn(1, 3, 32, 32, generator=generator)}
    if name in ("qdq_resnet50", "qdq_mobilenet_v2"):
        model, FP32_ORIGINALS[name] = quantize_torchvision(name, generator, weight_bits)
        return model, {"x": torch.randn(1, 3, 224, 224, generator=generator)}
    if name == "resnet50":
        model = torchvision.models.resnet50(weights=None)
        randomize_batchnorm(model, generator)
        return model, {"x": torch.randn(1, 3, 224, 224, generator=generator)}
    if name == "mobilenet_v2":
        model = torchvision.models.mobilenet_v2(weights=None)
        randomize_batchnorm(model, generator)
        return model, {"x": torch.randn(1, 3, 224, 224, generator=generator)}
    if name in ("efficientnet_b0", "convnext_tiny", "shufflenet_v2"):
        # The fusion benchmarks (#17): SiLU + squeeze-excite, LayerNorm over channels between
        # NHWC permutes, channel shuffle with split and concat.
        ctor = {"efficientnet_b0": torchvision.models.efficientnet_b0,
                "convnext_tiny": torchvision.models.convnext_tiny,
                "shufflenet_v2": torchvision.models.shufflenet_v2_x1_0}[name]
        model = ctor(weights=None)
        randomize_batchnorm(model, generator)
        return model, {"x": torch.randn(1, 3, 224, 224, generator=generator)}
    if name == "bert_base":
        model = BertEncoder()
        init_bert(model, generator)
        return model, {"input_ids": torch.randint(0, 30522, (1, 128), generator=generator)}
    raise SystemExit(f"export_models: unknown model '{name}'")


def export(name, out_dir, weight_bits=7):
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    model, inputs = build(name, generator, weight_bits)
    model.eval()
    path = os.path.join(out_dir, name)
    os.makedirs(path, exist_ok=True)
    with torch.no_grad():
        outputs = model(*inputs.values())
        torch.onnx.export(model, tuple(inputs.values()), os.path.join(path, "model.onnx"),
                          input_names=list(inputs), output_names=["y"], opset_version=13,
                          do_constant_folding=True)
        original = FP32_ORIGINALS.get(name)
        if original is not None:  # a quantized model's fp32 original, as fp32.onnx
            torch.onnx.export(original.eval(), tuple(inputs.values()), os.path.join(path, "fp32.onnx"),
                              input_names=list(inputs), output_names=["y"], opset_version=13,
                              do_constant_folding=True)
    for key, value in inputs.items():
        np.save(os.path.join(path, f"{key}.npy"), value.numpy())
    np.save(os.path.join(path, "expected_y.npy"), outputs.numpy())
    print(f"exported {name} to {path}/model.onnx")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="models", help="output directory (default: models)")
    parser.add_argument("--only", default="tiny_cnn,resnet50,mobilenet_v2,bert_base",
                        help="comma-separated model names")
    parser.add_argument("--weight-bits", type=int, choices=(7, 8), default=7,
                        help="qdq_resnet50, qdq_mobilenet_v2: the weights' bits (default 7)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name in args.only.split(","):
        export(name, args.out, args.weight_bits)


if __name__ == "__main__":
    sys.exit(main())
