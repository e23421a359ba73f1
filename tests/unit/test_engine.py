"""The engine against real ansible-runner runs on this machine (local connection only)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rdmaprov import settings
from rdmaprov.engine import RunnerSession, RunSpec, failure_message, task_label

F = Path(__file__).resolve().parents[1] / "fixtures" / "engine"


def run(playbook: str, inventory: str = "hosts.ini", **kw: object):
    events: list[dict] = []
    spec = RunSpec(playbook=F / playbook, inventory=F / inventory, host_count=2, **kw)
    return RunnerSession(spec, on_event=events.append).run(), events


def test_failed_host_and_its_task_are_captured() -> None:
    result, events = run("play.yml")
    assert result.rc != 0 and result.status == "failed"
    assert set(result.hosts) == {"good", "bad"}
    good, bad = result.hosts["good"], result.hosts["bad"]
    assert (good.ok, good.failed, good.skipped, good.changed) == (3, 0, 1, 0)
    assert (bad.ok, bad.failed) == (2, 1)
    assert good.failure is None
    assert bad.failure is not None
    assert bad.failure.task == "Fail on purpose"
    assert bad.failure.message == "fixture failure on bad"
    assert result.failed_hosts == ["bad"]
    assert result.error is None
    assert any(e["event"] == "playbook_on_stats" for e in events)


def test_unreachable_host_is_named_and_others_finish() -> None:
    result, _ = run("play.yml", "unreachable.ini")
    dead, good = result.hosts["dead"], result.hosts["good"]
    assert dead.unreachable == 1 and dead.failure is not None and dead.failure.unreachable
    assert "Connection refused" in dead.failure.message
    assert good.healthy and good.ok == 3
    # What the run measured of each host (ansible-runner's per-result durations, summed): the
    # only time a host that never ran its own part has (validate's JUnit times it so).
    assert dead.seconds > 0 and good.seconds > 0


def test_unreachable_host_in_a_loop_keeps_the_items_reason() -> None:
    # Ansible's task-level message for this case is "All items completed".
    result, _ = run("loop.yml", "unreachable.ini")
    dead = result.hosts["dead"]
    assert dead.unreachable == 1 and dead.failure is not None and dead.failure.unreachable
    assert dead.failure.task == "Echo each item"
    # ssh's first meaningful line, in one plain line (rdmaprov.hostreason).
    assert dead.failure.message == "ssh to 127.0.0.1:1: Connection refused"
    assert result.hosts["good"].healthy


def test_an_unreachable_host_under_mitogen_is_ssh_s_line_not_the_stream_s() -> None:
    # mitogen's own message here: "Task failed: EOF on stream; last 100 lines received:\nssh:
    # connect to host 127.0.0.1 port 1: Connection refused" (mitogen 0.3, ansible-core 2.19).
    pytest.importorskip("ansible_mitogen")
    result, _ = run("play.yml", "unreachable.ini", strategy="mitogen")
    dead = result.hosts["dead"]
    assert dead.unreachable == 1 and dead.failure is not None and dead.failure.unreachable
    assert dead.failure.message == "ssh to 127.0.0.1:1: Connection refused"


def test_tags_extravars_and_check_mode_pass_through(tmp_path: Path) -> None:
    result, events = run("play.yml", tags=["report"], check=True,
                         extravars={"marker": "from-test"})
    assert result.ok, result
    msgs = [e["event_data"]["res"]["msg"] for e in events if e["event"] == "runner_on_ok"]
    assert sorted(msgs) == ["check=True marker=from-test"] * 2


def test_check_mode_changes_nothing_and_a_real_run_does(tmp_path: Path) -> None:
    dest = tmp_path / "marker.txt"
    result, _ = run("write.yml", check=True, limit="good", extravars={"dest": str(dest)})
    assert result.ok and result.hosts["good"].changed == 1
    assert set(result.hosts) == {"good"}
    assert not dest.exists()
    result, _ = run("write.yml", limit="good", extravars={"dest": str(dest)})
    assert result.ok and dest.exists()


def test_skip_tags() -> None:
    result, _ = run("play.yml", skip_tags=["fail"])
    assert result.ok and result.hosts["bad"].failed == 0


def test_collection_symlink_lets_playbooks_use_fqcn() -> None:
    result, _ = run("fqcn.yml", collection=F / "collection")
    assert result.ok, result
    assert all(h.ok == 2 for h in result.hosts.values())


def test_artifacts_are_kept_with_the_settings(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("RDMAPROV_TEST_SECRET", "x")
    keep = tmp_path / "kept"
    result, _ = run("play.yml", keep_artifacts=keep, skip_tags=["fail"])
    assert result.artifacts_dir is not None and result.artifacts_dir.is_dir()
    assert (result.artifacts_dir / "job_events").is_dir()
    envvars = json.loads((keep / "env" / "envvars").read_text())
    assert envvars["ANSIBLE_HOST_KEY_CHECKING"] == "True"
    assert envvars["ANSIBLE_PIPELINING"] == "True"
    link = keep / "collections" / "ansible_collections" / "rdmaprov" / "cluster"
    assert link.is_symlink()
    # The command ansible-runner ran carries only allowed variables from our environment.
    command = json.loads((result.artifacts_dir / "command").read_text())
    assert "RDMAPROV_TEST_SECRET" not in command["env"]
    assert command["env"]["ANSIBLE_HOST_KEY_CHECKING"] == "True"


def test_temporary_private_data_dir_is_removed(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    result, _ = run("play.yml", skip_tags=["fail"])
    assert result.ok and result.artifacts_dir is None
    assert not any(p.name.startswith("rdmaprov-") for p in tmp_path.iterdir())


def test_environment_allow_list(monkeypatch) -> None:
    monkeypatch.setenv("RDMAPROV_TEST_SECRET", "x")
    monkeypatch.setenv("ANSIBLE_FORCE_COLOR", "1")
    monkeypatch.setenv("SSH_AUTH_SOCK", "/tmp/agent.sock")
    runner_env = dict(os.environ, ANSIBLE_PIPELINING="True")
    out = RunnerSession._filter_env(runner_env, {"ANSIBLE_PIPELINING": "True"})
    assert "RDMAPROV_TEST_SECRET" not in out and "ANSIBLE_FORCE_COLOR" not in out
    assert out["SSH_AUTH_SOCK"] == "/tmp/agent.sock"
    assert out["ANSIBLE_PIPELINING"] == "True"
    monkeypatch.setenv("RDMAPROV_PASS_ENV", "RDMAPROV_TEST_SECRET")
    assert "RDMAPROV_TEST_SECRET" in RunnerSession._filter_env(dict(os.environ), {})


def test_settings_profiles(tmp_path: Path) -> None:
    tuned = settings.environment(settings.rows(control_dir=tmp_path))
    plain = settings.environment(settings.rows(profile="defaults"))
    for env in (tuned, plain):
        assert env["ANSIBLE_HOST_KEY_CHECKING"] == "True"
        assert "StrictHostKeyChecking" not in " ".join(env.values())
    assert tuned["ANSIBLE_PIPELINING"] == "True" and "ANSIBLE_PIPELINING" not in plain
    assert "ControlPersist" in tuned["ANSIBLE_SSH_ARGS"]
    assert settings.default_forks(3) == 3 and settings.default_forks(2000) == 50


def test_control_path_dir_is_private_and_short(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("RDMAPROV_SSH_CONTROL_DIR", str(tmp_path / "cp"))
    d = settings.control_path_dir()
    assert d.is_dir() and (d.stat().st_mode & 0o777) == 0o700
    monkeypatch.setenv("RDMAPROV_SSH_CONTROL_DIR", "/tmp/" + "x" * 100)
    from rdmaprov.errors import UserError

    with pytest.raises(UserError, match="socket path limit"):
        settings.control_path_dir()


def test_mitogen_strategy_runs_when_installed() -> None:
    pytest.importorskip("ansible_mitogen")
    result, _ = run("play.yml", skip_tags=["fail"], strategy="mitogen")
    assert result.ok, result


def test_a_crashed_module_says_why_in_its_own_last_words() -> None:
    """mitogen's and Ansible's words for a module that died say nothing of why; its stderr does
    (a full disk under the file a role writes, as test_reliability's full-disk case plants)."""
    crashed = {"msg": "Module result deserialization failed: No start of json char found",
               "module_stdout": "", "module_stderr": "Traceback (most recent call last):\n"
               "  File x\nOSError: [Errno 28] No space left on device: '/etc/x'\n"}
    assert failure_message(crashed) == ("Module result deserialization failed: No start of json "
                                        "char found: OSError: [Errno 28] No space left on device: "
                                        "'/etc/x'")
    assert failure_message({"msg": "MODULE FAILURE\nSee stdout/stderr for the exact error",
                            "module_stdout": "", "module_stderr": "boom\n"}) == \
        "MODULE FAILURE: boom"
    assert failure_message({"msg": "MODULE FAILURE\nSee stdout/stderr for the exact error"}) == \
        "MODULE FAILURE See stdout/stderr for the exact error"


def test_failure_message_and_task_label() -> None:
    assert failure_message({"msg": "Task failed: Action failed: boom"}) == "boom"
    assert failure_message({"msg": "One or more items failed", "results": [
        {"failed": False}, {"failed": True, "msg": "item two broke"}]}) == "item two broke"
    assert failure_message({"rc": 3, "stderr": "a\nlast line"}) == "last line"
    assert failure_message({"rc": 3}) == "command failed with rc 3"
    assert failure_message({"rc": 1, "msg": "non-zero return code",
                            "stderr": "E: Unable to locate package x\n\n"}) == \
        "E: Unable to locate package x"


def test_a_failed_command_item_says_what_the_command_said() -> None:
    # Recorded from a real run: `podman import` on a lab node whose /var/lib/containers is on
    # the node's overlayfs root, loop task of container_runtime's images.yml (podman 4.3.1).
    res = json.loads((F / "res-podman-import-on-overlayfs.json").read_text())
    assert res["msg"] == "One or more items failed"
    assert res["results"][0]["msg"] == "non-zero return code"
    assert failure_message(res) == (
        "Error: 'overlay' is not supported over overlayfs, a mount_program is required: "
        "backing file system is unsupported for this graph driver")
    assert task_label({"task": "Gather", "role": "rdmaprov.cluster.preflight"}) == \
        "preflight : Gather"


def test_interrupt_grace_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Read when a run starts: a bad value is one line (UserError), not a traceback when
    rdmaprov loads, as it was."""
    from rdmaprov import engine
    from rdmaprov.errors import UserError

    monkeypatch.delenv("RDMAPROV_INTERRUPT_GRACE", raising=False)
    assert engine.interrupt_grace() == engine.INTERRUPT_GRACE_S
    monkeypatch.setenv("RDMAPROV_INTERRUPT_GRACE", "2.5")
    assert engine.interrupt_grace() == 2.5
    for bad in ("x", "-1", "1e9"):
        monkeypatch.setenv("RDMAPROV_INTERRUPT_GRACE", bad)
        with pytest.raises(UserError, match="RDMAPROV_INTERRUPT_GRACE"):
            engine.interrupt_grace()
