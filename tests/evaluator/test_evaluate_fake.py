# The evaluate rules (trials, poisoned outputs, input checks, accuracy budget, degenerate criterion, repeat checks, floors, sticky errors) driven in-process on CPU tensors with a fake GPU library whose "kernels" are Python functions.
import math

import pytest
import torch
import torch.nn.functional as F

GEMM_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = nn.Linear(k, n)

    def forward(self, x):
        return torch.relu(self.fc(x))

def get_inputs():
    return [torch.rand(16, 64)]

def get_init_inputs():
    return [64, 32]
"""

TINY_OUTPUT_TASK = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return x * 1e-6
def get_inputs():
    return [torch.rand(8, 8)]
def get_init_inputs():
    return []
"""

ARGMAX_TASK = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return torch.argmax(x, dim=1)
def get_inputs():
    return [torch.rand(8, 10)]
def get_init_inputs():
    return []
"""

TWO_OUTPUT_TASK = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return x + 1, x * 2
def get_inputs():
    return [torch.rand(5)]
def get_init_inputs():
    return []
"""

# A GEMM whose signed outputs are summed per row (KernelBench level2 14_Gemm_Divide_Sum_
# Scaling in small): rows whose sum cancels to near zero leave two fp32 summation orders
# further apart than atol + rtol * |ref|.
ROWSUM_TASK = """
import torch
class Model(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(n, n))
    def forward(self, x):
        return (torch.matmul(x, self.weight.T) / 2).sum(dim=1, keepdim=True) * 1.5
def get_inputs():
    return [torch.rand(1024, 1024)]
def get_init_inputs():
    return [1024]
"""


def gemm_ref(t):
    return torch.relu(F.linear(t["input:0"], t["param:fc.weight"], t["param:fc.bias"]))


def k_correct(t, lib):
    t["output:0"].copy_(gemm_ref(t))


def k_float64(t, lib):
    x, w, b = (t[n].double() for n in ("input:0", "param:fc.weight", "param:fc.bias"))
    t["output:0"].copy_(torch.relu(F.linear(x, w, b)))


def k_nothing(t, lib):
    pass


def k_half(t, lib):
    t["output:0"][:8].copy_(gemm_ref(t)[:8])


def k_nan(t, lib):
    k_correct(t, lib)
    t["output:0"][3, 4] = float("nan")


def k_wrong(t, lib):
    t["output:0"].copy_(gemm_ref(t) + 0.1)


def k_modifies_input(t, lib):
    k_correct(t, lib)
    t["input:0"][0, 0] += 1.0


def k_modifies_weight(t, lib):
    k_correct(t, lib)
    t["param:fc.weight"].mul_(1.0)  # same values: must not count
    t["param:fc.bias"][0] = 123.0


def k_noisy(t, lib):
    # a precision downgrade that allclose(1e-4, 1e-4) lets through: 5e-5 relative error
    y = gemm_ref(t)
    sign = torch.ones_like(y)
    sign.view(-1)[::2] = -1
    t["output:0"].copy_(y * (1 + 5e-5 * sign))


def k_abs_inputs(t, lib):
    x = t["input:0"].abs()
    t["output:0"].copy_(torch.relu(F.linear(x, t["param:fc.weight"], t["param:fc.bias"])))


def k_differs_when_timed(t, lib):
    if lib.timing:
        t["output:0"].zero_()
    else:
        k_correct(t, lib)


_first = {}


def k_first_call_cache(t, lib):
    if "y" not in _first:
        _first["y"] = gemm_ref(t).clone()
    t["output:0"].copy_(_first["y"])


_by_ptr = {}


def k_pointer_cache(t, lib):
    key = t["input:0"].data_ptr()
    if key not in _by_ptr:
        _by_ptr[key] = gemm_ref(t).clone()
    t["output:0"].copy_(_by_ptr[key])


def k_module_state(t, lib):
    """Computes on a fresh module, then skips: what a __device__ 'done' flag does."""
    state = getattr(lib, "module_state", {})
    if state.get("done"):
        return
    t["output:0"].copy_(gemm_ref(t))
    state["done"] = True
    lib.module_state = state


def k_tiny_correct(t, lib):
    t["output:0"].copy_(t["input:0"] * 1e-6)


def k_zeros(t, lib):
    t["output:0"].zero_()


