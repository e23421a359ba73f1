"""Parsers and decisions of the driver roles (plugins/module_utils/driver_*.py, kernel_caps.py),
against the output formats the tools really print."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rdmaprov.collection import driver_plan as plan
from rdmaprov.collection import driver_versions as versions
from rdmaprov.collection import kernel_caps as kcaps

ROOT = Path(__file__).resolve().parents[2]


# --- ofed_info -s ------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "flavor", "version"), [
    ("MLNX_OFED_LINUX-23.10-1.1.9.0:\n", "MLNX_OFED_LINUX", "23.10-1.1.9.0"),
    ("MLNX_OFED_LINUX-5.8-3.0.7.0:", "MLNX_OFED_LINUX", "5.8-3.0.7.0"),
    ("MLNX_OFED_LINUX-4.9-7.1.0.0:\n", "MLNX_OFED_LINUX", "4.9-7.1.0.0"),
    # DOCA-OFED (doca-ofed packages) reports an "internal" OFED build.
    ("OFED-internal-24.10-1.1.4:\n", "OFED-internal", "24.10-1.1.4"),
    ("OFED-internal-25.04-0.6.1:", "OFED-internal", "25.04-0.6.1"),
    # OpenFabrics OFED; and a warning line before the answer.
    ("OFED-4.8-2:\n", "OFED", "4.8-2"),
    ("WARNING: something odd\nMLNX_OFED_LINUX-24.04-0.7.0.0:\n",
     "MLNX_OFED_LINUX", "24.04-0.7.0.0"),
])
def test_ofed_info(text: str, flavor: str, version: str) -> None:
    assert versions.parse_ofed_info(text) == {
        "flavor": flavor, "version": version, "full": f"{flavor}-{version}"}


@pytest.mark.parametrize("text", ["", None, "bash: ofed_info: command not found", "\n\n"])
def test_ofed_info_absent(text: str | None) -> None:
    assert versions.parse_ofed_info(text) is None


# --- dpkg-query / rpm ---------------------------------------------------------------------------
# dpkg-query -W -f='${Package}\t${Version}\t${db:Status-Abbrev}\n' as Debian 12 prints it; the
# status abbreviation has a trailing space; "rc" = removed, configuration left.
DPKG = (
    "rdma-core\t44.0-2\tii \n"
    "ibverbs-providers\t44.0-2\tii \n"
    "infiniband-diags\t44.0-2\trc \n"
    "perftest\t4.5.0.20-1\thi \n"
    "python3-pyverbs\t\tun \n"
)
# rpm -q --queryformat '%{NAME}\t%{VERSION}-%{RELEASE}\tii\n' on Rocky 9; rpm names the missing.
RPM = (
    "rdma-core\t48.0-1.el9\tii\n"
    "libibverbs-utils\t48.0-1.el9\tii\n"
    "package perftest is not installed\n"
)


def test_dpkg_query() -> None:
    assert versions.parse_package_query(DPKG) == {
        "rdma-core": "44.0-2", "ibverbs-providers": "44.0-2", "perftest": "4.5.0.20-1"}


def test_rpm_query() -> None:
    assert versions.parse_package_query(RPM) == {
        "rdma-core": "48.0-1.el9", "libibverbs-utils": "48.0-1.el9"}


def test_package_query_multiarch_and_empty() -> None:
    line = "libibverbs1:amd64\t44.0-2\tii \n"
    assert versions.parse_package_query(line) == {"libibverbs1": "44.0-2"}
    assert versions.parse_package_query("") == {}


# --- bundle names -------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "version", "distro", "ext"), [
    ("MLNX_OFED_LINUX-24.10-1.1.4.0-ubuntu22.04-x86_64.tgz", "24.10-1.1.4.0", "ubuntu22.04", "tgz"),
    ("https://mirror.example/ofed/MLNX_OFED_LINUX-5.8-3.0.7.0-rhel8.6-x86_64.iso",
     "5.8-3.0.7.0", "rhel8.6", "iso"),
    ("/srv/MLNX_OFED_LINUX-23.10-1.1.9.0-debian12.1-aarch64.tar.gz", "23.10-1.1.9.0", "debian12.1",
     "tar.gz"),
])
def test_bundle_name(name: str, version: str, distro: str, ext: str) -> None:
    parsed = versions.parse_bundle_name(name)
    assert parsed is not None
    assert (parsed["version"], parsed["distro"], parsed["ext"]) == (version, distro, ext)
    assert parsed["stem"] == name.rsplit("/", 1)[-1][: -(len(ext) + 1)]


@pytest.mark.parametrize("name", ["", "ofed.tgz", "MLNX_OFED_LINUX-24.10-ubuntu22.04-x86_64.zip"])
def test_bundle_name_unknown(name: str) -> None:
    assert versions.parse_bundle_name(name) is None


# --- decisions ----------------------------------------------------------------------------------
WANT = ["rdma-core", "ibverbs-providers", "perftest", "python3-pyverbs"]
CORE = ["rdma-core", "ibverbs-providers", "python3-pyverbs"]


def test_plan_missing_only() -> None:
    p = versions.package_plan(WANT, {"rdma-core": "44.0-2", "ibverbs-providers": "44.0-2"})
    assert p == {"missing": ["perftest", "python3-pyverbs"], "wrong_version": [],
                 "install": ["perftest", "python3-pyverbs"], "ok": False}


def test_plan_all_present() -> None:
    have = dict.fromkeys(WANT, "44.0-2")
    assert versions.package_plan(WANT, have)["ok"] is True


def test_plan_pins_rdma_core_packages_only() -> None:
    have = {"rdma-core": "44.0-2", "ibverbs-providers": "44.0-1", "perftest": "4.5-1",
            "python3-pyverbs": "44.0-2"}
    p = versions.package_plan(WANT, have, "44.0-2", CORE, "=")
    assert p["install"] == ["ibverbs-providers=44.0-2"]
    assert p["wrong_version"] == [
        {"name": "ibverbs-providers", "installed": "44.0-1", "wanted": "44.0-2"}]
    # rpm pins are name-version; a pin without the release matches any release, epochs aside.
    have = {"rdma-core": "1:48.0-1.el9"}
    p = versions.package_plan(["rdma-core"], have, "48.0", ["rdma-core"], "-")
    assert p["ok"] is True
    p = versions.package_plan(["rdma-core"], {}, "48.0", ["rdma-core"], "-")
    assert p["install"] == ["rdma-core-48.0"]


def test_ofed_plan() -> None:
    found = versions.parse_ofed_info("MLNX_OFED_LINUX-23.10-1.1.9.0:")
    assert versions.ofed_plan(found, "23.10-1.1.9.0")["install"] is False
    assert versions.ofed_plan(found, "24.10-1.1.4.0") == {
        "installed": "23.10-1.1.9.0", "wanted": "24.10-1.1.4.0", "install": True}
    assert versions.ofed_plan(None, "24.10-1.1.4.0")["install"] is True


def test_report_of_a_host_in_line_and_of_an_install() -> None:
    have = dict.fromkeys(WANT, "44.0-2")
    p = versions.package_plan(WANT, have)
    m = versions.ofed_plan(None, "")
    before = {"versions": have, "ofed": None}
    assert versions.stack_report("inbox", WANT, p, m, before) == (
        "inbox: 4/4 packages installed (rdma-core 44.0-2); nothing to do")
    # Before: two missing. --check says what it would do; a run, what it did.
    none_yet = {"rdma-core": "44.0-2", "ibverbs-providers": "44.0-2"}
    p = versions.package_plan(WANT, none_yet)
    before = {"versions": none_yet, "ofed": None}
    assert versions.stack_report("inbox", WANT, p, m, before, check=True) == (
        "inbox: 2/4 packages installed (rdma-core 44.0-2); missing perftest, python3-pyverbs; "
        "would install perftest, python3-pyverbs")
    after = {"versions": have, "ofed": None}
    assert versions.stack_report("inbox", WANT, p, m, before, after,
                                 versions.package_plan(WANT, have)) == (
        "inbox: 4/4 packages installed (rdma-core 44.0-2); installed by this run: "
        "perftest, python3-pyverbs (before: 2/4)")


def test_report_of_mlnx_ofed() -> None:
    found = versions.parse_ofed_info("MLNX_OFED_LINUX-23.10-1.1.9.0:")
    p = versions.package_plan([], {})
    same = versions.ofed_plan(found, "23.10-1.1.9.0")
    before = {"versions": {}, "ofed": found}
    assert versions.stack_report("mlnx_ofed", [], p, same, before) == (
        "mlnx_ofed: MLNX_OFED_LINUX-23.10-1.1.9.0 installed, wanted 23.10-1.1.9.0")
    other = versions.ofed_plan(found, "24.10-1.1.4.0")
    assert versions.stack_report("mlnx_ofed", [], p, other, before, check=True).endswith(
        "wanted 24.10-1.1.4.0; would install it")
    assert versions.stack_report("mlnx_ofed", [], p, versions.ofed_plan(None, "24.10-1.1.4.0"),
                                 {"versions": {}, "ofed": None}) == (
        "mlnx_ofed: no MLNX_OFED installed, wanted 24.10-1.1.4.0; installed by this run "
        "(before: none)")

# --- the role's plan (rdma_ofed_probe, option settings) -----------------------------------------
SHA = "ab" * 32
BUNDLE_NAME = "MLNX_OFED_LINUX-24.10-1.1.4.0-debian12.1-x86_64.tgz"


def settings(**over: object) -> dict:
    """The rdma_ofed role's settings as the probe's action plugin fills them (its defaults on
    Debian 12 over SSH through a plain Ethernet port, with WANT as the user's inbox list)."""
    s = {"source": "inbox", "inbox_packages": WANT, "inbox_extra_packages": [],
         "inbox_version": "", "doca_packages": ["doca-ofed"], "doca_version": "",
         "doca_repo_url": "", "doca_gpg_key_url": "", "doca_repo_trusted": False,
         "mlnx_ofed_src": "", "mlnx_ofed_sha256": "", "mlnx_ofed_version": "",
         "mlnx_ofed_workdir": "/var/cache/rdmaprov/mlnx_ofed", "restart_openibd": False,
         "reboot_ok": False, "allow_connection_interface_down": False,
         "os_name": "Debian 12.5", "ssh_interface": "eth0", "ssh_interface_rdma": False,
         "os_family": "Debian", "distribution": "Debian", "distribution_major_version": "12",
         "mlnx_ofed_flags": ["--force", "--without-fw-update"], "python_apt": True,
         "check_mode": False}
    return {**s, **over}


ROCKY9 = {"os_family": "RedHat", "distribution": "Rocky", "distribution_major_version": "9"}
DEBIAN_INBOX = ["rdma-core", "ibverbs-providers", "ibverbs-utils", "infiniband-diags",
                "rdmacm-utils", "perftest", "python3-pyverbs"]
REDHAT_INBOX = ["rdma-core", "libibverbs-utils", "infiniband-diags", "librdmacm-utils", "perftest",
                "python3-pyverbs"]


def test_os_packages_by_distribution_major_then_distribution_then_family() -> None:
    # The lists vars/main.yml held, picked as its first_found did.
    assert versions.wanted_packages(settings(inbox_packages=[])) == DEBIAN_INBOX
    assert versions.wanted_packages(settings(inbox_packages=[], os_family="Debian",
                                             distribution="Ubuntu",
                                             distribution_major_version="22")) == DEBIAN_INBOX
    assert versions.wanted_packages(settings(inbox_packages=[], **ROCKY9)) == REDHAT_INBOX
    assert versions.os_packages(settings(**ROCKY9))["pin_separator"] == "-"
    assert versions.os_packages(settings())["pin_separator"] == "="
    table = {"Ubuntu-22": {"n": 1}, "Ubuntu": {"n": 2}, "Debian": {"n": 3}}
    ubuntu = {"os_family": "Debian", "distribution": "Ubuntu"}
    assert versions.os_packages({**ubuntu, "distribution_major_version": "22"}, table) == {"n": 1}
    assert versions.os_packages({**ubuntu, "distribution_major_version": "24"}, table) == {"n": 2}
    assert versions.os_packages(settings(), table) == {"n": 3}
    assert versions.os_packages(settings(os_family="Suse", distribution="SLES")) is None


def test_the_core_packages_carry_the_pin_with_the_os_separator() -> None:
    got = versions.plan(settings(inbox_packages=[], inbox_version="44.0-2", **ROCKY9),
                        {"versions": {}, "ofed": None})
    assert got["request"] == ["rdma-core-44.0-2", "libibverbs-utils-44.0-2",
                              "infiniband-diags-44.0-2", "librdmacm-utils-44.0-2", "perftest",
                              "python3-pyverbs-44.0-2"]


def test_an_os_without_a_table_is_refused_for_packages_only() -> None:
    sles = {"os_family": "Suse", "distribution": "SLES", "os_name": "SLES 15.5"}
    got = versions.plan(settings(**sles), {"versions": dict.fromkeys(WANT, "1"), "ofed": None})
    assert got["drift"] is True and got["setting_errors"] == [
        "rdma_ofed: no package table for SLES 15.5 (Suse family): rdma_ofed_source=inbox "
        "installs on the Debian and RedHat families"]
    mlnx = settings(source="mlnx_ofed", mlnx_ofed_src=BUNDLE_NAME, mlnx_ofed_sha256=SHA, **sles)
    assert versions.plan(mlnx, {"versions": {}, "ofed": None})["setting_errors"] == []


def test_wanted_packages() -> None:
    assert versions.wanted_packages(settings()) == WANT
    # The user's list replaces the OS's; extras are added once, in order.
    assert versions.wanted_packages(settings(inbox_packages=["rdma-core"],
                                             inbox_extra_packages=["perftest", "rdma-core"])) == [
        "rdma-core", "perftest"]
    assert versions.wanted_packages(settings(inbox_extra_packages=["ibverbs-utils"]))[-1] == (
        "ibverbs-utils")
    assert versions.wanted_packages(settings(source="doca")) == ["doca-ofed"]
    assert versions.wanted_packages(settings(source="mlnx_ofed")) == []


def test_plan_of_a_host_in_line() -> None:
    state = {"versions": dict.fromkeys(WANT, "44.0-2"), "ofed": None}
    got = versions.plan(settings(), state)
    assert got["drift"] is False and got["setting_errors"] == []
    assert got["packages"] == WANT and got["plan"]["ok"] is True
    assert got["rdmaprov_report"] == [
        "inbox: 4/4 packages installed (rdma-core 44.0-2); nothing to do"]


def test_plan_pins_inbox_core_packages_and_doca_packages() -> None:
    state = {"versions": dict.fromkeys(WANT, "44.0-1"), "ofed": None}
    got = versions.plan(settings(inbox_version="44.0-2"), state)
    assert got["drift"] is True and got["rdmaprov_report"] == []
    assert got["request"] == ["rdma-core=44.0-2", "ibverbs-providers=44.0-2",
                              "python3-pyverbs=44.0-2"]
    doca = versions.plan(settings(source="doca", doca_version="24.10", **ROCKY9,
                                  doca_repo_url="https://m/", doca_repo_trusted=True),
                         {"versions": {"doca-ofed": "24.10-1"}, "ofed": None})
    # Its packages are in line, but the repository is not probed: a doca host always drifts.
    assert doca["plan"]["ok"] is True and doca["drift"] is True
    assert doca["request"] == ["doca-ofed"] and doca["rdmaprov_report"]
    assert versions.plan(settings(source="doca", doca_version="25.04", **ROCKY9,
                                  doca_repo_url="https://m/", doca_repo_trusted=True),
                         {"versions": {}, "ofed": None})["request"] == ["doca-ofed-25.04"]


def test_plan_of_an_mlnx_ofed_bundle() -> None:
    s = settings(source="mlnx_ofed", mlnx_ofed_src=f"https://mirror/x/{BUNDLE_NAME}",
                 mlnx_ofed_sha256=SHA)
    found = versions.parse_ofed_info("MLNX_OFED_LINUX-24.10-1.1.4.0:")
    same = versions.plan(s, {"versions": {}, "ofed": found})
    assert same["mlnx_plan"]["wanted"] == "24.10-1.1.4.0" and same["drift"] is False
    unpacked = f"/var/cache/rdmaprov/mlnx_ofed/{BUNDLE_NAME[:-4]}"
    assert same["bundle"] == {
        "src": f"https://mirror/x/{BUNDLE_NAME}", "workdir": "/var/cache/rdmaprov/mlnx_ofed",
        "file": f"/var/cache/rdmaprov/mlnx_ofed/{BUNDLE_NAME}", "dir": unpacked, "remote": True,
        "iso": False, "installer": f"{unpacked}/mlnxofedinstall",
        "argv": [f"{unpacked}/mlnxofedinstall", "--force", "--without-fw-update"],
        "sha256": SHA, "checksum": f"sha256:{SHA}",
        "would": f"would install MLNX_OFED 24.10-1.1.4.0 from https://mirror/x/{BUNDLE_NAME} "
                 "(installed: 24.10-1.1.4.0)"}
    assert same["install_packages"] is False
    assert same["install_bundle"] is False and same["doca_key"] is False
    # A version set by hand wins over the file name's; a file with another name unpacks to its
    # own stem, and a path on the control host is copied, not fetched.
    other = versions.plan(settings(source="mlnx_ofed", mlnx_ofed_src="/srv/ofed.tar.gz",
                                   mlnx_ofed_sha256=SHA, mlnx_ofed_version="23.10-1.1.9.0"),
                          {"versions": {}, "ofed": found})
    assert other["mlnx_plan"]["install"] is True and other["drift"] is True
    assert {k: other["bundle"][k] for k in ("file", "dir", "remote")} == {
        "file": "/var/cache/rdmaprov/mlnx_ofed/ofed.tar.gz",
        "dir": "/var/cache/rdmaprov/mlnx_ofed/ofed", "remote": False}
    assert other["setting_errors"] == [] and other["refusal"] == ""
    assert other["install_bundle"] is True
    assert other["mlnx_plan"]["would"] == (
        "would install MLNX_OFED 23.10-1.1.9.0 from /srv/ofed.tar.gz (installed: "
        "24.10-1.1.4.0)")
    # An ISO is mounted, not unpacked; the installer takes the flags asked for; get_url is
    # given the sha256 in lower case.
    iso = versions.plan(settings(source="mlnx_ofed", mlnx_ofed_src=f"/srv/{BUNDLE_NAME[:-4]}.iso",
                                 mlnx_ofed_sha256=SHA.upper(), mlnx_ofed_flags=["--all"]),
                        {"versions": {}, "ofed": None})
    assert iso["bundle"]["iso"] is True and iso["bundle"]["checksum"] == f"sha256:{SHA}"
    assert iso["bundle"]["argv"] == [f"{unpacked}/mlnxofedinstall", "--all"]
    assert iso["mlnx_plan"]["would"].endswith("(installed: none)")
    # Another source installs no bundle, whatever ofed_info says.
    assert versions.plan(settings(), {"versions": {}, "ofed": None})["install_bundle"] is False


DOCA_LINE = ("rdma_ofed_source=doca needs rdma_ofed_doca_repo_url (the versioned repository for "
             "Debian 12.5) and rdma_ofed_doca_gpg_key_url (or rdma_ofed_doca_repo_trusted=true "
             "for a mirror you control)")
MLNX_LINE = ("rdma_ofed_source=mlnx_ofed needs rdma_ofed_mlnx_ofed_src, its sha256 in "
             "rdma_ofed_mlnx_ofed_sha256 (64 hex digits; an unchecked bundle is never "
             "installed), and rdma_ofed_mlnx_ofed_version when the file name is not "
             "MLNX_OFED_LINUX-<version>-<distro>-<arch>.tgz|.iso")


@pytest.mark.parametrize(("over", "errors"), [
    ({"source": "doca"}, [DOCA_LINE]),
    ({"source": "doca", "doca_repo_url": "https://m/"}, [DOCA_LINE]),
    ({"source": "doca", "doca_repo_url": "https://m/", "doca_gpg_key_url": "https://m/k"}, []),
    ({"source": "doca", "doca_repo_url": "https://m/", "doca_repo_trusted": True}, []),
    ({"source": "mlnx_ofed"}, [MLNX_LINE]),
    ({"source": "mlnx_ofed", "mlnx_ofed_src": BUNDLE_NAME}, [MLNX_LINE]),
    ({"source": "mlnx_ofed", "mlnx_ofed_src": BUNDLE_NAME, "mlnx_ofed_sha256": SHA[:-1]},
     [MLNX_LINE]),
    ({"source": "mlnx_ofed", "mlnx_ofed_src": BUNDLE_NAME, "mlnx_ofed_sha256": "zz" * 32},
     [MLNX_LINE]),
    ({"source": "mlnx_ofed", "mlnx_ofed_src": BUNDLE_NAME, "mlnx_ofed_sha256": SHA.upper()}, []),
    # A file name without the version needs it set by hand.
    ({"source": "mlnx_ofed", "mlnx_ofed_src": "ofed.tgz", "mlnx_ofed_sha256": SHA}, [MLNX_LINE]),
    ({"source": "mlnx_ofed", "mlnx_ofed_src": "ofed.tgz", "mlnx_ofed_sha256": SHA,
      "mlnx_ofed_version": "24.10-1.1.4.0"}, []),
    # The inbox source never restarts openibd, whatever is asked.
    ({"restart_openibd": True, "ssh_interface_rdma": True}, []),
])
def test_setting_errors(over: dict, errors: list[str]) -> None:
    s = settings(**over)
    assert versions.plan(s, {"versions": {}, "ofed": None})["setting_errors"] == errors
    assert versions.plan(s, {"versions": {}, "ofed": None})["refusal"] == "; ".join(errors)
    if errors:
        assert versions.plan(s, {"versions": {}, "ofed": None})["drift"] is True


RESTART_LINE = ("rdma_ofed: restarting openibd would take down ib0, the interface carrying this "
                "Ansible connection (it is on an HCA); use rdma_ofed_reboot_ok=true, or set "
                "rdma_ofed_allow_connection_interface_down=true if the host is reachable another "
                "way")


@pytest.mark.parametrize(("over", "refused"), [
    ({}, True),
    ({"reboot_ok": True}, False),
    ({"restart_openibd": False}, False),
    ({"ssh_interface_rdma": False}, False),
    ({"allow_connection_interface_down": True}, False),
])
def test_an_openibd_restart_that_cuts_the_connection_is_refused(over: dict, refused: bool) -> None:
    s = settings(**{"source": "doca", "doca_repo_url": "https://m/", "doca_repo_trusted": True,
                    "restart_openibd": True, "ssh_interface": "ib0",
                    "ssh_interface_rdma": True, **over})
    got = versions.plan(s, {"versions": {"doca-ofed": "1"}, "ofed": None})["setting_errors"]
    assert got == ([RESTART_LINE] if refused else [])
    if refused:
        unknown = versions.setting_errors({**s, "ssh_interface": ""}, None)
        assert unknown == [RESTART_LINE.replace("down ib0,", "down ?,")]


@pytest.mark.parametrize(("over", "activate"), [
    ({"source": "inbox", "restart_openibd": True, "reboot_ok": True}, ""),
    ({"source": "doca"}, "say"),
    ({"source": "doca", "restart_openibd": True}, "restart"),
    ({"source": "mlnx_ofed", "restart_openibd": True, "reboot_ok": True}, "reboot"),
    ({"source": "mlnx_ofed", "reboot_ok": True}, "reboot"),
])
def test_activation_of_a_new_driver(over: dict, activate: str) -> None:
    # The handlers' old rules: restart openibd when asked and no reboot is; reboot when
    # allowed; else say it is not active; nothing for inbox (userspace only).
    assert versions.plan(settings(**over), {"versions": {}, "ofed": None})["activate"] == activate


@pytest.mark.parametrize(("over", "key"), [
    ({"source": "doca"}, True), ({"source": "doca", "doca_repo_trusted": True}, False),
    ({"source": "inbox"}, False)])
def test_the_doca_key_is_installed_unless_the_mirror_is_trusted(over: dict, key: bool) -> None:
    assert versions.plan(settings(**over), {"versions": {}, "ofed": None})["doca_key"] is key


def test_bundle_check(tmp_path: Path) -> None:
    import hashlib

    bundle = tmp_path / BUNDLE_NAME
    bundle.write_bytes(b"not really a bundle\n")
    real = hashlib.sha256(bundle.read_bytes()).hexdigest()
    assert versions.bundle_check(str(bundle), real.upper()) == ""
    assert versions.bundle_check(str(bundle), SHA) == (
        f"rdma_ofed: sha256 mismatch for {bundle}: expected {SHA}, got {real}; "
        "nothing was installed")
    assert versions.bundle_check(str(tmp_path / "gone.tgz"), SHA) == (
        f"rdma_ofed: no such file on the control host: {tmp_path / 'gone.tgz'}; "
        "nothing was installed")


def test_after_an_inbox_install() -> None:
    none_yet = {"versions": {"rdma-core": "44.0-2", "ibverbs-providers": "44.0-2"}, "ofed": None}
    done = {"versions": dict.fromkeys(WANT, "44.0-2"), "ofed": None}
    got = versions.after(settings(), none_yet, done, check=False)
    assert got["verify"] == {"applies": True, "ok": True,
                             "msg": "inbox: 4 packages in place, rdma-core 44.0-2"}
    assert got["report"] == ("inbox: 4/4 packages installed (rdma-core 44.0-2); installed by this "
                             "run: perftest, python3-pyverbs (before: 2/4)")
    # The install left one out: the verification fails and names it.
    half = {"versions": {**none_yet["versions"], "perftest": "4.5-1"}, "ofed": None}
    got = versions.after(settings(inbox_version="44.0-3"), none_yet, half, check=False)
    assert got["verify"]["ok"] is False
    assert got["verify"]["msg"] == (
        "rdma_ofed: after the install, missing python3-pyverbs; wrong version rdma-core, "
        "ibverbs-providers")
    # --check: nothing was installed, so nothing is verified; the report says what it would do.
    got = versions.after(settings(), none_yet, none_yet, check=True)
    assert got["verify"]["applies"] is False
    assert got["report"].endswith("would install perftest, python3-pyverbs")
    assert versions.after(settings(), done, done, check=True)["verify"]["applies"] is True


def test_after_an_mlnx_ofed_install() -> None:
    s = settings(source="mlnx_ofed", mlnx_ofed_src=BUNDLE_NAME, mlnx_ofed_sha256=SHA)
    old = {"versions": {}, "ofed": versions.parse_ofed_info("MLNX_OFED_LINUX-23.10-1.1.9.0:")}
    new = {"versions": {}, "ofed": versions.parse_ofed_info("MLNX_OFED_LINUX-24.10-1.1.4.0:")}
    got = versions.after(s, old, new, check=False)
    assert got["verify"] == {"applies": True, "ok": True,
                             "msg": "mlnx_ofed: MLNX_OFED_LINUX-24.10-1.1.4.0 in place"}
    assert got["report"] == ("mlnx_ofed: MLNX_OFED_LINUX-24.10-1.1.4.0 installed, wanted "
                             "24.10-1.1.4.0; installed by this run (before: "
                             "MLNX_OFED_LINUX-23.10-1.1.9.0)")
    failed = versions.after(s, old, {"versions": {}, "ofed": None}, check=False)["verify"]
    assert failed == {"applies": True, "ok": False, "msg": (
        "rdma_ofed: ofed_info -s reports nothing, wanted MLNX_OFED 24.10-1.1.4.0")}
    assert versions.after(s, old, old, check=True)["verify"]["applies"] is False


# --- connection interface -----------------------------------------------------------------------
FACTS = {
    "interfaces": ["lo", "eth0", "ib0", "bond0"],
    "lo": {"ipv4": {"address": "127.0.0.1"}},
    "eth0": {"ipv4": {"address": "10.40.0.11"}, "ipv6": [{"address": "fe80::1%eth0"}]},
    "ib0": {"ipv4": {"address": "192.168.50.11"}},
    "bond0": {"ipv4": {"address": "10.50.0.11"}, "ipv4_secondaries": [{"address": "10.50.0.99"}]},
    "default_ipv4": {"interface": "eth0", "address": "10.40.0.11"},
}


def test_connection_interface_from_ssh_connection() -> None:
    facts = {**FACTS, "env": {"SSH_CONNECTION": "10.50.0.1 51234 10.50.0.99 22"}}
    assert plan.connection_interface(facts, "node1") == {
        "name": "bond0", "address": "10.50.0.99", "method": "SSH_CONNECTION"}


def test_connection_interface_from_ansible_host_then_default() -> None:
    facts = {**FACTS, "env": {}}
    assert plan.connection_interface(facts, "192.168.50.11")["name"] == "ib0"
    assert plan.connection_interface(facts, "fe80::1")["name"] == "eth0"
    # An address that is on no interface (NAT, a jump host): fall back to the default route.
    found = plan.connection_interface(facts, "203.0.113.5")
    assert found == {"name": "eth0", "address": "10.40.0.11", "method": "default IPv4 route"}
    assert plan.connection_interface(facts, "x", "local")["name"] is None


# --- layered module lists -----------------------------------------------------------------------
def test_combine_modules() -> None:
    base = ["ib_core", "ib_uverbs", "mlx5_core"]
    got = plan.combine_modules(
        base, ["ib_ipoib"], [{"name": "nvidia_peermem", "state": "absent"}],
        [{"name": "mlx5_core", "options": "prof_sel=2"}],
        [{"name": "ib-uverbs", "state": "absent"}])
    assert got == [{"name": "ib_core", "state": "present"},
                   {"name": "mlx5_core", "state": "present", "options": "prof_sel=2"},
                   {"name": "ib_ipoib", "state": "present"}]


@pytest.mark.parametrize(
    "bad", [[{"state": "present"}], ["mlx5 core"], [{"name": "x", "state": "gone"}]])
def test_combine_modules_rejects(bad: list) -> None:
    with pytest.raises(ValueError):
        plan.combine_modules(bad)


# --- kernel capabilities over a fake /proc and /sys ---------------------------------------------
def _write(root: Path, rel: str, text: str = "") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


STATUS_ROOT = "Name:\tpython3\nCapEff:\t000001ffffffffff\n"
STATUS_NOCAP = "Name:\tpython3\nCapEff:\t000001fffffeffff\n"  # bit 16 (CAP_SYS_MODULE) cleared


def test_module_loading_reasons(tmp_path: Path) -> None:
    # The lab's kernel: no /proc/modules at all.
    got = kcaps.module_loading(str(tmp_path), "6.1.0-18-amd64")
    assert got["can_load"] is False and "no /proc/modules" in got["reason"]
    _write(tmp_path, "proc/modules", "mlx5_ib 40960 0 - Live 0x0\n")
    _write(tmp_path, "proc/sys/kernel/modules_disabled", "1\n")
    assert "modules_disabled=1" in kcaps.module_loading(str(tmp_path))["reason"]
    _write(tmp_path, "proc/sys/kernel/modules_disabled", "0\n")
    _write(tmp_path, "proc/self/status", STATUS_NOCAP)
    assert "CAP_SYS_MODULE" in kcaps.module_loading(str(tmp_path))["reason"]
    _write(tmp_path, "proc/self/status", STATUS_ROOT)
    reason = kcaps.module_loading(str(tmp_path), "6.1.0-18-amd64")["reason"]
    assert "no /lib/modules/6.1.0-18-amd64" in reason
    (tmp_path / "lib/modules/6.1.0-18-amd64").mkdir(parents=True)
    assert kcaps.module_loading(str(tmp_path), "6.1.0-18-amd64")["can_load"] is True


def test_module_state(tmp_path: Path) -> None:
    _write(tmp_path, "sys/module/mlx5_core/initstate", "live\n")
    _write(tmp_path, "sys/module/ib_core/parameters/recv_queue_size", "512\n")
    assert kcaps.module_status("mlx5_core", str(tmp_path))["state"] == "loaded"
    assert kcaps.module_status("mlx5-core", str(tmp_path))["state"] == "loaded"
    assert kcaps.module_status("ib_core", str(tmp_path))["state"] == "builtin"
    assert kcaps.module_status("nvidia_peermem", str(tmp_path))["state"] == "absent"


def test_gpus(tmp_path: Path) -> None:
    assert kcaps.gpus(str(tmp_path))["count"] == 0
    for bus in ("0000:18:00.0", "0000:2a:00.0"):
        _write(tmp_path, f"proc/driver/nvidia/gpus/{bus}/information",
               f"Model: \t\t NVIDIA H200\nIRQ:   \t\t 123\nBus Location: \t {bus}\n")
    _write(tmp_path, "proc/driver/nvidia/version",
           "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build\n"
           "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
    for dev in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        _write(tmp_path, f"dev/{dev}")
    got = kcaps.gpus(str(tmp_path))
    assert got == {"count": 2, "models": ["NVIDIA H200", "NVIDIA H200"],
                   "devices": ["nvidia0", "nvidia1"], "driver_version": "570.86.15",
                   "source": "procfs", "unprobed": [], "elsewhere": [], "on_pci": None}


def test_netdev_drivers(tmp_path: Path) -> None:
    net = tmp_path / "sys/class/net"
    # bond0 over an mlx5 port (with an RDMA device) and a veth without a device.
    (net / "bond0").mkdir(parents=True)
    (net / "enp1s0f0np0/device/infiniband/mlx5_0").mkdir(parents=True)
    (tmp_path / "sys/bus/pci/drivers/mlx5_core").mkdir(parents=True)
    os.symlink(tmp_path / "sys/bus/pci/drivers/mlx5_core", net / "enp1s0f0np0/device/driver")
    os.symlink(net / "enp1s0f0np0", net / "bond0/lower_enp1s0f0np0")
    (net / "eth0").mkdir()
    got = kcaps.netdev_drivers("bond0", str(tmp_path))
    assert got["rdma_backed"] is True
    assert [(d["name"], d["driver"], d["rdma"]) for d in got["devices"]] == [
        ("bond0", None, False), ("enp1s0f0np0", "mlx5_core", True)]
    assert kcaps.netdev_drivers("eth0", str(tmp_path))["rdma_backed"] is False
    assert kcaps.netdev_drivers("nope", str(tmp_path))["exists"] is False


def test_probe_module_returns_the_parsed_state_and_plans_from_it(tmp_path: Path) -> None:
    # As Ansible runs it on a node: the state the role reports (before and after an install)
    # is the module's own parse of dpkg-query/rpm and ofed_info -s, the one the plan is made from.
    import json
    import subprocess
    import sys

    from rdmaprov.resources import collection_root

    (tmp_path / "ansible_collections" / "rdmaprov").mkdir(parents=True)
    (tmp_path / "ansible_collections" / "rdmaprov" / "cluster").symlink_to(collection_root())
    module = collection_root() / "plugins" / "modules" / "rdma_ofed_probe.py"

    def run(args: dict) -> dict:
        argfile = tmp_path / "args.json"
        argfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
        proc = subprocess.run([sys.executable, str(module), str(argfile)], capture_output=True,
                              text=True, check=False,
                              env={"PYTHONPATH": str(tmp_path), "PATH": os.environ["PATH"]})
        return json.loads(proc.stdout)

    read_only = run({"packages": ["no-such-package-rdmaprov"]})
    assert read_only["state"] == {"versions": versions.parse_package_query(
        read_only["packages_stdout"]), "ofed": versions.parse_ofed_info(read_only["ofed_info"])}
    assert "no-such-package-rdmaprov" not in read_only["state"]["versions"]
    assert "plan" not in read_only
    s = settings(inbox_packages=["no-such-package-rdmaprov"], doca_repo_trusted=None)
    del s["doca_repo_trusted"]  # a setting left out takes the module's default
    planned = run({"settings": s})
    assert planned["plan"] == versions.package_plan(["no-such-package-rdmaprov"],
                                                    planned["state"]["versions"])
    assert planned["plan"]["missing"] == ["no-such-package-rdmaprov"]
    assert {k: planned[k] for k in ("drift", "setting_errors", "request")} == {
        "drift": True, "setting_errors": [], "request": ["no-such-package-rdmaprov"]}
    # Called again after the install path with the first call's state: the verification and
    # the report, not a plan.
    again = run({"settings": s, "before": planned["state"]})
    assert "plan" not in again and again["verify"]["ok"] is False
    assert again["report"].startswith("inbox: 0/1 packages installed; missing "
                                      "no-such-package-rdmaprov; installed by this run")
    bad = run({"settings": {**s, "source": "apt"}})
    assert bad["failed"] is True and "source" in bad["msg"]
    # On the control host (delegate_to localhost): the bundle's sha256 alone, no package read.
    import hashlib

    bundle = tmp_path / BUNDLE_NAME
    bundle.write_bytes(b"not really a bundle\n")
    real = hashlib.sha256(bundle.read_bytes()).hexdigest()
    local = {**s, "source": "mlnx_ofed", "mlnx_ofed_src": str(bundle)}
    wrong = run({"settings": {**local, "mlnx_ofed_sha256": SHA}, "check_bundle": True})
    assert wrong["failed"] is True and wrong["msg"] == versions.bundle_check(str(bundle), SHA)
    right = run({"settings": {**local, "mlnx_ofed_sha256": real}, "check_bundle": True})
    assert "failed" not in right and "state" not in right and right["changed"] is False


def test_the_package_path_and_the_doca_repository_from_the_plan() -> None:
    state = {"versions": {}, "ofed": None}
    inbox = versions.plan(settings(), state)
    assert inbox["install_packages"] is True and inbox["package_tasks"] == "setup-Debian.yml"
    assert inbox["doca_repo"]["configure"] is False
    assert versions.plan(settings(**ROCKY9), state)["package_tasks"] == "setup-RedHat.yml"
    signed = versions.plan(settings(source="doca", doca_repo_url="https://m/d/",
                                    doca_gpg_key_url="https://m/key"), state)["doca_repo"]
    assert signed == {"configure": True, "url": "https://m/d/", "trusted": False,
                      "gpgcheck": True, "signed_by": "/etc/apt/keyrings/rdmaprov-doca.asc",
                      "gpgkey": "https://m/key", "key_url": "https://m/key"}
    # A trusted mirror: no signature asked for, no key (the tasks leave signed_by/gpgkey out).
    trusted = versions.plan(settings(source="doca", doca_repo_url="https://m/d/",
                                     doca_repo_trusted=True), state)["doca_repo"]
    assert (trusted["trusted"], trusted["gpgcheck"], trusted["signed_by"], trusted["gpgkey"]) == (
        True, False, "", "")


@pytest.mark.parametrize(("python_apt", "check", "can"), [
    (True, True, True), (True, False, True), (False, False, True), (False, True, False)])
def test_apt_acts_under_check_only_with_python_apt(python_apt: bool, check: bool,
                                                   can: bool) -> None:
    got = versions.plan(settings(python_apt=python_apt, check_mode=check),
                        {"versions": {}, "ofed": None})
    assert got["can_install"] is can


def _bundle(src: str, **over: object) -> dict:
    return versions.plan(settings(source="mlnx_ofed", mlnx_ofed_src=src, mlnx_ofed_sha256=SHA,
                                  **over), {"versions": {}, "ofed": None})["bundle"]


def test_bundle_steps_fetch_or_copy_then_unpack_or_mount_then_install() -> None:
    work = "/var/cache/rdmaprov/mlnx_ofed"
    stem = f"{work}/{BUNDLE_NAME[:-4]}"
    remote = _bundle(f"https://mirror/x/{BUNDLE_NAME}")
    steps = versions.bundle_steps(remote, check=False)
    assert [(s["name"], s["action"]) for s in steps] == [
        ("Create the work directory", "file"), ("Fetch the bundle and check its sha256", "get_url"),
        ("Unpack the tarball", "unarchive"), ("Run mlnxofedinstall", "command")]
    assert steps[0]["args"] == {"path": work, "state": "directory", "mode": "0755"}
    assert steps[1]["args"] == {"url": f"https://mirror/x/{BUNDLE_NAME}",
                                "dest": f"{work}/{BUNDLE_NAME}", "checksum": f"sha256:{SHA}",
                                "mode": "0644"}
    assert steps[2]["args"] == {"src": f"{work}/{BUNDLE_NAME}", "dest": work, "remote_src": True,
                                "creates": f"{stem}/mlnxofedinstall"}
    assert steps[3]["args"] == {"argv": [f"{stem}/mlnxofedinstall", "--force",
                                         "--without-fw-update"]}
    assert [s.get("installs", False) for s in steps] == [False, False, False, True]
    assert versions.bundle_cleanup(remote, check=False) == []
    # --check: only the directory and the fetch are checked; nothing is unpacked or run.
    assert [s["action"] for s in versions.bundle_steps(remote, check=True)] == ["file", "get_url"]
    # A bundle on the control host is copied; an ISO is mounted, and unmounted afterwards.
    iso = _bundle(f"/srv/{BUNDLE_NAME[:-4]}.iso")
    steps = versions.bundle_steps(iso, check=False)
    assert [s["name"] for s in steps] == [
        "Create the work directory", "Copy the verified bundle to the node",
        "Create the mount point", "Mount the ISO", "Run mlnxofedinstall"]
    assert steps[1]["args"] == {"src": f"/srv/{BUNDLE_NAME[:-4]}.iso",
                                "dest": f"{stem}.iso", "mode": "0644"}
    assert steps[2]["args"] == {"path": stem, "state": "directory"}
    assert steps[3]["args"] == {"argv": ["mount", "-o", "loop,ro", f"{stem}.iso", stem],
                                "creates": f"{stem}/mlnxofedinstall"}
    assert versions.bundle_cleanup(iso, check=False) == [
        {"name": "Unmount the ISO", "action": "command",
         "args": {"argv": ["umount", stem], "removes": f"{stem}/mlnxofedinstall"}}]
    assert versions.bundle_cleanup(iso, check=True) == []


def test_bundle_failure_names_the_step_and_whether_anything_was_installed() -> None:
    fetch = {"failed": True, "msg": "The checksum for /x did not match 00; it was ab."}
    assert versions.bundle_failure("Fetch the bundle and check its sha256", fetch, False) == (
        "rdma_ofed: Fetch the bundle and check its sha256 failed: The checksum for /x did not "
        "match 00; it was ab.; nothing was installed")
    run = {"failed": True, "msg": "non-zero return code", "rc": 1,
           "stderr_lines": ["Checking...", "Error: kernel 6.1 is not supported"]}
    assert versions.bundle_failure("Run mlnxofedinstall", run, True) == (
        "rdma_ofed: Run mlnxofedinstall failed: non-zero return code Error: kernel 6.1 is not "
        "supported")
    assert versions.bundle_failure("Mount the ISO", {"stderr": "mount: no loop\n"}, False) == (
        "rdma_ofed: Mount the ISO failed: mount: no loop; nothing was installed")
