"""rdmaprov.check: probes over a fake /sys + /proc tree, the judge's verdicts and reason line,
expectations (file + flags, bad values), and the Prometheus text."""

from __future__ import annotations

from pathlib import Path

import pytest

from rdmaprov import collection
from rdmaprov.check import expect, history, judge, output, probes
from rdmaprov.check.expect import Expectations
from rdmaprov.errors import UserError


def fake_node(root: Path, *, ports: list[tuple[str, int, str, str, str, str | None]] | None = None,
              modules: tuple[str, ...] = ("ib_core", "ib_uverbs", "rdma_ucm", "nvidia_peermem"),
              gpus: int = 2, mtus: dict[str, int] | None = None) -> Path:
    """A node's /sys and /proc as the kernel lays them out. ports: (dev, port, state, rate,
    link_layer, netdev)."""
    ports = ports if ports is not None else [
        ("mlx5_0", 1, "4: ACTIVE", "400 Gb/sec (4X NDR)", "InfiniBand", "ib0"),
        ("mlx5_1", 1, "4: ACTIVE", "400 Gb/sec (4X NDR)", "InfiniBand", "ib1")]
    (root / "proc").mkdir(parents=True, exist_ok=True)
    (root / "proc/modules").write_text("")
    if ports:
        (root / "sys/class/infiniband_verbs/uverbs0").mkdir(parents=True)
    for dev, port, state, rate, ll, netdev in ports:
        pdir = root / "sys/class/infiniband" / dev / "ports" / str(port)
        pdir.mkdir(parents=True)
        (pdir / "state").write_text(state + "\n")
        # drivers/infiniband/core/sysfs.c: an ACTIVE port's PHY is "5: LinkUp"; one without a
        # link partner keeps polling for it.
        (pdir / "phys_state").write_text("5: LinkUp\n" if "ACTIVE" in state else "2: Polling\n")
        (pdir / "rate").write_text(rate + "\n")
        (pdir / "link_layer").write_text(ll + "\n")
        if netdev:
            (root / "sys/class/infiniband" / dev / "device/net" / netdev).mkdir(parents=True)
    for name, mtu in (mtus or {"ib0": 4092, "ib1": 4092}).items():
        (root / "sys/class/net" / name).mkdir(parents=True, exist_ok=True)
        (root / "sys/class/net" / name / "mtu").write_text(f"{mtu}\n")
    for m in modules:
        (root / "sys/module" / m).mkdir(parents=True)
        (root / "sys/module" / m / "initstate").write_text("live\n")
    for i in range(gpus):
        g = root / f"proc/driver/nvidia/gpus/0000:{i:02x}:00.0"
        g.mkdir(parents=True)
        (g / "information").write_text("Model: \t\t NVIDIA H200\nIRQ: 1\n")
    return root


def state_of(root: Path, exp: Expectations | None = None) -> dict:
    return probes.gather(exp or Expectations(memlock="0"), str(root))


# -- probes -----------------------------------------------------------------------------------


def test_probes_read_ports_in_the_contract_shape(tmp_path: Path) -> None:
    s = state_of(fake_node(tmp_path))
    assert s["rdma"]["kernel"]["uverbs"] is True
    assert [d["name"] for d in s["rdma"]["devices"]] == ["mlx5_0", "mlx5_1"]
    port = s["rdma"]["devices"][0]["ports"][0]
    assert port == {"port": 1, "state": "ACTIVE", "phys_state": "LinkUp", "rate_gbps": 400,
                    "link_layer": "InfiniBand", "netdev": "ib0", "admin_down": False,
                    "lid": None}
    assert s["mtu"] == {"ib0": 4092, "ib1": 4092}
    assert s["gpus"]["count"] == 2 and s["gpus"]["models"] == ["NVIDIA H200"] * 2
    assert s["modules"]["nvidia_peermem"]["state"] == "loaded"
    assert s["modules"]["nv_peer_mem"]["state"] == "absent"


def test_probes_say_why_when_the_kernel_has_no_rdma(tmp_path: Path) -> None:
    s = state_of(fake_node(tmp_path, ports=[], modules=()))
    assert s["rdma"]["devices"] == []
    assert "infiniband_verbs" in s["rdma"]["kernel"]["reason"]


def test_probes_module_support_missing(tmp_path: Path) -> None:
    root = fake_node(tmp_path)
    (root / "proc/modules").unlink()
    assert "no /proc/modules" in probes.module_support(str(root))["reason"]


# -- judge ------------------------------------------------------------------------------------