def k_tiny_off_by_10_percent(t, lib):
    t["output:0"].copy_(t["input:0"] * 1.1e-6)


def rowsum(t, dtype):
    x, w = t["input:0"].to(dtype), t["param:weight"].to(dtype)
    return (torch.matmul(x, w.T) / 2).sum(dim=1, keepdim=True) * 1.5


def k_rowsum_other_order(t, lib):
    # Exact (float64) except the row with the smallest |sum|, moved by 4x eager's own
    # largest error: over atol + rtol * |ref| there (that sum is near zero), yet within
    # the budget of 8x eager's error against float64.
    y = rowsum(t, torch.float64)
    eager_err = float((rowsum(t, torch.float32).double() - y).abs().max())
    i = int(y.abs().argmin())
    y[i] += 4 * eager_err
    t["output:0"].copy_(y)


def k_rowsum_off(t, lib):
    y = rowsum(t, torch.float64)
    y[int(y.abs().argmin())] += 1.0
    t["output:0"].copy_(y)


def k_argmax(t, lib):
    t["output:0"].copy_(torch.argmax(t["input:0"], dim=1))


def k_first_of_two(t, lib):
    t["output:0"].copy_(t["input:0"] + 1)


KERNELS = {name[2:]: fn for name, fn in globals().items() if name.startswith("k_")}


@pytest.fixture
def make_ev(ev_module, fake_lib):
    def make(src=GEMM_TASK, median_ms=1.0, **load):
        lib = fake_lib(KERNELS, median_ms=median_ms)
        ev = ev_module.Evaluator("cpu", lib=lib, allow_cpu_evaluate=True)
        ev.load_task({"source": src, "name": "t", **load})
        ev.profile({})
        return ev, lib
    return make


def evaluate(ev, kernel):
    reply, action = ev.handle(9, "evaluate", {"candidate": {"source": kernel, "options": [],
                                                             "plan": {"launches": []}}})
    return reply, action


def result_of(ev, kernel):
    reply, action = evaluate(ev, kernel)
    assert action is None
    assert reply["ok"] is True, reply
    return reply["result"]


def test_correct_kernel(make_ev):
    ev, lib = make_ev()
    r = result_of(ev, "correct")
    assert r["failure"] is None and r["correct"] is True
    assert [t["seed"] for t in r["trials"]] == [42, 43, 44, 45, 46]
    assert all(t["ok"] and t["max_abs"] <= 1e-6 for t in r["trials"])
    assert r["robust"]["seed"] == 47 and r["robust"]["ok"] is True
    assert r["checks"] == {"inputs_unchanged": True, "outputs_written": True,
                           "repeat_consistent": True, "above_floor": None}
    assert r["compile"] == {"ok": True, "ms": 2.5, "log": "", "cache": "miss"}
    assert r["time"] == {"median_ms": 1.0, "mean_ms": 1.01, "reps": 10, "rse": 0.004}
    # CPU profile: no eager time and no floors, so no speed-up or floor fraction
    assert r["speedup"] == {"eager": None, "compile": None}
    assert r["floor_fraction"] is None
    acc = r["accuracy"]["outputs"][0]
    assert acc["candidate_err"] == acc["eager_err"] > 0
    assert acc["max_ref"] > 0
    assert acc["budget"] == 8 * acc["eager_err"] + 1e-6 * acc["max_ref"]
    # 5 trials + robust + the re-run with new values, then 4 timed reps
    assert lib.calls == ["prepare"] + ["run"] * 6 + ["time"] + ["run"] * 4 + ["run_keep_state",
                                                                           "free"]
    assert lib.freed == [7]


def test_prepare_gets_the_tensor_specs_and_timing_parameters(make_ev):
    ev, lib = make_ev()
    result_of(ev, "correct")
    cand, tensors = lib.prepared[0]
    assert cand == {"source": "correct", "options": [], "plan": {"launches": []}}
    assert tensors == {"precision": "fp32", "tensors": [
        {"name": "input:0", "dtype": "float32", "numel": 1024, "bytes": 4096},
        {"name": "param:fc.weight", "dtype": "float32", "numel": 2048, "bytes": 8192},
        {"name": "param:fc.bias", "dtype": "float32", "numel": 32, "bytes": 128},
        {"name": "output:0", "dtype": "float32", "numel": 512, "bytes": 2048}]}
    assert lib.last_timing == {"warmup": 3, "min_reps": 10, "max_reps": 200,
                               "target_rse": 0.01, "flush_bytes": 268435456}


