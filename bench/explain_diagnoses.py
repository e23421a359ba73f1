"""Precision and recall of `rdmaprov explain`'s context diagnoses on the real fixtures.

    python bench/explain_diagnoses.py [--json]

For every real output in tests/fixtures/explain/ (sources in its index.yaml), runs explain and
compares the finding codes of the context diagnoses (rdmaprov.parsers.nccl_log.CONTEXT_CODES:
containers, interfaces, RoCE QP setup, net plugins, peers, watchdogs, NCCL variables) with the
`diagnoses` the fixture's thread established. A code that fires where the index does not list
it is a false positive; a listed code that does not fire is a miss. Prints per-code counts,
overall precision and recall, and the wall time of the whole pass.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rdmaprov.explain import explain_stream  # noqa: E402
from rdmaprov.parsers.nccl_log import CONTEXT_CODES  # noqa: E402

FIX = ROOT / "tests" / "fixtures" / "explain"


def fired(report: dict[str, Any]) -> set[str]:
    fs = report["findings"] + (report.get("nccl_log") or {}).get("findings", [])
    return {f["code"] for f in fs if f.get("code") in CONTEXT_CODES}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    index = yaml.safe_load((FIX / "index.yaml").read_text())
    tp: Counter[str] = Counter()
    fp: Counter[str] = Counter()
    fn: Counter[str] = Counter()
    wrong: list[str] = []
    t0 = time.perf_counter()
    for name in sorted(index):
        with open(FIX / name, encoding="utf-8") as fh:
            got = fired(explain_stream(fh))
        want = set(index[name].get("diagnoses") or [])
        for c in got & want:
            tp[c] += 1
        for c in got - want:
            fp[c] += 1
            wrong.append(f"{name}: {c} fired, not established")
        for c in want - got:
            fn[c] += 1
            wrong.append(f"{name}: {c} missed")
    wall = time.perf_counter() - t0
    t, p, n = sum(tp.values()), sum(fp.values()), sum(fn.values())
    per_code = {c: {"tp": tp[c], "fp": fp[c], "fn": fn[c]}
                for c in sorted(set(tp) | set(fp) | set(fn))}
    result: dict[str, Any] = {
        "fixtures": len(index), "with_context_diagnoses": sum(
            1 for e in index.values() if e.get("diagnoses")),
        "true_positives": t, "false_positives": p, "misses": n,
        "precision": round(t / (t + p), 3) if t + p else None,
        "recall": round(t / (t + n), 3) if t + n else None,
        "per_code": per_code,
        "wrong": wrong, "wall_s": round(wall, 2),
    }
    if a.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{result['fixtures']} fixtures, {result['with_context_diagnoses']} with context "
              f"diagnoses: {t} right, {p} false positives, {n} missed; precision "
              f"{result['precision']}, recall {result['recall']} ({wall:.2f} s)")
        for c, v in per_code.items():
            print(f"  {c:20s} tp {v['tp']}  fp {v['fp']}  fn {v['fn']}")
        for w in wrong:
            print("  " + w)
    return 0 if not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
