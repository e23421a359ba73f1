"""A host that gave no answer, in one plain line: the one rule every command's report uses.

Ansible's reason for an unreachable host is what its connection printed: the ssh plugin's
``Failed to connect to the host via ssh: <ssh's stderr>`` (ansible-core 2.19 puts ``Task
failed:`` before it; ssh's stderr is several lines with a warning or a banner), mitogen's ``EOF
on stream; last 100 lines received:`` and the lines it kept. Neither
is a line for a table, a JUnit message or NHC: :func:`connection_line` keeps ssh's first
meaningful line, ``ssh to 10.0.0.5:22: Connection refused``; :func:`host_reason` prefixes it
with ``unreachable:`` (or a failed task's message with ``failed:``). bootstrap's summary,
status, probe and validate all print it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rdmaprov.textsafe import safe_line

if TYPE_CHECKING:
    from rdmaprov.engine import HostResult

# The words the connection plugins wrap ssh's own output in (ansible's ssh plugin, its
# pipelining/sftp path, mitogen's stream): what follows is ssh's stderr.
_WRAPPERS = (
    re.compile(r"^\s*(?:Task|Action) failed:\s*"),  # ansible-core 2.19's own lead
    re.compile(r"^\s*EOF on stream; last \d+ (?:lines|bytes) received:?\s*", re.S),
    re.compile(r"^\s*Failed to connect to the host via ssh:\s*", re.S),
    re.compile(r"^\s*Data could not be sent to remote host \"[^\"]*\"\. Make sure this host "
               r"can be reached over ssh:\s*", re.S),
)
# Lines of ssh's stderr that say nothing about why it failed: its warnings, -v debug lines,
# OpenSSH's post-quantum notice (three "** " lines), a tty notice.
_NOISE = re.compile(r"^(?:Warning: Permanently added |debug\d?: |OpenSSH_|\*\* |"
                    r"Pseudo-terminal will not be allocated|Warning: )", re.I)
# Where ssh went: "connect to host H port P", "Connection reset by H port P", "Connection to H
# port P timed out", "Connection closed by H port P", "user@H: Permission denied (...)".
_WHERE = (
    re.compile(r"(?:connect to host|Connection (?:reset|closed) by(?: authenticating user \S+)?|"
               r"Connection to|by) (?P<host>\S+) port (?P<port>\d+)"),
    re.compile(r"^(?:\S+@)?(?P<host>[^\s:@]+): Permission denied"),
    re.compile(r"Could not resolve hostname (?P<host>[^\s:]+)"),
)
# ssh's own prefix and the "connect to host H port P: " part, once the place is said up front.
_LEAD = re.compile(r"^ssh: (?:connect to host \S+ port \d+: )?")
_RESOLVE = re.compile(r"^ssh: Could not resolve hostname [^\s:]+: ")
_PERMISSION = re.compile(r"^(?:\S+@)?[^\s:@]+: (?=Permission denied)")
LIMIT = 240  # a reason is a line, not a log


def connection_line(message: str) -> str:
    """An unreachable host's message (ssh's, mitogen's) as one plain line, e.g.
    ``ssh to 10.0.0.5:22: Connection refused``; a message of some other kind, its first line."""
    text = str(message or "")
    for wrapper in _WRAPPERS:  # in the order they nest
        text = wrapper.sub("", text, count=1)
    lines = [ln.strip() for ln in re.split(r"[\r\n]+", text)]
    lines = [ln for ln in lines if ln and not _NOISE.match(ln)]
    if not lines:
        return "the connection closed without a message"
    host = port = None
    for ln in lines:
        for where in _WHERE:
            m = where.search(ln)
            if m:
                host, port = m.group("host"), m.groupdict().get("port")
                break
        if host:
            break
    first = lines[0]
    if host:
        if _RESOLVE.match(first):
            first = "could not resolve the name: " + _RESOLVE.sub("", first)
        else:
            first = _PERMISSION.sub("", _LEAD.sub("", first))
        first = f"ssh to {host}{':' + port if port else ''}: {first}"
    line = " ".join(safe_line(first).split())
    return line if len(line) <= LIMIT else line[:LIMIT - 3] + "..."


def host_reason(h: HostResult | None, fallback: str = "no answer", *,
                failed_word: bool = True) -> str:
    """One line for a host that gave no answer: ``unreachable: ssh to H:P: why`` or
    ``failed: <the failed task's message>``; ``fallback`` when Ansible said nothing of it (the
    run's own error). ``failed_word=False`` leaves a failed task's message without its
    ``failed:`` (a validation report's row says FAIL already, and its reasons are the causes)."""
    kind = "unreachable" if h is not None and h.unreachable else "failed"
    why = h.failure.message if h is not None and h.failure is not None else fallback
    if kind == "unreachable":
        why = connection_line(why)
    line = " ".join(safe_line(why).split())
    return line if kind == "failed" and not failed_word else f"{kind}: {line}"
