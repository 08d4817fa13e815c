"""Several opforge servers sharing one PostgreSQL database (issue 34): claims taken once,
takeover after kill -9 by lease, release on SIGTERM, device classes, events across
servers, a database migrated by a newer build, and the database server restarting under a
run. Each test gets a fresh database in the module's throwaway cluster (tests/pg/cluster,
stopped at the end pass or fail) and its own servers on the scripted evaluator and the
test proposer, as tests/engine/test_engine.c runs them; the fixture set softmax_a scripts
step k of every task (file (k-1) mod 5: 1.6 ms, compile error, 1.25 ms, wrong, 0.8 ms
against the reference's 2.0 ms), so every figure checked below is computed by hand from
that table or read back with psql.

Needs OPFORGE_BIN, OPFORGE_SCRIPTED_EVALUATOR (default next to the binary),
OPFORGE_ENGINE_FIXTURES (default tests/engine/fixtures), PostgreSQL's server binaries and
psql; without them every test skips and says why. With OPFORGE_BENCH_OUT set, the
figures measured are written there as JSON too (pytest -s prints them)."""
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers as S  # noqa: E402

EAGER_MS = 2.0
# softmax_a (tests/engine/test_engine.c, fixture_sets): outcome and time of step k,
# file (k-1) mod 5.
SOFTMAX_A = [("correct", 1.6), ("compile", None), ("correct", 1.25), ("correctness", None),
             ("correct", 0.8)]
PENALTY = {"compile": -0.5, "correctness": -0.3, "crash": -0.7}
PREFIX_LEN, LAMBDA = 3, 0.7   # the search defaults (docs/architecture.md, "HTAM")
RUNNING_LINE = re.compile(r"worker-\d+: running task ([0-9a-f-]{36})")


# ------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def cluster():
    """The module's throwaway cluster, stopped at the end pass or fail; every test skips
    (saying why) where PostgreSQL or the binaries are missing."""
    why = S.missing_prerequisites()
    if why:
        print("skipping the multi-server tests: %s" % why)
        pytest.skip(why)
    c = S.Cluster()
    try:
        yield c
    finally:
        c.stop()


class Fleet:
    """The servers of one test, on its fresh database (migrated by the first to start)."""

    def __init__(self, store):
        self.store = store
        self.servers = []

    def start(self, name, **kw):
        s = S.Server(name, self.store, **kw)
        self.servers.append(s)
        return s.start()


@pytest.fixture
def fleet(request, cluster):
    """At the end every server still running is killed; when the test failed, each one's
    command line and log tail are printed and its temp dir (data/, server.log) is kept."""
    f = Fleet(cluster.create_database())
    failed_before = request.session.testsfailed
    yield f
    failed = request.session.testsfailed > failed_before  # the call's report is in by now
    for s in f.servers:
        s.kill()
        if failed:
            print("\n----- server %s: %s\nlog %s, its tail:\n%s"
                  % (s.name, " ".join(s.argv[1:]), s.log_path, s.log_tail(6000)))
        else:
            s.remove()


# ------------------------------------------------------------------ the fixture set

def script(step):
    return SOFTMAX_A[(step - 1) % len(SOFTMAX_A)]


def near(got, want, eps=1e-9):
    return abs(got - want) <= eps * (1.0 + abs(want))


# ------------------------------------------------------------------ checks shared by tests

def runs_by_server(fleet_servers):
    """{server name: [task ids in its log's "running task" lines, one per claim]}."""
    return {s.name: RUNNING_LINE.findall(s.log_text()) for s in fleet_servers}


def expected_reward(step, parent_step):
    """docs/architecture.md, "HTAM": ln(t_parent / t) for a correct step, the parent being
    the node expanded (the reference, or a failed node, counts as eager's 2.0 ms); a fixed
    penalty otherwise."""
    outcome, ms = script(step)
    if outcome != "correct":
        return PENALTY[outcome]
    t_parent = EAGER_MS
    if parent_step and script(parent_step)[0] == "correct":
        t_parent = script(parent_step)[1]
    return math.log(t_parent / ms)


