"""`rdmaprov status` against a lab node that carries the real roce_qos boot unit on a veth (no
DCB): the QoS cell says what the unit did on that NIC, not just that the unit is active, and the
modules cell is the kernel_modules module's loaded / built in / absent answer."""

from __future__ import annotations

import json
import subprocess
import sys

RDMAPROV = [sys.executable, "-m", "rdmaprov"]


def test_status_says_the_qos_unit_found_no_capable_nic(lab) -> None:
    node = lab.nodes[0]
    boot = subprocess.run([*RDMAPROV, "bootstrap", str(lab.inventory), "--no-validate",
                           "--tags", "roce_qos", "--limit", node],
                          capture_output=True, text=True, timeout=900, check=False)
    assert boot.returncode == 0, boot.stdout[-3000:] + boot.stderr[-2000:]
    before = lab.etc_digest(node)
    p = subprocess.run([*RDMAPROV, "status", str(lab.inventory), "--limit", node, "--json"],
                       capture_output=True, text=True, timeout=600, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    assert lab.etc_digest(node) == before
    state = json.loads(p.stdout)["nodes"][node]
    assert state["qos"]["unit"] == "active"
    assert list(state["qos"]["nics"]) == ["eth1"]
    assert state["qos"]["nics"]["eth1"].startswith("not capable: dcb pfc show: "), state["qos"]
    kernel = state["modules"]
    assert kernel["can_load"] is False and "no /proc/modules" in kernel["reason"]
    assert {m["name"]: m["state"] for m in kernel["modules"]} == {
        "ib_core": "absent", "ib_uverbs": "absent", "rdma_ucm": "absent", "mlx5_ib": "absent",
        "nvidia_peermem": "absent"}
    table = subprocess.run([*RDMAPROV, "status", str(lab.inventory), "--limit", node],
                           capture_output=True, text=True, timeout=600, check=False).stdout
    row = " ".join(table.split())
    assert "unit active: eth1 not capable: dcb pfc show:" in row, table
    assert "absent: ib_core, ib_uverbs, rdma_ucm, mlx5_ib, nvidia_peermem" in row, table
