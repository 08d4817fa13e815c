# Channels-last plans on the CPU: a plan's channels_last list validated (programs and single candidates), listed reads passed and listed writes allocated channels-last, library convolutions a region reads so run on a channels-last input, whole programs evaluated with a fake library whose kernels index raw storage in (N, [D,] H, W, C) order, and the KernelBench export of such programs run against Model.
import json
import math
import os
import shutil
import subprocess
import types
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]

# The convolution's value is a task output, so that its layout shows in the outputs.
CONV2D_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.scale = nn.Parameter(torch.rand(8, 1, 1) + 0.5)

    def forward(self, x):
        y = self.conv(x)
        return y, torch.relu(y * self.scale)

def get_inputs():
    return [torch.rand(2, 3, 10, 12)]

def get_init_inputs():
    return []
"""

CONV3D_TASK = (CONV2D_TASK.replace("Conv2d", "Conv3d").replace("(8, 1, 1)", "(8, 1, 1, 1)")
               .replace("(2, 3, 10, 12)", "(2, 3, 6, 7, 8)"))

# A library ReLU (not a convolution) between the convolution and the region.
RELU_TASK = CONV2D_TASK.replace("return y, torch.relu(y * self.scale)",
                                "return y, torch.relu(y) * self.scale")

FUNCTIONAL_TASK = """
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(3, 8, 3, 3))

    def forward(self, x):
        return F.conv_transpose2d(x, self.weight, stride=2)

def get_inputs():
    return [torch.rand(2, 3, 10, 12)]

def get_init_inputs():
    return []
"""


def physical(t):
    """t's storage as a channels-last kernel indexes it: sizes (N, [D,] H, W, C) with
    row-major strides from t's first element."""
    sizes = [t.shape[0]] + list(t.shape[2:]) + [t.shape[1]]
    strides = [math.prod(sizes[i + 1:]) for i in range(len(sizes))]
    return t.as_strided(sizes, strides)


def scale_relu_physical(x, scale, out):
    """relu(x * scale[c]) computed the way a channels-last kernel does it: on raw storage
    in (N, [D,] H, W, C) order, the channel last."""
    physical(out).copy_(torch.relu(physical(x) * scale.reshape(-1)))


def k_scale_relu_cl(t, lib):
    scale_relu_physical(t["node:conv"], t["param:scale"], t["output:1"])


def k_scale_relu_cl_output(t, lib):
    scale_relu_physical(t["output:0"], t["param:scale"], t["output:1"])


def k_scale_cl(t, lib):
    physical(t["output:1"]).copy_(physical(t["node:relu"]) * t["param:scale"].reshape(-1))


def k_single_scale_relu_cl(t, lib):
    scale_relu_physical(t["input:0"], t["param:scale"], t["output:0"])


KERNELS = {name[2:]: fn for name, fn in globals().items() if name.startswith("k_")}


@pytest.fixture
def make_ev(ev_module, fake_lib):
    def make(src=CONV2D_TASK):
        lib = fake_lib(KERNELS)
        ev = ev_module.Evaluator("cpu", lib=lib, allow_cpu_evaluate=True)
        ev.load_task({"source": src, "name": "t"})
        ev.profile({})
        return ev, lib
    return make


def region(source="scale_relu_cl", read="node:conv", channels_last=("node:conv", "output:1"),
           nodes=("mul", "relu")):
    """The region after the library convolution: relu(conv * scale) into output:1 (a
    tuple channels_last stands for the list, so that the default stays immutable)."""
    plan = {"buffers": [], "launches": [{"kernel": "k", "grid": [1], "block": [256], "args": [
        {"tensor": read}, {"tensor": "param:scale"}, {"tensor": "output:1"}]}]}
    if channels_last is not None:
        plan["channels_last"] = (list(channels_last) if isinstance(channels_last, tuple)
                                 else channels_last)
    return {"region": 1, "family": "pointwise", "nodes": list(nodes), "source": source,
            "options": [], "reads": [read], "writes": ["output:1"], "plan": plan}


def program(**changes):
    """The task's program: the convolution as a library step, then region(**changes)."""
    return {"graph": False, "steps": [{"library": "Conv2d", "node": "conv", "region": 0},
                                      region(**changes)]}


