"""Helpers for the multi-server tests and benchmarks (tests/pg/test_multi_server.py,
tests/pg/bench_store): a throwaway PostgreSQL cluster (tests/pg/cluster), psql queries,
opforge servers started like the engine tests start them (tests/engine/test_engine.c,
spawn_server), and small HTTP and SSE clients on the standard library only.

Environment: OPFORGE_BIN (the opforge binary), OPFORGE_SCRIPTED_EVALUATOR (default: next to
the binary, tests/engine/scripted_evaluator), OPFORGE_ENGINE_FIXTURES (default
tests/engine/fixtures)."""

import datetime
import glob
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLUSTER = os.path.join(ROOT, "tests", "pg", "cluster")

# The softmax reference of tests/engine/test_engine.c (REFERENCE).
REFERENCE = (
    "import torch\n\n"
    "class Model(torch.nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n\n"
    "    def forward(self, x):\n"
    "        return torch.softmax(x, dim=-1)\n\n"
    "def get_inputs():\n"
    "    return [torch.randn(256, 512)]\n\n"
    "def get_init_inputs():\n"
    "    return []\n")

FINAL = ("succeeded", "failed", "cancelled")


# ------------------------------------------------------------------ environment

def missing_prerequisites():
    """Why the multi-server tests cannot run here, or None."""
    if not glob.glob("/usr/lib/postgresql/*/bin/initdb"):
        return "no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb): apt-get install postgresql"
    if not shutil.which("psql"):
        return "no psql on PATH (apt-get install postgresql-client)"
    binary = os.environ.get("OPFORGE_BIN")
    if not binary:
        return "OPFORGE_BIN is not set (the opforge binary to test)"
    if not os.access(binary, os.X_OK):
        return "OPFORGE_BIN=%s is not an executable" % binary
    if not os.access(scripted_evaluator(), os.X_OK):
        return ("no scripted evaluator at %s (set OPFORGE_SCRIPTED_EVALUATOR)"
                % scripted_evaluator())
    return None


def opforge_bin():
    return os.environ["OPFORGE_BIN"]


def scripted_evaluator():
    given = os.environ.get("OPFORGE_SCRIPTED_EVALUATOR")
    if given:
        return given
    binary = os.environ.get("OPFORGE_BIN", "")
    return os.path.join(os.path.dirname(binary), "tests", "engine", "scripted_evaluator")


def fixtures_dir():
    return os.environ.get("OPFORGE_ENGINE_FIXTURES") or os.path.join(ROOT, "tests", "engine", "fixtures")


def newest_migration():
    """The schema version this tree's PostgreSQL migrations reach (schema/postgresql/NNNN_*)."""
    numbers = [int(os.path.basename(p)[:4])
               for p in glob.glob(os.path.join(ROOT, "schema", "postgresql", "[0-9][0-9][0-9][0-9]_*.sql"))]
    return max(numbers)


# ------------------------------------------------------------------ the cluster

class Cluster:
    """A throwaway cluster in its own temp dir (tests/pg/cluster); stop() removes it."""

    def __init__(self):
        self.parent = tempfile.mkdtemp(prefix="opforge-pg-")
        os.chmod(self.parent, 0o755)  # the cluster may run as postgres (under root)
        self.dir = os.path.join(self.parent, "cluster")
        out = subprocess.run([CLUSTER, "start", self.dir], capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            log = self.server_log_tail()
            shutil.rmtree(self.parent, ignore_errors=True)
            raise RuntimeError("tests/pg/cluster start: %s%s\n%s" % (out.stdout, out.stderr, log))
        self.admin = out.stdout.strip().splitlines()[-1]
        self.databases = 0

    def server_log_tail(self, n=4000):
        try:
            with open(os.path.join(self.dir, "server.log"), errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def url_of(self, database):
        """The admin URL with its database replaced."""
        return self.admin.replace("/postgres?", "/%s?" % database, 1)

    def create_database(self, prefix="t"):
        self.databases += 1
        name = "%s_%d_%d" % (prefix, os.getpid(), self.databases)
        psql(self.admin, "CREATE DATABASE %s" % name)
        return self.url_of(name)

    def restart(self):
        subprocess.run([CLUSTER, "restart", self.dir], check=True, timeout=120,
                       capture_output=True)

    def stop(self):
        subprocess.run([CLUSTER, "stop", self.dir], timeout=120, capture_output=True)
        shutil.rmtree(self.parent, ignore_errors=True)


NULL = "\x01NULL\x01"  # how psql shows NULL to psql() (no text column holds it)


def psql(url, sql):
    """Runs sql; returns the rows as lists of text (NULL is None)."""
    out = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-F", "\x1f", "-P", "null=" + NULL,
                          "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError("psql %r: %s" % (sql, out.stderr.strip()))
    rows = []
    for line in out.stdout.split("\n"):  # not splitlines(): it splits at \x1c-\x1e too
        if line == "":
            continue
        rows.append([None if v == NULL else v for v in line.split("\x1f")])
    return rows


def psql_value(url, sql):
    rows = psql(url, sql)
    return rows[0][0] if rows else None


# ------------------------------------------------------------------ HTTP

class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # lower-case names
        self.body = body

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "<%d %s>" % (self.status, self.body[:300])


def request(base, method, path, body=None, timeout=30, headers=None):
    """One request on a new connection; raises OSError when the server cannot be reached."""
    u = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        hdrs = dict(headers or {})
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            if isinstance(data, str):
                data = data.encode()
            hdrs.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=data, headers=hdrs)
        r = conn.getresponse()
        payload = r.read()
        return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, payload)
    finally:
        conn.close()


