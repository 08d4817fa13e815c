"""Program probe, for a GPU host: loads KernelBench tasks into an in-process evaluator
and evaluates three library-only programs of each, to see what the program machinery
itself costs and whether CUDA graphs capture:
  node_stream  every call node of the traced graph as a library step, stream order
               (what step 0 runs);
  node_auto    the same steps with "graph": "auto" (capture, keep the faster);
  model_auto   the whole model as one library step, "graph": "auto".
Prints one row per (task, program): outcome, time, graph captured/used, the reason when
not captured, and the ratio over eager. Usage:
  python3 tests/gpu/program_probe.py --lib BUILD/gpu/libopforge_gpu.so TASK.py ...
"""
import argparse
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sweep  # noqa: E402  (load_evaluator)


def node_steps(profile):
    """Every call node of the profile's graph as a library step, in graph order."""
    return [{"library": str(n.get("target") or "op"), "node": n["name"]}
            for n in profile.get("graph") or [] if n["op"].startswith("call_")]


def programs(profile):
    nodes = node_steps(profile)
    out = [("model_auto", {"program": {"graph": "auto", "steps": [{"library": "model"}]}})]
    if nodes:
        out = [("node_stream", {"program": {"graph": "false", "steps": nodes}}),
               ("node_auto", {"program": {"graph": "auto", "steps": nodes}})] + out
    return out


def row(task, label, res, eager_ms, seconds):
    fail = res.get("failure") or {}
    t = (res.get("time") or {}).get("median_ms")
    g = res.get("graph") or {}
    outcome = "correct" if res.get("correct") else fail.get("class", "?")
    x = eager_ms / t if t and eager_ms else float("nan")
    print("%-34s %-12s %-28s %9s %6s %6s %7s %6.1fs  %s" % (
        task[:34], label, outcome[:28], "%.4f" % t if t else "-",
        "yes" if g.get("captured") else "no", g.get("used") or "-",
        "-" if math.isnan(x) else "%.3f" % x, seconds, (g.get("reason") or "")[:160]),
        flush=True)
    return x


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("tasks", nargs="+")
    p.add_argument("--lib", required=True)
    p.add_argument("--json", help="also write the rows here")
    args = p.parse_args()
    ev = sweep.load_evaluator(os.path.abspath(args.lib))
    print("%-34s %-12s %-28s %9s %6s %6s %7s %7s  %s" % (
        "TASK", "PROGRAM", "OUTCOME", "MS", "CAPT", "USED", "X_EAGER", "WALL", "GRAPH_REASON"))
    rows = []
    for path in args.tasks:
        name = os.path.splitext(os.path.basename(path))[0]
        with open(path) as f:
            ev.load_task({"source": f.read(), "name": name})
        prof = ev.profile({})
        eager = prof.get("eager_ms")
        for label, cand in programs(prof):
            t0 = time.monotonic()
            try:
                res = ev.evaluate({"candidate": cand})
            except Exception as exc:  # a fatal error poisons the context: next task
                print("%-34s %-12s FATAL %s" % (name[:34], label, str(exc)[:300]), flush=True)
                break
            x = row(name, label, res, eager, time.monotonic() - t0)
            rows.append({"task": name, "program": label, "eager_ms": eager,
                         "x_eager": None if math.isnan(x) else x, "graph": res.get("graph"),
                         "failure": res.get("failure")})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
