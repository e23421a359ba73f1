"""slurm_health with `slurm_health_expect_dir` on lab nodes: the class file that
`probe --write-expectations` wrote lands as /etc/rdmaprov/check.yml on each host hosts.yml names
(with slurm_health_expect on top), a second run and `--check` change nothing, and a host that
hosts.yml does not name is refused in one line before anything on it changes.

Lab nodes have no RDMA: the expectations are derived from a fixture node's facts (the ib_ndr
tree, read by the collector rdma_facts runs) under the lab's own host names, as probe would
write them for a fleet of such nodes. No Slurm is needed for this part of the role: the hooks
go to /etc/rdmaprov, slurm.conf is left alone, and the installed file is read back through
check's own loader here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rdmaprov import collection
from rdmaprov.check import expect
from rdmaprov.lab import Lab
from rdmaprov.probe import expectations

pytestmark = pytest.mark.lab
ROOT = Path(__file__).resolve().parents[2]
LAB_NAME = os.environ.get("RDMAPROV_EXPECT_LAB", "hexp")
BIN = Path(sys.executable).parent
FIXTURES = ROOT / "tests/fixtures/sysfs"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    if os.geteuid() != 0:
        if os.environ.get("RDMAPROV_REQUIRE_LAB") == "1":
            pytest.fail("the lab needs root")
        pytest.skip("the lab needs root")
    lab = Lab(LAB_NAME)
    lab.up(nodes=3, log=lambda msg: None)
    try:
        work = tmp_path_factory.mktemp("expect")
        named, unnamed = sorted(lab.addresses)[:2], sorted(lab.addresses)[2]
        facts = collection.rdma_sysfs.collect(str(FIXTURES / "ib_ndr"))
        written = expectations.write(work / "exp",
                                     expectations.derive({h: facts for h in named}), "inv")
        (work / "ansible_collections/rdmaprov").mkdir(parents=True)
        (work / "ansible_collections/rdmaprov/cluster").symlink_to(ROOT)
        book = work / "play.yml"
        book.write_text(
            "- hosts: all\n  gather_facts: false\n  become: true\n  roles:\n"
            "    - role: rdmaprov.cluster.slurm_health\n      vars:\n"
            f"        slurm_health_expect_dir: {work / 'exp'}\n"
            "        slurm_health_expect: {memlock: '0'}\n"
            "        slurm_health_script_dir: /etc/rdmaprov\n"
            "        slurm_health_verify: false\n")
        for node in lab.addresses:
            lab.exec(node, ["rm", "-rf", "/etc/rdmaprov"])
        yield {"lab": lab, "work": work, "book": book, "named": named, "unnamed": unnamed,
               "class_file": written[0]}
    finally:
        if os.environ.get("RDMAPROV_KEEP_LAB") != "1":
            lab.down(log=lambda msg: None)


def play(env: dict[str, Any], *args: str, cwd: str | None = None
         ) -> subprocess.CompletedProcess[str]:
    argv = [str(BIN / "ansible-playbook"), "-i", str(env["lab"].inventory), str(env["book"]),
            *args]
    run_env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(env["work"]),
               "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run(argv, capture_output=True, text=True, env=run_env, timeout=600,
                          check=False, cwd=cwd)


def recap(out: str) -> dict[str, tuple[int, int]]:
    rows = [line for line in out.splitlines() if " : ok=" in line]
    return {r.split()[0]: (int(r.split("changed=")[1].split()[0]),
                           int(r.split("failed=")[1].split()[0])) for r in rows}


def test_class_file_lands_idempotent_and_an_unnamed_host_is_refused(env: dict[str, Any],
                                                                    tmp_path: Path) -> None:
    lab, named, unnamed = env["lab"], env["named"], env["unnamed"]
    first = play(env)
    assert first.returncode != 0  # the unnamed host fails; the named ones converge
    rows = recap(first.stdout)
    assert rows[unnamed] == (0, 1), first.stdout[-3000:]
    assert all(rows[h][0] > 0 and rows[h][1] == 0 for h in named), first.stdout[-3000:]
    # Refused in one line, naming the host, before anything on it changed.
    failed = [ln for ln in first.stdout.splitlines() if ln.startswith(f"fatal: [{unnamed}]")]
    assert len(failed) == 1, first.stdout[-3000:]
    msg = failed[0]
    assert f"{unnamed} is not in its hosts.yml" in msg and "\\n" not in msg.split('"msg"')[1]
    gone = lab.exec(unnamed, ["test", "-e", "/etc/rdmaprov"], check=False)
    assert gone.returncode != 0, "the refused host got /etc/rdmaprov"
    # Each named host's check.yml is its class file's keys with slurm_health_expect on top,
    # and it loads through check's own loader.
    want = expect.load_file(env["class_file"])
    assert want["ports"] == 3 and want["mtu"] == 4092  # ib_ndr: mlx5_3 is DOWN
    for host in named:
        text = lab.exec(host, ["cat", "/etc/rdmaprov/check.yml"]).stdout
        assert text.startswith("# Managed by rdmaprov.cluster.slurm_health (slurm_health_expect_dir"
                               f" {env['class_file'].name}, slurm_health_expect)")
        local = tmp_path / f"{host}.yml"
        local.write_text(text)
        assert expect.load_file(local) == {**want, "memlock": "0"}
    limit = ["--limit", ",".join(named)]
    again = play(env, *limit)
    assert again.returncode == 0, again.stdout[-3000:]
    assert set(recap(again.stdout).values()) == {(0, 0)}, again.stdout[-3000:]
    dry = play(env, *limit, "--check", "--diff")
    assert dry.returncode == 0, dry.stdout[-3000:]
    assert set(recap(dry.stdout).values()) == {(0, 0)}, dry.stdout[-3000:]
    # A DIR given relative to the playbook (run from elsewhere) is found as the lookups find it.
    rel = play(env, *limit, "-e", "slurm_health_expect_dir=exp", cwd="/")
    assert rel.returncode == 0 and set(recap(rel.stdout).values()) == {(0, 0)}, rel.stdout[-3000:]
    # A DIR without hosts.yml: one line, nothing changed.
    bare = play(env, *limit, "-e", f"slurm_health_expect_dir={env['work'] / 'nothing'}")
    fatal = [ln for ln in bare.stdout.splitlines() if ln.startswith("fatal: ")]
    assert bare.returncode != 0 and len(fatal) == 1 and "no hosts.yml in it" in fatal[0], \
        bare.stdout[-3000:]
    assert all(c == 0 for c, _ in recap(bare.stdout).values()), bare.stdout[-3000:]
    # A class file that changed is drift --check reports, and nothing is written.
    env["class_file"].write_text(env["class_file"].read_text().replace("mtu: 4092", "mtu: 2044"))
    drift = play(env, *limit, "--check", "--diff")
    assert drift.returncode == 0 and set(recap(drift.stdout).values()) == {(1, 0)}, \
        drift.stdout[-3000:]
    assert "+mtu: 2044" in drift.stdout
    assert "mtu: 4092" in lab.exec(named[0], ["cat", "/etc/rdmaprov/check.yml"]).stdout
