"""Starts and stops an opforge server for the web page's tests, and reads its API."""
import ctypes
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def die_with_parent():
    """For preexec_fn: the child gets SIGTERM when the test process dies, so a killed
    run leaves no server or browser behind (Linux's PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)


def build_dir():
    """The build folder holding opforge: $OPFORGE_BUILD_DIR, the folder of $OPFORGE_BIN,
    or build-test-normal."""
    if os.environ.get("OPFORGE_BUILD_DIR"):
        return os.path.abspath(os.environ["OPFORGE_BUILD_DIR"])
    if os.environ.get("OPFORGE_BIN"):
        return os.path.dirname(os.path.abspath(os.environ["OPFORGE_BIN"]))
    return os.path.join(ROOT, "build-test-normal")


class Server:
    """One `opforge serve` on 127.0.0.1 with its own --data folder. With scripted, the
    GPU slot 0 runs the scripted evaluator of tests/engine (no GPU needed) and the test
    proposer replays tests/engine/fixtures; without, --gpus none. stop() ends it and
    removes its folder; restart() starts it again on the same port and data."""

    def __init__(self, scripted=True, delay_ms=200, token=None, extra=()):
        build = build_dir()
        self.bin = os.path.join(build, "opforge")
        self.dir = tempfile.mkdtemp(prefix="opforge-ui-server-")
        self.data = os.path.join(self.dir, "data")
        self.log_path = os.path.join(self.dir, "server.log")
        self.token = token
        self.port = 0
        self.proc = None
        args = ["--gpus", "none"]
        if scripted:
            args = ["--gpus", "0", "--evaluator",
                    os.path.join(build, "tests", "engine", "scripted_evaluator"),
                    "--fixtures", os.path.join(ROOT, "tests", "engine", "fixtures"),
                    "--sandbox-env", "SCRIPTED_EVAL_*", "--evaluate-deadline", "30"]
        if token:
            path = os.path.join(self.dir, "tokens")
            with open(path, "w") as f:
                f.write(token + "\n")
            args += ["--token-file", path]
        self.args = args + ["--shutdown-grace", "1"] + list(extra)
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("OPFORGE_", "SCRIPTED_EVAL_"))}
        self.env.update(SCRIPTED_EVAL_DELAY_MS=str(delay_ms),
                        SCRIPTED_EVAL_PROGRAM="correct 2.0")
        self.start()

    def start(self, timeout=20):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [self.bin, "serve", "--listen", "127.0.0.1:%d" % self.port, "--data", self.data]
            + self.args, stdout=subprocess.PIPE, stderr=log, env=self.env,
            preexec_fn=die_with_parent)
        log.close()
        deadline = time.monotonic() + timeout
        line = b""
        while time.monotonic() < deadline and not line.endswith(b"\n"):
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:  # unbuffered: select sees only what the pipe still holds
                byte = os.read(self.proc.stdout.fileno(), 1)
                if not byte:
                    break
                line += byte
        text = line.decode(errors="replace").strip()
        if not text.startswith("listening on http://127.0.0.1:"):
            self.kill()
            raise RuntimeError("opforge did not start (%r); its log:\n%s" % (text, self.log()))
        self.url = text[len("listening on "):]
        self.port = int(self.url.rsplit(":", 1)[1])

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-6000:]
        except OSError:
            return ""

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def halt(self, timeout=20):
        """SIGTERM, then SIGKILL after timeout seconds; the folder stays."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc.stdout.close()
        self.proc = None

    def restart(self):
        """Stops the server and starts it again on the same port and data; the port is
        retried for a few seconds while the old socket goes."""
        self.halt()
        for attempt in range(20):
            try:
                self.start()
                return
            except RuntimeError:
                if attempt == 19:
                    raise
                time.sleep(0.5)

    def stop(self):
        self.halt()
        shutil.rmtree(self.dir, ignore_errors=True)

    def request(self, method, path, body=None, token=None, headers=None):
        """(status, headers, body bytes) of one request; redirects are not followed."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if body is not None:
            req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", "Bearer " + token)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        opener = urllib.request.build_opener(NoRedirect)
        try:
            with opener.open(req, timeout=15) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def json(self, method, path, body=None, token=None, expect=(200, 201, 202)):
        status, _, raw = self.request(method, path, body, token)
        assert status in expect, "%s %s: %d %s" % (method, path, status, raw[:300])
        return json.loads(raw) if raw else None

    def wait_task(self, task_id, final=True, timeout=60):
        """The task once it is final (or running, when final is false)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            task = self.json("GET", "/v1/tasks/" + task_id)
            if task["status"] in ("succeeded", "failed", "cancelled") or (
                    not final and task["status"] == "running"):
                return task
            time.sleep(0.2)
        raise AssertionError("task %s did not end within %ss; server log:\n%s"
                             % (task_id, timeout, self.log()))


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None
