"""How much one eager forward's time drifts within a minute on this GPU, and whether a
CUDA graph captured beside it changes it: the probe behind the in-turn timing of library-
only programs (docs/architecture.md, "Evaluation result"). For each KernelBench task file
given, times Model's forward by the evaluator's method (CUDA events, a 256 MB L2 flush
before each rep, 3 warm-ups, 30 reps, median) in this order: eager; again on fresh
inputs; after capturing a CUDA graph of it; the graph's replay; after freeing the graph;
eager on the first inputs again; with cudnn.benchmark on. Prints one line per task.
Usage (GPU host): python3 tests/gpu/timing_drift.py ../shared/kernelbench/level1/82_*.py"""
import importlib.util
import statistics
import sys

import torch

REPS = 30


def timed(fn, flush, reps=REPS):
    """Median milliseconds of fn over reps reps, each after an L2 flush (flush zeroed)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples)


def load(path):
    """The task file as a module."""
    spec = importlib.util.spec_from_file_location("task", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def probe(path, flush):
    """{label: median ms} for one task, in the order of the module docstring."""
    mod = load(path)
    torch.manual_seed(42)
    model = mod.Model(*mod.get_init_inputs()).cuda()
    got = {}
    with torch.no_grad():
        first = [t.cuda() for t in mod.get_inputs()]
        got["eager"] = timed(lambda: model(*first), flush)
        fresh = [t.cuda() for t in mod.get_inputs()]
        got["fresh_inputs"] = timed(lambda: model(*fresh), flush)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                model(*fresh)
        torch.cuda.current_stream().wait_stream(side)
        graph, static = torch.cuda.CUDAGraph(), [t.clone() for t in fresh]
        with torch.cuda.graph(graph):
            model(*static)
        got["stream_after_capture"] = timed(lambda: model(*fresh), flush)
        got["graph"] = timed(graph.replay, flush)
        del graph, static
        torch.cuda.empty_cache()
        got["stream_after_free"] = timed(lambda: model(*fresh), flush)
        got["eager_again"] = timed(lambda: model(*first), flush)
        torch.backends.cudnn.benchmark = True
        got["benchmark_mode"] = timed(lambda: model(*first), flush)
        torch.backends.cudnn.benchmark = False
    return got


def main(paths):
    if not torch.cuda.is_available():
        print("skipped: no CUDA device")
        return 0
    # PyTorch's defaults, as the evaluator sets them.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = True
    flush = torch.empty(256 * 1024 * 1024 // 4, device="cuda")
    for path in paths:
        got = probe(path, flush)
        print(path.rsplit("/", 1)[-1][:40], " ".join("%s=%.4f" % kv for kv in got.items()),
              flush=True)
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
