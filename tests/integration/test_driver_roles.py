"""The driver roles on lab nodes: inbox packages from the lab's local repository, idempotence,
--check, the MLNX_OFED checksum refusal, and rdma_modules' files and truthful status."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")
DEBIAN_PACKAGES = [
    "rdma-core",
    "ibverbs-providers",
    "ibverbs-utils",
    "infiniband-diags",
    "rdmacm-utils",
    "perftest",
    "python3-pyverbs",
]
BUNDLE = "MLNX_OFED_LINUX-24.10-1.1.4.0-debian12.5-x86_64.tgz"


@pytest.fixture(scope="module")
def collections(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("collections")
    (base / "ansible_collections" / "rdmaprov").mkdir(parents=True)
    (base / "ansible_collections" / "rdmaprov" / "cluster").symlink_to(ROOT)
    return base


def play(tmp_path: Path, roles: list[str], extra: dict | None = None) -> Path:
    import yaml

    book = tmp_path / f"play-{'-'.join(r.split('.')[-1] for r in roles)}.yml"
    book.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "driver roles",
                    "hosts": "all",
                    "gather_facts": False,
                    "become": True,
                    "vars": extra or {},
                    "roles": [{"role": r} for r in roles],
                }
            ],
            sort_keys=False,
        )
    )
    return book


def run(lab, collections: Path, book: Path, node: str, *args: str) -> tuple[int, str, dict]:
    env = {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(collections),
        "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_PIPELINING": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "false",
    }
    proc = subprocess.run(
        [str(PLAYBOOK), "-i", str(lab.inventory), "--limit", node, str(book), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout + proc.stderr
    m = re.search(
        rf"^{node}\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", out, re.M
    )
    keys = ("ok", "changed", "unreachable", "failed")
    recap = dict(zip(keys, map(int, m.groups()), strict=True)) if m else {}
    return proc.returncode, out, recap


def installed(lab, node: str, package: str) -> bool:
    proc = lab.exec(node, ["dpkg-query", "-W", "-f=${db:Status-Abbrev}", package], check=False)
    return proc.returncode == 0 and proc.stdout.startswith("ii")


def test_inbox_check_install_idempotent(lab, collections, tmp_path):
    node = lab.nodes[-1]
    # A fresh node for this test whatever ran before it: no RDMA packages.
    lab.exec(node, ["dpkg", "--purge", *DEBIAN_PACKAGES], check=False)
    assert not any(installed(lab, node, p) for p in DEBIAN_PACKAGES)
    book = play(tmp_path, ["rdmaprov.cluster.rdma_ofed"])

    rc, out, recap = run(lab, collections, book, node, "--check")
    assert rc == 0, out
    assert recap["changed"] >= 1 and re.search(
        r"TASK \[[^]]*Install packages\][^\n]*\nchanged:", out
    ), out
    assert not any(installed(lab, node, p) for p in DEBIAN_PACKAGES), "--check installed something"
    assert "inbox: 0/7 packages installed; missing " in out and "; would install " in out

    rc, out, recap = run(lab, collections, book, node)
    assert rc == 0, out
    assert recap["changed"] >= 1
    assert [p for p in DEBIAN_PACKAGES if not installed(lab, node, p)] == []
    assert "inbox: 7 packages in place, rdma-core " in out
    # The report is the state the run leaves, with what it did: not the state before it.
    assert re.search(r"inbox: 7/7 packages installed \(rdma-core [^)]+\); installed by this "
                     r"run: .+ \(before: 0/7\)", out), out

    rc, out, recap = run(lab, collections, book, node)
    assert rc == 0 and recap["changed"] == 0, out
    assert "7/7 packages installed" in out and "nothing to do" in out
    rc, out, recap = run(lab, collections, book, node, "--check")
    assert rc == 0 and recap["changed"] == 0, out


def test_inbox_version_pin_is_enforced(lab, collections, tmp_path):
    node = lab.nodes[-1]
    book = play(tmp_path, ["rdmaprov.cluster.rdma_ofed"], {"rdma_ofed_inbox_version": "0.0-0"})
    rc, out, _ = run(lab, collections, book, node, "--check")
    # The pinned version does not exist in the repository: apt says so, nothing pretends
    # (Ansible's apt module words it "no available installation candidate for rdma-core=0.0-0",
    # or lists the other versions).
    assert rc != 0 and "0.0-0" in out, out
    assert "no available installation candidate" in out or "other versions" in out, out


def test_mlnx_ofed_wrong_sha256_stops_before_anything(lab, collections, tmp_path):
    node = lab.nodes[0]
    bundle = tmp_path / BUNDLE
    bundle.write_text("not really an MLNX_OFED bundle\n")
    real = hashlib.sha256(bundle.read_bytes()).hexdigest()
    wrong = "0" * 64
    workdir = "/var/cache/rdmaprov/mlnx_ofed"
    lab.exec(node, ["rm", "-rf", workdir])

    # A bundle on the control host: refused there, before it is copied.
    book = play(
        tmp_path,
        ["rdmaprov.cluster.rdma_ofed"],
        {
            "rdma_ofed_source": "mlnx_ofed",
            "rdma_ofed_mlnx_ofed_src": str(bundle),
            "rdma_ofed_mlnx_ofed_sha256": wrong,
        },
    )
    rc, out, recap = run(lab, collections, book, node)
    assert rc != 0 and recap["failed"] == 1
    line = (f"rdma_ofed: sha256 mismatch for {bundle}: expected {wrong}, got {real}; "
            "nothing was installed")
    assert line in out, out
    assert lab.exec(node, ["test", "-e", workdir], check=False).returncode != 0

    # A file:// URL on the node: get_url checks it and leaves no file behind.
    lab.exec(node, ["sh", "-c", f"cat > /root/{BUNDLE}"], input=bundle.read_text())
    book = play(
        tmp_path,
        ["rdmaprov.cluster.rdma_ofed"],
        {
            "rdma_ofed_source": "mlnx_ofed",
            "rdma_ofed_mlnx_ofed_src": f"file:///root/{BUNDLE}",
            "rdma_ofed_mlnx_ofed_sha256": wrong,
        },
    )
    rc, out, recap = run(lab, collections, book, node)
    assert rc != 0 and recap["failed"] == 1
    assert re.search(
        r"rdma_ofed: Fetch the bundle and check its sha256 failed: .*did not match.*"
        r"nothing was installed",
        out,
    ), out
    assert lab.exec(node, ["test", "-e", f"{workdir}/{BUNDLE}"], check=False).returncode != 0
    assert lab.exec(node, ["sh", "-c", "command -v ofed_info"], check=False).returncode != 0


def test_mlnx_ofed_without_sha256_is_refused(lab, collections, tmp_path):
    book = play(
        tmp_path,
        ["rdmaprov.cluster.rdma_ofed"],
        {"rdma_ofed_source": "mlnx_ofed", "rdma_ofed_mlnx_ofed_src": f"/nonexistent/{BUNDLE}"},
    )
    rc, out, _ = run(lab, collections, book, lab.nodes[0])
    assert rc != 0 and "an unchecked bundle is never installed" in out, out


def test_rdma_modules_files_and_truthful_status(lab, collections, tmp_path):
    node = lab.nodes[0]
    lab.exec(
        node, ["rm", "-f", "/etc/modules-load.d/rdmaprov.conf", "/etc/modprobe.d/rdmaprov.conf"]
    )
    book = play(
        tmp_path,
        ["rdmaprov.cluster.rdma_modules"],
        {
            "rdma_modules_ipoib": True,
            "rdma_modules_host_extra": [{"name": "mlx5_core", "options": "prof_sel=2"}],
        },
    )
    rc, out, recap = run(lab, collections, book, node)
    # One task writes both files, loads and reports: one change.
    assert rc == 0 and recap["changed"] == 1, out
    listed = lab.exec(node, ["cat", "/etc/modules-load.d/rdmaprov.conf"]).stdout.split("\n")
    modules = [line for line in listed if line and not line.startswith("#")]
    assert modules == [
        "ib_core",
        "ib_uverbs",
        "rdma_ucm",
        "ib_umad",
        "mlx5_core",
        "mlx5_ib",
        "ib_ipoib",
    ]
    options = lab.exec(node, ["cat", "/etc/modprobe.d/rdmaprov.conf"]).stdout
    assert "options mlx5_core prof_sel=2" in options
    # The lab kernel has no module support: every module says so, none claims to be loaded.
    for name in modules:
        assert f'"{name}: not applicable: no /proc/modules' in out, out
    assert "loaded now" not in out
    rc, out, recap = run(lab, collections, book, node)
    assert rc == 0 and recap["changed"] == 0, out
    rc, out, recap = run(lab, collections, book, node, "--check")
    assert rc == 0 and recap["changed"] == 0, out
    # A planted drift: --check --diff shows it and leaves it, the next run repairs it.
    lab.exec(node, ["sh", "-c", "echo bogus_module >> /etc/modules-load.d/rdmaprov.conf"])
    rc, out, recap = run(lab, collections, book, node, "--check", "--diff")
    assert rc == 0 and recap["changed"] == 1 and "-bogus_module" in out, out
    assert "bogus_module" in lab.exec(node, ["cat", "/etc/modules-load.d/rdmaprov.conf"]).stdout
    rc, out, recap = run(lab, collections, book, node)
    assert rc == 0 and recap["changed"] == 1, out
    assert "bogus_module" not in lab.exec(node, ["cat", "/etc/modules-load.d/rdmaprov.conf"]).stdout
    rc, out, recap = run(lab, collections, book, node)
    assert rc == 0 and recap["changed"] == 0, out
