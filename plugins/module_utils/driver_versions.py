# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""Parse what the driver stack reports about itself: `ofed_info -s`, package queries, and the
version inside an MLNX_OFED bundle's file name; and the rdma_ofed role's plan (plan(), after()),
which its probe module (rdma_ofed_probe) runs. Pure functions: the unit tests feed them real
output and settings."""

from __future__ import annotations

import os
import posixpath
import re

# `ofed_info -s` prints one line such as:
#   MLNX_OFED_LINUX-23.10-1.1.9.0:   (MLNX_OFED tarball / ISO install)
#   OFED-internal-24.10-1.1.4:       (DOCA-OFED, doca-ofed packages)
#   OFED-4.8-2:                      (OpenFabrics OFED)
_OFED_INFO = re.compile(r"^(?P<flavor>[A-Za-z][\w-]*?)-(?P<version>\d+\.\d+-\d+(?:\.\d+)*)\s*:?\s*$")

# MLNX_OFED_LINUX-24.10-1.1.4.0-ubuntu22.04-x86_64.tgz, MLNX_OFED_LINUX-5.8-3.0.7.0-rhel8.6-x86_64.iso
_BUNDLE = re.compile(
    r"^MLNX_OFED_LINUX-(?P<version>\d+\.\d+-\d+(?:\.\d+)*)-(?P<distro>[^-/]+)-"
    r"(?P<arch>x86_64|aarch64|ppc64le|arm64)\.(?P<ext>tgz|tar\.gz|iso)$"
)


def parse_ofed_info(text: str | None) -> dict | None:
    """`ofed_info -s` output → {"flavor", "version", "full"}; None when nothing matches."""
    for line in reversed((text or "").splitlines()):
        m = _OFED_INFO.match(line.strip())
        if m:
            return {
                "flavor": m.group("flavor"),
                "version": m.group("version"),
                "full": f"{m.group('flavor')}-{m.group('version')}",
            }
    return None


def parse_package_query(text: str | None) -> dict[str, str]:
    """Installed packages → {name: version} from tab-separated `name<TAB>version<TAB>status`.

    The role asks dpkg-query for `${Package}\\t${Version}\\t${db:Status-Abbrev}` and rpm for
    `%{NAME}\\t%{VERSION}-%{RELEASE}\\tii`, so both read alike. dpkg keeps a record of removed
    packages whose configuration remains (status `rc`): those are not installed. Lines that are
    not records (rpm's "package X is not installed") are skipped.
    """
    found: dict[str, str] = {}
    for line in (text or "").splitlines():
        fields = line.split("\t")
        if len(fields) < 3:
            continue
        name, version, status = fields[0].strip(), fields[1].strip(), fields[2].strip()
        # dpkg's abbreviation: desired state, then current state; "ii"/"hi" mean installed.
        if name and version and len(status) >= 2 and status[1] == "i":
            found[name.split(":")[0]] = version
    return found


def parse_bundle_name(name: str) -> dict | None:
    """An MLNX_OFED bundle's file name → {"version", "distro", "arch", "ext", "stem"} or None."""
    base = name.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0]
    m = _BUNDLE.match(base)
    if not m:
        return None
    ext = m.group("ext")
    return {
        "version": m.group("version"),
        "distro": m.group("distro"),
        "arch": m.group("arch"),
        "ext": ext,
        "stem": base[: -(len(ext) + 1)],
    }


def package_plan(wanted: list[str], installed: dict[str, str], version: str = "",
                 pinned: list[str] | None = None, pin_sep: str = "=") -> dict:
    """Decide what an inbox install must do.

    wanted: package names; installed: parse_package_query() result; version: the rdma-core
    version to pin ("" = any); pinned: the packages built from rdma-core, which carry that
    version. Returns {"missing", "wrong_version", "install" (names with pins), "ok"}.
    """
    pinned_set = set(pinned or [])
    missing, wrong, install = [], [], []
    for name in wanted:
        pin = version if (version and name in pinned_set) else ""
        have = installed.get(name)
        spec = f"{name}{pin_sep}{pin}" if pin else name
        if have is None:
            missing.append(name)
            install.append(spec)
        elif pin and not _same_version(have, pin):
            wrong.append({"name": name, "installed": have, "wanted": pin})
            install.append(spec)
    return {"missing": missing, "wrong_version": wrong, "install": install,
            "ok": not install}


