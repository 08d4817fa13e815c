# The Evaluator: state of one evaluator process (device, GPU library, loaded task) and its operations load_task, profile and evaluate.
"""Ownership: the Evaluator owns the loaded task and the library session; results it
returns are new dicts the caller owns."""

import contextlib
import gc
import os
import statistics
import sys
import time

import torch

from .candidate import CandidateRun
from .device_lock import DeviceLock
from .errors import EvalError, exception_text, sticky_cuda_class
from .graph import extract_graph
from .mutation import forward_changing_state
from .program import GRAPH_MODES
from .program_run import ProgramRun
from .numerics import (COPY_BW_BYTES, TIMING, TIMING_MAX_SECONDS, floor_time_ms,
                       fp32_simt_peak, hbm_peak_from_props, max_abs_finite, rse,
                       tensor_core_peak, timing_should_stop)
from .task import Task, exec_task_source, parse_load_args, seed_all, to_device
from .tensors import (flatten_outputs, json_safe, named_inputs, named_state, nbytes_of,
                      tensor_spec)

# Device memory a process may keep cached between requests; beyond it the cache goes
# back to the driver, for the other worker slots on the GPU (Evaluator._return_idle_cache).
IDLE_CACHE_KEEP_BYTES = 1 << 30
# Waits before the reruns of an evaluate that ran out of device memory (Evaluator.handle).
OOM_RETRY_WAITS_S = (1.0, 5.0)
# The memory cap of the last of those reruns, a fraction of the device: the whole device
# rather than the slot's share (Evaluator._whole_device).
WHOLE_DEVICE_FRACTION = 0.9


def ran_out_of_memory(reply):
    """Whether a reply failed for device memory: its error, or its candidate's failure,
    has a class ending in "/out_of_memory"."""
    result = reply.get("result") if isinstance(reply.get("result"), dict) else {}
    failure = result.get("failure") if isinstance(result.get("failure"), dict) else {}
    codes = ((reply.get("error") or {}).get("class"), failure.get("class"))
    return any(isinstance(c, str) and c.endswith("/out_of_memory") for c in codes)


def in_stream_order(args):
    """The evaluate args again with a program's graph mode "false": a rerun after running
    out of memory keeps no captured copy of the program's inputs, outputs and scratch
    buffers. Other args come back as they are; nothing is modified in place."""
    cand = args.get("candidate") if isinstance(args, dict) else None
    program = cand.get("program") if isinstance(cand, dict) else None
    mode = program.get("graph", "auto") if isinstance(program, dict) else None
    if not isinstance(mode, (str, bool)) or GRAPH_MODES.get(mode) == "false":
        return args
    return dict(args, candidate=dict(cand, program=dict(program, graph="false")))


# handlers/task_best.c (REASON_OUT_OF_MEMORY) reads a graph.reason that begins "out of
# device memory" as a capture that did not fit beside the other worker slots.
def note_stream_rerun(reply, args, lean,
                      reason="out of device memory with the graph captured: rerun in "
                             "stream order"):
    """Records in a rerun's result why its program ran in stream order (graph.reason),
    when in_stream_order changed its mode; the mode stays the one asked for."""
    if lean is args or not isinstance(reply.get("result"), dict):
        return
    graph = reply["result"].get("graph")
    if isinstance(graph, dict):
        mode = args["candidate"]["program"].get("graph", "auto")
        graph["mode"] = GRAPH_MODES.get(mode, mode)
        graph["reason"] = reason


def log_out_of_memory_rerun(n, total, whole_device, reply):
    """Writes one line to the evaluator's log (stderr) for rerun n of total of an
    evaluate that ran out of device memory: whether it ran with the whole device and
    whether it ran out again. The reply is only read."""
    sys.stderr.write("evaluator: evaluate ran out of device memory: rerun %d of %d%s %s\n"
                     % (n, total, " (whole device)" if whole_device else "",
                        "ran out again" if ran_out_of_memory(reply) else "fit"))
    sys.stderr.flush()


