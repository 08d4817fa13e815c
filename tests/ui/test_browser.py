"""The web page in a real browser (headless Chromium over the DevTools protocol) against
a server whose evaluator is scripted: the page loads; a task submitted through it
appears in the list; its chart follows the event stream, across a server restart; a
strategy edited through the page changes in the API; a bad edit shows the API's error
beside the field; a server with a token file gets the token asked for; screenshots at
1280x800 and 390x844. Each check reads what the page shows and what the API says."""
import json
import os
import tempfile
import time

import pytest

from conftest import need_opforge
from opforge_server import Server

REFERENCE = """import torch

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)

def get_inputs():
    return [torch.randn(256, 512)]

def get_init_inputs():
    return []
"""
# tests/engine/fixtures/softmax_a: 5 steps; the best is 0.8 ms against eager's 2.0 ms.
STEPS = 5


def js(value):
    return json.dumps(value)


def set_value(b, selector, value):
    """Types value into the input, textarea or select that selector finds (once there)."""
    b.wait("document.querySelector(%s)" % js(selector), what=selector)
    b.eval("(() => { const el = document.querySelector(%s); el.value = %s;"
           " el.dispatchEvent(new Event('input', {bubbles: true}));"
           " el.dispatchEvent(new Event('change', {bubbles: true})); })()"
           % (js(selector), js(value)))


def click(b, selector):
    b.wait("document.querySelector(%s)" % js(selector), what=selector)
    b.eval("document.querySelector(%s).dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true}))"
           % js(selector))


def text(b, selector):
    return b.eval("document.querySelector(%s)?.textContent ?? null" % js(selector))


def no_page_errors(b):
    errors = b.errors()
    assert errors == [], errors


def open_memory_strategy(b, server, direction, strategy):
    b.navigate(server.url + "/ui/#/skills")  # so that the memory view starts afresh
    b.navigate(server.url + "/ui/#/memory")
    b.wait("document.querySelector('svg.graph')?.dataset.nodes > 0", what="the memory graph")
    click(b, "svg.graph .dir[data-id=%s]" % direction)
    click(b, ".strategy-link[data-id=%s]" % strategy)
    b.wait("document.querySelector('#strategy-form [data-field=name]')?.value", what="the strategy form")


@pytest.fixture(scope="module")
def submitted(server, browser):
    """The id of the task submitted through the page (test_submit_through_page)."""
    return {}


def test_page_loads(server, browser):
    browser.viewport(1280, 800)
    browser.navigate(server.url + "/ui/")
    assert browser.eval("document.title") == "opforge"
    browser.wait("document.querySelector('#task-list p, #task-list table')", what="the task list")
    assert text(browser, "#task-list") == "No tasks yet."
    nav = browser.eval("[...document.querySelectorAll('#nav a')].map(a => a.textContent)")
    assert nav == ["Tasks", "Memory", "Skills", "Servers"]
    assert browser.eval("document.querySelector('#nav a.active').textContent") == "Tasks"
    # The policies offered are the spec's.
    spec = server.json("GET", "/openapi.json")
    policies = browser.eval("[...document.querySelectorAll('#submit-policy option')].map(o => o.value)")
    assert policies == spec["components"]["schemas"]["Policy"]["enum"]
    assert server.json("GET", "/v1/tasks")["items"] == []
    no_page_errors(browser)


def test_submit_through_page(server, browser, submitted, tmp_path):
    path = tmp_path / "softmax_a.py"
    path.write_text(REFERENCE)
    browser.set_files("#submit-file", [str(path)])
    browser.wait("document.querySelector('#submit-name').value === 'softmax_a'",
                 what="the name taken from the file")
    set_value(browser, "#submit-steps", str(STEPS))
    set_value(browser, "#submit-proposer", "test")
    click(browser, "#submit-form button[type=submit]")
    href = browser.wait("document.querySelector('#submit-form [role=status] a')?.getAttribute('href')",
                        what="the submission's link")
    task_id = href.rsplit("/", 1)[1]
    submitted["id"] = task_id
    browser.wait("document.querySelector('#task-list tr[data-id=\"%s\"]')" % task_id,
                 what="the task's row in the list")
    row = text(browser, "#task-list tr[data-id=\"%s\"]" % task_id)
    assert row.startswith("softmax_a")
    task = server.json("GET", "/v1/tasks/" + task_id)
    assert task["name"] == "softmax_a"
    assert task["reference"] == REFERENCE
    assert task["options"]["proposer"] == "test"
    assert task["options"]["budget"]["steps"] == STEPS
    assert task["options"]["policy"] == "htam+tree"
    listed = server.json("GET", "/v1/tasks")["items"]
    assert [t["id"] for t in listed] == [task_id]
    no_page_errors(browser)


