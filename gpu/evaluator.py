# opforge evaluator process: loads a KernelBench task in PyTorch, profiles it, and verifies and times candidate kernels through libopforge_gpu (JSON lines on stdin/stdout).
"""
One evaluator process serves one device. The supervisor in the server speaks the
protocol of gpu_contracts section A with it: one JSON request per stdin line, one JSON
reply per stdout line. Task code runs in this process, so stdout is moved to a private
descriptor before any task code runs, and fd 1 points at stderr.

Ownership convention: functions that take tensors never keep references to them past the
call unless they say so; dicts returned are new objects the caller owns.
"""

import argparse
import copy
import ctypes
import fcntl
import gc
import json
import linecache
import math
import os
import random
import statistics
import sys
import tempfile
import time
import traceback
import types

import torch

TRACEBACK_CAP = 8192
MAX_LINE_BYTES = 64 << 20
PROTOCOL_FD_EXIT_FATAL = 3

DEFAULT_SEED = 42
DEFAULT_TRIALS = 5
MAX_TRIALS = 100
DEFAULT_ACCURACY_FACTOR = 8.0
PRECISIONS = ("fp32", "tf32", "bf16")

# Timing method of DESIGN section 5, shared by the eager/compile timings here and the
# candidate timings done by the C library.
TIMING = {"warmup": 3, "min_reps": 10, "max_reps": 200, "target_rse": 0.01,
          "flush_bytes": 256 << 20}
TIMING_MAX_SECONDS = 60.0
COPY_BW_BYTES = 1 << 30

# When no device attribute gives the numbers, these are the H200's (fp32 SIMT at the
# 1.98 GHz maximum clock; dense tensor-core TF32 and BF16 datasheet figures).
FALLBACK_FP32_PEAK = 66.9e12
FALLBACK_TF32_PEAK = 494.7e12
FALLBACK_BF16_PEAK = 989.4e12

# fp32 FMA lanes per SM, by compute capability (sm_80 and sm_7x have 64, the rest 128).
FP32_LANES = {(7, 0): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128,
              (8, 9): 128, (9, 0): 128, (10, 0): 128, (10, 3): 128, (12, 0): 128}

# Dense tensor-core FLOP per SM per clock (tf32, bf16) and the clock the datasheets use.
# Taken at or above the datasheet figures so that impossible_ms stays a true lower bound.
TENSOR_RATES = {(8, 0): (1024, 2048, 1.41e9), (8, 6): (512, 1024, 1.70e9),
                (8, 7): (512, 1024, 1.30e9), (8, 9): (512, 1024, 2.52e9),
                (9, 0): (2048, 4096, 1.83e9), (10, 0): (4096, 8192, 1.965e9),
                (10, 3): (4096, 8192, 1.965e9), (12, 0): (1024, 2048, 2.6e9)}

COMPARE_CHUNK = 1 << 26
FINGERPRINT_CHUNK = 1 << 24

# Quiet NaNs with a payload no arithmetic produces: an output element that still holds
# this bit pattern after a launch was never written by the candidate.
NAN_SENTINELS = {torch.float32: (torch.int32, 0x7FC0DEAD),
                 torch.float64: (torch.int64, 0x7FF8DEADBEEF0001),
                 torch.float16: (torch.int16, 0x7E01),
                 torch.bfloat16: (torch.int16, 0x7FC1)}

STICKY_CUDA_MESSAGES = (
    ("illegal memory access", "CUDA_ERROR_ILLEGAL_ADDRESS"),
    ("misaligned address", "CUDA_ERROR_MISALIGNED_ADDRESS"),
    ("unspecified launch failure", "CUDA_ERROR_LAUNCH_FAILED"),
    ("illegal instruction", "CUDA_ERROR_ILLEGAL_INSTRUCTION"),
    ("hardware stack error", "CUDA_ERROR_HARDWARE_STACK_ERROR"),
    ("device-side assert", "CUDA_ERROR_ASSERT"),
    ("invalid program counter", "CUDA_ERROR_INVALID_PC"),
    ("an illegal instruction", "CUDA_ERROR_ILLEGAL_INSTRUCTION"),
)


class EvalError(Exception):
    """A failure that becomes an ok:false reply; fatal means the CUDA context is gone."""

    def __init__(self, stage, cls, message, tb=None, fatal=False, result=None):
        super().__init__(message)
        self.stage = stage
        self.cls = cls
        self.message = message
        self.tb = tb
        self.fatal = fatal
        self.result = result

    def to_error(self):
        """Returns a new error object of the protocol's reply shape."""
        err = {"stage": self.stage, "class": self.cls, "message": self.message[:4096]}
        if self.tb:
            err["traceback"] = cap_traceback(self.tb)
        return err


# ---------------------------------------------------------------------------------------
# Pure helpers (tested without a device)

def cap_traceback(text, cap=TRACEBACK_CAP):
    """Returns text cut to at most cap bytes of UTF-8, keeping the tail where the
    exception line is."""
    raw = text.encode("utf-8", "replace")
    if len(raw) <= cap:
        return text
    marker = b"...(traceback truncated)...\n"
    tail = raw[len(raw) - (cap - len(marker)):]
    return (marker + tail).decode("utf-8", "ignore")


def exception_text(exc):
    """Returns the formatted traceback of exc, capped."""
    return cap_traceback("".join(traceback.format_exception(type(exc), exc,
                                                            exc.__traceback__)))