def test_trial_mismatch_within_float64_budget_passes(make_ev):
    ev, _ = make_ev(ROWSUM_TASK)
    r = result_of(ev, "rowsum_other_order")
    assert r["correct"] is True and r["failure"] is None, (r["failure"], r.get("trial_accuracy"))
    for trial in r["trials"]:
        assert trial["ok"] is True
        assert trial["judged_by"] == "float64 accuracy budget"
        assert trial["max_abs"] > 1e-4  # over atol: allclose alone would have failed it
    acc = r["trial_accuracy"]["outputs"][0]
    assert 0 < acc["candidate_err"] <= acc["budget"]
    assert acc["budget"] == 8 * acc["eager_err"] + 1e-6 * acc["max_ref"]
    # the re-checks on new input values needed the budget too, and say so
    assert r["recheck_accuracy"]["judged_by"] == "float64 accuracy budget"
    assert r["recheck_accuracy"]["outputs"][0]["candidate_err"] > 0


def test_float64_budget_out_of_memory_is_not_a_mismatch(make_ev, ev_module, monkeypatch):
    """A candidate that needs the float64 budget, when the float64 reference runs out of
    memory every time: the evaluate runs 3 times (the first and the 2 reruns of
    OOM_RETRY_WAITS_S), and the reply is evaluate/out_of_memory (the machine's
    failure), not correctness/mismatch (the candidate's)."""
    monkeypatch.setattr(ev_module.evaluator, "OOM_RETRY_WAITS_S", (0.0, 0.0))
    ev, _ = make_ev(ROWSUM_TASK)
    calls = []

    def no_memory(self):
        calls.append(1)
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
    monkeypatch.setattr(torch.nn.Module, "double", no_memory)
    reply, action = evaluate(ev, "rowsum_other_order")
    assert action is None
    assert reply["ok"] is False
    assert reply["error"]["class"] == "evaluate/out_of_memory"
    assert "8.00 GiB" in reply["error"]["message"]
    assert len(calls) == 3


def test_evaluate_out_of_memory_once_runs_again(make_ev, ev_module, monkeypatch):
    """Memory that another worker slot held at the first try is free at the rerun: the
    reply is the candidate's own verdict, correct."""
    monkeypatch.setattr(ev_module.evaluator, "OOM_RETRY_WAITS_S", (0.0, 0.0))
    ev, _ = make_ev(ROWSUM_TASK)
    real_double, calls = torch.nn.Module.double, []

    def short_of_memory_once(self):
        calls.append(1)
        if len(calls) == 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
        return real_double(self)
    monkeypatch.setattr(torch.nn.Module, "double", short_of_memory_once)
    runs, handle_once = [], ev._handle_once
    monkeypatch.setattr(ev, "_handle_once", lambda *a: runs.append(1) or handle_once(*a))
    r = result_of(ev, "rowsum_other_order")
    assert r["correct"] is True and r["failure"] is None
    assert len(runs) == 2


