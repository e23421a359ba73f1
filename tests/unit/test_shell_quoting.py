"""Inventory text never reaches a shell unquoted.

Every place where a role's value reaches a shell is found from the role files themselves (so a
new one is covered without editing this test): tasks of the shell/raw/script/command modules,
argv lists that start a shell (``sh -c``, also behind ``systemd-run``), templates that are shell
scripts (a ``#!`` line or ``.sh``), files a shell sources (``.env``) and the Exec lines of
systemd units. Each is rendered with Jinja and Ansible's own filters (``quote``, ``to_json``, ...)
with every string value set to a hostile one (``$(touch X)``, backticks, ``;``, a newline,
spaces, quotes), then

- run: under ``/bin/sh`` (a unit's Exec line split and ``$$``-unescaped as systemd does, then
  executed without a shell) with PATH holding only no-op shims for the node's tools (nft,
  systemd-run, ip, mlnx_qos, ...) and the real ``touch``: X is never created;
- read: every occurrence of the payload in shell text lies inside single quotes or a comment
  (the branches the run does not take are judged too).

A site whose Jinja names a variable this test cannot give a hostile value fails, asking for one.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
import pytest
import yaml

from rdmaprov import collection
from rdmaprov.collection import netcfg_qos as qos
from rdmaprov.collection import validate_launch

ROOT = Path(__file__).resolve().parents[2]

SHELL_MODULES = {"shell", "ansible.builtin.shell", "raw", "ansible.builtin.raw"}
COMMAND_MODULES = {"command", "ansible.builtin.command"}
SCRIPT_MODULES = {"script", "ansible.builtin.script"}
SHELLS = {"sh", "bash", "dash"}
# Tools a rendered line may call on a node: no-op shims (timeout and systemd-run run the command
# they are given, as the real ones do, through the same shims).
NOOP_TOOLS = ("nft", "ip", "sysctl", "systemctl", "modprobe", "mlnx_qos", "dcb", "logger",
              "sleep", "mkdir", "podman", "docker", "python3", "scontrol", "ethtool", "tc",
              "ping", "apt-get", "dnf", "rm")
REAL_TOOLS = ("touch", "cat")

PAYLOADS = (
    "$(touch {x})",
    "`touch {x}`",
    "x;touch {x}",
    "x\ntouch {x}",
    "x' ; touch {x} ; '",
    'x" ; touch {x} ; "',
    "x && touch {x} #",
    "'$(touch {x})'",
    "x\nExecStartPre=/bin/sh -c 'touch {x}'",
    "x\ninstall x /bin/sh -c 'touch {x}'",
)

class Hostile(str):
    """Host or probe data of any shape, every leaf the hostile text: a field, an item, an
    element of it is the same text again (Env.getattr/getitem)."""

    def __iter__(self):  # a list of one element: itself
        yield self

    def __radd__(self, other):  # a list it extends: one element more (as an argv list's tail)
        return [*other, self] if isinstance(other, list) else NotImplemented


# Ansible's own variables a site may name.
MAGIC = {"ansible_managed": "Ansible managed", "ansible_check_mode": False,
         "omit": "__omit__"}


def _core(payload: str, x: str) -> str:
    """The part of a payload that quoting keeps contiguous (quote splits a payload at ')."""
    text = payload.format(x=x)
    return text if "'" not in text else "touch " + x


# -- the sites -----------------------------------------------------------------------------

@dataclass
class Site:
    where: str
    kind: str  # shell | argv | words | script | sourced | unit
    source: Any  # template text, or a list of template texts (argv)
    role: str | None
    vars: dict[str, Any] = field(default_factory=dict)
    executable: str | None = None


def _task_files() -> list[tuple[Path, str | None]]:
    out = [(p, p.parts[-3]) for p in sorted(ROOT.glob("roles/*/tasks/*.yml"))]
    out += [(p, p.parts[-3]) for p in sorted(ROOT.glob("roles/*/handlers/*.yml"))]
    out += [(p, None) for p in sorted(ROOT.glob("playbooks/*.yml"))]
    return out


def _walk(node: Any, where: str, role: str | None, scope: dict[str, Any], out: list[Site]) -> None:
    if isinstance(node, list):
        for item in node:
            _walk(item, where, role, scope, out)
        return
    if not isinstance(node, dict):
        return
    own = {**scope, **(node.get("vars") or {})}
    name = f"{where}: {node.get('name', '?')}"
    for module in SHELL_MODULES | COMMAND_MODULES | SCRIPT_MODULES:
        if module not in node:
            continue
        args = node[module]
        exe = None
        if isinstance(args, dict):
            exe = args.get("executable")
            argv = args.get("argv")
            text = args.get("cmd", args.get("_raw_params"))
        else:
            argv, text = None, args
        if module in SHELL_MODULES:
            out.append(Site(name, "shell", text, role, own, exe))
        elif argv is not None:
            # A list of words, or one expression whose value is the list.
            out.append(Site(name, "argv", argv if isinstance(argv, str) else list(argv), role,
                            own))
        else:
            # command: Ansible splits the line (shlex) and runs it without a shell; a script:
            # its first word is a file of the collection, the rest its arguments.
            out.append(Site(name, "words", text, role, own))
    for value in node.values():
        if isinstance(value, (list, dict)):
            _walk(value, where, role, own, out)


def sites() -> list[Site]:
    out: list[Site] = []
    for path, role in _task_files():
        _walk(yaml.safe_load(path.read_text()), str(path.relative_to(ROOT)), role, {}, out)
    for path in sorted(ROOT.glob("roles/*/templates/*.j2")):
        text = path.read_text()
        role = path.parts[-3]
        rel = str(path.relative_to(ROOT))
        stem = path.name.removesuffix(".j2")
        if text.startswith("#!") or stem.endswith(".sh"):
            out.append(Site(rel, "script", text, role))
        elif stem.endswith(".env"):
            out.append(Site(rel, "sourced", text, role))
        elif stem.endswith((".service", ".timer", ".socket")):
            out.append(Site(rel, "unit", text, role))
        elif stem.startswith("modprobe"):
            out.append(Site(rel, "modprobe", text, role))
    return out


# -- hostile values ------------------------------------------------------------------------

def _specs() -> dict[str, dict[str, Any]]:
    options: dict[str, dict[str, Any]] = {}
    for f in sorted(ROOT.glob("roles/*/meta/argument_specs.yml")):
        for entry in (yaml.safe_load(f.read_text())["argument_specs"] or {}).values():
            options.update((entry or {}).get("options") or {})
    return options


def _yaml_vars(pattern: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in sorted(ROOT.glob(pattern)):
        out.update(yaml.safe_load(f.read_text()) or {})
    return out


SPECS = _specs()
DEFAULTS = _yaml_vars("roles/*/defaults/main.yml")
ROLE_VARS = _yaml_vars("roles/*/vars/main.yml")


def _hostile_option(name: str, spec: dict[str, Any], bad: str) -> Any:
    kind = str(spec.get("type", "str"))
    if kind in ("str", "path", "raw"):
        return bad
    if kind == "list":
        sub = spec.get("options")
        if sub:
            return [{k: _hostile_option(k, o or {}, bad) if str((o or {}).get("type", "str"))
                     in ("str", "path", "raw") else 1500 for k, o in sub.items()}]
        return [bad] if str(spec.get("elements", "str")) in ("str", "path", "raw") \
            else DEFAULTS.get(name, [])
    return DEFAULTS.get(name)


def _validate_launch(bad: str, workdir: Path) -> dict[str, Any]:
    settings = {"label": bad, "host": bad, "members": [bad], "results_dir": bad,
                "results": bad, "rails": "auto", "engine": "podman", "master_port": 29500,
                "runtime": "container", "image": bad, "launcher": bad, "backend": bad,
                "nproc": 1, "timeout": 5, "poll_interval": 1}
    launch = {"dir": str(workdir / "run"), "argv": ["python3", bad, "--name", bad],
              "container": bad, "env": {}}
    return {**launch, **validate_launch.run_plan(settings, launch, bad)}


def _fixtures(bad: str, workdir: Path) -> dict[str, Any]:
    """Values of what a probe, a registered result or set_fact gives a site: host text, as
    hostile as inventory text."""
    plans = []
    for backend in ("mlnx_qos", "dcb", ""):
        want = {"pfc": [0, 0, 0, 1, 0, 0, 0, 0], "dscp2prio": {26: 3}}
        cmds = (qos.mlnx_qos_commands(bad, want) if backend == "mlnx_qos"
                else qos.dcb_commands(bad, want) if backend == "dcb" else [])
        plans.append({"name": bad, "backend": backend, "state": {"ibdev": bad},
                      "commands": [qos.shell_line(c) for c in cmds],
                      "writes": [{"path": f"/sys/class/net/{bad}/ecn/roce_np/enable/3",
                                  "value": bad}]})
    iface = {"name": bad, "mtu": 9000}
    data = Hostile(bad)
    return {
        # Probes and registered results, read field by field.
        **{name: data for name in ("_container_runtime_probe", "_firewall_probe",
                                   "_nccl_validate_probe", "_net_mtu_probe",
                                   "_rdma_ofed_probe", "_slurm_health_probe",
                                   "ansible_facts", "hostvars", "item")},
        "inventory_hostname": bad,
        "_roce_qos_plans": plans,
        "_nccl_validate_label": bad,
        # The preflight's launch, with what the role does around it (run_plan), of host text.
        "_nccl_validate_pf": {"launch": _validate_launch(bad, workdir)},
        "i": iface,
    }


class Values:
    """Resolve the names a template uses: fixtures, public options (hostile by type), the
    roles' vars/main.yml (rendered from these), task vars."""

    def __init__(self, env: jinja2.Environment, bad: str, workdir: Path) -> None:
        self.env = env
        self.bad = bad
        self.fixtures = _fixtures(bad, workdir)
        self.done: dict[str, Any] = {}

    def context(self, source: Any, local: dict[str, Any]) -> dict[str, Any]:
        ctx: dict[str, Any] = {}
        for name in self.names(source):
            ctx[name] = self.value(name, local)
        return ctx

    def names(self, source: Any) -> set[str]:
        if isinstance(source, str):
            return set(jinja2.meta.find_undeclared_variables(self.env.parse(source)))
        if isinstance(source, list):
            return set().union(*(self.names(s) for s in source)) if source else set()
        if isinstance(source, dict):
            return set().union(*(self.names(v) for v in source.values())) if source else set()
        return set()

    def value(self, name: str, local: dict[str, Any]) -> Any:
        if name in self.fixtures:
            return self.fixtures[name]
        if name in local:
            return self.render(local[name], {k: v for k, v in local.items() if k != name})
        if name in MAGIC:
            return MAGIC[name]
        if name in SPECS:
            return _hostile_option(name, SPECS[name], self.bad)
        if name in ROLE_VARS:
            if name not in self.done:
                self.done[name] = self.render(ROLE_VARS[name], {})
            return self.done[name]
        raise AssertionError(f"a shell-reaching site names {name!r}: give it a hostile value "
                             "in tests/unit/test_shell_quoting.py's _fixtures")

    def render(self, source: Any, local: dict[str, Any]) -> Any:
        if isinstance(source, list):
            return [self.render(s, local) for s in source]
        if isinstance(source, dict):
            return {k: self.render(v, local) for k, v in source.items()}
        if not isinstance(source, str) or "{" not in source:
            return source
        whole = re.fullmatch(r"\s*\{\{(.*)\}\}\s*", source, re.S)
        if whole and "{{" not in whole[1]:
            # One expression: its value as it is (Ansible keeps a lone expression's type).
            return self.env.compile_expression(whole[1])(**self.context(source, local))
        text = self.env.from_string(source).render(self.context(source, local))
        stripped = text.strip()
        if stripped[:1] in "[{" and stripped[-1:] in "]}":
            try:
                return ast.literal_eval(stripped)
            except (ValueError, SyntaxError):
                pass
        return text


class Env(jinja2.Environment):
    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, Hostile) and not attribute.startswith("__"):
            return obj
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        if isinstance(obj, Hostile) and isinstance(argument, str):
            return obj
        return super().getitem(obj, argument)


def _collection_filter(func: Any) -> Any:
    def inner(value: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return func(value, *args, **kwargs)
        except Exception:  # hostile input a filter refuses: the value goes on as it is
            return value
    return inner


def _env() -> jinja2.Environment:
    import importlib

    from ansible.plugins.filter.core import FilterModule as Core
    from ansible.plugins.filter.mathstuff import FilterModule as Math
    from ansible.plugins.test.core import TestModule

    env = Env(undefined=jinja2.StrictUndefined, trim_blocks=True,
              extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"])
    env.filters.update(Core().filters())
    env.filters.update(Math().filters())
    env.tests.update(TestModule().tests())
    for path in sorted((ROOT / "plugins/filter").glob("*.py")):
        mod = importlib.import_module(f"ansible_collections.rdmaprov.cluster.plugins.filter."
                                      f"{path.stem}")
        for name, func in mod.FilterModule().filters().items():
            env.filters[f"rdmaprov.cluster.{name}"] = _collection_filter(func)
    return env


# -- running -------------------------------------------------------------------------------

def _shims(tmp: Path) -> Path:
    shims = tmp / "shims"
    shims.mkdir()
    run = shims / "_run"
    run.write_text('#!/bin/sh\nb=${1##*/}\ncase "$b" in sh|bash|dash) shift; exec /bin/sh "$@";; '
                   'esac\nif [ -x "$SHIMS/$b" ]; then shift; exec "$SHIMS/$b" "$@"; fi\nexit 0\n')
    (shims / "systemd-run").write_text(
        '#!/bin/sh\nwhile [ $# -gt 0 ]; do case "$1" in --*) shift;; *) break;; esac; done\n'
        'exec "$SHIMS/_run" "$@"\n')
    (shims / "timeout").write_text(
        '#!/bin/sh\nwhile [ $# -gt 0 ]; do case "$1" in -k|-s) shift 2;; -*) shift;; '
        '*) break;; esac; done\nshift\nexec "$SHIMS/_run" "$@"\n')
    for tool in NOOP_TOOLS:
        (shims / tool).write_text("#!/bin/sh\nexit 0\n")
    for path in shims.iterdir():
        path.chmod(0o755)
    for tool in REAL_TOOLS:
        (shims / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    (shims / "sh").symlink_to("/bin/sh")
    return shims


def _run(argv: list[str], shims: Path, cwd: Path) -> None:
    if not argv:
        return
    argv = [str(shims / "_run"), *argv]  # the command itself through the shims, never the host's
    subprocess.run(argv, cwd=cwd, env={"PATH": str(shims), "SHIMS": str(shims)},
                   stdin=subprocess.DEVNULL, capture_output=True, timeout=20, check=False)


def _systemd_words(line: str) -> list[str]:
    """An Exec line's argv as systemd makes it: prefixes dropped, quotes removed, $$ -> $."""
    line = line.lstrip("-@:+!")
    return [w.replace("$$", "$") for w in shlex.split(line)]


def _shell_scripts(argv: list[str]) -> list[str]:
    """The script texts an argv hands a shell (sh -c SCRIPT), behind systemd-run or not."""
    out = []
    for i, word in enumerate(argv[:-1]):
        if word == "-c" and i > 0 and os.path.basename(argv[i - 1]) in SHELLS:
            out.append(argv[i + 1])
    return out


def _unquoted(text: str, needle: str) -> list[int]:
    """Offsets where ``needle`` occurs in shell ``text`` outside single quotes and comments."""
    state = []  # per character: "'" single, '"' double, "#" comment, "" plain
    mode = ""
    prev = "\n"
    i = 0
    while i < len(text):
        c = text[i]
        if mode == "'":
            state.append(mode)
            mode = "" if c == "'" else mode
        elif mode == '"':
            state.append(mode)
            if c == "\\" and i + 1 < len(text):
                state.append(mode)
                i += 1
            elif c == '"':
                mode = ""
        elif mode == "#":
            if c == "\n":
                mode = ""
                state.append("")
            else:
                state.append(mode)
        else:
            if c == "'":
                mode = "'"
            elif c == '"':
                mode = '"'
            elif c == "#" and (prev.isspace() or prev in ";&|("):
                mode = "#"
            state.append(mode if c != "'" and c != '"' else "")
            if c == "\\" and i + 1 < len(text):
                state.append("")
                i += 1
        prev = c
        i += 1
    bad = []
    for m in re.finditer(re.escape(needle), text):
        span = state[m.start():m.end()]
        if not all(s in ("'", "#") for s in span):
            bad.append(m.start())
    return bad


def _check(site: Site, values: Values, env: jinja2.Environment, shims: Path, work: Path,
           needle: str) -> list[str]:
    """Run the site and read its shell text; the problems found."""
    found = []
    texts: list[str] = []
    if site.kind in ("shell", "script", "sourced"):
        text = values.render(site.source, site.vars)
        texts.append(text)
        if site.kind == "shell":
            _run([site.executable or "/bin/sh", "-c", text], shims, work)
        else:
            script = work / "rendered.sh"
            script.write_text(text)
            _run(["/bin/sh", "-c", f". {shlex.quote(str(script))}"] if site.kind == "sourced"
                 else ["/bin/sh", str(script)], shims, work)
    elif site.kind == "argv":
        argv = [str(a) for a in values.render(site.source, site.vars)]
        texts += _shell_scripts(argv)
        _run(argv, shims, work)
    elif site.kind == "words":
        if "{{" in str(site.source) or "{%" in str(site.source):
            # Ansible splits the rendered line at whitespace and quotes: a value becomes
            # several arguments (options included). Values go in argv lists.
            found.append(f"{site.where}: a value templated into a command line: use argv")
        argv = shlex.split(str(values.render(site.source, site.vars)))
        texts += _shell_scripts(argv)
        _run(argv, shims, work)
    elif site.kind == "modprobe":
        # modprobe.d: `install MODULE CMD` and `remove MODULE CMD` run CMD with /bin/sh -c.
        for line in str(values.render(site.source, {})).splitlines():
            words = line.split(None, 2)
            if len(words) == 3 and words[0] in ("install", "remove"):
                texts.append(words[2])
                _run(["/bin/sh", "-c", words[2]], shims, work)
    elif site.kind == "unit":
        text = values.render(site.source, {})
        for line in text.splitlines():
            key, sep, cmd = line.partition("=")
            if sep and re.fullmatch(r"Exec\w+", key.strip()):
                try:
                    argv = _systemd_words(cmd)
                except ValueError:
                    found.append(f"{site.where}: {key} does not parse: {line!r}")
                    continue
                texts += _shell_scripts(argv)
                _run(argv, shims, work)
    for text in texts:
        for offset in _unquoted(text, needle):
            found.append(f"{site.where}: hostile value unquoted in shell text: "
                         f"{text[max(0, offset - 40):offset + len(needle) + 10]!r}")
    return found


ALL_SITES = sites()


def test_sites_are_found() -> None:
    """The enumeration finds the known sites (a broken walk would make every test vacuous)."""
    where = {s.where.split(":")[0] for s in ALL_SITES}
    for expected in ("roles/firewall/tasks/configure.yml",
                     "roles/nccl_validate/tasks/run.yml",
                     "roles/net_mtu/tasks/configure.yml", "roles/slurm_health/handlers/main.yml"):
        assert expected in where


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
@pytest.mark.parametrize("site", ALL_SITES, ids=lambda s: s.where)
def test_hostile_values_never_reach_a_shell(site: Site, payload: str, tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    bad = payload.format(x=marker)
    work = tmp_path / "work"
    (work / "run").mkdir(parents=True)
    env = _env()
    shims = _shims(tmp_path)
    problems = _check(site, Values(env, bad, work), env, shims, work, _core(payload, str(marker)))
    assert not marker.exists(), f"{site.where}: {bad!r} ran in a shell"
    assert not problems, "\n".join(problems)


def test_the_check_catches_an_unquoted_value(tmp_path: Path) -> None:
    """The test can fail: an unquoted value in a shell line is run and flagged."""
    marker = tmp_path / "PWNED"
    bad = PAYLOADS[0].format(x=marker)
    work = tmp_path / "work"
    work.mkdir()
    env = _env()
    shims = _shims(tmp_path)
    site = Site("made-up", "shell", "nft -f {{ firewall_nft_dir }}/x", None)
    problems = _check(site, Values(env, bad, work), env, shims, work, bad)
    assert marker.exists() and problems
    marker.unlink()
    quoted = Site("made-up", "shell", "nft -f {{ firewall_nft_dir | quote }}/x", None)
    assert not _check(quoted, Values(env, bad, work), env, shims, work, bad)
    assert not marker.exists()


class Rendered(Values):
    """The files a role's plan renders in Python (module_utils): their text is final."""

    def render(self, source: Any, local: dict[str, Any]) -> Any:
        return source


def plan_sites(bad: str) -> list[Site]:
    """The shell scripts and units the roles' plans render, from hostile host and inventory text."""
    plans = _fixtures(bad, ROOT)["_roce_qos_plans"]
    # The firewall's rollback timer and detached load, as netcfg_firewall.apply_steps plans them
    # for a ruleset directory of inventory text.
    steps = collection.netcfg_firewall.apply_steps(
        {"backend": "nftables", "new_ruleset": True, "errors": [], "nft_candidate": f"{bad}/n",
         "nft_rollback": f"{bad}/r"},
        {"nft_table": bad, "nft_dir": bad, "nft_unit_name": bad, "rollback_seconds": 45})
    qos_settings = {"pfc_priority": 3, "dscp": 26, "ecn_codepoint": "ect0",
                    "rdma_cm_defaults": True, "script": bad, "unit_name": bad}
    return [Site("netcfg_qos.script", "script", qos.script(plans, qos_settings), "roce_qos"),
            Site("netcfg_qos.unit", "unit", qos.unit(qos_settings), "roce_qos"),
            Site("netcfg_firewall.nft_unit", "unit", collection.netcfg_firewall.nft_unit(bad, bad),
                 "firewall"),
            Site("netcfg_mtu.unit", "unit",
                 collection.netcfg_mtu.unit([{"name": bad, "mtu": 9000}]), "net_mtu"),
            *(Site(f"netcfg_firewall.{key}", "argv", steps[key], "firewall")
              for key in ("nft_arm", "nft_load")),
            # The managed-file header: the play's ansible_managed, which an inventory may set
            # to anything (several lines included); each line stays a comment.
            Site("netcfg_qos.script managed", "script",
                 qos.script(plans, {**qos_settings, "script": "s", "unit_name": "u"}, bad),
                 "roce_qos"),
            Site("netcfg_qos.unit managed", "unit",
                 qos.unit({**qos_settings, "script": "s", "unit_name": "u"}, bad), "roce_qos"),
            Site("netcfg_firewall.nft_unit managed", "unit",
                 collection.netcfg_firewall.nft_unit("t", "/f", bad), "firewall"),
            Site("netcfg_mtu.unit managed", "unit",
                 collection.netcfg_mtu.unit([{"name": "eth1", "mtu": 9000}], bad), "net_mtu")]


PLAN_SITES = [s.where for s in plan_sites("x")]


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
@pytest.mark.parametrize("where", PLAN_SITES)
def test_hostile_values_never_reach_a_shell_from_a_plan(where: str, payload: str,
                                                        tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    bad = payload.format(x=marker)
    work = tmp_path / "work"
    (work / "run").mkdir(parents=True)
    env = _env()
    site = next(s for s in plan_sites(bad) if s.where == where)
    text = "\n".join(site.source) if isinstance(site.source, list) else site.source
    assert bad in text or "touch" in text  # the hostile text is in the file (or argv)
    problems = _check(site, Rendered(env, bad, work), env, _shims(tmp_path), work,
                      _core(payload, str(marker)))
    assert not marker.exists(), f"{where}: {bad!r} ran in a shell"
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("value", ["eth1", "/etc/rdmaprov/firewall.nft", "a b", 'q"uote',
                                   "new\nline", "$(x)", "100%", "back\\slash", "it's"])
def test_systemd_word_is_one_word_meaning_itself(value: str) -> None:
    word = collection.unit_words.systemd_word(value)
    assert "\n" not in word
    assert word == value if re.fullmatch(r"[\w@+=:,./-]+", value) else word.startswith('"')
    # systemd's unquoting (C escapes in "...", then $$ and %% halved) gives the value back.
    inner = word[1:-1] if word.startswith('"') else word
    unescaped = re.sub(r"\\(x[0-9a-f]{2}|.)", lambda m: {"n": "\n", "t": "\t"}.get(
        m[1], chr(int(m[1][1:], 16)) if m[1].startswith("x") else m[1]), inner)
    assert unescaped.replace("$$", "$").replace("%%", "%") == value