def check_finished_tasks(db, bases, ids, steps, memory_before):
    """Every task of ids succeeded with exactly `steps` steps, each committed once; events
    contiguous with one `finished`; candidates unique; and the memory's statistics moved
    by exactly what the step events say (psql). bases: server URLs to read events from
    (taken in turn). Returns the step events by task."""
    ids = list(ids)
    statuses = S.task_statuses(db)
    assert sorted(set(statuses[i] for i in ids)) == ["succeeded"], \
        {i: statuses[i] for i in ids if statuses[i] != "succeeded"}
    # The database: no claim left, progress at the budget, events and candidates counted.
    assert S.psql(db, "SELECT id FROM tasks WHERE claimed_by IS NOT NULL OR claim_instance IS NOT NULL") == []
    rows = S.psql(db, "SELECT id, step FROM tasks")
    assert {r[0]: int(r[1]) for r in rows if r[0] in set(ids)} == {i: steps for i in ids}
    ev_rows = S.psql(db, "SELECT task_id, count(*), count(DISTINCT seq), min(seq), max(seq),"
                         " sum(CASE WHEN type = 'finished' THEN 1 ELSE 0 END),"
                         " sum(CASE WHEN type = 'step' THEN 1 ELSE 0 END) FROM events GROUP BY task_id")
    want_events = steps + 6  # queued, running, profiled, step 0, steps, succeeded, finished
    per_task = {r[0]: tuple(int(v) for v in r[1:]) for r in ev_rows}
    for i in ids:
        assert per_task[i] == (want_events, want_events, 1, want_events, 1, steps + 1), (i, per_task[i])
    cand_rows = S.psql(db, "SELECT task_id, step, id, parent_id, direction, step_kind FROM candidates")
    dup = S.psql(db, "SELECT task_id, step, count(*) FROM candidates GROUP BY task_id, step HAVING count(*) > 1")
    assert dup == [], "a step's candidate stored twice: %s" % dup[:5]
    by_task = {}
    cand_by_id = {}
    for task_id, step, cid, parent, direction, kind in cand_rows:
        by_task.setdefault(task_id, {})[int(step)] = cid
        cand_by_id[cid] = (task_id, int(step), parent, direction, kind)
    for i in ids:
        assert sorted(by_task.get(i, {})) == list(range(steps + 1)), (i, sorted(by_task.get(i, {})))
    # The events through the API, in turn from each server: exact sequence and contents.
    steps_of = {}
    for n, i in enumerate(ids):
        events = S.get_events(bases[n % len(bases)], i)
        types = [e["type"] for e in events]
        assert types == ["queued", "running", "profiled", "step"] + ["step"] * steps + \
            ["succeeded", "finished"], (i, types)
        assert [e["seq"] for e in events] == list(range(1, want_events + 1)), i
        assert events[3]["data"]["step"] == 0 and events[3]["data"]["kind"] == "reference"
        step_data = [e["data"] for e in events[4:4 + steps]]
        assert [d["step"] for d in step_data] == list(range(1, steps + 1)), i
        correct, best = 1, EAGER_MS
        for d in step_data:
            k = d["step"]
            outcome, ms = script(k)
            assert d["outcome"] == outcome, (i, k, d)
            assert d["candidate"] == by_task[i][k], (i, k)
            cand = cand_by_id[d["candidate"]]
            assert cand[3] == d["direction"] and cand[4] == d["kind"], (i, k, cand, d)
            # A large step from the reference names no parent (the tree's root).
            parent = cand_by_id[cand[2]] if cand[2] else (i, 0, None, None, "reference")
            assert parent[0] == i and parent[1] < k, (i, k, cand)
            want_r = expected_reward(k, parent[1] if parent[4] != "reference" else 0)
            assert near(d["reward"], want_r), (i, k, d["reward"], want_r)
            if outcome == "correct":
                assert near(d["time_ms"], ms)
                correct += 1
                best = min(best, ms)
        fin = events[-1]["data"]
        assert (fin["status"], fin["steps"], fin["correct"], fin["stop_reason"]) == \
            ("succeeded", steps, correct, "budget"), (i, fin)
        assert near(fin["best_speedup"], EAGER_MS / best), (i, fin)
        steps_of[i] = step_data
    check_memory(db, memory_before, steps_of, cand_by_id)
    return steps_of


def tally(steps_of, cand_by_id):
    """The memory statistics the steps add (test_engine.c, tally_runs): per direction n,
    successes, improvements, reward sum; per strategy n, successes, reward sum; per edge
    of the step's prefix (directions from the expanded node up, repeats collapsed, at most
    3, weights exp(-0.7 i) normalized) n and reward sum, unless the step kept its node's
    direction."""
    g, l, e = {}, {}, {}
    for task_steps in steps_of.values():
        for d in task_steps:
            r = d["reward"]
            ok = d["outcome"] == "correct"
            t = g.setdefault(d["direction"], [0, 0, 0, 0.0])
            t[0] += 1
            t[1] += ok
            t[2] += ok and r > 0
            t[3] += r
            if d.get("strategy"):
                t = l.setdefault(d["strategy"], [0, 0, 0.0])
                t[0] += 1
                t[1] += ok
                t[2] += r
            if d.get("direction_kept"):
                continue
            prefix = []
            p = cand_by_id[d["candidate"]][2]
            while p and cand_by_id[p][4] != "reference" and len(prefix) < PREFIX_LEN:
                direction = cand_by_id[p][3]
                if not (prefix and prefix[-1] == direction):
                    prefix.append(direction)
                p = cand_by_id[p][2]
            weights = [math.exp(-LAMBDA * k) for k in range(len(prefix))]
            for k, frm in enumerate(prefix):
                w = weights[k] / sum(weights)
                t = e.setdefault("%s>%s" % (frm, d["direction"]), [0.0, 0.0])
                t[0] += w
                t[1] += w * r
    return g, l, e


