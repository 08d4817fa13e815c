"""The KernelBench export (handlers/export_*.c) as Python sees it. The files come from the
unit test tests/unit/test_export_kernelbench run with OPFORGE_EXPORT_EMIT_DIR, each with
its reference beside it (<name>_reference.py): an "affine" task (parameters, a buffer, a
scalar argument, a -D knob, 64 KiB of dynamic shared memory, a tuple return), the
KernelBench tasks of tests/gpu/kernels (relu, softmax, sgemm), and programs over a small
conv -> (x * scale) + 1 -> max-pool task (fx and torch.export graphs, two regions with
clashing macro and kernel names, the whole model as one library step).

Checked here: an export does not repeat its reference and is exec'd after it in one
namespace, as KernelBench's eval does (alone, it raises NameError); it passes KernelBench's
strict static checks (tests/gpu/static_check.py always; KernelBench's own checker when
$OPFORGE_KERNELBENCH_REPO names a KernelBench checkout); on any torch, ModelNew carries
Model's parameters, refuses what its kernels were not built for, and a program's steps
(library steps through the traced graph, regions through a stand-in for their launchers)
reproduce Model on the CPU; with nvcc, every export's CUDA compiles for sm_90a, and with
the torch headers so do the launchers; with a CUDA build of torch, load_inline and load
build the extensions (no GPU needed); with a CUDA device, ModelNew matches Model on 5
seeds and both are timed."""
import json
import os
import re
import subprocess
import sys
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
NVCC = Path("/usr/local/cuda/bin/nvcc")
SINGLE = ["affine", "relu", "softmax", "sgemm"]
PROGRAMS = ["program_fx", "program_fx_meta", "program_export", "program_two_regions",
            "program_model", "program_model_graph"]
FIXTURES = SINGLE + PROGRAMS
# (atol, rtol) per fixture: relu, affine and the programs' regions do exactly eager's
# float operations (with __fmul_rn/__fadd_rn, so no FMA contraction), softmax reorders its
# sums, sgemm sums 4096 products in another order than cuBLAS (the task's tolerance).
TOLERANCE = {"affine": (0.0, 0.0), "relu": (0.0, 0.0), "softmax": (1e-9, 1e-5),
             "sgemm": (1e-4, 1e-4), "program_fx": (0.0, 0.0), "program_fx_meta": (0.0, 0.0),
             "program_export": (0.0, 0.0),
             "program_two_regions": (0.0, 0.0), "program_model": (0.0, 0.0),
             "program_model_graph": (0.0, 0.0)}
SEEDS = range(5)


def built_binary(relative):
    """A built file of the repo: under $OPFORGE_BUILD_ROOT, else under a build folder of
    the repo (build-test-normal, build, build-gpu); None when none has it."""
    roots = [Path(os.environ["OPFORGE_BUILD_ROOT"])] if os.environ.get("OPFORGE_BUILD_ROOT") else []
    roots += [REPO / d for d in ("build-test-normal", "build", "build-gpu")]
    for root in roots:
        exe = root / relative
        if exe.is_file() and os.access(exe, os.X_OK):
            return exe
    return None


