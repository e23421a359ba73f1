# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""Pure logic of the roce_qos role: ToS arithmetic, parsers for `mlnx_qos -i` and iproute2
`dcb -j` output, the drift between what a NIC has and what the role wants, and the shell
commands that apply it (written into the boot-time script the role installs).

Unit-tested in tests/unit/test_qos_logic.py against the tools' real output formats.
"""

from __future__ import annotations

import json
import re
import shlex

from ansible_collections.rdmaprov.cluster.plugins.module_utils import ranges, state_drift
from ansible_collections.rdmaprov.cluster.plugins.module_utils.unit_words import systemd_word

# ECN field (the two low bits of the IPv4 ToS / IPv6 traffic class byte), RFC 3168.
ECN_CODEPOINTS = {"not-ect": 0, "ect1": 1, "ect0": 2, "ce": 3}

# iproute2 prints DSCP names unless -N; these are the ones it knows (RFC 2474/2597/3246).
DSCP_NAMES = {"CS%d" % i: i * 8 for i in range(8)}
DSCP_NAMES.update({"AF%d%d" % (c, d): c * 8 + d * 2 for c in range(1, 5) for d in range(1, 4)})
DSCP_NAMES.update({"EF": 46, "VA": 44, "LE": 1})

NOT_SUPPORTED = "Operation not supported"


def tos_from_dscp(dscp, ecn="ect0"):
    """RoCE ToS byte: DSCP in the upper six bits, the ECN codepoint in the lower two.

    DSCP 26 << 2 = 104; with ECT(0) (binary 10 = 2) that is 106, the value NCCL_IB_TC and
    rdma_cm's default_roce_tos take. ECT marks the packet as ECN-capable, so a congested switch
    marks it (CE) instead of dropping it and DCQCN can slow the sender.
    """
    dscp = int(dscp)
    why = ranges.problem("dscp", dscp)
    if why:
        raise ValueError(why)
    if ecn not in ECN_CODEPOINTS:
        raise ValueError(f"ECN codepoint {ecn!r}: one of {', '.join(ECN_CODEPOINTS)}")
    return (dscp << 2) | ECN_CODEPOINTS[ecn]


def pfc_vector(priority):
    """Eight 0/1 flags with only `priority` lossless."""
    priority = int(priority)
    why = ranges.problem("pfc_priority", priority)
    if why:
        raise ValueError(why)
    return [1 if i == priority else 0 for i in range(8)]


# ----- parsers ---------------------------------------------------------------------------------

def parse_mlnx_qos(text):
    """`mlnx_qos -i IF` output → {trust, pfc: [8 ints], dscp2prio: {dscp: prio}, prio_tc: {prio: tc}}."""
    out = {"trust": None, "pfc": None, "dscp2prio": {}, "prio_tc": {}}
    lines = text.splitlines()
    tc = None
    for i, raw in enumerate(lines):
        line = raw.strip()
        m = re.match(r"Priority trust state:\s*(\w+)", line, re.I)
        if m:
            out["trust"] = m.group(1).lower()
            continue
        m = re.match(r"prio:\s*(\d+)\s+dscp:\s*([\d,\s]+)", line)
        if m:
            for d in filter(None, (x.strip() for x in m.group(2).split(","))):
                out["dscp2prio"][int(d)] = int(m.group(1))
            continue
        if re.match(r"enabled\s+[01](\s+[01]){7}\s*$", line) and i > 0 \
                and lines[i - 1].strip().startswith("priority"):
            out["pfc"] = [int(x) for x in line.split()[1:9]]
            continue
        m = re.match(r"tc:\s*(\d+)", line)
        if m:
            tc = int(m.group(1))
            continue
        m = re.match(r"priority:\s*(\d+)\s*$", line)
        if m and tc is not None:
            out["prio_tc"][int(m.group(1))] = tc
    return out


def parse_dcb_pfc(text):
    """`dcb -j pfc show dev IF` → {pfc_cap, pfc: [8 ints]}."""
    data = json.loads(text) if isinstance(text, str) else text
    prio = data.get("prio_pfc") or []
    return {"pfc_cap": data.get("pfc_cap"), "pfc": [1 if v in (True, "on", 1) else 0 for v in prio]}


def _dscp_key(key):
    if isinstance(key, int):
        return key
    key = str(key).strip()
    if key.isdigit():
        return int(key)
    return DSCP_NAMES[key.upper()]


def parse_dcb_app(text):
    """`dcb -j -N app show dev IF` → {dscp2prio: {dscp: prio}} (DSCP names accepted too)."""
    data = json.loads(text) if isinstance(text, str) else text
    pairs = data.get("dscp_prio") or []
    return {"dscp2prio": {_dscp_key(k): int(p) for k, p in pairs}}


def not_capable_reason(iface, tool, rc, stderr):
    """A one-line reason when a DCB tool says the interface has no DCB, else None."""
    if rc == 0:
        return None
    err = (stderr or "").strip().splitlines()
    last = err[-1] if err else f"exit {rc}"
    if NOT_SUPPORTED.lower() in (stderr or "").lower():
        return (f"{iface}: {tool} answers '{last}': the driver has no DCB (IEEE 802.1Qaz) support "
                "(veth, bridges, most virtual NICs)")
    return None


# ----- state and drift -------------------------------------------------------------------------

def qos_state(probe):
    """One interface's probe (from roce_qos_probe) → normalised state with capability."""
    iface = probe["name"]
    state = {"name": iface, "backend": None, "capable": False, "reason": None, "trust": None,
             "pfc": None, "dscp2prio": {}, "ecn_np": probe.get("ecn_np") or {},
             "ecn_rp": probe.get("ecn_rp") or {}, "ibdev": probe.get("ibdev"),
             "roce_tos": probe.get("roce_tos"), "roce_mode": probe.get("roce_mode")}
    if not probe.get("exists", True):
        state["reason"] = f"{iface}: no such interface"
        return state
    mq = probe.get("mlnx_qos")
    if mq and mq.get("rc") == 0:
        parsed = parse_mlnx_qos(mq.get("stdout", ""))
        state.update(backend="mlnx_qos", capable=True, trust=parsed["trust"], pfc=parsed["pfc"],
                     dscp2prio=parsed["dscp2prio"])
        return state
    pfc = probe.get("dcb_pfc")
    if pfc is None:
        state["reason"] = f"{iface}: neither mlnx_qos nor iproute2 dcb is installed"
        return state
    if pfc.get("rc") != 0:
        state["backend"] = "dcb"
        state["reason"] = (not_capable_reason(iface, "dcb pfc show", pfc.get("rc"), pfc.get("stderr"))
                           or f"{iface}: dcb pfc show failed: {(pfc.get('stderr') or '').strip()}")
        return state
    app = probe.get("dcb_app") or {}
    parsed_app = parse_dcb_app(app.get("stdout") or "{}") if app.get("rc") == 0 else {"dscp2prio": {}}
    state.update(backend="dcb", capable=True, pfc=parse_dcb_pfc(pfc.get("stdout") or "{}")["pfc"],
                 dscp2prio=parsed_app["dscp2prio"],
                 # The kernel's DCB API has no trust knob before iproute2's apptrust; a DSCP
                 # app entry is what switches mlx5 to DSCP trust.
                 trust="dscp" if parsed_app["dscp2prio"] else "pcp")
    return state


