# Evaluator candidate checks: one evaluate request (prepare, trials, the robust trial, the accuracy budget, timing, the re-checks and the impossible floor).
"""A CandidateRun owns the handle of its prepared candidate and frees it; the result
dict it returns is the caller's."""

import copy
import math

import torch

from .errors import EvalError, exception_text, sticky_cuda_class
from .layout import LayoutError, in_order, library_candidate, memory_format, parse_channels_last
from .numerics import (TIMING, InputGuard, accuracy_budget, classify_comparison,
                       compare_outputs, max_abs_error, max_abs_finite, poison_,
                       relative_l2_ok)
from .rng import rng_restore, rng_snapshot
from .tensors import dtype_name, flatten_outputs, named_inputs, named_state


class CandidateFailure(Exception):
    """A candidate failed a rule; becomes the result's failure."""

    def __init__(self, stage, cls, message):
        super().__init__(message)
        self.failure = {"stage": stage, "class": cls, "message": message}


class CandidateRun:
    """One evaluate request: prepare, trials, robust trial, accuracy budget, timing and
    the checks. Owns the handle from prepare and frees it."""

    def __init__(self, ev, task, cand):
        self.ev = ev
        self.task = task
        self.cand = cand
        self.lib = ev.lib
        self.handle = None
        self.fatal = False
        self.rng = None  # the current trial's generator states (rng_snapshot)
        self.channels_last = {}  # name -> rank of the tensors the plan addresses channels-last
        # Buffers the reference's own forward changes: no candidate is blamed for them.
        self.mutable = set(task.profile.get("mutable_buffers") or []) if task.profile else set()
        self.result = {"compile": None, "correct": False, "trials": [], "robust": None,
                       "accuracy": None,
                       "checks": {"inputs_unchanged": None, "outputs_written": None,
                                  "repeat_consistent": None, "above_floor": None},
                       "time": None, "speedup": None, "floor_fraction": None,
                       "failure": None}

    def stream(self):
        """The current CUDA stream as an integer (0 off CUDA)."""
        return torch.cuda.current_stream().cuda_stream if self.ev.is_cuda else 0

    def _prepare(self):
        """Compiles and loads the candidate; returns False (the result's failure set)
        when it cannot run."""
        if not self._read_layout():
            return False
        prep = self.lib.prepare(library_candidate(self.cand), self.task.specs)
        self.result["compile"] = prep.get("compile")
        if not prep.get("ok") and prep.get("sticky"):
            self._library_failure(prep)
        if not prep.get("ok"):
            self.result["failure"] = prep.get("failure") or {
                "stage": "compile", "class": "compile/unknown", "message": "prepare failed"}
            return False
        self.handle = prep.get("handle")
        return True

    def _read_layout(self):
        """self.channels_last from the plan's channels_last list (tensors of the profile
        its launches pass, of rank 4 or 5); False with the result's failure set when the
        list breaks a rule, a plan failure as libopforge_gpu reports one."""
        shapes = {s["name"]: s.get("shape") for s in (self.task.profile.get("inputs", [])
                                                      + self.task.profile.get("params", [])
                                                      + self.task.profile.get("outputs", []))}
        try:
            self.channels_last = parse_channels_last(self.cand["plan"], shapes.get)
        except LayoutError as err:
            cls = "plan/unknown_tensor" if err.kind == "unknown_tensor" else "plan/malformed"
            self.result["failure"] = {"stage": "launch", "class": cls,
                                      "message": "plan: %s" % err}
            return False
        return True

    def _free(self):
        """Releases what _prepare made (not after a sticky error: the context is gone)."""
        if self.handle is not None and not self.fatal:
            try:
                self.lib.free(self.handle)
            except Exception:
                pass

    def run(self):
        """Returns the evaluation result; raises EvalError(fatal) on a sticky error."""
        if not self._prepare():
            self._free()
            return self.result
        try:
            with self.ev.gpu:
                self._verify_and_time()
            self.result["correct"] = True
        except CandidateFailure as fail:
            self.result["failure"] = fail.failure
        except EvalError as err:
            if err.fatal:
                err.result = self.result
            raise
        except Exception as exc:
            cls = sticky_cuda_class(exc) if self.ev.is_cuda else None
            if cls:
                self.fatal = True
                raise EvalError("launch", cls, str(exc)[:2000], exception_text(exc),
                                fatal=True, result=self.result)
            raise
        finally:
            self._free()
            self.ev._release_memory()
        return self.result

    def _verify_and_time(self):
        """Trials, the robust trial, then timing and the re-checks; raises
        CandidateFailure on the first rule broken."""
        task = self.task
        last = None
        for t in range(task.trials):
            seed = task.seed + t
            last = self._trial(seed, robust=False, f64=(t == 0 and task.precision == "fp32"))
        self._trial(task.seed + task.trials, robust=True, f64=False)
        self.result["checks"]["inputs_unchanged"] = True
        self.result["checks"]["outputs_written"] = True
        self._time_and_recheck(last)

    def _launch(self, named, reset_state=True):
        """Runs the plan once; a library failure becomes a candidate failure, a sticky
        one a fatal error."""
        r = self.lib.run(self.handle, named, self.stream(), reset_state=reset_state)
        if not r.get("ok"):
            self._library_failure(r)

    def _library_failure(self, r, prefix=""):
        """Raises the failure a library reply carries: fatal (EvalError) when sticky,
        else a CandidateFailure. prefix goes before the message (a program's step)."""
        fail = dict(r.get("failure") or {"stage": "launch", "class": "launch/unknown",
                                         "message": "the library reported a failure"})
        fail["message"] = prefix + fail.get("message", "")
        if r.get("sticky"):
            self.result["failure"] = fail
            self.fatal = True
            raise EvalError(fail.get("stage", "launch"), fail.get("class", "cuda/unknown"),
                            fail.get("message", ""), fatal=True, result=self.result)
        raise CandidateFailure(fail.get("stage", "launch"), fail.get("class", "launch/unknown"),
                               fail.get("message", ""))

    def _reference(self, inputs):
        """Fresh reference outputs of the task model on inputs (new tensors), drawing
        the trial's random numbers."""
        rng_restore(self.rng)
        with torch.no_grad():
            return [t.contiguous() for t in flatten_outputs(self.task.model(*inputs))]

    def _named(self, inputs, outs):
        """[(name, tensor)] the plan sees: inputs, parameters and buffers (detached, dense
        in the order the plan addresses them: channels-last when its plan lists them,
        sharing storage when already so) and the outputs."""
        named = [(n, in_order(t.detach(), n in self.channels_last))
                 for n, t in named_inputs(inputs)]
        named += [(n, in_order(t.detach(), n in self.channels_last))
                  for n, t in named_state(self.task.model)]
        named += [("output:%d" % i, t) for i, t in enumerate(outs)]
        return named

    def _clone_budget(self):
        """Bytes the input guard may spend on copies: a quarter of what is left under the
        memory cap in force (all of a CPU test's)."""
        if not self.ev.is_cuda:
            return 1 << 62
        total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
        left = self.ev.memory_cap * total - torch.cuda.memory_reserved()
        return max(0, int(left / 4))

    def _stage(self, inputs, refs):
        """What one run of the candidate needs on inputs: (state for _execute, the
        [(name, tensor)] the input guard watches). Here: the poisoned outputs and the
        named tensors of the plan."""
        outs = self._alloc_outputs(refs)
        named = self._named(inputs, outs)
        return (outs, named), [p for p in named if not p[0].startswith("output:")
                               and p[0] not in self.mutable]

    def _execute(self, staged):
        """Runs the candidate once (checked) on what _stage made; returns its outputs."""
        outs, named = staged
        self._launch(named)
        return outs

    def _after_checks(self, staged, inputs, refs, record, robust):
        """Further runs of the same trial, after its outputs passed (programs replay
        their CUDA graph here)."""

    def _trial(self, seed, robust, f64):
        """One trial on fresh inputs; returns (inputs, refs, outs, staged) for reuse."""
        task = self.task
        inputs = self.ev.make_inputs(task, seed, robust)
        self.rng = rng_snapshot(self.ev.is_cuda)
        refs = self._reference(inputs)
        staged, guarded = self._stage(inputs, refs)
        guard = InputGuard(guarded, self._clone_budget())
        rng_restore(self.rng)
        outs = self._execute(staged)
        record = {"seed": seed, "ok": True, "max_abs": 0.0, "max_rel": 0.0}
        if robust:
            self.result["robust"] = record
        else:
            self.result["trials"].append(record)
        changed = guard.changed()
        del guard
        self._judge(record, changed, inputs, refs, outs, robust)
        self._after_checks(staged, inputs, refs, record, robust)
        if f64:
            self._accuracy_budget(inputs, refs, outs)
        return inputs, refs, outs, staged

    def _judge(self, record, changed, inputs, refs, outs, robust, what=""):
        """The checks of one run: inputs unchanged (changed: what the input guard
        found), then every output against refs, a mismatch of an fp32 task judged by the
        float64 budget. what names the run in messages (a program's graph replay). Raises
        the first failure."""
        # Inputs first: outputs compared against a reference of inputs the candidate
        # has since overwritten say less than the overwrite itself.
        if changed:
            record["ok"] = False
            self.result["checks"]["inputs_unchanged"] = False
            raise CandidateFailure("check", "check/inputs_modified",
                                   "%sthe candidate modified %s" % (what, ", ".join(changed)))
        try:
            self._check_outputs(record, outs, refs, robust)
        except CandidateFailure as failure:
            if not (failure.failure["class"] in ("correctness/mismatch",
                                                 "correctness/robust_mismatch")
                    and self._within_float64_budget(
                        inputs, refs, outs, "robust_accuracy" if robust else "trial_accuracy")):
                failure.failure["message"] = what + failure.failure["message"]
                raise
            record["ok"] = True
            record["judged_by"] = "float64 accuracy budget"

    def _within_float64_budget(self, inputs, refs, outs, key):
        """Whether outputs that failed the element-wise comparison still pass on
        accuracy. Where sums cancel (randn inputs, or a row sum of a GEMM's signed
        outputs) two fp32 summation orders differ by more than atol + rtol * |ref|, and
        the fp32 eager reference is no closer to the truth than the candidate; such a
        candidate passes when it is as accurate as eager against a float64 reference
        (the accuracy budget, recorded under result[key]). fp32 tasks with floating
        outputs only: an integer output has no budget."""
        return (self.task.precision == "fp32"
                and all(o.dtype.is_floating_point for o in outs)
                and self._accuracy_budget(inputs, refs, outs, key=key, raise_on_fail=False))

    def _check_reference(self, refs):
        """Raises evaluate/reference_changed when a reference output's dtype or shape
        is not the profile's."""
        for i, (spec, ref) in enumerate(zip(self._output_specs(), refs)):
            if list(ref.shape) != spec["shape"] or dtype_name(ref.dtype) != spec["dtype"]:
                raise EvalError("load", "evaluate/reference_changed",
                                "output:%d of the reference is %s %s, the profile says %s %s"
                                % (i, dtype_name(ref.dtype), list(ref.shape),
                                   spec["dtype"], spec["shape"]))

    def _alloc_outputs(self, refs):
        """New output tensors shaped like the profile says (channels-last when the plan
        lists them), filled with the poison pattern."""
        self._check_reference(refs)
        outs = []
        for i, ref in enumerate(refs):
            fmt = memory_format(ref.dim()) if "output:%d" % i in self.channels_last else None
            out = torch.empty_like(ref, memory_format=fmt or torch.contiguous_format)
            poison_(out, ref)
            outs.append(out)
        return outs

    def _output_specs(self):
        """The output entries of the task profile."""
        return self.task.profile["outputs"]

    def _check_outputs(self, record, outs, refs, robust):
        """Compares every output; raises the first failure."""
        task = self.task
        degenerate = bool(task.profile.get("degenerate"))
        for i, (out, ref) in enumerate(zip(outs, refs)):
            cmp = compare_outputs(out, ref, task.atol, task.rtol)
            record["max_abs"] = max(record["max_abs"], cmp["max_abs"])
            record["max_rel"] = max(record["max_rel"], cmp["max_rel"])
            verdict = classify_comparison("output:%d" % i, cmp)
            if verdict is None and degenerate and out.dtype.is_floating_point:
                diff, refn = math.sqrt(cmp["diff_sq"]), math.sqrt(cmp["ref_sq"])
                record["rel_l2"] = diff / refn if refn > 0 else (0.0 if diff == 0 else math.inf)
                if not relative_l2_ok(diff, refn, task.rtol, cmp["numel"]):
                    verdict = ("correctness/relative_error",
                               "output:%d: relative L2 error %.3g over rtol %g (the task's "
                               "outputs are all within atol of zero)"
                               % (i, record["rel_l2"], task.rtol))
            if verdict is not None:
                record["ok"] = False
                cls, msg = verdict
                if cls == "correctness/unwritten_output":
                    self.result["checks"]["outputs_written"] = False
                elif cls == "correctness/mismatch" and robust:
                    cls = "correctness/robust_mismatch"
                    msg = "randn inputs: " + msg
                raise CandidateFailure("correctness", cls, msg)

    def _accuracy_budget(self, inputs, refs, outs, key="accuracy", raise_on_fail=True):
        """The fp32 accuracy budget (docs/architecture.md, "Evaluation rules") against a
        float64 reference,
        recorded under result[key]. Raises on a broken budget when raise_on_fail, else
        returns whether every output kept within it (False when it could not be
        computed)."""
        try:
            model64 = copy.deepcopy(self.task.model).double()
            in64 = [t.double() if isinstance(t, torch.Tensor) and t.dtype.is_floating_point
                    else t for t in inputs]
            rng_restore(self.rng)
            with torch.no_grad():
                refs64 = flatten_outputs(model64(*in64))
            del model64, in64
        except Exception as exc:
            if self.ev.is_cuda and sticky_cuda_class(exc):
                raise
            self.ev._release_memory()
            if isinstance(exc, torch.OutOfMemoryError):
                # Out of memory says nothing about the candidate: it is the machine's
                # failure (evaluate/out_of_memory), never a mismatch the budget could not
                # excuse (seen with 4 evaluator slots sharing one GPU).
                raise
            self.result[key] = {"skipped": "float64 reference failed: %s: %s"
                                % (type(exc).__name__, str(exc)[:300])}
            return False
        acc = {"factor": self.task.accuracy_factor, "outputs": []}
        self.result[key] = acc
        for i, (out, ref, r64) in enumerate(zip(outs, refs, refs64)):
            if not out.dtype.is_floating_point:
                continue
            eager_err = max_abs_error(ref, r64)
            cand_err = max_abs_error(out, r64)
            max_ref = max_abs_finite(r64)
            budget = accuracy_budget(eager_err, max_ref, acc["factor"])
            acc["outputs"].append({"name": "output:%d" % i, "candidate_err": cand_err,
                                   "eager_err": eager_err, "max_ref": max_ref,
                                   "budget": budget})
            if not cand_err <= budget:
                if not raise_on_fail:
                    return False
                raise CandidateFailure(
                    "correctness", "correctness/accuracy_budget",
                    "output:%d: error against float64 %.3g exceeds the budget %.3g "
                    "(%gx the fp32 eager error %.3g)" % (i, cand_err, budget, acc["factor"],
                                                        eager_err))
        return True

    def _time_and_recheck(self, last):
        """Times the plan, re-verifies the output left by the timing loop and once more
        with new values in the same buffers, then applies the impossible floor."""
        inputs, refs, outs, (_, named) = last
        timing = self.lib.time(self.handle, named, self.stream(), dict(TIMING))
        if not timing.get("ok"):
            self._library_failure(timing)
        self.result["time"] = {k: timing.get(k) for k in ("median_ms", "mean_ms", "reps", "rse")}
        self._recheck(inputs, outs, refs, "after the timing loop")
        # New values in the very buffers the candidate saw: a kernel that caches its
        # result by pointer, or only computes on its first call, returns stale data.
        fresh = self.ev.make_inputs(self.task, self.task.seed + self.task.trials + 1)
        self.rng = rng_snapshot(self.ev.is_cuda)
        for (_, old), (_, new) in zip(named_inputs(inputs), named_inputs(fresh)):
            old.copy_(new)
        del fresh
        for (_, seen), (_, src) in zip(named, named_inputs(inputs)):
            if seen.data_ptr() != src.data_ptr():
                seen.copy_(src)
        refs = self._reference(inputs)
        for out, ref in zip(outs, refs):
            poison_(out, ref)
        # State kept from the timing loop's last run (module globals, scratch buffers)
        # is left in place, so a kernel that remembers its first call shows itself.
        self._launch(named, reset_state=False)
        self._recheck(inputs, outs, refs, "with new input values in the same buffers")
        self.result["checks"]["repeat_consistent"] = True
        self._apply_floor()

    def _recheck(self, inputs, outs, refs, when):
        """Compares outputs again, by the rules of a trial; a difference is
        check/repeat_inconsistent. A mismatch the float64 budget excuses is marked like a
        trial's: result["recheck_accuracy"]["judged_by"]."""
        for i, (out, ref) in enumerate(zip(outs, refs)):
            cmp = compare_outputs(out, ref, self.task.atol, self.task.rtol)
            verdict = classify_comparison("output:%d" % i, cmp)
            if verdict is None:
                continue
            if (verdict[0] == "correctness/mismatch"
                    and self._within_float64_budget(inputs, refs, outs, "recheck_accuracy")):
                self.result["recheck_accuracy"]["judged_by"] = "float64 accuracy budget"
                continue
            self.result["checks"]["repeat_consistent"] = False
            raise CandidateFailure("check", "check/repeat_inconsistent",
                                   "%s: %s" % (when, verdict[1]))

    def _apply_floor(self):
        """Speed-ups, floor fraction, and the impossible-floor check. The speed-up over
        eager is against eager timed in turn with this candidate when the result has that
        (result["eager"], programs of library steps only), else the profile's."""
        prof = self.task.profile
        median = self.result["time"].get("median_ms")
        if not isinstance(median, (int, float)) or median <= 0:
            return
        paired = self.result.get("eager") or {}
        eager, comp = paired.get("median_ms") or prof.get("eager_ms"), prof.get("compile_ms")
        self.result["speedup"] = {"eager": eager / median if eager else None,
                                  "compile": comp / median if comp else None}
        floor = prof.get("floor_ms")
        self.result["floor_fraction"] = floor / median if floor else None
        impossible = prof.get("impossible_ms")
        if impossible is None:
            return
        self.result["checks"]["above_floor"] = median >= impossible
        if median < impossible:
            raise CandidateFailure("check", "check/below_floor",
                                   "median %.4g ms is below the impossible floor %.4g ms"
                                   % (median, impossible))