def check_memory(db, before, steps_of, cand_by_id):
    """The memory moved by exactly the tally of the committed steps: per direction,
    strategy and edge (n, successes, reward sum), and in total n by the number of steps."""
    after = S.memory_totals(db)
    g, l, e = tally(steps_of, cand_by_id)
    total_steps = sum(len(v) for v in steps_of.values())
    dn = sum(after["global"][k][0] for k in after["global"]) - sum(before["global"][k][0] for k in before["global"])
    assert dn == total_steps, "total n over the directions moved by %d, want %d (the committed steps)" % (dn, total_steps)
    for k, (n, succ, impr, rsum) in after["global"].items():
        b = before["global"].get(k, (0, 0, 0, 0.0))
        want = g.get(k, [0, 0, 0, 0.0])
        assert (n - b[0], succ - b[1], impr - b[2]) == tuple(want[:3]), ("global", k, n - b[0], want)
        assert near(rsum - b[3], want[3], 1e-8), ("global reward_sum", k, rsum - b[3], want[3])
    assert set(g) <= set(after["global"])
    for k, (n, succ, rsum) in after["local"].items():
        b = before["local"].get(k, (0, 0, 0.0))
        want = l.get(k, [0, 0, 0.0])
        assert (n - b[0], succ - b[1]) == tuple(want[:2]), ("local", k, n - b[0], want)
        assert near(rsum - b[2], want[2], 1e-8), ("local reward_sum", k, rsum - b[2], want[2])
    assert set(l) <= set(after["local"])
    for k, (n, rsum) in after["edges"].items():
        b = before["edges"].get(k, (0.0, 0.0))
        want = e.get(k, [0.0, 0.0])
        assert near(n - b[0], want[0], 1e-8), ("edge n", k, n - b[0], want[0])
        assert near(rsum - b[1], want[1], 1e-8), ("edge reward_sum", k, rsum - b[1], want[1])
    assert set(e) <= set(after["edges"])


def instance_of(server):
    """The server's claim instance, from GET /v1/servers ("this")."""
    doc = server.get("/v1/servers")
    mine = [s for s in doc["servers"] if s["this"]]
    assert len(mine) == 1, doc
    return mine[0]["instance"]


def report(name, title, rows, figures):
    S.print_table(title, rows)
    path = S.write_bench(name, figures)
    if path:
        print("figures written to %s" % path)


# ------------------------------------------------------------------ a. 300 tasks, 3 servers

N_TASKS, STEPS_A, DELAY_A = 300, 3, 10


def test_300_tasks_on_three_servers_each_run_once(fleet):
    servers = [fleet.start(n, workers=8, delay_ms=DELAY_A) for n in "abc"]
    db = fleet.store
    listed = servers[0].get("/v1/servers")
    assert listed["store"] == "postgresql"
    assert sorted(s["instance"] for s in listed["servers"]) == sorted(instance_of(s) for s in servers)
    assert [s["slots"] for s in listed["servers"]] == [8, 8, 8]
    before = S.memory_totals(db)
    t0 = time.monotonic()
    ids = [servers[k % 3].submit(S.submission(steps=STEPS_A, seed=k)) for k in range(N_TASKS)]
    submitted = time.monotonic() - t0
    # While they run, GET /v1/servers shows claims; sample which servers hold tasks.
    holders = set()
    while True:
        doc = servers[1].get("/v1/servers")
        holders |= {s["instance"] for s in doc["servers"] if s["tasks"]}
        if all(st in S.FINAL for st in S.task_statuses(db).values()):
            break
        assert time.monotonic() - t0 < 240, "300 tasks not final after 240 s"
        time.sleep(0.1)
    wall = time.monotonic() - t0
    check_finished_tasks(db, [s.url for s in servers], ids, STEPS_A, before)
    # Claimed exactly once: each task's "running task" line in exactly one log.
    runs = runs_by_server(servers)
    claims = {}
    for name, tasks in runs.items():
        for t in tasks:
            claims.setdefault(t, []).append(name)
    assert sorted(claims) == sorted(ids)
    twice = {t: v for t, v in claims.items() if len(v) != 1}
    if twice:
        why = [line for srv in servers for line in srv.log_text().splitlines()
               if any(t in line for t in twice) and (" warn " in line or " error " in line)
               or "still busy" in line]
        raise AssertionError("%d task(s) claimed more than once %s; the servers' warnings:\n%s"
                             % (len(twice), twice, "\n".join(why[:20])))
    counts = {name: len(tasks) for name, tasks in runs.items()}
    assert sum(counts.values()) == N_TASKS
    assert all(counts[n] > 0 for n in "abc"), counts
    assert len(holders) == 3, "GET /v1/servers showed claims of %d server(s) only" % len(holders)
    figures = {"tasks": N_TASKS, "steps_per_task": STEPS_A, "evaluator_delay_ms": DELAY_A,
               "servers": 3, "slots_per_server": 8, "submit_s": round(submitted, 3),
               "wall_s": round(wall, 3), "tasks_per_s": round(N_TASKS / wall, 1),
               "steps_per_s": round(N_TASKS * STEPS_A / wall, 1), "tasks_by_server": counts,
               "servers_seen_holding_claims": len(holders)}
    report("multi_server_300_tasks", "300 tasks on 3 servers x 8 slots (PostgreSQL)", [
        ("tasks x steps", "%d x %d (evaluator delay %d ms)" % (N_TASKS, STEPS_A, DELAY_A)),
        ("submit 300 (sequential POSTs)", "%.2f s" % submitted),
        ("wall, first POST to all final", "%.2f s" % wall),
        ("throughput", "%.1f tasks/s, %.1f steps/s" % (N_TASKS / wall, N_TASKS * STEPS_A / wall)),
        ("tasks run by a / b / c", "%d / %d / %d" % (counts["a"], counts["b"], counts["c"])),
        ("claims taken twice", "0"),
        ("memory: total n moved", "%d (= committed steps)" % (N_TASKS * STEPS_A)),
    ], figures)