def test_last_out_of_memory_rerun_takes_the_whole_device(make_ev, ev_module, monkeypatch,
                                                         tmp_path, capsys):
    """A slot whose share (mem_fraction 0.3, as with 3 slots) is too small for the task:
    the first run and the first rerun run out of memory under that cap; the last rerun
    holds the device lock from its start and runs under WHOLE_DEVICE_FRACTION (0.9),
    passes, and the cap is the slot's share again afterwards."""
    monkeypatch.setattr(ev_module.evaluator, "OOM_RETRY_WAITS_S", (0.0, 0.0))
    ev, _ = make_ev(ROWSUM_TASK)
    ev.gpu = ev_module.DeviceLock(str(tmp_path / "gpu.lock"))
    ev.mem_fraction = ev.memory_cap = 0.3
    real_double, caps = torch.nn.Module.double, []

    def fits_only_the_whole_device(self):
        caps.append(ev.memory_cap)
        if ev.memory_cap < 0.9:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 16.00 GiB")
        return real_double(self)
    monkeypatch.setattr(torch.nn.Module, "double", fits_only_the_whole_device)
    lock_depths, handle_once = [], ev._handle_once
    monkeypatch.setattr(ev, "_handle_once",
                        lambda *a: lock_depths.append(ev.gpu.depth) or handle_once(*a))
    r = result_of(ev, "rowsum_other_order")
    assert r["correct"] is True and r["failure"] is None
    # the first two runs stop at their first float64 reference; the last one runs
    # every float64 check it needs (a trial's and the re-check's) under the lifted cap
    assert caps[:2] == [0.3, 0.3] and len(caps) > 2 and set(caps[2:]) == {0.9}
    assert lock_depths == [0, 0, 1]
    assert ev.memory_cap == 0.3 and ev.gpu.depth == 0
    # the evaluator's log says which rerun fit, so a GPU run shows the whole-device one
    assert capsys.readouterr().err.splitlines()[-2:] == [
        "evaluator: evaluate ran out of device memory: rerun 1 of 2 ran out again",
        "evaluator: evaluate ran out of device memory: rerun 2 of 2 (whole device) fit"]
    # the task's next evaluate starts where the last one fit: one run, the lock held
    # from its start, every float64 check under the lifted cap, no rerun logged
    caps.clear(), lock_depths.clear()
    r = result_of(ev, "rowsum_other_order")
    assert r["correct"] is True and r["failure"] is None
    assert lock_depths == [1] and caps and set(caps) == {0.9}
    assert ev.memory_cap == 0.3 and ev.gpu.depth == 0
    assert capsys.readouterr().err == ""
    # loading a task forgets it: the next evaluate tries the slot's share first again
    ev.load_task({"source": ROWSUM_TASK, "name": "t"})
    ev.profile({})
    caps.clear(), lock_depths.clear()
    result_of(ev, "rowsum_other_order")
    assert lock_depths == [0, 0, 1] and caps[:2] == [0.3, 0.3]


def test_ran_out_of_memory_reads_the_error_and_the_failure_class(ev_module):
    ran = ev_module.evaluator.ran_out_of_memory
    assert ran({"ok": False, "error": {"class": "evaluate/out_of_memory"}}) is True
    assert ran({"ok": True, "result": {"failure": {"class": "library/out_of_memory"}}}) is True
    assert ran({"ok": True, "result": {"failure": {"class": "correctness/mismatch"}}}) is False
    assert ran({"ok": True, "result": {"failure": None}}) is False
    assert ran({"ok": False, "error": {"class": "load/bad_source"}}) is False


def test_trial_mismatch_over_float64_budget_fails(make_ev):
    ev, _ = make_ev(ROWSUM_TASK)
    r = result_of(ev, "rowsum_off")
    assert r["correct"] is False
    assert r["failure"]["class"] == "correctness/mismatch"
    assert r["trials"][0]["ok"] is False and "judged_by" not in r["trials"][0]


def test_float64_kernel_is_within_budget(make_ev):
    ev, _ = make_ev()
    r = result_of(ev, "float64")
    assert r["correct"] is True
    acc = r["accuracy"]["outputs"][0]
    assert acc["candidate_err"] < acc["eager_err"]


@pytest.mark.parametrize("kernel,stage,cls,check", [
    ("nothing", "correctness", "correctness/unwritten_output", ("outputs_written", False)),
    ("half", "correctness", "correctness/unwritten_output", ("outputs_written", False)),
    ("nan", "correctness", "correctness/nan_output", None),
    ("wrong", "correctness", "correctness/mismatch", None),
    ("modifies_input", "check", "check/inputs_modified", ("inputs_unchanged", False)),
    ("modifies_weight", "check", "check/inputs_modified", ("inputs_unchanged", False)),
    ("noisy", "correctness", "correctness/accuracy_budget", None),
    ("abs_inputs", "correctness", "correctness/robust_mismatch", None),
    ("differs_when_timed", "check", "check/repeat_inconsistent", ("repeat_consistent", False)),
    ("first_call_cache", "correctness", "correctness/mismatch", None),
])
def test_bad_kernels_are_classified(make_ev, kernel, stage, cls, check):
    _first.clear()
    ev, lib = make_ev()
    r = result_of(ev, kernel)
    assert r["correct"] is False
    assert (r["failure"]["stage"], r["failure"]["class"]) == (stage, cls), r["failure"]
    if check:
        assert r["checks"][check[0]] is check[1]
    assert lib.freed == [7]


