"""sshd's SSH_CONNECTION, read in one place (module_utils/ssh_session) for every probe."""

from __future__ import annotations

import pytest

from rdmaprov.collection import ssh_session


@pytest.mark.parametrize(("value", "want"), [
    ("10.0.0.1 51022 10.0.0.12 22", ("10.0.0.1", "10.0.0.12")),
    ("fe80::1%eth0 40000 fe80::2%eth0 22", ("fe80::1%eth0", "fe80::2%eth0")),
    ("", (None, None)),                                  # a local connection
    ("10.0.0.1 51022 10.0.0.12", (None, None)),          # truncated
    ("10.0.0.1 51022 10.0.0.12 22 extra", (None, None)),  # not sshd's form
])
def test_endpoints(value: str, want: tuple[str | None, str | None]) -> None:
    assert ssh_session.endpoints(value) == want


def test_endpoints_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSH_CONNECTION", "192.0.2.7 60000 192.0.2.9 2222")
    assert ssh_session.endpoints() == ("192.0.2.7", "192.0.2.9")
    monkeypatch.delenv("SSH_CONNECTION")
    assert ssh_session.endpoints() == (None, None)
