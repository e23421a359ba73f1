"""One bad rail of eight, through the real CLI: without a hand-set port count or rate, a node's
own rails are the expectation (check/judge.peer_outliers). A rail DOWN, or trained to a lower
rate, while most of its peers are ACTIVE at full rate is named; what a site leaves uncabled or
disables on purpose, and VFs, are not (a false drain is as bad as a miss)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "_check_fakes", Path(__file__).resolve().parents[1] / "unit" / "test_check_logic.py")
assert _spec is not None and _spec.loader is not None
_fakes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fakes)
fake_node = _fakes.fake_node

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sysfs"
NDR = "400 Gb/sec (4X NDR)"


def eight(tmp_path: Path, **override: tuple[str, str]) -> Path:
    """An HGX node's eight compute rails (ConnectX-7, board MT_0000000838), each port 1 IB."""
    ports = []
    for i in range(8):
        state, rate = override.get(f"mlx5_{i}", ("4: ACTIVE", NDR))
        ports.append((f"mlx5_{i}", 1, state, rate, "InfiniBand", f"ibp{i}s0"))
    root = fake_node(tmp_path, ports=ports, mtus={f"ibp{i}s0": 4092 for i in range(8)})
    for i in range(8):
        (root / f"sys/class/infiniband/mlx5_{i}/board_id").write_text("MT_0000000838\n")
    return root


def check(root: Path, *args: str) -> tuple[int, dict]:
    p = subprocess.run([sys.executable, "-m", "rdmaprov", "check", "--sysroot", str(root),
                        "--expect-memlock", "1", "--link-state", "", "--json", *args],
                       capture_output=True, text=True, timeout=60, check=False)
    assert p.stderr == "", p.stderr
    doc = json.loads(p.stdout)
    return p.returncode, doc


def ports_item(doc: dict) -> dict:
    return next(c for c in doc["checks"] if c["name"] == "ports")


def test_eight_healthy_rails_pass(tmp_path: Path) -> None:
    code, doc = check(eight(tmp_path))
    assert code == 0, doc
    assert ports_item(doc)["detail"] == "8 ACTIVE at 400 Gb/s"


def test_one_rail_down_of_eight_is_named(tmp_path: Path) -> None:
    code, doc = check(eight(tmp_path, mlx5_5=("1: DOWN", "10 Gb/sec (4X SDR)")))
    assert code == 2
    assert doc["reason"] == ("[reset-link] rail down: mlx5_5/1 DOWN (Polling), "
                             "7 of 8 peers ACTIVE")


def test_one_rail_trained_to_a_lower_rate_is_named(tmp_path: Path) -> None:
    code, doc = check(eight(tmp_path, mlx5_2=("4: ACTIVE", "200 Gb/sec (4X HDR)")))
    assert code == 2
    assert doc["reason"] == ("[reset-link] rail below its peers: mlx5_2/1 at 200 Gb/s, "
                             "its peers at 400")


def test_a_hand_set_port_count_wins_over_the_peers_a_rate_does_not(tmp_path: Path) -> None:
    root = eight(tmp_path, mlx5_5=("1: DOWN", "10 Gb/sec (4X SDR)"))
    code, doc = check(root, "--expect-ports", "7")
    assert code == 0, doc
    # A rate is a floor: a rail below its seven peers is still named (a fleet-derived rate
    # is the class's slowest port, which must not hide a rail trained down).
    code, doc = check(eight(tmp_path / "b", mlx5_2=("4: ACTIVE", "200 Gb/sec (4X HDR)")),
                      "--expect-rate", "200")
    assert code == 2
    assert ports_item(doc)["detail"] == ("rail below its peers: mlx5_2/1 at 200 Gb/s, its "
                                         "peers at 400")


def test_what_a_site_chose_is_not_a_fault(tmp_path: Path) -> None:
    # Half the rails uncabled (no majority), a disabled port, and a VF down with its PF up.
    half = eight(tmp_path / "half", **{f"mlx5_{i}": ("1: DOWN", "10 Gb/sec (4X SDR)")
                                       for i in range(4)})
    code, doc = check(half)
    assert code == 0, doc
    disabled = eight(tmp_path / "disabled", mlx5_7=("1: DOWN", "10 Gb/sec (4X SDR)"))
    (disabled / "sys/class/infiniband/mlx5_7/ports/1/phys_state").write_text("3: Disabled\n")
    code, doc = check(disabled)
    assert code == 0, doc
    vf = eight(tmp_path / "vf", mlx5_7=("1: DOWN", "10 Gb/sec (4X SDR)"))
    pf = vf / "sys/bus/pci/devices/0000:41:00.0"
    pf.mkdir(parents=True)
    (vf / "sys/class/infiniband/mlx5_7/device/physfn").symlink_to(pf)
    code, doc = check(vf)
    assert code == 0, doc
    two = fake_node(tmp_path / "two", ports=[
        ("mlx5_0", 1, "4: ACTIVE", NDR, "InfiniBand", "ib0"),
        ("mlx5_1", 1, "1: DOWN", "10 Gb/sec (4X SDR)", "InfiniBand", "ib1")])
    code, doc = check(two)  # two cards, one cabled: fewer than three peers judge nothing
    assert code == 0, doc


