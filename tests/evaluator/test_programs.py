# Program candidates on the CPU: all-library programs of small tasks, malformed programs, {"library": "model"}, regions through the fake GPU library (a region writing a value a later library step reads), random library ops under restored RNG, mutable buffers, and the profile's per-node FLOPs.
import time

import pytest
import torch

THREE_OPS_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = nn.Linear(k, n)

    def forward(self, x):
        return torch.softmax(torch.relu(self.fc(x)), dim=1)

def get_inputs():
    return [torch.rand(16, 64)]

def get_init_inputs():
    return [64, 32]
"""

DROPOUT_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return torch.softmax(self.drop(x), dim=1)

def get_inputs():
    return [torch.rand(32, 64)]

def get_init_inputs():
    return []
"""

BATCHNORM_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 8)
        self.bn = nn.BatchNorm1d(8)

    def forward(self, x):
        return self.bn(self.fc(x)) * 2.0

def get_inputs():
    return [torch.rand(32, 16)]

def get_init_inputs():
    return []
"""

# symbolic_trace fails on the shape test; torch.export specializes it away.
# A branch on a size: symbolic_trace fails, the meta tracer specializes it.
META_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 32)

    def forward(self, x):
        if x.shape[0] > 2:
            return torch.relu(self.fc(x))
        return x

def get_inputs():
    return [torch.rand(16, 64)]

def get_init_inputs():
    return []
"""

# The same behind *args: the meta tracer needs one named tensor per input, so only
# torch.export traces it.
EXPORT_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 32)

    def forward(self, *xs):
        x = xs[0]
        if x.shape[0] > 2:
            return torch.relu(self.fc(x))
        return x

def get_inputs():
    return [torch.rand(16, 64)]

def get_init_inputs():
    return []
