#!/usr/bin/env python3
"""The replay of a recorded space (docs/architecture.md, "Replaying a recorded space"),
without a GPU and without torch:

- the replay evaluator's answers, line by line, against a hand-made table: load_task by
  the reference's directive and by name, profile, a recorded correct point, a recorded
  failure, a point the table lacks (replay/not_recorded), the reference program, a
  program of a generated region and a library one, the whole model when it is not
  recorded, a modelled point, --query;
- `opforge ablate --replay` over a table whose every point is known: two tasks of a
  pointwise profile (torch.relu on [256, 512]) the builtin proposer matches, whose starting point takes 1.0 ms and
  every other point 0.5 ms, so that whatever the arm draws, step 1 is the start and step
  2 reaches the space's best: steps to 95% and 99% are 2 in every run, the best at 5, 10
  and 20 steps is the space's (1.000), and the intervals have no width.

- tests/gpu/space_record --dry-run against the scripted evaluator (no GPU): the table it
  writes loads, and the replay evaluator answers each recorded point as recorded.

  OPFORGE_BIN, OPFORGE_REPLAY, OPFORGE_SPACE_POINTS, OPFORGE_SCRIPTED_EVALUATOR: the
  binaries (meson passes them; the last is optional)."""
import json
import math
import os
import subprocess
import sys
import tempfile

FAILED = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        FAILED.append(what)


def relu_profile():
    """The profile the real evaluator gives torch.relu(x) on [256, 512] on a GPU, with
    the H200's facts."""
    shape = [256, 512]
    return {
        "name": "tiny", "device": "cuda", "sm_count": 132,
        "gpu": {"name": "NVIDIA H200", "capability": "9.0", "sm_count": 132,
                "max_shared_optin": 232448, "max_threads_per_block": 1024},
        "inputs": [{"name": "input:0", "dtype": "float32", "shape": shape, "numel": 131072,
                    "bytes": 524288}],
        "scalar_inputs": [], "params": [],
        "outputs": [{"name": "output:0", "dtype": "float32", "shape": shape, "numel": 131072,
                     "bytes": 524288}],
        "flops": 0, "precision": "fp32", "tolerance": {"atol": 1e-4, "rtol": 1e-4},
        "mutable_buffers": [], "min_bytes": 1048576, "degenerate": False,
        "graph": [
            {"name": "x", "op": "placeholder", "target": "x", "tensor": "input:0", "args": [],
             "kwargs": {}, "shape": shape, "dtype": "float32", "flops": 0},
            {"name": "relu", "op": "call_function", "target": "torch.relu",
             "args": [{"node": "x"}], "kwargs": {}, "shape": shape, "dtype": "float32",
             "flops": 0},
            {"name": "output", "op": "output", "target": "output",
             "args": [{"node": "relu"}], "kwargs": {}, "shape": shape, "dtype": "float32",
             "flops": 0}],
        "graph_source": "fx", "graph_error": None,
        "eager_ms": 2.0, "compile_ms": 1.6, "floor_ms": 0.1, "impossible_ms": 0.05,
        "floor_basis": {"copy_bw_Bps": 1.048576e10, "fp32_peak_flops": 6.7e13}}


def write_lines(path, lines):
    with open(path, "w") as f:
        for l in lines:
            f.write(json.dumps(l) + "\n")


