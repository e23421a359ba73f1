# Copyright: rdmaprov developers
# Apache-2.0
"""NCCL settings derived from the `rdma` fact, and a lint of NCCL_* variables against it.

Pure functions (stdlib only): the rdma_facts module returns `nccl_env` from them, the nccl_env
role writes /etc/nccl.conf from that, and `rdmaprov probe` prints and lints with the same code.
"""

from __future__ import annotations

import re

from ansible_collections.rdmaprov.cluster.plugins.module_utils import (
    driver_plan,
    nccl_names,
    rdma_ports,
)


def _ports(rdma: dict | None):
    for dev in (rdma or {}).get("devices", []):
        for port in dev.get("ports", []):
            yield dev["name"], port


def is_bond(device: str, port: dict) -> bool:
    """RoCE LAG devices (mlx5_bond_N) and ports whose netdev is or belongs to a bond: these
    carry a host's front-end traffic, not the GPU fabric's rails."""
    return "_bond_" in device or bool(port.get("bond"))


def roce_v2_ipv4_index(port: dict) -> int | None:
    """The lowest GID index holding a RoCE v2, IPv4-mapped GID: what NCCL_IB_GID_INDEX needs
    on RoCE (v1 is not routable; link-local and IPv6 GIDs do not match IPv4 peers)."""
    for gid in sorted(port.get("gids", []), key=lambda g: g["index"]):
        if gid.get("type") == "RoCE v2" and rdma_ports.gid_kind(gid["gid"]) == "ipv4-mapped":
            return gid["index"]
    return None


def fabric_ports(rdma: dict | None) -> tuple[list[tuple[str, dict]], list[str]]:
    """(ports NCCL should use, notes on the ports left out and why)."""
    chosen, notes = [], []
    for device, port in _ports(rdma):
        name = f"{device}:{port['port']}"
        if is_bond(device, port):
            notes.append(f"{name} left out: bond {port.get('bond') or device} (front-end network)")
        elif port.get("state") != "ACTIVE":
            notes.append(f"{name} left out: state {port.get('state')}, "
                         f"physical state {port.get('phys_state')}")
        elif port.get("link_layer") == "Ethernet" and roce_v2_ipv4_index(port) is None:
            notes.append(f"{name} left out: RoCE port without a RoCE v2 IPv4 GID "
                         f"(no IPv4 address on {port.get('netdev') or 'its netdev'}?)")
        else:
            chosen.append((device, port))
    return chosen, notes


def derive(rdma: dict | None, ib_tc: int | None = None, socket_ifname: str | None = None) -> dict:
    """{"env": {NAME: value}, "notes": [...]}: what /etc/nccl.conf should say on this host.

    socket_ifname: the interface for NCCL's bootstrap/socket traffic (socket_ifname()'s
    choice); ib_tc: the RoCE traffic class (the roce_qos role's
    roce_qos_nccl_ib_tc), used only when a RoCE port is in use.
    """
    env: dict[str, str] = {}
    chosen, notes = fabric_ports(rdma)
    if socket_ifname:
        # '=' asks NCCL for this exact interface, not every name starting with it.
        env["NCCL_SOCKET_IFNAME"] = "=" + socket_ifname
    if not chosen:
        devices = (rdma or {}).get("devices") or []
        if not devices:
            reason = ((rdma or {}).get("kernel") or {}).get("reason") or "no RDMA devices"
            notes.insert(0, f"no RDMA devices: {reason}; NCCL will use sockets")
        else:
            notes.insert(0, "no usable RDMA port (all down, bonded or without a RoCE v2 IPv4 "
                            "GID); NCCL will use sockets")
        return {"env": env, "notes": notes}
    # '=' makes each name exact: a bare 'mlx5_1' would also select mlx5_10 ... mlx5_19.
    env["NCCL_IB_HCA"] = "=" + ",".join(f"{d}:{p['port']}" for d, p in chosen)
    roce = [(d, p) for d, p in chosen if p.get("link_layer") == "Ethernet"]
    if roce:
        indices = {f"{d}:{p['port']}": roce_v2_ipv4_index(p) for d, p in roce}
        if len(set(indices.values())) == 1:
            env["NCCL_IB_GID_INDEX"] = str(next(iter(indices.values())))
        else:
            # One index cannot fit every port; NCCL 2.21+ finds each port's GID by family/version.
            env["NCCL_IB_ADDR_FAMILY"] = "AF_INET"
            env["NCCL_IB_ROCE_VERSION_NUM"] = "2"
            notes.append("RoCE v2 IPv4 GIDs sit at different indices ("
                         + ", ".join(f"{k}={v}" for k, v in indices.items())
                         + "): NCCL_IB_ADDR_FAMILY/NCCL_IB_ROCE_VERSION_NUM set instead of "
                           "NCCL_IB_GID_INDEX (needs NCCL 2.21 or newer)")
        if ib_tc is not None:
            env["NCCL_IB_TC"] = str(int(ib_tc))
    return {"env": env, "notes": notes}


