# Evaluator tests that need a CUDA device (skipped, with the reason, elsewhere): device info, profiles with timings and floors, eager times against the H200 baseline, the memory guard, and the evaluate flow on device tensors.
import json
import os

import pytest
import torch

from test_evaluate_fake import GEMM_TASK, KERNELS, evaluate, result_of

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device on this host")

GIB = 1 << 30
BASELINE_TASKS = ["level1/19_ReLU.py", "level1/23_Softmax.py",
                  "level1/1_Square_matrix_multiplication_.py", "level1/36_RMSNorm_.py",
                  "level2/12_Gemm_Multiply_LeakyReLU.py"]


@pytest.fixture(scope="module")
def gpu_ev():
    from conftest import EvaluatorProcess
    p = EvaluatorProcess("--device", "0", "--lib", "/nonexistent/libopforge_gpu.so")
    p.wait_ready()
    yield p
    p.close()


def test_ready_describes_the_device(gpu_ev):
    ready = gpu_ev.ready
    dev = ready["device"]
    props = torch.cuda.get_device_properties(0)
    assert dev["type"] == "cuda" and dev["index"] == 0
    assert dev["name"] == props.name
    assert dev["capability"] == "%d.%d" % (props.major, props.minor)
    assert dev["arch"].startswith("sm_%d%d" % (props.major, props.minor))
    assert dev["sm_count"] == props.multi_processor_count
    assert dev["memory_bytes"] == props.total_memory
    assert dev["hbm_peak_GBps"] > 500
    assert "cannot load /nonexistent/libopforge_gpu.so" in ready["gpu_library_error"]


def test_relu_profile_on_the_gpu(gpu_ev, kernelbench):
    r = gpu_ev.load((kernelbench / "level1/19_ReLU.py").read_text(), name="relu")
    assert r["ok"] and r["result"]["device"] == "cuda"
    prof = gpu_ev.request("profile", timeout=600)["result"]
    assert prof["device"] == "cuda" and prof["timing_skipped_reason"] is None
    assert prof["sm_count"] == torch.cuda.get_device_properties(0).multi_processor_count
    assert prof["min_bytes"] == 12884901888 and prof["flops"] == 0
    assert prof["degenerate"] is False
    assert prof["eager_ms"] > 0
    assert prof["eager"]["reps"] >= 10
    assert prof["compile_ms"] is None or prof["compile_ms"] > 0
    basis = prof["floor_basis"]
    assert 1e12 < basis["copy_bw_Bps"] < basis["hbm_peak_Bps"]
    assert prof["floor_ms"] == pytest.approx(12884901888 / basis["copy_bw_Bps"] * 1e3)
    assert prof["impossible_ms"] == pytest.approx(12884901888 / basis["hbm_peak_Bps"] * 1e3)
    assert prof["impossible_ms"] < prof["floor_ms"] < prof["eager_ms"]
    # 12.9 GB of task tensors, all made on the device: the host never held them
    assert gpu_ev.peak_rss_bytes() < 6 * GIB
    print("19_ReLU eager %.4f ms compile %s ms floor %.4f ms impossible %.4f ms copy %.3f TB/s"
          % (prof["eager_ms"], prof["compile_ms"], prof["floor_ms"], prof["impossible_ms"],
             basis["copy_bw_Bps"] / 1e12))


@pytest.mark.parametrize("rel", BASELINE_TASKS)
def test_eager_time_agrees_with_the_h200_baseline(gpu_ev, kernelbench, rel):
    if "H200" not in torch.cuda.get_device_name(0):
        pytest.skip("the baseline was measured on an H200")
    base = json.loads((kernelbench / "h200-baseline.json").read_text())["tasks"][rel]
    assert gpu_ev.load((kernelbench / rel).read_text(), name=rel)["ok"]
    prof = gpu_ev.request("profile", timeout=600)["result"]
    ratio = prof["eager_ms"] / base["eager_ms"]
    print("%s eager %.4f ms baseline %.4f ms ratio %.3f compile %s ms baseline %.4f ms"
          % (rel, prof["eager_ms"], base["eager_ms"], ratio, prof["compile_ms"],
             base["compile_ms"]))
    assert abs(ratio - 1) < 0.05
    assert (prof["flops"], prof["min_bytes"]) == (base["flops"], base["min_bytes"])


def test_memory_guard(spawn, kernelbench):
    p = spawn("--device", "0", "--mem-fraction", "0.02")
    p.wait_ready()
    assert p.load((kernelbench / "level1/19_ReLU.py").read_text())["ok"]
    r = p.request("profile", timeout=300)
    assert r["ok"] is False and r["fatal"] is False
    assert (r["error"]["stage"], r["error"]["class"]) == ("profile", "profile/out_of_memory")
    big_params = ("import torch\nclass Model(torch.nn.Module):\n"
                  "    def __init__(self):\n        super().__init__()\n"
                  "        self.w = torch.nn.Parameter(torch.rand(1 << 31))\n"
                  "    def forward(self, x):\n        return x * self.w[0]\n"
                  "def get_inputs():\n    return [torch.rand(4)]\n"
                  "def get_init_inputs():\n    return []\n")
    r = p.load(big_params)
    assert (r["error"]["stage"], r["error"]["class"]) == ("load", "load/out_of_memory")
    small = big_params.replace("1 << 31", "16")
    assert p.load(small)["ok"]
    assert p.request("profile", timeout=300)["ok"]


