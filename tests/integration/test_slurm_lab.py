"""The pre-job check in a real Slurm cluster: `lab up --slurm` (Debian's slurmctld, slurmd and
munge in the lab nodes), the slurm_health role installing its hooks and, through the node_tool
role, rdmaprov from the controller's own files, and NHC's rules seen through real scontrol/sinfo:
- a healthy prolog lets a job run on every node;
- a node made unhealthy (eth1 at MTU 9000, the check expects 1500) is drained by its prolog with
  rdmaprov's reason, and the job lands on another node;
- an administrator's drain keeps its reason, healthy or not, and is never resumed;
- a fixed node is resumed by the next health check; the reason slurmctld holds is the check's
  line (an administrator's reason with quotes is kept as typed).
Lab nodes have no RDMA and no GPU, so the site's expectations here are MTU and memlock only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rdmaprov.lab import Lab
from rdmaprov.lab import slurm as lab_slurm

pytestmark = pytest.mark.lab
ROOT = Path(__file__).resolve().parents[2]
LAB_NAME = os.environ.get("RDMAPROV_SLURM_LAB", "vslurm")
NODES = int(os.environ.get("RDMAPROV_SLURM_LAB_NODES", "3"))
BIN = Path(sys.executable).parent
EXPECT = '{"ports": 0, "modules": [], "gpus": 0, "memlock": "0", "mtu": 1500, ' \
         '"interfaces": ["eth1"]}'
# scontrol keeps quotes inside a reason (one at its very end it drops).
ADMIN = 'hardware swap "PSU" ticket 1234'


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    if os.geteuid() != 0:
        if os.environ.get("RDMAPROV_REQUIRE_LAB") == "1":
            pytest.fail("the lab needs root")
        pytest.skip("the lab needs root")
    lab = Lab(LAB_NAME)
    lab.up(nodes=NODES, log=lambda msg: None)
    try:
        lab_slurm.setup(lab, log=lambda msg: None)
        work = tmp_path_factory.mktemp("slurm")
        (work / "ansible_collections/rdmaprov").mkdir(parents=True)
        (work / "ansible_collections/rdmaprov/cluster").symlink_to(ROOT)
        book = work / "play.yml"
        book.write_text(
            "- hosts: all\n  gather_facts: false\n  become: true\n  roles:\n"
            # slurm_health_install: node_tool (the default): rdmaprov at /usr/local/bin.
            "    - role: rdmaprov.cluster.slurm_health\n      vars:\n"
            "        slurm_health_hooks: [prolog, healthcheck]\n"
            "        slurm_health_edit_slurm_conf: true\n"
            # slurmd runs the health check at start and every interval; the tests run it
            # themselves, as slurmd would, to know when it ran.
            "        slurm_health_healthcheck_interval: 3600\n"
            f"        slurm_health_expect: {EXPECT}\n")
        env = {"lab": lab, "work": work, "book": book}
        first = play(env)
        assert first.returncode == 0, first.stdout[-3000:]
        env["first"] = first
        yield env
    finally:
        if os.environ.get("RDMAPROV_KEEP_LAB") != "1":
            lab.down(log=lambda msg: None)


def play(env: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(BIN / "ansible-playbook"), "-i", str(env["lab"].inventory), str(env["book"]),
            *args]
    run_env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(env["work"]), "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run(argv, capture_output=True, text=True, env=run_env, timeout=900,
                          check=False)


def changed(out: str) -> dict[str, int]:
    rows = [line for line in out.splitlines() if " : ok=" in line]
    return {r.split()[0]: int(r.split("changed=")[1].split()[0]) for r in rows}


def ctl(env: dict[str, Any], *argv: str) -> str:
    return env["lab"].exec(lab_slurm.CONTROLLER, list(argv)).stdout


def node(env: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """{node: (compact state, reason)} as slurmctld has them, once no node is marked '*' (not
    responding): slurmctld pings a node it just resumed and says so for a moment."""
    deadline = time.monotonic() + 15
    while True:
        out = ctl(env, "sinfo", "-h", "-N", "-o", "%N|%t|%E")
        rows = {n: (s, r) for n, s, r in (line.split("|", 2) for line in out.splitlines())}
        if time.monotonic() > deadline or not any(s.endswith("*") for s, _ in rows.values()):
            return rows
        time.sleep(0.5)


def healthcheck(env: dict[str, Any], name: str) -> None:
    """The installed HealthCheckProgram, run on the node with the environment slurmd gives it."""
    env["lab"].exec(name, ["env", f"SLURMD_NODENAME={name}",
                           "/etc/slurm/rdmaprov-healthcheck.sh"])


def set_mtu(env: dict[str, Any], name: str, mtu: int) -> None:
    env["lab"].exec(name, ["ip", "link", "set", "eth1", "mtu", str(mtu)])


def wait_job(env: dict[str, Any], job: str, timeout: float = 300,
             until: Callable[[dict[str, str]], bool] | None = None) -> dict[str, str]:
    """The job's fields once ``until`` holds for them (by default: the job ended)."""
    deadline = time.monotonic() + timeout
    fields: dict[str, str] = {}
    while time.monotonic() < deadline:
        out = ctl(env, "scontrol", "-o", "show", "job", job)
        fields = dict(f.split("=", 1) for f in out.split() if "=" in f)
        if until(fields) if until else fields.get("JobState") in ("COMPLETED", "FAILED",
                                                                  "CANCELLED"):
            return fields
        time.sleep(1)
    raise AssertionError(f"job {job} not done in {timeout:.0f}s: {fields.get('JobState')} "
                         f"{fields.get('Reason')}")