def relu_program(channels_last=("node:relu", "output:1")):
    """RELU_TASK's program: the convolution and the ReLU as library steps, then the
    scaling as region 2, reading the ReLU's value channels-last."""
    step = region("scale_cl", "node:relu", channels_last, nodes=["mul"])
    return {"graph": False, "steps": [{"library": "Conv2d", "node": "conv", "region": 0},
                                      {"library": "torch.relu", "node": "relu", "region": 1},
                                      dict(step, region=2)]}


def evaluate(ev, candidate):
    reply, action = ev.handle(9, "evaluate", {"candidate": candidate})
    assert action is None and reply["ok"] is True, reply
    return reply["result"]


def is_channels_last(t):
    fmt = torch.channels_last if t.dim() == 4 else torch.channels_last_3d
    return t.is_contiguous(memory_format=fmt) and not t.is_contiguous()


# -- validation

@pytest.mark.parametrize("channels_last,message", [
    ("node:conv", "channels_last must be an array of tensor names"),
    ([7], "channels_last entry 0 is not a tensor name"),
    (["node:conv", "node:conv"], "channels_last names 'node:conv' twice"),
    (["param:conv.weight"], "channels_last names 'param:conv.weight', which no launch passes"),
    (["node:relu"], "channels_last names 'node:relu', which no launch passes"),
    (["param:scale"], "channels_last names 'param:scale' of rank 3: channels-last order "
                      "needs rank 4 or 5"),
])
def test_program_channels_last_rules(make_ev, channels_last, message):
    ev, lib = make_ev()
    r = evaluate(ev, {"program": program(channels_last=channels_last)})
    assert r["failure"] == {"stage": "load", "class": "load/bad_program",
                            "message": "step 1 (region 1): plan: " + message}
    assert lib.calls == []


@pytest.mark.parametrize("channels_last,cls,message", [
    ({"input:0": 1}, "plan/malformed", "channels_last must be an array of tensor names"),
    (["input:0", "input:0"], "plan/unknown_tensor", "channels_last names 'input:0' twice"),
    (["param:bias"], "plan/unknown_tensor",
     "channels_last names 'param:bias', which no launch passes"),
    (["param:scale"], "plan/malformed",
     "channels_last names 'param:scale' of rank 3: channels-last order needs rank 4 or 5"),
])
def test_single_candidate_channels_last_rules(make_ev, channels_last, cls, message):
    ev, lib = make_ev(SINGLE_TASK)
    r = evaluate(ev, single_candidate(channels_last))
    assert r["failure"] == {"stage": "launch", "class": cls, "message": "plan: " + message}
    assert lib.calls == []


# -- the runner

@pytest.mark.parametrize("src", [CONV2D_TASK, CONV3D_TASK])
def test_listed_reads_and_writes_are_channels_last(make_ev, ev_module, src):
    ev, _ = make_ev(src)
    prog = ev_module.program.parse_program(program(), ev.task.profile, "fp32")
    step = prog.steps[1]
    rank = len(ev.task.profile["outputs"][0]["shape"])
    assert step.channels_last == {"node:conv": rank, "output:1": rank}
    runner = ev_module.program_exec.ProgramRunner(ev.task, prog, None, {}, lambda: 0, "cpu")
    ws = runner.new_workspace()
    assert list(ws) == ["output:1"] and is_channels_last(ws["output:1"])
    value = torch.rand(ev.task.profile["outputs"][0]["shape"])
    state = dict(runner.traced.module.named_parameters())
    seen = runner._tensor("node:conv", step, {"conv": value}, ws, [], state)
    assert is_channels_last(seen) and torch.equal(seen, value)
    assert runner._tensor("output:1", step, {}, ws, [], state) is ws["output:1"]
    # a listed value already in channels-last order is passed as it is (no copy)
    again = runner._tensor("node:conv", step, {"conv": seen}, ws, [], state)
    assert again.data_ptr() == seen.data_ptr() and is_channels_last(again)
    scale = runner._tensor("param:scale", step, {}, ws, [], state)
    assert scale.is_contiguous() and torch.equal(scale, state["scale"])


