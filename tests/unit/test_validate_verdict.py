"""Verdicts from worker documents, NCCL log reports and rdma facts."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from rdmaprov.validate import verdict as v

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"

# What NCCL 2.28.9 said on the H200 machine (h200-nccl2.28.9-1rank-socket-fallback.log:
# `NET/IB : No device found.` ... `Using network Socket`), in the shape of the NCCL log parser's
# report (NcclLogReport.to_dict()), so that the verdict is tested on the real case.
SOCKET_REPORT = {
    "network": "Socket",
    "fallback_to_socket": True,
    "fallback_cause": "NET/IB : No device found",
    "hcas": [],
    "gdr": "disabled",
    "gdr_reason": "no RDMA network (Socket)",
    "nccl_version": "2.28.9",
}


def ib_report(*hcas, gdr="enabled", gdr_reason=None):
    return {"network": "IB", "fallback_to_socket": False, "gdr": gdr, "gdr_reason": gdr_reason,
            "nccl_version": "2.21.5",
            "hcas": [{"device": n, "port": 1, "link_layer": "IB"} for n in hcas]}


def facts(*ports, uverbs=True):
    """ports: (device, rate_gbps, state)."""
    devices: dict[str, list] = {}
    for dev, rate, state in ports:
        devices.setdefault(dev, []).append(
            {"port": len(devices.get(dev, [])) + 1, "state": state, "rate_gbps": rate,
             "link_layer": "InfiniBand"})
    return {"rdma": {"kernel": {"uverbs": uverbs, "reason": None if uverbs else
                                "no /sys/class/infiniband_verbs: the kernel has no RDMA"},
                     "devices": [{"name": d, "ports": p} for d, p in devices.items()]}}


def worker_doc(hosts, busbw_peak, world_size=None, backend="nccl"):
    world = world_size or len(hosts)
    return {"schema": "rdmaprov.validate.worker/1", "ok": True, "error": None,
            "backend": backend, "world_size": world, "hosts": list(hosts),
            "results": [{"bytes": 1 << 20, "algbw_GBps": 1.0, "busbw_GBps": busbw_peak / 10,
                         "correct": True},
                        {"bytes": 1 << 30, "algbw_GBps": 1.0, "busbw_GBps": busbw_peak,
                         "correct": True}]}


@pytest.fixture
def h200_doc():
    return json.loads((FIXTURES / "h200-nccl2.28.9-1rank-socket-fallback.worker.json").read_text())


# --- the GPU proof: the real single-H200 run -------------------------------------------------

def test_h200_socket_fallback_fails_when_ib_required(h200_doc):
    res = v.fabric_verdict(h200_doc, {"vm": SOCKET_REPORT})
    assert not res.passed
    assert res.reasons == ["vm: NCCL fell back to Socket (NET/IB : No device found)"]
    bw = next(c for c in res.checks if c.name == "bandwidth")
    assert bw.status == v.SKIP and "1 rank" in bw.reason


def test_h200_socket_fallback_passes_when_socket_allowed(h200_doc):
    res = v.fabric_verdict(h200_doc, {"vm": SOCKET_REPORT}, policy=v.Policy(allow_socket=True))
    assert res.passed, res.reasons
    transport = res.hosts[0].checks[0]
    assert transport.status == v.PASS and "fell back to Socket" in transport.reason


def test_h200_doc_is_what_the_worker_printed(h200_doc):
    assert h200_doc["backend"] == "nccl" and h200_doc["world_size"] == 1
    assert h200_doc["versions"]["nccl"] == "2.28.9"
    assert h200_doc["ranks"][0]["device"] == "NVIDIA H200"
    assert all(r["busbw_GBps"] == 0.0 for r in h200_doc["results"])


def test_real_log_through_the_parser(h200_doc):
    # The whole chain on the real run: NCCL's log -> parser -> verdict.
    nccl_log = pytest.importorskip("rdmaprov.parsers.nccl_log")
    log = FIXTURES / "h200-nccl2.28.9-1rank-socket-fallback.log"
    with log.open() as lines:
        report = nccl_log.parse_nccl_log(lines)
    failed = v.fabric_verdict(h200_doc, {"vm": report})
    assert not failed.passed
    assert failed.reasons == ["vm: NCCL fell back to Socket (NET/IB : No device found)"]
    assert v.fabric_verdict(h200_doc, {"vm": report}, policy=v.Policy(allow_socket=True)).passed


def test_fallback_without_a_cause_still_named():
    rep = {"network": "Socket", "fallback_to_socket": True, "hcas": []}
    chk = v.check_transport("nccl", rep, v.Policy())
    assert (chk.status, chk.reason) == (v.FAIL, "NCCL fell back to Socket")


# --- transport -----------------------------------------------------------------------------

@pytest.mark.parametrize("network", ["IB", "IBext", "IBext_v8"])
def test_ib_and_ib_plugins_pass(network):
    rep = ib_report("mlx5_0") | {"network": network}
    chk = v.check_transport("nccl", rep, v.Policy())
    assert chk.status == v.PASS and "mlx5_0:1/IB" in chk.reason


def test_other_net_plugin_fails_when_ib_required():
    rep = {"network": "AWS Libfabric", "fallback_to_socket": False}
    assert v.check_transport("nccl", rep, v.Policy()).status == v.FAIL
    assert v.check_transport("nccl", rep, v.Policy(transport="Socket")).status == v.PASS


def test_missing_log_or_network_is_a_failure_not_a_pass():
    assert v.check_transport("nccl", None, v.Policy()).status == v.FAIL
    chk = v.check_transport("nccl", {"network": None}, v.Policy())
    assert chk.status == v.FAIL and "NCCL_DEBUG=INFO" in chk.reason


def test_gloo_is_tcp():
    assert v.check_transport("gloo", None, v.Policy()).status == v.PASS
    chk = v.check_transport("gloo", None, v.Policy(transport="IB"))
    assert chk.status == v.FAIL and "cannot use IB" in chk.reason


def test_report_may_be_an_object():
    class Report:
        network = "Socket"
        fallback_to_socket = True
        hcas = ()
        gdr = None

    assert v.check_transport("nccl", Report(), v.Policy()).status == v.FAIL


# --- GDR and ports -------------------------------------------------------------------------

@pytest.mark.parametrize(("gdr", "status"), [("enabled", v.PASS), (True, v.PASS),
                                             ("disabled", v.FAIL), (False, v.FAIL),
                                             ("unknown", v.FAIL), (None, v.FAIL)])
def test_gdr_when_required(gdr, status):
    assert v.check_gdr("nccl", ib_report("mlx5_0", gdr=gdr), v.Policy(require_gdr=True)).status \
        == status


def test_gdr_off_names_nccls_reason():
    rep = ib_report("mlx5_0", gdr="disabled", gdr_reason="nvidia_peermem not loaded")
    chk = v.check_gdr("nccl", rep, v.Policy(require_gdr=True))
    assert chk.reason == ("GPUDirect RDMA off: NCCL copies through host memory "
                          "(nvidia_peermem not loaded)")


def test_gdr_not_required_is_skipped():
    assert v.check_gdr("nccl", ib_report("mlx5_0", gdr="disabled"), v.Policy()).status == v.SKIP


def test_ports_no_uverbs_names_the_kernel():
    chk = v.check_ports("nccl", facts(uverbs=False), v.Policy())
    assert chk.status == v.FAIL
    assert chk.reason == "no /sys/class/infiniband_verbs: the kernel has no RDMA"


def test_ports_none_active():
    chk = v.check_ports("nccl", facts(("mlx5_0", 400, "DOWN")), v.Policy())
    assert (chk.status, chk.reason) == (v.FAIL, "no ACTIVE RDMA port on this host")


def test_ports_active_listed():
    chk = v.check_ports("nccl", facts(("mlx5_0", 400, "ACTIVE")), v.Policy())
    assert chk.status == v.PASS and "mlx5_0:1 400 Gb/s" in chk.reason


# --- thresholds ----------------------------------------------------------------------------

def test_line_rate_sums_the_active_ports_nccl_named_in_GBps():
    f = facts(("mlx5_0", 400, "ACTIVE"), ("mlx5_1", 400, "ACTIVE"), ("mlx5_2", 400, "DOWN"))
    assert v.line_rate_GBps(f, ib_report("mlx5_0", "mlx5_1", "mlx5_2")) == 100.0
    # No NIC in the host's own log: unknown, never the sum of every ACTIVE port.
    assert v.line_rate_GBps(f) is None


def test_line_rate_narrowed_to_hcas_nccl_used():
    f = facts(("mlx5_0", 400, "ACTIVE"), ("mlx5_1", 400, "ACTIVE"))
    assert v.line_rate_GBps(f, ib_report("mlx5_1")) == 50.0
    # NCCL names an HCA the facts do not know: that one NIC, at the host's port rate.
    assert v.line_rate_GBps(f, ib_report("mlx5_9")) == 50.0


@pytest.mark.parametrize(("rate_gbps", "busbw", "status"), [
    (200, 24.0, v.PASS),   # healthy HDR
    (200, 12.0, v.FAIL),   # HDR link trained down to half
    (400, 48.0, v.PASS),   # healthy NDR
    (400, 39.9, v.FAIL),   # just under 0.8 x 50 GB/s
    (400, 40.0, v.PASS),   # exactly on the bar
])
def test_published_figures_against_default_fraction(rate_gbps, busbw, status):
    hosts = ["a", "b"]
    doc = worker_doc(hosts, busbw)
    f = {h: facts(("mlx5_0", rate_gbps, "ACTIVE")) for h in hosts}
    res = v.fabric_verdict(doc, {h: ib_report("mlx5_0") for h in hosts}, f)
    assert res.checks[-1].status == status, res.checks[-1].reason
    assert res.threshold_GBps == pytest.approx(0.8 * rate_gbps / 8)
    assert res.busbw_GBps == busbw


def test_slowest_host_sets_the_bar():
    doc = worker_doc(["a", "b"], 30.0)
    f = {"a": facts(("mlx5_0", 400, "ACTIVE")), "b": facts(("mlx5_0", 200, "ACTIVE"))}
    res = v.fabric_verdict(doc, {h: ib_report("mlx5_0") for h in "ab"}, f)
    assert res.threshold_GBps == 20.0 and res.checks[-1].status == v.PASS
    assert res.bar.source == "0.8 x 25.0 GB/s line rate of b (mlx5_0:1 200 Gb/s)"
    # The relative rule: b's port runs at half of a's, so b is named, not only the bar lowered.
    assert [h.passed for h in res.hosts] == [True, False]
    assert res.hosts[1].reasons == ["line rate 25.0 GB/s (mlx5_0:1 200 Gb/s) below the "
                                    "fabric's best 50.0 GB/s (a): a port trained down or "
                                    "missing?"]


def test_explicit_threshold_wins():
    doc = worker_doc(["a", "b"], 30.0)
    f = {h: facts(("mlx5_0", 400, "ACTIVE")) for h in "ab"}
    res = v.fabric_verdict(doc, {h: ib_report("mlx5_0") for h in "ab"}, f,
                           v.Policy(min_busbw_GBps=35.0))
    assert not res.passed
    assert res.reasons == ["busbw 30.0 GB/s below explicit 35.0 GB/s (--min-busbw)"]


def test_unknown_rate_is_reported_not_passed_silently():
    doc = worker_doc(["a", "b"], 30.0)
    res = v.fabric_verdict(doc, {h: ib_report("mlx5_0") for h in "ab"},
                           {"a": facts(("mlx5_0", 400, "ACTIVE"))})
    bw = res.checks[-1]
    assert bw.status == v.SKIP and "no line rate known" in bw.reason


def test_socket_run_is_not_judged_against_ib_rates():
    doc = worker_doc(["a", "b"], 1.0)
    f = {h: facts(("mlx5_0", 400, "ACTIVE")) for h in "ab"}
    res = v.fabric_verdict(doc, {h: SOCKET_REPORT for h in "ab"}, f, v.Policy(allow_socket=True))
    assert res.threshold_GBps is None and res.checks[-1].status == v.SKIP
    res = v.fabric_verdict(doc, {h: SOCKET_REPORT for h in "ab"}, f,
                           v.Policy(allow_socket=True, min_busbw_GBps=0.5))
    assert res.passed


def test_gloo_lab_run_with_explicit_threshold():
    doc = worker_doc(["node1", "node2", "node3"], 0.8, backend="gloo")
    assert v.fabric_verdict(doc, {}, policy=v.Policy(min_busbw_GBps=0.5)).passed
    slow = v.fabric_verdict(doc, {}, policy=v.Policy(min_busbw_GBps=1.0))
    assert not slow.passed and slow.reasons[0].startswith("busbw 0.8 GB/s below")


def test_one_bad_host_is_named():
    doc = worker_doc(["a", "b"], 45.0)
    f = {h: facts(("mlx5_0", 400, "ACTIVE")) for h in "ab"}
    res = v.fabric_verdict(doc, {"a": ib_report("mlx5_0"), "b": SOCKET_REPORT}, f)
    assert not res.passed
    assert res.reasons == ["b: NCCL fell back to Socket (NET/IB : No device found)"]
    assert [h.passed for h in res.hosts] == [True, False]


def test_host_verdict_with_its_own_measurement():
    f = facts(("mlx5_0", 200, "ACTIVE"))
    good = v.host_verdict("a", "nccl", ib_report("mlx5_0"), f, v.Policy(), busbw=23.5,
                          world_size=2)
    bad = v.host_verdict("a", "nccl", ib_report("mlx5_0"), f, v.Policy(), busbw=11.0,
                         world_size=2)
    assert good.passed and not bad.passed
    assert bad.reasons == ["busbw 11.0 GB/s below 0.8 x 25.0 GB/s line rate of a "
                           "(mlx5_0:1 200 Gb/s)"]


# --- worker failures and policy ------------------------------------------------------------

def test_failed_worker_fails_the_fabric():
    doc = json.loads((FIXTURES / "h200-nccl2.28.9-duplicate-gpu.rank0.worker.json").read_text())
    res = v.fabric_verdict(doc, {})
    assert not res.passed
    assert res.reasons[0] == ("worker failed: DistBackendError: Duplicate GPU detected : "
                              "rank 0 and rank 1 both on CUDA device 60")


def test_wrong_sum_fails(h200_doc):
    doc = copy.deepcopy(h200_doc)
    doc["ok"], doc["error"] = False, "all_reduce returned a wrong sum"
    assert not v.fabric_verdict(doc, {"vm": SOCKET_REPORT}, policy=v.Policy(allow_socket=True)
                                ).passed


@pytest.mark.parametrize("kwargs", [{"transport": "RoCE"}, {"bw_fraction": 0},
                                    {"bw_fraction": 1.5}, {"min_busbw_GBps": -1}])
def test_policy_rejects_nonsense(kwargs):
    with pytest.raises(ValueError):
        v.Policy(**kwargs)


def test_to_dict_is_json():
    doc = worker_doc(["a", "b"], 45.0)
    res = v.fabric_verdict(doc, {"a": ib_report("mlx5_0"), "b": SOCKET_REPORT})
    out = json.loads(json.dumps(res.to_dict()))
    assert out["passed"] is False and out["hosts"][1]["reasons"]


def test_preflight_cause_is_quoted_on_fallback(h200_doc):
    doc = copy.deepcopy(h200_doc)
    doc["preflight"] = {"vm": {"problems": ["no /dev/infiniband/uverbs*: RDMA devices not "
                                            "passed in (container: --device /dev/infiniband) "
                                            "or none on the host"]}}
    res = v.fabric_verdict(doc, {"vm": SOCKET_REPORT})
    assert res.reasons == ["vm: NCCL fell back to Socket (NET/IB : No device found); pre-flight: "
                           "no /dev/infiniband/uverbs*: RDMA devices not passed in (container: "
                           "--device /dev/infiniband) or none on the host"]
    # Allowed fallback: the causes are not failures.
    assert v.fabric_verdict(doc, {"vm": SOCKET_REPORT}, policy=v.Policy(allow_socket=True)).passed


def test_real_ib_disabled_run_names_the_variable_twice():
    # NCCL_IB_DISABLE=1 on the H200: NCCL's log and the worker's pre-flight both name it.
    nccl_log = pytest.importorskip("rdmaprov.parsers.nccl_log")
    base = "h200-nccl2.28.9-1rank-ib-disabled"
    doc = json.loads((FIXTURES / f"{base}.worker.json").read_text())
    with (FIXTURES / f"{base}.log").open() as lines:
        report = nccl_log.parse_nccl_log(lines)
    res = v.fabric_verdict(doc, {"vm": report})
    assert not res.passed
    (reason,) = res.reasons
    assert reason.startswith("vm: NCCL fell back to Socket (IB disabled by environment "
                             "(NCCL_IB_DISABLE=1)); pre-flight: ")
    assert reason.endswith("NCCL_IB_DISABLE=1 turns IB off")


def test_rail_rule_against_its_own_ports_rate():
    ok = v.rail_check("n1", "mlx5_3", 1, 92.4, 100.0)
    assert (ok.status, ok.reason) == (v.PASS, "rail n1 mlx5_3 port 1: ib_write_bw 92.4 Gb/s >= "
                                      "0.9 x 100 Gb/s port rate")
    slow = v.rail_check("n1", "mlx5_3", 1, 89.9, 100.0)
    assert slow.status == v.FAIL and "n1 mlx5_3 port 1" in slow.reason
    assert v.DEFAULT_RAIL_FRACTION == 0.9
    assert v.rail_check("n1", "mlx5_3", 1, 89.9, 100.0, fraction=0.8).status == v.PASS
    # A bidirectional test reports both directions: judged against twice the rate.
    assert v.rail_check("n1", "mlx5_3", 1, 185.0, 100.0, bidirectional=True).status == v.PASS
    assert v.rail_check("n1", "mlx5_3", 1, 120.0, 100.0, bidirectional=True).status == v.FAIL
    # Unknown figures are failures, never passes.
    assert v.rail_check("n1", "mlx5_3", 1, None, 100.0).status == v.FAIL
    assert v.rail_check("n1", "mlx5_3", 1, 92.4, None).status == v.FAIL
    with pytest.raises(ValueError, match="rail_fraction"):
        v.Policy(rail_fraction=0)


# ----- the rail round's blame: each end against all its partners (verdict.rail_blame) ---------
def _ring_figures(hosts, bad, hcas=("mlx5_0", "mlx5_3"), good=92.4, low=40.0, rate=100.0):
    """Each end's figures of the real rail plan (rounds.rail_plan) over ``hosts``: a pair is
    ``low`` when one of its ends' rail is in ``bad`` ((host, hca)), else ``good``."""
    from rdmaprov.validate import rounds as R

    ports = {h: [{"device": d, "port": 1, "state": "4: ACTIVE"} for d in hcas] for h in hosts}
    out = []
    for number, pairs in enumerate(R.rail_plan(hosts, ports).rounds, 1):
        for p in pairs:
            for (hca, port), (peer_hca, peer_port) in p.rails:
                bw = low if (p.client, hca) in bad or (p.server, peer_hca) in bad else good
                out.append(v.rail_figure(p.client, hca, port, bw, rate, partner=p.server,
                                         partner_rail=f"{peer_hca}:{peer_port}", round_=number))
                out.append(v.rail_figure(p.server, peer_hca, peer_port, bw, rate,
                                         partner=p.client, partner_rail=f"{hca}:{port}",
                                         round_=number))
    return out


