# Evaluator tensor descriptions: dtype names, the profile's tensor entries, named inputs and parameters, and JSON-safe copies of task values.
"""Functions here never keep references to the tensors they are given; what they return
is new and the caller's."""

import math

import torch


def json_safe(obj):
    """Returns a copy of obj that json.dumps(allow_nan=False) accepts: non-finite floats
    become null, tuples lists, unknown objects their str()."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, torch.Tensor):
        return tensor_spec(None, obj)
    return str(obj)


def dtype_name(dtype):
    """'float32' for torch.float32."""
    return str(dtype).replace("torch.", "")


def tensor_bytes(t):
    """Bytes of t's elements."""
    return t.numel() * t.element_size()


def tensor_spec(name, t):
    """Profile entry of one tensor (name may be None)."""
    spec = {"dtype": dtype_name(t.dtype), "shape": list(t.shape), "numel": t.numel(),
            "bytes": tensor_bytes(t)}
    if name is not None:
        spec = {"name": name, **spec}
    return spec


def flatten_outputs(out):
    """The tensors of a forward result, in order: a tensor, or nested tuples/lists."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        flat = []
        for item in out:
            flat.extend(flatten_outputs(item))
        return flat
    return []


def named_inputs(inputs):
    """[(name, tensor)] for the tensor entries of get_inputs(); the index is the
    position in the argument list, so input:1 is the second argument even when the
    first is not a tensor."""
    return [("input:%d" % i, t) for i, t in enumerate(inputs) if isinstance(t, torch.Tensor)]


def named_state(model):
    """[(name, tensor)] for every parameter and buffer of model (tied tensors once),
    named param:<state_dict key>."""
    pairs = [("param:" + k, p) for k, p in model.named_parameters()]
    pairs += [("param:" + k, b) for k, b in model.named_buffers() if b is not None]
    return pairs


def nbytes_of(pairs):
    """Total bytes of the tensors in [(name, tensor)]."""
    return sum(tensor_bytes(t) for _, t in pairs)