def physical_memory_bytes():
    """Physical RAM of the host in bytes (0 when unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


class Evaluator:
    """State of one evaluator process: the device, the GPU library and the loaded task.

    device is "cuda:N", "cpu" or "meta". lib is a GpuLib (or an object with the same
    methods, for tests) or None; lib_error says why it is None. allow_cpu_evaluate lets
    in-process tests run evaluate with a fake library on CPU tensors; the command line
    never sets it."""

    def __init__(self, device, lib=None, lib_error=None, mem_fraction=0.9,
                 host_mem_bytes=None, allow_cpu_evaluate=False):
        self.device = device
        self.is_cuda = device.startswith("cuda")
        self.lib = lib
        self.lib_error = lib_error
        self.mem_fraction = mem_fraction
        self.memory_cap = mem_fraction  # the cap in force: mem_fraction but in _whole_device
        phys = physical_memory_bytes()
        self.host_mem_bytes = host_mem_bytes if host_mem_bytes is not None else phys // 4
        self.allow_cpu_evaluate = allow_cpu_evaluate
        self.task = None
        self.copy_bw = None
        self.device_info = {"type": device} if not self.is_cuda else {}
        self.flush_buf = None
        self.gpu = DeviceLock(None)
        # Set when an evaluate of the loaded task fit only with the whole device; the
        # task's later evaluates start there (handle).
        self.needs_whole_device = False

    # -- device

    def init_cuda(self, cache_dir, lock_file=None):
        """Selects the device, caps its memory, opens the library session, and fills
        device_info. lock_file is the GPU's lock as the supervisor names it (a sandboxed
        evaluator's); None: the one path_for names."""
        idx = torch.device(self.device).index
        torch.cuda.set_device(idx)
        self._set_memory_cap(self.mem_fraction)
        torch.zeros(1, device=self.device)
        # PyTorch's own defaults: matmuls in full fp32, convolutions through cuDNN with
        # TF32 allowed, as a user's eager code runs them (docs/architecture.md,
        # "Evaluation rules": the accuracy budget is measured against that reference).
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = True
        props = torch.cuda.get_device_properties(idx)
        self.gpu = DeviceLock(lock_file or DeviceLock.path_for(props, idx))
        info = {"type": "cuda", "name": props.name, "index": idx,
                "capability": "%d.%d" % (props.major, props.minor),
                "arch": "sm_%d%d%s" % (props.major, props.minor,
                                       "a" if props.major >= 9 else ""),
                "sm_count": props.multi_processor_count,
                "memory_bytes": props.total_memory,
                "l2_bytes": getattr(props, "L2_cache_size", None),
                "clock_khz": getattr(props, "clock_rate", None),
                "hbm_peak_GBps": None}
        hbm = hbm_peak_from_props(getattr(props, "memory_clock_rate", 0),
                                  getattr(props, "memory_bus_width", 0))
        if hbm:
            info["hbm_peak_GBps"] = hbm / 1e9
        if self.lib is not None:
            try:
                self.lib.open(idx, cache_dir)
                info.update(self.lib.device_info())
            except Exception as exc:
                self.lib_error = "libopforge_gpu session: %s" % exc
                self.lib = None
        info["type"] = "cuda"
        self.device_info = info

    GPU_FACTS = ("name", "capability", "arch", "sm_count", "memory_bytes", "l2_bytes",
                 "hbm_peak_GBps", "max_shared_optin", "max_threads_per_block", "clock_khz")

    def gpu_facts(self):
        """The device's hardware facts that the profile carries for prompts (the LLM
        proposer states them; nothing about a device is written into the memory), or
        None on a CPU or meta evaluator."""
        if not self.is_cuda:
            return None
        return {k: self.device_info.get(k) for k in self.GPU_FACTS
                if self.device_info.get(k) is not None}

    def _capability(self):
        """(major, minor) of the device, or None."""
        cap = self.device_info.get("capability")
        try:
            major, minor = (int(p) for p in str(cap).split("."))
            return (major, minor)
        except (ValueError, TypeError):
            return None

    # -- requests

    def handle(self, req_id, op, args):
        """Runs one request; returns (reply dict, action) where action is None,
        "exit" or "fatal". An evaluate that ran out of device memory runs again after
        this process returned its cached memory and waited (OOM_RETRY_WAITS_S): the
        memory is shared with the other worker slots on the GPU, whose peaks pass; the
        last rerun takes the whole device (_whole_device). Once that last rerun fit, the
        task's later evaluates run as it did at once (needs_whole_device): the first run
        and the first rerun would run out again and cost their time and a wait for
        nothing (on the H200, level-1 L1Norm beside two other norms: 17 s a step). Every
        request ends by returning this process's idle cache (_return_idle_cache)."""
        if op == "evaluate" and self.needs_whole_device:
            reply, action = self._rerun_lean(req_id, op, args, True,
                                             "an earlier evaluate of this task fit only in "
                                             "stream order with the whole device")
        else:
            reply, action = self._handle_once(req_id, op, args)
        for attempt, wait_s in enumerate(OOM_RETRY_WAITS_S):
            if (op != "evaluate" or self.needs_whole_device or action is not None
                    or not ran_out_of_memory(reply)):
                break
            self._release_memory()
            time.sleep(wait_s)
            last = attempt == len(OOM_RETRY_WAITS_S) - 1
            reply, action = self._rerun_lean(req_id, op, args, last)
            log_out_of_memory_rerun(attempt + 1, len(OOM_RETRY_WAITS_S), last, reply)
            self.needs_whole_device = last and not ran_out_of_memory(reply)
        if action is None:
            self._return_idle_cache()
        return reply, action

    def _rerun_lean(self, req_id, op, args, whole_device, reason=None):
        """One run of the request with its program in stream order (in_stream_order),
        inside _whole_device when whole_device; the result's graph.reason says why
        (note_stream_rerun, its default reason when reason is None)."""
        lean = in_stream_order(args)
        with self._whole_device() if whole_device else contextlib.nullcontext():
            reply, action = self._handle_once(req_id, op, lean)
        if reason is None:
            note_stream_rerun(reply, args, lean)
        else:
            note_stream_rerun(reply, args, lean, reason)
        return reply, action

    def _handle_once(self, req_id, op, args):
        """One run of a request (handle's retries aside)."""
        try:
            if op == "load_task":
                result = self.load_task(args)
            elif op == "profile":
                result = self.profile(args)
            elif op == "evaluate":
                result = self.evaluate(args)
            elif op == "shutdown":
                return {"id": req_id, "ok": True, "result": {"bye": True}}, "exit"
            else:
                raise EvalError("protocol", "protocol/unknown_op", "unknown op %r" % (op,))
            return {"id": req_id, "ok": True, "result": result}, None
        except EvalError as err:
            reply = {"id": req_id, "ok": False, "error": err.to_error(), "fatal": err.fatal}
            if err.result is not None:
                reply["result"] = err.result
            return reply, ("fatal" if err.fatal else None)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            return self._unexpected(req_id, op, exc)

    def _unexpected(self, req_id, op, exc):
        """Reply for an exception no stage handled: a sticky CUDA error is fatal, an
        out-of-memory is classified, anything else is reported with its type."""
        stage = {"load_task": "load", "profile": "profile"}.get(op, "load")
        sticky = sticky_cuda_class(exc) if self.is_cuda else None
        if sticky:
            err = EvalError("launch", sticky, str(exc), exception_text(exc), fatal=True)
        elif isinstance(exc, torch.OutOfMemoryError):
            err = EvalError(stage, "%s/out_of_memory" % ("evaluate" if op == "evaluate"
                                                         else stage),
                            "out of memory: %s" % str(exc)[:500], exception_text(exc))
        else:
            prefix = "evaluate" if op == "evaluate" else stage
            err = EvalError(stage, "%s/%s" % (prefix, type(exc).__name__),
                            "%s: %s" % (type(exc).__name__, exc), exception_text(exc))
        self._release_memory()
        reply = {"id": req_id, "ok": False, "error": err.to_error(), "fatal": err.fatal}
        return reply, ("fatal" if err.fatal else None)

    @contextlib.contextmanager
    def _whole_device(self):
        """The last rerun of an evaluate that ran out of memory runs inside this: the
        device lock held for the whole request, so that no other slot runs kernels (and
        grows its working set) meanwhile, and this process's cap lifted from its slot's
        share (mem_fraction) to WHOLE_DEVICE_FRACTION, so that a task larger than one
        slot's share borrows what the other slots hold idle. On the H200 with 3 slots,
        a 42 GB share each, every candidate of level-1 Softsign (6.4 GB tensors and
        their float64 copies) ran out of memory with 55-106 GB of the device free. The
        cap and the cache go back on the way out; the caller owns nothing here."""
        with self.gpu:
            self._set_memory_cap(max(self.mem_fraction, WHOLE_DEVICE_FRACTION))
            try:
                yield
            finally:
                self._release_memory()
                self._set_memory_cap(self.mem_fraction)

    def _set_memory_cap(self, fraction):
        """Caps this process's device memory at fraction of the device (a no-op off
        CUDA, where memory_cap is only recorded)."""
        self.memory_cap = fraction
        if self.is_cuda:
            torch.cuda.set_per_process_memory_fraction(fraction,
                                                       torch.device(self.device).index)

    def _return_idle_cache(self):
        """Gives the device memory this process caches but does not use back to the
        driver when it exceeds IDLE_CACHE_KEEP_BYTES, so that the other worker slots
        sharing the GPU can allocate it between this process's requests."""
        if not self.is_cuda:
            return
        try:
            reserved = torch.cuda.memory_reserved(self.device)
            if reserved - torch.cuda.memory_allocated(self.device) > IDLE_CACHE_KEEP_BYTES:
                torch.cuda.empty_cache()
        except Exception:
            pass

    def _release_memory(self):
        """Collects garbage and returns cached device memory after a failure."""
        gc.collect()
        if self.is_cuda:
            try:
                torch.cuda.empty_cache()
            except Exception:
                pass

    # -- load_task

    def load_task(self, raw):
        """Executes the task source, builds Model(*get_init_inputs()) with the seed on
        the task device, and keeps it as the current task (replacing any other)."""
        args = parse_load_args(raw)
        if self.task is not None and self.task.module is not None:
            sys.modules.pop(self.task.module.__name__, None)
        self.task = None
        self.needs_whole_device = False
        self._release_memory()
        task = Task(args)
        try:
            task.module = exec_task_source(args["source"], args["name"])
            with self.gpu:  # parameters are initialised on the GPU
                self._build(task)
        except EvalError:
            raise
        except torch.OutOfMemoryError as exc:
            self._release_memory()
            raise EvalError("load", "load/out_of_memory",
                            "task does not fit in the memory share allowed: %s"
                            % str(exc)[:500], exception_text(exc))
        except ModuleNotFoundError as exc:
            self._release_memory()
            raise EvalError("load", "load/missing_module",
                            "the program imports %r, which the evaluator's Python does not "
                            "have: install it (pip install %s) in the evaluator's venv"
                            % (exc.name, (exc.name or "?").split(".")[0]),
                            exception_text(exc))
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            self._release_memory()
            raise EvalError("load", "load/%s" % type(exc).__name__,
                            "%s: %s" % (type(exc).__name__, exc), exception_text(exc))
        self.task = task
        result = {"loaded": True, "name": task.name, "device": task.device,
                  "init_inputs": json_safe(task.init_inputs)}
        if task.estimate is not None:
            result["estimated_bytes"] = task.estimate
        if task.meta_reason:
            result["meta_reason"] = task.meta_reason
        return result

    def _build(self, task):
        """Places the task on cuda, cpu or (for a CPU host without the memory) meta."""
        mod = task.module
        if self.device == "meta":
            task.device = "meta"
            task.meta_reason = "meta device requested"
        elif not self.is_cuda:
            task.device = "cpu"
            self._estimate_on_meta(task)
        else:
            task.device = "cuda"
        if task.device == "meta" and task.model is not None:
            return
        dev = self.device if task.device == "cuda" else task.device
        with torch.device(dev):
            seed_all(task.seed)
            init = mod.get_init_inputs()
            model = mod.Model(*init)
        task.model = model.to(dev)
        task.init_inputs = init

    def _estimate_on_meta(self, task):
        """Builds the model and its inputs on the meta device (no allocation) to learn
        the bytes the task needs; moves the task to meta when they exceed the host
        memory share. A task that cannot run on meta is built on the CPU unguarded."""
        mod = task.module
        try:
            with torch.device("meta"):
                seed_all(task.seed)
                init = mod.get_init_inputs()
                model = mod.Model(*init)
                inputs = list(mod.get_inputs())
            need = nbytes_of(named_state(model)) + nbytes_of(named_inputs(inputs))
            try:
                with torch.no_grad():
                    need += nbytes_of([(None, t) for t in flatten_outputs(model(*inputs))])
            except Exception:
                pass
        except Exception:
            return
        task.estimate = need
        if need > self.host_mem_bytes:
            task.device = "meta"
            task.meta_reason = ("the task needs %d bytes (inputs, parameters, outputs), "
                                "over the host memory limit of %d bytes; profiled on the "
                                "meta device, no tensors allocated"
                                % (need, self.host_mem_bytes))
            task.model = model
            task.init_inputs = init

    def _require_task(self):
        """The loaded task, or a protocol error when there is none."""
        if self.task is None:
            raise EvalError("protocol", "protocol/no_task", "no task loaded: send load_task first")
        return self.task

    def _task_dev(self, task):
        """The torch device string the task runs on."""
        return self.device if task.device == "cuda" else task.device

    def make_inputs(self, task, seed, robust=False):
        """Fresh inputs from get_inputs() under seed on the task device; robust makes
        every floating tensor randn of the same shape and dtype (integer inputs such as
        class indices keep their seeded values)."""
        dev = self._task_dev(task)
        with torch.device(dev):
            seed_all(seed)
            inputs = to_device(list(task.module.get_inputs()), dev)
            if robust:
                inputs = [torch.randn(t.shape, dtype=t.dtype)
                          if isinstance(t, torch.Tensor) and t.dtype.is_floating_point else t
                          for t in inputs]
        return inputs

    # -- profile

    def profile(self, raw):
        """The profile of the current task (docs/architecture.md, "Profile"), cached per task."""
        if raw:
            raise EvalError("protocol", "protocol/bad_argument",
                            "profile takes no arguments (got %s)" % ", ".join(sorted(raw)))
        task = self._require_task()
        if task.profile is None:
            try:
                task.profile = self._profile(task)
            except EvalError:
                raise
            except torch.OutOfMemoryError as exc:
                self._release_memory()
                raise EvalError("profile", "profile/out_of_memory",
                                "out of memory while profiling: %s" % str(exc)[:500],
                                exception_text(exc))
            except Exception as exc:
                if self.is_cuda and sticky_cuda_class(exc):
                    raise
                self._release_memory()
                raise EvalError("profile", "profile/%s" % type(exc).__name__,
                                "%s: %s" % (type(exc).__name__, exc), exception_text(exc))
        return task.profile

    def _profile(self, task):
        """Builds the profile: specs, graph, FLOPs, bytes, degenerate flag, timings and
        floors. Besides those, "sm_count" is the CUDA device's multiprocessor count (an
        int), None when the evaluator does not run on CUDA."""
        from torch.utils.flop_counter import FlopCounterMode
        # Generating gigabytes of inputs saturates the GPU's memory as much as a kernel
        # does: it, too, waits for the device lock (an H200 run without this measured
        # another slot's eager GEMM at 4.83 ms instead of 2.79).
        with self.gpu:
            inputs = self.make_inputs(task, task.seed)
        with torch.no_grad(), self.gpu:
            with FlopCounterMode(display=False) as counter:
                outputs, mutable = forward_changing_state(
                    task.model, lambda: task.model(*inputs), on_meta=task.device == "meta")
        flops = int(counter.get_total_flops())
        outs = flatten_outputs(outputs)
        ins = named_inputs(inputs)
        state = named_state(task.model)
        prof = {"name": task.name, "device": task.device, "sm_count": self._sm_count(),
                "gpu": self.gpu_facts(),
                "inputs": [tensor_spec(n, t) for n, t in ins],
                "scalar_inputs": [{"name": "input:%d" % i, "value": json_safe(v)}
                                  for i, v in enumerate(inputs)
                                  if not isinstance(v, torch.Tensor)],
                "params": [dict(tensor_spec(n, t), kind="buffer" if not isinstance(
                    t, torch.nn.Parameter) else "parameter") for n, t in state],
                "outputs": [tensor_spec("output:%d" % i, t) for i, t in enumerate(outs)],
                "flops": flops, "precision": task.precision,
                "tolerance": {"atol": task.atol, "rtol": task.rtol},
                "mutable_buffers": mutable}
        prof["min_bytes"] = nbytes_of(ins) + nbytes_of(state) + nbytes_of(
            [(None, t) for t in outs])
        if task.device == "meta":
            prof["degenerate"] = None
        else:
            prof["degenerate"] = all(max_abs_finite(t) <= task.atol for t in outs
                                     if t.dtype.is_floating_point) and any(
                t.dtype.is_floating_point for t in outs)
        del outputs, outs
        with self.gpu:
            graph_info, task.traced = extract_graph(task.model, inputs, state)
        prof.update(graph_info)
        prof.update(self._timings(task, inputs, prof))
        task.specs = {"tensors": [{"name": s["name"], "dtype": s["dtype"],
                                   "numel": s["numel"], "bytes": s["bytes"]}
                                  for s in prof["inputs"] + prof["params"] + prof["outputs"]],
                      "precision": task.precision}
        return prof

    def _sm_count(self):
        """Multiprocessors of the CUDA device (int), or None off CUDA."""
        if not self.is_cuda:
            return None
        props = torch.cuda.get_device_properties(torch.device(self.device))
        return int(props.multi_processor_count)

    def _timings(self, task, inputs, prof):
        """Eager and torch.compile times and the two floors (CUDA only)."""
        if task.device != "cuda":
            reason = task.meta_reason if task.device == "meta" else "no CUDA device"
            return {"eager_ms": None, "compile_ms": None, "compile_s": None,
                    "timing_skipped_reason": reason, "floor_ms": None,
                    "impossible_ms": None, "floor_basis": None}
        out = {"timing_skipped_reason": None}
        tf32 = task.precision != "fp32"
        with torch.no_grad(), allow_tf32(tf32):
            with self.gpu:
                eager = self.time_fn(lambda: task.model(*inputs))
            out["eager_ms"] = eager["median_ms"]
            out["eager"] = eager
            out.update(self._time_compiled(task, inputs))
        with self.gpu:
            out.update(self.floors(prof["min_bytes"], prof["flops"], task.precision))
        return out

    def _time_compiled(self, task, inputs):
        """torch.compile (default mode) time, or null with the reason it failed."""
        try:
            import torch._dynamo
            compiled = torch.compile(task.model)
            # The first call compiles (seconds of CPU work, outside the device lock, so
            # that other slots keep the GPU busy) and then runs the model once: that one
            # run may overlap another slot's timing, whose median over >= 10 reps
            # absorbs it. Everything else that runs kernels holds the lock.
            t0 = time.monotonic()
            compiled(*inputs)
            torch.cuda.synchronize()
            compile_s = time.monotonic() - t0
            with self.gpu:
                timed = self.time_fn(lambda: compiled(*inputs))
            return {"compile_ms": timed["median_ms"], "compile": timed,
                    "compile_s": compile_s, "compile_error": None}
        except Exception as exc:
            if sticky_cuda_class(exc):
                raise
            self._release_memory()
            return {"compile_ms": None, "compile_s": None,
                    "compile_error": ("%s: %s" % (type(exc).__name__, exc))[:2000]}
        finally:
            try:
                torch._dynamo.reset()
            except Exception:
                pass

    def flush_l2(self):
        """Enqueues the L2 flush of the timing method: a 256 MB scratch tensor zeroed."""
        if self.flush_buf is None:
            self.flush_buf = torch.empty(TIMING["flush_bytes"] // 4, dtype=torch.float32,
                                         device=self.device)
        self.flush_buf.zero_()

    def time_fn(self, fn, timing=None, max_seconds=TIMING_MAX_SECONDS, before=None):
        """Times fn on the current stream: CUDA events, an L2 flush (a 256 MB scratch
        tensor zeroed) before each rep, 3 warm-ups, reps until RSE < 1% (10..200),
        median reported. timing overrides TIMING's warmup/min_reps/max_reps/target_rse;
        before(), when given, runs untimed before each flush (programs poison their
        outputs there); sampling stops after max_seconds once min_reps are in."""
        p = dict(TIMING, **(timing or {}))
        for _ in range(p["warmup"]):
            fn()
        torch.cuda.synchronize()
        samples = []
        started = time.monotonic()
        while True:
            if before is not None:
                before()
            self.flush_l2()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end))
            if timing_should_stop(samples, p["min_reps"], p["max_reps"], p["target_rse"]):
                break
            if len(samples) >= p["min_reps"] and time.monotonic() - started > max_seconds:
                break
        return {"median_ms": statistics.median(samples),
                "mean_ms": statistics.fmean(samples), "reps": len(samples),
                "rse": rse(samples)}

    def measure_copy_bandwidth(self):
        """Device-to-device copy bandwidth in bytes/s (bytes read plus written), measured
        once per process on ~1 GiB."""
        if self.copy_bw is None:
            size = COPY_BW_BYTES
            while True:
                try:
                    src = torch.empty(size // 4, dtype=torch.float32, device=self.device)
                    dst = torch.empty_like(src)
                    break
                except torch.OutOfMemoryError:
                    size //= 4
                    if size < (16 << 20):
                        raise
            src.fill_(1.0)
            timed = self.time_fn(lambda: dst.copy_(src))
            self.copy_bw = 2.0 * size / (timed["median_ms"] * 1e-3)
            del src, dst
            self._release_memory()
        return self.copy_bw

    def floors(self, min_bytes, flops, precision):
        """floor_ms (measured copy bandwidth, fp32 SIMT peak) and impossible_ms
        (theoretical HBM peak, tensor-core peak of the precision) with their basis."""
        info = self.device_info
        cap = self._capability()
        clock_hz = (info.get("clock_khz") or 0) * 1e3
        sms = info.get("sm_count")
        fp32 = fp32_simt_peak(sms, clock_hz, cap)
        tc = tensor_core_peak(precision, sms, clock_hz, cap)
        bw = self.measure_copy_bandwidth()
        hbm = (info.get("hbm_peak_GBps") or 0) * 1e9
        if not hbm:
            hbm = 1.5 * bw
        return {"floor_ms": floor_time_ms(min_bytes, flops, bw, fp32),
                "impossible_ms": floor_time_ms(min_bytes, flops, hbm, tc),
                "floor_basis": {"copy_bw_Bps": bw, "fp32_peak_flops": fp32,
                                "hbm_peak_Bps": hbm, "tensor_peak_flops": tc,
                                "tensor_arith": "bf16" if precision == "bf16" else "tf32"}}

    # -- evaluate

    def evaluate(self, raw):
        """Verifies and times a candidate: one kernel plan, or a program of library
        steps and regions (docs/architecture.md, "Formats" and "Evaluation rules")."""
        if not (self.is_cuda or self.allow_cpu_evaluate):
            raise EvalError("load", "evaluate/no_gpu",
                            "evaluate needs a CUDA device; this evaluator runs on %s"
                            % self.device)
        cand = raw.get("candidate") if isinstance(raw, dict) else None
        program = cand.get("program") if isinstance(cand, dict) else None
        if program is None and (not isinstance(cand, dict)
                                or not isinstance(cand.get("source"), str)
                                or not isinstance(cand.get("plan"), dict)):
            raise EvalError("protocol", "protocol/bad_argument",
                            "field candidate must be an object with source and plan, "
                            "or with program")
        task = self._require_task()
        if task.device == "meta":
            raise EvalError("load", "evaluate/no_gpu", "the task is loaded on meta")
        if self.lib is None:
            raise EvalError("load", "load/gpu_library",
                            "libopforge_gpu is not available: %s" % self.lib_error)
        self.profile({})
        if program is not None:
            return ProgramRun(self, task, cand).run()
        return CandidateRun(self, task, cand).run()


class allow_tf32:
    """Context manager: TF32 matmuls allowed (or not) inside. Convolutions keep
    PyTorch's default (TF32 allowed through cuDNN) either way, so that the eager time
    is that of the reference the candidates are checked against."""

    def __init__(self, on):
        self.on = on

    def __enter__(self):
        self.saved = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = self.on

    def __exit__(self, *exc):
        torch.backends.cuda.matmul.allow_tf32 = self.saved
        return False
