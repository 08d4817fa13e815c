# Row softmax of attention scores: 32 heads x 1024 queries over 4096 keys.
# KernelBench format: Model, get_inputs, get_init_inputs.
import torch
import torch.nn as nn

ROWS, COLS = 32 * 1024, 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
