"""Fixtures of the web page's tests: a server (scripted evaluator), a headless Chromium,
the screenshot folder (printed at the end of the run)."""
import os

import pytest

from cdp import Browser, find_chromium
from opforge_server import Server, build_dir

SHOTS = os.environ.get("OPFORGE_UI_SHOTS") or os.path.join(build_dir(), "ui-screenshots")
_saved = []


def need_opforge():
    build = build_dir()
    for path in ("opforge", "tests/engine/scripted_evaluator"):
        if not os.access(os.path.join(build, path), os.X_OK):
            pytest.skip("no %s in %s (build it, or set OPFORGE_BUILD_DIR)" % (path, build))


@pytest.fixture(scope="module")
def server():
    need_opforge()
    # 500 ms an evaluation: a 5-step task takes about 3 s, long enough to watch it.
    s = Server(scripted=True, delay_ms=500)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def browser():
    binary = find_chromium()
    if not binary:
        pytest.skip("no chromium to drive (apt-get install chromium, or set OPFORGE_CHROMIUM "
                    "to a Chromium binary); the browser tests need one")
    b = Browser(binary)
    yield b
    b.close()


class Shots:
    """Saves screenshots into SHOTS; the run's summary lists them."""

    def save(self, browser, name):
        os.makedirs(SHOTS, exist_ok=True)
        path = browser.screenshot(os.path.join(SHOTS, name))
        _saved.append(path)
        return path


@pytest.fixture(scope="session")
def shots():
    return Shots()


def pytest_terminal_summary(terminalreporter):
    if _saved:
        terminalreporter.write_line("web page screenshots (%d) in %s:" % (len(_saved), SHOTS))
        for p in _saved:
            terminalreporter.write_line("  " + p)
