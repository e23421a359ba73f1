"""`rdmaprov explain FILE` names the cause and the fix (issue 41), run as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "explain"
ROOT = Path(__file__).resolve().parents[2]


def explain(*files: Path) -> list[dict[str, Any]]:
    """One `rdmaprov explain --json` run over the files (a list even for one)."""
    p = subprocess.run([sys.executable, "-m", "rdmaprov", "explain", "--json",
                        *map(str, files)], capture_output=True, text=True, timeout=120,
                       cwd=ROOT, check=False)
    assert p.returncode in (0, 2), p.stderr
    doc = json.loads(p.stdout)
    return doc if isinstance(doc, list) else [doc]


def text(report: dict[str, Any]) -> str:
    return " ".join(f["message"] + " " + (f["hint"] or "") for f in report["findings"])


# A launcher's or collector's prefix in front of every line, as pasted from each.
PREFIXES = {
    "torchrun": "[rank0]:",
    "srun": "0: ",
    "mpirun": "[1,0]<stdout>:",
    "k8s": "2025-07-21T19:05:29.123456789Z ",
    "ray": "(RayWorkerWrapper pid=27907) ",
    "timestamp": "[2025-07-21 19:05:29] ",
}


def test_libibverbs_cause_whatever_the_level_and_prefix(tmp_path: Path) -> None:
    real = (FIX / "nccl_1653_info_no_libibverbs_socket.log").read_text(encoding="utf-8")
    # NCCL up to 2.18 logged the same line at WARN from misc/ibvwrap.cc (NVIDIA/nccl#367).
    warn = real.replace("NCCL INFO Failed to open", "misc/ibvwrap.cc:63 NCCL WARN Failed to open")
    assert warn != real
    files = []
    for name, prefix in PREFIXES.items():
        for level, body in (("info", real), ("warn", warn)):
            f = tmp_path / f"{name}_{level}.log"
            f.write_text("".join(prefix + line + "\n" for line in body.splitlines()))
            files.append(f)
    reports = explain(*files)
    for f, r in zip(files, reports, strict=True):
        assert r["network"] == "Socket", f.name
        assert r["fallback_cause"] == "libibverbs could not be loaded", f.name
        assert "Install rdma-core" in text(r), f.name


def test_nvls_bind_out_of_memory_is_multicast_exhaustion_not_fabric_manager() -> None:
    [r] = explain(FIX / "nccl_2077_v2.29.7_nvls_mc_exhausted.log")
    nvls = [f for f in r["findings"] if f.get("code") == "nvls_failure"]
    assert len(nvls) == 1
    assert "multicast objects exhausted" in nvls[0]["message"]
    assert "NCCL_NVLS_ENABLE=0" in nvls[0]["hint"] and "fewer communicators" in nvls[0]["hint"]
    # NCCL's own sentence blames the Fabric Manager; the diagnosis does not repeat it.
    assert "systemctl status nvidia-fabricmanager" not in text(r)
    assert "configuration error in the Fabric Manager" not in text(r)


def test_nvls_bind_other_cuda_error_still_points_at_fabric_manager() -> None:
    [r] = explain(FIX / "pytorch177472_nvls_v2.29_bind_401.log")
    assert "Fabric Manager" in text(r) and "exhausted" not in text(r)
