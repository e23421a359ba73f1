# Copyright: rdmaprov developers
# Apache-2.0
"""The preflight role's plan: its per-host report, the facts it finds missing and what it refuses;
pure functions over what Ansible gathered, so a host without iproute2, a local connection or an
interface called enp1s0f0.100 gives a line that says so instead of a template error.
host_capabilities runs plan() (its preflight option) and returns it.

facts: ansible_facts (min + network subsets, plus ansible_facts.rdma from rdma_facts);
caps: the host_capabilities module's result; connection: driver_plan.connection_interface's.
"""

from __future__ import annotations

from ansible_collections.rdmaprov.cluster.plugins.module_utils import kernel_caps

IPROUTE2 = ("this host has no `ip` command, so Ansible's network facts have no interface list: "
            "install iproute2 (apt-get install iproute2 / dnf install iproute)")


def interface_facts(facts: dict, name: str) -> dict:
    """One interface's facts: Ansible files 'ib0-1' under ib0_1 and keeps 'enp1s0f0.100' as is."""
    for key in (name.replace("-", "_"), name, name.replace("-", "_").replace(".", "_")):
        found = facts.get(key)
        if isinstance(found, dict):
            return found
    return {}


def missing(facts: dict, connection_type: str | None = None) -> list[str]:
    """What this host lacks that later roles read, one line each (empty: nothing)."""
    lacks = []
    if "interfaces" not in facts:
        lacks.append("no network interface facts: " + IPROUTE2)
    return lacks


SYSTEM_PYTHON = "/usr/bin/python3"


def apt_plan(os_family: str, python: dict, check_mode: bool = False) -> dict:
    """What preflight says about apt's Python bindings (python3-apt) on a host: an ``error``
    that stops the run, or a ``note`` for the report; ``usable`` is false when the apt tasks
    cannot run under --check (they are skipped there, and the note says so).

    ``python`` is host_capabilities' python result: the interpreter Ansible runs (executable),
    whether it imports apt (apt), and whether /usr/bin/python3 does (system_apt; None when the
    interpreter is /usr/bin/python3). Ansible's apt module runs under /usr/bin/python3 when that
    one has the bindings, and installs python3-apt itself when the interpreter is the system's
    (not under --check: there it fails, 'python3-apt must be installed to use check mode').
    Under any other interpreter (a venv) it does the same: installs python3-apt with apt-get and
    respawns under /usr/bin/python3 (ansible.modules.apt); only a host without that Python
    cannot be helped."""
    if os_family != "Debian" or python.get("apt") or python.get("system_apt"):
        return {"error": None, "note": None, "usable": True}
    executable = str(python.get("executable") or "?")
    system_there = python.get("system_apt") is False  # /usr/bin/python3 runs, without apt
    if system_there or python.get("is_system", executable == SYSTEM_PYTHON):
        if check_mode:
            note = ("python3-apt: not installed; a real run installs it (Ansible's apt module "
                    "does, at its first use); --check skips the apt tasks that need it")
        else:
            note = "python3-apt: not installed; Ansible's apt module installs it at its first use"
        return {"error": None, "note": note, "usable": not check_mode}
    return {"error": (f"the Python Ansible runs with on this host ({executable}) cannot import "
                      f"apt (python3-apt), which Ansible's apt module needs, and there is no "
                      f"{SYSTEM_PYTHON} to install it for: install python3 and python3-apt, or "
                      "make python3-apt importable by that Python (a venv made with "
                      "--system-site-packages)"),
            "note": None, "usable": False}


def _interfaces_line(facts: dict) -> str:
    if "interfaces" not in facts:
        return "interfaces: unknown (no `ip` command: install iproute2)"
    parts = []
    for name in sorted(n for n in facts["interfaces"] if n != "lo"):
        info = interface_facts(facts, name)
        ipv4 = info.get("ipv4") if isinstance(info.get("ipv4"), dict) else {}
        address = (f"{ipv4['address']}/{ipv4.get('prefix', '?')}" if ipv4.get("address")
                   else "no IPv4")
        parts.append(f"{name} mtu {info.get('mtu', '?')} {address}")
    return "interfaces: " + ("; ".join(parts) or "none but lo")


def _connection_line(facts: dict, connection: dict, connection_type: str | None,
                     rdma_port: bool) -> str:
    if connection_type == "local":
        return "connection: local (Ansible runs on this host: no network path to keep up)"
    if not connection.get("name"):
        why = ("no interface facts" if "interfaces" not in facts else
               "no interface holds the address Ansible connects to, and no default route")
        return f"connection: interface not found ({why})"
    return (f"connection: {connection['name']} {connection.get('address') or ''} "
            f"(from {connection.get('method')})".replace("  ", " ")
            + (", on an RDMA port" if rdma_port else ""))