def json_safe(obj):
    """Returns a copy of obj that json.dumps(allow_nan=False) accepts: non-finite floats
    become null, tuples lists, unknown objects their str()."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, torch.Tensor):
        return tensor_spec(None, obj)
    return str(obj)


def encode_line(obj):
    """Returns the reply obj as one UTF-8 JSON line (bytes, newline-terminated)."""
    return (json.dumps(json_safe(obj), allow_nan=False, separators=(",", ":"))
            + "\n").encode("utf-8")


def rse(samples):
    """Relative standard error of the mean of samples (std / sqrt(n) / mean); inf when
    it cannot be computed yet."""
    n = len(samples)
    if n < 2:
        return math.inf
    mean = statistics.fmean(samples)
    if mean <= 0:
        return math.inf
    return statistics.stdev(samples) / math.sqrt(n) / mean


def timing_should_stop(samples, min_reps, max_reps, target_rse):
    """The stopping rule of DESIGN section 5: at least min_reps, then stop as soon as the
    relative standard error is below target_rse, and never beyond max_reps."""
    n = len(samples)
    if n >= max_reps:
        return True
    if n < min_reps:
        return False
    return rse(samples) < target_rse


def fp32_simt_peak(sm_count, clock_hz, capability):
    """fp32 FLOP/s of the SIMT units: SMs x FMA lanes x 2 x clock. Falls back to the
    H200 figure when an attribute is missing."""
    lanes = FP32_LANES.get(tuple(capability) if capability else None)
    if not sm_count or not clock_hz or not lanes:
        return FALLBACK_FP32_PEAK
    return float(sm_count) * lanes * 2.0 * float(clock_hz)


def tensor_core_peak(precision, sm_count, clock_hz, capability):
    """Dense tensor-core FLOP/s of the fastest arithmetic precision allows: TF32 for
    fp32 and tf32 tasks (3xTF32 passes fp32 tolerances), BF16 for bf16 tasks."""
    rates = TENSOR_RATES.get(tuple(capability) if capability else None)
    if not rates or not sm_count:
        return FALLBACK_BF16_PEAK if precision == "bf16" else FALLBACK_TF32_PEAK
    tf32, bf16, ref_clock = rates
    clock = max(float(clock_hz or 0.0), ref_clock)
    per_clock = bf16 if precision == "bf16" else tf32
    return float(sm_count) * per_clock * clock


def floor_time_ms(min_bytes, flops, bytes_per_s, flops_per_s):
    """max(min_bytes / bandwidth, flops / peak) in milliseconds; None when a rate is
    unknown."""
    if not bytes_per_s or not flops_per_s:
        return None
    return max(min_bytes / bytes_per_s, flops / flops_per_s) * 1e3


def hbm_peak_from_props(memory_clock_khz, bus_width_bits):
    """Theoretical DRAM bandwidth in bytes/s from the memory clock (double data rate) and
    the bus width; None when either is unknown."""
    if not memory_clock_khz or not bus_width_bits:
        return None
    return float(memory_clock_khz) * 1e3 * 2.0 * float(bus_width_bits) / 8.0


def accuracy_budget(eager_err, max_ref, factor):
    """Largest candidate error against float64 that an fp32 task admits: factor times
    the fp32 eager reference's own error, plus 1e-6 of the output's magnitude so that
    ops where eager happens to be exact still admit rounding."""
    return factor * eager_err + 1e-6 * max_ref


def relative_l2_ok(diff_l2, ref_l2, rtol, numel):
    """The degenerate-task criterion: ||out - ref||_2 <= rtol * ||ref||_2, plus a
    denormal-level floor so that an all-zero reference admits an all-zero output.
    allclose passes zeros for outputs that are all within atol of zero; the relative
    L2 error of zeros is 1, so they fail here, while rounding differences (relative
    error near machine epsilon) pass."""
    if not math.isfinite(diff_l2):
        return False
    return diff_l2 <= rtol * ref_l2 + 1.1754943508222875e-38 * math.sqrt(max(numel, 1))


def default_tolerance(precision):
    """Tolerance used when load_task gives none (DESIGN section 4)."""
    tol = 1e-4 if precision == "fp32" else 1e-2
    return {"atol": tol, "rtol": tol}


def dtype_name(dtype):
    """'float32' for torch.float32."""
    return str(dtype).replace("torch.", "")


def target_name(target):
    """A stable string for an FX call_function/call_method target: 'torch.relu',
    'torch.nn.functional.softmax', 'operator.mul', or the method name."""
    if isinstance(target, str):
        return target
    try:
        from torch.fx.node import _get_qualified_name
        name = _get_qualified_name(target)
    except Exception:
        name = getattr(target, "__qualname__", None) or str(target)
    short = name.rsplit(".", 1)[-1]
    if name.startswith("torch._C._nn.") or name.startswith("torch._C._VariableFunctions"):
        fn = getattr(torch.nn.functional, short, None)
        if fn is target:
            return "torch.nn.functional." + short
        if getattr(torch, short, None) is target:
            return "torch." + short
    if name.startswith("_operator."):
        return "operator." + name[len("_operator."):]
    if isinstance(target, torch._ops.OpOverload) or isinstance(target,
                                                               torch._ops.OpOverloadPacket):
        return str(target)
    return name


def encode_arg(a):
    """JSON form of an FX argument: graph nodes as {"node": name}, constants as
    themselves (non-finite floats as "inf"/"-inf"/"nan"), dtypes as "torch.float32"."""
    if isinstance(a, torch.fx.Node):
        return {"node": a.name}
    if a is None or isinstance(a, (bool, int, str)):
        return a
    if isinstance(a, float):
        if math.isnan(a):
            return "nan"
        if math.isinf(a):
            return "inf" if a > 0 else "-inf"
        return a
    if isinstance(a, (list, tuple, torch.Size)):
        return [encode_arg(v) for v in a]
    if isinstance(a, dict):
        return {str(k): encode_arg(v) for k, v in a.items()}
    if isinstance(a, slice):
        return {"slice": [encode_arg(a.start), encode_arg(a.stop), encode_arg(a.step)]}
    if a is Ellipsis:
        return "..."
    if isinstance(a, (torch.dtype, torch.device, torch.memory_format, torch.layout)):
        return str(a)
    return {"repr": repr(a)[:200]}


def module_attrs(mod):
    """Hyper-parameters of a leaf module: its __constants__ (in/out features,
    kernel_size/stride/padding, eps/normalized_shape, ...), whether it has a bias, and
    its extra_repr."""
    attrs = {}
    for name in getattr(type(mod), "__constants__", ()) or ():
        if hasattr(mod, name):
            attrs[name] = encode_arg(getattr(mod, name))
    if "bias" in mod._parameters:
        attrs["bias"] = mod._parameters["bias"] is not None
    try:
        extra = mod.extra_repr()
        if extra:
            attrs["extra_repr"] = extra[:500]
    except Exception:
        pass
    return attrs


def tensor_bytes(t):
    """Bytes of t's elements."""
    return t.numel() * t.element_size()


def tensor_spec(name, t):
    """Profile entry of one tensor (name may be None)."""
    spec = {"dtype": dtype_name(t.dtype), "shape": list(t.shape), "numel": t.numel(),
            "bytes": tensor_bytes(t)}
    if name is not None:
        spec = {"name": name, **spec}
    return spec


def flatten_outputs(out):
    """The tensors of a forward result, in order: a tensor, or nested tuples/lists."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        flat = []
        for item in out:
            flat.extend(flatten_outputs(item))
        return flat
    return []


def named_inputs(inputs):
    """[(name, tensor)] for the tensor entries of get_inputs(); the index is the
    position in the argument list, so input:1 is the second argument even when the
    first is not a tensor."""
    return [("input:%d" % i, t) for i, t in enumerate(inputs) if isinstance(t, torch.Tensor)]


def named_state(model):
    """[(name, tensor)] for every parameter and buffer of model (tied tensors once),
    named param:<state_dict key>."""
    pairs = [("param:" + k, p) for k, p in model.named_parameters()]
    pairs += [("param:" + k, b) for k, b in model.named_buffers() if b is not None]
    return pairs


def nbytes_of(pairs):
    """Total bytes of the tensors in [(name, tensor)]."""
    return sum(tensor_bytes(t) for _, t in pairs)


def sentinel_for(dtype):
    """(view dtype, value) of the poison bit pattern for outputs of dtype, or None when
    the dtype has none (bool, complex)."""
    if dtype in NAN_SENTINELS:
        return NAN_SENTINELS[dtype]
    if dtype == torch.bool or dtype.is_complex or dtype.is_floating_point:
        return None
    info = torch.iinfo(dtype)
    return (dtype, info.max if info.min == 0 else info.min)


def poison_(out, ref):
    """Fills out (in place) with the sentinel of its dtype; bool outputs get the
    negation of the reference so that an unwritten one mismatches everywhere."""
    sent = sentinel_for(out.dtype)
    if sent is not None:
        out.view(sent[0]).fill_(sent[1])
    elif out.dtype == torch.bool:
        out.copy_(torch.logical_not(ref))
    else:
        out.fill_(float("nan"))


def seed_all(seed):
    """Seeds torch (every device), random and numpy when present."""
    torch.manual_seed(seed)
    random.seed(seed)
    try:
        import numpy
        numpy.random.seed(seed % (2 ** 32))
    except ImportError:
        pass


def tensor_equal_bits(a, b):
    """True when a and b hold the same bits (NaN payloads included)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.is_floating_point and a.element_size() in (2, 4, 8):
        view = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        return torch.equal(a.view(view), b.view(view))
    return torch.equal(a, b)