def verdict(root: Path, **exp: object) -> tuple[list[judge.Item], str | None]:
    e = Expectations(**{"memlock": "0", **exp})  # type: ignore[arg-type]
    items = judge.judge(probes.gather(e, str(root)), e)
    return items, judge.reason(items)


def by_name(items: list[judge.Item]) -> dict[str, judge.Item]:
    return {i.name: i for i in items}


def test_healthy_node(tmp_path: Path) -> None:
    items, reason = verdict(fake_node(tmp_path), ports=2, rate=400, mtu=4092, gpus=2)
    assert reason is None, items
    assert by_name(items)["ports"].detail == "2 ACTIVE at 400 Gb/s"


def test_port_down_is_the_reason(tmp_path: Path) -> None:
    root = fake_node(tmp_path, ports=[
        ("mlx5_0", 1, "4: ACTIVE", "400 Gb/sec (4X NDR)", "InfiniBand", "ib0"),
        ("mlx5_1", 1, "1: DOWN", "10 Gb/sec (4X SDR)", "InfiniBand", "ib1")])
    _, reason = verdict(root, ports=2)
    assert reason == "[reset-link] 1 of 2 RDMA ports ACTIVE: mlx5_1/1 DOWN"


def test_slow_port(tmp_path: Path) -> None:
    root = fake_node(tmp_path, ports=[
        ("mlx5_0", 1, "4: ACTIVE", "200 Gb/sec (4X HDR)", "InfiniBand", "ib0")])
    _, reason = verdict(root, rate=400)
    assert reason == "[reset-link] mlx5_0/1 at 200 Gb/s, want 400 Gb/s"


def test_named_hca_missing(tmp_path: Path) -> None:
    _, reason = verdict(fake_node(tmp_path), hcas=["mlx5_7"])
    assert reason is not None and reason.startswith("[replace] HCA mlx5_7 not present")


def test_mtu_and_several_failures_in_one_line(tmp_path: Path) -> None:
    root = fake_node(tmp_path, modules=("ib_core", "ib_uverbs", "rdma_ucm"),
                     mtus={"ib0": 2044, "ib1": 4092})
    items, reason = verdict(root, mtu=4092)
    assert by_name(items)["mtu"].detail == "ib0 MTU 2044, want 4092"
    assert reason == "[config] ib0 MTU 2044, want 4092 (+1 more: gpudirect)"
    assert "\n" not in reason


def test_no_gpu_node_skips_gpu_and_gpudirect(tmp_path: Path) -> None:
    items, reason = verdict(fake_node(tmp_path, gpus=0, modules=("ib_core", "ib_uverbs",
                                                                "rdma_ucm")), gpus=0)
    assert reason is None
    assert by_name(items)["gpus"].status == "n/a" and by_name(items)["gpudirect"].status == "n/a"


def test_gpu_count(tmp_path: Path) -> None:
    _, reason = verdict(fake_node(tmp_path, gpus=7), gpus=8)
    assert reason == "[reboot] 7 of 8 GPUs visible"


def test_no_rdma_at_all_names_the_kernel_reason(tmp_path: Path) -> None:
    _, reason = verdict(fake_node(tmp_path, ports=[], modules=()))
    assert reason is not None
    assert reason.startswith("[config] no RDMA devices: no /sys/class/infiniband_verbs")


def test_mtu_expected_without_interface_is_a_failure(tmp_path: Path) -> None:
    root = fake_node(tmp_path, ports=[
        ("mlx5_0", 1, "4: ACTIVE", "400 Gb/sec (4X NDR)", "InfiniBand", None)], mtus={})
    items, _ = verdict(root, mtu=9000)
    assert by_name(items)["mtu"].status == "fail"


def qos_state(pfc: list[int] | None, trust: str | None = "dscp", capable: bool = True) -> dict:
    return {"name": "eth2", "capable": capable, "pfc": pfc, "trust": trust,
            "reason": None if capable else "eth2: dcb pfc show answers 'Operation not supported'"}


@pytest.mark.parametrize("state, status, detail", [
    (qos_state([0, 0, 0, 1, 0, 0, 0, 0]), "pass", "PFC on priority 3, trust dscp"),
    (qos_state([0, 0, 0, 0, 1, 0, 0, 0]), "fail", "eth2 PFC on priority 4"),
    (qos_state([0, 0, 0, 1, 0, 0, 0, 0], trust="pcp"), "fail", "eth2 trust pcp"),
    (qos_state(None, capable=False), "n/a", "not applicable: eth2: dcb pfc show"),
])
def test_qos(state: dict, status: str, detail: str) -> None:
    s = {"qos": {"eth2": state}}
    item = judge.check_qos(s, Expectations(pfc_priority=3))
    assert item.status == status and item.detail.startswith(detail), item


