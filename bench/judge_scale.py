"""`rdmaprov validate --judge DIR` at fleet size: wall time, peak memory and report sizes for
synthetic results directories of 1,000 and 10,000 hosts.

    python bench/judge_scale.py [--sizes 1000,10000] [--keep DIR] [--profile]

Each directory has the exact layout roles/nccl_validate leaves (rdmaprov/validate/judge.py's
docstring; tests/cli/test_validate_judge.py builds the same from the same parts):
- <host>/worker.log: a real NCCL log (tests/fixtures/explain: nvpeer56's IB log, NCCL 2.4.7,
  ``NET/IB : Using [0]mlx5_0:1/IB``) with its host names replaced by the host's own; 1 % of the
  hosts carry nccl#226's real Socket fallback log (``NET/IB : No device found``) instead;
- <host>/counters_before.json: the role's own counters script run over the real-format NDR sysfs
  tree (tests/fixtures/sysfs/ib_ndr: 4 ports at 400 Gb/s); 0.5 % of the hosts over a copy whose
  mlx5_0 port 1 reads ``200 Gb/sec (4X HDR)`` (trained down);
- <host>/rc: 0; 0.2 % of the hosts 124 (killed at the timeout) with an empty log;
- <master>/result.json: the worker's document (its rows from the worker's own rates()), with the
  pair rounds the ring plan runs (rounds.py) and one slow host among them;
- run.json.
Then `validate --judge` runs as a child process three ways (terminal text to a file; --json;
--json --junit --html), each timed, with its peak RSS from getrusage(RUSAGE_CHILDREN) of a fresh
child; the report sizes are printed. --profile also writes a cProfile of the in-process judge.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rdmaprov.validate import rounds as R
from rdmaprov.validate import worker_base as base
from rdmaprov.validate import worker_timing as timing

ROOT = Path(__file__).resolve().parents[1]
SYSFS = ROOT / "tests" / "fixtures" / "sysfs"
LOGS = ROOT / "tests" / "fixtures" / "explain"
COUNTERS = ROOT / "plugins" / "module_utils" / "rdma_ports.py"
IB_LOG = LOGS / "nccl_nvpeer56_v2.4.7_ib.log"
SOCKET_LOG = LOGS / "nccl_226_aws_nodevice.log"


def counters(tree: Path) -> str:
    return subprocess.run([sys.executable, str(COUNTERS)], capture_output=True, text=True,
                          check=True, env={**os.environ, "RDMAPROV_SYSFS_ROOT": str(tree)}).stdout


def sweep_rows(n: int, peak: float) -> list[dict[str, object]]:
    """The worker's rows for an n-rank run peaking at ``peak`` GB/s busbw (its own rates())."""
    sizes = timing.size_sweep(1 << 20, 1 << 30, 2, 4)
    rows: list[dict[str, object]] = []
    for i, size in enumerate(sizes):
        busbw = peak * (i + 1) / len(sizes)
        seconds = size / (busbw / timing.bus_factor(n) * 1e9)
        a, b = timing.rates(size, seconds, n)
        rows.append({"bytes": size, "count": size // 4, "time_us": round(seconds * 1e6, 3),
                     "time_us_avg": round(seconds * 1e6, 3), "algbw_GBps": float(f"{a:.6g}"),
                     "busbw_GBps": float(f"{b:.6g}"), "correct": True})
    return rows


