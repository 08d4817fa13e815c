"""The evaluator's sandbox, tested from the inside (docs/architecture.md, "Sandbox"): a
hostile reference program tries to reach what a submission must never reach, and
reports what it saw (tests/sandbox/probes.py). It runs twice: in a server's evaluator
slot (tests/sandbox/hostile_evaluator.py imports the task's source, as the real
evaluator does, so that it runs without a GPU), and in `opforge profile` with the real
evaluator on CPU torch. Also: --sandbox none still works and warns, and a host without
bubblewrap gets evaluators refused with a message naming the package."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PROBES = os.path.join(HERE, "probes.py")
HOSTILE_EVALUATOR = os.path.join(HERE, "hostile_evaluator.py")
TOKEN = "tok-sandbox-test-0123456789abcdef"
LLM_KEY = "sk-sandbox-test-key-fedcba9876543210"
ENV_SECRET = "env-secret-value-42"
# Small limits so that the fork and file probes meet them quickly.
MAX_PROCS = 200
SCRATCH_MB = 128


def opforge_bin():
    path = os.environ.get("OPFORGE_BIN") or os.path.join(ROOT, "build-test-normal", "opforge")
    if not os.access(path, os.X_OK):
        pytest.fail("no opforge binary at %s (set OPFORGE_BIN)" % path)
    return path


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def http(url, method="GET", body=None, token=None):
    """(status, parsed JSON or text) of one request."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode("utf-8", "replace")


class Server:
    """`opforge serve` on a free loopback port with the hostile evaluator in one slot,
    a token file, an LLM key file, secrets in its environment and its own --data."""

    def __init__(self, tmp, extra_args=(), env_path=None):
        self.data = os.path.join(tmp, "data")
        self.token_file = os.path.join(tmp, "tokens")
        self.key_file = os.path.join(tmp, "llm.key")
        with open(self.token_file, "w") as f:
            f.write(TOKEN + "\n")
        with open(self.key_file, "w") as f:
            f.write(LLM_KEY + "\n")
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.log_path = os.path.join(tmp, "server.log")
        env = dict(os.environ)
        env.update({"MY_SERVICE_TOKEN": ENV_SECRET, "AWS_SECRET_ACCESS_KEY": ENV_SECRET,
                    "OPFORGE_LLM_API_KEY": LLM_KEY, "HOME": tmp})
        if env_path is not None:
            env["PATH"] = env_path
        args = [opforge_bin(), "serve", "--listen", "127.0.0.1:%d" % self.port,
                "--data", self.data, "--gpus", "0", "--evaluator", HOSTILE_EVALUATOR,
                "--python", sys.executable, "--token-file", self.token_file,
                "--llm-key-file", self.key_file, "--llm-base-url", "http://127.0.0.1:9/v1",
                "--llm-model", "m", "--evaluator-max-procs", str(MAX_PROCS),
                "--sandbox-scratch-mb", str(SCRATCH_MB)] + list(extra_args)
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, env=env,
                                     text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("listening on"):
            self.stop()
            pytest.fail("the server did not start: %r\n%s" % (line, self.log_text()))

    def log_text(self):
        with open(self.log_path) as f:
            return f.read()

    def evaluator_log(self):
        path = os.path.join(self.data, "evaluator-0-0.log")
        return open(path).read() if os.path.exists(path) else ""

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def targets(server, other_port, evaluator_dir=HERE):
    """What the probes go after (evaluator_dir: the evaluator's own folder)."""
    return {"server_pid": server.proc.pid, "server_port": server.port,
            "other_port": other_port, "token_file": server.token_file,
            "key_file": server.key_file, "data_dir": server.data,
            "evaluator_dir": evaluator_dir, "secrets": [TOKEN, LLM_KEY, ENV_SECRET]}


def hostile_program(t):
    """A KernelBench program whose module body runs every probe against t."""
    with open(PROBES) as f:
        probes = f.read()
    return ("import json\nTARGETS = json.loads(%r)\n" % json.dumps(t) + probes +
            "\nreport(TARGETS)\n\n"
            "import torch\n\n"
            "class Model(torch.nn.Module):\n"
            "    def forward(self, x):\n"
            "        return torch.relu(x)\n\n"
            "def get_inputs():\n"
            "    return [torch.randn(8, 8)]\n\n"
            "def get_init_inputs():\n"
            "    return []\n")


