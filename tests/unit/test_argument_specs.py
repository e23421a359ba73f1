"""Every role's meta/argument_specs.yml and defaults/main.yml name the same variables."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "tasks" / "main.yml").is_file())


def _load(path: Path) -> dict:
    return (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}


def key_drift(base: Path) -> dict[str, list[str]]:
    """{"no spec": defaults without a spec, "no default": optional specs without a default}."""
    spec_file = base / "meta" / "argument_specs.yml"
    if not spec_file.is_file():
        return {"no argument_specs.yml": [str(spec_file)]}
    options = (_load(spec_file).get("argument_specs", {}).get("main") or {}).get("options") or {}
    defaults = {k for k in _load(base / "defaults" / "main.yml") if not k.startswith("_")}
    # A required option has no default by design; every other option needs one.
    optional = {k for k, v in options.items() if not v.get("required")}
    drift = {"no spec": sorted(defaults - set(options)), "no default": sorted(optional - defaults)}
    return {k: v for k, v in drift.items() if v}


@pytest.mark.parametrize("role", ROLES)
def test_specs_and_defaults_name_the_same_variables(role: str) -> None:
    assert key_drift(ROOT / "roles" / role) == {}


@pytest.mark.parametrize("role", ROLES)
def test_spec_defaults_equal_role_defaults(role: str) -> None:
    base = ROOT / "roles" / role
    options = (_load(base / "meta" / "argument_specs.yml").get("argument_specs", {})
               .get("main") or {}).get("options") or {}
    defaults = _load(base / "defaults" / "main.yml")
    drift = {}
    for name, option in options.items():
        if name in defaults and "default" in option and option["default"] != defaults[name]:
            drift[name] = (option["default"], defaults[name])
    assert drift == {}, f"{role}: argument_specs default != defaults/main.yml: {drift}"


@pytest.mark.parametrize("role", ROLES)
def test_every_option_is_typed_described_and_prefixed(role: str) -> None:
    specs = _load(ROOT / "roles" / role / "meta" / "argument_specs.yml").get("argument_specs", {})
    bad = []
    for entry, spec in specs.items():
        for name, option in ((spec or {}).get("options") or {}).items():
            if "type" not in option or not option.get("description"):
                bad.append(f"{entry}.{name}: needs type and description")
            # Play-level settings (rdmaprov_serial, ...) are declared once, on the entry point
            # that validates the whole inventory.
            play_level = (role, entry) == ("preflight", "validate_inventory") and \
                name.startswith("rdmaprov_")
            if not name.startswith(f"{role}_") and not play_level:
                bad.append(f"{entry}.{name}: not prefixed with {role}_")
    assert bad == []


def test_the_check_catches_drift_both_ways(tmp_path: Path) -> None:
    """The comparison itself fails on drift (guards against a check that cannot fail)."""
    role = tmp_path / "demo"
    (role / "meta").mkdir(parents=True)
    (role / "defaults").mkdir()
    (role / "defaults" / "main.yml").write_text("demo_a: 1\ndemo_b: 2\n_demo_internal: 3\n")
    (role / "meta" / "argument_specs.yml").write_text(
        "argument_specs:\n  main:\n    options:\n"
        "      demo_a: {type: int, default: 1, description: x}\n"
        "      demo_c: {type: int, default: 1, description: x}\n"
        "      demo_d: {type: str, required: true, description: x}\n")
    assert key_drift(role) == {"no spec": ["demo_b"], "no default": ["demo_c"]}