def test_library_convolutions_run_channels_last(make_ev, ev_module):
    """A convolution whose value a region reads channels-last (as node:conv or as the
    task output it is) runs on a channels-last input; one read row-major does not, nor
    does a library op that is not a convolution."""
    ev, _ = make_ev()
    parse = ev_module.program.parse_program
    assert parse(program(), ev.task.profile, "fp32").channels_last_nodes == {"conv"}
    assert parse(program(source="scale_relu_cl_output", read="output:0",
                         channels_last=["output:0", "output:1"]),
                 ev.task.profile, "fp32").channels_last_nodes == {"conv"}
    assert parse(program(channels_last=["output:1"]), ev.task.profile,
                 "fp32").channels_last_nodes == frozenset()
    assert parse(program(channels_last=None), ev.task.profile,
                 "fp32").channels_last_nodes == frozenset()
    ev, _ = make_ev(RELU_TASK)
    assert parse(relu_program(), ev.task.profile, "fp32").channels_last_nodes == frozenset()


@pytest.mark.parametrize("src,node", [(CONV2D_TASK, "conv"), (CONV3D_TASK, "conv"),
                                      (FUNCTIONAL_TASK, "conv_transpose2d")])
def test_library_convolution_run_channels_last_on_cpu(make_ev, ev_module, src, node):
    ev, _ = make_ev(src)
    traced = ev.task.traced
    entry = next(n for n in ev.task.profile["graph"] if n["name"] == node)
    assert ev_module.layout.is_convolution(entry)
    inputs = ev.make_inputs(ev.task, 3)
    state = dict(ev.task.model.state_dict(keep_vars=True))
    with torch.no_grad():
        plain = traced.run_node(node, traced.seed_env(inputs, state))
        last = traced.run_node(node, traced.seed_env(inputs, state), channels_last=True)
    assert plain.is_contiguous() and is_channels_last(last)
    torch.testing.assert_close(last, plain, atol=1e-5, rtol=1e-5)


# -- whole programs through the fake library

@pytest.mark.parametrize("src", [CONV2D_TASK, CONV3D_TASK])
def test_channels_last_program_is_correct(make_ev, ev_module, src):
    """The region's kernel indexes raw storage channels-last: the program is correct only
    when its read and its write are channels-last. The library gets the plan without the
    key, and the task outputs come back channels-last: the convolution's (run on a
    channels-last input) and the region's."""
    ev, lib = make_ev(src)
    r = evaluate(ev, {"program": program()})
    assert r["failure"] is None and r["correct"] is True
    assert all(t["ok"] for t in r["trials"]) and r["robust"]["ok"] is True
    assert r["checks"]["repeat_consistent"] is True
    assert "channels_last" not in lib.prepared[0][0]["plan"]
    assert lib.prepared[0][0]["plan"] == {k: v for k, v in region()["plan"].items()
                                          if k != "channels_last"}
    prog = ev_module.program.parse_program(program(), ev.task.profile, "fp32")
    runner = ev_module.program_exec.ProgramRunner(ev.task, prog, lib, {1: 7}, lambda: 0, "cpu")
    inputs = ev.make_inputs(ev.task, 5)
    with torch.no_grad():
        want = ev.task.model(*inputs)
    outs = runner.run(inputs, runner.new_workspace(), checked=True)
    assert all(is_channels_last(o) for o in outs)
    for got, ref in zip(outs, want):
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)
    # The same kernel without the list reads and writes row-major tensors as if they were
    # channels-last, and the evaluation says so.
    r = evaluate(ev, {"program": program(channels_last=None)})
    assert r["correct"] is False and r["failure"]["class"] == "correctness/mismatch"


def test_channels_last_read_of_a_library_relu(make_ev):
    ev, _ = make_ev(RELU_TASK)
    r = evaluate(ev, {"program": relu_program()})
    assert r["correct"] is True, r["failure"]


# -- single candidates

SINGLE_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(8, 1, 1) + 0.5)
        self.bias = nn.Parameter(torch.rand(8))

    def forward(self, x):
        return torch.relu(x * self.scale)

def get_inputs():
    return [torch.rand(2, 8, 5, 6)]

def get_init_inputs():
    return []
