"""Compare a node's state (rdmaprov.check.probes.gather) with Expectations: pure functions.

Each check gives one Item: ``pass``, ``fail`` or ``n/a`` (with why it does not apply). The
verdict's reason is the first failure, in the order of CHECKS (the most basic cause first: no
RDMA device explains a missing MTU too), plus how many more failed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from rdmaprov import collection
from rdmaprov.check.expect import Expectations
from rdmaprov.remediation import Remedy

CONFIG, REPLACE, RESET_LINK = Remedy.CONFIG.value, Remedy.REPLACE.value, Remedy.RESET_LINK.value
REBOOT, INVESTIGATE = Remedy.REBOOT.value, Remedy.INVESTIGATE.value
FIRMWARE = Remedy.FIRMWARE.value

State = Mapping[str, Any]
REASON_MAX = 200  # slurm keeps the whole reason, but `sinfo -R` columns should stay readable


class Item(NamedTuple):
    """One check's verdict (a NamedTuple: no ``dataclasses``, whose import is a tenth of the
    check's start-up on a GPU host)."""
    name: str
    status: str  # pass | fail | n/a
    detail: str
    remedy: str | None = None  # rdmaprov.remediation.Remedy value, on a failure

    def as_dict(self) -> dict[str, str]:
        return dict(self._asdict())


def excluded(port: Mapping[str, Any]) -> bool:
    """Whether a port is out of the check, the one rule every item follows (through _ports):
    down by an operator's choice (rdma_sysfs.admin_down: an IB PHY Disabled, a RoCE netdev
    without IFF_UP), as docs/day2.md tells operators to set a spare, uncabled card. Such a
    port is out of the rail count and of MTU, PFC, link history, PHY, LID and GIDs alike; its
    card is out of the card-level items (PCIe, AER, firmware) when all its ports are."""
    return bool(port.get("admin_down"))


def _all_ports(state: State, exp: Expectations) -> list[dict[str, Any]]:
    out = []
    for dev in state["rdma"]["devices"]:
        if exp.hcas and dev["name"] not in exp.hcas:
            continue
        for p in dev["ports"]:
            if exp.link_layer and p.get("link_layer") != exp.link_layer:
                continue
            out.append({**p, "device": dev["name"], "model": dev.get("board_id")
                        or dev.get("hca_type"), "vf": bool(dev.get("vf"))})
    return out


def _ports(state: State, exp: Expectations) -> list[dict[str, Any]]:
    """The ports every item judges: those expected (--hca, link layer) and not excluded."""
    return [p for p in _all_ports(state, exp) if not excluded(p)]


def excluded_devices(state: State) -> set[str]:
    """RDMA devices whose every port is excluded (a spare card set down): out of the card-level
    items too."""
    return {d["name"] for d in state["rdma"]["devices"]
            if d["ports"] and all(excluded(p) for p in d["ports"])}


# Rails are peers: the ports of cards of one model, at one port number and link layer, on one
# node, are cabled and configured alike (8 compute rails of an HGX node; port 2 of dual-port
# cards is its own group, often uncabled on every card). Without a hand-set expectation the
# node's own majority is the expectation: one rail DOWN, or trained to a lower rate, while
# more than half of its peers are ACTIVE at full rate, is the bad rail of eight that hides in a
# node's mean. Fewer than PEERS_MIN peers, or no strict majority, judges nothing (two cards
# with one cabled is a site's choice as often as a fault). A port administratively disabled
# is a choice (excluded: not even handed to this); SR-IOV VFs follow their PF and are not peers.
PEERS_MIN = 3


