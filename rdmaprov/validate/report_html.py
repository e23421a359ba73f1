"""`rdmaprov validate --html FILE`: the report document as one self-contained HTML page.

A pure function of the report's document (rdmaprov/validate/report.py, ``Report.to_dict()``,
``rdmaprov.validate.report.SCHEMA``): the verdict, the bar and where it came from, the fabric's
checks, one row per host, the pairwise rounds when they ran, RDMA vs TCP when compared, and
busbw against message size as an inline SVG drawn here (log2 x axis, the bar as a dashed line
when one is known). No script, no external file, no dependency: it opens from a
CI artifact or a mail attachment as it is. Every piece of text from the report goes through
html.escape, since reasons quote hosts' own output.

The fabric run's per-size rows are in the report (``results``); pairs carry only their peak
busbw (``pairwise.pairs[].busbw_GBps``) unless a pair also has ``results`` rows, and hosts have
no size rows of their own (every host is in the one fabric all_reduce). The page says which.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

from rdmaprov.validate.verdict import gbps

# Plot geometry (SVG user units): the drawing area is the box inside the margins.
WIDTH, HEIGHT = 720, 380
LEFT, RIGHT, TOP, BOTTOM = 64, 24, 20, 48
# One colour per series: the fabric first, then each pair that has size rows.
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf", "#d62728")

NEUTRAL = "#888"  # what was not judged: neither the pass colour nor the alarm's

# A fleet's page stays quick to open: failing hosts and slow pairs come first, in the open; the
# rest sit in a <details> that is open only when it holds at most this many rows.
OPEN_ROWS = 50
# Pair curves drawn in the plot (the slow ones first); the others' peaks are in the pairs table.
PLOT_PAIRS = len(COLOURS) - 1

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
.verdict { display: inline-block; padding: .15em .6em; border-radius: 4px; color: #fff; }
.PASS, .pass { color: #176f2c; } .FAIL, .fail { color: #b00020; } .skip { color: #777; }
.verdict.PASS { background: #176f2c; color: #fff; }
.verdict.FAIL { background: #b00020; color: #fff; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
p.note { color: #555; font-style: italic; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
details > summary { cursor: pointer; margin: .4em 0; }
"""


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _gbps(value: Any) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "-"
    return f"{gbps(value)} GB/s"


