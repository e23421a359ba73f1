# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""Pure logic of the firewall role: backend choice, the NCCL/ephemeral port range, the plan the
firewall_probe module returns (plan(): what to open, what to refuse and why, each backend's
changes) and the verification of the rules read back after applying (verify()). Unit-tested in
tests/unit/test_firewall_logic.py."""

from __future__ import annotations

import ipaddress
import re

from ansible_collections.rdmaprov.cluster.plugins.module_utils import ranges, state_drift
from ansible_collections.rdmaprov.cluster.plugins.module_utils.unit_words import systemd_word

BACKENDS = ("nftables", "firewalld", "ufw")


def pick_backend(choice, firewalld_active, ufw_active, nft_present, ufw_present=True):
    """(backend, reason); backend None when none is usable. An active firewalld or ufw owns the
    host's netfilter policy: writing our own nftables table beside it would work, but the host's
    admin manages it with their tool."""
    if choice == "firewalld" and not firewalld_active:
        return None, "firewall_backend=firewalld, but firewalld is not running"
    if choice == "ufw" and not ufw_present:
        return None, "firewall_backend=ufw, but ufw is not installed"
    if choice == "nftables" and not nft_present:
        return None, "firewall_backend=nftables, but nft is not installed (package nftables)"
    if choice != "auto":
        return choice, f"chosen: firewall_backend={choice}"
    if firewalld_active:
        return "firewalld", "firewalld is running"
    if ufw_active:
        return "ufw", "ufw is active"
    if nft_present:
        return "nftables", "neither firewalld nor ufw is active; nft is installed"
    return None, ("no firewall backend found: firewalld and ufw are not active and nft is not "
                  "installed (install nftables or set firewall_backend)")


def port_span(value):
    """A port or range (22, "22", "60001-63000", "60001:63000") → (low, high) within 1..65535."""
    parts = str(value).strip().replace(":", "-").split("-")
    if len(parts) not in (1, 2) or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"{value!r} is not a port or LOW-HIGH range")
    low, high = int(parts[0]), int(parts[-1])
    first, last, _what = ranges.bounds("port")
    if not first <= low <= high <= last:
        raise ValueError(f"port range {low}-{high} is not within {first}..{last}")
    return low, high


def port_range(value, local_port_range):
    """NCCL's bootstrap and socket transport listen on ephemeral ports (bind to port 0), so the
    range to open is the kernel's net.ipv4.ip_local_port_range unless pinned. → (low, high)."""
    if value == "auto":
        return port_span("-".join(str(local_port_range).split()))
    return port_span(value)


def normalise_subnets(subnets):
    """Validated, de-duplicated CIDRs split by family: {'ipv4': [...], 'ipv6': [...]}."""
    out = {"ipv4": [], "ipv6": []}
    for s in subnets or []:
        net = ipaddress.ip_network(str(s), strict=False)
        key = "ipv4" if net.version == 4 else "ipv6"
        if str(net) not in out[key]:
            out[key].append(str(net))
    return out


def control_host_allowed(control_ip, subnets):
    """Is the control host's address inside one of the declared subnets?"""
    if not control_ip:
        return False
    addr = ipaddress.ip_address(control_ip)
    return any(addr in ipaddress.ip_network(s, strict=False) for s in subnets or [])


def grants(plan_):
    """Every (source, port, proto) a plan opens, source None meaning anyone: the rule list of
    the backends that only add to the host's own policy (firewalld, ufw)."""
    out = []
    for src in plan_["subnets"]["ipv4"] + plan_["subnets"]["ipv6"]:
        out += [{"source": src, "port": p, "proto": "tcp"} for p in plan_["cluster_tcp"]]
        out.append({"source": src, "port": plan_["udp_port"], "proto": "udp"})
    for src in plan_["ssh_only"]["ipv4"] + plan_["ssh_only"]["ipv6"]:
        out.append({"source": src, "port": plan_["ssh_port"], "proto": "tcp"})
    for entry in plan_["allow"]:
        srcs = entry["sources"]["ipv4"] + entry["sources"]["ipv6"] or [None]
        out += [{"source": s, "port": entry["port"], "proto": entry["proto"]} for s in srcs]
    unique = []
    for g in out:
        if g not in unique:
            unique.append(g)
    return unique


def firewalld_rich_rule(grant):
    """A grant as firewalld prints it back (`--list-rich-rules`), so present rules compare equal."""
    where = ""
    if grant["source"]:
        family = "ipv6" if ":" in grant["source"] else "ipv4"
        where = f'family="{family}" source address="{grant["source"]}" '
    return f'rule {where}port port="{grant["port"]}" protocol="{grant["proto"]}" accept'


def firewalld_rules(plan_):
    return [firewalld_rich_rule(g) for g in grants(plan_)]


