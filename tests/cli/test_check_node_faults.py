"""Faults of real node roots, through `rdmaprov check --sysroot` (issue 38): an ACTIVE port
whose PHY is not LinkUp, a spare port set down kept out of every item, LID 0 on an ACTIVE IB
port, AER errors on an HCA or GPU, firmware differing between cards of one board, a RoCE rail
without a routable RoCE v2 GID. Formats: tests/fixtures/sysfs/SOURCES.md ("Node faults")."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "_check_fakes", Path(__file__).resolve().parents[1] / "unit" / "test_check_logic.py")
assert _spec is not None and _spec.loader is not None
_fakes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fakes)
fake_node = _fakes.fake_node
_spec = importlib.util.spec_from_file_location(
    "_pcie_root", Path(__file__).resolve().parents[1] / "fixtures" / "sysfs" / "pcie_root.py")
assert _spec is not None and _spec.loader is not None
pcie_root = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pcie_root)

NDR = "400 Gb/sec (4X NDR)"
ETH200 = "200 Gb/sec (4X HDR)"
BOARD = "MT_0000000838"


def check(root: Path, *args: str, link_state: str = "") -> tuple[int, dict]:
    p = subprocess.run([sys.executable, "-m", "rdmaprov", "check", "--sysroot", str(root),
                        "--expect-memlock", "1", "--link-state", link_state, "--json", *args],
                       capture_output=True, text=True, timeout=60, check=False)
    assert p.stderr == "", p.stderr
    return p.returncode, json.loads(p.stdout)


def item(doc: dict, name: str) -> dict:
    return next(c for c in doc["checks"] if c["name"] == name)


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def ib_node(tmp_path: Path, n: int = 4) -> Path:
    """n ConnectX-7 NDR rails, port 1 IB ACTIVE/LinkUp with an SM-assigned LID (`0x1a`...),
    fw 28.39.1002, board MT_0000000838."""
    ports = [(f"mlx5_{i}", 1, "4: ACTIVE", NDR, "InfiniBand", f"ibp{i}s0") for i in range(n)]
    root = fake_node(tmp_path, ports=ports, mtus={f"ibp{i}s0": 4092 for i in range(n)})
    for i in range(n):
        dev = f"sys/class/infiniband/mlx5_{i}"
        write(root, f"{dev}/board_id", BOARD)
        write(root, f"{dev}/fw_ver", "28.39.1002")
        write(root, f"{dev}/ports/1/lid", f"{0x1a + i:#x}")
    return root


def _v4_gid(ip: str) -> str:
    a, b, c, d = (int(x) for x in ip.split("."))
    return f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}"


def gids(root: Path, dev: str, port: int, table: list[tuple[str, str, str]]) -> None:
    """A port's GID table as sysfs shows it: gids/N, gid_attrs/types/N, gid_attrs/ndevs/N."""
    base = f"sys/class/infiniband/{dev}/ports/{port}"
    for i, (gid, kind, ndev) in enumerate(table):
        write(root, f"{base}/gids/{i}", gid)
        write(root, f"{base}/gid_attrs/types/{i}", kind)
        write(root, f"{base}/gid_attrs/ndevs/{i}", ndev)
    for i in range(len(table), 8):  # empty slots: gids/N reads all zeroes, the attrs EINVAL
        write(root, f"{base}/gids/{i}", "0000:0000:0000:0000:0000:0000:0000:0000")


def roce_node(tmp_path: Path, n: int = 4, mtu: int = 9000) -> Path:
    """n ConnectX-7 200GbE RoCE rails (ens{i}np0), each netdev up (flags 0x1003) at ``mtu``
    with an IPv4 address: link-local v1/v2 and IPv4-mapped v1/v2 GIDs, as mlx5 fills them."""
    ports = [(f"mlx5_{i}", 1, "4: ACTIVE", ETH200, "Ethernet", f"ens{i}np0") for i in range(n)]
    root = fake_node(tmp_path, ports=ports, mtus={f"ens{i}np0": mtu for i in range(n)})
    for i in range(n):
        dev, nd = f"mlx5_{i}", f"ens{i}np0"
        write(root, f"sys/class/infiniband/{dev}/board_id", BOARD)
        write(root, f"sys/class/infiniband/{dev}/fw_ver", "28.39.1002")
        write(root, f"sys/class/net/{nd}/flags", "0x1003")
        ll = f"fe80:0000:0000:0000:0e42:a1ff:fe00:00{i:02x}"
        v4 = _v4_gid(f"10.0.{i}.11")
        gids(root, dev, 1, [(ll, "IB/RoCE v1", nd), (ll, "RoCE v2", nd),
                            (v4, "IB/RoCE v1", nd), (v4, "RoCE v2", nd)])
    return root


