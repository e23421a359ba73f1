"""What bootstrap prints after a run, through its CLI on real ansible-playbook runs of a fixture
play on three local hosts: reports grouped under folded names, the changes without --diff, a
no-change re-run in one line, -v and -q."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rdmaprov.cli import bootstrap, build_parser

F = Path(__file__).resolve().parents[1] / "fixtures" / "engine"
IN_LINE = "in line: node[1-3]: nothing changed (3 report lines each; -v shows them)"
CHANGED = ["changed:",
           "  node[1-3]: Set the MTU [eth1]: 1500 -> 9000",
           "  node[1-3]: Write the config"]


@pytest.fixture
def lab3(tmp_path: Path) -> tuple[Path, Path]:
    """Three hosts of this machine (the local connection) and the empty dir the play writes in."""
    inv = tmp_path / "inventory.ini"
    inv.write_text("".join(f"node{i} ansible_connection=local\n" for i in (1, 2, 3))
                   + "[all:vars]\nansible_python_interpreter={{ ansible_playbook_python }}\n")
    out = tmp_path / "written"
    out.mkdir()
    return inv, out


def run(capsys: pytest.CaptureFixture[str], lab3: tuple[Path, Path], *argv: str,
        book: str = "report.yml") -> tuple[int, list[str], str]:
    inv, dest = lab3
    args = build_parser().parse_args(["bootstrap", str(inv), "-e", f"dir={dest}", *argv])
    code = bootstrap.run(args, playbook=F / book)
    out, err = capsys.readouterr()
    lines = out.splitlines()
    if "-q" not in argv and "--json" not in argv:  # the run's last line names the strategy
        assert lines[-1].startswith("strategy: "), lines
        lines = lines[:-1]
    return code, lines, err


def test_a_first_run_groups_the_reports_and_lists_the_changes(capsys, lab3) -> None:
    code, lines, _ = run(capsys, lab3)
    assert code == 0
    said = lines[lines.index("node[1-3]:"):lines.index("Summary")]  # hosts changed: the table
    assert said == ["node[1-3]:", "  Report what this host has", "    GPUs: none visible",
                    "    ib_core: not applicable: no /proc/modules",
                    *(x for i in (1, 2, 3) for x in (f"node{i}:", "  Report what this host has",
                                                     f"    connection: node{i}"))]
    assert lines[-len(CHANGED):] == CHANGED
    assert not any(line.startswith("in line") for line in lines)


def test_a_no_change_rerun_prints_a_summary_only(capsys, lab3) -> None:
    assert run(capsys, lab3)[0] == 0
    code, lines, _ = run(capsys, lab3)
    assert code == 0
    assert lines[-1] == IN_LINE
    assert not any(line.endswith(":") and not line.startswith(" ") for line in lines), lines
    assert "changed:" not in lines and not any("GPUs" in line for line in lines)
    assert "Summary" not in lines  # every host in line: the in-line line says it
    # -v: every host's report, host by host.
    code, lines, _ = run(capsys, lab3, "-v")
    assert code == 0 and lines[-1] == "in line: node[1-3]: nothing changed"
    heads = [line for line in lines if line.startswith("node") and line.endswith(":")]
    assert heads == ["node1:", "node2:", "node3:"]
    assert sum(line == "    GPUs: none visible" for line in lines) == 3
    assert "Summary" in lines
    # -q: that one line.
    code, lines, _ = run(capsys, lab3, "-q")
    assert code == 0 and lines == [IN_LINE]


def test_quiet_prints_the_changes_and_the_failures_only(capsys, lab3, tmp_path,
                                                        monkeypatch) -> None:
    code, lines, _ = run(capsys, lab3, "-q")
    assert code == 0 and lines == CHANGED
    # A failure: its line, the in-line host, how to retry.
    monkeypatch.setenv("RDMAPROV_RETRY_DIR", str(tmp_path / "retry"))
    args = build_parser().parse_args(["bootstrap", str(F / "hosts.ini"), "-q"])
    code = bootstrap.run(args, playbook=F / "play.yml")
    lines = capsys.readouterr().out.splitlines()
    assert code == 2
    assert lines[0] == "bad: failed at 'Fail on purpose': fixture failure on bad"
    assert lines[1] == "in line: good: nothing changed (2 report lines each; -v shows them)"
    assert lines[2].startswith("retry the failed hosts: --retry-failed") and len(lines) == 3


def test_quiet_json_keeps_the_document_whole(capsys, lab3) -> None:
    code, lines, err = run(capsys, lab3, "-q", "--json")
    doc = json.loads("\n".join(lines))
    assert code == 0 and doc["counts"]["changed"] == 6
    assert doc["reports"]["node2"][0]["lines"][-1] == "connection: node2"
    assert err.splitlines() == CHANGED


@pytest.mark.parametrize("command", ["bootstrap", "reconfigure"])
def test_quiet_and_verbose_are_one_line_and_contact_no_host(command, lab3) -> None:
    inv, _ = lab3
    proc = subprocess.run([sys.executable, "-m", "rdmaprov", command, str(inv), "-q", "-v"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines() == ["rdmaprov: error: -q/--quiet and -v/--verbose: give one"]
    help_text = subprocess.run([sys.executable, "-m", "rdmaprov", command, "--help"],
                               capture_output=True, text=True, timeout=120, check=True).stdout
    assert "-q, --quiet" in help_text