def test_messages_name_what_failed(make_ev):
    ev, _ = make_ev()
    r = result_of(ev, "half")
    assert r["failure"]["message"] == ("output:0: partly unwritten (256 of 512 elements still "
                                       "hold the poison value)")
    r = result_of(ev, "modifies_weight")
    assert r["failure"]["message"] == "the candidate modified param:fc.bias"
    r = result_of(ev, "noisy")
    assert "exceeds the budget" in r["failure"]["message"]
    assert r["trials"][0]["ok"] is True  # allclose passed: only the budget caught it


def test_first_failing_trial_stops_the_trials(make_ev):
    _first.clear()
    ev, _ = make_ev()
    r = result_of(ev, "first_call_cache")
    assert [t["ok"] for t in r["trials"]] == [True, False]
    assert r["robust"] is None and r["time"] is None


def test_pointer_cache_is_caught(make_ev):
    _by_ptr.clear()
    ev, _ = make_ev()
    r = result_of(ev, "pointer_cache")
    # a reused address trips a trial (the robust one included); otherwise the re-run with
    # new values in the same buffers does
    assert r["failure"]["class"] in ("correctness/mismatch", "correctness/robust_mismatch",
                                     "check/repeat_inconsistent")


def test_state_kept_between_calls_is_caught(make_ev):
    ev, lib = make_ev()
    r = result_of(ev, "module_state")
    # Every trial and timing rep starts from reset state, so only the final re-run,
    # which keeps the state the timing loop left, exposes the skipped work.
    assert r["failure"]["class"] == "check/repeat_inconsistent"
    assert lib.calls.count("run_keep_state") == 1


def test_inputs_checked_by_fingerprint_when_too_large_to_copy(make_ev, ev_module, monkeypatch):
    monkeypatch.setattr(ev_module.CandidateRun, "_clone_budget", lambda self: 0)
    ev, _ = make_ev()
    assert result_of(ev, "correct")["correct"] is True
    assert result_of(ev, "modifies_input")["failure"]["class"] == "check/inputs_modified"


def test_speedups_and_floors(make_ev):
    ev, _ = make_ev(median_ms=2.0)
    ev.task.profile.update(eager_ms=3.0, compile_ms=2.5, floor_ms=0.5, impossible_ms=0.25)
    r = result_of(ev, "correct")
    assert r["correct"] is True
    assert r["speedup"] == {"eager": 1.5, "compile": 1.25}
    assert r["floor_fraction"] == 0.25
    assert r["checks"]["above_floor"] is True


def test_below_impossible_floor(make_ev):
    ev, _ = make_ev(median_ms=0.1)
    ev.task.profile.update(eager_ms=3.0, compile_ms=None, floor_ms=0.5, impossible_ms=0.25)
    r = result_of(ev, "correct")
    assert r["correct"] is False
    assert r["failure"] == {"stage": "check", "class": "check/below_floor",
                            "message": "median 0.1 ms is below the impossible floor 0.25 ms"}
    assert r["checks"]["above_floor"] is False
    assert r["speedup"] == {"eager": 30.0, "compile": None}


def test_compile_failure(make_ev):
    ev, lib = make_ev()
    r = result_of(ev, "compile_error")
    assert r["compile"]["ok"] is False
    assert r["failure"]["class"] == "compile/syntax_error"
    assert r["correct"] is False and r["trials"] == []
    assert lib.calls == ["prepare"]


def test_plan_failure_at_launch(make_ev):
    ev, lib = make_ev()
    r = result_of(ev, "bad_plan")
    assert r["failure"] == {"stage": "launch", "class": "plan/block_too_large",
                            "message": "launch 0: block of 2048 threads"}
    assert lib.freed == [7]


def test_sticky_error_is_fatal(make_ev):
    ev, lib = make_ev()
    reply, action = evaluate(ev, "sticky")
    assert action == "fatal"
    assert reply["ok"] is False and reply["fatal"] is True
    assert reply["error"]["stage"] == "launch"
    assert reply["error"]["class"] == "cuda/CUDA_ERROR_ILLEGAL_ADDRESS"
    assert reply["result"]["failure"]["class"] == "cuda/CUDA_ERROR_ILLEGAL_ADDRESS"
    assert reply["result"]["compile"]["ok"] is True
    assert lib.freed == []  # the context is gone; nothing is touched after the fault


