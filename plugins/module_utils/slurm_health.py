# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The slurm_health role's decisions (module slurm_health_probe): what to install, which hooks
and slurm.conf lines, the node's check.yml, what to refuse and why, and the line to print.

probe() reads the node (standard library only); plan() is pure, over that probe, the role's
settings and what the control host read for it (the module's action plugin: the expectations
directory's index and this host's class file, the wheelhouse's wheels and the rdmaprov wheel's
checksum)."""

from __future__ import annotations

import os
import posixpath
import re
import shlex
import subprocess

# The settings plan() reads: the slurm_health_* variables without the prefix, the host's name,
# whether the play runs in check mode and the managed-file header (the play's ansible_managed).
SETTINGS = ("install", "wheelhouse", "venv", "budget", "healthcheck_interval", "expect",
            "expect_dir", "hooks", "script_dir", "nhc_dir", "edit_slurm_conf", "slurm_conf",
            "rdmaprov", "config_dir", "nccl_python", "textfile_dir", "prolog_drain", "force",
            "host", "check_mode", "managed")

INDEX = "hosts.yml"
INSTALLED = ".rdmaprov-wheel.sha256"
# The role's managed block in slurm.conf (blockinfile's markers), and a key= line outside it.
BLOCK = re.compile(r"(?s)# BEGIN rdmaprov slurm_health.*# END rdmaprov slurm_health\n?")
KEY = re.compile(r"(?m)^[ \t]*([A-Za-z]+)[ \t]*=")
WHEEL = re.compile(r"^rdmaprov-[^/]*\.whl$")

# The environment slurmd gives its hooks, read in the lab (Slurm 22.05, a script that dumped
# `env`): no PATH at all (the scripts' /bin/sh searches its own default and exports none), the
# node's Slurm name, and for the prolog the job's SLURM_* values with SLURM_SCRIPT_CONTEXT; run
# as root from slurmd's directory. verify() runs the installed hooks so (env -i), never with
# Ansible's environment.
HOOK_ENV = {"prolog": {"SLURM_SCRIPT_CONTEXT": "prolog_slurmd"}, "healthcheck": {}}
# The hook scripts' argument for the proof: the same command without --drain, its exit code and
# reason passed on (files/rdmaprov-*.sh); Slurm runs them without arguments.
VERIFY_FLAG = "--verify"
# The NHC plug-in's command as NHC runs it (files/rdmaprov.nhc): slurm.env, then check --nhc.
NHC_SH = ('[ -r "$1" ] && { set -a; . "$1"; set +a; }; exec "${RDMAPROV:-rdmaprov}" check '
          '--nhc')
# The check's exit codes (rdmaprov/cli/check.py).
HEALTHY, CONFIG_ERROR, UNHEALTHY = 0, 1, 2


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _venv_ok() -> bool:
    """Whether python3 can make a venv (Debian ships ensurepip in python3-venv)."""
    try:
        return subprocess.run(["python3", "-c", "import ensurepip, venv"], check=False,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def probe(settings: dict) -> dict:
    """What only the node can tell, read only where the settings need it."""
    out: dict = {}
    if settings["install"] == "wheelhouse":
        out["venv_ok"] = _venv_ok()
        installed = _read(posixpath.join(settings["venv"], INSTALLED))
        out["installed"] = (installed or "").rstrip("\r\n")
    if "nhc" in settings["hooks"]:
        out["nhc_dir"] = os.path.isdir(settings["nhc_dir"])
    if settings["edit_slurm_conf"]:
        out["slurm_conf"] = _read(settings["slurm_conf"])
    out["dirs"] = {path: _kind(path) for path in dirs(settings)}
    return out


def _kind(path: str) -> str:
    """"dir", "missing" or "other" (a file, a dangling link: what a directory cannot be made at)."""
    if os.path.isdir(path):
        return "dir"
    return "other" if os.path.lexists(path) else "missing"


def dirs(settings: dict) -> dict[str, str]:
    """{directory the role's files or the check's output go to: the setting that names it}."""
    out = {settings["config_dir"]: "slurm_health_config_dir"}
    if [h for h in settings["hooks"] if h in HOOK_ENV]:
        out.setdefault(settings["script_dir"], "slurm_health_script_dir")
    if settings.get("textfile_dir"):
        out.setdefault(settings["textfile_dir"], "slurm_health_textfile_dir")
    return out


def expect_file(index, host: str) -> str:
    """The class file the expectations index (hosts.yml, parsed) names for ``host``: its base
    name, "" when the index names none."""
    hosts = index.get("hosts") if isinstance(index, dict) else None
    if not isinstance(hosts, dict):
        return ""
    return posixpath.basename(str(hosts.get(host) or ""))


def rdmaprov_wheels(names: list) -> list[str]:
    """The rdmaprov wheels among a wheelhouse's files (base names)."""
    return [n for n in (posixpath.basename(str(p)) for p in names) if WHEEL.match(n)]


