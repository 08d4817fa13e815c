# Evaluator RNG state: snapshots of the CPU and CUDA generators taken after a trial's inputs are made, restored before the reference and before the candidate, so random library ops (dropout in training mode, ...) draw the same numbers in both.
import torch


def rng_snapshot(cuda):
    """The CPU generator's state and, when cuda, every CUDA generator's (new tensors the
    caller owns)."""
    return (torch.get_rng_state(), torch.cuda.get_rng_state_all() if cuda else None)


def rng_restore(snapshot):
    """Puts the generators back to snapshot (from rng_snapshot); None is a no-op."""
    if snapshot is None:
        return
    cpu, cuda = snapshot
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)
