"""PCIe link training and GPU <-> NIC topology through the real CLI, on a root with a real PCIe
hierarchy (tests/fixtures/sysfs/pcie_root.py): width judged strictly, speed only for devices
that keep it when idle (not GPUs), devices named by PCI address and slot, ACS reported."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "_pcie_root", Path(__file__).resolve().parents[1] / "fixtures" / "sysfs" / "pcie_root.py")
assert _spec is not None and _spec.loader is not None
pcie_root = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pcie_root)

ARGS = ("--expect-memlock", "1", "--expect-ports", "2", "--expect-gpus", "2", "--link-state", "")


def check(root: Path, *extra: str) -> tuple[int, dict]:
    p = subprocess.run([sys.executable, "-m", "rdmaprov", "check", "--sysroot", str(root), *ARGS,
                        *extra, "--json"], capture_output=True, text=True, timeout=60,
                       check=False)
    assert p.stderr == "", p.stderr
    doc = json.loads(p.stdout)
    return p.returncode, {c["name"]: c for c in doc["checks"]} | {"_reason": doc["reason"]}


def test_healthy_node_with_idle_gpus_passes_and_reports_affinity(tmp_path: Path) -> None:
    rc, c = check(pcie_root.build(tmp_path))
    assert rc == 0, c
    d = c["pcie"]["detail"]
    assert c["pcie"]["status"] == "pass"
    assert "GPU link 2.5/32 GT/s x16 (speed drops when idle: not judged)" in d
    assert "GPU 0000:18:00.0 -> mlx5_0 (4 hops, same NUMA)" in d
    assert "GPU 0000:3d:00.0 -> mlx5_1 (4 hops, same NUMA)" in d
    assert c["gpudirect"]["status"] == "pass" and "DMA-BUF" in c["gpudirect"]["detail"]


def test_hca_trained_down_in_width_is_named_by_address_and_slot(tmp_path: Path) -> None:
    root = pcie_root.build(tmp_path, links={"0000:3e:00.0": (pcie_root.GEN5, "8")})
    rc, c = check(root)
    assert rc == 2 and c["pcie"]["status"] == "fail"
    assert c["pcie"]["detail"] == "trained down: mlx5_1 (0000:3e:00.0, slot 4) PCIe x8 of x16"
    assert c["pcie"]["remedy"] == "replace"
    assert "mlx5_0" not in c["pcie"]["detail"]


def test_hca_speed_is_judged_gpu_speed_is_not(tmp_path: Path) -> None:
    root = pcie_root.build(tmp_path, links={"0000:19:00.0": ("16.0 GT/s PCIe", "16"),
                                            "0000:18:00.0": ("16.0 GT/s PCIe", "16")})
    rc, c = check(root)
    assert rc == 2
    assert c["pcie"]["detail"] == ("trained down: mlx5_0 (0000:19:00.0, slot 2) PCIe "
                                   "16 GT/s of 32 GT/s")


def test_gpu_width_is_judged(tmp_path: Path) -> None:
    rc, c = check(pcie_root.build(tmp_path, links={"0000:3d:00.0": (pcie_root.IDLE, "8")}))
    assert rc == 2
    assert c["pcie"]["detail"] == "trained down: GPU 0000:3d:00.0 (slot 3) PCIe x8 of x16"


def test_a_gen5_card_in_a_gen4_slot_is_as_built(tmp_path: Path) -> None:
    gen4 = "16.0 GT/s PCIe"
    root = pcie_root.build(tmp_path, links={"0000:19:00.0": (gen4, "16")},
                           max_links={"0000:17:01.0": (gen4, "16")})
    rc, c = check(root)
    assert rc == 0 and c["pcie"]["status"] == "pass", c


def test_acs_redirect_between_gpu_and_nic_fails_as_config(tmp_path: Path) -> None:
    root = pcie_root.build(tmp_path, acs={"0000:17:01.0": 0x001D})  # SV RR CR UF
    rc, c = check(root)
    assert rc == 2 and c["pcie"]["remedy"] == "config"
    assert c["pcie"]["detail"].startswith(
        "between GPU and NIC: 0000:17:01.0 ACS redirects peer-to-peer: RR (P2P request "
        "redirect), CR (P2P completion redirect), UF (upstream forwarding)")
    # Not expected to do GPUDirect: ACS is nothing to fail on.
    rc, c = check(root, "--no-gpudirect")
    assert rc == 0 and c["pcie"]["status"] == "pass", c


def test_unreadable_acs_is_said_not_judged(tmp_path: Path) -> None:
    root = pcie_root.build(tmp_path, acs={"0000:17:00.0": None})
    rc, c = check(root)
    assert rc == 0
    assert "ACS: extended config space not readable (root only)" in c["pcie"]["detail"]


# -- identity: HCAs by PCI address and slot; verbs device nodes per HCA ----------------------

WANT = ("--expect-hca-pci", "0000:19:00.0,0000:3e:00.0")


def test_a_card_gone_from_pci_is_named_by_address_and_slot(tmp_path: Path) -> None:
    root = pcie_root.build(tmp_path, failed={"0000:19:00.0": "gone"})
    rc, c = check(root, *WANT)
    assert rc == 2
    assert c["ports"]["detail"] == "HCA 0000:19:00.0 (slot 2) not on PCI"
    assert c["ports"]["remedy"] == "replace"
    # The card that is there took the name mlx5_0; it is not blamed.
    assert "mlx5" not in c["_reason"], c["_reason"]


def test_a_card_that_did_not_probe_is_named_not_its_neighbour(tmp_path: Path) -> None:
    root = pcie_root.build(tmp_path, failed={"0000:19:00.0": "unbound"})
    rc, c = check(root, *WANT)
    assert rc == 2
    assert c["ports"]["detail"] == ("HCA 0000:19:00.0 (slot 2) on PCI (driver none) but no "
                                    "RDMA device")
    assert c["ports"]["remedy"] == "reboot"


def test_all_cards_there_by_address(tmp_path: Path) -> None:
    rc, c = check(pcie_root.build(tmp_path), *WANT)
    assert rc == 0, c
    assert c["verbs"] == {"name": "verbs", "status": "pass", "remedy": None,
                          "detail": "mlx5_0: uverbs0, mlx5_1: uverbs1"}


def test_a_missing_verbs_device_node_is_named(tmp_path: Path) -> None:
    root = pcie_root.build(tmp_path)
    (root / "dev/infiniband/uverbs1").unlink()
    rc, c = check(root)
    assert rc == 2
    assert c["verbs"]["detail"] == "/dev/infiniband/uverbs1 (mlx5_1) missing"
    assert c["verbs"]["remedy"] == "config"


def test_a_bad_pci_address_is_a_config_error(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "rdmaprov", "check", "--sysroot",
                        str(pcie_root.build(tmp_path)), "--expect-hca-pci", "3b:00.0"],
                       capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 1 and "is not a PCI address like 0000:3b:00.0" in p.stderr, p.stderr


def test_no_dev_infiniband_at_all_is_not_judged(tmp_path: Path) -> None:
    root = pcie_root.build(tmp_path)
    for node in (root / "dev/infiniband").iterdir():
        node.unlink()
    (root / "dev/infiniband").rmdir()
    rc, c = check(root)
    assert rc == 0 and c["verbs"]["status"] == "n/a", c
    assert "no /dev/infiniband here" in c["verbs"]["detail"]


def test_a_gpu_whose_nearest_nic_differs_from_the_expectation_is_named(tmp_path: Path) -> None:
    root = pcie_root.build(tmp_path)
    cfg = tmp_path / "check.yml"
    cfg.write_text("gpu_nic: {'0000:18:00.0': mlx5_0, '0000:3d:00.0': '0000:3e:00.0'}\n")
    rc, c = check(root, "--config", str(cfg))
    assert rc == 0, c
    cfg.write_text("gpu_nic: {'0000:18:00.0': mlx5_1}\n")
    rc, c = check(root, "--config", str(cfg))
    assert rc == 2 and c["pcie"]["remedy"] == "investigate"
    assert c["pcie"]["detail"] == ("GPU 0000:18:00.0 nearest NIC mlx5_0 (0000:19:00.0), "
                                   "want mlx5_1")
    cfg.write_text("gpu_nic: [mlx5_0]\n")
    p = subprocess.run([sys.executable, "-m", "rdmaprov", "check", "--sysroot", str(root),
                        "--config", str(cfg)], capture_output=True, text=True, timeout=60,
                       check=False)
    assert p.returncode == 1 and "must map GPU PCI addresses" in p.stderr, p.stderr


def test_a_card_that_did_not_probe_is_named_without_an_expectation(tmp_path: Path) -> None:
    """No hca_pci given: the port count fails, and the card on PCI that has no RDMA device is
    named by address and slot (the card that took the name mlx5_0 is not blamed)."""
    root = pcie_root.build(tmp_path, failed={"0000:19:00.0": "unbound"})
    rc, c = check(root)
    assert rc == 2 and c["ports"]["remedy"] == "reboot"
    assert c["ports"]["detail"] == ("1 of 2 RDMA ports ACTIVE (card on PCI without an RDMA "
                                    "device: 0000:19:00.0 slot 2, driver none)")
    # A healthy node does not mention the hint at all.
    rc, c = check(pcie_root.build(tmp_path / "ok"))
    assert rc == 0 and "without an RDMA device" not in json.dumps(c)
