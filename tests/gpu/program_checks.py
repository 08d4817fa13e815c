"""GPU checks of program candidates (docs/architecture.md, "Programs"), run by
tests/gpu/gpu_run.py (or alone: `python3 tests/gpu/program_checks.py --build build
--kernelbench ../shared/kernelbench`). They drive one evaluator process (gpu/evaluator/
main.py on GPU 0, the JSON-lines protocol) directly, without the server:
  (a) a program with graph "true" is checked on fresh inputs in every trial: each trial
      and the robust trial ran the graph replay and passed, and the graph was used;
  (b) a planted program whose region saves its result on its first launch and repeats it
      afterwards fails (correctness/mismatch or check/repeat_inconsistent);
  (c) the all-library reference program of level2/1_Conv2D_ReLU_BiasAdd is correct,
      timed within 5% of the profile's eager, and timed in turn with eager (its result's
      "eager", as many reps) within 2% of it;
  (d) a program of 100 regions (a chain of relus) is prepared whole and is correct: the
      GPU library holds 1024 prepared candidates (it held 64, and ResNet-101's programs
      of 107 regions all failed);
  (e) the same conv task as a program whose region (relu, then the bias at i % C) reads
      the library convolution's output and writes the task's output channels-last (its
      plan's "channels_last") is correct, and its convolution step is faster than the
      reference program's."""
import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# Linear -> relu -> * 2: the Linear a library step (cuBLAS), relu and mul one region.
SMALL_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = nn.Linear(k, n)

    def forward(self, x):
        return torch.relu(self.fc(x)) * 2.0

def get_inputs():
    return [torch.rand(512, 1024)]

def get_init_inputs():
    return [1024, 1024]
"""
SMALL_N = 512 * 1024

RELU_SCALE_SRC = r"""
extern "C" __global__ void relu_scale(const float* __restrict__ x, float* __restrict__ y,
                                      long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.0f) * 2.0f;
}
"""

# Planted: on its first launch it computes and saves its result in module globals, then
# marks itself done; every later launch copies the saved result, whatever the input.
STALE_SRC = r"""
__device__ int g_done;
__device__ float g_saved[%d];
extern "C" __global__ void stale_relu_scale(const float* __restrict__ x,
                                            float* __restrict__ y, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  if (g_done == 0) {
    float v = fmaxf(x[i], 0.0f) * 2.0f;
    g_saved[i] = v;
    y[i] = v;
  } else {
    y[i] = g_saved[i];
  }
}
extern "C" __global__ void mark_done() { g_done = 1; }
""" % SMALL_N

# 100 relus in a row (FX unrolls the loop): a program of 100 regions, more than the GPU
# library held prepared before it held 1024 (ResNet-101's programs have 107).
CHAIN_REGIONS = 100
CHAIN_N = 1 << 20
CHAIN_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        for _ in range(%d):
            x = torch.relu(x) - 0.001
        return x

def get_inputs():
    return [torch.rand(1024, 1024) - 0.5]

def get_init_inputs():
    return []
""" % CHAIN_REGIONS

RELU_SHIFT_SRC = r"""
extern "C" __global__ void relu_shift(const float* __restrict__ x, float* __restrict__ y,
                                      long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __fsub_rn(fmaxf(x[i], 0.0f), 0.001f);
}
"""

CONV_TASK = "level2/1_Conv2D_ReLU_BiasAdd.py"
CONV_TOLERANCE = 0.05