def socket_ifname(given: str | None, facts: dict | None = None, address: str | None = None) -> str:
    """The interface for NCCL's socket (bootstrap) traffic: the one given, the one carrying the
    Ansible connection (preflight's finding, ansible_facts.rdmaprov.ssh_interface), the default
    IPv4 route's, or the one holding ``address`` (the address Ansible connects to: a lab has no
    default route) in ``facts`` (Ansible's network facts); "" when none is found."""
    facts = facts or {}
    return (given or (facts.get("rdmaprov") or {}).get("ssh_interface")
            or (facts.get("default_ipv4") or {}).get("interface")
            or driver_plan.interface_holding(facts, address or "") or "")


def ib_tc(own: int | None, roce_qos: int | None = None) -> int | None:
    """NCCL_IB_TC's value: ``own`` (nccl_env_ib_tc) when it is set (0 or more), else the roce_qos
    role's roce_qos_nccl_ib_tc when that is, else None (no NCCL_IB_TC)."""
    for value in (own, roce_qos):
        if value is not None and int(value) >= 0:
            return int(value)
    return None


def declared(socket_ifname: str | None, extra: dict | None = None) -> dict[str, tuple[str, str]]:
    """{NAME: (value, the variable it comes from)}: what the nccl_env role writes into
    /etc/nccl.conf whatever the host's facts (derive()'s and conf()'s rule, with the inventory's
    nccl_env_socket_ifname and nccl_env_extra): what the control host can know of a host's
    file before contacting it."""
    out: dict[str, tuple[str, str]] = {}
    if socket_ifname:
        out["NCCL_SOCKET_IFNAME"] = (derive(None, socket_ifname=socket_ifname)["env"]
                                     ["NCCL_SOCKET_IFNAME"], "nccl_env_socket_ifname")
    for name, value in (extra or {}).items():
        out[str(name)] = (str(value), f"nccl_env_extra.{name}")
    return out


def conf(derived: dict, extra: dict | None = None) -> dict:
    """What /etc/nccl.conf holds: ``settings`` (the derived env with ``extra`` on top),
    ``lines`` (NAME=value, sorted by name as the role's template writes them) and ``summary``
    (what it sets, and the first note)."""
    settings = {**derived["env"], **{str(k): str(v) for k, v in (extra or {}).items()}}
    lines = [f"{k}={v}" for k, v in sorted(settings.items(), key=lambda kv: kv[0].lower())]
    summary = "sets " + (", ".join(settings) or "no NCCL variable")
    if derived.get("notes"):
        summary += f" ({derived['notes'][0]})"
    return {"settings": settings, "lines": lines, "summary": summary}


# --- lint --------------------------------------------------------------------------------

def _finding(level: str, name: str, message: str) -> dict:
    return {"level": level, "variable": name, "message": message}


def parse_env_text(text: str) -> dict[str, str]:
    """NAME=value lines as /etc/nccl.conf holds them (comments and blank lines skipped)."""
    env = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        env[name.strip().removeprefix("export ").strip()] = value.strip().strip("'\"")
    return env


def _selector(value: str) -> tuple[bool, bool, list[str]]:
    """NCCL's list syntax for NCCL_IB_HCA / NCCL_SOCKET_IFNAME: ^ excludes, = is exact."""
    exclude = value.startswith("^")
    value = value[1:] if exclude else value
    exact = value.startswith("=")
    value = value[1:] if exact else value
    return exclude, exact, [v.strip() for v in value.split(",") if v.strip()]


def _matches(entry: str, name: str, exact: bool) -> bool:
    return name == entry if exact else name.startswith(entry)