# The settings the plan reads: the roce_qos_* variables without the prefix (the probe's action
# plugin fills them from the role's variables).
SETTINGS = ("pfc_priority", "dscp", "ecn", "ecn_codepoint", "cnp_dscp", "cnp_priority", "roce_v2",
            "backend", "interfaces", "rdma_cm_defaults", "script", "unit_name", "host", "managed",
            "check_mode", "rdma")


def desired(settings):
    """The role's variables → what every capable interface should show."""
    prio = int(settings["pfc_priority"])
    want = {"trust": "dscp", "pfc": pfc_vector(prio), "dscp2prio": {int(settings["dscp"]): prio},
            "ecn_priorities": [prio] if settings.get("ecn", True) else [],
            "tos": tos_from_dscp(settings["dscp"], settings.get("ecn_codepoint", "ect0")),
            "roce_mode": "RoCE v2" if settings.get("roce_v2", True) else None}
    if settings.get("cnp_dscp") is not None and settings.get("cnp_priority") is not None:
        want["dscp2prio"][int(settings["cnp_dscp"])] = int(settings["cnp_priority"])
    return want


def drift(state, want):
    """What differs on one interface, as short strings; [] when in line or not capable."""
    if not state.get("capable"):
        return []
    diffs = []
    if state.get("trust") != want["trust"]:
        diffs.append(f"trust {state.get('trust')} -> {want['trust']}")
    if state.get("pfc") != want["pfc"]:
        diffs.append(f"pfc {state.get('pfc')} -> {want['pfc']}")
    for dscp, prio in want["dscp2prio"].items():
        have = state.get("dscp2prio", {}).get(dscp, state.get("dscp2prio", {}).get(str(dscp)))
        if have != prio:
            diffs.append(f"dscp {dscp} -> prio {have} -> {prio}")
    for kind in ("ecn_np", "ecn_rp"):
        have = state.get(kind) or {}
        if not have:
            continue  # no ECN sysfs: reported, not drift
        for p in want["ecn_priorities"]:
            if str(have.get(str(p), have.get(p))) != "1":
                diffs.append(f"{kind} priority {p} -> enabled")
    if state.get("ibdev") and state.get("roce_tos") is not None \
            and int(state["roce_tos"]) != want["tos"]:
        diffs.append(f"default_roce_tos {state['roce_tos']} -> {want['tos']}")
    if state.get("ibdev") and want.get("roce_mode") and state.get("roce_mode") is not None \
            and state["roce_mode"] != want["roce_mode"]:
        diffs.append(f"default_roce_mode {state['roce_mode']} -> {want['roce_mode']}")
    return diffs


