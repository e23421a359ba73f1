"""rdmaprov.shadows: the table of which variable wins over which, held against the roles' own
rules (plugins/module_utils), on the values an inventory gives each host."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from rdmaprov import collection, shadows
from rdmaprov.inventory import Inventory, VarSource

LAYERS = shadows.NET_MTU_INTERFACES.names


def inventory(per_host: dict[str, dict[str, Any]], where: str = "group_vars/lab.yml"
              ) -> Inventory:
    return Inventory(path=Path("hosts.ini"), hosts=sorted(per_host), selected=sorted(per_host),
                     variables=per_host,
                     sources={h: [VarSource(where, dict(v))] for h, v in per_host.items()})


ENTRIES = [[], [{"name": "eth1"}], [{"name": "eth1", "mtu": 1500}],
           [{"name": "eth1", "mtu": 4000}, {"name": "eth2"}], [{"name": "eth2", "mtu": 9000}]]


@pytest.mark.parametrize("layers", list(itertools.product(ENTRIES, repeat=3)))
def test_net_mtu_default_is_shadowed_exactly_where_merge_interfaces_ignores_it(layers) -> None:
    values = {**dict(zip(LAYERS, layers, strict=True)), "net_mtu_default": 4000}
    verdict = shadows.judge("net_mtu_default", inventory({"node1": values}))
    assert verdict is not None
    merge = collection.netcfg_mtu.merge_interfaces
    reached = {e["name"] for a, b in [(merge(list(layers), 68), merge(list(layers), 69))]
               for e, f in zip(a, b, strict=True) if e["mtu"] != f["mtu"]}
    shadowed = {s.item for s in verdict.shadowed if s.item}
    listed = {e["name"] for e in merge(list(layers), 68)}
    assert shadowed == listed - reached and verdict.effective == len(reached)
    assert verdict.no_effect == (not reached)


@pytest.mark.parametrize("layers", list(itertools.product(ENTRIES, repeat=3)))
def test_an_interface_entry_is_shadowed_where_a_later_layer_replaces_it(layers) -> None:
    merge = collection.netcfg_mtu.merge_interfaces
    for i, name in enumerate(LAYERS[:-1]):
        values = dict(zip(LAYERS, layers, strict=True))
        verdict = shadows.judge(name, inventory({"node1": values}))
        assert verdict is not None
        for entry in layers[i]:
            changed = [*layers]
            changed[i] = [e if e["name"] != entry["name"] else {**e, "mtu": 1234}
                          for e in layers[i]]
            ignored = merge(changed, 9000) == merge(list(layers), 9000)
            assert ignored == (entry["name"] in {s.item for s in verdict.shadowed})


MODULES = [[], ["mlx5_ib"], [{"name": "mlx5_ib", "state": "absent"}],
           [{"name": "mlx5-ib", "options": "x=1"}], [{"name": "ib_core", "options": "y=2"}]]


@pytest.mark.parametrize("layers", list(itertools.product(MODULES, repeat=3)))
def test_a_module_entry_is_shadowed_where_later_layers_set_all_it_gives(layers) -> None:
    names = shadows.RDMA_MODULES.names[1:]
    combine = collection.driver_plan.combine_modules
    for i, name in enumerate(names[:-1]):
        values = dict(zip(names, layers, strict=True))
        verdict = shadows.judge(name, inventory({"node1": values}))
        assert verdict is not None
        items = {s.item for s in verdict.shadowed}
        for entry in layers[i]:
            item = entry if isinstance(entry, str) else entry["name"]
            # Shadowed: whatever this entry says in the fields it gives, the module set is the
            # same (the role's combine_modules decides).
            given = collection.driver_plan._entry(entry)
            alts = [{**given, "state": "absent" if given["state"] == "present" else "present"}]
            if "options" in given:
                alts.append({**given, "options": "z=9"})
            outcomes = set()
            for alt in alts:
                changed = [*layers]
                changed[i] = [alt if (e if isinstance(e, str) else e["name"]) == item else e
                              for e in layers[i]]
                outcomes.add(repr(sorted(combine(*changed), key=lambda e: e["name"])))
            outcomes.add(repr(sorted(combine(*layers), key=lambda e: e["name"])))
            assert (len(outcomes) == 1) == (item in items), (layers, i, item)


def test_nccl_env_extra_wins_over_the_socket_interface() -> None:
    conf = collection.rdma_nccl.conf
    derived = collection.rdma_nccl.derive(None, socket_ifname="eth1")
    extra = {"NCCL_SOCKET_IFNAME": "=eth0"}
    assert conf(derived, extra)["settings"]["NCCL_SOCKET_IFNAME"] == "=eth0"  # the role's rule
    inv = inventory({"node1": {"nccl_env_socket_ifname": "eth1", "nccl_env_extra": extra},
                     "node2": {"nccl_env_socket_ifname": "eth1"}}, where="-e")
    verdict = shadows.judge("nccl_env_socket_ifname", inv)
    assert verdict is not None and not verdict.no_effect and verdict.effective == 1
    assert shadows.describe(verdict, "eth1") == (
        "--set nccl_env_socket_ifname=eth1 has no effect on node1: "
        "nccl_env_extra.NCCL_SOCKET_IFNAME sets it (-e); set nccl_env_extra instead")


def test_the_line_names_items_hosts_winners_and_files() -> None:
    lab = [{"name": "eth1", "mtu": 9000}]
    inv = Inventory(path=Path("hosts.ini"), hosts=["node1", "node2", "node3"],
                    selected=["node1", "node2", "node3"],
                    variables={h: {"net_mtu_interfaces": lab} for h in ("node1", "node2")}
                    | {"node3": {"net_mtu_interfaces": lab,
                                 "net_mtu_interfaces_host": [{"name": "eth2", "mtu": 1500}]}},
                    sources={h: [VarSource("group_vars/lab.yml", {"net_mtu_interfaces": lab}),
                                 VarSource("host_vars/node3.yml",
                                           {"net_mtu_interfaces_host": []})]
                             for h in ("node1", "node2", "node3")})
    verdict = shadows.judge("net_mtu_default", inv)
    assert verdict is not None and verdict.no_effect
    assert shadows.describe(verdict, 4000) == (
        "--set net_mtu_default=4000 has no effect on eth1 of node[1-3]: net_mtu_interfaces sets "
        "its mtu (group_vars/lab.yml); on eth2 of node3: net_mtu_interfaces_host sets its mtu "
        "(host_vars/node3.yml); set net_mtu_interfaces or net_mtu_interfaces_host instead")


def test_no_interface_listed_means_the_default_reaches_nothing() -> None:
    verdict = shadows.judge("net_mtu_default", inventory({"node1": {}}))
    assert verdict is not None and verdict.no_effect
    assert shadows.describe(verdict, 4000) == (
        "--set net_mtu_default=4000 has no effect on node1: no entry is listed in "
        "net_mtu_interfaces, net_mtu_interfaces_group or net_mtu_interfaces_host; set "
        "net_mtu_interfaces instead")


def test_a_value_only_the_run_knows_is_not_judged() -> None:
    inv = inventory({"node1": {"net_mtu_interfaces": "{{ fabric_ifaces }}"},
                     "node2": {"net_mtu_interfaces": [{"name": "eth1", "mtu": "{{ m }}"}]}})
    verdict = shadows.judge("net_mtu_default", inv)
    assert verdict is not None and verdict.shadowed == [] and verdict.effective == 2


def test_every_rule_names_declared_variables() -> None:
    from rdmaprov.inventory import load_specs
    from rdmaprov.resources import collection_root

    declared = load_specs(collection_root()).options
    for rule in shadows.SHADOWS:
        names = rule.names if isinstance(rule, shadows.Layers) else (
            rule.variable, *(rule.layers.names if isinstance(rule, shadows.FieldDefault)
                             else (rule.over,)))
        assert set(names) <= set(declared), names