def test_memlock() -> None:
    assert judge.check_memlock({"memlock": None}, Expectations()).status == "pass"
    item = judge.check_memlock({"memlock": 64 * 1024}, Expectations())
    assert item.status == "fail" and item.detail.startswith("memlock 64 KiB, want unlimited")
    assert judge.check_memlock({"memlock": 64 * 1024}, Expectations(memlock="64")).status == "pass"


def test_reason_is_one_bounded_line() -> None:
    items = [judge.Item("a", "fail", 'x\n"y" ' * 100), judge.Item("b", "pass", "")]
    r = judge.reason(items)
    assert r is not None and "\n" not in r and '"' not in r and len(r) <= judge.REASON_MAX


# -- expectations -----------------------------------------------------------------------------


def test_config_file_and_flags(tmp_path: Path) -> None:
    cfg = tmp_path / "check.yml"
    cfg.write_text("ports: 8\nrate: 400\nmtu: 9000\ngpus: 8\n")
    exp = expect.build(cfg, {"mtu": "4092", "ports": None})
    assert (exp.ports, exp.rate, exp.mtu, exp.gpus) == (8, 400, 4092, 8)


@pytest.mark.parametrize("text, message", [
    ("mtu: 99999\n", "mtu: 99999 is not a valid MTU (68..9216)"),
    ("pfc_priority: 8\n", "pfc_priority: 8 is not a valid PFC priority (0..7)"),
    ("port: 4\n", "unknown key 'port' (did you mean ports?)"),
    ("rate: fast\n", "rate: 'fast' is not an integer"),
    ("- 1\n", "must be a mapping"),
    ("mtu: [\n", "not valid YAML"),
    ("memlock: lots\n", "is not 'unlimited' or a size in KiB"),
])
def test_bad_config(tmp_path: Path, text: str, message: str) -> None:
    cfg = tmp_path / "check.yml"
    cfg.write_text(text)
    with pytest.raises(UserError) as exc:
        expect.build(cfg, {})
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_bad_flag_names_the_flag() -> None:
    with pytest.raises(UserError) as exc:
        expect.build(None, {"pfc_priority": "9"})
    assert str(exc.value) == "--expect-pfc: 9 is not a valid PFC priority (0..7)"


# -- output -----------------------------------------------------------------------------------


def test_prometheus_text(tmp_path: Path) -> None:
    root = fake_node(tmp_path / "n", ports=[
        ("mlx5_0", 1, "4: ACTIVE", "400 Gb/sec (4X NDR)", "InfiniBand", "ib0"),
        ("mlx5_1", 1, "1: DOWN", "10 Gb/sec (4X SDR)", "InfiniBand", "ib1")])
    e = Expectations(memlock="0", ports=2)
    s = probes.gather(e, str(root))
    items = judge.judge(s, e)
    doc = output.document(items, judge.reason(items), s, e.as_dict(), 0.01)
    path = output.write_prometheus(doc, tmp_path)
    text = path.read_text()
    assert path.name == "rdmaprov_check.prom"
    assert "rdmaprov_check_healthy 0\n" in text
    assert 'rdmaprov_check_ok{check="ports"} 0\n' in text
    assert 'rdmaprov_check_ok{check="mtu"}' not in text  # n/a: left out
    assert 'rdmaprov_check_failed_remedy{check="ports",remedy="reset-link"} 1\n' in text
    assert ('rdmaprov_rdma_port_active{device="mlx5_1",port="1",link_layer="InfiniBand"} 0'
            in text)
    assert 'rdmaprov_rdma_port_rate_gbps{device="mlx5_0",port="1",link_layer="InfiniBand"} 400' \
        in text
    assert "rdmaprov_gpus_visible 2\n" in text
    assert not list(tmp_path.glob(".rdmaprov_check.*"))  # no temp file left behind


# -- the NCCL loopback line ------------------------------------------------------------------

NCCL_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"


def _loopback(stem: str) -> dict:
    """A real run's worker document and NCCL log (the H200, see the .source.md files)."""
    import json

    from rdmaprov.parsers.nccl_log import parse_nccl_log

    doc = json.loads((NCCL_FIXTURES / f"{stem}.worker.json").read_text())
    log = (NCCL_FIXTURES / f"{stem}.log").read_text().splitlines()
    return {"ok": bool(doc.get("ok")), "error": doc.get("error"), "doc": doc,
            "nccl": parse_nccl_log(log).to_dict()}


