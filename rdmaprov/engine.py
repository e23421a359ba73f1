"""One ansible-runner session: private data dir, settings, environment, events, result.

The session builds the private data dir (a temporary one unless ``keep_artifacts`` names a
directory), writes ``env/envvars`` (rdmaprov's Ansible settings, see rdmaprov.settings) and
``env/extravars``, exposes the rdmaprov.cluster collection through a symlink on the collections
path, runs ``ansible-playbook`` through ansible-runner in a worker thread and hands every runner
event to a consumer callback in the calling thread through a queue. Results come from the
runner's stats and events, never from stdout.
A kept dir (``keep_artifacts``) keeps no secret: rdmaprov.artifacts redacts it when the run ends.

Environment: ansible-runner starts from a copy of ``os.environ``; rdmaprov passes on only the
variables in PASSTHROUGH_ENV (plus names listed in ``$RDMAPROV_PASS_ENV``, comma-separated),
so a stray ANSIBLE_* variable or PYTHONPATH in a user's shell cannot change a run unnoticed.
The run reads the ansible.cfg ansible-playbook would read where rdmaprov was started (see
rdmaprov.ansiblecfg); rdmaprov's settings outrank it.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shlex
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rdmaprov import ansiblecfg, proctree, settings
from rdmaprov.artifacts import redact_tree, secret_values
from rdmaprov.errors import UserError
from rdmaprov.hostreason import connection_line
from rdmaprov.resources import COLLECTION_NAME, COLLECTION_NAMESPACE, collection_root

# What a run may inherit from the caller's environment, and why:
PASSTHROUGH_ENV = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "TZ",  # basics ssh and python expect
    "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES",  # locale for ansible's UTF-8 check
    "SSH_AUTH_SOCK", "SSH_AGENT_PID",  # keys held in the user's agent
    "KRB5CCNAME",  # GSSAPI/Kerberos SSH logins
    "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
    "ANSIBLE_CONFIG",  # an ansible.cfg the user names explicitly
    "ANSIBLE_REMOTE_USER", "ANSIBLE_PRIVATE_KEY_FILE",  # who logs in, with which key
    "ANSIBLE_BECOME_USER", "ANSIBLE_BECOME_METHOD", "ANSIBLE_BECOME_PASSWORD_FILE",
    "ANSIBLE_VAULT_PASSWORD_FILE", "ANSIBLE_VAULT_IDENTITY_LIST",  # encrypted group_vars
    "ANSIBLE_SSH_COMMON_ARGS", "ANSIBLE_SSH_EXTRA_ARGS",  # jump hosts, without losing ours
})
ROTATE_KEPT_ARTIFACTS = 10
# After an interrupt: how long Ansible gets to stop on its own (its workers end their tasks'
# connections, it prints "User interrupted execution") before what is left is killed.
INTERRUPT_GRACE_S = 10.0  # RDMAPROV_INTERRUPT_GRACE, read by interrupt_grace()
KILL_WAIT_S = 10.0


def interrupt_grace() -> float:
    """RDMAPROV_INTERRUPT_GRACE in seconds (default INTERRUPT_GRACE_S), read when a run starts:
    a bad value is one line before any host is touched, not a traceback when rdmaprov loads."""
    raw = os.environ.get("RDMAPROV_INTERRUPT_GRACE", "").strip()
    if not raw:
        return INTERRUPT_GRACE_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 3600:
        raise UserError(f"RDMAPROV_INTERRUPT_GRACE: {raw!r} is not a number of seconds "
                        "from 0 to 3600")
    return value


class Interrupted(KeyboardInterrupt):
    """A run stopped by SIGINT/SIGTERM, once Ansible's processes are gone (or, in ``left``,
    the ones that would not go). ``in_flight``: host -> the task it was running."""

    def __init__(self, in_flight: Mapping[str, str], left: list[int],
                 kept: Path | None) -> None:
        super().__init__("interrupted")
        self.in_flight = dict(in_flight)
        self.left = left
        self.kept = kept  # the private data dir, kept because processes still use it

EventCallback = Callable[[Mapping[str, Any]], None]

# Events that carry one host's result for one task.
_HOST_RESULT_EVENTS = frozenset({
    "runner_on_ok", "runner_on_failed", "runner_on_skipped", "runner_on_unreachable",
})


@dataclass(frozen=True)
class Failure:
    """Why a host failed: the task and Ansible's message for it."""

    task: str
    message: str
    unreachable: bool = False