def test_rail_blame_ring_of_four_fails_only_the_bad_rails_host():
    # Ring a-b-c-d: round 1 a-b, c-d; round 2 b-c, d-a. c's mlx5_3 is bad: its pairs with b
    # (round 2) and d (round 1) are low; b and d are fine with their other partner.
    b = v.rail_blame(_ring_figures(list("abcd"), {("c", "mlx5_3")}))
    assert b.rails == 8 and b.bad == 1
    assert list(b.failed) == ["c"]
    (why,) = b.failed["c"]
    assert why.startswith("rail c mlx5_3 port 1: below the bar with every partner (")
    assert "40 Gb/s with d mlx5_3:1 round 1" in why and "40 Gb/s with b mlx5_3:1 round 2" in why
    assert why.endswith("< 0.9 x 100 Gb/s port rate)")
    assert b.unexplained == []
    # The healthy partners: a note each, never a failure.
    assert sorted(b.notes) == ["b", "d"]
    assert b.notes["b"] == ["rail b mlx5_3 port 1: its pair with c mlx5_3:1 in round 2 was low "
                            "(40 Gb/s) because of the other end (below the bar with every "
                            "partner)"]
    # The same figures all good: nothing failed, nothing noted.
    ok = v.rail_blame(_ring_figures(list("abcd"), set()))
    assert (ok.failed, ok.notes, ok.unexplained, ok.bad) == ({}, {}, [], 0)