# -- 1. an ACTIVE port whose PHY is not LinkUp ---------------------------------------------------


def test_healthy_rails_pass(tmp_path: Path) -> None:
    code, doc = check(ib_node(tmp_path / "ib"))
    assert code == 0, doc
    code, doc = check(roce_node(tmp_path / "roce"), "--expect-mtu", "9000")
    assert code == 0, doc


def test_an_active_port_retraining_is_named_with_its_phys_state(tmp_path: Path) -> None:
    for phys, word in (("6: LinkErrorRecovery", "LinkErrorRecovery"), ("2: Polling", "Polling"),
                       ("4: PortConfigurationTraining", "PortConfigurationTraining")):
        root = ib_node(tmp_path / word)
        write(root, "sys/class/infiniband/mlx5_2/ports/1/phys_state", phys)
        code, doc = check(root)
        assert code == 2, doc
        assert item(doc, "ports")["remedy"] == "reset-link"
        assert doc["reason"] == (f"[reset-link] mlx5_2/1 ACTIVE but its PHY is {word} "
                                 "(want LinkUp)")


def test_an_unreadable_phys_state_is_not_a_fault(tmp_path: Path) -> None:
    root = ib_node(tmp_path)
    (root / "sys/class/infiniband/mlx5_1/ports/1/phys_state").unlink()
    code, doc = check(root)
    assert code == 0, doc


# -- 2. a port out of the rail count is out of every item ----------------------------------------


def test_a_spare_roce_card_set_down_is_out_of_every_item(tmp_path: Path) -> None:
    root = roce_node(tmp_path, n=4)
    # The spare: same model, uncabled, its netdev set down as docs/day2.md says (no IFF_UP:
    # flags 0x1002), left at the distribution's MTU 1500, no IPv4 (only link-local GIDs).
    for rel, text in (("ports/1/state", "1: DOWN"), ("ports/1/phys_state", "3: Disabled"),
                      ("ports/1/rate", "10 Gb/sec (1X SDR)"), ("ports/1/link_layer", "Ethernet"),
                      ("board_id", BOARD), ("fw_ver", "28.36.1010")):
        write(root, f"sys/class/infiniband/mlx5_4/{rel}", text)
    (root / "sys/class/infiniband/mlx5_4/device/net/ens4np0").mkdir(parents=True)
    write(root, "sys/class/net/ens4np0/mtu", "1500")
    write(root, "sys/class/net/ens4np0/flags", "0x1002")
    code, doc = check(root, "--expect-mtu", "9000")
    assert code == 0, doc
    assert item(doc, "mtu")["detail"] == "ens0np0, ens1np0, ens2np0, ens3np0 at 9000"
    assert "mlx5_4/1 disabled" in item(doc, "ports")["detail"]
    # The same card with its netdev up is a rail down (its cable was pulled), and its MTU counts.
    write(root, "sys/class/net/ens4np0/flags", "0x1003")
    code, doc = check(root, "--expect-mtu", "9000")
    assert code == 2
    assert doc["reason"].startswith("[reset-link] rail down: mlx5_4/1 DOWN (Disabled)")
    assert item(doc, "mtu")["status"] == "fail"


def test_a_disabled_ib_spare_is_out_of_the_mtu_item(tmp_path: Path) -> None:
    root = ib_node(tmp_path, n=4)
    for rel, text in (("ports/1/state", "1: DOWN"), ("ports/1/phys_state", "3: Disabled"),
                      ("ports/1/rate", "10 Gb/sec (4X SDR)"),
                      ("ports/1/link_layer", "InfiniBand"), ("board_id", BOARD)):
        write(root, f"sys/class/infiniband/mlx5_4/{rel}", text)
    (root / "sys/class/infiniband/mlx5_4/device/net/ibp4s0").mkdir(parents=True)
    write(root, "sys/class/net/ibp4s0/mtu", "2044")
    code, doc = check(root, "--expect-mtu", "4092")
    assert code == 0, doc