def unit_test_binary():
    """The built unit test tests/unit/test_export_kernelbench (built_binary)."""
    return built_binary(Path("tests") / "unit" / "test_export_kernelbench")


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """{fixture name: path of its generated file}; <name>_reference.py lies beside each."""
    exe = unit_test_binary()
    if exe is None:
        pytest.skip("tests/unit/test_export_kernelbench is not built (set OPFORGE_BUILD_ROOT "
                    "or build build-test-normal first)")
    out = tmp_path_factory.mktemp("exports")
    env = dict(os.environ, OPFORGE_EXPORT_EMIT_DIR=str(out), OPFORGE_SOURCE_ROOT=str(REPO))
    run = subprocess.run([str(exe)], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    names = FIXTURES + ["layout"]
    files = {n: out / (n + ".py") for n in names if (out / (n + ".py")).is_file()}
    assert "affine" in files and "program_fx" in files, run.stdout + run.stderr
    return files


def reference_of(path):
    return path.with_name(path.stem + "_reference.py")


def load(path):
    """The reference and then the export executed in one namespace, as KernelBench's eval
    does (exec(reference, context); exec(custom, context)), wrapped as a module."""
    mod = types.ModuleType("opforge_export_" + path.stem)
    mod.__file__ = str(path)
    reference = reference_of(path)
    exec(compile(reference.read_text(), str(reference), "exec"), mod.__dict__)
    exec(compile(path.read_text(), str(path), "exec"), mod.__dict__)
    return mod


def export_of(exports, name):
    if name not in exports:
        pytest.skip("%s was not exported: its KernelBench task was not found (the unit test "
                    "skipped it)" % name)
    return exports[name]


# ---- the file ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", FIXTURES)
def test_generated_file_is_python_without_the_reference(exports, name):
    path = export_of(exports, name)
    text = path.read_text()
    code = compile(text, name + ".py", "exec")
    assert "ModelNew" in code.co_names and "self.ref = Model(*init_inputs)" in text
    for line in reference_of(path).read_text().splitlines():
        if line.startswith(("class Model(", "def get_inputs(", "def get_init_inputs(")):
            assert line not in text


@pytest.mark.parametrize("name", ["affine", "program_fx"])
def test_export_alone_says_it_needs_the_reference(exports, name):
    with pytest.raises(NameError, match="exec the task's reference program first"):
        exec(compile(exports[name].read_text(), name + ".py", "exec"), {})


@pytest.fixture(scope="module")
def static_check():
    gpu_tests = str(REPO / "tests" / "gpu")
    if gpu_tests not in sys.path:
        sys.path.insert(0, gpu_tests)
    import static_check as mod
    return mod


@pytest.mark.parametrize("name", [n for n in FIXTURES if n != "program_model"] + ["layout"])
def test_strict_static_checks(exports, name, static_check):
    """KernelBench's strict checks for backend cuda (tests/gpu/static_check.py)."""
    assert static_check.errors(export_of(exports, name).read_text()) == []


def test_whole_model_export_has_no_kernel_for_the_checker(exports, static_check):
    """program_model runs the whole model as a library step: there is no kernel in it, and
    KernelBench's cuda_impl check rightly says so."""
    assert static_check.errors(export_of(exports, "program_model").read_text()) == [
        "Missing __global__ kernel definition"]


def test_static_check_rules_by_hand(static_check):
    kernel = ('src = """__global__ void k(float* y) { y[threadIdx.x] = 0; }"""\n'
              'from torch.utils.cpp_extension import load_inline\n')
    assert static_check.errors(kernel) == []
    assert static_check.errors(kernel + "try:\n    x = 1\nexcept Exception:\n    x = 2\n") == [
        "Contains try-except block (potential fallback bypass)"]
    # Comments are cut at '#' and '//' before matching, strings included.
    assert static_check.errors(kernel + "x = 1  # pass\n") == []
    assert static_check.errors(kernel + "# comment\npass\n") == [
        "Contains 'pass' statement (inheritance bypass)"]
    assert static_check.errors(kernel.replace("threadIdx.x", "0")) == [
        "Missing CUDA thread indexing or kernel features (threadIdx, blockIdx, "
        "__syncthreads, __shared__, etc.)"]
    assert static_check.errors(kernel.replace("load_inline", "load_it")
                               .replace("cpp_extension", "ext")) == [
        "Missing load_inline or cpp_extension for compilation"]
    assert static_check.errors("import threading\n" + kernel) == [
        "Uses threading (potential timing manipulation)"]
    assert static_check.errors("torch.cuda.synchronize = lambda: None\n" + kernel) == [
        "Reassigns timing function (monkey patch detected)"]


@pytest.mark.parametrize("name", [n for n in FIXTURES if n != "program_model"])
def test_kernelbench_static_checker(exports, name, capsys):
    repo = os.environ.get("OPFORGE_KERNELBENCH_REPO")
    if not repo:
        pytest.skip("OPFORGE_KERNELBENCH_REPO is not set: KernelBench's own static checker "
                    "(src/kernelbench/kernel_static_checker.py) not run")
    checker = Path(repo) / "src" / "kernelbench" / "kernel_static_checker.py"
    if not checker.is_file():
        pytest.skip("%s does not exist" % checker)
    namespace = {"__name__": "kernel_static_checker"}
    exec(compile(checker.read_text(), str(checker), "exec"), namespace)
    valid, errors, warnings = namespace["validate_kernel_static"](
        export_of(exports, name).read_text(), backend="cuda", precision="fp32")
    assert valid and errors == [], errors
    with capsys.disabled():
        print("\nstatic check %s: no errors; warnings %s" % (name, warnings or "none"))


def test_strings_read_back_exactly(exports):
    """The unit test's layout export: a source with triple quotes, a backslash and a final
    quote comes back from the Python string unchanged, between the knob macros."""
    mod = load(exports["layout"])
    source = ('// """ and \\n stay text\nextern "C" __global__ void '
              'k_main(int* y) { y[threadIdx.x] = 0; }\n"')
    assert mod._OFG_CUDA_SOURCE == ("// The candidate's -D options.\n#define BLOCK 256\n"
                                    "#define FAST 1\n" + source + "\n#undef BLOCK\n#undef FAST\n")
    assert mod._OFG_LAUNCHER.startswith("// opforge launcher")
    assert mod._OFG_FLAGS[-2:] == ["-maxrregcount=64", "--use_fast_math"]
    assert mod._OFG_PARAMS == [("weight", torch.float32, (32,)),
                               ("norm.running_mean", torch.float16, (32,))]
    assert mod._OFG_SCALARS == [(1, 0.5)] and mod._OFG_NARGS == 3


# ---- ModelNew on any torch ----------------------------------------------------------------

def test_model_new_has_model_parameters_and_refuses_misuse(exports):
    mod = load(exports["affine"])
    init = mod.get_init_inputs()
    torch.manual_seed(42)
    ref = mod.Model(*init)
    torch.manual_seed(42)
    new = mod.ModelNew(*init)
    assert isinstance(new, torch.nn.Module)
    assert torch.equal(new.ref.weight, ref.weight)
    assert torch.equal(new.ref.shift, ref.shift)
    assert set(new.state_dict()) == {"ref.weight", "ref.shift"}
    x = torch.randn(64, 16384)
    with pytest.raises(TypeError, match="takes 2 arguments, got 1"):
        new(x)
    with pytest.raises(ValueError, match="argument 1 must be 0.5"):
        new(x, 0.25)
    with pytest.raises(RuntimeError, match="input:0 is on cpu"):
        new(x, 0.5)
    if torch.cuda.is_available():
        new = new.cuda()
        with pytest.raises(ValueError, match=r"input:0 must be torch.float32 \(64, 16384\)"):
            new(torch.randn(64, 128, device="cuda"), 0.5)


class StandInRegions:
    """Stands in for a program's compiled extension on the CPU: each launcher computes
    its region with the same PyTorch operations as the reference, into the tensors the
    runner allocated. Records the calls."""

    def __init__(self):
        self.calls = []

    def ofg_r3(self, tensors, stream):  # (x * scale) + 1
        self.calls.append(("ofg_r3", [tuple(t.shape) for t in tensors]))
        x, scale, out = tensors
        out.copy_(x * scale + 1.0)

    def ofg_r1(self, tensors, stream):  # x * scale
        self.calls.append(("ofg_r1", [tuple(t.shape) for t in tensors]))
        x, scale, out = tensors
        out.copy_(x * scale)

    def ofg_r2(self, tensors, stream):  # x + 1
        self.calls.append(("ofg_r2", [tuple(t.shape) for t in tensors]))
        x, out = tensors
        out.copy_(x + 1.0)


@pytest.mark.parametrize("name", PROGRAMS)
def test_program_steps_reproduce_model_on_cpu(exports, name, monkeypatch):
    """The runner itself: library steps run the traced graph's nodes of self.ref (fx or
    torch.export), regions get their tensors in table order with the written ones
    allocated, and the outputs come back in Model's structure, bitwise equal to Model."""
    mod = load(exports[name])
    regions = StandInRegions()
    monkeypatch.setattr(mod, "_ofg_module", lambda device: regions)
    init = mod.get_init_inputs()
    torch.manual_seed(42)
    ref = mod.Model(*init)
    torch.manual_seed(42)
    new = mod.ModelNew(*init)
    assert set(new.state_dict()) == {"ref." + k for k in ref.state_dict()}
    cpu = torch.device("cpu")
    with torch.no_grad():
        for seed in range(2):
            torch.manual_seed(seed)
            inputs = mod.get_inputs()
            got = mod._ofg_pack(new._ofg_run(inputs, cpu))
            assert torch.equal(got, ref(*inputs))
    want = {"program_fx": [("ofg_r3", [(8, 16, 32, 32), (16, 1, 1), (8, 16, 32, 32)])],
            "program_fx_meta": [("ofg_r3", [(8, 16, 32, 32), (16, 1, 1), (8, 16, 32, 32)])],
            "program_export": [("ofg_r3", [(8, 16, 32, 32), (16, 1, 1), (8, 16, 32, 32)])],
            "program_two_regions": [
                ("ofg_r1", [(8, 16, 32, 32), (16, 1, 1), (8, 16, 32, 32)]),
                ("ofg_r2", [(8, 16, 32, 32), (8, 16, 32, 32)])],
            "program_model": [], "program_model_graph": []}[name]
    assert regions.calls == want * 2
    if mod._OFG_REGIONS:
        with pytest.raises(RuntimeError, match="ModelNew runs CUDA kernels: its inputs are on cpu"):
            new(*inputs)
    else:  # the whole model as a library step runs anywhere
        assert torch.equal(new(*inputs), ref(*inputs))


class StandInStage:
    """Records the staging kernel's calls and copies as it would."""

    def __init__(self):
        self.calls = []

    def ofg_stage(self, dsts, srcs, stream):
        self.calls.append(([tuple(d.shape) for d in dsts], stream))
        for d, s in zip(dsts, srcs):
            d.copy_(s)


def test_stage_inputs_takes_dense_pairs_in_one_call(exports):
    """A captured program stages its inputs: the dense pairs of one dtype and shape in one
    call of the staging kernel on the given stream, a strided input and one of another
    dtype by copy_, a scalar argument not at all."""
    mod = load(exports["program_model_graph"])
    held = [torch.zeros(4, 4), torch.zeros(4, 4), torch.zeros(6), torch.zeros(3), 7]
    inputs = [torch.rand(4, 4), torch.rand(8, 4)[::2], torch.rand(6),
              torch.arange(3, dtype=torch.int64), 7]
    stage = StandInStage()
    mod._ofg_stage_inputs(stage, held, inputs, 1234)
    assert stage.calls == [([(4, 4), (6,)], 1234)]
    for h, x in zip(held[:4], inputs[:4]):
        assert torch.equal(h, x.to(h.dtype))
    assert held[4] == 7


def test_program_refuses_a_graph_it_cannot_follow(exports, monkeypatch):
    mod = load(exports["program_fx"])
    monkeypatch.setattr(mod, "_ofg_module", lambda device: StandInRegions())
    monkeypatch.setattr(mod, "_OFG_STEPS", [("library", "MaxPool2d", "pool")] + mod._OFG_STEPS)
    torch.manual_seed(42)
    new = mod.ModelNew(*mod.get_init_inputs())
    with pytest.raises(RuntimeError, match="step 0 \\(node pool\\) reads add, which no earlier "
                                           "step computed"):
        new._ofg_run(mod.get_inputs(), torch.device("cpu"))
    monkeypatch.setattr(mod, "_OFG_STEPS", [("library", "Conv2d", "conv9")])
    with pytest.raises(RuntimeError, match="step 0 runs node conv9, which this torch's trace"):
        new._ofg_run(mod.get_inputs(), torch.device("cpu"))


# ---- nvcc and the torch extension builds ----------------------------------------------------

def torch_include():
    """The include folders of the installed torch's headers, or None."""
    root = Path(torch.__file__).parent / "include"
    api = root / "torch" / "csrc" / "api" / "include"
    return [root, api] if (api / "torch" / "types.h").is_file() else None


def cuda_units(mod):
    """[(file stem, kernels text, whole translation unit)] of an export: what load_inline
    compiles for a single kernel, or each region's file of a program."""
    head = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
    if hasattr(mod, "_OFG_REGIONS"):
        return [(name, kernels, mod._OFG_TU_HEAD + kernels + launcher)
                for name, kernels, launcher in mod._OFG_REGIONS]
    return [("kernels", mod._OFG_CUDA_SOURCE,
             head + mod._OFG_CUDA_SOURCE + "\n" + mod._OFG_LAUNCHER)]


def nvcc(source, out, *flags):
    """Compiles source with nvcc -c -arch=sm_90a; returns (ok, log)."""
    run = subprocess.run([str(NVCC), "-c", "-arch=sm_90a", "-std=c++17", "-Xcompiler", "-fPIC",
                          *flags, str(source), "-o", str(out)],
                         capture_output=True, text=True, timeout=600)
    return run.returncode == 0, run.stdout + run.stderr


def test_nvcc_compiles_every_export(exports, tmp_path, capsys):
    """Every export's kernels compile with nvcc for sm_90a, each region on its own with its
    own macros (the two regions' #error lines fire on the other's values); the region
    objects of a program link into one library without clashing (their kernels are
    renamed); and, with the torch headers, whole translation units with their launchers
    compile: one single-kernel export, one program region and a captured program's
    staging kernel (each takes about a minute, and load_inline/load below build the
    others)."""
    if not NVCC.is_file():
        pytest.skip("%s not found: the nvcc compiles are not run" % NVCC)
    jobs, full = [], []
    for name in [n for n in FIXTURES if n in exports and n != "program_model"]:
        mod = load(exports[name])
        if name == "program_model_graph":
            stage = tmp_path / "stage.cu"
            stage.write_text(mod._OFG_STAGE)
            full.append((name, stage, tmp_path / "stage.o"))
        for stem, kernels, unit in cuda_units(mod):
            source = tmp_path / ("%s_%s.cu" % (name, stem))
            source.write_text(kernels)
            jobs.append((name, source, tmp_path / (source.stem + ".o")))
            if (name, stem) in (("affine", "kernels"), ("program_fx", "r3")):
                whole = tmp_path / ("%s_%s_whole.cu" % (name, stem))
                whole.write_text(unit)
                full.append((name, whole, tmp_path / (whole.stem + ".o")))
    include = torch_include()
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(lambda j: nvcc(j[1], j[2]), jobs))
        for (name, source, _), (ok, log) in zip(jobs, results):
            assert ok, "%s: %s\n%s" % (name, source.name, log[-3000:])
        objects = [str(o) for n, _, o in jobs if n == "program_two_regions"]
        link = subprocess.run([str(NVCC), "-shared", "-arch=sm_90a", *objects, "-o",
                               str(tmp_path / "two_regions.so")],
                              capture_output=True, text=True, timeout=300)
        assert link.returncode == 0, link.stdout + link.stderr
        if include is None:
            with capsys.disabled():
                print("\nnvcc: launchers not compiled: the installed torch (%s) has no C++ "
                      "headers" % torch.__file__)
            return
        flags = [f for d in include for f in ("-I", str(d))]
        results = list(pool.map(lambda j: nvcc(j[1], j[2], *flags), full))
        for (name, source, _), (ok, log) in zip(full, results):
            assert ok, "%s: %s\n%s" % (name, source.name, log[-3000:])