def test_chart_follows_the_event_stream(server, browser, submitted):
    task_id = submitted["id"]
    browser.eval("window.__sameDocument = true")
    click(browser, "#task-list tr[data-id=\"%s\"] a" % task_id)
    browser.wait("document.querySelector('svg.chart') && document.querySelector('#stream-state')",
                 what="the chart")
    # Watch the chart grow while the task runs: its points come from the event stream.
    seen, states = [], set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        points, state, done = browser.eval(
            "[+document.querySelector('svg.chart').dataset.points,"
            " document.querySelector('#stream-state').textContent,"
            " !!document.querySelector('#task-stop')]")
        states.add(state)
        if not seen or seen[-1] != points:
            seen.append(points)
        if done:
            break
        time.sleep(0.05)
    assert browser.eval("window.__sameDocument === true"), "the page was reloaded"
    assert seen == sorted(seen), seen
    assert len(seen) >= 3, "the chart did not grow step by step: %s" % seen
    assert "stream: live" in states and "stream: ended" in text(browser, "#stream-state")
    task = server.wait_task(task_id)
    assert task["status"] == "succeeded"
    p = task["progress"]
    assert seen[-1] == p["step"] + 1 == STEPS + 1  # step 0, the reference, included
    # What the page shows is what the API says.
    assert text(browser, "#best-speedup") == "%.2f×" % p["best_speedup"]
    assert float(browser.eval("document.querySelector('svg.chart').dataset.best")) == pytest.approx(p["best_ms"])
    rows = browser.eval("[...document.querySelectorAll('#steps-table tbody tr')].map(r => +r.dataset.step)")
    assert rows == list(range(STEPS + 1))
    assert "budget" in text(browser, "#task-stop")
    assert text(browser, "#task-status") == "succeeded"
    # The candidate tree has every candidate, the best one ringed; its source is shown.
    candidates = server.json("GET", "/v1/tasks/%s/candidates" % task_id)["items"]
    browser.wait("document.querySelectorAll('svg.tree .node').length === %d" % len(candidates),
                 what="the candidate tree")
    browser.wait("document.querySelector('svg.tree .node.best')?.dataset.id === %s" % js(p["best_candidate"]),
                 what="the best candidate ringed")
    best = server.json("GET", "/v1/tasks/%s/best" % task_id)
    browser.wait("document.querySelector('#best pre.source')", what="the best kernel")
    assert text(browser, "#best pre.source") == best["source"]
    assert browser.eval("document.querySelectorAll('#best .tok-k').length") > 0  # highlighted
    assert browser.eval("document.querySelector('#download-kernelbench') !== null")
    no_page_errors(browser)