def _peer_groups(ports: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for p in ports:
        if p.get("vf"):
            continue
        groups.setdefault((p.get("model"), p.get("port"), p.get("link_layer")), []).append(p)
    return [g for g in groups.values() if len(g) >= PEERS_MIN]


def _majority(values: list[Any]) -> Any:
    """The value more than half of ``values`` hold, or None."""
    for v in set(values):
        if values.count(v) * 2 > len(values):
            return v
    return None


def peer_outliers(ports: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(ports down while most of their peers are ACTIVE, ACTIVE ports below their peers'
    common rate), each as "mlx5_3/1 DOWN (Polling), 7 of 8 peers ACTIVE"."""
    down, slow = [], []
    for group in _peer_groups(ports):
        states = ["ACTIVE" if p.get("state") == "ACTIVE" else "other" for p in group]
        if _majority(states) != "ACTIVE":
            continue
        n_active = states.count("ACTIVE")
        for p in group:
            if p.get("state") != "ACTIVE":
                phys = f" ({p['phys_state']})" if p.get("phys_state") else ""
                down.append(f"{_label(p)} {p.get('state') or 'unknown'}{phys}, "
                            f"{n_active} of {len(group)} peers ACTIVE")
        active = [p for p in group if p.get("state") == "ACTIVE"]
        norm = _majority([p.get("rate_gbps") for p in active])
        if norm is None:
            continue
        for p in active:
            if p.get("rate_gbps") is not None and p["rate_gbps"] < norm:
                slow.append(f"{_label(p)} at {p['rate_gbps']} Gb/s, its peers at {norm}")
    return down, slow


def _label(p: Mapping[str, Any]) -> str:
    return f"{p['device']}/{p['port']}"


def _missing_cards(state: State) -> Item | None:
    """Expected HCAs (by PCI address) that are not RDMA devices, named by address and slot:
    gone from PCI (a dead or unseated card), or on PCI without an RDMA device (the driver did
    not bind or probe)."""
    gone, unbound = [], []
    for addr, ident in (state.get("identity") or {}).items():
        if ident.get("device"):
            continue
        where = addr + (f" (slot {ident['slot']})" if ident.get("slot") else "")
        if ident.get("on_pci"):
            unbound.append(f"{where} on PCI (driver {ident.get('driver') or 'none'}) but no "
                           "RDMA device")
        else:
            gone.append(f"{where} not on PCI")
    if gone:
        return Item("ports", "fail", f"HCA {'; '.join(gone + unbound)}", remedy=REPLACE)
    if unbound:
        return Item("ports", "fail", f"HCA {'; '.join(unbound)}", remedy=REBOOT)
    return None


def _unprobed(state: State) -> str:
    """' (card on PCI without an RDMA device: 0000:19:00.0 slot 2, driver mlx5_core)', or ''."""
    cards = state.get("unprobed") or []
    if not cards:
        return ""
    named = [c["address"] + (f" slot {c['slot']}" if c.get("slot") else "")
             + f", driver {c.get('driver') or 'none'}" for c in cards]
    return f" (card on PCI without an RDMA device: {'; '.join(named)})"


def _routable_v2(gids: list[Mapping[str, Any]]) -> bool:
    """A RoCE v2 GID of an IPv4 (::ffff:a.b.c.d) or a global IPv6 address: what a connection
    between hosts (NCCL's default GID: RoCE v2, IPv4 first) can route over."""
    kind = collection.rdma_sysfs.gid_kind
    return any(g.get("type") == "RoCE v2" and kind(str(g.get("gid"))) in ("ipv4-mapped", "ipv6")
               for g in gids)


def active_port_faults(active: list[dict[str, Any]]) -> Item | None:
    """What an ACTIVE port can still lack, each named by device/port, or None:
    - its PHY not LinkUp (drivers/infiniband/core/sysfs.c phys_state: LinkErrorRecovery,
      Polling, PortConfigurationTraining ... while the logical state reads ACTIVE: the link is
      retraining under the job; NHC's check_hw_ib and gcm require LinkUp) -> reset-link;
    - InfiniBand with LID 0x0 (no subnet manager assigned one; RoCE ports have no LID and are
      never judged) -> investigate;
    - RoCE with GIDs but none routable RoCE v2 (no IPv4 or global IPv6 address on its netdev
      or its VLANs: only link-local GIDs, so no peer on another subnet can reach it) -> config.
    Unread attributes (no phys_state, lid or GID table) are not judged."""
    not_up = [f"{_label(p)} ACTIVE but its PHY is {p['phys_state']}" for p in active
              if p.get("phys_state") and p["phys_state"] != "LinkUp"]
    if not_up:
        return Item("ports", "fail", "; ".join(not_up) + " (want LinkUp)", remedy=RESET_LINK)
    no_lid = [f"{_label(p)} ACTIVE with LID {p['lid']:#x}" for p in active
              if p.get("link_layer") == "InfiniBand" and p.get("lid") is not None
              and p["lid"] == 0]
    if no_lid:
        return Item("ports", "fail", "; ".join(no_lid) + ": no subnet manager assigned it a LID "
                    "(is the SM running on this fabric?)", remedy=INVESTIGATE)
    no_gid = [f"{_label(p)} ({p.get('netdev') or 'no netdev'}) has no routable RoCE v2 GID: "
              f"no IPv4 or global IPv6 address on {p.get('netdev') or 'its netdev'}"
              for p in unaddressed(active)]
    if no_gid:
        return Item("ports", "fail", "; ".join(no_gid), remedy=CONFIG)
    return None


def unaddressed(active: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """ACTIVE RoCE ports without a routable RoCE v2 GID that are the node's RDMA rails: those
    whose peers (same model and port number) mostly have one, or every RoCE port of a node
    whose RDMA is RoCE only (no ACTIVE IB port) when none has one. Not judged: a port whose GID
    table was not read, one whose netdev is enslaved (a bond's backup member or a bridge port:
    the address is on the master, and the kernel gives its GIDs to the active member only), and
    a lone unaddressed port beside addressed rails of another kind or beside InfiniBand rails
    (a front-end or unused port, not a rail)."""
    roce = [p for p in active if p.get("link_layer") == "Ethernet" and p.get("gids")
            and not p.get("enslaved")]
    bare = [p for p in roce if not _routable_v2(p["gids"])]
    if not bare:
        return []
    roce_only = not any(p.get("link_layer") == "InfiniBand" for p in active)
    out = []
    for p in bare:
        peers = [q for q in roce if q is not p and not q.get("vf")
                 and (q.get("model"), q.get("port")) == (p.get("model"), p.get("port"))]
        peers_addressed = bool(peers) and _majority([_routable_v2(q["gids"]) for q in peers])
        if peers_addressed is True or (roce_only and len(bare) == len(roce)):
            out.append(p)
    return out


def check_ports(state: State, exp: Expectations) -> Item:
    if exp.ports == 0:
        return Item("ports", "n/a", "no RDMA port expected (--expect-ports 0)")
    rdma = state["rdma"]
    card = _missing_cards(state)
    if card is not None:
        return card
    unprobed = _unprobed(state)
    if not rdma["devices"]:
        why = rdma["kernel"].get("reason") or "no RDMA devices in /sys/class/infiniband"
        # A kernel without uverbs is set up wrong; devices gone from a kernel that has it is a
        # card or driver that did not come up.
        remedy = CONFIG if not rdma["kernel"].get("uverbs") else INVESTIGATE
        if unprobed and rdma["kernel"].get("uverbs"):
            remedy = REBOOT
        return Item("ports", "fail", f"no RDMA devices: {why}{unprobed}", remedy=remedy)
    present = {d["name"] for d in rdma["devices"]}
    missing = [h for h in exp.hcas if h not in present]
    if missing:
        return Item("ports", "fail", f"HCA {', '.join(missing)} not present "
                                     f"(found {', '.join(sorted(present))})", remedy=REPLACE)
    every = _all_ports(state, exp)
    if not every:
        return Item("ports", "fail", f"no {exp.link_layer} port on {', '.join(sorted(present))}",
                    remedy=CONFIG)
    ports = _ports(state, exp)
    disabled = [f"{_label(p)} disabled" for p in every if excluded(p)]
    active = [p for p in ports if p.get("state") == "ACTIVE"]
    down = [f"{_label(p)} {p.get('state') or 'unknown'}" for p in ports
            if p.get("state") != "ACTIVE"]
    wanted = exp.ports if exp.ports is not None else 1
    if len(active) < wanted:
        detail = f"{len(active)} of {wanted} RDMA ports ACTIVE"
        shown = [*down, *disabled]
        return Item("ports", "fail", detail + (f": {', '.join(shown)}" if shown else "")
                    + unprobed, remedy=REBOOT if unprobed and not down else RESET_LINK)
    fault = active_port_faults(active)
    if fault is not None:
        return fault
    if exp.rate is not None:
        slow = [f"{_label(p)} at {p['rate_gbps']} Gb/s" if p.get("rate_gbps") is not None
                else f"{_label(p)} rate not readable" for p in active
                if p.get("rate_gbps") is None or p["rate_gbps"] < exp.rate]
        if slow:
            return Item("ports", "fail", f"{', '.join(slow)}, want {exp.rate} Gb/s",
                        remedy=RESET_LINK)
    # The node's own rails are an expectation too (peer_outliers). A port count set by hand
    # (or derived from the fleet) wins for ports that are down: a site may leave one uncabled.
    # A rate is a floor, not a licence: a rail trained below its peers of the same kind halves
    # that rail whatever the floor (a fleet-derived rate is the slowest port of the class).
    peers_down, peers_slow = peer_outliers(ports)
    if exp.ports is None and peers_down:
        return Item("ports", "fail", f"rail down: {'; '.join(peers_down)}", remedy=RESET_LINK)
    if peers_slow:
        return Item("ports", "fail", f"rail below its peers: {'; '.join(peers_slow)}",
                    remedy=RESET_LINK)
    rates = sorted({p["rate_gbps"] for p in active if p.get("rate_gbps") is not None})
    unrated = [_label(p) for p in active if p.get("rate_gbps") is None]
    notes = [*down, *disabled,
             *([f"rate not readable: {', '.join(unrated)}"] if unrated else [])]
    return Item("ports", "pass", f"{len(active)} ACTIVE"
                + (f" at {'/'.join(f'{r:g}' for r in rates)} Gb/s" if rates else "")
                + (f" ({', '.join(notes)})" if notes else ""))


def _state(state: State, module: str) -> str:
    return str((state["modules"].get(module) or {}).get("state", "absent"))


def check_modules(state: State, exp: Expectations) -> Item:
    if not exp.modules:
        return Item("modules", "n/a", "no modules expected")
    # Built in counts as much as loaded: a false "unhealthy" drains a healthy node.
    missing = [m for m in exp.modules if _state(state, m) not in ("loaded", "builtin")]
    if missing:
        support = state["module_support"]
        why = support["reason"] if not support["can_load"] and support["by"] == "kernel" else None
        return Item("modules", "fail", f"kernel module {', '.join(missing)} not in the kernel "
                                       "(neither loaded nor built in)"
                                       + (f": {why}" if why else ""), remedy=CONFIG)
    caps = collection.kernel_caps
    return Item("modules", "pass", caps.summary([state["modules"][m] for m in exp.modules]))


def _datapath(state: State, p: Mapping[str, Any]) -> Mapping[str, Any]:
    return (state["rdma"].get("datapath") or {}).get(_label(p)) or {}


def _mtu_interfaces(state: State, exp: Expectations) -> list[str]:
    """The named interfaces, each port's netdev, and for RoCE the VLANs on top of it and the
    members of its bond: the MTU of every hop of the data path."""
    netdevs = []
    for p in _ports(state, exp):
        # the one rule (rdma_sysfs.mtu_netdevs): probe --write-expectations derives from it too
        netdevs += collection.rdma_sysfs.mtu_netdevs(p, _datapath(state, p))
    return list(dict.fromkeys([*exp.interfaces, *netdevs]))


def check_mtu(state: State, exp: Expectations) -> Item:
    if exp.mtu is None:
        return Item("mtu", "n/a", "no MTU expected (--expect-mtu)")
    names = _mtu_interfaces(state, exp)
    if not names:
        return Item("mtu", "fail", f"MTU {exp.mtu} expected but no interface to check "
                                   "(no RDMA netdev; give --interface)", remedy=CONFIG)
    have = state["mtu"]
    missing = [n for n in names if have.get(n) is None]
    if missing:
        return Item("mtu", "fail", f"interface {', '.join(missing)} does not exist",
                    remedy=CONFIG)
    wrong = [f"{n} MTU {have[n]}" for n in names if have[n] != exp.mtu]
    if wrong:
        return Item("mtu", "fail", f"{', '.join(wrong)}, want {exp.mtu}", remedy=CONFIG)
    return Item("mtu", "pass", f"{', '.join(names)} at {exp.mtu}")


def qos_interfaces(state: State, exp: Expectations) -> list[str]:
    """RoCE ports' netdevs (a bond's members) plus the named interfaces: where PFC matters."""
    roce = []
    for p in _ports(state, exp):
        if p.get("link_layer") != "Ethernet" or not p.get("netdev"):
            continue
        # PFC lives on the physical ports: a bond's members, not the bond.
        roce += list(_datapath(state, p).get("members") or []) or [p["netdev"]]
    return list(dict.fromkeys([*roce, *exp.interfaces]))


def check_qos(state: State, exp: Expectations) -> Item:
    if exp.pfc_priority is None:
        return Item("qos", "n/a", "no PFC priority expected (--expect-pfc)")
    qos = state.get("qos") or {}
    if not qos:
        return Item("qos", "n/a", "no RoCE interface (InfiniBand has no PFC)")
    want = [1 if i == exp.pfc_priority else 0 for i in range(8)]
    bad, not_capable = [], []
    for name, s in qos.items():
        if not s.get("capable"):
            not_capable.append(s.get("reason") or f"{name}: no DCB")
            continue
        if s.get("pfc") != want:
            on = [str(i) for i, v in enumerate(s.get("pfc") or []) if v]
            bad.append(f"{name} PFC on priority {','.join(on) or 'none'}")
        if s.get("trust") != "dscp":
            bad.append(f"{name} trust {s.get('trust')}")
    if bad:
        return Item("qos", "fail", f"{'; '.join(bad)} (want PFC on {exp.pfc_priority} only, "
                                   "trust dscp)", remedy=CONFIG)
    if not_capable and len(not_capable) == len(qos):
        return Item("qos", "n/a", "not applicable: " + "; ".join(not_capable))
    return Item("qos", "pass", f"PFC on priority {exp.pfc_priority}, trust dscp")


def check_memlock(state: State, exp: Expectations) -> Item:
    if state.get("memlock_unknown"):
        return Item("memlock", "n/a", f"not read: {state.get('memlock_source')}")
    have = state["memlock"]
    shown = "unlimited" if have is None else f"{have // 1024} KiB"
    if exp.memlock == "unlimited":
        ok = have is None
    else:
        ok = have is None or have >= int(exp.memlock) * 1024
    source = state.get("memlock_source")
    if ok:
        return Item("memlock", "pass", shown + (f" ({source})" if source else ""))
    want = exp.memlock if exp.memlock == "unlimited" else f">= {exp.memlock} KiB"
    return Item("memlock", "fail", f"memlock {shown}, want {want} (RDMA pins memory)"
                + (f"; read from {source}" if source else ""), remedy=CONFIG)


def check_gpus(state: State, exp: Expectations) -> Item:
    if exp.gpus == 0:
        return Item("gpus", "n/a", "not a GPU node (--expect-gpus 0)")
    g = state["gpus"]
    count = int(g.get("count") or 0)
    # A GPU on PCI that the driver does not list failed to probe: named by PCI address.
    unprobed = [f"{u['address']} (driver {u.get('driver') or 'none'})"
                for u in g.get("unprobed") or []]
    named = f": on PCI but not the driver's: {', '.join(unprobed)}" if unprobed else ""
    if count == 0 and not unprobed and exp.gpus is None and g.get("on_pci") == 0:
        # No expectation and no NVIDIA GPU on PCI at all: not a GPU node, nothing to drain.
        return Item("gpus", "n/a", "no NVIDIA GPU on PCI: not a GPU node")
    if count == 0:
        return Item("gpus", "fail", "no NVIDIA GPU visible (no /proc/driver/nvidia/gpus, "
                                    "no /dev/nvidiaN: driver not loaded or no GPU)"
                    + (f"; {len(unprobed)} on PCI: {', '.join(unprobed)}" if unprobed else ""),
                    remedy=CONFIG)
    if exp.gpus is not None and count != exp.gpus:
        # A GPU gone from a loaded driver has fallen off the bus: a reboot brings it back or
        # shows it is dead.
        return Item("gpus", "fail", f"{count} of {exp.gpus} GPUs visible{named}", remedy=REBOOT)
    if unprobed and exp.gpus is None:
        return Item("gpus", "fail", f"{count} of {count + len(unprobed)} GPUs visible{named}",
                    remedy=REBOOT)
    nv = state.get("nvidia_versions") or {}
    user = nv.get("user") or {}
    if nv.get("kernel") and user.get("version") and nv["kernel"] != user["version"]:
        return Item("gpus", "fail", f"NVIDIA driver mismatch: kernel module {nv['kernel']}, "
                                    f"user space {user['version']} (upgraded under the loaded "
                                    "module; NVML and CUDA refuse it): reboot; "
                                    f"{user['path']}", remedy=REBOOT)
    models = sorted(set(g.get("models") or []))
    elsewhere = [f"{e['address']} on {e['driver']}" for e in g.get("elsewhere") or []]
    return Item("gpus", "pass", f"{count} visible" + (f" ({', '.join(models)})" if models else "")
                + (f"; not ours: {', '.join(elsewhere)}" if elsewhere else ""))


def check_gpudirect(state: State, exp: Expectations) -> Item:
    """GPUDirect RDMA by capability (rdma_sysfs.gpudirect): nvidia_peermem loaded, or DMA-BUF
    (open NVIDIA module, Linux >= 5.12, rdma-core with ibv_reg_dmabuf_mr). Fails only when
    neither path is there; says which one it found and why."""
    if exp.gpus == 0 or not exp.peermem:
        return Item("gpudirect", "n/a", "GPUDirect RDMA not expected")
    gdr = state.get("gpudirect") or {}
    if not int(state["gpus"].get("count") or 0):
        return Item("gpudirect", "n/a", "no GPU visible (see gpus)")
    if gdr.get("path") is None:
        return Item("gpudirect", "fail", str(gdr.get("why") or "GPUDirect RDMA not readable"),
                    remedy=CONFIG)
    return Item("gpudirect", "pass", str(gdr["why"]))


def check_links(state: State, exp: Expectations) -> Item:
    """Port error counters and flaps over time (rdmaprov.check.history, the rule in
    link_counters): fails while a port is in its sticky window; old totals never fail."""
    links = state.get("links")
    if not links:
        return Item("links", "n/a", "link history not judged")
    wanted = {f"{p['device']}/{p['port']}" for p in _ports(state, exp)}
    if not wanted:
        return Item("links", "n/a", "no RDMA port")
    findings = [f for f in links["findings"] if f"{f['device']}/{f['port']}" in wanted]
    fails = [f for f in findings if f["severity"] == "fail"]
    warns = [f["text"] for f in findings if f["severity"] != "fail"]
    # Ports without a readable error counter (link_counters.unjudged): a flap still shows as a
    # state change, but "no error growth" is not known there, so they are never counted as passed.
    unjudged = sorted(wanted & set(links.get("unjudged") or []))
    unread = (f"error counters not readable on {', '.join(unjudged)} (absent, unreadable or "
              "'N/A (no PMA)'): only port state judged")
    # Ports with only warning classes readable (RoCE hw_counters without the PMA's): judged,
    # but a bad cable there could not show.
    warn_only = sorted(wanted & set(links.get("no_failing") or []) - set(unjudged))
    others = [*(f"warn: {w}" for w in warns),
              *(f"saturated, cannot grow: {s}" for s in links.get("saturated") or []),
              *([f"no PMA error counter (symbol_error, link_downed ...) readable on "
                 f"{', '.join(warn_only)}: only RoCE retransmissions judged there"]
                if warn_only else []),
              *([links["problem"]] if links.get("problem") else [])]
    notes = [*others, *([unread] if unjudged else [])]
    tail = f" ({'; '.join(notes)})" if notes else ""
    if fails:
        return Item("links", "fail", "; ".join(f["text"] for f in fails) + tail,
                    remedy=fails[0]["remedy"])
    if links.get("first") or not links.get("file"):
        why = ("no state file (link_state ''): counters not judged over time"
               if not links.get("file") else f"first sample in {links['file']}: counters "
                                              "judged from the next check on")
        return Item("links", "n/a", why + tail)
    if len(unjudged) == len(wanted):
        return Item("links", "n/a", unread + (f" ({'; '.join(others)})" if others else ""))
    return Item("links", "pass", f"no flap or error growth on {len(wanted) - len(unjudged)} "
                                 f"port(s) (thresholds per counter class){tail}")


def check_kernel(state: State, exp: Expectations) -> Item:
    """The kernel's messages since the last check, by explain's rules (rdmaprov.check.kernel):
    reported with their remedy, never failed on (the parts' own items give the verdict)."""
    if not exp.kernel_log:
        return Item("kernel", "n/a", "kernel log not read (--kernel-log)")
    k = state.get("kernel") or {}
    if k.get("problem") and not k.get("new"):
        return Item("kernel", "n/a", f"kernel log not readable: {k['problem']}")
    found = k.get("findings") or []
    if not found:
        return Item("kernel", "pass", f"no RDMA, PCIe or GPU error in {k.get('new', 0)} kernel "
                                      "message(s) since the last check")
    shown = "; ".join(f"{f['cause']} [{f['remedy']}]" + (f" x{f['count']}" if f["count"] > 1
                                                          else "") for f in found[:3])
    more = f" (+{len(found) - 3} more)" if len(found) > 3 else ""
    return Item("kernel", "pass", f"reported, not judged: {shown}{more}")


def _where(name: str | None, link: Mapping[str, Any]) -> str:
    """'mlx5_1 (0000:2a:00.0, slot 3)' / 'GPU 0000:17:00.0 (slot 5)': a part named by identity."""
    slot = f"slot {link['slot']}" if link.get("slot") else None
    if name:
        return f"{name} ({', '.join(x for x in (link['address'], slot) if x)})"
    return f"GPU {link['address']}" + (f" ({slot})" if slot else "")


def check_pcie(state: State, exp: Expectations) -> Item:
    """Each HCA's and GPU's PCIe link against what it and its slot can do (width strictly,
    speed only where the device keeps it when idle: rdma_sysfs.pcie_trained_down), GPU <-> NIC
    affinity reported, ACS peer-to-peer redirect between a GPU and its NIC a failure when
    GPUDirect is expected."""
    topo = state.get("pcie")
    if not topo:
        return Item("pcie", "n/a", "PCIe not read")
    sysfs = collection.rdma_sysfs
    spare = excluded_devices(state)
    hcas = {n: h for n, h in topo["hcas"].items()
            if (not exp.hcas or n in exp.hcas) and n not in spare}
    gpus = topo["gpus"] if exp.gpus != 0 else {}
    down, unread = [], []
    for name, link in [*hcas.items(), *((None, g) for g in gpus.values())]:
        if link is None:
            unread.append(f"{name} (no PCI device)")
            continue
        if link.get("current_width") is None:
            unread.append(_where(name, link))
            continue
        why = sysfs.pcie_trained_down(link, idle_downclock=name is None)
        if why:
            down.append(f"{_where(name, link)} PCIe {why}")
    # A switch uplink (width only: the speed of a link shared with idle GPUs may drop), named
    # with the parts below it; one above spare cards alone is not judged.
    for addr, up in sorted((topo.get("uplinks") or {}).items()):
        below = [b for b in up["below"] if b in hcas or b in gpus]
        why = sysfs.pcie_trained_down(up["link"], idle_downclock=True) if below else None
        if why:
            above = ", ".join(b if b in hcas else f"GPU {b}" for b in below)
            down.append(f"PCIe switch uplink {addr} {why} (above {above})")
    if down:
        return Item("pcie", "fail", f"trained down: {'; '.join(down)}", remedy=REPLACE)
    if exp.gpu_nic:
        near = {a["gpu"]: a["nic"] for a in topo["affinity"]}
        addr_of = {n: (h or {}).get("address") for n, h in topo["hcas"].items()}
        wrong = []
        for gpu, want in sorted(exp.gpu_nic.items()):
            got = near.get(gpu)
            if got is None:
                wrong.append(f"GPU {gpu}: no NIC found near it (want {want})")
            elif want not in (got, addr_of.get(got)):
                wrong.append(f"GPU {gpu} nearest NIC {got} ({addr_of.get(got)}), want {want}")
        if wrong:
            return Item("pcie", "fail", "; ".join(wrong), remedy=INVESTIGATE)
    gdr = exp.gpus != 0 and exp.peermem
    redirect = [f"{b} {a['why']}" for b, a in topo["acs"].items() if a["enabled"]]
    if gdr and redirect:
        return Item("pcie", "fail", "between GPU and NIC: " + "; ".join(redirect)
                    + " (GPUDirect traffic goes up to the root complex: disable ACS, e.g. "
                      "setpci or the BIOS)", remedy=CONFIG)
    if not hcas and not gpus:
        return Item("pcie", "n/a", "no HCA or GPU on PCI")
    parts = []
    judged = [link for link in [*hcas.values(), *gpus.values()]
              if link and link.get("current_width") is not None]
    # An HCA's speed is judged only where both sides read: "Unknown" (pci_speed_string) now, or
    # neither its nor its slot's maximum, leaves it unknown, never "at full speed".
    unsped = [_where(n, h) for n, h in hcas.items() if h and h.get("current_width") is not None
              and (h.get("current_speed") is None
                   or (h.get("max_speed") is None and h.get("upstream_max_speed") is None))]
    if judged:
        sped = len([h for h in hcas.values() if h and h.get("current_width") is not None])
        speed = (", HCAs at full speed" if sped and not unsped else
                 ", the other HCAs at full speed" if sped > len(unsped) else "")
        parts.append(f"{len(judged)} device(s) at full width{speed}")
    if unsped:
        parts.append(f"HCA link speed not readable: {', '.join(unsped)}")
    gpu_speeds = sorted({f"{g['current_speed']:g}/{g['max_speed']:g} GT/s x{g['current_width']}"
                         for g in gpus.values() if g.get("current_speed") and g.get("max_speed")
                         and g.get("current_width")})
    if gpu_speeds:
        parts.append(f"GPU link {', '.join(gpu_speeds)} (speed drops when idle: not judged)")
    for a in topo["affinity"]:
        hops = "via the root complex" if a["distance"] is None else f"{a['distance']} hops"
        numa = {True: ", same NUMA", False: ", other NUMA node", None: ""}[a["same_numa"]]
        parts.append(f"GPU {a['gpu']} -> {a['nic']} ({hops}{numa})")
    unreadable_acs = sorted({a["why"] for a in topo["acs"].values() if not a["readable"]})
    if gdr and unreadable_acs:
        parts.append(f"ACS: {'; '.join(unreadable_acs)}")
    if unread:
        parts.append(f"link not readable: {', '.join(unread)}")
    if not judged:  # nothing read is nothing known: never a pass
        return Item("pcie", "n/a", "; ".join(parts))
    return Item("pcie", "pass", "; ".join(parts))


def _aer_kinds(counts: Mapping[str, Any]) -> str:
    kinds = counts.get("kinds") or {}
    return f" ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))})" if kinds else ""


def check_aer(state: State, exp: Expectations) -> Item:
    """PCIe AER errors on each HCA's and GPU's own function (rdma_sysfs.aer_counts), named by
    device and PCI address:
    - a fatal uncorrectable error this boot fails (reboot): the counts start at enumeration, and
      a fatal error makes the AER driver reset the link under the device (its DMA in flight
      lost; mlx5 or the GPU may not have recovered); a reboot clears the count, one that comes
      back is the card or its slot. On a first read too: a fatal error is never routine;
    - non-fatal growth since the last check fails (investigate) until it stops for the link
      history's stable time (history.aer_advance); a non-zero count at the first read is since
      boot: reported, not failed (months of uptime carry old ones);
    - correctable errors are retried by the link itself: growth is reported, never failed."""
    topo = state.get("pcie") or {}
    aer = state.get("aer") or {}
    counts = aer.get("counts") or {}
    spare = excluded_devices(state)
    parts: dict[str, Mapping[str, Any]] = {}
    for name, link in (topo.get("hcas") or {}).items():
        if link and (not exp.hcas or name in exp.hcas) and name not in spare:
            parts[link["address"]] = {"name": name, "link": link}
    if exp.gpus != 0:
        for addr, link in (topo.get("gpus") or {}).items():
            parts.setdefault(addr, {"name": None, "link": link})
    judged = {a: c for a, c in counts.items() if a in parts}
    if not judged:
        return Item("aer", "n/a", "no AER statistics on the HCAs' and GPUs' PCI functions "
                                  "(no AER capability, a kernel before 4.19, or a VM)")
    verdict = (aer.get("history") or {}).get("devices") or {}

    def where(addr: str) -> str:
        return _where(parts[addr]["name"], parts[addr]["link"])

    fatal = [f"{where(a)} {c['fatal']['total']} fatal{_aer_kinds(c['fatal'])}"
             for a, c in sorted(judged.items()) if int((c.get("fatal") or {}).get("total", 0))]
    growing = [f"{where(a)} {verdict[a]['fail']}" for a in sorted(judged)
               if (verdict.get(a) or {}).get("fail")]
    notes = [f"warn: {where(a)} {verdict[a]['warn']}" for a in sorted(judged)
             if (verdict.get(a) or {}).get("warn")]
    old = [f"{where(a)} {c['nonfatal']['total']} non-fatal since boot"
           f"{_aer_kinds(c['nonfatal'])}" for a, c in sorted(judged.items())
           if int((c.get("nonfatal") or {}).get("total", 0))
           and not (verdict.get(a) or {}).get("fail")]
    problem = (aer.get("history") or {}).get("problem")
    tail_parts = [*notes, *([f"reported, not judged: {'; '.join(old)}"] if old else []),
                  *([problem] if problem else [])]
    tail = f" ({'; '.join(tail_parts)})" if tail_parts else ""
    if fatal:
        return Item("aer", "fail", "PCIe AER fatal error this boot: " + "; ".join(fatal)
                    + " (the link was reset under it: reboot; replace the card if it comes "
                      "back)", remedy=REBOOT)
    if growing:
        return Item("aer", "fail", "PCIe AER errors growing: " + "; ".join(growing) + tail,
                    remedy=INVESTIGATE)
    first = (aer.get("history") or {}).get("first", True)
    since = "no fatal error" + (", non-fatal growth judged from the next check on"
                                if first else ", no non-fatal growth")
    return Item("aer", "pass", f"{since} on {len(judged)} device(s){tail}")


def check_firmware(state: State, exp: Expectations) -> Item:
    """Each card's running firmware (fw_ver) against the node's other cards of the same board
    (board_id, the PSID: one product, one firmware image) and against check.yml's ``firmware:
    {board_id: version}`` when set. Cards of one board on different firmware fail (firmware):
    a mixed node is a known cause of hangs and of one rail behaving unlike the rest, and NHC
    sites fail on it. VFs (their PF's firmware) and excluded cards are left out."""
    spare = excluded_devices(state)
    cards = [d for d in state["rdma"]["devices"]
             if (not exp.hcas or d["name"] in exp.hcas) and d["name"] not in spare
             and not d.get("vf") and d.get("fw_ver")]
    if not cards:
        return Item("firmware", "n/a", "no card's fw_ver readable")
    boards: dict[str, list[Mapping[str, Any]]] = {}
    for d in cards:
        boards.setdefault(str(d.get("board_id") or "unknown board"), []).append(d)
    wrong, mixed, fine = [], [], []
    for board, group in sorted(boards.items()):
        want = exp.firmware.get(board)
        if want is not None:
            off = [f"{d['name']} fw {d['fw_ver']}" for d in group if d["fw_ver"] != want]
            if off:
                wrong.append(f"{', '.join(off)}, want {want} (board {board})")
                continue
        versions = [d["fw_ver"] for d in group]
        if len(set(versions)) > 1 and board != "unknown board":
            norm = _majority(versions)
            if norm is not None:
                odd = [f"{d['name']} fw {d['fw_ver']}" for d in group if d["fw_ver"] != norm]
                mixed.append(f"{', '.join(odd)}, its {versions.count(norm)} peers of board "
                             f"{board} at {norm}")
            else:
                by_ver: dict[str, list[str]] = {}
                for d in group:
                    by_ver.setdefault(d["fw_ver"], []).append(d["name"])
                mixed.append(f"board {board} mixed: " + "; ".join(
                    f"{', '.join(n)} at {v}" for v, n in sorted(by_ver.items())))
            continue
        fine.append(f"{len(group)} of board {board} at {'/'.join(sorted(set(versions)))}")
    if wrong or mixed:
        return Item("firmware", "fail", "firmware differs: " + "; ".join([*wrong, *mixed]),
                    remedy=FIRMWARE)
    return Item("firmware", "pass", "; ".join(fine))


def check_verbs(state: State, exp: Expectations) -> Item:
    """Each HCA's verbs device: /sys/class/infiniband_verbs/uverbsN names it, and
    /dev/infiniband/uverbsN exists (a job opens the HCA through it)."""
    spare = excluded_devices(state)
    verbs = {n: v for n, v in (state.get("verbs") or {}).items()
             if (not exp.hcas or n in exp.hcas) and n not in spare}
    if exp.ports == 0 or not state["rdma"]["devices"]:
        return Item("verbs", "n/a", "no RDMA device")
    if not verbs:
        return Item("verbs", "n/a", "no /dev/infiniband here (a container without the host's "
                                    "devices?): not judged")
    if not any(v["uverbs"] for v in verbs.values()):
        return Item("verbs", "n/a", "no uverbsN/ibdev readable in /sys/class/infiniband_verbs")
    unbound = [n for n, v in verbs.items() if not v["uverbs"]]
    no_node = [f"/dev/infiniband/{v['uverbs']} ({n})" for n, v in verbs.items()
               if v["uverbs"] and not v["node"]]
    if unbound or no_node:
        parts = ([f"{', '.join(unbound)} without a uverbs device"] if unbound else []) + \
                ([f"{', '.join(no_node)} missing"] if no_node else [])
        return Item("verbs", "fail", "; ".join(parts), remedy=CONFIG)
    return Item("verbs", "pass", ", ".join(f"{n}: {v['uverbs']}" for n, v in sorted(verbs.items())))


CHECKS: tuple[Callable[[State, Expectations], Item], ...] = (
    check_ports, check_modules, check_mtu, check_qos, check_memlock, check_gpus, check_gpudirect,
    check_links, check_pcie, check_aer, check_firmware, check_verbs, check_kernel,
)


def judge(state: State, exp: Expectations) -> list[Item]:
    return [check(state, exp) for check in CHECKS]


def reason(items: list[Item]) -> str | None:
    """One line for `scontrol update state=drain reason=...`, or None when healthy."""
    failed = [i for i in items if i.status == "fail"]
    if not failed:
        return None
    # The remedy class first: automation reads it without parsing prose, and a cut keeps it.
    text = (f"[{failed[0].remedy}] " if failed[0].remedy else "") + failed[0].detail
    if len(failed) > 1:
        text += f" (+{len(failed) - 1} more: {', '.join(i.name for i in failed[1:])})"
    text = " ".join(text.replace('"', "'").split())
    return text if len(text) <= REASON_MAX else text[:REASON_MAX - 3] + "..."