@pytest.mark.parametrize("task, knobs", [
    ("89_cumsum.py", None),
    ("82_conv_depthwise_2D_square_input_square_kernel.py", None),
    ("85_conv_depthwise_2D_asymmetric_input_asymmetric_kernel.py", None),
    ("63_conv_standard_2D__square_input__square_kernel.py", None),
    ("63_conv_standard_2D__square_input__square_kernel.py", "MODE=tf32_rna"),
    ("57_conv_transposed_2D__square_input__square_kernel.py", "MODE=tf32_rna")])
def test_builtin_candidate_compiles_with_nvcc(tmp_path, kernelbench, task, knobs):
    """A builtin candidate (a scan; depthwise convolutions of the pooling family; dense
    and transposed ones of the convolution family, strict fp32 and with operands rounded
    to TF32), as the export writes its kernels (its -D options as #defines at the top),
    compiles with nvcc as it does with NVRTC."""
    exe = built_binary("opforge")
    if exe is None or not NVCC.is_file():
        pytest.skip("needs the built opforge (propose) and %s" % NVCC)
    run = subprocess.run([str(exe), "propose", str(kernelbench / "level1" / task),
                          "--device", "meta", "--python", sys.executable,
                          "--evaluator", str(REPO / "gpu" / "evaluator" / "main.py"),
                          # This suite already runs inside the evaluator's sandbox
                          # (scripts/test), where a second bubblewrap cannot nest.
                          "--sandbox", "none"]
                         + (["--knobs", knobs] if knobs else []),
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    candidate = json.loads(run.stdout)["candidate"]
    defines = "".join("#define %s %s\n" % tuple((o[2:].split("=", 1) + ["1"])[:2])
                      for o in candidate["options"] if o.startswith("-D"))
    source = tmp_path / "candidate.cu"
    source.write_text(defines + candidate["source"])
    ok, log = nvcc(source, tmp_path / "candidate.o")
    assert ok, log[-2000:]
    if knobs:
        assert "-D" + knobs.replace("MODE=", "MODE_").upper() + "=1" in candidate["options"]


def cuda_torch_or_skip():
    from torch.utils import cpp_extension
    if torch.version.cuda is None:
        pytest.skip("torch %s is a CPU-only build: it cannot build CUDA extensions"
                    % torch.__version__)
    home = cpp_extension.CUDA_HOME
    if not home or not (Path(home) / "bin" / "nvcc").is_file():
        pytest.skip("nvcc not found (CUDA_HOME is %s)" % home)


def test_load_inline_builds_the_extension(exports, tmp_path, monkeypatch):
    """ModelNew's own build path (_ofg_module), up to the launch: load_inline compiles and
    links the kernels and the launcher for sm_90a, the module imports, and the launcher
    checks its arguments. Without a GPU the first launch fails, and must say which."""
    cuda_torch_or_skip()
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    mod = load(exports["affine"])
    ext = mod._ofg_module(torch.device("cuda", 0))
    assert mod._OFG_MODULES == {(9, 0): ext}
    assert mod._ofg_module(torch.device("cuda", 0)) is ext
    assert len(ext.__name__) == len("opforge_") + 16 and ext.__name__.startswith("opforge_")
    with pytest.raises(RuntimeError, match="ofg_launch: expected 5 tensors, got 1"):
        ext.ofg_launch([torch.zeros(2)], 0)
    with pytest.raises(RuntimeError, match="expected scalar type Float but found Long"):
        ext.ofg_launch([torch.zeros(2, dtype=torch.int64)] * 5, 0)
    if torch.cuda.is_available():
        return
    tensors = [torch.zeros(64, 16384), torch.zeros(16384), torch.zeros(16384),
               torch.zeros(64, 16384), torch.zeros(64)]
    with pytest.raises(RuntimeError, match=r"opforge launch 0 \(kernel affine\) failed: "):
        ext.ofg_launch(tensors, 0)


def test_load_builds_a_program(exports, tmp_path, monkeypatch):
    """A program's build path: one torch.utils.cpp_extension.load of the bindings and one
    .cu file per region, written under TORCH_EXTENSIONS_DIR; the two regions' kernels of
    the same name and macros of other values link into one module, whose launchers check
    their arguments."""
    cuda_torch_or_skip()
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setenv("MAX_JOBS", str(os.cpu_count() or 2))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    mod = load(exports["program_two_regions"])
    ext = mod._ofg_module(torch.device("cuda", 0))
    assert mod._ofg_module(torch.device("cuda", 0)) is ext
    sources = next(tmp_path.glob("opforge_*_sources"))
    assert sorted(p.name for p in sources.iterdir()) == ["bindings.cpp", "r1.cu", "r2.cu",
                                                         "stage.cu"]
    assert (sources / "r1.cu").read_text().startswith(mod._OFG_TU_HEAD + "// opforge region 1")
    with pytest.raises(RuntimeError, match="ofg_r1: expected 3 tensors, got 1"):
        ext.ofg_r1([torch.zeros(2)], 0)
    with pytest.raises(RuntimeError, match="ofg_r2: expected 2 tensors, got 1"):
        ext.ofg_r2([torch.zeros(2)], 0)
    with pytest.raises(RuntimeError, match="ofg_stage: 1 destinations for 2 sources"):
        ext.ofg_stage([torch.zeros(2)], [torch.zeros(2)] * 2, 0)
    with pytest.raises(RuntimeError, match="ofg_stage: pair 0 is not on one CUDA device"):
        ext.ofg_stage([torch.zeros(2)], [torch.zeros(2)], 0)


# ---- on a GPU -------------------------------------------------------------------------------

def median_ms(fn, reps=20):
    """Median time of fn in milliseconds (CUDA events, 3 warm-ups)."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def test_stage_kernel_copies_every_pair_on_cuda(exports):
    """The staging kernel of a captured program on the GPU: 20 pairs (two launches of at
    most 16), of odd byte counts, at addresses 16-byte aligned and not, of several dtypes
    and one empty, each copied exactly and nothing beyond it written."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: torch.cuda.is_available() is False (torch %s)"
                    % torch.__version__)
    mod = load(exports["program_model_graph"])
    device = torch.device("cuda", torch.cuda.current_device())
    ext = mod._ofg_module(device)
    gen = torch.Generator(device=device).manual_seed(3)
    dsts, srcs, guards = [], [], []
    for i in range(20):
        n = [0, 1, 15, 16, 17, 4099, 1 << 20][i % 7] + i
        src_base = torch.randint(0, 255, (n + 2,), dtype=torch.uint8, device=device,
                                 generator=gen)
        dst_base = torch.full((n + 2,), 0xA5, dtype=torch.uint8, device=device)
        offset = i % 2  # odd offsets: byte addresses that no vector load may take
        src, dst = src_base[offset:offset + n], dst_base[offset:offset + n]
        if i % 3 == 0 and n % 4 == 0 and offset == 0:
            src, dst = src.view(torch.float32), dst.view(torch.float32)
        dsts.append(dst)
        srcs.append(src)
        guards.append((dst_base, offset, n))
    ext.ofg_stage(dsts, srcs, torch.cuda.current_stream(device).cuda_stream)
    torch.cuda.synchronize(device)
    for d, s, (base, offset, n) in zip(dsts, srcs, guards):
        assert torch.equal(d, s)
        assert torch.all(base[:offset] == 0xA5) and torch.all(base[offset + n:] == 0xA5)


