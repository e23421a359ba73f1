"""rdmaprov validate's settings table (ranges.VALIDATE): the role's defaults and argument specs,
the worker's flags and defaults, and the command line all agree with its entries, so a
setting's flag, environment variable, role variable, worker flag, form and default are
written once."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest
import yaml

from rdmaprov.cli import build_parser
from rdmaprov.validate import request, rounds

ROOT = Path(__file__).resolve().parents[2]
TABLE = request.TABLE
ROLE = ROOT / "roles" / "nccl_validate"
WITH_ROLE_VAR = [s for s in TABLE.VALIDATE if s.role_var]


def _worker():
    spec = importlib.util.spec_from_file_location("worker_for_test",
                                                  ROOT / "rdmaprov/validate/worker.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _worker_parser():
    return _worker()._build_parser()


@pytest.mark.parametrize("s", WITH_ROLE_VAR, ids=lambda s: s.name)
def test_role_defaults_and_specs_are_the_tables(s) -> None:
    defaults = yaml.safe_load((ROLE / "defaults/main.yml").read_text())
    options = yaml.safe_load((ROLE / "meta/argument_specs.yml").read_text())[
        "argument_specs"]["main"]["options"]
    assert defaults[s.role_var] == s.role_default
    assert options[s.role_var]["default"] == s.role_default
    kind = {float: "float", int: "int", str: "str"}[s.kind]
    assert options[s.role_var]["type"] == kind
    if s.choices and "choices" in options[s.role_var]:
        assert set(s.choices) <= set(options[s.role_var]["choices"])


def test_role_variables_are_judged_by_the_tables_forms() -> None:
    for s in WITH_ROLE_VAR:
        if s.form and s.name != "max_jitter":
            assert TABLE.VARIABLES.get(s.role_var, TABLE.FORMS.get(s.role_var)) == s.form


def test_worker_flags_and_defaults_are_the_tables() -> None:
    """The worker runs alone on a node (no table there): it has no default of its own for a
    setting the launch passes (worker_flags gives every one with pairs on), so none can drift."""
    parser = _worker_parser()
    passed = TABLE.worker_flags({"pairs": "auto", "pair_fraction": 0.4, "bw_fraction": 0.8})
    for s in TABLE.VALIDATE:
        if not s.worker_flag:
            continue
        action = next(a for a in parser._actions if s.worker_flag in a.option_strings)
        if s.name == "max_jitter":  # the worker's None: rounds.DEFAULT_MAX_JITTER
            assert action.default is None and s.default == rounds.DEFAULT_MAX_JITTER
        elif s.name == "pairwise":
            assert action.default == s.role_default and set(action.choices) >= set(s.choices)
        elif s.default is not None:
            assert action.default is None and s.worker_flag in passed, s.name
    with pytest.raises(SystemExit) as exc:  # pairs without the fraction the launch gives
        _worker().main(["--pairs", "auto", "--preflight"])
    assert exc.value.code == 2
    argv = TABLE.worker_flags({"pairs": "auto", "pair_fraction": 0.5, "bw_fraction": 0.7,
                               "min_busbw": 20.0, "max_jitter": 3.0})
    args = parser.parse_args(argv)
    assert (args.pairs, args.pair_fraction, args.bw_fraction, args.min_busbw,
            args.max_jitter) == ("auto", 0.5, 0.7, 20.0, 3.0)


def test_command_line_is_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    for s in TABLE.VALIDATE:
        if s.env:
            monkeypatch.delenv(s.env, raising=False)
    parser = build_parser("validate")
    sub = next(a for a in parser._actions if a.choices and "validate" in a.choices)
    cmd = sub.choices["validate"]
    text = cmd.format_help()
    for s in TABLE.VALIDATE:
        action = next(a for a in cmd._actions if s.flag in a.option_strings)
        assert action.dest == s.name and action.default == s.default, s.name
        if s.env:
            assert s.env in text, s.name
    # The defaults of the command line and of bootstrap's request are one.
    assert request.build(vars(parser.parse_args(["validate", "inv"]))) == request.build(
        {"inventory": Path("inv")})


def test_env_and_flag_reach_the_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RDMAPROV_VALIDATE_BW_FRACTION", "0.5")
    monkeypatch.setenv("RDMAPROV_VALIDATE_ALLOW_SOCKET", "1")
    req = request.build({"min_busbw": "20", "timeout": "30"})
    assert (req.bw_fraction, req.allow_socket, req.min_busbw, req.timeout) == (0.5, True, 20.0,
                                                                              30)
    assert req.role_vars("run") == {"nccl_validate_timeout": 30}
    assert req.role_vars("plan") == {
        "nccl_validate_bw_fraction": 0.5, "nccl_validate_pair_fraction": 0.4,
        "nccl_validate_min_busbw": 20.0, "nccl_validate_max_jitter": 2.0,
        "nccl_validate_pairs": "auto"}
    assert request.build({"max_bytes": "1M"}).role_vars("run") == {
        "nccl_validate_worker_args": ["--max-bytes", "1M"]}


def test_nothing_below_cli_imports_cli() -> None:
    for path in (ROOT / "rdmaprov").rglob("*.py"):
        if path.relative_to(ROOT / "rdmaprov").parts[0] in ("cli", "__main__.py"):
            continue  # the command line itself, and `python -m rdmaprov` above it
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "rdmaprov.cli" or n.startswith("rdmaprov.cli.")
                           for n in names), path
