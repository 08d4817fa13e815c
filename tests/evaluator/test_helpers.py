# Unit tests of the evaluator's pure helpers: floor math, the timing stopping rule, signatures, graph encoding, output comparison, input guards and the stage list.
import ast
import io
import json
import math
import operator
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F


# -- floors, with the numbers worked out by hand

def test_fp32_simt_peak_h200_by_hand(ev_module):
    # 132 SMs x 128 FMA lanes x 2 FLOP x 1.98 GHz
    assert ev_module.fp32_simt_peak(132, 1.98e9, (9, 0)) == 132 * 128 * 2 * 1.98e9
    assert ev_module.fp32_simt_peak(132, 1.98e9, (9, 0)) == pytest.approx(66.90816e12, rel=1e-15)


def test_fp32_simt_peak_a100_has_64_lanes(ev_module):
    assert ev_module.fp32_simt_peak(108, 1.41e9, (8, 0)) == pytest.approx(19.49184e12, rel=1e-15)


def test_fp32_simt_peak_falls_back_to_h200_figure(ev_module):
    assert ev_module.fp32_simt_peak(None, 1.98e9, (9, 0)) == 66.9e12
    assert ev_module.fp32_simt_peak(132, 0, (9, 0)) == 66.9e12
    assert ev_module.fp32_simt_peak(132, 1.98e9, (42, 0)) == 66.9e12


def test_tensor_core_peak_h200(ev_module):
    # at the datasheet clock (1.83 GHz) the datasheet figures: 494.7 TF TF32, 989.4 TF BF16
    assert ev_module.tensor_core_peak("fp32", 132, 1.755e9, (9, 0)) == pytest.approx(
        494.71488e12, rel=1e-15)
    assert ev_module.tensor_core_peak("bf16", 132, 0, (9, 0)) == pytest.approx(
        989.42976e12, rel=1e-15)
    # a faster actual clock raises the peak, so impossible_ms stays a lower bound
    assert ev_module.tensor_core_peak("tf32", 132, 1.98e9, (9, 0)) == pytest.approx(
        132 * 2048 * 1.98e9, rel=1e-15)


def test_tensor_core_peak_fallback(ev_module):
    assert ev_module.tensor_core_peak("fp32", None, None, None) == 494.7e12
    assert ev_module.tensor_core_peak("bf16", 132, 1e9, (3, 0)) == 989.4e12


def test_floor_of_a_gemm_by_hand(ev_module):
    # level2/12_Gemm_Multiply_LeakyReLU: M=1024, K=N=8192
    flops = 2 * 1024 * 8192 * 8192
    min_bytes = 4 * (1024 * 8192 + 8192 * 8192 + 8192 + 1024 * 8192)
    assert flops == 137438953472 and min_bytes == 335577088
    got = ev_module.floor_time_ms(min_bytes, flops, 4.276411092985318e12, 66.9e12)
    assert got == pytest.approx(flops / 66.9e12 * 1e3, rel=1e-15)
    assert got == pytest.approx(2.054393923348281, rel=1e-12)


def test_floor_of_a_memory_bound_op_by_hand(ev_module):
    # level1/19_ReLU: read and write 4096 x 393216 fp32 once; 4.8 TB/s HBM
    min_bytes = 2 * 4096 * 393216 * 4
    assert ev_module.floor_time_ms(min_bytes, 0, 4.8e12, 494.7e12) == pytest.approx(
        2.68435456, rel=1e-15)


def test_floor_unknown_rate_is_none(ev_module):
    assert ev_module.floor_time_ms(100, 100, None, 1e12) is None
    assert ev_module.floor_time_ms(100, 100, 1e12, 0) is None


def test_floors_agree_with_the_h200_baseline(ev_module, kernelbench):
    base = json.loads((kernelbench / "h200-baseline.json").read_text())
    bw = base["copy_bw_TBps"] * 1e12
    checked = 0
    for name, t in base["tasks"].items():
        got = ev_module.floor_time_ms(t["min_bytes"], t["flops"], bw, 66.9e12)
        assert got == pytest.approx(t["floor_ms"], rel=1e-9), name
        checked += 1
    assert checked >= 60


