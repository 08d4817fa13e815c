"""The KernelBench export (engine/export_kernelbench.c) as Python sees it. The files come
from the unit test tests/unit/test_export_kernelbench run with OPFORGE_EXPORT_EMIT_DIR:
an "affine" task (parameters, a buffer, a scalar argument, a -D knob, 64 KiB of dynamic
shared memory, a tuple return) and the KernelBench tasks of tests/gpu/kernels (relu,
softmax, sgemm). Checked here: every file compiles as Python; on any torch, ModelNew
carries Model's parameters and refuses what its kernels were not built for; with a CUDA
build of torch and nvcc, load_inline builds and imports the extension (no GPU needed);
with a CUDA device, ModelNew matches Model on 5 seeds and both are timed."""
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
FIXTURES = ["affine", "relu", "softmax", "sgemm"]
# (atol, rtol) per fixture: relu and affine do exactly eager's float operations (affine
# with __fmul_rn/__fadd_rn, so no FMA contraction), softmax reorders its sums, sgemm
# sums 4096 products in another order than cuBLAS (the task's tolerance, 1e-4).
TOLERANCE = {"affine": (0.0, 0.0), "relu": (0.0, 0.0), "softmax": (1e-9, 1e-5),
             "sgemm": (1e-4, 1e-4)}
SEEDS = range(5)


def unit_test_binary():
    """The built unit test: under $OPFORGE_BUILD_ROOT, else a build folder of the repo."""
    roots = [Path(os.environ["OPFORGE_BUILD_ROOT"])] if os.environ.get("OPFORGE_BUILD_ROOT") else []
    roots += [REPO / d for d in ("build-test-normal", "build", "build-gpu")]
    for root in roots:
        exe = root / "tests" / "unit" / "test_export_kernelbench"
        if exe.is_file() and os.access(exe, os.X_OK):
            return exe
    return None


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """{fixture name: path of its generated file}."""
    exe = unit_test_binary()
    if exe is None:
        pytest.skip("tests/unit/test_export_kernelbench is not built (set OPFORGE_BUILD_ROOT "
                    "or build build-test-normal first)")
    out = tmp_path_factory.mktemp("exports")
    env = dict(os.environ, OPFORGE_EXPORT_EMIT_DIR=str(out), OPFORGE_SOURCE_ROOT=str(REPO))
    run = subprocess.run([str(exe)], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    files = {n: out / (n + ".py") for n in FIXTURES if (out / (n + ".py")).is_file()}
    assert "affine" in files, run.stdout + run.stderr
    return files


def load(path):
    """The generated file executed as a module of its own."""
    mod = types.ModuleType("opforge_export_" + path.stem)
    mod.__file__ = str(path)
    exec(compile(path.read_text(), str(path), "exec"), mod.__dict__)
    return mod


def export_of(exports, name):
    if name not in exports:
        pytest.skip("%s was not exported: its KernelBench task was not found (the unit test "
                    "skipped it)" % name)
    return exports[name]


@pytest.mark.parametrize("name", FIXTURES)
def test_generated_file_is_python(exports, name):
    text = export_of(exports, name).read_text()
    code = compile(text, name + ".py", "exec")
    assert "ModelNew" in code.co_names
    assert "Model" in code.co_names
    if name != "affine":
        reference = next((REPO.parent / "shared" / "kernelbench" / "level1").glob(
            {"relu": "19_*", "softmax": "23_*", "sgemm": "1_*"}[name]))
        assert text.startswith(reference.read_text())


def test_strings_read_back_exactly(exports):
    """The unit test's layout export: a source with triple quotes, a backslash and a final
    quote comes back from the Python string unchanged, between the knob macros."""
    mod = load(exports["affine"].with_name("layout.py"))
    source = '// """ and \\n stay text\nextern "C" __global__ void k_main() {}\n"'
    assert mod._OFG_CUDA_SOURCE == ("// The candidate's -D options.\n#define BLOCK 256\n"
                                    "#define FAST 1\n" + source + "\n#undef BLOCK\n#undef FAST\n")
    assert mod._OFG_LAUNCHER.startswith("// opforge launcher")
    assert mod._OFG_FLAGS[-2:] == ["-maxrregcount=64", "--use_fast_math"]
    assert mod._OFG_PARAMS == [("weight", torch.float32, (32,)),
                               ("norm.running_mean", torch.float16, (32,))]
    assert mod._OFG_SCALARS == [(1, 0.5)] and mod._OFG_NARGS == 3


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


def test_load_inline_builds_the_extension(exports, tmp_path, monkeypatch):
    """ModelNew's own build path (_ofg_module), up to the launch: load_inline compiles and
    links the kernels and the launcher for sm_90a, the module imports, and the launcher
    checks its arguments. Without a GPU the first launch fails, and must say which."""
    from torch.utils import cpp_extension
    if torch.version.cuda is None:
        pytest.skip("torch %s is a CPU-only build: load_inline cannot build CUDA code"
                    % torch.__version__)
    home = cpp_extension.CUDA_HOME
    if not home or not (Path(home) / "bin" / "nvcc").is_file():
        pytest.skip("nvcc not found (CUDA_HOME is %s)" % home)
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
