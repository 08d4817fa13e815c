"""Knob sweep of the builtin templates, a benchmark for tuning them on a GPU host.

  sweep.py prepare --opforge BUILD/opforge --python PY --kernelbench KB --dir DIR [SPEC...]
      writes DIR/<task>/<label>.json, one builtin candidate per (task, knob set or
      strategy), with `opforge propose` (no GPU needed: the profile runs on meta).
  sweep.py run --lib BUILD/gpu/libopforge_gpu.so --kernelbench KB --dir DIR [--out F]
      on a GPU host: loads each task once in an in-process evaluator, profiles it
      (eager only; torch.compile is skipped to save time), evaluates every candidate
      (the full verification of the evaluator, gpu/evaluator/) and prints one table row
      per candidate.

A SPEC is TASK:LABEL=KNOBS[|-DNAME=V...] (knobs as for `opforge propose --knobs`, empty for
the defaults; after a |, extra -D options appended to the candidate's) or TASK:strategies (every seed-memory strategy that applies, one candidate each).
TASK is a path relative to KB. Without SPECs, DEFAULT_SPECS below is used."""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

TF32 = ["",
        "MODE=tf32x3,BK=16,STAGES=3",
        "MODE=tf32x3,BK=32,STAGES=3",
        "MODE=tf32x3,BK=32,STAGES=2",
        "MODE=tf32x3,BK=16,STAGES=4,MINB=2",
        "MODE=tf32x3,BM=256,BN=128,BK=16,TM=8,TN=8,STAGES=3",
        "MODE=tf32x3,BM=128,BN=256,BK=16,TM=8,TN=8,STAGES=3",
        "MODE=tf32x3,BM=256,BN=128,BK=16,TM=8,TN=8,STAGES=4"]
GEMM_TASKS = ["level1/1_Square_matrix_multiplication_.py", "level1/3_Batched_matrix_multiplication.py",
              "level1/18_Matmul_with_transposed_both.py", "level2/12_Gemm_Multiply_LeakyReLU.py"]
DEFAULT_SPECS = ([t + ":tf%d=%s" % (i, k) for t in GEMM_TASKS for i, k in enumerate(TF32)]
                 + ["level1/42_Max_Pooling_2D.py:default=",
                    "level1/33_BatchNorm.py:strategies"])


def stem(task):
    return os.path.splitext(os.path.basename(task))[0]


def propose(args, task, knobs=None, strategy=None):
    """The candidate JSON of `opforge propose`, or (None, error text)."""
    cmd = [args.opforge, "propose", os.path.join(args.kernelbench, task), "--device", "meta",
           "--python", args.python,
           "--evaluator", os.path.join(ROOT, "gpu", "evaluator", "main.py")]
    if knobs:
        cmd += ["--knobs", knobs]
    if strategy:
        cmd += ["--strategy", strategy]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, (p.stderr.strip().splitlines() or ["?"])[-1]
    out = json.loads(p.stdout)
    return out["candidate"], out["family"]


def strategies():
    """(id, families) of every seed-memory strategy."""
    with open(os.path.join(ROOT, "schema", "seed_memory.json")) as f:
        seed = json.load(f)
    return [(l["id"], l.get("families") or []) for l in seed["locals"] if l.get("knob_move")]


def prepare(args):
    specs = args.specs or DEFAULT_SPECS
    for spec in specs:
        task, what = spec.split(":", 1)
        out = os.path.join(args.dir, stem(task))
        os.makedirs(out, exist_ok=True)
        jobs = []
        if what == "strategies":
            cand, family = propose(args, task)
            if cand is None:
                print("refused %s: %s" % (stem(task), family))
                continue
            jobs = [(sid, None, sid) for sid, fams in strategies() if family in fams]
        else:
            label, knobs = what.split("=", 1)
            jobs = [(label, knobs or None, None)]
        for label, knobs, strategy in jobs:
            knobs, _, extra = (knobs or "").partition("|")
            cand, err = propose(args, task, knobs or None, strategy)  # err: the family when ok
            if cand is None:
                print("refused %s %s: %s" % (stem(task), label, err))
                continue
            cand["options"] = list(cand.get("options") or []) + [o for o in extra.split("|") if o]
            with open(os.path.join(out, label + ".json"), "w") as f:
                json.dump({"task": task, "label": label, "candidate": cand}, f)
            print("prepared %s %s" % (stem(task), label), flush=True)