def test_hbm_peak_from_props(ev_module):
    # 3.125 GHz memory clock, double data rate, 6144-bit bus = 4.8 TB/s
    assert ev_module.hbm_peak_from_props(3125000, 6144) == 4.8e12
    assert ev_module.hbm_peak_from_props(0, 6144) is None


# -- the timing stopping rule

def test_rse_by_hand(ev_module):
    assert ev_module.rse([1.0, 1.0, 1.0, 1.0]) == 0.0
    # mean 2.5, sample std sqrt(5/3), / sqrt(4) / 2.5
    assert ev_module.rse([1.0, 2.0, 3.0, 4.0]) == pytest.approx(
        math.sqrt(5 / 3) / 2 / 2.5, rel=1e-12)
    assert ev_module.rse([1.0]) == math.inf
    assert ev_module.rse([]) == math.inf


def test_stop_needs_min_reps(ev_module):
    stop = ev_module.timing_should_stop
    assert not stop([1.0] * 9, 10, 200, 0.01)
    assert stop([1.0] * 10, 10, 200, 0.01)


def test_stop_waits_for_low_rse_until_max_reps(ev_module):
    stop = ev_module.timing_should_stop
    noisy = [1.0, 2.0] * 100
    # rse of 10 alternating samples: sqrt(10*0.25/9)/sqrt(10)/1.5 = 0.111
    assert ev_module.rse(noisy[:10]) == pytest.approx(math.sqrt(2.5 / 9) / math.sqrt(10) / 1.5)
    assert not stop(noisy[:10], 10, 200, 0.01)
    assert not stop(noisy[:199], 10, 200, 0.01)
    assert stop(noisy[:200], 10, 200, 0.01)
    # 1% target: 1.0 and 1.02 alternating reach rse < 1% at once
    assert stop([1.0, 1.02] * 5, 10, 200, 0.01)


# -- accuracy criteria

def test_accuracy_budget_by_hand(ev_module):
    assert ev_module.accuracy_budget(2e-7, 100.0, 8.0) == pytest.approx(8 * 2e-7 + 1e-4)
    assert ev_module.accuracy_budget(0.0, 0.0, 8.0) == 0.0


def test_relative_l2(ev_module):
    ok = ev_module.relative_l2_ok
    assert ok(1e-5, 1.0, 1e-4, 10)
    assert not ok(2e-4, 1.0, 1e-4, 10)
    assert ok(0.0, 0.0, 1e-4, 10)           # all-zero reference, all-zero output
    assert not ok(1e-30, 0.0, 1e-4, 1)      # anything visible against a zero reference
    assert not ok(1.0, 1.0, 1e-4, 10)       # zeros for a nonzero reference
    assert not ok(math.inf, 1.0, 1e-4, 10)


def test_default_tolerance(ev_module):
    assert ev_module.default_tolerance("fp32") == {"atol": 1e-4, "rtol": 1e-4}
    assert ev_module.default_tolerance("tf32") == {"atol": 1e-2, "rtol": 1e-2}
    assert ev_module.default_tolerance("bf16") == {"atol": 1e-2, "rtol": 1e-2}


# -- text and JSON helpers

def test_cap_traceback_keeps_the_tail(ev_module):
    text = "x" * 20000 + "\nValueError: boom"
    capped = ev_module.cap_traceback(text)
    assert len(capped.encode()) <= 8192
    assert capped.endswith("ValueError: boom")
    assert capped.startswith("...(traceback truncated)...")
    assert ev_module.cap_traceback("short") == "short"


def test_json_safe_and_encode_line(ev_module):
    obj = {"a": float("nan"), "b": (1, float("inf")), "c": 2.5, 3: "k"}
    assert ev_module.json_safe(obj) == {"a": None, "b": [1, None], "c": 2.5, "3": "k"}
    line = ev_module.encode_line(obj)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"a": None, "b": [1, None], "c": 2.5, "3": "k"}


