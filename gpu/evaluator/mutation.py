# Evaluator state mutations: which parameters and buffers of the task model its forward changes (BatchNorm running statistics in training mode, counters), so that the input checks leave them alone.
"""Functions here keep no references to the model or its tensors past the call."""

import torch

from .numerics import InputGuard
from .tensors import named_state

# Bytes of buffers copied to compare values; larger ones are compared by fingerprint.
MUTATION_CLONE_BYTES = 1 << 30


def forward_changing_state(model, forward, on_meta=False):
    """Runs forward() once and returns (its result, the param:<key> names of the model's
    parameters and buffers it changed, in state order). A change is a new tensor under
    the name, a bumped version counter, or (buffers) different bits afterwards: native
    batch_norm updates running statistics without bumping the version. On the meta
    device values cannot be compared; norm modules that track running statistics in
    training mode are listed instead."""
    before = named_state(model)
    versions = {n: (id(t), t._version) for n, t in before}
    buffers = [(n, t) for n, t in before if not isinstance(t, torch.nn.Parameter)]
    guard = None if on_meta else InputGuard(buffers, MUTATION_CLONE_BYTES)
    result = forward()
    changed = set(guard.changed()) if guard is not None else set()
    del guard
    after = dict(named_state(model))
    for name, (ident, version) in versions.items():
        t = after.get(name)
        if t is None or id(t) != ident or t._version != version:
            changed.add(name)
    if on_meta:
        changed |= running_stat_names(model)
    order = [n for n, _ in before] + [n for n in after if n not in versions]
    return result, [n for n in order if n in changed]


def running_stat_names(model):
    """param:<key> names of the running statistics of norm modules in training mode."""
    names = set()
    for prefix, mod in model.named_modules():
        if (isinstance(mod, torch.nn.modules.batchnorm._NormBase) and mod.training
                and mod.track_running_stats):
            for buf in ("running_mean", "running_var", "num_batches_tracked"):
                if getattr(mod, buf, None) is not None:
                    names.add("param:" + (prefix + "." if prefix else "") + buf)
    return names