def _same_version(have: str, want: str) -> bool:
    """"44.0-2" matches "44.0-2"; a pin without a release ("44.0") matches any release of it.
    An epoch that the pin does not name is ignored."""
    if ":" in have and ":" not in want:
        have = have.split(":", 1)[1]
    return have == want or have.startswith(want + "-") or have.startswith(want + ".el")


def ofed_plan(installed: dict | None, wanted_version: str) -> dict:
    """MLNX_OFED: install unless the installed `ofed_info -s` version is the wanted one."""
    have = installed["version"] if installed else None
    return {"installed": have, "wanted": wanted_version,
            "install": have != wanted_version}


def stack_report(source: str, packages: list[str], plan: dict, mlnx_plan: dict,
                 before: dict, after: dict | None = None, after_plan: dict | None = None,
                 check: bool = False) -> str:
    """The rdma_ofed role's report line: the state the host is left in, and what this run did
    to get there (under --check: what it would do).

    plan, mlnx_plan: package_plan() and ofed_plan() of the probe before the run. before, after:
    {"versions": parse_package_query(), "ofed": parse_ofed_info()} of the probe before the run
    and of the one after an install (None: nothing was installed, the probe's state stands);
    after_plan: package_plan() of after.
    """
    after = after or before
    after_plan = after_plan or plan
    found, now = before.get("ofed"), after.get("ofed")
    if source == "mlnx_ofed":
        text = f"{(now or {}).get('full') or 'no MLNX_OFED'} installed, wanted {mlnx_plan['wanted']}"
        if mlnx_plan["install"]:
            text += ("; would install it" if check else
                     f"; installed by this run (before: {found['full'] if found else 'none'})")
        return f"{source}: {text}"
    versions = after.get("versions") or {}
    parts = [f"{len(versions)}/{len(packages)} packages installed"
             + (f" (rdma-core {versions['rdma-core']})" if "rdma-core" in versions else "")]
    if after_plan["missing"]:
        parts.append("missing " + ", ".join(after_plan["missing"]))
    if after_plan["wrong_version"]:
        parts.append("other versions: " + ", ".join(w["name"] for w in after_plan["wrong_version"]))
    if found:
        parts.append(f"ofed_info: {found['full']}")
    if plan["ok"]:
        parts.append("nothing to do")
    elif check:
        parts.append("would install " + ", ".join(plan["install"]))
    else:
        parts.append("installed by this run: " + ", ".join(plan["install"])
                     + f" (before: {len(before.get('versions') or {})}/{len(packages)})")
    return f"{source}: " + "; ".join(parts)


# --- the rdma_ofed role's plan (module rdma_ofed_probe, option settings) ---------------------------
_REMOTE = re.compile(r"^(https?|ftp|file)://")
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")
_BUNDLE_EXT = re.compile(r"\.(tgz|tar\.gz|iso)$")
# Where the DOCA repository's signing key goes on a Debian-family host.
DOCA_KEYRING = "/etc/apt/keyrings/rdmaprov-doca.asc"


