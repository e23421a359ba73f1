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
from rdmaprov.check import expect
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
                      ", link_layer InfiniBand, ports 4, rate 400, mtu 4092, gpus 0, "
                      "firmware MT_0000000838=28.39.1002")
    assert "  n3 differs: ports 3 (class infiniband-mt4129: 4 on 2 of 3 hosts)" in out
    assert "  n4: no expectations (unreachable: timed out)" in out
    assert any(line.startswith("  cpu1: no expectations (no RDMA port") for line in out)
    assert out[-1] == f"Index: {tmp_path}/exp/hosts.yml"


# --- the MTU check compares, on a RoCE VLAN root; GPUs on whole roots ---------------------------

ROCE_BOND = FIXTURES / "roce_bond"
GID_V2_VLAN = "0000:0000:0000:0000:0000:ffff:0a64:0005"  # ::ffff:10.100.0.5 on bond0.100
sys.path.insert(0, str(FIXTURES))
try:
    import make_trees
finally:
    sys.path.remove(str(FIXTURES))


def vlan_root(tmp: Path, vlan_mtu: int) -> Path:
    """The roce_bond tree as a node's root, with a VLAN bond0.100 (its own RoCE v2 GID) on the
    LAG bond: the netdevs RoCE crosses are the bond, its VLAN and the bond's members."""
    shutil.copytree(ROCE_BOND, tmp / "sys", symlinks=True)
    (tmp / "proc").mkdir()
    (tmp / "proc/modules").write_text("")
    port = tmp / "sys/class/infiniband/mlx5_bond_0/ports/1"
    (port / "gids/6").write_text(GID_V2_VLAN + "\n")
    (port / "gid_attrs/types/6").write_text("RoCE v2\n")
    (port / "gid_attrs/ndevs/6").write_text("bond0.100\n")
    (tmp / "sys/class/net/bond0.100").mkdir()
    (tmp / "sys/class/net/bond0.100/mtu").write_text(f"{vlan_mtu}\n")
    return tmp


def derived_file(tmp: Path, roots: dict[str, Path]) -> tuple[dict, list[Path]]:
    derived = expectations.derive({h: collection.rdma_sysfs.collect(str(r / "sys"))
                                   for h, r in roots.items()})
    return derived, expectations.write(tmp / "exp", derived, "inv")


def test_the_derived_mtu_is_the_one_check_compares_on_a_vlan_root(tmp_path: Path) -> None:
    good = vlan_root(tmp_path / "good", 9000)
    derived, written = derived_file(tmp_path, {"n1": good, "n2": good})
    assert expect.load_file(written[0])["mtu"] == 9000
    rc, lines = check_lines(good, written[0])
    assert lines["mtu"].split()[1] == "PASS", lines["mtu"]
    assert "bond0, bond0.100, ens1f0np0, ens1f1np1" in lines["mtu"]
    # The VLAN left at 1500 on one node of three: that node is named, and its check fails on
    # the VLAN (the port's own netdev is at 9000: read alone it would have passed).
    small = vlan_root(tmp_path / "small", 1500)
    derived, written = derived_file(tmp_path / "b", {"n1": good, "n2": good, "n3": small})
    assert derived["differs"]["n3"] == [
        "mtu not one MTU (bond0 9000, bond0.100 1500, ens1f0np0 9000, ens1f1np1 9000, ens3np0 "
        "9000, ens4np0 9000) (class ethernet-mt4125-mt4129: 9000 on 2 of 3 hosts)"]
    rc, lines = check_lines(small, written[0])
    assert rc == 2 and "bond0.100 MTU 1500, want 9000" in lines["mtu"]


