"""validate --html: the report page (rdmaprov/validate/report_html.py) and the flag."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from rdmaprov.validate import request
from rdmaprov.validate.report import HostResult, Pair, Pairwise, Report, write_html
from rdmaprov.validate.report_html import human_bytes, render
from rdmaprov.validate.verdict import Bar, Check

SVG = "{http://www.w3.org/2000/svg}"
SIZES = [1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20]


def _report() -> dict[str, Any]:
    """A 3-host nccl run at HDR: the fabric is slow, pairwise rounds blame gpu03."""
    busbw = [3.1, 9.8, 14.2, 15.9, 16.4]
    link = "NCCL used network IB (mlx5_0:1/IB)"
    hosts = [HostResult("gpu01", transport=link, line_rate_GBps=25.0, pair_busbw_GBps=23.9),
             HostResult("gpu02", transport=link, line_rate_GBps=25.0, pair_busbw_GBps=23.9),
             HostResult("gpu03", transport=link, line_rate_GBps=25.0, pair_busbw_GBps=11.9)]
    hosts[2].fail("slow in every pair it is in (<50% of line rate)")
    hosts[2].fail("port mlx5_0:1 rate 100 Gb/s <script>alert(1)</script>")
    report = Report(
        backend="nccl", world_size=24, busbw_GBps=16.4,
        bar=Bar(20.0, "0.8 x 25.0 GB/s line rate of gpu01 (mlx5_0:1 200 Gb/s)"),
        checks=[Check("worker", "pass", "5 sizes, sums correct, 24 ranks"),
                Check("bandwidth", "fail", "busbw 16.4 GB/s below 0.8 x 25.0 GB/s line rate")],
        hosts=hosts,
        pairwise=Pairwise(20.0, "the fabric's bar 20.0 GB/s", [
            Pair(("gpu01", "gpu02"), 23.9, round=1),
            Pair(("gpu01", "gpu03"), 11.8, slow=True, round=2),
            Pair(("gpu02", "gpu03"), 11.9, slow=True, round=3)],
            {"gpu03": "slow in every pair it is in (<50% of line rate)"}, []),
        results=[{"bytes": b, "count": b // 4, "time_us": round(b / bw / 1e3 * 1.5, 3),
                  "time_us_avg": 1.0, "algbw_GBps": round(bw / 1.92, 4), "busbw_GBps": bw,
                  "correct": True} for b, bw in zip(SIZES, busbw, strict=True)])
    return report.to_dict()


def _svg(page: str) -> ET.Element:
    m = re.search(r"<svg\b.*?</svg>", page, re.S)
    assert m, "no inline SVG in the page"
    return ET.fromstring(m.group(0))


def test_page_has_verdict_hosts_threshold_and_a_point_per_size() -> None:
    page = render(_report())
    assert "<title>rdmaprov validate: FAIL</title>" in page
    assert 'class="verdict FAIL">FAIL<' in page
    for host in ("gpu01", "gpu02", "gpu03"):
        assert f"<td>{host}</td>" in page
    assert "busbw 16.4 GB/s below 0.8 x 25.0 GB/s line rate" in page  # a fabric check
    assert "20.0 GB/s: 0.8 x 25.0 GB/s line rate of gpu01" in page  # the bar and its source
    assert "gpu01+gpu03" in page and "23.9 GB/s" in page  # pairwise table
    # one column per fact: no header twice
    heads = re.findall(r"<th>([^<]+)</th>", page)
    hosts_head = heads[heads.index("host"):heads.index("host") + 6]
    assert len(set(hosts_head)) == len(hosts_head)
    svg = _svg(page)
    points = [c for c in svg.iter(f"{SVG}circle") if c.get("class") == "point"]
    assert sorted(int(c.get("data-bytes", "0")) for c in points) == SIZES
    assert {c.get("data-series") for c in points} == {"fabric"}
    thr = [ln for ln in svg.iter(f"{SVG}line") if ln.get("class") == "threshold"]
    assert len(thr) == 1 and thr[0].get("stroke-dasharray")
    assert any("bar 20.0 GB/s" in (t.text or "") for t in svg.iter(f"{SVG}text"))
    # the threshold sits above the best point (SVG y grows downwards)
    assert float(thr[0].get("y1", "0")) < min(float(c.get("cy", "0")) for c in points)
    # pairs carry only their peak: the page says why they are not plotted
    assert "only each pair&#x27;s peak busbw" in page


def test_text_is_escaped() -> None:
    page = render(_report())
    assert "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "(&lt;50% of line rate)" in page
    assert "<50%" not in page


def test_no_threshold_and_no_rows() -> None:
    report = {**_report(), "bar": {"GBps": None, "source": "the run went over TCP"},
              "passed": True, "pairwise": None}
    page = render(report)
    assert 'class="verdict PASS">PASS<' in page
    assert 'class="threshold"' not in page and "no bar line" in page
    assert "none: the run went over TCP" in page
    report["results"] = None
    page = render(report)
    assert "<svg" not in page and "no per-size rows for the fabric run" in page


def test_pairs_with_size_rows_are_plotted() -> None:
    report = _report()
    rows = [{"bytes": b, "busbw_GBps": 1.0} for b in SIZES[:3]]
    report["pairwise"]["pairs"][0]["results"] = rows
    points = [c for c in _svg(render(report)).iter(f"{SVG}circle")
              if c.get("data-series") == "gpu01+gpu02"]
    assert len(points) == 3


def test_human_bytes() -> None:
    assert [human_bytes(x) for x in (512, 1024, 8 << 20, 3 << 29)] == ["512B", "1K", "8M",
                                                                         "1.5G"]


def test_flag_and_env_and_write(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.delenv("RDMAPROV_VALIDATE_HTML", raising=False)
    assert request.build({}).html is None  # bootstrap's phase: the defaults
    monkeypatch.setenv("RDMAPROV_VALIDATE_HTML", str(tmp_path / "env.html"))
    assert request.build({}).html == tmp_path / "env.html"
    out = tmp_path / "v.html"
    report = Report(None, None, None, Bar(None, "x"), [], [HostResult("a")])
    write_html(report, out)
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
