"""`rdmaprov probe [INVENTORY]`: RDMA devices, ports, GIDs and the NCCL settings they imply.

Without an inventory it looks at this host, importing the collection's module_utils directly
(no Ansible); with one, it runs the rdma_facts module on every host through the engine and adds
the fabric consistency table. The human output is a table; --json prints one document.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import socket
import sys
from collections.abc import Mapping
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from rdmaprov import collection
from rdmaprov.cli import options
from rdmaprov.console import table, table_console
from rdmaprov.errors import UserError
from rdmaprov.hostreason import host_reason
from rdmaprov.probe import fabric
from rdmaprov.textsafe import rich_text, safe_line, safe_text

PROBE_TASK = "Discover RDMA devices"
NCCL_CONF = Path("/etc/nccl.conf")

EPILOG = """\
exit codes:
  0  probed; the report says what is there (no RDMA devices is a finding, not an error)
  1  usage or input error (bad flag, missing file or inventory); nothing probed
  2  a host failed or was unreachable, the NCCL lint found an error, or (with an inventory)
     the fabric is inconsistent across hosts
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "probe", help="RDMA devices, ports, GIDs and the NCCL settings they imply",
        description="Report every RDMA device and port (state, rate, MTU, GIDs, firmware), the "
        "NCCL settings derived from them, and a lint of NCCL_* variables. Without INVENTORY: "
        "this host; with one: every host, plus a fabric consistency table.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    options.add_inventory(p, required=False,
                          help="inventory file or directory; omit to probe this host")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.add_argument("--use-pyverbs", choices=("auto", "yes", "no"),
                   help="pyverbs first (auto), only (yes) or never (no) "
                        "(env RDMAPROV_USE_PYVERBS; default auto)")
    p.add_argument("--nccl-ib-tc", metavar="TC",
                   help="RoCE traffic class for NCCL_IB_TC, 0-255 (env RDMAPROV_NCCL_IB_TC; "
                        "with an inventory, roce_qos_nccl_ib_tc from it is used)")
    p.add_argument("--env-file", metavar="FILE", type=Path, action="append", default=[],
                   help="lint the NCCL_* lines of FILE as well (repeatable); by default this "
                        "shell's NCCL_* variables and /etc/nccl.conf are linted")
    local = p.add_argument_group("this host only")
    local.add_argument("--sysfs-root", metavar="DIR",
                       help="read sysfs from DIR, e.g. a fixture tree, for tests and diagnosis; "
                            "a DIR named sys is read with its siblings proc/, dev/ and "
                            "lib/modules/ (env RDMAPROV_SYSFS_ROOT; default /sys; pyverbs is "
                            "not used with another root)")
    local.add_argument("--container", action="store_true", default=None,
                       help="print the docker/podman run flags and the environment a training "
                            "container needs on this host (the RDMA CDI device, GPUs, host "
                            "network and IPC) (env RDMAPROV_PROBE_CONTAINER=1)")
    local.add_argument("--socket-ifname", metavar="IF",
                       help="interface for NCCL_SOCKET_IFNAME (env RDMAPROV_SOCKET_IFNAME; "
                            "default: the default route's interface, if any)")
    fleet = p.add_argument_group("with an inventory")
    fleet.add_argument("-l", "--limit", metavar="PATTERN", help="only these hosts/groups")
    fleet.add_argument("-f", "--forks", metavar="N",
                       help="parallel hosts (env RDMAPROV_FORKS)")
    fleet.add_argument("--keep-artifacts", metavar="DIR", type=Path,
                       help="keep ansible-runner's private data dir (env "
                            "RDMAPROV_KEEP_ARTIFACTS)")
    fleet.add_argument("--write-expectations", metavar="DIR", type=Path,
                       help="write rdmaprov check's config per node class to DIR/<class>.yml "
                            "(the majority of each class's hosts) and DIR/hosts.yml (each "
                            "host's file, the hosts that differ); the slurm_health role installs "
                            "them (slurm_health_expect_dir)")
    options.add_connection_options(p)
    p.set_defaults(func=run, check=False, diff=False, tags=None, skip_tags=None,
                   extra_vars=[], verbose=0,
                   strategy=os.environ.get("RDMAPROV_STRATEGY", "linear"),
                   ansible_profile=os.environ.get("RDMAPROV_ANSIBLE_PROFILE", "tuned"))


# --- inputs ---------------------------------------------------------------------------------------