# The inbox source's packages by OS, looked up as a first_found over files would: distribution-
# major (e.g. "Ubuntu-22"), distribution, os_family. rdma_core: the packages built from the
# rdma-core source package, which follow rdma_ofed_inbox_version; pin_separator: what joins a name
# and its version in an install request (apt "=", dnf "-").
OS_PACKAGES: dict[str, dict] = {
    "Debian": {
        "inbox": ["rdma-core", "ibverbs-providers", "ibverbs-utils", "infiniband-diags",
                  "rdmacm-utils", "perftest", "python3-pyverbs"],
        "rdma_core": ["rdma-core", "ibverbs-providers", "ibverbs-utils", "infiniband-diags",
                      "rdmacm-utils", "python3-pyverbs"],
        "pin_separator": "=",
    },
    "RedHat": {
        "inbox": ["rdma-core", "libibverbs-utils", "infiniband-diags", "librdmacm-utils",
                  "perftest", "python3-pyverbs"],
        "rdma_core": ["rdma-core", "libibverbs-utils", "infiniband-diags", "librdmacm-utils",
                      "python3-pyverbs"],
        "pin_separator": "-",
    },
}


def os_packages(s: dict, table: dict[str, dict] | None = None) -> dict | None:
    """The OS's entry of ``table`` (OS_PACKAGES) for the settings' distribution, its major
    version and os_family; None where the table has none."""
    table = OS_PACKAGES if table is None else table
    for key in (f"{s['distribution']}-{s['distribution_major_version']}", s["distribution"],
                s["os_family"]):
        if key in table:
            return table[key]
    return None


_NO_OS = {"inbox": [], "rdma_core": [], "pin_separator": "="}


# The settings the plan reads: the rdma_ofed_* variables (without the prefix), then the OS facts
# (which pick OS_PACKAGES), the OS's name, the connection's interface, whether apt can act under
# --check and the play's check mode. The probe's action plugin fills them all
# (plugins/plugin_utils/role_settings.py: the role's variables, FACTS, CONTEXT).
SETTINGS = ("source", "inbox_packages", "inbox_extra_packages", "inbox_version", "doca_packages",
            "doca_version", "doca_repo_url", "doca_gpg_key_url", "doca_repo_trusted",
            "mlnx_ofed_src", "mlnx_ofed_sha256", "mlnx_ofed_version", "mlnx_ofed_workdir",
            "restart_openibd", "reboot_ok", "allow_connection_interface_down", "mlnx_ofed_flags",
            # The host's facts (role_settings.FACTS) and the play's check mode.
            "os_name", "os_family", "distribution", "distribution_major_version", "ssh_interface",
            "ssh_interface_rdma", "python_apt", "check_mode")


def wanted_packages(s: dict) -> list[str]:
    """The packages the source installs: the inbox list (the user's, else the OS's) and its
    extras, once each in order; DOCA's list; none for an MLNX_OFED bundle."""
    if s["source"] == "inbox":
        own = s["inbox_packages"] or (os_packages(s) or _NO_OS)["inbox"]
        return list(dict.fromkeys([*own, *s["inbox_extra_packages"]]))
    return list(s["doca_packages"]) if s["source"] == "doca" else []


def _bundle(s: dict) -> dict:
    """Where an MLNX_OFED bundle goes on the node, and whether the node fetches it itself."""
    src, workdir = s["mlnx_ofed_src"], s["mlnx_ofed_workdir"]
    parsed = parse_bundle_name(src)
    base = posixpath.basename(src)
    file = f"{workdir}/{base}"
    unpacked = f"{workdir}/{parsed['stem'] if parsed else _BUNDLE_EXT.sub('', base)}"
    return {"parsed": parsed, "src": src, "workdir": workdir, "file": file, "dir": unpacked,
            "remote": bool(_REMOTE.match(src)), "iso": file.endswith(".iso"),
            "installer": f"{unpacked}/mlnxofedinstall",
            "argv": [f"{unpacked}/mlnxofedinstall", *s["mlnx_ofed_flags"]],
            "sha256": s["mlnx_ofed_sha256"].lower(),
            "checksum": f"sha256:{s['mlnx_ofed_sha256'].lower()}"}


