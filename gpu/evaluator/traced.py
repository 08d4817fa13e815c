# Evaluator traced graph: the FX GraphModule or torch.export ExportedProgram a task's profile graph came from, kept to run its nodes one by one (library steps of programs, per-node FLOPs).
"""A TracedGraph holds a reference to the traced module (which shares the task model's
parameters and submodules) and never keeps the tensors it runs on past a call; the
environments it fills are the caller's dicts."""

import torch

from .conv_math import classify, is_convolution
from .layout import channels_last_input
from .tensors import flatten_outputs


def _resolve(root, path):
    """The object at dotted path under root (raises AttributeError when absent)."""
    obj = root
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


class TracedGraph:
    """The traced graph of the task model: kind "fx" (torch.fx.symbolic_trace) or
    "export" (torch.export.export). Node names are those of the profile's graph, and are
    the same after an evaluator restart, since tracing is deterministic."""

    def __init__(self, kind, module, exported=None):
        self.kind = kind
        self.module = module              # fx GraphModule (ep.graph_module for export)
        self.exported = exported          # ExportedProgram or None
        self.nodes = {n.name: n for n in module.graph.nodes}
        self.order = [n.name for n in module.graph.nodes]
        # Looked up once: programs run the graph node by node on every timed rep.
        self.submodules = dict(module.named_modules())
        self.placeholders = [n for n in module.graph.nodes if n.op == "placeholder"]
        self.get_attrs = [n for n in module.graph.nodes if n.op == "get_attr"]
        self.refs = self._output_refs()
        self.dead_after = self._last_uses()

    def _last_uses(self):
        """{node name: names of the values no later node reads}, so that an interpreter
        can drop them as the reference's own forward would (outputs are never dropped)."""
        last = {}
        for n in self.module.graph.nodes:
            if n.op == "output":
                continue
            for arg in n.all_input_nodes:
                last[arg.name] = n.name
        keep = set(self.output_refs())
        dead = {}
        for value, user in last.items():
            if value not in keep:
                dead.setdefault(user, []).append(value)
        return dead

    @classmethod
    def from_fx(cls, gm):
        return cls("fx", gm)

    @classmethod
    def from_export(cls, ep):
        return cls("export", ep.graph_module, ep)

    # -- placeholders

    def seed_env(self, inputs, state):
        """A new environment {node name: value} holding every placeholder and get_attr
        node: inputs is the argument list of forward, state {state_dict key: tensor} the
        model's parameters and buffers (the task's own tensors)."""
        env = {}
        if self.kind == "export":
            self._seed_export(env, inputs, state)
        else:
            for index, n in enumerate(self.placeholders):
                env[n.name] = inputs[index] if index < len(inputs) else (
                    n.args[0] if n.args else None)
        for n in self.get_attrs:
            env[n.name] = _resolve(self.module, str(n.target))
        return env

    def _seed_export(self, env, inputs, state):
        """Placeholders of an ExportedProgram from its signature: lifted parameters and
        buffers from state, user inputs by position, constants from the program."""
        from torch.export.graph_signature import InputKind
        user = 0
        for spec in self.exported.graph_signature.input_specs:
            name = getattr(spec.arg, "name", None)
            if name is None:
                continue
            if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
                env[name] = state[spec.target]
            elif spec.kind == InputKind.USER_INPUT:
                env[name] = inputs[user] if user < len(inputs) else None
                user += 1
            elif spec.kind in (InputKind.CONSTANT_TENSOR, InputKind.CUSTOM_OBJ):
                env[name] = self.exported.constants[spec.target]
            else:
                env[name] = None

    # -- nodes

    def run_node(self, name, env, channels_last=False):
        """Runs call node name with its arguments taken from env, as torch.fx.Interpreter
        does, stores the value in env[name] and returns it. channels_last: a convolution
        whose input is made channels-last first (layout.channels_last_input), so that
        PyTorch runs its channels-last kernel and returns a channels-last value."""
        n = self.nodes[name]
        args = torch.fx.node.map_arg(n.args, lambda a: env[a.name])
        kwargs = torch.fx.node.map_arg(n.kwargs, lambda a: env[a.name])
        if channels_last:
            args, kwargs = channels_last_input(args, kwargs)
        if n.op == "call_module":
            value = self.submodules[str(n.target)](*args, **kwargs)
        elif n.op == "call_function":
            value = n.target(*args, **kwargs)
        elif n.op == "call_method":
            value = getattr(args[0], n.target)(*args[1:], **kwargs)
        elif n.op == "get_attr":
            value = _resolve(self.module, str(n.target))
        else:
            raise ValueError("node %s is a %s, not a call" % (name, n.op))
        env[name] = value
        return value

    def call_nodes(self):
        """Names of the call nodes in graph order."""
        return [name for name in self.order if self.nodes[name].op.startswith("call_")]

    # -- outputs

    def output_refs(self):
        """Names of the nodes the output node refers to, in order (nested tuples
        flattened); for an ExportedProgram, buffer mutations come first."""
        return self.refs

    def _output_refs(self):
        refs = []
        for n in self.module.graph.nodes:
            if n.op == "output":
                torch.fx.node.map_arg(n.args, lambda a: refs.append(a.name))
        return refs

    def outputs(self, env, n_outputs):
        """The task's output tensors from a filled env: the tensors the output node names,
        the last n_outputs of them (an ExportedProgram lists mutated buffers first)."""
        values = flatten_outputs([env[r] for r in self.refs])
        return values[len(values) - n_outputs:] if n_outputs else []

    def apply_mutations(self, env, state, inputs):
        """Writes the buffer and input mutations an ExportedProgram returns as outputs back
        into the task's tensors, as ExportedProgram.module() does (no-op for fx)."""
        if self.kind != "export":
            return
        from torch.export.graph_signature import OutputKind
        user_names = list(self.exported.graph_signature.user_inputs)
        for spec in self.exported.graph_signature.output_specs:
            name = getattr(spec.arg, "name", None)
            if spec.kind == OutputKind.BUFFER_MUTATION and name in env:
                state[spec.target].copy_(env[name])
            elif spec.kind == OutputKind.USER_INPUT_MUTATION and name in env:
                idx = user_names.index(spec.target) if spec.target in user_names else -1
                if 0 <= idx < len(inputs) and isinstance(inputs[idx], torch.Tensor):
                    inputs[idx].copy_(env[name])

    # -- FLOPs and convolution arithmetic

    def node_facts(self, inputs, state):
        """({call node name: FLOPs}, {convolution node name: "tf32" | "fp32"}) from one
        interpretation of the graph on inputs: each node runs under its own
        FlopCounterMode (0 for nodes without counted ops); each convolution with a
        float32 CUDA output runs once more with cuDNN's TF32 off (conv_math.classify;
        none on a CPU profile)."""
        from torch.utils.flop_counter import FlopCounterMode
        env = self.seed_env(inputs, state)
        flops, maths = {}, {}
        with torch.no_grad():
            for name in self.call_nodes():
                with FlopCounterMode(display=False) as counter:
                    value = self.run_node(name, env)
                flops[name] = int(counter.get_total_flops())
                if is_convolution(self.nodes[name], self.submodules):
                    math = classify(value, lambda: self.run_node(name, dict(env)))
                    if math:
                        maths[name] = math
                for dead in self.dead_after.get(name, ()):
                    env.pop(dead, None)
        self.apply_mutations(env, state, inputs)
        return flops, maths
