"""memlock as the job will get it (issue 24): slurmd's limit when slurm.conf does not propagate
MEMLOCK, else slurmd's hard limit as the cap on the submitter's; this process's own without a
slurmd; and each answer says where it was read."""

from __future__ import annotations

from pathlib import Path

from rdmaprov.check import judge, probes
from rdmaprov.check.expect import Expectations

# /proc/<pid>/limits as the kernel prints it (fs/proc/base.c proc_pid_limits).
LIMITS = """Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            131072               131072               files
Max locked memory         {soft:<20} {hard:<20} bytes
Max address space         unlimited            unlimited            bytes
"""


def node(tmp_path: Path, soft: str | None = None, hard: str = "unlimited",
         conf: str | None = None) -> str:
    (tmp_path / "proc/1").mkdir(parents=True)
    (tmp_path / "proc/1/comm").write_text("systemd\n")
    if soft is not None:
        (tmp_path / "proc/4242").mkdir()
        (tmp_path / "proc/4242/comm").write_text("slurmd\n")
        (tmp_path / "proc/4242/limits").write_text(LIMITS.format(soft=soft, hard=hard))
    if conf is not None:
        (tmp_path / "etc/slurm").mkdir(parents=True)
        (tmp_path / "etc/slurm/slurm.conf").write_text(conf)
    return str(tmp_path)


def item(root: str, want: str = "unlimited") -> judge.Item:
    state = {"memlock": None, **probes._memlock_state(root)}
    return judge.check_memlock(state, Expectations(memlock=want))


def test_slurmd_limit_when_memlock_is_not_propagated(tmp_path: Path) -> None:
    root = node(tmp_path, soft="unlimited",
                conf="ClusterName=c\nPropagateResourceLimitsExcept=MEMLOCK  # RDMA\n")
    i = item(root)
    assert i.status == "pass"
    assert i.detail == ("unlimited (slurmd's limit (/proc/4242/limits; /etc/slurm/slurm.conf: "
                        "PropagateResourceLimitsExcept=MEMLOCK))")


def test_slurmd_with_a_small_limit_fails_and_says_where(tmp_path: Path) -> None:
    root = node(tmp_path, soft="65536", hard="65536",
                conf="PropagateResourceLimits=NONE\n")
    i = item(root)
    assert i.status == "fail" and i.remedy == "config"
    assert i.detail == ("memlock 64 KiB, want unlimited (RDMA pins memory); read from slurmd's "
                        "limit (/proc/4242/limits; /etc/slurm/slurm.conf: "
                        "PropagateResourceLimits=NONE)")


def test_propagated_memlock_is_capped_by_slurmds_hard_limit(tmp_path: Path) -> None:
    root = node(tmp_path, soft="65536", hard="unlimited")  # no slurm.conf: default ALL
    i = item(root)
    assert i.status == "pass"
    assert "the job gets the submitting shell's limit" in i.detail
    assert "Slurm's default PropagateResourceLimits=ALL" in i.detail
    i = item(node(tmp_path / "b", soft="65536", hard="65536"))
    assert i.status == "fail" and "slurmd's hard limit (/proc/4242/limits) caps it" in i.detail


def test_without_slurmd_it_is_this_process(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # On the node itself (root /) with no slurmd, the check's own limit is what a job started
    # the same way gets.
    monkeypatch.setattr(probes, "slurmd_memlock", lambda root="/": None)
    i = item("/", want="1")
    assert i.status == "pass" and i.detail.endswith("(this process's limit (no slurmd running))")


def test_under_a_sysroot_without_slurmd_it_is_not_judged(tmp_path: Path) -> None:
    # The checker's own limit says nothing of another root's jobs: never a drain on it.
    i = item(node(tmp_path))
    assert i.status == "n/a"
    assert i.detail == (f"not read: no slurmd in {tmp_path / 'proc'}, and this process's own "
                        "limit is not the root's (--sysroot)")
