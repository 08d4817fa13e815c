# Task code that raises, exits, lacks symbols or asks for too much memory comes back as a clean failure with a capped traceback, and the evaluator keeps serving.
import pytest

GOOD = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return x + 1
def get_inputs():
    return [torch.rand(3)]
def get_init_inputs():
    return []
"""


def check_alive(ev):
    r = ev.load(GOOD)
    assert r["ok"] and r["result"]["loaded"]
    assert ev.request("profile")["result"]["outputs"][0]["shape"] == [3]


def load_error(ev, src, name="bad"):
    r = ev.load(src, name=name)
    assert r["ok"] is False and r["fatal"] is False, r
    return r["error"]


def test_raising_source(cpu_ev):
    err = load_error(cpu_ev, "import torch\nx = 1\ny = x / 0  # boom line\n")
    assert err["stage"] == "load"
    assert err["class"] == "load/ZeroDivisionError"
    assert err["message"] == "ZeroDivisionError: division by zero"
    tb = err["traceback"]
    assert 'File "<task bad>", line 3' in tb
    assert "y = x / 0  # boom line" in tb
    assert tb.rstrip().endswith("ZeroDivisionError: division by zero")
    check_alive(cpu_ev)


def test_syntax_error(cpu_ev):
    err = load_error(cpu_ev, "def broken(:\n    pass\n")
    assert (err["stage"], err["class"]) == ("load", "load/SyntaxError")
    assert "SyntaxError" in err["traceback"]
    check_alive(cpu_ev)


def test_missing_module_is_named(cpu_ev):
    err = load_error(cpu_ev, "import torch\nimport opforge_no_such_module.sub\n" + GOOD)
    assert (err["stage"], err["class"]) == ("load", "load/missing_module")
    assert err["message"] == ("the program imports 'opforge_no_such_module', which the "
                              "evaluator's Python does not have: install it (pip install "
                              "opforge_no_such_module) in the evaluator's venv")
    check_alive(cpu_ev)


def test_kernelbench_packages_are_installed(cpu_ev):
    """What KernelBench lists for running its tasks (scripts/lib.sh, KERNELBENCH_PACKAGES)
    imports in the evaluator: the level-3 Mamba2 models use einops."""
    src = GOOD.replace("import torch", "import torch\nimport einops\nimport numpy")
    r = cpu_ev.load(src)
    assert r["ok"], r
    check_alive(cpu_ev)


@pytest.mark.parametrize("drop", ["Model", "get_inputs", "get_init_inputs"])
def test_missing_symbol(cpu_ev, drop):
    src = GOOD.replace("class Model", "class Other" if drop == "Model" else "class Model")
    src = src.replace("def %s(" % drop, "def not_%s(" % drop) if drop != "Model" else src
    err = load_error(cpu_ev, src)
    assert err["class"] == "load/missing_symbol"
    assert err["message"] == "task source does not define %s" % drop
    check_alive(cpu_ev)


def test_model_init_raising(cpu_ev):
    src = GOOD.replace("class Model(torch.nn.Module):\n",
                       "class Model(torch.nn.Module):\n"
                       "    def __init__(self):\n"
                       "        super().__init__()\n"
                       "        raise ValueError('bad width %d' % 7)\n")
    err = load_error(cpu_ev, src)
    assert err["class"] == "load/ValueError"
    assert err["message"] == "ValueError: bad width 7"
    assert "in __init__" in err["traceback"]
    check_alive(cpu_ev)


def test_forward_raising_fails_the_profile(cpu_ev):
    src = GOOD.replace("return x + 1", "return x @ torch.ones(5, 5)")
    assert cpu_ev.load(src)["ok"]
    r = cpu_ev.request("profile")
    assert r["ok"] is False and r["fatal"] is False
    assert (r["error"]["stage"], r["error"]["class"]) == ("profile", "profile/RuntimeError")
    assert "in forward" in r["error"]["traceback"]
    assert "size mismatch" in r["error"]["message"] or "cannot be multiplied" in \
        r["error"]["message"]
    check_alive(cpu_ev)


def test_sys_exit_in_task_does_not_stop_the_evaluator(cpu_ev):
    err = load_error(cpu_ev, "import sys\nsys.exit(3)\n")
    assert err["class"] == "load/SystemExit"
    assert cpu_ev.proc.poll() is None
    check_alive(cpu_ev)


def test_huge_traceback_is_capped(cpu_ev):
    err = load_error(cpu_ev, "raise RuntimeError('x' * 30000 + 'END')\n")
    assert err["class"] == "load/RuntimeError"
    assert len(err["traceback"].encode()) <= 8192
    assert err["traceback"].rstrip().endswith("END")
    assert len(err["message"]) <= 4096
    check_alive(cpu_ev)


def test_task_too_large_for_the_host_goes_to_meta(cpu_ev):
    """A 4 TB input would kill the host; it is profiled on meta instead."""
    src = GOOD.replace("torch.rand(3)", "torch.rand(1 << 40)")
    r = cpu_ev.load(src)
    assert r["result"]["device"] == "meta"
    assert r["result"]["estimated_bytes"] == 2 * 4 * (1 << 40)
    prof = cpu_ev.request("profile")["result"]
    assert prof["inputs"][0]["shape"] == [1 << 40]
    assert prof["min_bytes"] == 8 * (1 << 40)
    check_alive(cpu_ev)


def test_huge_parameters_go_to_meta(cpu_ev):
    src = GOOD.replace("class Model(torch.nn.Module):\n",
                       "class Model(torch.nn.Module):\n"
                       "    def __init__(self):\n"
                       "        super().__init__()\n"
                       "        self.w = torch.nn.Parameter(torch.randn(1 << 20, 1 << 16))\n")
    r = cpu_ev.load(src)
    assert r["result"]["device"] == "meta"
    prof = cpu_ev.request("profile")["result"]
    assert prof["params"] == [{"name": "param:w", "dtype": "float32", "shape": [1 << 20, 1 << 16],
                               "numel": 1 << 36, "bytes": 1 << 38, "kind": "parameter"}]


def test_get_inputs_raising_fails_the_profile(cpu_ev):
    src = GOOD.replace("return [torch.rand(3)]", "raise KeyError('seq_len')")
    assert cpu_ev.load(src)["ok"]
    r = cpu_ev.request("profile")
    assert r["error"]["class"] == "profile/KeyError"
    assert "seq_len" in r["error"]["message"]
    check_alive(cpu_ev)