def lint(env: dict[str, str], rdma: dict | None = None,
         interfaces: list[str] | None = None) -> list[dict]:
    """Findings ({level: error|warning|info, variable, message[, fix]}) for NCCL_* variables:
    names (nccl_names.name_findings, the rule explain uses too), and values that contradict this
    host's facts (when rdma is given)."""
    findings = [{k: d[k] for k in ("level", "variable", "message", "fix")}
                for d in nccl_names.name_findings(env)]
    if rdma is not None:
        findings += _lint_hca(env, rdma)
        findings += _lint_gid(env, rdma)
        findings += _lint_switches(env, rdma)
    if interfaces is not None:
        findings += _lint_ifname(env, interfaces)
    for name in ("NCCL_IB_GID_INDEX", "NCCL_IB_TC", "NCCL_IB_SL", "NCCL_IB_TIMEOUT",
                 "NCCL_IB_RETRY_CNT"):
        if name in env and not re.fullmatch(r"-?\d+", env[name].strip()):
            findings.append(_finding("error", name, f"{name}={env[name]!r} is not an integer"))
    if "NCCL_IB_TC" in env and env["NCCL_IB_TC"].strip().isdigit() \
            and int(env["NCCL_IB_TC"]) > 255:
        findings.append(_finding("error", "NCCL_IB_TC", "NCCL_IB_TC is a traffic class byte "
                                 "(0-255, DSCP << 2 plus ECN)"))
    return findings


def _lint_hca(env: dict[str, str], rdma: dict) -> list[dict]:
    value = env.get("NCCL_IB_HCA", "").strip()
    if not value:
        return []
    exclude, exact, entries = _selector(value)
    if exclude:
        return []
    ports = {(d, str(p["port"])): p for d, p in _ports(rdma)}
    devices = sorted({d for d, _port in ports})
    out = []
    for entry in entries:
        dev, _sep, port = entry.partition(":")
        hits = [(d, n) for d, n in ports if _matches(dev, d, exact) and (not port or n == port)]
        if not hits:
            out.append(_finding("error", "NCCL_IB_HCA",
                                f"NCCL_IB_HCA names {entry}, which is not on this host "
                                f"(devices: {', '.join(devices) or 'none'})"))
            continue
        if not exact and len({d for d, _port in hits}) > 1:
            out.append(_finding("warning", "NCCL_IB_HCA",
                                f"NCCL_IB_HCA entry {entry} is a prefix and selects "
                                f"{', '.join(sorted({d for d, _port in hits}))}; start the list with "
                                "'=' to name devices exactly"))
        for d, n in hits:
            p = ports[(d, n)]
            if p.get("state") != "ACTIVE":
                out.append(_finding("error", "NCCL_IB_HCA",
                                    f"NCCL_IB_HCA selects {d}:{n}, which is {p.get('state')} "
                                    f"({p.get('phys_state')})"))
            elif is_bond(d, p):
                out.append(_finding("warning", "NCCL_IB_HCA",
                                    f"NCCL_IB_HCA selects {d}:{n}, a bond "
                                    f"({p.get('bond') or d}) rather than a fabric rail"))
    return out


def _selected_ports(env: dict[str, str], rdma: dict) -> list[tuple[str, dict]]:
    value = env.get("NCCL_IB_HCA", "").strip()
    ports = list(_ports(rdma))
    if not value:
        return [(d, p) for d, p in ports if p.get("state") == "ACTIVE"]
    exclude, exact, entries = _selector(value)

    def hit(d: str, p: dict) -> bool:
        for entry in entries:
            dev, _sep, port = entry.partition(":")
            if _matches(dev, d, exact) and (not port or port == str(p["port"])):
                return True
        return False

    return [(d, p) for d, p in ports if hit(d, p) != exclude and p.get("state") == "ACTIVE"]


def _lint_gid(env: dict[str, str], rdma: dict) -> list[dict]:
    raw = env.get("NCCL_IB_GID_INDEX", "").strip()
    if not re.fullmatch(r"\d+", raw):
        return []
    index = int(raw)
    out = []
    for d, p in _selected_ports(env, rdma):
        if p.get("link_layer") != "Ethernet":
            continue
        gid = next((g for g in p.get("gids", []) if g["index"] == index), None)
        best = roce_v2_ipv4_index(p)
        hint = f"; the RoCE v2 IPv4 GID is at index {best}" if best is not None else ""
        where = f"{d}:{p['port']}"
        if gid is None:
            out.append(_finding("error", "NCCL_IB_GID_INDEX",
                                f"NCCL_IB_GID_INDEX={index}: {where} has no GID there{hint}"))
        elif gid.get("type") != "RoCE v2":
            out.append(_finding("error", "NCCL_IB_GID_INDEX",
                                f"NCCL_IB_GID_INDEX={index}: on {where} that GID is "
                                f"{gid.get('type')}, which is not routable{hint}"))
        elif rdma_ports.gid_kind(gid["gid"]) == "link-local":
            out.append(_finding("error", "NCCL_IB_GID_INDEX",
                                f"NCCL_IB_GID_INDEX={index}: on {where} that GID is link-local "
                                f"({gid['gid']}){hint}"))
        elif rdma_ports.gid_kind(gid["gid"]) == "ipv6":
            out.append(_finding("warning", "NCCL_IB_GID_INDEX",
                                f"NCCL_IB_GID_INDEX={index}: on {where} that GID is IPv6; every "
                                f"peer needs IPv6 on its fabric ports{hint}"))
    return out


