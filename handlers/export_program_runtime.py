
# ---- the program's runner (handlers/export_program_runtime.py, the same in every export)
# A step's values live in an environment keyed by the names of the traced graph's nodes,
# plus "input:i" and "param:<key>" for the task's tensors; a region's "node:<name>" is
# that node's entry and its "output:j" the entry of the graph node returned j-th.
_OFG_MODULES = {}


def _ofg_build_root():
    """The folder under which the region sources are written: TORCH_EXTENSIONS_DIR when
    set (KernelBench's eval points it at its build directory), else torch's default."""
    return (os.environ.get("TORCH_EXTENSIONS_DIR")
            or torch.utils.cpp_extension.get_default_build_root())


def _ofg_write(path, text):
    """Writes text to path unless it holds it already. The write is a rename, so that
    processes building the same export at once never read half a file."""
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    temporary = "%s.%d.tmp" % (path, os.getpid())
    with open(temporary, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(temporary, path)


def _ofg_module(device):
    """The regions' kernels and launchers (and a captured program's staging kernel) for
    device's architecture (sm_90a for capability 9.0, as the evaluator compiled them),
    built once per process by one torch.utils.cpp_extension.load: one .cu file per region,
    so that nvcc compiles them in parallel and each region's macros stay in its own file.
    The name is a hash of the sources and flags, so several exports can coexist."""
    major, minor = torch.cuda.get_device_capability(device)
    module = _OFG_MODULES.get((major, minor))
    if module is not None:
        return module
    arch = "%d%d%s" % (major, minor, "a" if major >= 9 else "")
    flags = _OFG_FLAGS + ["-gencode", "arch=compute_%s,code=sm_%s" % (arch, arch)]
    files = [("bindings.cpp", _OFG_BINDINGS)] + [
        (name + ".cu", _OFG_TU_HEAD + kernels + launcher)
        for name, kernels, launcher in _OFG_REGIONS]
    if _OFG_STAGE:
        files.append(("stage.cu", _OFG_STAGE))
    digest = hashlib.sha256("\0".join([text for _, text in files] + flags)
                            .encode("utf-8")).hexdigest()[:16]
    name = "opforge_" + digest
    folder = os.path.join(_ofg_build_root(), name + "_sources")
    os.makedirs(folder, exist_ok=True)
    for file_name, text in files:
        _ofg_write(os.path.join(folder, file_name), text)
    module = torch.utils.cpp_extension.load(
        name=name, sources=[os.path.join(folder, f) for f, _ in files],
        extra_cuda_cflags=flags)
    _OFG_MODULES[(major, minor)] = module
    return module


def _ofg_layout(shape, channels_last):
    """The memory order a region's kernels address a tensor of shape in: channels-last
    ((N, H, W, C) or (N, D, H, W, C)) when its plan lists it, else row-major."""
    if channels_last and len(shape) == 4:
        return torch.channels_last
    if channels_last and len(shape) == 5:
        return torch.channels_last_3d
    return torch.contiguous_format


def _ofg_check(name, tensor, dtype, shape, device, layout=torch.contiguous_format):
    """tensor, dense in layout (itself when already so), once it is checked to be what
    the kernels were built for: the plan has its sizes built in."""
    if (not isinstance(tensor, torch.Tensor) or tensor.dtype != dtype
            or tuple(tensor.shape) != shape or tensor.device != device):
        got = ("%s %s on %s" % (tensor.dtype, tuple(tensor.shape), tensor.device)
               if isinstance(tensor, torch.Tensor) else type(tensor).__name__)
        raise ValueError("ModelNew: %s must be %s %s on %s, as the kernels were built "
                         "for; got %s" % (name, dtype, shape, device, got))
    return tensor.detach().contiguous(memory_format=layout)


def _ofg_channels_last(tensor):
    """tensor in channels-last order when it has rank 4 or 5 (itself when already so),
    else tensor as it is."""
    layout = _ofg_layout(tensor.shape, True)
    if layout is torch.contiguous_format:
        return tensor
    return tensor.contiguous(memory_format=layout)


def _ofg_channels_last_input(args, kwargs):
    """A convolution's (args, kwargs) with its input (the first positional argument,
    else the keyword input) made channels-last, so that PyTorch runs its channels-last
    kernel and returns a channels-last value, as the evaluator ran it."""
    if args and isinstance(args[0], torch.Tensor):
        return (_ofg_channels_last(args[0]),) + tuple(args[1:]), kwargs
    if isinstance(kwargs.get("input"), torch.Tensor):
        return args, dict(kwargs, input=_ofg_channels_last(kwargs["input"]))
    return args, kwargs


def _ofg_key(name):
    """The environment's key of a value name of the plan."""
    if name.startswith("node:"):
        return name[len("node:"):]
    if name.startswith("output:") and _OFG_OUTPUT_NODES:
        return _OFG_OUTPUT_NODES[int(name[len("output:"):])]
    return name


def _ofg_flatten(value):
    """The tensors of a forward result, in order: a tensor, or nested tuples or lists."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _ofg_flatten(item)]
    return []


def _ofg_attr(roots, target):
    """The object at the dotted path target under the first of roots that has it, as
    torch.fx.Interpreter fetches a get_attr node's value."""
    for root in roots:
        value = root
        for part in target.split("."):
            value = getattr(value, part, None)
        if value is not None:
            return value
    raise RuntimeError("ModelNew: the traced graph reads %s, which Model does not have"
                       % target)


def _ofg_meta_trace(model, inputs):
    """model traced as the evaluator's meta tracer does (gpu/evaluator/meta_trace.py):
    torch.fx proxies carrying meta tensors of the inputs, so that sizes are numbers."""
    import inspect
    import warnings
    from torch.fx.experimental.meta_tracer import symbolic_trace
    names = list(inspect.signature(model.forward).parameters)
    meta = {name: t.to("meta") for name, t in zip(names, inputs)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return symbolic_trace(model, meta_args=meta)


class _OfgGraph:
    """self.ref's graph as the evaluator traced it, so that node names are the profile's:
    torch.fx.symbolic_trace, the meta tracer, or torch.export.export with the first
    call's inputs. root is
    where call_module targets live, and roots where get_attr targets are looked up (Model
    first, whose tensors move with it, then the traced module's own constants); keys maps
    each placeholder to the value it stands for (an input, or for torch.export a
    parameter or buffer of self.ref)."""

    def __init__(self, model, inputs):
        self.keys, self.constants = {}, {}
        if _OFG_GRAPH_SOURCE in ("fx", "fx_meta"):
            graph_module = (torch.fx.symbolic_trace(model) if _OFG_GRAPH_SOURCE == "fx"
                            else _ofg_meta_trace(model, inputs))
            self.root = model
            self.roots = (model, graph_module)
            placeholders = [n for n in graph_module.graph.nodes if n.op == "placeholder"]
            for index, node in enumerate(placeholders):
                self.keys[node.name] = "input:%d" % index
        else:
            with torch.enable_grad():  # as the evaluator exported it
                program = torch.export.export(model, tuple(inputs))
            graph_module = program.graph_module
            self.root = graph_module
            self.roots = (graph_module,)
            signature = program.graph_signature
            lifted = dict(signature.inputs_to_parameters)
            lifted.update(signature.inputs_to_buffers)
            user = list(signature.user_inputs)
            constants = dict(getattr(signature, "inputs_to_lifted_tensor_constants", {}) or {})
            for node in graph_module.graph.nodes:
                if node.op != "placeholder":
                    continue
                if node.name in lifted:
                    self.keys[node.name] = "param:" + lifted[node.name]
                elif node.name in user:
                    self.keys[node.name] = "input:%d" % user.index(node.name)
                elif node.name in constants:
                    self.constants[node.name] = program.constants[constants[node.name]]
        self.nodes = {n.name: n for n in graph_module.graph.nodes}

    def seed(self, env):
        """Enters the placeholders' and get_attr nodes' values into env."""
        for name, key in self.keys.items():
            env[name] = env[key]
        env.update(self.constants)
        for node in self.nodes.values():
            if node.op == "get_attr":
                env[node.name] = _ofg_attr(self.roots, node.target)

    def run(self, name, env, step, channels_last=False):
        """Runs node name as torch.fx.Interpreter would, its arguments taken from env; a
        convolution in _OFG_LIBRARY_CHANNELS_LAST (channels_last) on a channels-last
        input."""
        node = self.nodes.get(name)
        if node is None:
            raise RuntimeError("ModelNew: step %d runs node %s, which this torch's trace of "
                               "Model does not have" % (step, name))

        def value(arg):
            if arg.name not in env:
                raise RuntimeError("ModelNew: step %d (node %s) reads %s, which no earlier "
                                   "step computed" % (step, name, arg.name))
            return env[arg.name]

        args = torch.fx.node.map_arg(node.args, value)
        kwargs = torch.fx.node.map_arg(node.kwargs, value)
        if channels_last:
            args, kwargs = _ofg_channels_last_input(args, kwargs)
        if node.op == "call_module":
            return self.root.get_submodule(node.target)(*args, **kwargs)
        if node.op == "call_function":
            return node.target(*args, **kwargs)
        if node.op == "call_method":
            return getattr(args[0], node.target)(*args[1:], **kwargs)
        if node.op == "get_attr":
            return _ofg_attr(self.roots, node.target)
        raise RuntimeError("ModelNew: step %d: node %s is a %s, not a call"
                           % (step, name, node.op))


def _ofg_stage_inputs(module, held, inputs, stream):
    """Copies this call's tensor inputs into held, the captured ones: the dense pairs of
    one dtype and size in one launch of the staging kernel (_OFG_STAGE) on stream (a raw
    CUDA stream), any other pair (a strided input, another dtype or device) by copy_."""
    dsts, srcs = [], []
    for h, x in zip(held, inputs):
        if not isinstance(x, torch.Tensor):
            continue
        if (x.device == h.device and x.dtype == h.dtype and x.shape == h.shape
                and x.is_contiguous() and h.is_contiguous()):
            dsts.append(h)
            srcs.append(x)
        else:
            h.copy_(x)
    if dsts:
        module.ofg_stage(dsts, srcs, stream)


def _ofg_region(module, launcher, table, env, device, step):
    """Runs a region step: its writes are allocated, its reads checked and made dense,
    each in the order its kernels address it (_OFG_CHANNELS_LAST), and its launcher runs
    them on the current stream."""
    tensors = []
    channels_last = _OFG_CHANNELS_LAST.get(launcher, ())
    for name, dtype, shape, written in table:
        key = _ofg_key(name)
        layout = _ofg_layout(shape, name in channels_last)
        if written:
            env[key] = torch.empty(shape, dtype=dtype, device=device, memory_format=layout)
        elif key not in env:
            raise RuntimeError("ModelNew: step %d (region) reads %s, which no earlier step "
                               "computed" % (step, name))
        tensors.append(_ofg_check(name, env[key], dtype, shape, device, layout))
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    getattr(module, launcher)(tensors, stream)


class ModelNew(torch.nn.Module):
    """Drop-in for Model running opforge's program; the parameters live in self.ref."""

    def __init__(self, *init_inputs):
        super().__init__()
        # First, so that it draws the same random numbers as Model(*init_inputs) would
        # under the same seed: the parameters are then equal.
        self.ref = Model(*init_inputs)
        # Plain lists, not attributes torch registers: the state stays Model's.
        self._ofg_graph = []
        self._ofg_capture = []
        if (_OFG_REGIONS or _OFG_STAGE) and torch.cuda.is_available():
            _ofg_module(torch.device("cuda", torch.cuda.current_device()))

    def _ofg_device(self, inputs):
        first = next((x for x in inputs if isinstance(x, torch.Tensor)), None)
        if first is None:
            first = next(iter(self.ref.parameters()), None)
        device = (first.device if first is not None
                  else torch.device("cuda", torch.cuda.current_device()))
        if _OFG_REGIONS and device.type != "cuda":
            raise RuntimeError("ModelNew runs CUDA kernels: its inputs are on %s, move the "
                               "model and inputs to a GPU" % device)
        return device

    def _ofg_run(self, inputs, device):
        """The program's steps in order on the current stream; the outputs, in order."""
        env = {"input:%d" % i: x for i, x in enumerate(inputs)}
        env.update(("param:" + k, v) for k, v in self.ref.named_parameters())
        env.update(("param:" + k, v) for k, v in self.ref.named_buffers())
        if _OFG_TRACE:
            if not self._ofg_graph:
                self._ofg_graph.append(_OfgGraph(self.ref, inputs))
            self._ofg_graph[0].seed(env)
        module = _ofg_module(device) if _OFG_REGIONS else None
        for step, (kind, what, detail) in enumerate(_OFG_STEPS):
            if kind == "library":
                env[detail] = self._ofg_graph[0].run(detail, env, step,
                                                     detail in _OFG_LIBRARY_CHANNELS_LAST)
            elif kind == "model":
                flat = _ofg_flatten(self.ref(*inputs))
                if len(flat) != _OFG_N_OUTPUTS:
                    raise RuntimeError("ModelNew: Model returned %d tensors, the profile has "
                                       "%d outputs" % (len(flat), _OFG_N_OUTPUTS))
                env.update((_ofg_key("output:%d" % j), t) for j, t in enumerate(flat))
            else:
                _ofg_region(module, what, detail, env, device, step)
        keys = [_ofg_key("output:%d" % j) for j in range(_OFG_N_OUTPUTS)]
        missing = [k for k in keys if k not in env]
        if missing:
            raise RuntimeError("ModelNew: no step computed the output %s" % missing[0])
        return [env[k] for k in keys]

    def _ofg_replay(self, inputs, device):
        """The program as one CUDA graph, captured on the first call (and again when the
        device or the parameters move): this call's inputs are copied into the captured
        ones (_ofg_stage_inputs), the graph replays, and the captured outputs are
        returned."""
        key = (device, tuple(t.data_ptr() for t in self.ref.parameters())
               + tuple(t.data_ptr() for t in self.ref.buffers()))
        if not self._ofg_capture or self._ofg_capture[0][0] != key:
            static = [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            # Warm-up on a side stream, as torch asks before a capture: it also traces the
            # graph and builds the kernels, neither of which may happen while capturing.
            side = torch.cuda.Stream(device)
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side):
                for _ in range(3):
                    self._ofg_run(static, device)
            torch.cuda.current_stream(device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                outputs = self._ofg_run(static, device)
            self._ofg_capture[:] = [(key, graph, static, outputs)]
        _, graph, static, outputs = self._ofg_capture[0]
        _ofg_stage_inputs(_ofg_module(device), static, inputs,
                          torch.cuda.current_stream(device).cuda_stream)
        graph.replay()
        return outputs

    def forward(self, *inputs):
        if len(inputs) != _OFG_NARGS:
            raise TypeError("ModelNew.forward takes %d arguments, got %d"
                            % (_OFG_NARGS, len(inputs)))
        for position, value in _OFG_SCALARS:
            if inputs[position] != value:
                raise ValueError("ModelNew: argument %d must be %r, as the plan has it "
                                 "built in; got %r" % (position, value, inputs[position]))
        device = self._ofg_device(inputs)
        with torch.no_grad():
            if device.type != "cuda":
                return _ofg_pack(self._ofg_run(inputs, device))
            with torch.cuda.device(device):
                if _OFG_CAPTURE:
                    return _ofg_pack(self._ofg_replay(inputs, device))
                return _ofg_pack(self._ofg_run(inputs, device))
