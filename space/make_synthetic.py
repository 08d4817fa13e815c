#!/usr/bin/env python3
"""Writes the synthetic space table space/synthetic.jsonl.gz (format: space/README.md).

  python3 space/make_synthetic.py [--build build-dev] [--kernelbench ../shared/kernelbench]
      [--python PY] [--seed 31] [--out space/synthetic.jsonl.gz] [--max-points 1500]

For each task of TASKS: the profile of the KernelBench program on the meta device
(`opforge profile --device meta`: shapes and graph, no GPU), with the H200's facts put in
(132 SMs, floors and eager and torch.compile times from the measured H200 baseline,
../shared/kernelbench/h200-baseline.json); its space from `opforge-space-points` (every
point the builtin proposer's moves reach); and a time for every point from a seeded
model, the same on every run with the same seed, build and tasks:

  ln(ms(p)) = ln(ms(first)) + sum over knobs k of [E(family, k, p_k) - E(family, k, first_k)]
              + sum over knobs of [T(task, k, p_k) - T(task, k, first_k)] + N(0, 0.03)

E ~ N(0, 0.12) is a family's effect of a knob value, shared by the family's tasks (what
a memory that transfers can learn); T ~ N(0, 0.05) the task's own. A point is never
faster than 1.02 x the floor (lo: ms becomes lo + lo*ln(1 + e^(20(ms - lo)/lo))/20, which
is ms from 10% above lo). The first point (the proposer's starting point) takes 1.15..2.5 x
the floor, or eager x 0.6..1.1 when that is slower. One knob value in 25 per family makes
every point holding it fail (compile/replay_synthetic_bad_knob for a quarter of them,
correctness/mismatch for the rest), and 2% of the points fail correctness/mismatch alone.
The model is computed by the replay evaluator (gpu/replay/space_table.c, model_point);
this script writes its parameters and asks it (`opforge-replay --query`) for the best. The reference program takes eager x 1.00..1.04.

Nothing here was measured: the table exists to exercise `opforge ablate --replay` and to
compute its targets' table on the CPU until the H200's (tests/gpu/space_record) exists."""
import argparse
import gzip
import json
import math
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

TASKS = [
    "level1/1_Square_matrix_multiplication_.py", "level1/3_Batched_matrix_multiplication.py",
    "level1/6_Matmul_with_large_K_dimension_.py", "level1/17_Matmul_with_transposed_B.py",
    "level1/19_ReLU.py", "level1/21_Sigmoid.py", "level1/26_GELU_.py", "level1/31_ELU.py",
    "level1/23_Softmax.py",
    "level1/36_RMSNorm_.py", "level1/38_L1Norm_.py", "level1/39_L2Norm_.py",
    "level1/40_LayerNorm.py",
    "level1/47_Sum_reduction_over_a_dimension.py", "level1/49_Max_reduction_over_a_dimension.py",
    "level1/51_Argmax_over_a_dimension.py",
    "level1/89_cumsum.py", "level1/91_cumsum_reverse.py",
    "level1/94_MSELoss.py", "level1/96_HuberLoss.py",
    "level1/41_Max_Pooling_1D.py", "level1/42_Max_Pooling_2D.py",
    "level1/44_Average_Pooling_1D.py",
]

H200 = {"name": "NVIDIA H200", "capability": "9.0", "arch": "sm_90", "sm_count": 132,
        "memory_bytes": 150000000000, "l2_bytes": 62914560, "hbm_peak_GBps": 4800,
        "max_shared_optin": 232448, "max_threads_per_block": 1024, "clock_khz": 1980000}


def knobs(key):
    """{name: value} of a point key ("A=1,B=2")."""
    out = {}
    for item in key.split(",") if key else []:
        name, _, value = item.partition("=")
        out[name] = value
    return out


def meta_profile(args, path):
    cmd = [os.path.join(args.build, "opforge"), "profile", path, "--device", "meta",
           "--sandbox", "none", "--evaluator", os.path.join(ROOT, "gpu", "evaluator", "main.py")]
    if args.python:
        cmd += ["--python", args.python]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("profile of %s failed: %s" % (path, p.stderr.strip()[-400:]))
    return json.loads(p.stdout)


def space_points(args, profile):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(profile, f)
        name = f.name
    try:
        p = subprocess.run([os.path.join(args.build, "opforge-space-points"),
                            name, "--max", str(args.max_points)], capture_output=True, text=True)
    finally:
        os.unlink(name)
    if p.returncode != 0:
        raise SystemExit("opforge-space-points failed: %s" % p.stderr.strip())
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


class Model:
    """The seeded time model of the module's docstring."""

    def __init__(self, seed):
        self.seed = seed
        self.cache = {}

    def draw(self, *what, kind="gauss", sd=1.0):
        key = (kind, sd) + what
        if key not in self.cache:
            r = random.Random("%d|%s" % (self.seed, "|".join(str(w) for w in key)))
            self.cache[key] = r.gauss(0, sd) if kind == "gauss" else r.random()
        return self.cache[key]

    def effect(self, family, task, name, value):
        return (self.draw("family", family, name, value, sd=0.12)
                + self.draw("task", task, name, value, sd=0.05))

    def bad(self, family, name, value):
        """None, or the failure class every point holding this knob value gets."""
        u = self.draw("bad", family, name, value, kind="uniform")
        if u >= 0.04:
            return None
        return "compile/replay_synthetic_bad_knob" if u < 0.01 else "correctness/mismatch"


