# Unit tests of tests/gpu/export_check.py's timing: Model and ModelNew are timed rep by rep in turn, each after 3 warm-ups, medians computed by hand against a fake clock.

import pytest

from conftest import gpu_script


@pytest.fixture(scope="module")
def export_check():
    return gpu_script("export_check")


class FakeClock:
    """A clock whose time moves only when a fake function runs."""

    def __init__(self):
        self.now = 0.0

    def mark(self):
        return self.now

    def elapsed_ms(self, start, end):
        return end - start


def test_timed_in_turn_alternates_and_takes_medians(export_check):
    clock, calls = FakeClock(), []
    durations = {"ref": iter([9, 9, 9, 1.0, 5.0, 3.0, 2.0, 4.0]),
                 "new": iter([9, 9, 9, 10.0, 30.0, 20.0, 50.0, 40.0])}

    def fn(name):
        def run(x):
            assert x == "input"
            calls.append(name)
            clock.now += next(durations[name])
        return run

    got = export_check.timed_in_turn([fn("ref"), fn("new")], ["input"], reps=5, clock=clock)
    # 3 warm-ups of each, then the reps in turn
    assert calls == ["ref", "new"] * 8
    # medians of the timed reps: ref (1, 5, 3, 2, 4) -> 3; new (10, 30, 20, 50, 40) -> 30
    assert got == [3.0, 30.0]


def test_export_check_takes_the_evaluators_device_lock(export_check, ev_module, monkeypatch):
    """On a GPU, the check's lock is the evaluator's own lock file for that device (the
    same flock, so a server's slots and the check never run kernels at once); off CUDA it
    is a no-op lock."""
    torch = export_check.torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert export_check.device_lock().path is None

    class Props:
        uuid = "GPU-1234abcd-0000"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: Props())
    lock = export_check.device_lock()
    assert lock.path == ev_module.DeviceLock.path_for(Props(), 3)
    assert lock.path.endswith("opforge-gpu-GPU-1234abcd-0000.lock")