def firewalld_changes(plan_, name, permanent, runtime):
    """firewall-cmd calls that bring our policy to the plan. permanent, runtime: the policy's
    `--list-rich-rules` text, None where it does not exist. Permanent and runtime configuration
    are changed apart, since a `--reload` also drops the admin's runtime-only rules; it runs only
    when the policy is not in the runtime yet (firewalld creates policies permanent-only)."""
    want = firewalld_rules(plan_)
    cmds = []
    if permanent is None:
        cmds.append(["firewall-cmd", "--permanent", f"--new-policy={name}"])
        cmds += [["firewall-cmd", "--permanent", f"--policy={name}", opt]
                 for opt in ("--add-ingress-zone=ANY", "--add-egress-zone=HOST",
                             "--set-target=CONTINUE")]
    reload = permanent is None or runtime is None
    sides = [(["--permanent"], permanent)] + ([] if reload else [([], runtime)])
    for flag, text in sides:
        have = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
        cmds += [["firewall-cmd", *flag, f"--policy={name}", f"--remove-rich-rule={r}"]
                 for r in have if r not in want]
        cmds += [["firewall-cmd", *flag, f"--policy={name}", f"--add-rich-rule={r}"]
                 for r in want if r not in have]
    if reload:
        cmds.append(["firewall-cmd", "--reload"])
    return cmds


def ufw_rule_args(grant):
    """A grant as `ufw allow` arguments (ufw writes ranges LOW:HIGH)."""
    return ["allow", "proto", grant["proto"], "from", grant["source"] or "any", "to", "any",
            "port", grant["port"].replace("-", ":"), "comment", "rdmaprov"]


def ufw_added_line(grant):
    """A grant as `ufw show added` prints it back (ufw 0.36)."""
    port = grant["port"].replace("-", ":")
    if grant["source"]:
        net = ipaddress.ip_network(grant["source"])
        source = net.network_address if net.prefixlen == net.max_prefixlen else net
        return (f"ufw allow from {source} to any port {port} proto {grant['proto']} "
                "comment 'rdmaprov'")
    return f"ufw allow {port}/{grant['proto']} comment 'rdmaprov'"


def ufw_rules(plan_):
    """[{args, added}]: each grant as `ufw allow` arguments and as `ufw show added` prints it."""
    return [{"args": ufw_rule_args(g), "added": ufw_added_line(g)} for g in grants(plan_)]


_HASH_RE = re.compile(r'comment\s+"rdmaprov sha1=([0-9a-f]{40})"')


def live_hash(nft_list_text):
    """The ruleset fingerprint the role wrote into the live table's comment, or ''."""
    match = _HASH_RE.search(nft_list_text or "")
    return match.group(1) if match else ""


# --- The live table against the wanted one ------------------------------------------------------
# What the host runs is read from `nft list table inet T` (the text form: nft 1.0.6's JSON leaves
# out the table's comment, and every nft prints the text form of what it loaded the same way).
# The wanted table is the rendered ruleset as the host's own nft prints it back after loading it
# into a throwaway network namespace (firewall_probe.nft_reference: nft respells what it loads,
# e.g. drops /32, merges overlapping anonymous-set intervals, names ports by number), or where
# that could not be done, the rendered text itself. Both go through nft_listing; the sha1 comment
# is compared like any other line, so it can only ever make the two differ.
_COUNTER_RE = re.compile(r"\bcounter packets \d+ bytes \d+")
_HOST_PREFIX_RE = re.compile(r"(?<![\w:.])(\d{1,3}(?:\.\d{1,3}){3})/32\b"
                             r"|([0-9a-fA-F:]*:[0-9a-fA-F:.]*)/128\b")


def _nft_words(line):
    """One line of a listing as compared: whitespace collapsed, counters' values and host
    prefixes (/32, /128, which nft prints without) dropped."""
    line = _COUNTER_RE.sub("counter", " ".join(line.split()))
    return _HOST_PREFIX_RE.sub(lambda m: m.group(1) or m.group(2), line)


def _split_elements(text):
    """'a, b, c' of an `elements = { ... }` (commas inside nothing else) → ['a', 'b', 'c']."""
    return [e.strip() for e in text.split(",") if e.strip()]


def nft_listing(text, table):
    """`nft list table inet TABLE` (or a ruleset file holding it) → {comment, sets: {name: {spec,
    elements}}, chains: {name: {spec, rules}}}, None where the text holds no such table. Comment
    lines and blank lines are not part of it; where the text declares the table several times
    (a ruleset's declare-delete-define), the last definition is the one loaded."""
    lines = [ln.split("#", 1)[0].strip() if ln.lstrip().startswith("#") else ln.strip()
             for ln in (text or "").splitlines()]
    lines = [ln for ln in lines if ln]
    head = f"table inet {table} {{"
    starts = [i for i, ln in enumerate(lines) if " ".join(ln.split()) == head]
    if not starts:
        return None
    out = {"comment": None, "sets": {}, "chains": {}}
    block, name, i = None, None, starts[-1] + 1
    while i < len(lines):
        line = _nft_words(lines[i])
        i += 1
        if block is None:
            if line == "}":
                break
            kind = line.split(" ", 1)[0]
            if line.startswith("comment "):
                out["comment"] = line[len("comment "):]
            elif kind in ("set", "map", "chain", "flowtable") and line.endswith("{"):
                name = line[len(kind):-1].strip()
                block = "chains" if kind == "chain" else "sets"
                out[block][f"{kind} {name}" if kind != "chain" else name] = (
                    {"spec": [], "rules": []} if kind == "chain" else {"spec": [], "elements": []})
                name = f"{kind} {name}" if kind != "chain" else name
            else:
                out.setdefault("other", []).append(line)
            continue
        if line == "}":
            block = None
            continue
        entry = out[block][name]
        if block == "sets" and line.startswith("elements = {"):
            body = line[len("elements = {"):]
            while not body.rstrip().endswith("}") and i < len(lines):
                body += " " + _nft_words(lines[i])
                i += 1
            entry["elements"] += _split_elements(body.rstrip()[:-1])
        elif block == "chains" and line.startswith(("type ", "policy ")):
            entry["spec"].append(line)
        else:
            entry["rules" if block == "chains" else "spec"].append(line)
    return out


