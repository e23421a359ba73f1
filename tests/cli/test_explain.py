"""`rdmaprov explain` as a user runs it: exit codes, JSON shape, stdin, bad input."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rdmaprov.cli import explain as cli_explain
from rdmaprov.errors import UserError

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "explain"
ROOT = Path(__file__).resolve().parents[2]


def run(argv: list[str], capsys: pytest.CaptureFixture[str], stdin: str | None = None,
        monkeypatch: pytest.MonkeyPatch | None = None) -> tuple[int, str, str]:
    """The same dispatch and UserError handling as rdmaprov.cli.main, for this command."""
    parser = argparse.ArgumentParser(prog="rdmaprov")
    cli_explain.register(parser.add_subparsers(dest="command", required=True))
    if stdin is not None and monkeypatch is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    args = parser.parse_args(["explain", *argv])
    try:
        rc = args.func(args)
    except UserError as exc:
        print(f"rdmaprov: error: {exc}", file=sys.stderr)
        rc = 1
    out, err = capsys.readouterr()
    return rc, out, err


def test_fallback_log_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run([str(FIX / "nccl_300_v2.5.6_mpi_nodevice.log")], capsys)
    assert rc == 2
    assert "fell back to TCP sockets" in out and "NCCL 2.5.6" in out


def test_healthy_listing_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run([str(FIX / "rdma_link_3fs283_roce.txt")], capsys)
    assert rc == 0 and "mlx5_1" in out


def test_json_single_and_list(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(["--json", str(FIX / "show_gids_nsdperf_single.txt")], capsys)
    doc = json.loads(out)
    assert rc == 0 and doc["kind"] == "show_gids" and doc["gid_index"] == {"mlx5_0:1": 5}
    rc, out, _ = run(["--json", str(FIX / "show_gids_nsdperf_single.txt"),
                      str(FIX / "ibstat_l2fwd6_eth100.txt")], capsys)
    docs = json.loads(out)
    assert [d["kind"] for d in docs] == ["show_gids", "ibstat"]
    for d in docs:
        assert set(d) >= {"kind", "findings"}


def test_stdin_and_dash(capsys: pytest.CaptureFixture[str],
                        monkeypatch: pytest.MonkeyPatch) -> None:
    text = (FIX / "ibstat_netop249_down_linkup.txt").read_text()
    rc, out, _ = run(["--json"], capsys, stdin=text, monkeypatch=monkeypatch)
    assert rc == 2 and json.loads(out)["ports"][0]["state"] == "DOWN"
    rc, out, _ = run(["--json", "-"], capsys, stdin=text, monkeypatch=monkeypatch)
    assert json.loads(out)["kind"] == "ibstat"


def test_unknown_input_lists_formats(capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    rc, out, err = run([], capsys, stdin="hello world\nnothing here\n", monkeypatch=monkeypatch)
    assert rc == 1
    assert "cannot tell what this text is" in out
    assert err.count("\n") == 1 and "show_gids" in err and "Traceback" not in err


def test_missing_file_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _out, err = run(["/no/such/file.log"], capsys)
    assert rc == 1 and err == "rdmaprov: error: /no/such/file.log: no such file\n"


def test_line_rate_verdict_and_bad_rate(capsys: pytest.CaptureFixture[str]) -> None:
    f = str(FIX / "nccl_tests_252_ring_new.txt")
    rc, out, _ = run(["--json", "--line-rate", "200G", "--nics", "4", f], capsys)
    assert rc == 0 and json.loads(out)["verdict"]["pass"] is True
    rc, out, _ = run(["--json", "--expect-busbw", "150", f], capsys)
    assert rc == 2 and json.loads(out)["verdict"]["expected_busbw"] == 150
    rc, _, err = run(["--line-rate", "fast", f], capsys)
    assert rc == 1 and err.startswith("rdmaprov: error: --line-rate")


def test_mlnx_qos_ib_tc(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(["--json", "--ib-tc", "106", str(FIX / "mlnx_qos_mellanox_doc2792.txt")],
                     capsys)
    doc = json.loads(out)
    assert rc == 2 and doc["lossless"]["ready"] is False and doc["lossless"]["priority"] == 3


def test_real_command_line() -> None:
    """The installed entry point, when every command module of the CLI is present."""
    import importlib.util

    from rdmaprov.cli import COMMANDS
    missing = [c for c in COMMANDS if importlib.util.find_spec(f"rdmaprov.cli.{c}") is None]
    if missing:
        pytest.skip(f"command modules not in this checkout yet: {missing}")
    p = subprocess.run([sys.executable, "-m", "rdmaprov", "explain", "--json",
                        str(FIX / "nccl_1053_ib_disabled_lo.log")],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert p.returncode == 2 and json.loads(p.stdout)["network"] == "Socket"


def test_escape_sequences_in_a_paste_never_reach_the_terminal(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """An OSC window title, a clear-screen, a C1 CSI and a BEL inside a real log's lines."""
    lines = (FIX / "nccl_331_docker_bridge_comm_id.log").read_text().splitlines()
    i = next(k for k, line in enumerate(lines) if "NCCL WARN Net" in line)
    lines[i] = lines[i].replace("NCCL WARN Net", "NCCL WARN \x1b]0;pwned\x07\x1b[2J\x1b[HNet")
    lines[i + 2] = lines[i + 2] + "\x9b31m\x07\x1bc"
    evil = tmp_path / "evil.log"
    evil.write_text("\n".join(lines) + "\n")
    rc, out, _ = run([str(evil)], capsys)
    assert rc == 2 and "rendezvous address 192.168.0.91" in out
    assert not any(c in out for c in "\x1b\x07\x9b")
    assert all(c in "\n\t" or " " <= c < "\x7f" or c > "\x9f" for c in out)
    # Control sequences are taken out before parsing (a colour code must not split a
    # message): the JSON keeps the line's text without them.
    rc, out, _ = run(["--json", str(evil)], capsys)
    doc = json.loads(out)
    assert any("NCCL WARN Net" in e["line"] for e in doc["errors"])
    assert not any("\x1b" in e["line"] for e in doc["errors"])
    assert "\x1b" not in out


def test_verdict_settings_from_the_environment_and_a_bad_one_is_one_line() -> None:
    """RDMAPROV_NICS, RDMAPROV_MIN_FRACTION and RDMAPROV_EXPECT_BUSBW go through the flags'
    own conversion: a good value counts, a bad one is one line and exit 1 (a bad NICS was a
    traceback)."""
    f = str(FIX / "nccl_tests_252_ring_new.txt")
    cmd = [sys.executable, "-m", "rdmaprov", "explain", "--json", "--line-rate", "400G", f]

    def explain(**env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT,
                              env={**os.environ, **env}, check=False)

    p = explain(RDMAPROV_NICS="4", RDMAPROV_MIN_FRACTION="0.5")
    verdict = json.loads(p.stdout)["verdict"]  # 0.5 x 4 x 400/8 = 100 GB/s; measured 97.54
    assert (p.returncode, verdict["expected_busbw"], verdict["pass"]) == (2, 100.0, False)
    assert verdict["basis"].startswith("50% of 4 x 400 Gb/s"), verdict
    for name, value in (("RDMAPROV_NICS", "four"), ("RDMAPROV_MIN_FRACTION", "most"),
                        ("RDMAPROV_EXPECT_BUSBW", "fast")):
        p = explain(**{name: value})
        assert p.returncode == 1 and p.stdout == "", (name, p.stderr)
        assert p.stderr.count("\n") == 1 and f"'{value}'" in p.stderr, p.stderr
        assert "Traceback" not in p.stderr
