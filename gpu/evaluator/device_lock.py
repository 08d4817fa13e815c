# Evaluator device lock: one flock per physical GPU, held by every stretch of work that runs kernels, so that evaluator slots sharing a GPU never time over each other.
import fcntl
import os
import tempfile
import time


class DeviceLock:
    """Exclusive use of one GPU among the evaluator processes of a host (the worker slots
    of `--workers-per-gpu`, or several servers): every stretch that runs kernels, and
    above all every timing, holds it, so that timings never overlap other work on the
    device, while compiles (NVRTC, torch.compile) and task loading run concurrently.
    An flock on a file named after the device's UUID; re-entrant within the process.
    path None makes it a no-op (CPU and meta evaluators)."""

    def __init__(self, path):
        self.path = path
        self.fd = None
        self.depth = 0
        self.waited_s = 0.0

    @staticmethod
    def path_for(props, index):
        """The lock file of a device: one per physical GPU, whatever the index order."""
        uuid = str(getattr(props, "uuid", "") or "index-%d" % index)
        safe = "".join(c for c in uuid if c.isalnum() or c == "-")
        return os.path.join(tempfile.gettempdir(), "opforge-gpu-%s.lock" % safe)

    def __enter__(self):
        if self.path is None:
            return self
        if self.depth == 0:
            if self.fd is None:
                self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            started = time.monotonic()
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            self.waited_s += time.monotonic() - started
        self.depth += 1
        return self

    def __exit__(self, *exc):
        if self.path is None:
            return False
        self.depth -= 1
        if self.depth == 0:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        return False