def test_role_converges_then_changes_nothing(cluster: dict[str, Any]) -> None:
    assert all(n > 0 for n in changed(cluster["first"].stdout).values())
    again = play(cluster)
    assert again.returncode == 0, again.stdout[-3000:]
    assert set(changed(again.stdout).values()) == {0}, again.stdout[-3000:]
    dry = play(cluster, "--check", "--diff")
    assert dry.returncode == 0, dry.stdout[-3000:]
    assert set(changed(dry.stdout).values()) == {0}, dry.stdout[-3000:]
    assert "healthy" in again.stdout
    conf = cluster["lab"].exec("node2", ["cat", lab_slurm.SLURM_CONF]).stdout
    assert "Prolog=/etc/slurm/rdmaprov-prolog.sh\n" in conf


def test_a_healthy_prolog_lets_a_job_run(cluster: dict[str, Any]) -> None:
    names = sorted(cluster["lab"].addresses)
    out = ctl(cluster, "srun", f"-N{len(names)}", "hostname")
    assert sorted(out.split()) == names
    lab_slurm.wait_idle(cluster["lab"], names, timeout=30)  # none drained, none left busy


def test_an_unhealthy_node_is_drained_and_the_job_lands_elsewhere(
        cluster: dict[str, Any]) -> None:
    set_mtu(cluster, "node1", 9000)  # the check expects 1500: unhealthy
    # node1 is the scheduler's first pick among idle equals; its prolog fails.
    job = ctl(cluster, "sbatch", "--parsable", "-N1", "--wrap", "hostname").strip()
    requeued = wait_job(cluster, job, until=lambda f: f.get("Restarts") == "1"
                        and f.get("JobState") == "PENDING")
    assert requeued["NodeList"] in ("", "(null)"), requeued
    # Slurm holds a requeued job 2 minutes (EligibleTime = the requeue + 120 s); that wait is
    # Slurm's, not rdmaprov's: let it start now.
    ctl(cluster, "scontrol", "update", f"JobId={job}", "StartTime=now")
    done = wait_job(cluster, job)
    assert node(cluster)["node1"] == ("drain", "rdmaprov: [config] eth1 MTU 9000, want 1500")
    assert done["JobState"] == "COMPLETED" and done["Restarts"] == "1", done
    assert done["NodeList"] not in ("", "node1"), done


def test_an_admin_drain_keeps_its_reason_and_is_not_resumed(cluster: dict[str, Any]) -> None:
    ctl(cluster, "scontrol", "update", "nodename=node2", "state=drain", f"reason={ADMIN}")
    healthcheck(cluster, "node2")  # healthy: but not rdmaprov's drain
    assert node(cluster)["node2"] == ("drain", ADMIN)
    set_mtu(cluster, "node2", 9000)
    try:
        healthcheck(cluster, "node2")  # unhealthy: the admin's reason stays
        assert node(cluster)["node2"] == ("drain", ADMIN)
    finally:
        set_mtu(cluster, "node2", 1500)
        ctl(cluster, "scontrol", "update", "nodename=node2", "state=resume")


