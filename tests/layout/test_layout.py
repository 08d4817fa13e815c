"""The layout rules of docs/architecture.md, "Layout", checked on the source tree: include
arrows run downward only, no include cycles between files, no citation of a design
document outside the repository, and no production file over 800 lines without a reason
stated in its header comment."""
import os
import re

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SOURCE_DIRS = ["base", "schema", "store", "proposers", "gpu", "engine", "handlers", "server",
               "cli", "tools"]

# Which top-level folders each folder may include (docs/architecture.md, "Layout").
ALLOWED = {
    "base": set(),
    "schema": {"base"},
    "store": {"base", "schema"},
    "proposers": {"base"},
    "gpu": {"base"},
    "engine": {"base", "schema", "store", "proposers", "gpu"},
    "handlers": {"base", "schema", "store", "proposers", "gpu", "engine", "server"},
    "server": {"base", "schema", "store", "proposers", "gpu", "engine", "handlers"},
    "cli": {"base", "schema", "store", "proposers", "gpu", "engine", "handlers", "server",
            "tools"},
    "tools": {"base"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
LINE_LIMIT = 800


def source_files(exts):
    for top in SOURCE_DIRS:
        for dirpath, _dirs, files in os.walk(os.path.join(ROOT, top)):
            for name in sorted(files):
                if name.endswith(exts):
                    yield os.path.relpath(os.path.join(dirpath, name), ROOT)


def includes(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return [inc for inc in INCLUDE.findall(f.read()) if "/" in inc]


def test_include_arrows_run_downward():
    wrong = []
    for path in source_files((".c", ".h")):
        top = path.split("/")[0]
        for inc in includes(path):
            target = inc.split("/")[0]
            if target != top and target in ALLOWED and target not in ALLOWED[top]:
                wrong.append("%s includes %s" % (path, inc))
    assert wrong == [], "\n".join(wrong)


def test_server_headers_only_above_engine():
    wrong = [p for p in source_files((".c", ".h"))
             if p.split("/")[0] not in ("server", "handlers", "cli")
             and any(i.startswith("server/") for i in includes(p))]
    assert wrong == []


def test_no_include_cycles():
    graph = {p: [i for i in includes(p) if os.path.exists(os.path.join(ROOT, i))]
             for p in source_files((".c", ".h"))}
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = "done"

    for node in graph:
        if node not in state:
            visit(node, [])
    assert cycles == [], "\n".join(cycles)


def unit_of(path):
    """A file's unit: its path without .c or .h, so that a .c and its .h are one; a
    private header named after its unit (engine/loop_internal.h) belongs to that unit."""
    unit = os.path.splitext(path)[0]
    return unit[:-len("_internal")] if unit.endswith("_internal") else unit


def test_no_include_cycles_between_units():
    """The same over units (each .c/.h pair counted as one): a .c that includes b.h while
    b.c includes a.h is a cycle even though no file includes itself."""
    graph = {}
    for p in source_files((".c", ".h")):
        deps = graph.setdefault(unit_of(p), set())
        for i in includes(p):
            if os.path.exists(os.path.join(ROOT, i)) and unit_of(i) != unit_of(p):
                deps.add(unit_of(i))
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    assert cycles == [], "\n".join(cycles)


def test_no_design_document_outside_the_repository_is_cited():
    cited = re.compile(r"DESIGN(\.md| section| \d)|gpu_contracts|notes/")
    hits = []
    for path in source_files((".c", ".h", ".py", ".cu", ".cuh", ".sql", ".yaml")):
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if cited.search(line):
                    hits.append("%s:%d: %s" % (path, n, line.strip()))
    for extra in ("openapi/openapi.yaml", "README.md"):
        with open(os.path.join(ROOT, extra), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if cited.search(line):
                    hits.append("%s:%d: %s" % (extra, n, line.strip()))
    assert hits == [], "\n".join(hits)


@pytest.mark.parametrize("path", list(source_files((".c", ".h", ".py", ".cu", ".cuh"))))
def test_long_files_say_why(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        text = f.read()
    lines = text.count("\n")
    if lines <= LINE_LIMIT:
        return
    head = text[:1500].lower()
    assert "longer than" in head or "one concept" in head or "why this file is long" in head, \
        "%s has %d lines and its header comment gives no reason" % (path, lines)


def test_migrations_come_in_pairs():
    """Every migration number has one SQLite and one PostgreSQL file (docs/architecture.md,
    "Store backends"), and schema/meson.build embeds every file of both lists in order."""
    schema = os.path.join(ROOT, "schema")
    sqlite = sorted(n for n in os.listdir(schema) if re.match(r"^\d{4}_.*\.sql$", n))
    pg = sorted(n for n in os.listdir(os.path.join(schema, "postgresql"))
                if re.match(r"^\d{4}_.*\.sql$", n))
    assert [n[:4] for n in sqlite] == [n[:4] for n in pg]
    with open(os.path.join(schema, "meson.build"), encoding="utf-8") as f:
        build = f.read()
    listed = re.findall(r"'((?:postgresql/)?\d{4}_[^']*\.sql)'", build)
    assert listed == sqlite + ["postgresql/" + n for n in pg]
