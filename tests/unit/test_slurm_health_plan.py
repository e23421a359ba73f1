"""The slurm_health role's plan (plugins/module_utils/slurm_health.py): what to install, the
hooks and slurm.conf's lines, check.yml, what to refuse and why, and the line to print; the
node probe on a temporary root, and the module as Ansible runs it."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import yaml

from rdmaprov.collection import slurm_health as sh

ROOT = Path(__file__).resolve().parents[2]
SHA = "ab" * 32
WHEEL = "rdmaprov-0.2.0-py3-none-any.whl"


def settings(**over) -> dict:
    """The role's defaults (roles/slurm_health/defaults/main.yml), as the probe call passes them."""
    defaults = yaml.safe_load((ROOT / "roles/slurm_health/defaults/main.yml").read_text())
    base = {k[len("slurm_health_"):]: v for k, v in defaults.items()}
    return {k: v for k, v in {**base, "host": "node1", "check_mode": False, **over}.items()
            if k in sh.SETTINGS}


def plan(probe=None, controller=None, python_apt=True, **over) -> dict:
    return sh.plan(probe or {}, settings(**over), controller, python_apt)


def test_settings_are_the_role_variables_and_the_module_options():
    defaults = yaml.safe_load((ROOT / "roles/slurm_health/defaults/main.yml").read_text())
    names = {k[len("slurm_health_"):] for k in defaults}
    assert set(sh.SETTINGS) - names == {"host", "check_mode", "managed"}
    tree = ast.parse((ROOT / "plugins/modules/slurm_health_probe.py").read_text())
    spec = next(n.value for n in tree.body if isinstance(n, ast.Assign)
                and getattr(n.targets[0], "id", "") == "SETTINGS_SPEC")
    assert [k.value for k in spec.keys] == list(sh.SETTINGS)


def test_defaults_print_the_prolog_line_and_refuse_nothing():
    got = plan()
    assert got["refuse_all"] == "" and got["errors"] == []
    assert got["conf_lines"] == ["Prolog=/etc/slurm/rdmaprov-prolog.sh"]
    assert got["scripts"] == ["prolog"] and got["nhc"] is False
    assert got["expect"] == {} and got["expect_source"] == "slurm_health_expect"
    assert got["report"] == (
        "Add to slurm.conf on every node and the controller, then scontrol reconfigure: "
        "Prolog=/etc/slurm/rdmaprov-prolog.sh (SchedulerParameters=nohold_on_prolog_fail lets a "
        "job whose prolog failed start elsewhere instead of waiting held)")
    assert got["install"]["commands"] == [] and got["install"]["venv_package"] is False


def test_hooks_give_their_lines_scripts_and_nhc():
    got = plan({"nhc_dir": True}, hooks=["healthcheck", "nhc", "prolog"], script_dir="/s",
               healthcheck_interval=60)
    assert got["conf_lines"] == ["Prolog=/s/rdmaprov-prolog.sh",
                                 "HealthCheckProgram=/s/rdmaprov-healthcheck.sh",
                                 "HealthCheckInterval=60"]
    assert got["conf_block"] == "\n".join(got["conf_lines"])
    assert got["scripts"] == ["healthcheck", "prolog"] and got["nhc"] is True
    assert " | HealthCheckInterval=60 ; and to /etc/nhc/nhc.conf: * || check_rdmaprov (Sched" \
        in got["report"]
    assert plan(edit_slurm_conf=True, hooks=[], **{})["report"] == ""


def test_settings_that_cannot_work_are_refused_in_one_line():
    want = ("slurm_health: slurm_health_install=wheelhouse needs slurm_health_wheelhouse (a "
            "directory of wheels on the controller); slurm_health_budget must be >= 0 and "
            "slurm_health_healthcheck_interval > 0")
    assert plan(budget=-1)["errors"] == [want]
    assert plan(healthcheck_interval=0)["errors"] == [want]
    assert want in plan(install="wheelhouse", wheelhouse="")["errors"]