def test_sticky_cuda_class(ev_module):
    f = ev_module.sticky_cuda_class
    assert f(RuntimeError("CUDA error: an illegal memory access was encountered")) == \
        "cuda/CUDA_ERROR_ILLEGAL_ADDRESS"
    assert f(RuntimeError("CUDA error: misaligned address")) == "cuda/CUDA_ERROR_MISALIGNED_ADDRESS"
    assert f(RuntimeError("CUDA error: unspecified launch failure")) == \
        "cuda/CUDA_ERROR_LAUNCH_FAILED"
    assert f(RuntimeError("CUDA out of memory. Tried to allocate 2 GiB")) is None


# -- graph encoding

def test_target_names(ev_module):
    t = ev_module.target_name
    assert t(torch.relu) == "torch.relu"
    assert t(torch.softmax) == "torch.softmax"
    assert t(F.softmax) == "torch.nn.functional.softmax"
    assert t(F.linear) == "torch.nn.functional.linear"
    assert t(F.gelu) == "torch.nn.functional.gelu"
    assert t(operator.mul) == "operator.mul"
    assert t(torch.ops.aten.relu.default) == "aten.relu.default"
    assert t("view") == "view"


def test_encode_arg_of_traced_graph(ev_module):
    def f(x, mask):
        y = x[:, 1:3].to(torch.float16)
        return F.softmax(x.masked_fill(mask, float("-inf")), dim=1), y

    gm = torch.fx.symbolic_trace(f)
    enc = {n.name: (ev_module.target_name(n.target), ev_module.encode_arg(n.args),
                    ev_module.encode_arg(n.kwargs)) for n in gm.graph.nodes}
    assert enc["getitem"] == ("operator.getitem",
                              [{"node": "x"}, [{"slice": [None, None, None]},
                                               {"slice": [1, 3, None]}]], {})
    assert enc["to"] == ("to", [{"node": "getitem"}, "torch.float16"], {})
    assert enc["masked_fill"] == ("masked_fill", [{"node": "x"}, {"node": "mask"}, "-inf"], {})
    assert enc["softmax"] == ("torch.nn.functional.softmax", [{"node": "masked_fill"}],
                              {"dim": 1, "_stacklevel": 3, "dtype": None})


def test_module_attrs(ev_module):
    lin = ev_module.module_attrs(torch.nn.Linear(8, 4, bias=False))
    assert lin["in_features"] == 8 and lin["out_features"] == 4 and lin["bias"] is False
    pool = ev_module.module_attrs(torch.nn.MaxPool2d(kernel_size=3, stride=2, padding=1))
    assert {k: pool[k] for k in ("kernel_size", "stride", "padding", "dilation", "ceil_mode")} \
        == {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 1, "ceil_mode": False}
    ln = ev_module.module_attrs(torch.nn.LayerNorm(16, eps=1e-6))
    assert ln["normalized_shape"] == [16] and ln["eps"] == 1e-6 and ln["elementwise_affine"]
    leaky = ev_module.module_attrs(torch.nn.LeakyReLU(0.1))
    assert leaky["negative_slope"] == 0.1


def test_named_state_and_inputs(ev_module):
    m = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    names = [n for n, _ in ev_module.named_state(m)]
    assert names == ["param:0.weight", "param:0.bias", "param:1.weight", "param:1.bias",
                     "param:1.running_mean", "param:1.running_var",
                     "param:1.num_batches_tracked"]
    x = torch.zeros(2)
    assert [n for n, _ in ev_module.named_inputs([3, x, x])] == ["input:1", "input:2"]


# -- output poisoning and comparison

def test_sentinel_is_a_nan_with_a_payload(ev_module):
    out = torch.empty(4)
    ev_module.poison_(out, torch.zeros(4))
    assert torch.isnan(out).all()
    assert out.view(torch.int32).tolist() == [0x7FC0DEAD] * 4
    assert torch.full((1,), float("nan")).view(torch.int32).item() != 0x7FC0DEAD
    for dt in (torch.float64, torch.float16, torch.bfloat16):
        o = torch.empty(3, dtype=dt)
        ev_module.poison_(o, torch.zeros(3, dtype=dt))
        assert torch.isnan(o.float()).all(), dt
    i = torch.empty(3, dtype=torch.int64)
    ev_module.poison_(i, torch.zeros(3, dtype=torch.int64))
    assert i.tolist() == [torch.iinfo(torch.int64).min] * 3
    b = torch.empty(3, dtype=torch.bool)
    ev_module.poison_(b, torch.tensor([True, False, True]))
    assert b.tolist() == [False, True, False]