def _few(items, most=4):
    items = list(items)
    shown = "; ".join(items[:most])
    return shown + (f" (+{len(items) - most} more)" if len(items) > most else "")


def nft_differences(live_text, wanted_text, table):
    """What the live table (live_text: `nft list table inet TABLE`, None where nft has no such
    table) lacks or has beyond the wanted one (wanted_text: its listing, see above), one line
    each; [] when the two are the same table."""
    wanted = nft_listing(wanted_text, table)
    if wanted is None:
        raise ValueError(f"the wanted ruleset defines no table inet {table}")
    live = nft_listing(live_text, table) if live_text is not None else None
    where = f"live table inet {table}"
    if live is None:
        return [f"{where} is absent"]
    out = []
    if live["comment"] != wanted["comment"]:
        out.append(f"{where} has comment {live['comment'] or '(none)'}, wanted "
                   f"{wanted['comment'] or '(none)'}")
    if live.get("other", []) != wanted.get("other", []):
        out.append(f"{where}'s own settings are {_few(live.get('other', [])) or '(none)'}, "
                   f"wanted {_few(wanted.get('other', [])) or '(none)'}")
    for name, want in wanted["sets"].items():
        have = live["sets"].get(name)
        if have is None:
            out.append(f"{where} lacks {name} ({_few(want['elements']) or 'empty'})")
            continue
        if have["spec"] != want["spec"]:
            out.append(f"{where}: {name} is {', '.join(have['spec'])}, wanted "
                       f"{', '.join(want['spec'])}")
        lacks = [e for e in want["elements"] if e not in have["elements"]]
        extra = [e for e in have["elements"] if e not in want["elements"]]
        if lacks:
            out.append(f"{where}: {name} lacks {len(lacks)} element"
                       f"{'s' if len(lacks) > 1 else ''}: {_few(lacks)}")
        if extra:
            out.append(f"{where}: {name} has {len(extra)} element{'s' if len(extra) > 1 else ''}"
                       f" it should not: {_few(extra)}")
    out += [f"{where} has {name}, which the wanted ruleset does not" for name in live["sets"]
            if name not in wanted["sets"]]
    for name, want in wanted["chains"].items():
        have = live["chains"].get(name)
        if have is None:
            out.append(f"{where} lacks chain {name} and its {len(want['rules'])} rules")
            continue
        if have["spec"] != want["spec"]:
            out.append(f"{where}: chain {name} is '{' '.join(have['spec']) or '(no hook)'}', "
                       f"wanted '{' '.join(want['spec'])}'")
        lacks = [r for r in want["rules"] if r not in have["rules"]]
        extra = [r for r in have["rules"] if r not in want["rules"]]
        if lacks:
            out.append(f"{where} lacks {len(lacks)} rule{'s' if len(lacks) > 1 else ''} "
                       f"(chain {name}): {_few(lacks)}")
        if extra:
            out.append(f"{where} has {len(extra)} rule{'s' if len(extra) > 1 else ''} "
                       f"(chain {name}) the wanted ruleset does not: {_few(extra)}")
        if not lacks and not extra and have["rules"] != want["rules"]:
            out.append(f"{where}: chain {name} holds the wanted rules in another order")
    out += [f"{where} has chain {name}, which the wanted ruleset does not"
            for name in live["chains"] if name not in wanted["chains"]]
    return out


# --- What the host runs: listening sockets ----------------------------------------------------
POLICIES = ("scoped", "deny")
_LISTEN_STATE = {"tcp": "0A", "udp": "07"}  # TCP_LISTEN; an unconnected, bound UDP socket


def _proc_addr(text):
    """/proc/net's hex address: IPv4 is one little-endian word, IPv6 four of them."""
    raw = bytes.fromhex(text)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    return str(ipaddress.IPv6Address(b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))))


def parse_proc_net(kind, text):
    """One /proc/net/{tcp,tcp6,udp,udp6} file → [{proto, address, port, inode}] of its listening
    (TCP) or bound (UDP) sockets."""
    proto = kind.rstrip("6")
    out = []
    for line in (text or "").splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != _LISTEN_STATE[proto]:
            continue
        addr, port = fields[1].split(":")
        if int(port, 16):
            out.append({"proto": proto, "address": _proc_addr(addr), "port": int(port, 16),
                        "inode": fields[9]})
    return out


def _loopback(address):
    addr = ipaddress.ip_address(address)
    if addr.version == 6 and addr.ipv4_mapped:
        addr = addr.ipv4_mapped
    return addr.is_loopback


def listeners(proc_net, owners):
    """Sockets other hosts can reach (not bound to loopback), one entry per port and protocol,
    with the names of the processes that hold them (owners: socket inode → process name)."""
    seen = {}
    for kind in ("tcp", "tcp6", "udp", "udp6"):
        for sock in parse_proc_net(kind, (proc_net or {}).get(kind, "")):
            if _loopback(sock["address"]):
                continue
            entry = seen.setdefault((sock["port"], sock["proto"]), {
                "port": sock["port"], "proto": sock["proto"], "processes": []})
            name = (owners or {}).get(str(sock["inode"]))
            if name and name not in entry["processes"]:
                entry["processes"].append(name)
    return [seen[k] for k in sorted(seen)]


