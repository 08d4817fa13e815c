"""KernelBench's strict static checks of a kernel file, as its
src/kernelbench/kernel_static_checker.py states them for backend "cuda" (written here
from its rules, so that the checks run without a KernelBench checkout): code_bypass,
timing_event_patch, thread_injection and lazy_eval patterns must not match, and cuda_impl
must hold (a __global__ kernel, load_inline or cpp_extension, and CUDA thread indexing or
kernel features). errors(code) lists what fails, in KernelBench's words; [] means none.
With $OPFORGE_KERNELBENCH_REPO naming a KernelBench checkout, kernelbench_errors runs
KernelBench's own checker instead."""
import os
import re
from pathlib import Path

# (pattern, message) of the strict checks that must not match.
FORBIDDEN = [
    (r"\btry\s*:", "Contains try-except block (potential fallback bypass)"),
    (r"\bexcept\s*:", "Contains try-except block (potential fallback bypass)"),
    (r"\bexcept\s+\w+", "Contains try-except block (potential fallback bypass)"),
    (r"\bpass\b", "Contains 'pass' statement (inheritance bypass)"),
    (r"torch\.cuda\.Event\.record\s*=", "Reassigns timing function (monkey patch detected)"),
    (r"torch\.cuda\.Event\.elapsed_time\s*=", "Reassigns timing function (monkey patch detected)"),
    (r"torch\.cuda\.synchronize\s*=", "Reassigns timing function (monkey patch detected)"),
    (r"torch\.cuda\.Event\s*=", "Reassigns timing function (monkey patch detected)"),
    (r"time\.perf_counter\s*=", "Reassigns timing function (monkey patch detected)"),
    (r"time\.time\s*=", "Reassigns timing function (monkey patch detected)"),
    (r"threading\.Thread\s*\(", "Uses threading (potential timing manipulation)"),
    (r"import\s+threading", "Uses threading (potential timing manipulation)"),
    (r"from\s+threading\s+import", "Uses threading (potential timing manipulation)"),
    (r"multiprocessing\.(Process|Pool|Manager|Queue|Pipe)",
     "Uses multiprocessing (potential timing manipulation)"),
    (r"import\s+multiprocessing", "Uses multiprocessing (potential timing manipulation)"),
    (r"concurrent\.futures", "Uses concurrent futures (potential timing manipulation)"),
    (r"ThreadPoolExecutor", "Uses concurrent futures (potential timing manipulation)"),
    (r"ProcessPoolExecutor", "Uses concurrent futures (potential timing manipulation)"),
    (r"_make_subclass", "Uses _make_subclass (potential lazy tensor hack)"),
    (r"class\s+\w+.*\(torch\.Tensor\)", "Defines custom tensor subclass (potential lazy tensor hack)"),
    (r"class\s+\w+.*\(Tensor\)", "Defines custom tensor subclass (potential lazy tensor hack)"),
    (r"torch\.Tensor\.__new__", "Uses direct tensor construction (potential lazy tensor hack)"),
]
# cuda_impl: one of these must appear besides __global__ and the compile method.
CUDA_FEATURES = [r"\bthreadIdx\.", r"\bblockIdx\.", r"\bblockDim\.", r"\bgridDim\.",
                 r"__syncthreads\s*\(", r"__shared__\s+", r"__device__\s+", r"atomicAdd\s*\(",
                 r"atomicMax\s*\(", r"atomicMin\s*\("]


def strip_comments(code):
    """The text as the checker reads it: each line cut at its first '#', then at its first
    '//' (inside strings too)."""
    return "\n".join(line.split("#", 1)[0].split("//", 1)[0] for line in code.split("\n"))


def errors(code):
    """The strict checks code fails, each message once, in check order; [] when none."""
    code = strip_comments(code)
    found = []
    for pattern, message in FORBIDDEN:
        if re.search(pattern, code) and message not in found:
            found.append(message)
    if "__global__" not in code:
        found.append("Missing __global__ kernel definition")
    elif "load_inline" not in code and "cpp_extension" not in code:
        found.append("Missing load_inline or cpp_extension for compilation")
    elif not any(re.search(p, code) for p in CUDA_FEATURES):
        found.append("Missing CUDA thread indexing or kernel features (threadIdx, blockIdx, "
                     "__syncthreads, __shared__, etc.)")
    return found


def kernelbench_errors(code, precision="fp32"):
    """KernelBench's own validate_kernel_static(code, backend="cuda") errors when
    $OPFORGE_KERNELBENCH_REPO names a checkout with its checker, else errors(code)."""
    repo = os.environ.get("OPFORGE_KERNELBENCH_REPO")
    checker = Path(repo) / "src" / "kernelbench" / "kernel_static_checker.py" if repo else None
    if not checker or not checker.is_file():
        return errors(code)
    namespace = {"__name__": "kernel_static_checker"}
    exec(compile(checker.read_text(), str(checker), "exec"), namespace)
    _, errs, _ = namespace["validate_kernel_static"](code, backend="cuda", precision=precision)
    return list(errs)
