"""compute-sanitizer over the builtin kernels (see tests/gpu/sanitize, the entry point).

  sanitize.py prepare --dir DIR [--opforge BIN] [--python PY] [FAMILY...]
      writes DIR/tasks/<task>.py (small KernelBench programs, one or more per builtin
      family, shapes chosen to leave ragged tails) and DIR/candidates/<task>/<label>.json:
      the family's default candidate and two variants (the first two seed-memory
      strategies of the family's list below that `opforge propose` accepts and that change
      the candidate). No GPU needed: the profile runs on the meta device.
  sanitize.py one --dir DIR --task TASK [--label LABEL] [--lib SO]
      on a GPU host, inside compute-sanitizer: loads TASK once in an in-process evaluator
      (tests/gpu/sweep.py's load_evaluator, so the evaluator's API is used as the sweep
      uses it), profiles it and evaluates its candidates (all, or LABEL), printing one
      JSON line per candidate.
  sanitize.py run --dir DIR [--tools memcheck,...] [--sanitizer PATH] [--lib SO] [--jobs N]
      runs `one` for every task under every tool, then, for a task whose log has errors,
      once per candidate to tell which candidate they belong to; writes DIR/report.json
      and prints the table and "N errors".
  sanitize.py report --dir DIR
      prints the table of DIR/report.json again.

An error counts when its report names a kernel of the candidate (the plan's launch
names); errors in other kernels (PyTorch's, cuBLAS's) are listed as "library" and do
not count. A candidate whose evaluation crashes or times out counts as one error."""
import argparse
import json
import os
import re
import shutil
import concurrent.futures
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import sweep  # noqa: E402  (propose, load_evaluator)

TOOLS = ["memcheck", "racecheck", "initcheck", "synccheck"]

# Reduced-shape programs, one per builtin family (several for norm and gemm, whose
# templates differ by kind). Odd sizes leave tails for the vector and tile paths.
HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
TASKS = {
    "pointwise": ("pointwise", """
class Model(nn.Module):
    def forward(self, x):
        return torch.sigmoid(x) * x + 1.0

def get_inputs():
    return [torch.randn(7, 1003)]

def get_init_inputs():
    return []
"""),
    "reduction": ("reduction", """
class Model(nn.Module):
    def forward(self, x):
        return torch.sum(x, dim=1)

def get_inputs():
    return [torch.randn(5, 333, 7)]

def get_init_inputs():
    return []
"""),
    "softmax": ("softmax", """
class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)

def get_inputs():
    return [torch.randn(9, 1001)]

def get_init_inputs():
    return []
"""),
    "layernorm": ("norm", """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(300)

    def forward(self, x):
        return self.ln(x)

def get_inputs():
    return [torch.randn(6, 300)]

def get_init_inputs():
    return []
"""),
    "rmsnorm": ("norm", """
class Model(nn.Module):
    def __init__(self, num_features, eps=1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        rms = torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)
        return x / rms

def get_inputs():
    return [torch.randn(4, 33, 9, 7)]

def get_init_inputs():
    return [33]
"""),
    "batchnorm": ("norm", """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(12)

    def forward(self, x):
        return self.bn(x)

def get_inputs():
    return [torch.randn(3, 12, 9, 11)]

def get_init_inputs():
    return []
"""),
    "groupnorm": ("norm", """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gn = nn.GroupNorm(4, 12)

    def forward(self, x):
        return self.gn(x)

def get_inputs():
    return [torch.randn(3, 12, 9, 11)]

def get_init_inputs():
    return []
"""),
    "scan": ("scan", """
class Model(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, dim=1)

def get_inputs():
    return [torch.randn(5, 1000)]

def get_init_inputs():
    return []
"""),
    "pooling": ("pooling", """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)

    def forward(self, x):
        return self.pool(x)

def get_inputs():
    return [torch.randn(2, 5, 17, 19)]

def get_init_inputs():
    return []
"""),
    "loss": ("loss", """
class Model(nn.Module):
    def forward(self, predictions, targets):
        return torch.mean((predictions - targets) ** 2)

def get_inputs():
    return [torch.randn(7, 333), torch.randn(7, 333)]

def get_init_inputs():
    return []
"""),
    "gemm": ("gemm", """
class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)

def get_inputs():
    return [torch.randn(130, 96), torch.randn(96, 70)]

def get_init_inputs():
    return []
"""),
    "gemm_epilogue": ("gemm", """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(96, 70)

    def forward(self, x):
        return F.leaky_relu(self.fc(x) * 2.0, negative_slope=0.1)

def get_inputs():
    return [torch.randn(37, 96)]

def get_init_inputs():
    return []
"""),
    # The convolution family (learned as "gemm"): a strided 2D convolution with bias and
    # a grouped transposed 3D one, sizes that leave partial tiles on every axis.
    "conv2d": ("gemm", """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(5, 7, 3, stride=2, padding=1)

    def forward(self, x):
        return self.conv(x)

def get_inputs():
    return [torch.randn(2, 5, 13, 11)]

def get_init_inputs():
    return []
"""),
    "conv_transpose3d": ("gemm", """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose3d(6, 4, (3, 2, 3), stride=(2, 1, 2), padding=(1, 0, 1),
                                       output_padding=(1, 0, 0), groups=2, bias=False)

    def forward(self, x):
        return self.conv(x)

def get_inputs():
    return [torch.randn(2, 6, 5, 7, 6)]

def get_init_inputs():
    return []
"""),
    "gemm_row_tail": ("gemm", """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(70, 96))

    def forward(self, x):
        x = torch.matmul(x, self.weight.T)
        x = x / 2
        return torch.sum(x, dim=1, keepdim=True) * 1.5

def get_inputs():
    return [torch.randn(37, 96)]

def get_init_inputs():
    return []
"""),
}