def fingerprint(t):
    """A checksum of t's bytes: plain and position-weighted sums of its words, in int64
    (wrap-around is deterministic). Used instead of a copy when inputs are too large to
    clone."""
    flat = t.detach().reshape(-1)
    size = flat.element_size()
    if size >= 4 and tensor_bytes(flat) % 4 == 0:
        words = flat.view(torch.int32)
    elif size == 2:
        words = flat.view(torch.int16)
    else:
        words = flat.view(torch.uint8)
    n = words.numel()
    weights = (torch.arange(min(n, FINGERPRINT_CHUNK), device=words.device,
                            dtype=torch.int64) % 65521) + 1
    s1 = torch.zeros((), dtype=torch.int64, device=words.device)
    s2 = torch.zeros((), dtype=torch.int64, device=words.device)
    for i in range(0, n, FINGERPRINT_CHUNK):
        c = words[i:i + FINGERPRINT_CHUNK].to(torch.int64)
        s1 += c.sum()
        s2 += (c * weights[:c.numel()]).sum()
    return (int(s1.item()), int(s2.item()), n)


class InputGuard:
    """Remembers the tensors a candidate may read, by copy when they fit in
    clone_budget bytes, else by fingerprint. Keeps references to the tensors until
    dropped."""

    def __init__(self, pairs, clone_budget):
        self.pairs = pairs
        self.by_copy = nbytes_of(pairs) <= clone_budget
        if self.by_copy:
            self.saved = [t.detach().clone() for _, t in pairs]
        else:
            self.saved = [fingerprint(t) for _, t in pairs]

    def changed(self):
        """Names of the tensors whose contents differ from when the guard was made."""
        names = []
        for (name, t), saved in zip(self.pairs, self.saved):
            same = tensor_equal_bits(t, saved) if self.by_copy else fingerprint(t) == saved
            if not same:
                names.append(name)
        return names


def compare_outputs(out, ref, atol, rtol):
    """Element-wise allclose of a candidate output against its reference, in chunks.
    Counts unwritten elements (sentinel bits left), NaNs the reference does not have,
    and mismatches; returns max_abs, max_rel (over elements with |ref| > atol, where a
    relative error means something) and the L2 norms the degenerate criterion needs.
    Takes nothing over."""
    o = out.reshape(-1)
    r = ref.reshape(-1)
    res = {"numel": o.numel(), "mismatches": 0, "unwritten": 0, "nan": 0, "max_abs": 0.0,
           "max_rel": 0.0, "first_bad": None, "diff_sq": 0.0, "ref_sq": 0.0}
    if o.numel() != r.numel():
        res["mismatches"] = max(o.numel(), r.numel())
        return res
    sent = sentinel_for(o.dtype)
    exact = not o.dtype.is_floating_point
    for i in range(0, o.numel(), COMPARE_CHUNK):
        _compare_chunk(o[i:i + COMPARE_CHUNK], r[i:i + COMPARE_CHUNK], i, sent, exact,
                       atol, rtol, res)
    return res


def _unwritten_mask(oc, rc, sent):
    """Elements whose bits still hold the poison pattern the reference does not have."""
    if sent is None:
        return torch.zeros(oc.shape, dtype=torch.bool, device=oc.device)
    sentinel = sent[1]
    ov, rv = oc.view(sent[0]), rc.view(sent[0])
    unwritten = (ov == sentinel) & (rv != sentinel)
    if oc.dtype.is_floating_point:
        # libopforge_gpu poisons outputs again right before the launch with all bits
        # set (0xff bytes: a NaN), so that pattern also means "never written".
        unwritten |= (ov == -1) & (rv != -1)
    return unwritten


def _work_dtype(dtype):
    """Arithmetic type of a comparison: float32 for float32 and narrower floats (exact
    for their values, and allclose's own precision for fp32), float64 otherwise. Outputs
    of several GB make every pass count: float64 temporaries would double the traffic of
    each of the comparison's dozen elementwise passes."""
    if dtype in (torch.float16, torch.bfloat16, torch.float32):
        return torch.float32
    return torch.float64


def _compare_chunk(oc, rc, offset, sent, exact, atol, rtol, res):
    """Adds one chunk's counts and maxima to res (see compare_outputs)."""
    unwritten = _unwritten_mask(oc, rc, sent)
    work = torch.float64 if exact else _work_dtype(oc.dtype)
    ow = oc.to(work)
    rw = rc.to(work)
    diff = (ow - rw).abs_()
    rabs = rw.abs()
    if exact:
        bad = oc != rc
        bad_nan = torch.zeros_like(bad)
    else:
        o_nan = torch.isnan(ow)
        r_nan = torch.isnan(rw)
        # A finite difference within tolerance, or equal values (same-signed
        # infinities), or NaN where the reference is NaN. An infinite reference must
        # not make the tolerance infinite.
        close = (diff <= rabs * rtol + atol) & torch.isfinite(diff)
        close |= ow == rw
        close |= o_nan & r_nan
        bad = ~close
        bad_nan = o_nan & ~r_nan & ~unwritten
        del o_nan, r_nan, close
    finite = torch.isfinite(diff)
    fdiff = torch.where(finite, diff, 0.0)
    del diff
    rel = torch.where(finite & (rabs > atol), fdiff / rabs.clamp_min(1e-300 if work ==
                                                                     torch.float64 else 1e-38),
                      0.0)
    nbad = int(bad.sum().item())
    res["mismatches"] += nbad
    res["unwritten"] += int(unwritten.sum().item())
    res["nan"] += int(bad_nan.sum().item())
    if fdiff.numel():
        res["max_abs"] = max(res["max_abs"], float(fdiff.max().item()))
        res["max_rel"] = max(res["max_rel"], float(rel.max().item()))
    del rel
    # Squares summed in float64, where neither overflows nor tiny values underflow.
    res["diff_sq"] += float(torch.linalg.vector_norm(fdiff, dtype=torch.float64).item()) ** 2
    if int((~finite & bad).sum().item()):
        res["diff_sq"] = math.inf
    rfin = torch.where(torch.isfinite(rw), rw, 0.0)
    res["ref_sq"] += float(torch.linalg.vector_norm(rfin, dtype=torch.float64).item()) ** 2
    if nbad and res["first_bad"] is None:
        res["first_bad"] = offset + int(torch.nonzero(bad)[0].item())