@dataclass
class HostResult:
    name: str
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0
    rescued: int = 0
    ignored: int = 0
    failure: Failure | None = None
    # Seconds of its task results, summed (ansible-runner's per-result "duration"): what the run
    # measured of a host that never ran its own part (validate's report times it so).
    seconds: float = 0.0

    @property
    def healthy(self) -> bool:
        return not (self.failed or self.unreachable)

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {k: getattr(self, k) for k in (
            "ok", "changed", "failed", "unreachable", "skipped", "rescued", "ignored")}
        d["failure"] = None if self.failure is None else {
            "task": self.failure.task, "message": self.failure.message,
            "unreachable": self.failure.unreachable}
        return d


@dataclass
class RunResult:
    rc: int
    status: str  # ansible-runner's: successful, failed, timeout, canceled
    hosts: dict[str, HostResult]
    artifacts_dir: Path | None  # None once the temporary private data dir is removed
    error: str | None = None  # a play-level error with no host to blame (bad playbook, ...)

    @property
    def failed_hosts(self) -> list[str]:
        return [h.name for h in self.hosts.values() if not h.healthy]

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.failed_hosts and self.error is None


@dataclass
class RunSpec:
    """What to run; every field maps to an ansible-playbook option or a setting."""

    playbook: Path
    inventory: Path
    extravars: dict[str, Any] = field(default_factory=dict)
    limit: str | None = None
    tags: list[str] = field(default_factory=list)
    skip_tags: list[str] = field(default_factory=list)
    forks: int | None = None  # None: settings.default_forks(host_count)
    host_count: int = 1
    check: bool = False
    diff: bool = False
    verbosity: int = 0
    keep_artifacts: Path | None = None
    profile: str = "tuned"
    strategy: str = "linear"
    collection: Path | None = None  # None: rdmaprov.resources.collection_root()
    # Names the user gave with -e/--set: their values are redacted from a kept artifacts dir
    # (rdmaprov.artifacts), unlike rdmaprov's own extra vars (a results dir, a backend name).
    user_vars: frozenset[str] = frozenset()
    # ansible-playbook's own arguments, one word each (connection, become and vault files,
    # --list-tasks): passed on as they are, shell-quoted for ansible-runner's cmdline.
    playbook_args: tuple[str, ...] = ()


def passthrough_names() -> frozenset[str]:
    extra = os.environ.get("RDMAPROV_PASS_ENV", "")
    return PASSTHROUGH_ENV | {n.strip() for n in extra.split(",") if n.strip()}


def default_collections_paths() -> list[str]:
    """The user's collection paths, after ours: their own setting or Ansible's defaults."""
    user = os.environ.get("ANSIBLE_COLLECTIONS_PATH") or os.environ.get("ANSIBLE_COLLECTIONS_PATHS")
    if user:
        return [p for p in user.split(os.pathsep) if p]
    return [str(Path.home() / ".ansible" / "collections"), "/usr/share/ansible/collections"]