@pytest.mark.parametrize("name", FIXTURES)
def test_model_new_matches_model_on_cuda(exports, name, capsys):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: torch.cuda.is_available() is False (torch %s)"
                    % torch.__version__)
    mod = load(export_of(exports, name))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    init = mod.get_init_inputs()
    torch.manual_seed(42)
    ref = mod.Model(*init).cuda().eval()
    torch.manual_seed(42)
    new = mod.ModelNew(*init).cuda().eval()
    atol, rtol = TOLERANCE[name]
    with torch.no_grad():
        for seed in SEEDS:
            torch.manual_seed(seed)
            with torch.device("cuda"):
                inputs = mod.get_inputs()
            want = ref(*inputs)
            got = new(*inputs)
            assert type(got) is type(want)
            torch.testing.assert_close(got, want, atol=atol, rtol=rtol,
                                       msg=lambda m: "%s, seed %d: %s" % (name, seed, m))
            del want, got
        ref_ms = median_ms(lambda: ref(*inputs))
        new_ms = median_ms(lambda: new(*inputs))
    with capsys.disabled():
        print("\nexport %s: Model %.3f ms, ModelNew %.3f ms (%.2fx), %d seeds match"
              % (name, ref_ms, new_ms, ref_ms / new_ms, len(SEEDS)), file=sys.stdout)
