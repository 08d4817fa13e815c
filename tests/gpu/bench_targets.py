#!/usr/bin/env python3
"""Issue 13's target table from one or more `opforge bench --out` files (bench.json),
e.g. the level-1 run and the levels-2-and-3 run of tests/gpu/bench_run:

    python3 tests/gpu/bench_targets.py gpu-out-l1/bench.json gpu-out-l23/bench.json

A task's level is the folder of its file (level1, level2, level3); a convolution task is
one whose file name contains "conv" (any case). Figures:
  correct            tasks whose best is a verified correct program, of all tasks;
  slower than eager  correct tasks whose best is below SLOWER (0.98) of eager's speed;
  geomeans           of speedup_vs_eager over the correct tasks of each group;
  level-3 wall       the longest wall_s of a level-3 task;
  distinct share     evaluations over (steps + 1) summed over the tasks: step 0, the
                     reference, is an evaluation too, and a step that repeated an
                     evaluated candidate would add a step but no evaluation.
  exports            the export checks of tests/gpu/bench_run: export.json beside a
                     bench.json names each export_<task id>.py it checked and whether it
                     passed; met when all passed, at least 20 were checked and every
                     succeeded task was.
A task that appears in more than one file counts once, and the later file wins: its
finished record replaces an earlier one (a rerun of the tasks a wait limit left
unfinished, or of those a change touched), and its export check replaces an earlier one.
An unfinished record never replaces a finished one. Prints the table; exits 0 (it
reports, it does not judge)."""
import json
import math
import os
import re
import sys
from collections import Counter

SLOWER = 0.98


def level_of(task):
    """'level1', 'level2', 'level3' or '' from the task's file path."""
    parts = task.get("file", "").split("/")
    return parts[-2] if len(parts) >= 2 else ""


def is_conv(task):
    """Whether the task's file name names a convolution."""
    return "conv" in os.path.basename(task.get("file", "")).lower()


def geomean(values):
    """Geometric mean of positive values; None for none."""
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def targets(tasks):
    """The figures as a dict (see the module's text) over a list of bench task records."""
    correct = [t for t in tasks if t.get("correct")]

    def speedups(pick):
        return [t["speedup_vs_eager"] for t in correct if pick(t) and t.get("speedup_vs_eager")]

    slower = sorted((t["speedup_vs_eager"], t["name"]) for t in correct
                    if t.get("speedup_vs_eager") is not None and t["speedup_vs_eager"] < SLOWER)
    l2_conv = speedups(lambda t: level_of(t) == "level2" and is_conv(t))
    l3 = speedups(lambda t: level_of(t) == "level3")
    non_conv = speedups(lambda t: level_of(t) in ("level1", "level2") and not is_conv(t))
    l3_walls = [t.get("wall_s") or 0 for t in tasks if level_of(t) == "level3"]
    evaluations = sum(t.get("evaluations") or 0 for t in tasks)
    steps = sum((t.get("steps") or 0) + 1 for t in tasks)
    return {
        "tasks": len(tasks), "correct": len(correct), "slower": slower,
        "l2_conv": (geomean(l2_conv), len(l2_conv)), "l3": (geomean(l3), len(l3)),
        "non_conv": (geomean(non_conv), len(non_conv)),
        "l3_wall_s": max(l3_walls) if l3_walls else None,
        "evaluations": evaluations, "steps_with_reference": steps,
        "distinct_share": evaluations / steps if steps else None,
    }


def table(f):
    """The figures as the issue's table, one line per target."""
    def gm(pair, goal):
        value, n = pair
        if value is None:
            return "none", "-"
        return "%.3fx over %d" % (value, n), "yes" if value >= goal else "no"

    slower = ", ".join("%s %.3f" % (name, s) for s, name in f["slower"]) or "none"
    rows = [
        ("tasks that end with a verified correct program",
         "%d of %d" % (f["correct"], f["tasks"]), "yes" if f["correct"] == f["tasks"] else "no"),
        ("tasks whose best is slower than eager beyond 2%",
         "%d (%s)" % (len(f["slower"]), slower), "yes" if not f["slower"] else "no"),
        ("level-2 convolution tasks, geomean over eager (1.25x)",) + gm(f["l2_conv"], 1.25),
        ("level-3 models, geomean over eager (1.8x)",) + gm(f["l3"], 1.8),
        ("level-1 and level-2 non-convolution tasks, geomean (1.55x)",) + gm(f["non_conv"], 1.55),
        ("wall time of a level-3 task (300 s)",
         "%.1f s at most" % f["l3_wall_s"] if f["l3_wall_s"] is not None else "none",
         "-" if f["l3_wall_s"] is None else "yes" if f["l3_wall_s"] <= 300 else "no"),
        ("share of steps that are distinct evaluations (90%)",
         "%d evaluations for %d steps with step 0: %.1f%%" % (
             f["evaluations"], f["steps_with_reference"], 100 * (f["distinct_share"] or 0)),
         "yes" if (f["distinct_share"] or 0) >= 0.9 else "no"),
    ]
    lines = ["| target | figure | met |", "|---|---|---|"]
    lines += ["| %s | %s | %s |" % row for row in rows]
    return "\n".join(lines)


def merge(runs):
    """The task records of several bench runs, each task once by name, in first-seen
    order: a later finished record replaces an earlier one; an unfinished one replaces
    only an unfinished one."""
    merged = {}
    for tasks in runs:
        for t in tasks:
            seen = merged.get(t.get("name"))
            if seen is None or t.get("finished") or not seen.get("finished"):
                merged[t.get("name")] = t
    return list(merged.values())


def export_checks(tasks, checks):
    """{task name: (level, passed)} of one run: checks is its export.json list, whose
    "file" is export_<task id>.py; a check of no task in tasks is left out."""
    by_id = {t.get("id"): t for t in tasks}
    found = {}
    for c in checks:
        m = re.match(r"export_(.+)\.py$", os.path.basename(c.get("file", "")))
        t = by_id.get(m.group(1)) if m else None
        if t is not None:
            found[t.get("name")] = (level_of(t), bool(c.get("ok")))
    return found


def exports_row(tasks, checks):
    """The exports row of the table: checks is {task name: (level, passed)} over all
    runs, tasks the merged records."""
    succeeded = [t.get("name") for t in tasks if t.get("status") == "succeeded"]
    passed = sum(1 for _, ok in checks.values() if ok)
    per_level = Counter(level for level, _ in checks.values())
    listed = ", ".join("%s %d" % kv for kv in sorted(per_level.items()))
    met = (passed == len(checks) and len(checks) >= 20
           and all(name in checks for name in succeeded))
    return ("exports passing KernelBench's eval and static checker (every succeeded task; "
            "at least 20, across levels)",
            "%d checked (%s), %d passed; %d tasks succeeded" % (
                len(checks), listed or "none", passed, len(succeeded)),
            "yes" if met else "no")


def main(paths):
    runs, checks = [], {}
    for path in paths:
        with open(path) as f:
            runs.append(json.load(f).get("tasks", []))
        export_json = os.path.join(os.path.dirname(path), "export.json")
        if os.path.exists(export_json):
            with open(export_json) as f:
                checks.update(export_checks(runs[-1], json.load(f)))
    tasks = merge(runs)
    print(table(targets(tasks)))
    print("| %s | %s | %s |" % exports_row(tasks, checks))
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: bench_targets.py BENCH_JSON [BENCH_JSON ...]")
    sys.exit(main(sys.argv[1:]))