# ------------------------------------------------------------------ b. kill -9 and the lease

# softmax_a has 5 distinct programs: a 6th step would repeat one, and the task would end
# space_exhausted; so tasks here run 5 steps at most and are made long by the evaluator's
# delay (profile, reference and steps: about 2.8 s a task at 400 ms).
STEPS_BC, DELAY_BC = 5, 400
VICTIM_TASKS, OTHER_TASKS = 4, 8


def start_with_victim(fleet, **kw):
    """Servers a, b, c (8 slots each); c, the one the test stops, starts first and claims
    VICTIM_TASKS tasks alone; then a and b start and OTHER_TASKS more tasks are submitted
    round-robin to the three. a and b keep free slots for a takeover. Returns the
    servers, the task ids and the memory before any step."""
    c = fleet.start("c", workers=8, delay_ms=DELAY_BC, **kw)
    db = fleet.store
    before = S.memory_totals(db)
    ids = [c.submit(S.submission(steps=STEPS_BC, seed=k)) for k in range(VICTIM_TASKS)]
    victim = instance_of(c)
    S.wait_until(lambda: S.psql(db, "SELECT count(*) FROM tasks WHERE claim_instance = '%s'"
                                % victim) == [[str(VICTIM_TASKS)]], 20, 0.05, "c to claim its tasks")
    a = fleet.start("a", workers=8, delay_ms=DELAY_BC, **kw)
    b = fleet.start("b", workers=8, delay_ms=DELAY_BC, **kw)
    servers = [a, b, c]
    ids += [servers[k % 3].submit(S.submission(steps=STEPS_BC, seed=100 + k)) for k in range(OTHER_TASKS)]
    return servers, ids, before


LEASE_B = 3
# The bound on the takeover, from the kill: the lease (the claims' last renewal, or the
# claim itself, is at most the kill time, so every claim of the dead server has run out by
# kill + lease), one renewal period of margin as the issue asks, then the other servers'
# idle workers find the expired claim at their next poll (engine/workers.c, every 500 ms:
# nothing notifies an expiry), plus this test's own psql poll (50 ms and a psql start) and
# a loaded 2-core machine's scheduling: 1.0 s.
TAKEOVER_SLACK = 1.0