def setting_errors(s: dict, parsed_bundle: dict | None) -> list[str]:
    """What the install path refuses, one line each (before anything is installed)."""
    errors = []
    source = s["source"]
    if source != "mlnx_ofed" and os_packages(s) is None:
        errors.append(
            f"rdma_ofed: no package table for {s['os_name']} ({s['os_family']} family): "
            f"rdma_ofed_source={source} installs on the Debian and RedHat families")
    if source == "doca" and not (s["doca_repo_url"]
                                 and (s["doca_gpg_key_url"] or s["doca_repo_trusted"])):
        errors.append(
            "rdma_ofed_source=doca needs rdma_ofed_doca_repo_url (the versioned repository for "
            f"{s['os_name']}) and rdma_ofed_doca_gpg_key_url (or rdma_ofed_doca_repo_trusted=true"
            " for a mirror you control)")
    if source == "mlnx_ofed" and not (s["mlnx_ofed_src"] and _SHA256.match(s["mlnx_ofed_sha256"])
                                      and (s["mlnx_ofed_version"] or parsed_bundle)):
        errors.append(
            "rdma_ofed_source=mlnx_ofed needs rdma_ofed_mlnx_ofed_src, its sha256 in "
            "rdma_ofed_mlnx_ofed_sha256 (64 hex digits; an unchecked bundle is never installed), "
            "and rdma_ofed_mlnx_ofed_version when the file name is not "
            "MLNX_OFED_LINUX-<version>-<distro>-<arch>.tgz|.iso")
    # An openibd restart unloads mlx5_core: every netdev on the HCAs goes down with it, including
    # the one Ansible talks through, and the run would hang or lose the host half-configured.
    if (source != "inbox" and s["restart_openibd"] and not s["reboot_ok"]
            and s["ssh_interface_rdma"] and not s["allow_connection_interface_down"]):
        errors.append(
            f"rdma_ofed: restarting openibd would take down {s['ssh_interface'] or '?'}, the "
            "interface carrying this Ansible connection (it is on an HCA); use "
            "rdma_ofed_reboot_ok=true, or set rdma_ofed_allow_connection_interface_down=true if "
            "the host is reachable another way")
    return errors


def _plans(s: dict, state: dict) -> tuple[list[str], dict, dict, dict]:
    packages = wanted_packages(s)
    inbox = s["source"] == "inbox"
    os_pkgs = os_packages(s) or _NO_OS
    pkg = package_plan(packages, state["versions"],
                       s["inbox_version"] if inbox else s["doca_version"],
                       os_pkgs["rdma_core"] if inbox else packages, os_pkgs["pin_separator"])
    bundle = _bundle(s)
    wanted = s["mlnx_ofed_version"] or (bundle["parsed"]["version"] if bundle["parsed"] else "")
    return packages, pkg, ofed_plan(state["ofed"], wanted), bundle


def activation(s: dict) -> str:
    """How a newly installed kernel driver (doca, mlnx_ofed) comes into use, for the role's
    handlers: C(reboot) (rdma_ofed_reboot_ok), C(restart) (openibd, rdma_ofed_restart_openibd),
    C(say) that it is not active yet, or "" for the inbox source (userspace only)."""
    if s["source"] == "inbox":
        return ""
    return "reboot" if s["reboot_ok"] else "restart" if s["restart_openibd"] else "say"