def test_one_rank_loopback_shows_no_bandwidth() -> None:
    from rdmaprov.check import nccl

    loop = _loopback("h200-nccl2.28.9-1rank-socket-fallback")
    assert loop["doc"]["world_size"] == 1
    item = nccl.check(loop, Expectations())
    assert item == judge.Item("nccl", "pass", "1 rank: no link measured, NCCL network Socket")
    item = nccl.check(loop, Expectations(nccl_min_busbw=20.0))
    assert item.status == "pass" and "GB/s" not in item.detail
    assert item.detail.endswith("(--nccl-min-busbw 20.0 needs 2+ GPUs)")


def test_two_rank_loopback_is_judged_on_busbw() -> None:
    from rdmaprov.check import nccl

    doc = {"ok": True, "world_size": 2, "results": [{"busbw_GBps": 180.5}, {"busbw_GBps": 0}]}
    loop = {"ok": True, "error": None, "doc": doc, "nccl": {"network": "IB"}}
    assert nccl.check(loop, Expectations()).detail == (
        "2 ranks, peak busbw 180.5 GB/s, NCCL network IB")
    bad = nccl.check(loop, Expectations(nccl_min_busbw=200.0))
    assert bad == judge.Item("nccl", "fail", "NCCL loopback busbw 180.5 GB/s, want >= 200.0",
                             remedy="investigate")


def test_every_failing_item_names_a_remedy_class(tmp_path: Path) -> None:
    from rdmaprov.remediation import ALL

    scenarios = [
        (fake_node(tmp_path / "a", ports=[], modules=(), gpus=0), {"gpus": 2, "mtu": 9000}),
        (fake_node(tmp_path / "b", mtus={"ib0": 1500, "ib1": 1500}),
         {"mtu": 4092, "ports": 3, "gpus": 4, "memlock": "unlimited", "hcas": ["mlx5_9"]}),
        (fake_node(tmp_path / "c", modules=("ib_core",)), {"rate": 800}),
        (fake_node(tmp_path / "d"), {"mtu": 4092, "interfaces": ["eth9"]}),
    ]
    seen = set()
    for root, exp in scenarios:
        items, _ = verdict(root, **exp)
        for i in items:
            if i.status == "fail":
                assert i.remedy in ALL, i
                seen.add(i.name)
    assert {"ports", "modules", "mtu", "gpus", "gpudirect"} <= seen, seen


# -- AER --------------------------------------------------------------------------------------


def test_parse_aer_reads_the_kernels_list_and_total() -> None:
    parse = collection.rdma_sysfs.parse_aer
    text = "RxErr 12\nBadTLP 0\nBadDLLP 3\nRollover 0\nTOTAL_ERR_COR 15\n"
    assert parse(text) == {"total": 15, "kinds": {"RxErr": 12, "BadDLLP": 3}}
    assert parse("DLP 2\nCmpltTO 1\n") == {"total": 3, "kinds": {"DLP": 2, "CmpltTO": 1}}
    assert parse(None) is None and parse("") is None


def test_aer_history_restarts_on_a_new_boot_or_a_count_that_went_back() -> None:
    step = history.aer_advance
    one = {"a": {"nonfatal": {"total": 1, "kinds": {"CmpltTO": 1}}}}
    two = {"a": {"nonfatal": {"total": 2, "kinds": {"CmpltTO": 2}}}}
    new, v = step(None, one, "boot1", 100.0, 60)
    assert v == {"a": {"fail": None, "warn": None}}
    _, v = step(new, two, "boot2", 110.0, 60)  # another boot: a new baseline, not growth
    assert v["a"]["fail"] is None
    grown, v = step(new, two, "boot1", 110.0, 60)
    assert v["a"]["fail"].startswith("+1 non-fatal (CmpltTO +1)")
    _, v = step(grown, two, "boot1", 150.0, 60)  # sticky within the stable time
    assert v["a"]["fail"] is not None
    _, v = step(grown, two, "boot1", 171.0, 60)  # and clears by itself after it
    assert v["a"]["fail"] is None
    _, v = step(new, {"a": {"nonfatal": {"total": 0, "kinds": {}}}}, "boot1", 110.0, 60)
    assert v["a"]["fail"] is None  # went back: re-enumerated, a new zero
