"""`rdmaprov check` end to end: exit codes, the reason line, --json, --nhc, --prometheus,
bad input, and the time budget, on a fake node tree and on this machine itself."""

from __future__ import annotations

import importlib.util
import json
import re
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
    assert p.stdout == "[reset-link] 1 of 2 RDMA ports ACTIVE: mlx5_1/1 DOWN\n"
    j = check("--sysroot", str(root), *BASE, "--expect-ports", "2", "--json")
    doc = json.loads(j.stdout)
    assert j.returncode == 2 and doc["healthy"] is False
    assert doc["reason"] == "[reset-link] 1 of 2 RDMA ports ACTIVE: mlx5_1/1 DOWN"
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
    text = (out / "rdmaprov_check.prom").read_text()
    assert "rdmaprov_check_healthy 1\n" in text
    # Base units (bytes per second: 400 Gb/s is 50e9 B/s); the old Gb/s gauge stays one
    # release, marked deprecated.
    rates = re.findall(r'^rdmaprov_rdma_port_rate_bytes_per_second\{device="(\w+)",port="1",'
                       r'link_layer="InfiniBand"\} (\d+)$', text, re.M)
    assert rates and all(int(bps) == 50_000_000_000 for _dev, bps in rates), text
    assert "bits_per_second" not in text
    assert "# HELP rdmaprov_rdma_port_rate_gbps Deprecated" in text
    # The exposition format: every sample's metric has its HELP and TYPE lines before it.
    declared: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            declared.add(line.split()[2])
        elif not line.startswith("#"):
            assert re.match(r"^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? -?[0-9.e+]+$", line), line
            assert re.match(r"^[a-zA-Z_:][a-zA-Z0-9_:]*", line)[0] in declared, line


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


def test_a_bad_flag_exits_1_not_2_in_one_line() -> None:
    """argparse's own exit 2 would read as "unhealthy" and drain the node with a usage text."""
    for args in (("--expct-mtu", "9000"), ("--expect-link-layer", "IB"), ("--budget", "x")):
        p = check(*args)
        assert p.returncode == 1, (args, p.stderr)
        assert p.stdout == "" and len(p.stderr.splitlines()) == 1, p.stderr
        assert "rdmaprov" in p.stderr and "--help" in p.stderr


def test_every_outcome_rewrites_the_textfile(tmp_path: Path) -> None:
    out = tmp_path / "textfile"
    out.mkdir()
    prom = out / "rdmaprov_check.prom"
    root = str(fake_node(tmp_path / "n"))
    assert check("--sysroot", root, *BASE, "--prometheus", str(out)).returncode == 0
    assert "rdmaprov_check_healthy 1\n" in prom.read_text()
    assert "rdmaprov_check_config_error 0\n" in prom.read_text()
    # A configuration error: not known healthy any more, and said so.
    assert check("--sysroot", root, *BASE, "--prometheus", str(out),
                 "--expect-mtu", "12000").returncode == 1
    assert "rdmaprov_check_healthy 0\n" in prom.read_text()
    assert "rdmaprov_check_config_error 1\n" in prom.read_text()
    assert check("--sysroot", root, *BASE, "--prometheus", str(out)).returncode == 0
    assert "rdmaprov_check_healthy 1\n" in prom.read_text()
    # A bad flag: argparse stops before anything is judged; the file still says so.
    assert check("--sysroot", root, "--prometheus", str(out), "--expct-gpus", "8").returncode == 1
    assert "rdmaprov_check_config_error 1\n" in prom.read_text()


def test_this_machine_says_plainly_what_is_missing() -> None:
    """This machine (and a lab node) has no RDMA: the verdict says so, fast."""
    if Path("/sys/class/infiniband").is_dir():
        return  # a real RDMA host: covered by the fake-tree tests above
    t0 = time.monotonic()
    p = check("--json")
    elapsed = time.monotonic() - t0
    doc = json.loads(p.stdout)
    assert p.returncode == 2
    assert doc["reason"].startswith("[config] no RDMA devices: ")
    assert elapsed < 5, f"check took {elapsed:.1f} s"


# -- the Slurm hooks (roles/slurm_health/files), with fake sinfo/scontrol on PATH ----------------
# Real slurmctld behind them: tests/integration/test_slurm_lab.py.

HOOKS = Path(__file__).resolve().parents[2] / "roles" / "slurm_health" / "files"


