# Protocol tests: the evaluator (gpu/evaluator/main.py) as a child process on CPU torch, spoken to in JSON lines (ready line, malformed requests, stdout protection, errors, shutdown).
import json
import time

import pytest
import torch

TINY_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.rand(4, 8) - 0.5]

def get_init_inputs():
    return []
"""

NOISY_TASK = """
import os, sys
import torch
import torch.nn as nn
print("import-time print")
os.write(1, b"raw write to fd 1\\n")
sys.stdout.write('{"id": 1, "ok": true, "result": {"forged": true}}\\n')

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        print("init print")

    def forward(self, x):
        print("forward print", x.shape)
        os.write(1, b"forward raw write\\n")
        return x * 2

def get_inputs():
    print("get_inputs print")
    return [torch.ones(3)]

def get_init_inputs():
    read = sys.stdin.read()
    print("stdin gave", repr(read))
    return []
"""


def test_ready_line(spawn):
    p = spawn("--device", "cpu")
    ready = p.wait_ready()
    assert ready == {"event": "ready", "pid": p.proc.pid, "device": {"type": "cpu"}}


def test_ready_line_meta(spawn):
    p = spawn("--device", "meta")
    assert p.wait_ready()["device"] == {"type": "meta"}


def test_shutdown_says_bye_and_exits_0(spawn):
    p = spawn("--device", "cpu")
    p.wait_ready()
    assert p.request("shutdown") == {"id": 1, "ok": True, "result": {"bye": True}}
    assert p.proc.wait(timeout=20) == 0
    assert p.read_line() is None


def test_eof_exits_0(spawn):
    p = spawn("--device", "cpu")
    p.wait_ready()
    p.proc.stdin.close()
    assert p.proc.wait(timeout=20) == 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="this host has a CUDA device")
def test_missing_cuda_device_exits_2_without_ready(spawn):
    p = spawn("--device", "0", "--lib", "/nonexistent/libopforge_gpu.so")
    assert p.proc.wait(timeout=60) == 2
    assert p.read_line() is None
    assert "CUDA device 0 is not available" in p.stderr_text()


@pytest.mark.parametrize("line,req_id,cls", [
    (b"{not json\n", None, "protocol/bad_json"),
    (b'"just a string"\n', None, "protocol/not_object"),
    (b'{"op":"profile"}\n', None, "protocol/bad_id"),
    (b'{"id":5}\n', 5, "protocol/bad_op"),
    (b'{"id":6,"op":"explode"}\n', 6, "protocol/unknown_op"),
    (b'{"id":8,"op":"load_task"}\n', 8, "protocol/bad_argument"),
    (b'{"id":9,"op":"load_task","source":"","shape":1}\n', 9, "protocol/bad_argument"),
])
def test_malformed_requests_get_protocol_errors_and_process_goes_on(cpu_ev, line, req_id, cls):
    cpu_ev.send_raw(line)
    reply = cpu_ev.read_reply()
    assert reply["id"] == req_id
    assert reply["ok"] is False and reply["fatal"] is False
    assert reply["error"]["stage"] == "protocol"
    assert reply["error"]["class"] == cls
    assert cpu_ev.proc.poll() is None
    # still answering, with the id it is given
    assert cpu_ev.request("load_task", source=TINY_TASK)["ok"] is True


def test_profile_before_load_task(spawn):
    p = spawn("--device", "cpu")
    p.wait_ready()
    r = p.request("profile")
    assert r["ok"] is False and r["error"]["stage"] == "protocol"
    assert r["error"]["class"] == "protocol/no_task"


def test_blank_lines_are_ignored(cpu_ev):
    cpu_ev.send_raw(b"\n   \n")
    reply = cpu_ev.request("load_task", source=TINY_TASK)
    assert reply["ok"] is True


def test_replies_come_in_order_line_by_line(cpu_ev):
    src = json.dumps(TINY_TASK)
    batch = "".join('{"id":%d,"op":"%s"%s}\n' % (i, op, extra) for i, op, extra in [
        (101, "load_task", ',"source":' + src), (102, "profile", ""),
        (103, "nope", ""), (104, "profile", "")])
    cpu_ev.send_raw(batch.encode())
    replies = [cpu_ev.read_reply() for _ in range(4)]
    assert [r["id"] for r in replies] == [101, 102, 103, 104]
    assert [r["ok"] for r in replies] == [True, True, False, True]
    assert replies[1]["result"] == replies[3]["result"]


def test_slow_task_answers_queued_requests_after_it(spawn):
    slow = TINY_TASK.replace("def get_init_inputs():\n", "def get_init_inputs():\n"
                             "    import time; time.sleep(1.5)\n")
    p = spawn("--device", "cpu")
    p.wait_ready()
    t0 = time.monotonic()
    p.send_raw((json.dumps({"id": 1, "op": "load_task", "source": slow}) + "\n"
                + json.dumps({"id": 2, "op": "profile"}) + "\n").encode())
    first = p.read_reply()
    assert first["id"] == 1 and first["ok"] is True
    assert time.monotonic() - t0 >= 1.5
    second = p.read_reply()
    assert second["id"] == 2 and second["ok"] is True
    assert second["result"]["outputs"][0]["shape"] == [4, 8]


def test_task_output_cannot_corrupt_the_protocol(spawn):
    p = spawn("--device", "cpu")
    p.wait_ready()
    r = p.load(NOISY_TASK)
    assert r == {"id": 1, "ok": True, "result": {"loaded": True, "name": "task",
                                                 "device": "cpu", "init_inputs": [],
                                                 "estimated_bytes": 24}}
    r = p.request("profile")
    assert r["id"] == 2 and r["ok"] is True
    assert r["result"]["outputs"][0]["shape"] == [3]
    assert p.request("shutdown")["result"] == {"bye": True}
    assert p.proc.wait(timeout=20) == 0
    assert p.read_line() is None  # nothing but replies ever reached stdout
    err = p.stderr_text()
    for text in ("import-time print", "raw write to fd 1", '"forged": true', "init print",
                 "forward print", "forward raw write", "get_inputs print",
                 "stdin gave ''"):
        assert text in err, text


def test_task_reading_stdin_does_not_eat_requests(spawn):
    src = TINY_TASK.replace("def get_init_inputs():\n", "def get_init_inputs():\n"
                            "    import sys; sys.stdin.readline(); "
                            "import os; os.read(0, 100)\n")
    p = spawn("--device", "cpu")
    p.wait_ready()
    p.send_raw((json.dumps({"id": 1, "op": "load_task", "source": src}) + "\n"
                + json.dumps({"id": 2, "op": "shutdown"}) + "\n").encode())
    assert p.read_reply()["id"] == 1
    assert p.read_reply() == {"id": 2, "ok": True, "result": {"bye": True}}


def test_evaluate_on_cpu_is_no_gpu(cpu_ev):
    assert cpu_ev.load(TINY_TASK)["ok"]
    r = cpu_ev.request("evaluate", candidate={"source": "", "options": [], "plan": {}})
    assert r["ok"] is False and r["fatal"] is False
    assert r["error"]["stage"] == "load"
    assert r["error"]["class"] == "evaluate/no_gpu"


def test_evaluate_on_meta_is_no_gpu(spawn):
    p = spawn("--device", "meta")
    p.wait_ready()
    assert p.load(TINY_TASK)["result"]["device"] == "meta"
    r = p.request("evaluate", candidate={"source": "", "plan": {}})
    assert r["error"]["class"] == "evaluate/no_gpu"


def test_reload_replaces_the_task(cpu_ev):
    assert cpu_ev.load(TINY_TASK, name="a")["ok"]
    first = cpu_ev.request("profile")["result"]
    other = TINY_TASK.replace("torch.rand(4, 8)", "torch.rand(2, 3)")
    assert cpu_ev.load(other, name="b")["ok"]
    second = cpu_ev.request("profile")["result"]
    assert first["inputs"][0]["shape"] == [4, 8] and first["name"] == "a"
    assert second["inputs"][0]["shape"] == [2, 3] and second["name"] == "b"


def test_cpu_profile_has_no_sm_count(cpu_ev):
    assert cpu_ev.load(TINY_TASK)["ok"]
    prof = cpu_ev.request("profile")["result"]
    assert prof["device"] == "cpu"
    assert "sm_count" in prof and prof["sm_count"] is None


def test_profile_rejects_arguments(cpu_ev):
    assert cpu_ev.load(TINY_TASK)["ok"]
    r = cpu_ev.request("profile", deep=True)
    assert r["error"]["class"] == "protocol/bad_argument" and "deep" in r["error"]["message"]