def _ib_tc(raw: str | None) -> int | None:
    if raw in (None, ""):
        return None
    try:
        value = int(str(raw), 0)
    except ValueError:
        value = -1
    if not 0 <= value <= 255:
        raise UserError(f"--nccl-ib-tc {raw!r}: a traffic class is an integer from 0 to 255")
    return value


def lint_sources(env_files: list[Path], environ: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """{label: {NAME: value}} to lint: this shell, /etc/nccl.conf, and each --env-file."""
    nccl = collection.rdma_nccl
    sources = {"environment": {k: v for k, v in environ.items() if k.startswith("NCCL_")}}
    if NCCL_CONF.is_file():
        with contextlib.suppress(OSError):
            sources[str(NCCL_CONF)] = nccl.parse_env_text(NCCL_CONF.read_text())
    for path in env_files:
        try:
            sources[str(path)] = nccl.parse_env_text(path.read_text())
        except OSError as exc:
            raise UserError(f"--env-file {path}: {exc.strerror or exc}") from None
    return {k: v for k, v in sources.items() if v or k != "environment"}


def default_route_interface(proc: str = "/proc") -> str | None:
    """The interface of the IPv4 default route (/proc/net/route, destination 00000000)."""
    try:
        lines = Path(proc, "net/route").read_text().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) > 2 and fields[1] == "00000000":
            return fields[0]
    return None


# --- local ----------------------------------------------------------------------------------------

def probe_local(sysfs_root: str, use_pyverbs: str, ib_tc: int | None,
                socket_ifname: str | None, lint_env: Mapping[str, Mapping[str, str]]) -> dict:
    if not os.path.isdir(sysfs_root):
        raise UserError(f"--sysfs-root {sysfs_root}: not a directory")
    pyverbs = collection.rdma_pyverbs
    sysfs = collection.rdma_sysfs
    nccl = collection.rdma_nccl
    try:
        facts = pyverbs.gather(sysfs_root, use_pyverbs, _run_readonly)
    except pyverbs.PyverbsMissing as exc:
        raise UserError(str(exc)) from None
    interfaces = sysfs.list_netdevs(sysfs_root)
    derived = nccl.derive(facts, ib_tc, socket_ifname)
    lint = {label: nccl.lint(dict(env), facts, interfaces) for label, env in lint_env.items()}
    return {"host": socket.gethostname(), "rdma": facts, "nccl": derived, "lint": lint}


def _run_readonly(argv: list[str]) -> tuple[int, str]:
    import shutil
    import subprocess

    if not shutil.which(argv[0]):
        return 127, ""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30,
                              env=dict(os.environ, LC_ALL="C"), check=False)
    except (OSError, subprocess.SubprocessError):
        return 127, ""
    return proc.returncode, proc.stdout


# --- output ---------------------------------------------------------------------------------------

def _v2_ipv4(port: Mapping[str, Any]) -> str:
    nccl = collection.rdma_nccl
    index = nccl.roce_v2_ipv4_index(port)
    return "-" if index is None else str(index)


def port_rows(rdma: Mapping[str, Any]) -> list[list[str]]:
    rows = []
    for dev in rdma.get("devices", []):
        for p in dev.get("ports", []):
            rows.append([
                dev["name"], str(p["port"]), str(p.get("state")), str(p.get("phys_state")),
                f"{p.get('rate_gbps')} Gb/s" if p.get("rate_gbps") is not None else "-",
                "IB" if p.get("link_layer") == "InfiniBand" else str(p.get("link_layer")),
                str(p.get("active_mtu") or "-"),
                str(p.get("lid")) if p.get("lid") is not None else "-",
                (p.get("netdev") or "-") + (f" (bond {p['bond']})" if p.get("bond") and
                                             p.get("bond") != p.get("netdev") else ""),
                _v2_ipv4(p) if p.get("link_layer") == "Ethernet" else "-",
                str(dev.get("fw_ver") or "-"), str(dev.get("board_id") or "-"),
            ])
    return rows


PORT_COLUMNS = ("device", "port", "state", "physical", "rate", "link", "mtu", "lid", "netdev",
                "v2 IPv4 GID", "firmware", "board")


def _console() -> Console:
    return table_console(sys.stdout)


def _say(console: Console, text: str, style: str = "") -> None:
    """One line that may carry host text (a board id, a reason, a variable's value)."""
    console.print(rich_text(text, style))