# --- Slurm ------------------------------------------------------------------------------------
SLURM_DEFAULT_PORTS = {"slurmctldport": "6817", "slurmdport": "6818"}


def slurm_ports(conf_text, installed):
    """Ports Slurm listens on between cluster hosts, as slurm.conf sets them (names are case
    insensitive; defaults SlurmctldPort 6817, SlurmdPort 6818). SrunPortRange when set; unset,
    srun listens on ephemeral ports, which the NCCL range already opens. [] without Slurm."""
    if conf_text is None and not installed:
        return []
    found = dict(SLURM_DEFAULT_PORTS)
    for line in (conf_text or "").splitlines():
        match = re.match(r"\s*(SlurmctldPort|SlurmdPort|SrunPortRange)\s*=\s*(\S+)",
                         line.split("#", 1)[0], re.I)
        if match:
            found[match.group(1).lower()] = match.group(2)
    out = []
    for key, name in (("slurmctldport", "SlurmctldPort"), ("slurmdport", "SlurmdPort"),
                      ("srunportrange", "SrunPortRange")):
        if key in found:
            try:
                low, high = port_span(found[key])
            except ValueError as exc:
                raise ValueError(f"{name}={found[key]}: {exc}") from exc
            out.append(str(low) if low == high else f"{low}-{high}")
    return out


# --- The plan ---------------------------------------------------------------------------------
def merge_ports(specs):
    """Ports and ranges → sorted, non-overlapping "N" / "LOW-HIGH" strings (nft refuses
    overlapping intervals in one set)."""
    spans = sorted(port_span(s) for s in specs)
    merged = []
    for low, high in spans:
        if merged and low <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], high)
        else:
            merged.append([low, high])
    return [str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in merged]


def _covers(specs, port):
    return any(lo <= port <= hi for lo, hi in (port_span(s) for s in specs))


def normalise_allow(entries):
    """firewall_allow → [{port, proto, sources: {ipv4, ipv6}, anywhere}]."""
    out = []
    for i, entry in enumerate(entries or []):
        where = f"firewall_allow[{i}]"
        if not isinstance(entry, dict) or "port" not in entry:
            raise ValueError(f"{where}: needs a port (and optionally proto, sources)")
        low, high = port_span(entry["port"])
        proto = str(entry.get("proto") or "tcp")
        if proto not in ("tcp", "udp"):
            raise ValueError(f"{where}: proto {proto!r} is not tcp or udp")
        try:
            sources = normalise_subnets(entry.get("sources") or [])
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from exc
        out.append({"port": str(low) if low == high else f"{low}-{high}", "proto": proto,
                    "sources": sources, "anywhere": not (sources["ipv4"] or sources["ipv6"])})
    return out


def _waived(listener, waive):
    for item in waive or []:
        item = str(item)
        if "/" in item:
            port, proto = item.split("/", 1)
            if proto == listener["proto"] and _covers([port], listener["port"]):
                return True
        elif item.isdigit() or "-" in item:
            if _covers([item], listener["port"]):
                return True
        elif item in listener["processes"]:
            return True
    return False


def cut_listeners(listening, policy, restricted, by_design, allow, waive):
    """The listening services a ruleset would cut, as [{port, proto, processes}].

    restricted: [{port, proto}] rdmaprov's own ports (rendezvous, NCCL's range, RoCEv2), refused
    to hosts outside the cluster in both policies, so anything else listening there is cut.
    by_design: [{port, proto}] opened on purpose to their own clients (SSH, Slurm between
    cluster hosts). Under deny every other listener is cut. An allow entry or a waiver (PORT,
    PORT/PROTO or a process name) covers a listener."""
    if policy not in POLICIES:
        raise ValueError(f"firewall_policy {policy!r} is not one of {', '.join(POLICIES)}")
    cut = []
    for lst in listening or []:
        def hit(specs, lst=lst):
            return any(s["proto"] == lst["proto"] and _covers([s["port"]], lst["port"])
                       for s in specs)
        if hit(allow) or _waived(lst, waive):
            continue
        if hit(restricted) or (policy == "deny" and not hit(by_design)):
            cut.append(lst)
    return cut


def describe_listeners(items):
    """[{port, proto, processes}] → "9100/tcp (python3), 68/udp (dhclient)"."""
    return ", ".join(f"{i['port']}/{i['proto']} ({', '.join(i['processes']) or 'owner unknown'})"
                     for i in items)


# The settings the plan reads: the firewall_* variables without the prefix, the host's name and
# its connection (the probe's action plugin fills them from the role's variables and the play).
SETTINGS = ("backend", "policy", "cluster_subnets", "allow_control_host", "ssh_sources",
            "ssh_port", "rendezvous_ports", "nccl_port_range", "roce_udp_port", "slurm", "allow",
            "waive", "host", "connection", "nft_extra_rules", "nft_dir", "nft_unit_name", "managed",
            "nft_table", "firewalld_policy", "rollback_seconds", "check_mode")


