# Unit tests of tests/gpu/tf32_rounding_probe.py's TF32 roundings (CPU), against bit
# patterns worked out by hand.
import copy

import pytest
import torch

from conftest import gpu_script


@pytest.fixture(scope="module")
def probe():
    return gpu_script("tf32_rounding_probe")


def f32(bits):
    return torch.tensor([bits], dtype=torch.int32).view(torch.float32)


def bits_of(x):
    return x.view(torch.int32).item()


# 1 + 2^-11 is 0x3F801000: exactly half of TF32's last place (2^-10, bit 13) above 1.
HALF_ABOVE_ONE = 0x3F801000
# 1 + 2^-12 is 0x3F800800: a quarter of a place above 1.
QUARTER_ABOVE_ONE = 0x3F800800
SIGN = -0x80000000


def test_rna_rounds_ties_away_from_zero(probe):
    assert bits_of(probe.round_rna(f32(HALF_ABOVE_ONE))) == 0x3F802000    # 1 + 2^-10
    assert bits_of(probe.round_rna(f32(SIGN | HALF_ABOVE_ONE))) == SIGN | 0x3F802000
    assert bits_of(probe.round_rna(f32(QUARTER_ABOVE_ONE))) == 0x3F800000  # 1.0
    # 1 + 3 * 2^-12 (0x3F801800) is three quarters of a place up: rounds up
    assert bits_of(probe.round_rna(f32(0x3F801800))) == 0x3F802000


def test_trunc_drops_the_low_bits(probe):
    assert bits_of(probe.round_trunc(f32(HALF_ABOVE_ONE))) == 0x3F800000
    assert bits_of(probe.round_trunc(f32(0x3F801800))) == 0x3F800000
    assert bits_of(probe.round_trunc(f32(SIGN | 0x3F803FFF))) == SIGN | 0x3F802000


def test_tf32_values_are_unchanged(probe):
    x = torch.tensor([1.0, -2.5, 0.0, 1.0 + 2.0 ** -10, 3.0e-5])
    exact = probe.round_trunc(x)   # already TF32 after one truncation
    assert torch.equal(probe.round_rna(exact), exact)
    assert torch.equal(probe.round_trunc(exact), exact)


def test_compare_reports_relative_difference(probe):
    want = torch.tensor([2.0, -4.0])
    assert probe.compare(want, torch.tensor([2.0, -4.0])) == "0.00e+00/ok"
    # |diff| 0.01 over max |want| 4: 2.5e-3, beyond 1e-4 + 1e-4 * 4
    assert probe.compare(want, torch.tensor([2.0, -4.01])) == "2.50e-03/fail"


def test_float64_of_rounds_the_operands_not_the_bias(probe):
    conv = torch.nn.Conv2d(2, 3, 3, padding=1, bias=True)
    with torch.no_grad():
        conv.weight.copy_(torch.arange(54, dtype=torch.float32).reshape(3, 2, 3, 3) % 5 - 2)
        conv.bias.copy_(torch.tensor([0.5, 1.0 + 2.0 ** -12, -3.0]))
    x = (torch.arange(2 * 2 * 4 * 4, dtype=torch.float32).reshape(2, 2, 4, 4) % 7) - 3
    # small integers are TF32 values: the result is conv's, exactly, bias included
    got = probe.float64_of(conv, x, probe.round_rna)
    assert got.dtype == torch.float64
    assert torch.equal(got, copy.deepcopy(conv).double()(x.double()))
    # an operand between TF32 values is rounded: 1 + 2^-12 weights give 1.0 weights
    with torch.no_grad():
        conv.weight.fill_(1.0 + 2.0 ** -12)
    ones = probe.float64_of(conv, torch.ones(1, 2, 3, 3), probe.round_rna)
    # the centre output sums 2 channels * 9 taps of 1.0 * 1.0, plus bias 0.5
    assert ones[0, 0, 1, 1].item() == 18.5
