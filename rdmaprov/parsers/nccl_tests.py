"""nccl-tests output (all_reduce_perf and friends): rows, average and peak bus bandwidth.

Handles the old table (``error`` column, no ``root``), the current one (``redop root ...
#wrong``), headers stripped of their ``#``, MPI ``[1,0]<stdout>:`` prefixes, and rows pasted
without any header (then the columns are read from the right, which every format shares:
time algbw busbw error/#wrong for out-of-place, then the same for in-place).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rdmaprov.parsers._common import Finding, clean, num

_TYPES = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double",
          "bfloat16", "fp8_e4m3", "fp8_e5m2", "int", "char"}
_RANK = re.compile(r"^#?\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)"
                   r"(?:\s+device\s+(\d+)\s+\[([^\]]*)\]\s*(.*))?")
# "# nccl-tests version 2.19.6 nccl-headers=23007 nccl-library=23007" (nccl-tests 2.14 and later)
_TESTS_VERSION = re.compile(r"nccl-tests version (\S+).*?nccl-library=(\d+)")
_MAX_DEVICES = 4096
_AVG = re.compile(r"Avg bus bandwidth\s*:\s*([\d.]+)")
_OOB = re.compile(r"Out of bounds values\s*:\s*(\d+)\s*(\w+)?")
_MAX_ROWS = 10000
# "node1: Test CUDA failure common.cu:963 'invalid device ordinal'", "Test NCCL failure ...":
# the test aborted (src/common.h TESTCHECK/CUDACHECK/NCCLCHECK).
_ABORT = re.compile(r"(?:(\S+): )?(?:Test )?(CUDA|Cuda|NCCL) failure (\S+\.cu:\d+|\S+) "
                    r"'([^']*)'|Test failure (\S+)")


def _float(tok: str) -> float | None:
    try:
        return float(tok)
    except ValueError:
        return None


@dataclass
class NcclTestsReport:
    ranks: int | None = None
    devices: list[dict[str, Any]] = field(default_factory=list)
    nccl_version: str | None = None
    nccl_tests_version: str | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    avg_busbw: float | None = None
    peak_busbw: float | None = None
    peak_size_bytes: int | None = None
    out_of_bounds: int | None = None
    wrong_rows: int = 0
    header_seen: bool = False
    findings: list[Finding] = field(default_factory=list)
    verdict: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "nccl_tests",
            "findings": [f.to_dict() for f in self.findings],
            "ranks": self.ranks,
            "devices": self.devices,
            "nccl_version": self.nccl_version,
            "nccl_tests_version": self.nccl_tests_version,
            "rows": self.rows,
            "avg_busbw": num(self.avg_busbw),
            "peak_busbw": num(self.peak_busbw),
            "peak_size_bytes": self.peak_size_bytes,
            "out_of_bounds": self.out_of_bounds,
            "verdict": self.verdict,
        }


class NcclTestsParser:
    def __init__(self) -> None:
        self.header: list[str] | None = None
        self.rows: list[dict[str, Any]] = []
        self.ranks: dict[int, set[str]] = {}
        self.avg: float | None = None
        self.oob: int | None = None
        self.signals = 0
        self.devices: list[dict[str, Any]] = []
        self.versions: tuple[str, str] | None = None
        self.failures: list[dict[str, str]] = []
        self.headers = 0  # "# nThread ..." lines: one per independent test run
        self.summaries = 0  # "# Avg bus bandwidth" lines
        # A second header (or result) with no table row since the first: runs interleaved,
        # as independent processes print them, not one run after another.
        self.back_to_back = 0
        self._rows_at_header = -1
        self._rows_at_summary = -1
        # A row no larger than the one before it, same type and op, with no header or result
        # between them: one run prints each size once, growing; interleaved runs repeat them.
        self.repeated_rows = 0
        self._run_start = 0
        self._prev_key: tuple[str, ...] = ()

    def abort(self, line: str) -> bool:
        """A "Test CUDA/NCCL failure" line: the run aborted (never a healthy result)."""
        m = _ABORT.search(line)
        if not m:
            return False
        self.signals += 2
        if m.group(2) and len(self.failures) < 16:
            f = {"host": m.group(1) or "", "what": m.group(2).upper(), "where": m.group(3),
                 "error": m.group(4).strip(" /")}
            if f not in self.failures:
                self.failures.append(f)
        return True

    def feed(self, line: str) -> None:
        s = clean(line).strip()
        if not s:
            return
        body = s.lstrip("#").strip()
        if "busbw" in body and "size" in body:
            self.header = body.split()
            self.signals += 1
            return
        if "bus bandwidth" in body:
            m = _AVG.search(body)
            if m:
                self.avg = float(m.group(1))
                self.signals += 1
                self.summaries += 1
                if self._rows_at_summary == len(self.rows):
                    self.back_to_back += 1
                self._rows_at_summary = self._run_start = len(self.rows)
            return
        if " failure " in body and ("Test " in body or ".cu:" in body) and self.abort(body):
            return
        if "Out of bounds" in body:
            m = _OOB.search(body)
            if m:
                self.oob = int(m.group(1))
                self.signals += 1
            return
        if body.startswith("Rank"):
            m = _RANK.match(body)
            if m and len(self.ranks) < 65536:
                rank, pid, host = int(m.group(1)), m.group(3), m.group(4)
                self.ranks.setdefault(rank, set()).add(pid + "@" + host)
                self.signals += 1
                if m.group(5) is not None and len(self.devices) < _MAX_DEVICES:
                    self.devices.append({
                        "rank": rank, "group": int(m.group(2)) if m.group(2) else None,
                        "pid": int(pid), "host": host, "device": int(m.group(5)),
                        "bus_id": m.group(6), "name": m.group(7).strip()})
            return
        if body.startswith(("nThread ", "Using devices", "Collective test starting")):
            self.signals += 1
            if body.startswith("nThread "):
                self.headers += 1
                if self._rows_at_header == len(self.rows):
                    self.back_to_back += 1
                self._rows_at_header = self._run_start = len(self.rows)
            return
        if body.startswith("nccl-tests version"):
            m = _TESTS_VERSION.search(body)
            if m:
                self.versions = (m.group(1), m.group(2))
                self.signals += 1
            return
        if s[0].isdecimal():
            self._row(s.split())

    def _row(self, tok: list[str]) -> None:
        if len(tok) < 3 or not (tok[0].isdecimal() and tok[1].isdecimal()) \
                or tok[2] not in _TYPES or len(self.rows) >= _MAX_ROWS:
            return
        row: dict[str, Any] = {"size_bytes": int(tok[0]), "count": int(tok[1]), "type": tok[2]}
        hdr = self.header
        if hdr and len(hdr) >= 8:
            # Map by header position; a row cut short keeps what it has.
            idx = [i for i, h in enumerate(hdr) if h == "busbw"]
            tix = [i for i, h in enumerate(hdr) if h == "time"]
            aix = [i for i, h in enumerate(hdr) if h == "algbw"]
            eix = [i for i, h in enumerate(hdr) if h in ("error", "#wrong", "wrong")]

            def at(ix: list[int], k: int) -> str | None:
                return tok[ix[k]] if len(ix) > k and ix[k] < len(tok) else None
            if "redop" in hdr and hdr.index("redop") < len(tok):
                row["redop"] = tok[hdr.index("redop")]
            vals = {"oop_time_us": at(tix, 0), "oop_algbw": at(aix, 0),
                    "oop_busbw": at(idx, 0), "oop_error": at(eix, 0),
                    "ip_time_us": at(tix, 1), "ip_algbw": at(aix, 1), "ip_busbw": at(idx, 1),
                    "ip_error": at(eix, 1)}
        elif len(tok) >= 11:
            vals = {"oop_time_us": tok[-8], "oop_algbw": tok[-7], "oop_busbw": tok[-6],
                    "oop_error": tok[-5], "ip_time_us": tok[-4], "ip_algbw": tok[-3],
                    "ip_busbw": tok[-2], "ip_error": tok[-1]}
        else:
            return
        for k, v in vals.items():
            if k.endswith("_error"):
                row[k] = v
            else:
                row[k] = num(_float(v)) if v is not None else None
        if row.get("oop_busbw") is None and row.get("ip_busbw") is None:
            return
        # type, redop and root (broadcast -r all restarts the sizes for each root)
        key = tuple(tok[2:-8]) if len(tok) >= 11 else (tok[2],)
        if (len(self.rows) > self._run_start and key == self._prev_key
                and self.rows[-1]["size_bytes"] >= row["size_bytes"]):
            self.repeated_rows += 1
        self._prev_key = key
        self.rows.append(row)
        self.signals += 1

    def finish(self) -> NcclTestsReport:
        r = NcclTestsReport(rows=self.rows, avg_busbw=self.avg, out_of_bounds=self.oob,
                            header_seen=self.header is not None)
        # A paste may list only some ranks ("Rank 71" alone from a 72-rank NVL72 run): the
        # highest rank number counts them as well as the lines do.
        r.ranks = max(len(self.ranks), max(self.ranks) + 1) if self.ranks else None
        r.devices = sorted(self.devices, key=lambda d: d["rank"])
        if self.versions:
            r.nccl_tests_version, r.nccl_version = self.versions[0], nccl_code(self.versions[1])
        best = None
        for row in self.rows:
            for k in ("oop_busbw", "ip_busbw"):
                v = row.get(k)
                if v is not None and (best is None or v > best[0]):
                    best = (v, row["size_bytes"])
            for k in ("oop_error", "ip_error"):
                if _wrong(row.get(k), self.header) > 0:
                    r.wrong_rows += 1
                    break
        if best:
            r.peak_busbw, r.peak_size_bytes = best
        f = r.findings
        dup = [rk for rk, pids in self.ranks.items() if len(pids) > 1]
        for fl in self.failures:
            f.append(abort_finding(fl))
        if dup:
            f.append(Finding(
                "error", f"rank {dup[0]} appears {len(self.ranks[dup[0]])} times with "
                "different processes: each process ran its own test (nccl-tests without MPI)",
                "nccl-tests was built without MPI support: rebuild with `make MPI=1 "
                "MPI_HOME=...` (after `make clean`) so mpirun ranks form one communicator.",
                "tests_no_mpi", "config"))
        elif self.back_to_back or self.repeated_rows:
            n = max(self.headers, self.summaries)
            f.append(Finding(
                "error", (f"{n} test headers or results printed together in one output"
                          if self.back_to_back else
                          f"{self.repeated_rows} table row(s) repeat a size already printed "
                          "(one run prints each size once, growing)")
                + ": several independent runs interleaved (each process ran its own test)",
                "If they come from one mpirun, nccl-tests was built without MPI: `make clean; "
                "make MPI=1 MPI_HOME=...` so the ranks form one communicator; the busbw of "
                "such runs is a single host's.", "tests_no_mpi", "config"))
        collapse = _collapse(self.rows)
        if collapse:
            f.append(collapse)
        if self.oob:
            f.append(Finding("error", f"{self.oob} out-of-bounds values: results were WRONG",
                             "Data corruption: rerun with -c 1 and NCCL_DEBUG=WARN; suspect "
                             "GPU/NVLink/NIC hardware, or a NCCL bug in that version."))
        if r.wrong_rows:
            f.append(Finding("error", f"{r.wrong_rows} rows report wrong results (#wrong > 0)",
                             "Check the data path (GPU memory, NVLink, NIC) on the hosts."))
        if r.peak_busbw is not None:
            f.append(Finding("info", f"peak busbw {r.peak_busbw} GB/s at "
                             f"{_human(r.peak_size_bytes or 0)}"
                             + (f"; average {r.avg_busbw} GB/s" if r.avg_busbw is not None
                                else ""), None))
        elif not self.rows:
            f.append(Finding("warning", "no result rows (the output stops before the table)",
                             None))
        return r


def _wrong(v: str | None, header: list[str] | None) -> float:
    """The #wrong count of a row's cell (0 when it has none). Integers and the scientific
    form some versions print ("1e+06") count; the old "error" column (a float max-error,
    normally a rounding residue such as 2e-07) does not."""
    if v is None:
        return 0
    try:
        x = float(v)
    except ValueError:
        return 0
    if header is not None and "#wrong" in header:
        return x
    return x if x >= 1 and x.is_integer() and header is None else 0


def abort_finding(fl: dict[str, str]) -> Finding:
    where = f" on {fl['host']}" if fl["host"] else ""
    err = fl["error"]
    if "invalid device ordinal" in err:
        hint = ("A process asked for a GPU that does not exist on its host: processes per "
                "host x -g (GPUs per process) exceeds the GPUs visible there "
                "(CUDA_VISIBLE_DEVICES); with mpirun use -g 1 and one process per GPU, or "
                "fewer processes per host.")
    elif "busy or unavailable" in err:
        # cudaErrorDevicesUnavailable (46): the GPU is in Exclusive Process (or Prohibited)
        # compute mode and another process holds it; several ranks or threads of one job
        # sharing a GPU, or a leftover process (NVIDIA/nccl-tests#369: GH200 in E. Process).
        hint = ("The GPUs refuse a second CUDA context: they are in Exclusive Process compute "
                "mode (or Prohibited) and another process holds them, often another rank of "
                "the same job on that GPU or a leftover process. `nvidia-smi -q -d COMPUTE` "
                "shows the mode; `nvidia-smi -c DEFAULT` (as root, per GPU with -i) puts it "
                "back to shared, or keep Exclusive Process and give each rank its own GPU "
                "(one process per GPU, -g 1, no other process on it: nvidia-smi).")
        return Finding("error", f"the test aborted{where}: CUDA failure at {fl['where']} "
                       f"'{err}': the GPU is held by another process (Exclusive Process "
                       "compute mode)", hint, "tests_gpu_busy", "config")
    elif fl["what"] == "NCCL":
        hint = ("NCCL failed inside the test: rerun with NCCL_DEBUG=INFO and `rdmaprov "
                "explain` the log; the NCCL WARN before the failure names the cause.")
    else:
        hint = "A CUDA call of the test failed: check the GPUs (nvidia-smi) and the driver."
    return Finding("error", f"the test aborted{where}: {fl['what']} failure at {fl['where']} "
                   f"'{err}' (no valid result)", hint, "tests_abort", "config")


def _collapse(rows: list[dict[str, Any]]) -> Finding | None:
    """Busbw that falls well below its peak at the largest sizes, where it should be flat."""
    pts = []
    for row in rows:
        vals = [v for v in (row.get("oop_busbw"), row.get("ip_busbw")) if v is not None]
        if vals:
            pts.append((row["size_bytes"], max(vals)))
    if len(pts) < 4:
        return None
    pts.sort()
    peak_size, peak = max(pts, key=lambda p: p[1])
    last_size, last = pts[-1]
    if peak < 1 or peak_size >= last_size or last >= 0.5 * peak:
        return None
    return Finding(
        "warning", f"bandwidth collapse at large sizes: busbw {last:g} GB/s at "
        f"{_human(last_size)} "
        f"against a peak of {peak:g} GB/s at {_human(peak_size)}",
        "Bandwidth should stay near its peak as messages grow: a drop at the largest sizes "
        "points at a link or switch port that congests under sustained load (RoCE: pause "
        "storms or missing ECN, see ethtool -S rx_prioN_pause / np_cnp_sent), a NIC or PCIe "
        "link running below its rate, or GPU memory pressure. Test each NIC with ib_write_bw "
        "and read the port counters.", "tests_busbw_collapse", "investigate")


def nccl_code(code: str) -> str | None:
    """NCCL_VERSION_CODE as nccl-tests prints it: 23007 -> '2.30.7', 2708 -> '2.7.8'."""
    if not code.isdecimal():
        return None
    n = int(code)
    if n >= 20900:  # NCCL 2.9 and later: major*10000 + minor*100 + patch
        return f"{n // 10000}.{n % 10000 // 100}.{n % 100}"
    return f"{n // 1000}.{n % 1000 // 100}.{n % 100}"


def _human(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def verdict(report: NcclTestsReport, expect_busbw: float | None,
            line_rate_gbps: float | None, nics: int, fraction: float
            ) -> dict[str, Any] | None:
    """Pass when peak busbw reaches the expectation: given GB/s, or fraction x NICs x rate/8."""
    if expect_busbw is None and line_rate_gbps is None:
        return None
    if expect_busbw is not None:
        expected, basis = expect_busbw, f"--expect-busbw {expect_busbw:g}"
    else:
        expected = fraction * nics * (line_rate_gbps or 0) / 8
        basis = (f"{fraction:.0%} of {nics} x {line_rate_gbps:g} Gb/s "
                 f"({nics * (line_rate_gbps or 0) / 8:g} GB/s)")
    measured = report.peak_busbw
    ok = measured is not None and measured >= expected
    v = {"expected_busbw": round(expected, 3), "measured_busbw": measured, "basis": basis,
         "pass": ok}
    if measured is None:
        report.findings.append(Finding("warning", "no busbw figures to judge", None))
    elif ok:
        report.findings.append(Finding(
            "info", f"busbw {measured} GB/s meets the expected {expected:.1f} GB/s ({basis})",
            None))
    else:
        report.findings.append(Finding(
            "error", f"busbw {measured} GB/s is below the expected {expected:.1f} GB/s "
            f"({basis})",
            "Check the transport really is IB/RoCE with GDRDMA (rerun with NCCL_DEBUG=INFO "
            "and `rdmaprov explain` the log), that every NIC is used (NCCL_IB_HCA), port "
            "rates (ibstat) and, on RoCE, PFC/ECN."))
    report.verdict = v
    return v