def slurm_env(tmp_path: Path, root: Path, state: str = "idle", reason: str = "none",
              config: str = "memlock: '1'\nports: 2\n") -> dict[str, str]:
    import os

    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "sinfo").write_text(f'#!/bin/sh\nprintf "%s\\n" "{state}|{reason}"\n')
    (bindir / "scontrol").write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$*" >> {tmp_path}/scontrol.log\n')
    (bindir / "rdmaprov").write_text(f'#!/bin/sh\nexec {sys.executable} -m rdmaprov "$@"\n')
    for f in bindir.iterdir():
        f.chmod(0o755)
    cfg = tmp_path / "check.yml"
    cfg.write_text(config)
    return {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}",
            "RDMAPROV_CHECK_SYSROOT": str(root), "RDMAPROV_CHECK_CONFIG": str(cfg),
            "SLURMD_NODENAME": "gpu17", "PYTHONPATH": str(HOOKS.parents[2])}


def hook(name: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", str(HOOKS / name)], env=env, capture_output=True, text=True,
                          timeout=60, check=False)


def scontrol_log(tmp_path: Path) -> str:
    log = tmp_path / "scontrol.log"
    return log.read_text() if log.exists() else ""


def drained_by_us(root: Path) -> Path:
    marker = root / "var/lib/rdmaprov/drained-by-rdmaprov"
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("rdmaprov: 1 of 2 GPUs visible")
    return root


def test_prolog_drains_with_the_reason(tmp_path: Path) -> None:
    root = fake_node(tmp_path / "n", ports=[
        ("mlx5_0", 1, "4: ACTIVE", "400 Gb/sec (4X NDR)", "InfiniBand", "ib0"),
        ("mlx5_1", 1, "2: INIT", "400 Gb/sec (4X NDR)", "InfiniBand", "ib1")])
    p = hook("rdmaprov-prolog.sh", slurm_env(tmp_path, root))
    assert p.returncode == 1
    assert scontrol_log(tmp_path) == (
        "update nodename=gpu17 state=drain reason=rdmaprov: [reset-link] 1 of 2 RDMA ports ACTIVE: "
        "mlx5_1/1 INIT\n")


def test_prolog_passes_a_healthy_node(tmp_path: Path) -> None:
    p = hook("rdmaprov-prolog.sh", slurm_env(tmp_path, fake_node(tmp_path / "n")))
    assert p.returncode == 0, p.stderr
    assert scontrol_log(tmp_path) == ""


def test_prolog_config_error_drains_as_such(tmp_path: Path) -> None:
    env = slurm_env(tmp_path, fake_node(tmp_path / "n"), config="mtu: 12000\n")
    p = hook("rdmaprov-prolog.sh", env)
    assert p.returncode == 1
    assert scontrol_log(tmp_path).startswith(
        "update nodename=gpu17 state=drain reason=rdmaprov: config error: ")
    assert "not a valid MTU" in scontrol_log(tmp_path)


def test_healthcheck_keeps_an_admin_reason_and_resumes_only_its_own(tmp_path: Path) -> None:
    sick = fake_node(tmp_path / "sick", gpus=1)
    env = slurm_env(tmp_path, sick, state="drain", reason="hardware swap ticket 1234")
    env["RDMAPROV_CHECK_CONFIG"] = str(tmp_path / "gpus.yml")
    (tmp_path / "gpus.yml").write_text("memlock: '1'\ngpus: 2\n")
    assert hook("rdmaprov-healthcheck.sh", env).returncode == 0
    assert scontrol_log(tmp_path) == ""  # unhealthy, but someone else's drain: reason kept
    # rdmaprov drained both before (its marker says so); an admin has since taken the first.
    env = slurm_env(tmp_path, drained_by_us(fake_node(tmp_path / "ok")), state="drain",
                    reason="hardware swap ticket 1234")
    assert hook("rdmaprov-healthcheck.sh", env).returncode == 0
    assert scontrol_log(tmp_path) == ""  # healthy, but not rdmaprov's drain: not resumed
    env = slurm_env(tmp_path, drained_by_us(fake_node(tmp_path / "ok2")), state="drain",
                    reason="rdmaprov: 1 of 2 GPUs visible")
    assert hook("rdmaprov-healthcheck.sh", env).returncode == 0
    assert scontrol_log(tmp_path) == "update nodename=gpu17 state=resume\n"