def plan(s: dict, state: dict) -> dict:
    """The rdma_ofed role's plan from its settings (the rdma_ofed_* variables, the OS facts,
    the connection's interface) and the probe's state ({"versions", "ofed"}).

    packages: what the source installs; plan, mlnx_plan: package_plan() and ofed_plan() (with
    would: what --check says it would install); request: the names an install asks the package
    manager for; bundle: the MLNX_OFED bundle's source, work directory, file and directory on the
    node, whether the node fetches it, whether it is an ISO, its installer and the installer's
    argv, its sha256 and get_url's checksum, and what --check would do (the rdma_ofed_bundle
    action's argument, bundle_steps()); setting_errors: what to refuse, and refusal, those lines
    joined ("" for none); drift: whether the install path runs (something differs, a DOCA
    repository, which is not probed, or a setting to refuse); differs: whether something was
    read to differ; install_packages and
    package_tasks: whether packages are installed, and the OS family's task file that does it;
    install_bundle: whether an MLNX_OFED bundle is installed; doca_key: whether the DOCA
    repository's signing key is installed (not for a trusted mirror); doca_repo: the DOCA
    repository's settings as apt and dnf take them; can_install: whether the package manager may
    act (apt without python3-apt would install it, which --check must not); activate:
    activation(); rdmaprov_report: the report line where nothing differs.
    """
    packages, pkg, mlnx, bundle = _plans(s, state)
    errors = setting_errors(s, bundle["parsed"])
    differs = mlnx["install"] if s["source"] == "mlnx_ofed" else not pkg["ok"]
    mlnx["would"] = (f"would install MLNX_OFED {mlnx['wanted']} from {s['mlnx_ofed_src']} "
                     f"(installed: {mlnx['installed'] or 'none'})")
    trusted = s["doca_repo_trusted"]
    return {"packages": packages, "plan": pkg, "mlnx_plan": mlnx,
            "request": pkg["install"] or packages,
            "bundle": {**{k: v for k, v in bundle.items() if k != "parsed"},
                       "would": mlnx["would"]},
            "setting_errors": errors, "refusal": "; ".join(errors),
            "drift": differs or s["source"] == "doca" or bool(errors),
            # What was read to differ (a DOCA repository is not probed: drift, not differs).
            "differs": bool(differs),
            "install_packages": s["source"] != "mlnx_ofed",
            "package_tasks": f"setup-{s['os_family']}.yml",
            "install_bundle": s["source"] == "mlnx_ofed" and mlnx["install"],
            "doca_key": s["source"] == "doca" and not trusted,
            "doca_repo": {"configure": s["source"] == "doca", "url": s["doca_repo_url"],
                          "trusted": trusted, "gpgcheck": not trusted,
                          "signed_by": "" if trusted else DOCA_KEYRING,
                          "gpgkey": "" if trusted else s["doca_gpg_key_url"],
                          "key_url": s["doca_gpg_key_url"]},
            # apt installs python3-apt when it is missing, which --check must not do.
            "can_install": bool(s["python_apt"] or not s["check_mode"]),
            "activate": activation(s),
            "rdmaprov_report": [] if differs else [
                stack_report(s["source"], packages, pkg, mlnx, state)]}


def bundle_steps(b: dict, check: bool) -> list[dict]:
    """The MLNX_OFED bundle path (the rdma_ofed_bundle action) from plan()'s bundle: its steps
    in order, each the name a failure gives, the builtin it runs (C(file), C(get_url) and
    C(command) modules, the C(copy) and C(unarchive) actions) and that builtin's arguments; the
    installer's step has C(installs). A bundle on the control host is copied (checked there
    first), a URL fetched by the node with get_url, which checks the sha256 before it moves the
    download into place and removes a file already there that does not match. Under --check
    nothing was fetched: the installer is neither unpacked nor run."""
    steps = [{"name": "Create the work directory", "action": "file",
              "args": {"path": b["workdir"], "state": "directory", "mode": "0755"}}]
    if b["remote"]:
        steps.append({"name": "Fetch the bundle and check its sha256", "action": "get_url",
                      "args": {"url": b["src"], "dest": b["file"], "checksum": b["checksum"],
                               "mode": "0644"}})
    else:
        steps.append({"name": "Copy the verified bundle to the node", "action": "copy",
                      "args": {"src": b["src"], "dest": b["file"], "mode": "0644"}})
    if check:
        return steps
    if b["iso"]:
        # mount needs its mount point to exist (no mode: an ISO left mounted there is read-only).
        steps.append({"name": "Create the mount point", "action": "file",
                      "args": {"path": b["dir"], "state": "directory"}})
        steps.append({"name": "Mount the ISO", "action": "command",
                      "args": {"argv": ["mount", "-o", "loop,ro", b["file"], b["dir"]],
                               "creates": b["installer"]}})
    else:
        steps.append({"name": "Unpack the tarball", "action": "unarchive",
                      "args": {"src": b["file"], "dest": b["workdir"], "remote_src": True,
                               "creates": b["installer"]}})
    # Runs only when the installed version differs from the wanted one, so it always changes.
    steps.append({"name": "Run mlnxofedinstall", "action": "command", "installs": True,
                  "args": {"argv": b["argv"]}})
    return steps


