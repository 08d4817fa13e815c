"""The export check of a GPU run: a file written by `opforge best ID --format kernelbench`
must define ModelNew, a drop-in for the task's Model: equal outputs on 5 seeds (the
task's tolerance), and both timed with CUDA events. Prints one line per file and ends
with "N passed, N failed"."""
import argparse
import statistics
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
            worst = max(worst, (g.double() - w.double()).abs().max().item())
    with torch.no_grad():
        t_ref, t_new = timed(ref, inputs), timed(new, inputs)
    return True, "5 seeds equal (max abs err %.3g); Model %.4f ms, ModelNew %.4f ms (x%.2f)" % (
        worst, t_ref, t_new, t_ref / t_new)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("files", nargs="+")
    p.add_argument("--atol", type=float, default=1e-4)
    p.add_argument("--rtol", type=float, default=1e-4)
    args = p.parse_args()
    passed = 0
    for path in args.files:
        try:
            ok, detail = check(path, args.atol, args.rtol)
        except Exception as e:  # a broken export is a failed check, with its reason
            ok, detail = False, "%s: %s" % (type(e).__name__, str(e)[:500])
        passed += ok
        print("%s %s: %s" % ("PASS" if ok else "FAIL", path, detail), flush=True)
    print("%d passed, %d failed" % (passed, len(args.files) - passed))
    return 0 if passed == len(args.files) else 1


if __name__ == "__main__":
    sys.exit(main())
