# Program candidates on a CUDA device (skipped, with the reason, elsewhere): real CUDA graph capture and replay with the fake library's torch "kernels" (captured like any stream work), random ops under restored CUDA RNG, and, with OPFORGE_GPU_LIB, the real library's bind/enqueue under capture.
import os
import sys

import pytest
import torch

from test_programs import (DROPOUT_TASK, KERNELS, THREE_OPS_TASK, evaluate, library_program,
                           mixed_program)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device on this host")


@pytest.fixture
def cuda_ev(ev_module, fake_lib):
    def make(src=THREE_OPS_TASK):
        lib = fake_lib(KERNELS)
        ev = ev_module.Evaluator("cuda:0", lib=lib)
        ev.init_cuda(None)
        ev.load_task({"source": src, "name": "t"})
        ev.profile({})
        return ev, lib
    return make


def test_graph_true_replays_on_the_device(cuda_ev):
    ev, lib = cuda_ev()
    program = mixed_program()
    program["graph"] = "true"
    r = evaluate(ev, program)
    assert r["correct"] is True, r["failure"]
    assert all(t["ok"] and t["replay"]["ok"] for t in r["trials"])
    g = r["graph"]
    assert g["captured"] is True and g["used"] == "graph" and g["graph_ms"] > 0
    assert len(r["steps_ms"]) == 3 and r["library_ms"] > 0


def test_auto_picks_the_faster_order_on_the_device(cuda_ev):
    ev, _ = cuda_ev()
    r = evaluate(ev, library_program(ev))
    g = r["graph"]
    assert r["correct"] is True, r["failure"]
    assert g["captured"] is True and g["stream_ms"] > 0 and g["graph_ms"] > 0
    assert r["time"]["median_ms"] == min(g["stream_ms"], g["graph_ms"])


def test_stale_region_is_caught_on_the_device(cuda_ev):
    ev, _ = cuda_ev()
    program = mixed_program("stateful_relu")
    program["graph"] = "true"
    r = evaluate(ev, program)
    assert r["failure"]["class"] in ("correctness/mismatch", "check/repeat_inconsistent"), r


def test_dropout_program_on_the_device(cuda_ev):
    ev, _ = cuda_ev(DROPOUT_TASK)
    r = evaluate(ev, library_program(ev, graph="true"))
    assert r["correct"] is True, r["failure"]
    assert r["graph"]["used"] == "stream" and "random ops" in r["graph"]["reason"]


@pytest.fixture
def real_lib():
    path = os.environ.get("OPFORGE_GPU_LIB")
    if not path or not os.path.exists(path):
        pytest.skip("set OPFORGE_GPU_LIB to a built libopforge_gpu.so to run this test")
    return path


def test_real_library_programs(spawn, real_lib):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gpu"))
    import program_checks as pc
    p = spawn("--device", "0", "--lib", real_lib)
    assert "gpu_library_error" not in p.wait_ready()
    assert p.load(pc.SMALL_TASK, name="programs_small")["ok"]
    assert p.request("profile", timeout=600)["ok"]
    r = p.request("evaluate", timeout=600,
                  candidate=pc.region_program(pc.RELU_SCALE_SRC, ["relu_scale"], "true"))
    res = r["result"]
    assert res["correct"] is True, res["failure"]
    assert all(t["replay"]["ok"] for t in res["trials"]) and res["graph"]["used"] == "graph"
    r = p.request("evaluate", timeout=600, candidate=pc.region_program(
        pc.STALE_SRC, ["stale_relu_scale", "mark_done"], "true"))
    assert r["result"]["failure"]["class"] in ("correctness/mismatch",
                                               "check/repeat_inconsistent"), r["result"]
