# Evaluator graph extraction for the profile: the FX graph of a task model with ShapeProp shapes, falling back to the meta tracer, then to torch.export.
"""Every node becomes a JSON-ready dict (name, op, target, args, kwargs, shape, dtype,
flops); the traced module itself is returned as a TracedGraph for the task to keep
(library steps of programs run its nodes). Nothing else keeps references to the model or
its inputs."""

import math

import torch

from .meta_trace import meta_symbolic_trace
from .tensors import dtype_name
from .traced import TracedGraph


def target_name(target):
    """A stable string for an FX call_function/call_method target: 'torch.relu',
    'torch.nn.functional.softmax', 'operator.mul', or the method name."""
    if isinstance(target, str):
        return target
    try:
        from torch.fx.node import _get_qualified_name
        name = _get_qualified_name(target)
    except Exception:
        name = getattr(target, "__qualname__", None) or str(target)
    short = name.rsplit(".", 1)[-1]
    if name.startswith("torch._C._nn.") or name.startswith("torch._C._VariableFunctions"):
        fn = getattr(torch.nn.functional, short, None)
        if fn is target:
            return "torch.nn.functional." + short
        if getattr(torch, short, None) is target:
            return "torch." + short
    if name.startswith("_operator."):
        return "operator." + name[len("_operator."):]
    if isinstance(target, torch._ops.OpOverload) or isinstance(target,
                                                               torch._ops.OpOverloadPacket):
        return str(target)
    return name


def encode_arg(a):
    """JSON form of an FX argument: graph nodes as {"node": name}, constants as
    themselves (non-finite floats as "inf"/"-inf"/"nan"), dtypes as "torch.float32"."""
    if isinstance(a, torch.fx.Node):
        return {"node": a.name}
    if a is None or isinstance(a, (bool, int, str)):
        return a
    if isinstance(a, float):
        if math.isnan(a):
            return "nan"
        if math.isinf(a):
            return "inf" if a > 0 else "-inf"
        return a
    if isinstance(a, (list, tuple, torch.Size)):
        return [encode_arg(v) for v in a]
    if isinstance(a, dict):
        return {str(k): encode_arg(v) for k, v in a.items()}
    if isinstance(a, slice):
        return {"slice": [encode_arg(a.start), encode_arg(a.stop), encode_arg(a.step)]}
    if a is Ellipsis:
        return "..."
    if isinstance(a, (torch.dtype, torch.device, torch.memory_format, torch.layout)):
        return str(a)
    return {"repr": repr(a)[:200]}


def module_attrs(mod):
    """Hyper-parameters of a leaf module: its __constants__ (in/out features,
    kernel_size/stride/padding, eps/normalized_shape, ...), whether it has a bias, and
    its extra_repr."""
    attrs = {}
    for name in getattr(type(mod), "__constants__", ()) or ():
        if hasattr(mod, name):
            attrs[name] = encode_arg(getattr(mod, name))
    if "bias" in mod._parameters:
        attrs["bias"] = mod._parameters["bias"] is not None
    try:
        extra = mod.extra_repr()
        if extra:
            attrs["extra_repr"] = extra[:500]
    except Exception:
        pass
    if isinstance(mod, torch.nn.MultiheadAttention):
        attrs.update(attention_attrs(mod))
    return attrs


def attention_attrs(mod):
    """What a generated MultiheadAttention needs beyond __constants__ (batch_first): its
    sizes, dropout, whether it trains, and the variants the attention family refuses
    (separate q/k/v projection weights, bias_k/bias_v, add_zero_attn)."""
    return {"embed_dim": int(mod.embed_dim), "num_heads": int(mod.num_heads),
            "kdim": int(mod.kdim), "vdim": int(mod.vdim),
            "dropout": float(mod.dropout), "training": bool(mod.training),
            "qkv_same_embed_dim": bool(mod._qkv_same_embed_dim),
            "bias_kv": mod.bias_k is not None or mod.bias_v is not None,
            "add_zero_attn": bool(mod.add_zero_attn),
            "in_proj_bias": mod.in_proj_bias is not None,
            "out_proj_bias": mod.out_proj.bias is not None}


def module_params(mod):
    """The tensors a call_module node reads: its own parameters and buffers, and for a
    MultiheadAttention also its out_proj's (the attention family's plan names them)."""
    recurse = isinstance(mod, torch.nn.MultiheadAttention)
    return list(mod.parameters(recurse=recurse)) + list(mod.buffers(recurse=recurse))


