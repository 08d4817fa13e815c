# Evaluator program candidates: one evaluate request of a program (regions prepared one by one, trials in stream order and by CUDA graph replay, timing of both orders, the per-step breakdown, the re-checks and the floor).
"""A ProgramRun owns the handles of its prepared regions, its workspace and its
ProgramGraph, and frees them; the result dict it returns is the caller's. Every rule of
docs/architecture.md "Evaluation rules" applies to the whole program, as CandidateRun
applies it to one plan."""

import torch

from .candidate import CandidateFailure, CandidateRun
from .cudagraph import ProgramGraph
from .errors import EvalError, exception_text, sticky_cuda_class
from .numerics import InputGuard, poison_
from .program import ProgramError, parse_program, random_nodes
from .program_exec import ProgramRunner, RegionFailure, StepError
from .program_timing import (Clock, step_breakdown, time_in_turn, time_once, time_program,
                             timing_limits)
from .rng import rng_restore, rng_snapshot
from .tensors import named_inputs, named_state

COMPILE_LOG_CAP = 64 * 1024


class ProgramRun(CandidateRun):
    """One evaluate request of a candidate {"program": {...}}. graph_class and
    graph_needs_cuda let the CPU tests stand a host-side graph in for the CUDA one."""

    graph_class = ProgramGraph
    graph_needs_cuda = True

    def __init__(self, ev, task, cand):
        super().__init__(ev, task, cand)
        self.program = None
        self.handles = {}        # region step index -> prepared handle
        self.runner = None
        self.ws = None           # the regions' outputs in stream order
        self.pgraph = None       # ProgramGraph, when captured
        self.graph_tried = False
        self.last_outs = None    # outputs of the last fast stream-order run
        self.result.update({"steps_ms": None, "library_ms": None,
                            "graph": {"mode": None, "captured": False, "used": None,
                                      "reason": None, "stream_ms": None, "graph_ms": None}})

    # -- prepare and free

    def _prepare(self):
        """Validates the program and prepares each region as its own candidate; returns
        False with the result's failure set when the program cannot run."""
        try:
            self.program = parse_program(self.cand["program"], self.task.profile,
                                         self.task.precision)
        except ProgramError as err:
            self.result["failure"] = {"stage": "load", "class": "load/bad_program",
                                      "message": str(err)[:4096]}
            return False
        self.result["graph"]["mode"] = self.program.mode
        regions = []
        ok = True
        for step in self.program.regions():
            prep = self.lib.prepare(step.candidate, step.specs)
            comp = prep.get("compile") or {}
            regions.append({"step": step.index, "region": step.region, "ok": bool(prep.get("ok")),
                            "ms": comp.get("ms"), "cache": comp.get("cache"),
                            "log": comp.get("log") or ""})
            if prep.get("ok"):
                self.handles[step.index] = prep.get("handle")
                continue
            self.result["compile"] = self._compile_summary(regions)
            if prep.get("sticky"):
                self._library_failure(prep, step.label() + ": ")
            fail = dict(prep.get("failure") or {"stage": "compile", "class": "compile/unknown",
                                                "message": "prepare failed"})
            fail["message"] = "%s: %s" % (step.label(), fail.get("message", ""))
            self.result["failure"] = fail
            ok = False
            break
        self.result["compile"] = self._compile_summary(regions)
        if ok:
            self.runner = ProgramRunner(self.task, self.program, self.lib, self.handles,
                                        self.stream, self.ev._task_dev(self.task))
        return ok

    @staticmethod
    def _compile_summary(regions):
        """The result's compile object: every region's, summed ("regions" lists each)."""
        log = "\n".join("step %d (region %s):\n%s" % (r["step"], r["region"], r["log"])
                        for r in regions if r["log"])
        return {"ok": all(r["ok"] for r in regions), "ms": sum(r["ms"] or 0.0 for r in regions),
                "log": log[:COMPILE_LOG_CAP],
                "regions": [{k: v for k, v in r.items() if k != "log"} for r in regions]}

    def _free(self):
        if self.pgraph is not None:
            self.pgraph.release()
            self.pgraph = None
        self.ws = None
        self.last_outs = None
        if self.fatal:
            return
        for handle in self.handles.values():
            try:
                self.lib.free(handle)
            except Exception:
                pass

    # -- failures

    def _step_failure(self, exc):
        """Raises what a failed step means: the library's failure for a region, fatal
        for a sticky CUDA error, else a candidate failure naming the step."""
        if isinstance(exc, RegionFailure):
            self._library_failure(exc.reply, exc.step.label() + ": ")
        inner = exc.exc if isinstance(exc, StepError) else exc
        label = exc.step.label() if isinstance(exc, StepError) else "program"
        cls = sticky_cuda_class(inner) if self.ev.is_cuda else None
        if cls:
            self.fatal = True
            raise EvalError("launch", cls, "%s: %s" % (label, str(inner)[:2000]),
                            exception_text(inner), fatal=True, result=self.result)
        kind = "out_of_memory" if isinstance(inner, torch.OutOfMemoryError) else type(inner).__name__
        raise CandidateFailure("launch", "library/%s" % kind,
                               "%s: %s: %s" % (label, type(inner).__name__, str(inner)[:2000]))

    def _guarded(self, fn):
        """fn()'s value; a failed step becomes the failure it means (_step_failure)."""
        try:
            return fn()
        except (RegionFailure, StepError) as exc:
            self._step_failure(exc)

    def _run_checked(self, inputs, ws, reset_state=True):
        return self._guarded(lambda: self.runner.run(inputs, ws, checked=True,
                                                     reset_state=reset_state))

    def _fast(self, inputs):
        """One stream-order run with enqueued regions; keeps its outputs."""
        self.last_outs = self._guarded(lambda: self.runner.run(inputs, self.ws, checked=False))

    @staticmethod
    def _poison_ws(ws):
        """Fills every region output with the poison pattern, so that a value a region
        leaves unwritten shows (as NaN, or as a mismatch downstream)."""
        for t in ws.values():
            poison_(t, t)

    # -- trials

    def _verify_and_time(self):
        self.ws = self.runner.new_workspace()
        super()._verify_and_time()

    def _stage(self, inputs, refs):
        """The trial's inputs; the guard watches the inputs and the model's state
        (less the buffers the reference's own forward changes)."""
        self._check_reference(refs)
        guarded = [(n, t.detach()) for n, t in named_inputs(inputs) + named_state(self.task.model)
                   if n not in self.mutable]
        return inputs, guarded

    def _execute(self, inputs):
        self._poison_ws(self.ws)
        return self._run_checked(inputs, self.ws)

    def _after_checks(self, staged, inputs, refs, record, robust):
        """After the stream-order run of a trial passed: capture the graph (first trial),
        then check a replay of it on the same fresh inputs."""
        if not self.graph_tried:
            self._setup_graph(inputs)
        if self.pgraph is None:
            return
        g = self.pgraph
        g.load(inputs)
        guard = InputGuard([(n, t.detach()) for n, t in named_inputs(g.static_inputs)
                            + named_state(self.task.model) if n not in self.mutable],
                           self._clone_budget())
        self._poison_ws(g.ws)
        g.graph.replay()
        changed = guard.changed()
        del guard
        rep = {"ok": True, "max_abs": 0.0, "max_rel": 0.0}
        record["replay"] = rep
        try:
            self._judge(rep, changed, inputs, refs, g.outputs, robust, what="graph replay: ")
        except CandidateFailure:
            record["ok"] = False
            raise

    def _setup_graph(self, seed_inputs):
        """Captures the program once (graph "true" or "auto") unless it cannot be: the
        reason goes to the result's graph.reason and the program runs in stream order."""
        self.graph_tried = True
        info = self.result["graph"]
        if self.program.mode == "false":
            info["reason"] = "graph false: stream order"
            return
        if self.graph_needs_cuda and not self.ev.is_cuda:
            info["reason"] = "no CUDA device: stream order"
            return
        rnd = random_nodes(self.program, self.task.profile.get("graph"), self.task.traced,
                           self.task.model)
        if rnd:
            info["reason"] = ("random ops (%s) would draw new numbers on every replay: stream "
                              "order" % ", ".join(rnd[:8]))
            return
        try:
            self.pgraph = self.graph_class(self.runner, seed_inputs)
            info["captured"] = True
        except Exception as exc:
            self.pgraph = None
            if isinstance(exc, RegionFailure) and exc.reply.get("sticky"):
                self._step_failure(exc)
            inner = exc.exc if isinstance(exc, StepError) else exc
            if not isinstance(exc, RegionFailure) and sticky_cuda_class(inner):
                self._step_failure(exc)
            info["reason"] = ("capture failed: %s: %s: stream order"
                              % (type(inner).__name__, str(exc)[:500]))
            self.ev._release_memory()

    # -- timing and re-checks

    def _time_and_recheck(self, last):
        """Times stream order and/or graph replay, keeps the faster (graph "auto"), then
        re-checks in the order used, breaks the time down by step and applies the
        impossible floor."""
        inputs, refs, _, _ = last
        cuda = self.ev.is_cuda
        one_ms = self._guarded(lambda: time_once(Clock(cuda), lambda: self._fast(inputs)))
        timing, breakdown_reps = timing_limits(one_ms)
        info = self.result["graph"]
        stream_t = graph_t = None
        if self.pgraph is None or self.program.mode != "true":
            stream_t = time_program(self.ev, lambda: self._fast(inputs), timing,
                                    lambda: self._poison_ws(self.ws), cuda)
        if self.pgraph is not None:
            g = self.pgraph
            graph_t = time_program(self.ev, lambda: g.replay(inputs), timing,
                                   lambda: self._poison_ws(g.ws), cuda)
        used = "graph" if graph_t is not None and (
            stream_t is None or graph_t["median_ms"] < stream_t["median_ms"]) else "stream"
        info.update(used=used, stream_ms=stream_t and stream_t["median_ms"],
                    graph_ms=graph_t and graph_t["median_ms"])
        self.result["time"] = dict(graph_t if used == "graph" else stream_t)
        if not self.program.regions():
            self._time_with_eager(inputs, timing, used, cuda)
        self._recheck_program(inputs, refs, used)
        self._breakdown(inputs, breakdown_reps, cuda)
        self._apply_floor()

    def _time_with_eager(self, inputs, timing, used, cuda):
        """A program of library steps only (the reference, the whole model) runs what
        eager runs: it is timed again in turn with eager's forward, rep by rep, and the
        result's time and eager ({"median_ms","mean_ms","reps","rse"}) are that loop's,
        so that the two compare under the same clocks (docs/architecture.md, "One task,
        start to end")."""
        g = self.pgraph
        run = (lambda: g.replay(inputs)) if used == "graph" else (lambda: self._fast(inputs))
        ws = g.ws if used == "graph" else self.ws
        model = self.task.model

        def eager():
            with torch.no_grad():
                model(*inputs)

        mine, theirs = self._guarded(lambda: time_in_turn(
            self.ev, run, eager, timing, lambda: self._poison_ws(ws), cuda))
        self.result["time"] = mine
        self.result["eager"] = theirs

    def _recheck_program(self, inputs, refs, used):
        """The output the timing loop left, then new values in the very input buffers
        the timed runs saw: a stream-order run that keeps the state the last run left in
        scratch buffers and module globals (a region that remembers its first launch
        returns stale data), and, in graph order, one more replay."""
        g = self.pgraph if used == "graph" else None
        if g is not None:
            self._recheck(inputs, g.outputs, refs, "after the timing loop (graph replay)")
        else:
            self._recheck(inputs, self.last_outs, refs, "after the timing loop")
        target = g.static_inputs if g is not None else inputs
        ws = g.ws if g is not None else self.ws
        fresh = self.ev.make_inputs(self.task, self.task.seed + self.task.trials + 1)
        self.rng = rng_snapshot(self.ev.is_cuda)
        for (_, old), (_, new) in zip(named_inputs(target), named_inputs(fresh)):
            old.copy_(new)
        del fresh
        refs = self._reference(target)
        self._poison_ws(ws)
        rng_restore(self.rng)
        outs = self._run_checked(target, ws, reset_state=False)
        self._recheck(target, outs, refs, "with new input values in the same buffers")
        if g is not None:
            self._poison_ws(g.ws)
            g.graph.replay()
            self._recheck(target, g.outputs, refs,
                          "graph replay with new input values in the same buffers")
        self.result["checks"]["repeat_consistent"] = True

    def _breakdown(self, inputs, reps, cuda):
        """steps_ms (each step's median in stream order) and library_ms (their sum over
        library steps)."""
        steps = self.program.steps

        def run_marked(marks):
            self._guarded(lambda: self.runner.run(inputs, self.ws, checked=False, marks=marks))

        ms = step_breakdown(self.ev, run_marked, len(steps), reps, cuda)
        self.result["steps_ms"] = ms
        self.result["library_ms"] = sum(m for s, m in zip(steps, ms)
                                        if s.kind == "library" and m is not None)