def _lint_switches(env: dict[str, str], rdma: dict) -> list[dict]:
    active = [f"{d}:{p['port']}" for d, p in _ports(rdma)
              if p.get("state") == "ACTIVE" and not is_bond(d, p)]
    out = []
    if env.get("NCCL_IB_DISABLE", "").strip() == "1" and active:
        out.append(_finding("warning", "NCCL_IB_DISABLE",
                            f"NCCL_IB_DISABLE=1 turns RDMA off although {', '.join(active)} "
                            "is ACTIVE: NCCL will use sockets"))
    if env.get("NCCL_NET", "").strip().lower() == "socket" and active:
        out.append(_finding("warning", "NCCL_NET",
                            "NCCL_NET=Socket forces sockets although RDMA ports are ACTIVE"))
    return out


def _lint_ifname(env: dict[str, str], interfaces: list[str]) -> list[dict]:
    value = env.get("NCCL_SOCKET_IFNAME", "").strip()
    if not value:
        return []
    exclude, exact, entries = _selector(value)
    if exclude:
        return []
    matched = [i for i in interfaces if any(_matches(e, i, exact) for e in entries)]
    if matched:
        return []
    return [_finding("error", "NCCL_SOCKET_IFNAME",
                     f"NCCL_SOCKET_IFNAME={value} names no interface on this host "
                     f"(interfaces: {', '.join(sorted(interfaces)) or 'none'})")]


# --- the nccl_env role's settings and its read-back ------------------------------------------

# The nccl_env role's settings that rdma_facts' option settings takes: its variables without the
# nccl_env_ prefix and the address Ansible connects to (the play's). Its action plugin fills
# them, and adds 'facts' (the host's Ansible facts, for the socket interface) and
# 'ib_tc_roce_qos' (the roce_qos role's roce_qos_nccl_ib_tc, where that is set).
SETTINGS = ("use_pyverbs", "socket_ifname", "address", "ib_tc", "extra", "lint_fail",
            "conf_path", "verify")


def role_params(settings: dict) -> dict:
    """rdma_facts' options from the nccl_env role's settings (SETTINGS and the two its action
    adds), as the role's task passed them one by one."""
    roce_qos = settings.get("ib_tc_roce_qos")
    pyverbs = settings["use_pyverbs"]
    if isinstance(pyverbs, bool):  # a bare YAML yes/no
        pyverbs = "yes" if pyverbs else "no"
    if pyverbs not in ("auto", "yes", "no"):
        raise ValueError(f"nccl_env_use_pyverbs must be auto, yes or no, not {pyverbs!r}")
    return {"use_pyverbs": pyverbs,
            "nccl_socket_ifname": settings["socket_ifname"],
            "nccl_socket_facts": settings.get("facts") or {},
            "nccl_socket_address": settings["address"],
            "nccl_ib_tc": int(settings["ib_tc"]),
            "nccl_ib_tc_roce_qos": None if roce_qos in (None, "") else int(roce_qos),
            "nccl_extra": dict(settings.get("extra") or {})}


def conf_check(nccl: dict, text: str | None) -> tuple[bool, str]:
    """Does the NCCL settings file hold every line of ``nccl`` (the `nccl` rdma_facts returned
    with the role's settings: path, lines, summary)? ``text``: the file's content, None when it
    cannot be read. (ok, the one line the role reports)."""
    path = nccl["path"]
    if text is None:
        return False, f"nccl_env: {path} cannot be read"
    have = set(text.split("\n"))
    missing = list(dict.fromkeys(line for line in nccl["lines"] if line not in have))
    if missing:
        return False, f"nccl_env: {path} lacks {missing}"
    return True, f"nccl_env: {path} {nccl['summary']}"
