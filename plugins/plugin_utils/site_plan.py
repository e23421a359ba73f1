# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""Which of site.yml's roles a host needs, from each role's own probe and plan, read in one task
(the site_plan action): a host whose every role is in line ends its play there, and a host with
anything to do (or refuse, or a probe that failed) runs every role as it always did, each role
probing again and acting on what it finds.

The rule of each role is the condition its own ``site`` entry acts on (the plan's field), read
here from the same probe result; ``PROBES`` says which module reads it and whether the module
acts (kernel_modules and nccl_env's template are asked in check mode, so that asking changes
nothing)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

# The variable site.yml registers the site plan in: net_mtu_verify reads a peer's net_mtu plan
# there when the peer's own play ended at the site plan (it had nothing to do).
REGISTER = "_site_plan"


def _plan(result: Mapping[str, Any]) -> Mapping[str, Any]:
    """The probe's plan; a result without one is not readable (judge() says so: drift)."""
    plan = result.get("plan")
    if not isinstance(plan, Mapping):
        raise TypeError("no plan in the probe's result")
    return plan


def _lines(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    return str(value).splitlines() if value not in (None, "") else []


@dataclass(frozen=True)
class Probe:
    """How one role is read: ``module`` with ``settings: {}`` (its action plugin fills them from
    the role's variables), in check mode where ``check_mode``; ``drift`` says what the role's own
    entry acts on, ``report`` what it reports on a host in line."""

    module: str
    drift: Callable[[Mapping[str, Any]], Any]
    check_mode: bool = False
    # A file the role writes with a template: (its source under roles/, the variable its task
    # registers the probe in, the variable naming its destination, the task's other arguments).
    # Asked in check mode after the probe: a file that would change is drift.
    template: tuple[str, str, str, Mapping[str, Any]] | None = None
    report: Callable[[Mapping[str, Any]], list[str]] = lambda r: _lines(r.get("rdmaprov_report"))
    # What `rdmaprov status` shows of the probe (``every``): the values it marks, as data.
    shown: Callable[[Mapping[str, Any]], dict[str, Any]] = lambda r: {}
    # Where the role's entry also runs for what its probe cannot read (container_runtime: docker's
    # daemon.json, NVIDIA's toolkit), the part of ``drift`` that was seen to differ; status marks
    # only that, never a difference it did not read.
    seen: Callable[[Mapping[str, Any]], Any] | None = None


def _mtu_shown(r: Mapping[str, Any]) -> dict[str, Any]:
    plan = _plan(r)
    return {"runtime": list(plan.get("runtime") or []),
            "persist_drift": list(plan.get("persist_drift") or []),
            "errors": list(plan.get("errors") or []), "ping_package": plan.get("ping_package")}


def _ofed_shown(r: Mapping[str, Any]) -> dict[str, Any]:
    pkg, mlnx = r.get("plan") or {}, r.get("mlnx_plan") or {}
    lines = []
    if pkg.get("missing"):
        lines.append("not installed: " + " ".join(str(n) for n in pkg["missing"]))
    lines += ["%s %s, wanted %s" % (w.get("name"), w.get("installed"), w.get("wanted"))
              for w in pkg.get("wrong_version") or []]
    if mlnx.get("install") and mlnx.get("would"):
        lines.append(str(mlnx["would"]))
    return {"lines": lines + [str(e) for e in r.get("setting_errors") or []]}


def _qos_shown(r: Mapping[str, Any]) -> dict[str, Any]:
    plan = _plan(r)
    lines = ["%s: %s" % (p.get("name"), ", ".join(p["drift"]))
             for p in plan.get("plans") or [] if p.get("drift")]
    return {"lines": lines + [str(x) for x in (plan.get("file_drift") or [])
                              + (plan.get("errors") or [])]}


def _firewall_shown(r: Mapping[str, Any]) -> dict[str, Any]:
    plan = _plan(r)
    live = ["live table: %s" % d for d in plan.get("nft_differences") or []]
    return {"lines": live + [str(x) for x in (plan.get("file_drift") or [])
                             + (plan.get("errors") or [])]}


def _runtime_shown(r: Mapping[str, Any]) -> dict[str, Any]:
    plan, cdi = _plan(r), r.get("rdma_cdi")
    return {"engine": plan.get("engine"), "differs": list(plan.get("differs") or []),
            "unprobed": list(plan.get("unprobed") or []),
            "errors": list(plan.get("errors") or []),
            "cdi": None if not isinstance(cdi, Mapping) else {
                "present": cdi.get("present"), "wanted": cdi.get("content") is not None,
                "devices": list(cdi.get("devices") or []), "drift": list(cdi.get("drift") or [])}}


# In site.yml's order; the condition is each role's tasks/site.yml `when` (or, for the two roles
# that act in one call, the module's own `changed` in check mode).
PROBES: dict[str, Probe] = {
    # A DOCA repository is not probed (drift, so the role runs); status marks what was read.
    "rdma_ofed": Probe("rdmaprov.cluster.rdma_ofed_probe", lambda r: r["drift"],
                       shown=_ofed_shown, seen=lambda r: r["differs"] or r["setting_errors"]),
    "rdma_modules": Probe("rdmaprov.cluster.kernel_modules", lambda r: r["changed"],
                          check_mode=True),
    "net_mtu": Probe("rdmaprov.cluster.net_mtu_probe", lambda r: _plan(r)["host_drift"],
                     shown=_mtu_shown),
    "roce_qos": Probe("rdmaprov.cluster.roce_qos_probe", lambda r: _plan(r)["drift"],
                      shown=_qos_shown),
    "firewall": Probe("rdmaprov.cluster.firewall_probe", lambda r: _plan(r)["drift"],
                      shown=_firewall_shown),
    # The probe; then /etc/nccl.conf as the role's template task (tasks/configure.yml) would
    # write it: a file that would change is drift.
    "nccl_env": Probe("rdmaprov.cluster.rdma_facts", lambda r: False, template=(
        "nccl_env/templates/nccl.conf.j2", "_nccl_env_facts", "nccl_env_conf_path",
        {"owner": "root", "group": "root", "mode": "0644"})),
    # The role's refusal assert fails the host: a refusal is drift, so the role says it.
    "container_runtime": Probe(
        "rdmaprov.cluster.container_runtime_probe",
        lambda r: _plan(r)["drift"] or _plan(r)["refusal"],
        report=lambda r: _lines(_plan(r).get("report")), shown=_runtime_shown,
        seen=lambda r: _plan(r)["differs"] or _plan(r)["refusal"]),
    # Acts in one call: asked in check mode, it changes nothing and says whether it would.
    "node_tool": Probe("rdmaprov.cluster.node_tool", lambda r: r["changed"], check_mode=True),
}

# What a later task of another host reads from a role's probe (net_mtu_verify: a peer's plan).
KEEP = {"net_mtu": ("plan",)}


def judge(role: str, result: Mapping[str, Any]) -> str | None:
    """Why ``role`` has something to do on this host (None: it is in line), from its probe's
    ``result``. A probe that failed or was skipped is something to do: the role's own run
    reads the host again and fails with the probe's own words."""
    if result.get("unreachable"):
        return "the host did not answer"
    if result.get("failed"):
        return "its probe failed (%s)" % str(result.get("msg") or "no message").splitlines()[0]
    if result.get("skipped"):
        return "its probe was skipped"
    try:
        drift = PROBES[role].drift(result)
    except (KeyError, TypeError, AttributeError) as exc:
        return "its probe's result is not readable (%s)" % exc
    return "it differs" if drift else None


def seen_drift(role: str, result: Mapping[str, Any]) -> str | None:
    """What `rdmaprov status` marks for ``role``: judge()'s answer, except that a role whose entry
    also runs for what its probe cannot read (Probe.seen) differs only where the probe saw a
    difference. None: in line (or nothing read differs)."""
    why = judge(role, result)
    probe = PROBES[role]
    if why != "it differs" or probe.seen is None:
        return why
    try:
        return "it differs" if probe.seen(result) else None
    except (KeyError, TypeError, AttributeError) as exc:
        return "its probe's result is not readable (%s)" % exc


def shown(role: str, result: Mapping[str, Any]) -> dict[str, Any]:
    """What status shows of ``role``'s probe (Probe.shown); {} where it cannot be read."""
    try:
        return PROBES[role].shown(result)
    except (KeyError, TypeError, AttributeError):
        return {}


def kept(role: str, result: Mapping[str, Any]) -> dict[str, Any]:
    """What of ``role``'s probe the site plan keeps for other hosts' tasks."""
    return {key: result[key] for key in KEEP.get(role, ()) if key in result}


def tags_limit(run_tags: Any, skip_tags: Any) -> bool:
    """--tags or --skip-tags chose what runs: every role then probes itself (a role that is not
    chosen is not read, one that is runs its own tasks)."""
    return list(run_tags or ["all"]) != ["all"] or bool(list(skip_tags or []))


def unknown_roles(names: list[str]) -> list[str]:
    return [n for n in names if n not in PROBES]
