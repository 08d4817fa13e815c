# Evaluator numerics, pure functions tested without a device: the timing rule, peak rates and floors, tolerances and the accuracy budget, output poisoning, comparisons and input fingerprints.
"""Functions that take tensors never keep references to them past the call unless they
say so (InputGuard does); dicts returned are new objects the caller owns."""

import math
import statistics

import torch

from .tensors import nbytes_of, tensor_bytes


# The timing method (docs/architecture.md, "Evaluation rules"), shared by the eager/compile
# timings here and the
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
    """The stopping rule (docs/architecture.md, "Evaluation rules"): at least min_reps, then
    stop as soon as the
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
    """Tolerance used when load_task gives none (docs/architecture.md, "Formats")."""
    tol = 1e-4 if precision == "fp32" else 1e-2
    return {"atol": tol, "rtol": tol}


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
