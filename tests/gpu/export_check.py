"""The export check of a GPU run: a file written by `opforge best ID --format kernelbench`
must define ModelNew, a drop-in for the task's Model: equal outputs on 5 seeds (the
task's tolerance), both timed in turn with CUDA events, and no error from KernelBench's
strict static checks (tests/gpu/static_check.py; KernelBench's own checker when
$OPFORGE_KERNELBENCH_REPO names a checkout). The export does not repeat the task's
reference program, so the arguments are pairs, REFERENCE EXPORT ...: the reference is
exec'd first and the export after it in one namespace, as KernelBench's eval does. Prints
one line per export, "PASS <export>: <detail>" or "FAIL <export>: <detail>", and ends with
"N passed, N failed"; --json FILE also writes [{"file", "ok", "detail"}] there (file: the
export's path), for scripts. --jobs N builds the exports' extensions in N processes
first, so that the compiles overlap; the checks and timings themselves always run one
export at a time."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import types

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import static_check  # noqa: E402  (KernelBench's strict static checks)


def device_lock():
    """The evaluator's host-wide lock of the current GPU (gpu/evaluator/device_lock.py),
    held while an export runs and is timed, so that a server beside this check (a bench,
    tests/gpu/run) never times its candidates over it, nor it over them. A no-op lock
    off CUDA. The caller owns the returned object and uses it as a context manager."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "gpu",
                        "evaluator", "device_lock.py")
    spec = importlib.util.spec_from_file_location("opforge_device_lock", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not torch.cuda.is_available():
        return module.DeviceLock(None)
    index = torch.cuda.current_device()
    return module.DeviceLock(module.DeviceLock.path_for(
        torch.cuda.get_device_properties(index), index))


def load(reference, path):
    """The reference and then the export executed in one namespace, as a module."""
    mod = types.ModuleType("opforge_export")
    mod.__file__ = path
    for source in (reference, path):
        with open(source) as f:
            exec(compile(f.read(), source, "exec"), mod.__dict__)
    return mod


class CudaClock:
    """Marks on the current CUDA stream and the milliseconds between two of them."""

    def mark(self):
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def elapsed_ms(self, start, end):
        end.synchronize()
        return start.elapsed_time(end)


def timed_in_turn(fns, inputs, reps=20, clock=None):
    """Median milliseconds of each of fns on inputs, timed rep by rep in turn (fns[0],
    fns[1], fns[0], ...) after 3 warm-ups each, so that the GPU's clock and power drift
    over the loop reaches them alike and their ratio is not a drift (timed one after the
    other on the H200, exports of pointwise kernels that the evaluator had within 1% of
    eager read 4-7% slower than Model)."""
    clock = clock or CudaClock()
    for _ in range(3):
        for fn in fns:
            fn(*inputs)
    times = [[] for _ in fns]
    for _ in range(reps):
        for fn, got in zip(fns, times):
            start = clock.mark()
            fn(*inputs)
            got.append(clock.elapsed_ms(start, clock.mark()))
    return [statistics.median(t) for t in times]


def check(reference, path, atol, rtol):
    mod = load(reference, path)
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
        t_ref, t_new = timed_in_turn([ref, new], inputs)
    return True, "5 seeds equal (max abs err %.3g); Model %.4f ms, ModelNew %.4f ms (x%.2f)" % (
        worst, t_ref, t_new, t_ref / t_new)


def build_only(reference, path):
    """Loads the export and constructs ModelNew, which builds (or finds in the extension
    cache) its compiled module; nothing is run or timed."""
    mod = load(reference, path)
    torch.manual_seed(42)
    mod.ModelNew(*mod.get_init_inputs())


def prebuild(pairs, jobs):
    """Builds the exports' extensions in up to jobs processes at once (each one
    `--build-only REFERENCE EXPORT`), so that the sequential check finds them built. A
    failed build is only said here: the check of that export reports it with its reason."""
    pending, running = list(pairs), []
    while pending or running:
        while pending and len(running) < jobs:
            reference, path = pending.pop(0)
            running.append((path, subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--build-only", reference, path],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)))
        path, proc = running.pop(0)
        _, err = proc.communicate()
        if proc.returncode != 0:
            print("note: building %s failed: %s" % (path, err.strip()[-300:]), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("files", nargs="+", metavar="REFERENCE EXPORT",
                   help="pairs: a task's reference program, then its export")
    p.add_argument("--atol", type=float, default=1e-4)
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--json", metavar="FILE", help="also write the per-file results there")
    p.add_argument("--jobs", type=int, default=1,
                   help="build the extensions in this many processes first (default 1)")
    p.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if len(args.files) % 2:
        p.error("the files are pairs, REFERENCE EXPORT: got an odd number (%d)"
                % len(args.files))
    pairs = list(zip(args.files[0::2], args.files[1::2]))
    if args.build_only:
        for reference, path in pairs:
            build_only(reference, path)
        return 0
    if args.jobs > 1 and len(pairs) > 1:
        prebuild(pairs, args.jobs)
    passed, report, lock = 0, [], device_lock()
    for reference, path in pairs:
        try:
            with lock:
                ok, detail = check(reference, path, args.atol, args.rtol)
        except Exception as e:  # a broken export is a failed check, with its reason
            ok, detail = False, "%s: %s" % (type(e).__name__, str(e)[:500])
        with open(path) as f:
            static = static_check.kernelbench_errors(f.read())
        ok = ok and not static
        detail += "; static check: %s" % ("; ".join(static) if static else "no errors")
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # the next file's tensors may be as large
        passed += ok
        report.append({"file": path, "ok": ok, "detail": detail})
        print("%s %s: %s" % ("PASS" if ok else "FAIL", path, detail), flush=True)
        if args.json:  # rewritten after each file, so a run cut short keeps its results
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1)
    print("%d passed, %d failed" % (passed, len(pairs) - passed))
    return 0 if passed == len(pairs) else 1


if __name__ == "__main__":
    sys.exit(main())
