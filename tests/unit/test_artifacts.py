"""What a kept artifacts dir must not keep, and how it is redacted (rdmaprov.artifacts)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from rdmaprov.artifacts import REDACTED, redact_tree, secret_values


def test_user_vars_are_secret_and_rdmaprovs_own_are_not() -> None:
    extravars = {"ansible_become_password": "pw", "net_mtu_default": 9000, "db": {"url": "x" * 8},
                 "flag": True, "nccl_validate_backend": "nccl"}
    got = secret_values(extravars, {"ansible_become_password", "net_mtu_default", "db", "flag"},
                        [])
    # a password however short; other values from 4 characters on; booleans never; the
    # backend rdmaprov itself passed is not the user's
    assert got == ["xxxxxxxx", "9000", "pw"]


def test_short_values_of_ordinary_names_are_kept() -> None:
    assert secret_values({"net_mtu_default": 900, "x": "abc"}, {"net_mtu_default", "x"}, []) == []


def test_environment_credentials(tmp_path: Path) -> None:
    become = tmp_path / "become"
    become.write_text("b3c0me-pw\n")
    script = tmp_path / "vault.sh"
    script.write_text("#!/bin/sh\necho from-a-script\n")
    script.chmod(0o700)
    env = {
        "https_proxy": "http://proxyuser:pr%40xy-pw@127.0.0.1:3128",
        "MY_API_TOKEN": "tok-123456",
        "AWS_SECRET_ACCESS_KEY": "aws-secret",
        "ANSIBLE_BECOME_PASSWORD_FILE": str(become),
        "ANSIBLE_VAULT_PASSWORD_FILE": str(script),
        "SSH_AUTH_SOCK": "/tmp/agent.sock",
        "PATH": "/usr/bin:/bin",
        "HOME": "/root",
    }
    got = set(secret_values({}, set(), [env]))
    assert {"proxyuser:pr%40xy-pw", "proxyuser:pr@xy-pw", "pr%40xy-pw", "pr@xy-pw",
            "tok-123456", "aws-secret", "b3c0me-pw"} == got


def test_tree_is_redacted_and_json_stays_json(tmp_path: Path) -> None:
    secrets = secret_values({"token": 'S3"cr\u00e9t'}, {"token"},
                            [{"https_proxy": "http://u:pw-0042@127.0.0.1:3128"}])
    art = tmp_path / "artifacts" / "run1"
    (art / "job_events").mkdir(parents=True)
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "extravars").write_text(json.dumps({"token": 'S3"cr\u00e9t'}))
    event = {"event": "runner_on_ok", "counter": 1234,
             "event_data": {"res": {"msg": 'say S3"cr\u00e9t', "S3\"cr\u00e9t": 1}},
             "stdout": "ok: [node1] => S3\"cr\u00e9t"}
    (art / "job_events" / "1-x.json").write_text(json.dumps(event))  # ASCII escapes
    (art / "command").write_text(json.dumps({"env": {"https_proxy":
                                                     "http://u:pw-0042@127.0.0.1:3128"}}))
    (art / "stdout").write_text("TASK [x]\nok: [node1] => S3\"cr\u00e9t pw-0042\n")
    (art / "stdout").chmod(0o600)
    # the collection link points into a checkout: never followed, never rewritten
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "role.yml").write_text('S3"cr\u00e9t\n')
    (tmp_path / "collections").symlink_to(outside, target_is_directory=True)

    redact_tree(tmp_path, secrets)

    for path in (art / "job_events" / "1-x.json", art / "command", art / "stdout",
                 tmp_path / "env" / "extravars"):
        text = path.read_text()
        assert "S3" not in text and "pw-0042" not in text and "\\u00e9" not in text, path
    ev = json.loads((art / "job_events" / "1-x.json").read_text())
    assert ev["counter"] == 1234 and ev["event"] == "runner_on_ok"
    assert ev["event_data"]["res"] == {"msg": f"say {REDACTED}", REDACTED: 1}
    assert json.loads((art / "command").read_text())["env"]["https_proxy"] == \
        f"http://{REDACTED}@127.0.0.1:3128"
    assert (art / "stdout").read_text() == f"TASK [x]\nok: [node1] => {REDACTED} {REDACTED}\n"
    assert os.stat(art / "stdout").st_mode & 0o777 == 0o600
    assert json.loads((tmp_path / "env" / "extravars").read_text()) == {"token": REDACTED}
    assert (outside / "role.yml").read_text() == 'S3"cr\u00e9t\n'
