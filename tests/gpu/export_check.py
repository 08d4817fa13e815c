"""The export check of a GPU run: a file written by `opforge best ID --format kernelbench`
must define ModelNew, a drop-in for the task's Model: equal outputs on 5 seeds (the
task's tolerance), and both timed with CUDA events. Prints one line per file,
"PASS <file>: <detail>" or "FAIL <file>: <detail>", and ends with "N passed, N failed";
--json FILE also writes [{"file", "ok", "detail"}] there, for scripts. --jobs N builds
the files' extensions (load_inline) in N processes first, so that the compiles overlap;
the checks and timings themselves always run one file at a time."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import types

import torch


def load(path):
    mod = types.ModuleType("opforge_export")
    mod.__file__ = path
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), mod.__dict__)
    return mod


def timed(fn, inputs, reps=20):
    for _ in range(3):
        fn(*inputs)
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*inputs)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def check(path, atol, rtol):
    mod = load(path)
    torch.manual_seed(42)
    init = mod.get_init_inputs()
    torch.manual_seed(42)
    ref = mod.Model(*init).cuda()
    torch.manual_seed(42)
    new = mod.ModelNew(*init).cuda()
    worst = 0.0
    for seed in range(5):
        torch.manual_seed(seed)
        with torch.device("cuda"):
            inputs = [x.cuda() if torch.is_tensor(x) else x for x in mod.get_inputs()]
        with torch.no_grad():
            want, got = ref(*inputs), new(*inputs)
        want = want if isinstance(want, (tuple, list)) else (want,)
        got = got if isinstance(got, (tuple, list)) else (got,)
        for w, g in zip(want, got):
            if not torch.allclose(g, w, atol=atol, rtol=rtol):
                return False, "seed %d: max abs error %.3g" % (seed, (g - w).abs().max().item())
            # In the outputs' own precision: float64 copies of multi-GB outputs cost more
            # GPU memory than the check is worth.
            worst = max(worst, (g - w).abs().max().item())
    with torch.no_grad():
        t_ref, t_new = timed(ref, inputs), timed(new, inputs)
    return True, "5 seeds equal (max abs err %.3g); Model %.4f ms, ModelNew %.4f ms (x%.2f)" % (
        worst, t_ref, t_new, t_ref / t_new)


def build_only(path):
    """Loads path and constructs ModelNew, which builds (or finds in the extension cache)
    its compiled module; nothing is run or timed."""
    mod = load(path)
    torch.manual_seed(42)
    mod.ModelNew(*mod.get_init_inputs())


def prebuild(files, jobs):
    """Builds the files' extensions in up to jobs processes at once (each one `--build-only
    FILE`), so that the sequential check finds them built. A failed build is only said
    here: the check of that file reports the failure with its reason."""
    pending, running = list(files), []
    while pending or running:
        while pending and len(running) < jobs:
            path = pending.pop(0)
            running.append((path, subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--build-only", path],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)))
        path, proc = running.pop(0)
        _, err = proc.communicate()
        if proc.returncode != 0:
            print("note: building %s failed: %s" % (path, err.strip()[-300:]), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("files", nargs="+")
    p.add_argument("--atol", type=float, default=1e-4)
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--json", metavar="FILE", help="also write the per-file results there")
    p.add_argument("--jobs", type=int, default=1,
                   help="build the extensions in this many processes first (default 1)")
    p.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.build_only:
        for path in args.files:
            build_only(path)
        return 0
    if args.jobs > 1 and len(args.files) > 1:
        prebuild(args.files, args.jobs)
    passed, report = 0, []
    for path in args.files:
        try:
            ok, detail = check(path, args.atol, args.rtol)
        except Exception as e:  # a broken export is a failed check, with its reason
            ok, detail = False, "%s: %s" % (type(e).__name__, str(e)[:500])
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # the next file's tensors may be as large
        passed += ok
        report.append({"file": path, "ok": ok, "detail": detail})
        print("%s %s: %s" % ("PASS" if ok else "FAIL", path, detail), flush=True)
        if args.json:  # rewritten after each file, so a run cut short keeps its results
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1)
    print("%d passed, %d failed" % (passed, len(args.files) - passed))
    return 0 if passed == len(args.files) else 1


if __name__ == "__main__":
    sys.exit(main())
