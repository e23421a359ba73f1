"""`rdmaprov probe --container`'s advice (rdmaprov/probe/container.py) on a fixture host."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from rdmaprov import collection
from rdmaprov.probe import container

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
_spec = importlib.util.spec_from_file_location("cdi_make_tree", FIXTURES / "cdi/make_tree.py")
make_tree = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_tree)


@pytest.fixture
def host(tmp_path: Path, monkeypatch):
    root = make_tree.dgx_ndr(tmp_path / "root")
    conf = tmp_path / "nccl.conf"
    conf.write_text("# managed\nNCCL_IB_HCA==mlx5_0,mlx5_1,mlx5_2,mlx5_3\nNCCL_IB_GID_INDEX=3\n")
    crp = collection.container_runtime_probe
    monkeypatch.setattr(crp, "engines", lambda: {"docker": {"version": "26.1.5+dfsg1"},
                                                 "podman": {"version": "4.3.1"}})
    return root, conf, tmp_path / "rdmaprov-rdma.yaml"


def test_installed_spec_gives_one_device_flag(host) -> None:
    root, conf, spec = host
    cdi = collection.cdi_spec
    facts = cdi.read_facts(str(root / "sys"), str(root / "dev"), str(conf))
    spec.write_text(cdi.plan(facts, {"conf_path": str(conf)})["content"])
    doc = container.advice(str(root / "sys"), str(spec), str(conf))
    assert doc["installed"] and doc["drift"] == []
    assert doc["engines"]["docker"]["argv"] == ["docker", "run", "--network", "host", "--ipc",
                                                "host", "--device", "rdmaprov.io/rdma=all",
                                                "IMAGE"]
    assert doc["engines"]["podman"]["argv"][-3:] == ["--device", "rdmaprov.io/rdma=all",
                                                     "IMAGE"]
    assert doc["nccl_conf"]["settings"]["NCCL_IB_GID_INDEX"] == "3"


def test_no_spec_yet_says_so_and_gives_the_edits_by_hand(host) -> None:
    root, conf, spec = host
    doc = container.advice(str(root / "sys"), str(spec), str(conf))
    assert not doc["installed"]
    docker = doc["engines"]["docker"]
    assert "rdmaprov.io/rdma=all" not in docker["argv"]
    assert "/dev/infiniband/uverbs3" in docker["argv"]
    assert docker["why"].startswith("the spec is not installed")
