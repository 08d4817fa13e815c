"""docs/ci.md cannot drift from the CLI: every `opforge tune ...` command line in its code
blocks (shell and CI YAML alike) runs, exactly as written, against a real server with the
scripted evaluator (tests/engine/scripted_evaluator.c) and a token file, from a work
directory holding a `models/` folder of three programs. Each run must exit 0 with the
summary it documents, write a JUnit report that xml.etree parses with one passing test
case per program and its figures, a results file, and for each program a ModelNew file
that defines ModelNew once run after its reference (as KernelBench's eval does) and the
best kernel's source. The document's exit-status table must match `opforge tune --help`.

The programs are named `plain_timed_*`: the scripted evaluator then reports the softmax
graph the builtin proposer knows and times each of its candidates by its text, so the
default proposer finds kernels faster than eager (docs/ci.md's `--fail-under 1.0`).

Run: OPFORGE_BUILD_DIR=build-test-normal python -m pytest -q tests/cli_docs
(OPFORGE_BIN and OPFORGE_SCRIPTED_EVALUATOR override the binaries it takes from there)."""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import xml.etree.ElementTree as ET

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
DOC = os.path.join(ROOT, "docs", "ci.md")
REFERENCE = open(os.path.join(ROOT, "examples", "softmax.py")).read()
PROGRAMS = ["plain_timed_softmax", "plain_timed_rows", "plain_timed_norm"]
TOKEN = "ci-doc-test-token-0123456789"
# The variables a command may name; any other makes the test fail (the document would
# depend on something a CI job does not set).
KNOWN_VARS = {"OPFORGE_SERVER", "RUNNER_TEMP", "OPFORGE_TOKEN_FILE", "HOME"}
# CI variables that would scope the Idempotency-Key: the runs here set none.
RUN_ID_VARS = ["OPFORGE_RUN_ID", "GITHUB_RUN_ID", "CI_PIPELINE_ID", "BUILD_TAG"]


def build_path(*parts):
    return os.path.join(os.environ.get("OPFORGE_BUILD_DIR",
                                       os.path.join(ROOT, "build-test-normal")), *parts)


def executable(variable, *parts):
    path = os.environ.get(variable) or build_path(*parts)
    if not os.access(path, os.X_OK):
        pytest.fail("no executable at %s (set %s or OPFORGE_BUILD_DIR)" % (path, variable))
    return path


def tune_commands():
    """The `opforge tune` command lines of the document's fenced code blocks, with
    backslash continuations joined: [(block language, command)]."""
    commands, lang, pending = [], None, None
    for raw in open(DOC, encoding="utf-8"):
        line = raw.rstrip("\n")
        fence = re.match(r"^\s*```(\w*)", line)
        if fence:
            lang = None if lang is not None else fence.group(1)
            continue
        if lang is None:
            continue
        text = line.strip()
        if pending is not None:
            pending += " " + text.rstrip("\\").strip()
        elif re.match(r"^(- )?opforge tune ", text):
            pending = re.sub(r"^- ", "", text).rstrip("\\").strip()
        if pending is not None and not text.endswith("\\"):
            commands.append((lang, pending))
            pending = None
    return commands


