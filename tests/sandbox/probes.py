# Hostile probes run from inside the evaluator's sandbox: each tries to reach something a submitted program must never reach, and records what it saw.
"""The text of this file is pasted into a hostile KernelBench program (and into a hostile
evaluator) by tests/sandbox/test_sandbox.py, after a line `TARGETS = {...}` that names
what to go after: the server's pid and port, another loopback port, the token file, the
LLM key file, the data directory and its store, and secret values to look for ("harmless"
leaves out the probes that would hurt an unsandboxed host). run()
returns a report {probe: observation}; report() writes it to stderr as one line
`OPFORGE_PROBE_REPORT <json>`, which the test reads back. Nothing here raises: every
attempt's failure is an observation."""

import errno
import json
import os
import signal
import socket
import sys
import time


def _attempt(fn):
    """{"ok": True, "value": ...} when fn succeeds, else {"ok": False, "error": name}."""
    try:
        return {"ok": True, "value": fn()}
    except OSError as exc:
        return {"ok": False, "error": errno.errorcode.get(exc.errno, str(exc.errno))}
    except Exception as exc:  # noqa: BLE001 - every failure is an observation
        return {"ok": False, "error": type(exc).__name__}


def _read(path):
    with open(path, "rb") as f:
        return f.read(4096).decode("latin-1")


def _write(path):
    with open(path, "wb") as f:
        f.write(b"x")
    return path


def _connect(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", port))
        return "connected"
    finally:
        s.close()


def _fork_many(limit):
    """Forks up to limit children that wait on a pipe; returns how many forks succeeded
    before the first failure, then lets them all go."""
    r, w = os.pipe()
    made = 0
    failure = None
    for _ in range(limit):
        try:
            pid = os.fork()
        except OSError as exc:
            failure = errno.errorcode.get(exc.errno, str(exc.errno))
            break
        if pid == 0:
            os.close(w)
            os.read(r, 1)
            os._exit(0)
        made += 1
    os.close(w)
    os.close(r)
    deadline = time.monotonic() + 30
    while made and time.monotonic() < deadline:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    return {"forked": made, "failure": failure}


def _write_big(path, limit_bytes):
    """Writes zeros to path until limit_bytes or a failure; returns what was written."""
    chunk = b"\0" * (1 << 20)
    written = 0
    failure = None
    try:
        with open(path, "wb") as f:
            while written < limit_bytes:
                f.write(chunk)
                f.flush()
                written += len(chunk)
    except OSError as exc:
        failure = errno.errorcode.get(exc.errno, str(exc.errno))
    try:
        os.unlink(path)
    except OSError:
        pass
    return {"written": written, "failure": failure}


def run(t):
    """Every probe against the targets t; see the module's docstring."""
    env = dict(os.environ)
    out = {
        "uid": os.getuid(),
        "hostname": socket.gethostname(),
        "env_names": sorted(env),
        "secret_values_seen": [s for s in t["secrets"] if any(s in v for v in env.values())],
        "read_token_file": _attempt(lambda: _read(t["token_file"])),
        "read_key_file": _attempt(lambda: _read(t["key_file"])),
        "read_store": _attempt(lambda: _read(os.path.join(t["data_dir"], "opforge.db"))),
        "list_data_dir": _attempt(lambda: os.listdir(t["data_dir"])),
        "read_server_environ": _attempt(lambda: _read("/proc/%d/environ" % t["server_pid"])),
        "proc_pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
        "read_shadow": _attempt(lambda: _read("/etc/shadow")),
        "connect_server": _attempt(lambda: _connect(t["server_port"])),
        "connect_other": _attempt(lambda: _connect(t["other_port"])),
        "write_usr": _attempt(lambda: _write("/usr/opforge-probe")),
        "write_root": _attempt(lambda: _write("/opforge-probe")),
        "write_data_dir": _attempt(lambda: _write(os.path.join(t["data_dir"], "probe"))),
        "write_evaluator_dir": _attempt(lambda: _write(os.path.join(t["evaluator_dir"],
                                                                   "probe"))),
        "write_scratch": _attempt(lambda: _write("/tmp/opforge-probe")),
    }
    if t.get("harmless"):  # unsandboxed: nothing that would hurt the host
        return out
    out["signal_server"] = _attempt(lambda: os.kill(t["server_pid"], signal.SIGTERM))
    out["fork_10000"] = _attempt(lambda: _fork_many(10000))
    out["write_10GB"] = _attempt(lambda: _write_big("/tmp/opforge-big", 10 << 30))
    return out


def report(t):
    """Runs the probes and writes the report line to stderr."""
    sys.stderr.write("OPFORGE_PROBE_REPORT %s\n" % json.dumps(run(t), sort_keys=True))
    sys.stderr.flush()