def plan(probe, settings, firewalld_policy=None):
    """The probe of one host + the role's settings → everything the backends render and the
    preflight checks: sources, port sets, Slurm's ports, allow entries, what would be cut, what
    to refuse, and each backend's changes (firewalld_policy: the policy's name, whose rules the
    probe read)."""
    firewalld_policy = firewalld_policy or settings.get("firewalld_policy")
    backend, reason = pick_backend(settings["backend"], probe["firewalld_active"],
                                   probe["ufw_active"], probe["nft_present"],
                                   probe.get("ufw_present", True))
    policy = settings["policy"]
    subnets = normalise_subnets(settings["cluster_subnets"])
    control = [probe["control_ip"]] if settings["allow_control_host"] and probe["control_ip"] \
        else []
    ssh_only = normalise_subnets(list(settings["ssh_sources"] or []) + control)
    low, high = port_range(settings["nccl_port_range"], probe["local_port_range"])
    udp_port = int(settings["roce_udp_port"])
    slurm = []
    if settings["slurm"] == "auto":
        try:
            slurm = slurm_ports(probe["slurm_conf"], probe["slurm_installed"])
        except ValueError as exc:
            raise ValueError(f"{probe.get('slurm_conf_path') or 'slurm.conf'}: {exc}") from exc
    restricted_tcp = merge_ports([*settings["rendezvous_ports"], f"{low}-{high}"])
    ssh = str(int(settings["ssh_port"]))
    cluster_tcp = merge_ports([ssh, *restricted_tcp, *slurm])
    allow = normalise_allow(settings["allow"])
    listening = listeners(probe.get("proc_net"), probe.get("socket_owners"))
    restricted = [{"port": p, "proto": "tcp"} for p in restricted_tcp]
    restricted.append({"port": str(udp_port), "proto": "udp"})
    by_design = [{"port": p, "proto": "tcp"} for p in [ssh, *slurm]]
    cut = cut_listeners(listening, policy, restricted, by_design, allow, settings["waive"])
    out = {
        "backend": backend, "backend_reason": reason, "policy": policy,
        "subnets": subnets, "ssh_only": ssh_only, "ssh_port": ssh,
        "cluster_tcp": cluster_tcp, "restricted_tcp": restricted_tcp, "udp_port": str(udp_port),
        "slurm_ports": slurm, "allow": allow, "listening": listening,
        "cut": cut, "cut_text": describe_listeners(cut),
        "ufw_active": probe["ufw_active"],
        "nft_table_present": (probe.get("nft_table") or {}).get("rc") == 0,
        "live_hash": live_hash((probe.get("nft_table") or {}).get("stdout")),
    }
    out["firewalld_rules"] = firewalld_rules(out)
    out["ufw_rules"] = ufw_rules(out)
    fwd = probe.get("firewalld_policy")
    out["firewalld_changes"] = firewalld_changes(
        out, firewalld_policy, *(t["stdout"] if t["rc"] == 0 else None
                                 for t in (fwd["permanent"], fwd["runtime"]))
    ) if backend == "firewalld" and fwd and firewalld_policy else []
    # What --check reports for the backends whose commands skip their work under it.
    host = settings["host"]
    out["firewalld_drift"] = (f"{host}: drift: "
                              + "; ".join(" ".join(c) for c in out["firewalld_changes"])
                              if out["firewalld_changes"] else "")
    out["ufw_enable"] = policy == "deny" and not probe["ufw_active"]
    out["ufw_enable_drift"] = (f"{host}: drift: ufw is inactive; firewall_policy=deny switches it on"
                               if out["ufw_enable"] else "")
    out["ufw_missing"] = ufw_missing(out["ufw_rules"], probe.get("ufw_added"))
    out["refusals"], out["nft_cut_refusal"] = refusals(out, probe, settings)
    out.update(nft_state(out, probe, settings))
    out.update(apply_steps(out, settings))
    return out


def admits_control_host(plan_, probe, settings):
    """Never lock Ansible out: the ruleset must admit the control host's SSH. Admitted when
    Ansible is local, when the control host's address is unknown (no SSH session), when
    firewall_allow_control_host opens SSH to it, or when a declared source covers it."""
    control_ip = probe["control_ip"]
    return (settings["connection"] == "local" or control_ip is None
            or bool(settings["allow_control_host"])
            or control_host_allowed(control_ip, plan_["ssh_only"]["ipv4"]
                                    + plan_["ssh_only"]["ipv6"] + plan_["subnets"]["ipv4"]
                                    + plan_["subnets"]["ipv6"]))


def refusals(plan_, probe, settings):
    """What the role refuses before anything changes, one line each: no usable backend;
    nftables without the rollback timer; a ruleset that would not admit the control host; one
    that would cut a listening service. Only a change that tightens the host's policy can cut:
    ufw switched on under deny (known here), or a new nftables ruleset (known once the control
    host has rendered it) → (refusals, the nftables cut refusal to add when the ruleset is new)."""
    host, backend = settings["host"], plan_["backend"]
    out = []
    if not backend:
        out.append(f"{host}: {plan_['backend_reason']}")
    if backend == "nftables" and not probe["systemd_run"]:
        out.append(f"{host}: systemd-run is missing; the nftables backend will not apply a ruleset"
                   " it cannot roll back if the SSH path is lost")
    if backend and not admits_control_host(plan_, probe, settings):
        out.append(f"{host}: firewall_allow_control_host is false and no declared source admits"
                   f" the control host {probe['control_ip']}: this ruleset would lock Ansible out")
    cut = ([f"{host}: firewall_policy={plan_['policy']} would cut these listening services: "
            f"{plan_['cut_text']}; allow each one (firewall_allow) or waive it (firewall_waive)"]
           if backend and plan_["cut"] else [])
    if backend == "ufw" and plan_["policy"] == "deny" and not probe["ufw_active"]:
        out += cut
    return out, cut if backend == "nftables" else []