def test_dual_port_cards_keep_their_second_ports_apart(tmp_path: Path) -> None:
    # The real RoCE tree: a dual-port ConnectX-6 Dx whose port 2 is DOWN/Disabled, as shipped;
    # and the real NDR tree, four ConnectX-7 with mlx5_3 DOWN/Polling: a rail down of four.
    roce = tmp_path / "roce"
    shutil.copytree(FIXTURES / "roce", roce / "sys")
    (roce / "proc").mkdir()
    (roce / "proc/modules").write_text("")
    code, doc = check(roce, "--expect-gpus", "0")
    assert ports_item(doc)["status"] == "pass", doc
    ndr = tmp_path / "ndr"
    shutil.copytree(FIXTURES / "ib_ndr", ndr / "sys")
    (ndr / "proc").mkdir()
    (ndr / "proc/modules").write_text("")
    code, doc = check(ndr, "--expect-gpus", "0")
    assert code == 2
    assert ports_item(doc)["detail"] == "rail down: mlx5_3/1 DOWN (Polling), 3 of 4 peers ACTIVE"


def pci_gpu(root: Path, addr: str, driver: str | None) -> None:
    """A GPU function as drivers/pci/pci-sysfs.c shows it (vendor, class), bound or not."""
    dev = root / "sys/bus/pci/devices" / addr
    dev.mkdir(parents=True)
    (dev / "vendor").write_text("0x10de\n")
    (dev / "class").write_text("0x030200\n")
    if driver:
        drv = root / "sys/bus/pci/drivers" / driver
        drv.mkdir(parents=True, exist_ok=True)
        (dev / "driver").symlink_to(drv)


def test_a_gpu_that_failed_to_probe_is_named_by_address(tmp_path: Path) -> None:
    root = fake_node(tmp_path / "n")  # the driver lists 0000:00:00.0 and 0000:01:00.0
    for addr in ("0000:00:00.0", "0000:01:00.0"):
        pci_gpu(root, addr, "nvidia")
    code, doc = check(root)
    assert code == 0, doc
    pci_gpu(root, "0000:c3:00.0", None)
    code, doc = check(root)
    assert code == 2
    assert doc["reason"] == ("[reboot] 2 of 3 GPUs visible: on PCI but not the driver's: "
                             "0000:c3:00.0 (driver none)")
    code, doc = check(root, "--expect-gpus", "3")
    assert doc["reason"] == ("[reboot] 2 of 3 GPUs visible: on PCI but not the driver's: "
                             "0000:c3:00.0 (driver none)")


def test_a_gpu_given_to_a_vm_is_not_a_fault(tmp_path: Path) -> None:
    root = fake_node(tmp_path / "n")
    pci_gpu(root, "0000:c3:00.0", "vfio-pci")
    code, doc = check(root)
    assert code == 0, doc
    gpus = next(c for c in doc["checks"] if c["name"] == "gpus")
    assert gpus["detail"] == "2 visible (NVIDIA H200); not ours: 0000:c3:00.0 on vfio-pci"


def test_a_node_without_gpus_is_not_drained_for_them(tmp_path: Path) -> None:
    # An IB node with no NVIDIA function on PCI (a storage or CPU node) and no expectation.
    root = fake_node(tmp_path / "n", gpus=0)
    nic = root / "sys/bus/pci/devices/0000:19:00.0"
    nic.mkdir(parents=True)
    (nic / "vendor").write_text("0x15b3\n")
    (nic / "class").write_text("0x020700\n")
    code, doc = check(root)
    gpus = next(c for c in doc["checks"] if c["name"] == "gpus")
    assert (code, gpus["status"], gpus["detail"]) == (
        0, "n/a", "no NVIDIA GPU on PCI: not a GPU node")
    code, doc = check(root, "--expect-gpus", "8")  # a GPU node by configuration: a fault
    assert code == 2 and doc["reason"].startswith("[config] no NVIDIA GPU visible")


def test_a_gpu_node_whose_driver_is_not_loaded_names_its_gpus(tmp_path: Path) -> None:
    root = fake_node(tmp_path / "n", gpus=0)
    for addr in ("0000:18:00.0", "0000:2a:00.0"):
        pci_gpu(root, addr, None)
    code, doc = check(root)
    assert code == 2
    assert doc["reason"] == (
        "[config] no NVIDIA GPU visible (no /proc/driver/nvidia/gpus, no /dev/nvidiaN: driver "
        "not loaded or no GPU); 2 on PCI: 0000:18:00.0 (driver none), 0000:2a:00.0 (driver "
        "none)")
