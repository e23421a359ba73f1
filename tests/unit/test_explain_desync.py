"""Collective desync across ranks from PyTorch's watchdog lines: only within one process group
and only for collectives every rank calls alike. Lines are the real nccl#1409 paste's, with
the rank, op, count or group changed per case."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rdmaprov.parsers.nccl_log import parse_nccl_log

REAL = (Path(__file__).resolve().parents[1] / "fixtures" / "explain"
        / "nccl_1409_torch_watchdog_desync.log").read_text(encoding="utf-8").splitlines()
WD = REAL[0].strip()  # [rank7] ... [Rank 7] Watchdog ... SeqNum=80078, OpType=BROADCAST ...


def line(rank: int, op: str = "BROADCAST", numel: int = 5056, pg: str = "") -> str:
    out = (WD.replace("[rank7]", f"[rank{rank}]").replace("[Rank 7]", f"{pg}[Rank {rank}]")
           .replace("OpType=BROADCAST", f"OpType={op}")
           .replace("NumelIn=5056, NumelOut=5056", f"NumelIn={numel}, NumelOut={numel}"))
    return out.replace(f"{pg}[Rank {rank}]", f"[{pg}Rank {rank}]") if pg else out


def desync(lines: list[str]) -> Any:
    wd = parse_nccl_log(lines).to_dict()["watchdog"]
    return wd.get("desync") if wd else None


def test_the_real_paste() -> None:
    d = desync(REAL)
    assert d == {"seq": 80078, "pg": 0, "what": "op",
                 "by": {"ALLREDUCE": [3], "BROADCAST": [7]}}


def test_same_op_same_size_is_no_desync() -> None:
    assert desync([line(0), line(1), line(2)]) is None


def test_same_op_different_sizes() -> None:
    d = desync([line(0), line(1), line(2, numel=4096)])
    assert d["what"] == "size"
    assert d["by"] == {"BROADCAST of 5056 elements": [0, 1], "BROADCAST of 4096 elements": [2]}


def test_point_to_point_and_alltoall_may_differ() -> None:
    assert desync([line(0, "SEND"), line(1, "RECV")]) is None
    assert desync([line(0, "ALLTOALL_BASE", 10), line(1, "ALLTOALL_BASE", 12)]) is None


def test_different_process_groups_have_their_own_sequence() -> None:
    assert desync([line(0, "ALLREDUCE", pg="PG ID 1 PG GUID 1 "),
                   line(1, "BROADCAST", pg="PG ID 2 PG GUID 2 ")]) is None
    d = desync([line(0, "ALLREDUCE", pg="PG ID 1 PG GUID 1 "),
                line(1, "BROADCAST", pg="PG ID 1 PG GUID 1 ")])
    assert d is not None and d["pg"] == 1
