"""The RDMA CDI spec (plugins/module_utils/cdi_spec.py): the devices read from sysfs trees in
the kernel's layout (tests/fixtures/cdi/make_tree.py), the one captured on the H200, and the
older flat fixture; the spec's text, its drift, and what an engine is told."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from rdmaprov.collection import cdi_spec as cdi

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
_spec = importlib.util.spec_from_file_location("cdi_make_tree", FIXTURES / "cdi/make_tree.py")
make_tree = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_tree)

SETTINGS = {"conf_path": "/etc/nccl.conf", "mad": False, "env": {}, "current": None}


def facts_of(root: Path, conf: Path | None = None) -> dict:
    return cdi.read_facts(str(root / "sys"), str(root / "dev"), str(conf) if conf else "")


def edits(spec: dict, name: str) -> dict:
    return next(d["containerEdits"] for d in spec["devices"] if d["name"] == name)


def nodes(spec: dict, name: str) -> list[str]:
    return [n["path"] for n in edits(spec, name).get("deviceNodes", [])]


def test_four_hcas_follow_ibdev_not_the_number(tmp_path: Path) -> None:
    facts = facts_of(make_tree.dgx_ndr(tmp_path))
    assert [h["name"] for h in facts["hcas"]] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert [h["uverbs"] for h in facts["hcas"]] == [["uverbs0"], ["uverbs1"], ["uverbs3"],
                                                    ["uverbs2"]]
    out = cdi.plan(facts, SETTINGS)
    spec = out["spec"]
    assert spec["cdiVersion"] == "0.3.0" and spec["kind"] == "rdmaprov.io/rdma"
    assert out["devices"] == ["all", "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert nodes(spec, "mlx5_2") == ["/dev/infiniband/uverbs3", "/dev/infiniband/rdma_cm"]
    assert nodes(spec, "all") == [f"/dev/infiniband/uverbs{n}" for n in (0, 1, 3, 2)] + [
        "/dev/infiniband/rdma_cm"]
    # Management devices only when asked.
    assert not any("umad" in p or "issm" in p for p in nodes(spec, "all"))
    for name in out["devices"]:
        e = edits(spec, name)
        assert e["mounts"] == [{"hostPath": "/etc/nccl.conf", "containerPath": "/etc/nccl.conf",
                                "options": ["ro", "nosuid", "nodev", "bind"]}]
        assert e["env"] == ["NCCL_CONF_FILE=/etc/nccl.conf"]
    assert out["problems"] == []
    assert out["report"] == ["rdmaprov.io/rdma: all, mlx5_0, mlx5_1, mlx5_2, mlx5_3 "
                             "(5 device nodes)"]


def test_mad_devices_when_asked(tmp_path: Path) -> None:
    out = cdi.plan(facts_of(make_tree.dgx_ndr(tmp_path)), {**SETTINGS, "mad": True})
    assert nodes(out["spec"], "mlx5_3") == ["/dev/infiniband/uverbs2", "/dev/infiniband/umad3",
                                            "/dev/infiniband/issm3", "/dev/infiniband/rdma_cm"]


def test_lag_and_a_node_udev_has_not_made(tmp_path: Path) -> None:
    out = cdi.plan(facts_of(make_tree.roce_lag(tmp_path)), SETTINGS)
    # The missing node is left out (an engine would refuse the whole device) and named.
    assert out["devices"] == ["all", "mlx5_bond_0"]
    assert nodes(out["spec"], "all") == ["/dev/infiniband/uverbs0", "/dev/infiniband/rdma_cm"]
    assert out["problems"] == ["mlx5_2: /dev/infiniband/uverbs1 missing"]
    assert "mlx5_2: /dev/infiniband/uverbs1 missing" in out["report"]


def test_h200_capture_no_hca_carries_only_the_nccl_settings(h200_root: Path) -> None:
    tmp_path = h200_root
    assert (tmp_path / "dev/infiniband/rdma_cm").exists()
    out = cdi.plan(facts_of(tmp_path), SETTINGS)
    assert out["devices"] == ["all"]
    # rdma_cm alone gives a process nothing to open a verbs context with: left out.
    assert "deviceNodes" not in edits(out["spec"], "all")
    assert edits(out["spec"], "all")["env"] == ["NCCL_CONF_FILE=/etc/nccl.conf"]
    assert out["report"][0] == "no RDMA device: the spec carries only the NCCL settings"


def test_flat_fixture_without_device_links(tmp_path: Path) -> None:
    # ib_hdr has /sys/class/infiniband_verbs/uverbsN/ibdev but no device/infiniband_verbs.
    root = FIXTURES / "sysfs/ib_hdr"
    (tmp_path / "infiniband").mkdir()
    for n in ("uverbs0", "uverbs1", "rdma_cm"):
        (tmp_path / "infiniband" / n).write_text("")
    facts = cdi.read_facts(str(root), str(tmp_path), "")
    assert [(h["name"], h["uverbs"]) for h in facts["hcas"]] == [("mlx5_0", ["uverbs0"]),
                                                                 ("mlx5_1", ["uverbs1"])]


def test_no_conf_path_and_no_hca_means_no_spec(tmp_path: Path) -> None:
    (tmp_path / "sys").mkdir()
    out = cdi.plan(facts_of(tmp_path), {**SETTINGS, "conf_path": ""})
    assert out["spec"] is None and out["content"] is None and out["devices"] == []
    assert out["report"] == ["no RDMA device and no NCCL settings file: no CDI spec"]
    assert cdi.plan(facts_of(tmp_path), {**SETTINGS, "conf_path": "",
                                         "current": "x"})["drift"] == [
        "/etc/cdi/rdmaprov-rdma.yaml: present, wanted absent"]


def test_conf_file_not_there_yet_is_said(tmp_path: Path) -> None:
    root = make_tree.dgx_ndr(tmp_path / "r")
    out = cdi.plan(facts_of(root, tmp_path / "nccl.conf"), SETTINGS)
    assert any("is not there yet" in line for line in out["report"])
    (tmp_path / "nccl.conf").write_text("# managed\nNCCL_IB_HCA==mlx5_0\nNCCL_IB_TC=106\n")
    facts = facts_of(root, tmp_path / "nccl.conf")
    assert facts["nccl_conf"]["settings"] == {"NCCL_IB_HCA": "=mlx5_0", "NCCL_IB_TC": "106"}
    assert not any("is not there yet" in line for line in cdi.plan(facts, SETTINGS)["report"])


def test_yaml_is_the_spec_and_drift_follows_the_hcas(tmp_path: Path) -> None:
    root = make_tree.dgx_ndr(tmp_path)
    out = cdi.plan(facts_of(root), SETTINGS)
    assert out["content"].startswith("# Written by rdmaprov")
    assert yaml.safe_load(out["content"]) == out["spec"]
    assert json.loads(json.dumps(out["spec"])) == out["spec"]
    assert out["drift"] == ["/etc/cdi/rdmaprov-rdma.yaml: absent"]
    same = cdi.plan(facts_of(root), {**SETTINGS, "current": out["content"]})
    assert same["drift"] == []
    # An HCA goes away (its verbs node with it): the spec on the host is stale.
    (root / "dev/infiniband/uverbs3").unlink()
    gone = cdi.plan(facts_of(root), {**SETTINGS, "current": out["content"]})
    assert gone["drift"] == ["/etc/cdi/rdmaprov-rdma.yaml: content differs"]
    assert "mlx5_2" not in gone["devices"]


def test_extra_env_and_kind(tmp_path: Path) -> None:
    out = cdi.plan(facts_of(make_tree.dgx_ndr(tmp_path)),
                   {**SETTINGS, "env": {"NCCL_IB_QPS_PER_CONNECTION": 4}, "kind": "example.com/ib"})
    assert out["spec"]["kind"] == "example.com/ib"
    assert edits(out["spec"], "all")["env"] == ["NCCL_CONF_FILE=/etc/nccl.conf",
                                                "NCCL_IB_QPS_PER_CONNECTION=4"]


@pytest.mark.parametrize(("engine", "version", "ok"), [
    ("podman", "4.3.1", True), ("docker", "26.1.5+dfsg1", True), ("docker", "25.0.0", True),
    ("docker", "20.10.24+dfsg1", False), ("docker", None, False), ("none", None, False)])
def test_engine_cdi(engine, version, ok) -> None:
    got, why = cdi.engine_cdi(engine, version)
    assert got is ok
    assert (why == "") is ok
    if engine == "docker" and version and not ok:
        assert why.startswith("docker 20.10.24+dfsg1 has no CDI (docker >= 25 has)")


def test_run_flags_never_privileged(tmp_path: Path) -> None:
    planned = cdi.plan(facts_of(make_tree.dgx_ndr(tmp_path)), SETTINGS)
    flags, why = cdi.run_flags("docker", "26.1.5", planned, True, gpus=8)
    assert flags == ["--network", "host", "--ipc", "host", "--gpus", "all",
                     "--device", "rdmaprov.io/rdma=all"] and why == ""
    flags, why = cdi.run_flags("podman", "4.3.1", planned, True, gpus=1)
    assert flags[4:] == ["--device", "nvidia.com/gpu=all", "--device", "rdmaprov.io/rdma=all"]
    # docker < 25: the spec's edits by hand.
    flags, why = cdi.run_flags("docker", "20.10.24", planned, True)
    assert "rdmaprov.io/rdma=all" not in flags and "has no CDI" in why
    assert flags[4:8] == ["--device", "/dev/infiniband/uverbs0", "--device",
                          "/dev/infiniband/uverbs1"]
    assert flags[-6:] == ["-v", "/etc/nccl.conf:/etc/nccl.conf:ro", "-e",
                          "NCCL_CONF_FILE=/etc/nccl.conf", "--ulimit", "memlock=-1:-1"]
    flags, why = cdi.run_flags("podman", "4.3.1", planned, False)
    assert "is not installed" in why
    assert "--privileged" not in flags


def test_enroot_files_in_enroots_formats() -> None:
    files = cdi.enroot_files("/etc/nccl.conf", {"NCCL_IB_QPS_PER_CONNECTION": "4"})
    fstab = [ln for ln in files["mounts.d/90-rdmaprov-rdma.fstab"].splitlines()
             if not ln.startswith("#")]
    # fstab(5): source, target, type, options (enroot's x-create makes the target a file).
    assert [ln.split() for ln in fstab] == [
        ["/etc/nccl.conf", "/etc/nccl.conf", "none",
         "x-create=file,bind,ro,nosuid,nodev,noexec,private"]]
    env = [ln for ln in files["environ.d/90-rdmaprov-rdma.env"].splitlines()
           if not ln.startswith("#")]
    assert env == ["NCCL_CONF_FILE=/etc/nccl.conf", "NCCL_IB_QPS_PER_CONNECTION=4"]
    assert cdi.enroot_files("") == {}
