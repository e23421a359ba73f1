"""container_runtime against real lab nodes: podman installed and configured, the lab image
loaded from its tarball, a real container checked; re-apply changes nothing; --check is clean.

The lab cannot raise the hard memlock limit (no CAP_SYS_RESOURCE): the default policy must say
so per host, and policy `host` must pass while reporting the limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from rdmaprov.engine import RunnerSession, RunSpec

pytestmark = pytest.mark.lab

LAB_VARS = {
    "container_runtime_engine": "podman",
    "container_runtime_memlock": "host",
    "container_runtime_verify_image": "localhost/rdmaprov-lab-worker:latest",
    "container_runtime_images": [{"name": "localhost/rdmaprov-lab-worker:latest",
                                  "archive": "/srv/rdmaprov-images/lab-worker.tar"}],
}


def apply(lab, tmp: Path, extravars: dict, check: bool = False, events: list | None = None):
    book = tmp / "container_runtime.yml"
    book.write_text("- hosts: all\n  gather_facts: false\n  roles:\n"
                    "    - rdmaprov.cluster.container_runtime\n")
    spec = RunSpec(playbook=book, inventory=lab.inventory, extravars=extravars,
                   host_count=len(lab.nodes), check=check)
    sink = events if events is not None else []
    return RunnerSession(spec, on_event=sink.append).run()


def _debug_msgs(events: list, task: str) -> dict[str, str]:
    out = {}
    for ev in events:
        d = ev.get("event_data") or {}
        if ev.get("event") == "runner_on_ok" and d.get("task") == task:
            out[d["host"]] = str((d.get("res") or {}).get("msg"))
    return out


def test_unlimited_memlock_is_refused_with_the_reason(lab, tmp_path: Path) -> None:
    # The default policy (unlimited), explicitly: the lab's group_vars accept the host limit.
    result = apply(lab, tmp_path, {"container_runtime_engine": "podman",
                                   "container_runtime_memlock": "unlimited"})
    assert set(result.failed_hosts) == set(lab.nodes)
    for name in lab.nodes:
        msg = result.hosts[name].failure.message
        assert "memlock cannot be made unlimited here: hard limit" in msg
        assert "no CAP_SYS_RESOURCE" in msg


def test_apply_reapply_check(lab, tmp_path: Path) -> None:
    events: list = []
    first = apply(lab, tmp_path, LAB_VARS, events=events)
    assert first.ok, {h: r.failure for h, r in first.hosts.items()}
    seen = _debug_msgs(events, "Report what a container gets here")
    assert set(seen) == set(lab.nodes)
    for msg in seen.values():
        assert msg.startswith("podman container: ulimit -l 8192")
        assert "not applicable on this host: no /dev/infiniband" in msg

    again = apply(lab, tmp_path, LAB_VARS)
    assert again.ok and all(r.changed == 0 for r in again.hosts.values())
    dry = apply(lab, tmp_path, LAB_VARS, check=True)
    assert dry.ok and all(r.changed == 0 for r in dry.hosts.values())

    node = lab.nodes[0]
    conf = lab.exec(node, ["cat", "/etc/containers/containers.conf.d/90-rdmaprov.conf"]).stdout
    assert "pids_limit = 0" in conf and "default_ulimits" not in conf
    limits = lab.exec(node, ["cat", "/etc/security/limits.d/90-rdmaprov-memlock.conf"]).stdout
    assert "root hard memlock unlimited" in limits
    dropin = lab.exec(node, ["cat", "/etc/systemd/system.conf.d/90-rdmaprov-memlock.conf"]).stdout
    assert "DefaultLimitMEMLOCK=infinity" in dropin
    ran = lab.exec(node, ["podman", "run", "--rm", "--network", "host",
                          "localhost/rdmaprov-lab-worker:latest", "sh", "-c", "ulimit -l"])
    assert ran.stdout.strip() == "8192"