def task_lines(args, model, path, baseline):
    name = os.path.splitext(os.path.basename(path))[0]
    profile = meta_profile(args, os.path.join(args.kernelbench, path))
    base = baseline["tasks"].get(path)
    if not base:
        raise SystemExit("%s is not in the H200 baseline" % path)
    floor = base["floor_ms"]
    eager = base["eager_ms"]
    compile_ms = base.get("compile_ms")
    profile.update({"device": "cuda", "sm_count": H200["sm_count"], "gpu": H200,
                    "eager_ms": eager, "compile_ms": compile_ms, "floor_ms": floor,
                    "impossible_ms": floor / 1.5, "timing_skipped_reason": None,
                    "floor_basis": {"copy_bw_Bps": baseline["copy_bw_TBps"] * 1e12,
                                    "fp32_peak_flops": 66.9e12,
                                    "hbm_peak_Bps": H200["hbm_peak_GBps"] * 1e9,
                                    "tensor_peak_flops": 494.7e12, "tensor_arith": "tf32"}})
    lines = space_points(args, profile)
    regions = [l for l in lines if l["kind"] == "region"]
    generated = [r for r in regions if r["family"]]
    if len(regions) != 1 or len(generated) != 1:
        raise SystemExit("%s: %d regions (%d generated); the synthetic table takes tasks of "
                         "one generated region" % (name, len(regions), len(generated)))
    region = generated[0]
    family = region["family"]
    keys = [l["point"] for l in lines if l["kind"] == "point"]
    values = {}
    for key in keys:
        for n, v in knobs(key).items():
            values.setdefault(n, set()).add(v)
    first = knobs(region["first"])
    effects, bad = {}, {}
    for n in sorted(values):
        effects[n] = {v: round(model.effect(family, name, n, v), 6)
                      for v in sorted(values[n] | {"0"})}
        for v in sorted(values[n]):
            cls = model.bad(family, n, v)
            if cls and v != first.get(n, "0"):
                bad.setdefault(n, {})[v] = cls
    r = random.Random("%d|%s|task" % (model.seed, name))
    reference = eager * r.uniform(1.0, 1.04)
    first_ms = max(floor * r.uniform(1.15, 2.5), eager * r.uniform(0.6, 1.1))
    task = {"kind": "task", "task": name, "path": path, "hardware": "synthetic (H200 baseline)",
            "commit": args.commit, "eager_ms": eager, "compile_ms": compile_ms,
            "floor_ms": floor, "reference_ms": round(reference, 6), "whole_ms": None,
            "profile": profile}
    reg = {"kind": "region", "task": name, "region": region["region"], "family": family,
           "library_ms": round(reference, 6), "first": region["first"],
           "points_total": region["points_total"], "enumeration": region["enumeration"],
           "sampled": False}
    mod = {"kind": "model", "task": name, "region": region["region"], "seed": model.seed,
           "first_ms": round(first_ms, 6), "floor_ms": floor, "noise_sd": 0.03,
           "fail_rate": 0.02, "effects": effects, "bad": bad}
    # The space's best, from the replay evaluator's own model over every point.
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for l in (task, reg, mod):
            f.write(json.dumps(l) + "\n")
        tmp = f.name
    try:
        q = subprocess.run([os.path.join(args.build, "gpu", "replay", "opforge-replay"),
                            "--table", tmp, "--query"], capture_output=True, text=True,
                           input="".join("%s %d %s\n" % (name, region["region"], k) for k in keys))
    finally:
        os.unlink(tmp)
    if q.returncode != 0:
        raise SystemExit("opforge-replay --query failed: %s" % q.stderr.strip())
    answers = [json.loads(l) for l in q.stdout.splitlines()]
    correct = [a for a in answers if a.get("correct")]
    best = min(correct, key=lambda a: a["ms"])
    mod.update({"best_ms": best["ms"], "best_point": best["point"],
                "correct_points": len(correct)})
    return [task, reg, mod]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build-dev"))
    p.add_argument("--kernelbench", default=os.path.join(ROOT, "..", "shared", "kernelbench"))
    p.add_argument("--python", default=None, help="Python with torch for the meta profiles")
    p.add_argument("--seed", type=int, default=31)
    p.add_argument("--max-points", type=int, default=100000)
    p.add_argument("--commit", default=None, help="default: git rev-parse --short HEAD")
    p.add_argument("--out", default=os.path.join(HERE, "synthetic.jsonl.gz"))
    args = p.parse_args()
    if args.commit is None:
        args.commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                     capture_output=True, text=True).stdout.strip() or "unknown"
    with open(os.path.join(args.kernelbench, "h200-baseline.json")) as f:
        baseline = json.load(f)
    model = Model(args.seed)
    lines = [{"kind": "space", "format": 1, "source": "synthetic", "seed": args.seed,
              "hardware": "synthetic (H200 baseline)", "commit": args.commit,
              "generator": "space/make_synthetic.py --seed %d --max-points %d"
                           % (args.seed, args.max_points)}]
    for path in TASKS:
        t = task_lines(args, model, path, baseline)
        print("%-45s %-10s %6d points, %6d correct, first %.4f ms, best %.4f ms, floor %.4f ms"
              % (t[0]["task"], t[1]["family"], t[1]["points_total"], t[2]["correct_points"],
                 t[2]["first_ms"], t[2]["best_ms"], t[2]["floor_ms"]), file=sys.stderr)
        lines += t
    data = "".join(json.dumps(l, sort_keys=True, separators=(",", ":")) + "\n" for l in lines)
    raw = data.encode()
    if args.out.endswith(".gz"):  # mtime 0: the same bytes on every run
        raw = gzip.compress(raw, compresslevel=9, mtime=0)
    with open(args.out, "wb") as f:
        f.write(raw)
    print("wrote %s: %d tasks, %d lines" % (args.out, len(TASKS), len(lines)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