"""


def k_relu_region(t, lib):
    t["node:relu"].copy_(torch.relu(t["node:fc"]))


def k_softmax_region(t, lib):
    t["output:0"].copy_(torch.softmax(t["node:relu"], dim=1))


def k_writes_nothing(t, lib):
    pass


def k_stateful_relu(t, lib):
    """Computes on its first launch after a reset, then repeats what it saved."""
    state = lib.module_state
    if "saved" not in state:
        state["saved"] = torch.relu(t["node:fc"]).clone()
    t["node:relu"].copy_(state["saved"])


KERNELS = {name[2:]: fn for name, fn in globals().items() if name.startswith("k_")}


@pytest.fixture
def make_ev(ev_module, fake_lib):
    def make(src=THREE_OPS_TASK, **load):
        lib = fake_lib(KERNELS)
        ev = ev_module.Evaluator("cpu", lib=lib, allow_cpu_evaluate=True)
        ev.load_task({"source": src, "name": "t", **load})
        ev.profile({})
        return ev, lib
    return make


def evaluate(ev, program):
    reply, action = ev.handle(9, "evaluate", {"candidate": {"program": program}})
    assert action is None
    assert reply["ok"] is True, reply
    return reply["result"]


def call_nodes(ev):
    return [n for n in ev.task.profile["graph"] if n["op"].startswith("call_")]


def library_program(ev, graph="auto"):
    """The reference program: every call node a library step, in graph order."""
    return {"graph": graph, "steps": [{"library": n["target"], "node": n["name"], "region": i}
                                      for i, n in enumerate(call_nodes(ev))]}


def relu_region(source="relu_region"):
    return {"region": 1, "family": "pointwise", "nodes": ["relu"], "source": source,
            "options": [], "reads": ["node:fc"], "writes": ["node:relu"],
            "plan": {"buffers": [], "launches": [
                {"kernel": "k", "grid": [1], "block": [256],
                 "args": [{"tensor": "node:fc"}, {"tensor": "node:relu"}]}]}}


def mixed_program(source="relu_region"):
    return {"graph": "auto", "steps": [
        {"library": "Linear", "node": "fc", "region": 0}, relu_region(source),
        {"library": "torch.softmax", "node": "softmax", "region": 2}]}


# -- all-library programs

def test_reference_program_of_three_ops_is_correct(make_ev):
    ev, lib = make_ev()
    assert [n["name"] for n in call_nodes(ev)] == ["fc", "relu", "softmax"]
    r = evaluate(ev, library_program(ev))
    assert r["failure"] is None and r["correct"] is True
    assert len(r["trials"]) == 5 and all(t["ok"] and t["max_abs"] == 0.0 for t in r["trials"])
    assert r["robust"]["ok"] is True
    assert r["checks"] == {"inputs_unchanged": True, "outputs_written": True,
                           "repeat_consistent": True, "above_floor": None}
    assert r["accuracy"]["outputs"][0]["candidate_err"] == r["accuracy"]["outputs"][0]["eager_err"]
    assert len(r["steps_ms"]) == 3 and all(ms >= 0 for ms in r["steps_ms"])
    assert r["library_ms"] == pytest.approx(sum(r["steps_ms"]))
    assert r["graph"] == {"mode": "auto", "captured": False, "used": "stream",
                          "reason": "no CUDA device: stream order",
                          "stream_ms": r["graph"]["stream_ms"], "graph_ms": None}
    assert r["graph"]["stream_ms"] > 0
    # library steps only: time and eager come from one loop that ran them in turn
    assert r["time"]["reps"] >= 3 and r["eager"]["reps"] == r["time"]["reps"]
    assert r["speedup"]["eager"] == r["eager"]["median_ms"] / r["time"]["median_ms"]
    assert r["compile"] == {"ok": True, "ms": 0.0, "log": "", "regions": []}
    assert lib.calls == []  # no region: the library is never asked


def test_program_outputs_equal_the_reference(make_ev, ev_module):
    ev, _ = make_ev()
    program = ev_module.program.parse_program(library_program(ev), ev.task.profile, "fp32")
    runner = ev_module.program_exec.ProgramRunner(ev.task, program, None, {}, lambda: 0, "cpu")
    inputs = ev.make_inputs(ev.task, 5)
    with torch.no_grad():
        ref = ev.task.model(*inputs)
    outs = runner.run(inputs, runner.new_workspace(), checked=True)
    assert len(outs) == 1 and torch.equal(outs[0], ref)


def test_whole_model_step(make_ev):
    ev, _ = make_ev()
    r = evaluate(ev, {"graph": "false", "steps": [{"library": "model"}]})
    assert r["correct"] is True, r["failure"]
    assert len(r["steps_ms"]) == 1 and r["library_ms"] == r["steps_ms"][0]
    assert r["graph"]["mode"] == "false" and r["graph"]["reason"] == "graph false: stream order"


def test_task_without_a_graph_runs_only_the_model(make_ev):
    ev, _ = make_ev()
    program = library_program(ev)
    ev.task.profile["graph"] = None  # as when neither symbolic_trace nor torch.export works
    ev.task.traced = None
    assert evaluate(ev, {"steps": [{"library": "model"}]})["correct"] is True
    r = evaluate(ev, program)
    assert r["failure"] == {"stage": "load", "class": "load/bad_program", "message":
                            "the task has no traced graph: only {\"library\": \"model\"} can "
                            "run it"}


def test_meta_traced_graph_program(make_ev):
    ev, _ = make_ev(META_TASK)
    prof = ev.task.profile
    assert prof["graph_source"] == "fx_meta"
    assert prof["graph_error"].startswith("symbolic_trace: TraceError: ")
    assert ev.task.traced.kind == "fx"
    assert [n["name"] for n in call_nodes(ev)] == ["fc", "relu"]
    r = evaluate(ev, library_program(ev))
    assert r["correct"] is True, r["failure"]
    assert len(r["steps_ms"]) == 2


def test_export_graph_program(make_ev):
    ev, _ = make_ev(EXPORT_TASK)
    prof = ev.task.profile
    assert prof["graph_source"] == "export"
    assert ev.task.traced.kind == "export"
    r = evaluate(ev, library_program(ev))
    assert r["correct"] is True, r["failure"]
    assert len(r["steps_ms"]) == len(call_nodes(ev)) == 2


# -- malformed programs

def _steps(*names):
    return [{"library": "op", "node": n} for n in names]


@pytest.mark.parametrize("program,message", [
    ([], "program must be an object {graph, steps}"),
    ({"steps": []}, "program: steps must be a non-empty array (at most 4096)"),
    ({"steps": _steps("fc", "relu", "softmax"), "extra": 1}, "program: unknown key 'extra'"),
    ({"graph": "maybe", "steps": _steps("fc")}, "program: graph must be \"auto\", \"true\" "
                                                 "or \"false\""),
    ({"steps": _steps("fc", "relu")}, "node softmax is computed by no step"),
    ({"steps": _steps("fc", "relu", "softmax", "relu")},
     "step 3 (library relu): node relu is already computed by step 1"),
    ({"steps": _steps("relu", "fc", "softmax")},
     "step 0 (library relu): node relu reads fc, which no earlier step computes"),
    ({"steps": _steps("fc", "nope", "softmax")},
     "step 1 (library nope): 'nope' is not a call node of the graph"),
    ({"steps": _steps("x", "fc", "relu", "softmax")},
     "step 0 (library x): 'x' is not a call node of the graph"),
    ({"steps": [{"library": "model"}] + _steps("fc")},
     "step 0: {\"library\": \"model\"} runs the whole model and must be the only step"),
    ({"steps": [{"library": "op"}]}, "step 0 (library op): node must name a call node of the graph"),
    ({"steps": [{"library": "op", "node": "fc", "stream": 1}]},
     "step 0: unknown key 'stream' in a library step"),
    ({"steps": [{"node": "fc"}]},
     "step 0: neither a library step (library) nor a region step (region)"),
    ({"steps": [7]}, "step 0: must be an object"),
])
def test_malformed_programs(make_ev, program, message):
    ev, lib = make_ev()
    r = evaluate(ev, program)
    assert r["correct"] is False
    assert r["failure"] == {"stage": "load", "class": "load/bad_program", "message": message}
    assert r["trials"] == [] and lib.calls == []


def _region(**changes):
    step = relu_region()
    step.update(changes)
    return {"steps": [{"library": "Linear", "node": "fc"}, step,
                      {"library": "softmax", "node": "softmax"}]}


@pytest.mark.parametrize("program,message", [
    (_region(reads=[]), "step 1 (region 1): launch 0 passes 'node:fc', which the region "
                        "neither reads nor writes"),
    (_region(reads=["node:softmax"]),
     "step 1 (region 1): reads 'node:softmax', which no earlier step computes"),
    (_region(reads=["node:relu", "node:fc"]),
     "step 1 (region 1): reads 'node:relu', a value of its own nodes"),
    (_region(writes=["node:fc"]),
     "step 1 (region 1): writes 'node:fc', which is not a value of its nodes"),
    (_region(writes=["node:nope"]),
     "step 1 (region 1): unknown value 'node:nope' (no call node nope in the graph)"),
    (_region(writes=["weights:0"]), "step 1 (region 1): 'weights:0' is not a value name "
                                    "(input:i, param:<key>, node:<name>, output:j)"),
    (_region(reads=["param:fc.nope", "node:fc"]), "step 1 (region 1): unknown tensor "
                                                  "'param:fc.nope'"),
    (_region(writes=[]), "step 1 (region 1): writes must be a non-empty array of strings"),
    (_region(nodes=["relu", "softmax"]),
     "step 2 (library softmax): node softmax is already computed by step 1"),
    (_region(plan={"buffers": []}), "step 1 (region 1): plan must be an object with launches"),
    (_region(source=None), "step 1 (region 1): source must be a string"),
    (_region(region=-1), "step 1: region must be an integer >= 0"),
    (_region(options="-O3"), "step 1 (region 1): options must be an array of strings"),
])
def test_malformed_region_steps(make_ev, program, message):
    ev, lib = make_ev()
    r = evaluate(ev, program)
    assert r["failure"] == {"stage": "load", "class": "load/bad_program", "message": message}
    assert lib.calls == []


def test_region_must_write_the_output_it_computes(make_ev):
    ev, _ = make_ev()
    region = relu_region()
    region.update(nodes=["relu", "softmax"])
    r = evaluate(ev, {"steps": [{"library": "Linear", "node": "fc"}, region]})
    assert r["failure"]["message"] == ("output:0 (node softmax) is made by no step: a region "
                                       "that computes it must write it")


# -- regions through the fake library

def test_region_writes_a_value_a_later_library_step_reads(make_ev):
    ev, lib = make_ev()
    r = evaluate(ev, mixed_program())
    assert r["failure"] is None and r["correct"] is True
    cand, specs = lib.prepared[0]
    assert cand == {"source": "relu_region", "options": [],
                    "plan": relu_region()["plan"]}
    assert specs == {"precision": "fp32", "tensors": [
        {"name": "node:fc", "dtype": "float32", "numel": 512, "bytes": 2048},
        {"name": "node:relu", "dtype": "float32", "numel": 512, "bytes": 2048,
         "output": True}]}
    # checked runs for 5 trials, robust, and the re-run that keeps state; fast runs bind
    # once and enqueue each time
    assert lib.calls.count("run") == 6 and lib.calls.count("run_keep_state") == 1
    assert lib.calls.count("bind") >= 1 and lib.calls.count("enqueue") >= 4
    assert lib.calls[0] == "prepare" and lib.calls[-1] == "free" and lib.freed == [7]
    assert r["compile"]["ok"] is True and r["compile"]["regions"] == [
        {"step": 1, "region": 1, "ok": True, "ms": 2.5, "cache": "miss"}]
    assert len(r["steps_ms"]) == 3
    assert r["library_ms"] == pytest.approx(r["steps_ms"][0] + r["steps_ms"][2])


def test_program_with_a_region_is_not_timed_with_eager(make_ev):
    ev, _ = make_ev()
    r = evaluate(ev, mixed_program())
    assert r["correct"] is True and "eager" not in r
    assert r["speedup"]["eager"] is None  # the CPU profile has no eager time


def test_time_in_turn_alternates_the_two(ev_module):
    """Warm-ups run each once, then every rep runs before(), the program, then eager; both
    get as many samples, and the medians follow their own functions' times."""
    calls = []

    def timed(name, seconds):
        def run():
            calls.append(name)
            time.sleep(seconds)
        return run

    mine, theirs = ev_module.program_timing.time_in_turn(
        None, timed("program", 0.002), timed("eager", 0.006), {},
        lambda: calls.append("before"), cuda=False)
    assert calls == ["program", "eager"] + ["before", "program", "eager"] * mine["reps"]
    assert 3 <= mine["reps"] <= 5 and theirs["reps"] == mine["reps"]
    # each sample is its own function's: sleeps are never shorter than asked
    assert mine["median_ms"] >= 2.0 and theirs["median_ms"] >= 6.0
    assert mine["median_ms"] < theirs["median_ms"]
    assert set(mine) == {"median_ms", "mean_ms", "reps", "rse"}