def test_a_fixed_node_is_resumed_by_the_next_check(cluster: dict[str, Any]) -> None:
    set_mtu(cluster, "node1", 9000)
    healthcheck(cluster, "node1")
    assert node(cluster)["node1"] == ("drain", "rdmaprov: [config] eth1 MTU 9000, want 1500")
    set_mtu(cluster, "node1", 1500)
    healthcheck(cluster, "node1")
    assert node(cluster)["node1"] == ("idle", "none")


def test_the_check_reason_reaches_slurm_as_printed(cluster: dict[str, Any]) -> None:
    lab = cluster["lab"]
    drain = ["env", "SLURMD_NODENAME=node3", "/usr/local/bin/rdmaprov", "check", "--nhc",
             "--drain"]
    p = lab.exec("node3", [*drain, "--interface", 'eth"9'], check=False)
    try:
        assert p.returncode == 2, p.stderr
        reason = node(cluster)["node3"][1]
        assert reason == f"rdmaprov: {p.stdout.strip()}" and "eth" in reason, reason
    finally:
        lab.exec("node3", drain, check=False)
    assert node(cluster)["node3"] == ("idle", "none")


def rpc_counts(env: dict[str, Any]) -> dict[str, int]:
    """slurmctld's RPC counts by message type, as `sdiag` prints them
    ("REQUEST_NODE_INFO                       ( 2007) count:12     ave_time:180 ...")."""
    counts = {}
    for line in ctl(env, "sdiag").splitlines():
        words = line.split()
        if len(words) >= 4 and words[0].startswith(("REQUEST_", "MESSAGE_")) and \
                words[3].startswith("count:"):
            counts[words[0]] = int(words[3].split(":")[1])
    return counts


def test_healthy_checks_ask_slurmctld_nothing(cluster: dict[str, Any]) -> None:
    """Issue 24: 20 healthy `check --drain` runs make no RPC (no sinfo, no scontrol); 5 sick ones
    each ask (sinfo) and the first drains."""
    lab = cluster["lab"]
    drain = ["env", "SLURMD_NODENAME=node2", "/usr/local/bin/rdmaprov", "check", "--nhc",
             "--drain"]
    before = rpc_counts(cluster)
    for _ in range(20):
        assert lab.exec("node2", drain, check=False).returncode == 0
    after = rpc_counts(cluster)
    ours = ("REQUEST_NODE_INFO", "REQUEST_NODE_INFO_SINGLE", "REQUEST_UPDATE_NODE")
    assert {k: after.get(k, 0) - before.get(k, 0) for k in ours} == dict.fromkeys(ours, 0)
    set_mtu(cluster, "node2", 9000)
    try:
        for _ in range(5):
            assert lab.exec("node2", drain, check=False).returncode == 2
        sick = rpc_counts(cluster)
        asked = sum(sick.get(k, 0) - after.get(k, 0) for k in ours[:2])
        assert asked >= 5 and sick.get("REQUEST_UPDATE_NODE", 0) - after.get(
            "REQUEST_UPDATE_NODE", 0) == 1, (after, sick)
    finally:
        set_mtu(cluster, "node2", 1500)
        lab.exec("node2", drain, check=False)  # healthy, drained by us: resumed
    assert node(cluster)["node2"] == ("idle", "none")


def test_slurmd_runs_the_health_check_itself(cluster: dict[str, Any]) -> None:
    """No test hand this time: slurmd's own HealthCheckProgram runs drain and resume."""
    lab = cluster["lab"]
    names = sorted(lab.addresses)
    for name in names:
        lab.exec(name, ["sed", "-i", "s/^HealthCheckInterval=.*/HealthCheckInterval=5/",
                        lab_slurm.SLURM_CONF])
    ctl(cluster, "scontrol", "reconfigure")

    def wait_for(want: tuple[str, str]) -> tuple[str, str]:
        deadline = time.monotonic() + 60
        while (got := node(cluster)["node3"]) != want and time.monotonic() < deadline:
            time.sleep(1)
        return got

    set_mtu(cluster, "node3", 9000)
    try:
        assert wait_for(("drain", "rdmaprov: [config] eth1 MTU 9000, want 1500")) == (
            "drain", "rdmaprov: [config] eth1 MTU 9000, want 1500")
    finally:
        set_mtu(cluster, "node3", 1500)
    assert wait_for(("idle", "none")) == ("idle", "none")


