"""`rdmaprov check` end to end: exit codes, the reason line, --json, --nhc, --prometheus,
bad input, and the time budget, on a fake node tree and on this machine itself."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

# The fake node tree lives with the unit tests; load it by path (test dirs are not packages).
_spec = importlib.util.spec_from_file_location(
    "_check_fakes", Path(__file__).resolve().parents[1] / "unit" / "test_check_logic.py")
assert _spec is not None and _spec.loader is not None
_fakes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fakes)
fake_node = _fakes.fake_node


def check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rdmaprov", "check", *args],
                          capture_output=True, text=True, timeout=60, check=False)


# memlock is this process's own limit, not the fake tree's: ask for what any process has.
BASE = ("--expect-memlock", "1")


def test_healthy_node_exits_0(tmp_path: Path) -> None:
    p = check("--sysroot", str(fake_node(tmp_path)), *BASE, "--expect-ports", "2",
              "--expect-rate", "400", "--expect-gpus", "2")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines()[-1] == "HEALTHY"


def test_unhealthy_node_exits_2_with_one_reason(tmp_path: Path) -> None:
    root = fake_node(tmp_path, ports=[
        ("mlx5_0", 1, "4: ACTIVE", "400 Gb/sec (4X NDR)", "InfiniBand", "ib0"),
        ("mlx5_1", 1, "1: DOWN", "10 Gb/sec (4X SDR)", "InfiniBand", "ib1")])
    p = check("--sysroot", str(root), *BASE, "--expect-ports", "2", "--nhc")
    assert p.returncode == 2
    assert p.stdout == "1 of 2 RDMA ports ACTIVE: mlx5_1/1 DOWN\n"
    j = check("--sysroot", str(root), *BASE, "--expect-ports", "2", "--json")
    doc = json.loads(j.stdout)
    assert j.returncode == 2 and doc["healthy"] is False
    assert doc["reason"] == "1 of 2 RDMA ports ACTIVE: mlx5_1/1 DOWN"
    assert {c["name"]: c["status"] for c in doc["checks"]}["ports"] == "fail"


def test_nhc_mode_is_silent_when_healthy(tmp_path: Path) -> None:
    p = check("--sysroot", str(fake_node(tmp_path)), *BASE, "--nhc")
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")


def test_config_file_then_flags(tmp_path: Path) -> None:
    cfg = tmp_path / "check.yml"
    cfg.write_text("ports: 3\n")
    root = fake_node(tmp_path / "n")
    assert check("--sysroot", str(root), *BASE, "--config", str(cfg)).returncode == 2
    assert check("--sysroot", str(root), *BASE, "--config", str(cfg),
                 "--expect-ports", "2").returncode == 0


def test_prometheus_file(tmp_path: Path) -> None:
    out = tmp_path / "textfile"
    out.mkdir()
    p = check("--sysroot", str(fake_node(tmp_path / "n")), *BASE, "--nhc",
              "--prometheus", str(out))
    assert p.returncode == 0
    assert "rdmaprov_check_healthy 1\n" in (out / "rdmaprov_check.prom").read_text()


def test_bad_input_is_one_line_exit_1(tmp_path: Path) -> None:
    for args, expected in [
        (("--expect-mtu", "12000"), "--expect-mtu: 12000 is not a valid MTU (68..9216)"),
        (("--expect-pfc", "x"), "--expect-pfc: 'x' is not an integer"),
        (("--config", str(tmp_path / "none.yml")), "no such check configuration file"),
        (("--sysroot", str(tmp_path / "none")), "--sysroot"),
        (("--prometheus", str(tmp_path / "no/such/dir/x.prom")), "directory does not exist"),
    ]:
        p = check(*args)
        assert p.returncode == 1, (args, p.stdout, p.stderr)
        assert p.stdout == "" and len(p.stderr.splitlines()) == 1, p.stderr
        assert expected in p.stderr


def test_this_machine_says_plainly_what_is_missing() -> None:
    """This machine (and a lab node) has no RDMA: the verdict says so, fast."""
    if Path("/sys/class/infiniband").is_dir():
        return  # a real RDMA host: covered by the fake-tree tests above
    t0 = time.monotonic()
    p = check("--json")
    elapsed = time.monotonic() - t0
    doc = json.loads(p.stdout)
    assert p.returncode == 2
    assert doc["reason"].startswith("no RDMA devices: ")
    assert elapsed < 5, f"check took {elapsed:.1f} s"


# -- contrib/slurm scripts, with a recording scontrol on PATH ----------------------------------

CONTRIB = Path(__file__).resolve().parents[2] / "contrib" / "slurm"


def slurm_env(tmp_path: Path, root: Path) -> dict[str, str]:
    import os

    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "scontrol").write_text(
        '#!/bin/sh\n[ "$1" = show ] && { printf "%s\\n" "${FAKE_REASON:-}"; exit 0; }\n'
        f'printf "%s\\n" "$*" >> {tmp_path}/scontrol.log\n')
    (bindir / "rdmaprov").write_text(f'#!/bin/sh\nexec {sys.executable} -m rdmaprov "$@"\n')
    for f in bindir.iterdir():
        f.chmod(0o755)
    cfg = tmp_path / "check.yml"
    cfg.write_text("memlock: '1'\nports: 2\n")
    return {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}",
            "RDMAPROV_CHECK_SYSROOT": str(root), "RDMAPROV_CHECK_CONFIG": str(cfg),
            "SLURMD_NODENAME": "gpu17", "PYTHONPATH": str(CONTRIB.parents[1])}


def test_prolog_drains_with_the_reason(tmp_path: Path) -> None:
    root = fake_node(tmp_path / "n", ports=[
        ("mlx5_0", 1, "4: ACTIVE", "400 Gb/sec (4X NDR)", "InfiniBand", "ib0"),
        ("mlx5_1", 1, "2: INIT", "400 Gb/sec (4X NDR)", "InfiniBand", "ib1")])
    env = slurm_env(tmp_path, root)
    p = subprocess.run(["sh", str(CONTRIB / "rdmaprov-prolog.sh")], env=env, capture_output=True,
                       text=True, timeout=60, check=False)
    assert p.returncode == 1
    assert (tmp_path / "scontrol.log").read_text() == (
        'update nodename=gpu17 state=drain reason=rdmaprov: 1 of 2 RDMA ports ACTIVE: '
        'mlx5_1/1 INIT\n')


def test_prolog_passes_a_healthy_node(tmp_path: Path) -> None:
    env = slurm_env(tmp_path, fake_node(tmp_path / "n"))
    p = subprocess.run(["sh", str(CONTRIB / "rdmaprov-prolog.sh")], env=env, capture_output=True,
                       text=True, timeout=60, check=False)
    assert p.returncode == 0, p.stderr
    assert not (tmp_path / "scontrol.log").exists()


def test_healthcheck_resumes_only_its_own_drain(tmp_path: Path) -> None:
    env = slurm_env(tmp_path, fake_node(tmp_path / "n"))
    script = ["sh", str(CONTRIB / "rdmaprov-healthcheck.sh")]
    env["FAKE_REASON"] = "   Reason=admin: bad DIMM [root@2025-01-01T00:00:00]"
    subprocess.run(script, env=env, timeout=60, check=True)
    assert not (tmp_path / "scontrol.log").exists()
    env["FAKE_REASON"] = "   Reason=rdmaprov: 1 of 2 RDMA ports ACTIVE [slurm@2025-01-01T00:00:00]"
    subprocess.run(script, env=env, timeout=60, check=True)
    assert (tmp_path / "scontrol.log").read_text() == "update nodename=gpu17 state=resume\n"


def test_nhc_plugin_calls_die_with_the_reason(tmp_path: Path) -> None:
    root = fake_node(tmp_path / "n", gpus=1)
    env = slurm_env(tmp_path, root)
    p = subprocess.run(["bash", "-c", f'die() {{ echo "DIE $1 $2"; }}; . {CONTRIB}/rdmaprov.nhc; '
                        "check_rdmaprov --expect-gpus 2"], env=env, capture_output=True,
                       text=True, timeout=60, check=False)
    assert p.stdout == "DIE 1 rdmaprov: 1 of 2 GPUs visible\n", p.stderr