def get_json(base, path, want=200):
    r = request(base, "GET", path)
    if r.status != want:
        raise AssertionError("GET %s%s: status %d, want %d: %s" % (base, path, r.status, want, r.body[:600]))
    return r.json()


def submission(name="softmax_a", steps=2, seed=7, device=None):
    """A body like test_engine.c's submit(): the test proposer, htam+tree, stop_at_floor 0."""
    body = {"name": name, "reference": REFERENCE, "proposer": "test", "policy": "htam+tree",
            "budget": {"steps": steps, "seconds": 600, "stop_at_floor": 0}, "seed": seed}
    if device:
        body["device"] = device
    return body


def submit(base, body):
    r = request(base, "POST", "/v1/tasks", body)
    if r.status != 202:
        raise AssertionError("POST %s/v1/tasks: %d %s" % (base, r.status, r.body[:600]))
    task = r.json()
    assert task["status"] == "queued", task
    return task["id"]


def parse_sse(text):
    """The events of an SSE body (each `data:` line's JSON)."""
    out = []
    for line in text.splitlines():
        if line.startswith("data: "):
            out.append(json.loads(line[6:]))
    return out


def get_events(base, task_id, after=0, timeout=60):
    """The task's whole event stream (the server ends it once the task is final)."""
    path = "/v1/tasks/%s/events" % task_id + ("?after=%d" % after if after else "")
    r = request(base, "GET", path, timeout=timeout)
    assert r.status == 200, r
    return parse_sse(r.body.decode())


class EventFollower(threading.Thread):
    """Follows one task's event stream in a thread, stamping each event's arrival with
    time.time() (the clock of the events' `time` field) and time.monotonic()."""

    def __init__(self, base, task_id, timeout=120):
        super().__init__(daemon=True)
        self.base, self.task_id, self.timeout = base, task_id, timeout
        self.events = []      # (event, wall arrival, monotonic arrival)
        self.error = None
        self.connected = threading.Event()

    def run(self):
        u = urllib.parse.urlsplit(self.base)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=self.timeout)
        try:
            conn.request("GET", "/v1/tasks/%s/events" % self.task_id)
            r = conn.getresponse()
            if r.status != 200:
                raise AssertionError("events stream: status %d" % r.status)
            self.connected.set()
            while True:
                line = r.readline()
                if not line:
                    break
                if line.startswith(b"data: "):
                    wall, mono = time.time(), time.monotonic()
                    self.events.append((json.loads(line[6:]), wall, mono))
        except Exception as e:  # reported by the test
            self.error = e
        finally:
            self.connected.set()
            conn.close()


def event_epoch(ev):
    """An event's `time` (RFC 3339 UTC, milliseconds) as seconds since the epoch."""
    text = ev["time"]
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    return datetime.datetime.fromisoformat(text).timestamp()