def test_region_writing_the_task_output(make_ev):
    ev, lib = make_ev()
    softmax = {"region": 2, "family": "softmax", "nodes": ["softmax"], "source": "softmax_region",
               "reads": ["node:relu"], "writes": ["output:0"],
               "plan": {"launches": [{"kernel": "k", "grid": [1], "block": [32], "args": [
                   {"tensor": "node:relu"}, {"tensor": "output:0"}]}]}}
    program = mixed_program()
    program["steps"][2] = softmax
    r = evaluate(ev, program)
    assert r["correct"] is True, r["failure"]
    assert lib.prepared[1][1]["tensors"][1] == {"name": "output:0", "dtype": "float32",
                                                "numel": 512, "bytes": 2048, "output": True}
    assert r["library_ms"] == pytest.approx(r["steps_ms"][0])


def test_unwritten_region_value_is_caught_downstream(make_ev):
    ev, _ = make_ev()
    r = evaluate(ev, mixed_program("writes_nothing"))
    assert r["correct"] is False
    # the poison NaNs flow through softmax, bits and all
    assert r["failure"]["class"] in ("correctness/unwritten_output", "correctness/nan_output")


def test_region_state_kept_between_launches_is_caught(make_ev):
    ev, lib = make_ev()
    r = evaluate(ev, mixed_program("stateful_relu"))
    assert r["failure"]["class"] == "check/repeat_inconsistent"
    assert "with new input values in the same buffers" in r["failure"]["message"]