def render_host(console: Console, doc: Mapping[str, Any], title: str) -> None:
    rdma = doc["rdma"]
    kernel = rdma.get("kernel") or {}
    console.print(Text.assemble(
        rich_text(title, "bold"),
        rich_text(f": source {rdma.get('source')}, "
                  f"rdma-core {rdma.get('rdma_core_version') or 'not installed'}, "
                  f"OFED {rdma.get('ofed_version') or 'none'}")))
    if kernel.get("modules"):
        caps = collection.kernel_caps
        statuses = [{"name": n, **st} for n, st in kernel["modules"].items()]
        _say(console, f"Kernel modules: {caps.summary(statuses)}.")
    if not rdma.get("devices"):
        _say(console, f"No RDMA devices: {kernel.get('reason') or 'none found'}.")
    else:
        if not kernel.get("uverbs", True):
            _say(console, f"Warning: {kernel.get('reason')}.")
        console.print(table(PORT_COLUMNS, port_rows(rdma)))
    env = (doc.get("nccl") or {}).get("env") or {}
    _say(console, "NCCL settings for this host:" if env else "NCCL settings: none to set.")
    for name, value in env.items():
        _say(console, f"  {name}={value}")
    for note in (doc.get("nccl") or {}).get("notes") or []:
        _say(console, f"  note: {note}")
    for label, findings in (doc.get("lint") or {}).items():
        if not findings:
            _say(console, f"NCCL lint of {label}: clean.")
            continue
        _say(console, f"NCCL lint of {label}:")
        for f in findings:
            fix = f" ({f['fix']})" if f.get("fix") else ""
            _say(console, f"  {f['level']}: {f['message']}{fix}")


def _lint_errors(docs: Mapping[str, Mapping[str, Any]]) -> bool:
    return any(f["level"] == "error" for d in docs.values()
               for fs in (d.get("lint") or {}).values() for f in fs)


# Where each flag means something: "fleet" (an INVENTORY, through Ansible), "host" (this host
# probed directly), "container" (this host's container flags). A flag given on the command line
# where it means nothing is refused (one line each), never dropped; an environment variable is
# a default only where its flag means something. dest -> (flag, modes, environment, default).
FLAGS: dict[str, tuple[str, frozenset[str], str | None, Any]] = {
    "use_pyverbs": ("--use-pyverbs", frozenset({"fleet", "host"}), "RDMAPROV_USE_PYVERBS",
                    "auto"),
    "nccl_ib_tc": ("--nccl-ib-tc", frozenset({"fleet", "host"}), "RDMAPROV_NCCL_IB_TC", None),
    "env_file": ("--env-file", frozenset({"fleet", "host"}), None, []),
    "sysfs_root": ("--sysfs-root", frozenset({"host", "container"}), "RDMAPROV_SYSFS_ROOT",
                   "/sys"),
    "container": ("--container", frozenset({"container"}), "RDMAPROV_PROBE_CONTAINER", False),
    "socket_ifname": ("--socket-ifname", frozenset({"host"}), "RDMAPROV_SOCKET_IFNAME", None),
    "limit": ("--limit", frozenset({"fleet"}), None, None),
    "forks": ("--forks", frozenset({"fleet"}), "RDMAPROV_FORKS", None),
    "keep_artifacts": ("--keep-artifacts", frozenset({"fleet"}), "RDMAPROV_KEEP_ARTIFACTS",
                       None),
    # ansible-playbook's connection, become and vault options: for the hosts Ansible reaches.
    **{dest: (flag, frozenset({"fleet"}), None, None) for dest, flag in (
        ("remote_user", "-u/--user"), ("private_key", "--private-key"),
        ("ask_pass", "-k/--ask-pass"), ("connection_password_file", "--connection-password-file"),
        ("ask_become_pass", "-K/--ask-become-pass"),
        ("become_password_file", "--become-password-file"),
        ("ask_vault_pass", "-J/--ask-vault-pass"),
        ("vault_password_files", "--vault-password-file"))},
}
WHY_NOT = {
    "fleet": "not with an INVENTORY: it is for the host rdmaprov runs on, and an INVENTORY's "
             "hosts are probed through Ansible (run `rdmaprov probe` on the host itself)",
    "host": "needs an INVENTORY: it is for a probe of an inventory's hosts through Ansible",
    "container": "not with --container, which prints this host's container flags and "
                 "environment (the NCCL settings and lint are `rdmaprov probe` without it)",
}


