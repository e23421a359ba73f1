"""The diagnosis table (rdmaprov/parsers/rules.py) and the nccl-tests judgements around it."""

from __future__ import annotations

import re

import pytest

from rdmaprov.explain import explain_stream
from rdmaprov.parsers import rules
from rdmaprov.remediation import ALL


def test_every_rule_is_complete() -> None:
    for r in rules.RULES:
        assert r.code and r.cause and r.action and r.source.startswith("https://"), r.code
        assert r.remedy.value in ALL and r.severity in ("error", "warning", "info")
        assert r.scope in ("nccl", "kernel", "perftest")
        # The needle (a cheap pre-test) must not hide a match of its own pattern.
        assert r.needle == r.needle.lower()


@pytest.mark.parametrize(("line", "code", "remedy", "text"), [
    ("h:1:2 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : port error",
     "async_event", "reset-link", "flapped"),
    ("h:1:2 [0] net_ib.cc:80 NCCL WARN NET/IB : Got async event : local catastrophic error",
     "async_event", "reboot", "catastrophic"),
    ("h:1:2 [0] NCCL WARN NET/IB : mlx5_0:1 Got async event : local access violation work "
     "queue error", "async_event", "config", "local access violation"),
    ("h:1:2 [0] NCCL WARN NET/IB : Got async event : port active", "async_info",
     "investigate", "not an error"),
    ("misc/ibvwrap.cc:288 NCCL WARN Call to ibv_reg_dmabuf_mr failed with error Operation not "
     "supported", "dmabuf_unsupported", "config", "DMA-BUF"),
    ("h:1:2 [0] transport.cc:323 NCCL WARN Cannot initialize CollNet, using point-to-point "
     "network instead", "collnet_fallback", "config", "fell back"),
    ("mlx5_core 0000:0d:00.0: poll_health:801:(pid 0): device's health compromised - reached "
     "miss count", "mlx5_health", "reboot", "health counter"),
    ("Couldn't connect to 10.0.0.2:18515", "perftest_oob_connect", "config", "10.0.0.2:18515"),
])
def test_rule_matches(line: str, code: str, remedy: str, text: str) -> None:
    hit = rules.match(line)
    assert hit is not None
    d = rules.diagnosis(*hit, line)
    assert (d.code, d.remedy) == (code, remedy)
    assert text in d.cause + d.action


def test_diagnose_puts_the_first_cause_before_consequences() -> None:
    lines = ["Unable to init the socket connection",
             "Couldn't connect to 10.0.0.2:18515",
             "Couldn't connect to 10.0.0.2:18515"]
    out = rules.diagnose(lines)
    assert [d.code for d in out] == ["perftest_oob_connect", "perftest_oob_socket"]
    assert out[0].count == 2 and out[1].consequence


def _table(rows: list[tuple[int, float, str]]) -> list[str]:
    head = ("#       size         count      type   redop    root     time   algbw   busbw "
            "#wrong     time   algbw   busbw #wrong")
    out = [head]
    for size, bw, wrong in rows:
        out.append(f"{size:>12} {size // 4:>13}     float     sum      -1   100.0  {bw:6.2f}  "
                   f"{bw:6.2f}  {wrong:>5}   100.0  {bw:6.2f}  {bw:6.2f}  {wrong:>5}")
    return out


def test_wrong_in_scientific_notation_counts() -> None:
    r = explain_stream(_table([(1 << 20, 10.0, "0"), (1 << 21, 10.0, "1.04858e+06"),
                               (1 << 22, 10.0, "0")]))
    assert any(re.search(r"^1 rows report wrong", f["message"]) for f in r["findings"])


def test_bandwidth_collapse_at_large_sizes_is_flagged() -> None:
    rows = [(1 << k, bw, "0") for k, bw in zip(range(20, 31, 2),
                                               (20.0, 40.0, 80.0, 90.0, 30.0, 12.0), strict=True)]
    r = explain_stream(_table(rows))
    f = [x for x in r["findings"] if x.get("code") == "tests_busbw_collapse"]
    assert f and "12 GB/s at 1 GiB" in f[0]["message"] and f[0]["remedy"] == "investigate"
    flat = [(1 << k, bw, "0") for k, bw in zip(range(20, 31, 2),
                                               (20.0, 40.0, 80.0, 90.0, 91.0, 90.5), strict=True)]
    assert not any(x.get("code") == "tests_busbw_collapse"
                   for x in explain_stream(_table(flat))["findings"])


