# Copyright: rdmaprov developers
# Apache-2.0
"""RDMA port error counters judged over time: counter classes, thresholds and the delta rule.

One rule, one place: `rdmaprov check` judges the deltas between its own runs (with a sticky
flap window, see ``advance``), and `rdmaprov validate` judges "counters rose during the run"
with ``judge_deltas`` on the facts read before and after it. Pure functions over plain dicts: no
file, no clock; the caller passes samples and the time.

A sample of one node is ``{"mlx5_0/1": {"state": "ACTIVE", "counters": {name: int}}}`` (see
``snapshot``: rdma_sysfs.read_device's ports, their ``counters`` and ``hw_counters`` merged;
the two sets of names do not overlap).

Why deltas and not totals: the PMA counters under ports/N/counters/ count since the last reset
(boot, driver reload, a `perfquery -x -R`), so a total of 40 symbol errors may be a month-old
cable swap. Only growth says the link is bad now. A value that went down is a reset (reboot,
driver reload, counters cleared): the new value becomes the baseline and nothing is judged.
IB PMA counters saturate at their width (symbol_error 16 bits, link_downed 8 bits, the rest
16 or 32): a counter stuck at its maximum can no longer grow, and is reported as such.
"""

from __future__ import annotations

from typing import NamedTuple

# Remedy values of rdmaprov/remediation.py (this module ships in the collection and cannot
# import the package; tests/unit/test_link_counters.py holds the two together).
RESET_LINK = "reset-link"
INVESTIGATE = "investigate"

# class -> (counters, default threshold per judged interval, severity, remedy, why).
# threshold: the growth at which a class counts; severity "fail" makes the node unhealthy,
# "warn" is reported only. The defaults follow infiniband-diags' ibqueryerrors thresholds
# (error_thresholds: 10 for SymbolError, LinkErrorRecovery, LinkDowned, PortRcvErrors,
# LocalLinkIntegrity, ExcessiveBufferOverrun; 100 for RemotePhysical, XmitDiscards), made
# stricter where one event already means a broken link (link_downed: a flap).
CLASSES: dict[str, dict] = {
    "flap": {
        "counters": ("link_downed",),
        "threshold": 1, "severity": "fail", "remedy": RESET_LINK,
        "why": "the link went down and came back: one flap already aborts NCCL jobs using it",
    },
    "link_integrity": {
        "counters": ("link_error_recovery", "local_link_integrity_errors"),
        "threshold": 3, "severity": "fail", "remedy": RESET_LINK,
        "why": "the PHY retrained or failed its integrity check: a marginal cable or "
               "transceiver; a single event can be a neighbour's reboot, three are not",
    },
    "symbol": {
        "counters": ("symbol_error",),
        "threshold": 10, "severity": "fail", "remedy": RESET_LINK,
        "why": "symbol errors after FEC: a bad cable, transceiver or port (ibqueryerrors' 10)",
    },
    "receive": {
        "counters": ("port_rcv_errors", "excessive_buffer_overrun_errors"),
        "threshold": 10, "severity": "fail", "remedy": RESET_LINK,
        "why": "malformed packets received on this port: usually the link below it "
               "(ibqueryerrors' 10)",
    },
    "remote_physical": {
        "counters": ("port_rcv_remote_physical_errors",),
        "threshold": 100, "severity": "warn", "remedy": INVESTIGATE,
        "why": "packets marked bad upstream: the fault is on another link, not this node's",
    },
    "discards": {
        "counters": ("port_xmit_discards",),
        "threshold": 100, "severity": "warn", "remedy": INVESTIGATE,
        "why": "packets dropped for congestion or a down path in the fabric, rarely this port",
    },
    "roce_loss": {
        "counters": ("out_of_sequence", "packet_seq_err", "implied_nak_seq_err",
                     "local_ack_timeout_err"),
        "threshold": 1000, "severity": "warn", "remedy": INVESTIGATE,
        "why": "RoCE retransmissions: packet loss in a lossy or mis-set (PFC/ECN) fabric; "
               "congestion elsewhere raises them too, so they are reported, not drained on",
    },
    "roce_retry_exceeded": {
        "counters": ("rnr_nak_retry_err",),
        "threshold": 10, "severity": "warn", "remedy": INVESTIGATE,
        "why": "a peer ran out of receive buffers past the retry count (an application or "
               "peer problem as often as this node's)",
    },
}