def test_region_compile_failure_names_the_region(make_ev):
    ev, lib = make_ev()
    r = evaluate(ev, mixed_program("compile_error"))
    assert r["failure"] == {"stage": "compile", "class": "compile/syntax_error",
                            "message": "step 1 (region 1): expected a ;"}
    assert r["compile"]["ok"] is False and r["trials"] == []
    assert lib.calls == ["prepare"]


def test_region_launch_failure_names_the_step(make_ev):
    ev, lib = make_ev()
    r = evaluate(ev, mixed_program("bad_plan"))
    assert r["failure"] == {"stage": "launch", "class": "plan/block_too_large",
                            "message": "step 1 (region 1): launch 0: block of 2048 threads"}
    assert lib.freed == [7]


def test_region_enqueue_failure(make_ev, monkeypatch):
    ev, lib = make_ev()
    KERNELS["enqueue_fails"] = k_relu_region
    try:
        r = evaluate(ev, mixed_program("enqueue_fails"))
    finally:
        del KERNELS["enqueue_fails"]
    assert r["failure"]["class"] == "cuda/CUDA_ERROR_INVALID_VALUE"
    assert r["failure"]["message"].startswith("step 1 (region 1): launch 0")
    assert all(t["ok"] for t in r["trials"])  # checked runs passed; the fast path failed


