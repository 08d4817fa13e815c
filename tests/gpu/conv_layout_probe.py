"""Whether a convolution runs faster in channels-last memory layout on this GPU: the probe
behind a possible layout knob for library convolution steps (torch.compile converts
convolutions to channels-last on its own, and beats eager by up to 2.3x on level-2
convolution tasks where opforge keeps eager's layout). For each KernelBench task file
given, times by the evaluator's method (CUDA events, a 256 MB L2 flush before each rep,
3 warm-ups, REPS reps, median):
  eager        Model's forward as written;
  cl_model     the forward with the model's parameters and its input in channels-last,
               the input's conversion and the output's return to contiguous timed with it;
  conv         the first convolution module alone on its own input, as eager runs it;
  conv_cl      the same in channels-last, its input converted beforehand (untimed);
  convert_in   the conversion of that input to channels-last alone;
and prints them with max_abs_diff, the largest difference between the outputs of eager
and cl_model. A task whose input is not 4-D or 5-D prints "no layout".
Usage (GPU host): python3 tests/gpu/conv_layout_probe.py ../shared/kernelbench/level2/*Conv*.py"""
import copy
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing_drift import load, timed as timed_reps  # noqa: E402  (the same method)

REPS = 20


def timed(fn, flush):
    """Median milliseconds of fn over REPS reps, each after an L2 flush."""
    return timed_reps(fn, flush, REPS)


CONVS = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.ConvTranspose1d,
         torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d)


def layout_of(t):
    """The channels-last memory format for t's rank, or None (rank other than 4 or 5)."""
    return {4: torch.channels_last, 5: torch.channels_last_3d}.get(t.dim())


def to_layout(module, fmt, rank):
    """A copy of module whose rank-`rank` parameters and buffers are in memory format fmt
    (Module.to(memory_format=...) refuses a model with parameters of the other rank)."""
    module = copy.deepcopy(module)
    for t in list(module.parameters()) + list(module.buffers()):
        if t.dim() == rank:
            t.data = t.data.contiguous(memory_format=fmt)
    return module


def first_conv_input(model, inputs):
    """(conv module, its input tensor) of the model's first convolution, or (None, None)."""
    seen = {}

    def hook(module, args):
        seen.setdefault("conv", (module, args[0].detach().clone()))

    handles = [m.register_forward_pre_hook(hook) for m in model.modules() if isinstance(m, CONVS)]
    model(*inputs)
    for h in handles:
        h.remove()
    return seen.get("conv", (None, None))


def probe(path, flush):
    """{label: value} for one task (see the module's text), or None without a layout."""
    mod = load(path)
    torch.manual_seed(42)
    model = mod.Model(*mod.get_init_inputs()).cuda()
    x = [t.cuda() if isinstance(t, torch.Tensor) else t for t in mod.get_inputs()]
    fmt = layout_of(x[0])
    if fmt is None:
        return None
    got = {}
    with torch.no_grad():
        cl_model = to_layout(model, fmt, x[0].dim())
        got["eager"] = timed(lambda: model(*x), flush)
        got["cl_model"] = timed(
            lambda: cl_model(x[0].contiguous(memory_format=fmt), *x[1:]).contiguous(), flush)
        want = model(*x)
        have = cl_model(x[0].contiguous(memory_format=fmt), *x[1:]).contiguous()
        got["max_abs_diff"] = (want - have).abs().max().item()
        conv, conv_in = first_conv_input(model, x)
        conv_fmt = layout_of(conv_in) if conv is not None else None
        if conv_fmt is not None:
            conv_cl = to_layout(conv, conv_fmt, conv_in.dim())
            in_cl = conv_in.contiguous(memory_format=conv_fmt)
            got["conv"] = timed(lambda: conv(conv_in), flush)
            got["conv_cl"] = timed(lambda: conv_cl(in_cl), flush)
            got["convert_in"] = timed(lambda: conv_in.contiguous(memory_format=conv_fmt), flush)
    return got


def main(paths):
    flush = torch.empty(64 * 1024 * 1024, dtype=torch.float32, device="cuda")
    for path in paths:
        name = path.rsplit("/", 1)[-1][:40]
        got = probe(path, flush)
        if got is None:
            print(name, "no layout", flush=True)
            continue
        print(name, " ".join("%s=%.4g" % kv for kv in got.items()), flush=True)
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