class RunnerSession:
    """Runs one playbook through ansible-runner; ``run()`` returns a RunResult."""

    def __init__(self, spec: RunSpec, on_event: EventCallback | None = None) -> None:
        self.spec = spec
        self.on_event = on_event
        self._cancel = threading.Event()
        self._last_failure: dict[str, Failure] = {}
        self._seconds: dict[str, float] = {}
        self._errors: list[str] = []
        self._last_line = ""
        self._in_flight: dict[str, str] = {}
        self._before: frozenset[int] = frozenset()  # sessions of ours not ansible-runner's
        self._grace = interrupt_grace()

    # -- private data dir -------------------------------------------------------------------

    def _make_pdd(self) -> Path:
        keep = self.spec.keep_artifacts
        if keep is None:
            return Path(tempfile.mkdtemp(prefix="rdmaprov-"))
        try:
            keep.mkdir(parents=True, exist_ok=True)
            probe = keep / f".rdmaprov-write-test-{os.getpid()}"
            probe.touch()
            probe.unlink()
        except OSError as exc:
            raise UserError(f"--keep-artifacts {keep}: cannot write there: "
                            f"{exc.strerror or exc}") from exc
        return keep.resolve()

    def _link_collection(self, pdd: Path) -> Path:
        root = (self.spec.collection or collection_root()).resolve()
        ns = pdd / "collections" / "ansible_collections" / COLLECTION_NAMESPACE
        ns.mkdir(parents=True, exist_ok=True)
        link = ns / COLLECTION_NAME
        if link.is_symlink() or link.exists():
            link.unlink()  # a kept dir from an earlier run may point at another checkout
        link.symlink_to(root, target_is_directory=True)
        return pdd / "collections"

    def _settings_env(self, pdd: Path) -> dict[str, str]:
        # Masters are shared by runs against the same inventory with the same SSH settings only.
        key = "\0".join([str(self.spec.inventory.resolve()), str(ansiblecfg.find() or ""),
                         *(os.environ.get(v, "") for v in sorted(PASSTHROUGH_ENV)
                           if v.startswith("ANSIBLE_"))])
        control = settings.control_path_dir(key) if self.spec.profile == "tuned" else None
        local_temp = pdd / "tmp"
        local_temp.mkdir(mode=0o700, exist_ok=True)
        env = settings.environment(settings.rows(
            profile=self.spec.profile, strategy=self.spec.strategy,
            control_dir=control, local_temp=local_temp))
        colls = self._link_collection(pdd)
        env["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join(
            [str(colls), *default_collections_paths()])
        # The ansible.cfg ansible-playbook would read where rdmaprov was started (the run
        # itself starts elsewhere); none found: an empty one, so that nothing else is read.
        found = ansiblecfg.find()
        if found is None:
            found = pdd / "ansible.cfg"
            found.write_text("# rdmaprov's settings are in env/envvars; no ansible.cfg was "
                             "found where rdmaprov started.\n[defaults]\n")
        env["ANSIBLE_CONFIG"] = str(found)
        # The ansible-playbook next to this interpreter, even when the venv is not activated.
        bindir = str(Path(sys.executable).parent)
        env["PATH"] = os.pathsep.join([bindir, os.environ.get("PATH", os.defpath)])
        return env

    def _write_env_files(self, pdd: Path, envvars: dict[str, str]) -> None:
        envdir = pdd / "env"
        envdir.mkdir(mode=0o700, exist_ok=True)
        # A kept dir may hold files of an earlier run that ansible-runner would read.
        for stale in ("cmdline", "settings", "passwords", "ssh_key", "extravars", "envvars"):
            (envdir / stale).unlink(missing_ok=True)
        fd = os.open(envdir / "extravars", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(self.spec.extravars, fh, indent=1, sort_keys=True, default=str)
        (envdir / "envvars").write_text(json.dumps(envvars, indent=1, sort_keys=True) + "\n")

    def _cmdline(self) -> str | None:
        args = []
        if self.spec.check:
            args.append("--check")
        if self.spec.diff:
            args.append("--diff")
        args += self.spec.playbook_args
        return shlex.join(args) or None

    # -- environment allow-list -------------------------------------------------------------

    @staticmethod
    def _filter_env(runner_env: dict[str, str], ours: Mapping[str, str]) -> dict[str, str]:
        allowed = passthrough_names()
        out: dict[str, str] = {}
        for key, value in runner_env.items():
            inherited = os.environ.get(key) == value and key not in ours
            if inherited and key not in allowed:
                continue
            out[key] = value
        # ansible-runner folds the user's own callback settings in; keep only its own.
        from ansible_runner.utils import get_callback_dir

        out["ANSIBLE_CALLBACK_PLUGINS"] = get_callback_dir()
        out.pop("ORIGINAL_STDOUT_CALLBACK", None)
        return out

    # -- events -----------------------------------------------------------------------------

    def _record(self, event: Mapping[str, Any]) -> None:
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        if kind == "runner_on_start" and data.get("host"):
            self._in_flight[str(data["host"])] = task_label(data)
        elif kind in _HOST_RESULT_EVENTS:
            self._in_flight.pop(str(data.get("host", "")), None)
            took = data.get("duration")
            if isinstance(took, int | float) and not isinstance(took, bool):
                host = str(data.get("host", ""))
                self._seconds[host] = self._seconds.get(host, 0.0) + float(took)
        if kind in ("runner_on_failed", "runner_on_unreachable"):
            if data.get("ignore_errors"):
                return
            host = str(data.get("host", ""))
            self._last_failure[host] = Failure(
                task=task_label(data), message=failure_message(data.get("res") or {}),
                unreachable=kind == "runner_on_unreachable")
        elif kind in ("verbose", "error") and event.get("stdout"):
            for line in str(event["stdout"]).splitlines():
                said = ansible_error(line)
                if said:
                    self._errors.append(said)
                elif line.strip() and not line[0].isspace():
                    self._last_line = line.strip()  # a traceback's last line says what broke

    # -- run --------------------------------------------------------------------------------

    def run(self) -> RunResult:
        from ansible_runner.interface import init_runner

        spec = self.spec
        pdd = self._make_pdd()
        pdd_in_use = False
        secrets = secret_values(spec.extravars, spec.user_vars, [os.environ])
        try:
            envvars = self._settings_env(pdd)
            self._write_env_files(pdd, envvars)
            forks = spec.forks or settings.default_forks(spec.host_count)
            events: queue.Queue[Mapping[str, Any]] = queue.Queue()
            kwargs: dict[str, Any] = {
                "private_data_dir": str(pdd),
                "playbook": str(spec.playbook.resolve()),
                "inventory": str(spec.inventory.resolve()),
                "ident": time.strftime("%Y%m%dT%H%M%S-") + uuid.uuid4().hex[:6],
                "forks": forks,
                "verbosity": spec.verbosity or None,
                "limit": spec.limit,
                "tags": ",".join(spec.tags) or None,
                "skip_tags": ",".join(spec.skip_tags) or None,
                "cmdline": self._cmdline(),
                "quiet": True,
                "json_mode": False,
                "suppress_env_files": True,  # env/ is written by us, freshly, each run
                "rotate_artifacts": ROTATE_KEPT_ARTIFACTS if spec.keep_artifacts else 0,
                "event_handler": lambda ev: _put(events, ev),
                "cancel_callback": self._cancel.is_set,
            }
            runner = init_runner(**kwargs)
            runner.config.env = self._filter_env(runner.config.env, envvars)
            secrets = secret_values(spec.extravars, spec.user_vars,
                                    [os.environ, runner.config.env])
            worker = threading.Thread(target=runner.run, name="ansible-runner", daemon=True)
            self._before = proctree.session_leaders(os.getpid())
            worker.start()
            try:
                while worker.is_alive() or not events.empty():
                    try:
                        ev = events.get(timeout=0.1)
                    except queue.Empty:
                        continue
                    self._record(ev)
                    if self.on_event is not None:
                        self.on_event(ev)
            except BaseException as exc:
                in_flight = dict(self._in_flight)
                left = self._stop(worker, events)
                if left:
                    pdd_in_use = True
                if isinstance(exc, KeyboardInterrupt):
                    raise Interrupted(in_flight, [p.pid for p in left],
                                      pdd if left else None) from None
                raise
            worker.join()
            artifacts = Path(runner.config.artifact_dir)
            return self._result(runner, artifacts if spec.keep_artifacts else None)
        finally:
            if pdd_in_use:
                pass  # processes that would not die still use it: Interrupted names it
            elif spec.keep_artifacts is None:
                shutil.rmtree(pdd, ignore_errors=True)
            else:
                redact_tree(pdd, secrets)

    def _stop(self, worker: threading.Thread,
              events: queue.Queue[Mapping[str, Any]]) -> list[proctree.Proc]:
        """Stop ansible-playbook and its workers, and wait (bounded) until they are gone: SIGINT
        to each of their process groups (they run in sessions of their own, so the terminal's
        Ctrl-C reached none of them), RDMAPROV_INTERRUPT_GRACE for Ansible to end its connections,
        then SIGKILL. Another Ctrl-C or SIGTERM meanwhile goes straight to SIGKILL. Returns
        the processes still alive at the end (none, unless they cannot be killed)."""
        seen: dict[tuple[int, int], proctree.Proc] = {}

        def sweep() -> list[proctree.Proc]:
            # Workers reparent away once ansible-playbook ends: remember every process seen.
            for p in proctree.started_sessions(os.getpid(), "ansible-playbook", self._before):
                seen.setdefault((p.pid, p.start), p)
            return [p for p in seen.values() if proctree.alive(p)]

        deadline = time.monotonic() + self._grace
        killed = signalled = False
        while True:
            try:
                if not signalled:
                    signalled = True
                    running = sweep()
                    proctree.signal_groups(running, proctree.INTERRUPT)
                    if not running:  # not started yet: ansible-runner must not start it
                        self._cancel.set()
                while not events.empty():
                    self._record(events.get_nowait())
                living = sweep()
                if not living and not worker.is_alive():
                    return []
                if time.monotonic() > deadline:
                    if killed:
                        return living
                    raise KeyboardInterrupt
                time.sleep(0.1)
            except KeyboardInterrupt:
                if killed:
                    continue
                killed = True
                self._cancel.set()  # ansible-runner's own stop (SIGKILL to its child's group)
                for p in sweep():
                    with contextlib.suppress(OSError):
                        os.kill(p.pid, proctree.KILL)
                deadline = time.monotonic() + KILL_WAIT_S

    def _result(self, runner: Any, artifacts: Path | None) -> RunResult:
        stats: Mapping[str, Mapping[str, int]] = runner.stats or {}
        hosts: dict[str, HostResult] = {}
        mapping = {"ok": "ok", "changed": "changed", "failures": "failed",
                   "dark": "unreachable", "skipped": "skipped", "rescued": "rescued",
                   "ignored": "ignored", "processed": None}
        for key, attr in mapping.items():
            for host, count in (stats.get(key) or {}).items():
                hr = hosts.setdefault(host, HostResult(host))
                if attr:
                    setattr(hr, attr, int(count))
        for hr in hosts.values():
            hr.seconds = round(self._seconds.get(hr.name, 0.0), 3)
            if not hr.healthy:
                hr.failure = self._last_failure.get(hr.name)
        rc = int(runner.rc if runner.rc is not None else 1)
        error = None
        if rc != 0 and not any(not h.healthy for h in hosts.values()):
            # Ansible's own words when it failed before any host: its error line, else the
            # last line it printed (an exception it did not catch), else the status.
            error = self._errors[0] if self._errors else (
                f"ansible-playbook: {self._last_line}" if self._last_line else
                f"ansible-playbook ended with status {runner.status} (rc {rc}) "
                "and no host to blame")
        return RunResult(rc=rc, status=str(runner.status), hosts=dict(sorted(hosts.items())),
                         artifacts_dir=artifacts, error=error)


def ansible_error(line: str) -> str | None:
    """The message of an error line of ansible-playbook (``[ERROR]: ...`` in 2.19+, ``ERROR!
    ...`` before, ``ERROR: ...`` for a configuration it cannot load), or None."""
    for mark in ("[ERROR]:", "ERROR!", "ERROR:"):
        if line.startswith(mark):
            return line[len(mark):].strip() or None
    return None


def _put(events: queue.Queue[Mapping[str, Any]], event: Mapping[str, Any]) -> bool:
    """ansible-runner's event handler: True keeps the event in the artifacts too."""
    events.put(event)
    return True


def task_label(event_data: Mapping[str, Any]) -> str:
    """'role : task' the way Ansible prints it (roles given by FQCN lose the prefix)."""
    task = str(event_data.get("task") or event_data.get("task_action") or "?")
    role = event_data.get("role")
    if role:
        return f"{str(role).rsplit('.', 1)[-1]} : {task}"
    return task


# What Ansible says of a whole task that tells nothing of why: the reason is in a loop item's
# result ("All items completed" is what a loop whose host went unreachable says), or in the
# command's own stderr.
_SAYS_NOTHING = frozenset({"One or more items failed", "All items completed",
                           "non-zero return code"})


# A module that crashed: Ansible's (linear) and mitogen's words for it.
_MODULE_CRASHED = ("MODULE FAILURE", "Module result deserialization failed")
_ERRNO = re.compile(r"\[Errno \d+\]")


def failure_message(res: Mapping[str, Any]) -> str:
    """One line saying why a task failed, from its result (never from stdout); an unreachable
    host's, ssh's first meaningful line (rdmaprov.hostreason.connection_line)."""
    msg = res.get("msg")
    if res.get("unreachable") and isinstance(msg, str) and msg.strip() and \
            msg.strip() not in _SAYS_NOTHING:
        return connection_line(msg)
    if isinstance(msg, str) and msg.strip() and msg.strip() not in _SAYS_NOTHING:
        text = msg
    else:
        for item in res.get("results") or []:
            if isinstance(item, Mapping) and (item.get("failed") or item.get("unreachable")):
                return failure_message(item)
        stderr = [line for line in str(res.get("stderr") or "").splitlines() if line.strip()]
        if stderr:
            text = stderr[-1]
        elif res.get("rc") not in (None, 0):
            text = f"command failed with rc {res.get('rc')}"
        else:
            text = str(msg or "failed")
    if text.startswith(_MODULE_CRASHED):
        # The module died before it could answer: its own last words say why (a full disk, a
        # missing library), whichever strategy ran it.
        for key in ("module_stderr", "module_stdout", "exception"):
            lines = [line for line in str(res.get(key) or "").splitlines() if line.strip()]
            # The OS's own error, where a wrapper re-raised it in words of its own (mitogen:
            # "Failed to replace ..." after "OSError: [Errno 28] No space left on device").
            lines = [line for line in lines if _ERRNO.search(line)] or lines
            if lines:
                text = f"{text.split(chr(10))[0].rstrip('.:')}: {lines[-1].strip()}"
                break
    text = " ".join(text.split())
    for prefix in ("Task failed: ", "Action failed: "):
        text = text.removeprefix(prefix)
    return text
