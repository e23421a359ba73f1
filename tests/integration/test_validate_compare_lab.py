"""validate --compare-socket on real lab nodes: the second sweep runs with NCCL_IB_DISABLE=1 over
the inventory's own environment, and both rows carry busbw, the 1 GiB time and the CPU figure.
On the lab both runs are gloo over TCP, and the report says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_validate_lab import HOST_RUNTIME, _validate  # same directory (rootdir import)

pytestmark = pytest.mark.lab


def test_compare_socket_wiring_and_cpu(lab, tmp_path: Path) -> None:
    code, report = _validate(lab, tmp_path, HOST_RUNTIME, "--compare-socket", "--pairwise", "never")
    assert code == 0, report
    rows = {r["label"]: r for r in report["compare"]}
    assert set(rows) == {"as configured", "NCCL_IB_DISABLE=1"}
    for r in rows.values():
        assert r["busbw_GBps"] > 0 and r["time_1GiB_us"] > 0
        # cores busy during the largest size, from /proc/stat on the host: a figure, 0 < x <= cores
        assert 0 < r["cpu_busy_cores"] <= 64
        assert "both runs are TCP" in r["note"]
    # The second run kept the inventory's environment and added NCCL_IB_DISABLE=1 over it.
    results = tmp_path / "results"
    master = lab.nodes[0]
    fabric = json.loads((results / "fabric" / master / "result.json").read_text())["env"]
    socket = json.loads((results / "socket" / master / "result.json").read_text())["env"]
    assert "NCCL_IB_DISABLE" not in fabric and socket["NCCL_IB_DISABLE"] == "1"
    assert socket.get("GLOO_SOCKET_IFNAME") == fabric.get("GLOO_SOCKET_IFNAME") is not None
