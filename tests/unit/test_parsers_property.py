"""No parser crashes on any cut, shuffle or garbling of the real fixtures."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from rdmaprov.explain import KNOWN_FORMATS, explain_stream

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "explain"
TEXTS = {p.name: p.read_text().splitlines(keepends=True)
         for p in sorted(FIX.iterdir()) if p.name != "index.yaml"}
KINDS = set(KNOWN_FORMATS) | {"unknown"}


def _ok(report: dict) -> None:
    assert report["kind"] in KINDS
    for f in report["findings"]:
        assert f["severity"] in ("error", "warning", "info") and f["message"]


def test_cut_at_every_line_and_mid_line() -> None:
    for lines in TEXTS.values():
        for n in range(len(lines) + 1):
            _ok(explain_stream(lines[:n]))
            if n < len(lines):
                cut = lines[n][: len(lines[n]) // 2]
                _ok(explain_stream([*lines[:n], cut]))


def test_lines_that_lost_their_separators() -> None:
    # The garbling below once found a "Plugin Path" line without its colon; every separator a
    # parser splits on is dropped here, deterministically, in each fixture.
    for lines in TEXTS.values():
        for sep in (":", "=", "/", " ", "[", "]", "(", ")", ","):
            _ok(explain_stream([line.replace(sep, "") for line in lines]))


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(sorted(TEXTS)), data=st.data())
def test_shuffled_interleaving(name: str, data: st.DataObject) -> None:
    lines = TEXTS[name]
    other = TEXTS[data.draw(st.sampled_from(sorted(TEXTS)))]
    mixed = data.draw(st.permutations(lines + other[:20]))
    _ok(explain_stream(mixed))


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(sorted(TEXTS)), data=st.data())
def test_garbled_characters(name: str, data: st.DataObject) -> None:
    lines = list(TEXTS[name])
    for _ in range(data.draw(st.integers(1, 8))):
        if not lines:
            break
        i = data.draw(st.integers(0, len(lines) - 1))
        junk = data.draw(st.text(max_size=12))
        pos = data.draw(st.integers(0, len(lines[i])))
        lines[i] = lines[i][:pos] + junk + lines[i][pos + data.draw(st.integers(0, 6)):]
    _ok(explain_stream(lines))