"""


def single_candidate(channels_last):
    plan = {"launches": [{"kernel": "k", "grid": [1], "block": [32], "args": [
        {"tensor": "input:0"}, {"tensor": "param:scale"}, {"tensor": "output:0"}]}]}
    if channels_last is not None:
        plan["channels_last"] = channels_last
    return {"source": "single_scale_relu_cl", "options": [], "plan": plan}


def test_single_candidate_channels_last(make_ev):
    ev, lib = make_ev(SINGLE_TASK)
    r = evaluate(ev, single_candidate(["input:0", "output:0"]))
    assert r["failure"] is None and r["correct"] is True
    assert lib.prepared[0][0]["plan"] == single_candidate(None)["plan"]
    r = evaluate(ev, single_candidate(None))
    assert r["correct"] is False and r["failure"]["class"] == "correctness/mismatch"


# -- the KernelBench export

def core_library():
    """The built core library (libopforge_core.a) under $OPFORGE_BUILD_ROOT or a build
    folder of the repo, or None."""
    roots = [Path(os.environ["OPFORGE_BUILD_ROOT"])] if os.environ.get("OPFORGE_BUILD_ROOT") else []
    roots += [REPO / d for d in ("build-test-normal", "build", "build-gpu")]
    return next((r / "libopforge_core.a" for r in roots if (r / "libopforge_core.a").is_file()),
                None)


DRIVER = r"""
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include "handlers/export_kernelbench.h"

/* export_kernelbench of argv[1] (the profile) and argv[2] (the candidate), JSON files:
 * the file on stdout, or the refusal on stderr and exit status 1. */
