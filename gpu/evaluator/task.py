# Evaluator task loading: load_task arguments, executing the task source in a fresh module, seeding, and moving inputs to the task device.
"""A Task owns its module, model and inputs; it is dropped when another task is
loaded."""

import linecache
import math
import random
import sys
import types

import torch

from .errors import EvalError
from .numerics import default_tolerance


DEFAULT_SEED = 42
DEFAULT_TRIALS = 5
MAX_TRIALS = 100
DEFAULT_ACCURACY_FACTOR = 8.0
PRECISIONS = ("fp32", "tf32", "bf16")


def seed_all(seed):
    """Seeds torch (every device), random and numpy when present."""
    torch.manual_seed(seed)
    random.seed(seed)
    try:
        import numpy
        numpy.random.seed(seed % (2 ** 32))
    except ImportError:
        pass


class Task:
    """A loaded task: its module, its model on the task device, and its settings."""

    def __init__(self, args):
        self.name = args["name"]
        self.source = args["source"]
        self.seed = args["seed"]
        self.precision = args["precision"]
        self.atol = args["tolerance"]["atol"]
        self.rtol = args["tolerance"]["rtol"]
        self.trials = args["trials"]
        self.accuracy_factor = args["accuracy_factor"]
        self.module = None
        self.model = None
        self.device = None
        self.meta_reason = None
        self.estimate = None
        self.init_inputs = None
        self.profile = None
        self.specs = None
        # The TracedGraph the profile's graph came from (None without a graph); built
        # with the profile, and so rebuilt the same way after an evaluator restart.
        self.traced = None


def _check_type(args, key, types_, default):
    """args[key] when it has one of types_ (bool never counts as a number), default
    when absent; raises a protocol error naming the field otherwise."""
    if key not in args:
        return default
    v = args[key]
    if isinstance(v, bool) and bool not in types_:
        raise EvalError("protocol", "protocol/bad_argument", "field %s has the wrong type" % key)
    if not isinstance(v, types_):
        raise EvalError("protocol", "protocol/bad_argument", "field %s has the wrong type" % key)
    return v


def parse_load_args(args):
    """Validates load_task arguments; returns a new dict with defaults filled in."""
    allowed = {"source", "seed", "precision", "tolerance", "trials", "name",
               "accuracy_factor"}
    for key in args:
        if key not in allowed:
            raise EvalError("protocol", "protocol/bad_argument", "unknown field %s" % key)
    if not isinstance(args.get("source"), str):
        raise EvalError("protocol", "protocol/bad_argument", "field source must be a string")
    out = {"source": args["source"]}
    out["seed"] = _check_type(args, "seed", (int,), DEFAULT_SEED)
    out["precision"] = _check_type(args, "precision", (str,), "fp32")
    if out["precision"] not in PRECISIONS:
        raise EvalError("protocol", "protocol/bad_argument",
                        "field precision must be one of fp32, tf32, bf16")
    tol = _check_type(args, "tolerance", (dict,), None)
    out["tolerance"] = default_tolerance(out["precision"])
    if tol is not None:
        for key in tol:
            if key not in ("atol", "rtol"):
                raise EvalError("protocol", "protocol/bad_argument",
                                "unknown field tolerance.%s" % key)
            v = _check_type(tol, key, (int, float), None)
            if not math.isfinite(v) or v < 0:
                raise EvalError("protocol", "protocol/bad_argument",
                                "field tolerance.%s must be finite and >= 0" % key)
            out["tolerance"][key] = float(v)
    out["trials"] = _check_type(args, "trials", (int,), DEFAULT_TRIALS)
    if not 1 <= out["trials"] <= MAX_TRIALS:
        raise EvalError("protocol", "protocol/bad_argument",
                        "field trials must be in 1..%d" % MAX_TRIALS)
    out["name"] = _check_type(args, "name", (str,), "task")
    out["accuracy_factor"] = float(_check_type(args, "accuracy_factor", (int, float),
                                               DEFAULT_ACCURACY_FACTOR))
    if not out["accuracy_factor"] > 0 or not math.isfinite(out["accuracy_factor"]):
        raise EvalError("protocol", "protocol/bad_argument",
                        "field accuracy_factor must be > 0")
    return out


_task_counter = [0]


def exec_task_source(source, name):
    """Executes task source in a fresh module (registered in sys.modules so that
    dataclasses and pickling inside it work, and in linecache so that tracebacks show
    its lines). Returns the module; task exceptions propagate."""
    _task_counter[0] += 1
    modname = "opforge_task_%d" % _task_counter[0]
    filename = "<task %s>" % name
    mod = types.ModuleType(modname)
    mod.__file__ = filename
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    sys.modules[modname] = mod
    code = compile(source, filename, "exec")
    exec(code, mod.__dict__)
    missing = [s for s in ("Model", "get_inputs", "get_init_inputs")
               if not callable(getattr(mod, s, None))]
    if missing:
        raise EvalError("load", "load/missing_symbol",
                        "task source does not define %s" % ", ".join(missing))
    return mod


def to_device(obj, dev):
    """obj with every tensor moved to dev (a no-op for tensors already there)."""
    if isinstance(obj, torch.Tensor):
        return obj if obj.device == torch.device(dev) else obj.to(dev)
    if isinstance(obj, list):
        return [to_device(v, dev) for v in obj]
    if isinstance(obj, tuple):
        return tuple(to_device(v, dev) for v in obj)
    return obj
