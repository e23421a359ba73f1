"""An unreachable host's reason in one plain line, from the messages Ansible's ssh plugin and
mitogen really give (their formats: ansible's plugins/connection/ssh.py "Failed to connect to
the host via ssh:", mitogen's parent.py "EOF on stream; last 100 lines received:" followed by
the lines ssh printed, as in mitogen-hq/mitogen issues 725 and 901)."""

from __future__ import annotations

import pytest

from rdmaprov.engine import Failure, HostResult, failure_message
from rdmaprov.hostreason import connection_line, host_reason

ESC = "\x1b]0;owned\x07\x1b[31m"


@pytest.mark.parametrize(("message", "line"), [
    ("EOF on stream; last 100 lines received:\nssh: connect to host 10.0.0.5 port 22: "
     "Connection refused\r\n", "ssh to 10.0.0.5:22: Connection refused"),
    ("Failed to connect to the host via ssh: ssh: connect to host 10.0.0.5 port 22: "
     "Connection refused", "ssh to 10.0.0.5:22: Connection refused"),
    ("Failed to connect to the host via ssh: Warning: Permanently added '10.0.0.5' (ED25519) "
     "to the list of known hosts.\r\nroot@10.0.0.5: Permission denied (publickey,password).",
     "ssh to 10.0.0.5: Permission denied (publickey,password)."),
    ("Failed to connect to the host via ssh: ssh: Could not resolve hostname node9: Name or "
     "service not known", "ssh to node9: could not resolve the name: Name or service not known"),
    ("Failed to connect to the host via ssh: kex_exchange_identification: read: Connection "
     "reset by peer\r\nConnection reset by 10.0.0.5 port 22",
     "ssh to 10.0.0.5:22: kex_exchange_identification: read: Connection reset by peer"),
    ("Failed to connect to the host via ssh: Connection timed out during banner exchange\r\n"
     "Connection to 10.0.0.5 port 22 timed out",
     "ssh to 10.0.0.5:22: Connection timed out during banner exchange"),
    ('Data could not be sent to remote host "10.0.0.5". Make sure this host can be reached '
     "over ssh: ssh: connect to host 10.0.0.5 port 22: No route to host\r\n",
     "ssh to 10.0.0.5:22: No route to host"),
    # OpenSSH 10's post-quantum notice comes first on every connection: not the reason.
    ("EOF on stream; last 100 lines received:\n** WARNING: connection is not using a "
     "post-quantum key exchange algorithm.\n** This session may be vulnerable to \"store now, "
     "decrypt later\" attacks.\nssh: connect to host node3 port 2222: Connection refused",
     "ssh to node3:2222: Connection refused"),
    ("EOF on stream; last 100 lines received:\n", "the connection closed without a message"),
    ("EOF on stream; last 100 lines received:\nbash: python3: command not found",
     "bash: python3: command not found"),
    # mitogen under ansible-core 2.19, as a real run against a closed port printed it
    ("Task failed: EOF on stream; last 100 lines received:\nssh: connect to host 127.0.0.1 "
     "port 1: Connection refused", "ssh to 127.0.0.1:1: Connection refused"),
    ("Task failed: Failed to connect to the host via ssh: ssh: connect to host 127.0.0.1 port "
     "1: Connection refused", "ssh to 127.0.0.1:1: Connection refused"),  # ansible-core 2.19
    ("Connection timed out.", "Connection timed out."),  # mitogen's own connect timeout
])
def test_an_unreachable_hosts_message_is_one_plain_line(message: str, line: str) -> None:
    assert connection_line(message) == line
    assert connection_line(line) == line  # the engine's line, read again by a report


def test_a_hosts_text_reaches_the_line_without_its_escapes() -> None:
    got = connection_line(f"EOF on stream; last 100 lines received:\nssh: connect to host "
                          f"node1 port 22: Connection refused{ESC}\r\n")
    assert got == "ssh to node1:22: Connection refused"
    assert "\x1b" not in host_reason(HostResult("n", unreachable=1, failure=Failure(
        "Gather facts", f"{ESC}no\nanswer", unreachable=True)))


def test_the_unreachable_event_gives_the_plain_line_to_every_reader() -> None:
    # What runner_on_unreachable's res holds: the line the live view, --json and reports show.
    res = {"unreachable": True, "changed": False,
           "msg": "EOF on stream; last 100 lines received:\nssh: connect to host 10.0.0.5 "
                  "port 22: Connection refused\r"}
    assert failure_message(res) == "ssh to 10.0.0.5:22: Connection refused"
    looped = {"msg": "All items completed", "results": [res]}
    assert failure_message(looped) == "ssh to 10.0.0.5:22: Connection refused"


def test_host_reason_names_the_kind() -> None:
    dead = HostResult("node1", unreachable=1, failure=Failure(
        "Gather facts", "ssh to 10.0.0.5:22: Connection refused", unreachable=True))
    assert host_reason(dead) == "unreachable: ssh to 10.0.0.5:22: Connection refused"
    bad = HostResult("node2", failed=1, failure=Failure("Probe", "no container engine"))
    assert host_reason(bad) == "failed: no container engine"
    assert host_reason(None, "the run was interrupted") == "failed: the run was interrupted"


def test_a_validation_reason_is_the_failed_tasks_message_without_the_failed_word() -> None:
    h = HostResult(name="node1", failure=Failure(task="t", message="the port 29500 is in use"))
    assert host_reason(h, "failed") == "failed: the port 29500 is in use"
    assert host_reason(h, "failed", failed_word=False) == "the port 29500 is in use"
    gone = HostResult(name="node2", unreachable=1, failure=Failure(
        task="t", message="Failed to connect to the host via ssh: ssh: connect to host 10.0.0.5 "
                          "port 22: Connection refused"))
    assert host_reason(gone, failed_word=False) == (
        "unreachable: ssh to 10.0.0.5:22: Connection refused")
