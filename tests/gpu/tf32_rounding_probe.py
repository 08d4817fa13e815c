"""How eager's cuDNN convolutions round fp32 operands to TF32 on this GPU: the probe
behind a generated convolution that would match eager within KernelBench's fp32
tolerance (atol = rtol = 1e-4). Eager convolves in TF32 by default
(torch.backends.cudnn.allow_tf32), so a strict fp32 result differs from it by more than
that tolerance; a kernel that rounds its operands the way cuDNN does, multiplies them
exactly (two 11-bit significands fit in fp32's 24) and adds in fp32 would not. For the
first convolution of each KernelBench task file given, computes in float64 from operands
rounded to TF32 two ways,
  rna    round to nearest, ties away from zero (PTX cvt.rna.tf32.f32);
  trunc  the low 13 mantissa bits dropped (what tensor cores do with raw fp32 bits);
and prints, for each, the largest difference from eager's output relative to the largest
output magnitude and whether allclose(eager, it, 1e-4, 1e-4) holds; then the same for a
strict fp32 run (allow_tf32 off) against eager.
Usage (GPU host): python3 tests/gpu/tf32_rounding_probe.py ../shared/kernelbench/level1/*conv*.py"""
import copy
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conv_layout_probe import first_conv_input  # noqa: E402
from timing_drift import load  # noqa: E402

TF32_DROPPED = 0x1FFF  # the 13 low mantissa bits that TF32 does not keep
TF32_HALF = 0x1000     # half of TF32's last place


def round_rna(x):
    """x (float32) rounded to TF32, to nearest with ties away from zero (new tensor): the
    sign is its own bit, so adding half a place to the magnitude's bits and dropping the
    low bits rounds both signs away from zero."""
    bits = x.contiguous().view(torch.int32)
    return ((bits + TF32_HALF) & ~TF32_DROPPED).view(torch.float32)


def round_trunc(x):
    """x (float32) truncated to TF32: the low 13 mantissa bits cleared (new tensor)."""
    return (x.contiguous().view(torch.int32) & ~TF32_DROPPED).view(torch.float32)


def compare(want, have):
    """'<relative max difference>/<ok|fail>' of have against want (allclose 1e-4)."""
    rel = (want.double() - have.double()).abs().max().item() / max(want.abs().max().item(), 1e-30)
    ok = torch.allclose(want.double(), have.double(), atol=1e-4, rtol=1e-4)
    return "%.2e/%s" % (rel, "ok" if ok else "fail")


def float64_of(conv, x, rounding):
    """conv's output in float64 from its weight and x rounded by rounding (its bias, which
    cuDNN adds in fp32, as it is)."""
    conv64 = copy.deepcopy(conv).double()
    conv64.weight.data = rounding(conv.weight.detach()).double()
    return conv64(rounding(x).double())


def probe(path):
    """{label: comparison} of one task's first convolution, or None without one."""
    mod = load(path)
    torch.manual_seed(42)
    model = mod.Model(*mod.get_init_inputs()).cuda()
    inputs = [t.cuda() if isinstance(t, torch.Tensor) else t for t in mod.get_inputs()]
    with torch.no_grad():
        conv, x = first_conv_input(model, inputs)
        if conv is None:
            return None
        eager = conv(x)
        got = {name: compare(eager, float64_of(conv, x, rounding))
               for name, rounding in (("rna", round_rna), ("trunc", round_trunc))}
        allowed = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False
        got["strict_fp32"] = compare(eager, conv(x))
        torch.backends.cudnn.allow_tf32 = allowed
    return got


def main(paths):
    for path in paths:
        name = path.rsplit("/", 1)[-1][:40]
        got = probe(path)
        print(name, "no convolution" if got is None else
              " ".join("%s=%s" % kv for kv in got.items()), flush=True)
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
