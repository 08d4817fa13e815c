#!/usr/bin/env python3
"""Drives libopforge_gpu.so directly on a GPU host, without the evaluator or the server:
the correct kernels of this folder on PyTorch tensors (checked and timed), then every
planted bad kernel in a process of its own (a sticky fault or a hang poisons only that
process). Prints one JSON line per case and a summary.

usage: abi_smoke.py --lib build/gpu/libopforge_gpu.so [--case NAME] [--timeout 30]
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BASELINE = {"relu": 3.0775, "softmax": 6.2517}  # h200-baseline.json eager medians, ms


class Lib:
    def __init__(self, path, cache_dir=None):
        c = ctypes
        self.L = L = c.CDLL(path)
        L.ofg_session_open.argtypes = [c.c_int, c.c_char_p, c.POINTER(c.c_void_p), c.c_char_p,
                                       c.c_size_t]
        L.ofg_session_open.restype = c.c_int
        sigs = {"ofg_device_info": [c.c_void_p],
                "ofg_candidate_prepare": [c.c_void_p, c.c_char_p, c.c_char_p],
                "ofg_candidate_run": [c.c_void_p, c.c_int, c.c_char_p, c.c_ulonglong],
                "ofg_candidate_time": [c.c_void_p, c.c_int, c.c_char_p, c.c_ulonglong,
                                       c.c_char_p],
                "ofg_compile_only": [c.c_void_p, c.c_char_p]}
        for name, args in sigs.items():
            getattr(L, name).argtypes = args
            getattr(L, name).restype = c.c_void_p
        L.ofg_string_free.argtypes = [c.c_void_p]
        L.ofg_candidate_free.argtypes = [c.c_void_p, c.c_int]
        L.ofg_session_free.argtypes = [c.c_void_p]
        s = c.c_void_p()
        err = c.create_string_buffer(512)
        if L.ofg_session_open(0, (cache_dir or "").encode(), c.byref(s), err, 512) != 0:
            raise RuntimeError("ofg_session_open: " + err.value.decode())
        self.s = s

    def _call(self, name, *args):
        p = getattr(self.L, name)(self.s, *args)
        text = ctypes.string_at(p).decode()
        self.L.ofg_string_free(p)
        return json.loads(text)

    def info(self):
        return self._call("ofg_device_info")

    def prepare(self, source, plan, tensors, options=(), precision="fp32"):
        spec = {"tensors": [{"name": n, "dtype": str(t.dtype).replace("torch.", ""),
                             "numel": t.numel(), "bytes": t.numel() * t.element_size()}
                            for n, t in tensors.items()], "precision": precision}
        cand = {"source": source, "options": list(options), "plan": plan}
        return self._call("ofg_candidate_prepare", json.dumps(cand).encode(),
                          json.dumps(spec).encode())

    @staticmethod
    def _ptrs(tensors):
        return json.dumps({"tensors": [{"name": n, "ptr": t.data_ptr()}
                                       for n, t in tensors.items()]}).encode()

    def run(self, h, tensors, stream):
        return self._call("ofg_candidate_run", h, self._ptrs(tensors), stream)

    def time(self, h, tensors, stream, timing=None):
        return self._call("ofg_candidate_time", h, self._ptrs(tensors), stream,
                          json.dumps(timing or {}).encode())


def torch_time(fn, flush_bytes=256 << 20, warmup=3, min_reps=10, max_reps=200, rse=0.01):
    """The library's timing method, in PyTorch: events around fn only, flush before each."""
    import torch
    flush = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    while True:
        flush.fill_(len(samples) & 0xff)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        samples.append(a.elapsed_time(b))
        n = len(samples)
        mean = sum(samples) / n
        sd = (sum((x - mean) ** 2 for x in samples) / (n - 1)) ** 0.5 if n > 1 else float("inf")
        if n >= max_reps or (n >= min_reps and sd / n ** 0.5 / mean < rse):
            return sorted(samples)[n // 2] if n % 2 else sum(sorted(samples)[n // 2 - 1:n // 2 + 1]) / 2


def src(name):
    with open(os.path.join(HERE, name + ".cu")) as f:
        return f.read()


def plan(name):
    with open(os.path.join(HERE, name + ".plan.json")) as f:
        return json.load(f)


def relu_tensors():
    import torch
    x = torch.rand(4096, 393216, device="cuda")
    return {"input:0": x, "output:0": torch.full_like(x, float("nan"))}


def emit(case, **kw):
    print(json.dumps({"case": case, **kw}), flush=True)


SHARED_SRC = r'''
extern "C" __global__ void shared_reverse(const float* x, float* y) {
  extern __shared__ float s[];  // 25600 floats = 100 KiB: needs the opt-in attribute
  long base = (long)blockIdx.x * 25600;
  for (int i = threadIdx.x; i < 25600; i += blockDim.x) s[i] = x[base + i];
  __syncthreads();
  for (int i = threadIdx.x; i < 25600; i += blockDim.x) y[base + i] = s[25599 - i];
}
'''

STATE_SRC = r'''
__device__ int g_calls = 7;  // initialized global: reset to 7 before every run
extern "C" __global__ void count_into(unsigned long long* acc) { atomicAdd(acc, 1ULL); }
extern "C" __global__ void report(const unsigned long long* acc, float* y) {
  y[0] = (float)acc[0];
  y[1] = (float)g_calls;
  g_calls += 1;
}
'''


def check_good(lib, name, tensors, ref_fn, stream, compare, eager_fn=None):
    import torch
    r = lib.prepare(src(name), plan(name), tensors)
    if not r["ok"]:
        emit(name, ok=False, prepare=r)
        return
    comp = {k: v for k, v in r["compile"].items() if k != "log"}
    run = lib.run(r["handle"], tensors, stream)
    torch.cuda.synchronize()
    err = compare(tensors["output:0"], ref_fn())
    tm = lib.time(r["handle"], tensors, stream)
    eager = torch_time(eager_fn) if eager_fn else None
    emit(name, ok=run["ok"] and err["ok"], compile=comp, globals=r.get("globals"), run=run,
         check=err, time=tm, eager_ms_same_method=eager, eager_ms_baseline=BASELINE.get(name),
         speedup_vs_eager=(eager / tm["median_ms"]) if eager and tm.get("ok") else None)
    lib.L.ofg_candidate_free(lib.s, r["handle"])


def case_good(args):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.zeros(1, device="cuda")  # PyTorch retains the primary context first
    lib = Lib(args.lib, args.cache_dir)
    emit("device", info=lib.info())
    stream = torch.cuda.current_stream().cuda_stream

    def rel_err(y, ref):
        e = ((y - ref).abs() / ref.abs().clamp_min(1e-30)).max().item()
        return {"ok": e < 1e-4 and not torch.isnan(y).any().item(), "max_rel": e}

    def close(y, ref):
        d = (y - ref).abs().max().item()
        return {"ok": bool(torch.allclose(y, ref, atol=1e-4, rtol=1e-4)), "max_abs": d}

    t = relu_tensors()
    check_good(lib, "relu", t, lambda: torch.relu(t["input:0"]), stream,
               lambda y, ref: {"ok": bool(torch.equal(y, ref))},
               lambda: torch.relu(t["input:0"]))
    t = relu_tensors()
    check_good(lib, "softmax", t, lambda: torch.softmax(t["input:0"], dim=1), stream, rel_err,
               lambda: torch.softmax(t["input:0"], dim=1))
    del t
    a, b = torch.rand(4096, 4096, device="cuda"), torch.rand(4096, 4096, device="cuda")
    t = {"input:0": a, "input:1": b, "output:0": torch.full_like(a, float("nan"))}
    check_good(lib, "sgemm", t, lambda: torch.matmul(a, b), stream, close,
               lambda: torch.matmul(a, b))
    del t, a, b
    torch.cuda.empty_cache()
    gpu_paths(lib, stream, bool(args.cache_dir))


def gpu_paths(lib, stream, cached):
    """Paths only a GPU exercises: >48 KiB dynamic shared memory, scratch zeroing and
    global reset between runs, a non-default stream, the cubin cache through a session."""
    import torch
    x = torch.rand(64 * 25600, device="cuda")
    t = {"input:0": x, "output:0": torch.full_like(x, float("nan"))}
    p = {"launches": [{"kernel": "shared_reverse", "grid": [64], "block": [256],
                       "shared_bytes": 102400, "args": [{"tensor": "input:0"},
                                                        {"tensor": "output:0"}]}]}
    r = lib.prepare(SHARED_SRC, p, t)
    run = lib.run(r["handle"], t, stream) if r["ok"] else None
    want = x.view(64, 25600).flip(1).reshape(-1)
    emit("shared_100KiB", ok=bool(r["ok"] and run["ok"] and torch.equal(t["output:0"], want)),
         prepare_failure=r["failure"], run=run)
    p["launches"][0]["shared_bytes"] = 232448 - 1024 + 4096  # over the opt-in limit
    r = lib.prepare(SHARED_SRC, p, t)
    emit("shared_over_limit", ok=(not r["ok"]) and r["failure"]["class"] == "plan/shared_too_large",
         failure=r["failure"])

    y = torch.zeros(2, device="cuda")
    t = {"output:0": y}
    p = {"buffers": [{"name": "acc", "bytes": 8}],
         "launches": [{"kernel": "count_into", "grid": [1000], "block": [128],
                       "args": [{"buffer": "acc"}]},
                      {"kernel": "report", "grid": [1], "block": [1],
                       "args": [{"buffer": "acc"}, {"tensor": "output:0"}]}]}
    r = lib.prepare(STATE_SRC, p, t)
    side = torch.cuda.Stream()
    seen = []
    for s in (stream, side.cuda_stream, side.cuda_stream):
        run = lib.run(r["handle"], t, s)
        torch.cuda.synchronize()
        seen.append((run["ok"], y.tolist()))
    tm = lib.time(r["handle"], t, side.cuda_stream, {"min_reps": 10, "max_reps": 20})
    run = lib.run(r["handle"], t, stream)
    torch.cuda.synchronize()
    seen.append((run["ok"], y.tolist()))
    emit("state_reset", ok=all(ok and v == [128000.0, 7.0] for ok, v in seen),
         globals=r.get("globals"), runs=seen, time=tm)

    r2 = lib.prepare(STATE_SRC, p, t)
    emit("session_cache", ok=r2["compile"]["cache"] == ("hit" if cached else "off"),
         first=r["compile"]["cache"], second=r2["compile"]["cache"], cache=lib.info().get("cache"))



BAD = ["bad_launch_limits", "bad_wrong_result", "bad_writes_nothing", "bad_modifies_input",
       "bad_caches_result", "bad_skips_when_done", "bad_illegal_address", "bad_infinite_loop"]


def case_bad(args):
    """One planted kernel: prepare, run, then the checks the evaluator would make."""
    import torch
    name = args.case
    torch.zeros(1, device="cuda")
    lib = Lib(args.lib)
    stream = torch.cuda.current_stream().cuda_stream
    t = relu_tensors()
    x, y = t["input:0"], t["output:0"]
    x_before = x.clone()
    r = lib.prepare(src(name), plan(name), t)
    if not r["ok"]:
        emit(name, caught_at="prepare", failure=r["failure"], sticky=r["sticky"])
        return
    run = lib.run(r["handle"], t, stream)
    if not run["ok"]:
        emit(name, caught_at="run", failure=run["failure"], sticky=run["sticky"])
        return
    torch.cuda.synchronize()
    verdict = {"unwritten_output": bool(torch.isnan(y).any()),
               "inputs_modified": not torch.equal(x, x_before),
               "mismatch": not torch.allclose(y, torch.relu(x_before), atol=1e-4, rtol=1e-4)}
    if name in ("bad_caches_result", "bad_skips_when_done"):
        tm = lib.time(r["handle"], t, stream)
        x.copy_(torch.rand_like(x))
        y.fill_(float("nan"))
        run2 = lib.run(r["handle"], t, stream)
        torch.cuda.synchronize()
        verdict["repeat_inconsistent"] = not torch.equal(y, torch.relu(x))
        verdict["time"] = tm
        verdict["globals"] = r.get("globals")
        verdict["run2"] = run2
    emit(name, caught_at="checks" if any(v is True for v in verdict.values()) else None,
         **verdict)


def drive(args):
    cases = ["good"] + BAD
    results = []
    for case in cases:
        limit = 600 if case == "good" else args.timeout
        cmd = [sys.executable, os.path.abspath(__file__), "--lib", args.lib, "--case", case]
        if args.cache_dir:
            cmd += ["--cache-dir", args.cache_dir]
        t0 = time.time()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
            out, rc = p.stdout, p.returncode
            sys.stderr.write(p.stderr[-4000:])
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            rc = "killed after %d s" % limit
            print(json.dumps({"case": case, "caught_at": "timeout", "rc": rc}), flush=True)
        for line in out.splitlines():
            print(line, flush=True)
            if line.startswith("{"):
                results.append(json.loads(line))
        print(json.dumps({"case": case, "exit": rc, "seconds": round(time.time() - t0, 1)}),
              flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--case")
    ap.add_argument("--cache-dir")
    ap.add_argument("--timeout", type=int, default=30)
    args = ap.parse_args()
    if not args.case:
        drive(args)
    elif args.case == "good":
        case_good(args)
    else:
        case_bad(args)


if __name__ == "__main__":
    main()