def test_coded_errors_of_the_real_pastes_carry_a_remediation_class() -> None:
    from pathlib import Path

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "explain"
    seen = 0
    for p in sorted(fixtures.iterdir()):
        if p.name == "index.yaml":
            continue
        with open(p, encoding="utf-8") as fh:
            r = explain_stream(fh)
        for f in r["findings"] + (r.get("nccl_log") or {}).get("findings", []):
            if f.get("remedy") is not None:
                assert f["remedy"] in ALL, (p.name, f)
                seen += 1
            elif f["severity"] == "error" and f.get("code") in rules.CODE_REMEDY:
                raise AssertionError(f"{p.name}: {f['code']} without a remedy")
    assert seen >= 60


def test_single_rank_communicators_on_several_hosts_are_no_mpi_runs() -> None:
    lines = ["#       size         count      type   redop    root     time   algbw   busbw "
             "#wrong     time   algbw   busbw #wrong",
             "hostA:11:12 [0] NCCL INFO comm 0x1 rank 0 nranks 1 cudaDev 0 busId 1b000 - Init "
             "COMPLETE",
             "hostB:21:22 [0] NCCL INFO comm 0x2 rank 0 nranks 1 cudaDev 0 busId 1b000 - Init "
             "COMPLETE",
             "     1048576        262144     float     sum      -1   10.0   104.86    0.00      0"
             "   10.0   104.86    0.00      0"]
    r = explain_stream(lines)
    assert r["kind"] == "nccl_tests"
    assert r["findings"][0]["code"] == "tests_no_mpi" and "2 hosts" in r["findings"][0]["message"]


@pytest.mark.parametrize(("line", "text"), [
    ("NCCL WARN NET/IB : mlx5_0:1 async non-fatal event: port error", "flapping link"),
    ("NCCL WARN NET/IB : mlx5_0:1 async fatal event: local catastrophic error", "failing HCA"),
    ("NCCL WARN NET/IB : mlx5_0:1 async fatal event on CQ (0x1): CQ error", "CQ error"),
])
def test_async_event_shapes_of_newer_nccl(line: str, text: str) -> None:
    hit = rules.match(line, "nccl")
    assert hit is not None and text in rules.diagnosis(*hit, line).cause


@pytest.mark.parametrize("line", [
    "h:1:2 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'",
    "h:1:2 [3] include/alloc.h:185 NCCL WARN Failed to CUDA calloc 6291456 bytes",
    "h:1:2 [0] include/alloc.h:125 NCCL WARN Cuda failure 2 'out of memory'",  # 2.19+
])
def test_cuda_oom_under_nccl(line: str) -> None:
    hit = rules.match(line, "nccl")
    assert hit is not None and hit[0].code == "cuda_oom"


def test_a_lost_peer_follows_the_oom_that_ended_it() -> None:
    r = explain_stream([
        "a:1:2 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote "
        "peer b<51159>",
        "a:1:3 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'"])
    errors = [f["code"] for f in r["findings"] if f["severity"] == "error"]
    assert errors == ["cuda_oom", "peer_lost"]
    assert any("first failure in this text (cuda_oom)" in f["message"] for f in r["findings"])


def test_a_lost_peer_alone_stays_the_first_failure() -> None:
    r = explain_stream([
        "a:1:2 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote "
        "peer b<51159>",
        "a:1:2 [0] proxy.cc:1143 NCCL WARN Socket recv failed while polling for opId=0x5"])
    assert next(f["code"] for f in r["findings"] if f["severity"] == "error") == "peer_lost"


@pytest.mark.parametrize(("line", "cause"), [
    ("[  259.700000] NETDEV WATCHDOG: eth0 (ethoc): transmit queue 0 timed out",
     "eth0: transmit queue 0 timed out"),
    ("Dec  4 17:21:16 gpu01 kernel: NETDEV WATCHDOG: ens1f0np0 (mlx5_core): transmit queue 12 "
     "timed out", "ens1f0np0: transmit queue 12 timed out"),
    ("[ 7555.219803] mlx5_core 0000:3b:00.0 ens1f0np0: NETDEV WATCHDOG: CPU: 5: transmit queue 7 "
     "timed out 10430 ms", "ens1f0np0: transmit queue 7 timed out"),  # kernel 6.8+
])
def test_netdev_watchdog_names_the_interface(line: str, cause: str) -> None:
    found = rules.diagnose([line], "kernel")
    assert [d.code for d in found] == ["tx_timeout"] and found[0].cause.startswith(cause)