def test_expectations_class_file_with_the_role_value_on_top():
    ctl = {"expect_index": True, "expect_file": "ndr.yml", "expect_found": True,
           "expect": {"ports": 3, "mtu": 4092, "memlock": "unlimited"}}
    got = plan(controller=ctl, expect_dir="exp", expect={"memlock": "0"})
    assert got["errors"] == [] and got["refuse_all"] == ""
    assert got["expect"] == {"ports": 3, "mtu": 4092, "memlock": "0"}
    assert got["expect_source"] == "slurm_health_expect_dir ndr.yml, slurm_health_expect"
    # an empty class file is no expectation of its own
    empty = plan(controller={**ctl, "expect": None}, expect_dir="exp", expect={"mtu": 1500})
    assert empty["expect"] == {"mtu": 1500} and empty["errors"] == []


def test_expectations_refusals():
    no_index = plan(controller={"expect_index": False}, expect_dir="/x/exp")
    assert no_index["refuse_all"] == ("slurm_health_expect_dir /x/exp: no hosts.yml in it (write "
                                      "it with rdmaprov probe INVENTORY --write-expectations DIR)")
    assert no_index["errors"] == []
    unnamed = plan(controller={"expect_index": True, "expect_file": ""}, expect_dir="/x/exp")
    assert unnamed["refuse_all"] == ""
    assert unnamed["errors"] == [
        "slurm_health_expect_dir /x/exp: node1 is not in its hosts.yml (not probed, or no RDMA "
        "port); run rdmaprov probe INVENTORY --write-expectations again, or leave "
        "slurm_health_expect_dir empty for this host"]
    gone = plan(controller={"expect_index": True, "expect_file": "a.yml", "expect_found": False},
                expect_dir="/x/exp")
    assert gone["errors"] == ["slurm_health_expect_dir /x/exp: a.yml, which its hosts.yml names "
                              "for node1, is not in it (write it with rdmaprov probe INVENTORY "
                              "--write-expectations DIR)"]
    odd = plan(controller={"expect_index": True, "expect_file": "a.yml", "expect_found": True,
                           "expect": ["mtu"]}, expect_dir="/x/exp")
    assert odd["errors"] == ["slurm_health_expect_dir /x/exp: a.yml is not a mapping of check keys"]


def test_expect_file_is_the_base_name_the_index_gives():
    index = {"hosts": {"node1": "sub/ndr.yml", "node2": "hdr.yml"}, "differs": []}
    assert sh.expect_file(index, "node1") == "ndr.yml"
    assert sh.expect_file(index, "node3") == ""
    assert sh.expect_file({"hosts": None}, "node1") == ""
    assert sh.expect_file(None, "node1") == ""


def test_wheelhouse_needs_one_rdmaprov_wheel():
    many = {"wheels": [WHEEL, "rdmaprov-0.1.0-py3-none-any.whl", "rich-13.whl"]}
    for ctl in (many, {"wheels": ["rich-13.whl"]}, {}):
        got = plan({"venv_ok": True, "installed": ""}, ctl, install="wheelhouse",
                   wheelhouse="wh")
        assert got["errors"] == ["slurm_health_wheelhouse wh: no single rdmaprov-*.whl in it"]
    assert sh.rdmaprov_wheels(["/w/" + WHEEL, "/w/rdmaprov_extra-1.whl", "x.whl"]) == [WHEEL]


def test_install_runs_pip_only_for_a_build_not_in():
    ctl = {"wheels": [WHEEL, "rich-13.whl"], "wheel_sha256": SHA}
    fresh = plan({"venv_ok": True, "installed": ""}, ctl, install="wheelhouse", wheelhouse="wh",
                 venv="/opt/r")
    assert fresh["errors"] == []
    wheel = f"/opt/r-wheelhouse/{WHEEL}"
    assert fresh["install"] == {
        "venv_package": False, "wheelhouse": "/opt/r-wheelhouse", "checksum": SHA,
        "commands": [["/opt/r/bin/pip", "install", "--quiet", "--no-index", "--find-links",
                      "/opt/r-wheelhouse", wheel],
                     ["/opt/r/bin/pip", "install", "--quiet", "--no-index", "--no-deps",
                      "--force-reinstall", wheel]]}
    same = plan({"venv_ok": True, "installed": SHA}, ctl, install="wheelhouse", wheelhouse="wh")
    assert same["install"]["commands"] == []


