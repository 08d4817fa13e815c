# A minimal evaluator that does what the real one does with a task's source, import it, so that a hostile reference runs in the server's sandbox on a machine without a GPU.
"""Speaks the evaluator protocol (gpu/supervisor.h) just enough for the server: a ready
line for a CPU device, then, for load_task, the task's source is executed as a module
body (as gpu/evaluator imports it) and the load is answered as failed, naming that the
probe ran; shutdown is answered and ends the process; anything else gets a protocol
error. tests/sandbox/test_sandbox.py starts a server with it as --evaluator."""

import json
import os
import sys
import traceback
import types


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def load(source):
    """Runs source as the module body of a new module; returns the failure text or None."""
    module = types.ModuleType("hostile_reference")
    try:
        exec(compile(source, "<reference>", "exec"), module.__dict__)  # noqa: S102
    except BaseException:  # noqa: BLE001 - the task's own failure, reported
        return traceback.format_exc(limit=3)
    return None


def main():
    reply({"event": "ready", "pid": os.getpid(), "device": {"type": "cpu"}})
    for line in sys.stdin:
        req = json.loads(line)
        rid, op = req.get("id"), req.get("op")
        if op == "shutdown":
            reply({"id": rid, "ok": True, "result": {}})
            return 0
        if op == "load_task":
            failure = load(req.get("source", ""))
            reply({"id": rid, "ok": False, "fatal": False,
                   "error": {"stage": "load", "class": "load/probe_ran",
                             "message": "the hostile reference's probes ran"
                                        + (": " + failure if failure else "")}})
            continue
        reply({"id": rid, "ok": False, "fatal": False,
               "error": {"stage": "protocol", "class": "protocol/unsupported",
                         "message": "this evaluator only loads tasks"}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