def _poisoned_like(ev_module, ref):
    out = torch.empty_like(ref)
    ev_module.poison_(out, ref)
    return out


def test_compare_pass_and_errors(ev_module):
    ref = torch.tensor([1.0, 2.0, 1e-6, -4.0])
    out = torch.tensor([1.00005, 2.0, 5e-6, -4.0])
    cmp = ev_module.compare_outputs(out, ref, 1e-4, 1e-4)
    assert cmp["mismatches"] == 0 and cmp["unwritten"] == 0 and cmp["nan"] == 0
    assert cmp["max_abs"] == pytest.approx(float(torch.tensor(1.00005)) - 1.0, rel=1e-9)
    # 1e-6 is within atol of zero, so it does not count for max_rel
    assert cmp["max_rel"] == pytest.approx(float(torch.tensor(1.00005)) - 1.0, rel=1e-9)
    assert ev_module.classify_comparison("output:0", cmp) is None


def test_compare_partly_unwritten(ev_module):
    ref = torch.arange(6, dtype=torch.float32)
    out = _poisoned_like(ev_module, ref)
    out[:4] = ref[:4]
    cmp = ev_module.compare_outputs(out, ref, 1e-4, 1e-4)
    assert (cmp["unwritten"], cmp["mismatches"], cmp["nan"], cmp["first_bad"]) == (2, 2, 0, 4)
    cls, msg = ev_module.classify_comparison("output:0", cmp)
    assert cls == "correctness/unwritten_output" and "partly unwritten" in msg


def test_compare_never_written(ev_module):
    ref = torch.ones(5)
    cmp = ev_module.compare_outputs(_poisoned_like(ev_module, ref), ref, 1e-4, 1e-4)
    cls, msg = ev_module.classify_comparison("output:1", cmp)
    assert cls == "correctness/unwritten_output" and "never written" in msg
    assert "output:1" in msg and "5 of 5" in msg


def test_compare_library_poison_counts_as_unwritten(ev_module):
    # libopforge_gpu fills outputs with 0xff bytes right before the launch: all bits set
    ref = torch.ones(4)
    out = torch.full((4,), -1, dtype=torch.int32).view(torch.float32)
    out[0] = 1.0
    cmp = ev_module.compare_outputs(out, ref, 1e-4, 1e-4)
    assert (cmp["unwritten"], cmp["nan"], cmp["mismatches"]) == (3, 0, 3)
    cls, msg = ev_module.classify_comparison("output:0", cmp)
    assert cls == "correctness/unwritten_output" and "3 of 4" in msg


def test_compare_nan_output(ev_module):
    ref = torch.tensor([1.0, float("nan"), 3.0])
    out = torch.tensor([float("nan"), float("nan"), 3.0])
    cmp = ev_module.compare_outputs(out, ref, 1e-4, 1e-4)
    # the NaN the reference also has is fine; the other one is not
    assert (cmp["nan"], cmp["mismatches"], cmp["unwritten"]) == (1, 1, 0)
    assert ev_module.classify_comparison("output:0", cmp)[0] == "correctness/nan_output"


def test_compare_mismatch_and_infinities(ev_module):
    ref = torch.tensor([float("inf"), 1.0, -float("inf"), 10.0])
    out = torch.tensor([float("inf"), 1.0, float("inf"), 10.01])
    cmp = ev_module.compare_outputs(out, ref, 1e-4, 1e-4)
    assert cmp["mismatches"] == 2 and cmp["first_bad"] == 2
    assert cmp["max_abs"] == pytest.approx(float(torch.tensor(10.01)) - 10.0, rel=1e-6)
    assert ev_module.classify_comparison("output:0", cmp)[0] == "correctness/mismatch"


