# Evaluator CUDA graphs of programs: the whole program (library steps and region launches) captured once with torch.cuda.CUDAGraph over static inputs, then replayed after fresh inputs are copied in.
"""A ProgramGraph owns its CUDAGraph, its static inputs, the workspace its regions write
and the static outputs the capture left (tensors of the graph's memory pool). Dropping
it releases them."""

import torch

# Runs on a side stream before the capture, as torch.cuda.graphs requires (lazy
# initialisation in cuBLAS/cuDNN, the caching allocator's first blocks, module loads).
CAPTURE_WARMUP = 3


class ProgramGraph:
    """One capture of runner's program. seed_inputs (the argument list of forward) fill
    the static inputs for the warm-up and the capture; every later replay first copies
    the caller's inputs into them (load)."""

    def __init__(self, runner, seed_inputs):
        self.static_inputs = [t.detach().clone() if isinstance(t, torch.Tensor) else t
                              for t in seed_inputs]
        self.ws = runner.new_workspace()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(CAPTURE_WARMUP):
                runner.run(self.static_inputs, self.ws, checked=False)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        # Inside the context the capturing stream is torch.cuda.current_stream(), which
        # is the stream the runner hands to ofg_candidate_enqueue.
        with torch.cuda.graph(self.graph):
            self.outputs = runner.run(self.static_inputs, self.ws, checked=False)
        torch.cuda.synchronize()

    def load(self, inputs):
        """Enqueues the copy of inputs' tensors into the static inputs."""
        for static, t in zip(self.static_inputs, inputs):
            if isinstance(static, torch.Tensor):
                static.copy_(t)

    def replay(self, inputs):
        """load(inputs), then the graph: one run of the program on inputs, leaving its
        results in self.outputs (and the regions' writes in self.ws)."""
        self.load(inputs)
        self.graph.replay()

    def release(self):
        """Drops the graph and its tensors."""
        self.graph = None
        self.outputs = None
        self.ws = None
        self.static_inputs = None
