"""kernel_caps.module_status: loaded, built in or absent, and what says so, over fake roots laid
out as the kernel lays out /proc/modules, /sys/module, modules.builtin and its classes."""

from __future__ import annotations

from pathlib import Path

from rdmaprov.collection import kernel_caps as caps


def _write(root: Path, rel: str, text: str = "") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_proc_modules_says_loaded_without_sys_module(tmp_path: Path) -> None:
    _write(tmp_path, "proc/modules", "mlx5_ib 471040 0 - Live 0x0000000000000000\n"
                                     "ib_uverbs 196608 1 mlx5_ib, Live 0x0000000000000000\n")
    got = caps.module_status("ib-uverbs", str(tmp_path))
    assert got == {"name": "ib-uverbs", "state": "loaded", "evidence": "listed in /proc/modules"}


def test_modules_builtin_of_the_running_release(tmp_path: Path) -> None:
    _write(tmp_path, "proc/modules", "nvidia 100 0 - Live 0x0\n")
    _write(tmp_path, "proc/sys/kernel/osrelease", "6.8.0-49-generic\n")
    _write(tmp_path, "lib/modules/6.8.0-49-generic/modules.builtin",
           "kernel/drivers/infiniband/core/ib_core.ko\n"
           "kernel/drivers/infiniband/core/ib_uverbs.ko\n")
    # Another release's list says nothing about this kernel.
    _write(tmp_path, "lib/modules/6.1.0-18-amd64/modules.builtin",
           "kernel/drivers/infiniband/core/rdma_ucm.ko\n")
    assert caps.module_status("ib_uverbs", str(tmp_path)) == {
        "name": "ib_uverbs", "state": "builtin",
        "evidence": "listed in /lib/modules/6.8.0-49-generic/modules.builtin"}
    assert caps.module_status("rdma_ucm", str(tmp_path))["state"] == "absent"


def test_initstate_other_than_live_is_reported_as_is(tmp_path: Path) -> None:
    _write(tmp_path, "sys/module/mlx5_ib/initstate", "going\n")
    assert caps.module_status("mlx5_ib", str(tmp_path))["state"] == "going"


def test_device_nodes_and_classes_are_evidence(tmp_path: Path) -> None:
    _write(tmp_path, "proc/modules", "")
    _write(tmp_path, "dev/infiniband/rdma_cm")
    _write(tmp_path, "dev/infiniband/umad0")
    got = caps.module_status("rdma_ucm", str(tmp_path))
    assert got["state"] == "builtin"
    assert got["evidence"] == "/dev/infiniband/rdma_cm exists and rdma_ucm is not a loaded module"
    assert caps.module_status("ib_umad", str(tmp_path))["state"] == "builtin"
    absent = caps.module_status("ib_uverbs", str(tmp_path))
    assert absent["state"] == "absent"
    assert "no /sys/class/infiniband_verbs, /dev/infiniband/uverbs*" in absent["evidence"]


def test_a_sysfs_only_tree_reads_sysfs_alone(tmp_path: Path) -> None:
    _write(tmp_path, "class/infiniband_verbs/abi_version", "6\n")
    got = caps.module_status("ib_uverbs", None, str(tmp_path))
    assert got["state"] == "builtin"
    assert caps.module_status("rdma_ucm", None, str(tmp_path))["state"] == "absent"


def test_summary_and_describe() -> None:
    statuses = [{"name": "ib_core", "state": "builtin"}, {"name": "mlx5_ib", "state": "loaded"},
                {"name": "ib_uverbs", "state": "builtin"},
                {"name": "nvidia_peermem", "state": "absent"}]
    assert caps.summary(statuses) == ("built in: ib_core, ib_uverbs; loaded: mlx5_ib; "
                                      "absent: nvidia_peermem")
    assert caps.describe(statuses[0]) == "ib_core built into the kernel"