def region_program(source, kernels, graph):
    """Library step fc, then one region (relu, mul) writing output:0."""
    launches = [{"kernel": kernels[0], "grid": [SMALL_N // 256], "block": [256],
                 "args": [{"tensor": "node:fc"}, {"tensor": "output:0"}, {"i64": SMALL_N}]}]
    launches += [{"kernel": k, "grid": [1], "block": [1], "args": []} for k in kernels[1:]]
    return {"program": {"graph": graph, "steps": [
        {"library": "Linear", "node": "fc", "region": 0},
        {"region": 1, "family": "pointwise", "nodes": ["relu", "mul"], "source": source,
         "options": [], "reads": ["node:fc"], "writes": ["output:0"],
         "plan": {"buffers": [], "launches": launches}}]}}


def library_program(profile, graph):
    calls = [n for n in profile["graph"] if n["op"].startswith("call_")]
    return {"program": {"graph": graph, "steps": [
        {"library": n["target"], "node": n["name"], "region": i} for i, n in enumerate(calls)]}}


class Evaluator:
    """gpu/evaluator/main.py on one device, spoken to one JSON line at a time."""

    def __init__(self, build, out_dir):
        lib = os.path.abspath(os.path.join(build, "gpu", "libopforge_gpu.so"))
        cache = tempfile.mkdtemp(prefix="opforge-programs-cache-")
        self.log = open(os.path.join(out_dir, "programs_evaluator.log"), "w")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(REPO, "gpu", "evaluator", "main.py"), "--device", "0",
             "--lib", lib, "--cache-dir", cache], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.log, cwd=REPO)
        self.lines = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.next_id = 1
        self.ready = self._read(300)

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _read(self, timeout):
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError("evaluator silent for %d s" % timeout)
        if line is None:
            raise RuntimeError("evaluator exited (see programs_evaluator.log)")
        return json.loads(line)

    def request(self, op, timeout, **args):
        req = {"id": self.next_id, "op": op, **args}
        self.next_id += 1
        self.proc.stdin.write((json.dumps(req) + "\n").encode())
        self.proc.stdin.flush()
        reply = self._read(timeout)
        if reply.get("id") != req["id"]:
            raise RuntimeError("reply to the wrong request: %s" % str(reply)[:300])
        return reply

    def close(self):
        try:
            self.request("shutdown", 60)
        except (RuntimeError, OSError, ValueError):
            pass
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def _summary(result):
    g = result.get("graph") or {}
    return ("failure=%s time=%s graph=%s steps_ms=%s" % (
        (result.get("failure") or {}).get("class"), (result.get("time") or {}).get("median_ms"),
        json.dumps(g), result.get("steps_ms")))


def check_graph_true(ev, check, profile):
    """(a): every trial ran the replay on its own fresh inputs, and the graph was used."""
    r = ev.request("evaluate", 600, candidate=region_program(RELU_SCALE_SRC, ["relu_scale"],
                                                             "true"))
    res = r.get("result") or {}
    print("(a) graph true:", _summary(res), flush=True)
    check("(a) program with graph true is correct", r.get("ok") and res.get("correct") is True,
          json.dumps(res.get("failure") or r.get("error")))
    trials = res.get("trials") or []
    check("(a) every trial ran the graph replay and passed",
          len(trials) >= 5 and all(t.get("ok") and (t.get("replay") or {}).get("ok")
                                   for t in trials)
          and len({t.get("seed") for t in trials}) == len(trials)
          and ((res.get("robust") or {}).get("replay") or {}).get("ok") is True,
          json.dumps(trials)[:500])
    g = res.get("graph") or {}
    check("(a) the graph was captured and used", g.get("captured") is True
          and g.get("used") == "graph" and g.get("graph_ms"), json.dumps(g))
    check("(a) steps_ms has one time per step", len(res.get("steps_ms") or []) == 2,
          str(res.get("steps_ms")))


def check_stale_graph_output(ev, check):
    """(b): a region that repeats its first launch's result is caught."""
    r = ev.request("evaluate", 600, candidate=region_program(
        STALE_SRC, ["stale_relu_scale", "mark_done"], "true"))
    res = r.get("result") or {}
    print("(b) stale region:", _summary(res), flush=True)
    cls = (res.get("failure") or {}).get("class")
    check("(b) a region replaying its first result fails", r.get("ok")
          and res.get("correct") is False
          and cls in ("correctness/mismatch", "check/repeat_inconsistent"),
          "%s: %s" % (cls, (res.get("failure") or {}).get("message", "")[:300]))