def test_kill9_tasks_taken_over_after_the_lease(fleet):
    servers, ids, before = start_with_victim(fleet, lease=LEASE_B)
    db = fleet.store
    a, b, c = servers
    victim = instance_of(c)

    def victim_has_progress():
        rows = S.psql(db, "SELECT id, step FROM tasks WHERE claim_instance = '%s'" % victim)
        return rows if rows and any(int(r[1]) >= 2 for r in rows) else None
    S.wait_until(victim_has_progress, 30, 0.05, "server c to commit 2 steps of a task")
    t_kill, wall_kill = time.monotonic(), time.time()
    status = c.kill9()
    assert status == -signal.SIGKILL
    held = S.psql(db, "SELECT id, step, claim_expires_ms FROM tasks WHERE claim_instance = '%s'"
                      " AND status = 'running'" % victim)
    assert held, "server c held no task at the kill"
    orphans = {r[0]: int(r[1]) for r in held}
    taken = {}
    while len(taken) < len(orphans):
        rows = S.psql(db, "SELECT id, claim_instance, status FROM tasks WHERE id IN (%s)"
                          % ",".join("'%s'" % i for i in orphans))
        now = time.monotonic() - t_kill
        for tid, inst, st in rows:
            if tid not in taken and ((inst and inst != victim) or st in S.FINAL):
                taken[tid] = (now, inst)
        assert now < LEASE_B * 4 + 10, "not taken over after %.1f s: %s" % (now, rows)
        time.sleep(0.05)
    bound = LEASE_B + LEASE_B / 3 + TAKEOVER_SLACK
    delays = sorted(v[0] for v in taken.values())
    assert delays[-1] <= bound, "takeover took %.2f s, bound %.2f s" % (delays[-1], bound)
    # Not before its lease ran out (the claim's end as the dead server last renewed it,
    # from the kill; 50 ms for the two clocks read at the kill): it is the lease that
    # freed them, nothing else.
    for tid, step, expires_ms in held:
        expires_after_kill = int(expires_ms) / 1000.0 - wall_kill
        assert 0 < expires_after_kill <= LEASE_B + 0.05, (tid, expires_after_kill)
        assert taken[tid][0] >= expires_after_kill - 0.05, (tid, taken[tid][0], expires_after_kill)
    assert all(v[1] in (instance_of(a), instance_of(b)) for v in taken.values() if v[1]), taken
    # The dead server leaves GET /v1/servers once its row is a lease old.
    time.sleep(max(0.0, t_kill + LEASE_B + 0.3 - time.monotonic()))
    assert sorted(x["instance"] for x in a.get("/v1/servers")["servers"]) == \
        sorted([instance_of(a), instance_of(b)])
    S.wait_all_final(db, ids, 90)
    check_finished_tasks(db, [a.url, b.url], ids, STEPS_BC, before)
    # Each orphan resumed elsewhere from its last committed step: it appears in a's or b's
    # "running task" lines after c's.
    runs = runs_by_server(servers)
    for tid in orphans:
        assert tid in runs["c"] and (tid in runs["a"] or tid in runs["b"]), tid
    figures = {"lease_s": LEASE_B, "orphaned_tasks": len(orphans),
               "takeover_s": [round(d, 3) for d in delays], "bound_s": bound,
               "steps_at_kill": sorted(orphans.values())}
    report("multi_server_kill9", "kill -9 of one of 3 servers, --lease-seconds %d" % LEASE_B, [
        ("tasks held by the killed server", "%d (at steps %s)" % (len(orphans), sorted(orphans.values()))),
        ("takeover after the kill, min / max", "%.2f s / %.2f s" % (delays[0], delays[-1])),
        ("bound (lease + lease/3 + %.1f s)" % TAKEOVER_SLACK, "%.2f s" % bound),
        ("steps committed twice", "0"),
    ], figures)


# ------------------------------------------------------------------ c. SIGTERM releases claims

LEASE_C, GRACE_C = 60, 1


def test_sigterm_releases_claims_at_once(fleet):
    servers, ids, before = start_with_victim(fleet, lease=LEASE_C, grace=GRACE_C)
    db = fleet.store
    a, b, c = servers
    victim = instance_of(c)

    def victim_has_progress():
        rows = S.psql(db, "SELECT id, step FROM tasks WHERE claim_instance = '%s'" % victim)
        return rows if rows and any(int(r[1]) >= 1 for r in rows) else None
    S.wait_until(victim_has_progress, 30, 0.05, "server c to commit a step")
    status, took = c.terminate()
    t_exit = time.monotonic()
    assert status == 0, "SIGTERM: exit status %s" % status
    # Within its grace: the evaluations in flight (400 ms) reach a checkpoint inside the
    # 1 s grace, which bounds the wait for the workers; closing after it (evaluators,
    # lease keeper, the claims' release, the store) gets 1.5 s on a loaded 2-core machine.
    assert took <= GRACE_C + 1.5, "exit took %.2f s" % took
    assert "stopped cleanly" in c.log_text()
    # Released at once: nothing in the database is held by c any more.
    assert S.psql(db, "SELECT id FROM tasks WHERE claim_instance = '%s'" % victim) == []
    ran = set(RUNNING_LINE.findall(c.log_text()))
    unfinished = {r[0] for r in S.psql(db, "SELECT id FROM tasks WHERE status = 'running'")} & ran
    assert unfinished, "server c left no running task behind"
    rows = S.psql(db, "SELECT id, claimed_by, claim_instance, status FROM tasks")
    for tid, by, inst, st in rows:
        if tid in ran:
            assert inst != victim and (inst is None or inst in (instance_of(a), instance_of(b))), (tid, inst)
    # Its row is gone from the servers table.
    assert sorted(s["instance"] for s in a.get("/v1/servers")["servers"]) == \
        sorted([instance_of(a), instance_of(b)])
    # Taken by another server long before a 60 s lease could have run out.
    taken = {}
    while len(taken) < len(unfinished):
        now = time.monotonic() - t_exit
        for tid, inst, st in S.psql(db, "SELECT id, claim_instance, status FROM tasks"):
            if tid in unfinished and tid not in taken and (inst or st in S.FINAL):
                taken[tid] = now
        assert now < 20, "released tasks not taken after 20 s: %s" % (unfinished - set(taken))
        time.sleep(0.05)
    S.wait_all_final(db, ids, 60)
    finished_after = time.monotonic() - t_exit
    assert finished_after < LEASE_C / 2, finished_after
    check_finished_tasks(db, [a.url, b.url], ids, STEPS_BC, before)
    delays = sorted(taken.values())
    figures = {"lease_s": LEASE_C, "grace_s": GRACE_C, "exit_s": round(took, 3),
               "released_tasks": len(unfinished), "retaken_s": [round(d, 3) for d in delays],
               "all_final_after_exit_s": round(finished_after, 3)}
    report("multi_server_sigterm", "SIGTERM of one of 3 servers, --lease-seconds %d" % LEASE_C, [
        ("exit status / time to exit", "0 / %.2f s (grace %d s)" % (took, GRACE_C)),
        ("claims left after exit", "0"),
        ("its running tasks taken by others", "%d, after %s s" % (
            len(unfinished), ", ".join("%.2f" % d for d in delays) or "-")),
        ("all tasks final after its exit", "%.2f s (lease %d s)" % (finished_after, LEASE_C)),
    ], figures)