def conf_lines(settings: dict) -> list[str]:
    """The slurm.conf lines the chosen hooks need."""
    hooks, scripts = settings["hooks"], settings["script_dir"]
    lines = []
    if "prolog" in hooks:
        lines.append(f"Prolog={scripts}/rdmaprov-prolog.sh")
    if "healthcheck" in hooks:
        lines += [f"HealthCheckProgram={scripts}/rdmaprov-healthcheck.sh",
                  f"HealthCheckInterval={settings['healthcheck_interval']}"]
    return lines


def taken_keys(conf: str, lines: list[str]) -> list[str]:
    """The keys of ``lines`` (lower case) that slurm.conf's text already sets outside rdmaprov's
    block: slurm.conf keeps one value per key, so a second Prolog= would replace the site's."""
    outside = {k.lower() for k in KEY.findall(BLOCK.sub("", conf))}
    return [k for k in (ln.split("=", 1)[0].lower() for ln in lines) if k in outside]


def _expect(settings: dict, controller: dict, errors: list[str]) -> tuple[dict, str]:
    """check.yml's content (the class file, slurm_health_expect on top) and where it came from;
    a refusal goes to ``errors``."""
    folder, host = settings["expect_dir"], settings["host"]
    if not folder:
        return dict(settings["expect"]), "slurm_health_expect"
    name = controller.get("expect_file") or ""
    if not controller.get("expect_index"):
        return {}, ""  # refused for the whole play (refuse_all)
    if not name:
        errors.append(f"slurm_health_expect_dir {folder}: {host} is not in its hosts.yml (not "
                      "probed, or no RDMA port); run rdmaprov probe INVENTORY "
                      "--write-expectations again, or leave slurm_health_expect_dir empty for "
                      "this host")
        return {}, ""
    if not controller.get("expect_found"):
        errors.append(f"slurm_health_expect_dir {folder}: {name}, which its hosts.yml names for "
                      f"{host}, is not in it (write it with rdmaprov probe INVENTORY "
                      "--write-expectations DIR)")
        return {}, ""
    found = controller.get("expect") or {}
    if not isinstance(found, dict):
        errors.append(f"slurm_health_expect_dir {folder}: {name} is not a mapping of check keys")
        return {}, ""
    return {**found, **settings["expect"]}, f"slurm_health_expect_dir {name}, slurm_health_expect"


def check_yml(expect: dict, source: str, dump) -> str:
    """check.yml's text: the header naming where its keys came from, then ``expect`` as
    ``dump`` writes YAML (the action plugin passes Ansible's to_nice_yaml with indent 2), or
    ``{}`` for none."""
    body = dump(expect, indent=2) if expect else "{}\n"
    return (f"# Managed by rdmaprov.cluster.slurm_health ({source}): rdmaprov check's "
            f"expectations.\n{body}")


def hook_argv(settings: dict, hook: str, node: str) -> list[str]:
    """The installed ``hook`` as slurmd runs it (HOOK_ENV: env -i, no PATH), with VERIFY_FLAG:
    the same check, without --drain. The NHC plug-in, which has no script of its own, is its
    command as the plug-in runs it (slurm.env sourced, then check --nhc)."""
    head = ["env", "-i", f"SLURMD_NODENAME={node}"]
    if hook in HOOK_ENV:
        return [*head, *(f"{k}={v}" for k, v in HOOK_ENV[hook].items()),
                f"{settings['script_dir']}/rdmaprov-{hook}.sh", VERIFY_FLAG]
    return [*head, "/bin/sh", "-c", NHC_SH, "sh", f"{settings['config_dir']}/slurm.env"]