def check_conv_reference_program(ev, check, kernelbench):
    """(c): the all-library program of a level-2 conv task, correct and as fast as eager,
    and timed in turn with eager (its result's "eager")."""
    path = os.path.join(kernelbench, CONV_TASK)
    with open(path) as f:
        source = f.read()
    r = ev.request("load_task", 600, source=source, name="1_Conv2D_ReLU_BiasAdd")
    check("(c) conv task loads", r.get("ok"), json.dumps(r.get("error")))
    p = ev.request("profile", 900)
    prof = p.get("result") or {}
    check("(c) conv task profiles with a graph", p.get("ok") and prof.get("graph"),
          json.dumps(p.get("error")))
    if not prof.get("graph"):
        return
    r = ev.request("evaluate", 900, candidate=library_program(prof, "auto"))
    res = r.get("result") or {}
    print("(c) conv reference program:", _summary(res), "eager_ms=%s" % prof.get("eager_ms"),
          flush=True)
    check("(c) the all-library conv program is correct", r.get("ok") and res.get("correct"),
          json.dumps(res.get("failure") or r.get("error")))
    median = (res.get("time") or {}).get("median_ms")
    eager = prof.get("eager_ms")
    ratio = median / eager if median and eager else None
    check("(c) its time is within 5% of eager", ratio is not None
          and abs(ratio - 1) <= CONV_TOLERANCE,
          "%s ms vs eager %s ms (x%s)" % (median, eager, ratio and round(ratio, 3)))
    in_turn = res.get("eager") or {}
    speedup = (res.get("speedup") or {}).get("eager")
    check("(c) it was timed in turn with eager: as many reps, speed-up their ratio",
          in_turn.get("reps") == (res.get("time") or {}).get("reps") and median
          and in_turn.get("median_ms") and speedup
          and abs(speedup - in_turn["median_ms"] / median) < 1e-9,
          "eager in turn %s, time %s, speedup %s" % (json.dumps(in_turn),
                                                      json.dumps(res.get("time")), speedup))
    check("(c) against eager timed in turn, it is within 2%",
          speedup is not None and abs(speedup - 1) <= 0.02, "x%s" % speedup)
    conv = [n for n in prof["graph"] if n.get("target") == "Conv2d"]
    check("(c) the conv node carries its FLOPs", conv and conv[0].get("flops", 0) > 0,
          str(conv[0].get("flops") if conv else None))
    check_conv_channels_last(ev, check, prof, res)


# (e): relu, then the bias, on the convolution's output in channels-last order (N, H, W, C):
# the channel of flat element i is i % c.
RELU_BIAS_CL_SRC = r"""
extern "C" __global__ void relu_bias_cl(const float* __restrict__ x, const float* __restrict__ b,
                                        float* __restrict__ y, long long n, int c) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.0f) + b[i % c];
}
"""