# -- 3. LID 0 on an ACTIVE InfiniBand port ------------------------------------------------------


def test_lid_0_on_an_active_ib_port_is_named(tmp_path: Path) -> None:
    root = ib_node(tmp_path)
    write(root, "sys/class/infiniband/mlx5_1/ports/1/lid", "0x0")
    code, doc = check(root)
    assert code == 2, doc
    assert doc["reason"] == ("[investigate] mlx5_1/1 ACTIVE with LID 0x0: no subnet manager "
                             "assigned it a LID (is the SM running on this fabric?)")


def test_roce_ports_have_no_lid_to_judge(tmp_path: Path) -> None:
    root = roce_node(tmp_path)
    for i in range(4):  # RoCE ports read lid 0x0 in sysfs: never a fault
        write(root, f"sys/class/infiniband/mlx5_{i}/ports/1/lid", "0x0")
    code, doc = check(root)
    assert code == 0, doc


# -- 6. a RoCE rail without a routable RoCE v2 GID -----------------------------------------------


def test_a_roce_rail_without_ipv4_is_named_with_its_netdev(tmp_path: Path) -> None:
    root = roce_node(tmp_path)
    # ens2np0 lost its address (DHCP lease gone, a netplan typo): only link-local GIDs remain.
    ll = "fe80:0000:0000:0000:0e42:a1ff:fe00:0002"
    base = root / "sys/class/infiniband/mlx5_2/ports/1"
    for i in (2, 3):
        (base / f"gid_attrs/types/{i}").unlink()
        (base / f"gid_attrs/ndevs/{i}").unlink()
        write(root, f"sys/class/infiniband/mlx5_2/ports/1/gids/{i}",
              "0000:0000:0000:0000:0000:0000:0000:0000")
    gids(root, "mlx5_2", 1, [(ll, "IB/RoCE v1", "ens2np0"), (ll, "RoCE v2", "ens2np0")])
    code, doc = check(root)
    assert code == 2, doc
    assert doc["reason"] == ("[config] mlx5_2/1 (ens2np0) has no routable RoCE v2 GID: no IPv4 "
                             "or global IPv6 address on ens2np0")


def test_an_ipv6_only_or_vlan_addressed_rail_is_routable(tmp_path: Path) -> None:
    root = roce_node(tmp_path)
    ll = "fe80:0000:0000:0000:0e42:a1ff:fe00:0001"
    v6 = "fd00:0000:0000:0001:0e42:a1ff:fe00:0001"  # a global (ULA) IPv6 address, no IPv4
    for i in range(4):
        write(root, f"sys/class/infiniband/mlx5_1/ports/1/gids/{i}",
              "0000:0000:0000:0000:0000:0000:0000:0000")
    gids(root, "mlx5_1", 1, [(ll, "IB/RoCE v1", "ens1np0"), (ll, "RoCE v2", "ens1np0"),
                             (v6, "IB/RoCE v1", "ens1np0"), (v6, "RoCE v2", "ens1np0")])
    # mlx5_3's IPv4 address is on a VLAN on top of its netdev (the GID's ndev is the VLAN).
    v4 = _v4_gid("10.0.3.11")
    ll3 = "fe80:0000:0000:0000:0e42:a1ff:fe00:0003"
    gids(root, "mlx5_3", 1, [(ll3, "IB/RoCE v1", "ens3np0"), (ll3, "RoCE v2", "ens3np0"),
                             (v4, "IB/RoCE v1", "ens3np0.100"), (v4, "RoCE v2", "ens3np0.100")])
    write(root, "sys/class/net/ens3np0.100/mtu", "9000")
    code, doc = check(root)
    assert code == 0, doc


def test_a_roce_port_without_a_readable_gid_table_is_not_judged(tmp_path: Path) -> None:
    root = fake_node(tmp_path, ports=[
        (f"mlx5_{i}", 1, "4: ACTIVE", ETH200, "Ethernet", f"ens{i}np0") for i in range(2)],
        mtus={"ens0np0": 9000, "ens1np0": 9000})
    code, doc = check(root)
    assert code == 0, doc


