# Evaluator failures: EvalError (an ok:false reply), the stage list, capped tracebacks, and the CUDA errors that poison a context.
"""Every failure the evaluator reports has a stage (where it stopped, one of STAGES) and a
class ("<area>/<detail>"). Ownership: nothing here keeps references to what it is
given."""

import traceback

# The failure stages the evaluator can report ("error" of a reply, "failure" of an
# evaluation): libopforge_gpu's compile, load, launch and protocol pass through it; the
# candidate checks add correctness and check; profile is a failed profile request. The
# supervisor's own replies add timeout and crash, and the proposer side parse.
STAGES = ("compile", "load", "launch", "correctness", "check", "protocol", "profile")

TRACEBACK_CAP = 8192

# Messages of the CUDA errors after which the context is unusable, and their names.
STICKY_CUDA_MESSAGES = (
    ("illegal memory access", "CUDA_ERROR_ILLEGAL_ADDRESS"),
    ("misaligned address", "CUDA_ERROR_MISALIGNED_ADDRESS"),
    ("unspecified launch failure", "CUDA_ERROR_LAUNCH_FAILED"),
    ("illegal instruction", "CUDA_ERROR_ILLEGAL_INSTRUCTION"),
    ("hardware stack error", "CUDA_ERROR_HARDWARE_STACK_ERROR"),
    ("device-side assert", "CUDA_ERROR_ASSERT"),
    ("invalid program counter", "CUDA_ERROR_INVALID_PC"),
    ("an illegal instruction", "CUDA_ERROR_ILLEGAL_INSTRUCTION"),
)


class EvalError(Exception):
    """A failure that becomes an ok:false reply; fatal means the CUDA context is gone."""

    def __init__(self, stage, cls, message, tb=None, fatal=False, result=None):
        super().__init__(message)
        self.stage = stage
        self.cls = cls
        self.message = message
        self.tb = tb
        self.fatal = fatal
        self.result = result

    def to_error(self):
        """Returns a new error object of the protocol's reply shape."""
        err = {"stage": self.stage, "class": self.cls, "message": self.message[:4096]}
        if self.tb:
            err["traceback"] = cap_traceback(self.tb)
        return err


def cap_traceback(text, cap=TRACEBACK_CAP):
    """Returns text cut to at most cap bytes of UTF-8, keeping the tail where the
    exception line is."""
    raw = text.encode("utf-8", "replace")
    if len(raw) <= cap:
        return text
    marker = b"...(traceback truncated)...\n"
    tail = raw[len(raw) - (cap - len(marker)):]
    return (marker + tail).decode("utf-8", "ignore")


def exception_text(exc):
    """Returns the formatted traceback of exc, capped."""
    return cap_traceback("".join(traceback.format_exception(type(exc), exc,
                                                            exc.__traceback__)))


def sticky_cuda_class(exc):
    """'cuda/CUDA_ERROR_...' when exc reports an error that poisons the CUDA context."""
    text = str(exc).lower()
    for needle, name in STICKY_CUDA_MESSAGES:
        if needle in text:
            return "cuda/" + name
    return None
