# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""Pure logic of the net_mtu role: the merged interfaces, which network manager persists an
interface's MTU, the MTU's range, the ifupdown stanza edit, what to refuse (plan()), and the
path proof: which peers to DF-ping, the ping's argv and its verdict (run by module net_mtu_verify).

No I/O here: the role's probe module (net_mtu_probe) gathers the facts and runs plan(), which
decides; the role acts on the plan. Unit-tested in tests/unit/test_net_mtu.py.
"""

from __future__ import annotations

import os
import re

from ansible_collections.rdmaprov.cluster.plugins.module_utils import ranges, state_drift
from ansible_collections.rdmaprov.cluster.plugins.module_utils.unit_words import systemd_word

# Bytes an IPv4 ICMP echo adds to the payload: 20 (IPv4 header) + 8 (ICMP header).
IPV4_ICMP_OVERHEAD = 28

BACKENDS = ("netplan", "networkmanager", "networkd", "ifupdown", "ifcfg", "systemd_unit", "none")


def df_payload(mtu):
    """ICMP payload that makes an IPv4 packet of exactly `mtu` bytes (ping -s)."""
    return int(mtu) - IPV4_ICMP_OVERHEAD


def ipv4_of(ip_addr_json, ifname):
    """First global IPv4 address of `ifname`, or None."""
    for link in ip_addr_json or []:
        if link.get("ifname") != ifname:
            continue
        for info in link.get("addr_info", []):
            if info.get("family") == "inet" and info.get("scope", "global") == "global":
                return info.get("local")
    return None


def mtu_limit_error(mtu, link_type, ipoib_mode=None, declared="auto"):
    """Why `mtu` cannot be set on this host's link (sysfs link layer `link_type`, IPoIB
    `ipoib_mode`), or None when it can. The range is the one table's (ranges.py) for the link
    the host has; a `declared` link type (net_mtu's link_type) must be that link."""
    have = ranges.host_link_type(link_type, ipoib_mode)
    if declared not in (None, "", "auto") and declared != have:
        return (f"link_type is {declared} but the host's interface is {have} "
                f"(link layer {link_type or 'unknown'}, IPoIB mode {ipoib_mode or 'none'})")
    why = ranges.problem("mtu", int(mtu), have)
    if why and have.startswith("ipoib"):
        why += " (the IB port MTU of 4096 is a fabric property, reported, not set here)"
    return why


def pick_backend(probe):
    """The manager that owns an interface's configuration: (backend, reason).

    `probe` is one interface's entry from the net_mtu_probe module: which managers run, whether
    they manage this interface, which files mention it. The order follows what is the source of
    truth: netplan renders for NetworkManager or networkd, so it wins over both.
    """
    name = probe.get("name", "?")
    if probe.get("netplan_files") and probe.get("netplan_present"):
        return "netplan", f"{name}: netplan configuration in {', '.join(probe['netplan_files'])}"
    nm = probe.get("nm") or {}
    if nm.get("active") and nm.get("connection"):
        return "networkmanager", f"{name}: NetworkManager connection {nm['connection']!r}"
    nd = probe.get("networkd") or {}
    if nd.get("active") and nd.get("network_file"):
        return "networkd", f"{name}: systemd-networkd file {nd['network_file']}"
    if probe.get("ifupdown_file"):
        return "ifupdown", f"{name}: ifupdown stanza in {probe['ifupdown_file']}"
    if probe.get("ifcfg_file"):
        return "ifcfg", f"{name}: {probe['ifcfg_file']}"
    checked = [
        "netplan (/etc/netplan/*.yaml)",
        "NetworkManager (" + ("active, but no connection for it" if nm.get("active") else "not running") + ")",
        "systemd-networkd (" + ("active, but no .network file matches it" if nd.get("active")
                                else "not running") + ")",
        "ifupdown (no 'iface " + name + "' stanza)",
        "RHEL ifcfg (no ifcfg-" + name + ")",
    ]
    return None, (f"{name}: no network manager recognised to persist its MTU; checked "
                  + "; ".join(checked)
                  + ". Set net_mtu_persist to systemd_unit (a boot-time oneshot) or none.")


_IFACE_RE = re.compile(r"^\s*iface\s+(\S+)\s+")
_STANZA_START = re.compile(r"^\s*(iface|auto|allow-\S+|mapping|source|source-directory|rename)\b")
_MTU_LINE = re.compile(r"^(\s*)mtu\s+\S+\s*$")


def ifupdown_set_mtu(text, iface, mtu):
    """Set `mtu N` in every `iface IFACE ...` stanza of an interfaces(5) file; returns new text.

    Only the option lines inside the interface's stanzas are touched; other stanzas, comments and
    blank lines stay byte for byte.
    """
    lines = text.splitlines(keepends=True)
    out = []
    in_stanza = False
    seen_mtu = False
    indent = "    "

    def close():
        if in_stanza and not seen_mtu:
            # Insert before trailing blank lines so the stanza stays one block.
            tail = []
            while out and out[-1].strip() == "":
                tail.insert(0, out.pop())
            out.append(f"{indent}mtu {mtu}\n")
            out.extend(tail)

    for line in lines:
        if _STANZA_START.match(line):
            close()
            match = _IFACE_RE.match(line)
            in_stanza = bool(match and match.group(1) == iface)
            seen_mtu = False
            out.append(line)
            continue
        if in_stanza:
            mline = _MTU_LINE.match(line)
            if mline:
                seen_mtu = True
                out.append(f"{mline.group(1)}mtu {mtu}\n")
                continue
            if line.strip() and not line.lstrip().startswith("#"):
                indent = line[: len(line) - len(line.lstrip())] or indent
        out.append(line)
    if out and not out[-1].endswith("\n"):
        out[-1] += "\n"
    close()
    return "".join(out)


def ping_verdict(src, src_addr, dst, dst_addr, mtu, rc, stdout, stderr):
    """One DF ping's result as a report entry: ok, and a sentence naming the pair when not."""
    payload = df_payload(mtu)
    text = f"{stdout}\n{stderr}"
    ok = rc == 0
    if ok:
        why = ""
    else:
        m = re.search(r"mtu\s*=\s*(\d+)", text)
        if "message too long" in text.lower() or m:
            why = ("the sender's own path MTU is smaller"
                   + (f" (kernel reports mtu={m.group(1)})" if m else ""))
        elif re.search(r"100% packet loss", text):
            why = "no reply: a hop on the path (switch port, bridge, the peer's interface) drops the frame"
        else:
            why = (stderr or stdout).strip().splitlines()[-1] if (stderr or stdout).strip() else f"rc={rc}"
    return {
        "src": src, "src_addr": src_addr, "dst": dst, "dst_addr": dst_addr, "mtu": int(mtu),
        "payload": payload, "ok": ok,
        "msg": (f"{src} ({src_addr}) -> {dst} ({dst_addr}): {mtu}-byte DF packets "
                + ("pass" if ok else f"do NOT pass (ping -M do -s {payload}): {why}")),
    }


def mtu_drift(wanted, probed):
    """Names of wanted interfaces whose runtime MTU differs (or that do not exist)."""
    current = {p.get("name"): p.get("mtu") for p in probed or []}
    return [w["name"] for w in wanted or [] if current.get(w["name"]) != int(w["mtu"])]


def ping_targets(src_addr, peers, check_mode=False, unproven=False):
    """The peers this host DF-pings, sorted by inventory name: [{name, address}].

    ``peers``: one entry per peer, each ``{name, address, drift}`` as the peer settled it (an
    empty entry for a peer that did not). A pair is left out when either side has no fabric
    address, and under --check when either side's MTU change (``unproven`` for this host: its
    drift, or ping only to be installed) was only reported, not made: a ping then proves nothing.
    """
    if not src_addr or (check_mode and unproven):
        return []
    out = []
    for peer in sorted((p for p in peers or [] if p and p.get("name")), key=lambda p: str(p["name"])):
        if not peer.get("address") or (check_mode and peer.get("drift")):
            continue
        out.append({"name": str(peer["name"]), "address": str(peer["address"])})
    return out


def ping_argv(src_addr, dst_addr, mtu, count, timeout):
    """The DF ping of one pair as an argv (no shell): ``count`` packets of exactly ``mtu`` bytes
    from ``src_addr``. An address that ping would read as an option is refused."""
    for addr in (src_addr, dst_addr):
        if str(addr).startswith("-"):
            raise ValueError(f"{addr!r} is not an address")
    return ["ping", "-M", "do", "-s", str(df_payload(mtu)), "-c", str(int(count)), "-i", "0.2",
            "-W", str(int(timeout)), "-I", str(src_addr), str(dst_addr)]


# ----- plan (the role's decisions for one host) -----------------------------------------------

def _int(value) -> int:
    """An MTU as Ansible's int filter reads it: 9000, "9000" and "9000.0" are 9000."""
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return int(float(value))
    return int(value)


def merge_interfaces(layers: list, default) -> list[dict]:
    """The wanted interfaces from net_mtu_interfaces, _group and _host (in that order): merged by
    name, a later entry wins, in the order of each name's first appearance; an entry without an
    MTU gets ``default``, one without a link_type ``auto``."""
    merged: dict[str, dict] = {}
    for layer in layers:
        for entry in layer or []:
            mtu = entry.get("mtu")
            merged[entry["name"]] = {
                "name": entry["name"], "mtu": _int(default if mtu is None else mtu),
                "link_type": entry.get("link_type") or "auto"}
    return list(merged.values())


def connection_error(host: str, address: str, name: str, current, mtu: int,
                     control_ip) -> str:
    """Why raising the MTU of the interface carrying Ansible's own connection is refused."""
    return (f"{host}: {name} carries Ansible's connection ({control_ip or 'control host'} -> "
            f"{address}); raising its MTU from {current} to {mtu} can cut that path if any hop "
            "is smaller. Set net_mtu_allow_connection_interface=true once the switch ports are "
            "ready.")


def unit(items, managed=state_drift.MANAGED):
    """The boot-time unit (net_mtu_persist systemd_unit): each interface's MTU set once it exists."""
    execs = [
        "ExecStart=/bin/sh -c 'n=0; while [ ! -e \"/sys/class/net/$$1\" ] && [ $n -lt 60 ]; do sleep"
        ' 1; n=$((n+1)); done; exec ip link set dev "$$1" mtu "$$2"\' rdmaprov-mtu '
        f"{systemd_word(i['name'])} {int(i['mtu'])}" for i in items]
    return "\n".join([
        state_drift.header(managed, " (net_mtu)"),
        "# The host's interfaces are configured by something this role does not manage; this unit",
        "# re-applies the fabric MTU at boot. It waits for the device itself instead of ordering"
        " after",
        "# its .device unit, which never starts where udev does not run (containers, the lab). The"
        " name",
        "# and MTU are the shell's $1 and $2 ($$ is systemd's escape of $), never part of its"
        " script.",
        "[Unit]", "Description=rdmaprov: fabric interface MTU", "DefaultDependencies=no",
        "After=systemd-modules-load.service", "Before=network-pre.target",
        "Wants=network-pre.target", "", "[Service]", "Type=oneshot", "RemainAfterExit=yes",
        *execs, "", "[Install]", "WantedBy=multi-user.target", ""])


def unit_state(by_backend, settings, file_state, unit_states):
    """The boot unit as it must be where an interface persists through it, and what differs of
    it and its enablement (lines) → (unit text or "", its path, drift lines)."""
    path = f"/etc/systemd/system/{settings['unit_name']}"
    if "systemd_unit" not in by_backend:
        return "", path, []
    text = unit(by_backend["systemd_unit"], settings.get("managed") or state_drift.MANAGED)
    want = [{"path": path, "content": text, "mode": "0644", "owner": "root", "group": "root"}]
    return text, path, state_drift.compare(file_state or {}, unit_states or {}, want,
                                           [settings["unit_name"]])


# The settings the plan reads: the net_mtu_* variables without the prefix and the host's name
# (the probe's action plugin fills them from the role's variables and the play).
SETTINGS = ("interfaces", "interfaces_group", "interfaces_host", "default",
            "allow_connection_interface", "persist", "verify", "verify_interface",
            "fabric_address", "ping_package", "host", "unit_name", "networkd_dropin", "managed",
            "address", "check_mode", "python_apt", "netplan_file", "verify_peers", "ping_count",
            "ping_timeout")


def netplan(items, managed=state_drift.MANAGED):
    """The netplan file (net_mtu_netplan_file): each netplan interface's MTU; netplan merges it
    with the host's own files."""
    lines = [state_drift.header(managed, " (net_mtu). netplan merges this with the host's own files."),
             "network:", "  version: 2", "  ethernets:"]
    for i in items:
        lines += [f"    {i['name']}:", f"      mtu: {int(i['mtu'])}"]
    return "\n".join([*lines, ""])


_IFCFG_MTU = re.compile(r"^MTU=")


def ifcfg_set_mtu(text, mtu):
    """An ifcfg file with its last ``MTU=`` line set to ``MTU=N``, or one added at its end (as
    lineinfile with regexp ``^MTU=`` writes it)."""
    lines = (text or "").splitlines()
    hits = [n for n, line in enumerate(lines) if _IFCFG_MTU.match(line)]
    if hits:
        lines[hits[-1]] = f"MTU={int(mtu)}"
    else:
        lines.append(f"MTU={int(mtu)}")
    return "\n".join(lines) + "\n"


def _removes(name):
    """The path whose presence lets a command run: the interface's sysfs node (the command
    module's ``removes``, which gives it real check-mode semantics)."""
    return f"/sys/class/net/{name}"


def persistence(by_backend, info, settings, file_state, unit_state):
    """The files each interface's manager keeps (``to_write``: [{path, content, mode, backup}],
    ``dirs``: the directories they need), what of them and of the boot unit's enablement differs
    from what the probe read (``drift`` lines), and the commands that follow a write (``after``:
    [{argv, removes, label}]: netplan generate, networkctl reload, the boot unit's daemon-reload
    and enablement), only where their file differs."""
    file_state = file_state or {}
    managed = settings.get("managed") or state_drift.MANAGED
    to_write, dirs, units = [], [], []
    if by_backend.get("netplan"):
        to_write.append({"path": settings.get("netplan_file") or "/etc/netplan/60-rdmaprov-mtu.yaml",
                         "content": netplan(by_backend["netplan"], managed), "mode": "0600",
                         "backend": "netplan"})
    for i in by_backend.get("networkd", []):
        network = ((info.get(i["name"]) or {}).get("networkd") or {}).get("network_file") or ""
        folder = f"/etc/systemd/network/{os.path.basename(network)}.d"
        dirs.append(folder)
        to_write.append({"path": f"{folder}/{settings['networkd_dropin']}", "mode": "0644",
                         "content": f"# Managed by rdmaprov (net_mtu)\n[Link]\nMTUBytes={i['mtu']}\n",
                         "backend": "networkd"})
    for i in by_backend.get("ifupdown", []):
        entry = info.get(i["name"]) or {}
        to_write.append({"path": entry.get("ifupdown_file"), "mode": "0644", "backup": True,
                         "content": ifupdown_set_mtu(entry.get("ifupdown_text") or "", i["name"],
                                                     i["mtu"]), "backend": "ifupdown"})
    for i in by_backend.get("ifcfg", []):
        entry = info.get(i["name"]) or {}
        path = entry.get("ifcfg_file")
        to_write.append({"path": path, "content": ifcfg_set_mtu(entry.get("ifcfg_text"), i["mtu"]),
                         "mode": (file_state.get(path) or {}).get("mode") or "0644",
                         "backend": "ifcfg"})
    unit_path = f"/etc/systemd/system/{settings['unit_name']}"
    if by_backend.get("systemd_unit"):
        to_write.append({"path": unit_path, "content": unit(by_backend["systemd_unit"], managed),
                         "mode": "0644", "backend": "systemd_unit"})
        units.append(settings["unit_name"])
    differs = {f["path"] for f in to_write
               if state_drift.compare(file_state, {}, [{**f, "owner": "root", "group": "root"}], [])}
    after = []
    for backend, argv in (("netplan", ["netplan", "generate"]),
                          ("networkd", ["networkctl", "reload"]),
                          ("systemd_unit", ["systemctl", "daemon-reload"])):
        changed = [f["path"] for f in to_write if f["backend"] == backend and f["path"] in differs]
        if changed:
            after.append({"argv": argv, "removes": changed[0], "label": " ".join(argv)})
    if units and (unit_state or {}).get(units[0]) != "enabled":
        # Under --check a unit still to be written does not exist: `removes` skips it there.
        after.append({"argv": ["systemctl", "enable", units[0]], "removes": unit_path,
                      "label": f"systemctl enable {units[0]}"})
    owned = [{**f, "owner": "root", "group": "root"} for f in to_write]
    return {"to_write": [{k: f.get(k, False) for k in ("path", "content", "mode", "backup")}
                         for f in to_write],
            "dirs": dirs, "after": after,
            "drift": state_drift.compare(file_state, unit_state or {}, owned, units)}


def proof(host, verify, plans, run_tags, peer_plans=None):
    """Whether this host's DF-ping proof runs, and the peers' entries it pings.

    ``verify`` is this host's plan's entry (None: nothing to prove here), ``plans`` each play
    host's plan by name (read through hostvars), ``run_tags`` the play's. The proof runs when
    asked for (--tags net_mtu_verify) or when any host of the play has something to do; the peers
    are net_mtu_verify_peers, else the play's hosts, this host left out; a peer without a plan's
    entry gives an empty one (ping_targets leaves it out)."""
    if not verify:
        return False, []
    if "net_mtu_verify" not in (run_tags or []) and not any(
            (p or {}).get("host_drift") for p in plans.values()):
        return False, []
    names = verify.get("peers") or list(plans)
    known = plans if peer_plans is None else peer_plans
    return True, [((known.get(n) or {}).get("verify") or {}) for n in names if n != host]


def plan(probe: dict, settings: dict) -> dict:
    """One host's probe (module net_mtu_probe) + the role's settings -> what the role does.

    settings: ``interfaces``, ``interfaces_group``, ``interfaces_host`` (the three layers),
    ``default``, ``allow_connection_interface``, ``persist``, ``verify``, ``verify_interface``,
    ``fabric_address``, ``ping_package``, ``unit_name``, ``networkd_dropin``, ``netplan_file``,
    ``verify_peers``, ``ping_count``, ``ping_timeout`` (the role's net_mtu_* variables), ``host``
    (the inventory name, for the messages), ``address`` (the address Ansible connects to),
    ``check_mode`` and ``python_apt`` (the host's fact).

    Returns ``wanted`` ([{name, mtu, link_type}], merged), ``mtu`` (name -> MTU), ``runtime`` (the
    runtime changes: [{name, current, mtu}]), ``drift`` (their names), ``backends`` (name ->
    {backend, reason}), ``by_backend`` (backend -> [{name, mtu}]; an interface without one is
    left out: it is refused), ``networkmanager`` (the connections whose MTU setting differs),
    what the role does, in order - ``commands`` ([{argv, removes, label}]: the runtime MTUs),
    ``dirs`` and ``to_write`` ([{path, content, mode, backup}]: every manager's file, the boot
    unit too), ``persist`` (commands: NetworkManager's settings, then what follows a written
    file) -, ``unit`` and
    ``unit_path`` (the boot unit as it must be, "" where no interface persists through it),
    ``persist_drift`` (lines: the NetworkManager settings, files and the boot unit's enablement
    that differ from the probe's ``file_state`` and ``unit_state``), ``errors`` (what to refuse,
    one line each; ``refused``, them joined), ``report`` (where each MTU persists, and the
    interfaces set at runtime only), ``unpersisted`` (those), ``ping_package`` (the package that
    gives the proof its ping where it is missing, else None), ``ping_install`` (apt, package or
    None: how), ``ping_apt`` and ``ping_other`` (the package to install with apt or the generic
    package module: [] or [name]; under --check without python3-apt, none with apt),
    ``host_drift`` (anything to do or refuse), ``provable`` (the proof has something to prove)
    and ``verify`` (what the path proof needs of this host - ``{name, interface, address, mtu,
    drift, peers, count, timeout}``, the entry its peers ping - or None when there is nothing
    to prove).
    """
    host = settings.get("host") or "?"
    address = settings.get("address") or host
    persist = settings.get("persist") or "auto"
    wanted = merge_interfaces([settings.get("interfaces"), settings.get("interfaces_group"),
                               settings.get("interfaces_host")], settings.get("default", 9000))
    info = {p.get("name"): p for p in probe.get("interfaces") or []}
    state = {name: p.get("mtu") for name, p in info.items()}

    backends: dict[str, dict] = {}
    by_backend: dict[str, list] = {}
    for item in wanted:
        if persist == "auto":
            backend, reason = pick_backend(info.get(item["name"]) or {"name": item["name"]})
        else:
            backend, reason = persist, f"chosen: net_mtu_persist={persist}"
        backends[item["name"]] = {"backend": backend, "reason": reason}
        if backend is not None:
            by_backend.setdefault(backend, []).append({"name": item["name"], "mtu": item["mtu"]})

    errors = []
    for item in wanted:
        name, mtu = item["name"], item["mtu"]
        entry = info.get(name) or {}
        why = mtu_limit_error(mtu, entry.get("link_type"), entry.get("ipoib_mode"),
                              item["link_type"])
        if not entry.get("exists") or why is not None:
            errors.append(f"{host}: {name}: " + ("no such interface" if not entry.get("exists")
                                                 else why))
        elif (not settings.get("allow_connection_interface")
              and name == probe.get("connection_iface")
              and (state.get(name) is None or mtu > state[name])):
            errors.append(connection_error(host, address, name, state.get(name), mtu,
                                           probe.get("control_ip")))
        elif backends[name]["backend"] is None:
            errors.append(f"{host}: {backends[name]['reason']}")

    drift = mtu_drift(wanted, probe.get("interfaces"))
    runtime = [{"name": i["name"], "current": state.get(i["name"]), "mtu": i["mtu"]}
               for i in wanted if i["name"] in drift]

    networkmanager, persist_drift, commands, persisting = [], [], [], []
    for i in runtime:
        commands.append({"argv": ["ip", "link", "set", "dev", i["name"], "mtu", str(i["mtu"])],
                         "removes": _removes(i["name"]),
                         "label": f"{i['name']}: {i['current']} -> {i['mtu']}"})
    for i in by_backend.get("networkmanager", []):
        nm = (info.get(i["name"]) or {}).get("nm") or {}
        if str(nm.get("mtu_setting", "")) != str(i["mtu"]):
            networkmanager.append({**i, "connection": nm.get("connection"),
                                   "setting_key": nm.get("setting_key")})
            persist_drift.append(f"{i['name']}: NetworkManager setting differs")
            argv = ["nmcli", "connection", "modify", str(nm.get("connection")),
                    str(nm.get("setting_key")), str(i["mtu"])]
            persisting.append({"argv": argv, "removes": _removes(i["name"]),
                               "label": f"{i['name']} ({nm.get('connection')})"})
    kept = persistence(by_backend, info, settings, probe.get("file_state"),
                       probe.get("unit_state"))
    persist_drift += kept["drift"]
    unit_text = next((f["content"] for f in kept["to_write"]
                      if f["path"] == f"/etc/systemd/system/{settings['unit_name']}"), "")
    unpersisted = [{"name": i["name"], "msg": f"{i['name']}: MTU {i['mtu']} set at runtime only "
                    "(net_mtu_persist: none)"} for i in by_backend.get("none", [])]
    report = [f"{i['name']}: {backends[i['name']]['backend'] or 'not persisted'}, MTU {i['mtu']} "
              f"({backends[i['name']]['reason']})" for i in wanted]
    provable = bool(settings.get("verify", True)) and bool(wanted)
    needs_ping = provable and not probe.get("ping")
    verify = None
    if wanted:
        # The proof runs over one interface: net_mtu_verify_interface, else the first one set.
        iface = settings.get("verify_interface") or wanted[0]["name"]
        mtus = {i["name"]: i["mtu"] for i in wanted}
        if iface in mtus and provable:
            verify = {"name": host, "interface": iface, "mtu": mtus[iface], "drift": bool(drift),
                      "address": (settings.get("fabric_address")
                                  or (info.get(iface) or {}).get("ipv4") or ""),
                      "peers": list(settings.get("verify_peers") or []),
                      "count": int(settings.get("ping_count") or 3),
                      "timeout": int(settings.get("ping_timeout") or 2)}
        elif iface not in mtus and provable:
            errors.append(f"{host}: net_mtu_verify_interface {iface} is not one of the "
                          "interfaces net_mtu sets: nothing to prove its MTU against")
    apt = bool(probe.get("apt"))
    # net_mtu_ping_package, else the distribution's name for it (apt: iputils-ping).
    ping_package = ((settings.get("ping_package") or ("iputils-ping" if apt else "iputils"))
                    if needs_ping else None)
    # Without python3-apt the apt module installs it first, which --check must not do.
    apt_now = apt and not (settings.get("check_mode") and not settings.get("python_apt", True))
    return {
        "wanted": wanted, "mtu": {i["name"]: i["mtu"] for i in wanted},
        "runtime": runtime,
        "drift": drift, "backends": backends, "by_backend": by_backend,
        "networkmanager": networkmanager, "persist_drift": persist_drift, "errors": errors,
        "refused": "; ".join(errors),
        # Where each MTU persists (printed under the host where something was to do), and the
        # interfaces set at runtime only.
        "report": report + [u["msg"] for u in unpersisted],
        "ping_package": ping_package,
        "ping_install": ("apt" if apt else "package") if needs_ping else None,
        "ping_apt": [ping_package] if needs_ping and apt_now else [],
        "ping_other": [ping_package] if needs_ping and not apt else [],
        "host_drift": bool(drift or persist_drift or needs_ping or errors), "verify": verify,
        # The pairwise proof has something to prove here (whether it runs is the play's: any
        # host with something to do, or --tags net_mtu_verify: proof()).
        "provable": provable,
        # What the role does, in order: the runtime MTUs (commands), the managers' directories
        # and files (dirs, to_write), then NetworkManager's settings and what follows a written
        # file (persist: netplan generate, networkctl reload, the boot unit's reload and
        # enablement).
        "commands": commands, "dirs": kept["dirs"], "to_write": kept["to_write"],
        "persist": persisting + kept["after"],
        "unit": unit_text, "unit_path": f"/etc/systemd/system/{settings['unit_name']}",
        "unpersisted": unpersisted,
    }