def test_sticky_region_failure_is_fatal(make_ev):
    ev, lib = make_ev()
    reply, action = ev.handle(9, "evaluate", {"candidate": {"program": mixed_program("sticky")}})
    assert action == "fatal" and reply["fatal"] is True
    assert reply["error"]["class"] == "cuda/CUDA_ERROR_ILLEGAL_ADDRESS"
    assert reply["error"]["message"].startswith("step 1 (region 1): ")
    assert lib.freed == []


# -- random ops, mutable buffers

def test_training_dropout_program_matches_under_restored_rng(make_ev, ev_module):
    ev, _ = make_ev(DROPOUT_TASK)
    assert ev.task.model.training is True
    r = evaluate(ev, library_program(ev))
    assert r["correct"] is True, r["failure"]
    assert all(t["max_abs"] == 0.0 for t in r["trials"])
    program = ev_module.program.parse_program(library_program(ev), ev.task.profile, "fp32")
    assert ev_module.program.random_nodes(program, ev.task.profile["graph"], ev.task.traced,
                                          ev.task.model) == ["drop"]


def test_dropout_in_eval_mode_is_not_random(make_ev, ev_module):
    ev, _ = make_ev(DROPOUT_TASK)
    ev.task.model.eval()
    program = ev_module.program.parse_program(library_program(ev), ev.task.profile, "fp32")
    assert ev_module.program.random_nodes(program, ev.task.profile["graph"], ev.task.traced,
                                          ev.task.model) == []


