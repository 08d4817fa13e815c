# Fixtures for the evaluator tests: a protocol client that runs the evaluator (gpu/evaluator/main.py) as a subprocess, the evaluator package imported in-process, the KernelBench tasks, and a fake GPU library.
import importlib
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
EVALUATOR = REPO / "gpu" / "evaluator" / "main.py"


def gpu_script(name):
    """The module tests/gpu/<name>.py (the GPU host's standalone scripts), imported with
    that folder on sys.path, as the scripts import each other."""
    folder = str(REPO / "tests" / "gpu")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(name)


def find_kernelbench():
    """The KernelBench task folder: $OPFORGE_KERNELBENCH, else
    $OPFORGE_SOURCE_ROOT/../shared/kernelbench, else ../shared/kernelbench from the repo
    root. None when absent."""
    candidates = []
    if os.environ.get("OPFORGE_KERNELBENCH"):
        candidates.append(Path(os.environ["OPFORGE_KERNELBENCH"]))
    if os.environ.get("OPFORGE_SOURCE_ROOT"):
        candidates.append(Path(os.environ["OPFORGE_SOURCE_ROOT"]) / ".." / "shared" / "kernelbench")
    candidates.append(REPO.parent / "shared" / "kernelbench")
    for c in candidates:
        if (c / "level1").is_dir():
            return c.resolve()
    return None


@pytest.fixture(scope="session")
def kernelbench():
    d = find_kernelbench()
    if d is None:
        pytest.skip("KernelBench tasks not found: set OPFORGE_KERNELBENCH or provide "
                    "../shared/kernelbench next to the repository")
    return d


@pytest.fixture(scope="session")
def ev_module():
    """The evaluator package (gpu/evaluator/) imported as `evaluator`, with its modules
    as attributes (ev_module.numerics, ...): patch a constant in the module that uses
    it."""
    gpu_dir = str(REPO / "gpu")
    if gpu_dir not in sys.path:
        sys.path.insert(0, gpu_dir)
    mod = importlib.import_module("evaluator")
    assert Path(mod.__file__).parent == EVALUATOR.parent, mod.__file__
    return mod


