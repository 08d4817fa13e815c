# Evaluator programs: parsing and validation of a program candidate ({"program": {"graph", "steps"}}) against the task's profile graph, the tensor specs and channels-last tensors of each region, and the random ops that keep a program out of CUDA graphs.
"""The spec is docs/architecture.md, "Programs: regions, library steps, composition".
A Program is plain data built from the candidate's JSON and the task profile; it keeps
references to neither tensors nor modules. Every rule it breaks is a ProgramError whose
message names the step (becoming the failure load/bad_program)."""

import math

import torch

from .layout import LayoutError, is_convolution, library_candidate, parse_channels_last

GRAPH_MODES = {"auto": "auto", "true": "true", "false": "false", True: "true", False: "false"}
PROGRAM_KEYS = {"graph", "steps"}
LIBRARY_KEYS = {"library", "node", "region"}
REGION_KEYS = {"region", "family", "nodes", "source", "options", "plan", "reads", "writes"}
MAX_STEPS = 4096

# Tokens of a target name that make a node random (split on "." and "_").
RANDOM_TOKENS = {"rand", "randn", "randint", "randperm", "bernoulli", "normal",
                 "multinomial", "uniform", "exponential", "cauchy", "geometric"}
DROPOUT_TOKENS = {"dropout", "rrelu"}


class ProgramError(Exception):
    """A malformed program; the message names the step."""


class LibraryStep:
    """{"library": target, "node": name, "region": k}; node None runs the whole model."""

    kind = "library"

    def __init__(self, index, target, node, region):
        self.index = index
        self.target = target
        self.node = node
        self.region = region
        self.covers = [node] if node else []

    def label(self):
        return "step %d (library %s)" % (self.index, self.node or "model")


class RegionStep:
    """A generated region: its kernels, the values it reads and writes, and the tensor
    specs its plan is prepared with."""

    kind = "region"

    def __init__(self, index, raw):
        self.index = index
        self.region = raw["region"]
        self.family = raw.get("family")
        self.covers = list(raw["nodes"])
        self.reads = list(raw["reads"])
        self.writes = list(raw["writes"])
        # What libopforge_gpu prepares: the plan without channels_last
        # (layout.library_candidate); the runner orders the tensors it passes.
        self.candidate = library_candidate({"source": raw["source"],
                                            "options": list(raw.get("options") or []),
                                            "plan": raw["plan"]})
        self.plan = raw["plan"]
        self.channels_last = {}  # name -> rank of the tensors passed in channels-last order
        self.tensors = []        # names the plan passes, writes included, first use first
        self.specs = None        # {"tensors": [...], "precision"} for ofg_candidate_prepare
        self.write_nodes = {}    # write name -> graph node name
        self.read_nodes = {}     # read name (node:/output:) -> graph node name

    def label(self):
        return "step %d (region %s)" % (self.index, self.region)


class Program:
    """A validated program: graph mode ("auto", "true", "false"), steps, the task's
    output values as graph node names, the random nodes it runs, and the library
    convolutions that run on a channels-last input (channels_last_library)."""

    def __init__(self, mode, steps, output_nodes, whole_model):
        self.mode = mode
        self.steps = steps
        self.output_nodes = output_nodes
        self.whole_model = whole_model
        self.random = []
        self.channels_last_nodes = frozenset()

    def regions(self):
        return [s for s in self.steps if s.kind == "region"]


def _fail(message):
    raise ProgramError(message)


def _node_refs(value, out):
    """Appends the node names of every {"node": name} inside an encoded FX argument."""
    if isinstance(value, dict):
        if set(value) == {"node"} and isinstance(value["node"], str):
            out.append(value["node"])
        else:
            for v in value.values():
                _node_refs(v, out)
    elif isinstance(value, list):
        for v in value:
            _node_refs(v, out)
    return out