def test_random_functions_by_name(ev_module):
    nodes = [{"name": "a", "op": "call_function", "target": "torch.nn.functional.dropout",
              "args": [{"node": "x"}, 0.5], "kwargs": {}},
             {"name": "b", "op": "call_function", "target": "torch.nn.functional.dropout",
              "args": [{"node": "x"}], "kwargs": {"p": 0.5, "training": False}},
             {"name": "c", "op": "call_function", "target": "torch.randn_like", "args": [],
              "kwargs": {}},
             {"name": "d", "op": "call_function", "target": "torch.nn.functional.normalize",
              "args": [], "kwargs": {}},
             {"name": "e", "op": "call_function", "target": "torch.sum",
              "args": [{"node": "x"}, 1, True], "kwargs": {}},
             {"name": "f", "op": "call_function", "target": "torch.nn.functional.batch_norm",
              "args": [], "kwargs": {"training": True}},
             {"name": "g", "op": "call_function", "target": "aten.native_dropout.default",
              "args": [{"node": "x"}, 0.5, True], "kwargs": {}},
             {"name": "h", "op": "call_method", "target": "bernoulli_", "args": [],
              "kwargs": {}},
             {"name": "i", "op": "call_function", "target": "aten.dropout.default",
              "args": [{"node": "x"}, 0.0, True], "kwargs": {}},
             {"name": "j", "op": "call_function",
              "target": "aten._native_batch_norm_legit_functional.default",
              "args": [{"node": "x"}, None, None, {"node": "m"}, {"node": "v"}, True, 0.1,
                       1e-5], "kwargs": {}},
             {"name": "k", "op": "call_function",
              "target": "torch._C._nn.scaled_dot_product_attention",
              "args": [{"node": "q"}, {"node": "k"}, {"node": "v"}],
              "kwargs": {"dropout_p": 0.1}},
             {"name": "l", "op": "call_function",
              "target": "torch._C._nn.scaled_dot_product_attention",
              "args": [{"node": "q"}, {"node": "k"}, {"node": "v"}],
              "kwargs": {"dropout_p": 0.0}},
             {"name": "m", "op": "call_function", "target": "torch.nn.functional.rrelu",
              "args": [{"node": "x"}], "kwargs": {"training": True}},
             {"name": "n", "op": "call_function", "target": "torch.nn.functional.rrelu",
              "args": [{"node": "x"}], "kwargs": {}},
             {"name": "o", "op": "call_function", "target": "torch.nn.functional.dropout",
              "args": [{"node": "x"}], "kwargs": {"p": {"node": "p"}}}]
    program = ev_module.program.Program("auto", [], [], False)
    # Batch norm in training mode (f, j) is deterministic; p = 0 (i, l) draws nothing;
    # a probability given by a node (o) may be nonzero.
    assert ev_module.program.random_nodes(program, nodes, None, None) == [
        "a", "c", "g", "h", "k", "m", "o"]


def test_random_modules_need_a_nonzero_probability_and_training(ev_module):
    import torch.nn as nn
    program = ev_module.program.Program("auto", [], [], True)

    def whole(model):
        return ev_module.program.random_nodes(program, None, None, model)
    assert whole(nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))) == ["model"]
    assert whole(nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.0))) == []
    assert whole(nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)).eval()) == []
    assert whole(nn.Sequential(nn.BatchNorm1d(4), nn.ReLU())) == []
    assert whole(nn.MultiheadAttention(8, 2, dropout=0.1)) == ["model"]
    assert whole(nn.MultiheadAttention(8, 2, dropout=0.0)) == []
    assert whole(nn.Sequential(nn.RReLU())) == ["model"]
    # A functional dropout in forward shows in the traced graph, not in the modules.
    drop = [{"name": "d", "op": "call_function", "target": "torch.nn.functional.dropout",
             "args": [{"node": "x"}, 0.5, True], "kwargs": {}}]
    assert ev_module.program.random_nodes(program, drop, None, nn.Linear(4, 4)) == ["model"]
    drop[0]["args"][1] = 0.0
    assert ev_module.program.random_nodes(program, drop, None, nn.Linear(4, 4)) == []


def test_batchnorm_mutable_buffers(make_ev):
    ev, _ = make_ev(BATCHNORM_TASK)
    assert ev.task.profile["mutable_buffers"] == [
        "param:bn.running_mean", "param:bn.running_var", "param:bn.num_batches_tracked"]
    r = evaluate(ev, library_program(ev))
    assert r["correct"] is True, r["failure"]
    assert r["checks"]["inputs_unchanged"] is True


def test_eval_mode_batchnorm_has_no_mutable_buffers(ev_module):
    ev = ev_module.Evaluator("cpu")
    ev.load_task({"source": BATCHNORM_TASK})
    ev.task.model.eval()
    assert ev.profile({})["mutable_buffers"] == []


# -- profile FLOPs

def test_linear_node_flops_by_hand(make_ev):
    ev, _ = make_ev()
    flops = {n["name"]: n["flops"] for n in ev.task.profile["graph"]}
    # x [16, 64] @ W^T [64, 32]: 2 * M * N * K
    assert flops["fc"] == 2 * 16 * 32 * 64 == 65536
    assert flops["relu"] == 0 and flops["softmax"] == 0 and flops["x"] == 0
    assert flops["output"] == 0
    assert sum(flops.values()) == ev.task.profile["flops"]