# Issue 37: a hook never drains for its own set-up. The textfile directory a user names
# (node_exporter's, not there on a fresh node) and the check with no expectations, which on a
# node without RDMA says "[config] no RDMA devices" on every node.
TEXTFILE = "/var/lib/node_exporter/textfile"
BLOCK = "/^# BEGIN rdmaprov slurm_health$/,/^# END rdmaprov slurm_health$/d"


def states(env: dict[str, Any]) -> dict[str, str]:
    return {n: s for n, (s, _r) in node(env).items()}


def slurmd_config(env: dict[str, Any], key: str) -> str:
    """``key``'s value as slurmctld runs it (`scontrol show config`), not the file's."""
    for line in ctl(env, "scontrol", "show", "config").splitlines():
        name, _, value = line.partition("=")
        if name.strip() == key:
            return value.strip()
    raise AssertionError(f"scontrol show config has no {key}")


def test_the_textfile_dir_is_made_and_the_first_job_drains_nothing(
        cluster: dict[str, Any]) -> None:
    lab = cluster["lab"]
    names = sorted(lab.addresses)
    for name in names:
        lab.exec(name, ["rm", "-rf", "/var/lib/node_exporter"])
    out = play(cluster, "-e", f"slurm_health_textfile_dir={TEXTFILE}")
    assert out.returncode == 0, out.stdout[-3000:]
    for name in names:
        made = lab.exec(name, ["stat", "-c", "%F %a %U:%G", TEXTFILE], check=False)
        assert made.stdout.strip() == "directory 755 root:root", (name, made)
    job = lab.exec(lab_slurm.CONTROLLER, ["timeout", "60", "srun", "-N1", "hostname"],
                   check=False)
    assert job.returncode == 0 and job.stdout.strip() in names, job
    assert states(cluster) == dict.fromkeys(names, "idle")
    prom = lab.exec(job.stdout.strip(), ["cat", f"{TEXTFILE}/rdmaprov_check.prom"]).stdout
    assert "rdmaprov_check_healthy 1\n" in prom, prom


def test_a_check_that_would_drain_every_node_is_not_armed(cluster: dict[str, Any]) -> None:
    lab = cluster["lab"]
    names = sorted(lab.addresses)
    for name in names:  # slurm.conf as the site had it before the role armed anything
        lab.exec(name, ["sed", "-i", BLOCK, lab_slurm.SLURM_CONF])
    ctl(cluster, "scontrol", "reconfigure")
    assert slurmd_config(cluster, "Prolog") == "(null)"
    bare = '{"slurm_health_expect": {}}'  # no expectations: the check's defaults
    refused = play(cluster, "-e", bare)
    assert refused.returncode != 0, refused.stdout[-3000:]
    fatal = [ln for ln in refused.stdout.splitlines() if ln.startswith("fatal: ")]
    want = f"would drain {len(names)} of {len(names)} nodes: [config] no RDMA devices"
    assert len(fatal) == 1 and want in fatal[0], refused.stdout[-3000:]
    assert "slurm_health_force" in fatal[0]
    for name in names:
        conf = lab.exec(name, ["cat", lab_slurm.SLURM_CONF]).stdout
        assert "rdmaprov slurm_health" not in conf and "Prolog=" not in conf, (name, conf)
    assert slurmd_config(cluster, "Prolog") == "(null)"
    assert slurmd_config(cluster, "HealthCheckProgram") == "(null)"
    assert states(cluster) == dict.fromkeys(names, "idle")
    # This module's last test: armed now, the hooks drain every node at their next run; the
    # fixture's first play (the site's expectations) puts the files back for the next session.
    forced = play(cluster, "-e", '{"slurm_health_expect": {}, "slurm_health_force": true}')
    assert forced.returncode == 0, forced.stdout[-3000:]
    assert "slurm_health_force: arming although it " + want in forced.stdout, \
        forced.stdout[-3000:]
    assert slurmd_config(cluster, "Prolog") == "/etc/slurm/rdmaprov-prolog.sh"