# Strategies to try for the two variants, most structural first (they change the
# indexing, the tiles or the synchronization, which is what the tools check).
# Generic moves, tried last, so that every family gets two variants even where its
# shapes rule the structural ones out.
FALLBACK = ["block_size_up", "block_size_down", "unroll_inner", "items_per_thread_up",
            "launch_bounds_minb"]
VARIANTS = {
    "pointwise": ["vector_float4", "grid_stride_loop", "persistent_grid"] + FALLBACK,
    "reduction": ["split_reduction", "warp_per_row", "coalesce_inner_axis",
                  "vector_float4"] + FALLBACK,
    "softmax": ["block_per_row", "online_softmax", "warp_per_row", "row_in_smem"] + FALLBACK,
    "norm": ["welford_one_pass", "block_per_row", "row_in_smem", "split_reduction",
             "two_pass_stats", "vector_float4"] + FALLBACK,
    "scan": ["scan_decoupled_lookback", "scan_two_level", "warp_scan_per_row",
             "vector_float4"] + FALLBACK,
    "pooling": ["pool_smem_halo", "thread_per_output_pool", "smem_padding"] + FALLBACK,
    "loss": ["loss_fused_reduce", "split_reduction", "warp_per_row", "vector_float2",
             "online_softmax"] + FALLBACK,
    "gemm": ["tf32x3_tensor_cores", "split_k", "cp_async_double_buffer", "tile_bk_up",
             "gemm_reduction_tail", "smem_padding", "launch_bounds_minb"],
}

# The first line of one reported error; its details follow on "=========     " lines.
ERROR_START = re.compile(r"^========= (?!ERROR SUMMARY|RACECHECK SUMMARY|COMPUTE-SANITIZER|"
                         r"Target application|LEAK SUMMARY|    |Saved host|"
                         r"No CUDA)(\S.*)$")
# The last line of a finished run: memcheck, initcheck and synccheck count errors,
# racecheck hazards (of which errors).
SUMMARY = re.compile(r"(?:ERROR SUMMARY: |RACECHECK SUMMARY: .*\()(\d+) error")


def kernel_names(candidate):
    """The kernel names a candidate launches (plan, or every region of a program)."""
    names = set()
    plans = [candidate.get("plan")]
    for step in ((candidate.get("program") or {}).get("steps") or []):
        plans.append(step.get("plan"))
    for plan in plans:
        for launch in ((plan or {}).get("launches") or []):
            if launch.get("kernel"):
                names.add(launch["kernel"])
    return sorted(names)


