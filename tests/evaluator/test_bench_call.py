# Tests of tests/gpu/bench_call's STATE folder on a host without a GPU: which tasks a call leaves out because an earlier call on the same machine finished them.
import json
import os
import subprocess
from pathlib import Path

from conftest import REPO

BENCH_CALL = REPO / "tests" / "gpu" / "bench_call"
TASKS = ["level1/19_ReLU.py", "level1/21_Sigmoid.py", "level2/1_Conv2D_ReLU_BiasAdd.py"]


def run_call(tmp_path, state, tasks):
    """Runs bench_call 300 1 0 TASKS with STATE and a PATH whose nvidia-smi finds no GPU
    (so bench_run skips even on a GPU host); returns the completed process."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir(exist_ok=True)
    smi = fake_bin / "nvidia-smi"
    smi.write_text("#!/bin/sh\nexit 9\n")
    smi.chmod(0o755)
    env = dict(os.environ, STATE=str(state), OUT=str(tmp_path / "out"),
               PATH="%s:%s" % (fake_bin, os.environ["PATH"]))
    return subprocess.run([str(BENCH_CALL), "300", "1", "0"] + tasks, env=env,
                          capture_output=True, text=True, timeout=120)


def save_call(state, n, records):
    """Writes STATE/call-n.json with these task records, as an earlier call saved it."""
    state.mkdir(exist_ok=True)
    (state / ("call-%d.json" % n)).write_text(json.dumps({"tasks": records}))


def test_tasks_finished_in_an_earlier_call_are_left_out(tmp_path):
    state = tmp_path / "state"
    save_call(state, 1, [
        {"file": "/x/kernelbench/level1/19_ReLU.py", "finished": True, "status": "succeeded"},
        {"file": "/x/kernelbench/level1/21_Sigmoid.py", "finished": False,
         "status": "running"}])
    save_call(state, 2, [
        {"file": "/y/level2/1_Conv2D_ReLU_BiasAdd.py", "finished": True, "status": "failed"}])
    p = run_call(tmp_path, state, TASKS)
    assert p.returncode == 0, p.stderr
    # 19 succeeded and 1_Conv2D failed in earlier calls; 21 was unfinished: it runs again
    assert "STATE %s: 2 of 3 tasks finished in earlier calls, 1 to run" % state in p.stdout
    assert "skipped: no NVIDIA GPU on this host" in (tmp_path / "out" / "bench_run.log").read_text()
    # no bench ran, so nothing is saved for this call
    assert sorted(f.name for f in state.iterdir()) == ["call-1.json", "call-2.json"]


def test_a_call_with_every_task_finished_runs_nothing(tmp_path):
    state = tmp_path / "state"
    save_call(state, 1, [{"file": "kb/" + t, "finished": True, "status": "succeeded"}
                         for t in TASKS])
    p = run_call(tmp_path, state, TASKS)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [
        "STATE %s: 3 of 3 tasks finished in earlier calls, 0 to run" % state,
        "nothing left to run"]
    assert not (tmp_path / "out" / "bench_run.log").exists()


def test_without_state_every_task_runs(tmp_path):
    p = run_call(tmp_path, "", TASKS)
    assert p.returncode == 0, p.stderr
    assert "STATE" not in p.stdout
    assert "bench_call done at" in p.stdout
