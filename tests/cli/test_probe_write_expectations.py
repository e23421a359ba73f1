"""`probe --write-expectations` round trip: expectations derived from a node root's facts (read
by the collector rdma_facts runs) pass `rdmaprov check --sysroot` on that root, and fail on a
root with a port down or slower, naming the port; bad flags are one line, exit 1."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rdmaprov import collection
from rdmaprov.cli import main
from rdmaprov.probe import expectations

FIXTURES = Path(__file__).resolve().parents[2] / "tests/fixtures/sysfs"


def node_root(tmp: Path, *, all_up: bool = True, slow: str | None = None) -> Path:
    """The ib_ndr tree as a node's root (sys/ and an empty proc/modules); its mlx5_3 is DOWN
    unless all_up; slow: a device whose port trains at 200 Gb/s."""
    shutil.copytree(FIXTURES / "ib_ndr", tmp / "sys")
    (tmp / "proc").mkdir()
    (tmp / "proc/modules").write_text("")
    ports = tmp / "sys/class/infiniband"
    if all_up:
        (ports / "mlx5_3/ports/1/state").write_text("4: ACTIVE\n")
        (ports / "mlx5_3/ports/1/phys_state").write_text("5: LinkUp\n")
        (ports / "mlx5_3/ports/1/rate").write_text("400 Gb/sec (4X NDR)\n")
    if slow:
        (ports / slow / "ports/1/rate").write_text("200 Gb/sec (4X HDR)\n")
    return tmp


def check_lines(root: Path, config: Path) -> tuple[int, dict[str, str]]:
    p = subprocess.run([sys.executable, "-m", "rdmaprov", "check", "--sysroot", str(root),
                        "--config", str(config), "--expect-memlock", "1"],
                       capture_output=True, text=True, timeout=60, check=False)
    assert "Traceback" not in p.stderr, p.stderr
    return p.returncode, {ln.split()[0]: ln for ln in p.stdout.splitlines() if ln.strip()}


def test_round_trip_passes_where_derived_and_names_what_differs(tmp_path: Path) -> None:
    good = node_root(tmp_path / "good")
    facts = collection.rdma_sysfs.collect(str(good / "sys"))
    written = expectations.write(tmp_path / "exp",
                                 expectations.derive({"n1": facts, "n2": facts}), "inv")
    config = written[0]
    rc, lines = check_lines(good, config)
    assert lines["ports"].split()[1] == "PASS", lines["ports"]
    assert "4 ACTIVE at 400 Gb/s" in lines["ports"]
    assert lines["mtu"].split()[1] == "PASS", lines["mtu"]
    rc, lines = check_lines(node_root(tmp_path / "down", all_up=False), config)
    assert rc == 2 and lines["ports"].split()[1] == "FAIL"
    assert "3 of 4 RDMA ports ACTIVE: mlx5_3/1 DOWN" in lines["ports"]
    rc, lines = check_lines(node_root(tmp_path / "slow", slow="mlx5_1"), config)
    assert rc == 2 and "mlx5_1/1 at 200 Gb/s, want 400 Gb/s" in lines["ports"]


def test_a_different_mtu_fails_naming_the_netdev(tmp_path: Path) -> None:
    good = node_root(tmp_path / "good")
    facts = collection.rdma_sysfs.collect(str(good / "sys"))
    config = expectations.write(tmp_path / "exp", expectations.derive({"n1": facts}), "inv")[0]
    (good / "sys/class/net/ibp2s0/mtu").write_text("2044\n")
    rc, lines = check_lines(good, config)
    assert rc == 2 and "ibp2s0 MTU 2044, want 4092" in lines["mtu"]


@pytest.mark.parametrize(("kind", "message"), [
    ("no-inventory", "--write-expectations: needs an INVENTORY"),
    ("file", "not a directory"),
    ("under-file", "is not a directory"),
])
def test_bad_flags_are_one_line_exit_1_before_any_host(tmp_path: Path, capsys, kind: str,
                                                       message: str) -> None:
    inv = tmp_path / "inv.ini"
    inv.write_text("[gpu]\nn1 ansible_host=192.0.2.1\n")  # TEST-NET: never reached
    afile = tmp_path / "afile"
    afile.write_text("")
    argv = {"no-inventory": ["--write-expectations", str(tmp_path / "d")],
            "file": [str(inv), "--write-expectations", str(afile)],
            "under-file": [str(inv), "--write-expectations", str(afile / "d")]}[kind]
    code = main(["probe", *argv])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("rdmaprov: error: ") and message in err


def test_the_terminal_names_the_hosts_that_differ_and_those_left_out(tmp_path: Path,
                                                                    capsys) -> None:
    import argparse
    import copy

    from rdmaprov.cli import probe

    facts = collection.rdma_sysfs.collect(str(node_root(tmp_path / "r") / "sys"))
    down = copy.deepcopy(facts)
    down["devices"][3]["ports"][0]["state"] = "DOWN"
    docs = {"n1": {"rdma": facts}, "n2": {"rdma": facts}, "n3": {"rdma": down},
            "cpu\x1b[2J1": {"rdma": collection.rdma_sysfs.collect("/nonexistent")}}
    args = argparse.Namespace(write_expectations=tmp_path / "exp", inventory=Path("inv.ini"))
    probe._write_expectations(args, docs, {"n4": "unreachable: timed out"}, sys.stdout)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (f"Expectations {tmp_path}/exp/infiniband-mt4129.yml: 3 host(s)"
                      ", link_layer InfiniBand, ports 4, rate 400, mtu 4092")
    assert "  n3 differs: ports 3 (class infiniband-mt4129: 4 on 2 of 3 hosts)" in out
    assert "  n4: no expectations (unreachable: timed out)" in out
    assert any(line.startswith("  cpu1: no expectations (no RDMA port") for line in out)
    assert out[-1] == f"Index: {tmp_path}/exp/hosts.yml"