def read_report(text):
    """The probe report in text (a log or a stderr), or fail."""
    for line in text.splitlines():
        if line.startswith("OPFORGE_PROBE_REPORT "):
            return json.loads(line[len("OPFORGE_PROBE_REPORT "):])
    pytest.fail("no probe report in:\n" + text[-4000:])


def wait_for_end(server, task_id, limit_s=120):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        status, task = http(server.url + "/v1/tasks/" + task_id)
        assert status == 200
        if task["status"] in ("succeeded", "failed", "cancelled"):
            return task
        time.sleep(0.2)
    pytest.fail("task %s did not end within %d s" % (task_id, limit_s))


def assert_reached_nothing(r, server):
    """Every probe of report r failed inside the sandbox."""
    assert r["uid"] == (65534 if os.geteuid() == 0 else os.geteuid())
    assert r["hostname"] == "opforge-sandbox"
    assert r["secret_values_seen"] == []
    leaked = [n for n in r["env_names"]
              if n.startswith("OPFORGE_") or any(w in n.upper() for w in ("KEY", "TOKEN",
                                                                          "SECRET"))]
    assert leaked == []
    assert r["env_names"] == sorted(r["env_names"])
    for probe in ("read_token_file", "read_key_file", "read_store", "list_data_dir"):
        assert r[probe] == {"ok": False, "error": "ENOENT"}, probe
    assert r["read_server_environ"] == {"ok": False, "error": "ENOENT"}
    assert max(r["proc_pids"]) < 100, "a PID namespace of its own"
    assert server.proc.pid not in r["proc_pids"] or server.proc.pid < 100
    assert r["read_shadow"] == {"ok": False, "error": "ENOENT"}
    # A network namespace of its own: its loopback has no listener, the host's are away.
    assert r["connect_server"] == {"ok": False, "error": "ECONNREFUSED"}
    assert r["connect_other"] == {"ok": False, "error": "ECONNREFUSED"}
    assert r["write_usr"] == {"ok": False, "error": "EROFS"}
    assert r["write_root"]["ok"] is False and r["write_root"]["error"] in ("EACCES", "EROFS")
    assert r["write_data_dir"]["ok"] is False
    assert r["write_evaluator_dir"] == {"ok": False, "error": "EROFS"}
    assert r["write_scratch"] == {"ok": True, "value": "/tmp/opforge-probe"}
    assert r["signal_server"] == {"ok": False, "error": "ESRCH"}
    fork = r["fork_10000"]["value"]
    assert fork["failure"] == "EAGAIN" and fork["forked"] < MAX_PROCS, fork
    big = r["write_10GB"]["value"]
    assert big["failure"] in ("EFBIG", "ENOSPC"), big
    assert big["written"] <= SCRATCH_MB << 20, big