def test_compare_integer_outputs_exactly(ev_module):
    ref = torch.tensor([3, 1, 2])
    out = _poisoned_like(ev_module, ref)
    out[0] = 3
    out[1] = 2
    cmp = ev_module.compare_outputs(out, ref, 1e-4, 1e-4)
    assert (cmp["mismatches"], cmp["unwritten"]) == (2, 1)
    out[2] = 2
    out[1] = 1
    assert ev_module.compare_outputs(out, ref, 1e-4, 1e-4)["mismatches"] == 0


def test_compare_in_chunks(ev_module, monkeypatch):
    monkeypatch.setattr(ev_module.numerics, "COMPARE_CHUNK", 7)
    ref = torch.linspace(-1, 1, 100)
    out = ref.clone()
    out[93] += 1.0
    cmp = ev_module.compare_outputs(out, ref, 1e-4, 1e-4)
    assert (cmp["mismatches"], cmp["first_bad"]) == (1, 93)
    assert cmp["max_abs"] == pytest.approx(1.0, rel=1e-6)
    assert cmp["ref_sq"] == pytest.approx(float((ref.double() ** 2).sum()), rel=1e-9)


def test_max_abs_error_ignores_nonfinite_reference(ev_module):
    r64 = torch.tensor([1.0, float("nan"), 2.0], dtype=torch.float64)
    x = torch.tensor([1.5, 0.0, 2.0])
    assert ev_module.max_abs_error(x, r64) == 0.5
    assert ev_module.max_abs_error(torch.tensor([float("nan"), 0.0, 2.0]), r64) == math.inf
    assert ev_module.max_abs_finite(torch.tensor([-3.0, float("inf"), 2.0])) == 3.0


# -- input guards

def test_fingerprint_sees_change_and_swap(ev_module, monkeypatch):
    monkeypatch.setattr(ev_module.numerics, "FINGERPRINT_CHUNK", 16)
    x = torch.rand(100)
    fp = ev_module.fingerprint(x)
    assert ev_module.fingerprint(x.clone()) == fp
    y = x.clone()
    y[57] = torch.nextafter(y[57], torch.tensor(2.0))
    assert ev_module.fingerprint(y) != fp
    z = x.clone()
    z[3], z[70] = x[70].item(), x[3].item()
    assert ev_module.fingerprint(z) != fp
    assert ev_module.fingerprint(torch.ones(5, dtype=torch.bfloat16)) != \
        ev_module.fingerprint(torch.ones(5, dtype=torch.bfloat16) * 2)


@pytest.mark.parametrize("budget", [1 << 40, 0], ids=["by-copy", "by-fingerprint"])
def test_input_guard(ev_module, budget):
    a = torch.rand(10)
    b = torch.rand(3, 3)
    guard = ev_module.InputGuard([("input:0", a), ("param:w", b)], budget)
    assert guard.by_copy == (budget > 0)
    assert guard.changed() == []
    b[1, 2] += 1.0
    assert guard.changed() == ["param:w"]


def test_input_guard_copy_sees_nan_payload(ev_module):
    a = torch.tensor([float("nan"), 1.0])
    guard = ev_module.InputGuard([("input:0", a)], 1 << 40)
    assert guard.changed() == []
    a.view(torch.int32)[0] = 0x7FC00001
    assert guard.changed() == ["input:0"]


# -- request parsing

def test_parse_load_args_defaults(ev_module):
    args = ev_module.parse_load_args({"source": "x = 1"})
    assert args == {"source": "x = 1", "seed": 42, "precision": "fp32",
                    "tolerance": {"atol": 1e-4, "rtol": 1e-4}, "trials": 5, "name": "task",
                    "accuracy_factor": 8.0}
    args = ev_module.parse_load_args({"source": "", "precision": "bf16",
                                      "tolerance": {"rtol": 0.05}, "accuracy_factor": 4})
    assert args["tolerance"] == {"atol": 1e-2, "rtol": 0.05}
    assert args["accuracy_factor"] == 4.0


