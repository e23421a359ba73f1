"""`rdmaprov check --sysroot` on a root captured from the real H200 (tests/fixtures/sysfs/
SOURCES.md): the same module verdict the live machine gave (bench/RESULTS.md, "The H200 as a
host"): built in, not "not loaded"."""

from __future__ import annotations

from pathlib import Path

from rdmaprov.cli import main


def test_h200_capture_gives_the_live_verdict(h200_root: Path, capsys) -> None:
    rc = main(["check", "--sysroot", str(h200_root)])
    lines = {ln.split()[0]: ln for ln in capsys.readouterr().out.splitlines() if ln.strip()}
    assert rc == 2  # no HCA on that machine: truly unhealthy for an RDMA job
    assert lines["modules"].split(None, 2)[1:] == ["PASS", "built in: ib_core, ib_uverbs, rdma_ucm"]
    assert "1 visible (NVIDIA H200)" in lines["gpus"]
    assert "ib_uverbs is built into the kernel but /sys/class/infiniband is empty" in lines["ports"]


def test_h200_capture_passes_gpudirect_by_dma_buf(h200_root: Path, capsys) -> None:
    """The H200 has no nvidia_peermem, and needs none: the open kernel module, Linux 6.18 with
    RDMA's dma-buf import: GPUDirect by DMA-BUF, said so (issue 24)."""
    main(["check", "--sysroot", str(h200_root)])
    lines = {ln.split()[0]: ln for ln in capsys.readouterr().out.splitlines() if ln.strip()}
    status, detail = lines["gpudirect"].split(None, 2)[1:]
    assert status == "PASS", detail
    assert detail.startswith("DMA-BUF: NVIDIA open kernel module 580.159.04")
    assert "Linux 6.18.44-fc-v1252-gpu with ib_uverbs" in detail
    assert "peermem" not in lines.get("UNHEALTHY:", "")