def test_python3_venv_is_installed_where_venv_fails_unless_check_mode_lacks_apt():
    ctl = {"wheels": [WHEEL], "wheel_sha256": SHA}
    args = {"install": "wheelhouse", "wheelhouse": "wh"}
    assert plan({"venv_ok": False}, ctl, **args)["install"]["venv_package"] is True
    assert plan({"venv_ok": False}, ctl, False, **args)["install"]["venv_package"] is True
    assert plan({"venv_ok": False}, ctl, False, check_mode=True,
                **args)["install"]["venv_package"] is False
    assert plan({"venv_ok": True}, ctl, **args)["install"]["venv_package"] is False


def test_nhc_hook_without_nhc_is_refused():
    assert plan({"nhc_dir": False}, hooks=["nhc"], nhc_dir="/etc/nhc/scripts")["errors"] == [
        "slurm_health: hook nhc, but /etc/nhc/scripts does not exist (is LBNL NHC installed?)"]


def test_slurm_conf_keys_set_outside_the_block_are_refused():
    conf = ("ClusterName=lab\n  prolog = /site/prolog\n"
            "# BEGIN rdmaprov slurm_health\nHealthCheckProgram=/x\n# END rdmaprov slurm_health\n")
    got = plan({"slurm_conf": conf}, hooks=["prolog", "healthcheck"], edit_slurm_conf=True)
    assert got["errors"] == [
        "/etc/slurm/slurm.conf already sets prolog: merge rdmaprov's hook into it by hand (e.g. "
        "Prolog=/etc/slurm/prolog.d/*) and leave slurm_health_edit_slurm_conf off"]
    ours = ("ClusterName=lab\n# BEGIN rdmaprov slurm_health\nProlog=/x\n"
            "# END rdmaprov slurm_health\n")
    assert plan({"slurm_conf": ours}, edit_slurm_conf=True)["errors"] == []
    assert sh.taken_keys("HealthCheckInterval=5\nprolog=/p\n",
                         ["Prolog=/a", "HealthCheckProgram=/b", "HealthCheckInterval=300"]) == \
        ["prolog", "healthcheckinterval"]
    missing = plan({"slurm_conf": None}, edit_slurm_conf=True, slurm_conf="/etc/slurm/x.conf")
    assert missing["errors"] == ["/etc/slurm/x.conf cannot be read: is Slurm configured on this "
                                 "node? (or leave slurm_health_edit_slurm_conf off)"]


def test_check_yml_is_the_header_and_the_keys_as_yaml():
    # The text the role's copy wrote from a block scalar with to_nice_yaml(indent=2), or {}.
    def dump(data, indent):
        return yaml.safe_dump(data, indent=indent, default_flow_style=False, sort_keys=True)

    head = "# Managed by rdmaprov.cluster.slurm_health (SRC): rdmaprov check's expectations.\n"
    assert sh.check_yml({"mtu": 1500, "interfaces": ["eth1"], "memlock": "0"}, "SRC", dump) == (
        head + "interfaces:\n- eth1\nmemlock: '0'\nmtu: 1500\n")
    assert sh.check_yml({}, "SRC", dump) == head + "{}\n"


def test_refusals_come_in_the_roles_order():
    got = plan({"nhc_dir": False, "slurm_conf": "Prolog=/p\n"}, {"wheels": []}, budget=-1,
               install="wheelhouse", wheelhouse="wh", hooks=["prolog", "nhc"],
               edit_slurm_conf=True)
    assert [e.split(" ")[0] for e in got["errors"]] == [
        "slurm_health:", "slurm_health_wheelhouse", "slurm_health:", "/etc/slurm/slurm.conf"]
    # the assert's one line: the refusals joined, "" for none
    assert got["error"] == "; ".join(got["errors"]) and got["error"].count("; ") >= 3
    assert plan()["error"] == ""


