"""roce_qos's pure logic (plugins/module_utils/netcfg_qos.py) against the tools' output formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rdmaprov import collection
from rdmaprov.collection import netcfg_qos as qos

sha1 = collection.state_drift.sha1

ROOT = Path(__file__).resolve().parents[2]

# `mlnx_qos -i eth2` as MLNX_OFED prints it (DSCP trust, PFC on 3, ETS listing).
MLNX_QOS = """\
DCBX mode: OS controlled
Priority trust state: dscp
dscp2prio mapping:
        prio:0 dscp:07,06,05,04,03,02,01,00,
        prio:1 dscp:15,14,13,12,11,10,09,08,
        prio:2 dscp:23,22,21,20,19,18,17,16,
        prio:3 dscp:31,30,29,28,27,26,25,24,
        prio:4 dscp:39,38,37,36,35,34,33,32,
        prio:5 dscp:47,46,45,44,43,42,41,40,
        prio:6 dscp:55,54,53,52,51,50,49,48,
        prio:7 dscp:63,62,61,60,59,58,57,56,
Cable len: 7
PFC configuration:
        priority    0   1   2   3   4   5   6   7
        enabled     0   0   0   1   0   0   0   0
        buffer      0   0   0   1   0   0   0   0
tc: 0 ratelimit: unlimited, tsa: ets, bw: 50%
         priority:  0
tc: 3 ratelimit: unlimited, tsa: ets, bw: 50%
         priority:  3