def _line(text: str, last: bool = False) -> str:
    """One line of a command's output (the first, or the last that has text), printable."""
    lines = [ln for ln in str(text).splitlines() if ln.strip()] or [""]
    return "".join(c if c.isprintable() else "?" for c in lines[-1 if last else 0]).strip()


def verify(settings: dict, run, node: str = "", pending: bool = False) -> dict:
    """The role's proof: each installed hook run once as slurmd runs it (hook_argv), through
    ``run(argv) -> (rc, stdout, stderr)``. {failure: why this host fails ("" for none), verdict:
    the line to print ("" where nothing ran), state: healthy, unhealthy (exit 2: a finding about
    the node, which the hooks drain it for; arm() counts them over the play), config_error (any
    other exit: the hook cannot judge, and drains every node it runs on "rdmaprov: config error")
    or not_run, reason, runs: [{hook, argv, exit_code, stdout, stderr}]}. In check mode nothing
    is refused where the hooks are not installed yet or their files would change (``pending``):
    the check would read files this run does not write."""
    cmd = settings["rdmaprov"]
    hooks = [h for h in settings["hooks"] if h in HOOK_ENV] or ["nhc"]
    scripts = [f"{settings['script_dir']}/rdmaprov-{h}.sh" for h in hooks if h in HOOK_ENV]
    not_run = {"failure": "", "verdict": "", "state": "not_run", "reason": "", "runs": []}
    if settings["check_mode"] and (pending or not all(os.path.lexists(p) for p in scripts)):
        return {**not_run, "verdict": "not run: --check, and the files the hooks read would "
                                      "change (run without --check to prove them)"}
    if not os.path.lexists(cmd):
        failure = "" if settings["check_mode"] else (
            f"{cmd} does not exist on this node: set slurm_health_install=node_tool (the node_tool "
            "role installs it) or point slurm_health_rdmaprov at an installed rdmaprov")
        return {**not_run, "failure": failure}
    node = node or "localhost"
    runs = []
    for hook in hooks:
        argv = hook_argv(settings, hook, node)
        rc, out, err = run(argv)
        out, err = out.rstrip("\r\n"), err.rstrip("\r\n")  # as the command module returns them
        runs.append({"hook": hook, "argv": argv, "exit_code": rc, "stdout": out, "stderr": err})
        if rc not in (HEALTHY, UNHEALTHY):
            why = _line(err, last=True) or _line(out) or "no output"
            return {"failure": f"slurm_health: the {hook} hook as slurmd runs it "
                               f"({shlex.join(argv)}) exits {rc}, a configuration error that "
                               f"would drain every node it runs on: {why}",
                    "verdict": f"config error: {why}", "state": "config_error", "reason": why,
                    "runs": runs}
    sick = [r for r in runs if r["exit_code"] == UNHEALTHY]
    if not sick:
        return {"failure": "", "verdict": "healthy", "state": "healthy", "reason": "",
                "runs": runs}
    reason = _line(sick[0]["stdout"]) or "unhealthy"
    return {"failure": "", "verdict": f"unhealthy: {reason}", "state": "unhealthy",
            "reason": reason, "runs": runs}