# -- 4. AER errors on an HCA or a GPU ------------------------------------------------------------
PCIE_ARGS = ("--expect-gpus", "2", "--expect-ports", "2")


def test_aer_counts_are_judged_over_time(tmp_path: Path) -> None:
    root = pcie_root.build(tmp_path / "n", aer={
        # old errors since boot: correctable retries, one non-fatal completion timeout
        "0000:19:00.0": {"correctable": {"RxErr": 12, "BadDLLP": 3},
                         "nonfatal": {"CmpltTO": 1}}})
    state = str(tmp_path / "state/links.json")
    code, doc = check(root, *PCIE_ARGS, link_state=state)
    assert code == 0, doc
    aer = item(doc, "aer")
    assert aer["status"] == "pass"
    assert aer["detail"] == ("no fatal error, non-fatal growth judged from the next check on "
                             "on 4 device(s) (reported, not judged: mlx5_0 (0000:19:00.0, slot "
                             "2) 1 non-fatal since boot (CmpltTO 1))")
    code, doc = check(root, *PCIE_ARGS, link_state=state)  # nothing new: healthy
    assert code == 0, doc
    # Correctable growth is reported, never failed.
    pcie_root.write_aer(root / "sys/bus/pci/devices/0000:19:00.0", {
        "correctable": {"RxErr": 20, "BadDLLP": 3}, "nonfatal": {"CmpltTO": 1}})
    code, doc = check(root, *PCIE_ARGS, link_state=state)
    assert code == 0, doc
    assert "warn: mlx5_0 (0000:19:00.0, slot 2) +8 correctable (RxErr +8)" in \
        item(doc, "aer")["detail"]
    # Non-fatal growth on a GPU fails, and keeps failing on the next check (sticky).
    pcie_root.write_aer(root / "sys/bus/pci/devices/0000:3d:00.0", {
        "nonfatal": {"CmpltTO": 2, "UnsupReq": 1}})
    code, doc = check(root, *PCIE_ARGS, link_state=state)
    assert code == 2, doc
    assert doc["reason"].startswith(
        "[investigate] PCIe AER errors growing: GPU 0000:3d:00.0 (slot 3) +3 non-fatal "
        "(CmpltTO +2, UnsupReq +1) (unhealthy until no more for ")
    code, doc = check(root, *PCIE_ARGS, link_state=state)
    assert code == 2 and item(doc, "aer")["status"] == "fail", doc


def test_a_fatal_aer_error_this_boot_fails_on_the_first_read(tmp_path: Path) -> None:
    root = pcie_root.build(tmp_path / "n", aer={"0000:3e:00.0": {"fatal": {"DLP": 1}}})
    code, doc = check(root, *PCIE_ARGS)
    assert code == 2, doc
    assert doc["reason"] == (
        "[reboot] PCIe AER fatal error this boot: mlx5_1 (0000:3e:00.0, slot 4) 1 fatal (DLP 1) "
        "(the link was reset under it: reboot; replace the card if it comes back)")


def test_no_aer_files_is_not_judged(tmp_path: Path) -> None:
    code, doc = check(ib_node(tmp_path))
    assert code == 0, doc
    assert item(doc, "aer")["status"] == "n/a"


# -- 5. firmware differing between cards of one board --------------------------------------------


def test_a_card_on_other_firmware_than_its_peers_is_named(tmp_path: Path) -> None:
    root = ib_node(tmp_path / "one", n=4)
    code, doc = check(root)
    assert item(doc, "firmware") == {"name": "firmware", "status": "pass", "remedy": None,
                                     "detail": f"4 of board {BOARD} at 28.39.1002"}
    write(root, "sys/class/infiniband/mlx5_3/fw_ver", "28.37.1014")
    code, doc = check(root)
    assert code == 2, doc
    assert doc["reason"] == (f"[firmware] firmware differs: mlx5_3 fw 28.37.1014, its 3 peers "
                             f"of board {BOARD} at 28.39.1002")
    half = ib_node(tmp_path / "half", n=2)
    write(half, "sys/class/infiniband/mlx5_1/fw_ver", "28.37.1014")
    code, doc = check(half)
    assert code == 2
    assert item(doc, "firmware")["detail"] == (
        f"firmware differs: board {BOARD} mixed: mlx5_1 at 28.37.1014; mlx5_0 at 28.39.1002")


