"""The web page's static serving (handlers/ui.c): Content-Types, the security and cache
headers, 304 on a matching ETag, 404 for a file that is not embedded, the /ui redirect,
HEAD and the methods of the route."""
import json
import re

import pytest

from conftest import need_opforge
from opforge_server import Server

CSP_PARTS = ["default-src 'self'", "object-src 'none'", "base-uri 'none'",
             "frame-ancestors 'none'"]


@pytest.fixture(scope="module")
def plain_server():
    need_opforge()
    s = Server(scripted=False)
    yield s
    s.stop()


def check_page_headers(headers):
    csp = headers["Content-Security-Policy"]
    for part in CSP_PARTS:
        assert part in csp, csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Cache-Control"] == "no-cache"
    assert re.fullmatch(r'"[0-9a-f]{16}"', headers["ETag"])


def test_redirect(plain_server):
    status, headers, body = plain_server.request("GET", "/ui")
    assert status == 301
    assert headers["Location"] == "/ui/"
    assert body == b""


def test_index_and_files(plain_server):
    status, headers, body = plain_server.request("GET", "/ui/")
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    check_page_headers(headers)
    index = body
    html = body.decode()
    assert '<script type="module" src="app.js">' in html
    assert "<style" not in html and " style=" not in html and "onclick=" not in html
    # Every file the page names is served with its type.
    names = set(re.findall(r'(?:src|href)="([a-z_]+\.(?:js|css|svg))"', html))
    assert {"app.js", "style.css", "favicon.svg"} <= names
    types = {"js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8",
             "svg": "image/svg+xml"}
    seen = set()
    todo = ["app.js"] + sorted(names)
    while todo:  # follow the modules' imports: every one must be embedded
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        status, headers, body = plain_server.request("GET", "/ui/" + name)
        assert status == 200, name
        assert headers["Content-Type"] == types[name.rsplit(".", 1)[1]], name
        check_page_headers(headers)
        if name.endswith(".js"):
            todo += re.findall(r"from '\./([a-z_]+\.js)'", body.decode())
    assert len([n for n in seen if n.endswith(".js")]) >= 10
    status, _, same = plain_server.request("GET", "/ui/index.html")
    assert status == 200 and same == index


def test_etag_revalidation(plain_server):
    _, headers, _ = plain_server.request("GET", "/ui/app.js")
    etag = headers["ETag"]
    status, headers2, body = plain_server.request("GET", "/ui/app.js",
                                                  headers={"If-None-Match": etag})
    assert status == 304 and body == b""
    assert headers2["ETag"] == etag
    status, _, body = plain_server.request("GET", "/ui/app.js",
                                           headers={"If-None-Match": '"0000000000000000"'})
    assert status == 200 and body


@pytest.mark.parametrize("path", ["/ui/nope.js", "/ui/index.htm", "/ui/..", "/ui/%2e%2e",
                                  "/ui/meson.build", "/ui/app.js/x", "/ui//app.js"])
def test_unknown_files_are_404(plain_server, path):
    status, headers, body = plain_server.request("GET", path)
    assert status == 404, path
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body)["error"]["code"] == "not_found"


def test_head_and_methods(plain_server):
    status, headers, body = plain_server.request("HEAD", "/ui/style.css")
    assert status == 200 and body == b""
    assert headers["Content-Type"] == "text/css; charset=utf-8"
    status, headers, _ = plain_server.request("POST", "/ui/style.css", body={})
    assert status == 405
    assert headers["Allow"] == "GET, HEAD, OPTIONS"
    status, headers, _ = plain_server.request("OPTIONS", "/ui/")
    assert status == 204 and headers["Allow"] == "GET, HEAD, OPTIONS"
