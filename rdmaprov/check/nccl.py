"""The optional single-node NCCL loopback of ``rdmaprov check --nccl``.

Starts the validation worker (rdmaprov.validate.worker) under torchrun on this node only, one
rank per GPU, and reads its JSON document; NCCL's own INFO log (on stderr) says which
transport it found. Slower than the other checks (torch start-up, CUDA init): seconds, not ms.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from rdmaprov.check.expect import Expectations
from rdmaprov.check.judge import Item
from rdmaprov.remediation import Remedy

TIMEOUT_S = 180
# The worker imports nothing from rdmaprov (only the standard library, torch and its parts beside
# it), so it runs as a script in any Python that has torch: rdmaprov need not be installed there.
WORKER = Path(__file__).resolve().parents[1] / "validate" / "worker.py"
_HAS_TORCH = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('torch') else 3)"


def python_problem(python: str, named: bool = True) -> str | None:
    """Why ``python`` cannot run the loopback (missing, or no torch in it), or None. A
    configuration problem, never the node's: the check says so with exit 1."""
    exe = shutil.which(python)
    if exe is None:
        return f"--nccl-python {python}: no such interpreter"
    try:
        p = subprocess.run([exe, "-c", _HAS_TORCH], capture_output=True, text=True, timeout=30,
                           check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"--nccl-python {python}: cannot run it ({exc})"
    if p.returncode == 3:
        if not named:  # rdmaprov's own Python, nobody asked for it: say how to name another
            return (f"no torch in rdmaprov's own Python ({python}) for the NCCL loopback: name "
                    "one that has it with --nccl-python (nccl_python in the config, "
                    "RDMAPROV_CHECK_NCCL_PYTHON)")
        return (f"--nccl-python {python}: no torch in that Python; name one that has it "
                "(e.g. the validation venv's python; nccl_python in the config)")
    if p.returncode != 0:
        return f"--nccl-python {python}: exits {p.returncode}: {p.stderr.strip()[:120]}"
    return None


def run(gpus: int, python: str | None = None, max_bytes: str = "256M",
        timeout: float = TIMEOUT_S) -> dict[str, Any]:
    """{ok, error, doc, nccl} from one loopback run on ``gpus`` local ranks."""
    argv = [python or sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={max(1, gpus)}", str(WORKER),
            "--backend", "nccl", "--max-bytes", max_bytes, "--timeout", "60"]
    env = {**os.environ, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,ENV"}
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env,
                           check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"NCCL loopback did not finish in {timeout:.0f} s",
                "doc": None, "nccl": None}
    except OSError as exc:
        return {"ok": False, "error": f"cannot start {argv[0]}: {exc.strerror}", "doc": None,
                "nccl": None}
    # Imported here: the parser's patterns cost a check without --nccl its start-up time.
    from rdmaprov.parsers.nccl_log import parse_nccl_log

    report = parse_nccl_log(p.stderr.splitlines()).to_dict()
    doc = None
    try:
        doc = json.loads(p.stdout) if p.stdout.strip() else None
    except json.JSONDecodeError:
        doc = None
    if doc is None:
        tail = next((ln for ln in reversed(p.stderr.splitlines()) if ln.strip()), "")
        return {"ok": False, "error": f"NCCL loopback gave no result (rc {p.returncode}): "
                                      f"{tail[:160]}", "doc": None, "nccl": report}
    return {"ok": bool(doc.get("ok")), "error": doc.get("error"), "doc": doc, "nccl": report}


def check(result: dict[str, Any] | None, exp: Expectations) -> Item:
    if result is None:
        return Item("nccl", "n/a", "loopback not run (--nccl)")
    if not result["ok"]:
        return Item("nccl", "fail", f"NCCL loopback failed: {result['error']}",
                    remedy=Remedy.INVESTIGATE.value)
    doc = result["doc"]
    rows = doc.get("results") or []
    world = int(doc.get("world_size") or 1)
    net = (result.get("nccl") or {}).get("network")
    via = f", NCCL network {net}" if net else ""
    if world < 2:
        # One rank moves nothing (busbw = algbw x 2(n-1)/n = 0; the all_reduce returns at once),
        # so any GB/s figure from it would be noise: say so instead of printing one.
        unjudged = (f" (--nccl-min-busbw {exp.nccl_min_busbw} needs 2+ GPUs)"
                    if exp.nccl_min_busbw is not None else "")
        return Item("nccl", "pass", f"1 rank: no link measured{via}{unjudged}")
    peak = max((float(r.get("busbw_GBps") or 0) for r in rows), default=0.0)
    if exp.nccl_min_busbw is not None and peak < exp.nccl_min_busbw:
        return Item("nccl", "fail", f"NCCL loopback busbw {peak:.1f} GB/s, want "
                                    f">= {exp.nccl_min_busbw}", remedy=Remedy.INVESTIGATE.value)
    return Item("nccl", "pass", f"{world} ranks, peak busbw {peak:.1f} GB/s{via}")