class GraphIndex:
    """The profile's graph, indexed for validation: nodes by name, call nodes, the
    graph node of each task output, and the tensor specs of inputs, parameters and
    outputs."""

    def __init__(self, profile):
        self.profile = profile
        self.graph = profile.get("graph")
        self.nodes = {n["name"]: n for n in self.graph or []}
        self.calls = [n["name"] for n in self.graph or [] if n["op"].startswith("call_")]
        self.specs = {s["name"]: s for s in (profile.get("inputs", []) + profile.get("params", [])
                                              + profile.get("outputs", []))}
        self.outputs = self._output_nodes(len(profile.get("outputs", [])))

    def _output_nodes(self, n_outputs):
        """Graph node names of output:0..n-1: the output node's references that are
        tensors, the last n of them (torch.export lists mutated buffers first)."""
        refs = []
        for n in self.graph or []:
            if n["op"] == "output":
                _node_refs(n.get("args"), refs)
        tensors = [r for r in refs if self.nodes.get(r, {}).get("dtype") is not None
                   or self.nodes.get(r, {}).get("op") == "placeholder"]
        if len(tensors) < n_outputs:
            tensors = refs  # shapes unknown (ShapeProp failed): every reference counts
        return tensors[len(tensors) - n_outputs:] if n_outputs else []

    def value_node(self, name):
        """Graph node of a node:/output: value name, or None for input:/param: names.
        Raises ProgramError for names that are none of these."""
        if name.startswith("node:"):
            node = name[len("node:"):]
            if node not in self.nodes or not self.nodes[node]["op"].startswith("call_"):
                _fail("unknown value '%s' (no call node %s in the graph)" % (name, node))
            return node
        if name.startswith("output:"):
            idx = name[len("output:"):]
            if not idx.isdigit() or int(idx) >= len(self.outputs):
                _fail("unknown value '%s' (the task has %d outputs)" % (name, len(self.outputs)))
            return self.outputs[int(idx)]
        if name.startswith("input:") or name.startswith("param:"):
            if name not in self.specs:
                _fail("unknown tensor '%s'" % name)
            return None
        _fail("'%s' is not a value name (input:i, param:<key>, node:<name>, output:j)" % name)

    def tensor_spec(self, name, node):
        """{"name","dtype","numel","bytes"} of a value: from the profile's specs for
        inputs, parameters and outputs, from its graph node's dtype and shape for node:."""
        if not name.startswith("node:"):
            spec = self.specs[name]
            return {"name": name, "dtype": spec["dtype"], "numel": spec["numel"],
                    "bytes": spec["bytes"]}
        entry = self.nodes[node]
        dtype, shape = entry.get("dtype"), entry.get("shape")
        torch_dtype = getattr(torch, dtype, None) if isinstance(dtype, str) else None
        if not isinstance(torch_dtype, torch.dtype) or not isinstance(shape, list):
            _fail("value '%s' has no known tensor dtype and shape in the profile" % name)
        numel = math.prod(shape)
        size = torch.empty((), dtype=torch_dtype).element_size()
        return {"name": name, "dtype": dtype, "numel": numel, "bytes": numel * size}


def parse_program(raw, profile, precision):
    """Validates raw (the candidate's "program") against the task profile; returns a
    Program whose region steps carry their tensor specs, or raises ProgramError."""
    if not isinstance(raw, dict):
        _fail("program must be an object {graph, steps}")
    extra = sorted(set(raw) - PROGRAM_KEYS)
    if extra:
        _fail("program: unknown key '%s'" % extra[0])
    mode = raw.get("graph", "auto")
    if not isinstance(mode, (str, bool)) or mode not in GRAPH_MODES:
        _fail("program: graph must be \"auto\", \"true\" or \"false\"")
    steps_raw = raw.get("steps")
    if not isinstance(steps_raw, list) or not steps_raw or len(steps_raw) > MAX_STEPS:
        _fail("program: steps must be a non-empty array (at most %d)" % MAX_STEPS)
    index = GraphIndex(profile)
    steps = [_parse_step(i, s) for i, s in enumerate(steps_raw)]
    whole = any(s.kind == "library" and s.node is None for s in steps)
    if whole:
        if len(steps) != 1:
            _fail("step %d: {\"library\": \"model\"} runs the whole model and must be the "
                  "only step" % next(s.index for s in steps if s.kind == "library"
                                     and s.node is None))
    elif index.graph is None:
        _fail("the task has no traced graph: only {\"library\": \"model\"} can run it")
    else:
        _check_dataflow(steps, index)
        for step in steps:
            if step.kind == "region":
                _region_specs(step, index, precision)
                _region_layout(step, index)
    program = Program(GRAPH_MODES[mode], steps, index.outputs, whole)
    program.channels_last_nodes = channels_last_library(steps, index)
    return program


def _parse_step(i, s):
    """One step's shape (not yet its place in the graph)."""
    if not isinstance(s, dict):
        _fail("step %d: must be an object" % i)
    if "library" in s:
        extra = sorted(set(s) - LIBRARY_KEYS)
        if extra:
            _fail("step %d: unknown key '%s' in a library step" % (i, extra[0]))
        if not isinstance(s["library"], str) or not s["library"]:
            _fail("step %d: library must be a non-empty string" % i)
        region = s.get("region")
        if region is not None and (not isinstance(region, int) or isinstance(region, bool)
                                   or region < 0):
            _fail("step %d: region must be an integer >= 0" % i)
        node = s.get("node")
        if node is None and s["library"] == "model":
            return LibraryStep(i, "model", None, region)
        if not isinstance(node, str) or not node:
            _fail("step %d (library %s): node must name a call node of the graph"
                  % (i, s["library"]))
        return LibraryStep(i, s["library"], node, region)
    if "region" not in s:
        _fail("step %d: neither a library step (library) nor a region step (region)" % i)
    return _parse_region(i, s)


