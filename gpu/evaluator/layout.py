# Evaluator channels-last memory order: a plan's "channels_last" list (validation, and the plan the GPU library is given without it), the memory format of a rank, tensors passed in that order, and the library convolutions whose input is made channels-last.
"""The spec is docs/architecture.md, "Programs: regions, library steps, composition": a
plan may list tensors its kernels address in (N, H, W, C) or (N, D, H, W, C) order; each
is passed as t.contiguous(memory_format=F), F being torch.channels_last for rank 4 and
torch.channels_last_3d for rank 5, and a listed tensor the plan writes is allocated so.
Functions here keep no references to the tensors or plans they are given; what they
return is new (or, where they say so, the caller's own object)."""

import torch

KEY = "channels_last"

# Library convolutions whose value a region reads channels-last run on a channels-last
# input, so that PyTorch picks its channels-last kernel and returns a channels-last value.
# Matched on the profile graph's targets (call_module: the module's class name), as
# engine/partition.c matches them (partition_is_conv_2d_3d, which the export also
# calls through export_is_convolution): keep the lists equal.
CONV_MODULES = frozenset({"Conv2d", "Conv3d", "ConvTranspose2d", "ConvTranspose3d"})
CONV_FUNCTIONS = frozenset({
    "torch.conv2d", "torch.conv3d", "torch.conv_transpose2d", "torch.conv_transpose3d",
    "torch.nn.functional.conv2d", "torch.nn.functional.conv3d",
    "torch.nn.functional.conv_transpose2d", "torch.nn.functional.conv_transpose3d",
    "aten.conv2d.default", "aten.conv3d.default", "aten.conv_transpose2d.input",
    "aten.conv_transpose3d.input", "aten.convolution.default"})


class LayoutError(Exception):
    """A malformed channels_last list. kind is "malformed" (not a list) or
    "unknown_tensor" (an entry that is not a distinct tensor the launches pass) or
    "rank" (a tensor of a rank other than 4 or 5); the message names the tensor."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


def memory_format(rank):
    """torch.channels_last for rank 4, torch.channels_last_3d for rank 5, else None."""
    return {4: torch.channels_last, 5: torch.channels_last_3d}.get(rank)


def in_order(t, channels_last):
    """t made dense in the order its plan addresses it: channels-last when channels_last
    and t has rank 4 or 5, else row-major (t itself when it is already so)."""
    fmt = memory_format(t.dim()) if channels_last else None
    return t.contiguous(memory_format=fmt) if fmt is not None else t.contiguous()


def launch_tensors(plan):
    """The tensor names plan's launches pass, in order of first use."""
    names = []
    launches = plan.get("launches") if isinstance(plan, dict) else None
    for launch in launches if isinstance(launches, list) else []:
        args = launch.get("args") if isinstance(launch, dict) else None
        for arg in args if isinstance(args, list) else []:
            name = arg.get("tensor") if isinstance(arg, dict) else None
            if isinstance(name, str) and name not in names:
                names.append(name)
    return names


def parse_channels_last(plan, shape_of):
    """{name: rank} of plan's channels_last list ({} when absent): distinct names of
    tensors its launches pass, each of rank 4 or 5. shape_of(name) is the tensor's
    shape from the profile, or None when unknown. Raises LayoutError."""
    if KEY not in plan:
        return {}
    names = plan[KEY]
    if not isinstance(names, list):
        raise LayoutError("malformed", "channels_last must be an array of tensor names")
    passed = set(launch_tensors(plan))
    ranks = {}
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise LayoutError("unknown_tensor", "channels_last entry %d is not a tensor name" % i)
        if name in ranks:
            raise LayoutError("unknown_tensor", "channels_last names '%s' twice" % name)
        if name not in passed:
            raise LayoutError("unknown_tensor", "channels_last names '%s', which no launch "
                                                "passes" % name)
        shape = shape_of(name)
        if not isinstance(shape, list):
            raise LayoutError("unknown_tensor", "channels_last names '%s', whose shape the "
                                                "profile does not give" % name)
        if len(shape) not in (4, 5):
            raise LayoutError("rank", "channels_last names '%s' of rank %d: channels-last "
                                      "order needs rank 4 or 5" % (name, len(shape)))
        ranks[name] = len(shape)
    return ranks


def library_candidate(candidate):
    """The candidate as libopforge_gpu is given it: without its plan's channels_last
    (the library addresses the pointers it is given, and one built before the key would
    refuse it). candidate itself when its plan has none, else a shallow copy."""
    plan = candidate.get("plan")
    if not isinstance(plan, dict) or KEY not in plan:
        return candidate
    return dict(candidate, plan={k: v for k, v in plan.items() if k != KEY})


def is_convolution(entry):
    """Whether a profile graph node is a convolution a library step runs (CONV_MODULES,
    CONV_FUNCTIONS)."""
    if entry.get("op") == "call_module":
        return entry.get("target") in CONV_MODULES
    return entry.get("op") == "call_function" and entry.get("target") in CONV_FUNCTIONS


def channels_last_input(args, kwargs):
    """(args, kwargs) of a convolution call with its input (the first positional
    argument, else the keyword input) made channels-last; an input that is not a tensor
    of rank 4 or 5 is left as it is."""
    def convert(t):
        fmt = memory_format(t.dim())
        return t.contiguous(memory_format=fmt) if fmt is not None else t
    if args and isinstance(args[0], torch.Tensor):
        return (convert(args[0]),) + tuple(args[1:]), kwargs
    if isinstance(kwargs.get("input"), torch.Tensor):
        return args, dict(kwargs, input=convert(kwargs["input"]))
    return args, kwargs