ROW = ("{:>12}  {:>12}     float     sum      -1    27691    4.85    4.85      0    27634"
       "    4.86    4.86      0")


def test_sizes_restarting_under_a_new_root_are_not_interleaved_runs() -> None:
    """broadcast_perf -r all prints every size again for each root: not two runs."""
    lines = ["#       size         count      type   redop    root     time   algbw   busbw "
             "#wrong     time   algbw   busbw #wrong"]
    for root in ("0", "1"):
        for size in (1024, 2048):
            lines.append(ROW.format(size, size // 4).replace("   -1 ", f"    {root} "))
    r = explain_stream(lines)
    assert r["kind"] == "nccl_tests" and len(r["rows"]) == 4
    assert not any(f.get("code") == "tests_no_mpi" for f in r["findings"])


def test_a_size_printed_twice_in_one_table_is_interleaved_runs() -> None:
    lines = [ROW.format(1024, 256), ROW.format(1024, 256), ROW.format(2048, 512)]
    r = explain_stream(lines)
    assert any(f.get("code") == "tests_no_mpi" for f in r["findings"])


@pytest.mark.parametrize(("line", "code", "text"), [
    ("h:1:2 [0] misc/shmutils.cc:88 NCCL WARN Error: failed to extend /dev/shm/nccl-WU88OE to "
     "9637892 bytes, error: No space left on device (28)", "shm_create", "full or too small"),
    ("h:1:2 [1] misc/shmutils.cc:114 NCCL WARN Error while creating shared memory segment "
     "/dev/shm/nccl-NzwJ7O (size 9637888)", "shm_create", "could not create"),
    ("g148:1:2 [0] misc/shmutils.cc:129 NCCL WARN Error while attaching to shared memory segment "
     "/dev/shm/nccl-glnlGK (size 14156128), error: No such file or directory (2)", "shm_attach",
     "could not open"),
])
def test_shared_memory_failures(line: str, code: str, text: str) -> None:
    hit = rules.match(line, "nccl")
    assert hit is not None and hit[0].code == code
    assert text in rules.diagnosis(*hit, line).cause


def test_wrong_socket_type_is_a_network_mismatch() -> None:
    line = "node2:1:2 [0] misc/socket.cc:538 NCCL WARN socketFinalizeAccept: wrong type 3 != 4"
    hit = rules.match(line, "nccl")
    assert hit is not None and hit[0].code == "network_mismatch"


def test_one_network_is_no_mismatch() -> None:
    r = explain_stream(["a:1:2 [0] NCCL INFO Using network IB",
                        "b:1:2 [0] NCCL INFO Using network IB"])
    assert not any(f.get("code") == "network_mismatch" for f in r["findings"])


def test_an_unlisted_warn_whose_call_failed_is_an_error() -> None:
    r = explain_stream([
        "h:1:2 [1] misc/foo.cc:12 NCCL WARN Something NCCL says went wrong",
        "h:1:2 [1] NCCL INFO init.cc:1143 -> 3",
        "h:1:3 [0] misc/bar.cc:7 NCCL WARN A notice with no failed call",
        "h:1:3 [0] NCCL INFO Setting affinity for GPU 0 to ffff"])
    errs = [f for f in r["findings"] if f["severity"] == "error"]
    assert len(errs) == 1 and "ncclInternalError" in errs[0]["message"]
    assert any(f["severity"] == "warning" and "A notice" in f["message"] for f in r["findings"])
    assert r["errors"][0]["returned"] == 3 and "returned" not in r["errors"][1]


def test_in_progress_is_not_a_failure() -> None:
    r = explain_stream(["h:1:2 [1] misc/foo.cc:12 NCCL WARN Something",
                        "h:1:2 [1] NCCL INFO x.cc:1 -> 7"])
    assert not any(f["severity"] == "error" for f in r["findings"])


def test_ras_errors_section_is_an_error_and_table_rows_stay_rows() -> None:
    r = explain_stream(["NCCL version 2.27.3 compiled with CUDA 12.9", "Errors", "======",
                        "#0-0 (0123abcd) INCOMPLETE", "  Missing communicator data from 1 rank",
                        "Warnings", "========"])
    assert [f["severity"] for f in r["findings"] if f.get("code") == "ras_report"] == ["error"]
    t = explain_stream(["#       size         count      type   redop    root     time   algbw"
                        "   busbw #wrong     time   algbw   busbw #wrong",
                        "  1073741824     268435456     float     sum      -1   9306.7  115.37"
                        "  115.37      0   9291.5  115.56  115.56      0"])
    assert len(t["rows"]) == 1
