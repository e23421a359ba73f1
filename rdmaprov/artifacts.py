"""Secrets out of a kept private data dir (``--keep-artifacts``).

A kept dir is for people to read and share, so it keeps no value given with ``-e``/``--set``,
no become or vault password and no credential from the environment. ansible-runner writes the
run's environment into ``artifacts/*/command``, Ansible's output into ``artifacts/*/stdout`` and
every event into ``artifacts/*/job_events/``; ``suppress_env_files`` keeps runner's own copies out
of ``env/``. What remains is redacted here once the run ends: every file under the dir (symlinks
are not followed: the collection link points into a checkout), JSON files value by value so they
stay valid JSON, other files as text. ``env/extravars`` keeps the variables' names only.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

REDACTED = "<redacted by rdmaprov>"

# Values shorter than this are kept unless their name says secret: "9000" or "true" given with
# -e hide nothing, and blanking every such word would garble the whole log.
MIN_LENGTH = 4

# An environment variable (or -e variable) whose name says it holds a credential.
_SECRET_NAME = re.compile(
    r"(TOKEN|PASSWORD|PASSWD|PASSPHRASE|SECRET|CREDENTIAL|API_?KEY|ACCESS_KEY|PRIVATE_KEY)",
    re.IGNORECASE)
# ... unless it names where the credential is (ANSIBLE_BECOME_PASSWORD_FILE is a path).
_PATH_SUFFIXES = ("_FILE", "_PATH", "_DIR", "_SOCK")
# user:password@ in a URL, e.g. https_proxy=http://user:pass@proxy:3128
_URL_USERINFO = re.compile(r"[a-z][a-z0-9+.-]*://([^/@\s]+)@", re.IGNORECASE)


def _secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name)) and not name.upper().endswith(_PATH_SUFFIXES)


def _leaves(value: Any) -> Iterable[str]:
    """The scalar values inside a variable's value, as text (booleans and null are not secrets)."""
    if isinstance(value, Mapping):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list | tuple | set):
        for item in value:
            yield from _leaves(item)
    elif isinstance(value, str | int | float) and not isinstance(value, bool):
        yield str(value)


def _password_file(path: str) -> str | None:
    """The password in a become/vault password file; not a script's (it would print one)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_mode & 0o111 or st.st_size > 4096:
            return None
        return Path(path).read_text().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def secret_values(extravars: Mapping[str, Any], user_vars: Iterable[str],
                  environments: Iterable[Mapping[str, str]]) -> list[str]:
    """Every text that must not stay in a kept dir, longest first (a secret that contains
    another is replaced whole). ``user_vars``: the names given with -e/--set."""
    found: set[str] = set()

    def add(text: str, named_secret: bool) -> None:
        text = text.strip()
        if text and (named_secret or len(text) >= MIN_LENGTH):
            found.add(text)

    for name in user_vars:
        if name in extravars:
            for leaf in _leaves(extravars[name]):
                add(leaf, _secret_name(name))
    for env in environments:
        for name, value in env.items():
            if _secret_name(name):
                add(value, True)
            if name.upper().endswith("PASSWORD_FILE"):
                password = _password_file(value)
                if password:
                    add(password, True)
            for match in _URL_USERINFO.finditer(value):
                userinfo = match.group(1)
                add(userinfo, True)
                add(unquote(userinfo), True)
                if ":" in userinfo:
                    password = userinfo.split(":", 1)[1]
                    add(password, True)
                    add(unquote(password), True)
    return sorted(found, key=lambda s: (-len(s), s))


def redact_text(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def _redact_json(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {redact_text(k, secrets): _redact_json(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_json(v, secrets) for v in value]
    return value


def _rewrite(path: Path, data: bytes) -> None:
    mode = stat.S_IMODE(path.stat().st_mode)
    tmp = path.with_name(path.name + ".rdmaprov-redact")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode or 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def _redact_file(path: Path, secrets: list[str]) -> None:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        out = data
        for secret in secrets:
            out = out.replace(secret.encode(), REDACTED.encode())
        if out != data:
            _rewrite(path, out)
        return
    # In JSON a secret may be escaped ("\u00e9", "\""): look for both spellings.
    escaped = [json.dumps(s)[1:-1] for s in secrets]
    if not any(s in text for s in secrets) and not any(e in text for e in escaped):
        return
    try:
        doc = json.loads(text)
    except ValueError:
        _rewrite(path, redact_text(text, secrets).encode("utf-8"))
        return
    _rewrite(path, json.dumps(_redact_json(doc, secrets), ensure_ascii=False).encode("utf-8"))


def redact_extravars(pdd: Path) -> None:
    """env/extravars keeps the names of the extra variables, not their values."""
    path = pdd / "env" / "extravars"
    try:
        names = sorted(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return
    path.write_text(json.dumps(dict.fromkeys(names, REDACTED), indent=1) + "\n")


def redact_tree(pdd: Path, secrets: list[str]) -> None:
    """Redact a kept private data dir in place (see the module's docstring)."""
    redact_extravars(pdd)
    if not secrets:
        return
    for dirpath, dirnames, filenames in os.walk(pdd):  # os.walk does not enter symlinked dirs
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
        for name in filenames:
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file():
                continue
            try:
                _redact_file(path, secrets)
            except FileNotFoundError:
                continue  # went away since the walk listed it: nothing kept to redact
