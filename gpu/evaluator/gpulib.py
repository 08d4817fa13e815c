# libopforge_gpu through ctypes: the C library (gpu/opforge_gpu.h) and one session on one device.
"""Every JSON string the library returns is copied and freed here with ofg_string_free;
the dicts returned are the caller's."""

import ctypes
import json

from .errors import EvalError


class GpuLib:
    """The C library and one session on one device. Every JSON string it returns is
    copied and freed here with ofg_string_free."""

    def __init__(self, path):
        self.dll = ctypes.CDLL(path)
        d = self.dll
        c = ctypes
        d.ofg_session_open.argtypes = [c.c_int, c.c_char_p, c.POINTER(c.c_void_p),
                                       c.c_char_p, c.c_size_t]
        d.ofg_session_open.restype = c.c_int
        d.ofg_session_free.argtypes = [c.c_void_p]
        d.ofg_session_free.restype = None
        d.ofg_device_info.argtypes = [c.c_void_p]
        d.ofg_device_info.restype = c.c_void_p
        d.ofg_candidate_prepare.argtypes = [c.c_void_p, c.c_char_p, c.c_char_p]
        d.ofg_candidate_prepare.restype = c.c_void_p
        d.ofg_candidate_run.argtypes = [c.c_void_p, c.c_int, c.c_char_p, c.c_ulonglong]
        d.ofg_candidate_run.restype = c.c_void_p
        d.ofg_candidate_time.argtypes = [c.c_void_p, c.c_int, c.c_char_p, c.c_ulonglong,
                                         c.c_char_p]
        d.ofg_candidate_time.restype = c.c_void_p
        d.ofg_candidate_free.argtypes = [c.c_void_p, c.c_int]
        d.ofg_candidate_free.restype = None
        d.ofg_string_free.argtypes = [c.c_void_p]
        d.ofg_string_free.restype = None
        # Programs' region launches; absent from a library built before them, which then
        # runs single-kernel candidates only.
        self.has_enqueue = hasattr(d, "ofg_candidate_bind") and hasattr(d, "ofg_candidate_enqueue")
        if self.has_enqueue:
            d.ofg_candidate_bind.argtypes = [c.c_void_p, c.c_int, c.c_char_p]
            d.ofg_candidate_bind.restype = c.c_void_p
            d.ofg_candidate_enqueue.argtypes = [c.c_void_p, c.c_int, c.c_ulonglong]
            d.ofg_candidate_enqueue.restype = c.c_void_p
        self.session = None

    def open(self, device, cache_dir):
        """Opens the session on device (raises RuntimeError with the library's
        message)."""
        sess = ctypes.c_void_p()
        err = ctypes.create_string_buffer(1024)
        cdir = cache_dir.encode() if cache_dir else None
        if self.dll.ofg_session_open(device, cdir, ctypes.byref(sess), err, len(err)) != 0:
            raise RuntimeError(err.value.decode("utf-8", "replace") or "ofg_session_open")
        self.session = sess

    def _take(self, ptr, what):
        """Parses and frees a JSON string returned by the library."""
        if not ptr:
            raise EvalError("launch", "gpu_library/null_reply", what + " returned NULL")
        try:
            text = ctypes.string_at(ptr).decode("utf-8", "replace")
        finally:
            self.dll.ofg_string_free(ptr)
        try:
            return json.loads(text)
        except ValueError:
            raise EvalError("launch", "gpu_library/bad_reply",
                            "%s returned unparsable JSON: %s" % (what, text[:300]))

    def device_info(self):
        """The device description of the session as a dict."""
        return self._take(self.dll.ofg_device_info(self.session), "ofg_device_info")

    def prepare(self, candidate, tensors):
        """Compiles and validates candidate against the tensor specs."""
        ptr = self.dll.ofg_candidate_prepare(self.session, json.dumps(candidate).encode(),
                                             json.dumps(tensors).encode())
        return self._take(ptr, "ofg_candidate_prepare")

    @staticmethod
    def _pointers(named, reset_state=True):
        """The pointers JSON of [(name, tensor)] (data_ptr of each)."""
        doc = {"tensors": [{"name": n, "ptr": t.data_ptr()} for n, t in named]}
        if not reset_state:
            doc["reset_state"] = False
        return json.dumps(doc).encode()

    def run(self, handle, named, stream, reset_state=True):
        """Runs the plan once on stream over the [(name, tensor)] given; with
        reset_state False, scratch buffers and module globals keep what the last run
        left in them."""
        ptr = self.dll.ofg_candidate_run(self.session, handle,
                                         self._pointers(named, reset_state), stream)
        return self._take(ptr, "ofg_candidate_run")

    def time(self, handle, named, stream, timing):
        """Times the plan with the timing parameters given."""
        ptr = self.dll.ofg_candidate_time(self.session, handle, self._pointers(named),
                                          stream, json.dumps(timing).encode())
        return self._take(ptr, "ofg_candidate_time")

    def _take_failure(self, ptr, what):
        """None for a NULL reply (success), else the parsed failure JSON."""
        return None if not ptr else self._take(ptr, what)

    def _need_enqueue(self):
        if not self.has_enqueue:
            raise EvalError("load", "load/gpu_library",
                            "this libopforge_gpu has no ofg_candidate_bind/enqueue: rebuild it "
                            "to run programs with regions")

    def bind(self, handle, named):
        """Keeps the [(name, tensor)] pointers in the prepared candidate for enqueue.
        Returns None, or the library's failure dict."""
        self._need_enqueue()
        return self._take_failure(self.dll.ofg_candidate_bind(self.session, handle,
                                                              self._pointers(named)),
                                  "ofg_candidate_bind")

    def enqueue(self, handle, stream):
        """Enqueues the candidate's reset and launches on stream with the bound
        pointers, without synchronizing (usable under CUDA graph capture). Returns None,
        or the library's failure dict."""
        self._need_enqueue()
        return self._take_failure(self.dll.ofg_candidate_enqueue(self.session, handle, stream),
                                  "ofg_candidate_enqueue")

    def free(self, handle):
        """Releases a prepared candidate."""
        self.dll.ofg_candidate_free(self.session, handle)
