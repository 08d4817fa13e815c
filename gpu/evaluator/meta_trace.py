# Evaluator meta tracing: torch.fx symbolic tracing whose proxies carry meta tensors, for models whose Python code needs concrete sizes.
"""torch.fx.symbolic_trace fails on a forward that computes with sizes in Python: a loop
over `range(x.size(0))`, `math.sqrt(k.size(-1))`, a branch on `x.shape[0] > 2`. The meta
tracer of torch.fx gives each proxy a meta tensor, so sizes are numbers while tracing,
and the graph is specialized to the inputs' shapes (which a task fixes). Tensor code
that reads values (a branch on x.sum()) still fails, and the caller falls back to
torch.export. The export's runtime (handlers/export_program_runtime.py) traces the same
way, so node names agree."""

import inspect
import warnings

import torch


def meta_symbolic_trace(model, inputs):
    """The GraphModule of model traced with meta-tensor proxies of inputs (a list of
    tensors, one per parameter of forward, in order). Raises ValueError when forward takes
    *args or **kwargs or an input is not a tensor, or whatever the tracer raises."""
    from torch.fx.experimental.meta_tracer import symbolic_trace
    params = list(inspect.signature(model.forward).parameters.values())
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        raise ValueError("forward takes *args or **kwargs")
    if len(inputs) != len(params) or not all(isinstance(t, torch.Tensor) for t in inputs):
        raise ValueError("meta tracing needs one tensor input per parameter of forward")
    meta = {p.name: t.to("meta") for p, t in zip(params, inputs)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "could not compute metadata" for some nodes
        return symbolic_trace(model, meta_args=meta)