def classify_comparison(name, cmp):
    """(class, message) of a failed comparison, or None when it passed."""
    if cmp["unwritten"]:
        whole = cmp["unwritten"] == cmp["numel"]
        return ("correctness/unwritten_output",
                "%s: %s (%d of %d elements still hold the poison value)"
                % (name, "never written" if whole else "partly unwritten",
                   cmp["unwritten"], cmp["numel"]))
    if cmp["nan"]:
        return ("correctness/nan_output", "%s: %d NaN elements where the reference has "
                "none" % (name, cmp["nan"]))
    if cmp["mismatches"]:
        return ("correctness/mismatch", "%s: %d of %d elements outside tolerance, first at "
                "flat index %s, max_abs %.3g" % (name, cmp["mismatches"], cmp["numel"],
                                                 cmp["first_bad"], cmp["max_abs"]))
    return None


def max_abs_error(x, ref64):
    """max |x - ref64| over the positions where ref64 is finite, in float64 chunks; inf
    when x is not finite where ref64 is."""
    a = x.reshape(-1)
    r = ref64.reshape(-1)
    worst = 0.0
    for i in range(0, a.numel(), COMPARE_CHUNK):
        rc = r[i:i + COMPARE_CHUNK].to(torch.float64)
        d = (a[i:i + COMPARE_CHUNK].to(torch.float64) - rc).abs()
        d = torch.where(torch.isfinite(rc), d, torch.zeros_like(d))
        d = torch.nan_to_num(d, nan=math.inf)
        if d.numel():
            worst = max(worst, float(d.max().item()))
    return worst


def max_abs_finite(x):
    """max |x| over finite elements."""
    flat = x.reshape(-1)
    worst = 0.0
    for i in range(0, flat.numel(), COMPARE_CHUNK):
        c = flat[i:i + COMPARE_CHUNK].to(torch.float64).abs()
        c = torch.where(torch.isfinite(c), c, torch.zeros_like(c))
        if c.numel():
            worst = max(worst, float(c.max().item()))
    return worst


def sticky_cuda_class(exc):
    """'cuda/CUDA_ERROR_...' when exc reports an error that poisons the CUDA context."""
    text = str(exc).lower()
    for needle, name in STICKY_CUDA_MESSAGES:
        if needle in text:
            return "cuda/" + name
    return None