# Saturating widths of the PMA counters (IBTA PortCounters; the kernel reports the raw value).
WIDTH_MAX = {"symbol_error": 0xFFFF, "link_error_recovery": 0xFF, "link_downed": 0xFF,
             "port_rcv_errors": 0xFFFF, "port_rcv_remote_physical_errors": 0xFFFF,
             "port_xmit_discards": 0xFFFF, "local_link_integrity_errors": 0xF,
             "excessive_buffer_overrun_errors": 0xF}

# A flapped port stays unhealthy until its link was stable this long (no new flap, ACTIVE the
# whole time); then it clears by itself, so a node is never kept drained after recovery.
STABLE_S = 900
# Counter growth is judged per window: the baseline moves on once it is this old, so slow
# growth (a few symbol errors an hour) adds up instead of hiding between two prologs seconds
# apart.
WINDOW_S = 3600

COUNTER_CLASS = {name: cls for cls, spec in CLASSES.items() for name in spec["counters"]}


class Finding(NamedTuple):
    """One counter's finding (a NamedTuple: no ``dataclasses``, whose import is a tenth of
    ``rdmaprov check``'s start-up on a GPU host)."""
    device: str
    port: int
    counter: str  # a counter name, or "state" for a port that left ACTIVE
    delta: int
    klass: str
    severity: str  # fail | warn
    remedy: str
    text: str

    def as_dict(self) -> dict:
        return dict(self._asdict())


def thresholds(overrides: dict | None = None) -> dict[str, int]:
    """{class: threshold}, the defaults with ``overrides`` (class -> int >= 1) applied."""
    out = {cls: int(spec["threshold"]) for cls, spec in CLASSES.items()}
    for cls, value in (overrides or {}).items():
        if cls not in CLASSES:
            raise ValueError(f"unknown counter class {cls!r} (known: {', '.join(CLASSES)})")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"counter class {cls}: threshold {value!r} is not an integer >= 1")
        out[cls] = value
    return out


def snapshot(devices: list[dict]) -> dict[str, dict]:
    """A sample from rdma_sysfs-shaped devices: [{name, ports: [{port, state, counters,
    hw_counters}], node_guid}] -> {"dev/port": {"state", "counters", "guid" (when known)}}."""
    out = {}
    for dev in devices:
        for p in dev.get("ports") or []:
            merged = {**(p.get("hw_counters") or {}), **(p.get("counters") or {})}
            key = f"{dev['name']}/{p['port']}"
            out[key] = {
                "state": p.get("state"),
                "counters": {k: int(v) for k, v in merged.items() if k in COUNTER_CLASS},
            }
            if dev.get("node_guid"):
                out[key]["guid"] = dev["node_guid"]
    return out


def same_card(before: dict, after: dict) -> bool:
    """Whether two samples of one "dev/port" key are of one card: mlx5_N names go in probe
    order, so after a driver reload in which a card failed to probe, the next card carries the
    name, with its own PMA counters (the HCA keeps them across a reload). A sample without a
    node_guid (older state files, drivers without one) is taken as the same card."""
    b, a = before.get("guid"), after.get("guid")
    return not (b and a) or b == a


def _split(key: str) -> tuple[str, int]:
    device, _sep, port = key.rpartition("/")
    return device, int(port) if port.isdigit() else 0


def judge_deltas(before: dict, after: dict, overrides: dict | None = None) -> list[Finding]:
    """Findings for the counters that grew from ``before`` to ``after`` by at least their
    class's threshold, and for ports ACTIVE before and not after. Counters that went down
    (a reset) and ports missing from either side are not judged."""
    limit = thresholds(overrides)
    found: list[Finding] = []
    for key in sorted(set(before) & set(after)):
        device, port = _split(key)
        b, a = before[key], after[key]
        if not same_card(b, a):
            continue  # another card under this name: nothing of it to compare
        if b.get("state") == "ACTIVE" and a.get("state") != "ACTIVE":
            found.append(Finding(device, port, "state", 1, "flap", "fail", RESET_LINK,
                                 f"{key} left ACTIVE ({a.get('state') or 'unknown'} now)"))
        bc, ac = b.get("counters") or {}, a.get("counters") or {}
        for name in sorted(set(bc) & set(ac)):
            cls = COUNTER_CLASS.get(name)
            delta = int(ac[name]) - int(bc[name])
            if cls is None or delta < limit[cls]:
                continue
            spec = CLASSES[cls]
            found.append(Finding(device, port, name, delta, cls, spec["severity"],
                                 spec["remedy"], f"{key} {name} +{delta}"))
    return found