def _string_list(s, key, i, nonempty):
    v = s.get(key)
    if (not isinstance(v, list) or (nonempty and not v)
            or not all(isinstance(x, str) and x for x in v)):
        _fail("step %d (region %s): %s must be a%s array of strings"
              % (i, s.get("region"), key, " non-empty" if nonempty else "n"))
    if len(set(v)) != len(v):
        _fail("step %d (region %s): %s names a value twice" % (i, s.get("region"), key))
    return v


def _parse_region(i, s):
    extra = sorted(set(s) - REGION_KEYS)
    if extra:
        _fail("step %d: unknown key '%s' in a region step" % (i, extra[0]))
    region = s["region"]
    if not isinstance(region, int) or isinstance(region, bool) or region < 0:
        _fail("step %d: region must be an integer >= 0" % i)
    label = "step %d (region %d)" % (i, region)
    if "family" in s and not isinstance(s["family"], str):
        _fail("%s: family must be a string" % label)
    if not isinstance(s.get("source"), str):
        _fail("%s: source must be a string" % label)
    opts = s.get("options", [])
    if not isinstance(opts, list) or not all(isinstance(o, str) for o in opts):
        _fail("%s: options must be an array of strings" % label)
    plan = s.get("plan")
    if not isinstance(plan, dict) or not isinstance(plan.get("launches"), list):
        _fail("%s: plan must be an object with launches" % label)
    for key, nonempty in (("nodes", True), ("reads", False), ("writes", True)):
        _string_list(s, key, i, nonempty)
    return RegionStep(i, s)


def _check_dataflow(steps, index):
    """Every call node computed exactly once, by steps whose inputs earlier steps made;
    every task output made by some step."""
    computed = {}       # call node -> step index
    available = {n for n, e in index.nodes.items() if not e["op"].startswith("call_")
                 and e["op"] != "output"}
    for step in steps:
        for node in step.covers:
            if node not in index.nodes or not index.nodes[node]["op"].startswith("call_"):
                _fail("%s: '%s' is not a call node of the graph" % (step.label(), node))
            if node in computed:
                _fail("%s: node %s is already computed by step %d"
                      % (step.label(), node, computed[node]))
            computed[node] = step.index
        if step.kind == "library":
            for ref in _node_refs([index.nodes[step.node].get("args"),
                                   index.nodes[step.node].get("kwargs")], []):
                if ref not in available:
                    _fail("%s: node %s reads %s, which no earlier step computes"
                          % (step.label(), step.node, ref))
            available.add(step.node)
        else:
            _check_region_values(step, index, available)
            available.update(step.write_nodes.values())
    missing = [n for n in index.calls if n not in computed]
    if missing:
        _fail("node %s is computed by no step" % missing[0])
    for j, node in enumerate(index.outputs):
        if node not in available:
            _fail("output:%d (node %s) is made by no step: a region that computes it must "
                  "write it" % (j, node))


def _check_region_values(step, index, available):
    """A region's reads exist and were made earlier; its writes are values of its own
    nodes; its plan names only its reads, its writes, inputs and parameters."""
    own = set(step.covers)
    for name in step.reads:
        node = _value(index, step, name)
        if node is not None:
            if node in own:
                _fail("%s: reads '%s', a value of its own nodes" % (step.label(), name))
            if node not in available:
                _fail("%s: reads '%s', which no earlier step computes" % (step.label(), name))
            step.read_nodes[name] = node
    for name in step.writes:
        node = _value(index, step, name)
        if node is None or node not in own:
            _fail("%s: writes '%s', which is not a value of its nodes" % (step.label(), name))
        if node in step.write_nodes.values():
            _fail("%s: writes the value of node %s twice" % (step.label(), node))
        step.write_nodes[name] = node
    known = set(step.reads) | set(step.writes)
    names = []
    for li, launch in enumerate(step.candidate["plan"]["launches"]):
        args = launch.get("args") if isinstance(launch, dict) else None
        for arg in args if isinstance(args, list) else []:
            name = arg.get("tensor") if isinstance(arg, dict) else None
            if not isinstance(name, str) or name in names:
                continue
            node = _value(index, step, name)
            if node is not None and name not in known:
                _fail("%s: launch %d passes '%s', which the region neither reads nor writes"
                      % (step.label(), li, name))
            names.append(name)
    step.tensors = names + [w for w in step.writes if w not in names]


def _value(index, step, name):
    try:
        return index.value_node(name)
    except ProgramError as err:
        _fail("%s: %s" % (step.label(), err))