def task_dir(args, task):
    return os.path.join(args.dir, "candidates", task)


def load_candidates(args, task, label=None):
    out = []
    d = task_dir(args, task)
    for name in sorted(os.listdir(d)):
        if name.endswith(".json") and (label is None or name == label + ".json"):
            with open(os.path.join(d, name)) as f:
                out.append(json.load(f))
    return out


# ---------------------------------------------------------------- prepare

def prepare(args):
    os.makedirs(os.path.join(args.dir, "tasks"), exist_ok=True)
    wanted = set(args.only or [])
    strategies = dict(sweep.strategies())
    ok = True
    for task, (family, body) in TASKS.items():
        if wanted and task not in wanted and family not in wanted:
            continue
        path = os.path.join(args.dir, "tasks", task + ".py")
        with open(path, "w") as f:
            f.write(HEADER + body.lstrip("\n"))
        out = task_dir(args, task)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        # sweep.propose takes a KernelBench-relative path: use this directory as the root.
        args.kernelbench = os.path.join(args.dir, "tasks")
        cand, got = sweep.propose(args, task + ".py")
        if cand is None:
            print("refused %-14s default: %s" % (task, got), flush=True)
            ok = False
            continue
        if got != family:
            print("note: %s is family %s (expected %s)" % (task, got, family), flush=True)
        made = [("default", None, cand)]
        for strategy in VARIANTS.get(got, []):
            if len(made) == 3:
                break
            if got not in strategies.get(strategy, [got]):
                continue
            var, err = sweep.propose(args, task + ".py", strategy=strategy)
            if var is None:
                print("  %s %s: refused (%s)" % (task, strategy, err), flush=True)
                continue
            if any(json.dumps(var, sort_keys=True) == json.dumps(m[2], sort_keys=True)
                   for m in made):
                print("  %s %s: same candidate as one already kept" % (task, strategy))
                continue
            made.append((strategy, strategy, var))
        for label, strategy, c in made:
            with open(os.path.join(out, label + ".json"), "w") as f:
                json.dump({"task": task, "family": got, "label": label, "strategy": strategy,
                           "kernels": kernel_names(c), "candidate": c}, f)
        print("prepared %-14s %-9s %s" % (task, got, ", ".join(m[0] for m in made)), flush=True)
        if len(made) < 3:
            print("  %s: only %d candidate(s)" % (task, len(made)), flush=True)
    return 0 if ok else 1


# ---------------------------------------------------------------- one (under the tool)

def short_timing():
    """The sanitizer slows every launch by 10-100x: the timing loop runs the fewest reps
    (patched wherever the evaluator keeps its TIMING table)."""
    for name, mod in list(sys.modules.items()):
        table = getattr(mod, "TIMING", None) if name.startswith("evaluator") else None
        if isinstance(table, dict) and "min_reps" in table:
            table.update({"warmup": 1, "min_reps": 2, "max_reps": 2})


def one(args):
    ev = sweep.load_evaluator(args.lib)
    short_timing()
    with open(os.path.join(args.dir, "tasks", args.task + ".py")) as f:
        source = f.read()
    ev.load_task({"source": source, "name": args.task, "trials": 1})
    ev.profile({})
    status = 0
    for c in load_candidates(args, args.task, args.label):
        print("### begin %s" % c["label"], flush=True)
        t0 = time.monotonic()
        try:
            res = ev.evaluate({"candidate": c["candidate"]})
        except Exception as exc:  # a fatal error poisons the CUDA context: stop here
            print(json.dumps({"label": c["label"], "outcome": "fatal: %s" % str(exc)[:300],
                              "seconds": time.monotonic() - t0}), flush=True)
            return 3
        fail = res.get("failure") or {}
        print(json.dumps({"label": c["label"],
                          "outcome": "correct" if res.get("correct") else fail.get("class", "?"),
                          "seconds": round(time.monotonic() - t0, 1)}), flush=True)
        print("### end %s" % c["label"], flush=True)
    return status


# ---------------------------------------------------------------- run