def test_probe_reads_only_what_the_settings_need(tmp_path: Path):
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / sh.INSTALLED).write_text(SHA + "\n")
    conf = tmp_path / "slurm.conf"
    conf.write_text("Prolog=/p\n")
    (tmp_path / "file").write_text("")
    # the directories the settings name, each as the node has it
    assert sh.probe(settings(config_dir=str(tmp_path), script_dir=str(tmp_path / "no"),
                             textfile_dir=str(tmp_path / "file"))) == {"dirs": {
        str(tmp_path): "dir", str(tmp_path / "no"): "missing", str(tmp_path / "file"): "other"}}
    got = sh.probe(settings(install="wheelhouse", venv=str(venv), hooks=["nhc"],
                            nhc_dir=str(tmp_path / "none"), edit_slurm_conf=True,
                            slurm_conf=str(conf)))
    assert got["installed"] == SHA and got["nhc_dir"] is False
    assert got["dirs"] == {"/etc/rdmaprov": "missing"}  # no script hook: no script directory
    assert got["slurm_conf"] == "Prolog=/p\n" and isinstance(got["venv_ok"], bool)
    assert sh.probe(settings(install="wheelhouse", venv=str(tmp_path / "no")))["installed"] == ""


def _module(tmp_path: Path, args: dict) -> tuple[int, dict]:
    colls = tmp_path / "collections"
    (colls / "ansible_collections/rdmaprov").mkdir(parents=True)
    (colls / "ansible_collections/rdmaprov/cluster").symlink_to(ROOT)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(colls), ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="false", ANSIBLE_NOCOLOR="1",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    argv = [str(Path(sys.executable).parent / "ansible"), "localhost", "-c", "local",
            "-m", "rdmaprov.cluster.slurm_health_probe", "-a", json.dumps(args)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120,
                          cwd=tmp_path, check=False)
    _, sep, body = proc.stdout.partition("localhost | ")
    assert sep, proc.stdout + proc.stderr
    return proc.returncode, json.loads(body.split("=> ", 1)[1])


def test_module_reads_the_controllers_files_through_its_action_plugin(tmp_path: Path):
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "hosts.yml").write_text("hosts:\n  localhost: ndr.yml\ndiffers: []\n")
    (exp / "ndr.yml").write_text("# class\nports: 3\nmtu: 4092\n")
    wh = tmp_path / "wh"
    wh.mkdir()
    (wh / WHEEL).write_bytes(b"wheel")
    (wh / "rich-13.whl").write_bytes(b"rich")
    args = {"settings": {"host": "localhost", "expect_dir": str(exp), "expect": {"mtu": 1500},
                         "install": "wheelhouse", "wheelhouse": str(wh),
                         "venv": str(tmp_path / "venv")}}
    rc, res = _module(tmp_path / "a", args)
    assert rc == 0, res
    got = res["plan"]
    assert got["errors"] == [] and got["expect"] == {"ports": 3, "mtu": 1500}
    # check.yml's text, written by the action with Ansible's to_nice_yaml
    assert got["check_yml"] == ("# Managed by rdmaprov.cluster.slurm_health (slurm_health_"
                                "expect_dir ndr.yml, slurm_health_expect): rdmaprov check's "
                                "expectations.\nmtu: 1500\nports: 3\n")
    assert got["install"]["checksum"] == hashlib.sha256(b"wheel").hexdigest()
    wheel = f"{tmp_path}/venv-wheelhouse/{WHEEL}"
    assert [c[-1] for c in got["install"]["commands"]] == [wheel, wheel]
    # not named in hosts.yml; a directory without hosts.yml (refused for the whole play)
    rc, res = _module(tmp_path / "b", {"settings": {**args["settings"], "host": "node9"}})
    assert rc == 0 and "node9 is not in its hosts.yml" in res["plan"]["errors"][0], res
    assert res["plan"]["check_yml"].endswith("): rdmaprov check's expectations.\n{}\n"), res
    rc, res = _module(tmp_path / "c", {"settings": {**args["settings"],
                                                    "expect_dir": str(wh)}})
    assert rc == 0 and res["plan"]["refuse_all"].endswith("no hosts.yml in it (write it with "
                                                          "rdmaprov probe INVENTORY "
                                                          "--write-expectations DIR)"), res
    # a class file that is not YAML: one line naming it
    (exp / "ndr.yml").write_text("ports: [3\n")
    rc, res = _module(tmp_path / "d", args)
    assert rc != 0 and res["msg"].startswith(f"{exp / 'ndr.yml'}: not YAML ("), res


