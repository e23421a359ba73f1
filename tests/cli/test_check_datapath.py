"""MTU and PFC judged on the netdevs RoCE really uses (issue 24): the VLAN on top of a RoCE port
(its GIDs' netdev) and each member of a RoCE LAG bond, on the `roce_bond` fixture tree
(tests/fixtures/sysfs/SOURCES.md) made a whole root."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from rdmaprov.check import judge, probes
from rdmaprov.check.expect import Expectations

TREE = Path(__file__).resolve().parents[1] / "fixtures" / "sysfs" / "roce_bond"
GID_V2_VLAN = "0000:0000:0000:0000:0000:ffff:0a64:0005"  # ::ffff:10.100.0.5 on bond0.100


def root_of(tmp_path: Path, vlan_mtu: int | None = None) -> Path:
    root = tmp_path / "root"
    shutil.copytree(TREE, root / "sys", symlinks=True)
    (root / "proc").mkdir()
    (root / "proc/modules").write_text("mlx5_ib 471040 0 - Live 0x0000000000000000\n")
    if vlan_mtu is not None:
        port = root / "sys/class/infiniband/mlx5_bond_0/ports/1"
        (port / "gids/6").write_text(GID_V2_VLAN + "\n")
        (port / "gid_attrs/types/6").write_text("RoCE v2\n")
        (port / "gid_attrs/ndevs/6").write_text("bond0.100\n")
        (root / "sys/class/net/bond0.100").mkdir()
        (root / "sys/class/net/bond0.100/mtu").write_text(f"{vlan_mtu}\n")
    return root


def mtu_item(root: Path, *extra: str) -> dict:
    p = subprocess.run([sys.executable, "-m", "rdmaprov", "check", "--sysroot", str(root),
                        "--expect-memlock", "1", "--expect-gpus", "0", "--link-state", "",
                        "--hca", "mlx5_bond_0", "--expect-mtu", "9000", "--json", *extra],
                       capture_output=True, text=True, timeout=60, check=False)
    assert p.stderr == "", p.stderr
    return {c["name"]: c for c in json.loads(p.stdout)["checks"]}["mtu"]


def test_bond_members_and_vlan_are_on_the_mtu_path(tmp_path: Path) -> None:
    root = root_of(tmp_path, vlan_mtu=9000)
    assert mtu_item(root)["detail"] == "bond0, bond0.100, ens1f0np0, ens1f1np1 at 9000"
    (root / "sys/class/net/ens1f1np1/mtu").write_text("1500\n")
    item = mtu_item(root)
    assert item["status"] == "fail" and item["detail"] == "ens1f1np1 MTU 1500, want 9000"


def test_a_vlan_with_a_small_mtu_is_named(tmp_path: Path) -> None:
    item = mtu_item(root_of(tmp_path, vlan_mtu=1500))
    assert item["status"] == "fail" and item["detail"] == "bond0.100 MTU 1500, want 9000"


def test_pfc_is_judged_on_each_bond_member_not_the_bond(tmp_path: Path) -> None:
    root = root_of(tmp_path, vlan_mtu=9000)
    exp = Expectations(hcas=["mlx5_bond_0"], memlock="0", gpus=0)
    state = {"rdma": probes.rdma(str(root))}
    assert judge.qos_interfaces(state, exp) == ["ens1f0np0", "ens1f1np1"]


def test_pfc_is_not_read_from_this_machine_under_a_sysroot(tmp_path: Path) -> None:
    # mlnx_qos and dcb ask the running kernel: under --sysroot they would read this machine's
    # interfaces of the same names, so the item says it could not read the root's PFC.
    p = subprocess.run([sys.executable, "-m", "rdmaprov", "check", "--sysroot",
                        str(root_of(tmp_path)), "--expect-memlock", "1", "--expect-gpus", "0",
                        "--link-state", "", "--hca", "mlx5_bond_0", "--expect-pfc", "3",
                        "--json"], capture_output=True, text=True, timeout=60, check=False)
    qos = {c["name"]: c for c in json.loads(p.stdout)["checks"]}["qos"]
    assert qos["status"] == "n/a"
    assert qos["detail"] == (
        "not applicable: ens1f0np0: PFC not read under --sysroot (mlnx_qos and dcb read the "
        "running kernel, not the root's); ens1f1np1: PFC not read under --sysroot (mlnx_qos "
        "and dcb read the running kernel, not the root's)")