@pytest.fixture
def other_listener():
    """A loopback port with a listener on it (another service of the host)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(4)
    yield s.getsockname()[1]
    s.close()


def test_a_hostile_reference_in_a_server_slot_reaches_nothing(tmp_path, other_listener):
    server = Server(str(tmp_path))
    try:
        status, health = http(server.url + "/healthz")
        assert status == 200
        assert health["sandbox"]["mode"] == "bwrap"
        assert health["sandbox"]["network"] is False
        program = hostile_program(targets(server, other_listener))
        status, task = http(server.url + "/v1/tasks", "POST",
                            {"reference": program, "name": "hostile"}, token=TOKEN)
        assert status == 202, task
        ended = wait_for_end(server, task["id"])
        assert ended["status"] == "failed"
        report = read_report(server.evaluator_log())
        assert_reached_nothing(report, server)
        # The server is up and serves others: its files untouched, its API answering.
        assert server.proc.poll() is None
        assert not os.path.exists(os.path.join(server.data, "probe"))
        status, health = http(server.url + "/healthz")
        assert status == 200
        status, listed = http(server.url + "/v1/tasks")
        assert status == 200 and [t["id"] for t in listed["items"]] == [task["id"]]
        status, metrics = http(server.url + "/metrics")
        assert status == 200 and 'opforge_sandbox{mode="bwrap"} 1' in metrics
    finally:
        server.stop()


def test_a_hostile_reference_in_opforge_profile_reaches_nothing(tmp_path, other_listener):
    server = Server(str(tmp_path))
    try:
        path = tmp_path / "hostile.py"
        evaluator_dir = os.path.join(ROOT, "gpu", "evaluator")
        path.write_text(hostile_program(targets(server, other_listener, evaluator_dir)))
        env = dict(os.environ)
        env.update({"OPFORGE_TOKEN_FILE": server.token_file,
                    "OPFORGE_LLM_KEY_FILE": server.key_file,
                    "OPFORGE_LLM_API_KEY": LLM_KEY, "MY_SERVICE_TOKEN": ENV_SECRET})
        done = subprocess.run(
            [opforge_bin(), "profile", str(path), "--device", "cpu", "--python", sys.executable,
             "--evaluator-max-procs", str(MAX_PROCS), "--sandbox-scratch-mb", str(SCRATCH_MB)],
            capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        assert json.loads(done.stdout)["name"] == "hostile"
        assert_reached_nothing(read_report(done.stderr), server)
        assert server.proc.poll() is None
    finally:
        server.stop()


def test_sandbox_none_runs_unsandboxed_and_says_so(tmp_path, other_listener):
    """The same probes with --sandbox none reach the secrets: the probes can see what the
    sandbox hides, and the mode is shown and warned about."""
    server = Server(str(tmp_path), extra_args=["--sandbox", "none"])
    try:
        status, health = http(server.url + "/healthz")
        assert status == 200 and health["sandbox"] == {"mode": "none", "user": None,
                                                       "network": True}
        program = hostile_program(dict(targets(server, other_listener), harmless=True))
        status, task = http(server.url + "/v1/tasks", "POST",
                            {"reference": program, "name": "hostile"}, token=TOKEN)
        assert status == 202
        assert wait_for_end(server, task["id"])["status"] == "failed"
        r = read_report(server.evaluator_log())
        assert r["read_token_file"] == {"ok": True, "value": TOKEN + "\n"}
        assert r["read_key_file"] == {"ok": True, "value": LLM_KEY + "\n"}
        assert r["connect_other"] == {"ok": True, "value": "connected"}
        assert "--sandbox none: task code runs unsandboxed" in server.log_text()
        status, metrics = http(server.url + "/metrics")
        assert 'opforge_sandbox{mode="none"} 1' in metrics
    finally:
        server.stop()


def test_without_bubblewrap_evaluators_are_refused(tmp_path):
    """A PATH without bwrap: the server starts, serves, and refuses to start evaluators,
    naming the package; `opforge profile` fails the same way."""
    empty = tmp_path / "bin"
    empty.mkdir()
    server = Server(str(tmp_path), env_path=str(empty))
    try:
        status, health = http(server.url + "/healthz")
        assert status == 200
        assert health["sandbox"]["mode"] == "refused"
        assert "install the bubblewrap package" in health["sandbox"]["reason"]
        status, devices = http(server.url + "/v1/devices")
        assert status == 200
        [slot] = devices["devices"]
        assert slot["state"] == "disabled"
        assert "no bwrap is on PATH" in slot["last_error"]
        assert "evaluators not started: the evaluator's sandbox needs bubblewrap" in \
            server.log_text()
    finally:
        server.stop()
    program = tmp_path / "relu.py"
    program.write_text("import torch\nclass Model(torch.nn.Module):\n"
                       "    def forward(self, x):\n        return x\n"
                       "def get_inputs():\n    return [torch.ones(2)]\n"
                       "def get_init_inputs():\n    return []\n")
    done = subprocess.run([opforge_bin(), "profile", str(program), "--device", "cpu",
                           "--python", sys.executable], capture_output=True, text=True,
                          env=dict(os.environ, PATH=str(empty)), timeout=120)
    assert done.returncode == 1
    assert "no bwrap is on PATH: install the bubblewrap package" in done.stderr
    assert "--sandbox none" in done.stderr


def test_bubblewrap_is_installed():
    """scripts/test installs bubblewrap; without it every test above would fail."""
    assert shutil.which("bwrap"), "install Debian's bubblewrap package"
