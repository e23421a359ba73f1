# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The one validator of rdmaprov's variables: Ansible's own ArgumentSpecValidator over the
roles' meta/argument_specs.yml options, then the ranges of ranges.py.

Used by the control host's input check (rdmaprov/inventory.py, before any host is touched) and
by the validate_inventory entry point (the rdmaprov.cluster.input_problems lookup), so that both
say the same about the same value. Types are converted the way Ansible converts them (9000.0 and
"9000" are the integer 9000; true is an int, which the ranges then judge as 1).

A variable is ours when a role declares it. Any other name is left alone, unless it is a close
match of one of our names (difflib ratio TYPO_CUTOFF or more): a typo of ours. Names of other
roles that share a prefix with ours (firewall_state, slurm_health_check_program) are not.
"""

from __future__ import annotations

import difflib

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.errors import (
    ArgumentTypeError,
    ArgumentValueError,
    ElementError,
    RequiredError,
    UnsupportedError,
)

from ansible_collections.rdmaprov.cluster.plugins.module_utils import (
    ranges,
    rdma_nccl,
    validate_launch,
)

# One edit in a 14-character name (our shortest) gives 0.93; two in it 0.86. Real names of
# geerlingguy.firewall, linux-system-roles, kubespray and DeepOps come no closer than 0.84
# to ours (tests/unit/test_input_check.py holds them).
TYPO_CUTOFF = 0.88

TYPE_WORDS = {
    "int": "an integer", "float": "a number", "bool": "a boolean (true/false)",
    "list": "a list", "dict": "a mapping", "str": "a string", "path": "a path",
    "bytes": "a byte size", "bits": "a bit size", "json": "JSON", "jsonarg": "JSON",
}

# What data from an inventory or a vars file is made of (Ansible's own subclasses of these
# included). Anything else is a value only the run can read: a vault-encrypted string.
_PLAIN = (str, int, float, bool, list, dict, type(None))


def role_specs(roles_dir, roles=None):
    """{role: its argument_specs (every entry point)} read from ``roles_dir``/*/meta/
    argument_specs.yml (or .yaml), for every role or those in ``roles``: the one reader of the
    specs (the input check, the input_problems lookup, the role READMEs' tables). Raises
    ValueError naming a role in ``roles`` that is not there, or a spec file that cannot be
    read."""
    import os

    import yaml

    names = sorted(n for n in os.listdir(roles_dir) if os.path.isdir(os.path.join(roles_dir, n)))
    unknown = sorted(set(roles or []) - set(names))
    if unknown:
        raise ValueError("no role %s in this collection" % ", ".join(unknown))
    out = {}
    for name in names:
        if roles and name not in roles:
            continue
        for ext in ("yml", "yaml"):
            path = os.path.join(roles_dir, name, "meta", "argument_specs." + ext)
            if os.path.isfile(path):
                break
        else:
            continue
        try:
            with open(path, encoding="utf-8") as handle:
                data = yaml.safe_load(handle) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ValueError("%s: %s" % (path, exc)) from exc
        out[name] = data.get("argument_specs") or {}
    return out


def declared_options(specs):
    """Every option of every entry point of ``specs`` (role_specs' result), by name: the first
    declaration of a name wins (roles in name order, entry points in file order)."""
    options = {}
    for entries in specs.values():
        for entry in entries.values():
            for name, opt in ((entry or {}).get("options") or {}).items():
                options.setdefault(name, opt or {})
    return options


def unknown_now(value):
    """True for a value only the run knows: Jinja (templated on the hosts) or vault-encrypted."""
    if not isinstance(value, _PLAIN):
        return True
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def _known(value):
    """``value`` with what only the run knows replaced by None (which no check judges)."""
    if unknown_now(value):
        return None
    if isinstance(value, dict):
        return {k: _known(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_known(v) for v in value]
    return value


def show(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def did_you_mean(name, known, cutoff=0.6):
    close = difflib.get_close_matches(str(name), sorted(known), n=1, cutoff=cutoff)
    return " (did you mean %s?)" % close[0] if close else ""


def typo_of(name, declared):
    """The declared name ``name`` is a misspelling of, or None."""
    if name in declared:
        return None
    close = difflib.get_close_matches(str(name), sorted(declared), n=1, cutoff=TYPO_CUTOFF)
    return close[0] if close else None


def _spec_only(spec):
    """The option's own spec, without what this module checks element by element."""
    out = {k: v for k, v in (spec or {}).items()
           if k not in ("options", "elements", "description", "version_added")}
    if out.get("type", "str") == "list":
        out.pop("choices", None)  # checked per element, to name the element
    return out


def _convert(label, value, spec):
    """(converted value, problems) for one value against its spec (no sub-options)."""
    type_name = str(spec.get("type", "str"))
    result = ArgumentSpecValidator({"v": spec}).validate({"v": value})
    problems = []
    for err in result.errors:
        if isinstance(err, (ArgumentTypeError, ElementError)):
            problems.append("%s: %s is not %s" % (label, show(value),
                                                  TYPE_WORDS.get(type_name, type_name)))
        elif isinstance(err, ArgumentValueError):
            problems.append("%s: %s is not one of %s" % (
                label, show(value), ", ".join(str(c) for c in spec.get("choices") or [])))
        else:
            problems.append("%s: %s" % (label, str(err).replace("'v'", repr(label))))
    return result.validated_parameters.get("v", value), problems


def check_value(path, label, value, spec, link_type=None):
    """Problems with one value of our variables. ``path`` names it in ranges.VARIABLES
    (VAR or VAR[].KEY); ``label`` is how messages name it (VAR[0].KEY)."""
    spec = spec or {}
    if value is None:
        return []
    value, problems = _convert(label, value, _spec_only(spec))
    if problems:
        return problems
    why = ranges.form_problem(path, value)
    if why:
        return ["%s: %s" % (label, why)]
    type_name = str(spec.get("type", "str"))
    if type_name == "list":
        elements = spec.get("elements")
        item_spec = {"type": elements or "raw", "choices": spec.get("choices"),
                     "options": spec.get("options")}
        if not item_spec["choices"]:
            item_spec.pop("choices")
        item_path = path if not spec.get("options") else path + "[]"
        for i, item in enumerate(value):
            problems += check_value(item_path, "%s[%d]" % (label, i), item, item_spec)
        return problems
    if type_name == "dict" and spec.get("options") and isinstance(value, dict):
        return _check_options(path, label, value, spec["options"])
    kind = ranges.kind_of(path)
    if kind:
        why = ranges.problem(kind, value, link_type)
        if why:
            if kind == "mtu" and link_type in (None, "auto") and isinstance(value, int) \
                    and not isinstance(value, bool) and path.endswith("[].mtu") \
                    and value <= ranges.MTU_MAX["ipoib_connected"]:
                why += "; for an IPoIB interface set its %s (ipoib_datagram: up to %d, " \
                       "ipoib_connected: up to %d)" % (ranges.LINK_KEY,
                                                       ranges.MTU_MAX["ipoib_datagram"],
                                                       ranges.MTU_MAX["ipoib_connected"])
            problems.append("%s: %s" % (label, why))
    return problems


def _check_options(path, label, value, options):
    """A mapping against its sub-options: unknown and missing keys (Ansible's validator), each
    key's value, an MTU judged by the entry's link type."""
    problems = []
    known = _known(value)
    result = ArgumentSpecValidator({k: _spec_only(v) for k, v in options.items()}).validate(
        {k: v for k, v in known.items() if k in options})
    for key in sorted(set(known) - set(options), key=str):
        problems.append("%s: unknown key %r%s" % (label, key, did_you_mean(key, options)))
    for err in result.errors:
        if isinstance(err, RequiredError):
            missing = [k for k, o in options.items() if (o or {}).get("required")
                       and k not in known]
            for key in missing:
                problems.append("%s: required key %r is missing" % (label, key))
        elif not isinstance(err, (UnsupportedError, ArgumentTypeError, ArgumentValueError,
                                  ElementError)):
            problems.append("%s: %s" % (label, err))
    link = known.get(ranges.LINK_KEY) if isinstance(known.get(ranges.LINK_KEY), str) else None
    for key in sorted((k for k in known if k in options), key=str):
        problems += check_value("%s.%s" % (path, key), "%s.%s" % (label, key), known[key],
                                options[key], link_type=link)
    return problems


def job_path_problem(variables):
    """Before any host is contacted: the one line refusing a host's variables whose
    nccl_validate_env sets an NCCL_* value that its /etc/nccl.conf will not hold, as far as
    the inventory tells (nccl_env writes what it declares, rdma_nccl.declared; a value nccl_env
    finds on each host is not known here, so an NCCL_* value it does not declare is refused
    too: the proof would rest on a setting assumed), or ''. The rule is validate_launch's
    (job_path_differences), which the host's own plan applies to the file it reads; off with
    nccl_validate_job_path false."""
    names = ("nccl_validate_job_path", "nccl_validate_env", "nccl_env_extra",
             "nccl_env_socket_ifname")
    if any(unknown_now(variables.get(n)) for n in names if variables.get(n) is not None):
        return ""  # only the run knows one of them
    job_path = variables.get("nccl_validate_job_path", True)
    if job_path is False or str(job_path).strip().lower() in ("false", "no", "0", "off", "n"):
        return ""
    env = variables.get("nccl_validate_env")
    if not isinstance(env, dict) or any(unknown_now(v) for v in env.values()):
        return ""
    extra = variables.get("nccl_env_extra")
    if isinstance(extra, dict) and any(unknown_now(v) for v in extra.values()):
        return ""
    ifname = variables.get("nccl_env_socket_ifname")
    declared = rdma_nccl.declared(ifname if isinstance(ifname, str) else "",
                                  extra if isinstance(extra, dict) else {})

    def job_side(name, have):
        if name in declared:
            return ("%s=%s from /etc/nccl.conf (nccl_env writes it from %s)"
                    % (name, have, declared[name][1]))
        if name == "NCCL_SOCKET_IFNAME":
            return ("the interface nccl_env finds on each host, from /etc/nccl.conf "
                    "(nccl_env_socket_ifname is not set)")
        return ("%s from /etc/nccl.conf only as nccl_env finds it on each host (no nccl_env "
                "variable declares it)" % name)

    conf = {k: v for k, (v, _where) in declared.items()}
    return validate_launch.job_path_line(validate_launch.job_path_differences(env, conf),
                                         job_side)


def check(variables, options):
    """[(name, problem)] for the variables of one mapping (a host's, a file's, -e) against our
    declared ``options`` (name -> spec, every role's). Undeclared names are left alone unless
    they are a typo of a declared one; a name with a leading underscore is a role's own
    internal variable (``_container_runtime_verify_cdi``, ``__container_runtime_docker_packages``
    from its vars/), never a typo."""
    found = []
    for name in sorted(variables, key=str):
        if name not in options:
            close = None if str(name).startswith("_") else typo_of(name, options)
            if close:
                found.append((name, "unknown variable %s (did you mean %s?)" % (name, close)))
            continue
        value = _known(variables[name])
        for line in check_value(str(name), str(name), value, options[name]):
            found.append((name, line))
    # Across roles: only where every role's variables are judged together (the control host's
    # input check), not a single role's own check that cannot see nccl_env's.
    if "nccl_validate_env" in variables and "nccl_env_socket_ifname" in options \
            and not any(n == "nccl_validate_env" for n, _line in found):
        line = job_path_problem(variables)
        if line:
            found.append(("nccl_validate_env", line))
    return found
