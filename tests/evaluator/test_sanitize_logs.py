# Unit tests of tests/gpu/sanitize.py's log reading: what counts as a finished clean run that --resume may reuse, and whose errors are whose.
import types

import pytest

from conftest import gpu_script


@pytest.fixture(scope="module")
def sanitize():
    return gpu_script("sanitize")


OUT_TWO = ('### begin a\n{"label": "a", "outcome": "correct", "seconds": 1.0}\n### end a\n'
           '### begin b\n{"label": "b", "outcome": "correct", "seconds": 2.0}\n### end b\n')
RACE_CLEAN = ("========= COMPUTE-SANITIZER\n"
              "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n")
MEM_CLEAN = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"
MEM_OURS = ("========= COMPUTE-SANITIZER\n"
            "========= Invalid __global__ read of size 4 bytes\n"
            "=========     at ofg_softmax_row+0x80\n"
            "=========     by thread (0,0,0) in block (0,0,0)\n"
            "========= Invalid __global__ read of size 4 bytes\n"
            "=========     at at::native::vectorized_elementwise_kernel+0x10\n"
            "========= ERROR SUMMARY: 2 errors\n")


def write_pair(tmp_path, task, tool, log, out):
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    (logs / ("%s.%s.log" % (task, tool))).write_text(log)
    (logs / ("%s.%s.out" % (task, tool))).write_text(out)
    return types.SimpleNamespace(dir=str(tmp_path), resume=True)


def test_racecheck_summary_counts_as_finished(sanitize, tmp_path):
    args = write_pair(tmp_path, "softmax", "racecheck", RACE_CLEAN, OUT_TWO)
    got = sanitize.finished_run(args, "racecheck", "softmax", ["ofg_softmax_row"], 2)
    assert got == (0, 0, [], {"a": "correct", "b": "correct"})


def test_memcheck_summary_counts_as_finished(sanitize, tmp_path):
    args = write_pair(tmp_path, "softmax", "memcheck", MEM_CLEAN, OUT_TWO)
    assert sanitize.finished_run(args, "memcheck", "softmax", ["ofg_softmax_row"], 2)[:2] == (0, 0)


def test_run_cut_off_before_its_summary_runs_again(sanitize, tmp_path):
    args = write_pair(tmp_path, "softmax", "memcheck", "========= COMPUTE-SANITIZER\n", OUT_TWO)
    assert sanitize.finished_run(args, "memcheck", "softmax", ["ofg_softmax_row"], 2) is None


def test_run_missing_a_candidate_outcome_runs_again(sanitize, tmp_path):
    out_one = '{"label": "a", "outcome": "correct", "seconds": 1.0}\n'
    args = write_pair(tmp_path, "softmax", "memcheck", MEM_CLEAN, out_one)
    assert sanitize.finished_run(args, "memcheck", "softmax", ["ofg_softmax_row"], 2) is None


def test_run_with_errors_of_ours_runs_again_for_attribution(sanitize, tmp_path):
    args = write_pair(tmp_path, "softmax", "memcheck", MEM_OURS, OUT_TWO)
    assert sanitize.finished_run(args, "memcheck", "softmax", ["ofg_softmax_row"], 2) is None


def test_parse_log_splits_ours_from_library(sanitize, tmp_path):
    log = tmp_path / "x.log"
    log.write_text(MEM_OURS)
    ours, other, summary, samples = sanitize.parse_log(str(log), ["ofg_softmax_row"])
    assert (ours, other, summary) == (1, 1, 2)
    assert samples[0].startswith("========= Invalid __global__ read of size 4 bytes")
    assert "ofg_softmax_row+0x80" in samples[0]


def test_no_logs_runs(sanitize, tmp_path):
    args = types.SimpleNamespace(dir=str(tmp_path), resume=True)
    assert sanitize.finished_run(args, "memcheck", "softmax", ["k"], 1) is None


@pytest.mark.parametrize("task", ["conv2d", "conv_transpose3d", "gemm_row_tail", "pooling"])
def test_sanitize_programs_run_on_cpu(sanitize, task):
    """A sanitizer program is a KernelBench program that PyTorch runs: built and run on
    the CPU, its output has the shape worked out by hand (a bad stride or
    output_padding would raise here, not minutes into a GPU run)."""
    import torch
    family, body = sanitize.TASKS[task]
    ns = {}
    exec(sanitize.HEADER + body, ns)
    torch.manual_seed(0)
    out = ns["Model"](*ns["get_init_inputs"]())(*ns["get_inputs"]())
    want = {
        # (13 + 2 - 3) // 2 + 1 = 7 rows, (11 + 2 - 3) // 2 + 1 = 6 columns
        "conv2d": (2, 7, 7, 6),
        # (in - 1) * stride - 2 * padding + kernel + output_padding per axis:
        # (5-1)*2-2+3+1 = 10, (7-1)*1-0+2+0 = 8, (6-1)*2-2+3+0 = 11
        "conv_transpose3d": (2, 4, 10, 8, 11),
        "gemm_row_tail": (37, 1),
    }
    if task in want:
        assert family == "gemm"
        assert tuple(out.shape) == want[task]
    else:
        assert family == task and out.numel() > 0