def settle_flags(args: argparse.Namespace, environ: Mapping[str, str]) -> str:
    """The mode, after refusing every flag given where it means nothing; then each flag not
    given takes its environment variable (where its flag means something) or its default."""
    container = args.container or (args.inventory is None
                                   and environ.get("RDMAPROV_PROBE_CONTAINER") == "1")
    mode = "fleet" if args.inventory is not None else "container" if container else "host"
    problems = [f"{flag}: {WHY_NOT[mode]}" for dest, (flag, modes, _e, _d)
                in FLAGS.items() if getattr(args, dest) and mode not in modes]
    if problems:
        raise UserError("\n".join(problems))
    for dest, (_flag, modes, env, default) in FLAGS.items():
        if getattr(args, dest) in (None, []):
            value = environ.get(env) if env and mode in modes else None
            setattr(args, dest, default if value in (None, "") else value)
    args.container = mode == "container"
    if args.use_pyverbs not in ("auto", "yes", "no"):
        raise UserError(f"--use-pyverbs/RDMAPROV_USE_PYVERBS: {args.use_pyverbs!r} is not one "
                        "of auto, yes, no")
    if isinstance(args.keep_artifacts, str):
        args.keep_artifacts = Path(args.keep_artifacts)
    return mode


def run(args: argparse.Namespace) -> int:
    settle_flags(args, os.environ)
    ib_tc = _ib_tc(args.nccl_ib_tc)
    if args.write_expectations is not None:
        if args.inventory is None:
            raise UserError("--write-expectations: needs an INVENTORY (expectations come from "
                            "what a fleet has in common)")
        from rdmaprov.probe import expectations

        expectations.check_dir(args.write_expectations)
    sources = lint_sources(args.env_file, os.environ)
    if args.inventory is None and args.container:
        return run_container(args)
    if args.inventory is None:
        socket_ifname = args.socket_ifname or default_route_interface()
        doc = probe_local(args.sysfs_root, args.use_pyverbs, ib_tc, socket_ifname, sources)
        code = 2 if _lint_errors({"local": doc}) else 0
        if args.json:
            sys.stdout.write(json.dumps(doc | {"exit_code": code}, indent=2) + "\n")
        else:
            render_host(_console(), doc, doc["host"])
        return code
    return run_inventory(args, ib_tc, sources)


def run_container(args: argparse.Namespace) -> int:
    """`probe --container`: the flags and environment of a training container here."""
    from rdmaprov.probe import container

    doc = container.advice(args.sysfs_root)
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return 0
    out = sys.stdout
    out.write(f"RDMA CDI spec {doc['spec']}: "
              + ("installed" if doc["installed"] else "not installed (run bootstrap)")
              + (f"; drift: {'; '.join(doc['drift'])}" if doc["installed"] and doc["drift"]
                 else "") + "\n")
    for line in doc["report"]:
        out.write(f"  {safe_text(line)}\n")
    for name, eng in doc["engines"].items():
        state = (f"{name} {eng['version']}" if eng["version"]
                 else f"{name} (daemon not answering)" if eng["installed"]
                 else f"{name} (not installed)")
        out.write(f"\n{safe_text(state)}:\n  {shlex.join(eng['argv'])} <command>\n")
        if eng["why"]:
            out.write(f"  ({safe_text(eng['why'])})\n")
    conf = doc["nccl_conf"] or {}
    settings = ", ".join(f"{k}={v}" for k, v in (conf.get("settings") or {}).items()
                         if k.startswith("NCCL_"))
    out.write("\nThe container gets through the device: NCCL_CONF_FILE=/etc/nccl.conf and the "
              f"host's {conf.get('path')} read-only"
              + (f" ({safe_text(settings)})" if settings else " (not there yet)") + ".\n")
    for name, eng in doc["engines"].items():
        if eng.get("memlock"):
            out.write(f"Memlock: {safe_text(container.memlock_line(name, eng['memlock']))}\n")
    out.write("A multi-node job adds:\n")
    for name, what in doc["job_env"].items():
        out.write(f"  {name}: {what}\n")
    return 0


# --- inventory ------------------------------------------------------------------------------------

