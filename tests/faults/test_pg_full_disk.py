"""A full disk on the database side (issue 34's hostile inputs, PostgreSQL): the cluster's
data directory lives on a small tmpfs (its WAL elsewhere, so PostgreSQL itself keeps
running), a table fills it, and then a write the database refuses (SQLSTATE 53100) is
answered 507 insufficient_storage, /readyz says the disk is full, nothing half-written
is left, and once the filler is dropped the same submission succeeds. Skips, saying why,
where it cannot mount a tmpfs or find PostgreSQL's server."""
import glob
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
CLUSTER = os.path.join(ROOT, "tests", "pg", "cluster")
# About 200 KB of source: stored out of line (TOAST), so it needs new pages on the disk.
BIG_REFERENCE = ("import torch\n" + "# padding line of a large reference source\n" * 5000 +
                 "class Model(torch.nn.Module):\n    def forward(self, x):\n"
                 "        return x + 1\n\ndef get_inputs():\n    return [torch.randn(4)]\n\n"
                 "def get_init_inputs():\n    return []\n")


def opforge_bin():
    path = os.environ.get("OPFORGE_BIN") or os.path.join(
        os.environ.get("OPFORGE_BUILD_DIR", os.path.join(ROOT, "build-test-normal")), "opforge")
    if not os.access(path, os.X_OK):
        pytest.fail("no opforge binary at %s (set OPFORGE_BIN)" % path)
    return path


def psql(url, sql, check=True):
    return subprocess.run(["psql", "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", url, "-c", sql],
                          capture_output=True, text=True, check=check)


def http(url, method="GET", body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


@pytest.fixture
def small_cluster():
    """A cluster whose data directory is a 48 MiB tmpfs; yields (admin URL, database URL).
    Its directory is outside pytest's (mode 0700) so that postgres, under root, gets in."""
    if not glob.glob("/usr/lib/postgresql/*/bin/initdb"):
        pytest.skip("no PostgreSQL server here (apt-get install postgresql)")
    top = pathlib.Path(tempfile.mkdtemp(prefix="opforge-pgfull-"))
    os.chmod(top, 0o755)
    disk = top / "disk"
    disk.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(disk)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN): %s"
                    % done.stderr.strip())
    try:
        started = subprocess.run([CLUSTER, "start", str(disk / "pg"), str(top / "wal")],
                                 capture_output=True, text=True)
        assert started.returncode == 0, started.stderr
        admin = started.stdout.strip()
        psql(admin, "CREATE DATABASE full_disk")
        yield admin, admin.replace("/postgres?", "/full_disk?")
    finally:
        subprocess.run([CLUSTER, "stop", str(disk / "pg")], capture_output=True)
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
        shutil.rmtree(top, ignore_errors=True)


def fill(url):
    """Inserts into a filler table until the disk refuses (53100); returns its rows."""
    psql(url, "CREATE TABLE filler (pad text)")
    for _ in range(200):
        done = psql(url, "INSERT INTO filler SELECT repeat(md5(g::text), 64) "
                         "FROM generate_series(1, 2000) g", check=False)
        if done.returncode != 0:
            assert "No space left on device" in done.stderr or "could not extend" in done.stderr, \
                done.stderr
            return int(psql(url, "SELECT count(*) FROM filler").stdout.split()[-1] or 0)
    pytest.fail("the 48 MiB disk never filled")


def test_full_database_disk_is_507_and_recovers(small_cluster, tmp_path):
    admin, url = small_cluster
    data = tmp_path / "data"
    data.mkdir()
    log = open(tmp_path / "server.log", "w")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPFORGE_")}
    proc = subprocess.Popen([opforge_bin(), "serve", "--listen", "127.0.0.1:0", "--data",
                             str(data), "--gpus", "none", "--store", url],
                            stdout=subprocess.PIPE, stderr=log, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert line.startswith("listening on "), open(tmp_path / "server.log").read()
        base = line.split()[-1]
        fill(url)
        body = {"name": "big", "reference": BIG_REFERENCE}
        status, answer = None, None
        for _ in range(20):  # pages with room left take a few small rows first
            status, answer = http(base + "/v1/tasks", "POST", body)
            if status != 202:
                break
        assert status == 507, (status, answer)
        assert answer["error"]["code"] == "insufficient_storage"
        status, ready = http(base + "/readyz")
        assert status == 503
        assert ready["error"]["code"] == "not_ready"
        assert "disk is full (SQLSTATE 53100)" in ready["error"]["message"]
        # The refused submission left nothing: every stored task has its queued event.
        orphans = psql(url, "SELECT count(*) FROM tasks t WHERE NOT EXISTS (SELECT 1 FROM "
                            "events e WHERE e.task_id = t.id)").stdout.split()[-1]
        assert orphans == "0"
        before = int(psql(url, "SELECT count(*) FROM tasks").stdout.split()[-1])
        psql(url, "DROP TABLE filler")
        deadline = time.time() + 10
        while time.time() < deadline:
            status, answer = http(base + "/v1/tasks", "POST", body)
            if status == 202:
                break
            time.sleep(0.2)
        assert status == 202, (status, answer)
        after = int(psql(url, "SELECT count(*) FROM tasks").stdout.split()[-1])
        assert after == before + 1
        status, ready = http(base + "/readyz")
        assert status == 200 and ready["status"] == "ready"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
