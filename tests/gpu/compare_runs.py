"""Compares the timings of two tests/gpu/run outputs (their stdout), for instance one under
the evaluator's sandbox and one with OPFORGE_SANDBOX=none: the eager timings of the
fixture tasks, their candidates' times, and the builtin families' best times, row by row
with the ratio B/A, and the geometric mean of those ratios per table.
Usage: python3 tests/gpu/compare_runs.py A.txt B.txt"""
import math
import re
import sys

NUM = r"([0-9]+\.[0-9]+)"


def tables(path):
    """{(table, row name): ms} of one run's output."""
    out, table = {}, None
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if line.startswith("eager timing against"):
            table = "eager"
        elif line.startswith("builtin proposer,"):
            table = "family"
        elif line.endswith(" candidates:"):
            table = "candidates " + line[:-len(" candidates:")]
        elif not line.strip():
            table = None if table in ("eager", "family") else table
        elif table == "eager":
            m = re.match(r"(\S+)\s+" + NUM, line)
            if m:
                out[("eager", m.group(1))] = float(m.group(2))
        elif table == "family":
            m = re.match(r"(\S+)\s+\S+\s+" + NUM, line)
            if m:
                out[("family best", m.group(1))] = float(m.group(2))
        elif table and table.startswith("candidates"):
            m = re.match(r"(\S+)\s+(\S+)\s+" + NUM, line)
            if m and m.group(2) == "correct":
                out[(table, m.group(1))] = float(m.group(3))
    return out


def main(a_path, b_path):
    a, b = tables(a_path), tables(b_path)
    keys = sorted(set(a) & set(b))
    print("%-32s %-40s %10s %10s %7s" % ("table", "row", "A ms", "B ms", "B/A"))
    by_table = {}
    for k in keys:
        r = b[k] / a[k] if a[k] > 0 else float("nan")
        by_table.setdefault(k[0].split(" ")[0], []).append(r)
        print("%-32s %-40s %10.4f %10.4f %7.3f" % (k[0][:32], k[1][:40], a[k], b[k], r))
    print()
    for t, rs in sorted(by_table.items()):
        good = [r for r in rs if r > 0 and not math.isnan(r)]
        gm = math.exp(sum(math.log(r) for r in good) / len(good)) if good else float("nan")
        print("%-12s rows %3d  geomean B/A %.4f  min %.3f  max %.3f" % (
            t, len(good), gm, min(good), max(good)))
    only = sorted(set(a) ^ set(b))
    if only:
        print("\nrows in one run only: %d" % len(only))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