class Evaluator:
    def __init__(self, binary, table):
        self.p = subprocess.Popen([binary, "--table", table, "--device", "3"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.ready = json.loads(self.p.stdout.readline())
        self.n = 0

    def ask(self, op, **args):
        self.n += 1
        self.p.stdin.write(json.dumps(dict({"id": self.n, "op": op}, **args)) + "\n")
        self.p.stdin.flush()
        reply = json.loads(self.p.stdout.readline())
        assert reply["id"] == self.n, reply
        return reply

    def close(self):
        self.ask("shutdown")
        self.p.wait(timeout=10)


def kernel(*options):
    return {"source": "extern \"C\" __global__ void k() {}", "options": list(options),
            "plan": {"buffers": [], "launches": []}}


def test_evaluator(binary, tmp):
    table = os.path.join(tmp, "hand.jsonl")
    first = "BLOCK=256,VEC=4"
    write_lines(table, [
        {"kind": "space", "format": 1, "source": "hand", "hardware": "NVIDIA H200"},
        {"kind": "task", "task": "plain", "hardware": "NVIDIA H200", "commit": "abc1234",
         "eager_ms": 2.0, "compile_ms": 1.5, "floor_ms": 0.25, "reference_ms": 2.1,
         "whole_ms": None, "profile": {"name": "plain", "graph": []}},
        {"kind": "region", "task": "plain", "region": 0, "family": "softmax",
         "library_ms": 2.1, "first": first, "points_total": 4},
        {"kind": "point", "task": "plain", "region": 0, "point": first, "ms": 1.0,
         "correct": True, "class": None},
        {"kind": "point", "task": "plain", "region": 0, "point": "BLOCK=512,MODE=online,VEC=4",
         "ms": 0.5, "correct": True, "class": None},
        {"kind": "point", "task": "plain", "region": 0, "point": "BLOCK=128,VEC=4", "ms": None,
         "correct": False, "class": "compile/syntax_error", "message": "expected a ;"},
        {"kind": "task", "task": "two", "eager_ms": 3.0, "compile_ms": 2.0, "floor_ms": 0.5,
         "reference_ms": 3.2, "whole_ms": 2.9, "profile": {"name": "two"}},
        {"kind": "region", "task": "two", "region": 0, "family": "pointwise",
         "library_ms": 1.2, "first": "VEC=4", "points_total": 2},
        {"kind": "region", "task": "two", "region": 1, "family": None, "library_ms": 2.0},
        {"kind": "point", "task": "two", "region": 0, "point": "VEC=4", "ms": 0.7,
         "correct": True, "class": None},
        {"kind": "task", "task": "modelled", "eager_ms": 2.0, "floor_ms": 1.0,
         "reference_ms": 2.0, "profile": {}},
        {"kind": "region", "task": "modelled", "region": 0, "family": "pointwise",
         "library_ms": 2.0, "first": "VEC=4", "points_total": 3},
        {"kind": "model", "task": "modelled", "region": 0, "seed": 7, "first_ms": 1.6,
         "floor_ms": 1.0, "noise_sd": 0, "fail_rate": 0, "best_ms": 1.1,
         "effects": {"VEC": {"4": 0.0, "2": 0.25}, "BLOCK": {"0": 0.0, "128": -0.1}},
         "bad": {"VEC": {"1": "compile/bad_vec"}}},
    ])
    ev = Evaluator(binary, table)
    check(ev.ready == {"event": "ready", "pid": ev.p.pid, "device": {
        "name": "replay of NVIDIA H200", "index": 3, "capability": "9.0",
        "memory_bytes": 150000000000}}, "ready line names the table's hardware and --device")
    r = ev.ask("evaluate", candidate=kernel("-DVEC=4"))
    check(not r["ok"] and r["error"]["class"] == "protocol/no_task", "evaluate before load_task")
    r = ev.ask("load_task", name="whatever.full.1",
               source="# opforge-replay-task: plain\nimport torch\n")
    check(r["ok"] and r["result"]["replay_task"] == "plain", "load_task by the source's line")
    r = ev.ask("profile")
    check(r["ok"] and r["result"]["eager_ms"] == 2.0 and r["result"]["compile_ms"] == 1.5 and
          r["result"]["floor_ms"] == 0.25 and r["result"]["name"] == "plain",
          "profile: the recorded one with the task's times")
    r = ev.ask("evaluate", candidate=kernel("-DVEC=4", "-DBLOCK=256"))["result"]
    check(r["correct"] and r["time"]["median_ms"] == 1.0 and r["failure"] is None and
          r["speedup"] == {"eager": 2.0, "compile": 1.5} and r["floor_fraction"] == 0.25,
          "a recorded correct point, options in any order")
    r = ev.ask("evaluate", candidate=kernel("-DBLOCK=512", "-DMODE_ONLINE=1", "-DVEC=4",
                                            "-DSPLIT=0", "-Xnot-a-knob"))["result"]
    check(r["correct"] and r["time"]["median_ms"] == 0.5,
          "MODE_ONLINE=1 keys as MODE=online; 0-valued and non-knob options are left out")
    r = ev.ask("evaluate", candidate=kernel("-DBLOCK=128", "-DVEC=4"))["result"]
    check(not r["correct"] and r["failure"]["stage"] == "compile" and
          r["failure"]["class"] == "compile/syntax_error" and
          r["failure"]["message"] == "recorded on NVIDIA H200: expected a ;" and
          r["compile"]["ok"] is False, "a recorded failure: its stage, class and message")
    r = ev.ask("evaluate", candidate=kernel("-DBLOCK=64", "-DVEC=4"))["result"]
    check(not r["correct"] and r["failure"] == {
        "stage": "protocol", "class": "replay/not_recorded",
        "message": "point BLOCK=64,VEC=4 of region 0 of task plain is not in the table"},
        "a point the table lacks: replay/not_recorded")
    ref = {"program": {"graph": "auto", "steps": [
        {"library": "torch.softmax", "node": "softmax", "region": 0}]}}
    r = ev.ask("evaluate", candidate=ref)["result"]
    check(r["correct"] and r["time"]["median_ms"] == 2.1 and r["steps_ms"] == [2.1] and
          r["library_ms"] == 2.1, "the reference program: reference_ms")
    r = ev.ask("evaluate", candidate={"program": {"graph": "auto", "steps": [
        {"library": "model"}]}})["result"]
    check(r["failure"]["class"] == "replay/not_recorded", "the whole model, not recorded")
    r = ev.ask("load_task", name="two.flat.3", source="import torch\n")
    check(r["ok"] and r["result"]["replay_task"] == "two", "load_task by the name's prefix")
    r = ev.ask("evaluate", candidate={"program": {"graph": "auto", "steps": [
        {"region": 0, "family": "pointwise", "source": "x", "options": ["-DVEC=4"],
         "plan": {}},
        {"library": "torch.relu", "node": "relu", "region": 1},
        {"library": "torch.add", "node": "add", "region": 1}]}})["result"]
    check(r["correct"] and abs(r["time"]["median_ms"] - 2.7) < 1e-12 and
          r["steps_ms"] == [0.7, 1.0, 1.0] and r["library_ms"] == 2.0 and
          r["graph"]["used"] == "stream",
          "a program: a point's time plus the library region's, shared by its steps")
    r = ev.ask("evaluate", candidate={"program": {"graph": "auto", "steps": [
        {"library": "model"}]}})["result"]
    check(r["correct"] and r["time"]["median_ms"] == 2.9, "the whole model: whole_ms")
    r = ev.ask("load_task", name="nosuch", source="")
    check(not r["ok"] and r["error"]["class"] == "replay/unknown_task", "an unknown task")
    r = ev.ask("load_task", name="modelled", source="")
    base = 1.6
    r1 = ev.ask("evaluate", candidate=kernel("-DVEC=4"))["result"]
    r2 = ev.ask("evaluate", candidate=kernel("-DVEC=2", "-DBLOCK=128"))["result"]
    r3 = ev.ask("evaluate", candidate=kernel("-DVEC=1"))["result"]
    lo = 1.02

    def clamp(ms):
        x = 20 * (ms - lo) / lo
        return lo + lo * (x if x > 30 else math.log1p(math.exp(x))) / 20
    check(abs(r1["time"]["median_ms"] - clamp(base)) < 1e-12 and
          abs(r2["time"]["median_ms"] - clamp(base * math.exp(0.25 - 0.1))) < 1e-12 and
          r3["failure"]["class"] == "compile/bad_vec",
          "a modelled point: the first's time times e^(effects), a bad knob value fails")
    ev.close()
    q = subprocess.run([binary, "--table", table, "--query"], text=True, capture_output=True,
                       input="plain 0 BLOCK=256,VEC=4\nplain 0 VEC=8\n")
    lines = [json.loads(l) for l in q.stdout.splitlines()]
    check(q.returncode == 0 and lines[0]["ms"] == 1.0 and lines[0]["recorded"] and
          lines[1] == {"task": "plain", "region": 0, "point": "VEC=8", "recorded": False},
          "--query")


def test_ablate(opforge, points, tmp):
    prof = os.path.join(tmp, "tiny.json")
    with open(prof, "w") as f:
        json.dump(relu_profile(), f)
    out = subprocess.run([points, prof], capture_output=True, text=True, check=True).stdout
    lines = [json.loads(l) for l in out.splitlines()]
    region = lines[0]
    keys = [l["point"] for l in lines if l["kind"] == "point"]
    check(region["family"] == "pointwise" and region["first"] == keys[0] and len(keys) > 10,
          "opforge-space-points: the pointwise region, its starting point first (%d points)"
          % len(keys))
    table = os.path.join(tmp, "tiny.jsonl")
    rows = [{"kind": "space", "format": 1, "source": "hand", "hardware": "NVIDIA H200"}]
    for task in ("tiny_a", "tiny_b"):
        p = relu_profile()
        p["name"] = task
        rows += [{"kind": "task", "task": task, "eager_ms": 2.0, "compile_ms": 1.6,
                  "floor_ms": 0.1, "reference_ms": 2.0, "profile": p},
                 {"kind": "region", "task": task, "region": 0, "family": "pointwise",
                  "library_ms": 2.0, "first": keys[0], "points_total": len(keys)}]
        rows += [{"kind": "point", "task": task, "region": 0, "point": k,
                  "ms": 1.0 if i == 0 else 0.5, "correct": True, "class": None}
                 for i, k in enumerate(keys)]
    write_lines(table, rows)
    res = os.path.join(tmp, "replay.json")
    p = subprocess.run([opforge, "ablate", "--replay", table, "--seeds", "2", "--arms",
                        "full,random", "--steps", "20", "--jobs", "4", "--out", res],
                       capture_output=True, text=True, timeout=600)
    print(p.stdout)
    if p.returncode != 0:
        print(p.stderr[-3000:])
    check(p.returncode == 0, "ablate --replay exits 0")
    want = [
        "arms:",
        "  full      htam+tree {}",
        "  random    best_of_n {\"tau\":100,\"prefix_len\":0,\"beta\":0,\"local_memory\":false,"
        "\"skills\":false}",
        None,  # "proposals of points the table lacks (no step spent): N, beside M steps"
        "",
        "MODE    ARM       TASKS   RUNS  TO_95 [95% CI]        TO_99 [95% CI]        REACHED  "
        "AT_5 [95% CI]         AT_10 [95% CI]        AT_20 [95% CI]",
        "cold    full          2      4  2.00 [2.00, 2.00]     2.00 [2.00, 2.00]        100%  "
        "1.000 [1.000, 1.000]  1.000 [1.000, 1.000]  1.000 [1.000, 1.000]",
        "cold    random        2      4  2.00 [2.00, 2.00]     2.00 [2.00, 2.00]        100%  "
        "1.000 [1.000, 1.000]  1.000 [1.000, 1.000]  1.000 [1.000, 1.000]",
        "warm    full          2      4  2.00 [2.00, 2.00]     2.00 [2.00, 2.00]        100%  "
        "1.000 [1.000, 1.000]  1.000 [1.000, 1.000]  1.000 [1.000, 1.000]",
        "warm    random        2      4  2.00 [2.00, 2.00]     2.00 [2.00, 2.00]        100%  "
        "1.000 [1.000, 1.000]  1.000 [1.000, 1.000]  1.000 [1.000, 1.000]",
        "",
        "TARGET                                        FIGURE                               "
        "                       MET",
        "headroom: best >= 5% faster than first        2 of 2 tasks not within 5% of their "
        "floor                   yes",
        "cold: full vs random, steps to 95%            full 2.00 [2.00, 2.00], random 2.00 "
        "[2.00, 2.00], diff 0.00 [0.00, 0.00]  no",
        "warm vs cold (full), steps to 95%             warm 2.00, cold 2.00, ratio 1.00     "
        "                       no",
        "cold, best at 10: full >= flat >= bestofn     full 1.000, flat -, bestofn -        "
        "                       n/a",
    ]
    got = p.stdout.splitlines()
    for i, w in enumerate(want):
        line = got[i + 1] if i + 1 < len(got) else None
        if w is None:
            # Points the proposer proposes that the enumeration did not list (the builtin's
            # grid and its moves can disagree) are not recorded: they count for nothing,
            # so the figures below hold whatever their number.
            # A run may also end before 20 steps when its policy finds nothing new (best-of-N
            # from a small space of moves).
            check(line is not None and line.startswith(
                "proposals of points the table lacks (no step spent): "),
                "report line %d: the proposals of points the table lacks: %s" % (i + 2, line))
            continue
        check(line is not None and line.rstrip() == w.rstrip(), "report line %d: %r" % (i + 2, w))
    check(got[0].startswith("replay of %s (hand, NVIDIA H200): 2 tasks, 2 seeds, 20 steps, "
                            "modes cold,warm" % table), "report header")
    with open(res) as f:
        doc = json.load(f)
    runs = doc["runs"]
    check(len(runs) == 16 and all(r["steps_to_95"] == 2 and r["counted_steps"] <= 20 and
                                  r["space_best_ms"] == 0.5 and r["best_ms_at"]["5"] == 0.5
                                  for r in runs), "--out: 16 runs, each at the best by step 2")


def test_record_dry_run(replay, points, scripted, tmp):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    build = os.path.dirname(points)  # opforge-space-points sits at the build's root
    out = os.path.join(tmp, "record")
    p = subprocess.run([sys.executable, os.path.join(root, "tests", "gpu", "space_record"),
                        "--dry-run", "--build", build, "--scripted-evaluator", scripted,
                        "--out", out, "--tasks", "level1/19_ReLU.py,level1/23_Softmax.py",
                        "--time-limit", "60", "--small", "4", "--per-task", "6",
                        "--commit", "test"], capture_output=True, text=True, timeout=300)
    print(p.stdout)
    check(p.returncode == 0, "space_record --dry-run exits 0")
    table = os.path.join(out, "space.jsonl.gz")
    import gzip
    with gzip.open(table, "rt") as f:
        lines = [json.loads(l) for l in f]
    kinds = [l["kind"] for l in lines]
    pts = [l for l in lines if l["kind"] == "point"]
    check(kinds[0] == "space" and lines[0]["source"] == "dry-run" and
          kinds.count("task") == 2 and kinds.count("region") == 2 and len(pts) == 12,
          "the dry run's table: a space line, 2 tasks, 2 regions, 6 points each")
    task = [l for l in lines if l["kind"] == "task"][0]
    check(task["reference_ms"] == 2.1 and task["eager_ms"] == 2.0 and task["commit"] == "test"
          and task["task"] == "19_ReLU" and isinstance(task["profile"], dict),
          "a task line: the reference's and the profile's times, the commit")
    region = [l for l in lines if l["kind"] == "region"][0]
    check(region["first"] == pts[0]["point"] and region["sampled"] is True,
          "the starting point is measured first; a large space is sampled")
    q = subprocess.run([replay, "--table", table, "--query"], text=True, capture_output=True,
                       input="".join("%s %d %s\n" % (l["task"], l["region"], l["point"])
                                     for l in pts))
    answers = [json.loads(l) for l in q.stdout.splitlines()]
    check(len(answers) == len(pts) and all(
        a["recorded"] and not a["modelled"] and a["correct"] == l["correct"] and
        a["ms"] == l["ms"] for a, l in zip(answers, pts)),
        "the replay evaluator answers every recorded point as recorded")


def test_sparse(opforge, points, tmp):
    """A sampled table: of each task's 1770 points only the starting point (1.0 ms) and
    four others (0.5 ms) are recorded. A proposal of any other point costs no step and
    commits no candidate: every run's candidates are recorded points only, its steps are
    at most the budget, and the engine counts the rest (progress.not_recorded)."""
    prof = os.path.join(tmp, "tiny.json")
    out = subprocess.run([points, prof], capture_output=True, text=True, check=True).stdout
    keys = [json.loads(l)["point"] for l in out.splitlines() if '"point"' in l]
    table = os.path.join(tmp, "sparse.jsonl")
    rows = [{"kind": "space", "format": 1, "source": "hand", "hardware": "NVIDIA H200"}]
    for task in ("sparse_a", "sparse_b"):
        p = relu_profile()
        p["name"] = task
        rows += [{"kind": "task", "task": task, "eager_ms": 2.0, "compile_ms": 1.6,
                  "floor_ms": 0.1, "reference_ms": 2.0, "profile": p},
                 {"kind": "region", "task": task, "region": 0, "family": "pointwise",
                  "library_ms": 2.0, "first": keys[0], "points_total": len(keys),
                  "sampled": True}]
        rows += [{"kind": "point", "task": task, "region": 0, "point": k,
                  "ms": 1.0 if i == 0 else 0.5, "correct": True, "class": None}
                 for i, k in enumerate(keys[:1] + keys[1::400])]
    write_lines(table, rows)
    res = os.path.join(tmp, "sparse.json")
    p = subprocess.run([opforge, "ablate", "--replay", table, "--seeds", "2", "--arms",
                        "full,random", "--modes", "cold", "--steps", "10", "--jobs", "4",
                        "--out", res], capture_output=True, text=True, timeout=600)
    print(p.stdout)
    check(p.returncode == 0, "ablate --replay of a sampled table exits 0")
    with open(res) as f:
        runs = json.load(f)["runs"]
    check(len(runs) == 8 and all(r["engine_steps"] == r["counted_steps"] <= 10 and
                                 r["not_recorded"] > 0 for r in runs),
          "a sampled table: every step a recorded point, the missing ones counted apart (%s)"
          % [(r["engine_steps"], r["counted_steps"], r["not_recorded"]) for r in runs])
    lacks = [l for l in p.stdout.splitlines() if l.startswith("proposals of points")]
    total = sum(r["not_recorded"] for r in runs)
    steps = sum(r["engine_steps"] for r in runs)
    check(lacks == ["proposals of points the table lacks (no step spent): %d, beside %d steps"
                    % (total, steps)], "the report counts them: %s" % lacks)


def children(pid):
    """The pids whose parent is pid (from /proc)."""
    out = []
    for d in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % d) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if d.isdigit() and int(fields[1]) == pid:
                out.append(int(d))
        except (OSError, IndexError, ValueError):
            pass
    return out


def test_server_ends_with_ablate(opforge, table):
    """SIGTERM to a running `ablate --replay` ends its server too (none is left behind)."""
    import signal
    import time
    p = subprocess.Popen([opforge, "ablate", "--replay", table, "--seeds", "50", "--jobs", "1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = []
    until = time.time() + 30
    while not server and time.time() < until:
        time.sleep(0.1)
        server = children(p.pid)
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=30)
    gone = False
    until = time.time() + 10
    while server and not gone and time.time() < until:
        time.sleep(0.1)
        try:
            with open("/proc/%d/stat" % server[0]) as f:
                gone = f.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            gone = True
    check(server and gone, "SIGTERM to ablate --replay ends its server (pid %s)" % server)


def test_modes(opforge, table, tmp):
    """--modes: the refusals word for word, and frozen memory (warm, search.learn false)
    runs after cold whatever the order named."""
    for modes, want in [
            ("warm", "error: --modes: warm memory is learned from the cold runs: name cold too"),
            ("frozen", "error: --modes: frozen memory is learned from the cold runs: "
                       "name cold too"),
            ("cold,cold", "error: --modes: repeated mode 'cold'"),
            ("cold,hot", "error: --modes: unknown mode 'hot' (known: cold, warm, frozen)")]:
        p = subprocess.run([opforge, "ablate", "--replay", table, "--seeds", "1", "--modes",
                            modes], capture_output=True, text=True, timeout=60)
        check(p.returncode == 2 and p.stderr.strip() == want,
              "--modes %s: exit 2, %r (got %d, %r)" % (modes, want, p.returncode,
                                                       p.stderr.strip()))
    p = subprocess.run([opforge, "ablate", "--replay", table, "--seeds", "1", "--arms", "full",
                        "--modes", "frozen,cold", "--jobs", "2"],
                       capture_output=True, text=True, timeout=600)
    got = p.stdout.splitlines()
    check(p.returncode == 0 and got and got[0].endswith("modes cold,frozen") and
          any(l.startswith("frozen  full          2      2  2.00 [2.00, 2.00]") for l in got),
          "--modes frozen,cold: cold then frozen, both at the best by step 2")


def main():
    opforge = os.environ.get("OPFORGE_BIN")
    replay = os.environ.get("OPFORGE_REPLAY")
    points = os.environ.get("OPFORGE_SPACE_POINTS")
    if not (opforge and replay and points):
        print("skipped: OPFORGE_BIN, OPFORGE_REPLAY and OPFORGE_SPACE_POINTS are needed")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        test_evaluator(replay, tmp)
        test_ablate(opforge, points, tmp)
        test_modes(opforge, os.path.join(tmp, "tiny.jsonl"), tmp)
        test_sparse(opforge, points, tmp)
        test_server_ends_with_ablate(opforge, os.path.join(tmp, "tiny.jsonl"))
        scripted = os.environ.get("OPFORGE_SCRIPTED_EVALUATOR")
        if scripted:
            test_record_dry_run(replay, points, scripted, tmp)
        else:
            print("skipped: the dry run of space_record (no scripted evaluator built)")
    print("%d failed" % len(FAILED))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