# --- The nftables table, its boot unit and what differs ---------------------------------------
def paths(settings):
    """The files the nftables backend keeps, under firewall_nft_dir, and its boot unit's."""
    base = str(settings["nft_dir"])
    return {"nft_file": f"{base}/firewall.nft", "nft_candidate": f"{base}/firewall.nft.new",
            "nft_rollback": f"{base}/firewall.rollback.nft",
            "unit_file": f"/etc/systemd/system/{settings['nft_unit_name']}"}


def _sets(plan_):
    out = []
    for fam, typ in (("ipv4", "ipv4_addr"), ("ipv6", "ipv6_addr")):
        for name, elements in ((f"cluster_{fam}", plan_["subnets"][fam]),
                               (f"ssh_{fam}", plan_["ssh_only"][fam])):
            if elements:
                out += [f"\tset {name} {{", f"\t\ttype {typ}", "\t\tflags interval",
                        f"\t\telements = {{ {', '.join(elements)} }}", "\t}"]
    return out


def nft_ruleset(plan_, table, extra_rules, managed=state_drift.MANAGED):
    """The table inet TABLE the nftables backend loads, one transaction that replaces only it, with
    the sha1 of its own text (the placeholder in its comment) → (text, sha1)."""
    deny = plan_["policy"] == "deny"
    rules = [f"\t\t{r}" for r in extra_rules or []]
    rules += ["\t\tct state established,related accept"]
    rules += ["\t\tct state invalid drop"] if deny else []
    rules += ['\t\tiif "lo" accept',
              '\t\t# ICMP carries PMTU ("fragmentation needed") and the net_mtu DF pings;'
              " ICMPv6 also ND.",
              "\t\tmeta l4proto { icmp, ipv6-icmp } accept"]
    for fam, ipk in (("ipv4", "ip"), ("ipv6", "ip6")):
        if plan_["ssh_only"][fam]:
            rules.append(f"\t\t{ipk} saddr @ssh_{fam} tcp dport {plan_['ssh_port']} accept")
        if plan_["subnets"][fam]:
            rules += [f"\t\t{ipk} saddr @cluster_{fam} tcp dport "
                      f"{{ {', '.join(plan_['cluster_tcp'])} }} accept",
                      f"\t\t{ipk} saddr @cluster_{fam} udp dport {plan_['udp_port']} accept"]
    for a in plan_["allow"]:
        if a["anywhere"]:
            rules.append(f"\t\t{a['proto']} dport {a['port']} accept")
            continue
        rules += [f"\t\t{ipk} saddr {{ {', '.join(a['sources'][fam])} }} {a['proto']} dport "
                  f"{a['port']} accept"
                  for fam, ipk in (("ipv4", "ip"), ("ipv6", "ip6")) if a["sources"][fam]]
    what = ("everything not accepted below is dropped" if deny else
            "only rdmaprov's own ports are refused to hosts outside the cluster; the rest passes")
    text = "\n".join([
        state_drift.header(managed, " (firewall)"),
        f"# Replaces only table inet {table}, in one transaction; other tables (the",
        "# host's own, a container runtime's) are left alone. Declaring the table first makes the"
        " delete",
        "# valid when it does not exist yet.",
        f"# firewall_policy={plan_['policy']}: {what}.",
        f"table inet {table}", f"delete table inet {table}", f"table inet {table} {{",
        '\tcomment "rdmaprov sha1=@@HASH@@"', *_sets(plan_), "",
        "\tchain input {",
        "\t\ttype filter hook input priority filter - 10; "
        f"policy {'drop' if deny else 'accept'};",
        *rules,
        "\t\t# rdmaprov's own ports, to anyone else: refused at once, so torch/NCCL fail fast"
        " instead",
        "\t\t# of hanging in timeouts.",
        f"\t\ttcp dport {{ {', '.join(plan_['restricted_tcp'])} }} reject with tcp reset",
        f"\t\tudp dport {plan_['udp_port']} drop", "\t}", "}", ""])
    digest = state_drift.sha1(text.encode("utf-8"))
    return text.replace("@@HASH@@", digest), digest


def nft_unit(table, nft_file, managed=state_drift.MANAGED):
    """The unit that loads the persisted table at boot, after the distribution's nftables.service."""
    t, f = systemd_word(table), systemd_word(nft_file)
    return "\n".join([
        state_drift.header(managed, " (firewall)"),
        f"# Loads table inet {t} at boot, after the distribution's nftables.service",
        "# (whose `flush ruleset` would otherwise remove it), and again whenever that service"
        " restarts.",
        "[Unit]", "Description=rdmaprov: cluster firewall table", "DefaultDependencies=no",
        "After=nftables.service", "PartOf=nftables.service", "Before=network-pre.target",
        "Wants=network-pre.target", f"ConditionPathExists={f}", "", "[Service]",
        "Type=oneshot", "RemainAfterExit=yes", f"ExecStart=/usr/sbin/nft -f {f}",
        "# The table's name is the shell's $1 ($$ is systemd's escape of $), never part of its"
        " script.",
        "ExecStop=/bin/sh -c 'nft list table inet \"$$1\" >/dev/null 2>&1 && nft delete table"
        f" inet \"$$1\" || true' rdmaprov-firewall {t}",
        "", "[Install]", "WantedBy=multi-user.target", "WantedBy=nftables.service", ""])


