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