# ----- command builders ------------------------------------------------------------------------

def mlnx_qos_commands(iface, want):
    """argv lists that bring one interface to `want` with mlnx_qos."""
    cmds = [["mlnx_qos", "-i", iface, "--trust", "dscp"],
            ["mlnx_qos", "-i", iface, "--pfc", ",".join(str(x) for x in want["pfc"])]]
    for dscp, prio in sorted(want["dscp2prio"].items()):
        cmds.append(["mlnx_qos", "-i", iface, "--dscp2prio", f"set,{dscp},{prio}"])
    return cmds


def dcb_commands(iface, want):
    """argv lists that bring one interface to `want` with iproute2 dcb."""
    pfc = " ".join(f"{i}:{'on' if v else 'off'}" for i, v in enumerate(want["pfc"])).split()
    cmds = [["dcb", "pfc", "set", "dev", iface, "prio-pfc", *pfc]]
    mapping = [f"{d}:{p}" for d, p in sorted(want["dscp2prio"].items())]
    if mapping:
        # `replace` drops other priorities for these DSCP keys and leaves unrelated entries.
        cmds.append(["dcb", "app", "replace", "dev", iface, "dscp-prio", *mapping])
    return cmds


def sysfs_writes(iface, ibdev, port, want, cnp=None):
    """(path, value) pairs for ECN, CNP marking and rdma_cm defaults; the script skips absent paths."""
    writes = []
    for p in want["ecn_priorities"]:
        writes.append((f"/sys/class/net/{iface}/ecn/roce_np/enable/{p}", "1"))
        writes.append((f"/sys/class/net/{iface}/ecn/roce_rp/enable/{p}", "1"))
    if cnp:
        writes.append((f"/sys/class/net/{iface}/ecn/roce_np/cnp_dscp", str(cnp["dscp"])))
        writes.append((f"/sys/class/net/{iface}/ecn/roce_np/cnp_802p_prio", str(cnp["priority"])))
    if ibdev:
        base = f"/sys/kernel/config/rdma_cm/{ibdev}/ports/{port}"
        writes.append((f"{base}/default_roce_tos", str(want["tos"])))
        if want.get("roce_mode"):
            writes.append((f"{base}/default_roce_mode", want["roce_mode"]))
        # MLNX_OFED only: the traffic class of QPs that do not set their own.
        writes.append((f"/sys/class/infiniband/{ibdev}/tc/{port}/traffic_class", str(want["tos"])))
    return writes


def shell_line(argv):
    return " ".join(shlex.quote(str(a)) for a in argv)


# ----- plan and report (the role's decision per interface) ------------------------------------

def plan(probe, settings):
    """Probe of one interface + role settings → {state, drift, commands, writes}."""
    want = desired(settings)
    backend = settings.get("backend", "auto")
    if backend == "dcb":
        probe = {**probe, "mlnx_qos": None}
    state = qos_state(probe)
    if backend == "mlnx_qos" and state["backend"] != "mlnx_qos" and state["capable"]:
        state.update(capable=False, reason=f"{state['name']}: roce_qos_backend is mlnx_qos, "
                     "but mlnx_qos is not installed or cannot read this interface")
    cmds = []
    if state["backend"] == "mlnx_qos":
        cmds = mlnx_qos_commands(state["name"], want)
    elif state["backend"] == "dcb":
        cmds = dcb_commands(state["name"], want)
    cnp = None
    if settings.get("cnp_dscp") is not None and settings.get("cnp_priority") is not None:
        cnp = {"dscp": settings["cnp_dscp"], "priority": settings["cnp_priority"]}
    writes = sysfs_writes(state["name"], state.get("ibdev"), probe.get("ibport") or 1, want, cnp)
    return {"name": state["name"], "state": state, "drift": drift(state, want),
            "backend": state["backend"], "capable": state["capable"], "reason": state["reason"],
            "tos": want["tos"],
            "commands": [shell_line(c) for c in cmds],
            "writes": [{"path": p, "value": v} for p, v in writes]}


