"""firewall_probe.port_holders on this machine's own /proc: a socket this process listens on is
found with its pid, and a port nothing listens on has no holder."""

from __future__ import annotations

import os
import socket

from rdmaprov.collection import firewall_probe


def test_a_listening_socket_is_found_with_its_process() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        assert firewall_probe.port_holders(port) == []  # bound, not listening yet
        s.listen(1)
        holders = firewall_probe.port_holders(port)
    assert [h["pid"] for h in holders] == [os.getpid()]
    assert "pytest" in holders[0]["cmdline"] or "python" in holders[0]["cmdline"]


def test_an_ipv6_listener_and_given_proc_net_texts() -> None:
    with socket.socket(socket.AF_INET6) as s:
        s.bind(("::1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        assert [h["pid"] for h in firewall_probe.port_holders(port)] == [os.getpid()]
    # A listening row whose inode no process holds (another user's, unreadable): still a holder.
    row = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
           "timeout inode\n   0: 00000000:7334 00000000:0000 0A 00000000:00000000 00:00000000 "
           "00000000     0        0 999999999 1 0000000000000000 100 0 0 10 0\n")
    assert firewall_probe.port_holders(29492, {"tcp": row, "tcp6": ""}) == [
        {"pid": None, "name": "?", "cmdline": ""}]
    assert firewall_probe.port_holders(29500, {"tcp": row, "tcp6": ""}) == []