def ufw_missing(rules, added):
    """The rules (of ufw_rules) that `ufw show added` (added: its {rc, stdout}, None where ufw
    is not installed) does not print: every rule where it could not be read."""
    have = ([ln.strip() for ln in added["stdout"].splitlines()]
            if added and added.get("rc") == 0 else [])
    return [r for r in rules if r["added"] not in have]


def drift(plan_, nft_differs):
    """Whether the role has anything to do beyond the probe: no usable backend (refused); the
    nftables table, its files or unit differ (nft_differs); a firewalld policy change; a ufw rule
    that is missing, or ufw to switch on."""
    backend = plan_["backend"]
    if backend == "nftables":
        return nft_differs
    if backend == "firewalld":
        return bool(plan_["firewalld_changes"])
    if backend == "ufw":
        return bool(plan_["ufw_missing"]) or plan_["ufw_enable"]
    return True


def nft_state(plan_, probe, settings):
    """The nftables ruleset and boot unit as they must be, the rollback ruleset (the live table,
    restored by declare-then-delete whether or not ours exists by then) and what differs: a new
    ruleset (the live table's rules, sets and comment are not the wanted ones: nft_differences,
    one line each; a flushed chain, a deleted rule or set element is one), the persisted and
    candidate rulesets, the unit and its enablement (file_drift), and whether the role has
    anything to do at all (drift: firewalld and ufw always go through their tasks). errors: the
    refusals, with the nftables cut refusal where the ruleset is new."""
    table = settings["nft_table"]
    where = paths(settings)
    managed = settings.get("managed") or state_drift.MANAGED
    rules, digest = nft_ruleset(plan_, table, settings["nft_extra_rules"], managed)
    unit = nft_unit(table, where["nft_file"], managed)
    live = probe.get("nft_table") or {}
    rollback = (f"table inet {table}\ndelete table inet {table}\n"
                f"{live.get('stdout') or '' if live.get('rc') == 0 else ''}\n")
    owned = {"owner": "root", "group": "root"}
    files = [{"path": where["nft_file"], "content": rules, "mode": "0600", **owned},
             {"path": where["nft_candidate"], "content": rules, "mode": "0600", **owned},
             {"path": where["unit_file"], "content": unit, "mode": "0644", **owned}]
    # The live table against the wanted one as this host's nft prints it (the probe's
    # nft_reference, made from this very text: its sha1 says so), else the rendered text.
    ref = probe.get("nft_reference") or {}
    by_nft = ref.get("rc") == 0 and ref.get("sha1") == digest
    wanted_listing = ref["stdout"] if by_nft else rules
    differences = nft_differences(live.get("stdout") or "" if live.get("rc") == 0 else None,
                                  wanted_listing, table)
    new = bool(differences)
    file_drift = state_drift.compare(probe.get("file_state") or {}, probe.get("unit_state") or {},
                                     files, [settings["nft_unit_name"]])
    return {**where, "nft_rules": rules, "nft_hash": digest, "nft_unit": unit,
            "nft_rollback_rules": rollback, "new_ruleset": new, "file_drift": file_drift,
            "nft_differences": differences, "nft_wanted_listing": wanted_listing,
            "nft_wanted_from": "nft" if by_nft else "the rendered text",
            "drift": drift(plan_, new or bool(file_drift)),
            "errors": plan_["refusals"] + (plan_["nft_cut_refusal"] if new else [])}


# The transient unit whose timer restores the previous table unless Ansible reconnects.
ROLLBACK_UNIT = "rdmaprov-firewall-rollback"


def apply_steps(plan_, settings):
    """What the role's tasks and its firewall_apply action run, as argv lists (no shell), for a
    real run or --check (settings check_mode):

    commands: the firewall-cmd calls (none under --check, which reports them instead) or the
    `ufw allow` of each missing rule (`ufw --dry-run allow` under --check: ufw answers the same)
    and, under firewall_policy=deny, `ufw --force enable` (reported under --check);
    check_report: what --check reports instead of running; refusal: the refusals as one line;
    nft_apply: a new nftables ruleset to load behind the rollback timer; persist_nft: whether the
    confirmed candidate is persisted (not under --check while the ruleset is still to load);
    the rollback timer's commands (nft_clear_timer, nft_arm, nft_disarm), the detached load
    (nft_load, the path the shell's $1) and how long a rescue waits for the rollback
    (rollback_wait)."""
    check = bool(settings.get("check_mode"))
    backend = plan_["backend"]
    commands, report = [], []
    if backend == "firewalld":
        commands = [] if check else plan_["firewalld_changes"]
        report = [plan_["firewalld_drift"]] if check and plan_["firewalld_changes"] else []
    elif backend == "ufw":
        dry = ["--dry-run"] if check else []
        commands = [["ufw", *dry, *r["args"]] for r in plan_["ufw_missing"]]
        if plan_["ufw_enable"] and check:
            report.append(plan_["ufw_enable_drift"])
        elif plan_["ufw_enable"]:
            commands.append(["ufw", "--force", "enable"])
    unit, seconds = ROLLBACK_UNIT, int(settings.get("rollback_seconds") or 45)
    return {
        "check_mode": check, "commands": commands, "check_report": report,
        "refusal": "; ".join(plan_["errors"]), "nft_table": settings["nft_table"],
        "nft_dir": str(settings["nft_dir"]), "nft_unit_name": settings["nft_unit_name"],
        "nft_apply": backend == "nftables" and plan_["new_ruleset"],
        "persist_nft": not check or not plan_["new_ruleset"],
        "nft_clear_timer": ["systemctl", "stop", f"{unit}.timer", f"{unit}.service"],
        "nft_arm": ["systemd-run", f"--unit={unit}", f"--on-active={seconds}s",
                    "--timer-property=AccuracySec=1s",
                    "--description=rdmaprov firewall rollback (fires unless Ansible reconnects)",
                    "--property=SyslogIdentifier=rdmaprov-firewall",
                    "nft", "-f", plan_["nft_rollback"]],
        "nft_load": ["/bin/sh", "-c", 'sleep 2; exec nft -f "$1"', "rdmaprov-firewall",
                     plan_["nft_candidate"]],
        "nft_disarm": ["systemctl", "stop", f"{unit}.timer"],
        "rollback_wait": seconds + 60,
    }


