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
    An flock on a file named after the device's UUID, in one folder shared by every
    evaluator of the host (sandboxed ones get theirs bound read-only and flock it through
    a read-only descriptor); re-entrant within the process. path None makes it a no-op
    (CPU and meta evaluators)."""

    def __init__(self, path):
        self.path = path
        self.fd = None
        self.depth = 0
        self.waited_s = 0.0

    @staticmethod
    def path_for(props, index):
        """The lock file of a device: one per physical GPU, whatever the index order,
        named as the supervisor names it for a sandboxed evaluator (gpu/sandbox/command.c,
        make_lock_file: "GPU-" and the UUID)."""
        uuid = str(getattr(props, "uuid", "") or "")
        if uuid and not uuid.startswith("GPU-"):
            uuid = "GPU-" + uuid
        safe = "".join(c for c in (uuid or "index-%d" % index) if c.isalnum() or c == "-")
        return os.path.join(DeviceLock.folder(), "opforge-gpu-%s.lock" % safe)

    @staticmethod
    def folder():
        """The host's folder of GPU lock files (the supervisor's sandbox_lock_dir)."""
        return os.path.join(tempfile.gettempdir(), "opforge-gpu-locks")

    def _open(self):
        """Opens the lock file: read-write, created (with its folder) where this process
        may, else read-only (a sandbox sees an existing file on a read-only bind)."""
        folder = os.path.dirname(self.path)
        try:
            os.makedirs(folder, exist_ok=True)
            os.chmod(folder, 0o1777)
        except OSError:
            pass  # another user's folder, or a read-only view of it
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError:
            return os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)

    def __enter__(self):
        if self.path is None:
            return self
        if self.depth == 0:
            if self.fd is None:
                self.fd = self._open()
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
