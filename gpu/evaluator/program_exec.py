# Evaluator program execution: runs a validated program's steps in stream order (library steps through the traced graph, region steps through libopforge_gpu) over an environment of values.
"""A ProgramRunner borrows the task, the library and the prepared region handles; it
keeps the pointers it last bound per region (to bind again only when they change) and
no tensors. Workspaces (the buffers regions write) are dicts the caller owns; run()
returns the task's output tensors, which the caller owns."""

import torch

from .layout import in_order, memory_format
from .tensors import flatten_outputs, named_state


class StepError(Exception):
    """A library step raised; carries the step and the original exception."""

    def __init__(self, step, exc):
        super().__init__("%s: %s: %s" % (step.label(), type(exc).__name__, exc))
        self.step = step
        self.exc = exc


class RegionFailure(Exception):
    """A region's launch reported a failure (the library's reply)."""

    def __init__(self, step, reply):
        super().__init__(step.label())
        self.step = step
        self.reply = reply


def _dtype(name):
    return getattr(torch, name)


class ProgramRunner:
    """Runs a Program on device (the task's). handles maps a region step's index to its
    prepared candidate. stream() gives the current stream as an integer."""

    def __init__(self, task, program, lib, handles, stream, device):
        self.device = device
        self.task = task
        self.program = program
        self.lib = lib
        self.handles = handles
        self.stream = stream
        self.traced = task.traced
        self.bound = {}
        self.state = None  # {state_dict key: tensor}, read again by every checked run
        self.nodes = {n["name"]: n for n in task.profile.get("graph") or []}
        self.dead_after = self._dead_after_steps()
        # Library convolutions run on a channels-last input (program.channels_last_library).
        self.channels_last_nodes = program.channels_last_nodes

    def _dead_after_steps(self):
        """{step index: node values no later step reads} (task outputs are kept)."""
        if self.traced is None or self.program.whole_model:
            return {}
        step_of = {node: s.index for s in self.program.steps for node in s.covers}
        last = {}
        for node in self.traced.order:
            for arg in self.traced.nodes[node].all_input_nodes:
                if node in step_of:
                    last[arg.name] = max(last.get(arg.name, -1), step_of[node])
        keep = set(self.traced.output_refs())
        dead = {}
        for value, step in last.items():
            if value not in keep:
                dead.setdefault(step, []).append(value)
        return dead

    def new_workspace(self):
        """{write name: tensor} for every region write, allocated on the task device with
        the profile's dtype and shape (contents undefined), in channels-last order when
        the region's plan lists it."""
        ws = {}
        for step in self.program.regions():
            for spec in step.specs["tensors"]:
                if spec.get("output") is True:
                    name = spec["name"]
                    shape = self._shape(name, step)
                    fmt = memory_format(len(shape)) if name in step.channels_last else None
                    ws[name] = torch.empty(shape, dtype=_dtype(spec["dtype"]), device=self.device,
                                           memory_format=fmt or torch.contiguous_format)
        return ws

    def _shape(self, name, step):
        if name.startswith("output:"):
            return self.task.profile["outputs"][int(name[len("output:"):])]["shape"]
        return self.nodes[step.write_nodes[name]]["shape"]

    def run(self, inputs, ws, checked, reset_state=True, marks=None):
        """Runs every step on inputs (the argument list of forward) with ws (from
        new_workspace) as the regions' outputs. checked: each region through
        ofg_candidate_run (outputs poisoned, a sync after each launch, failures named);
        else bind (when pointers changed) and ofg_candidate_enqueue, nothing else.
        reset_state False keeps scratch buffers and globals as the last run left them
        (checked runs only). marks(i), when given, is called before step i and, with
        i = len(steps), after the last. Returns the task's output tensors."""
        if checked or self.state is None:
            self.state = {n[len("param:"):]: t for n, t in named_state(self.task.model)}
        state = self.state
        if self.program.whole_model:
            return self._run_model(inputs, marks)
        env = self.traced.seed_env(inputs, state)
        with torch.no_grad():
            for step in self.program.steps:
                if marks is not None:
                    marks(step.index)
                if step.kind == "library":
                    try:
                        self.traced.run_node(step.node, env,
                                             step.node in self.channels_last_nodes)
                    except (RegionFailure, StepError):
                        raise
                    except Exception as exc:
                        raise StepError(step, exc) from exc
                else:
                    self._run_region(step, env, ws, inputs, state, checked, reset_state)
                for dead in self.dead_after.get(step.index, ()):
                    env.pop(dead, None)
            if marks is not None:
                marks(len(self.program.steps))
            outs = self.traced.outputs(env, len(self.task.profile["outputs"]))
            self.traced.apply_mutations(env, state, inputs)
        return outs

    def _run_model(self, inputs, marks):
        step = self.program.steps[0]
        if marks is not None:
            marks(0)
        try:
            with torch.no_grad():
                outs = flatten_outputs(self.task.model(*inputs))
        except Exception as exc:
            raise StepError(step, exc) from exc
        if marks is not None:
            marks(1)
        return outs

    def _tensor(self, name, step, env, ws, inputs, state):
        """The tensor a region's plan sees under name: its write buffer, or the value
        it reads, dense in the order the plan addresses it (channels-last when its plan
        lists it, else row-major; the value itself when it is already so)."""
        if name in step.write_nodes:
            return ws[name]
        if name in step.read_nodes:
            t = env[step.read_nodes[name]]
        elif name.startswith("input:"):
            t = inputs[int(name[len("input:"):])]
        else:
            t = state[name[len("param:"):]]
        return in_order(t.detach(), name in step.channels_last)

    def _run_region(self, step, env, ws, inputs, state, checked, reset_state):
        named = [(n, self._tensor(n, step, env, ws, inputs, state)) for n in step.tensors]
        handle = self.handles[step.index]
        if checked:
            self._check_reads(step, named)
            reply = self.lib.run(handle, named, self.stream(), reset_state=reset_state)
            if not reply.get("ok"):
                raise RegionFailure(step, reply)
        else:
            ptrs = tuple(t.data_ptr() for _, t in named)
            if self.bound.get(step.index) != ptrs:
                reply = self.lib.bind(handle, named)
                if reply is not None:
                    raise RegionFailure(step, reply)
                self.bound[step.index] = ptrs
            reply = self.lib.enqueue(handle, self.stream())
            if reply is not None:
                raise RegionFailure(step, reply)
        for name, node in step.write_nodes.items():
            env[node] = ws[name]

    def _check_reads(self, step, named):
        """A value a region reads must have the dtype and size its spec was prepared
        with (a library op whose result differs from the profile would be misread)."""
        specs = {s["name"]: s for s in step.specs["tensors"]}
        for name, t in named:
            spec = specs[name]
            if str(t.dtype).replace("torch.", "") != spec["dtype"] or t.numel() != spec["numel"]:
                raise RegionFailure(step, {"ok": False, "sticky": False, "failure": {
                    "stage": "launch", "class": "program/value_mismatch",
                    "message": "'%s' is %s with %d elements; the region was prepared for %s "
                               "with %d" % (name, str(t.dtype).replace("torch.", ""),
                                            t.numel(), spec["dtype"], spec["numel"])}})
