"""`rdmaprov check --sysroot` on a root captured from the real H200 (tests/fixtures/sysfs/
SOURCES.md): the same module verdict the live machine gave (bench/RESULTS.md, "The H200 as a
host"): built in, not "not loaded"."""

from __future__ import annotations

import tarfile
from pathlib import Path

from rdmaprov.cli import main

CAPTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sysfs" / "h200-captured.tar.gz"


def extract(tar: tarfile.TarFile, dest: Path) -> None:
    """extractall with the "data" filter where this Python has it (3.11.4+, 3.12); before that
    (Debian 12's 3.11.2) the same refusals by hand: no absolute or escaping path, no link out of
    ``dest``, no device, only plain files, directories and links."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, filter="data")
        return
    root = dest.resolve()
    for m in tar.getmembers():
        target = (dest / m.name).resolve()
        link = (target.parent / m.linkname).resolve() if m.issym() else \
            (dest / m.linkname).resolve() if m.islnk() else target
        if (m.name.startswith("/") or not (m.isfile() or m.isdir() or m.issym() or m.islnk())
                or not target.is_relative_to(root) or not link.is_relative_to(root)):
            raise ValueError(f"{CAPTURE.name}: refusing member {m.name!r}")
    tar.extractall(dest)  # every member checked above


def test_h200_capture_gives_the_live_verdict(tmp_path: Path, capsys) -> None:
    with tarfile.open(CAPTURE) as tar:
        extract(tar, tmp_path)
    rc = main(["check", "--sysroot", str(tmp_path)])
    lines = {ln.split()[0]: ln for ln in capsys.readouterr().out.splitlines() if ln.strip()}
    assert rc == 2  # no HCA on that machine: truly unhealthy for an RDMA job
    assert lines["modules"].split(None, 2)[1:] == ["PASS", "built in: ib_core, ib_uverbs, rdma_ucm"]
    assert "1 visible (NVIDIA H200)" in lines["gpus"]
    assert "ib_uverbs is built into the kernel but /sys/class/infiniband is empty" in lines["ports"]


def test_h200_capture_passes_gpudirect_by_dma_buf(tmp_path: Path, capsys) -> None:
    """The H200 has no nvidia_peermem, and needs none: the open kernel module, Linux 6.18 with
    RDMA's dma-buf import: GPUDirect by DMA-BUF, said so (issue 24)."""
    with tarfile.open(CAPTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    main(["check", "--sysroot", str(tmp_path)])
    lines = {ln.split()[0]: ln for ln in capsys.readouterr().out.splitlines() if ln.strip()}
    status, detail = lines["gpudirect"].split(None, 2)[1:]
    assert status == "PASS", detail
    assert detail.startswith("DMA-BUF: NVIDIA open kernel module 580.159.04")
    assert "Linux 6.18.44-fc-v1252-gpu with ib_uverbs" in detail
    assert "peermem" not in lines.get("UNHEALTHY:", "")