def parse_log(path, kernels):
    """(errors in the candidates' kernels, errors elsewhere, summary count or None,
    first lines of each counted error)."""
    ours, other, summary, samples = 0, 0, None, []
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return 0, 0, None, []
    block = []

    def close(block):
        nonlocal ours, other
        if not block:
            return
        text = "\n".join(block)
        # A kernel of the candidate, or (for a failed API call such as a launch) a host
        # frame in the GPU library that launched it.
        if "libopforge_gpu" in text or any(re.search(r"\b%s\b" % re.escape(k), text)
                                           for k in kernels):
            ours += 1
            if len(samples) < 5:
                samples.append(text[:400])
        else:
            other += 1

    for line in lines:
        m = SUMMARY.search(line)
        if m:
            summary = int(m.group(1))
        if ERROR_START.match(line):
            close(block)
            block = [line]
        elif block and line.startswith("=========     "):
            block.append(line)
        else:
            close(block)
            block = []
    close(block)
    return ours, other, summary, samples


def sanitize_cmd(args, tool, log, task, label=None):
    cmd = [args.sanitizer, "--tool", tool, "--log-file", log, "--print-limit", "200"]
    if tool == "racecheck":
        cmd += ["--racecheck-report", "hazard"]
    cmd += [args.python, "-u", os.path.abspath(__file__), "one", "--dir", args.dir,
            "--task", task, "--lib", args.lib]
    if label:
        cmd += ["--label", label]
    return cmd


def run_one(args, tool, task, label=None):
    """Runs `one` under tool; returns (ours, other, summary, samples, outcomes, status)."""
    logs = os.path.join(args.dir, "logs")
    os.makedirs(logs, exist_ok=True)
    stem = "%s.%s%s" % (task, tool, "." + label if label else "")
    log, out = os.path.join(logs, stem + ".log"), os.path.join(logs, stem + ".out")
    kernels = sorted({k for c in load_candidates(args, task, label) for k in c["kernels"]})
    t0 = time.monotonic()
    with open(out, "w") as f:
        try:
            p = subprocess.run(sanitize_cmd(args, tool, log, task, label), stdout=f,
                               stderr=subprocess.STDOUT, timeout=args.timeout)
            status = p.returncode
        except subprocess.TimeoutExpired:
            status = "timeout"
    outcomes = {}
    with open(out, errors="replace") as f:
        for line in f:
            if line.startswith("{"):
                try:
                    r = json.loads(line)
                    outcomes[r["label"]] = r["outcome"]
                except ValueError:
                    pass
    ours, other, summary, samples = parse_log(log, kernels)
    print("  %-14s %-9s %-22s %3d ours %3d library  %5.0fs  exit %s" % (
        task, tool, label or "(all candidates)", ours, other, time.monotonic() - t0, status),
        flush=True)
    return ours, other, summary, samples, outcomes, status


def finished_run(args, tool, task, kernels, n_cands):
    """(ours, other, samples, outcomes) of an earlier run of (task, tool) with every
    candidate's outcome and the sanitizer's summary in its logs and no error of ours, or
    None when it has to run (again). What --resume reuses."""
    stem = os.path.join(args.dir, "logs", "%s.%s" % (task, tool))
    outcomes = {}
    try:
        with open(stem + ".out", errors="replace") as f:
            for line in f:
                if line.startswith("{"):
                    try:
                        r = json.loads(line)
                        outcomes[r["label"]] = r["outcome"]
                    except (ValueError, KeyError):
                        pass
    except OSError:
        return None
    ours, other, summary, samples = parse_log(stem + ".log", kernels)
    if summary is None or ours or len(outcomes) < n_cands:
        return None
    return ours, other, samples, outcomes


