"""The NCCL log parser's streaming API and the line shapes of several NCCL versions."""

from __future__ import annotations

import pytest

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


# Line shapes below are the real 2.2x formats quoted in NVIDIA/nccl#2013 and NVIDIA/nccl#769,
# with addresses filled in; the fixtures under tests/fixtures/explain hold the pastes.
def test_modify_qp_new_format_fields_and_link_local_gid() -> None:
    r = parse_nccl_log([
        "h1:7:9 [5] ibvwrap.c:262 NCCL WARN Call to ibv_modify_qp failed with 110 Connection "
        "timed out, on dev mlx5_2:1, curr state INIT, next state RTR, local GID index 1, "
        "local GID fe80::ac0:ebff:feda:1cfb, remote GID fe80::ac0:ebff:feda:1d20\n"])
    e = r.errors[0]
    assert (e.verb, e.errno, e.errno_text, e.qp_state, e.gid_index, e.local_gid, e.host) == \
        ("ibv_modify_qp", 110, "Connection timed out", "RTR", 1, "fe80::ac0:ebff:feda:1cfb", "h1")
    f = next(f for f in r.findings if f.message.startswith("ibv_modify_qp"))
    assert "link-local" in (f.hint or "") and "NCCL_IB_GID_INDEX" in (f.hint or "")


def test_last_error_line_is_classified_and_attached() -> None:
    r = parse_nccl_log([
        "[rank3]: torch.distributed.DistBackendError: NCCL error in: x.cpp:1, remote process "
        "exited or there was a network error, NCCL version 2.21.5\n",
        "[rank3]: Last error:\n",
        "[rank3]: socketProgressOpt: Call to recv from 10.0.0.7<33759> failed : Connection reset "
        "by peer\n"])
    kinds = [e.kind for e in r.errors]
    assert kinds == ["remote_error", "peer_lost"]
    assert r.errors[0].rank == 3 and r.errors[1].peer == "10.0.0.7"
    assert r.errors[0].detail and "Connection reset by peer" in r.errors[0].detail
    assert r.nccl_version == "2.21.5"


def test_last_error_inside_a_json_line_does_not_swallow_the_next_line() -> None:
    r = parse_nccl_log(['{"detail": "ncclInvalidUsage.\\nLast error:\\nDuplicate GPU"}\n',
                        "[W1203 ProcessGroupNCCL.cpp:1575] Warning: WARNING: destroy_process_group"
                        "() was not called\n"])
    assert r.errors == []


def test_watchdog_names_first_silent_and_lagging_ranks() -> None:
    def wd(rank: int, t: str) -> str:
        return (f"[rank{rank}]:[E626 {t} ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught "
                "collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=1, "
                "NumelOut=1, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.\n")

    def done(rank: int, n: int) -> str:
        return (f"[rank{rank}]:[E626 06:24:44.9 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0("
                f"default_pg) Rank {rank}] Exception (either an error or timeout) detected by "
                f"watchdog at work: 808, last enqueued NCCL work: 811, last completed NCCL work: "
                f"{n}.\n")
    r = parse_nccl_log([wd(1, "06:24:44.903"), done(1, 807), wd(0, "06:24:44.159"), done(0, 807),
                        wd(2, "06:24:44.173"), done(2, 806), "[rank3]: Traceback (most recent "
                        "call last):\n"])
    w = r.watchdog
    assert w is not None
    assert (w["ranks_timed_out"], w["first"], w["silent_ranks"], w["behind"]) == \
        ([0, 1, 2], {"rank": 0, "time": "06:24:44.159"}, [3], [2])
    msgs = " | ".join(f.message for f in r.findings)
    assert "first to report: rank 0 at 06:24:44.159" in msgs
    assert "no timeout report: 3" in msgs and "rank(s) 2 are behind" in msgs


def test_feed_other_routes_only_log_lines() -> None:
    p = NcclLogParser()
    assert p.feed_other("[r0]:ncclSocketInit: connecting to address  with family 0 is neither "
                        "AF_INET(2) nor AF_INET6(10)\n")
    assert not p.feed_other("   8    2   float   sum   -1   10.1   0.00   0.00   0\n")
    r = p.finish()
    assert r.lines == 2 and [e.kind for e in r.errors] == ["no_interface"]


def test_libibverbs_warnings_in_a_log() -> None:
    # Line texts from NVIDIA/nccl#1044 (a driver not installed, harmless) and
    # k8snetworkplumbingwg/sriov-cni#348 (the image's provider does not match the kernel ABI).
    harmless = parse_nccl_log([
        "libibverbs: Warning: couldn't load driver 'libipathverbs-rdmav25.so': "
        "libipathverbs-rdmav25.so: cannot open shared object file: No such file or directory\n",
        "n1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:10.0.0.1<0>\n"])
    f = [x for x in harmless.findings if "provider" in x.message]
    assert [(x.severity, x.code) for x in f] == [("info", None)]
    abi = parse_nccl_log([
        "libibverbs: Warning: Driver bnxt_re does not support the kernel ABI of 6 (supports 1 "
        "to 1) for device /sys/class/infiniband/bnxt_re2\n",
        "n1:1:1 [0] NCCL INFO NET/IB : No device found.\n"])
    assert any(x.code == "verbs_provider_abi" and x.severity == "error" for x in abi.findings)