def arm(verdicts: dict, force: bool = False) -> dict:
    """Whether to arm the hooks (slurm.conf's lines), from every host's verify() result
    (``verdicts``: {host: result}, None where none ran). A check that would drain more than half
    the nodes it was proven on is the set-up's fault far more often than the fleet's: refused
    ("would drain 3 of 3 nodes: <reason> (<hosts>)"), unless ``force``, which arms and says so.
    A few unhealthy nodes are findings: armed, named in a warning. {refuse, warning, msg}."""
    judged = {h: v for h, v in sorted(verdicts.items())
              if isinstance(v, dict) and v.get("state") in ("healthy", "unhealthy")}
    sick: dict[str, list[str]] = {}
    for host, got in judged.items():
        if got["state"] == "unhealthy":
            sick.setdefault(str(got.get("reason") or "unhealthy"), []).append(host)
    count = sum(len(h) for h in sick.values())
    what = "; ".join(f"{reason} ({', '.join(hosts)})" for reason, hosts in sick.items())
    line = f"would drain {count} of {len(judged)} nodes: {what}"
    if not judged:
        msg = "not proven here (--check, and the role's files would change)"
        return {"refuse": "", "warning": "", "msg": msg}
    if count * 2 > len(judged):
        if force:
            return {"refuse": "", "warning": f"slurm_health_force: arming although it {line}",
                    "msg": f"slurm_health_force: arming although it {line}"}
        return {"refuse": f"slurm_health: the check, as slurmd runs it, {line}; the hooks are not "
                          "armed: fix what a healthy node is (slurm_health_expect, "
                          "slurm_health_expect_dir) or set slurm_health_force: true to arm them "
                          "anyway", "warning": "", "msg": ""}
    if count:
        return {"refuse": "", "warning": f"arming: the hooks drain {count} of {len(judged)} "
                                         f"nodes when they run: {what}",
                "msg": f"proven; the hooks {line}"}
    return {"refuse": "", "warning": "", "msg": f"proven: {len(judged)} of {len(judged)} nodes "
                                                f"healthy"}


def slurm_env(settings: dict) -> str:
    """slurm.env's text, read by the hooks (files/rdmaprov-*.sh, rdmaprov.nhc): the managed
    header as Ansible's comment filter writes it, then each value shell-quoted (the hooks source
    the file)."""
    s = settings
    lines = ["#", *(f"# {ln}".rstrip() for ln in str(s.get("managed") or "Ansible managed")
                    .split("\n")), "#",
             "# rdmaprov.cluster.slurm_health: read by rdmaprov's Slurm prolog, health check and "
             "NHC plug-in.",
             f"RDMAPROV={shlex.quote(str(s['rdmaprov']))}",
             f"RDMAPROV_CHECK_CONFIG={shlex.quote(str(s['config_dir']) + '/check.yml')}"]
    if int(s.get("budget") or 0) > 0:
        lines.append(f"RDMAPROV_CHECK_BUDGET={int(s['budget'])}")
    if s.get("nccl_python"):
        lines.append(f"RDMAPROV_CHECK_NCCL_PYTHON={shlex.quote(str(s['nccl_python']))}")
    if s.get("textfile_dir"):
        lines.append(f"RDMAPROV_CHECK_PROMETHEUS={shlex.quote(str(s['textfile_dir']))}")
    if not s.get("prolog_drain", True):
        lines.append("RDMAPROV_PROLOG_DRAIN=0")
    return "\n".join(lines) + "\n"


def _step(module: str, label: str, changed: bool = False, **args) -> dict:
    """One step the slurm_health_apply action runs: ``module`` (copy, file, package, command or
    blockinfile) with ``args``; ``changed``: the step counts as a change whenever it runs."""
    return {"module": module, "label": label, "args": args, **({"changed": True} if changed else {})}


def install_steps(settings: dict, install: dict) -> list[dict]:
    """rdmaprov into the venv from the controller's wheelhouse, in order: python3-venv where
    python3 cannot make a venv, the wheelhouse, the venv (with the system's site packages: the
    distro's pyverbs), the pip commands (none where this build is in) and the build's checksum,
    recorded once its install succeeded. None unless slurm_health_install=wheelhouse."""
    if settings["install"] != "wheelhouse":
        return []
    venv, house = settings["venv"], install["wheelhouse"]
    steps = [_step("package", "python3-venv", name="python3-venv", state="present")
             ] if install["venv_package"] else []
    steps += [_step("copy", house, src=f"{settings['wheelhouse']}/", dest=f"{house}/",
                    mode="0644", directory_mode="0755"),
              _step("command", f"{venv} (venv)",
                    argv=["python3", "-m", "venv", "--system-site-packages", venv],
                    creates=f"{venv}/bin/python")]
    steps += [_step("command", shlex.join(argv), changed=True, argv=argv)
              for argv in install["commands"]]
    steps.append(_step("copy", f"{venv}/{INSTALLED}", content=install["checksum"],
                       dest=f"{venv}/{INSTALLED}", mode="0644"))
    return steps