def channels_last_program(profile):
    """CONV_TASK as the library convolution and one region (relu, add) that reads the
    convolution's output and writes the task's output in channels-last order."""
    calls = [n for n in profile["graph"] if n["op"].startswith("call_")]
    bias = [n["tensor"] for n in profile["graph"] if str(n.get("tensor", "")).startswith("param:")
            and len(n.get("shape") or []) == 3][0]
    conv = "node:%s" % calls[0]["name"]
    n = 1
    for d in profile["outputs"][0]["shape"]:
        n *= d
    channels = profile["outputs"][0]["shape"][1]
    return {"program": {"graph": "false", "steps": [
        {"library": calls[0]["target"], "node": calls[0]["name"], "region": 0},
        {"region": 1, "family": "pointwise", "nodes": [c["name"] for c in calls[1:]],
         "source": RELU_BIAS_CL_SRC, "options": [], "reads": [conv], "writes": ["output:0"],
         "plan": {"buffers": [], "channels_last": [conv, "output:0"], "launches": [
             {"kernel": "relu_bias_cl", "grid": [(n + 255) // 256], "block": [256],
              "args": [{"tensor": conv}, {"tensor": bias}, {"tensor": "output:0"},
                       {"i64": n}, {"i32": channels}]}]}}]}}


def check_conv_channels_last(ev, check, prof, reference):
    """(e): a program whose region reads the library convolution channels-last is correct,
    and its convolution step is faster than the reference's (docs/architecture.md,
    "Channels-last convolutions")."""
    r = ev.request("evaluate", 900, candidate=channels_last_program(prof))
    res = r.get("result") or {}
    print("(e) channels-last program:", _summary(res), flush=True)
    check("(e) the channels-last conv program is correct", r.get("ok") and res.get("correct"),
          json.dumps(res.get("failure") or r.get("error"))[:400])
    conv_cl = (res.get("steps_ms") or [None])[0]
    conv_ref = (reference.get("steps_ms") or [None])[0]
    check("(e) its convolution step is faster than the reference's",
          conv_cl is not None and conv_ref is not None and conv_cl < conv_ref,
          "channels-last %s ms, reference %s ms" % (conv_cl, conv_ref))


def chain_program(profile):
    """One region per (relu, sub) pair of CHAIN_TASK, each reading the value before it."""
    calls = [n["name"] for n in profile["graph"] if n["op"].startswith("call_")]
    steps, read = [], "input:0"
    for i in range(0, len(calls), 2):
        write = "output:0" if i + 2 >= len(calls) else "node:%s" % calls[i + 1]
        steps.append({"region": i // 2, "family": "pointwise", "nodes": calls[i:i + 2],
                      "source": RELU_SHIFT_SRC, "options": [], "reads": [read],
                      "writes": [write], "plan": {"buffers": [], "launches": [
                          {"kernel": "relu_shift", "grid": [CHAIN_N // 256], "block": [256],
                           "args": [{"tensor": read}, {"tensor": write},
                                    {"i64": CHAIN_N}]}]}})
        read = write
    return {"program": {"graph": "auto", "steps": steps}}


def check_many_regions(ev, check):
    """(d): a program of CHAIN_REGIONS regions is prepared whole and runs correct."""
    r = ev.request("load_task", 300, source=CHAIN_TASK, name="programs_chain")
    check("(d) the chain task loads", r.get("ok"), json.dumps(r.get("error")))
    prof = (ev.request("profile", 600).get("result") or {})
    calls = [n for n in prof.get("graph") or [] if n["op"].startswith("call_")]
    check("(d) its graph has %d call nodes" % (2 * CHAIN_REGIONS),
          len(calls) == 2 * CHAIN_REGIONS, str(len(calls)))
    if len(calls) != 2 * CHAIN_REGIONS:
        return
    r = ev.request("evaluate", 900, candidate=chain_program(prof))
    res = r.get("result") or {}
    print("(d) %d regions:" % CHAIN_REGIONS, _summary(res)[:300], flush=True)
    check("(d) a program of %d regions is correct" % CHAIN_REGIONS,
          r.get("ok") and res.get("correct"), json.dumps(res.get("failure") or r.get("error")))
    regions = ((res.get("compile") or {}).get("regions") or [])
    check("(d) every region was prepared", len(regions) == CHAIN_REGIONS
          and all(x.get("ok") for x in regions), str(len(regions)))


def run_program_checks(build, kernelbench, out_dir, check):
    """All five checks in one evaluator process; an internal error is a failed check."""
    ev = None
    try:
        ev = Evaluator(build, out_dir)
        check("programs: evaluator ready on GPU 0", ev.ready.get("event") == "ready"
              and not ev.ready.get("gpu_library_error"), json.dumps(ev.ready)[:300])
        r = ev.request("load_task", 300, source=SMALL_TASK, name="programs_small")
        check("programs: small task loads", r.get("ok"), json.dumps(r.get("error")))
        p = ev.request("profile", 600)
        prof = p.get("result") or {}
        names = [n["name"] for n in prof.get("graph") or [] if n["op"].startswith("call_")]
        check("programs: small task graph is fc, relu, mul", names == ["fc", "relu", "mul"],
              str(names))
        check_graph_true(ev, check, prof)
        check_stale_graph_output(ev, check)
        check_many_regions(ev, check)
        check_conv_reference_program(ev, check, kernelbench)
    except Exception as exc:  # the run goes on; the failure is reported
        check("programs: checks ran without an internal error", False,
              "%s: %s" % (type(exc).__name__, str(exc)[:300]))
    finally:
        if ev is not None:
            ev.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--kernelbench", default=os.path.join(REPO, "..", "shared", "kernelbench"))
    p.add_argument("--out", default="gpu-out")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = []

    def check(label, ok, detail=""):
        results.append(bool(ok))
        print("%s %s %s" % ("PASS" if ok else "FAIL", label, detail), flush=True)

    run_program_checks(args.build, args.kernelbench, args.out, check)
    print("%d passed, %d failed" % (sum(results), len(results) - sum(results)))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