def bundle_cleanup(b: dict, check: bool) -> list[dict]:
    """What runs after the bundle path's steps, whether they failed or not: an ISO is unmounted
    (where it was mounted: its installer is there)."""
    if not b["iso"] or check:
        return []
    return [{"name": "Unmount the ISO", "action": "command",
             "args": {"argv": ["umount", b["dir"]], "removes": b["installer"]}}]


def bundle_failure(step: str, result: dict, installer_ran: bool) -> str:
    """The line that stops the bundle path: the step that failed, the builtin's message and the
    last line it wrote to stderr, and, where the installer did not run, that nothing was
    installed."""
    lines = result.get("stderr_lines") or str(result.get("stderr") or "").splitlines()
    detail = f"{result.get('msg') or ''} {lines[-1] if lines else ''}".strip()
    return (f"rdma_ofed: {step} failed: {detail}"
            + ("" if installer_ran else "; nothing was installed"))


def bundle_check(path: str, sha256: str) -> str:
    """A bundle on the control host held to its sha256 before a byte of it reaches a node: ""
    when it matches, else the line that stops the run."""
    if not os.path.isfile(path):
        return f"rdma_ofed: no such file on the control host: {path}; nothing was installed"
    import hashlib  # here: `rdmaprov check` imports this module at every job start

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    got = digest.hexdigest()
    if got == sha256.lower():
        return ""
    return (f"rdma_ofed: sha256 mismatch for {path}: expected {sha256.lower()}, got {got}; "
            "nothing was installed")


def after(s: dict, before: dict, now: dict, check: bool) -> dict:
    """What the install path left (now: the probe's state read again; before: the first
    probe's): the verification (applies: whether there is an install to hold to the plan;
    under --check only a host that needed nothing) and the report line."""
    packages, pkg, mlnx = _plans(s, before)[:3]
    now_plan = _plans(s, now)[1]
    versions, ofed = now["versions"], now["ofed"] or {}
    if s["source"] == "mlnx_ofed":
        verify = {"applies": not check or not mlnx["install"],
                  "ok": ofed.get("version", "") == mlnx["wanted"],
                  "msg": (f"mlnx_ofed: {ofed.get('full', '')} in place"
                          if ofed.get("version", "") == mlnx["wanted"] else
                          f"rdma_ofed: ofed_info -s reports {ofed.get('full') or 'nothing'}, "
                          f"wanted MLNX_OFED {mlnx['wanted']}")}
    else:
        core = f", rdma-core {versions['rdma-core']}" if "rdma-core" in versions else ""
        verify = {"applies": not check or pkg["ok"], "ok": now_plan["ok"],
                  "msg": (f"{s['source']}: {len(packages)} packages in place{core}"
                          if now_plan["ok"] else
                          "rdma_ofed: after the install, missing "
                          f"{', '.join(now_plan['missing']) or 'nothing'}; wrong version "
                          f"{', '.join(w['name'] for w in now_plan['wrong_version']) or 'none'}")}
    return {"after_plan": now_plan, "verify": verify,
            "report": stack_report(s["source"], packages, pkg, mlnx, before,
                                   {"versions": versions, "ofed": now["ofed"] or None},
                                   now_plan, check)}
