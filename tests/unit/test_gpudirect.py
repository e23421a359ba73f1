"""rdma_sysfs.gpudirect: GPUDirect RDMA by capability (peermem loaded, or DMA-BUF: open NVIDIA
module >= R515, Linux >= 5.12 with RDMA dma-buf import, rdma-core with ibv_reg_dmabuf_mr)."""

from __future__ import annotations

import gzip
from pathlib import Path

from rdmaprov.collection import rdma_sysfs as sysfs

OPEN = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
        "(nixbld@)  \nGCC version:  gcc version 15.3.0 (GCC) \n")
# The proprietary module's first line (driver 535 on Ubuntu 22.04, as `cat` shows it).
PROPRIETARY = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 "
               "UTC 2023\nGCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04) \n")


def node(root: Path, *, nv: str | None = OPEN, release: str = "6.8.0-45-generic",
         uverbs: bool = True, peermem: bool = False, lib: str | None = "libibverbs.so.1.14.50.0",
         config: str | None = None) -> str:
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/osrelease").write_text(release + "\n")
    mods = ["nvidia 14299136 - - Live 0xffffffffc0400000 (O)"]
    if uverbs:
        mods.append("ib_uverbs 200704 2 rdma_ucm,mlx5_ib, Live 0x0000000000000000")
    if peermem:
        mods.append("nvidia_peermem 16384 0 - Live 0x0000000000000000 (O)")
    (root / "proc/modules").write_text("\n".join(mods) + "\n")
    if nv is not None:
        (root / "proc/driver/nvidia").mkdir(parents=True)
        (root / "proc/driver/nvidia/version").write_text(nv)
    if lib is not None:
        d = root / "usr/lib/x86_64-linux-gnu"
        d.mkdir(parents=True)
        (d / lib).write_text("")
        (d / "libibverbs.so.1").symlink_to(lib)
    if config is not None:
        (root / "boot").mkdir()
        (root / "boot" / f"config-{release}").write_text(config)
    return str(root)


def test_open_module_new_kernel_new_rdma_core_is_dmabuf(tmp_path: Path) -> None:
    g = sysfs.gpudirect(node(tmp_path))
    assert g["path"] == "dmabuf"
    assert g["why"].startswith("DMA-BUF: NVIDIA open kernel module 580.159.04")
    assert "rdma-core 50.0 (/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.50.0" in g["why"]


def test_peermem_wins_and_is_named(tmp_path: Path) -> None:
    g = sysfs.gpudirect(node(tmp_path, nv=PROPRIETARY, peermem=True))
    assert (g["path"], g["why"]) == ("peermem", "nvidia_peermem loaded")


def test_proprietary_module_without_peermem_fails_naming_it(tmp_path: Path) -> None:
    g = sysfs.gpudirect(node(tmp_path, nv=PROPRIETARY))
    assert g["path"] is None
    assert "proprietary kernel module 535.104.05" in g["why"]
    assert "exports no dma-buf" in g["why"]


def test_old_rdma_core_old_kernel_and_config_each_fail(tmp_path: Path) -> None:
    g = sysfs.gpudirect(node(tmp_path / "a", lib="libibverbs.so.1.11.32.0"))
    assert g["path"] is None and "rdma-core 32.0" in g["why"] and "ibv_reg_dmabuf_mr" in g["why"]
    g = sysfs.gpudirect(node(tmp_path / "b", release="5.4.0-150-generic"))
    assert g["path"] is None and "older than 5.12" in g["why"]
    g = sysfs.gpudirect(node(tmp_path / "c", config="# CONFIG_DMA_SHARED_BUFFER is not set\n"))
    assert g["path"] is None and "without CONFIG_DMA_SHARED_BUFFER" in g["why"]
    g = sysfs.gpudirect(node(tmp_path / "d", nv=OPEN.replace("580.159.04", "510.47.03")))
    assert g["path"] is None and "R515" in g["why"]
    g = sysfs.gpudirect(node(tmp_path / "e", nv=None))
    assert g["path"] is None and "no NVIDIA kernel module" in g["why"]


