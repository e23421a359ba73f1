"""Wall and CPU time of `rdmaprov check --nhc` on a fixture root, before/after, on this machine.

Builds the PCIe fixture root (tests/fixtures/sysfs/pcie_root.py: 2 HCAs, 2 GPUs, switches,
slots, ACS) once, then runs `python -m rdmaprov check --sysroot ROOT --nhc` from two source
trees (REF's, exported with git archive, and the working tree), interleaved run by run, each a
fresh process. The working tree keeps its link state file (under the root) across runs, as a
node does. Prints the medians and the after/before ratio.

    .venv/bin/python bench/check_sysroot_time.py [--before REF] [--runs 20]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--expect-memlock", "1", "--expect-ports", "2", "--expect-gpus", "2", "--nhc"]


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", default="48f7f89")
    ap.add_argument("--runs", type=int, default=20)
    a = ap.parse_args()
    spec = importlib.util.spec_from_file_location("pcie_root",
                                                  ROOT / "tests/fixtures/sysfs/pcie_root.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with tempfile.TemporaryDirectory() as tmp:
        node = mod.build(Path(tmp) / "root")
        old = Path(tmp) / "before"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", a.before], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        variants = {"before": str(old), "after": str(ROOT)}
        out = {k: {"wall": [], "cpu": [], "rc": set()} for k in variants}
        for _ in range(a.runs):
            for name, tree in variants.items():
                c0, t0 = cpu(), time.perf_counter()
                p = subprocess.run([sys.executable, "-m", "rdmaprov", "check", "--sysroot",
                                    str(node), *ARGS], cwd=tree, capture_output=True, text=True,
                                   env={"PYTHONPATH": tree, "PATH": "/usr/bin:/bin"})
                out[name]["wall"].append(time.perf_counter() - t0)
                out[name]["cpu"].append(cpu() - c0)
                out[name]["rc"].add(p.returncode)
        state = (node / "var/lib/rdmaprov/check-links.json").is_file()
    res = {k: {"wall_median": round(statistics.median(v["wall"]), 3),
               "wall_min": round(min(v["wall"]), 3), "wall_max": round(max(v["wall"]), 3),
               "cpu_median": round(statistics.median(v["cpu"]), 3), "exit": sorted(v["rc"])}
           for k, v in out.items()}
    res["ratio_after_before_wall"] = round(res["after"]["wall_median"]
                                           / res["before"]["wall_median"], 2)
    res["state_file_kept"] = state
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