def test_verify_runs_each_installed_hook_as_slurmd_runs_it(tmp_path: Path):
    cmd = tmp_path / "rdmaprov"
    calls = []

    def run(rc, out, err="warn\n"):
        return lambda argv: calls.append(argv) or (rc, out, err)

    scripts = tmp_path / "slurm"
    s = settings(rdmaprov=str(cmd), config_dir="/etc/rdmaprov", script_dir=str(scripts),
                 hooks=["prolog", "healthcheck", "nhc"])
    missing = ("does not exist on this node: set slurm_health_install=node_tool (the node_tool "
               "role installs it) or point slurm_health_rdmaprov at an installed rdmaprov")
    got = sh.verify(s, run(0, ""), "n1")
    assert (got["failure"], got["state"]) == (f"{cmd} {missing}", "not_run") and calls == []
    # --check: not refused, nothing run, where the hooks are not there or would change
    assert sh.verify({**s, "check_mode": True}, run(0, ""), "n1")["failure"] == ""
    cmd.write_text("")
    scripts.mkdir()
    for h in ("prolog", "healthcheck"):
        (scripts / f"rdmaprov-{h}.sh").write_text("")
    got = sh.verify({**s, "check_mode": True}, run(0, ""), "n1", pending=True)
    assert got["state"] == "not_run" and got["verdict"].startswith("not run: --check") and \
        calls == []
    got = sh.verify(s, run(0, ""), "n1")
    # env -i: no PATH, as slurmd runs its Prolog and HealthCheckProgram; the script itself
    assert calls == [
        ["env", "-i", "SLURMD_NODENAME=n1", "SLURM_SCRIPT_CONTEXT=prolog_slurmd",
         f"{scripts}/rdmaprov-prolog.sh", "--verify"],
        ["env", "-i", "SLURMD_NODENAME=n1", f"{scripts}/rdmaprov-healthcheck.sh", "--verify"]]
    assert (got["failure"], got["verdict"], got["state"]) == ("", "healthy", "healthy")
    assert [r["hook"] for r in got["runs"]] == ["prolog", "healthcheck"]
    got = sh.verify(s, run(2, "[config] eth1 MTU 9000, want 1500\n"), "n1")
    assert got["verdict"] == "unhealthy: [config] eth1 MTU 9000, want 1500"
    assert (got["failure"], got["state"]) == ("", "unhealthy")
    assert got["reason"] == "[config] eth1 MTU 9000, want 1500"
    assert got["runs"][0]["stderr"] == "warn"
    # a configuration error: the host fails, naming the hook, how it ran and the check's line
    calls.clear()
    err = "rdmaprov: error: --prometheus /t: its directory does not exist\n"
    got = sh.verify(s, run(1, "", err), "n1")
    assert got["state"] == "config_error" and len(calls) == 1
    assert got["failure"] == (
        f"slurm_health: the prolog hook as slurmd runs it (env -i SLURMD_NODENAME=n1 "
        f"SLURM_SCRIPT_CONTEXT=prolog_slurmd {scripts}/rdmaprov-prolog.sh --verify) exits 1, "
        "a configuration error that would drain every node it runs on: rdmaprov: error: "
        "--prometheus /t: its directory does not exist")
    assert "\n" not in sh.verify(s, run(127, "", "a\x1b[2Jb\nsh: 1: x: not found\n"),
                                  "n1")["failure"]
    # NHC alone: the plug-in's command (slurm.env, then check --nhc), as NHC runs it
    calls.clear()
    sh.verify({**s, "hooks": ["nhc"]}, run(0, ""), "n1")
    assert calls == [["env", "-i", "SLURMD_NODENAME=n1", "/bin/sh", "-c", sh.NHC_SH, "sh",
                      "/etc/rdmaprov/slurm.env"]]


