"""plugins/module_utils/link_counters.py: counter classes, thresholds, the delta rule, and the
sticky flap window over a series of samples."""

from __future__ import annotations

import pytest

from rdmaprov.collection import link_counters as lc
from rdmaprov.remediation import ALL


def port(state: str = "ACTIVE", **counters: int) -> dict:
    return {"state": state, "counters": counters}


def test_every_class_names_a_known_remedy_and_severity() -> None:
    for cls, spec in lc.CLASSES.items():
        assert spec["remedy"] in ALL, cls
        assert spec["severity"] in ("fail", "warn"), cls
        assert spec["threshold"] >= 1 and spec["why"], cls
    # The counters all have a class.
    for name in ("symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
                 "port_rcv_remote_physical_errors", "local_link_integrity_errors",
                 "excessive_buffer_overrun_errors", "port_xmit_discards", "out_of_sequence",
                 "packet_seq_err", "local_ack_timeout_err", "rnr_nak_retry_err"):
        assert name in lc.COUNTER_CLASS, name


def test_deltas_not_totals() -> None:
    before = {"mlx5_0/1": port(symbol_error=4000, link_downed=3),
              "mlx5_1/1": port(symbol_error=0)}
    after = {"mlx5_0/1": port(symbol_error=4005, link_downed=3),  # +5: under 10
             "mlx5_1/1": port(symbol_error=12)}
    found = lc.judge_deltas(before, after)
    assert [(f.device, f.port, f.counter, f.delta, f.klass, f.remedy, f.severity)
            for f in found] == [("mlx5_1", 1, "symbol_error", 12, "symbol", "reset-link", "fail")]


def test_a_reset_is_not_an_error_and_a_flap_is() -> None:
    before = {"mlx5_0/1": port(symbol_error=500, link_downed=2)}
    assert lc.judge_deltas(before, {"mlx5_0/1": port(symbol_error=0, link_downed=0)}) == []
    found = lc.judge_deltas(before, {"mlx5_0/1": port(symbol_error=500, link_downed=3)})
    assert [(f.counter, f.klass, f.severity) for f in found] == [("link_downed", "flap", "fail")]
    found = lc.judge_deltas(before, {"mlx5_0/1": port("DOWN", symbol_error=500, link_downed=2)})
    assert [(f.counter, f.klass, f.text) for f in found] == [
        ("state", "flap", "mlx5_0/1 left ACTIVE (DOWN now)")]


def test_thresholds_from_config() -> None:
    before, after = {"d/1": port(port_xmit_discards=0)}, {"d/1": port(port_xmit_discards=50)}
    assert lc.judge_deltas(before, after) == []
    found = lc.judge_deltas(before, after, {"discards": 20})
    assert [(f.klass, f.severity) for f in found] == [("discards", "warn")]
    for bad in ({"disc": 1}, {"symbol": 0}, {"symbol": "x"}, {"symbol": True}):
        with pytest.raises(ValueError):
            lc.thresholds(bad)


def test_snapshot_merges_counters_and_hw_counters() -> None:
    devs = [{"name": "mlx5_0", "ports": [{"port": 1, "state": "ACTIVE",
                                          "counters": {"symbol_error": 1, "port_xmit_wait": 9},
                                          "hw_counters": {"out_of_sequence": 7}}]}]
    assert lc.snapshot(devs) == {"mlx5_0/1": {"state": "ACTIVE", "counters": {
        "symbol_error": 1, "out_of_sequence": 7}}}


def test_saturated_counters_are_named() -> None:
    assert lc.saturated({"d/1": port(symbol_error=65535, link_downed=3)}) == ["d/1 symbol_error"]


def run(series: list[tuple[float, dict]], **kw: float) -> list[list[str]]:
    """Each step's failing findings as 'counter class' strings."""
    history, out = None, []
    for now, sample in series:
        history, found = lc.advance(history, sample, now, **kw)
        out.append([f"{f.counter} {f.klass}" for f in found if f.severity == "fail"])
    return out


def test_a_flap_is_sticky_then_clears_by_itself() -> None:
    steps = run([
        (0, {"p/1": port(link_downed=5)}),      # first sight: old count 5 never fails
        (60, {"p/1": port(link_downed=6)}),     # flap
        (120, {"p/1": port(link_downed=6)}),    # stable, but inside the window
        (60 + 899, {"p/1": port(link_downed=6)}),
        (60 + 900, {"p/1": port(link_downed=6)}),  # stable for 900 s: clears
        (2000, {"p/1": port(link_downed=6)}),
    ], stable_s=900)
    assert steps == [[], ["link_downed flap"], ["link_downed flap"], ["link_downed flap"], [],
                     []]


def test_a_port_down_keeps_the_window_open_and_a_reboot_resets_nothing() -> None:
    steps = run([
        (0, {"p/1": port(link_downed=0)}),
        (10, {"p/1": port("DOWN", link_downed=0)}),   # left ACTIVE
        (2000, {"p/1": port("DOWN", link_downed=1)}),  # still down: window extends
        (2100, {"p/1": port(link_downed=1)}),          # back, inside the window
        (2000 + 900, {"p/1": port(link_downed=1)}),    # stable 900 s after it was last down
        (5000, {"p/1": port(link_downed=0)}),           # reboot: counters back to 0
        (5010, {"p/1": port(link_downed=0, symbol_error=3)}),
    ], stable_s=900)
    assert steps[0] == [] and steps[1] == ["state flap"]
    assert steps[2] and steps[3]
    assert steps[4:] == [[], [], []]


def test_slow_growth_adds_up_over_the_window() -> None:
    # 4 symbol errors every 10 minutes: no single step reaches 10, the window (1 h) does.
    series = [(i * 600.0, {"p/1": port(symbol_error=4 * i)}) for i in range(5)]
    steps = run(series, stable_s=900, window_s=3600)
    assert steps[:2] == [[], []]
    assert steps[3] == ["symbol_error symbol"]
