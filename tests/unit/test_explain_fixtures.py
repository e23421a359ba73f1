"""Every real output in tests/fixtures/explain/ against the facts written in its index entry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from rdmaprov.explain import explain_stream
from rdmaprov.parsers.nccl_log import CONTEXT_CODES

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "explain"
INDEX: dict[str, dict[str, Any]] = yaml.safe_load((FIXTURES / "index.yaml").read_text())


def lookup(report: dict[str, Any], path: str) -> Any:
    if path.startswith("len(") and path.endswith(")"):
        return len(lookup(report, path[4:-1]))
    cur: Any = report
    # Keys such as "mlx5_0:1" or "26" are single parts; split on dots only.
    for part in path.split("."):
        cur = cur[int(part)] if isinstance(cur, list) else cur[part]
    return cur


def test_every_fixture_is_indexed_with_a_source() -> None:
    files = {p.name for p in FIXTURES.iterdir() if p.name != "index.yaml"}
    assert files == set(INDEX)
    assert len(files) >= 30
    for name, entry in INDEX.items():
        assert entry["source"].startswith("https://"), name
        assert entry["expect"] or entry.get("findings_include"), name


@pytest.mark.parametrize("name", sorted(INDEX))
def test_fixture_facts(name: str) -> None:
    entry = INDEX[name]
    with open(FIXTURES / name, encoding="utf-8") as fh:
        report = explain_stream(fh)
    assert report["kind"] == entry["kind"]
    for path, want in (entry.get("expect") or {}).items():
        assert lookup(report, str(path)) == want, f"{name}: {path}"
    for severity, text in entry.get("findings_include") or []:
        assert any(f["severity"] == severity and text in (f["message"] + " " + (f["hint"] or ""))
                   for f in report["findings"]), f"{name}: no {severity} finding with {text!r}"


def codes(report: dict[str, Any]) -> set[str]:
    """Diagnosis codes among a report's findings (an nccl-tests report's log part too)."""
    fs = report["findings"] + (report.get("nccl_log") or {}).get("findings", [])
    return {f["code"] for f in fs if f.get("code")}


@pytest.mark.parametrize("name", sorted(INDEX))
def test_fixture_diagnoses_exact(name: str) -> None:
    """The context diagnoses a fixture's thread established fire, and no other one does."""
    with open(FIXTURES / name, encoding="utf-8") as fh:
        fired = codes(explain_stream(fh)) & CONTEXT_CODES
    assert fired == set(INDEX[name].get("diagnoses") or []), name


def test_every_listed_diagnosis_is_a_known_code() -> None:
    listed = {c for e in INDEX.values() for c in e.get("diagnoses") or []}
    assert listed <= CONTEXT_CODES
    assert len(listed) >= 15


@pytest.mark.parametrize("name", sorted(INDEX))
def test_fixture_survives_crlf_and_indentation(name: str) -> None:
    """The same paste with CRLF line ends and indented by an issue editor says the same."""
    text = (FIXTURES / name).read_text(encoding="utf-8")
    plain = explain_stream(text.splitlines(keepends=True))
    pasted = explain_stream(("    " + line + "\r\n") for line in text.splitlines())
    assert pasted["kind"] == plain["kind"]
    for path in (INDEX[name].get("expect") or {}):
        if str(path).startswith(("lines", "rows.", "errors.0.line")):
            continue
        assert lookup(pasted, str(path)) == lookup(plain, str(path)), f"{name}: {path}"
