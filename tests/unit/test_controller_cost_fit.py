"""The least-squares fit bench/controller_cost.py extrapolates from (no timing here)."""

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "controller_cost.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("controller_cost", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fit_exact_line(bench):
    a, b = bench.fit([2, 4, 8], [5.0 + 0.5 * 2, 5.0 + 0.5 * 4, 5.0 + 0.5 * 8])
    assert a == pytest.approx(5.0)
    assert b == pytest.approx(0.5)


def test_fit_least_squares(bench):
    # y = 1, 2, 2 over x = 0, 1, 2: slope 0.5, intercept 7/6
    a, b = bench.fit([0, 1, 2], [1, 2, 2])
    assert b == pytest.approx(0.5)
    assert a == pytest.approx(7 / 6)


def test_fit_one_size_goes_through_the_origin(bench):
    assert bench.fit([4, 4], [2.0, 4.0]) == (0.0, pytest.approx(0.75))


def test_fit_refuses_mismatch(bench):
    with pytest.raises(ValueError):
        bench.fit([1, 2], [1.0])
    with pytest.raises(ValueError):
        bench.fit([], [])


def test_write_section_goes_under_the_issue_heading_then_replaces(bench, tmp_path, monkeypatch):
    results = tmp_path / "RESULTS.md"
    results.write_text("# R\n\n## Validation\n\ntext\n\n" + bench.PARENT
                       + "\n\n### older item\nold\n\n## Explain\n\nx\n")
    monkeypatch.setattr(bench, "RESULTS", results)
    bench.write_section("first\n")
    text = results.read_text()
    assert text.index(bench.SECTION) < text.index("### older item")
    assert text.index(bench.PARENT) < text.index(bench.SECTION)
    bench.write_section("second\n")
    text = results.read_text()
    assert "first" not in text and "second" in text and text.count(bench.SECTION) == 1
    assert "second\n\n### older item\nold" in text and "## Explain" in text