@pytest.fixture
def cuda_ev(ev_module, fake_lib):
    def make(median_ms=1.0, **load):
        lib = fake_lib(KERNELS, median_ms=median_ms)
        ev = ev_module.Evaluator("cuda:0", lib=lib)
        ev.init_cuda(None)
        ev.load_task({"source": GEMM_TASK, "name": "t", **load})
        ev.profile({})
        return ev, lib
    return make


def test_evaluate_flow_on_device_tensors(cuda_ev):
    ev, lib = cuda_ev(median_ms=0.001)
    prof = ev.task.profile
    assert prof["device"] == "cuda" and prof["eager_ms"] > 0
    r = result_of(ev, "correct")
    assert r["correct"] is True, r["failure"]
    assert r["speedup"]["eager"] == pytest.approx(prof["eager_ms"] / 0.001)
    assert r["floor_fraction"] == pytest.approx(prof["floor_ms"] / 0.001)
    assert r["checks"]["above_floor"] is True
    for bad, cls in [("nothing", "correctness/unwritten_output"),
                     ("modifies_input", "check/inputs_modified"),
                     ("noisy", "correctness/accuracy_budget"),
                     ("differs_when_timed", "check/repeat_inconsistent")]:
        assert result_of(ev, bad)["failure"]["class"] == cls


def test_sticky_torch_error_is_fatal(cuda_ev):
    ev, lib = cuda_ev()

    def faulting(t, lib):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    lib.kernels["faulting"] = faulting
    reply, action = evaluate(ev, "faulting")
    assert action == "fatal" and reply["fatal"] is True
    assert reply["error"]["class"] == "cuda/CUDA_ERROR_ILLEGAL_ADDRESS"


RELU_TASK = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.rand(1 << 24) - 0.5]
def get_init_inputs():
    return []
"""

RELU_CU = r"""
extern "C" __global__ void relu(const float* x, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = %s;
}
"""


def relu_candidate(body):
    n = 1 << 24
    return {"source": RELU_CU % body, "options": [],
            "plan": {"buffers": [], "launches": [
                {"kernel": "relu", "grid": [n // 256, 1, 1], "block": [256, 1, 1],
                 "shared_bytes": 0,
                 "args": [{"tensor": "input:0"}, {"tensor": "output:0"}, {"i64": n}]}]}}


@pytest.fixture
def real_lib():
    path = os.environ.get("OPFORGE_GPU_LIB")
    if not path or not os.path.exists(path):
        pytest.skip("set OPFORGE_GPU_LIB to a built libopforge_gpu.so to run this test")
    return path


def test_real_library_end_to_end(spawn, real_lib):
    p = spawn("--device", "0", "--lib", real_lib)
    ready = p.wait_ready()
    assert "gpu_library_error" not in ready, ready
    assert ready["device"]["arch"].startswith("sm_")
    assert p.load(RELU_TASK, name="relu16m")["ok"]
    prof = p.request("profile", timeout=600)["result"]
    good = p.request("evaluate", timeout=300, candidate=relu_candidate("fmaxf(x[i], 0.f)"))
    assert good["ok"], good
    r = good["result"]
    print("real relu: time %s speedup %s floor_fraction %s trials %s" % (
        r["time"], r["speedup"], r["floor_fraction"], [t["max_abs"] for t in r["trials"]]))
    assert r["failure"] is None and r["correct"] is True
    assert r["compile"]["ok"] is True
    assert r["checks"] == {"inputs_unchanged": True, "outputs_written": True,
                           "repeat_consistent": True, "above_floor": True}
    assert r["time"]["median_ms"] >= prof["impossible_ms"]
    assert r["speedup"]["eager"] == pytest.approx(prof["eager_ms"] / r["time"]["median_ms"])
    cases = [("fmaxf(fminf(x[i], 0.5f), 0.f)", "correctness/robust_mismatch"),
             ("x[i]", "correctness/mismatch"),
             ("x[i] > 0.f ? x[i] : 0.f; if (i == 0) ((float*)x)[1] = 5.f", "check/inputs_modified"),
             ("0.f; return", "correctness/mismatch"),
             ("fmaxf(x[i], 0.f) * (1.f + 3e-5f)", "correctness/accuracy_budget")]
    for body, cls in cases:
        r = p.request("evaluate", timeout=300, candidate=relu_candidate(body))["result"]
        assert r["failure"]["class"] == cls, (body, r["failure"])
    nothing = relu_candidate("0.f")
    nothing["source"] = nothing["source"].replace("if (i < n) y[i] = 0.f;", "")
    r = p.request("evaluate", timeout=300, candidate=nothing)["result"]
    assert r["failure"]["class"] == "correctness/unwritten_output"
    broken = relu_candidate("undefined_thing")
    r = p.request("evaluate", timeout=300, candidate=broken)["result"]
    assert r["failure"]["stage"] == "compile" and r["compile"]["ok"] is False
    fault = relu_candidate("0.f; y[i + (1L << 40)] = 1.f")
    r = p.request("evaluate", timeout=300, candidate=fault)
    print("illegal address:", r.get("error"))
    assert r["ok"] is False and r["fatal"] is True
    assert r["error"]["class"].startswith("cuda/CUDA_ERROR_")
    assert p.proc.wait(timeout=60) == 3