def percentile(values, p):
    """The p-th percentile (nearest rank) of values."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(-(-p * len(s) // 100)) - 1))
    return s[k]


# ------------------------------------------------------------------ servers

class Server:
    """One `opforge serve` on a temp dir (data/, server.log), on 127.0.0.1:0, its
    environment ours without OPFORGE_* and SCRIPTED_EVAL_*, plus the scripted evaluator's
    delay and program (as test_engine.c's spawn_server)."""

    def __init__(self, name, store, gpus="0", workers=8, delay_ms=0, lease=None,
                 devices=(), grace=1, evaluator=True, extra=()):
        self.name = name
        self.store = store
        self.dir = tempfile.mkdtemp(prefix="opforge-ms-%s-" % name)
        self.data = os.path.join(self.dir, "data")
        self.log_path = os.path.join(self.dir, "server.log")
        self.argv = [opforge_bin(), "serve", "--listen", "127.0.0.1:0", "--data", self.data,
                     "--gpus", gpus, "--shutdown-grace", str(grace)]
        if store:
            self.argv += ["--store", store]
        if gpus != "none":
            self.argv += ["--workers-per-gpu", str(workers)]
        if evaluator:
            self.argv += ["--evaluator", scripted_evaluator(), "--fixtures", fixtures_dir(),
                          "--evaluate-deadline", "30", "--sandbox-env", "SCRIPTED_EVAL_*"]
        if lease:
            self.argv += ["--lease-seconds", str(lease)]
        for d in devices:
            self.argv += ["--device-class", d]
        self.argv += list(extra)
        self.delay_ms = delay_ms
        self.proc = None
        self.url = None
        self.exit_status = None

    def environment(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("OPFORGE_") and not k.startswith("SCRIPTED_EVAL_")}
        env["SCRIPTED_EVAL_DELAY_MS"] = str(self.delay_ms)
        env["SCRIPTED_EVAL_PROGRAM"] = "correct 2.0"
        return env

    def spawn(self):
        os.makedirs(self.data, exist_ok=True)
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=self.log,
                                     stdin=subprocess.DEVNULL, env=self.environment())
        self.exit_status = None
        return self

    def start(self, timeout=30):
        """Spawns and waits for the listening line; raises with the log's tail otherwise."""
        self.spawn()
        box = {}

        def read_line():
            box["line"] = self.proc.stdout.readline().decode(errors="replace")

        t = threading.Thread(target=read_line, daemon=True)
        t.start()
        t.join(timeout)
        line = box.get("line", "")
        m = re.match(r"listening on (http://\S+)", line)
        if not m:
            self.kill()
            raise AssertionError("server %s did not print its listening line (got %r); log tail:\n%s"
                                 % (self.name, line, self.log_tail()))
        self.url = m.group(1)
        return self

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.exit_status = self.proc.wait(30)
        self.proc.stdout.close()
        return self.exit_status

    def terminate(self, timeout=30):
        """SIGTERM; returns (exit status, seconds until it exited)."""
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.exit_status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.exit_status = self.proc.wait()
        took = time.monotonic() - t0
        self.proc.stdout.close()
        return self.exit_status, took

    def kill(self):
        if self.alive():
            self.proc.kill()
            self.proc.wait()
        if self.proc and self.proc.stdout and not self.proc.stdout.closed:
            self.proc.stdout.close()

    def log_text(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def log_tail(self, n=6000):
        return self.log_text()[-n:]

    def instance(self):
        """This server's claim instance (from its log line "claims are held as ...")."""
        m = re.search(r"claims are held as (\S+)", self.log_text())
        return m.group(1) if m else None

    def remove(self):
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    # HTTP shorthands
    def get(self, path, want=200):
        return get_json(self.url, path, want)

    def submit(self, body):
        return submit(self.url, body)


def wait_until(predicate, timeout, interval=0.05, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(interval)


def task_statuses(url):
    """{task id: status} of every task in the database at url (psql)."""
    return dict((r[0], r[1]) for r in psql(url, "SELECT id, status FROM tasks"))


def wait_all_final(url, ids, timeout, interval=0.2):
    """Waits (psql polls) until every task in ids is final; returns {id: status}."""
    ids = set(ids)

    def done():
        st = task_statuses(url)
        return st if all(st.get(i) in FINAL for i in ids) else None
    try:
        return wait_until(done, timeout, interval, "every task to finish")
    except AssertionError:
        st = task_statuses(url)
        late = sorted((i, st.get(i)) for i in ids if st.get(i) not in FINAL)
        raise AssertionError("%d task(s) not final after %.0f s, e.g. %s"
                             % (len(late), timeout, late[:5]))


def memory_totals(url):
    """The default namespace's memory statistics, read with psql: {"global": {id: (n,
    successes, improvements, reward_sum)}, "local": {id: (n, successes, reward_sum)},
    "edges": {"from>to": (n, reward_sum)}}."""
    g = psql(url, "SELECT id, n, successes, improvements, reward_sum FROM global_nodes"
                  " WHERE namespace = 'default'")
    l = psql(url, "SELECT id, n, successes, reward_sum FROM local_nodes WHERE namespace = 'default'")
    e = psql(url, "SELECT from_id || '>' || to_id, n, reward_sum FROM edges WHERE namespace = 'default'")
    return {
        "global": {r[0]: (int(r[1]), int(r[2]), int(r[3]), float(r[4])) for r in g},
        "local": {r[0]: (int(r[1]), int(r[2]), float(r[3])) for r in l},
        "edges": {r[0]: (float(r[1]), float(r[2])) for r in e},
    }


def write_bench(name, figures):
    """Writes figures as JSON to $OPFORGE_BENCH_OUT/<name>.json when that is set."""
    out = os.environ.get("OPFORGE_BENCH_OUT")
    if not out:
        return None
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, name + ".json")
    with open(path, "w") as f:
        json.dump(figures, f, indent=2, sort_keys=True)
    return path


def print_table(title, rows):
    """rows: list of (label, value) pairs, printed as a two-column table."""
    width = max([len(str(r[0])) for r in rows] + [10])
    print("\n%s" % title)
    print("-" * (width + 24))
    for label, value in rows:
        print("%-*s  %s" % (width, label, value))
    print("-" * (width + 24))
