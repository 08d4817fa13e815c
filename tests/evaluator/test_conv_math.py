# Evaluator convolution arithmetic probe (gpu/evaluator/conv_math.py): which nodes count as convolutions, the comparison with cuDNN's TF32 off, and the profile's "conv_math" (none on the CPU; "tf32" for a large dense convolution on a CUDA device, skipped with the reason elsewhere).
import pytest
import torch

from test_programs import make_ev  # noqa: F401  (fixture)

CONV_TASK = """
import torch
import torch.nn as nn
import torch.nn.functional as F
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(64, 128, 3, padding=1)
        self.w = nn.Parameter(torch.randn(128, 32, 3))
    def forward(self, x):
        y = torch.relu(self.c(x))
        return F.conv_transpose1d(y.flatten(2), self.w)
def get_inputs():
    return [torch.randn(2, 64, 16, 16)]
def get_init_inputs():
    return []
"""


def test_compare_turns_tf32_off_for_the_rerun_and_restores_it(ev_module):
    cm = ev_module.conv_math
    seen = []
    value = torch.tensor([1.0, 2.0])

    def rerun(result):
        seen.append(torch.backends.cudnn.allow_tf32)
        return result

    saved = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = True
    try:
        assert cm.compare(value, lambda: rerun(value.clone())) == "fp32"
        # One ulp of 2.0 apart: any difference means TF32.
        other = torch.tensor([1.0, float(torch.nextafter(torch.tensor(2.0), torch.tensor(3.0)))])
        assert cm.compare(value, lambda: rerun(other)) == "tf32"
        assert seen == [False, False]
        assert torch.backends.cudnn.allow_tf32 is True

        def fails():
            raise RuntimeError("cuDNN failed")
        with pytest.raises(RuntimeError, match="cuDNN failed"):
            cm.compare(value, fails)
        assert torch.backends.cudnn.allow_tf32 is True
    finally:
        torch.backends.cudnn.allow_tf32 = saved


def test_classify_says_nothing_of_cpu_or_non_float32_values(ev_module):
    cm = ev_module.conv_math
    never = lambda: pytest.fail("no rerun for a CPU value")  # noqa: E731
    assert cm.classify(torch.ones(2), never) is None
    assert cm.classify(torch.ones(2, dtype=torch.float64), never) is None
    assert cm.classify((torch.ones(2),), never) is None


def test_convolution_nodes_are_modules_and_functions(ev_module, make_ev):  # noqa: F811
    ev, _ = make_ev(CONV_TASK)
    traced = ev.task.traced
    cm = ev_module.conv_math
    convs = [name for name in traced.call_nodes()
             if cm.is_convolution(traced.nodes[name], traced.submodules)]
    assert convs == ["c", "conv_transpose1d"]
    # A CPU profile has no conv_math on any node.
    assert not any("conv_math" in n for n in ev.task.profile["graph"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this host")
def test_cuda_profile_records_tf32_convolutions(ev_module, fake_lib):
    from test_programs import KERNELS
    ev = ev_module.Evaluator("cuda:0", lib=fake_lib(KERNELS))
    ev.init_cuda(None)
    ev.load_task({"source": CONV_TASK, "name": "t"})
    ev.profile({})
    maths = {n["name"]: n.get("conv_math") for n in ev.task.profile["graph"]}
    # 64 input channels and a 3x3 window: cuDNN's TF32 tensor-core kernels on sm_80+.
    assert maths["c"] == "tf32"
    assert maths["conv_transpose1d"] in ("tf32", "fp32")
    assert maths["relu"] is None
    assert torch.backends.cudnn.allow_tf32 is True