def test_a_fleet_whose_vlans_differ_from_their_ports_gets_no_mtu_not_a_false_drain(
        tmp_path: Path) -> None:
    # Every node built alike with the VLAN below its port (1500 on 9000): healthy as built, but
    # no single MTU can pass check's comparison. The port's MTU (what the fleet's netdevs said
    # before) would drain every node:
    root = vlan_root(tmp_path / "r", 1500)
    p = subprocess.run([sys.executable, "-m", "rdmaprov", "check", "--sysroot", str(root),
                        "--expect-memlock", "1", "--expect-mtu", "9000"],
                       capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 2 and "bond0.100 MTU 1500, want 9000" in p.stdout
    derived, written = derived_file(tmp_path, {"n1": root, "n2": root})
    cls = derived["classes"]["ethernet-mt4125-mt4129"]
    assert "mtu" not in expect.load_file(written[0]) and derived["differs"] == {}
    assert cls["left_out"] == ["mtu: no single MTU on the netdevs check compares on 2 of 2 hosts "
                               "(e.g. n1: bond0 9000, bond0.100 1500, ens1f0np0 9000, ens1f1np1 "
                               "9000, ens3np0 9000, ens4np0 9000)"]
    assert "#   mtu: no single MTU on the netdevs check compares" in written[0].read_text()
    _rc, lines = check_lines(root, written[0])
    assert lines["mtu"].split()[1] == "N/A", lines["mtu"]
    assert lines["ports"].split()[1] == "PASS", lines["ports"]


def test_gpus_derived_per_class_and_a_cpu_node_is_not_drained_for_its_neighbours(
        tmp_path: Path) -> None:
    gpu = make_trees.build_root("modular_loaded", tmp_path / "g")  # 1 NDR port, 1 H100
    cpu = make_trees.build_root("modular_loaded", tmp_path / "c")
    shutil.rmtree(cpu / "proc/driver/nvidia")
    (cpu / "dev/nvidia0").unlink()
    derived, written = derived_file(tmp_path, {"g1": gpu, "g2": gpu, "g3": gpu, "c1": cpu})
    assert sorted(derived["classes"]) == ["infiniband-mt4129", "infiniband-mt4129-gpu"]
    assert derived["differs"] == {}
    files = {p.stem: p for p in written}
    assert expect.load_file(files["infiniband-mt4129-gpu"])["gpus"] == 1
    assert expect.load_file(files["infiniband-mt4129"])["gpus"] == 0
    rc, lines = check_lines(gpu, files["infiniband-mt4129-gpu"])
    assert rc == 0 and lines["gpus"].split()[1] == "PASS", lines
    rc, lines = check_lines(cpu, files["infiniband-mt4129"])
    assert rc == 0 and lines["gpus"].split()[1] == "N/A", lines  # healthy CPU node: healthy
    # A GPU node whose GPU the driver no longer shows (still on PCI, so still in its class) is
    # named when probed, and fails on gpus with its class's file.
    lost = make_trees.build_root("modular_loaded", tmp_path / "l")
    shutil.rmtree(lost / "proc/driver/nvidia/gpus")
    (lost / "dev/nvidia0").unlink()
    for root in (gpu, lost):
        pci = root / "sys/bus/pci/devices/0000:18:00.0"
        pci.mkdir(parents=True)
        (pci / "vendor").write_text("0x10de\n")
        (pci / "class").write_text("0x030200\n")
    derived, written = derived_file(tmp_path / "b", {"g1": gpu, "g2": gpu, "l1": lost})
    assert derived["hosts"]["l1"] == "infiniband-mt4129-gpu"
    assert derived["differs"]["l1"] == ["gpus 0 (class infiniband-mt4129-gpu: 1 on 2 of 3 hosts)"]
    rc, lines = check_lines(lost, written[0])
    assert rc == 2 and lines["gpus"].split()[1] == "FAIL", lines
    assert "no NVIDIA GPU visible" in lines["gpus"]


def test_one_rule_the_facts_path_mtu_names_exactly_the_netdevs_check_compares(
        tmp_path: Path) -> None:
    from rdmaprov.check import judge, probes
    from rdmaprov.check.expect import Expectations

    for name, root in (("vlan", vlan_root(tmp_path / "v", 9000)),
                       ("ib", node_root(tmp_path / "ib"))):
        facts = collection.rdma_sysfs.collect(str(root / "sys"))
        from_facts = {n for d in facts["devices"] for p in d["ports"] for n in p["path_mtu"]}
        checked = judge._mtu_interfaces({"rdma": probes.rdma(str(root))}, Expectations())
        assert from_facts == set(checked), name
    assert "bond0.100" in from_facts or name == "ib"


def test_an_unused_port_left_at_another_mtu_is_no_false_drain(tmp_path: Path) -> None:
    # The roce tree: mlx5_1's port is administratively down (DOWN/Disabled). A port set down
    # is out of every check item (judge.excluded, issue 38): its netdev left at 1500 (never
    # configured) fails nothing, and the derived MTU is the one of the ports in use.
    root = tmp_path / "r"
    shutil.copytree(FIXTURES / "roce", root / "sys")
    (root / "proc").mkdir()
    (root / "proc/modules").write_text("")
    (root / "sys/class/net/ens1f1np1/mtu").write_text("1500\n")
    p = subprocess.run([sys.executable, "-m", "rdmaprov", "check", "--sysroot", str(root),
                        "--expect-memlock", "1", "--expect-mtu", "9000"],
                       capture_output=True, text=True, timeout=60, check=False)
    assert "ens1f1np1" not in p.stdout and "mtu        PASS  ens1f0np0 at 9000" in p.stdout, \
        p.stdout
    derived, written = derived_file(tmp_path, {"n1": root, "n2": root})
    assert expect.load_file(written[0])["mtu"] == 9000 and derived["differs"] == {}
    _rc, lines = check_lines(root, written[0])
    assert lines["mtu"].split()[1] == "PASS" and lines["ports"].split()[1] == "PASS", lines


def test_the_fleets_firmware_is_written_and_a_host_on_another_fails(tmp_path: Path) -> None:
    # Two hosts as probed on 28.39.1002; a third whose four cards were all flashed to another
    # version: alike among themselves (no mixed node), but not the fleet's.
    fleet = node_root(tmp_path / "fleet")
    _derived, written = derived_file(tmp_path, {"n1": fleet, "n2": fleet})
    assert expect.load_file(written[0])["firmware"] == {"MT_0000000838": "28.39.1002"}
    rc, lines = check_lines(fleet, written[0])
    assert lines["firmware"].split()[1] == "PASS", lines
    other = node_root(tmp_path / "other")
    for dev in ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"):
        (other / f"sys/class/infiniband/{dev}/fw_ver").write_text("28.40.1000\n")
    rc, lines = check_lines(other, written[0])
    assert rc == 2
    assert "mlx5_3 fw 28.40.1000, want 28.39.1002 (board MT_0000000838) [firmware]" in \
        lines["firmware"], lines
