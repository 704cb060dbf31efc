#!/usr/bin/python3
"""The fusion golden graphs: one small PyTorch module per fusion rule, exported to ONNX
(opset 13, fixed seed) as OUT/NAME.onnx. tests/fusion/fusion_golden_test.sh compiles each and
compares `tunec inspect --fusion` with tests/fusion/golden/NAME.txt.

usage: tests/fusion/make_graphs.py --out DIR
"""
import argparse
import os
import sys

import torch
from torch import nn


class ConvSiluResidual(nn.Module):
    """Conv + bias + SiLU (exported as Sigmoid and Mul) + a residual add: one conv kernel."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        return nn.functional.silu(self.conv(x)) + x


class SqueezeExcite(nn.Module):
    """Depthwise conv + SiLU, squeeze-excite (pool, 1x1 convs, sigmoid, channel scale), 1x1."""

    def __init__(self):
        super().__init__()
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.se1 = nn.Conv2d(16, 4, 1)
        self.se2 = nn.Conv2d(4, 16, 1)
        self.project = nn.Conv2d(16, 8, 1)

    def forward(self, x):
        y = nn.functional.silu(self.dw(x))
        s = torch.sigmoid(self.se2(nn.functional.silu(self.se1(y.mean((2, 3), keepdim=True)))))
        return self.project(y * s)


class LinearGeluTanh(nn.Module):
    """Linear + GELU, then Linear + tanh, then Linear + exp: activations in matmul epilogues."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(24, 32)
        self.b = nn.Linear(32, 16)
        self.c = nn.Linear(16, 8)

    def forward(self, x):
        return torch.exp(self.c(torch.tanh(self.b(nn.functional.gelu(self.a(x))))))


class Attention(nn.Module):
    """Multi-head self-attention with a residual LayerNorm: sibling Q/K/V projections merged,
    the attention fused, the output projection ending in the LayerNorm."""

    def __init__(self, width=32, heads=4):
        super().__init__()
        self.heads, self.dim = heads, width // heads
        self.q, self.k, self.v = nn.Linear(width, width), nn.Linear(width, width), nn.Linear(width, width)
        self.out = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)

    def split(self, x):
        return x.reshape(1, -1, self.heads, self.dim).transpose(1, 2)

    def forward(self, x):
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        p = torch.softmax(q @ k.transpose(-1, -2) / self.dim ** 0.5, dim=-1)
        c = (p @ v).transpose(1, 2).reshape(1, -1, self.heads * self.dim)
        return self.norm(self.out(c) + x)


class ConvNextBlock(nn.Module):
    """Depthwise 7x7, permute to channels-last, LayerNorm, two Linears with GELU, permute back,
    layer scale and the residual: the permutes are views of the NHWC activation."""

    def __init__(self, c=16):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = nn.LayerNorm(c)
        self.a, self.b = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.gamma = nn.Parameter(torch.rand(c) + 0.5)

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.b(nn.functional.gelu(self.a(self.norm(y)))).permute(0, 3, 1, 2)
        return x + self.gamma.reshape(1, -1, 1, 1) * y


class ChannelSplitConcat(nn.Module):
    """ShuffleNet's unit without the shuffle: split the channels, a branch of convs on one half,
    concatenate: NHWC throughout, no reorder between the convs."""

    def __init__(self, c=16):
        super().__init__()
        self.a = nn.Conv2d(c // 2, c // 2, 1)
        self.dw = nn.Conv2d(c // 2, c // 2, 3, padding=1, groups=c // 2)

    def forward(self, x):
        x1, x2 = x.chunk(2, dim=1)
        return torch.cat((x1, self.dw(torch.relu(self.a(x2)))), dim=1)


class ChannelShuffle(nn.Module):
    """ShuffleNet's unit with its shuffle (view, transpose, view) and the chunk of the next unit:
    the shuffle and each half are Gathers of the concatenated channels, NHWC, no reorder."""

    def __init__(self, c=16):
        super().__init__()
        self.stem = nn.Conv2d(c, c, 1)
        self.a = nn.Conv2d(c // 2, c // 2, 1)
        self.b = nn.Conv2d(c // 2, c // 2, 1)
        self.dw = nn.Conv2d(c // 2, c // 2, 3, padding=1, groups=c // 2)

    def forward(self, x):
        x1, x2 = torch.relu(self.stem(x)).chunk(2, dim=1)
        y = torch.cat((x1, self.dw(torch.relu(self.a(x2)))), dim=1)
        n, c, h, w = y.shape
        y = y.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)
        y1, y2 = y.chunk(2, dim=1)
        return torch.cat((y1, torch.relu(self.b(y2))), dim=1)


class ShuffleUnits(nn.Module):
    """Three ShuffleNetV2 units (one downsampling, two basic) and a 1x1 conv, as torchvision
    writes them: each branch's last conv writes its part of the shuffled output in place, the
    next unit's first conv reads its half in place, and each basic unit copies its pass-through
    half once (a ChannelRuns step); no reorder between convs."""

    def __init__(self, c=16):
        super().__init__()
        h = c // 2

        def branch(cin, stride):
            return nn.Sequential(nn.Conv2d(cin, h, 1), nn.ReLU(),
                                 nn.Conv2d(h, h, 3, stride=stride, padding=1, groups=h),
                                 nn.Conv2d(h, h, 1), nn.ReLU())

        self.down1 = nn.Sequential(nn.Conv2d(c, c, 3, stride=2, padding=1, groups=c),
                                   nn.Conv2d(c, h, 1), nn.ReLU())
        self.down2 = branch(c, 2)
        self.units = nn.ModuleList([branch(h, 1), branch(h, 1)])
        self.head = nn.Conv2d(c, c, 1)

    @staticmethod
    def shuffle(y):
        n, c, hh, w = y.shape
        return y.view(n, 2, c // 2, hh, w).transpose(1, 2).reshape(n, c, hh, w)

    def forward(self, x):
        y = self.shuffle(torch.cat((self.down1(x), self.down2(x)), dim=1))
        for unit in self.units:
            x1, x2 = y.chunk(2, dim=1)
            y = self.shuffle(torch.cat((x1, unit(x2)), dim=1))
        return self.head(y)


class ConvSoftmax(nn.Module):
    """A boundary: Softmax after a Conv is a reduction no conv epilogue takes (the reason is
    printed)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 1)

    def forward(self, x):
        return torch.softmax(self.conv(x), dim=1)


GRAPHS = {
    "conv_silu_residual": (ConvSiluResidual, (1, 8, 10, 10)),
    "squeeze_excite": (SqueezeExcite, (1, 16, 9, 9)),
    "linear_gelu_tanh_exp": (LinearGeluTanh, (1, 5, 24)),
    "attention_layernorm": (Attention, (1, 11, 32)),
    "convnext_block": (ConvNextBlock, (1, 16, 8, 8)),
    "channel_split_concat": (ChannelSplitConcat, (1, 16, 6, 6)),
    "channel_shuffle": (ChannelShuffle, (1, 16, 6, 6)),
    "conv_softmax": (ConvSoftmax, (1, 4, 5, 5)),
    "shuffle_units": (ShuffleUnits, (1, 16, 12, 12)),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, (cls, shape) in GRAPHS.items():
        torch.manual_seed(0)
        model = cls().eval()
        x = torch.randn(*shape)
        with torch.no_grad():
            torch.onnx.export(model, (x,), os.path.join(args.out, name + ".onnx"), input_names=["x"],
                              output_names=["y"], opset_version=13, do_constant_folding=True)


if __name__ == "__main__":
    sys.exit(main())
