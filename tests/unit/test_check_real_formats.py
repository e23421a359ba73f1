"""`rdmaprov check` on the formats real drivers and firmware write (tests/fixtures/sysfs/
SOURCES.md, "Formats check must survive"): counters that read 'N/A (no PMA)' or not at all,
rate strings, PCIe speeds a kernel cannot name. An unreadable value is never a pass, and never
a reason to drain a healthy node."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from rdmaprov.check import history, judge, probes
from rdmaprov.check.expect import Expectations

_spec = importlib.util.spec_from_file_location(
    "_check_fakes", Path(__file__).resolve().parent / "test_check_logic.py")
assert _spec is not None and _spec.loader is not None
_fakes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fakes)
fake_node = _fakes.fake_node

# drivers/infiniband/core/sysfs.c prints this for every PMA counter of a device without
# process_mad (node_exporter issue 966: a ConnectX-3 VF, mlx4_0, on Azure).
NO_PMA = "N/A (no PMA)\n"


def counters(root: Path, dev: str, **values: str) -> None:
    cdir = root / "sys/class/infiniband" / dev / "ports/1/counters"
    cdir.mkdir(parents=True, exist_ok=True)
    for name, text in values.items():
        (cdir / name).write_text(text)


def links_item(root: Path, tmp: Path, runs: int = 2) -> judge.Item:
    exp = Expectations(memlock="0", link_state=str(tmp / "check-links.json"))
    for _ in range(runs):  # the first run is a first sample: n/a whatever the counters
        state = probes.gather(exp, str(root))
        state["links"] = history.step(state["rdma"]["counters"], exp)
    return {i.name: i for i in judge.judge(state, exp)}["links"]


def test_counters_reading_no_pma_are_not_judged_healthy(tmp_path: Path) -> None:
    root = fake_node(tmp_path / "node")
    for dev in ("mlx5_0", "mlx5_1"):
        counters(root, dev, symbol_error=NO_PMA, link_downed=NO_PMA, port_rcv_errors=NO_PMA,
                 link_error_recovery=NO_PMA)
    item = links_item(root, tmp_path)
    assert item.status == "n/a", item
    assert "error counters not readable on mlx5_0/1, mlx5_1/1" in item.detail


def test_ports_without_counters_or_unreadable_ones_are_named_not_passed(tmp_path: Path) -> None:
    root = fake_node(tmp_path / "node")
    counters(root, "mlx5_1", symbol_error="0\n", link_downed="0\n")
    # mlx5_0: a counter the firmware refuses (the read fails, as EINVAL does); no other counter
    (root / "sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error").mkdir(parents=True)
    item = links_item(root, tmp_path)
    assert item.status == "pass", item
    assert item.detail.startswith("no flap or error growth on 1 port(s)")
    assert "error counters not readable on mlx5_0/1" in item.detail
    assert "mlx5_1/1" not in item.detail



def test_a_name_that_moved_to_another_card_is_a_new_port_not_its_deltas(tmp_path: Path) -> None:
    # mlx5_N names go in probe order: when the first card fails to probe after a driver reload,
    # the second card comes back as mlx5_0, and its PMA counters (kept by the HCA, not reset by
    # the reload) are another card's totals, not mlx5_0's growth. node_guid tells them apart.
    root = fake_node(tmp_path / "node")
    ib = root / "sys/class/infiniband"
    guids = {"mlx5_0": "b8ce:f603:00c4:2a10", "mlx5_1": "b8ce:f603:00c4:2a18"}
    for dev, guid in guids.items():
        (ib / dev / "node_guid").write_text(guid + "\n")
    counters(root, "mlx5_0", symbol_error="0\n", link_downed="0\n")
    counters(root, "mlx5_1", symbol_error="40\n", link_downed="3\n")
    assert links_item(root, tmp_path).status == "pass"
    # the reload: mlx5_0's card gone, mlx5_1's card (its GUID, its counters) named mlx5_0
    for name in ("node_guid", "ports/1/counters/symbol_error", "ports/1/counters/link_downed"):
        (ib / "mlx5_0" / name).write_text((ib / "mlx5_1" / name).read_text())
    shutil.rmtree(ib / "mlx5_1")
    item = links_item(root, tmp_path, runs=1)
    assert item.status == "pass", item
    assert "+40" not in item.detail and "+3" not in item.detail



def test_a_roce_port_with_hw_counters_alone_says_its_pma_counters_were_not_read(
        tmp_path: Path) -> None:
    # mlx5 RoCE: hw_counters/ read, counters/ refused (the PPCNT query fails the read). The
    # loss counters are judged (and only warn); nothing that could fail the link was read.
    root = fake_node(tmp_path / "node", ports=[
        ("mlx5_0", 1, "4: ACTIVE", "100 Gb/sec (4X EDR)", "Ethernet", "ens1f0np0")],
        mtus={"ens1f0np0": 9000})
    hw = root / "sys/class/infiniband/mlx5_0/ports/1/hw_counters"
    hw.mkdir()
    for name in ("out_of_sequence", "packet_seq_err", "local_ack_timeout_err"):
        (hw / name).write_text("0\n")
    item = links_item(root, tmp_path)
    assert item.status == "pass", item
    assert ("no PMA error counter (symbol_error, link_downed ...) readable on mlx5_0/1: only "
            "RoCE retransmissions judged there") in item.detail


# -- rate strings (drivers/infiniband/core/sysfs.c rate_show; mlx5 maps Ethernet speeds to an IB
# width and lane speed: 100GbE "100 Gb/sec (4X EDR)", 25GbE "25 Gb/sec (1X EDR)") ----------------

def ports_item(tmp: Path, rates: list[str], link_layer: str = "InfiniBand",
               unreadable: tuple[str, ...] = (), **exp: object) -> judge.Item:
    netdevs = [f"ib{i}" for i in range(len(rates))]
    root = fake_node(tmp / "node", ports=[
        (f"mlx5_{i}", 1, "4: ACTIVE", rate, link_layer, netdevs[i])
        for i, rate in enumerate(rates)], mtus={n: 4092 for n in netdevs})
    for dev in unreadable:  # rate_show's -EINVAL: open() fails
        rate = root / "sys/class/infiniband" / dev / "ports/1/rate"
        rate.unlink()
        rate.mkdir()
    e = Expectations(memlock="0", link_state="", **exp)  # type: ignore[arg-type]
    return {i.name: i for i in judge.judge(probes.gather(e, str(root)), e)}["ports"]


def test_real_rate_strings_of_ib_and_roce_ports(tmp_path: Path) -> None:
    assert ports_item(tmp_path / "a", ["100 Gb/sec (4X EDR)"] * 3 + ["25 Gb/sec (1X EDR)"],
                      "Ethernet").detail == ("rail below its peers: mlx5_3/1 at 25 Gb/s, "
                                             "its peers at 100")
    item = ports_item(tmp_path / "b", ["400 Gb/sec (4X NDR)"] * 3 + ["100 Gb/sec (2X HDR)"])
    assert item.status == "fail" and "mlx5_3/1 at 100 Gb/s" in item.detail
    assert ports_item(tmp_path / "c", ["2.5 Gb/sec (1X SDR)", "200 Gb/sec (4X HDR)"]
                      ).detail == "2 ACTIVE at 2.5/200 Gb/s"


def test_an_unreadable_rate_is_said_so_never_none(tmp_path: Path) -> None:
    item = ports_item(tmp_path / "a", ["400 Gb/sec (4X NDR)"] * 2, unreadable=("mlx5_1",))
    assert item.status == "pass"
    assert item.detail == "2 ACTIVE at 400 Gb/s (rate not readable: mlx5_1/1)"
    item = ports_item(tmp_path / "b", ["400 Gb/sec (4X NDR)"] * 2, unreadable=("mlx5_1",),
                      rate=400)
    assert item.status == "fail"  # the expected rate is not known to be there: not a pass
    assert item.detail == "mlx5_1/1 rate not readable, want 400 Gb/s"


# -- PCIe speeds (drivers/pci/probe.c pci_speed_string: "2.5 GT/s PCIe" ... "64.0 GT/s PCIe",
# "Unknown"; kernels before 5.2 printed "8 GT/s" and "Unknown speed") ------------------------------

_pspec = importlib.util.spec_from_file_location(
    "_pcie_root", Path(__file__).resolve().parents[1] / "fixtures" / "sysfs" / "pcie_root.py")
assert _pspec is not None and _pspec.loader is not None
pcie_root = importlib.util.module_from_spec(_pspec)
_pspec.loader.exec_module(pcie_root)
HCA0, HCA0_PORT = "0000:19:00.0", "0000:17:01.0"  # mlx5_0 and the switch port above it


def pcie_item(tmp: Path, **links: dict) -> judge.Item:
    root = pcie_root.build(tmp, **links)
    e = Expectations(memlock="0", ports=2, gpus=2, link_state="")
    return {i.name: i for i in judge.judge(probes.gather(e, str(root)), e)}["pcie"]


def test_an_hca_speed_the_kernel_cannot_name_is_not_full_speed(tmp_path: Path) -> None:
    for i, unknown in enumerate(("Unknown", "Unknown speed")):
        item = pcie_item(tmp_path / str(i), links={HCA0: (unknown, "16")})
        assert item.status == "pass", item  # its width is read and right
        assert "the other HCAs at full speed" in item.detail
        assert "HCA link speed not readable: mlx5_0 (0000:19:00.0, slot 2)" in item.detail


def test_gen6_and_old_kernel_speed_strings(tmp_path: Path) -> None:
    gen6 = "64.0 GT/s PCIe"
    item = pcie_item(tmp_path / "a", links={HCA0: (pcie_root.GEN5, "16")},
                     max_links={HCA0: (gen6, "16"), HCA0_PORT: (gen6, "16")})
    assert item.detail == "trained down: mlx5_0 (0000:19:00.0, slot 2) PCIe 32 GT/s of 64 GT/s"
    item = pcie_item(tmp_path / "b", max_links={HCA0: (gen6, "16")})  # Gen6 card, Gen5 slot
    assert item.status == "pass" and "HCAs at full speed" in item.detail
    item = pcie_item(tmp_path / "c", links={HCA0: ("8 GT/s", "16")})  # an old kernel's text
    assert item.detail == "trained down: mlx5_0 (0000:19:00.0, slot 2) PCIe 8 GT/s of 32 GT/s"


def test_a_32_bit_hw_counter_wrap_and_64_bit_totals_are_no_error(tmp_path: Path) -> None:
    # mlx5's Q counters (hw_counters/out_of_sequence ...) are 32-bit in the firmware and wrap;
    # the kernel prints them as u64. A wrap reads as a value that went down: a new baseline.
    root = fake_node(tmp_path / "node")
    hw = root / "sys/class/infiniband/mlx5_0/ports/1/hw_counters"
    hw.mkdir()
    (hw / "out_of_sequence").write_text("4294967290\n")
    for dev in ("mlx5_0", "mlx5_1"):
        counters(root, dev, symbol_error="65535\n", link_downed="0\n",
                 port_xmit_data="18446744073709551000\n")  # a 64-bit ext counter: not judged
    assert links_item(root, tmp_path).status == "pass"
    (hw / "out_of_sequence").write_text("12\n")
    item = links_item(root, tmp_path, runs=1)
    assert item.status == "pass" and "out_of_sequence" not in item.detail.split("(")[0], item
    assert "saturated, cannot grow: mlx5_0/1 symbol_error" in item.detail


# -- phys_state on Ethernet: mlx5_query_port_roce (as irdma, qedr, ocrdma, mana) starts from
# "1: DOWN" / "3: Disabled" and says ACTIVE / LinkUp only for a running netdev with carrier, so a
# pulled RoCE cable reads Disabled as much as `ip link set down` does. Only the netdev's IFF_UP
# (0x1 in /sys/class/net/<if>/flags, "%#x") tells a choice from a fault. -----------------------

def roce_rails(tmp: Path, flags: str | None) -> judge.Item:
    netdevs = [f"ens{i}np0" for i in range(8)]
    root = fake_node(tmp / "node", ports=[
        (f"mlx5_{i}", 1, "1: DOWN" if i == 5 else "4: ACTIVE", "400 Gb/sec (4X NDR)", "Ethernet",
         netdevs[i]) for i in range(8)], mtus={n: 9000 for n in netdevs})
    for i in range(8):
        (root / f"sys/class/infiniband/mlx5_{i}/board_id").write_text("MT_0000000838\n")
        (root / f"sys/class/net/{netdevs[i]}/flags").write_text("0x1003\n")
    (root / "sys/class/infiniband/mlx5_5/ports/1/phys_state").write_text("3: Disabled\n")
    if flags is None:
        (root / "sys/class/net/ens5np0/flags").unlink()
    else:
        (root / "sys/class/net/ens5np0/flags").write_text(flags + "\n")
    e = Expectations(memlock="0", link_state="")
    return {i.name: i for i in judge.judge(probes.gather(e, str(root)), e)}["ports"]


def test_a_roce_rail_without_carrier_is_down_not_disabled_by_choice(tmp_path: Path) -> None:
    item = roce_rails(tmp_path / "a", "0x1003")  # IFF_UP set: the link is lost, not turned off
    assert item.status == "fail", item
    assert item.detail == "rail down: mlx5_5/1 DOWN (Disabled), 7 of 8 peers ACTIVE"
    assert roce_rails(tmp_path / "b", "0x1002").status == "pass"  # `ip link set down`: a choice
    assert roce_rails(tmp_path / "c", None).status == "pass"  # flags not read: the PHY's word