# ------------------------------------------------------------------ d. device classes

def test_device_classes_route_tasks(fleet):
    a = fleet.start("a", workers=2, delay_ms=20, devices=["H200"])
    b = fleet.start("b", workers=2, delay_ms=20, devices=["H100"])
    db = fleet.store
    listed = {s["instance"]: s["devices"] for s in a.get("/v1/servers")["servers"]}
    assert listed == {instance_of(a): ["H200"], instance_of(b): ["H100"]}
    before = S.memory_totals(db)
    on_h100 = [a.submit(S.submission(steps=2, seed=k, device="H100")) for k in range(4)]
    lower = a.submit(S.submission(steps=2, seed=9, device="h100"))  # upper-cased
    on_b200 = a.submit(S.submission(steps=2, seed=10, device="B200"))
    task = a.get("/v1/tasks/%s" % lower)
    assert task["options"]["device"] == "H100"
    S.wait_all_final(db, on_h100 + [lower], 60)
    runs = runs_by_server([a, b])
    assert sorted(runs["b"]) == sorted(on_h100 + [lower])
    assert runs["a"] == []
    # B200: nobody serves it; it stays queued through several of the workers' polls (500 ms).
    time.sleep(2.0)
    assert S.task_statuses(db)[on_b200] == "queued"
    for srv in (a, b):
        waiting = srv.get("/v1/tasks/%s" % on_b200)["waiting"]
        assert waiting["device"] == "B200"
        assert waiting["available"] == ["H100", "H200"]
        assert waiting["reason"] == ("no live server serves device class 'B200' (the live ones "
                                     "serve [\"H100\",\"H200\"]); the task waits for one that does")
    assert "waiting" not in a.get("/v1/tasks/%s" % lower)
    c = fleet.start("c", workers=2, delay_ms=20, devices=["B200"])
    S.wait_all_final(db, [on_b200], 30)
    runs = runs_by_server([a, b, c])
    assert runs["c"] == [on_b200] and on_b200 not in runs["a"] + runs["b"]
    assert "waiting" not in c.get("/v1/tasks/%s" % on_b200)
    check_finished_tasks(db, [a.url, b.url, c.url], on_h100 + [lower, on_b200], 2, before)


# ------------------------------------------------------------------ e. events across servers

