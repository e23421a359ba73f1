"""A flag accepted and silently dropped is a bug (issue 37, item 4): each command's flags either
do what their help says or are refused in one line, exit 1, before any host is touched.

`probe INVENTORY --container` printed the fleet table and dropped --container; `probe --limit`
without an inventory, `probe --container --nccl-ib-tc 3` and the like dropped theirs too. The
hosts here are this test's listener, which counts every connection."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from rdmaprov.cli import build_parser, probe
from rdmaprov.errors import UserError
from tests.cli.test_inputs import Listener, listener, rdmaprov, refused  # noqa: F401


def inventory(tmp_path: Path, port: int) -> None:
    (tmp_path / "hosts.ini").write_text(
        f"[gpu]\nnode1 ansible_host=127.0.0.1 ansible_port={port}\n")


@pytest.mark.parametrize(("flags", "lines"), [
    (["hosts.ini", "--container"],
     ["--container: not with an INVENTORY: it is for the host rdmaprov runs on"]),
    (["hosts.ini", "--sysfs-root", "/sys", "--socket-ifname", "eth1"],
     ["--sysfs-root: not with an INVENTORY", "--socket-ifname: not with an INVENTORY"]),
    (["--limit", "node1", "-f", "2"], ["--limit: needs an INVENTORY", "--forks: needs an "
                                                                      "INVENTORY"]),
    (["--keep-artifacts", "kept"], ["--keep-artifacts: needs an INVENTORY"]),
    (["--container", "--nccl-ib-tc", "3", "--env-file", "hosts.ini"],
     ["--nccl-ib-tc: not with --container", "--env-file: not with --container"]),
    (["--container", "--use-pyverbs", "no", "--socket-ifname", "eth1"],
     ["--use-pyverbs: not with --container", "--socket-ifname: not with --container"]),
])
def test_probe_refuses_a_flag_where_it_means_nothing(tmp_path: Path, listener: Listener,  # noqa: F811
                                                     flags: list[str], lines: list[str]) -> None:
    inventory(tmp_path, listener.port)
    got = refused(rdmaprov("probe", *flags, cwd=tmp_path))
    assert len(got) == len(lines) and all(g.startswith(w) for g, w in zip(got, lines,
                                                                          strict=True)), got
    assert listener.contacts == 0


def parsed(*argv: str) -> argparse.Namespace:
    return build_parser("probe").parse_args(["probe", *argv])


def test_an_environment_default_applies_only_where_its_flag_means_something() -> None:
    env = {"RDMAPROV_PROBE_CONTAINER": "1", "RDMAPROV_SYSFS_ROOT": "/srv/sys",
           "RDMAPROV_FORKS": "7", "RDMAPROV_USE_PYVERBS": "no"}
    fleet = parsed("hosts.ini")
    assert probe.settle_flags(fleet, env) == "fleet"
    assert (fleet.container, fleet.sysfs_root, fleet.forks, fleet.use_pyverbs) == (
        False, "/sys", "7", "no")
    here = parsed()
    assert probe.settle_flags(here, env) == "container"
    assert (here.container, here.sysfs_root, here.forks) == (True, "/srv/sys", None)
    plain = parsed("--sysfs-root", "/x")
    assert probe.settle_flags(plain, {}) == "host"
    assert (plain.sysfs_root, plain.use_pyverbs, plain.container) == ("/x", "auto", False)
    with pytest.raises(UserError, match="--use-pyverbs/RDMAPROV_USE_PYVERBS: 'maybe'"):
        probe.settle_flags(parsed(), {"RDMAPROV_USE_PYVERBS": "maybe"})


@pytest.mark.parametrize(("flags", "line"), [
    (["--nccl-python", "/usr/bin/python3"],
     "--nccl-python: for the NCCL loopback, which is off (--nccl, or nccl: true in the config)"),
    (["--nccl-min-busbw", "10"],
     "--nccl-min-busbw: for the NCCL loopback, which is off (--nccl, or nccl: true in the "
     "config)"),
    (["--node-name", "gpu17"],
     "--node-name: names this node to Slurm for --drain, which is not given"),
])
def test_check_refuses_a_flag_for_a_part_that_does_not_run(
        tmp_path: Path, flags: list[str], line: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from rdmaprov.cli import main

    monkeypatch.delenv("RDMAPROV_CHECK_CONFIG", raising=False)
    assert main(["check", "--sysroot", str(tmp_path), *flags]) == 1
    out = capsys.readouterr()
    assert out.err.splitlines() == [f"rdmaprov: error: {line}"] and out.out == ""


def test_check_takes_the_loopbacks_flags_when_the_config_turns_it_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from rdmaprov.cli import main

    (tmp_path / "check.yml").write_text("nccl: true\n")
    (tmp_path / "sys/class/net").mkdir(parents=True)
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/modules").write_text("")
    monkeypatch.setenv("SLURMD_NODENAME", "gpu17")  # slurmd's: a default, not a flag given
    main(["check", "--sysroot", str(tmp_path), "--config", str(tmp_path / "check.yml"),
          "--nccl-python", str(tmp_path / "no-python")])
    err = capsys.readouterr().err
    assert "which is off" not in err and "--node-name" not in err
    assert "no-python" in err  # judged as the loopback's Python


@pytest.mark.parametrize("flags", [["--nics", "8"], ["--min-fraction", "0.5"]])
def test_explain_refuses_what_scales_a_line_rate_that_is_not_given(
        tmp_path: Path, flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from rdmaprov.cli import main

    log = Path(__file__).resolve().parents[1] / "fixtures/explain/nccl_tests_252_ring_new.txt"
    assert main(["explain", *flags, str(log)]) == 1
    out = capsys.readouterr()
    assert out.err.splitlines() == [f"rdmaprov: error: {flags[0]}: it scales --line-rate, "
                                    "which is not given"] and out.out == ""
