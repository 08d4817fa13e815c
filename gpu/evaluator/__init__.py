# The opforge evaluator package: loads a KernelBench task in PyTorch, profiles it, and verifies and times candidate kernels through libopforge_gpu (JSON lines on stdin/stdout).
"""One evaluator process serves one device; the supervisor in the server starts it as
`python3 .../evaluator/main.py --device ...` (main.py is the one entry script) and speaks
the protocol of protocol.py with it.

Modules, each one concept:
  errors       EvalError, the stage list, tracebacks, CUDA errors that poison a context
  tensors      tensor descriptions for the profile, JSON-safe values
  numerics     timing rule, peaks and floors, tolerances, comparisons, fingerprints
  gpulib       libopforge_gpu through ctypes
  task         load_task arguments and executing task source
  device_lock  the per-GPU lock of the evaluator slots sharing a GPU
  traced       TracedGraph: the traced module kept to run its nodes one by one
  graph        FX / torch.export graph of the task model (profile nodes, per-node FLOPs)
  mutation     which buffers the reference's own forward changes
  rng          RNG snapshots restored before the reference and the candidate
  candidate    CandidateRun: the checks of one evaluate request
  layout       channels-last plans: the channels_last list, memory formats, library convs
  program      programs (library steps and regions): parsing, validation, random ops
  program_exec ProgramRunner: a program's steps in stream order
  cudagraph    ProgramGraph: a program captured once and replayed
  program_timing  timing of programs, the per-step breakdown, the limits of slow ones
  program_run  ProgramRun: the checks of one evaluate request of a program
  evaluator    Evaluator: load_task, profile, evaluate
  protocol     the JSON-lines loop, stdio protection, command line, main

The names below are re-exported for in-process users (tests, tests/gpu/sweep.py).
Constants a test patches must be patched in the module that uses them (numerics,
protocol), not here.

Ownership convention: functions that take tensors never keep references to them past the
call unless they say so; dicts returned are new objects the caller owns."""

from .candidate import CandidateFailure, CandidateRun
from .device_lock import DeviceLock
from .errors import STAGES, EvalError, cap_traceback, exception_text, sticky_cuda_class
from .evaluator import Evaluator
from .gpulib import GpuLib
from .graph import encode_arg, extract_graph, module_attrs, target_name
from .program import Program, ProgramError, parse_program, random_nodes
from .program_exec import ProgramRunner
from .program_run import ProgramRun
from .traced import TracedGraph
from .numerics import (TIMING, InputGuard, accuracy_budget, classify_comparison,
                       compare_outputs, default_tolerance, fingerprint, floor_time_ms,
                       fp32_simt_peak, hbm_peak_from_props, max_abs_error, max_abs_finite,
                       poison_, relative_l2_ok, rse, tensor_core_peak, timing_should_stop)
from .protocol import ProtocolError, encode_line, handle_line, read_request
from .task import Task, parse_load_args
from .tensors import json_safe, named_inputs, named_state

__all__ = [
    "STAGES", "TIMING", "CandidateFailure", "CandidateRun", "DeviceLock", "EvalError",
    "Evaluator", "GpuLib", "InputGuard", "Program", "ProgramError", "ProgramRun",
    "ProgramRunner", "ProtocolError", "Task", "TracedGraph", "accuracy_budget",
    "cap_traceback", "classify_comparison", "compare_outputs", "default_tolerance",
    "encode_arg", "encode_line", "exception_text", "extract_graph", "fingerprint",
    "floor_time_ms", "fp32_simt_peak", "handle_line", "hbm_peak_from_props", "json_safe",
    "max_abs_error", "max_abs_finite", "module_attrs", "named_inputs",
    "named_state", "parse_load_args", "parse_program", "poison_", "random_nodes", "read_request", "relative_l2_ok", "rse",
    "sticky_cuda_class", "target_name", "tensor_core_peak", "timing_should_stop",
]