def test_events_stream_across_servers(fleet):
    a = fleet.start("a", workers=8, delay_ms=50)                      # runs the tasks
    b = fleet.start("b", gpus="none", evaluator=False)                # only answers the API
    db = fleet.store
    before = S.memory_totals(db)
    steps, n_tasks = 5, 12
    ids, followers = [], []
    for k in range(n_tasks):
        tid = b.submit(S.submission(steps=steps, seed=k))
        fb, fa = S.EventFollower(b.url, tid), S.EventFollower(a.url, tid)
        fb.start()
        fa.start()
        fb.connected.wait(10)
        fa.connected.wait(10)
        ids.append(tid)
        followers.append((tid, fb, fa, time.time()))
    S.wait_all_final(db, ids, 60)
    cross, vs_local = [], []
    for tid, fb, fa, connected in followers:
        fb.join(30)
        fa.join(30)
        assert not fb.is_alive() and not fa.is_alive(), "a stream did not end with its task"
        assert fb.error is None and fa.error is None, (fb.error, fa.error)
        seqs = [e["seq"] for e, _, _ in fb.events]
        assert seqs == list(range(1, steps + 7)), seqs
        assert [e for e, _, _ in fb.events] == [e for e, _, _ in fa.events]
        assert [e for e, _, _ in fb.events] == S.get_events(b.url, tid)
        local = {e["seq"]: mono for e, _, mono in fa.events}
        for e, wall, mono in fb.events:
            if S.event_epoch(e) < connected:
                continue  # history sent at connection, not a live event
            cross.append((wall - S.event_epoch(e)) * 1000.0)
            vs_local.append((mono - local[e["seq"]]) * 1000.0)
    runs = runs_by_server([a, b])
    assert sorted(runs["a"]) == sorted(ids) and runs["b"] == []
    check_finished_tasks(db, [a.url, b.url], ids, steps, before)
    assert len(cross) >= n_tasks * steps, "only %d live events measured" % len(cross)
    p50, p99 = S.percentile(cross, 50), S.percentile(cross, 99)
    d50, d99 = S.percentile(vs_local, 50), S.percentile(vs_local, 99)
    assert p99 < 2000.0, "cross-server event latency p99 %.1f ms" % p99
    figures = {"events": len(cross), "commit_to_b_ms": {"p50": p50, "p99": p99, "max": max(cross)},
               "b_minus_a_ms": {"p50": d50, "p99": d99, "max": max(vs_local)}}
    report("multi_server_sse", "Cross-server SSE (server a runs, a stream on server b follows)", [
        ("live events measured", "%d (%d tasks x %d steps)" % (len(cross), n_tasks, steps)),
        ("event time -> arrival on b, p50 / p99", "%.1f ms / %.1f ms (event time has 1 ms resolution)" % (p50, p99)),
        ("arrival on b - arrival on a, p50 / p99", "%.1f ms / %.1f ms" % (d50, d99)),
    ], figures)


# ------------------------------------------------------------------ f. a newer schema

