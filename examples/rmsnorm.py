# RMSNorm over the hidden dimension of a transformer activation, as in Llama-style models.
# KernelBench format: Model, get_inputs, get_init_inputs. Submit with `opforge submit`.
import torch
import torch.nn as nn

BATCH, SEQ, HIDDEN = 4, 2048, 4096
EPS = 1e-6


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden) + 0.1 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps)
        return x / rms * self.weight


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN)]


def get_init_inputs():
    return [HIDDEN, EPS]
