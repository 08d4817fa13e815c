# Evaluator protocol: the JSON-lines loop on stdin/stdout (the ready line, requests, replies), stdio protection, the command line and main.
"""The supervisor in the server speaks this protocol with the evaluator (see
docs/architecture.md, "Evaluator protocol", and gpu/supervisor.h): one JSON request per
stdin line, one JSON reply per stdout line. Task code runs in this process, so stdout is
moved to a private descriptor before any task code runs, and fd 1 points at stderr."""

import argparse
import json
import os
import sys

import torch

from .evaluator import Evaluator
from .gpulib import GpuLib
from .tensors import json_safe


MAX_LINE_BYTES = 64 << 20
PROTOCOL_FD_EXIT_FATAL = 3


def encode_line(obj):
    """Returns the reply obj as one UTF-8 JSON line (bytes, newline-terminated)."""
    return (json.dumps(json_safe(obj), allow_nan=False, separators=(",", ":"))
            + "\n").encode("utf-8")


def parse_request(line):
    """(id, op, args) from one request line (bytes). Raises ProtocolError, carrying the
    request's id when it could be read (None otherwise)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError(None, "protocol/bad_encoding", "request line is not UTF-8")
    try:
        req = json.loads(text)
    except ValueError as exc:
        raise ProtocolError(None, "protocol/bad_json", "request line is not JSON: %s" % exc)
    if not isinstance(req, dict):
        raise ProtocolError(None, "protocol/not_object", "request must be a JSON object")
    req_id = req.get("id")
    if not isinstance(req_id, int) or isinstance(req_id, bool):
        raise ProtocolError(None, "protocol/bad_id", "request id must be an integer")
    op = req.get("op")
    if not isinstance(op, str):
        raise ProtocolError(req_id, "protocol/bad_op", "request op must be a string")
    args = {k: v for k, v in req.items() if k not in ("id", "op")}
    return req_id, op, args


class ProtocolError(Exception):
    """A request line that could not be parsed; id is the request's id if known."""

    def __init__(self, req_id, cls, message):
        super().__init__(message)
        self.req_id = req_id
        self.cls = cls
        self.message = message

    def reply(self):
        """The ok:false reply of this error."""
        return {"id": self.req_id, "ok": False, "fatal": False,
                "error": {"stage": "protocol", "class": self.cls, "message": self.message}}


def handle_line(ev, line):
    """Reply and action for one raw request line."""
    try:
        req_id, op, args = parse_request(line)
    except ProtocolError as err:
        return err.reply(), None
    return ev.handle(req_id, op, args)


def write_all(fd, data):
    """Writes all of data to fd."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def read_request(infile):
    """The next request line (bytes, newline stripped), None at EOF, or a ProtocolError
    for a line over MAX_LINE_BYTES (the rest of which is discarded)."""
    line = infile.readline(MAX_LINE_BYTES + 1)
    if not line:
        return None
    if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
        while True:
            rest = infile.readline(1 << 20)
            if not rest or rest.endswith(b"\n"):
                break
        return ProtocolError(None, "protocol/line_too_long",
                             "request line over %d bytes" % MAX_LINE_BYTES)
    return line.rstrip(b"\r\n")


def serve(ev, infile, out_fd):
    """Answers requests until shutdown or EOF (returns 0); exits the process with
    status 3 right after the reply to a request that poisoned the CUDA context."""
    while True:
        line = read_request(infile)
        if line is None:
            return 0
        if isinstance(line, ProtocolError):
            reply, action = line.reply(), None
        elif not line.strip():
            continue
        else:
            reply, action = handle_line(ev, line)
        try:
            data = encode_line(reply)
        except (TypeError, ValueError) as exc:
            data = encode_line({"id": reply.get("id"), "ok": False, "fatal": False,
                                "error": {"stage": "protocol", "class": "protocol/encode",
                                          "message": "reply not encodable: %s" % exc}})
        write_all(out_fd, data)
        if action == "exit":
            return 0
        if action == "fatal":
            sys.stderr.flush()
            os._exit(PROTOCOL_FD_EXIT_FATAL)


def protect_stdio():
    """Moves the protocol's stdin and stdout to private descriptors (not inherited by
    children) and points fd 0 at /dev/null and fd 1 at stderr, so task code can neither
    read requests nor corrupt replies. Returns (request file, reply fd)."""
    sys.stdout.flush()
    out_fd = os.dup(1)
    in_fd = os.dup(0)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stdin = open(os.devnull, "r")
    return os.fdopen(in_fd, "rb", buffering=0), out_fd


def parse_args(argv):
    """The command line (what the supervisor passes, see gpu/supervisor.h) as an argparse
    namespace."""
    p = argparse.ArgumentParser(description="opforge evaluator (JSON lines on stdio)")
    p.add_argument("--device", required=True, help="CUDA device index, cpu or meta")
    p.add_argument("--lib", default=None, help="path of libopforge_gpu.so")
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--lock-file", default=None,
                   help="the GPU's lock file (the supervisor's, for a sandboxed evaluator)")
    p.add_argument("--mem-fraction", type=float, default=0.9)
    p.add_argument("--host-mem-bytes", type=int, default=None,
                   help="bytes a CPU task may use before it is profiled on meta "
                        "(default: 25%% of physical memory)")
    return p.parse_args(argv)


def usage_exit(message):
    """Exits with status 2 before the ready line, saying why on stderr."""
    sys.stderr.write("evaluator: %s\n" % message)
    sys.stderr.flush()
    raise SystemExit(2)


def make_evaluator(opts):
    """Builds the evaluator of the command line; raises SystemExit(2) with a message
    for a device that does not exist."""
    if opts.device in ("cpu", "meta"):
        return Evaluator(opts.device, host_mem_bytes=opts.host_mem_bytes)
    try:
        index = int(opts.device)
    except ValueError:
        usage_exit("--device must be an index, cpu or meta")
    if not torch.cuda.is_available() or index < 0 or index >= torch.cuda.device_count():
        usage_exit("CUDA device %d is not available" % index)
    lib, lib_error = None, None
    if opts.lib:
        try:
            lib = GpuLib(opts.lib)
        except OSError as exc:
            lib_error = "cannot load %s: %s" % (opts.lib, exc)
    else:
        lib_error = "no --lib given"
    ev = Evaluator("cuda:%d" % index, lib=lib, lib_error=lib_error,
                   mem_fraction=opts.mem_fraction, host_mem_bytes=opts.host_mem_bytes)
    ev.init_cuda(opts.cache_dir, opts.lock_file)
    return ev


def main(argv=None):
    """Protects stdio, writes the ready line and serves; returns the exit status."""
    opts = parse_args(argv if argv is not None else sys.argv[1:])
    infile, out_fd = protect_stdio()
    ev = make_evaluator(opts)
    ready = {"event": "ready", "pid": os.getpid(), "device": ev.device_info}
    if ev.lib_error and ev.is_cuda:
        ready["gpu_library_error"] = ev.lib_error
    write_all(out_fd, encode_line(ready))
    return serve(ev, infile, out_fd)