def test_stream_resumes_after_a_restart(server, browser):
    task = server.json("POST", "/v1/tasks", {"name": "softmax_a", "reference": REFERENCE,
                                             "proposer": "test", "budget": {"steps": STEPS}})
    browser.navigate(server.url + "/ui/#/tasks/" + task["id"])
    browser.wait("document.querySelector('#view').textContent.includes(%s)"
                 " && document.querySelectorAll('#steps-table tbody tr').length >= 1" % js(task["id"]),
                 what="the task's first step")
    server.restart()  # drops the stream; the task resumes from its last committed step
    try:
        browser.wait("document.querySelector('#task-stop')", timeout=90, what="the task's end")
    except AssertionError as e:
        state = browser.eval("document.querySelector('#stream-state')?.textContent")
        now = server.json("GET", "/v1/tasks/" + task["id"])
        raise AssertionError("%s; the page says %r; the API: %s %s; server log:\n%s"
                             % (e, state, now["status"], now["progress"], server.log()))
    done = server.wait_task(task["id"])
    assert done["status"] == "succeeded"
    rows = browser.eval("[...document.querySelectorAll('#steps-table tbody tr')].map(r => +r.dataset.step)")
    assert rows == list(range(done["progress"]["step"] + 1))
    points = int(browser.eval("document.querySelector('svg.chart').dataset.points"))
    assert points == done["progress"]["step"] + 1
    # The stream was resumed, and every event was handed on once: as many as the task's
    # log holds, none replayed.
    state = browser.eval("({...document.querySelector('#stream-state').dataset})")
    assert int(state["resumes"]) >= 1, state
    status, _, raw = server.request("GET", "/v1/tasks/%s/events" % task["id"])
    assert status == 200
    logged = [line for line in raw.decode().splitlines() if line.startswith("id: ")]
    assert int(state["events"]) == len(logged), (state, len(logged))
    no_page_errors(browser)


def test_edit_strategy(server, browser):
    open_memory_strategy(browser, server, "memory_access", "vector_float4")
    new = "Load and store through float4 vectors (edited through the page)."
    set_value(browser, "#strategy-form [data-field=edit_pattern]", new)
    click(browser, "#strategy-form button[type=submit]")
    browser.wait("document.querySelector('#strategy-pattern')?.textContent === %s" % js(new),
                 what="the saved pattern")
    assert (text(browser, "#strategy-form .saved") or "").startswith("saved")
    local = server.json("GET", "/v1/memory/local/vector_float4")
    assert local["edit_pattern"] == new
    no_page_errors(browser)


def test_bad_edit_shows_the_api_error(server, browser):
    open_memory_strategy(browser, server, "memory_access", "vector_float4")
    before = server.json("GET", "/v1/memory/local/vector_float4")
    set_value(browser, "#strategy-form [data-field=name]", "")
    click(browser, "#strategy-form button[type=submit]")
    error = browser.wait("document.querySelector('#strategy-form [data-field=name] + .field-error')?.textContent",
                         what="the error beside the name")
    status, _, raw = server.request("PATCH", "/v1/memory/local/vector_float4", {"name": ""})
    api_error = json.loads(raw)["error"]
    assert status == 400
    assert error == "%s (%s)" % (api_error["message"], api_error["code"])
    assert browser.eval("document.querySelector('#strategy-form [data-field=name]').getAttribute('aria-invalid')") == "true"
    # A knob move the API refuses: its error names knob_move.knob, shown at the knob field.
    set_value(browser, "#strategy-form [data-field=name]", before["name"])
    set_value(browser, "#strategy-form [data-field=knob_move]", '{"knob": "vec", "op": "set", "value": 4}')
    click(browser, "#strategy-form button[type=submit]")
    error = browser.wait("document.querySelector('#strategy-form [data-field=knob_move] + .field-error')?.textContent",
                         what="the error beside the knob move")
    assert "knob_move.knob" in error and "invalid_field" in error
    assert browser.eval("document.querySelector('#strategy-form [data-field=name] + .field-error')") is None
    after = server.json("GET", "/v1/memory/local/vector_float4")
    assert after["name"] == before["name"] and after["knob_move"] == before["knob_move"]
    no_page_errors(browser)