def expand(command, env):
    """$NAME and "${NAME}" replaced from env; a name outside KNOWN_VARS fails."""
    def one(match):
        name = match.group(1) or match.group(2)
        assert name in KNOWN_VARS, "docs/ci.md names $%s, which no CI job here sets" % name
        return env[name]
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", one, command)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A server with the scripted evaluator on one scripted GPU and a token file."""
    base = tmp_path_factory.mktemp("server")
    tokens = base / "tokens"
    tokens.write_text(TOKEN + "\n")
    argv = [executable("OPFORGE_BIN", "opforge"), "serve", "--listen", "127.0.0.1:0",
            "--data", str(base / "data"), "--gpus", "0", "--evaluator",
            executable("OPFORGE_SCRIPTED_EVALUATOR", "tests", "engine", "scripted_evaluator"),
            "--sandbox-env", "SCRIPTED_EVAL_*", "--token-file", str(tokens)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPFORGE_")}
    log = open(base / "server.log", "w")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
    line = proc.stdout.readline()
    if not line.startswith("listening on "):
        proc.kill()
        pytest.fail("the server did not start: %r; see %s" % (line, base / "server.log"))
    yield {"url": line.split()[-1], "tokens": str(tokens)}
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    log.close()


def test_the_document_has_its_commands():
    commands = tune_commands()
    langs = [lang for lang, _ in commands]
    assert len(commands) == 4, commands
    assert langs.count("yaml") == 3, langs  # two GitHub jobs, one GitLab job
    assert any("--token-file" in c for _, c in commands)
    for _, command in commands:
        for option in ("--fail-under", "--export", "--junit"):
            assert option in command, command


def test_exit_statuses_match_the_help():
    help_text = subprocess.run([executable("OPFORGE_BIN", "opforge"), "tune", "--help"],
                               capture_output=True, text=True, check=True).stdout
    doc = open(DOC, encoding="utf-8").read()
    for status in range(6):
        assert re.search(r"^\| %d \| \S" % status, doc, re.M), "docs/ci.md lacks status %d" % status
        assert re.search(r"^  %d  \S" % status, help_text, re.M), "--help lacks status %d" % status


def option_value(argv, name):
    return argv[argv.index(name) + 1] if name in argv else None


def check_outputs(work, argv, stdout):
    """The summary, the JUnit report, the results and the exports of one run."""
    assert stdout.endswith("under --fail-under 1.00x: 0\nexit status: 0\n"), stdout
    for name in PROGRAMS:
        assert re.search(r"^%s +succeeded +\d+\.\d\dx" % name, stdout, re.M), stdout
    suite = ET.parse(os.path.join(work, option_value(argv, "--junit"))).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "0", "0")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert sorted(cases) == sorted(PROGRAMS)
    results = json.load(open(os.path.join(work, option_value(argv, "--json"))))
    assert results["exit_status"] == 0 and results["complete"] is True
    for task in results["tasks"]:
        props = {p.get("name"): p.get("value") for p in cases[task["name"]].find("properties")}
        assert float(props["speedup"]) == pytest.approx(task["best_speedup"], abs=5e-5)
        assert task["best_speedup"] >= 1.0
        assert props["url"] == task["url"] and props["stop_reason"] == task["stop_reason"]
        assert [e.tag for e in cases[task["name"]] if e.tag in ("failure", "error")] == []
    torch = pytest.importorskip("torch")
    export = os.path.join(work, option_value(argv, "--export"))
    for name in PROGRAMS:
        assert "__global__" in open(os.path.join(export, name + ".cu")).read()
        ctx = {}
        exec(REFERENCE, ctx)
        exec(open(os.path.join(export, name + "_new.py")).read(), ctx)
        assert issubclass(ctx["ModelNew"], torch.nn.Module)


@pytest.mark.parametrize("index", range(4))
def test_command_runs(server, tmp_path, index):
    commands = tune_commands()
    if index >= len(commands):
        pytest.fail("docs/ci.md has %d tune commands" % len(commands))
    lang, command = commands[index]
    work = tmp_path / "work"
    (work / "models").mkdir(parents=True)
    for name in PROGRAMS:
        (work / "models" / (name + ".py")).write_text(REFERENCE)
    runner_temp = tmp_path / "runner"
    runner_temp.mkdir()
    shutil.copy(server["tokens"], runner_temp / "opforge-token")
    wrong = tmp_path / "wrong-token"
    wrong.write_text("not-the-token-0123456789\n")
    # A command naming --token-file must use it: the variable then holds a wrong token.
    env_vars = {"OPFORGE_SERVER": server["url"], "RUNNER_TEMP": str(runner_temp),
                "HOME": str(tmp_path),
                "OPFORGE_TOKEN_FILE": str(wrong) if "--token-file" in command
                                      else server["tokens"]}
    argv = shlex.split(expand(command, env_vars))
    assert argv[:2] == ["opforge", "tune"]
    argv[0] = executable("OPFORGE_BIN", "opforge")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OPFORGE_") and k not in RUN_ID_VARS}
    env.update(env_vars)
    done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, "%s\nexit %d\n%s\n%s" % (command, done.returncode, done.stdout,
                                                        done.stderr)
    assert "\r" not in done.stderr and "\x1b" not in done.stderr
    check_outputs(str(work), argv, done.stdout)
