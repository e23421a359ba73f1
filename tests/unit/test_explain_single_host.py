"""A run whose ranks all sit on one host needs no network: Socket there is not a fault."""

from __future__ import annotations

from pathlib import Path

import pytest

from rdmaprov.explain import explain_stream

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "explain"
HEAD = "h1:1:2 [0] NCCL INFO "
NO_IB = [HEAD + "NET/IB : No device found.", HEAD + "NET/Socket : Using [0]eth0:10.0.0.1<0>",
         HEAD + "Using network Socket"]


def comm(nodes: int) -> str:
    return (HEAD + f"comm 0x55 rank 0 nRanks {2 * nodes} nNodes {nodes} localRanks 2 "
            "localRank 0 MNNVL 0")


@pytest.mark.parametrize("name", ["nccl_pyremote_v2.27.5_single_host_socket.log",
                                  "nccl_606_v2.11.4_one_host_device_list.log"])
def test_one_host_fixture_has_nothing_wrong(name: str) -> None:
    with open(FIXTURES / name, encoding="utf-8") as fh:
        r = explain_stream(fh)
    assert [f["code"] for f in r["findings"] if f["severity"] != "info"] == ["socket_fallback"]
    assert not any(f["severity"] == "error" for f in r["findings"])


def test_nnodes_one_is_not_a_fallback_error() -> None:
    r = explain_stream([*NO_IB, comm(1)])
    assert r["single_host"] and r["nodes"] == 1 and r["ranks"] == 2
    assert not any(f["severity"] == "error" for f in r["findings"])


@pytest.mark.parametrize("extra", [
    [comm(2)],                                                     # NCCL says two nodes
    [comm(1), comm(2)],                                            # one of the comms spans two
    [comm(1), HEAD + "Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0"],  # net was used
    [comm(1), "h2:1:2 [0] NCCL INFO Using network Socket"],        # a second host logs
    [],                                                            # nothing says one host
])
def test_socket_fallback_stays_an_error_without_proof_of_one_host(extra: list[str]) -> None:
    r = explain_stream([*NO_IB, *extra])
    assert not r["single_host"]
    assert any(f["severity"] == "error" and f.get("code") == "socket_fallback"
               for f in r["findings"])


def test_loopback_on_one_host_is_fine() -> None:
    lines = [HEAD + "Bootstrap : Using lo:127.0.0.1<0>", *NO_IB[:1],
             HEAD + "NET/Socket : Using [0]lo:127.0.0.1<0>", NO_IB[2], comm(1)]
    r = explain_stream(lines)
    assert r["oob_interface"] == "lo"
    assert not any(f["severity"] == "error" for f in r["findings"])


def test_nccl_tests_device_list_on_two_hosts_is_not_one_host() -> None:
    lines = ["# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5",
             "#  Rank  0 Group  0 Pid  11 on  nodeA device  0 [0x07] NVIDIA A100-SXM4-80GB",
             "#  Rank  1 Group  0 Pid  12 on  nodeB device  0 [0x07] NVIDIA A100-SXM4-80GB",
             *NO_IB]
    r = explain_stream(lines)
    assert not (r.get("nccl_log") or r).get("single_host")


def test_docker_bridge_address_on_one_host_is_not_reported() -> None:
    lines = [HEAD + "Bootstrap : Using eth0:172.17.0.2<0>", NO_IB[0],
             HEAD + "NET/Socket : Using [0]eth0:172.17.0.2<0>", NO_IB[2]]
    assert any(f.get("code") == "docker_bridge" for f in explain_stream(lines)["findings"])
    assert not any(f.get("code") == "docker_bridge"
                   for f in explain_stream([*lines, comm(1)])["findings"])