def extract_graph(model, inputs, state):
    """({"graph": [...], "graph_source": "fx"|"fx_meta"|"export", "graph_error": str|None},
    TracedGraph or None): the FX graph of model with output shapes from ShapeProp,
    falling back to the meta tracer (meta_trace.py), then to torch.export, and to graph
    null with the reasons when all fail; graph_error lists the failed tracers.
    state is named_state(model); every node gets its own "flops", and each convolution of a CUDA run
    its "conv_math" (add_node_facts)."""
    errors = []
    by_id = dict((id(t), n) for n, t in state)
    tracers = (("fx", "symbolic_trace", lambda: torch.fx.symbolic_trace(model)),
               ("fx_meta", "meta trace", lambda: meta_symbolic_trace(model, inputs)))
    for source, what, trace in tracers:
        try:
            nodes, gm = fx_graph(trace, inputs, by_id)
            info = {"graph": nodes, "graph_source": source,
                    "graph_error": "; ".join(errors) or None}
            traced = TracedGraph.from_fx(gm)
            break
        except Exception as exc:
            errors.append("%s: %s: %s" % (what, type(exc).__name__, str(exc)[:500]))
    else:
        try:
            nodes, ep = export_graph(model, inputs)
            info = {"graph": nodes, "graph_source": "export", "graph_error": "; ".join(errors)}
            traced = TracedGraph.from_export(ep)
        except Exception as exc2:
            errors.append("torch.export: %s: %s" % (type(exc2).__name__, str(exc2)[:500]))
            return ({"graph": None, "graph_source": None, "graph_error": "; ".join(errors)},
                    None)
    add_node_facts(info, traced, inputs, state)
    return info, traced


def add_node_facts(info, traced, inputs, state):
    """Sets "flops" of every node of info["graph"] (0 where none is counted) and
    "conv_math" of every convolution a CUDA run classified (traced.node_facts); when the
    interpretation fails, every node gets 0 FLOPs and info["flops_error"] says why."""
    flops, maths = {}, {}
    try:
        flops, maths = traced.node_facts(list(inputs),
                                         {n[len("param:"):]: t for n, t in state})
    except Exception as exc:
        info["flops_error"] = "%s: %s" % (type(exc).__name__, str(exc)[:300])
    for entry in info["graph"]:
        entry["flops"] = flops.get(entry["name"], 0)
        if entry["name"] in maths:
            entry["conv_math"] = maths[entry["name"]]


def _meta_shape(meta):
    """(shape, dtype, outputs) fields of a node from a TensorMetadata/FakeTensor or a
    tuple of them."""
    if meta is None:
        return {"shape": None, "dtype": None}
    if hasattr(meta, "shape") and hasattr(meta, "dtype"):
        return {"shape": list(meta.shape), "dtype": dtype_name(meta.dtype)}
    if isinstance(meta, (list, tuple)):
        return {"shape": None, "dtype": None,
                "outputs": [_meta_shape(m) for m in meta]}
    return {"shape": None, "dtype": None}


def fx_graph(trace, inputs, state_by_id):
    """(nodes, GraphModule) of the GraphModule trace() returns, with ShapeProp shapes
    (raises when tracing fails; a ShapeProp failure leaves shapes null and says so)."""
    from torch.fx.passes.shape_prop import ShapeProp
    gm = trace()
    shape_error = None
    try:
        with torch.no_grad():
            ShapeProp(gm).propagate(*inputs)
    except Exception as exc:
        shape_error = "%s: %s" % (type(exc).__name__, str(exc)[:300])
    modules = dict(gm.named_modules())
    nodes = []
    placeholder_index = 0
    for n in gm.graph.nodes:
        entry = {"name": n.name, "op": n.op}
        if n.op == "placeholder":
            entry["target"] = str(n.target)
            entry["tensor"] = "input:%d" % placeholder_index
            placeholder_index += 1
        elif n.op == "call_module":
            mod = modules.get(n.target)
            entry["target"] = type(mod).__name__ if mod is not None else str(n.target)
            entry["module"] = str(n.target)
            if mod is not None:
                entry["attrs"] = module_attrs(mod)
                entry["params"] = [state_by_id[id(p)] for p in module_params(mod)
                                   if id(p) in state_by_id]
        elif n.op == "get_attr":
            entry["target"] = str(n.target)
            obj = _resolve_attr(gm, str(n.target))
            if isinstance(obj, torch.Tensor) and id(obj) in state_by_id:
                entry["tensor"] = state_by_id[id(obj)]
        else:
            entry["target"] = target_name(n.target)
        entry["args"] = encode_arg(n.args)
        entry["kwargs"] = encode_arg(n.kwargs)
        entry.update(_meta_shape(n.meta.get("tensor_meta")))
        if shape_error and n.op != "output":
            entry["shape_error"] = shape_error
        nodes.append(entry)
    return nodes, gm


def _resolve_attr(root, path):
    """The object at dotted path under root, or None."""
    obj = root
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def export_graph(model, inputs):
    """(nodes, ExportedProgram) of torch.export.export(model) (ATen level; lifted
    parameters carry their param: names)."""
    ep = torch.export.export(model, tuple(inputs))
    sig = ep.graph_signature
    lifted = dict(getattr(sig, "inputs_to_parameters", {}) or {})
    lifted.update(getattr(sig, "inputs_to_buffers", {}) or {})
    user = list(getattr(sig, "user_inputs", []) or [])
    nodes = []
    for n in ep.graph_module.graph.nodes:
        entry = {"name": n.name, "op": n.op}
        if n.op == "placeholder":
            entry["target"] = str(n.target)
            if n.name in lifted:
                entry["tensor"] = "param:" + lifted[n.name]
            elif n.name in user:
                entry["tensor"] = "input:%d" % user.index(n.name)
        else:
            entry["target"] = target_name(n.target)
        entry["args"] = encode_arg(n.args)
        entry["kwargs"] = encode_arg(n.kwargs)
        entry.update(_meta_shape(n.meta.get("val")))
        nodes.append(entry)
    return nodes, ep