def test_cards_of_other_boards_may_differ_and_check_yml_names_the_version(tmp_path: Path) -> None:
    root = ib_node(tmp_path, n=4)
    # A front-end ConnectX-6 Dx (another board, another firmware family) is not a peer.
    write(root, "sys/class/infiniband/mlx5_3/board_id", "MT_0000000359")
    write(root, "sys/class/infiniband/mlx5_3/fw_ver", "22.41.1000")
    code, doc = check(root)
    assert code == 0, doc
    cfg = tmp_path / "check.yml"
    cfg.write_text(f"firmware:\n  {BOARD}: '28.40.1000'\n")
    code, doc = check(root, "--config", str(cfg))
    assert code == 2
    assert doc["reason"] == ("[firmware] firmware differs: mlx5_0 fw 28.39.1002, mlx5_1 fw "
                             f"28.39.1002, mlx5_2 fw 28.39.1002, want 28.40.1000 (board {BOARD})")
    cfg.write_text("firmware: [28.40.1000]\n")
    p = subprocess.run([sys.executable, "-m", "rdmaprov", "check", "--sysroot", str(root),
                        "--config", str(cfg)], capture_output=True, text=True, timeout=60,
                       check=False)
    assert p.returncode == 1 and p.stderr.count("\n") == 1, p.stderr
    assert "firmware: must map a card's board_id to its firmware version" in p.stderr


def link_local_only(root: Path, dev: str, nd: str) -> None:
    ll = "fe80:0000:0000:0000:0e42:a1ff:fe00:00ff"
    for i in range(8):
        for attr in ("types", "ndevs"):
            (root / f"sys/class/infiniband/{dev}/ports/1/gid_attrs/{attr}/{i}").unlink(
                missing_ok=True)
        write(root, f"sys/class/infiniband/{dev}/ports/1/gids/{i}",
              "0000:0000:0000:0000:0000:0000:0000:0000")
    gids(root, dev, 1, [(ll, "IB/RoCE v1", nd), (ll, "RoCE v2", nd)])


def test_a_lone_roce_node_without_ipv4_fails_a_front_end_port_does_not(tmp_path: Path) -> None:
    one = roce_node(tmp_path / "one", n=1)
    link_local_only(one, "mlx5_0", "ens0np0")
    code, doc = check(one)
    assert code == 2 and doc["reason"].startswith(
        "[config] mlx5_0/1 (ens0np0) has no routable RoCE v2 GID"), doc
    # An IB node's front-end ConnectX port, up without an address: not an RDMA rail.
    ib = ib_node(tmp_path / "ib")
    write(ib, "sys/class/infiniband/mlx5_9/ports/1/state", "4: ACTIVE")
    write(ib, "sys/class/infiniband/mlx5_9/ports/1/phys_state", "5: LinkUp")
    write(ib, "sys/class/infiniband/mlx5_9/ports/1/rate", "25 Gb/sec (1X EDR)")
    write(ib, "sys/class/infiniband/mlx5_9/ports/1/link_layer", "Ethernet")
    write(ib, "sys/class/infiniband/mlx5_9/board_id", "MT_0000000359")
    write(ib, "sys/class/infiniband/mlx5_9/fw_ver", "22.41.1000")
    write(ib, "sys/class/net/eno1np0/mtu", "1500")
    link_local_only(ib, "mlx5_9", "eno1np0")
    code, doc = check(ib)
    assert code == 0, doc


def test_a_bond_members_port_without_its_own_address_is_not_judged(tmp_path: Path) -> None:
    # Active-backup bond over two rails' netdevs (no RoCE LAG): the kernel gives the bond's
    # IPv4 GIDs to the active member's port only; the backup's has link-local ones alone.
    root = roce_node(tmp_path, n=4)
    link_local_only(root, "mlx5_3", "ens3np0")
    (root / "sys/class/net/bond0/bonding").mkdir(parents=True)
    write(root, "sys/class/net/bond0/mtu", "9000")
    (root / "sys/class/net/ens3np0/master").symlink_to("../bond0")
    code, doc = check(root)
    assert code == 0, doc