def run_inventory(args: argparse.Namespace, ib_tc: int | None,
                  sources: Mapping[str, Mapping[str, str]]) -> int:
    from rdmaprov import inventory as inventory_mod
    from rdmaprov import progress
    from rdmaprov.cli import options
    from rdmaprov.engine import RunnerSession

    options.forks(args)
    inv = inventory_mod.load(args.inventory, limit=args.limit)
    merged: dict[str, str] = {}
    for env in sources.values():
        merged.update(env)
    with as_file(files("rdmaprov.probe") / "playbook.yml") as book:
        spec = options.run_spec(args, Path(book), inv)
        spec.extravars = dict(spec.extravars)
        spec.extravars["rdmaprov_probe_use_pyverbs"] = args.use_pyverbs
        if ib_tc is not None:
            spec.extravars["roce_qos_nccl_ib_tc"] = ib_tc
        if merged:
            spec.extravars["rdmaprov_probe_lint_env"] = merged
        docs: dict[str, dict[str, Any]] = {}

        def on_event(ev: Mapping[str, Any]) -> None:
            data = ev.get("event_data") or {}
            if ev.get("event") == "runner_on_ok" and data.get("task") == PROBE_TASK:
                res = data.get("res") or {}
                if "rdma" in res:
                    docs[str(data["host"])] = {
                        "rdma": res["rdma"], "nccl": {k: v for k, v in (res.get("nccl") or {})
                                                      .items() if k != "lint"},
                        "lint": {"given variables": (res.get("nccl") or {}).get("lint", [])}
                        if merged else {}}

        result = RunnerSession(spec, on_event=on_event).run()
    missing = {}
    for host in inv.selected:
        if host not in docs:
            h = result.hosts.get(host)
            missing[host] = host_reason(h, result.error or "no answer")
    report = fabric.consistency({h: d["rdma"] for h, d in docs.items()})
    if not result.hosts and result.error:
        raise UserError(result.error)
    code = 2 if missing or not report["ok"] or _lint_errors(docs) else 0
    if args.json:
        if args.write_expectations is not None:
            _write_expectations(args, docs, missing, sys.stderr)
        doc = progress.result_document(result, code)
        doc["hosts_probed"] = docs
        doc["fabric"] = report
        doc["not_probed"] = missing
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
        return code
    console = _console()
    for host, doc in docs.items():
        render_host(console, doc, host)
        console.print()
    render_fabric(console, report, missing)
    if args.write_expectations is not None:
        sys.stdout.flush()
        _write_expectations(args, docs, missing, sys.stdout)
    return code


def _shown_value(value: Any) -> str:
    """An expectation as the terminal shows it: a mapping (firmware per board) as k=v pairs."""
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def _write_expectations(args: argparse.Namespace, docs: Mapping[str, Mapping[str, Any]],
                        missing: Mapping[str, str], out: Any) -> None:
    """DIR/<class>.yml and DIR/hosts.yml from the hosts that answered; the odd ones named."""
    from rdmaprov.probe import expectations

    derived = expectations.derive({h: d["rdma"] for h, d in docs.items()})
    try:
        written = expectations.write(args.write_expectations, derived, str(args.inventory))
    except OSError as exc:
        raise UserError(f"--write-expectations {args.write_expectations}: "
                        f"{exc.strerror or exc}") from None
    for name, cls in derived["classes"].items():
        out.write(safe_line(f"Expectations {args.write_expectations / (name + '.yml')}: "
                            f"{len(cls['hosts'])} host(s), "
                            + ", ".join(f"{k} {_shown_value(v)}"
                                        for k, v in cls["expect"].items())) + "\n")
        for why in cls.get("left_out", []):
            out.write(safe_line(f"  not written: {why}") + "\n")
    for host, odd in derived["differs"].items():
        out.write(safe_line(f"  {host} differs: {'; '.join(odd)}") + "\n")
    for host, why in {**derived["unclassified"], **missing}.items():
        out.write(safe_line(f"  {host}: no expectations ({why})") + "\n")
    out.write(safe_line(f"Index: {written[-1]}") + "\n")


def render_fabric(console: Console, report: Mapping[str, Any], missing: Mapping[str, str]) -> None:
    _say(console, "Fabric consistency", "bold")
    rows = [[h, *(str(r[c]) for c in fabric.COLUMNS),
             "; ".join(report["problems"].get(h, [])) or "ok"]
            for h, r in report["rows"].items()]
    rows += [[h, *("" for _ in fabric.COLUMNS), why] for h, why in missing.items()]
    console.print(table(("host", *fabric.COLUMNS, "verdict"), rows))
    if report["ok"] and not missing:
        _say(console, "All hosts match.")
