# Evaluator convolution arithmetic probe: whether eager ran a profiled convolution in TF32 or in strict fp32 on this device.
"""The evaluator's reference runs PyTorch's defaults: cuDNN may run an fp32 convolution in
TF32 (torch.backends.cudnn.allow_tf32 is on), and does so when the algorithm its
heuristics pick for the shape uses tensor cores; otherwise (few input channels, a
depthwise kernel of PyTorch's own) the result is strict fp32. Only a run shows which, so
the profile records it per convolution node ("conv_math": "tf32" or "fp32"), and the
convolution family rounds its operands as the reference does (docs/architecture.md,
"Convolutions"). Nothing here keeps a tensor past a call."""

import torch

CONV_MODULES = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.ConvTranspose1d,
                torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d)
CONV_FUNCTIONS = {torch.nn.functional.conv1d, torch.nn.functional.conv2d,
                  torch.nn.functional.conv3d, torch.nn.functional.conv_transpose1d,
                  torch.nn.functional.conv_transpose2d, torch.nn.functional.conv_transpose3d,
                  torch.conv1d, torch.conv2d, torch.conv3d, torch.conv_transpose1d,
                  torch.conv_transpose2d, torch.conv_transpose3d,
                  torch.ops.aten.convolution.default, torch.ops.aten.conv1d.default,
                  torch.ops.aten.conv2d.default, torch.ops.aten.conv3d.default}


def is_convolution(node, submodules):
    """True when FX node (a call node) is a dense, grouped or transposed convolution:
    a Conv/ConvTranspose module or one of the functions above. submodules is the traced
    module's {name: module}."""
    if node.op == "call_module":
        return isinstance(submodules.get(str(node.target)), CONV_MODULES)
    return node.op == "call_function" and node.target in CONV_FUNCTIONS


def classify(value, rerun):
    """"tf32" or "fp32" for value, eager's output of a convolution, when it is a float32
    CUDA tensor (compare); None otherwise, since a CPU profile has nothing to tell."""
    if not (isinstance(value, torch.Tensor) and value.is_cuda and value.dtype == torch.float32):
        return None
    return compare(value, rerun)


def compare(value, rerun):
    """"fp32" when rerun(), made with cuDNN's TF32 off, equals value bit for bit, else
    "tf32". rerun is the caller's; cuDNN's setting is restored whatever happens."""
    saved = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        strict = rerun()
    finally:
        torch.backends.cudnn.allow_tf32 = saved
    return "fp32" if torch.equal(strict, value) else "tf32"
