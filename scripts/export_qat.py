#!/usr/bin/python3
"""Exports a torchvision quantizable model (resnet50, mobilenet_v2, ...) prepared for PyTorch's
quantization-aware training and observed on random batches, straight from its fake-quant
modules with torch.onnx.export, as users export QAT models; also the same network in fp32 and a
random input; with --time-torch, times PyTorch's own int8 (the QAT model converted) on one
thread.

  /usr/bin/python3 scripts/export_qat.py resnet50 --out /tmp/qat [--backend fbgemm|qnnpack]
      [--opset 13] [--scalar-scales] [--time-torch]

writes OUT/NAME_qat.onnx, OUT/NAME_fp32.onnx, OUT/NAME_x.npy. fbgemm's activations are 0..127
(reduce_range), which the exporter writes as a Clip of the integers; --scalar-scales stores the
per-tensor scales as 0-d tensors instead of shape [1] (ONNX Runtime's QDQ fusion refuses [1]:
"QLinearAdd: Scale and Zero-point must be a scalar").
"""
import argparse
import os
import statistics
import time

import numpy as np
import torch
import torch.ao.quantization as tq
from torchvision.models import quantization as qm


def prepared(name, backend, seed=0):
    torch.manual_seed(seed)
    m = getattr(qm, name)(weights=None, quantize=False)
    m.train()
    m.fuse_model(is_qat=True)
    m.qconfig = tq.get_default_qat_qconfig(backend, version=0)
    tq.prepare_qat(m, inplace=True)
    with torch.no_grad():
        for _ in range(4):
            m(torch.randn(4, 3, 224, 224))
    m.eval()
    m.apply(tq.disable_observer)
    return m


def median_ms(fn, x, runs=20):
    with torch.no_grad():
        for _ in range(3):
            fn(x)
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            fn(x)
            times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name")
    p.add_argument("--out", required=True)
    p.add_argument("--backend", default="fbgemm")
    p.add_argument("--opset", type=int, default=13)
    p.add_argument("--scalar-scales", action="store_true")
    p.add_argument("--time-torch", action="store_true")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    x = torch.randn(1, 3, 224, 224)
    np.save(os.path.join(a.out, f"{a.name}_x.npy"), x.numpy())
    m = prepared(a.name, a.backend)
    if a.scalar_scales:
        for mod in m.modules():
            if isinstance(mod, tq.FakeQuantize) and mod.qscheme in (torch.per_tensor_affine,
                                                                   torch.per_tensor_symmetric):
                mod.scale, mod.zero_point = mod.scale.reshape(()), mod.zero_point.reshape(())
    torch.onnx.export(m, x, os.path.join(a.out, f"{a.name}_qat.onnx"), opset_version=a.opset,
                      input_names=["input"], output_names=["output"])
    fp32 = getattr(qm, a.name)(weights=None, quantize=False).eval()
    fp32.fuse_model()
    torch.onnx.export(fp32, x, os.path.join(a.out, f"{a.name}_fp32.onnx"), opset_version=a.opset,
                      input_names=["input"], output_names=["output"])
    if a.time_torch:
        torch.set_num_threads(1)
        # Debian's PyTorch has no fbgemm engine: onednn runs fbgemm's qconfig (x86).
        engines = torch.backends.quantized.supported_engines
        torch.backends.quantized.engine = a.backend if a.backend in engines else "onednn"
        int8 = tq.convert(prepared(a.name, a.backend).cpu(), inplace=False)
        for round_ in range(3):
            print(f"round {round_}: PyTorch int8 {median_ms(int8, x):.2f} ms (one thread)")


if __name__ == "__main__":
    main()