def test_export_graph_node_flops(make_ev):
    ev, _ = make_ev(EXPORT_TASK)
    flops = {n["name"]: n["flops"] for n in ev.task.profile["graph"]}
    linear = [n["name"] for n in call_nodes(ev) if "linear" in n["target"]]
    assert len(linear) == 1 and flops[linear[0]] == 2 * 16 * 32 * 64
    assert all("flops" in n for n in ev.task.profile["graph"])


def test_traced_graph_is_kept_and_rebuilt_the_same(ev_module):
    def build():
        ev = ev_module.Evaluator("cpu")
        ev.load_task({"source": THREE_OPS_TASK})
        ev.profile({})
        return ev
    a, b = build(), build()
    assert a.task.traced.kind == "fx"
    assert a.task.traced.order == b.task.traced.order == [
        n["name"] for n in a.task.profile["graph"]]
    assert a.task.traced.module.fc is a.task.model.fc  # shares the model's parameters


# -- graph order, with a host-side stand-in for the CUDA graph

class HostGraph:
    """ProgramGraph's interface on the CPU: "capture" runs the program once in fast
    order; a replay runs it again on the static inputs and copies the results into the
    static outputs, as a CUDA graph writes the same buffers on every replay."""

    replays = 0

    def __init__(self, runner, seed_inputs):
        if getattr(HostGraph, "fail", None):
            raise RuntimeError(HostGraph.fail)
        self.runner = runner
        self.static_inputs = [t.clone() if isinstance(t, torch.Tensor) else t
                              for t in seed_inputs]
        self.ws = runner.new_workspace()
        self.outputs = [o.clone() for o in runner.run(self.static_inputs, self.ws, checked=False)]
        self.graph = self

    def load(self, inputs):
        for s, t in zip(self.static_inputs, inputs):
            if isinstance(s, torch.Tensor):
                s.copy_(t)

    def replay(self, inputs=None):
        HostGraph.replays += 1
        if inputs is not None:
            self.load(inputs)
        for o, new in zip(self.outputs, self.runner.run(self.static_inputs, self.ws,
                                                          checked=False)):
            o.copy_(new)

    def release(self):
        self.outputs = self.ws = self.static_inputs = None


@pytest.fixture
def host_graph(ev_module, monkeypatch):
    monkeypatch.setattr(ev_module.ProgramRun, "graph_class", HostGraph)
    monkeypatch.setattr(ev_module.ProgramRun, "graph_needs_cuda", False)
    HostGraph.replays = 0
    HostGraph.fail = None
    return HostGraph


def test_graph_true_replays_every_trial_on_fresh_inputs(make_ev, host_graph):
    ev, lib = make_ev()
    program = mixed_program()
    program["graph"] = "true"
    r = evaluate(ev, program)
    assert r["correct"] is True, r["failure"]
    assert all(t["ok"] and t["replay"]["ok"] for t in r["trials"])
    assert r["robust"]["replay"]["ok"] is True
    assert len({t["seed"] for t in r["trials"]}) == 5
    g = r["graph"]
    assert (g["mode"], g["captured"], g["used"], g["reason"]) == ("true", True, "graph", None)
    assert g["stream_ms"] is None and g["graph_ms"] == r["time"]["median_ms"]
    assert host_graph.replays >= 6 + 3 + 1  # trials, timed reps, the last re-check


def test_graph_auto_times_both_orders(make_ev, host_graph):
    ev, _ = make_ev()
    r = evaluate(ev, mixed_program())
    g = r["graph"]
    assert r["correct"] is True and g["captured"] is True
    assert g["stream_ms"] is not None and g["graph_ms"] is not None
    assert g["used"] == ("graph" if g["graph_ms"] < g["stream_ms"] else "stream")
    assert r["time"]["median_ms"] == min(g["graph_ms"], g["stream_ms"])