def report(iface_plan):
    """A plan reduced to what the role reports per interface."""
    st = iface_plan["state"]
    return {"name": iface_plan["name"], "capable": iface_plan["capable"],
            "reason": iface_plan["reason"], "backend": iface_plan["backend"],
            "drift": iface_plan["drift"], "trust": st.get("trust"), "pfc": st.get("pfc"),
            "tos": iface_plan["tos"]}


def not_capable_lines(plans):
    """The report's lines: the interfaces that cannot do DCB, and why."""
    return ["not capable: " + p["reason"] for p in plans if not p["capable"]]


# ----- the host's plan: interfaces, the boot-time script and unit, drift, verification ---------

def pick_interfaces(listed, rdma):
    """roce_qos_interfaces, else the netdevs of the Ethernet (RoCE) ports rdma_facts found
    (ansible_facts.rdma)."""
    if listed:
        return [str(i) for i in listed]
    return [port["netdev"] for dev in (rdma or {}).get("devices") or []
            for port in dev.get("ports") or []
            if port.get("link_layer") == "Ethernet" and port.get("netdev")]


def script(plans, settings, managed=state_drift.MANAGED):
    """The boot-time script: every interface's commands and sysfs writes, names and paths quoted."""
    prio, dscp = int(settings["pfc_priority"]), int(settings["dscp"])
    tos = tos_from_dscp(dscp, settings.get("ecn_codepoint", "ect0"))
    cm = bool(settings.get("rdma_cm_defaults", True))
    out = [
        "#!/bin/sh",
        state_drift.header(managed, " (roce_qos)"),
        f"# Lossless RoCEv2 host settings: DSCP trust, PFC on priority {prio}, DSCP {dscp} ->",
        f"# priority {prio}, ECN (DCQCN) on that priority, and rdma_cm's default ToS {tos}",
        f"# (DSCP {dscp} << 2 = {dscp * 4}, plus the ECN codepoint). Run at boot by its unit.",
        "# An interface without DCB support is logged as not capable and skipped; that is not an"
        " error.",
        "# Names and paths (inventory and host text) are quoted into variables; the script uses"
        " those.",
        "rc=0",
        'log() { echo "rdmaprov-roce-qos: $*"; }',
        'try() { "$@" || { log "FAILED: $*"; rc=1; }; }',
        'put() { if [ -w "$1" ]; then echo "$2" > "$1" || { log "FAILED: $2 > $1"; rc=1; };'
        ' else log "skipped (absent): $1"; fi; }',
    ]
    if cm:
        out += ["# rdma_cm exposes its per-device defaults only once the module is loaded.",
                "[ -d /sys/kernel/config/rdma_cm ] || modprobe rdma_cm 2>/dev/null || true"]
    for pl in plans:
        out += ["", f"# --- {pl['backend'] or 'no DCB tool'} ---",
                f"iface={shlex.quote(str(pl['name']))}",
                'if [ ! -e "/sys/class/net/$iface" ]; then',
                '  log "$iface: no such interface"; rc=1']
        if pl["backend"] == "mlnx_qos":
            out += ['elif ! err=$(mlnx_qos -i "$iface" 2>&1 >/dev/null); then',
                    '  log "$iface: not capable: mlnx_qos: $err"']
        elif pl["backend"] == "dcb":
            out += ['elif ! err=$(dcb pfc show dev "$iface" 2>&1 >/dev/null); then',
                    '  log "$iface: not capable: dcb pfc show: $err"']
        else:
            out += ["elif true; then",
                    '  log "$iface: not capable: neither mlnx_qos nor iproute2 dcb is installed"']
        out += ["else", *(f"  try {cmd}" for cmd in pl["commands"]),
                '  log "$iface: DCB settings applied"', "fi"]
        if pl["state"].get("ibdev") and cm:
            out += [f"ibdev={shlex.quote(str(pl['state']['ibdev']))}",
                    '[ -d /sys/kernel/config/rdma_cm ] && mkdir -p "/sys/kernel/config/rdma_cm/'
                    '$ibdev" 2>/dev/null']
        out += [f"put {shlex.quote(str(w['path']))} {shlex.quote(str(w['value']))}"
                for w in pl["writes"] if cm or "rdma_cm" not in w["path"]]
    return "\n".join([*out, "exit $rc", ""])