def _modules_line(caps: dict, rdma: dict) -> str:
    loading = caps.get("modules") or {}
    stack = (rdma.get("kernel") or {}).get("modules") or {}
    text = "kernel modules: "
    if stack:
        text += kernel_caps.summary([{"name": n, **s} for n, s in stack.items()]) + "; "
    if loading.get("can_load"):
        return text + "more can be loaded"
    return text + "cannot load more: " + str(loading.get("reason") or "unknown")


def _gpus_line(caps: dict) -> str:
    g = caps.get("gpus") or {}
    if not g.get("count"):
        return "GPUs: none visible"
    models = ", ".join(sorted(set(g.get("models") or []))) or "NVIDIA"
    return f"GPUs: {g['count']} x {models} (driver {g.get('driver_version') or '?'})"


def _rdma_line(rdma: dict) -> str:
    devices = rdma.get("devices") or []
    if not devices:
        text = "RDMA: none (" + str((rdma.get("kernel") or {}).get("reason") or "no devices") + ")"
    else:
        text = "RDMA: " + "; ".join(
            dev["name"] + "".join(
                f" port {p.get('port')} {p.get('state')} {p.get('rate_gbps')}G "
                f"{p.get('link_layer')}" + (f" {p['netdev']}" if p.get("netdev") else "")
                for p in dev.get("ports") or [])
            for dev in devices)
    if rdma.get("rdma_core_version"):
        text += f"; rdma-core {rdma['rdma_core_version']}"
    if rdma.get("ofed_version"):
        text += f"; {rdma['ofed_version']}"
    return text


def report(facts: dict, caps: dict, connection: dict, connection_type: str | None = None) -> list:
    """The preflight report's lines; what is missing comes first, as 'missing: ...'."""
    rdma = facts.get("rdma") or {}
    iface = caps.get("interface") or {}
    lines = [f"missing: {m}" for m in missing(facts, connection_type)]
    lines += [
        f"{facts.get('distribution', '?')} {facts.get('distribution_version', '?')} "
        f"({facts.get('os_family', '?')} family), kernel {caps.get('kernel_release', '?')}",
        _connection_line(facts, connection or {}, connection_type,
                         bool(iface.get("rdma_backed"))),
        _interfaces_line(facts),
        _modules_line(caps, rdma),
        _gpus_line(caps),
        _rdma_line(rdma),
    ]
    return lines


NO_GPU = "no NVIDIA GPU visible (no /proc/driver/nvidia/gpus/*, no /dev/nvidiaN): is the driver loaded?"


# The preflight role's variables host_capabilities' ``preflight`` option takes (the key without
# the prefix, as role_settings fills it) -> the option's name, and the play's context
# (address, connection). Its action plugin fills each the task does not give.
SETTINGS = {"supported_os_families": "os_families", "supported_distributions": "distributions",
            "require_gpus": "require_gpus", "require_rdma_devices": "require_rdma_devices",
            "report": "report", "address": "ansible_host", "connection": "connection"}
PASSED = "All assertions passed"  # the assert's own success message


def plan(facts: dict, caps: dict, connection: dict, settings: dict,
         check_mode: bool = False) -> dict:
    """The preflight role's decisions for one host: ``errors`` (each a line of the one assert's
    failure; empty: the host passes) and ``error`` (them in one line, "" for none), ``report``
    (the lines of its success message, the apt note last), ``message`` (the assert's success
    message: the report, or the assert's own words where preflight_report is off), ``apt``
    (apt_plan's) and ``connection`` (as given).

    ``settings``: connection_type (ansible_connection), os_families and distributions (the
    supported ones), require_gpus, require_rdma_devices, report (the role's preflight_*
    variables)."""
    connection_type = settings.get("connection_type")
    rdma = facts.get("rdma") or {}
    apt = apt_plan(str(facts.get("os_family")), caps.get("python") or {}, check_mode)
    errors = []
    lacks = [] if connection_type == "local" else missing(facts, connection_type)
    if lacks:
        errors.append("; ".join(lacks) + "; rdmaprov needs them to find the interface carrying"
                      " the connection and keep it up")
    distributions = list(settings.get("distributions") or [])
    if not (facts.get("os_family") in (settings.get("os_families") or [])
            and facts.get("distribution") in distributions):
        errors.append(f"unsupported OS: {facts.get('distribution')} "
                      f"{facts.get('distribution_version')} (family {facts.get('os_family')}); "
                      f"rdmaprov supports {', '.join(distributions)}")
    if settings.get("require_gpus") and not (caps.get("gpus") or {}).get("count"):
        errors.append(NO_GPU)
    if settings.get("require_rdma_devices") and not rdma.get("devices"):
        errors.append("no RDMA device: " + str((rdma.get("kernel") or {}).get("reason")
                                               or "none found in /sys/class/infiniband"))
    if apt["error"]:
        errors.append(apt["error"])
    lines = report(facts, caps, connection, connection_type)
    if apt["note"]:
        lines.append(apt["note"])
    return {"errors": errors, "error": "; ".join(errors), "report": lines,
            "message": lines if settings.get("report", True) else PASSED, "apt": apt,
            "connection": connection}