def test_nhc_plugin_calls_die_with_the_reason(tmp_path: Path) -> None:
    root = fake_node(tmp_path / "n", gpus=1)
    env = slurm_env(tmp_path, root)
    p = subprocess.run(["bash", "-c", f'die() {{ echo "DIE $1 $2"; }}; . {HOOKS}/rdmaprov.nhc; '
                        "check_rdmaprov --expect-gpus 2"], env=env, capture_output=True,
                       text=True, timeout=60, check=False)
    assert p.stdout == "DIE 1 rdmaprov: [reboot] 1 of 2 GPUs visible\n", p.stderr
    assert scontrol_log(tmp_path) == ""  # NHC drains itself
    p = subprocess.run(["bash", "-c", f'die() {{ echo "DIE $1 $2"; }}; . {HOOKS}/rdmaprov.nhc; '
                        "check_rdmaprov --expct-gpus 2"], env=env, capture_output=True,
                       text=True, timeout=60, check=False)
    assert p.stdout.startswith("DIE 1 rdmaprov: config error: rdmaprov"), p.stdout


# What a prolog's `rdmaprov check` may import to start: no Ansible, no ansible-runner, no rich,
# no other command's modules (issue 16: the check stays well under a second on a node).
_IMPORTS = """
import io, json, sys, contextlib
from rdmaprov.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "modules": sorted(sys.modules)}))
"""
HEAVY = ("ansible", "ansible_runner", "rich", "jinja2")


def test_check_start_imports_no_ansible_and_no_other_command(tmp_path: Path) -> None:
    cfg = tmp_path / "check.yml"
    # Every expectation type through the value rule (int, float, bool, list, str, choices).
    cfg.write_text("ports: 2\nrate: 400\nmtu: 4092\ninterfaces: [ib0]\nmodules: [ib_core]\n"
                   "link_layer: InfiniBand\npeermem: false\nnccl_min_busbw: 1.5\n"
                   "memlock: '1'\ngpus: 2\n")
    p = subprocess.run([sys.executable, "-c", _IMPORTS, "check", "--config", str(cfg),
                        "--sysroot", str(fake_node(tmp_path)), "--nhc"],
                       capture_output=True, text=True, timeout=60, check=False)
    doc = json.loads(p.stdout.splitlines()[-1])
    assert doc["rc"] == 0, p.stdout + p.stderr
    mods = doc["modules"]
    assert sorted({m.split(".")[0] for m in mods} & set(HEAVY)) == []
    ours = [m for m in mods if m.startswith("rdmaprov.")]
    assert [m for m in ours if m.startswith("rdmaprov.cli.")] == ["rdmaprov.cli.check"]
    for other in ("rdmaprov.inventory", "rdmaprov.engine", "rdmaprov.validate",
                  "rdmaprov.parsers", "rdmaprov.lab", "rdmaprov.progress"):
        assert not [m for m in ours if m == other or m.startswith(other + ".")], ours
    # The check did parse its file with the shared rule (and so did import it).
    assert "rdmaprov.values" in mods and "yaml" in mods


# -- a --sysroot that is not a node's root (issue 23): a config error, never a drain ------------


def test_a_sysroot_that_is_not_a_root_is_a_config_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    only_sys = tmp_path / "only_sys"
    (only_sys / "sys/class/net/eth0").mkdir(parents=True)
    unreadable = tmp_path / "unreadable"
    (unreadable / "sys").mkdir(parents=True)
    (unreadable / "proc").mkdir()
    for root, said in [(empty, "no sys/ and no proc/"), (only_sys, "no proc/"),
                       (unreadable, "neither sys/class/net nor proc/modules")]:
        out = tmp_path / f"{root.name}.prom"
        p = check("--sysroot", str(root), *BASE, "--nhc", "--prometheus", str(out))
        assert p.returncode == 1, (root, p.stdout, p.stderr)
        assert p.stdout == "" and len(p.stderr.splitlines()) == 1 and said in p.stderr, p.stderr
        assert "rdmaprov_check_config_error 1\n" in out.read_text()
        assert "rdmaprov_check_healthy 0\n" in out.read_text()
    # Through the prolog with --drain: exit 1 and not one Slurm call.
    env = slurm_env(tmp_path, empty)
    p = hook("rdmaprov-prolog.sh", env)
    assert p.returncode == 1 and "not a node's root" in p.stderr, p.stderr
    assert scontrol_log(tmp_path) == ""
    # The same tree with proc/modules is a root (the lab's kernel has no /proc/modules, so
    # either one will do): judged, not refused.
    (unreadable / "proc/modules").write_text("")
    assert check("--sysroot", str(unreadable), *BASE, "--nhc").returncode == 2


# -- no RPC when healthy (issue 24): a healthy node asks slurmctld nothing ----------------------


