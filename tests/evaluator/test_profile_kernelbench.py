# Profile tests on KernelBench tasks (CPU torch): exact shapes, names, FLOPs, min_bytes and graphs; the meta fallback for tasks over the host-memory share.
import json

import pytest
from conftest import EvaluatorProcess, find_kernelbench

GIB = 1 << 30


def load_and_profile(ev, kernelbench, rel):
    src = (kernelbench / rel).read_text()
    # Ceilings for a loaded CI machine (a level-3 model's profile on CPU), not timings.
    loaded = ev.load(src, name=rel, timeout=180)
    assert loaded["ok"], loaded
    prof = ev.request("profile", timeout=300)
    assert prof["ok"], prof
    return loaded["result"], prof["result"]


def nodes_by_op(graph, op):
    return [n for n in graph if n["op"] == op]


def test_relu_is_profiled_on_meta_without_allocating(spawn, kernelbench):
    ev = spawn("--device", "cpu", "--host-mem-bytes", str(GIB))
    ev.wait_ready()
    loaded, prof = load_and_profile(ev, kernelbench, "level1/19_ReLU.py")
    numel = 4096 * 393216
    assert loaded["device"] == "meta"
    assert loaded["estimated_bytes"] == 2 * 4 * numel
    assert "over the host memory limit of %d bytes" % GIB in loaded["meta_reason"]
    assert prof["device"] == "meta"
    assert prof["inputs"] == [{"name": "input:0", "dtype": "float32", "shape": [4096, 393216],
                               "numel": numel, "bytes": 4 * numel}]
    assert prof["params"] == []
    assert prof["outputs"] == [{"name": "output:0", "dtype": "float32",
                                "shape": [4096, 393216], "numel": numel, "bytes": 4 * numel}]
    assert prof["flops"] == 0
    assert prof["min_bytes"] == 12884901888
    assert prof["degenerate"] is None
    assert prof["eager_ms"] is None and prof["compile_ms"] is None
    assert prof["floor_ms"] is None and prof["impossible_ms"] is None
    assert "meta device" in prof["timing_skipped_reason"]
    assert [(n["op"], n["target"]) for n in prof["graph"]] == [
        ("placeholder", "x"), ("call_function", "torch.relu"), ("output", "output")]
    relu = prof["graph"][1]
    assert relu["args"] == [{"node": "x"}] and relu["kwargs"] == {}
    assert relu["shape"] == [4096, 393216] and relu["dtype"] == "float32"
    assert prof["graph"][0]["tensor"] == "input:0"
    # the task needs 12.9 GB; the process never came near it
    assert ev.peak_rss_bytes() < 2 * GIB


def test_softmax(cpu_ev, kernelbench):
    _, prof = load_and_profile(cpu_ev, kernelbench, "level1/23_Softmax.py")
    assert prof["device"] == "meta"
    assert [i["shape"] for i in prof["inputs"]] == [[4096, 393216]]
    assert prof["min_bytes"] == 2 * 4 * 4096 * 393216
    assert prof["flops"] == 0
    (sm,) = nodes_by_op(prof["graph"], "call_function")
    assert sm["target"] == "torch.softmax"
    assert sm["args"] == [{"node": "x"}] and sm["kwargs"] == {"dim": 1}
    assert sm["shape"] == [4096, 393216]


def test_rmsnorm(cpu_ev, kernelbench):
    loaded, prof = load_and_profile(cpu_ev, kernelbench, "level1/36_RMSNorm_.py")
    assert loaded["init_inputs"] == [64]
    shape = [112, 64, 512, 512]
    numel = 112 * 64 * 512 * 512
    assert prof["inputs"] == [{"name": "input:0", "dtype": "float32", "shape": shape,
                               "numel": numel, "bytes": 4 * numel}]
    assert prof["outputs"][0]["shape"] == shape
    assert prof["min_bytes"] == 8 * numel == 15032385536
    calls = [(n["target"], n["args"], n["kwargs"], n["shape"])
             for n in prof["graph"] if n["op"] == "call_function"]
    assert calls == [
        ("operator.pow", [{"node": "x"}, 2], {}, shape),
        ("torch.mean", [{"node": "pow_1"}], {"dim": 1, "keepdim": True}, [112, 1, 512, 512]),
        ("operator.add", [{"node": "mean"}, 1e-05], {}, [112, 1, 512, 512]),
        ("torch.sqrt", [{"node": "add"}], {}, [112, 1, 512, 512]),
        ("operator.truediv", [{"node": "x"}, {"node": "sqrt"}], {}, shape),
    ]