def configure_steps(settings: dict, scripts: list[str], nhc: bool,
                    missing: list[str] = ()) -> list[dict]:
    """The files the role writes, in order: the configuration directory, the other directories
    it names that are ``missing`` on the node (the scripts', the textfile collector's: made
    root's, 0755; one that is there keeps its owner and mode), check.yml (its text comes from
    the probe's action: with_check_yml), slurm.env, the hook scripts and the NHC plug-in (from
    the role's files/)."""
    conf, bin_dir = settings["config_dir"], settings["script_dir"]
    check = _step("copy", f"{conf}/check.yml", content="", dest=f"{conf}/check.yml", mode="0644")
    check["check_yml"] = True
    steps = [_step("file", conf, path=conf, state="directory", mode="0755")]
    steps += [_step("file", path, path=path, state="directory", owner="root", group="root",
                    mode="0755") for path in missing if path != conf]
    steps += [check, _step("copy", f"{conf}/slurm.env", content=slurm_env(settings),
                           dest=f"{conf}/slurm.env", mode="0644")]
    steps += [_step("copy", f"{bin_dir}/rdmaprov-{h}.sh", src=f"rdmaprov-{h}.sh",
                    dest=f"{bin_dir}/rdmaprov-{h}.sh", mode="0755") for h in scripts]
    if nhc:
        steps.append(_step("copy", f"{settings['nhc_dir']}/rdmaprov.nhc", src="rdmaprov.nhc",
                           dest=f"{settings['nhc_dir']}/rdmaprov.nhc", mode="0644"))
    return steps


def slurm_conf_steps(settings: dict, lines: list[str]) -> list[dict]:
    """rdmaprov's managed block in slurm.conf, where the role edits it (none otherwise)."""
    if not settings["edit_slurm_conf"]:
        return []
    return [_step("blockinfile", settings["slurm_conf"], path=settings["slurm_conf"],
                  marker="# {mark} rdmaprov slurm_health", block="\n".join(lines))]


def with_check_yml(plan_: dict, text: str) -> dict:
    """``plan_`` with check.yml's text (the probe's action renders it: Ansible's to_nice_yaml,
    which the node's Python may lack) as ``check_yml`` and in the step that writes it."""
    plan_["check_yml"] = text
    for step in plan_.get("configure_steps") or []:
        if step.pop("check_yml", False):
            step["args"]["content"] = text
    return plan_


def report(settings: dict, lines: list[str]) -> str:
    """The line to print where the role leaves slurm.conf to the site ("" where it edits it)."""
    if settings["edit_slurm_conf"]:
        return ""
    words = ["Add to slurm.conf on every node and the controller, then scontrol reconfigure: "
             + " | ".join(lines)]
    if "nhc" in settings["hooks"]:
        words.append("; and to /etc/nhc/nhc.conf: * || check_rdmaprov")
    words.append("(SchedulerParameters=nohold_on_prolog_fail lets a job whose prolog failed "
                 "start elsewhere instead of waiting held)")
    return " ".join(words)