def test_kernel_config_read_from_boot_or_proc_config_gz(tmp_path: Path) -> None:
    g = sysfs.gpudirect(node(tmp_path / "a", uverbs=False,
                             config="CONFIG_DMA_SHARED_BUFFER=y\n"))
    assert g["path"] == "dmabuf" and "CONFIG_DMA_SHARED_BUFFER=y" in g["why"]
    root = node(tmp_path / "b", uverbs=False)
    with gzip.open(Path(root) / "proc/config.gz", "wt") as fh:
        fh.write("CONFIG_DMA_SHARED_BUFFER=y\n")
    assert sysfs.gpudirect(root)["path"] == "dmabuf"
    # Neither config nor ib_uverbs: nothing says the RDMA core can import a dma-buf.
    assert sysfs.gpudirect(node(tmp_path / "c", uverbs=False))["path"] is None


def test_no_host_libibverbs_leaves_it_to_the_job_and_says_so(tmp_path: Path) -> None:
    g = sysfs.gpudirect(node(tmp_path, lib=None))
    assert g["path"] == "dmabuf"
    assert "no libibverbs on this root: the job's own (its image's) needs rdma-core >= 34" \
        in g["why"]


def test_an_older_kernel_with_the_dma_buf_import_backported_is_dmabuf(tmp_path: Path) -> None:
    """An enterprise kernel older than 5.12 that carries the RDMA core's dma-buf import (the
    symbol in depmod's modules.symbols, or in /proc/kallsyms when built in) is not failed for
    its version; one without the symbol is, naming it."""
    release = "4.18.0-553.el8_10.x86_64"
    root = Path(node(tmp_path / "a", release=release))
    (root / f"lib/modules/{release}").mkdir(parents=True)
    (root / f"lib/modules/{release}/modules.symbols").write_text(
        "# Aliases for symbols, used by symbol_request().\n"
        "alias symbol:ib_umem_get ib_core\nalias symbol:ib_umem_dmabuf_get ib_core\n")
    g = sysfs.gpudirect(str(root))
    assert g["path"] == "dmabuf", g
    assert (f"Linux {release} with the RDMA dma-buf import backported (ib_umem_dmabuf_get in "
            f"/lib/modules/{release}/modules.symbols)") in g["why"]
    root = Path(node(tmp_path / "b", release=release))
    (root / "proc/kallsyms").write_text(
        "0000000000000000 T ib_umem_get\t[ib_core]\n"
        "0000000000000000 T ib_umem_dmabuf_get\t[ib_core]\n")
    assert sysfs.gpudirect(str(root))["path"] == "dmabuf"
    # The files are there and say no: failed, naming the symbol.
    root = Path(node(tmp_path / "c", release=release))
    (root / "proc/kallsyms").write_text("0000000000000000 T ib_umem_get\t[ib_core]\n")
    g = sysfs.gpudirect(str(root))
    assert g["path"] is None
    assert f"Linux {release} is older than 5.12 and has no ib_umem_dmabuf_get" in g["why"]


def test_the_symbol_is_matched_whole_in_both_real_formats(tmp_path: Path) -> None:
    """kallsyms as a 6.18 kernel with RDMA built in prints it (no module column), and a longer
    name sharing the prefix is not the symbol."""
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/kallsyms").write_text(
        "0000000000000000 T ib_umem_dmabuf_get_pinned\n0000000000000000 T ib_umem_dmabuf_get\n")
    assert sysfs.kernel_symbol(str(tmp_path), None, "ib_umem_dmabuf_get") == (
        True, "/proc/kallsyms")
    assert sysfs.kernel_symbol(str(tmp_path), None, "ib_umem_dmabuf") == (
        False, "modules.symbols and /proc/kallsyms")
    assert sysfs.kernel_symbol(str(tmp_path / "none"), "6.1.0", "x") == (None, "")