def human_bytes(n: float) -> str:
    """1024 -> 1K, 8388608 -> 8M: the sizes as nccl-tests prints them."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale:
            v = n / scale
            return f"{v:.0f}{unit}" if v == int(v) else f"{v:.3g}{unit}"
    return f"{n:.0f}B"


def _points(rows: Any) -> list[tuple[int, float]]:
    """(bytes, busbw) for each usable row: bytes > 0 (log axis), busbw a number."""
    out = []
    for r in rows or ():
        if not isinstance(r, dict):
            continue
        b, bw = r.get("bytes"), r.get("busbw_GBps")
        if isinstance(b, int | float) and b > 0 and isinstance(bw, int | float):
            out.append((int(b), float(bw)))
    return sorted(out)


def _nice_step(span: float, ticks: int = 5) -> float:
    raw = span / ticks
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


def bandwidth_svg(series: list[tuple[str, list[tuple[int, float]]]],
                  threshold: float | None) -> str:
    """busbw (GB/s) against message size (log2) for each (label, points) series, with the
    threshold as a dashed line. One <circle class="point"> per row."""
    series = [(label, pts) for label, pts in series if pts]
    if not series:
        return ""
    xs = [math.log2(b) for _, pts in series for b, _ in pts]
    ys = [bw for _, pts in series for _, bw in pts]
    x0, x1 = math.floor(min(xs)), math.ceil(max(xs))
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    top = max([*ys, threshold or 0.0])
    step = _nice_step(top * 1.1) if top > 0 else 0.2
    y1 = step * math.ceil(top * 1.1 / step) if top > 0 else 1.0
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(b: float) -> float:
        return LEFT + (math.log2(b) - x0) / (x1 - x0) * pw

    def py(bw: float) -> float:
        return TOP + ph - bw / y1 * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
           f'aria-label="bus bandwidth against message size">',
           f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="#fff" '
           f'stroke="#999"/>']
    # x axis: one tick per power of two, thinned to at most ~12 labels.
    every = max(1, math.ceil((x1 - x0 + 1) / 12))
    for k in range(x0, x1 + 1):
        x = px(2.0 ** k)
        out.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + ph}" '
                   f'stroke="#eee"/>')
        if (k - x0) % every == 0:
            out.append(f'<text x="{x:.1f}" y="{TOP + ph + 16}" text-anchor="middle">'
                       f'{_e(human_bytes(2.0 ** k))}</text>')
    out.append(f'<text x="{LEFT + pw / 2:.1f}" y="{HEIGHT - 8}" text-anchor="middle">'
               f'message size (bytes, log2)</text>')
    # y axis: busbw from 0.
    n = 0
    while n * step <= y1 + step / 1e6:
        y = py(n * step)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + pw}" y2="{y:.1f}" '
                   f'stroke="#eee"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
                   f'{n * step:.4g}</text>')
        n += 1
    out.append(f'<text transform="translate(14 {TOP + ph / 2:.1f}) rotate(-90)" '
               f'text-anchor="middle">busbw (GB/s)</text>')
    if threshold is not None:
        y = py(threshold)
        out.append(f'<line class="threshold" x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + pw}" '
                   f'y2="{y:.1f}" stroke="#b00020" stroke-width="1.5" '
                   f'stroke-dasharray="6 4"/>')
        out.append(f'<text x="{LEFT + pw - 4}" y="{y - 5:.1f}" text-anchor="end" '
                   f'fill="#b00020">bar {_e(_gbps(threshold))}</text>')
    for i, (label, pts) in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        path = " ".join(f"{px(b):.1f},{py(bw):.1f}" for b, bw in pts)
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" '
                   f'points="{path}"/>')
        for b, bw in pts:
            out.append(f'<circle class="point" data-series="{_e(label)}" data-bytes="{b}" '
                       f'cx="{px(b):.1f}" cy="{py(bw):.1f}" r="3" fill="{colour}">'
                       f'<title>{_e(label)}: {_e(human_bytes(b))} ({b} B), '
                       f'busbw {bw:.4g} GB/s</title></circle>')
        ly = TOP + 14 + 16 * i
        out.append(f'<rect x="{LEFT + 10}" y="{ly - 9}" width="10" height="10" '
                   f'fill="{colour}"/>')
        out.append(f'<text x="{LEFT + 26}" y="{ly}">{_e(label)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _table(head: list[str], rows: list[list[str]]) -> str:
    """``rows`` hold already-escaped cell HTML (a cell may carry a class: ``<td ...>``)."""
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "\n".join("<tr>" + "".join(c if c.startswith("<td") else f"<td>{c}</td>"
                                      for c in row) + "</tr>" for row in rows)
    return f"<table>\n<thead><tr>{th}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def _collapsed(what: str, head: list[str], rows: list[list[str]]) -> str:
    """Rows that need no attention (passing hosts, good pairs) in a <details>: open when short,
    closed for a fleet (a 10,000-host page then renders its summary and failures at once)."""
    if not rows:
        return ""
    state = " open" if len(rows) <= OPEN_ROWS else ""
    return (f"<details{state}><summary>{_e(what)} ({len(rows)})</summary>\n"
            f"{_table(head, rows)}\n</details>")


def _num(value: Any) -> str:
    return f'<td class="num">{_e(_gbps(value))}</td>'


def _cell(value: Any, scale: float, fmt: str, unit: str) -> str:
    text = "-" if not isinstance(value, int | float) else f"{value * scale:{fmt}}{unit}"
    return f'<td class="num">{_e(text)}</td>'


def iterations_svg(rows: list[dict[str, Any]], limit: float | None, width: int = 640,
                   height: int = 220) -> str:
    """Every iteration of each size as a dot at its time / the size's median: a flat fabric is
    a line of dots at 1, a pausing or retransmitting one has dots far above the limit line.
    ``limit`` None: not judged (a skipped check): no limit line, every dot one neutral colour."""
    series = []
    for r in rows:
        each = r.get("iters_us")
        p50 = (r.get("iter_us") or {}).get("p50_us")
        if isinstance(each, list) and each and isinstance(p50, int | float) and p50 > 0:
            series.append((r.get("bytes"), [float(t) / p50 for t in each
                                             if isinstance(t, int | float)]))
    if not series:
        return ""
    top = max([(limit or 1.0) * 1.2] + [max(v) for _, v in series if v])
    left, right, pad = 56, width - 12, 18
    lane = (right - left) / len(series)

    def py(ratio: float) -> float:
        return height - pad - (height - 2 * pad) * min(ratio, top) / top

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           'role="img" aria-label="iteration time over the median, per size">',
           f'<text x="4" y="{py(1.0) + 4:.1f}" font-size="10">x1</text>']
    if limit is not None:
        out += [f'<line class="limit" x1="{left}" x2="{right}" y1="{py(limit):.1f}" '
                f'y2="{py(limit):.1f}" stroke="#c0392b" stroke-dasharray="4 3"/>',
                f'<text x="4" y="{py(limit) + 4:.1f}" font-size="10">x{limit:g}</text>']
    for i, (size, ratios) in enumerate(series):
        x0 = left + i * lane
        step = lane * 0.8 / max(1, len(ratios))
        for k, ratio in enumerate(ratios):
            color = "#c0392b" if limit is not None and ratio > limit else (
                "#2471a3" if limit is not None else NEUTRAL)
            out.append(f'<circle cx="{x0 + lane * 0.1 + k * step:.1f}" cy="{py(ratio):.1f}" '
                       f'r="2" fill="{color}"/>')
        label = human_bytes(size) if isinstance(size, int | float) else str(size)
        out.append(f'<text x="{x0 + lane / 2:.1f}" y="{height - 4}" font-size="10" '
                   f'text-anchor="middle">{_e(label)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _check(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next((c for c in report.get("checks") or [] if isinstance(c, dict)
                 and c.get("name") == name), {})


def _stability_html(report: dict[str, Any]) -> list[str]:
    st = report.get("stability") or {}
    if not st.get("sizes"):
        return []
    limit = float(st.get("limit") or 2.0)
    check = _check(report, "stability")
    if check.get("status") == "skip":
        # Not judged (too few iterations to read a p99): the times as they are, no limit line,
        # no alarm colour, no UNSTABLE: a skipped check is neither a pass nor a failure.
        parts = [f"<h2>Iterations (stability check skipped: {_e(check.get('reason', ''))})</h2>"]
        rows = []
        for z in st["sizes"]:
            p50, p99 = z.get("p50_us") or 0, z.get("p99_us") or 0
            rows.append([f'<td class="num">{_e(human_bytes(z.get("bytes") or 0))}</td>',
                         _cell(p50, 1e-3, ".3f", " ms"), _cell(p99, 1e-3, ".3f", " ms"),
                         _cell(z.get("max_us"), 1e-3, ".3f", " ms"),
                         _cell(p99 / p50 if p50 else 0.0, 1, ".2f", "")])
        parts.append(_table(["size", "p50", "p99", "max", "p99/p50"], rows))
        svg = iterations_svg([r for r in report.get("results") or [] if isinstance(r, dict)],
                             None)
        if svg:
            parts.append(svg)
            parts.append('<p class="note">Each dot is one iteration\'s time over its size\'s '
                         "median; not judged (the check was skipped).</p>")
        return parts
    if check.get("status") == "pass":
        parts = [f"<h2>Iterations (stable: p99/p50 within {_e(f'{limit:g}')} at the large "
                 "sizes)</h2>"]
    else:
        parts = [f"<h2>Iterations (UNSTABLE above p99/p50 {_e(f'{limit:g}')} at the large "
                 "sizes)</h2>"]
    rows = []
    for z in st["sizes"]:
        p50, p99 = z.get("p50_us") or 0, z.get("p99_us") or 0
        ratio = p99 / p50 if p50 else 0.0
        rows.append([f'<td class="num">{_e(human_bytes(z.get("bytes") or 0))}</td>',
                     _cell(p50, 1e-3, ".3f", " ms"), _cell(p99, 1e-3, ".3f", " ms"),
                     _cell(z.get("max_us"), 1e-3, ".3f", " ms"), _cell(ratio, 1, ".2f", "")])
    parts.append(_table(["size", "p50", "p99", "max", "p99/p50"], rows))
    pairs = [p for p in st.get("pairs") or [] if p.get("ratio") is not None]
    rows = [[_e("+".join(p.get("hosts") or [])), _cell(p.get("ratio"), 1, ".2f", ""),
             f'<td class="{"fail" if p.get("unstable") else "pass"}">'
             f'{"UNSTABLE" if p.get("unstable") else "ok"}</td>'] for p in pairs
            if p.get("unstable")]
    if rows:
        parts.append(_table(["pair", "p99/p50", ""], rows))
    parts.append(_collapsed("stable pairs", ["pair", "p99/p50", ""], [
        [_e("+".join(p.get("hosts") or [])), _cell(p.get("ratio"), 1, ".2f", ""),
         '<td class="pass">ok</td>'] for p in pairs if not p.get("unstable")]))
    for h, why in (st.get("blamed") or {}).items():
        parts.append(f'<p><strong class="FAIL">{_e(h)}</strong>: {_e(why)}</p>')
    svg = iterations_svg([r for r in report.get("results") or [] if isinstance(r, dict)], limit)
    if svg:
        parts.append(svg)
        parts.append('<p class="note">Each dot is one iteration\'s time over its size\'s '
                     "median; the dashed line is the limit.</p>")
    return parts


def _started(run: dict[str, Any]) -> str:
    if not run.get("started"):
        return "not measured (no steps.log in the results, no record of the run)"
    by = {"controller": "the controller's clock",
          "steps.log": "the hosts' clocks (steps.log)"}.get(str(run.get("clock")), "")
    return f"{run['started']}" + (f" ({by})" if by else "")


def _duration(seconds: Any) -> str:
    """6.827 -> '6.8 s'; 125 -> '2 min 5 s'; not a number -> 'not measured'."""
    if not isinstance(seconds, int | float) or isinstance(seconds, bool):
        return "not measured"
    if seconds < 60:
        return f"{seconds:.1f} s"
    m, sec = divmod(round(seconds), 60)
    h, m = divmod(m, 60)
    return (f"{h} h " if h else "") + f"{m} min {sec} s"


def render(report: dict[str, Any]) -> str:
    """The whole page, from the report's document (``Report.to_dict()``)."""
    verdict = "PASS" if report.get("passed") else "FAIL"
    bar = report.get("bar") or {}
    thr = bar.get("GBps")
    hosts = report.get("hosts") or []
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             f"<title>rdmaprov validate: {verdict}</title>", f"<style>{CSS}</style>",
             "</head>", "<body>",
             f'<h1>rdmaprov validate: <span class="verdict {verdict}">{verdict}</span></h1>']
    run = report.get("run") or {}
    facts = [
        ("started (UTC)", _started(run)),
        ("duration", _duration(run.get("duration_s"))),
        ("inventory", run.get("inventory") or "not recorded (a results directory judged with "
         "--judge DIR, its run not made by this rdmaprov with --results)"),
        ("rdmaprov", run.get("version") or "-"),
        ("results", report.get("source") or "-"),
        ("backend", report.get("backend") or "-"),
        ("ranks", report.get("world_size") or "-"),
        ("hosts", len(hosts)),
        ("peak busbw", _gbps(report.get("busbw_GBps"))),
        ("bar", (f"{_gbps(thr)}: " if thr is not None else "none: ") + str(bar.get("source", ""))),
        ("exit code", report.get("exit_code", 0 if verdict == "PASS" else 2)),
    ]
    parts.append('<table class="facts">\n<tbody>\n' + "\n".join(
        f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in facts) + "\n</tbody>\n</table>")
    failing = [h for h in hosts if not h.get("passed")]
    pw = report.get("pairwise")
    pairs = (pw or {}).get("pairs") or []
    bad_pairs = [p for p in pairs if p.get("slow") or p.get("error")]
    summary = f"{len(failing)} of {len(hosts)} hosts failed"
    if pairs:
        summary += f"; {len(bad_pairs)} of {len(pairs)} pairs slow or without a result"
    parts.append(f'<p class="summary"><strong>{_e(summary)}</strong></p>')

    parts.append("<h2>Fabric checks</h2>")
    checks = [[f'<td class="{_e(c.get("status", ""))}">{_e(c.get("status", ""))}</td>',
               _e(c.get("name", "")), _e(c.get("reason", ""))]
              for c in report.get("checks") or []]
    if report.get("error"):
        checks.append(['<td class="fail">fail</td>', "worker", _e(report["error"])])
    parts.append(_table(["status", "check", "reason"], checks) if checks
                 else '<p class="note">No fabric checks in the report.</p>')

    parts.append("<h2>Hosts</h2>")
    head = ["host", "result", "line rate", "ports", "pair busbw", "transport or reasons"]
    rows = [[_e(h.get("host", "?")),
             f'<td class="{"PASS" if h.get("passed") else "FAIL"}">'
             f'{"PASS" if h.get("passed") else "FAIL"}</td>',
             _num(h.get("line_rate_GBps")), _e(h.get("ports") or ""),
             _num(h.get("pair_busbw_GBps")),
             "<br>".join(_e(r) for r in h.get("reasons") or []) or _e(h.get("transport") or "")]
            for h in failing]
    if rows:
        parts.append(_table(head, rows))
    parts.append(_collapsed("passing hosts", head, [
        [_e(h.get("host", "?")), '<td class="PASS">PASS</td>', _num(h.get("line_rate_GBps")),
         _e(h.get("ports") or ""), _num(h.get("pair_busbw_GBps")), _e(h.get("transport") or "")]
        for h in hosts if h.get("passed")]))

    if pw:
        parts.append(f"<h2>Pairwise rounds (bar {_e(_gbps(pw.get('bar_GBps')))}: "
                     f"{_e(pw.get('bar_source', ''))})</h2>")
        blamed = pw.get("blamed") or {}

        def pair_row(p: dict[str, Any]) -> list[str]:
            slow = bool(p.get("slow"))
            who = [h for h in p.get("hosts") or [] if h in blamed]
            return [_e("-" if p.get("round") is None else p["round"]),
                    _e("+".join(p.get("hosts") or [])), _num(p.get("busbw_GBps")),
                    f'<td class="{"fail" if slow else "pass"}">{"slow" if slow else "ok"}</td>',
                    _e(p.get("error") or ""), _e(", ".join(who))]

        head = ["round", "pair", "peak busbw", "", "error", "blamed host"]
        if bad_pairs:
            parts.append(_table(head, [pair_row(p) for p in bad_pairs]))
        parts.append(_collapsed("good pairs", head, [
            pair_row(p) for p in pairs if not (p.get("slow") or p.get("error"))]))
        for h, why in blamed.items():
            parts.append(f'<p><strong class="FAIL">{_e(h)}</strong>: {_e(why)}</p>')
        for u in pw.get("unexplained") or []:
            parts.append(f"<p>slow pair, no single host to blame: {_e(u)}</p>")

    if report.get("compare"):
        parts.append("<h2>RDMA vs TCP</h2>")
        parts.append(_table(
            ["run", "transport", "peak busbw", "1 GiB all_reduce", "CPU cores busy", "p99/p50",
             "note"],
            [[_e(r.get("label")), _e(r.get("transport")), _num(r.get("busbw_GBps")),
              _cell(r.get("time_1GiB_us"), 1e-3, ".1f", " ms"),
              _cell(r.get("cpu_busy_cores"), 1, ".2f", ""), _cell(r.get("jitter"), 1, ".2f", ""),
              _e(r.get("note") or "")]
             for r in report["compare"]]))

    parts.append("<h2>Bus bandwidth against message size</h2>")
    series = [("fabric", _points(report.get("results")))]
    curves = [p for p in pairs if p.get("results")]
    if len(curves) > PLOT_PAIRS:  # a fleet: the slow pairs' curves first
        curves.sort(key=lambda p: not (p.get("slow") or p.get("error")))
    series += [("+".join(p.get("hosts") or []), _points(p.get("results")))
               for p in curves[:PLOT_PAIRS]]
    svg = bandwidth_svg(series, thr if isinstance(thr, int | float) else None)
    notes = []
    if not series[0][1]:
        notes.append("The report has no per-size rows for the fabric run (the worker gave no "
                     "result), so there is no fabric curve.")
    if pairs and not any(p.get("results") for p in pairs):
        notes.append("The report holds only each pair's peak busbw, not its per-size rows: "
                     "the pairs are in the table above, not in the plot.")
    notes.append("Hosts have no size rows of their own: every host is in the one fabric "
                 "all_reduce; a host's busbw is its best pair's peak.")
    if len(curves) > PLOT_PAIRS:
        notes.append(f"{PLOT_PAIRS} of {len(curves)} pairs' curves are drawn (the slow ones "
                     "first); every pair's peak is in the pairs table.")
    if thr is None:
        notes.append("No bar is known, so the plot has no bar line.")
    parts.append(svg if svg else '<p class="note">Nothing to plot.</p>')
    parts += [f'<p class="note">{_e(n)}</p>' for n in notes]

    parts += _stability_html(report)

    rows_html = []
    for r in report.get("results") or []:
        if not isinstance(r, dict):
            continue
        b = r.get("bytes")
        rows_html.append([
            f'<td class="num">{_e(human_bytes(b) if isinstance(b, int | float) else b)}</td>',
            f'<td class="num">{_e(r.get("time_us", "-"))}</td>',
            _num(r.get("algbw_GBps")), _num(r.get("busbw_GBps")),
            {True: "yes", False: "NO"}.get(r["correct"], "-")
            if isinstance(r.get("correct"), bool) else "-"])
    if rows_html:
        parts.append("<h2>Fabric sweep</h2>")
        parts.append(_table(["size", "time (us)", "algbw", "busbw", "sum correct"], rows_html))
    parts += ["</body>", "</html>", ""]
    return "\n".join(parts)