def test_database_migrated_by_a_newer_build_is_refused(fleet):
    first = fleet.start("first", gpus="none", evaluator=False)
    db = fleet.store
    status, _ = first.terminate()
    assert status == 0
    newest = S.newest_migration()
    assert S.psql(db, "SELECT max(version) FROM schema_migrations") == [[str(newest)]]
    S.psql(db, "INSERT INTO schema_migrations VALUES (999, '0999_future.sql', 'now')")
    with tempfile.TemporaryDirectory(prefix="opforge-ms-newer-") as data:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPFORGE_")}
        out = subprocess.run([S.opforge_bin(), "serve", "--listen", "127.0.0.1:0", "--data", data,
                              "--gpus", "none", "--store", db],
                             capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 2, (out.returncode, out.stderr[-2000:])
    assert out.stdout == ""  # never listened
    want = "has schema version 999, newer than this build's %d: a newer opforge migrated it" % newest
    assert want in out.stderr, out.stderr[-2000:]
    # Nothing was changed by the refused server.
    assert S.psql(db, "SELECT version FROM schema_migrations ORDER BY version DESC LIMIT 2") == \
        [["999"], [str(newest)]]
    assert S.psql(db, "SELECT count(*) FROM servers") == [["0"]]


# ------------------------------------------------------------------ g. PostgreSQL restarts

# After PostgreSQL is back (tests/pg/cluster restart waits until it accepts connections),
# requests started this long after are answered as usual: a connection that failed tries
# again at most once a second (store/db_pg.c, PG_RETRY_MS), plus 0.5 s for a request
# already on its way. The poll goes on for POLL_AFTER_S after the restart.
BACK_MARGIN_S = 1.5
POLL_AFTER_S = 3.0
# Every task is final this long after the restart: 24 tasks of 7 evaluations of 200 ms
# on 24 slots take about 1.5 s; a step whose commit failed is retried "after a pause"
# (docs/architecture.md, "Store failures"), not after a lease.
FINAL_AFTER_RESTART_S = 20


def test_cluster_restart_during_a_run(fleet, cluster):
    servers = [fleet.start(n, workers=8, delay_ms=200) for n in "abc"]   # default lease, 60 s
    db = fleet.store
    a = servers[0]
    before = S.memory_totals(db)
    ids = [servers[k % 3].submit(S.submission(steps=5, seed=k)) for k in range(24)]
    S.wait_until(lambda: S.psql(db, "SELECT count(*) FROM tasks WHERE step >= 1")[0][0] != "0",
                 30, 0.05, "a committed step")
    probe_task = ids[0]
    seen = []          # (started, ended, what, server, status, retry-after, code)
    posted = []        # ids created by POSTs answered 202 meanwhile
    stop = threading.Event()

    def poll():
        targets = [("GET task", "GET", "/v1/tasks/%s" % probe_task, None),
                   ("GET list", "GET", "/v1/tasks?limit=5", None),
                   ("POST task", "POST", "/v1/tasks", S.submission(steps=5, seed=99)),
                   ("readyz", "GET", "/readyz", None)]
        k = 0
        while not stop.is_set():
            what, method, path, body = targets[k % len(targets)]
            srv = servers[(k // len(targets)) % 3]
            k += 1
            started = time.monotonic()
            try:
                r = S.request(srv.url, method, path, body, timeout=20)
            except OSError as e:
                seen.append((started, time.monotonic(), what, srv.name, "error: %s" % e, None, None))
                continue
            code = None
            if r.status >= 400:
                try:
                    code = r.json()["error"]["code"]
                except Exception:
                    code = r.body[:200]
            elif method == "POST" and r.status == 202:
                posted.append(r.json()["id"])
            seen.append((started, time.monotonic(), what, srv.name, r.status,
                         r.headers.get("retry-after"), code))
            time.sleep(0.005)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    cluster.restart()
    t1 = time.monotonic()
    time.sleep(POLL_AFTER_S)
    stop.set()
    poller.join(30)
    # Every finding is collected first, so that one run reports them all.
    problems = []
    errors = [x for x in seen if isinstance(x[4], str)]
    if errors:
        problems.append("requests that got no HTTP answer: %s" % errors[:5])
    other = [x for x in seen if x[4] not in (200, 202, 503)]
    if other:
        problems.append("answers other than 200, 202 and 503: %s" % other[:10])
    data_503 = [x for x in seen if x[2] != "readyz" and x[4] == 503]
    ready_503 = [x for x in seen if x[2] == "readyz" and x[4] == 503]
    if not data_503:
        problems.append("no API 503 seen during the restart (%d requests in %.2f s)"
                        % (len(seen), t1 - t0))
    if not ready_503:
        problems.append("/readyz never answered 503 during the restart")
    wrong = sorted({(x[2], x[5], x[6]) for x in data_503 if (x[5], x[6]) != ("5", "store_unavailable")})
    if wrong:
        problems.append("API 503s without Retry-After: 5 and code store_unavailable"
                        " (endpoint, Retry-After, code): %s" % wrong)
    wrong = sorted({(x[5], x[6]) for x in ready_503 if (x[5], x[6]) != ("5", "not_ready")})
    if wrong:
        problems.append("/readyz 503s without Retry-After: 5 and code not_ready: %s" % wrong)
    late = [(round(x[0] - t1, 3), x[2], x[3], x[4], x[6]) for x in seen
            if x[0] >= t1 + BACK_MARGIN_S and x[4] not in (200, 202)]
    if late:
        problems.append("requests started %.1f s or more after PostgreSQL was back still failed"
                        " (s after, endpoint, server, status, code): %s" % (BACK_MARGIN_S, late[:10]))
    # Once it is back, every server answers every request: more requests than each has
    # HTTP threads (8), each thread's connection to the database used at least once.
    sweep = {}
    for srv in servers:
        for _ in range(40):
            r = S.request(srv.url, "GET", "/v1/tasks/%s" % probe_task)
            sweep.setdefault(srv.name, []).append(r.status)
    failed = {n: len([st for st in v if st != 200]) for n, v in sweep.items()}
    if any(failed.values()):
        problems.append("after the restart, GET /v1/tasks/{id} x 40 per server: non-200 answers %s"
                        " (first request of a thread whose database connection the restart"
                        " broke?)" % failed)
    try:
        S.wait_all_final(db, ids + posted, FINAL_AFTER_RESTART_S - (time.monotonic() - t1))
    except AssertionError as e:
        problems.append("not every task final %d s after the restart: %s" % (FINAL_AFTER_RESTART_S, e))
        S.wait_all_final(db, ids + posted, 120)
    done_after = time.monotonic() - t1
    outage = [x[1] for x in data_503 + ready_503]
    figures = {"restart_s": round(t1 - t0, 3), "requests": len(seen),
               "api_503": len(data_503), "readyz_503": len(ready_503),
               "first_503_after_restart_start_s": round(min(outage) - t0, 3) if outage else None,
               "last_503_after_restart_end_s": round(max(outage) - t1, 3) if outage else None,
               "tasks": len(ids + posted), "all_final_after_restart_s": round(done_after, 3)}
    report("multi_server_pg_restart", "tests/pg/cluster restart under 3 servers (lease 60 s)", [
        ("restart took", "%.2f s" % (t1 - t0)),
        ("requests during it", "%d: %d API 503, %d /readyz 503"
         % (len(seen), len(data_503), len(ready_503))),
        ("503s from / to", "%+.2f s after its start / %+.2f s after its end"
         % (min(outage) - t0, max(outage) - t1) if outage else "-"),
        ("tasks (POSTs answered 202 included)", "%d" % len(ids + posted)),
        ("all final after the restart", "%.2f s" % done_after),
    ], figures)
    assert problems == [], "\n".join(problems)
    assert S.get_json(a.url, "/readyz")["status"] == "ready"
    check_finished_tasks(db, [x.url for x in servers], ids + posted, 5, before)