class EvaluatorProcess:
    """The evaluator (gpu/evaluator/main.py) as a child process, spoken to line by line.
    Replies are read by a thread so that every read can time out."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([sys.executable, str(EVALUATOR), *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=str(REPO))
        self.lines = queue.Queue()
        self.stderr_chunks = []
        self.next_id = 1
        threading.Thread(target=self._pump_stdout, daemon=True).start()
        threading.Thread(target=self._pump_stderr, daemon=True).start()
        self.ready = None

    def _pump_stdout(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _pump_stderr(self):
        for chunk in iter(lambda: self.proc.stderr.read1(65536), b""):
            self.stderr_chunks.append(chunk)

    def stderr_text(self):
        return b"".join(self.stderr_chunks).decode("utf-8", "replace")

    def read_line(self, timeout=60):
        """The next stdout line as bytes, or None at EOF; fails the test on timeout."""
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail("evaluator gave no line within %ss; stderr:\n%s"
                        % (timeout, self.stderr_text()[-3000:]))

    def read_reply(self, timeout=60):
        line = self.read_line(timeout)
        assert line is not None, "evaluator closed stdout; stderr:\n" + self.stderr_text()[-3000:]
        assert line.endswith(b"\n")
        return json.loads(line)

    def wait_ready(self, timeout=120):
        self.ready = self.read_reply(timeout)
        return self.ready

    def send_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def request(self, op, timeout=60, **args):
        """Sends {"id": n, "op": op, **args} and returns the reply, which must carry n."""
        req_id = self.next_id
        self.next_id += 1
        self.send_raw((json.dumps({"id": req_id, "op": op, **args}) + "\n").encode())
        reply = self.read_reply(timeout)
        # A late reply to an earlier request whose wait ran out (that test failed for it)
        # is skipped here, so that it does not fail every later request as well.
        while isinstance(reply.get("id"), int) and reply["id"] < req_id:
            reply = self.read_reply(timeout)
        assert reply["id"] == req_id, reply
        return reply

    def load(self, source, name="task", **args):
        return self.request("load_task", source=source, name=name, **args)

    def peak_rss_bytes(self):
        """VmHWM of the child (peak resident set) in bytes."""
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        return None

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def spawn():
    """Starts evaluator processes with the given arguments; stops them after the test."""
    started = []

    def start(*args):
        p = EvaluatorProcess(*args)
        started.append(p)
        return p

    yield start
    for p in started:
        p.close()


SMALL_HOST_MEM = str(256 << 20)


@pytest.fixture(scope="module")
def cpu_ev():
    """One CPU evaluator shared by a module's tests, with a 256 MiB host-memory share so
    that full-size KernelBench tasks are profiled on meta."""
    p = EvaluatorProcess("--device", "cpu", "--host-mem-bytes", SMALL_HOST_MEM)
    p.wait_ready()
    yield p
    p.close()


def raw_bytes(t):
    """The bytes of a dense tensor (row-major or channels-last) as one uint8 view, as the
    real library sees them from the pointer: its numel elements from its first."""
    return t.as_strided((t.numel(),), (1,)).view(torch.uint8)


class FakeLib:
    """Stands in for libopforge_gpu in in-process tests: a candidate's "source" names a
    Python kernel in `kernels`, called as kernel(tensors_by_name, lib) on the tensors
    the evaluator would pass by pointer. Records every call. Handles are 7, 8, ... in
    prepare order; bind keeps the tensors (by reference, as the real library keeps
    pointers) and enqueue runs the kernel on them."""

    def __init__(self, kernels, median_ms=1.0, timing_reps=4):
        self.kernels = kernels
        self.median_ms = median_ms
        self.timing_reps = timing_reps
        self.calls = []
        self.prepared = []
        self.freed = []
        self.timing = False
        self.run_count = 0
        self.bound = {}

    def open(self, device, cache_dir):
        self.calls.append("open")

    def device_info(self):
        return {}

    def prepare(self, candidate, tensors):
        self.calls.append("prepare")
        self.prepared.append((candidate, tensors))
        src = candidate["source"]
        if src == "compile_error":
            return {"ok": False, "handle": -1,
                    "compile": {"ok": False, "ms": 1.0, "log": "error: expected a ;"},
                    "failure": {"stage": "compile", "class": "compile/syntax_error",
                                "message": "expected a ;"}}
        return {"ok": True, "handle": 6 + len(self.prepared),
                "compile": {"ok": True, "ms": 2.5, "log": "", "cache": "miss"}, "failure": None}

    def source_of(self, handle):
        assert 7 <= handle < 7 + len(self.prepared), handle
        return self.prepared[handle - 7][0]["source"]

    def run(self, handle, named, stream, reset_state=True):
        self.calls.append("run" if reset_state else "run_keep_state")
        if reset_state:  # the real library zeroes buffers and resets module globals
            self.module_state = {}
        self.run_count += 1
        src = self.source_of(handle)
        specs = {s["name"]: s for s in self.prepared[handle - 7][1]["tensors"]}
        for name, t in named:  # the real library poisons outputs (0xff bytes) first
            spec = specs.get(name, {})
            if spec.get("output", name.startswith("output:")) and t.numel():
                raw_bytes(t).fill_(255)
        if src == "sticky":
            return {"ok": False, "sticky": True,
                    "failure": {"stage": "launch", "class": "cuda/CUDA_ERROR_ILLEGAL_ADDRESS",
                                "message": "an illegal memory access was encountered"}}
        if src == "bad_plan":
            return {"ok": False, "sticky": False,
                    "failure": {"stage": "launch", "class": "plan/block_too_large",
                                "message": "launch 0: block of 2048 threads"}}
        self.kernels[src](dict(named), self)
        return {"ok": True, "failure": None, "sticky": False}

    def time(self, handle, named, stream, timing):
        self.calls.append("time")
        self.last_timing = timing
        self.timing = True
        try:
            for _ in range(self.timing_reps):
                r = self.run(handle, named, stream)
                if not r["ok"]:
                    return r
        finally:
            self.timing = False
        return {"ok": True, "median_ms": self.median_ms, "mean_ms": self.median_ms * 1.01,
                "reps": 10, "rse": 0.004}

    def bind(self, handle, named):
        self.calls.append("bind")
        self.bound[handle] = list(named)
        return None

    def enqueue(self, handle, stream):
        self.calls.append("enqueue")
        self.module_state = {}
        src = self.source_of(handle)
        if src == "enqueue_fails":
            return {"ok": False, "sticky": False,
                    "failure": {"stage": "launch", "class": "cuda/CUDA_ERROR_INVALID_VALUE",
                                "message": "launch 0 (kernel 'k'): CUDA_ERROR_INVALID_VALUE"}}
        self.kernels[src](dict(self.bound[handle]), self)
        return None

    def free(self, handle):
        self.calls.append("free")
        self.freed.append(handle)


@pytest.fixture
def fake_lib():
    """The FakeLib class (a factory, so that each test builds its own)."""
    return FakeLib
