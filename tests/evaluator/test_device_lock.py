# Unit tests of the evaluator's device lock: exclusive between processes, re-entrant within one, a no-op without a path.
import fcntl
import os
import subprocess
import sys
import types

import pytest

PROBE = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("free")
except BlockingIOError:
    print("held")
"""


def probe(path):
    """What another process finds when it tries the lock without waiting."""
    out = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True,
                         text=True, timeout=60, check=True)
    return out.stdout.strip()


def test_lock_excludes_other_processes_until_the_outer_exit(ev_module, tmp_path):
    path = tmp_path / "gpu.lock"
    lock = ev_module.DeviceLock(str(path))
    with lock:
        assert probe(path) == "held"
        with lock:  # re-entrant: nested stretches (time_fn inside a profile) do not block
            assert lock.depth == 2
        assert lock.depth == 1
        assert probe(path) == "held"
    assert lock.depth == 0
    assert probe(path) == "free"


def test_lock_waits_for_another_holder(ev_module, tmp_path):
    path = tmp_path / "gpu.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, os, sys, time\n"
         "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(0.5)\n",
         str(path)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    lock = ev_module.DeviceLock(str(path))
    with lock:
        # The holder lets go as it exits; its exit status may show up a moment after the
        # lock is free, so wait for it rather than poll. waited_s shows the exclusion.
        assert holder.wait(timeout=60) == 0
    assert lock.waited_s > 0.1


def test_lock_without_path_is_a_no_op(ev_module):
    lock = ev_module.DeviceLock(None)
    with lock:
        with lock:
            pass
    assert lock.fd is None and lock.depth == 0


def test_lock_path_is_per_physical_device(ev_module):
    props = types.SimpleNamespace(uuid="GPU-1234abcd-5678/../x")
    path = ev_module.DeviceLock.path_for(props, 3)
    assert os.path.basename(path) == "opforge-gpu-GPU-1234abcd-5678x.lock"
    assert ev_module.DeviceLock.path_for(types.SimpleNamespace(), 3).endswith(
        "opforge-gpu-index-3.lock")