def test_rail_blame_judged_on_one_end_alone_would_fail_the_healthy_partner():
    """The false alarm this rule removes: each figure judged alone (rail_check, the layout of
    one file per rail) fails b and d too."""
    figures = _ring_figures(list("abcd"), {("c", "mlx5_3")})
    alone = {f.host for f in figures if f.check.status == v.FAIL}
    assert alone == {"b", "c", "d"}
    assert set(v.rail_blame(figures).failed) == {"c"}


def test_rail_blame_ring_of_three():
    # Round 1 a-b, round 2 b-c: b has two partners, a and c one each.
    mid = v.rail_blame(_ring_figures(list("abc"), {("b", "mlx5_3")}))
    assert list(mid.failed) == ["b"] and mid.unexplained == []
    assert "a" in mid.notes and "c" in mid.notes  # low because of b, not failed
    # The bad rail at an end of the ring: one partner only, not told apart; its partner b is
    # fine with c, so b is not failed; nobody is, and the run fails on the pair.
    end = v.rail_blame(_ring_figures(list("abc"), {("a", "mlx5_3")}))
    assert end.failed == {} and end.bad == 0
    assert end.unexplained == [
        "one of a mlx5_3:1 / b mlx5_3:1, not told apart with one partner (40 Gb/s in round 1; "
        "b mlx5_3:1 is fine with another partner)"]
    assert any("not told apart" in n for n in end.notes["a"])
    assert any("this end is fine with another partner" in n for n in end.notes["b"])


