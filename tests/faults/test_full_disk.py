"""Faults of the store's disk and of the data directory's ownership, against the real
server with the scripted evaluator (tests/engine/scripted_evaluator.c): a full disk in the
middle of a task (writes answer 507 insufficient_storage, /readyz says why, the task is
taken up again once space is freed, never left running and claimed), a start on a full
disk (a clear message, exit 2, the lock file as it was), and a second server after the
first one's lock file was deleted (refused). The disk is a small tmpfs mounted as --data;
where the test cannot mount one it skips and says why."""
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
REFERENCE = open(os.path.join(ROOT, "examples", "softmax.py")).read()
LEASE_S = 3


def build_path(*parts):
    return os.path.join(os.environ.get("OPFORGE_BUILD_DIR",
                                       os.path.join(ROOT, "build-test-normal")), *parts)


def opforge_bin():
    path = os.environ.get("OPFORGE_BIN") or build_path("opforge")
    if not os.access(path, os.X_OK):
        pytest.fail("no opforge binary at %s (set OPFORGE_BIN)" % path)
    return path


def scripted_evaluator():
    path = os.environ.get("OPFORGE_SCRIPTED_EVALUATOR") or build_path(
        "tests", "engine", "scripted_evaluator")
    if not os.access(path, os.X_OK):
        pytest.fail("no scripted evaluator at %s (set OPFORGE_SCRIPTED_EVALUATOR)" % path)
    return path


@pytest.fixture
def tmpfs(tmp_path):
    """A 4 MiB tmpfs mounted on tmp_path/data (unmounted after the test)."""
    data = tmp_path / "data"
    data.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(data)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN): %s"
                    % done.stderr.strip())
    yield str(data)
    subprocess.run(["umount", "-l", str(data)], capture_output=True)


def http(url, method="GET", body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    return status, json.loads(raw) if raw else None


def start(data, log_path, extra=()):
    """The server on data with the scripted evaluator; returns (process, url)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OPFORGE_") and not k.startswith("SCRIPTED_EVAL_")}
    env.update({"SCRIPTED_EVAL_DELAY_MS": "40", "SCRIPTED_EVAL_PROGRAM": "correct 2.0"})
    args = [opforge_bin(), "serve", "--listen", "127.0.0.1:0", "--data", data, "--gpus", "0",
            "--evaluator", scripted_evaluator(), "--fixtures",
            os.path.join(ROOT, "tests", "engine", "fixtures"), "--sandbox-env",
            "SCRIPTED_EVAL_*", "--lease-seconds", str(LEASE_S)] + list(extra)
    log = open(log_path, "a")
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, env=env, text=True)
    log.close()
    line = proc.stdout.readline()
    return proc, line.strip()[len("listening on "):] if line.startswith("listening on") else None


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def fill(path):
    """Writes zeros into path until the disk refuses; returns the bytes written."""
    written = 0
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                written += f.write(b"\0" * 65536)
        except OSError:
            pass
    return written


def task_state(url, task_id):
    status, task = http(url + "/v1/tasks/" + task_id)
    assert status == 200
    return task["status"], task["progress"]["step"]


def test_a_full_disk_mid_task(tmpfs, tmp_path):
    log = str(tmp_path / "server.log")
    proc, url = start(tmpfs, log)
    assert url, open(log).read()
    try:
        status, task = http(url + "/v1/tasks", "POST", {
            "reference": REFERENCE, "name": "softmax_a", "proposer": "test",
            "policy": "htam+tree", "budget": {"steps": 400, "seconds": 3600,
                                              "stop_at_floor": 0}})
        assert status == 202, task
        deadline = time.monotonic() + 60
        while task_state(url, task["id"])[1] < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert task_state(url, task["id"]) [1] >= 2
        filler = os.path.join(tmpfs, "filler")
        assert fill(filler) > 0
        time.sleep(1.0)  # the task's next commits meet the full disk
        status, body = http(url + "/v1/tasks", "POST", {"reference": REFERENCE,
                                                         "name": "softmax_b"})
        assert status == 507, body
        assert body["error"]["code"] == "insufficient_storage"
        assert body["error"]["message"].startswith("the disk holding the store is full")
        status, body = http(url + "/readyz")
        assert status == 503 and body["error"]["code"] == "not_ready"
        assert "is full" in body["error"]["message"], body
        assert task_state(url, task["id"])[0] == "running"  # reads still answer
        at_full = task_state(url, task["id"])[1]
        os.unlink(filler)
        # Freed: the task is taken up again within its lease and a renewal, and goes on.
        deadline = time.monotonic() + LEASE_S * 4 + 10
        state = task_state(url, task["id"])
        while state[0] == "running" and state[1] <= at_full + 2 and time.monotonic() < deadline:
            time.sleep(0.2)
            state = task_state(url, task["id"])
        assert state[0] != "running" or state[1] > at_full + 2, (state, at_full)
        status, body = http(url + "/readyz")
        assert status == 200, body
        status, body = http(url + "/v1/tasks", "POST", {"reference": REFERENCE,
                                                         "name": "softmax_b"})
        assert status == 202, body
        text = open(log).read()
        assert "database or disk is full" in text
        assert "error store: " in text  # the store's lines carry the time and the level
        assert proc.poll() is None
    finally:
        stop(proc)


def test_a_start_on_a_full_disk(tmpfs, tmp_path):
    log = str(tmp_path / "server.log")
    proc, url = start(tmpfs, log)
    assert url
    stop(proc)
    lock = os.path.join(tmpfs, "opforge.lock")
    os.unlink(os.path.join(tmpfs, "opforge.db"))  # a fresh start must write a new database
    for name in os.listdir(tmpfs):
        if name.startswith("opforge.db-"):
            os.unlink(os.path.join(tmpfs, name))
    with open(lock, "w") as f:
        f.write("12345\n")
    fill(os.path.join(tmpfs, "filler"))
    open(log, "w").close()
    proc, url = start(tmpfs, log)
    assert url is None
    assert proc.wait(timeout=30) == 2
    text = open(log).read()
    assert "is full" in text and "free some space" in text, text
    assert open(lock).read() == "12345\n"


def test_a_deleted_lock_file_lets_no_second_server_in(tmp_path):
    data = str(tmp_path / "data")
    os.mkdir(data)
    log = str(tmp_path / "server.log")
    first, url = start(data, log)
    assert url
    try:
        os.unlink(os.path.join(data, "opforge.lock"))
        second, url2 = start(data, str(tmp_path / "second.log"))
        assert url2 is None
        assert second.wait(timeout=30) == 2
        text = open(str(tmp_path / "second.log")).read()
        assert "is in use by another opforge server (its lock file opforge.lock was " \
               "removed, but its database is still locked)" in text, text
        status, _ = http(url + "/healthz")
        assert status == 200
    finally:
        stop(first)