def test_nccl_2_30_env_warning_is_reported_in_nccls_words() -> None:
    # The INFO text NCCL 2.30 prints (src/param/c_api.cc) for a deprecated parameter.
    r = parse_nccl_log([
        "n1:1:1 [0] NCCL INFO NCCL version 2.30.7+cuda13.0\n",
        "n1:1:1 [0] NCCL INFO Warning: ENV NCCL_CHECK_POINTERS is deprecated. It may be removed "
        "or become unused in future versions.\n",
        "n1:1:1 [0] NCCL INFO NCCL_CHECK_POINTERS set by environment to 1.\n"])
    says = [f for f in r.findings if f.code == "env_nccl_says"]
    assert [f.message for f in says] == ["NCCL says NCCL_CHECK_POINTERS is deprecated"]
    assert "NCCL_CHECK_MODE=DEBUG_LOCAL" in (says[0].hint or "")
    # Said once, by NCCL: the lint does not repeat it.
    assert not any(f.code == "env_deprecated" for f in r.findings)


def test_link_local_bootstrap_address() -> None:
    # uccl-project/uccl#1034: bootstrap picked a 169.254.3.1 link-local NIC on GH200.
    r = parse_nccl_log(["gh1:5:5 [0] NCCL INFO Bootstrap: Using enP5p1s0:169.254.3.1<0>\n",
                        "gh1:5:5 [0] NCCL INFO Bootstrap: Using enP5p1s0:169.254.3.1<0>\n"])
    assert r.oob_interface == "enP5p1s0"
    assert [f.code for f in r.findings if f.code] == ["link_local_address"]


# ----- the net plugin, as each NCCL version says it (issue 38) ---------------------------------
# src/net.cc (2.18-2.22), src/plugin/plugin_open.cc and src/plugin/net.cc (2.23+); the HPC-X
# lines are NVIDIA/nccl#1357's; the 2.28.9 lines are the H200 capture in tests/fixtures/nccl.

def _state(*msgs: str) -> tuple[str | None, str | None]:
    r = parse_nccl_log([f"h:1:1 [0] NCCL INFO {m}\n" for m in msgs])
    return r.net_plugin_state, r.fallback_cause


@pytest.mark.parametrize("msgs, state", [
    (("NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open "
      "shared object file: No such file or directory",
      "NET/Plugin : No plugin found, using internal implementation"), "internal"),
    (("NET/Plugin: No plugin found (libnccl-net.so)",
      "NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No "
      "such file or directory : when loading libnccl-net.so",
      "NET/Plugin: Using internal network plugin."), "internal"),
    (("NET/Plugin : Plugin load returned 17 : libnccl-net.so: cannot open shared object file: "
      "No such file or directory.",), "internal"),
    (("NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",), "internal"),
    (("NET/Plugin: Could not find: libnccl-net.so", "Assigned NET plugin Socket to comm"),
     "internal"),
    (("NET/Plugin: Failed to find ncclNetPlugin_v8 symbol.",
      "NET/Plugin: Loaded net plugin NCCL RDMA Plugin v6 (v6)",
      "Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so",
      "P2P plugin IBext"), "loaded"),
    (("Successfully loaded external network plugin /usr/lib/libnccl-net.so",
      "Failed to initialize NET plugin gIB", "Assigned NET plugin IB to comm"), "internal"),
    (("NET/Plugin: Failed to find ncclNetPlugin symbol (>= v5). ncclNetPlugin symbols v4 and "
      "lower are not supported.",), "failed"),
    (("Using network IB",), None),
])
def test_net_plugin_state_in_each_versions_words(msgs: tuple[str, ...], state: str | None) -> None:
    assert _state(*msgs)[0] == state


def test_no_plugin_found_with_a_socket_fallback_is_no_plugin_failure() -> None:
    _, cause = _state("NET/Plugin : No plugin found, using internal implementation",
                      "NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: "
                      "cannot open shared object file: No such file or directory",
                      "NET/Socket : Using [0]eth0:10.0.0.2<0>", "Using network Socket")
    assert cause == "not stated in the log"
    _, cause = _state("NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
                      "Failed to open libibverbs.so[.1]",
                      "NET/Socket : Using [0]eth0:10.0.0.2<0>", "Using network Socket")
    assert cause == "libibverbs could not be loaded"