"""

# `dcb -j pfc show dev X`: prio_pfc is an array of on/off booleans (iproute2 dcb_pfc.c).
DCB_PFC = json.dumps({"pfc_cap": 8, "macsec_bypass": False, "delay": 0,
                      "prio_pfc": [False, False, False, True, False, False, False, False]})
# `dcb -j -N app show dev X`: dscp_prio is a list of [dscp, prio] pairs.
DCB_APP = json.dumps({"dscp_prio": [[26, 3], [48, 6]]})
SETTINGS = {"pfc_priority": 3, "dscp": 26, "ecn": True, "ecn_codepoint": "ect0", "cnp_dscp": 48,
            "cnp_priority": 6, "roce_v2": True}


def test_tos_is_dscp_shifted_plus_ecn():
    assert qos.tos_from_dscp(26) == 106  # 26 << 2 = 104, + ECT(0) = 2
    assert qos.tos_from_dscp(26, "not-ect") == 104
    assert qos.tos_from_dscp(46, "ect0") == 186
    with pytest.raises(ValueError):
        qos.tos_from_dscp(64)


def test_parse_mlnx_qos():
    parsed = qos.parse_mlnx_qos(MLNX_QOS)
    assert parsed["trust"] == "dscp"
    assert parsed["pfc"] == [0, 0, 0, 1, 0, 0, 0, 0]
    assert parsed["dscp2prio"][26] == 3 and parsed["dscp2prio"][48] == 6
    assert parsed["prio_tc"] == {0: 0, 3: 3}


def test_parse_dcb():
    assert qos.parse_dcb_pfc(DCB_PFC) == {"pfc_cap": 8, "pfc": [0, 0, 0, 1, 0, 0, 0, 0]}
    assert qos.parse_dcb_app(DCB_APP)["dscp2prio"] == {26: 3, 48: 6}
    assert qos.parse_dcb_app({"dscp_prio": [["AF31", 3]]})["dscp2prio"] == {26: 3}


def test_veth_is_not_capable_with_the_reason():
    probe = {"name": "eth0", "exists": True, "mlnx_qos": None,
             "dcb_pfc": {"rc": 1, "stdout": "",
                         "stderr": "Attribute read: Operation not supported\n"}}
    state = qos.qos_state(probe)
    assert not state["capable"]
    assert "Operation not supported" in state["reason"] and "eth0" in state["reason"]
    assert qos.drift(state, qos.desired(SETTINGS)) == []


def test_drift_and_builders_dcb():
    want = qos.desired(SETTINGS)
    probe = {"name": "ens1", "mlnx_qos": None,
             "dcb_pfc": {"rc": 0, "stdout": json.dumps({"pfc_cap": 8, "prio_pfc": [False] * 8})},
             "dcb_app": {"rc": 0, "stdout": "{}"}, "ecn_np": {"3": "0"}, "ecn_rp": {"3": "1"}}
    state = qos.qos_state(probe)
    diffs = qos.drift(state, want)
    assert any(d.startswith("pfc") for d in diffs) and any("ecn_np" in d for d in diffs)
    assert any(d.startswith("trust") for d in diffs)
    cmds = qos.dcb_commands("ens1", want)
    assert cmds[0] == ["dcb", "pfc", "set", "dev", "ens1", "prio-pfc", "0:off", "1:off", "2:off",
                       "3:on", "4:off", "5:off", "6:off", "7:off"]
    assert cmds[1] == ["dcb", "app", "replace", "dev", "ens1", "dscp-prio", "26:3", "48:6"]
    in_line = {**probe, "dcb_pfc": {"rc": 0, "stdout": DCB_PFC},
               "dcb_app": {"rc": 0, "stdout": DCB_APP}, "ecn_np": {"3": "1"}}
    assert qos.drift(qos.qos_state(in_line), want) == []


def test_builders_mlnx_and_sysfs():
    want = qos.desired(SETTINGS)
    assert qos.mlnx_qos_commands("ens1", want)[:2] == [
        ["mlnx_qos", "-i", "ens1", "--trust", "dscp"],
        ["mlnx_qos", "-i", "ens1", "--pfc", "0,0,0,1,0,0,0,0"]]
    assert (["mlnx_qos", "-i", "ens1", "--dscp2prio", "set,26,3"]
            in qos.mlnx_qos_commands("ens1", want))
    writes = dict(qos.sysfs_writes("ens1", "mlx5_0", 1, want, {"dscp": 48, "priority": 6}))
    assert writes["/sys/class/net/ens1/ecn/roce_np/enable/3"] == "1"
    assert writes["/sys/class/net/ens1/ecn/roce_rp/enable/3"] == "1"
    assert writes["/sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos"] == "106"
    assert writes["/sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_mode"] == "RoCE v2"
    assert qos.shell_line(["put", "RoCE v2"]) == "put 'RoCE v2'"


def _run_module(tmp_path: Path, name: str, args: dict) -> tuple[int, dict]:
    """Run one of the collection's modules as Ansible runs it on a node: a Python process with
    its arguments in a JSON file and the collection importable as ansible_collections."""
    import subprocess
    import sys

    from rdmaprov.resources import collection_root

    root = tmp_path / "ansible_collections" / "rdmaprov"
    root.mkdir(parents=True)
    (root / "cluster").symlink_to(collection_root())
    argfile = tmp_path / "args.json"
    argfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    module = collection_root() / "plugins" / "modules" / f"{name}.py"
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    proc = subprocess.run([sys.executable, str(module), str(argfile)], capture_output=True,
                          text=True, check=False, env=env)
    return proc.returncode, json.loads(proc.stdout)


SETTINGS = {"pfc_priority": 3, "dscp": 26, "ecn": True, "ecn_codepoint": "ect0", "cnp_dscp": 48,
            "cnp_priority": 6, "roce_v2": True, "backend": "auto", "rdma_cm_defaults": True,
            "script": "/nonexistent/rdmaprov-roce-qos", "unit_name": "rdmaprov-roce-qos.service"}


def test_probe_with_settings_plans_reports_and_refuses_a_missing_interface(tmp_path: Path) -> None:
    # The loopback has no DCB: planned, reported as not capable, nothing refused.
    rc, out = _run_module(tmp_path, "roce_qos_probe", {"interfaces": ["lo"], "settings": SETTINGS})
    assert rc == 0, out
    assert [p["name"] for p in out["plans"]] == ["lo"] and out["plans"][0]["capable"] is False
    assert out["reports"] == [qos.report(out["plans"][0])]
    assert out["reports"][0]["name"] == "lo" and out["reports"][0]["capable"] is False
    assert len(out["rdmaprov_report"]) == 1
    assert out["rdmaprov_report"][0].startswith("not capable: lo: "), out["rdmaprov_report"]
    # A listed interface that does not exist fails the probe, named.
    rc, out = _run_module(tmp_path / "b", "roce_qos_probe",
                          {"interfaces": ["lo", "nosuch0"], "settings": SETTINGS})
    assert rc != 0 and out.get("failed") is True
    assert out["msg"] == "nosuch0: no such interface", out["msg"]
    # Without settings it only reads, as before.
    rc, out = _run_module(tmp_path / "c", "roce_qos_probe", {"interfaces": ["nosuch0"]})
    assert rc == 0 and "plans" not in out and out["interfaces"][0]["exists"] is False
    # The script is absent here: the plan says so, and that there is something to do.
    rc, out = _run_module(tmp_path / "d", "roce_qos_probe",
                          {"interfaces": ["lo"], "settings": SETTINGS})
    assert "/nonexistent/rdmaprov-roce-qos: absent" in out["plan"]["file_drift"]
    assert out["plan"]["drift"] is True and out["plan"]["qos_drift"] is False
    assert out["plan"]["script"].startswith("#!/bin/sh\n") and out["plan"]["checks"] == []
    # The interfaces from the RDMA facts, when the settings list none.
    rdma = {"devices": [{"ports": [{"link_layer": "Ethernet", "netdev": "lo"}]}]}
    rc, out = _run_module(tmp_path / "r", "roce_qos_probe",
                          {"settings": {**SETTINGS, "interfaces": []}, "rdma": rdma})
    assert rc == 0 and [p["name"] for p in out["plans"]] == ["lo"], out
    # A setting missing is one line.
    rc, out = _run_module(tmp_path / "s", "roce_qos_probe",
                          {"interfaces": ["lo"],
                           "settings": {k: v for k, v in SETTINGS.items() if k != "script"}})
    assert rc != 0 and out["msg"] == "roce_qos plan: settings has no 'script'", out


def _capable(name="eth1", trust="pcp", ibdev="mlx5_0"):
    """A probe entry of an mlnx_qos NIC with trust `trust`."""
    text = MLNX_QOS.replace("trust state: dscp", f"trust state: {trust}")
    return {"name": name, "exists": True, "mlnx_qos": {"rc": 0, "stdout": text, "stderr": ""},
            "ibdev": ibdev, "ibport": 1, "roce_tos": "106", "roce_mode": "RoCE v2",
            "ecn_np": {}, "ecn_rp": {}}


def test_interfaces_are_the_listed_ones_else_the_rdma_ethernet_ports():
    rdma = {"devices": [{"ports": [{"link_layer": "Ethernet", "netdev": "eth1"},
                                   {"link_layer": "InfiniBand", "netdev": "ib0"},
                                   {"link_layer": "Ethernet", "netdev": None}]},
                        {"ports": [{"link_layer": "Ethernet", "netdev": "eth2"}]}, {}]}
    assert qos.pick_interfaces([], rdma) == ["eth1", "eth2"]
    assert qos.pick_interfaces(["eth9"], rdma) == ["eth9"]
    assert qos.pick_interfaces([], {}) == [] and qos.pick_interfaces(None, None) == []


def test_script_quotes_names_and_keeps_rdma_cm_only_when_asked():
    s = {**SETTINGS, "dscp": 10, "ecn_codepoint": "not-ect"}
    plans = [qos.plan(_capable("e th'1"), s), qos.plan({"name": "eth3", "exists": True}, s)]
    text = qos.script(plans, s)
    assert text.startswith("#!/bin/sh\n# Ansible managed (roce_qos)\n")
    assert text.endswith("exit $rc\n")
    assert "default ToS 40\n# (DSCP 10 << 2 = 40," in text
    assert "iface='e th'\"'\"'1'\n" in text and "# --- mlnx_qos ---" in text
    assert "# --- no DCB tool ---" in text and "neither mlnx_qos nor iproute2 dcb" in text
    assert "try mlnx_qos -i 'e th'\"'\"'1' --trust dscp" in text
    assert "modprobe rdma_cm" in text and "ibdev=mlx5_0" in text
    assert "put /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos 40" in text
    off = qos.script(plans, {**s, "rdma_cm_defaults": False})
    assert "modprobe rdma_cm" not in off and "/sys/kernel/config/rdma_cm" not in off
    assert "put /sys/class/infiniband/mlx5_0/tc/1/traffic_class 40" in off


def test_unit_runs_the_script_as_one_word():
    assert "\nExecStart=/usr/local/sbin/rdmaprov-roce-qos\n" in qos.unit(
        {"script": "/usr/local/sbin/rdmaprov-roce-qos"})
    assert '\nExecStart="/opt/my qos"\n' in qos.unit({"script": "/opt/my qos"})


def test_host_plan_drift_checks_and_refusal():
    s = {**SETTINGS, "script": "/usr/local/sbin/q", "host": "node1"}
    ifaces = [_capable("eth1", trust="pcp"), _capable("eth2", trust="dscp", ibdev=None),
              {"name": "eth3", "exists": True}, {"name": "nosuch0", "exists": False}]
    hp = qos.host_plan(ifaces, s)
    assert hp["errors"] == ["nosuch0: no such interface"]
    assert hp["qos_drift"] is True and hp["drift"] is True
    assert hp["file_drift"] == ["/usr/local/sbin/q: not probed",
                                "/etc/systemd/system/rdmaprov-roce-qos.service: not probed",
                                "rdmaprov-roce-qos.service: not probed, wanted enabled"]
    assert hp["checks"] == [
        {"name": "eth1", "ok": False,
         "msg": "node1: eth1 (mlnx_qos) still differs: trust pcp -> dscp"},
        {"name": "eth2", "ok": True, "msg": "node1: eth2: trust dscp, PFC on priority 3, "
                                            "DSCP 26 -> ToS 106 (mlnx_qos)"}]
    # The files as they are wanted and the unit enabled, NICs in line: nothing to do.
    good = [_capable("eth2", trust="dscp", ibdev=None)]
    first = qos.host_plan(good, s)
    state = {f["path"]: {"exists": True, "sha1": sha1(f["content"].encode()), "mode": f["mode"],
                         "owner": "root", "group": "root"} for f in first["files"]}
    hp = qos.host_plan(good, s, state, {"rdmaprov-roce-qos.service": "enabled"})
    assert hp["file_drift"] == [] and hp["drift"] is False and hp["errors"] == []
    state["/usr/local/sbin/q"]["mode"] = "0644"
    hp = qos.host_plan(good, s, state, {"rdmaprov-roce-qos.service": "disabled"})
    assert hp["file_drift"] == ["/usr/local/sbin/q: mode 0644, wanted 0755",
                                "rdmaprov-roce-qos.service: disabled, wanted enabled"]
    assert hp["drift"] is True and hp["qos_drift"] is False


def test_the_files_header_is_the_plays_managed_string():
    s = {**SETTINGS, "script": "/usr/local/sbin/q", "host": "node1", "managed": "Managed by ops"}
    files = {f["path"]: f["content"] for f in qos.host_plan([_capable("eth2", trust="dscp",
                                                                       ibdev=None)], s)["files"]}
    assert all("# Managed by ops (roce_qos)" in text.splitlines()[:2] for text in files.values())


def test_host_plan_apply_commands_and_no_checks_under_check_mode():
    s = {**SETTINGS, "script": "/usr/local/sbin/q", "host": "node1"}
    good = [_capable("eth2", trust="dscp", ibdev=None)]
    first = qos.host_plan(good, s)
    unit_path, script = first["unit_path"], "/usr/local/sbin/q"
    unit = s["unit_name"]
    # Nothing written yet: systemd's reload, the enablement, the restart that runs the script.
    assert first["apply"] == [
        {"argv": ["systemctl", "daemon-reload"], "removes": unit_path,
         "label": "systemctl daemon-reload"},
        {"argv": ["systemctl", "enable", unit], "removes": unit_path,
         "label": f"systemctl enable {unit}"},
        {"argv": ["systemctl", "restart", unit], "removes": script,
         "label": f"systemctl restart {unit}"}]
    state = {f["path"]: {"exists": True, "sha1": sha1(f["content"].encode()), "mode": f["mode"],
                         "owner": "root", "group": "root"} for f in first["files"]}
    enabled = {unit: "enabled"}
    assert qos.host_plan(good, s, state, enabled)["apply"] == []
    # Only the unit disabled: enabled, not restarted (its script and the NICs are in line).
    assert qos.host_plan(good, s, state, {})["apply"] == [
        {"argv": ["systemctl", "enable", unit], "removes": unit_path,
         "label": f"systemctl enable {unit}"}]
    # A NIC that drifted: the unit's restart re-runs the script.
    drifted = [_capable("eth2", trust="pcp", ibdev=None)]
    assert qos.host_plan(drifted, s, state, enabled)["apply"] == [
        {"argv": ["systemctl", "restart", unit], "removes": script,
         "label": f"systemctl restart {unit}"}]
    assert qos.host_plan(drifted, s)["checks"] != []
    assert qos.host_plan(drifted, {**s, "check_mode": True})["checks"] == []
