# Unit tests of tests/gpu/bench_targets.py: issue 13's target figures from bench records, checked against values computed by hand.
import json
import sys
from pathlib import Path

import pytest

from conftest import gpu_script


@pytest.fixture(scope="module")
def bench_targets():
    return gpu_script("bench_targets")


def task(path, speedup, correct=True, steps=3, evaluations=4, wall_s=10.0):
    return {"name": Path(path).stem, "file": "kb/" + path, "correct": correct,
            "speedup_vs_eager": speedup, "steps": steps, "evaluations": evaluations,
            "wall_s": wall_s}


TASKS = [
    task("level1/1_Square_matrix_multiplication_.py", 2.0),
    task("level1/63_conv_standard_2D.py", 0.97),              # level-1 conv: in no geomean
    task("level2/1_Conv2D_ReLU_BiasAdd.py", 1.0),
    task("level2/36_ConvTranspose2d_Min.py", 4.0),
    task("level2/9_Matmul_Subtract.py", 0.5, steps=2, evaluations=2),
    task("level3/1_MLP.py", 3.0, wall_s=120.5),
    task("level3/20_MobileNetV2.py", 1.2, correct=False, wall_s=310.0),
]


def test_figures_computed_by_hand(bench_targets):
    f = bench_targets.targets(TASKS)
    assert f["tasks"] == 7 and f["correct"] == 6
    # below 0.98: the conv at 0.97 and the matmul at 0.5, slowest first
    assert f["slower"] == [(0.5, "9_Matmul_Subtract"), (0.97, "63_conv_standard_2D")]
    # level-2 convs: sqrt(1.0 * 4.0) = 2.0 over 2
    assert f["l2_conv"][1] == 2 and f["l2_conv"][0] == pytest.approx(2.0)
    # level 3: only the correct 1_MLP, 3.0
    assert f["l3"] == (pytest.approx(3.0), 1)
    # non-conv of levels 1 and 2: sqrt(2.0 * 0.5) = 1.0 over 2
    assert f["non_conv"][1] == 2 and f["non_conv"][0] == pytest.approx(1.0)
    assert f["l3_wall_s"] == 310.0
    # evaluations 4*6 + 2 = 26 over steps (3+1)*6 + (2+1) = 27
    assert (f["evaluations"], f["steps_with_reference"]) == (26, 27)
    assert f["distinct_share"] == pytest.approx(26 / 27)


def test_table_marks_met_and_missed(bench_targets, tmp_path, capsys):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"tasks": TASKS}))
    assert bench_targets.main([str(path)]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[2] == "| tasks that end with a verified correct program | 6 of 7 | no |"
    assert rows[3].startswith("| tasks whose best is slower than eager beyond 2% | 2 (")
    assert rows[4] == ("| level-2 convolution tasks, geomean over eager (1.25x) | "
                       "2.000x over 2 | yes |")
    assert rows[5] == "| level-3 models, geomean over eager (1.8x) | 3.000x over 1 | yes |"
    assert rows[6].endswith("| 1.000x over 2 | no |")
    assert rows[7] == "| wall time of a level-3 task (300 s) | 310.0 s at most | no |"
    assert rows[8].endswith("26 evaluations for 27 steps with step 0: 96.3% | yes |")


def test_no_level_three_task(bench_targets):
    f = bench_targets.targets([task("level1/19_ReLU.py", 1.5)])
    assert f["l3"] == (None, 0) and f["l3_wall_s"] is None
    table = bench_targets.table(f)
    assert "| level-3 models, geomean over eager (1.8x) | none | - |" in table
    assert "| wall time of a level-3 task (300 s) | none | - |" in table


def test_later_finished_record_replaces_earlier(bench_targets):
    first = [dict(task("level3/2_ShallowWideMLP.py", None, correct=False), finished=False),
             dict(task("level3/1_MLP.py", 2.0), finished=True),
             dict(task("level3/7_GoogleNet.py", 4.0), finished=True)]
    rerun = [dict(task("level3/2_ShallowWideMLP.py", 1.5), finished=True),
             dict(task("level3/1_MLP.py", 9.0), finished=True),
             dict(task("level3/7_GoogleNet.py", None, correct=False), finished=False)]
    merged = bench_targets.merge([first, rerun])
    # the later finished records win; the later unfinished one does not; first-seen order
    assert [(t["name"], t["speedup_vs_eager"]) for t in merged] == [
        ("2_ShallowWideMLP", 1.5), ("1_MLP", 9.0), ("7_GoogleNet", 4.0)]
    f = bench_targets.targets(merged)
    assert (f["tasks"], f["correct"]) == (3, 3)
    assert f["l3"][0] == pytest.approx(54.0 ** (1 / 3))  # cube root of 1.5 * 9.0 * 4.0


def run_dir(tmp_path, name, tasks, checks):
    """A bench_run output folder: bench.json and export.json."""
    d = tmp_path / name
    d.mkdir()
    (d / "bench.json").write_text(json.dumps({"tasks": tasks}))
    (d / "export.json").write_text(json.dumps(checks))
    return str(d / "bench.json")


def check(task_id, ok):
    return {"file": "/root/out/b/export_%s.py" % task_id, "ok": ok, "detail": "-"}


def test_exports_row_counts_checks_by_level(bench_targets, tmp_path, capsys):
    def rec(path, task_id):
        return dict(task(path, 1.5), id=task_id, status="succeeded", finished=True)
    old = run_dir(tmp_path, "old", [rec("level1/19_ReLU.py", "a1"), rec("level2/9_Matmul.py", "b2")],
                  [check("a1", False), check("b2", True), check("zz", True)])
    new = run_dir(tmp_path, "new", [rec("level1/19_ReLU.py", "c3"), rec("level3/1_MLP.py", "d4")],
                  [check("c3", True), check("d4", True)])
    assert bench_targets.main([old, new]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    # 19_ReLU's failed check is replaced by the rerun's pass; "zz" names no task:
    # 3 checked, 3 passed, but fewer than 20, so not met
    assert last == ("| exports passing KernelBench's eval and static checker (every succeeded "
                    "task; at least 20, across levels) | 3 checked (level1 1, level2 1, level3 1), "
                    "3 passed; 3 tasks succeeded | no |")


def test_exports_row_met_when_every_task_passed(bench_targets):
    tasks = [dict(task("level1/%d_T.py" % i, 1.1), status="succeeded") for i in range(20)]
    checks = {"%d_T" % i: ("level1", True) for i in range(20)}
    assert bench_targets.exports_row(tasks, checks)[2] == "yes"
    checks["0_T"] = ("level1", False)
    assert bench_targets.exports_row(tasks, checks)[1].endswith("19 passed; 20 tasks succeeded")
    assert bench_targets.exports_row(tasks, checks)[2] == "no"
    # as many checks as succeeded tasks (21), all passed, but two are of tasks that did
    # not succeed, and two succeeded tasks (19_T, 20_T) have none
    tasks.append(dict(task("level1/20_T.py", 1.1), status="succeeded"))
    checks["0_T"] = ("level1", True)
    checks.pop("19_T")
    checks["98_U"] = ("level2", True)
    checks["99_U"] = ("level2", True)
    row = bench_targets.exports_row(tasks, checks)
    assert row[1] == "21 checked (level1 19, level2 2), 21 passed; 21 tasks succeeded"
    assert row[2] == "no"