int main(int argc, char **argv) {
  json_error_t e;
  if (argc != 3)
    return 2;
  json_t *profile = json_load_file(argv[1], 0, &e), *candidate = json_load_file(argv[2], 0, &e);
  char *text = NULL, err[512] = "";
  if (!profile || !candidate)
    return 2;
  int rc = export_kernelbench(profile, candidate, &text, err, sizeof err);
  fputs(rc == 0 ? text : err, rc == 0 ? stdout : stderr);
  free(text);
  json_decref(profile);
  json_decref(candidate);
  return rc == 0 ? 0 : 1;
}
"""


@pytest.fixture(scope="module")
def exporter(tmp_path_factory):
    """export(profile, candidate) -> (ok, the file or the refusal): export_kernelbench of
    the built core library, through a small program linked against it."""
    lib, cc = core_library(), shutil.which("cc")
    if lib is None or cc is None:
        pytest.skip("needs the built core library (libopforge_core.a) and a C compiler")
    folder = tmp_path_factory.mktemp("exporter")
    (folder / "driver.c").write_text(DRIVER)
    build = subprocess.run([cc, "-std=c17", "-I", str(REPO), str(folder / "driver.c"),
                            str(lib), "-ljansson", "-lm", "-pthread", "-o",
                            str(folder / "driver")], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr

    def export(profile, candidate):
        (folder / "profile.json").write_text(json.dumps(profile))
        (folder / "candidate.json").write_text(json.dumps(candidate))
        run = subprocess.run([str(folder / "driver"), str(folder / "profile.json"),
                              str(folder / "candidate.json")], capture_output=True, text=True)
        return run.returncode == 0, run.stdout if run.returncode == 0 else run.stderr
    return export


KERNEL_SOURCE = ('extern "C" __global__ void k(const float* x, const float* s, float* y) {\n'
                 '  y[blockIdx.x * blockDim.x + threadIdx.x] = x[0] * s[0];\n}\n')


def export_candidate(prog):
    steps = [dict(s, source=KERNEL_SOURCE) if "source" in s else s for s in prog["steps"]]
    return {"id": "c", "task_id": "t", "program": dict(prog, steps=steps)}


class StandIn:
    """Stands in for a program's compiled extension: region 1's and region 2's launchers
    compute on raw storage in channels-last order, as the kernels would."""

    def ofg_r1(self, tensors, stream):
        scale_relu_physical(*tensors)

    def ofg_r2(self, tensors, stream):
        x, scale, out = tensors
        physical(out).copy_(physical(x) * scale.reshape(-1))


def run_export(text, src, monkeypatch):
    """(outputs of ModelNew's steps on the CPU, Model's) for the export text of task src,
    exec'd after the task in one namespace as KernelBench's eval does."""
    mod = types.ModuleType("opforge_export_channels_last")
    exec(compile(src, "reference.py", "exec"), mod.__dict__)
    exec(compile(text, "export.py", "exec"), mod.__dict__)
    monkeypatch.setattr(mod, "_ofg_module", lambda device: StandIn())
    torch.manual_seed(42)
    ref = mod.Model()
    torch.manual_seed(42)
    new = mod.ModelNew()
    torch.manual_seed(1)
    inputs = mod.get_inputs()
    with torch.no_grad():
        return new._ofg_run(inputs, torch.device("cpu")), ref(*inputs)


def static_errors(text):
    from conftest import gpu_script
    return gpu_script("static_check").errors(text)


@pytest.mark.parametrize("src", [CONV2D_TASK, CONV3D_TASK])
def test_export_runs_what_the_evaluator_ran(make_ev, exporter, monkeypatch, src):
    ev, _ = make_ev(src)
    assert evaluate(ev, {"program": program()})["correct"] is True
    ok, text = exporter(ev.task.profile, export_candidate(program()))
    assert ok, text
    assert ('_OFG_CHANNELS_LAST = {\n    "ofg_r1": ["node:conv", "output:1"],\n}\n'
            '_OFG_LIBRARY_CHANNELS_LAST = ["conv"]\n') in text
    assert static_errors(text) == []
    outs, want = run_export(text, src, monkeypatch)
    assert all(is_channels_last(o) for o in outs)
    for got, ref in zip(outs, want):
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)


def test_export_of_a_read_by_output_name_and_of_a_library_relu(make_ev, exporter, monkeypatch):
    ev, _ = make_ev()
    prog = program(source="scale_relu_cl_output", read="output:0",
                   channels_last=["output:0", "output:1"])
    ok, text = exporter(ev.task.profile, export_candidate(prog))
    assert ok, text
    assert '_OFG_LIBRARY_CHANNELS_LAST = ["conv"]\n' in text
    ev, _ = make_ev(RELU_TASK)
    ok, text = exporter(ev.task.profile, export_candidate(relu_program()))
    assert ok, text
    assert ('_OFG_CHANNELS_LAST = {\n    "ofg_r2": ["node:relu", "output:1"],\n}\n'
            '_OFG_LIBRARY_CHANNELS_LAST = []\n') in text
    outs, want = run_export(text, RELU_TASK, monkeypatch)
    assert outs[0].is_contiguous() and is_channels_last(outs[1])
    for got, ref in zip(outs, want):
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("channels_last,message", [
    ("node:conv", "plan: channels_last must be an array of tensor names"),
    (["node:conv", "node:conv"], "plan: channels_last names 'node:conv' twice"),
    (["node:relu"], "plan: channels_last names 'node:relu', which no launch passes"),
    (["param:scale"], "plan: channels_last names 'param:scale' of rank 3: channels-last "
                      "order needs rank 4 or 5"),
])
def test_export_refuses_a_bad_channels_last(make_ev, exporter, channels_last, message):
    ev, _ = make_ev()
    ok, text = exporter(ev.task.profile, export_candidate(program(channels_last=channels_last)))
    assert not ok and text == "program: step 1 (region 1): " + message


def test_single_candidate_export(make_ev, exporter):
    ev, _ = make_ev(SINGLE_TASK)
    candidate = dict(single_candidate(["input:0", "output:0"]), id="c", task_id="t",
                     source=KERNEL_SOURCE)
    ok, text = exporter(ev.task.profile, candidate)
    assert ok, text
    assert '\n_OFG_CHANNELS_LAST = ["input:0", "output:0"]\n' in text
    assert static_errors(text) == []
    mod = types.ModuleType("opforge_export_single")
    exec(compile(SINGLE_TASK, "reference.py", "exec"), mod.__dict__)
    exec(compile(text, "export.py", "exec"), mod.__dict__)
    x = torch.rand(2, 8, 5, 6)
    cpu = torch.device("cpu")
    seen = mod._ofg_check("input:0", x, torch.float32, (2, 8, 5, 6), cpu)
    assert is_channels_last(seen) and torch.equal(seen, x)
    scale = torch.rand(8, 1, 1)
    kept = mod._ofg_check("param:scale", scale, torch.float32, (8, 1, 1), cpu)
    assert kept.data_ptr() == scale.data_ptr() and kept.is_contiguous()
    assert mod._ofg_layout("output:0", (2, 8, 5, 6)) is torch.channels_last
    candidate["plan"]["channels_last"] = ["param:scale"]
    assert exporter(ev.task.profile, candidate) == (
        False, "plan: channels_last names 'param:scale' of rank 3: channels-last order needs "
               "rank 4 or 5")


