"""A headless Chromium driven over the DevTools protocol through a pipe
(--remote-debugging-pipe: JSON messages ended by a NUL byte on file descriptors 3 and
4), so the browser tests need nothing beyond Debian's chromium and the standard library.
"""
import base64
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time

from opforge_server import die_with_parent


def find_chromium():
    """The path of a Chromium binary ($OPFORGE_CHROMIUM when set), or None."""
    if "OPFORGE_CHROMIUM" in os.environ:
        path = os.environ["OPFORGE_CHROMIUM"]
        return path if os.access(path, os.X_OK) else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


class CdpError(Exception):
    pass


class Browser:
    """One headless Chromium process and one page (a target attached in flat mode).
    close() ends the process and removes its profile; it is safe to call twice."""

    def __init__(self, binary, width=1280, height=800):
        self.profile = tempfile.mkdtemp(prefix="opforge-ui-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        args = [binary, "--headless=new", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", "--remote-debugging-pipe", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--metrics-recording-only", "--mute-audio",
                "--hide-scrollbars", "--user-data-dir=" + self.profile,
                "--window-size=%d,%d" % (width, height), "about:blank"]

        def child_fds():  # the pipe ends become fds 3 (commands in) and 4 (replies out)
            die_with_parent()
            r, w = os.dup(to_chrome_r), os.dup(from_chrome_w)
            r2, w2 = os.dup2(r, 100), os.dup2(w, 101)
            os.dup2(r2, 3)
            os.dup2(w2, 4)

        self.log = open(os.path.join(self.profile, "chromium.log"), "wb")
        # close_fds would run after child_fds and close 3 and 4 again; the other pipe
        # ends are close-on-exec.
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=self.log, preexec_fn=child_fds, close_fds=False)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next_id = 0
        self._wlock = threading.Lock()
        self._replies = {}
        self._cond = threading.Condition()
        self.events = queue.Queue()
        self.dialogs = []  # the messages of alert/confirm dialogs, each accepted
        self.console = []  # (level, text, source) of console and log messages, exceptions
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target,
                                 flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "DOM"):
            self.send(domain + ".enable")

    def _read(self):
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_chrome, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                with self._cond:
                    self._replies[None] = "closed"
                    self._cond.notify_all()
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    with self._cond:
                        self._replies[msg["id"]] = msg
                        self._cond.notify_all()
                else:
                    self._note(msg)
                    self.events.put(msg)
                    if msg.get("method") == "Page.javascriptDialogOpening":
                        # confirm() blocks the page until answered; this thread cannot
                        # wait for a reply it reads itself, so it only sends.
                        self.dialogs.append(msg["params"]["message"])
                        self._post("Page.handleJavaScriptDialog", self.session, accept=True)

    def _note(self, msg):
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"])
            self.console.append((p["type"], text, "console"))
        elif method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            self.console.append(("exception", d.get("exception", {}).get("description", d["text"]),
                                 "javascript"))
        elif method == "Log.entryAdded":
            e = p["entry"]
            self.console.append((e["level"], e.get("text", ""), e.get("source", "")))

    def _post(self, method, session, **params):
        """Sends one command without waiting for its reply."""
        with self._cond:
            self._next_id += 1
            mid = self._next_id
        self._write({"id": mid, "method": method, "params": params, "sessionId": session})

    def _write(self, msg):
        data = json.dumps(msg).encode() + b"\0"
        with self._wlock:  # the reader thread answers dialogs meanwhile
            while data:
                data = data[os.write(self._to_chrome, data):]

    def call(self, method, timeout=30, session=None, **params):
        """Sends one command and waits for its reply; raises CdpError on an error reply."""
        with self._cond:
            self._next_id += 1
            mid = self._next_id
        msg = {"id": mid, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        self._write(msg)
        deadline = time.monotonic() + timeout
        with self._cond:
            while mid not in self._replies:
                if None in self._replies:
                    raise CdpError("chromium went away during %s" % method)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CdpError("no reply to %s within %ss" % (method, timeout))
                self._cond.wait(left)
            reply = self._replies.pop(mid)
        if "error" in reply:
            raise CdpError("%s: %s" % (method, reply["error"].get("message")))
        return reply.get("result", {})

    def send(self, method, timeout=30, **params):
        """A command to the page's session."""
        return self.call(method, timeout=timeout, session=self.session, **params)

    def eval(self, expression, timeout=30):
        """The value of a JavaScript expression in the page (promises awaited)."""
        r = self.send("Runtime.evaluate", timeout=timeout, expression=expression,
                      awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise CdpError("page error: %s" % d.get("exception", {}).get("description", d["text"]))
        return r["result"].get("value")

    def wait(self, expression, timeout=20, what=None):
        """Polls expression until it is truthy and returns its value (true for a DOM
        node); fails with what (or the expression) after timeout seconds."""
        deadline = time.monotonic() + timeout
        last = None
        probe = "(() => { const v = (%s); return v instanceof Node ? true : v; })()" % expression
        while time.monotonic() < deadline:
            try:
                last = self.eval(probe)
            except CdpError as e:
                last = str(e)
            else:
                if last:
                    return last
            time.sleep(0.1)
        raise AssertionError("timed out waiting for %s (last value %r)" % (what or expression, last))

    def navigate(self, url, timeout=20):
        """Loads url and waits for its load event (a change of #fragment only does not
        load anything: the page's router takes it)."""
        while not self.events.empty():
            self.events.get_nowait()
        if "loaderId" not in self.send("Page.navigate", url=url):
            return  # a new #fragment of the same document: no load event comes
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self.events.get(timeout=0.5)
            except queue.Empty:
                continue
            if msg.get("method") == "Page.loadEventFired":
                return
        raise AssertionError("%s did not load within %ss" % (url, timeout))

    def viewport(self, width, height, mobile=False):
        """Emulates a screen of width x height CSS pixels (a phone when mobile)."""
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=2 if mobile else 1, mobile=mobile)

    def screenshot(self, path):
        """Saves the visible part of the page as a PNG."""
        data = self.send("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path

    def set_files(self, selector, paths):
        """Puts files into the <input type=file> that selector finds, as a picker would."""
        doc = self.send("DOM.getDocument", depth=0)["root"]["nodeId"]
        node = self.send("DOM.querySelector", nodeId=doc, selector=selector)["nodeId"]
        if not node:
            raise AssertionError("no element %s" % selector)
        self.send("DOM.setFileInputFiles", nodeId=node, files=list(paths))

    def downloads_to(self, folder):
        """Saves the page's downloads into folder, under their own names."""
        self.call("Browser.setDownloadBehavior", behavior="allow", downloadPath=folder)

    def errors(self):
        """Console errors, exceptions and Content-Security-Policy refusals so far; not
        the network's (an error status the page handles, a refused connection while a
        server restarts), which the tests expect and check through the API instead."""
        return [(lvl, text, src) for lvl, text, src in self.console
                if lvl in ("error", "exception", "assert") and src != "network"]

    def close(self):
        if self.proc is None:
            return
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)
