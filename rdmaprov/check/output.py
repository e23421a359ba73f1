"""How ``rdmaprov check`` reports: a table, one JSON document, the NHC line, and a Prometheus
textfile-collector file (written atomically: node_exporter must never read half a file)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, TextIO

from rdmaprov.check.judge import Item
from rdmaprov.textsafe import safe_line

SCHEMA = "rdmaprov.check/1"
PROM_FILE = "rdmaprov_check.prom"


def document(items: list[Item], reason: str | None, state: dict[str, Any],
             expectations: dict[str, Any], elapsed: float) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "host": os.uname().nodename,  # what socket.gethostname() returns, without its import
        "healthy": reason is None,
        "reason": reason,
        "checks": [i.as_dict() for i in items],
        "expectations": expectations,
        "state": state,
        "elapsed_s": round(elapsed, 3),
        "time": int(time.time()),
        "config_error": None,
    }


def error_document(message: str, elapsed: float) -> dict[str, Any]:
    """The document of a check that could not run (bad flags or configuration): not healthy,
    nothing judged, nothing probed."""
    doc = document([], f"config error: {message}", {}, {}, elapsed)
    doc["config_error"] = message
    return doc


def table(items: list[Item], reason: str | None, stream: TextIO) -> None:
    width = max(len(i.name) for i in items)
    for i in items:
        remedy = f" [{i.remedy}]" if i.status == "fail" and i.remedy else ""
        line = f"{i.name:<{width}}  {i.status.upper():<4}  {i.detail}{remedy}"
        stream.write(safe_line(line) + "\n")
    stream.write("HEALTHY\n" if reason is None else safe_line(f"UNHEALTHY: {reason}") + "\n")


def nhc_line(reason: str) -> str:
    """The reason as NHC and `scontrol ... reason=` take it: one line, nothing for a terminal."""
    return safe_line(reason)


def _esc(value: Any) -> str:
    """A label value: safe text on one line, then the exposition format's three escapes."""
    return safe_line(str(value)).replace("\\", "\\\\").replace('"', '\\"')


def prometheus_text(doc: dict[str, Any]) -> str:
    """node_exporter textfile-collector format (text exposition 0.0.4)."""
    lines = [
        "# HELP rdmaprov_check_healthy 1 when every applicable rdmaprov check passed.",
        "# TYPE rdmaprov_check_healthy gauge",
        f"rdmaprov_check_healthy {int(doc['healthy'])}",
        "# HELP rdmaprov_check_config_error 1 when the check could not run: its flags or "
        "configuration are wrong (then rdmaprov_check_healthy is 0: not known healthy).",
        "# TYPE rdmaprov_check_config_error gauge",
        f"rdmaprov_check_config_error {int(bool(doc.get('config_error')))}",
        "# HELP rdmaprov_check_ok Per check: 1 pass, 0 fail (checks that do not apply are "
        "left out).",
        "# TYPE rdmaprov_check_ok gauge",
    ]
    for c in doc["checks"]:
        if c["status"] != "n/a":
            lines.append(f'rdmaprov_check_ok{{check="{_esc(c["name"])}"}} '
                         f'{int(c["status"] == "pass")}')
    lines += ["# HELP rdmaprov_check_failed_remedy 1 per failing check, labelled with what to do "
              "about it (rdmaprov/remediation.py).",
              "# TYPE rdmaprov_check_failed_remedy gauge"]
    for c in doc["checks"]:
        if c["status"] == "fail" and c.get("remedy"):
            lines.append(f'rdmaprov_check_failed_remedy{{check="{_esc(c["name"])}",'
                         f'remedy="{_esc(c["remedy"])}"}} 1')
    lines += ["# HELP rdmaprov_rdma_port_active 1 when the RDMA port is ACTIVE.",
              "# TYPE rdmaprov_rdma_port_active gauge"]
    rates = []
    for dev in doc["state"].get("rdma", {}).get("devices", []):
        for p in dev["ports"]:
            labels = (f'device="{_esc(dev["name"])}",port="{p["port"]}",'
                      f'link_layer="{_esc(p.get("link_layer") or "")}"')
            lines.append(f"rdmaprov_rdma_port_active{{{labels}}} {int(p.get('state') == 'ACTIVE')}")
            if p.get("rate_gbps") is not None:
                rates.append((labels, p["rate_gbps"]))
    # Base units, as Prometheus' naming guide asks: bytes, not bits (promtool check metrics
    # flags a "bits" name); the Gb/s name stays one release, deprecated.
    lines += ["# HELP rdmaprov_rdma_port_rate_bytes_per_second Link rate of the RDMA port "
              "(the port's Gb/s x 1e9 / 8).",
              "# TYPE rdmaprov_rdma_port_rate_bytes_per_second gauge",
              *(f"rdmaprov_rdma_port_rate_bytes_per_second{{{labels}}} {round(gbps * 1e9 / 8)}"
                for labels, gbps in rates),
              "# HELP rdmaprov_rdma_port_rate_gbps Deprecated (removed in the next release): "
              "rdmaprov_rdma_port_rate_bytes_per_second x 8 / 1e9.",
              "# TYPE rdmaprov_rdma_port_rate_gbps gauge",
              *(f"rdmaprov_rdma_port_rate_gbps{{{labels}}} {gbps}" for labels, gbps in rates),
              "# HELP rdmaprov_gpus_visible NVIDIA GPUs the driver shows.",
              "# TYPE rdmaprov_gpus_visible gauge",
              f"rdmaprov_gpus_visible {int(doc['state'].get('gpus', {}).get('count') or 0)}",
              "# HELP rdmaprov_check_duration_seconds How long the check took.",
              "# TYPE rdmaprov_check_duration_seconds gauge",
              f"rdmaprov_check_duration_seconds {doc['elapsed_s']}",
              "# HELP rdmaprov_check_last_run_timestamp_seconds When the check ran.",
              "# TYPE rdmaprov_check_last_run_timestamp_seconds gauge",
              f"rdmaprov_check_last_run_timestamp_seconds {doc['time']}"]
    return "\n".join(lines) + "\n"


def write_prometheus(doc: dict[str, Any], target: Path) -> Path:
    """Write into ``target`` (a directory: rdmaprov_check.prom in it) via a temp file + rename."""
    path = target / PROM_FILE if target.is_dir() else target
    import tempfile  # only with --prometheus

    fd, tmp = tempfile.mkstemp(prefix=".rdmaprov_check.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(prometheus_text(doc))
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