def wait_file(path, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            time.sleep(0.2)  # Chromium renames the finished file into place
            return path
        time.sleep(0.1)
    raise AssertionError("no download %s" % path)


def test_memory_create_and_delete_direction(server, browser):
    browser.navigate(server.url + "/ui/#/skills")
    browser.navigate(server.url + "/ui/#/memory")
    browser.wait("document.querySelector('svg.graph')?.dataset.nodes > 0", what="the graph")
    click(browser, "#new-direction-button")
    set_value(browser, "#new-direction [data-field=id]", "Bad Id")
    set_value(browser, "#new-direction [data-field=name]", "UI test direction")
    click(browser, "#new-direction button[type=submit]")
    error = browser.wait("document.querySelector('#new-direction [data-field=id] + .field-error')?.textContent",
                         what="the error beside the id")
    assert "invalid_field" in error
    set_value(browser, "#new-direction [data-field=id]", "ui_test_dir")
    set_value(browser, "#new-direction [data-field=prior]", "0.1")
    click(browser, "#new-direction button[type=submit]")
    browser.wait("document.querySelector('svg.graph .dir.selected')?.dataset.id === 'ui_test_dir'",
                 what="the new direction in the graph")
    created = server.json("GET", "/v1/memory/global/ui_test_dir")
    assert created["name"] == "UI test direction" and created["prior"] == 0.1
    click(browser, "#direction-delete")
    browser.wait("!document.querySelector('svg.graph .dir[data-id=ui_test_dir]')",
                 what="the direction gone from the graph")
    assert server.request("GET", "/v1/memory/global/ui_test_dir")[0] == 404
    no_page_errors(browser)


def test_memory_export_and_import(server, browser, tmp_path):
    """Export through the page gives the API's document; importing one whose transitions
    carry statistics through the page draws them as learned arrows."""
    browser.downloads_to(str(tmp_path))
    browser.navigate(server.url + "/ui/#/skills")
    browser.navigate(server.url + "/ui/#/memory")
    browser.wait("document.querySelector('svg.graph')?.dataset.nodes > 0", what="the graph")
    click(browser, "#memory-export")
    with open(wait_file(str(tmp_path / "opforge-memory-default.json"))) as f:
        exported = json.load(f)
    api_doc = server.json("GET", "/v1/memory/export")
    assert [g["id"] for g in exported["globals"]] == [g["id"] for g in api_doc["globals"]]
    assert exported["locals"] == api_doc["locals"] and exported["edges"] == api_doc["edges"]
    # Weights and rewards on three transitions, as a search would have learned them.
    learned = {0: (6.0, 1.8), 3: (2.0, -0.6), 7: (0.5, 0.05)}
    for i, (n, total) in learned.items():
        exported["edges"][i]["stats"] = {"n": n, "reward_sum": total}
    doc = tmp_path / "learned.json"
    doc.write_text(json.dumps(exported))
    browser.set_files("#memory-import", [str(doc)])
    browser.wait("document.querySelectorAll('svg.graph .arrow.learned').length === 3",
                 what="the learned transitions drawn")
    assert any("Replace the memory" in d for d in browser.dialogs)
    assert "Imported:" in text(browser, "#notice")
    edges = {(e["from"], e["to"]): e for e in server.json("GET", "/v1/memory/edges")["items"]}
    for i, (n, total) in learned.items():
        e = exported["edges"][i]
        assert edges[(e["from"], e["to"])]["stats"]["n"] == n
        drawn = browser.eval("document.querySelector('svg.graph .arrow[data-from=%s][data-to=%s]').dataset.n"
                             % (e["from"], e["to"]))
        assert float(drawn) == n
    # The heaviest transition is drawn widest.
    widths = browser.eval("[...document.querySelectorAll('svg.graph .arrow.learned')]"
                          ".map(a => [+a.dataset.n, +a.querySelector('path').getAttribute('stroke-width')])")
    assert sorted(widths) == sorted(widths, key=lambda w: w[1])
    no_page_errors(browser)


def test_download_kernelbench(server, browser, submitted, tmp_path):
    browser.downloads_to(str(tmp_path))
    browser.navigate(server.url + "/ui/#/tasks/" + submitted["id"])
    click(browser, "#download-kernelbench")
    with open(wait_file(str(tmp_path / "softmax_a_model_new.py"))) as f:
        got = f.read()
    status, _, want = server.request("GET", "/v1/tasks/%s/best?format=kernelbench" % submitted["id"])
    assert status == 200 and got == want.decode()
    assert "class ModelNew" in got
    no_page_errors(browser)


def test_skills_enable_and_disable(server, browser):
    rule = server.json("POST", "/v1/skills", {"rule": "You cannot use VEC=4 in softmax kernels.",
                                              "family": "softmax"})
    browser.navigate(server.url + "/ui/#/skills")
    box = "#skills-table tr[data-id=\"%d\"] input[type=checkbox]" % rule["id"]
    browser.wait("document.querySelector(%s)?.checked === true" % js(box), what="the rule")
    click(browser, box)
    browser.wait("document.querySelector(%s)?.checked === false && !document.querySelector(%s).disabled"
                 % (js(box), js(box)), what="the rule disabled")
    assert server.json("GET", "/v1/skills/%d" % rule["id"])["enabled"] is False
    no_page_errors(browser)


def test_skill_edit(server, browser):
    rule = server.json("GET", "/v1/skills")["items"][0]
    row = "#skills-table tr[data-id=\"%d\"]" % rule["id"]
    browser.navigate(server.url + "/ui/#/memory")
    browser.navigate(server.url + "/ui/#/skills")
    click(browser, row + " button")  # Edit
    form = row + " form"
    set_value(browser, form + " [data-field=rule]", "Never do that")
    click(browser, form + " button[type=submit]")
    error = browser.wait("document.querySelector(%s)?.textContent" % js(form + " [data-field=rule] + .field-error"),
                         what="the error beside the rule")
    assert "You cannot" in error and "invalid_field" in error
    new = "You cannot use VEC=4 when the row length is odd."
    set_value(browser, form + " [data-field=rule]", new)
    set_value(browser, form + " [data-field=score]", "4")
    click(browser, form + " button[type=submit]")
    browser.wait("document.querySelector(%s)?.textContent === %s" % (js(row + " td.rule"), js(new)),
                 what="the edited rule")
    got = server.json("GET", "/v1/skills/%d" % rule["id"])
    assert got["rule"] == new and got["score"] == 4 and got["family"] == rule["family"]
    no_page_errors(browser)


def test_servers_view(server, browser):
    browser.navigate(server.url + "/ui/#/servers")
    browser.wait("document.querySelector('#devices-table')", what="the devices")
    devices = server.json("GET", "/v1/devices")["devices"]
    cells = browser.eval("[...document.querySelectorAll('#devices-table tbody tr')].map(r => r.children[4].textContent)")
    assert cells == [d["state"] for d in devices]
    # The live servers of the store (GET /v1/servers): this one alone, a row per server.
    browser.wait("document.querySelector('#servers-table')", what="the servers")
    listed = server.json("GET", "/v1/servers")
    rows = browser.eval("[...document.querySelectorAll('#servers-table tbody tr')].map(r => "
                        "[r.dataset.instance, r.children[1].textContent, r.children[4].textContent])")
    assert rows == [[x["instance"], str(x["pid"]), str(x["slots"])] for x in listed["servers"]]
    assert len(rows) == 1
    store = text(browser, "#servers-store")
    assert store.startswith("Store: %s; a server not renewed for %d s" % (listed["store"], listed["lease_seconds"]))
    no_page_errors(browser)


def test_screenshots(server, browser, submitted, shots):
    for width, height, phone in ((1280, 800, False), (390, 844, True)):
        browser.viewport(width, height, mobile=phone)
        browser.navigate(server.url + "/ui/#/tasks/" + submitted["id"])
        browser.wait("document.querySelector('#task-stop') && document.querySelector('svg.chart')"
                     " && document.querySelector('svg.tree')", what="the task page")
        time.sleep(0.3)
        # Nothing wider than the screen: wide tables scroll inside their box.
        assert browser.eval("document.documentElement.scrollWidth") <= width
        assert os.path.getsize(shots.save(browser, "task-%dx%d.png" % (width, height))) > 10000
        browser.eval("document.querySelector('#chart').closest('.card').scrollIntoView()")
        shots.save(browser, "task-chart-%dx%d.png" % (width, height))
        browser.navigate(server.url + "/ui/#/memory")
        browser.wait("document.querySelector('svg.graph')?.dataset.nodes > 0", what="the graph")
        click(browser, "svg.graph .dir[data-id=parallel_mapping]")
        browser.wait("document.querySelector('#strategies')", what="the direction")
        assert browser.eval("document.documentElement.scrollWidth") <= width
        browser.eval("document.querySelector('#memory-graph').closest('.card').scrollIntoView()")
        assert os.path.getsize(shots.save(browser, "memory-graph-%dx%d.png" % (width, height))) > 10000
    browser.viewport(1280, 800)
    no_page_errors(browser)


def test_paging_drop_and_cancel(browser):
    """On a server without GPUs (tasks stay queued): a file dropped on the page is
    submitted; pages follow the API's cursors; a task is cancelled from the list."""
    need_opforge()
    s = Server(scripted=False)
    try:
        ids = [s.json("POST", "/v1/tasks", {"name": "queued_%d" % i, "reference": REFERENCE})["id"]
               for i in range(2)]
        browser.navigate(s.url + "/ui/#/tasks?limit=2")
        browser.wait("document.querySelector('#submit-form')", what="the form")
        browser.eval("""(() => {
            const dt = new DataTransfer();
            dt.items.add(new File([%s], 'dropped model.py', {type: 'text/x-python'}));
            document.querySelector('#drop-zone').dispatchEvent(
                new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true}));
        })()""" % js(REFERENCE))
        browser.wait("document.querySelector('#submit-name').value === 'dropped_model'",
                     what="the dropped file taken")
        click(browser, "#submit-form button[type=submit]")
        href = browser.wait("document.querySelector('#submit-form [role=status] a')?.getAttribute('href')",
                            what="the submission")
        ids.append(href.rsplit("/", 1)[1])
        assert s.json("GET", "/v1/tasks/" + ids[-1])["reference"] == REFERENCE
        # Newest first, two a page: the dropped task and queued_1, then queued_0.
        rows = "[...document.querySelectorAll('#task-list tr[data-id]')].map(r => r.dataset.id)"
        browser.wait("%s.join() === %s" % (rows, js(",".join([ids[2], ids[1]]))), what="page 1")
        first = s.json("GET", "/v1/tasks?limit=2")
        click(browser, "#page-older")
        browser.wait("%s.join() === %s" % (rows, js(ids[0])), what="page 2")
        assert "cursor=" + first["next_cursor"] in browser.eval("location.hash")
        click(browser, "#page-newer")
        browser.wait("%s.length === 2" % rows, what="page 1 again")
        # Cancel the dropped task from the list.
        click(browser, "#task-list tr[data-id=\"%s\"] button" % ids[2])
        browser.wait("document.querySelector('#task-list tr[data-id=\"%s\"] .badge')?.textContent === 'cancelled'"
                     % ids[2], what="the task cancelled")
        assert s.json("GET", "/v1/tasks/" + ids[2])["status"] == "cancelled"
        # The status filter asks the server.
        set_value(browser, "#filter-status", "cancelled")
        browser.wait("%s.join() === %s" % (rows, js(ids[2])), what="the cancelled ones")
        no_page_errors(browser)
    finally:
        s.stop()


def test_token_is_asked_for_and_kept(browser):
    need_opforge()
    token = "ui-test-token-0123456789"
    s = Server(scripted=False, token=token)
    try:
        task = s.json("POST", "/v1/tasks", {"name": "queued_one", "reference": REFERENCE},
                      token=token)
        browser.navigate(s.url + "/ui/#/tasks/" + task["id"])
        click(browser, "#task-cancel")
        browser.wait("document.querySelector('#token-dialog').open", what="the token dialog")
        assert "Authorization: Bearer" in text(browser, "#token-why")
        set_value(browser, "#token-input", token)
        click(browser, "#token-form button[type=submit]")
        browser.wait("document.querySelector('#task-status')?.textContent === 'cancelled'",
                     what="the task cancelled")
        assert s.json("GET", "/v1/tasks/" + task["id"])["status"] == "cancelled"
        assert browser.eval("sessionStorage.getItem('opforge.token')") == token
        assert text(browser, "#token-button") == "Token ✓"
        # Later writes send it without asking.
        task2 = s.json("POST", "/v1/tasks", {"name": "queued_two", "reference": REFERENCE},
                       token=token)
        browser.navigate(s.url + "/ui/#/tasks/" + task2["id"])
        click(browser, "#task-cancel")
        browser.wait("document.querySelector('#task-status')?.textContent === 'cancelled'",
                     what="the second task cancelled")
        assert not browser.eval("document.querySelector('#token-dialog').open")
        no_page_errors(browser)
    finally:
        s.stop()