def test_gemm_multiply_leakyrelu(cpu_ev, kernelbench):
    loaded, prof = load_and_profile(cpu_ev, kernelbench, "level2/12_Gemm_Multiply_LeakyReLU.py")
    assert loaded["init_inputs"] == [8192, 8192, 2.0, 0.1]
    M, K, N = 1024, 8192, 8192
    assert prof["flops"] == 2 * M * N * K
    assert prof["params"] == [
        {"name": "param:gemm.weight", "dtype": "float32", "shape": [N, K], "numel": N * K,
         "bytes": 4 * N * K, "kind": "parameter"},
        {"name": "param:gemm.bias", "dtype": "float32", "shape": [N], "numel": N,
         "bytes": 4 * N, "kind": "parameter"}]
    assert prof["min_bytes"] == 4 * (M * K + N * K + N + M * N)
    gemm, mul, leaky = [n for n in prof["graph"] if n["op"] not in ("placeholder", "output")]
    assert (gemm["op"], gemm["target"], gemm["module"]) == ("call_module", "Linear", "gemm")
    assert gemm["attrs"]["in_features"] == K and gemm["attrs"]["out_features"] == N
    assert gemm["attrs"]["bias"] is True
    assert gemm["params"] == ["param:gemm.weight", "param:gemm.bias"]
    assert gemm["shape"] == [M, N]
    assert (mul["target"], mul["args"]) == ("operator.mul", [{"node": "gemm"}, 2.0])
    assert (leaky["target"], leaky["attrs"]["negative_slope"]) == ("LeakyReLU", 0.1)
    assert leaky["shape"] == [M, N]


def test_mlp(cpu_ev, kernelbench):
    loaded, prof = load_and_profile(cpu_ev, kernelbench, "level3/1_MLP.py")
    assert loaded["init_inputs"] == [16384, [16384, 16384], 8192]
    assert prof["flops"] == 2 * 128 * (16384 * 16384 + 16384 * 16384 + 16384 * 8192)
    assert [p["name"] for p in prof["params"]] == [
        "param:network.0.weight", "param:network.0.bias", "param:network.2.weight",
        "param:network.2.bias", "param:network.4.weight", "param:network.4.bias"]
    weights = 16384 * 16384 * 2 + 16384 * 8192
    biases = 16384 * 2 + 8192
    assert prof["min_bytes"] == 4 * (128 * 16384 + weights + biases + 128 * 8192)
    mods = [(n["target"], n["module"], n["shape"]) for n in prof["graph"]
            if n["op"] == "call_module"]
    assert mods == [("Linear", "network.0", [128, 16384]), ("ReLU", "network.1", [128, 16384]),
                    ("Linear", "network.2", [128, 16384]), ("ReLU", "network.3", [128, 16384]),
                    ("Linear", "network.4", [128, 8192])]
    assert prof["outputs"][0]["shape"] == [128, 8192]


def test_vision_attention_records_what_the_attention_family_reads(cpu_ev, kernelbench):
    """MultiheadAttention's node carries its sizes and refused variants' flags, and its
    params include out_proj's (gpu/evaluator/graph.py, attention_attrs, module_params).
    The model runs as constructed, in training mode: its dropout of 0 keeps it exact."""
    _, prof = load_and_profile(cpu_ev, kernelbench, "level3/31_VisionAttention.py")
    attn = [n for n in prof["graph"] if n["op"] == "call_module" and n["module"] == "attn"]
    assert len(attn) == 1
    attrs = attn[0]["attrs"]
    assert {k: attrs[k] for k in ("embed_dim", "num_heads", "kdim", "vdim", "dropout",
                                  "training", "qkv_same_embed_dim", "bias_kv",
                                  "add_zero_attn", "in_proj_bias", "out_proj_bias",
                                  "batch_first")} == {
        "embed_dim": 128, "num_heads": 4, "kdim": 128, "vdim": 128, "dropout": 0.0,
        "training": True, "qkv_same_embed_dim": True, "bias_kv": False,
        "add_zero_attn": False, "in_proj_bias": True, "out_proj_bias": True,
        "batch_first": False}
    assert attn[0]["params"] == ["param:attn.in_proj_weight", "param:attn.in_proj_bias",
                                 "param:attn.out_proj.weight", "param:attn.out_proj.bias"]
    items = [n for n in prof["graph"] if n["op"] == "call_function"
             and n["args"] and n["args"][0] == {"node": "attn"}]
    assert [(n["args"][1], n["shape"]) for n in items] == [(0, [16384, 2, 128]),
                                                             (1, [2, 16384, 16384])]


def test_diagonal_matmul_runs_on_cpu(cpu_ev, kernelbench):
    loaded, prof = load_and_profile(cpu_ev, kernelbench,
                                    "level1/12_Matmul_with_diagonal_matrices_.py")
    assert loaded["device"] == "cpu" and "meta_reason" not in loaded
    assert loaded["estimated_bytes"] == 4 * (4096 + 2 * 4096 * 4096)
    assert prof["device"] == "cpu"
    assert [(i["name"], i["shape"]) for i in prof["inputs"]] == [("input:0", [4096]),
                                                                 ("input:1", [4096, 4096])]
    assert prof["min_bytes"] == 134234112
    assert prof["degenerate"] is False
    assert prof["timing_skipped_reason"] == "no CUDA device"
    assert prof["eager_ms"] is None and prof["floor_ms"] is None
    unsq, mul = nodes_by_op(prof["graph"], "call_method") + nodes_by_op(prof["graph"],
                                                                         "call_function")
    assert (unsq["target"], unsq["args"], unsq["shape"]) == ("unsqueeze", [{"node": "a"}, 1],
                                                             [4096, 1])
    assert (mul["target"], mul["shape"]) == ("operator.mul", [4096, 4096])


