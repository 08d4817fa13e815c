"""The documents and the sources say what opforge does, not how its development was
organised: README.md, docs/*.md and the source files never name a numbered working
session ("the twelfth session", "session 14", "fourteenth and fifteenth sessions"). A
measurement is cited by its entry in docs/h200-results.md (date and commit) instead.

Other uses of the word are different words and pass: the GPU library's `ofg_session`,
`gpu_session_add`, "a session holds 1024 candidates", pytest's `scope="session"`."""
import os
import re

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SOURCE_DIRS = ["base", "schema", "store", "proposers", "gpu", "engine", "handlers", "server",
               "cli", "tools", "scripts", "tests", "openapi"]
SOURCE_EXTS = (".c", ".h", ".cu", ".cuh", ".py", ".sh", ".yaml", ".yml")
# Folders never scanned: build outputs (build, build-asan, build-test-normal, ...), the GPU
# bundle, caches and virtual environments.
SKIP_DIRS = re.compile(r"^(build.*|\.carry|\.git|__pycache__|\.pytest_cache|venv|\.venv|"
                       r"node_modules)$")
THIS_FILE = os.path.relpath(os.path.abspath(__file__), ROOT)

_ORDINALS = (r"first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|"
             r"twelfth|thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|"
             r"nineteenth|twentieth|thirtieth|fortieth|fiftieth")
ORDINAL = r"(?:(?:twenty|thirty|forty|fifty)-)?(?:%s)|\d+(?:st|nd|rd|th)" % _ORDINALS
NUMBER = (r"\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|"
          r"fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty")
# "session 12", "Session #3", "sessions 14-15", "session twelve", "session 5th"
SESSION_THEN_NUMBER = r"\bsessions?\s*(?:[:#]|no\.)?\s*(?:%s|%s)\b" % (ORDINAL, NUMBER)
# "the twelfth session", "fifteenth sessions", "twelfth-session wall", "3rd session"
ORDINAL_THEN_SESSION = r"\b(?:%s)[\s-]+sessions?\b" % ORDINAL
NUMBERED_SESSION = re.compile(r"(?:%s)|(?:%s)" % (SESSION_THEN_NUMBER, ORDINAL_THEN_SESSION),
                              re.I)


def scanned_files():
    """README.md, docs/*.md, and every source file of SOURCE_DIRS outside build folders."""
    yield "README.md"
    docs = os.path.join(ROOT, "docs")
    if os.path.isdir(docs):
        for name in sorted(os.listdir(docs)):
            if name.endswith(".md"):
                yield os.path.join("docs", name)
    for top in SOURCE_DIRS:
        for dirpath, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = sorted(d for d in dirs if not SKIP_DIRS.match(d))
            for name in sorted(files):
                if name.endswith(SOURCE_EXTS):
                    path = os.path.relpath(os.path.join(dirpath, name), ROOT)
                    if path != THIS_FILE:
                        yield path


def numbered_sessions(text):
    """(line number, line) of each line naming a numbered session. The text is read whole,
    so a name split over two lines ("the fourteenth\\nsession") is found too."""
    found = []
    for m in NUMBERED_SESSION.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        start = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.end())
        found.append((line, text[start:end if end >= 0 else len(text)].strip()))
    return found


def findings(root, paths):
    out = []
    for path in paths:
        full = os.path.join(root, path)
        if not os.path.isfile(full):
            continue
        with open(full, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for line, content in numbered_sessions(text):
            out.append("%s:%d: %s" % (path, line, content[:160]))
    return out


@pytest.mark.parametrize("text", [
    "With 3 slots in the twelfth session, 13 tasks ran out of memory.",
    "four calls (fourteenth and fifteenth sessions: four calls of bench_call)",
    "The eleventh session (bundle of b9dfb0b)",
    "latest record as of the eighth session",
    "the GPU run (seventh session)",
    "a longest-first order of the twelfth-session walls",
    "measured in Session 12",
    "sessions 14-15 ran it",
    "see session #3",
    "the 3rd session's run",
    "the fourteenth\nsession's run",
    "the twenty-first session",
])
def test_pattern_finds_a_numbered_session(text):
    assert numbered_sessions(text), text


@pytest.mark.parametrize("text", [
    "ofg_session_open(device, cache_dir, &s)",
    "struct gpu_session *s = gpu_session_add(fx->s, c);",
    "A session holds OFG_MAX_PREPARED_CANDIDATES (1024) prepared candidates",
    '@pytest.fixture(scope="session")',
    "keep it in session storage; a terminal session of 2 panes",
    "test_session_holds_1024_candidates",
    '"protocol/no_session"',
    "one session on one device",
])
def test_pattern_leaves_other_sessions_alone(text):
    assert numbered_sessions(text) == [], text


def test_a_planted_file_is_found(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.md").write_text("Fine text.\nMeasured in the ninth session.\n")
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "x.c").write_text("/* ofg_session is fine */\nint x; /* session 4 */\n")
    assert findings(str(tmp_path), ["docs/notes.md", "engine/x.c"]) == [
        "docs/notes.md:2: Measured in the ninth session.",
        "engine/x.c:2: int x; /* session 4 */"]


def test_no_document_or_source_names_a_numbered_session():
    found = findings(ROOT, scanned_files())
    assert found == [], ("name the results entry (docs/h200-results.md, date and commit) or "
                         "say what the code does now, not the session:\n" + "\n".join(found))