def build(results: Path, n: int) -> dict[str, object]:
    hosts = [f"gpu{i:05d}" for i in range(n)]
    socket = set(hosts[7::100])
    down = set(hosts[13::200])
    hung = set(hosts[29::500])
    slow = hosts[n // 2]
    tmp = results.parent / "sysfs-down"
    if not tmp.exists():
        shutil.copytree(SYSFS / "ib_ndr", tmp, symlinks=True)
        (tmp / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "rate").write_text(
            "200 Gb/sec (4X HDR)\n")
    facts = {"ndr": counters(SYSFS / "ib_ndr"), "down": counters(tmp)}
    ib, sock = IB_LOG.read_text(), SOCKET_LOG.read_text()
    run = results / "fabric"
    for h in hosts:
        d = run / h
        d.mkdir(parents=True)
        (d / "rc").write_text("124\n" if h in hung else "0\n")
        log = "" if h in hung else (sock if h in socket else ib)
        for name in ("master_node", "secondary_node", "ip-172-31-12-210", "ip-172-31-12-21",
                     "ip-172-31-5-233"):
            log = log.replace(name + ":", h + ":")
        (d / "worker.log").write_text(log)
        (d / "counters_before.json").write_text(facts["down" if h in down else "ndr"])
    pairs = []
    for number, rnd in enumerate(R.ring_rounds(hosts), 1):
        for step_no, step in enumerate(rnd, 1):
            for a, b in step:
                bw = 5.0 if slow in (a, b) else 45.0
                pairs.append({"round": number, "step": step_no, "hosts": [a, b],
                              "busbw_GBps": bw, "error": None, "results": sweep_rows(2, bw)})
    doc = {"schema": base.SCHEMA, "ok": True, "error": None, "backend": "nccl",
           "world_size": n, "ranks": [{"rank": i, "local_rank": 0, "hostname": h}
                                      for i, h in enumerate(hosts)],
           "hosts": sorted(hosts), "preflight": {h: {"problems": []} for h in hosts},
           "results": sweep_rows(n, 38.0), "notes": [], "env": {}, "pairs": pairs}
    (run / hosts[0] / "result.json").write_text(json.dumps(doc))
    (run / "run.json").write_text(json.dumps({
        "label": "fabric", "hosts": hosts, "master": hosts[0], "master_addr": "10.0.0.1",
        "master_port": 29500, "runtime": "container", "launcher": "torchrun",
        "backend": "nccl", "nproc_per_node": 1}))
    size = sum(f.stat().st_size for f in results.rglob("*") if f.is_file())
    return {"hosts": n, "socket_fallback": len(socket), "trained_down": len(down),
            "hung": len(hung), "slow": slow, "dir_MB": round(size / 1e6, 1),
            "result_json_MB": round((run / hosts[0] / "result.json").stat().st_size / 1e6, 1)}


def judge(results: Path, out: Path, *flags: str) -> dict[str, object]:
    """One `validate --judge` in a fresh child: rc, wall, CPU seconds (user + system: on a
    shared machine the figure that load does not inflate) and peak RSS of that child."""
    code = ("import resource, subprocess, sys, time\n"
            "t = time.perf_counter()\n"
            "with open(sys.argv[1], 'w') as out:\n"
            "    rc = subprocess.run(sys.argv[2:], stdout=out,\n"
            "                        stderr=subprocess.STDOUT).returncode\n"
            "wall = time.perf_counter() - t\n"
            "use = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "print(rc, wall, use.ru_maxrss, use.ru_utime + use.ru_stime)\n")
    argv = [sys.executable, "-m", "rdmaprov", "validate", "--judge", str(results), *flags]
    line = subprocess.run([sys.executable, "-c", code, str(out), *argv], capture_output=True,
                          text=True, check=True).stdout.split()
    return {"flags": " ".join(f if not f.startswith("/") else Path(f).name for f in flags),
            "rc": int(line[0]), "wall_s": round(float(line[1]), 2),
            "cpu_s": round(float(line[3]), 2),
            "peak_rss_MB": round(int(line[2]) / 1024, 1), "stdout_MB": round(
                out.stat().st_size / 1e6, 2)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--keep", type=Path, help="build the directories here and keep them")
    ap.add_argument("--all-only", action="store_true",
                    help="only the run that writes every report (--json --junit --html)")
    ap.add_argument("--profile", action="store_true",
                    help="also profile the judge in-process (cProfile, top 25 by cumulative)")
    args = ap.parse_args()
    print(json.dumps({"loadavg_before": os.getloadavg(), "cpus": os.cpu_count(),
                      "python": sys.version.split()[0]}), flush=True)
    base = args.keep or Path(tempfile.mkdtemp(prefix="judge-scale-"))
    try:
        for n in (int(x) for x in args.sizes.split(",")):
            results = base / f"results-{n}"
            t0 = time.perf_counter()
            facts: dict[str, object] = (build(results, n) if not results.exists()
                                        else {"hosts": n, "reused": True})
            facts["build_s"] = round(time.perf_counter() - t0, 1)
            print(json.dumps(facts), flush=True)
            rep = base / f"reports-{n}"
            rep.mkdir(exist_ok=True)
            rows = [] if args.all_only else [judge(results, rep / "text.out"),
                                             judge(results, rep / "json.out", "--json")]
            rows.append(judge(results, rep / "all.out", "--json", "--junit", str(rep / "j.xml"),
                              "--html", str(rep / "r.html")))
            for row in rows:
                print(json.dumps({"hosts": n, **row}), flush=True)
            sizes = {p.name: round(p.stat().st_size / 1e6, 2) for p in
                     (rep / "all.out", rep / "j.xml", rep / "r.html")}
            print(json.dumps({"hosts": n, "report_MB": sizes}), flush=True)
            if args.profile:
                import cProfile
                import pstats

                from rdmaprov.validate import judge as J
                from rdmaprov.validate import verdict as V

                prof = cProfile.Profile()
                prof.runcall(J.judge, results, V.Policy())
                pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    print(json.dumps({"loadavg_after": os.getloadavg(),
                      "self_peak_rss_MB": round(resource.getrusage(
                          resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