def test_cross_entropy_runs_on_cpu_with_integer_input(spawn, kernelbench):
    ev = spawn("--device", "cpu", "--host-mem-bytes", str(2 * GIB))
    ev.wait_ready()
    loaded, prof = load_and_profile(ev, kernelbench, "level1/95_CrossEntropyLoss.py")
    assert loaded["device"] == "cpu"
    assert prof["inputs"] == [
        {"name": "input:0", "dtype": "float32", "shape": [32768, 4096],
         "numel": 32768 * 4096, "bytes": 4 * 32768 * 4096},
        {"name": "input:1", "dtype": "int64", "shape": [32768], "numel": 32768,
         "bytes": 8 * 32768}]
    assert prof["outputs"] == [{"name": "output:0", "dtype": "float32", "shape": [],
                                "numel": 1, "bytes": 4}]
    assert prof["min_bytes"] == 537133060
    assert prof["degenerate"] is False
    (ce,) = nodes_by_op(prof["graph"], "call_function")
    assert ce["target"] == "torch.nn.functional.cross_entropy" and ce["shape"] == []


def test_host_memory_limit_is_exact(spawn):
    src = ("import torch\nclass Model(torch.nn.Module):\n"
           "    def forward(self, x):\n        return torch.relu(x)\n"
           "def get_inputs():\n    return [torch.rand(1000)]\n"
           "def get_init_inputs():\n    return []\n")
    at = spawn("--device", "cpu", "--host-mem-bytes", "8000")
    below = spawn("--device", "cpu", "--host-mem-bytes", "7999")
    at.wait_ready()
    below.wait_ready()
    assert at.load(src)["result"]["device"] == "cpu"
    r = below.load(src)["result"]
    assert r["device"] == "meta" and r["estimated_bytes"] == 8000


def _task_files():
    kb = find_kernelbench()
    if kb is None:
        return []
    return sorted(p.relative_to(kb).as_posix() for p in kb.glob("level*/*.py"))


@pytest.fixture(scope="module")
def meta_ev():
    p = EvaluatorProcess("--device", "meta")
    p.wait_ready()
    yield p
    p.close()


@pytest.fixture(scope="module")
def baseline(kernelbench):
    return json.loads((kernelbench / "h200-baseline.json").read_text())["tasks"]


def test_the_baseline_lists_67_tasks_that_exist(kernelbench, baseline):
    assert len(baseline) == 67
    assert set(baseline) <= set(_task_files())
    assert len(_task_files()) >= 90


@pytest.mark.parametrize("rel", _task_files() or ["(no KernelBench)"])
def test_every_task_profiles_on_meta_and_matches_the_baseline(meta_ev, kernelbench, baseline,
                                                              rel):
    """Every KernelBench task profiles on meta with a graph; FLOPs and min_bytes equal
    those of h200-baseline.json (measured independently on the H200) where it lists
    the task."""
    _, prof = load_and_profile(meta_ev, kernelbench, rel)
    assert prof["device"] == "meta"
    assert prof["graph"], prof["graph_error"]
    assert prof["outputs"]
    if rel in baseline:
        assert (prof["flops"], prof["min_bytes"]) == (baseline[rel]["flops"],
                                                      baseline[rel]["min_bytes"])


def test_python_loop_over_a_size_traces_with_meta_tensors(cpu_ev, kernelbench):
    """VanillaRNNHidden loops over range(seq_len): symbolic_trace fails, the meta tracer
    unrolls the loop into an FX graph (gpu/evaluator/meta_trace.py) whose modules keep
    their parameters."""
    _, prof = load_and_profile(cpu_ev, kernelbench, "level3/34_VanillaRNNHidden.py")
    assert prof["graph_source"] == "fx_meta"
    assert prof["graph_error"].startswith("symbolic_trace: TypeError: ")
    assert [n.get("tensor") for n in nodes_by_op(prof["graph"], "placeholder")] == [
        "input:0", "input:1"]
    mods = nodes_by_op(prof["graph"], "call_module")
    # per time step: i2h, tanh, h2o; 256 steps
    assert [n["module"] for n in mods[:3]] == ["i2h", "tanh", "h2o"]
    assert len(mods) == 3 * 256
    assert mods[0]["params"] == ["param:i2h.weight", "param:i2h.bias"]
    assert (mods[0]["shape"], mods[2]["shape"]) == ([8, 256], [8, 128])
    calls = nodes_by_op(prof["graph"], "call_function")
    assert sum(n["target"] == "torch.cat" for n in calls) == 256
    assert (calls[-1]["target"], calls[-1]["shape"]) == ("torch.stack", [256, 8, 128])