def test_no_library(ev_module):
    ev = ev_module.Evaluator("cpu", lib=None, lib_error="cannot load x.so",
                             allow_cpu_evaluate=True)
    ev.load_task({"source": GEMM_TASK})
    reply, _ = evaluate(ev, "correct")
    assert reply["ok"] is False
    assert reply["error"]["class"] == "load/gpu_library"
    assert "cannot load x.so" in reply["error"]["message"]


def test_evaluate_needs_a_candidate(make_ev):
    ev, _ = make_ev()
    reply, _ = ev.handle(3, "evaluate", {"candidate": {"source": "x"}})
    assert reply["error"]["class"] == "protocol/bad_argument"


def test_degenerate_task_needs_relative_accuracy(make_ev):
    ev, _ = make_ev(TINY_OUTPUT_TASK)
    assert ev.task.profile["degenerate"] is True
    assert result_of(ev, "tiny_correct")["correct"] is True
    r = result_of(ev, "zeros")
    # zeros pass allclose (every |y| <= 1e-6 < atol) but not the relative criterion
    assert r["failure"]["class"] == "correctness/relative_error"
    assert r["trials"][0]["rel_l2"] == 1.0
    r = result_of(ev, "tiny_off_by_10_percent")
    assert r["failure"]["class"] == "correctness/relative_error"
    assert r["trials"][0]["rel_l2"] == pytest.approx(0.1, rel=1e-4)


def test_gemm_task_is_not_degenerate(make_ev):
    ev, _ = make_ev()
    assert ev.task.profile["degenerate"] is False


def test_integer_outputs(make_ev):
    ev, _ = make_ev(ARGMAX_TASK)
    assert ev.task.profile["outputs"][0]["dtype"] == "int64"
    r = result_of(ev, "argmax")
    assert r["correct"] is True and r["accuracy"]["outputs"] == []
    r = result_of(ev, "zeros")
    assert r["failure"]["class"] == "correctness/mismatch"


def test_second_output_unwritten(make_ev):
    ev, _ = make_ev(TWO_OUTPUT_TASK)
    r = result_of(ev, "first_of_two")
    assert r["failure"]["class"] == "correctness/unwritten_output"
    assert r["failure"]["message"].startswith("output:1: never written")


def test_accuracy_factor_is_configurable(make_ev):
    ev, _ = make_ev(accuracy_factor=1e6)
    assert result_of(ev, "noisy")["correct"] is True


def test_no_accuracy_budget_for_tf32_tasks(make_ev):
    ev, _ = make_ev(precision="tf32")
    r = result_of(ev, "noisy")
    assert r["correct"] is True and r["accuracy"] is None


def test_tolerance_from_load_task(make_ev):
    ev, _ = make_ev(tolerance={"atol": 0.2, "rtol": 0.0})
    assert result_of(ev, "wrong")["failure"]["class"] != "correctness/mismatch"


def test_trials_from_load_task(make_ev):
    ev, _ = make_ev(trials=2, seed=7)
    r = result_of(ev, "correct")
    assert [t["seed"] for t in r["trials"]] == [7, 8] and r["robust"]["seed"] == 9


def test_loading_is_seeded(ev_module):
    def build(seed):
        ev = ev_module.Evaluator("cpu")
        ev.load_task({"source": GEMM_TASK, "seed": seed})
        return ev.task.model.fc.weight.detach().clone(), ev.make_inputs(ev.task, seed)[0]

    w1, x1 = build(3)
    w2, x2 = build(3)
    w3, x3 = build(4)
    assert torch.equal(w1, w2) and torch.equal(x1, x2)
    assert not torch.equal(w1, w3) and not torch.equal(x1, x3)


def test_robust_inputs_are_randn(ev_module):
    ev = ev_module.Evaluator("cpu")
    ev.load_task({"source": GEMM_TASK})
    normal = ev.make_inputs(ev.task, 5)[0]
    robust = ev.make_inputs(ev.task, 5, robust=True)[0]
    assert normal.min() >= 0 and robust.min() < 0
    assert robust.shape == normal.shape and robust.dtype == normal.dtype
    assert math.isclose(float(robust.mean()), 0.0, abs_tol=0.2)