def _region_specs(step, index, precision):
    """The tensor specs of a region's plan: its writes are outputs (poisoned, and each
    must be passed to a launch), a task output it only reads is not."""
    specs = []
    for name in step.tensors:
        node = step.write_nodes.get(name) or step.read_nodes.get(name)
        try:
            spec = index.tensor_spec(name, node)
        except ProgramError as err:
            _fail("%s: %s" % (step.label(), err))
        if name in step.write_nodes:
            spec["output"] = True
        elif name.startswith("output:"):
            spec["output"] = False
        specs.append(spec)
    step.specs = {"tensors": specs, "precision": precision}


def _region_layout(step, index):
    """step.channels_last from its plan's list: distinct tensors its launches pass, each
    of rank 4 or 5 by the profile (a node's graph shape, else the profile's spec)."""
    def shape_of(name):
        if name.startswith("node:"):
            node = step.write_nodes.get(name) or step.read_nodes.get(name)
            return index.nodes[node].get("shape") if node in index.nodes else None
        return index.specs.get(name, {}).get("shape")
    try:
        step.channels_last = parse_channels_last(step.plan, shape_of)
    except LayoutError as err:
        _fail("%s: plan: %s" % (step.label(), err))


def channels_last_library(steps, index):
    """The library steps' nodes that run on a channels-last input: convolutions
    (layout.is_convolution) whose value a region reads in channels-last order. Computed
    once per program; the runner and the export both follow it."""
    library = {s.node for s in steps if s.kind == "library" and s.node}
    found = set()
    for step in steps:
        if step.kind != "region":
            continue
        for name in step.channels_last:
            node = step.read_nodes.get(name)
            if node in library and is_convolution(index.nodes[node]):
                found.add(node)
    return frozenset(found)


# -- random ops

def _tokens(target):
    return {t for t in str(target).lower().replace(".", "_").split("_") if t}


def random_nodes(program, index_graph, traced, model):
    """Names of the nodes (or "model") whose results depend on the random generators, so
    that the program cannot be captured into a CUDA graph: a rand/bernoulli/normal/
    multinomial target, a dropout or rrelu call that trains with p > 0, an attention call
    with dropout_p > 0, or a module of such a kind with a nonzero probability in training
    mode. A training flag alone is not random: batch norm in training mode is
    deterministic (its running statistics update on every replay, as in eager). The
    whole model is "model" when any of its modules or traced call nodes is random (an
    untraced model's functional calls are not seen: a replay that draws other numbers
    then fails the trials' comparison)."""
    found = []
    for entry in index_graph or []:
        if not entry["op"].startswith("call_"):
            continue
        if entry["op"] == "call_module":
            mod = _submodule(traced, entry.get("module"))
            if mod is not None and _random_module(mod):
                found.append(entry["name"])
            continue
        if _random_call(entry):
            found.append(entry["name"])
    if program.whole_model:
        return ["model"] if found or any(_random_module(m) for m in model.modules()) else []
    return found


def _nonzero(p):
    """False only for a probability known to be 0 (a node reference or anything unknown
    counts as nonzero)."""
    return not (isinstance(p, (int, float)) and not isinstance(p, bool) and p == 0)


def _random_call(entry):
    """True when a call node draws random numbers (see random_nodes)."""
    tokens = _tokens(entry.get("target"))
    if tokens & RANDOM_TOKENS:
        return True
    args = entry.get("args") or []
    kwargs = entry.get("kwargs") or {}
    if "dropout_p" in kwargs:  # scaled_dot_product_attention, multi_head_attention_forward
        train = kwargs.get("training", True)
        return train is not False and _nonzero(kwargs["dropout_p"])
    if not tokens & DROPOUT_TOKENS:
        return False
    train = kwargs.get("training", kwargs.get("train"))
    if train is None and len(args) > 2 and isinstance(args[2], bool):
        train = args[2]  # F.dropout(x, p, training) and aten dropout(x, p, train)
    if "rrelu" in tokens:
        return train is True  # F.rrelu's training defaults to False
    p = kwargs.get("p", args[1] if len(args) > 1 else None)
    return train is not False and _nonzero(p)


def _random_module(mod):
    """True for a module in training mode that draws random numbers: a dropout kind with
    p > 0, RReLU, or one holding a nonzero float `dropout` (MultiheadAttention)."""
    if not mod.training:
        return False
    name = type(mod).__name__.lower()
    if "rrelu" in name:
        return True
    if "dropout" in name:
        return _nonzero(getattr(mod, "p", None))
    p = getattr(mod, "dropout", None)
    return isinstance(p, float) and p > 0


def _submodule(traced, path):
    if traced is None or not isinstance(path, str):
        return None
    try:
        return traced.module.get_submodule(path)
    except AttributeError:
        return None
