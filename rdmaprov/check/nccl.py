"""The optional single-node NCCL loopback of ``rdmaprov check --nccl``.

Starts the validation worker (rdmaprov.validate.worker) under torchrun on this node only, one
rank per GPU, and reads its JSON document; NCCL's own INFO log (on stderr) says which
transport it found. Slower than the other checks (torch start-up, CUDA init): seconds, not ms.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from rdmaprov.check.expect import Expectations
from rdmaprov.check.judge import Item
from rdmaprov.parsers.nccl_log import parse_nccl_log

TIMEOUT_S = 180


def run(gpus: int, python: str | None = None, max_bytes: str = "256M") -> dict[str, Any]:
    """{ok, error, doc, nccl} from one loopback run on ``gpus`` local ranks."""
    argv = [python or sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={max(1, gpus)}", "-m", "rdmaprov.validate.worker",
            "--backend", "nccl", "--max-bytes", max_bytes, "--timeout", "60"]
    env = {**os.environ, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,ENV"}
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, env=env,
                           check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"NCCL loopback did not finish in {TIMEOUT_S} s",
                "doc": None, "nccl": None}
    except OSError as exc:
        return {"ok": False, "error": f"cannot start {argv[0]}: {exc.strerror}", "doc": None,
                "nccl": None}
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
        return Item("nccl", "fail", f"NCCL loopback failed: {result['error']}")
    doc = result["doc"]
    rows = doc.get("results") or []
    world = int(doc.get("world_size") or 1)
    # With one rank busbw is 0 by its formula; algbw then says how fast the GPU reduces.
    key = "busbw_GBps" if world > 1 else "algbw_GBps"
    peak = max((float(r.get(key) or 0) for r in rows), default=0.0)
    net = (result.get("nccl") or {}).get("network")
    what = f"{world} rank(s), peak {key.split('_')[0]} {peak:.1f} GB/s" + (
        f", NCCL network {net}" if net else "")
    if exp.nccl_min_busbw is not None and world > 1 and peak < exp.nccl_min_busbw:
        return Item("nccl", "fail", f"NCCL loopback busbw {peak:.1f} GB/s, want "
                                    f">= {exp.nccl_min_busbw}")
    return Item("nccl", "pass", what)