@pytest.mark.parametrize("bad,field", [
    ({}, "source"),
    ({"source": 3}, "source"),
    ({"source": "", "seed": True}, "seed"),
    ({"source": "", "seed": 1.5}, "seed"),
    ({"source": "", "precision": "fp16"}, "precision"),
    ({"source": "", "trials": 0}, "trials"),
    ({"source": "", "trials": 101}, "trials"),
    ({"source": "", "tolerance": {"atol": -1}}, "tolerance.atol"),
    ({"source": "", "tolerance": {"eps": 1}}, "tolerance.eps"),
    ({"source": "", "accuracy_factor": 0}, "accuracy_factor"),
    ({"source": "", "colour": "red"}, "colour"),
])
def test_parse_load_args_rejects(ev_module, bad, field):
    with pytest.raises(ev_module.EvalError) as info:
        ev_module.parse_load_args(bad)
    assert info.value.stage == "protocol"
    assert info.value.cls == "protocol/bad_argument"
    assert field in info.value.message


def test_read_request_discards_an_overlong_line(ev_module, monkeypatch):
    monkeypatch.setattr(ev_module.protocol, "MAX_LINE_BYTES", 16)
    f = io.BytesIO(b'{"id":1,"op":"profile","pad":"' + b"x" * 100 + b'"}\n{"id":2}\n')
    first = ev_module.read_request(f)
    assert isinstance(first, ev_module.ProtocolError)
    assert first.reply()["error"]["class"] == "protocol/line_too_long"
    assert ev_module.read_request(f) == b'{"id":2}'
    assert ev_module.read_request(f) is None


@pytest.mark.parametrize("line,req_id,cls", [
    (b"not json", None, "protocol/bad_json"),
    (b"[1,2]", None, "protocol/not_object"),
    (b'{"op":"profile"}', None, "protocol/bad_id"),
    (b'{"id":"7","op":"profile"}', None, "protocol/bad_id"),
    (b'{"id":true,"op":"profile"}', None, "protocol/bad_id"),
    (b'{"id":7}', 7, "protocol/bad_op"),
    (b'{"id":8,"op":"frobnicate"}', 8, "protocol/unknown_op"),
    (b'\xff\xfe', None, "protocol/bad_encoding"),
])
def test_handle_line_protocol_errors(ev_module, line, req_id, cls):
    ev = ev_module.Evaluator("cpu")
    reply, action = ev_module.handle_line(ev, line)
    assert action is None
    assert reply["id"] == req_id and reply["ok"] is False and reply["fatal"] is False
    assert reply["error"]["stage"] == "protocol" and reply["error"]["class"] == cls


def stage_literals(source):
    """The stage strings written in source: the first argument of EvalError and
    CandidateFailure, the "stage" of dict literals, and .get("stage", default)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            args = node.args
            if name in ("EvalError", "CandidateFailure") and args:
                if isinstance(args[0], ast.Constant):
                    found.add(args[0].value)
            if (name == "get" and len(args) == 2 and isinstance(args[0], ast.Constant)
                    and args[0].value == "stage" and isinstance(args[1], ast.Constant)):
                found.add(args[1].value)
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if (isinstance(k, ast.Constant) and k.value == "stage"
                        and isinstance(v, ast.Constant)):
                    found.add(v.value)
    return found


def test_the_package_writes_exactly_the_listed_stages(ev_module):
    pkg = Path(ev_module.__file__).parent
    found = set()
    for path in sorted(pkg.glob("*.py")):
        found |= stage_literals(path.read_text())
    assert found == set(ev_module.STAGES)
    assert set(ev_module.STAGES) <= {"compile", "load", "launch", "correctness", "timeout",
                                     "crash", "check", "parse", "protocol", "profile"}


@pytest.mark.parametrize("op,stage", [("load_task", "load"), ("profile", "profile"),
                                      ("evaluate", "load")])
def test_unexpected_exceptions_keep_to_the_stages(ev_module, op, stage):
    ev = ev_module.Evaluator("cpu")
    reply, action = ev._unexpected(1, op, ValueError("boom"))
    assert action is None
    assert reply["error"]["stage"] == stage and stage in ev_module.STAGES