def check_pair(args, task, tool):
    """The rows of one (task, tool): one process for all candidates, then one per
    candidate when errors or a crash need attributing. With --resume, a clean finished
    run already in the logs is reused."""
    cands = load_candidates(args, task)
    kernels = sorted({k for c in cands for k in c["kernels"]})
    done = finished_run(args, tool, task, kernels, len(cands)) if args.resume else None
    if done:
        ours, other, samples, outcomes = done
        status = 0
        print("  %-14s %-9s %-22s %3d ours %3d library  (from an earlier run's logs)" % (
            task, tool, "(all candidates)", ours, other), flush=True)
    else:
        ours, other, _, samples, outcomes, status = run_one(args, tool, task)
    per = {c["label"]: {"ours": 0, "samples": []} for c in cands}
    crashed = status != 0 or len(outcomes) < len(cands)
    if ours or crashed:  # attribute: one process per candidate
        for c in cands:
            o, _, _, s, out1, st1 = run_one(args, tool, task, c["label"])
            bad = st1 != 0 or c["label"] not in out1
            per[c["label"]] = {"ours": o + (1 if bad else 0), "samples": s}
            outcomes[c["label"]] = out1.get(c["label"], "no result (exit %s)" % st1)
    rows = []
    for i, c in enumerate(cands):  # the library count goes on the task's first row
        rows.append({"task": task, "family": c["family"], "label": c["label"],
                     "tool": tool, "errors": per[c["label"]]["ours"],
                     "library": other if i == 0 else 0,
                     "outcome": outcomes.get(c["label"], "?"),
                     "samples": per[c["label"]]["samples"]})
    return rows


def run(args):
    """Every (task, tool) pair, args.jobs sanitizer processes at a time (they share the
    GPU; nothing here is timed), rows in task then tool order."""
    tools = [t for t in args.tools.split(",") if t]
    tasks = sorted(os.listdir(os.path.join(args.dir, "candidates")))
    pairs = [(task, tool) for task in tasks for tool in tools]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda p: check_pair(args, p[0], p[1]), pairs))
    rows = [r for rs in results for r in rs]
    with open(os.path.join(args.dir, "report.json"), "w") as f:
        json.dump(rows, f, indent=1)
    return table(rows)


def table(rows):
    tools = []
    for r in rows:
        if r["tool"] not in tools:
            tools.append(r["tool"])
    cells = {}
    for r in rows:
        key = (r["task"], r["label"])
        cells.setdefault(key, {"family": r["family"], "outcome": r["outcome"]})
        cells[key][r["tool"]] = r["errors"]
        cells[key]["library"] = cells[key].get("library", 0) + r["library"]
    print("\n%-14s %-9s %-26s %s %8s  %s" % ("TASK", "FAMILY", "CANDIDATE",
                                             " ".join("%9s" % t for t in tools), "LIBRARY",
                                             "OUTCOME"))
    total = 0
    for (task, label), c in sorted(cells.items()):
        errs = [c.get(t, 0) for t in tools]
        total += sum(errs)
        print("%-14s %-9s %-26s %s %8d  %s" % (task, c["family"], label,
                                               " ".join("%9d" % e for e in errs), c["library"],
                                               c["outcome"][:40]))
    for r in rows:
        for s in r["samples"]:
            print("\n[%s %s %s]\n%s" % (r["task"], r["label"], r["tool"], s))
    print("\n%d candidates, %d tools: %d errors" % (len(cells), len(tools), total))
    return 0 if total == 0 else 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("mode", choices=["prepare", "one", "run", "report"])
    p.add_argument("only", nargs="*", help="prepare: only these tasks or families")
    p.add_argument("--dir", required=True)
    p.add_argument("--opforge", default="build/opforge")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--lib", default="build/gpu/libopforge_gpu.so")
    p.add_argument("--task")
    p.add_argument("--label")
    p.add_argument("--tools", default=",".join(TOOLS))
    p.add_argument("--sanitizer", default="compute-sanitizer")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per sanitizer run")
    p.add_argument("--jobs", type=int, default=1,
                   help="sanitizer processes at a time (they share the GPU)")
    p.add_argument("--resume", action="store_true",
                   help="run: reuse (task, tool) runs that finished clean in the logs")
    args = p.parse_intermixed_args()
    args.dir = os.path.abspath(args.dir)
    args.lib = os.path.abspath(args.lib)
    if args.mode == "prepare":
        return prepare(args)
    if args.mode == "one":
        return one(args)
    if args.mode == "run":
        return run(args)
    with open(os.path.join(args.dir, "report.json")) as f:
        return table(json.load(f))


if __name__ == "__main__":
    sys.exit(main())