def test_the_hook_scripts_take_verify_and_drain_without_it(tmp_path: Path):
    """The installed scripts (files/), run with a stand-in rdmaprov: --verify is the same check
    without --drain, its line and exit code passed on; without it, as before."""
    fake = tmp_path / "rdmaprov"
    fake.write_text("#!/bin/sh\necho \"$*\" >> \"$LOG\"\necho '[config] no RDMA devices'\n"
                    "exit 2\n")
    fake.chmod(0o755)
    log = tmp_path / "log"
    for hook, want_rc in (("prolog", 1), ("healthcheck", 0)):
        script = str(ROOT / f"roles/slurm_health/files/rdmaprov-{hook}.sh")
        env = {"RDMAPROV": str(fake), "LOG": str(log)}
        dry = subprocess.run(["/bin/sh", script, "--verify"], env=env, capture_output=True,
                             text=True, check=False)
        assert (dry.returncode, dry.stdout) == (2, "[config] no RDMA devices\n"), dry
        real = subprocess.run(["/bin/sh", script], env=env, capture_output=True, text=True,
                              check=False)
        assert real.returncode == want_rc, real
        assert log.read_text().splitlines()[-2:] == ["check --nhc", "check --nhc --drain"]


def test_directories_the_settings_name_are_made_or_refused():
    conf = "/etc/rdmaprov"
    dirs = {conf: "dir", "/etc/slurm": "dir", "/var/lib/ne/textfile": "missing"}
    got = plan({"dirs": dirs}, textfile_dir="/var/lib/ne/textfile")
    steps = [st for st in got["configure_steps"] if st["module"] == "file"]
    assert [st["args"] for st in steps] == [
        {"path": conf, "state": "directory", "mode": "0755"},
        {"path": "/var/lib/ne/textfile", "state": "directory", "owner": "root",
         "group": "root", "mode": "0755"}]
    # before slurm.env, which names it
    labels = [st["label"] for st in got["configure_steps"]]
    assert labels.index("/var/lib/ne/textfile") < labels.index(f"{conf}/slurm.env")
    # one that is there keeps its owner and mode: no step
    there = plan({"dirs": {**dirs, "/var/lib/ne/textfile": "dir"}},
                 textfile_dir="/var/lib/ne/textfile")
    assert [st["label"] for st in there["configure_steps"] if st["module"] == "file"] == [conf]
    assert plan({"dirs": {**dirs, "/etc/slurm": "missing"}})["configure_steps"][1]["label"] \
        == "/etc/slurm"
    assert plan({"dirs": {**dirs, "/t": "other"}}, textfile_dir="/t")["errors"] == [
        "slurm_health_textfile_dir /t: there, but not a directory"]
    assert plan({"dirs": dirs}, textfile_dir="t/x")["errors"] == [
        "slurm_health_textfile_dir t/x: not an absolute path (the hooks run from slurmd's "
        "directory)"]


def _v(state, reason=""):
    return {"state": state, "reason": reason}


def test_arm_refuses_a_check_that_would_drain_most_nodes():
    rdma = "[config] no RDMA devices"
    every = {f"node{i}": _v("unhealthy", rdma) for i in (3, 1, 2)}
    got = sh.arm(every)
    line = f"would drain 3 of 3 nodes: {rdma} (node1, node2, node3)"
    assert got["refuse"] == (
        f"slurm_health: the check, as slurmd runs it, {line}; the hooks are not armed: fix what "
        "a healthy node is (slurm_health_expect, slurm_health_expect_dir) or set "
        "slurm_health_force: true to arm them anyway")
    assert sh.arm(every, force=True) == {"refuse": "", "warning": f"slurm_health_force: arming "
                                         f"although it {line}", "msg": f"slurm_health_force: "
                                         f"arming although it {line}"}
    # more than half, reasons grouped
    two = {"a": _v("unhealthy", "x"), "b": _v("unhealthy", "y"), "c": _v("healthy")}
    assert "would drain 2 of 3 nodes: x (a); y (b);" in sh.arm(two)["refuse"]
    # a few sick nodes are findings: armed, named
    one = {"a": _v("unhealthy", "x"), "b": _v("healthy"), "c": _v("healthy")}
    got = sh.arm(one)
    assert got["refuse"] == "" and got["warning"] == (
        "arming: the hooks drain 1 of 3 nodes when they run: x (a)")
    assert sh.arm({"a": _v("unhealthy", "x"), "b": _v("healthy")})["refuse"] == ""  # half
    assert sh.arm({"a": _v("unhealthy", "x")})["refuse"].startswith(
        "slurm_health: the check, as slurmd runs it, would drain 1 of 1 nodes: x (a);")
    # hosts that did not run (--check, a failed host, verify off) do not count
    assert sh.arm({"a": None, "b": _v("not_run"), "c": _v("healthy")}) == {
        "refuse": "", "warning": "", "msg": "proven: 1 of 1 nodes healthy"}
    assert sh.arm({"a": None})["refuse"] == "" and sh.arm({})["refuse"] == ""