def command_changed(argv, stdout):
    """Whether one of the plan's commands changed the host: ufw skips a rule it has already
    (and says so, under --dry-run too); a firewall-cmd call is planned only for a difference."""
    return not (argv[0] == "ufw" and "Skipping" in (stdout or ""))


def rollback_report(plan_, host, failed_task, failed_msg, table_rc):
    """The line a rolled-back nftables apply fails the host with: the task that failed and why,
    whether the previous table is back (table_rc: `nft list table`'s rc after the rollback) and
    where the candidate is kept."""
    return (f"{host}: firewall ROLLED BACK. The new ruleset was not confirmed ({failed_task}: "
            f"{failed_msg}); the rollback timer restored the previous table inet "
            f"{plan_['nft_table']} ({'restored' if table_rc == 0 else 'absent, as before'}) and "
            f"nothing was persisted. Candidate kept in {plan_['nft_candidate']} for inspection.")


def _join(items, sep, empty):
    return sep.join(items) or empty


def verify(plan_, settings, live, check, pending):
    """The rules read back after applying, held to the plan → {applies, ok, msg, pending}; msg
    is what the role's assert reports either way (under --check, the pending change).

    live: the backend's answer ({rc, stdout, stderr}) of `nft list table inet T`,
    `firewall-cmd --policy=P --list-rich-rules` or `ufw show added`; None where it was not read.
    check: --check, under which only nftables is read back, and only when its ruleset is not
    pending (pending: the live table is not the rendered one), which is reported instead."""
    host, backend = settings["host"], plan_["backend"]
    table, policy_name = settings["nft_table"], settings["firewalld_policy"]
    out = {"applies": False, "ok": True, "msg": "", "pending": ""}
    if backend == "nftables" and check and pending:
        why = "; ".join(plan_.get("nft_differences") or [
            f"live table inet {table} is "
            f"{'not the wanted ruleset' if plan_['nft_table_present'] else 'absent'}"])
        out["pending"] = out["msg"] = f"{host}: drift: {why}; a real run loads it"
        return out
    if check and backend != "nftables":
        out["msg"] = f"{host}: the {backend} rules are read back by a real run"
        return out
    if live is None:
        return out
    out["applies"] = True
    if live["rc"] != 0:
        what = {"nftables": f"nft list table inet {table}",
                "firewalld": f"firewall-cmd --policy={policy_name} --list-rich-rules",
                "ufw": "ufw show added"}[backend]
        out.update(ok=False, msg=f"{host}: {what} failed (rc {live['rc']}): "
                                 f"{live['stderr'].strip()}")
        return out
    if backend == "nftables":
        # The table read back against the wanted one, as the probe compared them.
        differences = nft_differences(live["stdout"], plan_["nft_wanted_listing"], table)
        rules = sum(len(c["rules"]) for c in
                    (nft_listing(live["stdout"], table) or {"chains": {}})["chains"].values())
        ok = not differences
        msg = (f"{host}: table inet {table} is not the wanted one: {'; '.join(differences)}"
               if not ok else
               f"{host}: table inet {table}: {rules} rules, as wanted, "
               f"firewall_policy={plan_['policy']}; "
               f"TCP {','.join(plan_['cluster_tcp'])} and UDP {plan_['udp_port']} open to "
               f"{_join(plan_['subnets']['ipv4'] + plan_['subnets']['ipv6'], ', ', 'nobody')}; "
               "SSH also from "
               f"{_join(plan_['ssh_only']['ipv4'] + plan_['ssh_only']['ipv6'], ', ', '-')}; "
               f"Slurm {_join(plan_['slurm_ports'], ',', 'not on this host')}")
        out.update(ok=ok, msg=msg)
        return out
    have = [ln.strip() for ln in live["stdout"].splitlines()]
    if backend == "firewalld":
        want = plan_["firewalld_rules"]
        missing = [r for r in want if r not in have]
        out.update(ok=not missing, msg=(
            f"{host}: firewalld policy {policy_name} lacks: {'; '.join(missing)}" if missing
            else f"{host}: firewalld policy {policy_name}: {len(want)} rules in place"))
        return out
    want = [r["added"] for r in plan_["ufw_rules"]]
    missing = [r for r in want if r not in have]
    state = ("active" if plan_["ufw_active"] or plan_["policy"] == "deny"
             else "inactive (firewall_policy=scoped leaves it as it was)")
    out.update(ok=not missing, msg=(f"{host}: ufw lacks: {'; '.join(missing)}" if missing else
                                    f"{host}: ufw: {len(want)} rdmaprov rules; ufw {state}"))
    return out
