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


def test_rerun_replaces_unfinished_records(bench_targets):
    first = [dict(task("level3/2_ShallowWideMLP.py", None, correct=False), finished=False),
             dict(task("level3/1_MLP.py", 2.0), finished=True)]
    rerun = [dict(task("level3/2_ShallowWideMLP.py", 1.5), finished=True),
             dict(task("level3/1_MLP.py", 9.0), finished=True)]
    merged = bench_targets.merge([first, rerun])
    # the unfinished record gives way; a finished one stands; first-seen order
    assert [(t["name"], t["speedup_vs_eager"]) for t in merged] == [
        ("2_ShallowWideMLP", 1.5), ("1_MLP", 2.0)]
    f = bench_targets.targets(merged)
    assert (f["tasks"], f["correct"]) == (2, 2)
    assert f["l3"][0] == pytest.approx(3.0 ** 0.5)  # sqrt(1.5 * 2.0)