def test_module_verify_fails_on_a_configuration_error(tmp_path: Path):
    scripts = tmp_path / "s"
    scripts.mkdir()
    hook = scripts / "rdmaprov-prolog.sh"
    # what the prolog sees: its arguments and its environment (sh searches its own default
    # path, and exports none: a child sees no PATH), as the check's line
    hook.write_text("#!/bin/sh\necho \"[config] $* PATH=$(env | grep -c ^PATH=) "
                    "$SLURMD_NODENAME\"\nexit ${RC:-2}\n")
    hook.chmod(0o755)
    args = {"verify": True, "settings": {"rdmaprov": str(hook), "config_dir": "/c",
                                         "script_dir": str(scripts)}}
    rc, res = _module(tmp_path / "a", args)
    node = socket.gethostname().split(".")[0]
    assert rc == 0 and res["verdict"] == f"unhealthy: [config] --verify PATH=0 {node}", res
    assert res["state"] == "unhealthy" and "plan" not in res
    hook.write_text("#!/bin/sh\necho broken >&2\nexit 1\n")
    rc, res = _module(tmp_path / "b", args)
    assert rc != 0 and res["msg"].startswith("slurm_health: the prolog hook as slurmd runs it ")
    assert res["msg"].endswith("exits 1, a configuration error that would drain every node it "
                               "runs on: broken"), res
    # A node without the command fails the module with the line (no assert of its own).
    rc, res = _module(tmp_path / "c", {**args, "settings": {**args["settings"],
                                                            "rdmaprov": str(tmp_path / "no")}})
    assert rc != 0 and res["msg"] == res["failure"], res
    assert res["msg"].endswith("does not exist on this node: set slurm_health_install=node_tool "
                               "(the node_tool role installs it) or point slurm_health_rdmaprov "
                               "at an installed rdmaprov")


def test_the_action_fills_python_apt_from_the_hosts_fact(monkeypatch):
    import importlib
    from unittest import mock

    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.action import ActionBase
    from ansible.template import Templar

    mod = importlib.import_module("ansible_collections.rdmaprov.cluster.plugins.action."
                                  "slurm_health_probe")
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})

    def python_apt(args, variables):
        task = mock.MagicMock()
        task.args = args
        action = mod.ActionModule(task, mock.MagicMock(), mock.MagicMock(), None,
                                  Templar(loader=DataLoader(), variables=variables), None)
        seen = {}
        monkeypatch.setattr(action, "_execute_module", lambda module_name, module_args,
                            task_vars: seen.update(module_args) or {})
        action.run(task_vars=variables)
        return seen.get("python_apt", "unset")

    host = {"inventory_hostname": "n1"}
    facts = {**host, "ansible_facts": {"rdmaprov": {"python_apt": False}}}
    assert python_apt({"settings": {}}, facts) is False
    assert python_apt({"settings": {}}, host) is True  # no fact: as the default(true) was
    assert python_apt({"settings": {}, "python_apt": True}, facts) is True  # the task's wins
    assert python_apt({"settings": {}, "verify": True}, facts) == "unset"  # the proof: no plan