def test_stale_region_is_caught_in_graph_order(make_ev, host_graph):
    ev, _ = make_ev()
    program = mixed_program("stateful_relu")
    program["graph"] = "true"
    r = evaluate(ev, program)
    assert r["graph"]["used"] == "graph"
    assert all(t["replay"]["ok"] for t in r["trials"])  # each replay starts from reset state
    assert r["failure"]["class"] == "check/repeat_inconsistent"
    assert "with new input values in the same buffers" in r["failure"]["message"]


def test_region_wrong_only_in_graph_order_is_caught(make_ev, host_graph, monkeypatch):
    ev, lib = make_ev()

    def k_wrong_when_enqueued(t, lib_):
        # (softmax follows: a shift would not show, a scale does)
        t["node:relu"].copy_(torch.relu(t["node:fc"]) * (2.0 if lib_.calls[-1] == "enqueue"
                                                          else 1.0))
    monkeypatch.setitem(KERNELS, "wrong_when_enqueued", k_wrong_when_enqueued)
    program = mixed_program("wrong_when_enqueued")
    program["graph"] = "true"
    r = evaluate(ev, program)
    assert r["failure"]["class"] == "correctness/mismatch"
    assert r["failure"]["message"].startswith("graph replay: output:0")
    assert r["trials"][0]["ok"] is False and r["trials"][0]["replay"]["ok"] is False


def test_random_program_stays_in_stream_order(make_ev, host_graph):
    ev, _ = make_ev(DROPOUT_TASK)
    r = evaluate(ev, library_program(ev, graph="true"))
    assert r["correct"] is True, r["failure"]
    g = r["graph"]
    assert g["captured"] is False and g["used"] == "stream"
    assert g["reason"] == "random ops (drop) would draw new numbers on every replay: stream order"
    assert "replay" not in r["trials"][0]


def test_capture_failure_falls_back_to_stream_order(make_ev, host_graph):
    ev, _ = make_ev()
    host_graph.fail = "operation not permitted when stream is capturing"
    r = evaluate(ev, mixed_program())
    assert r["correct"] is True
    assert r["graph"]["reason"] == ("capture failed: RuntimeError: operation not permitted "
                                    "when stream is capturing: stream order")
    assert r["graph"]["used"] == "stream"


def test_graph_out_of_memory_reruns_in_stream_order(make_ev, host_graph, ev_module,
                                                    monkeypatch):
    """A graph replay that runs out of device memory: the evaluate runs again in stream
    order (graph "false" for the rerun), correct, and its graph record keeps the mode
    asked for and says why nothing was captured."""
    monkeypatch.setattr(ev_module.evaluator, "OOM_RETRY_WAITS_S", (0.0, 0.0))

    def no_memory(self, inputs=None):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 5.70 GiB")
    monkeypatch.setattr(host_graph, "replay", no_memory)
    ev, _ = make_ev()
    program = mixed_program()
    program["graph"] = "true"
    r = evaluate(ev, program)
    assert r["correct"] is True, r["failure"]
    assert r["graph"] == {"mode": "true", "captured": False, "used": "stream",
                          "reason": "out of device memory with the graph captured: rerun in "
                                    "stream order",
                          "stream_ms": r["time"]["median_ms"], "graph_ms": None}
    assert program["graph"] == "true"  # the caller's candidate is left as it was


def test_in_stream_order_changes_only_a_program_with_a_graph(ev_module):
    lean = ev_module.evaluator.in_stream_order
    kernel = {"candidate": {"source": "k", "plan": {}}}
    assert lean(kernel) is kernel
    off = {"candidate": {"program": {"graph": "false", "steps": []}}}
    assert lean(off) is off
    off_bool = {"candidate": {"program": {"graph": False, "steps": []}}}
    assert lean(off_bool) is off_bool
    malformed = {"candidate": {"program": {"graph": ["auto"], "steps": []}}}
    assert lean(malformed) is malformed
    auto = {"candidate": {"program": {"steps": [1]}}, "x": 1}
    assert lean(auto) == {"candidate": {"program": {"steps": [1], "graph": "false"}}, "x": 1}
    assert auto == {"candidate": {"program": {"steps": [1]}}, "x": 1}
