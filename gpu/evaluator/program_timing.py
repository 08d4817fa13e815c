# Evaluator timing of programs: the eager timing method (CUDA events, L2 flush, warm-ups, reps until RSE < 1%, median) applied to a whole program run, the same in turn with eager, the per-step breakdown, and the limits that keep a slow program's evaluate request bounded.
"""Nothing here keeps references to the tensors the timed functions touch. Off CUDA
(the CPU tests) the same loops run on time.perf_counter."""

import statistics
import time

import torch

from .numerics import TIMING, rse, timing_should_stop

# A program whose one run takes longer than this many ms is timed with fewer reps, so
# that its evaluate request (trials, two timed modes, the breakdown, the re-checks) stays
# well inside the supervisor's deadline (60 s by default).
PROGRAM_SLOW_MS = 50.0
SLOW_TIMING = {"warmup": 1, "min_reps": 3, "max_reps": 10}
PROGRAM_TIMING_SECONDS = 10.0     # wall time per timed mode once min_reps are in
BREAKDOWN_REPS = 10
SLOW_BREAKDOWN_REPS = 3


def timing_limits(one_run_ms):
    """(timing overrides, breakdown reps) for a program whose one run took one_run_ms."""
    if one_run_ms is not None and one_run_ms > PROGRAM_SLOW_MS:
        return dict(SLOW_TIMING), SLOW_BREAKDOWN_REPS
    return {}, BREAKDOWN_REPS


class Clock:
    """Marks on the current stream (CUDA events) or on the host clock (CPU)."""

    def __init__(self, cuda):
        self.cuda = cuda

    def mark(self):
        if not self.cuda:
            return time.perf_counter()
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def elapsed_ms(self, a, b):
        """Milliseconds from mark a to mark b (b synchronized first on CUDA)."""
        if not self.cuda:
            return (b - a) * 1e3
        b.synchronize()
        return a.elapsed_time(b)


def time_once(clock, fn):
    """fn's milliseconds, one run after one warm-up run."""
    fn()
    a = clock.mark()
    fn()
    b = clock.mark()
    return clock.elapsed_ms(a, b)


def _stats(samples):
    return {"median_ms": statistics.median(samples), "mean_ms": statistics.fmean(samples),
            "reps": len(samples), "rse": rse(samples)}


def time_program(ev, fn, timing, before, cuda):
    """{"median_ms","mean_ms","reps","rse"} of fn by the eager method (Evaluator.time_fn)
    with timing's overrides; before() runs untimed ahead of each rep."""
    if cuda:
        return ev.time_fn(fn, timing=timing, max_seconds=PROGRAM_TIMING_SECONDS,
                          before=before)
    p = {"warmup": 1, "min_reps": 3, "max_reps": 5, "target_rse": 0.01}
    p.update(timing or {})
    p["max_reps"] = min(p["max_reps"], 5)
    p["min_reps"] = min(p["min_reps"], p["max_reps"])
    for _ in range(p["warmup"]):
        fn()
    samples = []
    while not timing_should_stop(samples, p["min_reps"], p["max_reps"], p["target_rse"]):
        if before is not None:
            before()
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return _stats(samples)


def time_in_turn(ev, fn, other, timing, before, cuda):
    """(stats of fn, stats of other), each {"median_ms","mean_ms","reps","rse"}: the two
    timed rep by rep in turn by the eager method (before() untimed ahead of each run of
    fn, an L2 flush ahead of every run on CUDA), so that drift of the GPU's clocks and
    power over the loop reaches both alike. Stops once both RSEs are below the target
    (at least min_reps each), at max_reps, or after PROGRAM_TIMING_SECONDS once min_reps
    are in. Off CUDA the host clock and at most 5 reps."""
    p = dict(TIMING, **(timing or {}))
    max_seconds = PROGRAM_TIMING_SECONDS
    if not cuda:
        p.update(warmup=1, min_reps=min(p["min_reps"], 3), max_reps=min(p["max_reps"], 5))
    clock = Clock(cuda)
    for _ in range(p["warmup"]):
        fn()
        other()
    samples = ([], [])
    started = time.monotonic()
    while True:
        for f, got, prep in ((fn, samples[0], before), (other, samples[1], None)):
            if prep is not None:
                prep()
            if cuda:
                ev.flush_l2()
            a = clock.mark()
            f()
            got.append(clock.elapsed_ms(a, clock.mark()))
        if all(timing_should_stop(s, p["min_reps"], p["max_reps"], p["target_rse"])
               for s in samples):
            break
        if len(samples[0]) >= p["min_reps"] and time.monotonic() - started > max_seconds:
            break
    return _stats(samples[0]), _stats(samples[1])


def step_breakdown(ev, run_marked, n_steps, reps, cuda):
    """Median milliseconds of each step over reps runs in stream order: run_marked(marks)
    runs the program once calling marks(i) before step i and marks(n_steps) after the
    last; an L2 flush precedes each run on CUDA."""
    clock = Clock(cuda)
    per_step = [[] for _ in range(n_steps)]
    for _ in range(reps):
        if cuda:
            ev.flush_l2()
        got = [None] * (n_steps + 1)

        def marks(i, got=got):
            got[i] = clock.mark()

        run_marked(marks)
        for i in range(n_steps):
            per_step[i].append(clock.elapsed_ms(got[i], got[i + 1]))
    return [statistics.median(s) if s else None for s in per_step]