def physical_memory_bytes():
    """Physical RAM of the host in bytes (0 when unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


# ---------------------------------------------------------------------------------------
# libopforge_gpu through ctypes (gpu_contracts section B)

class GpuLib:
    """The C library and one session on one device. Every JSON string it returns is
    copied and freed here with ofg_string_free."""

    def __init__(self, path):
        self.dll = ctypes.CDLL(path)
        d = self.dll
        c = ctypes
        d.ofg_session_open.argtypes = [c.c_int, c.c_char_p, c.POINTER(c.c_void_p),
                                       c.c_char_p, c.c_size_t]
        d.ofg_session_open.restype = c.c_int
        d.ofg_session_free.argtypes = [c.c_void_p]
        d.ofg_session_free.restype = None
        d.ofg_device_info.argtypes = [c.c_void_p]
        d.ofg_device_info.restype = c.c_void_p
        d.ofg_candidate_prepare.argtypes = [c.c_void_p, c.c_char_p, c.c_char_p]
        d.ofg_candidate_prepare.restype = c.c_void_p
        d.ofg_candidate_run.argtypes = [c.c_void_p, c.c_int, c.c_char_p, c.c_ulonglong]
        d.ofg_candidate_run.restype = c.c_void_p
        d.ofg_candidate_time.argtypes = [c.c_void_p, c.c_int, c.c_char_p, c.c_ulonglong,
                                         c.c_char_p]
        d.ofg_candidate_time.restype = c.c_void_p
        d.ofg_candidate_free.argtypes = [c.c_void_p, c.c_int]
        d.ofg_candidate_free.restype = None
        d.ofg_string_free.argtypes = [c.c_void_p]
        d.ofg_string_free.restype = None
        self.session = None

    def open(self, device, cache_dir):
        """Opens the session on device (raises RuntimeError with the library's
        message)."""
        sess = ctypes.c_void_p()
        err = ctypes.create_string_buffer(1024)
        cdir = cache_dir.encode() if cache_dir else None
        if self.dll.ofg_session_open(device, cdir, ctypes.byref(sess), err, len(err)) != 0:
            raise RuntimeError(err.value.decode("utf-8", "replace") or "ofg_session_open")
        self.session = sess

    def _take(self, ptr, what):
        """Parses and frees a JSON string returned by the library."""
        if not ptr:
            raise EvalError("launch", "gpu_library/null_reply", what + " returned NULL")
        try:
            text = ctypes.string_at(ptr).decode("utf-8", "replace")
        finally:
            self.dll.ofg_string_free(ptr)
        try:
            return json.loads(text)
        except ValueError:
            raise EvalError("launch", "gpu_library/bad_reply",
                            "%s returned unparsable JSON: %s" % (what, text[:300]))

    def device_info(self):
        """The device description of the session as a dict."""
        return self._take(self.dll.ofg_device_info(self.session), "ofg_device_info")

    def prepare(self, candidate, tensors):
        """Compiles and validates candidate against the tensor specs."""
        ptr = self.dll.ofg_candidate_prepare(self.session, json.dumps(candidate).encode(),
                                             json.dumps(tensors).encode())
        return self._take(ptr, "ofg_candidate_prepare")

    @staticmethod
    def _pointers(named, reset_state=True):
        """The pointers JSON of [(name, tensor)] (data_ptr of each)."""
        doc = {"tensors": [{"name": n, "ptr": t.data_ptr()} for n, t in named]}
        if not reset_state:
            doc["reset_state"] = False
        return json.dumps(doc).encode()

    def run(self, handle, named, stream, reset_state=True):
        """Runs the plan once on stream over the [(name, tensor)] given; with
        reset_state False, scratch buffers and module globals keep what the last run
        left in them."""
        ptr = self.dll.ofg_candidate_run(self.session, handle,
                                         self._pointers(named, reset_state), stream)
        return self._take(ptr, "ofg_candidate_run")

    def time(self, handle, named, stream, timing):
        """Times the plan with the timing parameters given."""
        ptr = self.dll.ofg_candidate_time(self.session, handle, self._pointers(named),
                                          stream, json.dumps(timing).encode())
        return self._take(ptr, "ofg_candidate_time")

    def free(self, handle):
        """Releases a prepared candidate."""
        self.dll.ofg_candidate_free(self.session, handle)


# ---------------------------------------------------------------------------------------
# Task loading

class Task:
    """A loaded task: its module, its model on the task device, and its settings."""

    def __init__(self, args):
        self.name = args["name"]
        self.source = args["source"]
        self.seed = args["seed"]
        self.precision = args["precision"]
        self.atol = args["tolerance"]["atol"]
        self.rtol = args["tolerance"]["rtol"]
        self.trials = args["trials"]
        self.accuracy_factor = args["accuracy_factor"]
        self.module = None
        self.model = None
        self.device = None
        self.meta_reason = None
        self.estimate = None
        self.init_inputs = None
        self.profile = None
        self.specs = None


def _check_type(args, key, types_, default):
    """args[key] when it has one of types_ (bool never counts as a number), default
    when absent; raises a protocol error naming the field otherwise."""
    if key not in args:
        return default
    v = args[key]
    if isinstance(v, bool) and bool not in types_:
        raise EvalError("protocol", "protocol/bad_argument", "field %s has the wrong type" % key)
    if not isinstance(v, types_):
        raise EvalError("protocol", "protocol/bad_argument", "field %s has the wrong type" % key)
    return v


def parse_load_args(args):
    """Validates load_task arguments; returns a new dict with defaults filled in."""
    allowed = {"source", "seed", "precision", "tolerance", "trials", "name",
               "accuracy_factor"}
    for key in args:
        if key not in allowed:
            raise EvalError("protocol", "protocol/bad_argument", "unknown field %s" % key)
    if not isinstance(args.get("source"), str):
        raise EvalError("protocol", "protocol/bad_argument", "field source must be a string")
    out = {"source": args["source"]}
    out["seed"] = _check_type(args, "seed", (int,), DEFAULT_SEED)
    out["precision"] = _check_type(args, "precision", (str,), "fp32")
    if out["precision"] not in PRECISIONS:
        raise EvalError("protocol", "protocol/bad_argument",
                        "field precision must be one of fp32, tf32, bf16")
    tol = _check_type(args, "tolerance", (dict,), None)
    out["tolerance"] = default_tolerance(out["precision"])
    if tol is not None:
        for key in tol:
            if key not in ("atol", "rtol"):
                raise EvalError("protocol", "protocol/bad_argument",
                                "unknown field tolerance.%s" % key)
            v = _check_type(tol, key, (int, float), None)
            if not math.isfinite(v) or v < 0:
                raise EvalError("protocol", "protocol/bad_argument",
                                "field tolerance.%s must be finite and >= 0" % key)
            out["tolerance"][key] = float(v)
    out["trials"] = _check_type(args, "trials", (int,), DEFAULT_TRIALS)
    if not 1 <= out["trials"] <= MAX_TRIALS:
        raise EvalError("protocol", "protocol/bad_argument",
                        "field trials must be in 1..%d" % MAX_TRIALS)
    out["name"] = _check_type(args, "name", (str,), "task")
    out["accuracy_factor"] = float(_check_type(args, "accuracy_factor", (int, float),
                                               DEFAULT_ACCURACY_FACTOR))
    if not out["accuracy_factor"] > 0 or not math.isfinite(out["accuracy_factor"]):
        raise EvalError("protocol", "protocol/bad_argument",
                        "field accuracy_factor must be > 0")
    return out


_task_counter = [0]


def exec_task_source(source, name):
    """Executes task source in a fresh module (registered in sys.modules so that
    dataclasses and pickling inside it work, and in linecache so that tracebacks show
    its lines). Returns the module; task exceptions propagate."""
    _task_counter[0] += 1
    modname = "opforge_task_%d" % _task_counter[0]
    filename = "<task %s>" % name
    mod = types.ModuleType(modname)
    mod.__file__ = filename
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    sys.modules[modname] = mod
    code = compile(source, filename, "exec")
    exec(code, mod.__dict__)
    missing = [s for s in ("Model", "get_inputs", "get_init_inputs")
               if not callable(getattr(mod, s, None))]
    if missing:
        raise EvalError("load", "load/missing_symbol",
                        "task source does not define %s" % ", ".join(missing))
    return mod


def to_device(obj, dev):
    """obj with every tensor moved to dev (a no-op for tensors already there)."""
    if isinstance(obj, torch.Tensor):
        return obj if obj.device == torch.device(dev) else obj.to(dev)
    if isinstance(obj, list):
        return [to_device(v, dev) for v in obj]
    if isinstance(obj, tuple):
        return tuple(to_device(v, dev) for v in obj)
    return obj


# ---------------------------------------------------------------------------------------
# The evaluator

class DeviceLock:
    """Exclusive use of one GPU among the evaluator processes of a host (the worker slots
    of `--workers-per-gpu`, or several servers): every stretch that runs kernels, and
    above all every timing, holds it, so that timings never overlap other work on the
    device, while compiles (NVRTC, torch.compile) and task loading run concurrently.
    An flock on a file named after the device's UUID; re-entrant within the process.
    path None makes it a no-op (CPU and meta evaluators)."""

    def __init__(self, path):
        self.path = path
        self.fd = None
        self.depth = 0
        self.waited_s = 0.0

    @staticmethod
    def path_for(props, index):
        """The lock file of a device: one per physical GPU, whatever the index order."""
        uuid = str(getattr(props, "uuid", "") or "index-%d" % index)
        safe = "".join(c for c in uuid if c.isalnum() or c == "-")
        return os.path.join(tempfile.gettempdir(), "opforge-gpu-%s.lock" % safe)

    def __enter__(self):
        if self.path is None:
            return self
        if self.depth == 0:
            if self.fd is None:
                self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            started = time.monotonic()
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            self.waited_s += time.monotonic() - started
        self.depth += 1
        return self

    def __exit__(self, *exc):
        if self.path is None:
            return False
        self.depth -= 1
        if self.depth == 0:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        return False


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
        phys = physical_memory_bytes()
        self.host_mem_bytes = host_mem_bytes if host_mem_bytes is not None else phys // 4
        self.allow_cpu_evaluate = allow_cpu_evaluate
        self.task = None
        self.copy_bw = None
        self.device_info = {"type": device} if not self.is_cuda else {}
        self.flush_buf = None
        self.gpu = DeviceLock(None)

    # -- device

    def init_cuda(self, cache_dir):
        """Selects the device, caps its memory, opens the library session, and fills
        device_info."""
        idx = torch.device(self.device).index
        torch.cuda.set_device(idx)
        torch.cuda.set_per_process_memory_fraction(self.mem_fraction, idx)
        torch.zeros(1, device=self.device)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        props = torch.cuda.get_device_properties(idx)
        self.gpu = DeviceLock(DeviceLock.path_for(props, idx))
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
        "exit" or "fatal"."""
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
        """The DESIGN 2.2 profile of the current task (cached per task)."""
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
        floors."""
        from torch.utils.flop_counter import FlopCounterMode
        # Generating gigabytes of inputs saturates the GPU's memory as much as a kernel
        # does: it, too, waits for the device lock (an H200 run without this measured
        # another slot's eager GEMM at 4.83 ms instead of 2.79).
        with self.gpu:
            inputs = self.make_inputs(task, task.seed)
        with torch.no_grad(), self.gpu:
            with FlopCounterMode(display=False) as counter:
                outputs = task.model(*inputs)
        flops = int(counter.get_total_flops())
        outs = flatten_outputs(outputs)
        ins = named_inputs(inputs)
        state = named_state(task.model)
        prof = {"name": task.name, "device": task.device,
                "inputs": [tensor_spec(n, t) for n, t in ins],
                "scalar_inputs": [{"name": "input:%d" % i, "value": json_safe(v)}
                                  for i, v in enumerate(inputs)
                                  if not isinstance(v, torch.Tensor)],
                "params": [dict(tensor_spec(n, t), kind="buffer" if not isinstance(
                    t, torch.nn.Parameter) else "parameter") for n, t in state],
                "outputs": [tensor_spec("output:%d" % i, t) for i, t in enumerate(outs)],
                "flops": flops, "precision": task.precision,
                "tolerance": {"atol": task.atol, "rtol": task.rtol}}
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
            prof.update(extract_graph(task.model, inputs, dict((id(t), n) for n, t in state)))
        prof.update(self._timings(task, inputs, prof))
        task.specs = {"tensors": [{"name": s["name"], "dtype": s["dtype"],
                                   "numel": s["numel"], "bytes": s["bytes"]}
                                  for s in prof["inputs"] + prof["params"] + prof["outputs"]],
                      "precision": task.precision}
        return prof

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

    def time_fn(self, fn):
        """Times fn on the current stream: CUDA events, an L2 flush (a 256 MB scratch
        tensor zeroed) before each rep, 3 warm-ups, reps until RSE < 1% (10..200),
        median reported."""
        if self.flush_buf is None:
            self.flush_buf = torch.empty(TIMING["flush_bytes"] // 4, dtype=torch.float32,
                                         device=self.device)
        for _ in range(TIMING["warmup"]):
            fn()
        torch.cuda.synchronize()
        samples = []
        started = time.monotonic()
        while True:
            self.flush_buf.zero_()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end))
            if timing_should_stop(samples, TIMING["min_reps"], TIMING["max_reps"],
                                  TIMING["target_rse"]):
                break
            if (len(samples) >= TIMING["min_reps"]
                    and time.monotonic() - started > TIMING_MAX_SECONDS):
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
        """Verifies and times a candidate (DESIGN sections 4 and 5)."""
        if not (self.is_cuda or self.allow_cpu_evaluate):
            raise EvalError("load", "evaluate/no_gpu",
                            "evaluate needs a CUDA device; this evaluator runs on %s"
                            % self.device)
        cand = raw.get("candidate") if isinstance(raw, dict) else None
        if (not isinstance(cand, dict) or not isinstance(cand.get("source"), str)
                or not isinstance(cand.get("plan"), dict)):
            raise EvalError("protocol", "protocol/bad_argument",
                            "field candidate must be an object with source and plan")
        task = self._require_task()
        if task.device == "meta":
            raise EvalError("load", "evaluate/no_gpu", "the task is loaded on meta")
        if self.lib is None:
            raise EvalError("load", "load/gpu_library",
                            "libopforge_gpu is not available: %s" % self.lib_error)
        self.profile({})
        return CandidateRun(self, task, cand).run()


class allow_tf32:
    """Context manager: TF32 matmuls and convolutions allowed (or not) inside."""

    def __init__(self, on):
        self.on = on

    def __enter__(self):
        self.saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        torch.backends.cuda.matmul.allow_tf32 = self.on
        torch.backends.cudnn.allow_tf32 = self.on

    def __exit__(self, *exc):
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = self.saved
        return False


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
        self.result = {"compile": None, "correct": False, "trials": [], "robust": None,
                       "accuracy": None,
                       "checks": {"inputs_unchanged": None, "outputs_written": None,
                                  "repeat_consistent": None, "above_floor": None},
                       "time": None, "speedup": None, "floor_fraction": None,
                       "failure": None}

    def stream(self):
        """The current CUDA stream as an integer (0 off CUDA)."""
        return torch.cuda.current_stream().cuda_stream if self.ev.is_cuda else 0

    def run(self):
        """Returns the evaluation result; raises EvalError(fatal) on a sticky error."""
        prep = self.lib.prepare(self.cand, self.task.specs)
        self.result["compile"] = prep.get("compile")
        if not prep.get("ok") and prep.get("sticky"):
            self._library_failure(prep)
        if not prep.get("ok"):
            self.result["failure"] = prep.get("failure") or {
                "stage": "compile", "class": "compile/unknown", "message": "prepare failed"}
            return self.result
        self.handle = prep.get("handle")
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
            if self.handle is not None and not self.fatal:
                try:
                    self.lib.free(self.handle)
                except Exception:
                    pass
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

    def _library_failure(self, r):
        """Raises the failure a library reply carries: fatal (EvalError) when sticky,
        else a CandidateFailure."""
        fail = r.get("failure") or {"stage": "launch", "class": "launch/unknown",
                                    "message": "the library reported a failure"}
        if r.get("sticky"):
            self.result["failure"] = fail
            self.fatal = True
            raise EvalError(fail.get("stage", "launch"), fail.get("class", "cuda/unknown"),
                            fail.get("message", ""), fatal=True, result=self.result)
        raise CandidateFailure(fail.get("stage", "launch"), fail.get("class", "launch/unknown"),
                               fail.get("message", ""))

    def _reference(self, inputs):
        """Fresh reference outputs of the task model on inputs (new tensors)."""
        with torch.no_grad():
            return [t.contiguous() for t in flatten_outputs(self.task.model(*inputs))]

    def _named(self, inputs, outs):
        """[(name, tensor)] the plan sees: inputs, parameters and buffers (contiguous,
        detached, sharing storage) and the outputs."""
        named = [(n, t.detach().contiguous()) for n, t in named_inputs(inputs)]
        named += [(n, t.detach().contiguous()) for n, t in named_state(self.task.model)]
        named += [("output:%d" % i, t) for i, t in enumerate(outs)]
        return named

    def _clone_budget(self):
        """Bytes the input guard may spend on copies: a quarter of what is left under the
        memory share (all of a CPU test's)."""
        if not self.ev.is_cuda:
            return 1 << 62
        total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
        left = self.ev.mem_fraction * total - torch.cuda.memory_reserved()
        return max(0, int(left / 4))

    def _trial(self, seed, robust, f64):
        """One trial on fresh inputs; returns (inputs, refs, outs, named) for reuse."""
        task = self.task
        inputs = self.ev.make_inputs(task, seed, robust)
        refs = self._reference(inputs)
        outs = self._alloc_outputs(refs)
        named = self._named(inputs, outs)
        guard = InputGuard([p for p in named if not p[0].startswith("output:")],
                           self._clone_budget())
        self._launch(named)
        record = {"seed": seed, "ok": True, "max_abs": 0.0, "max_rel": 0.0}
        if robust:
            self.result["robust"] = record
        else:
            self.result["trials"].append(record)
        # Inputs first: outputs compared against a reference of inputs the candidate
        # has since overwritten say less than the overwrite itself.
        changed = guard.changed()
        del guard
        if changed:
            record["ok"] = False
            self.result["checks"]["inputs_unchanged"] = False
            raise CandidateFailure("check", "check/inputs_modified",
                                   "the candidate modified %s" % ", ".join(changed))
        try:
            self._check_outputs(record, outs, refs, robust)
        except CandidateFailure as failure:
            if not (failure.failure["class"] in ("correctness/mismatch",
                                                 "correctness/robust_mismatch")
                    and self._within_float64_budget(
                        inputs, refs, outs, "robust_accuracy" if robust else "trial_accuracy")):
                raise
            record["ok"] = True
            record["judged_by"] = "float64 accuracy budget"
        if f64:
            self._accuracy_budget(inputs, refs, outs)
        return inputs, refs, outs, named

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

    def _alloc_outputs(self, refs):
        """New output tensors shaped like the profile says, filled with the poison
        pattern."""
        outs = []
        for i, (spec, ref) in enumerate(zip(self._output_specs(), refs)):
            if list(ref.shape) != spec["shape"] or dtype_name(ref.dtype) != spec["dtype"]:
                raise EvalError("load", "evaluate/reference_changed",
                                "output:%d of the reference is %s %s, the profile says %s %s"
                                % (i, dtype_name(ref.dtype), list(ref.shape),
                                   spec["dtype"], spec["shape"]))
            out = torch.empty_like(ref, memory_format=torch.contiguous_format)
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
        """The fp32 accuracy budget of DESIGN section 5 against a float64 reference,
        recorded under result[key]. Raises on a broken budget when raise_on_fail, else
        returns whether every output kept within it (False when it could not be
        computed)."""
        try:
            model64 = copy.deepcopy(self.task.model).double()
            in64 = [t.double() if isinstance(t, torch.Tensor) and t.dtype.is_floating_point
                    else t for t in inputs]
            with torch.no_grad():
                refs64 = flatten_outputs(model64(*in64))
            del model64, in64
        except Exception as exc:
            if self.ev.is_cuda and sticky_cuda_class(exc):
                raise
            self.ev._release_memory()
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
        inputs, refs, outs, named = last
        timing = self.lib.time(self.handle, named, self.stream(), dict(TIMING))
        if not timing.get("ok"):
            self._library_failure(timing)
        self.result["time"] = {k: timing.get(k) for k in ("median_ms", "mean_ms", "reps", "rse")}
        self._recheck(inputs, outs, refs, "after the timing loop")
        # New values in the very buffers the candidate saw: a kernel that caches its
        # result by pointer, or only computes on its first call, returns stale data.
        fresh = self.ev.make_inputs(self.task, self.task.seed + self.task.trials + 1)
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
        check/repeat_inconsistent."""
        for i, (out, ref) in enumerate(zip(outs, refs)):
            cmp = compare_outputs(out, ref, self.task.atol, self.task.rtol)
            verdict = classify_comparison("output:%d" % i, cmp)
            if verdict is not None and not (
                    verdict[0] == "correctness/mismatch"
                    and self._within_float64_budget(inputs, refs, outs, "recheck_accuracy")):
                self.result["checks"]["repeat_consistent"] = False
                raise CandidateFailure("check", "check/repeat_inconsistent",
                                       "%s: %s" % (when, verdict[1]))

    def _apply_floor(self):
        """Speed-ups, floor fraction, and the impossible-floor check."""
        prof = self.task.profile
        median = self.result["time"].get("median_ms")
        if not isinstance(median, (int, float)) or median <= 0:
            return
        eager, comp = prof.get("eager_ms"), prof.get("compile_ms")
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


# ---------------------------------------------------------------------------------------
# Graph extraction

def extract_graph(model, inputs, state_by_id):
    """{"graph": [...], "graph_source": "fx"|"export", "graph_error": str|None}: the FX
    graph of model with output shapes from ShapeProp, falling back to torch.export, and
    to graph null with the reasons when both fail."""
    errors = []
    try:
        return {"graph": fx_graph(model, inputs, state_by_id), "graph_source": "fx",
                "graph_error": None}
    except Exception as exc:
        errors.append("symbolic_trace: %s: %s" % (type(exc).__name__, str(exc)[:500]))
    try:
        return {"graph": export_graph(model, inputs), "graph_source": "export",
                "graph_error": errors[0]}
    except Exception as exc:
        errors.append("torch.export: %s: %s" % (type(exc).__name__, str(exc)[:500]))
    return {"graph": None, "graph_source": None, "graph_error": "; ".join(errors)}


def _meta_shape(meta):
    """(shape, dtype, outputs) fields of a node from a TensorMetadata/FakeTensor or a
    tuple of them."""
    if meta is None:
        return {"shape": None, "dtype": None}
    if hasattr(meta, "shape") and hasattr(meta, "dtype"):
        return {"shape": list(meta.shape), "dtype": dtype_name(meta.dtype)}
    if isinstance(meta, (list, tuple)):
        return {"shape": None, "dtype": None,
                "outputs": [_meta_shape(m) for m in meta]}
    return {"shape": None, "dtype": None}


def fx_graph(model, inputs, state_by_id):
    """Nodes of torch.fx.symbolic_trace(model) with ShapeProp shapes (raises when
    tracing fails; a ShapeProp failure leaves shapes null and says so)."""
    from torch.fx.passes.shape_prop import ShapeProp
    gm = torch.fx.symbolic_trace(model)
    shape_error = None
    try:
        with torch.no_grad():
            ShapeProp(gm).propagate(*inputs)
    except Exception as exc:
        shape_error = "%s: %s" % (type(exc).__name__, str(exc)[:300])
    modules = dict(gm.named_modules())
    nodes = []
    placeholder_index = 0
    for n in gm.graph.nodes:
        entry = {"name": n.name, "op": n.op}
        if n.op == "placeholder":
            entry["target"] = str(n.target)
            entry["tensor"] = "input:%d" % placeholder_index
            placeholder_index += 1
        elif n.op == "call_module":
            mod = modules.get(n.target)
            entry["target"] = type(mod).__name__ if mod is not None else str(n.target)
            entry["module"] = str(n.target)
            if mod is not None:
                entry["attrs"] = module_attrs(mod)
                entry["params"] = [state_by_id[id(p)] for p in
                                   list(mod.parameters(recurse=False))
                                   + list(mod.buffers(recurse=False)) if id(p) in state_by_id]
        elif n.op == "get_attr":
            entry["target"] = str(n.target)
            obj = _resolve_attr(gm, str(n.target))
            if isinstance(obj, torch.Tensor) and id(obj) in state_by_id:
                entry["tensor"] = state_by_id[id(obj)]
        else:
            entry["target"] = target_name(n.target)
        entry["args"] = encode_arg(n.args)
        entry["kwargs"] = encode_arg(n.kwargs)
        entry.update(_meta_shape(n.meta.get("tensor_meta")))
        if shape_error and n.op != "output":
            entry["shape_error"] = shape_error
        nodes.append(entry)
    return nodes


def _resolve_attr(root, path):
    """The object at dotted path under root, or None."""
    obj = root
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def export_graph(model, inputs):
    """Nodes of torch.export.export(model) (ATen level; lifted parameters carry their
    param: names)."""
    ep = torch.export.export(model, tuple(inputs))
    sig = ep.graph_signature
    lifted = dict(getattr(sig, "inputs_to_parameters", {}) or {})
    lifted.update(getattr(sig, "inputs_to_buffers", {}) or {})
    user = list(getattr(sig, "user_inputs", []) or [])
    nodes = []
    for n in ep.graph_module.graph.nodes:
        entry = {"name": n.name, "op": n.op}
        if n.op == "placeholder":
            entry["target"] = str(n.target)
            if n.name in lifted:
                entry["tensor"] = "param:" + lifted[n.name]
            elif n.name in user:
                entry["tensor"] = "input:%d" % user.index(n.name)
        else:
            entry["target"] = target_name(n.target)
        entry["args"] = encode_arg(n.args)
        entry["kwargs"] = encode_arg(n.kwargs)
        entry.update(_meta_shape(n.meta.get("val")))
        nodes.append(entry)
    return nodes


# ---------------------------------------------------------------------------------------
# Protocol

def parse_request(line):
    """(id, op, args) from one request line (bytes). Raises ProtocolError, carrying the
    request's id when it could be read (None otherwise)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError(None, "protocol/bad_encoding", "request line is not UTF-8")
    try:
        req = json.loads(text)
    except ValueError as exc:
        raise ProtocolError(None, "protocol/bad_json", "request line is not JSON: %s" % exc)
    if not isinstance(req, dict):
        raise ProtocolError(None, "protocol/not_object", "request must be a JSON object")
    req_id = req.get("id")
    if not isinstance(req_id, int) or isinstance(req_id, bool):
        raise ProtocolError(None, "protocol/bad_id", "request id must be an integer")
    op = req.get("op")
    if not isinstance(op, str):
        raise ProtocolError(req_id, "protocol/bad_op", "request op must be a string")
    args = {k: v for k, v in req.items() if k not in ("id", "op")}
    return req_id, op, args


class ProtocolError(Exception):
    """A request line that could not be parsed; id is the request's id if known."""

    def __init__(self, req_id, cls, message):
        super().__init__(message)
        self.req_id = req_id
        self.cls = cls
        self.message = message

    def reply(self):
        """The ok:false reply of this error."""
        return {"id": self.req_id, "ok": False, "fatal": False,
                "error": {"stage": "protocol", "class": self.cls, "message": self.message}}


def handle_line(ev, line):
    """Reply and action for one raw request line."""
    try:
        req_id, op, args = parse_request(line)
    except ProtocolError as err:
        return err.reply(), None
    return ev.handle(req_id, op, args)


def write_all(fd, data):
    """Writes all of data to fd."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def read_request(infile):
    """The next request line (bytes, newline stripped), None at EOF, or a ProtocolError
    for a line over MAX_LINE_BYTES (the rest of which is discarded)."""
    line = infile.readline(MAX_LINE_BYTES + 1)
    if not line:
        return None
    if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
        while True:
            rest = infile.readline(1 << 20)
            if not rest or rest.endswith(b"\n"):
                break
        return ProtocolError(None, "protocol/line_too_long",
                             "request line over %d bytes" % MAX_LINE_BYTES)
    return line.rstrip(b"\r\n")


def serve(ev, infile, out_fd):
    """Answers requests until shutdown or EOF (returns 0); exits the process with
    status 3 right after the reply to a request that poisoned the CUDA context."""
    while True:
        line = read_request(infile)
        if line is None:
            return 0
        if isinstance(line, ProtocolError):
            reply, action = line.reply(), None
        elif not line.strip():
            continue
        else:
            reply, action = handle_line(ev, line)
        try:
            data = encode_line(reply)
        except (TypeError, ValueError) as exc:
            data = encode_line({"id": reply.get("id"), "ok": False, "fatal": False,
                                "error": {"stage": "protocol", "class": "protocol/encode",
                                          "message": "reply not encodable: %s" % exc}})
        write_all(out_fd, data)
        if action == "exit":
            return 0
        if action == "fatal":
            sys.stderr.flush()
            os._exit(PROTOCOL_FD_EXIT_FATAL)


def protect_stdio():
    """Moves the protocol's stdin and stdout to private descriptors (not inherited by
    children) and points fd 0 at /dev/null and fd 1 at stderr, so task code can neither
    read requests nor corrupt replies. Returns (request file, reply fd)."""
    sys.stdout.flush()
    out_fd = os.dup(1)
    in_fd = os.dup(0)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stdin = open(os.devnull, "r")
    return os.fdopen(in_fd, "rb", buffering=0), out_fd


def parse_args(argv):
    """The command line (gpu_contracts A) as an argparse namespace."""
    p = argparse.ArgumentParser(description="opforge evaluator (JSON lines on stdio)")
    p.add_argument("--device", required=True, help="CUDA device index, cpu or meta")
    p.add_argument("--lib", default=None, help="path of libopforge_gpu.so")
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--mem-fraction", type=float, default=0.9)
    p.add_argument("--host-mem-bytes", type=int, default=None,
                   help="bytes a CPU task may use before it is profiled on meta "
                        "(default: 25%% of physical memory)")
    return p.parse_args(argv)


def usage_exit(message):
    """Exits with status 2 before the ready line, saying why on stderr."""
    sys.stderr.write("evaluator: %s\n" % message)
    sys.stderr.flush()
    raise SystemExit(2)


def make_evaluator(opts):
    """Builds the evaluator of the command line; raises SystemExit(2) with a message
    for a device that does not exist."""
    if opts.device in ("cpu", "meta"):
        return Evaluator(opts.device, host_mem_bytes=opts.host_mem_bytes)
    try:
        index = int(opts.device)
    except ValueError:
        usage_exit("--device must be an index, cpu or meta")
    if not torch.cuda.is_available() or index < 0 or index >= torch.cuda.device_count():
        usage_exit("CUDA device %d is not available" % index)
    lib, lib_error = None, None
    if opts.lib:
        try:
            lib = GpuLib(opts.lib)
        except OSError as exc:
            lib_error = "cannot load %s: %s" % (opts.lib, exc)
    else:
        lib_error = "no --lib given"
    ev = Evaluator("cuda:%d" % index, lib=lib, lib_error=lib_error,
                   mem_fraction=opts.mem_fraction, host_mem_bytes=opts.host_mem_bytes)
    ev.init_cuda(opts.cache_dir)
    return ev


def main(argv=None):
    """Protects stdio, writes the ready line and serves; returns the exit status."""
    opts = parse_args(argv if argv is not None else sys.argv[1:])
    infile, out_fd = protect_stdio()
    ev = make_evaluator(opts)
    ready = {"event": "ready", "pid": os.getpid(), "device": ev.device_info}
    if ev.lib_error and ev.is_cuda:
        ready["gpu_library_error"] = ev.lib_error
    write_all(out_fd, encode_line(ready))
    return serve(ev, infile, out_fd)


if __name__ == "__main__":
    sys.exit(main())