def test_a_healthy_node_makes_no_slurm_call_unless_rdmaprov_drained_it(tmp_path: Path) -> None:
    root = fake_node(tmp_path / "n")
    # A flap's sticky window is link_stable_s: none here, so the port's return is health.
    env = slurm_env(tmp_path, root, config="memlock: '1'\nports: 2\nlink_stable_s: 0\n")
    calls = tmp_path / "calls.log"
    bindir = tmp_path / "bin"
    # sinfo answers from a state file the fake scontrol keeps, and both count their calls.
    (tmp_path / "slurm_state").write_text("idle|none")
    (bindir / "sinfo").write_text(f'#!/bin/sh\necho sinfo >> {calls}\ncat {tmp_path}/slurm_state\n')
    (bindir / "scontrol").write_text(
        f'#!/bin/sh\necho "scontrol $*" >> {calls}\n'
        f'case "$*" in *state=drain*) r="${{*##*reason=}}"; printf "drain|%s" "$r" > '
        f'{tmp_path}/slurm_state;; *state=resume*) printf "idle|none" > {tmp_path}/slurm_state;;'
        f' esac\n')
    marker = root / "var/lib/rdmaprov/drained-by-rdmaprov"

    def prolog() -> tuple[int, list[str]]:
        calls.write_text("")
        rc = hook("rdmaprov-prolog.sh", env).returncode
        # "sinfo", or "scontrol update nodename=gpu17 state=drain reason=..." as
        # "scontrol state=drain"
        return rc, [" ".join(w for i, w in enumerate(c.split()) if i == 0 or w.startswith("state="))
                    for c in calls.read_text().splitlines()]

    for _ in range(3):
        assert prolog() == (0, [])  # healthy: not one call
    (root / "sys/class/infiniband/mlx5_1/ports/1/state").write_text("1: DOWN\n")
    assert prolog() == (1, ["sinfo", "scontrol state=drain"])
    assert marker.is_file()
    assert prolog() == (1, ["sinfo"])  # still sick, already drained with this reason
    (root / "sys/class/infiniband/mlx5_1/ports/1/state").write_text("4: ACTIVE\n")
    assert prolog() == (0, ["sinfo", "scontrol state=resume"])
    assert not marker.exists()
    assert prolog() == (0, [])  # healthy again: silent again


# -- the loopback's Python (issue 24): torch missing there is a config error, not a sick node ----


def test_nccl_python_without_torch_is_a_config_error(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True,
                   timeout=120)
    root = str(fake_node(tmp_path / "n"))
    out = tmp_path / "check.prom"
    for python, said in [(str(bare / "bin/python"), "no torch in that Python"),
                         (str(tmp_path / "nope/python"), "no such interpreter")]:
        p = check("--sysroot", root, *BASE, "--nccl", "--nccl-python", python, "--nhc",
                  "--prometheus", str(out))
        assert p.returncode == 1, (p.stdout, p.stderr)
        assert p.stdout == "" and len(p.stderr.splitlines()) == 1 and said in p.stderr, p.stderr
        assert "rdmaprov_check_config_error 1\n" in out.read_text()
    # The setting in the file does the same.
    cfg = tmp_path / "check.yml"
    cfg.write_text(f"nccl: true\nnccl_python: {bare / 'bin/python'}\nmemlock: '1'\n")
    p = check("--sysroot", root, "--config", str(cfg))
    assert p.returncode == 1 and "no torch in that Python" in p.stderr, p.stderr
    # Nothing named, and rdmaprov's own Python has no torch: said so, with how to name one.
    from rdmaprov.check import nccl as nccl_check

    said = nccl_check.python_problem(str(bare / "bin/python"), named=False)
    assert said is not None and said.startswith("no torch in rdmaprov's own Python (")
    assert "--nccl-python" in said


def test_the_roots_own_config_file_is_read_under_sysroot(tmp_path: Path) -> None:
    # A check in a container with the host's root mounted reads the host's expectations, which
    # describe that host; --config still wins.
    root = fake_node(tmp_path / "n")
    (root / "etc/rdmaprov").mkdir(parents=True)
    (root / "etc/rdmaprov/check.yml").write_text("ports: 3\n")
    p = check("--sysroot", str(root), *BASE, "--nhc")
    assert (p.returncode, p.stdout) == (2, "[reset-link] 2 of 3 RDMA ports ACTIVE\n")
    other = tmp_path / "other.yml"
    other.write_text("ports: 2\n")
    assert check("--sysroot", str(root), *BASE, "--config", str(other)).returncode == 0
    (root / "etc/rdmaprov/check.yml").write_text("portz: 3\n")
    bad = check("--sysroot", str(root), *BASE)
    assert bad.returncode == 1
    assert "check.yml: unknown key 'portz' (did you mean ports?)" in bad.stderr
