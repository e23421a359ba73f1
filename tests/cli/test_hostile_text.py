"""Host text with rich markup and terminal escapes, through every renderer: probe (this host and
an inventory's fabric table), status, check (table, --nhc, --json, Prometheus, the drain reason)
and validate's table, JSON, JUnit and HTML. The visible text survives as it is; nothing a
terminal acts on (ESC, BEL, C1 controls) reaches the output; nothing is read as markup."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from fake_session import FakeSession  # beside this file (rootdir import)

from rdmaprov.cli import main
from rdmaprov.engine import Failure, HostResult, RunResult

ROOT = Path(__file__).resolve().parents[2]
SYSFS = ROOT / "tests/fixtures/sysfs"
HOSTS_INI = ROOT / "tests/fixtures/engine/hosts.ini"  # good, bad (local connection)

OSC = "\x1b]0;pwned\x07"   # retitles a terminal
CLEAR = "\x1b[2J"          # clears it
C1 = "\x9b31m"             # a C1 CSI: red
BOARD = "MT_[/x]"          # a closing tag with no opening one: rich raises MarkupError
FW = "22.36.1010 [bold]x[/bold] :smile:"
RC = "exit [rc 1]"         # an unknown tag: rich drops it


def load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def no_escapes(text: str) -> None:
    assert not any(c in text for c in "\x1b\x07\x9b\x9d"), repr(text)
    assert all(c in "\n\t" or " " <= c < "\x7f" or c > "\x9f" for c in text), repr(text)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in list(os.environ):
        if name.startswith(("NCCL_", "RDMAPROV_")):
            monkeypatch.delenv(name)
    monkeypatch.setattr("rdmaprov.cli.probe.NCCL_CONF", tmp_path / "absent-nccl.conf")


def hostile_tree(tmp_path: Path) -> Path:
    """The RoCE fixture tree with a board id that is markup and a firmware with escapes."""
    tree = tmp_path / "sys"
    shutil.copytree(SYSFS / "roce", tree, symlinks=True)
    dev = tree / "class/infiniband/mlx5_0"
    (dev / "board_id").write_text(f"{BOARD}{OSC}\n")
    (dev / "fw_ver").write_text(f"{CLEAR}{FW}{C1}\n")
    return tree


# --- probe ----------------------------------------------------------------------------------

def test_probe_prints_markup_as_text_and_drops_escapes(tmp_path: Path) -> None:
    tree = hostile_tree(tmp_path)
    p = subprocess.run([sys.executable, "-m", "rdmaprov", "probe", "--sysfs-root", str(tree),
                        "--socket-ifname", "ens1f0np0"], capture_output=True, text=True,
                       cwd=ROOT, timeout=60, check=False)
    assert (p.returncode, p.stderr) == (0, "")
    row = next(line for line in p.stdout.splitlines() if line.startswith("mlx5_0"))
    assert row.rstrip().endswith(f"{FW}  {BOARD}"), row
    no_escapes(p.stdout)
    # JSON keeps the host's text as data (the encoder escapes it; nothing raw).
    j = subprocess.run([sys.executable, "-m", "rdmaprov", "probe", "--json", "--sysfs-root",
                        str(tree)], capture_output=True, text=True, cwd=ROOT, timeout=60,
                       check=False)
    doc = json.loads(j.stdout)
    no_escapes(j.stdout)
    assert doc["rdma"]["devices"][0]["board_id"] == f"{BOARD}{OSC}"


def ok(host: str, task: str, res: Mapping[str, Any]) -> dict[str, Any]:
    return {"event": "runner_on_ok", "event_data": {"host": host, "task": task, "res": res}}


def failed_bad() -> dict[str, HostResult]:
    return {"good": HostResult("good", ok=2),
            "bad": HostResult("bad", failed=1, failure=Failure(
                "Read node state", f"{OSC}probe {RC}{CLEAR}"))}


def test_probe_fabric_table_of_an_inventory(tmp_path: Path, monkeypatch, capsys) -> None:
    from rdmaprov.cli.probe import PROBE_TASK, probe_local

    doc = probe_local(str(hostile_tree(tmp_path)), "no", None, None, {})
    monkeypatch.setattr(FakeSession, "events", [ok("good", PROBE_TASK, {"rdma": doc["rdma"]})])
    monkeypatch.setattr(FakeSession, "result", RunResult(
        rc=2, status="failed", hosts=failed_bad(), artifacts_dir=None))
    monkeypatch.setattr("rdmaprov.engine.RunnerSession", FakeSession)
    code = main(["probe", str(HOSTS_INI)])
    out, err = capsys.readouterr()
    assert code == 2, err
    no_escapes(out + err)
    assert BOARD in out and FW in out
    bad = next(line for line in out.splitlines() if line.startswith("bad "))
    assert bad.rstrip().endswith(f"failed: probe {RC}")


# --- status ---------------------------------------------------------------------------------

def test_status_cells_keep_brackets_and_drop_escapes(monkeypatch, capsys) -> None:
    from rdmaprov.cli.status import PROBE_TASK

    modules = {"can_load": False, "reason": f"no /proc/modules{CLEAR}", "modules": [
        {"name": "ib_core", "state": "absent"}]}
    # The node_state module's answer, with a node's hostile text in every field.
    state = {"drivers": f"inbox [/x]{OSC}", "mtu": {"eth[0]": 9000},
             "qos": {"unit": "active", "script": True, "nics": {"eth1": f"failed {RC}{C1}"}},
             "firewall": f"nft {RC}", "runtime": "podman :smile:", "gpus": 0, "validation": None,
             "modules": modules}
    monkeypatch.setattr(FakeSession, "events", [ok("good", PROBE_TASK, state)])
    monkeypatch.setattr(FakeSession, "result", RunResult(
        rc=2, status="failed", hosts=failed_bad(), artifacts_dir=None))
    monkeypatch.setattr("rdmaprov.cli.status.RunnerSession", FakeSession)
    code = main(["status", str(HOSTS_INI)])
    out, err = capsys.readouterr()
    assert code == 2, err
    no_escapes(out + err)
    good = next(line for line in out.splitlines() if line.startswith("good "))
    for text in ("inbox [/x]", "eth[0] 9000", f"eth1: failed {RC}", f"nft {RC}",
                 "podman :smile:", "1 absent, cannot load"):
        assert text in good, (text, good)
    bad = next(line for line in out.splitlines() if line.startswith("bad "))
    assert f"failed: probe {RC}" in bad


# --- check ----------------------------------------------------------------------------------

def test_check_outputs_and_drain_reason(tmp_path: Path) -> None:
    fakes = load("_check_fakes", ROOT / "tests/unit/test_check_logic.py")
    root = fakes.fake_node(tmp_path / "n", ports=[
        ("mlx5_0", 1, "4: ACTIVE", "400 Gb/sec (4X NDR)", "InfiniBand", "ib0"),
        ("mlx5_1", 1, f"1: DOWN [/x]{OSC}", "10 Gb/sec (4X SDR)", f"InfiniBand{C1}", "ib1")])
    for info in (root / "proc/driver/nvidia/gpus").glob("*/information"):
        info.write_text(f"Model: \t\t NVIDIA {BOARD} H200{CLEAR}\nIRQ: 1\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "sinfo").write_text('#!/bin/sh\nprintf "%s\\n" "idle|none"\n')
    (bindir / "scontrol").write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$*" >> {tmp_path}/scontrol.log\n')
    for f in bindir.iterdir():
        f.chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "SLURMD_NODENAME": "gpu17"}
    reason = "[reset-link] 1 of 2 RDMA ports ACTIVE: mlx5_1/1 DOWN [/x]"
    prom = tmp_path / "check.prom"
    outs = {}
    for flag in ("--json", "--nhc", "--table"):
        argv = [sys.executable, "-m", "rdmaprov", "check", "--sysroot", str(root),
                "--expect-memlock", "1", "--expect-ports", "2", "--prometheus", str(prom),
                "--drain", *([flag] if flag != "--table" else [])]
        p = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=60,
                           check=False)
        assert p.returncode == 2, p.stderr
        outs[flag] = p.stdout
        no_escapes(p.stdout + p.stderr)
    assert outs["--nhc"] == reason + "\n"
    assert outs["--table"].splitlines()[-1] == f"UNHEALTHY: {reason}"
    assert f"2 visible (NVIDIA {BOARD} H200)" in outs["--table"]
    assert json.loads(outs["--json"])["reason"] == reason
    metrics = prom.read_text()
    no_escapes(metrics)
    assert 'rdmaprov_rdma_port_active{device="mlx5_1",port="1",link_layer="InfiniBand"} 0' \
        in metrics
    log = (tmp_path / "scontrol.log").read_text()
    no_escapes(log)
    assert log.splitlines()[0] == f"update nodename=gpu17 state=drain reason=rdmaprov: {reason}"


# --- validate's reports ---------------------------------------------------------------------

def test_validate_table_json_junit_html(tmp_path: Path, capsys) -> None:
    vj = load("_validate_judge", ROOT / "tests/cli/test_validate_judge.py")
    words = f"RuntimeError: {BOARD} bad {RC} thing"
    evil = f"{OSC}{CLEAR}RuntimeError: {BOARD}{C1} bad {RC} thing\x1b[31m\x00\n"
    hosts = {"n1": (vj.HDR, vj.IB_LOG), "n2": (vj.HDR, vj.IB_LOG)}
    vj.make_run(tmp_path, "fabric", hosts, None, rcs={"n1": "1", "n2": "1"},
                logs={"n1": evil, "n2": evil})
    junit, html = tmp_path / "r.xml", tmp_path / "r.html"
    rc = main(["validate", "--judge", str(tmp_path), "--junit", str(junit), "--html", str(html)])
    out = capsys.readouterr().out
    assert rc == 2
    no_escapes(out)
    assert words in out
    rc = main(["validate", "--judge", str(tmp_path), "--json"])
    text = capsys.readouterr().out
    no_escapes(text)
    assert any(words in r for h in json.loads(text)["hosts"] for r in h["reasons"])
    xml = junit.read_text()
    no_escapes(xml)
    assert any(words in (e.get("message") or "") for e in ET.fromstring(xml).iter("error"))
    page = html.read_text()
    no_escapes(page)
    assert words in page
