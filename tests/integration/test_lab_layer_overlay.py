"""A netstack layer built where the lab's cache is on overlayfs (a fresh machine's or a
container's root filesystem): overlayfs cannot hold a layer's whiteouts (cp -a of the upper
directory failed with "cannot create special file"), so the layer is the merged view, a whole
root that nodes stack on alone. Here the cache is a real overlay mount; the base and the lab's
repository are the usual cached ones. (A 2-node ifupdown lab booted from such a layer had
networking.service active and eth1 addressed by ifupdown: 2026-12-04, issue 23's report.)"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from rdmaprov.lab import base as lab_base

pytestmark = pytest.mark.lab


@pytest.fixture
def overlay_cache(tmp_path: Path, monkeypatch):
    if os.geteuid() != 0:
        if os.environ.get("RDMAPROV_REQUIRE_LAB") == "1":
            pytest.fail("the lab needs root")
        pytest.skip("the lab needs root")
    # The usual cache's base and repository, built (or found) before the cache moves.
    distro = lab_base.Distro(suite=lab_base.host_suite(), mirror=lab_base.host_mirror())
    log = tmp_path / "build.log"
    base = lab_base.ensure_base(distro, log)
    repo = lab_base.ensure_repo(distro, base, log)
    if lab_base.fs_type(lab_base.CACHE_DIR) == "overlay":
        # Already so (a fresh machine's root): a directory of the cache itself.
        cache = lab_base.CACHE_DIR / f"test-overlay-{os.getpid()}"
        cache.mkdir()
        monkeypatch.setattr(lab_base, "CACHE_DIR", cache)
        try:
            yield distro, base, repo, log
        finally:
            subprocess.run(["rm", "-rf", str(cache)], check=False)
        return
    ov = Path("/var/tmp") / f"rdmaprov-test-ovl-{os.getpid()}"
    for sub in ("lower", "upper", "work", "merged"):
        (ov / sub).mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={ov / 'lower'},upperdir={ov / 'upper'},workdir={ov / 'work'}",
                    str(ov / "merged")], check=True)
    cache = ov / "merged" / "cache"
    cache.mkdir()
    monkeypatch.setattr(lab_base, "CACHE_DIR", cache)
    try:
        yield distro, base, repo, log
    finally:
        subprocess.run(["umount", "-l", str(ov / "merged")], check=False)
        subprocess.run(["rm", "-rf", str(ov)], check=False)


def test_netstack_layer_on_an_overlayfs_cache(overlay_cache, tmp_path: Path) -> None:
    distro, base, repo, log = overlay_cache
    assert lab_base.fs_type(lab_base.CACHE_DIR) == "overlay"
    layer = lab_base.ensure_netstack_layer(distro, base, repo, "ifupdown", log)
    assert layer is not None and layer.parent == lab_base.CACHE_DIR
    assert lab_base.lower_dirs(str(layer), str(base)) == str(layer)
    # What a node mounts: the layer alone, with ifupdown installed and its service enabled.
    node = lab_base.writable_layer_dir(tmp_path / "node", f"test-node-{os.getpid()}")
    root, upper, work = node / "root", node / "upper", node / "work"
    for d in (root, upper, work):
        d.mkdir(parents=True)
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={lab_base.lower_dirs(str(layer), str(base))},upperdir={upper},"
                    f"workdir={work}", str(root)], check=True)
    try:
        assert (root / "usr/sbin/ifup").is_file()
        assert (root / "etc/systemd/system/multi-user.target.wants/networking.service").is_symlink()
        assert (root / "usr/bin/python3").exists()  # the base is in it too
        assert not (root / "usr/sbin/policy-rc.d").exists()  # removed during the build
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False)
        subprocess.run(["rm", "-rf", str(node)], check=False)