def load_evaluator(lib):
    sys.path.insert(0, os.path.join(ROOT, "gpu"))
    import evaluator as ev_mod
    ev = ev_mod.Evaluator("cuda:0", lib=ev_mod.GpuLib(lib))
    ev.init_cuda(os.path.join("/tmp", "opforge-sweep-cache"))
    # torch.compile's time is not needed to compare templates.
    ev._time_compiled = lambda task, inputs: {"compile_ms": None, "compile_s": None,
                                              "compile_error": "skipped by the sweep"}
    return ev


def accuracy_ratio(res):
    """The candidate's error against float64 over eager's (the accuracy budget's terms),
    worst output; None when not computed."""
    outs = ((res.get("accuracy") or {}).get("outputs")) or []
    ratios = [o["candidate_err"] / o["eager_err"] for o in outs if o.get("eager_err")]
    return max(ratios) if ratios else None


def run(args):
    ev = load_evaluator(args.lib)
    rows = []
    header = "%-42s %-34s %-34s %10s %8s %8s %9s" % ("TASK", "CANDIDATE", "OUTCOME", "MS",
                                                     "X_EAGER", "OF_FLOOR", "ERR/EAGER")
    print(header, flush=True)
    for tdir in sorted(os.listdir(args.dir)):
        files = sorted(os.listdir(os.path.join(args.dir, tdir)))
        if not files:
            continue
        with open(os.path.join(args.dir, tdir, files[0])) as f:
            task = json.load(f)["task"]
        with open(os.path.join(args.kernelbench, task)) as f:
            source = f.read()
        t0 = time.monotonic()
        ev.load_task({"source": source, "name": tdir})
        prof = ev.profile({})
        print("# %s eager %.4f ms floor %.4f ms (load+profile %.1f s)"
              % (tdir, prof["eager_ms"], prof["floor_ms"], time.monotonic() - t0), flush=True)
        for name in files:
            with open(os.path.join(args.dir, tdir, name)) as f:
                c = json.load(f)
            t1 = time.monotonic()
            try:
                res = ev.evaluate({"candidate": c["candidate"]})
            except Exception as exc:  # a fatal error poisons the context: stop here
                print("%-42s %-34s FATAL %s" % (tdir, c["label"], exc), flush=True)
                return rows
            fail = res.get("failure")
            ms = (res.get("time") or {}).get("median_ms")
            outcome = "correct" if res.get("correct") else (fail or {}).get("class", "?")
            row = {"task": tdir, "label": c["label"], "outcome": outcome, "ms": ms,
                   "eager_ms": prof["eager_ms"], "floor_ms": prof["floor_ms"],
                   "options": c["candidate"].get("options"), "eval_s": time.monotonic() - t1,
                   "err_ratio": accuracy_ratio(res),
                   "message": (fail or {}).get("message", "")[:300]}
            rows.append(row)
            print("%-42s %-34s %-34s %10s %8s %8s %9s  (%.1fs) %s" % (
                tdir[:42], c["label"][:34], outcome[:34], "%.4f" % ms if ms else "-",
                "%.3f" % (prof["eager_ms"] / ms) if ms else "-",
                "%.2f" % (ms / prof["floor_ms"]) if ms else "-",
                "%.2f" % row["err_ratio"] if row["err_ratio"] is not None else "-", row["eval_s"],
                row["message"][:120] if not res.get("correct") else ""), flush=True)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("mode", choices=["prepare", "run"])
    p.add_argument("specs", nargs="*")
    p.add_argument("--opforge", default="build/opforge")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--lib", default="build/gpu/libopforge_gpu.so")
    p.add_argument("--kernelbench", default=os.path.join(ROOT, "..", "shared", "kernelbench"))
    p.add_argument("--dir", required=True)
    p.add_argument("--out", default=None, help="JSON file for the run's rows")
    args = p.parse_args()
    if args.mode == "prepare":
        prepare(args)
        return 0
    rows = run(args)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
