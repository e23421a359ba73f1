"""The NCCL log parser's streaming API and the line shapes of several NCCL versions."""

from __future__ import annotations

from rdmaprov.parsers.nccl_log import NcclLogParser, parse_nccl_log

FALLBACK_2_28 = [
    "h200:1234:1234 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.5<0>\n",
    "h200:1234:1234 [0] NCCL INFO NCCL version 2.28.3+cuda12.9\n",
    "h200:1234:1240 [0] NCCL INFO NET/IB : No device found.\n",
    "h200:1234:1240 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>\n",
    "h200:1234:1240 [0] NCCL INFO Using network Socket\n",
]


def test_feed_line_by_line_equals_parse() -> None:
    p = NcclLogParser()
    for line in FALLBACK_2_28:
        p.feed(line)
    assert p.finish().to_dict() == parse_nccl_log(FALLBACK_2_28).to_dict()


def test_socket_fallback_report() -> None:
    r = parse_nccl_log(FALLBACK_2_28)
    assert (r.nccl_version, r.network, r.fallback_to_socket, r.oob_interface) == \
        ("2.28.3", "Socket", True, "eth0")
    assert r.fallback_cause == "NET/IB : No device found"
    assert r.findings[0].severity == "error"


def test_ib_with_gdrdma_and_prefixes() -> None:
    lines = [
        "[1,0]<stdout>:n1:10:20 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; "
        "OOB ib0:10.1.0.1<0>\r\n",
        "[1,0]<stdout>:n1:10:20 [0] NCCL INFO Using network IB\r\n",
        "[1,0]<stdout>:n1:10:20 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] "
        "via NET/IB/0/GDRDMA\r\n",
        "[1,1]<stdout>:n2:11:21 [0] NCCL INFO comm 0x1 rank 1 nranks 2 cudaDev 0 nvmlDev 0 "
        "- Init COMPLETE\r\n",
    ]
    r = parse_nccl_log(lines)
    assert r.network == "IB" and r.gdr == "enabled" and r.oob_interface == "ib0"
    assert r.hcas == [{"device": "mlx5_0", "port": 1, "link_layer": "IB"},
                      {"device": "mlx5_1", "port": 1, "link_layer": "IB"}]
    assert r.ranks == 2 and r.hosts == 2


def test_old_completion_error_format() -> None:
    r = parse_nccl_log(["n1:1:2 [0] transport/net_ib.cc:1098 NCCL WARN NET/IB : Got completion "
                        "with error 12, opcode 0, len 0, vendor err 129\n"])
    e = r.errors[0]
    assert (e.kind, e.status, e.vendor_err) == ("completion", 12, 129)


def test_same_error_from_many_ranks_is_counted_once_and_memory_is_capped() -> None:
    p = NcclLogParser()
    for rank in range(5000):
        p.feed(f"host{rank}:1:2 [0] misc/ibvwrap.cc:1 NCCL WARN Call to ibv_reg_mr failed "
               "with error Cannot allocate memory\n")
        p.feed(f"host{rank}:1:2 [0] misc/x.cc:1 NCCL WARN distinct problem number {rank}\n")
    r = p.finish()
    reg = [e for e in r.errors if e.verb == "ibv_reg_mr"]
    assert reg[0].count == 5000
    assert len(r.errors) <= 50
    assert any("memlock" in (f.hint or "") or "locked-memory" in (f.hint or "")
               for f in r.findings)


def test_ib_disabled_by_env_is_the_cause() -> None:
    r = parse_nccl_log([
        "a:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n",
        "a:1:1 [0] NCCL INFO NET/Socket : Using [0]ens5:10.0.0.2<0>\n",
        "a:1:1 [0] NCCL INFO Using network Socket\n"])
    assert r.fallback_to_socket and r.fallback_cause.startswith("IB disabled by environment")
    assert r.env == {"NCCL_IB_DISABLE": "1"}


def test_garbage_only_gives_empty_report() -> None:
    r = parse_nccl_log(["hello\n", "", "NCCL\n", "NCCL INFO\n", "x NCCL WARN \n"])
    assert r.network is None and r.gdr == "unknown" and not r.fallback_to_socket


# Real logs captured on the H200 device machine by the validate work (tests/fixtures/nccl/).
NCCL_FIX = __import__("pathlib").Path(__file__).resolve().parents[1] / "fixtures" / "nccl"


def test_real_h200_socket_fallback_log() -> None:
    with open(NCCL_FIX / "h200-nccl2.28.9-1rank-socket-fallback.log") as fh:
        r = parse_nccl_log(fh)
    assert (r.nccl_version, r.network, r.fallback_to_socket, r.oob_interface, r.ranks) == \
        ("2.28.9", "Socket", True, "eth0", 1)
    assert r.fallback_cause == "NET/IB : No device found" and r.hcas == []


def test_real_h200_duplicate_gpu_log() -> None:
    with open(NCCL_FIX / "h200-nccl2.28.9-duplicate-gpu.rank0.log") as fh:
        r = parse_nccl_log(fh)
    assert [e.kind for e in r.errors] == ["duplicate_gpu"]
    assert any(f.severity == "error" and "same GPU" in f.message for f in r.findings)