def test_rail_blame_two_hosts_cannot_tell_the_ends_apart():
    b = v.rail_blame(_ring_figures(["a", "b"], {("b", "mlx5_3")}))
    assert b.failed == {}
    assert b.unexplained == ["one of a mlx5_3:1 / b mlx5_3:1, not told apart with one partner "
                             "(40 Gb/s in round 1)"]
    assert sorted(b.notes) == ["a", "b"]


def test_rail_blame_both_ends_bad():
    # a and b (partners in round 1) both bad on mlx5_3: each is low with its other partner too
    # (d, c), which are fine elsewhere: both fail, c and d do not.
    b = v.rail_blame(_ring_figures(list("abcd"), {("a", "mlx5_3"), ("b", "mlx5_3")}))
    assert sorted(b.failed) == ["a", "b"] and b.bad == 2
    assert sorted(b.notes) == ["c", "d"]
    # a and c bad (never partners): every mlx5_3 pair is low, and the figures cannot tell
    # {a, c} from {b, d} or all four: no host is named (b and d would be false alarms), the run
    # fails on the pairs.
    ring = v.rail_blame(_ring_figures(list("abcd"), {("a", "mlx5_3"), ("c", "mlx5_3")}))
    assert ring.failed == {} and len(ring.unexplained) == 4
    assert all("not told apart" in u for u in ring.unexplained)


def test_rail_blame_a_failed_run_or_a_figure_without_its_pair_is_judged_alone():
    # ib_write_bw exited non-zero on b's side: b's failure, whatever its partners show.
    figures = _ring_figures(list("abcd"), set())
    figures = [v.rail_figure(f.host, f.hca, f.port, f.gbps, 100.0, failed="exit status 1",
                             partner=f.partner, partner_rail=f.partner_rail, round_=f.round)
               if (f.host, f.hca, f.round) == ("b", "mlx5_0", 1) else f for f in figures]
    b = v.rail_blame(figures)
    assert b.failed == {"b": ["rail b mlx5_0 port 1: ib_write_bw failed (exit status 1) after "
                              "92.4 Gb/s"]}
    # The layout before (no round, no partner): each file judged alone, a low one fails its host.
    old = v.rail_blame([v.rail_figure("a", "mlx5_0", 1, 92.4, 100.0),
                        v.rail_figure("b", "mlx5_0", 1, 40.0, 100.0)])
    assert old.failed == {"b": ["rail b mlx5_0 port 1: ib_write_bw 40 Gb/s < 0.9 x 100 Gb/s "
                                "port rate"]}
    assert old.rails == 2 and old.bad == 1
