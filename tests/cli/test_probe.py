"""`rdmaprov probe` on this host and on fixture trees: table, --json, exit codes, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rdmaprov.cli import main

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests/fixtures/sysfs"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in list(os.environ):
        if name.startswith(("NCCL_", "RDMAPROV_")):
            monkeypatch.delenv(name)
    # /etc/nccl.conf of the machine running the tests must not leak into the lint.
    monkeypatch.setattr("rdmaprov.cli.probe.NCCL_CONF", tmp_path / "absent-nccl.conf")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["probe", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_fixture_table_shows_ports_rates_and_gid_index(capsys):
    code, out, _ = run(capsys, "--sysfs-root", str(FIXTURES / "roce"), "--socket-ifname",
                       "ens1f0np0", "--nccl-ib-tc", "106")
    assert code == 0
    lines = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("mlx5")}
    assert lines["mlx5_0"][:7] == ["mlx5_0", "1", "ACTIVE", "LinkUp", "100", "Gb/s", "Ethernet"]
    assert lines["mlx5_0"][10] == "3"          # the v2 IPv4 GID column
    assert lines["mlx5_1"][2] == "DOWN"
    assert "NCCL_IB_HCA==mlx5_0:1" in out and "NCCL_IB_GID_INDEX=3" in out
    assert "NCCL_IB_TC=106" in out and "NCCL_SOCKET_IFNAME==ens1f0np0" in out
    assert "note: mlx5_1:1 left out: state DOWN" in out


def test_json_on_ib_ndr(capsys):
    code, out, _ = run(capsys, "--sysfs-root", str(FIXTURES / "ib_ndr"), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["exit_code"] == 0
    assert [p["rate_gbps"] for d in doc["rdma"]["devices"] for p in d["ports"]] == \
        [400, 400, 400, 10]
    assert doc["nccl"]["env"]["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1,mlx5_2:1"


def test_lint_error_in_the_environment_exits_2(capsys, monkeypatch):
    monkeypatch.setenv("NCCL_IB_ENABLE", "1")
    monkeypatch.setenv("NCCL_IB_HCA", "=mlx5_3:1")
    code, out, _ = run(capsys, "--sysfs-root", str(FIXTURES / "ib_ndr"))
    assert code == 2
    assert "error: NCCL_IB_ENABLE does not exist in NCCL" in out
    assert "error: NCCL_IB_HCA selects mlx5_3:1, which is DOWN (Polling)" in out


def test_env_file_is_linted(capsys, tmp_path):
    conf = tmp_path / "image.env"
    conf.write_text("NCCL_IB_GID_INDEX=1\nNCCL_SOCKET_IFNAME==eth7\n")
    code, out, _ = run(capsys, "--sysfs-root", str(FIXTURES / "roce"), "--env-file", str(conf))
    assert code == 2
    assert f"NCCL lint of {conf}:" in out
    assert "link-local" in out and "names no interface on this host" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--sysfs-root", "/nonexistent"], "--sysfs-root /nonexistent: not a directory"),
    (["--nccl-ib-tc", "300"], "--nccl-ib-tc '300': a traffic class is an integer from 0 to 255"),
    (["--nccl-ib-tc", "x"], "--nccl-ib-tc 'x': a traffic class is an integer from 0 to 255"),
    (["--env-file", "/nonexistent.env"], "--env-file /nonexistent.env: No such file or directory"),
    (["/nonexistent/inventory.ini"], "inventory"),
])
def test_bad_input_is_one_line_exit_1(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("rdmaprov: error: ") and message in err


@pytest.mark.skipif(os.path.exists("/sys/class/infiniband"), reason="this host has RDMA devices")
def test_this_host_says_plainly_there_is_no_rdma():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "RDMAPROV_"))}
    proc = subprocess.run([sys.executable, "-m", "rdmaprov", "probe"], capture_output=True,
                          text=True, env=env, timeout=60, check=False)
    assert proc.returncode in (0, 2), proc.stderr  # 2 only if /etc/nccl.conf here is wrong
    assert "No RDMA devices: no /sys/class/infiniband_verbs: the kernel has no RDMA " \
           "(ib_uverbs) support." in proc.stdout
