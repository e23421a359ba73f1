"""rdma_sysfs's PCIe rules on their own: the sysfs text formats, the trained-down rule and the
distance between two devices."""

from __future__ import annotations

from rdmaprov.collection import rdma_sysfs as sysfs


def test_link_text_formats() -> None:
    assert sysfs.parse_link_speed("32.0 GT/s PCIe") == 32.0
    assert sysfs.parse_link_speed("2.5 GT/s PCIe") == 2.5
    assert sysfs.parse_link_speed("8 GT/s") == 8.0  # kernels before 5.x: no "PCIe" suffix
    assert sysfs.parse_link_speed("Unknown") is None
    assert sysfs.parse_link_width("16") == 16
    assert sysfs.parse_link_width("0") is None and sysfs.parse_link_width(None) is None


def link(cur_s: float, max_s: float, cur_w: int, max_w: int, up_s: float | None = None,
         up_w: int | None = None) -> dict:
    return {"current_speed": cur_s, "max_speed": max_s, "current_width": cur_w,
            "max_width": max_w, "upstream_max_speed": up_s, "upstream_max_width": up_w}


def test_trained_down_rule() -> None:
    assert sysfs.pcie_trained_down(link(32, 32, 8, 16), idle_downclock=False) == "x8 of x16"
    assert sysfs.pcie_trained_down(link(32, 32, 8, 16), idle_downclock=True) == "x8 of x16"
    assert sysfs.pcie_trained_down(link(16, 32, 16, 16), idle_downclock=False) == \
        "16 GT/s of 32 GT/s"
    assert sysfs.pcie_trained_down(link(2.5, 32, 16, 16), idle_downclock=True) is None  # GPU idle
    # As built: the slot (upstream port) is the limit.
    assert sysfs.pcie_trained_down(link(16, 32, 8, 16, up_s=16, up_w=8),
                                   idle_downclock=False) is None


def test_distance_through_a_switch_or_the_root_complex() -> None:
    gpu = ["0000:15:01.0", "0000:16:00.0", "0000:17:00.0", "0000:18:00.0"]
    nic = ["0000:15:01.0", "0000:16:00.0", "0000:17:01.0", "0000:19:00.0"]
    far = ["0000:3a:01.0", "0000:3b:00.0", "0000:3c:01.0", "0000:3e:00.0"]
    assert sysfs.pci_distance(gpu, nic) == 4
    assert sysfs.pci_distance(gpu, far) is None  # across the CPU's root complex