def unit(settings, managed=state_drift.MANAGED):
    """The oneshot unit that runs the script at boot."""
    return "\n".join([
        state_drift.header(managed, " (roce_qos)"),
        "# NIC QoS (trust, PFC, ECN) and rdma_cm defaults live in the driver and are lost on"
        " reboot or",
        "# driver reload; this re-applies them once the network devices exist.",
        "[Unit]",
        "Description=rdmaprov: lossless RoCEv2 QoS",
        "After=network-pre.target systemd-modules-load.service",
        "Before=network.target",
        "",
        "[Service]",
        "Type=oneshot",
        "RemainAfterExit=yes",
        f"ExecStart={systemd_word(settings['script'])}",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        ""])


def checks(plans, settings):
    """The verification after applying: one {name, ok, msg} per capable interface."""
    host = settings.get("host") or "?"
    tos = tos_from_dscp(settings["dscp"], settings.get("ecn_codepoint", "ect0"))
    return [{"name": pl["name"], "ok": not pl["drift"], "msg": (
        f"{host}: {pl['name']} ({pl['backend']}) still differs: {'; '.join(pl['drift'])}"
        if pl["drift"] else
        f"{host}: {pl['name']}: trust dscp, PFC on priority {settings['pfc_priority']}, "
        f"DSCP {settings['dscp']} -> ToS {tos} ({pl['backend']})")}
        for pl in plans if pl["capable"]]


def apply_commands(settings, files, file_state, unit_state, qos_drift):
    """What runs after the script and unit are written, in order: [{argv, removes}]. systemd's
    reload where the unit's file differs, its enablement where it is not enabled, and the unit's
    restart (which runs the script) where a file or a capable NIC differs. ``removes`` (the file
    each needs) gives the command module real check-mode semantics: under --check a unit or
    script still to be written skips. ``label`` is the command, for the loop's output."""
    unit, unit_path, script_path = settings["unit_name"], files[1]["path"], files[0]["path"]
    differs = [f["path"] for f in files if state_drift.compare(file_state or {}, {}, [f], [])]
    out = []
    if unit_path in differs:
        out.append({"argv": ["systemctl", "daemon-reload"], "removes": unit_path})
    if (unit_state or {}).get(unit) != "enabled":
        out.append({"argv": ["systemctl", "enable", unit], "removes": unit_path})
    if differs or qos_drift:
        out.append({"argv": ["systemctl", "restart", unit], "removes": script_path})
    # The loop's label: the command, not the whole item.
    return [dict(c, label=" ".join(c["argv"])) for c in out]


def host_plan(interfaces, settings, file_state=None, unit_state=None):
    """The probe of each interface (and of the script and unit, as state_drift reads them) + the
    role's settings → the host's plan: each interface's plan and report, the not-capable report
    lines, the listed interfaces that do not exist (errors), the script and unit as they must
    be (files: [{path, content, mode, owner, group}]), what differs (file_drift lines, qos_drift:
    a capable NIC's live QoS, drift: anything to do), the commands that apply it (apply:
    [{argv, removes, label}], apply_commands()) and the verification lines (checks; none under
    --check, where nothing was applied)."""
    plans = [plan(i, settings) for i in interfaces]
    managed = settings.get("managed") or state_drift.MANAGED
    text, unit_text = script(plans, settings, managed), unit(settings, managed)
    unit_path = f"/etc/systemd/system/{settings['unit_name']}"
    files = [{"path": settings["script"], "content": text, "mode": "0755", "owner": "root",
              "group": "root"},
             {"path": unit_path, "content": unit_text, "mode": "0644", "owner": "root",
              "group": "root"}]
    file_drift = state_drift.compare(file_state or {}, unit_state or {}, files,
                                     [settings["unit_name"]])
    qos_drift = any(pl["drift"] for pl in plans)
    return {"plans": plans, "reports": [report(pl) for pl in plans],
            "rdmaprov_report": not_capable_lines(plans),
            "errors": [pl["reason"] for pl, i in zip(plans, interfaces)
                       if not i.get("exists", True)],
            "files": files, "script": text, "unit": unit_text, "unit_path": unit_path,
            "file_drift": file_drift, "qos_drift": qos_drift,
            "drift": bool(file_drift) or qos_drift,
            "apply": apply_commands(settings, files, file_state, unit_state, qos_drift),
            "checks": [] if settings.get("check_mode") else checks(plans, settings)}