def saturated(sample: dict) -> list[str]:
    """'dev/port counter' for each PMA counter stuck at its width's maximum (it can no longer
    show growth: clear it with `perfquery -x -R` or a reboot)."""
    return [f"{key} {name}" for key, port in sorted(sample.items())
            for name, value in sorted((port.get("counters") or {}).items())
            if name in WIDTH_MAX and int(value) >= WIDTH_MAX[name]]


def unjudged(sample: dict, severity: str | None = None) -> list[str]:
    """'dev/port' of each port with no counter of any class (of ``severity``'s classes, when
    given) readable: no counters/ or hw_counters/ directory, each file unreadable (a PPCNT query
    the firmware refuses fails the read) or 'N/A (no PMA)' (a driver without process_mad, e.g.
    a ConnectX-3 VF). Only its state changes can be judged: "no error growth" on it is not
    known, so never a pass. With severity "fail": ports whose growth could not fail a node (a
    RoCE port with hw_counters alone)."""
    names = {name for name, cls in COUNTER_CLASS.items()
             if severity is None or CLASSES[cls]["severity"] == severity}
    return [key for key, port in sorted(sample.items())
            if not names.intersection(port.get("counters") or {})]


def advance(history: dict | None, sample: dict, now: float, overrides: dict | None = None,
            stable_s: float = STABLE_S, window_s: float = WINDOW_S) -> tuple[dict, list[Finding]]:
    """One check's step: (new history, findings that make or keep the node unhealthy or warn).

    history: {"ports": {"dev/port": {"base": {"t", "state", "counters"}, "last": {...},
    "sticky": {"since", "until", "text", "klass", "remedy", "counter"} | absent}}}. A failing
    finding makes its port sticky until ``stable_s`` after the last one; a sticky port is
    reported (as a finding of its first cause) until then, and then clears by itself. Growth
    is measured against ``base``, which moves to the present sample once ``window_s`` old.
    """
    old = (history or {}).get("ports") or {}
    ports: dict[str, dict] = {}
    findings: list[Finding] = []
    for key, cur in sorted(sample.items()):
        entry = dict(old.get(key) or {})
        if entry.get("last") is not None and not same_card(entry["last"], cur):
            entry = {}  # another card under this name: its history starts here
        cur_t = {"t": now, **cur}
        base = entry.get("base")
        last = entry.get("last")
        new: list[Finding] = []
        if base is not None:
            reset = any(int(v) < int((base.get("counters") or {}).get(k, 0))
                        for k, v in (cur.get("counters") or {}).items())
            if reset:
                base = None  # a reboot or reload: the present value is the new zero
            else:
                new = [f for f in judge_deltas({key: base}, {key: cur}, overrides)
                       if f.counter != "state"]
        # Left ACTIVE since the last check (not since the base: a port down an hour ago and
        # back since is what link_downed says).
        if last is not None:
            new += [f for f in judge_deltas({key: last}, {key: cur}, overrides)
                    if f.counter == "state"]
        failing = [f for f in new if f.severity == "fail"]
        sticky = entry.get("sticky")
        if any(f.counter != "state" for f in new):
            base = None  # judged: the next window starts here
        if failing:
            first = failing[0]
            since = sticky["since"] if sticky else now
            cause = sticky or {"text": first.text, "klass": first.klass,
                               "remedy": first.remedy, "counter": first.counter}
            sticky = {**cause, "since": since, "until": now + stable_s,
                      "text": "; ".join(f.text for f in failing)}
        elif sticky and cur.get("state") != "ACTIVE":
            sticky = {**sticky, "until": now + stable_s}  # not stable while down
        elif sticky and now >= float(sticky["until"]):
            sticky = None  # stable for the whole window: clears by itself
        findings += [f for f in new if f.severity != "fail"]
        if sticky is not None:
            device, port = _split(key)
            left = max(0, int(float(sticky["until"]) - now))
            findings.append(Finding(
                device, port, sticky.get("counter") or "state", 1, sticky["klass"], "fail",
                sticky["remedy"], f"{sticky['text']} (unhealthy until stable for "
                                  f"{int(stable_s)} s: {left} s left)"))
        if base is None or now - float(base.get("t", now)) >= window_s:
            base = cur_t
        entry.update({"base": base, "last": cur_t})
        if sticky is None:
            entry.pop("sticky", None)
        else:
            entry["sticky"] = sticky
        ports[key] = entry
    return {"ports": ports}, findings