def plan(probe_result: dict, settings: dict, controller: dict | None = None,
         python_apt: bool = True) -> dict:
    """One host's probe + the role's settings + what the control host read -> what the role does.

    ``refuse_all``: a refusal for the whole play (the expectations directory has no hosts.yml),
    else ""; ``errors``: this host's refusals, in the order the role checks them (``error``: them
    in one line, "" for none);
    ``expect``/``expect_source``: check.yml's content and its origin; ``conf_lines``/
    ``conf_block``: slurm.conf's lines for the hooks; ``scripts``: the hook scripts to install;
    ``nhc``: whether to install the NHC plug-in; ``report``: the line to print; ``install``:
    whether python3-venv is needed, where the wheelhouse goes, the wheel's checksum and the pip
    commands (none where this build is in); ``install_steps``, ``configure_steps`` and
    ``slurm_conf_steps``: what the slurm_health_apply action runs, in order (install_steps(),
    configure_steps(), slurm_conf_steps()).
    ``python_apt``: whether the node's Python has apt's bindings (without them the package
    module would install python3-apt, which --check must not).
    """
    s, p, c = settings, probe_result, controller or {}
    errors: list[str] = []
    refuse_all = ""
    from_wheels = s["install"] == "wheelhouse"
    if (from_wheels and not s["wheelhouse"]) or s["budget"] < 0 or s["healthcheck_interval"] <= 0:
        errors.append("slurm_health: slurm_health_install=wheelhouse needs "
                      "slurm_health_wheelhouse (a directory of wheels on the controller); "
                      "slurm_health_budget must be >= 0 and slurm_health_healthcheck_interval > 0")
    if s["expect_dir"] and not c.get("expect_index"):
        refuse_all = (f"slurm_health_expect_dir {s['expect_dir']}: no hosts.yml in it (write it "
                      "with rdmaprov probe INVENTORY --write-expectations DIR)")
    expect, source = _expect(s, c, errors)
    wheels = rdmaprov_wheels(c.get("wheels") or [])
    if from_wheels and len(wheels) != 1:
        errors.append(f"slurm_health_wheelhouse {s['wheelhouse']}: no single rdmaprov-*.whl in it")
    nhc = "nhc" in s["hooks"]
    if nhc and not p.get("nhc_dir"):
        errors.append(f"slurm_health: hook nhc, but {s['nhc_dir']} does not exist (is LBNL NHC "
                      "installed?)")
    lines = conf_lines(s)
    if s["edit_slurm_conf"]:
        if p.get("slurm_conf") is None:
            errors.append(f"{s['slurm_conf']} cannot be read: is Slurm configured on this node? "
                          "(or leave slurm_health_edit_slurm_conf off)")
        else:
            taken = taken_keys(p["slurm_conf"], lines)
            if taken:
                errors.append(f"{s['slurm_conf']} already sets {', '.join(taken)}: merge "
                              "rdmaprov's hook into it by hand (e.g. Prolog=/etc/slurm/prolog.d/*)"
                              " and leave slurm_health_edit_slurm_conf off")
    found = p.get("dirs") or {}
    for path, name in dirs(s).items():
        if not posixpath.isabs(path):
            errors.append(f"{name} {path}: not an absolute path (the hooks run from slurmd's "
                          "directory)")
        elif found.get(path) == "other":
            errors.append(f"{name} {path}: there, but not a directory")
    missing = [path for path in dirs(s) if found.get(path) == "missing"]
    checksum = c.get("wheel_sha256") or ""
    house = f"{s['venv']}-wheelhouse"
    wheel = f"{house}/{wheels[0] if wheels else ''}"
    pip = f"{s['venv']}/bin/pip"
    # The wheel's checksum, recorded once its install succeeded, says whether this build is in.
    # A new build of the same version is "already satisfied" by the first: the second replaces
    # rdmaprov itself.
    commands = [[pip, "install", "--quiet", "--no-index", "--find-links", house, wheel],
                [pip, "install", "--quiet", "--no-index", "--no-deps", "--force-reinstall", wheel]]
    install = {
        "venv_package": from_wheels and not p.get("venv_ok", True)
        and (python_apt or not s["check_mode"]),
        "wheelhouse": house,
        "checksum": checksum,
        "commands": commands if from_wheels and p.get("installed", "") != checksum else [],
    }
    scripts = [h for h in s["hooks"] if h in ("prolog", "healthcheck")]
    return {
        "refuse_all": refuse_all,
        "errors": errors,
        "error": "; ".join(errors),
        "expect": expect,
        "expect_source": source,
        "conf_lines": lines,
        "conf_block": "\n".join(lines),
        "scripts": scripts,
        "nhc": nhc,
        "report": report(s, lines),
        "install": install,
        "install_steps": install_steps(s, install),
        "configure_steps": configure_steps(s, scripts, nhc, missing),
        "slurm_conf_steps": slurm_conf_steps(s, lines),
    }
