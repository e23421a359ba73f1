"""No secret stays in a kept artifacts dir after a real run against a lab node: -e values, a
become password, proxy credentials and tokens from the environment (rdmaprov.artifacts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rdmaprov.artifacts import REDACTED
from rdmaprov.engine import RunnerSession, RunSpec

F = Path(__file__).resolve().parents[1] / "fixtures" / "engine"
RDMAPROV = Path(sys.executable).with_name("rdmaprov")

TOKEN = "tok-PLANTED-4f1d9a"  # an -e value
BECOME = "bec-PLANTED-77e2"  # -e ansible_become_password
PROXY_PW = "pxy-PLANTED-c0ffee"  # in https_proxy's URL
API_TOKEN = "api-PLANTED-9b8c7d"  # an environment token passed on with RDMAPROV_PASS_ENV
SECRETS = (TOKEN, BECOME, PROXY_PW, API_TOKEN)


@pytest.fixture
def planted_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # 127.0.0.1:9 is discard: nothing in these runs goes through a proxy (SSH ignores it)
    monkeypatch.setenv("https_proxy", f"http://proxyuser:{PROXY_PW}@127.0.0.1:9")
    monkeypatch.setenv("PLANTED_API_TOKEN", API_TOKEN)
    monkeypatch.setenv("RDMAPROV_PASS_ENV", "PLANTED_API_TOKEN")


def _grep(root: Path) -> dict[str, list[str]]:
    """Every file under root (symlinks not followed) that holds one of the secrets."""
    hits: dict[str, list[str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
        for name in filenames:
            path = Path(dirpath) / name
            if path.is_symlink():
                continue
            data = path.read_bytes()
            found = [s for s in SECRETS if s.encode() in data]
            if found:
                hits[str(path.relative_to(root))] = found
    return hits


@pytest.mark.lab
def test_engine_run_that_prints_every_secret_keeps_none(lab, planted_env, tmp_path: Path) -> None:
    keep = tmp_path / "kept"
    events: list[dict] = []
    extravars = {"planted_token": TOKEN, "ansible_become_password": BECOME}
    spec = RunSpec(playbook=F / "echo-secrets.yml", inventory=lab.inventory, limit=lab.nodes[0],
                   extravars=extravars, user_vars=frozenset(extravars), keep_artifacts=keep)
    result = RunnerSession(spec, on_event=events.append).run()
    assert result.ok, result
    # The run itself saw the secrets (so the dir held them until the end) ...
    echoed = [e["event_data"]["res"]["stdout"] for e in events
              if e["event"] == "runner_on_ok" and e["event_data"].get("task") ==
              "Run a command that carries it"]
    assert echoed == [f"{TOKEN} {API_TOKEN} http://proxyuser:{PROXY_PW}@127.0.0.1:9 {BECOME}"]
    # ... and the kept dir holds none of them, anywhere.
    assert _grep(keep) == {}
    [art] = (keep / "artifacts").iterdir()
    stdout = (art / "stdout").read_text()
    assert f"planted {REDACTED}" in stdout and lab.nodes[0] in stdout
    command = json.loads((art / "command").read_text())
    assert command["env"]["https_proxy"] == f"http://{REDACTED}@127.0.0.1:9"
    assert command["env"]["PLANTED_API_TOKEN"] == REDACTED
    events_text = "".join(p.read_text() for p in (art / "job_events").glob("*.json"))
    assert f"failing with {REDACTED}" in events_text
    for p in (art / "job_events").glob("*.json"):
        json.loads(p.read_text())  # still JSON


@pytest.mark.lab
def test_cli_run_keeps_no_e_value_nor_credential(lab, planted_env, tmp_path: Path) -> None:
    keep = tmp_path / "kept"
    proc = subprocess.run(
        [str(RDMAPROV), "bootstrap", str(lab.inventory), "--limit", lab.nodes[0], "--tags",
         "preflight", "--no-validate", "--keep-artifacts", str(keep),
         "-e", f"ansible_become_password={BECOME}", "-e", f"rdma_ofed_doca_version={TOKEN}"],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _grep(keep) == {}
    assert json.loads((keep / "env" / "extravars").read_text()) == {
        "ansible_become_password": REDACTED, "rdma_ofed_doca_version": REDACTED}
    [art] = (keep / "artifacts").iterdir()
    env = json.loads((art / "command").read_text())["env"]
    assert env["https_proxy"] == f"http://{REDACTED}@127.0.0.1:9"
    assert env["PLANTED_API_TOKEN"] == REDACTED
