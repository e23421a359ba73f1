"""`ethtool -S IFACE` (and RoCE hw_counters pasted as "name: value"): PFC pause frames per
priority, discards, ECN marks and CNPs, PHY errors, link-down events.

Counter names as mlx5 prints them (kernel Documentation/networking/device_drivers/ethernet/
mellanox/mlx5/counters.rst): rx_prio3_pause, tx_prio3_pause, rx_prio3_pause_duration,
rx_prio3_discards / rx_prio3_buf_discard / rx_prio3_cong_discard, rx_discards_phy,
tx_discards_phy, rx_pause_ctrl_phy / tx_pause_ctrl_phy (global pause), rx_out_of_buffer,
rx_crc_errors_phy, rx_symbol_err_phy, link_down_events_phy, rx_ecn_mark; RoCE hw_counters:
np_cnp_sent, rp_cnp_handled, np_ecn_marked_roce_packets, out_of_sequence.

Which priority is the lossless one: ``lossless_prio`` (rdmaprov's default and NCCL_IB_TC=106's
DSCP 26 both map to priority 3); pause frames on any other priority are flagged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rdmaprov.parsers._common import Finding, clean

_COUNTER = re.compile(r"^\s*([A-Za-z][\w.\[\]-]*):\s+(-?\d+)\s*$")
_PRIO = re.compile(r"^(rx|tx)_prio(\d)_(\w+)$")
# Other drivers' per-priority pause counters, read as "<rx|tx>_pause" of that priority:
# bnxt_en rx_pfc_ena_frames_pri3, ice rx_priority_3_xoff.nic.
_PRIO_OTHER = re.compile(r"^(rx|tx)_(?:pfc_ena_frames_pri(\d)|priority_(\d)_xoff(?:\.nic)?)$")
# Link-level (global) pause counters: mlx5, bnxt_en, ice.
_GLOBAL_PAUSE = {"rx": ("rx_pause_ctrl_phy", "rx_pause_frames", "link_xoff_rx.nic"),
                 "tx": ("tx_pause_ctrl_phy", "tx_pause_frames", "link_xoff_tx.nic")}
LOSSLESS_PRIO = 3
_MAX = 8192


@dataclass
class EthtoolStatsReport:
    interface: str | None = None
    counters: int = 0
    priorities: dict[str, dict[str, int]] = field(default_factory=dict)
    pause_priorities: list[int] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "ethtool_stats", "findings": [f.to_dict() for f in self.findings],
                "interface": self.interface, "counters": self.counters,
                "priorities": self.priorities, "pause_priorities": self.pause_priorities,
                "totals": self.totals}


_TOTALS = ("rx_discards_phy", "tx_discards_phy", "rx_pause_ctrl_phy", "tx_pause_ctrl_phy",
           "rx_out_of_buffer", "rx_crc_errors_phy", "rx_symbol_err_phy",
           "link_down_events_phy", "rx_ecn_mark", "np_cnp_sent", "rp_cnp_handled",
           "np_ecn_marked_roce_packets", "out_of_sequence", "rx_buffer_passed_thres_phy",
           "tx_pause_storm_error_events", "tx_pause_storm_warning_events",
           "rx_corrected_bits_phy", "rx_pcs_symbol_err_phy", "packet_seq_err",
           "local_ack_timeout_err", "rx_steer_missed_packets")


class EthtoolStatsParser:
    def __init__(self) -> None:
        self.r = EthtoolStatsReport()
        self.values: dict[str, int] = {}

    def feed(self, raw: str) -> None:
        line = clean(raw)
        s = line.strip()
        if not s:
            return
        if s.startswith("NIC statistics"):
            return
        m = re.match(r"^(?:\$\s*)?(?:sudo\s+)?ethtool\s+-S\s+(\S+)", s)
        if m:
            self.r.interface = m.group(1)
            return
        m = _COUNTER.match(line)
        if m and len(self.values) < _MAX:
            self.values[m.group(1)] = int(m.group(2))

    def finish(self, lossless_prio: int = LOSSLESS_PRIO) -> EthtoolStatsReport:
        r = self.r
        v = self.values
        r.counters = len(v)
        for name, val in v.items():
            m = _PRIO.match(name)
            if m:
                r.priorities.setdefault(m.group(2), {})[f"{m.group(1)}_{m.group(3)}"] = val
                continue
            m = _PRIO_OTHER.match(name)
            if m:
                c = r.priorities.setdefault(m.group(2) or m.group(3), {})
                c[f"{m.group(1)}_pause"] = c.get(f"{m.group(1)}_pause", 0) + val
        r.totals = {k: v[k] for k in _TOTALS if k in v}
        f = r.findings
        pause = {int(p): c.get("rx_pause", 0) + c.get("tx_pause", 0)
                 for p, c in r.priorities.items()}
        r.pause_priorities = sorted(p for p, n in pause.items() if n > 0)
        other = [p for p in r.pause_priorities if p != lossless_prio]
        if other:
            f.append(Finding(
                "warning", "PFC pause frames on priority " + ", ".join(map(str, other))
                + f", not the lossless priority {lossless_prio} ("
                + ", ".join(f"prio {p}: rx {r.priorities[str(p)].get('rx_pause', 0)}, tx "
                            f"{r.priorities[str(p)].get('tx_pause', 0)}" for p in other) + ")",
                f"PFC is enabled on a class other than the RDMA one, or RDMA traffic is "
                f"marked with another priority: enable PFC on priority {lossless_prio} only "
                "(mlnx_qos -i IFACE --pfc 0,0,0,1,0,0,0,0) on hosts and switches, and check "
                "the DSCP map and NCCL_IB_TC so RoCE lands on it.", "pfc_wrong_priority",
                "config"))
        if lossless_prio in pause and pause[lossless_prio] > 0:
            c = r.priorities[str(lossless_prio)]
            f.append(Finding(
                "info", f"PFC pauses on the lossless priority {lossless_prio}: rx "
                f"{c.get('rx_pause', 0)}, tx {c.get('tx_pause', 0)}",
                "Pauses on the lossless class are PFC doing its job; many tx pauses mean this "
                "host's receive side falls behind (slow receiver), many rx pauses a "
                "congested switch egress.", "pfc_pause"))
        grx = sum(v.get(k, 0) for k in _GLOBAL_PAUSE["rx"])
        gtx = sum(v.get(k, 0) for k in _GLOBAL_PAUSE["tx"])
        if grx + gtx:
            f.append(Finding(
                "warning", f"global (link-level) pause frames: rx {grx}, tx {gtx}",
                "Link-level flow control pauses every class at once: turn it off (ethtool -A "
                "IFACE rx off tx off) and use PFC on the RDMA priority instead.",
                "global_pause", "config"))
        storms = v.get("tx_pause_storm_error_events", 0)
        if storms:
            f.append(Finding(
                "error", f"{storms} pause storm error event(s): the NIC stopped sending pauses "
                "to protect the fabric", "A receiver that cannot drain (a stuck host or "
                "device) sent pauses until the storm guard tripped: find the stuck host or "
                "process; reset the link if it persists.", "pause_storm", "investigate"))
        lossless = r.priorities.get(str(lossless_prio), {})
        drops = sum(n for k, n in lossless.items() if "discard" in k and k.startswith("rx"))
        if drops:
            f.append(Finding(
                "error", f"{drops} packets dropped on the lossless priority {lossless_prio}",
                "A lossless class must not drop: PFC is not enabled end to end on that "
                "priority (host and every switch port), or the receive buffer is too small "
                "for the cable length (mlnx_qos --buffer_size).", "lossless_drops", "config"))
        for k in ("rx_discards_phy", "tx_discards_phy"):
            if v.get(k):
                f.append(Finding(
                    "warning", f"{k} = {v[k]}",
                    "The port dropped packets for lack of buffer: on RoCE that is loss on the "
                    "RDMA path unless PFC protects its priority; compare with the per-priority "
                    "discards.", "port_discards", "investigate"))
        if v.get("rx_out_of_buffer"):
            f.append(Finding(
                "warning", f"rx_out_of_buffer = {v['rx_out_of_buffer']}: the host did not "
                "post receive buffers fast enough",
                "Receive rings ran empty (CPU busy or ring too small: ethtool -G IFACE rx "
                "8192).", "out_of_buffer", "investigate"))
        errs = {k: v[k] for k in ("rx_crc_errors_phy", "rx_symbol_err_phy",
                                  "rx_pcs_symbol_err_phy") if v.get(k)}
        if errs:
            f.append(Finding(
                "warning", "PHY errors: " + ", ".join(f"{k} {n}" for k, n in errs.items()),
                "Bit errors on the wire: reseat or replace the cable/transceiver; check the "
                "switch side's counters too.", "phy_errors", "reset-link"))
        if v.get("link_down_events_phy"):
            n = v["link_down_events_phy"]
            f.append(Finding(
                "warning" if n < 3 else "error", f"the link went down {n} time(s) "
                "(link_down_events_phy)", "A link that goes down repeatedly is a cable, "
                "optic or switch-port fault: reseat or replace it.", "link_flap",
                "reset-link"))
        cnp = v.get("np_cnp_sent", 0) + v.get("rp_cnp_handled", 0)
        ecn = v.get("rx_ecn_mark", 0) + v.get("np_ecn_marked_roce_packets", 0)
        if cnp or ecn:
            f.append(Finding(
                "info", f"congestion control is active: ECN-marked {ecn}, CNPs sent "
                f"{v.get('np_cnp_sent', 0)}, handled {v.get('rp_cnp_handled', 0)}",
                None, "ecn_active"))
        elif pause.get(lossless_prio, 0) > 0 and ("np_cnp_sent" in v or "rx_ecn_mark" in v):
            f.append(Finding(
                "warning", "PFC pauses but no ECN marks or CNPs: congestion is handled by "
                "pausing only", "Enable ECN marking on the switches' RoCE queue and DCQCN on "
                "the NICs so senders slow down before PFC pauses spread.", "no_ecn", "config"))
        if not r.counters:
            f.append(Finding("warning", "no counters found in this text", None))
        elif not any(x.severity in ("error", "warning") for x in f):
            f.append(Finding("info", f"{r.counters} counters: no pause storm, drop, PHY error "
                             "or link-down counter is non-zero", None))
        return r