# -- an HCA's PCIe switch uplink trained down ----------------------------------------------------


def test_a_switch_uplink_trained_to_x4_is_named_with_the_parts_below(tmp_path: Path) -> None:
    root = pcie_root.build(tmp_path / "n", links={"0000:3b:00.0": (pcie_root.GEN5, "4")})
    code, doc = check(root, *PCIE_ARGS)
    assert code == 2, doc
    assert doc["reason"] == ("[replace] trained down: PCIe switch uplink 0000:3b:00.0 x4 of x16 "
                             "(above mlx5_1, GPU 0000:3d:00.0)")
    # The uplink's speed is not judged (a link shared with an idle GPU may run slower).
    slow = pcie_root.build(tmp_path / "s", links={"0000:3b:00.0": ("16.0 GT/s PCIe", "16")})
    code, doc = check(slow, *PCIE_ARGS)
    assert code == 0, doc


# -- the NVIDIA kernel module older than its user-space driver -----------------------------------


def nvml(root: Path, version: str) -> None:
    """The driver's libraries as its packages lay them out: libnvidia-ml.so.1 -> .so.<ver>."""
    lib = root / "usr/lib/x86_64-linux-gnu"
    lib.mkdir(parents=True, exist_ok=True)
    (lib / f"libnvidia-ml.so.{version}").write_text("")
    link = lib / "libnvidia-ml.so.1"
    link.unlink(missing_ok=True)
    link.symlink_to(f"libnvidia-ml.so.{version}")


def test_a_driver_upgraded_under_a_loaded_module_is_named(tmp_path: Path) -> None:
    root = pcie_root.build(tmp_path / "n")  # /proc/driver/nvidia/version: 570.124.06
    nvml(root, "570.124.06")
    code, doc = check(root, *PCIE_ARGS)
    assert code == 0, doc
    nvml(root, "575.57.08")  # the packages were upgraded; the 570 module is still loaded
    code, doc = check(root, *PCIE_ARGS)
    assert code == 2, doc
    assert item(doc, "gpus")["detail"] == (
        "NVIDIA driver mismatch: kernel module 570.124.06, user space 575.57.08 (upgraded "
        "under the loaded module; NVML and CUDA refuse it): reboot; "
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.575.57.08")
    assert doc["reason"].startswith("[reboot] NVIDIA driver mismatch: kernel module 570.124.06, "
                                    "user space 575.57.08")


# -- PFC under --sysroot when the root's netdev is this namespace's ------------------------------


def _a_netdev_here() -> tuple[str, str, str] | None:
    """(name, MAC, ifindex) of a netdev of this machine with a real MAC (eth0 of a VM...)."""
    for net in sorted(Path("/sys/class/net").iterdir()):
        try:
            mac, index = (net / "address").read_text().strip(), (net / "ifindex").read_text()
        except OSError:
            continue
        if mac.strip("0:") and len(mac) == 17:
            return net.name, mac, index.strip()
    return None


def test_pfc_is_read_under_sysroot_when_the_netdev_is_this_namespaces(tmp_path: Path) -> None:
    import pytest

    here = _a_netdev_here()
    if here is None:
        pytest.skip("no netdev with a MAC address on this machine")
    name, mac, index = here
    # A host's root mounted in a container that runs with the host's network: its RoCE rail's
    # netdev is the one this process sees. Another host's root (another MAC) is not read.
    root = fake_node(tmp_path / "n", ports=[("mlx5_0", 1, "4: ACTIVE", ETH200, "Ethernet", name)],
                     mtus={name: 1500})
    write(root, f"sys/class/net/{name}/address", "02:00:00:00:00:01")
    write(root, f"sys/class/net/{name}/ifindex", index)
    _code, doc = check(root, "--expect-pfc", "3")
    assert "PFC not read under --sysroot" in item(doc, "qos")["detail"], doc
    write(root, f"sys/class/net/{name}/address", mac)
    _code, doc = check(root, "--expect-pfc", "3")
    qos = item(doc, "qos")
    assert "PFC not read under --sysroot" not in qos["detail"], qos
    assert name in qos["detail"], qos  # what mlnx_qos or dcb said about this very netdev
