# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The one table of value ranges: which of our variables holds which kind of number, and the
range of each kind (the MTU's depends on the link type); and the few strings and mappings that
have a form beyond their type (FORMS).

Pure Python, no imports: the control host's input check (rdmaprov/inventory.py through
input_check.py), the validate_inventory entry point, the roles' filters and modules on the
nodes, and ``rdmaprov check`` (which must not import Ansible) all read this one table.
"""

from __future__ import annotations

MTU_MIN = 68
# The largest MTU of each link type. Ethernet: what data-centre switches carry (9216). IPoIB
# in datagram mode carries the IB MTU (4096) less its 4-byte header; connected mode up to 65520.
MTU_MAX = {"ethernet": 9216, "ipoib_datagram": 4092, "ipoib_connected": 65520}
# net_mtu's link_type option: auto is the host's own link, judged on the host; on the control
# host, where the link is not known, auto gets Ethernet's range (the usual fabric).
LINK_TYPES = ("auto", "ethernet", "ipoib_datagram", "ipoib_connected")

# kind -> (lowest, highest, what it is)
KINDS = {
    "mtu": (MTU_MIN, MTU_MAX["ethernet"], "MTU"),
    "pfc_priority": (0, 7, "PFC priority"),
    "priority": (0, 7, "802.1p priority"),
    "dscp": (0, 63, "DSCP value"),
    "tos": (0, 255, "ToS value"),
    "ib_tc": (-1, 255, "traffic class (-1 for none)"),
    "port": (1, 65535, "TCP/UDP port"),
    # A port, or a "LOW-HIGH" range of ports (firewall_allow[].port).
    "port_range": (1, 65535, "TCP/UDP port or LOW-HIGH range"),
}

# Our variables and sub-options (VAR[].KEY: the KEY of each element of the list VAR) that hold
# a ranged number. A list variable's range applies to each element.
VARIABLES = {
    "net_mtu_default": "mtu",
    "net_mtu_interfaces[].mtu": "mtu",
    "net_mtu_interfaces_group[].mtu": "mtu",
    "net_mtu_interfaces_host[].mtu": "mtu",
    "roce_qos_pfc_priority": "pfc_priority",
    "roce_qos_cnp_priority": "priority",
    "roce_qos_dscp": "dscp",
    "roce_qos_cnp_dscp": "dscp",
    "nccl_env_ib_tc": "ib_tc",
    "firewall_ssh_port": "port",
    "firewall_roce_udp_port": "port",
    "firewall_rendezvous_ports": "port",
    "firewall_allow[].port": "port_range",
    "ansible_port": "port",
}

# Numbers that are not fabric settings: how long to wait, how many times, what share.
KINDS.update({
    "seconds": (1, 7 * 86400, "number of seconds"),
    "seconds_or_zero": (0, 7 * 86400, "number of seconds (0 for none)"),
    "count": (1, 1000000, "count"),
})
# Kinds whose value may be a fraction: (lowest, highest, what, lowest excluded).
FLOAT_KINDS = {
    "fraction": (0.0, 1.0, "fraction", True),
    "gbps": (0.0, 1e6, "bandwidth in GB/s", False),
    "jitter": (1.0, 1e6, "ratio p99/p50", False),
}

VARIABLES.update({
    "firewall_rollback_seconds": "seconds",
    "firewall_confirm_timeout": "seconds",
    "container_runtime_verify_timeout": "seconds",
    "container_runtime_apt_cache_valid_time": "seconds_or_zero",
    "nccl_validate_rendezvous_timeout": "seconds",
    "nccl_validate_pull_timeout": "seconds",
    "nccl_validate_poll_interval": "seconds",
    "nccl_validate_master_port": "port",
    "net_mtu_ping_count": "count",
    "net_mtu_ping_timeout": "seconds",
    "rdma_ofed_reboot_timeout": "seconds",
    "slurm_health_budget": "seconds_or_zero",
    "slurm_health_healthcheck_interval": "seconds",
})

# Strings that reach a host's files, units and command lines: the characters each may hold.
# None of them allows whitespace, quotes or a shell metacharacter; a name never starts with
# '-' (it would read as an option).
_WORD = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"
_PATH_CHARS = frozenset(_WORD + "@+=:,./-")
_IFNAME_CHARS = frozenset(_WORD + ".-")
_UNIT_CHARS = frozenset(_WORD + ".@:-")
# form -> what a value of that form is (said in the message).
FORM_KINDS = {
    "absolute_path": "an absolute path (letters, digits and _@+=:,./- only)",
    "absolute_path_or_empty": "empty or an absolute path (letters, digits and _@+=:,./- only)",
    "interface": "a Linux interface name (1-15 bytes of letters, digits, '_', '.', '-'; "
                 "not '.' or '..', not starting with '-')",
    "interface_or_empty": "empty or a Linux interface name (1-15 bytes of letters, digits, "
                          "'_', '.', '-'; not '.' or '..', not starting with '-')",
    "nccl_ifnames": "NCCL_SOCKET_IFNAME's form: empty, or [^][=]NAME[,NAME...] of interface "
                    "names or prefixes",
    "unit_name": "a systemd service name (letters, digits, '_', '.', '@', ':', '-', "
                 "ending in .service)",
    "file_name": "a file name (letters, digits and _@+=:,.- only, not starting with '-')",
    "nft_name": "an nftables name (a letter, then letters, digits and '_', at most 64)",
    "image": "a container image reference (NAME[:TAG][@DIGEST], no whitespace or quotes)",
    "image_or_empty": "empty or a container image reference (NAME[:TAG][@DIGEST])",
    "size": "a size in bytes, e.g. 4096, 512K, 256M, 1G",
    "kernel_module": "a kernel module name (letters, digits, '_', '-'), or a mapping with one as "
                     "name and options of printable characters on one line",
    "nccl_keys": "a mapping whose keys are NCCL_* names (NCCL_[A-Z0-9_]+)",
}

# Our variables (and VAR[].KEY sub-options; a list's form applies to each element) whose value
# has a form beyond its type (checked with the ranges, the same way): name -> form.
FORMS = {
    "nccl_env_conf_path": "absolute_path",
    "nccl_env_extra": "nccl_keys",
    "nccl_env_socket_ifname": "nccl_ifnames",
    "net_mtu_interfaces[].name": "interface",
    "net_mtu_interfaces_group[].name": "interface",
    "net_mtu_interfaces_host[].name": "interface",
    "net_mtu_verify_interface": "interface_or_empty",
    "net_mtu_netplan_file": "absolute_path",
    "net_mtu_networkd_dropin": "file_name",
    "net_mtu_unit_name": "unit_name",
    "roce_qos_interfaces": "interface",
    "roce_qos_script": "absolute_path",
    "roce_qos_unit_name": "unit_name",
    "firewall_nft_dir": "absolute_path",
    "slurm_health_nccl_python": "absolute_path_or_empty",
    "firewall_nft_table": "nft_name",
    "firewall_nft_unit_name": "unit_name",
    "rdma_modules_load_conf": "absolute_path",
    "rdma_modules_modprobe_conf": "absolute_path",
    "rdma_ofed_mlnx_ofed_workdir": "absolute_path",
    "container_runtime_docker_daemon_json": "absolute_path",
    "container_runtime_podman_conf": "absolute_path",
    "container_runtime_podman_storage_conf": "absolute_path",
    "container_runtime_limits_file": "absolute_path",
    "container_runtime_systemd_dropin": "absolute_path",
    "container_runtime_cdi_spec": "absolute_path",
    "container_runtime_rdma_cdi_spec": "absolute_path",
    "container_runtime_rdma_cdi_nccl_conf": "absolute_path",
    "container_runtime_enroot_conf_dir": "absolute_path",
    "nccl_validate_cdi_spec": "absolute_path",
    "container_runtime_verify_image": "image_or_empty",
    "container_runtime_images[].name": "image",
    "nccl_validate_remote_dir": "absolute_path",
    "slurm_health_rdmaprov": "absolute_path",
    "slurm_health_venv": "absolute_path",
    "slurm_health_config_dir": "absolute_path",
    "slurm_health_script_dir": "absolute_path",
    "slurm_health_nhc_dir": "absolute_path",
    "slurm_health_slurm_conf": "absolute_path",
    "slurm_health_textfile_dir": "absolute_path_or_empty",
    "node_tool_venv": "absolute_path",
    "node_tool_launcher": "absolute_path",
    # Written into modprobe.d, whose `install` lines run a shell: no line breaks.
    "rdma_modules_extra": "kernel_module",
    "rdma_modules_group_extra": "kernel_module",
    "rdma_modules_host_extra": "kernel_module",
    "rdma_modules_base": "kernel_module",
    "rdma_modules_peermem_name": "kernel_module",
}


class Setting(object):
    """One setting of ``rdmaprov validate``, and every name it goes by on its way to the hosts.

    name: the request's field (and argparse's dest); flag, env: the command line and its
    environment variable (None: flag only); form: a kind of KINDS/FLOAT_KINDS or a form of
    FORM_KINDS, judged before any host is contacted (None: choices, a switch or a path);
    default: the command's own (None: the inventory's role variable decides); choices;
    role_var: the nccl_validate role's variable it becomes, role_default that variable's
    default in roles/nccl_validate, when not the command's own (a test holds defaults/main.yml
    and argument_specs to it);
    worker_flag: the worker's flag it becomes (one with no role_var rides in
    nccl_validate_worker_args); group: which part of a run takes it ("run": every play of a
    run; "plan": the fabric run's pair-round plan; "verdict", "slurm", "output": rdmaprov only).
    """

    __slots__ = ("name", "flag", "env", "form", "default", "choices", "role_var",
                 "role_default", "worker_flag", "group")

    def __init__(self, name, flag, env=None, form=None, default=None, choices=None,
                 role_var=None, role_default=None, worker_flag=None, group="verdict"):
        self.name, self.flag, self.env, self.form = name, flag, env, form
        self.default, self.choices, self.group = default, choices, group
        self.role_var, self.worker_flag = role_var, worker_flag
        self.role_default = default if role_default is None and role_var else role_default

    @property
    def kind(self):
        """The Python type a good value is handed on as."""
        if self.choices is not None or self.form in FORM_KINDS:
            return str
        if self.form in FLOAT_KINDS:
            return float
        if self.form in KINDS:
            return int
        return bool if self.default is False else None

    def __repr__(self):
        return "Setting(%r)" % self.name


_V = "RDMAPROV_VALIDATE_"
PAIRWISE = ("auto", "slow", "always", "never")
# The settings of ``rdmaprov validate``: one entry each, in the order their problems are said.
# The command's flags, the role variables a run hands over, the worker's flags and the Slurm
# node spec all come from here; a new setting is one more entry.
VALIDATE = (
    Setting("image", "--image", _V + "IMAGE", "image", role_var="nccl_validate_image",
            role_default="nvcr.io/nvidia/pytorch:25.01-py3", group="run"),
    Setting("max_bytes", "--max-bytes", _V + "MAX_BYTES", "size", worker_flag="--max-bytes",
            group="run"),
    Setting("timeout", "--timeout", _V + "TIMEOUT", "seconds", role_var="nccl_validate_timeout",
            role_default=600, group="run"),
    # Why 0.8: rdmaprov/validate/verdict.py's docstring (healthy links and published checks).
    Setting("bw_fraction", "--bw-fraction", _V + "BW_FRACTION", "fraction", default=0.8,
            role_var="nccl_validate_bw_fraction", worker_flag="--bw-fraction", group="plan"),
    # Without a bar from the line rate, a pair slower than this fraction of the best pair is
    # slow; with one, a pair must pass both (lab gloo pairs on 2 busy cores spread to ~0.6 of
    # the best; a 50 Mbit/s throttled host sits near 0.01).
    Setting("pair_fraction", "--pair-fraction", _V + "PAIR_FRACTION", "fraction", default=0.4,
            role_var="nccl_validate_pair_fraction", worker_flag="--pair-fraction", group="plan"),
    # The role's 0: no explicit bar (the worker is then given none).
    Setting("min_busbw", "--min-busbw", _V + "MIN_BUSBW", "gbps",
            role_var="nccl_validate_min_busbw", role_default=0, worker_flag="--min-busbw",
            group="plan"),
    # The role's 0: the worker's own default (rounds.DEFAULT_MAX_JITTER, which equals this one).
    Setting("max_jitter", "--max-jitter", _V + "MAX_JITTER", "jitter", default=2.0,
            role_var="nccl_validate_max_jitter", role_default=0, worker_flag="--max-jitter",
            group="plan"),
    # Per rail: ib_write_bw between one HCA port and its rail-aligned peer must reach this
    # fraction of that port's own rate. Why 0.9: a healthy ConnectX port moves 92-97% of its
    # signalling rate at 64 KiB and up (headers, ICRC; e.g. 92.40 Gb/s on a 100 GbE port in
    # NVIDIA deepops' RoCE guide); one bad cable or a link trained down to a lower width or
    # speed lands far below.
    Setting("rail_fraction", "--rail-fraction", _V + "RAIL_FRACTION", "fraction", default=0.9),
    Setting("nodes", "--nodes", form="count", group="slurm"),
    Setting("plan", "--plan", form="count", group="none"),
    Setting("runtime", "--runtime", _V + "RUNTIME", choices=("container", "host"),
            role_var="nccl_validate_runtime", role_default="container", group="run"),
    Setting("backend", "--backend", _V + "BACKEND", choices=("nccl", "gloo"),
            role_var="nccl_validate_backend", role_default="nccl", group="run"),
    Setting("transport", "--transport", _V + "TRANSPORT", choices=("IB", "Socket")),
    Setting("allow_socket", "--allow-socket", _V + "ALLOW_SOCKET", default=False),
    Setting("require_gdr", "--require-gdr", _V + "REQUIRE_GDR", default=False),
    Setting("pairwise", "--pairwise", _V + "PAIRWISE", default="auto", choices=PAIRWISE,
            role_var="nccl_validate_pairs", role_default="never", worker_flag="--pairs",
            group="plan"),
    Setting("compare_socket", "--compare-socket", _V + "COMPARE_SOCKET", default=False),
    Setting("launcher", "--launcher", _V + "LAUNCHER", default="ansible",
            choices=("ansible", "slurm"), group="slurm"),
    Setting("junit", "--junit", _V + "JUNIT", group="output"),
    Setting("html", "--html", _V + "HTML", group="output"),
    Setting("results", "--results", _V + "RESULTS", group="output"),
)
SETTINGS = dict((s.name, s) for s in VALIDATE)

# The command-line flags of ``rdmaprov validate`` that have a form or kind: flag -> (its
# environment variable, its form or kind). Judged before any host is contacted.
FLAGS = dict((s.flag, (s.env, s.form)) for s in VALIDATE if s.form)


def _role_forms():
    """The role variables they become, judged the same way in an inventory; not one whose role
    default is outside the kind (max_jitter's 0, "the worker's default", which
    validate_launch.pair_args judges). Run at the end of this file, once problem() exists."""
    for s in VALIDATE:
        if s.role_var and s.form in FORM_KINDS:
            FORMS[s.role_var] = s.form
        elif s.role_var and s.form and problem(s.form, s.role_default) is None:
            VARIABLES[s.role_var] = s.form


def worker_flags(values):
    """The worker's flags for the pair-round plan, from the role's settings ``values`` (keys
    without the nccl_validate_ prefix): none unless pairs are asked for; a setting whose role
    default means "none" (0) is left out at that value."""
    switch = SETTINGS["pairwise"]
    mode = str(values.get("pairs") or "never")
    if mode == "never":
        return []
    out = [switch.worker_flag, mode]
    for s in VALIDATE:
        if s.group != "plan" or not s.worker_flag or s is switch:
            continue
        key = s.role_var[len("nccl_validate_"):]
        value = values.get(key, s.role_default)
        if s.role_default == 0 and not float(value or 0):
            continue
        out += [s.worker_flag, str(value)]
    return out


_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text):
    """'4096', '512K', '256M', '1G' (also 256MiB, 1gb: binary units, as nccl-tests' -b/-e)
    -> bytes; None when ``text`` is not a size."""
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        return None
    t = str(text).strip().upper()
    t = t[:-1] if t.endswith("B") else t
    t = t[:-1] if t.endswith("I") else t
    unit = t[-1:] if t[-1:] in ("K", "M", "G") else ""
    number = t[:-1] if unit else t
    if not number or not all(c.isdigit() or c == "." for c in number) or number.count(".") > 1 \
            or number == ".":
        return None
    return int(float(number) * _SIZE_UNITS[unit])


def _interface(value):
    raw = value.encode("utf-8", "replace")
    return (0 < len(raw) <= 15 and value not in (".", "..") and not value.startswith("-")
            and all(c in _IFNAME_CHARS for c in value))


def _module_ok(value):
    if isinstance(value, dict):
        name, options = value.get("name"), value.get("options")
        if isinstance(name, str) and not _module_ok(name):
            return False
        return not isinstance(options, str) or all(c.isprintable() for c in options)
    if not isinstance(value, str):
        return True  # the type check reports it
    return bool(value) and not value.startswith("-") and all(c in _WORD + "-" for c in value)


def _image(value):
    if not value or value.startswith("-") or len(value) > 512:
        return False
    name, _sep, digest = value.partition("@")
    if digest:
        algo, sep, hexpart = digest.partition(":")
        if not (sep and algo.isalnum() and len(hexpart) >= 32
                and all(c in "0123456789abcdefABCDEF" for c in hexpart)):
            return False
    return bool(name) and all(c in _PATH_CHARS for c in name) and "//" not in name \
        and not name.endswith((":", "/"))


def _form_ok(form, value):
    if form.endswith("_or_empty"):
        if value == "":
            return True
        form = form[:-len("_or_empty")]
    if form == "absolute_path":
        return value.startswith("/") and all(c in _PATH_CHARS for c in value)
    if form == "interface":
        return _interface(value)
    if form == "nccl_ifnames":
        body = value[1:] if value.startswith("^") else value
        body = body[1:] if body.startswith("=") else body
        return value == "" or all(_interface(p) for p in body.split(","))
    if form == "unit_name":
        return value.endswith(".service") and len(value) > 8 and len(value) <= 255 \
            and not value.startswith("-") and all(c in _UNIT_CHARS for c in value)
    if form == "file_name":
        return bool(value) and value not in (".", "..") and not value.startswith("-") \
            and "/" not in value and all(c in _PATH_CHARS for c in value)
    if form == "nft_name":
        return 0 < len(value) <= 64 and value[0].isascii() and value[0].isalpha() \
            and all(c in _WORD for c in value)
    if form == "image":
        return _image(value)
    if form == "size":
        size = parse_size(value)
        return size is not None and size > 0
    raise KeyError(form)


def form_problem(name, value):
    """Why ``value`` of variable ``name`` does not have its form (FORMS), or None."""
    if name not in FORMS or value is None:
        return None
    return value_problem(FORMS[name], value)


def value_problem(form, value):
    """Why ``value`` does not have ``form`` (a key of FORM_KINDS), or None."""
    what = FORM_KINDS[form]
    if form == "nccl_keys":
        if not isinstance(value, dict):
            return None  # not a mapping: the type check reports it
        bad = sorted(str(k) for k in value if not _nccl_name(str(k)))
        return "%s: keys %s are not NCCL_* names" % (what, ", ".join(bad)) if bad else None
    if form == "kernel_module":
        return None if _module_ok(value) else "%s is not %s" % (_shown(value), what)
    if form == "size" and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        return None  # a list (judged element by element) or not a string: the type check
    return None if _form_ok(form, value) else "%s is not %s" % (_shown(value), what)


def _nccl_name(key):
    rest = key[len("NCCL_"):] if key.startswith("NCCL_") else ""
    return bool(rest) and all(c.isupper() or c.isdigit() or c == "_" for c in rest)


def _shown(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def flag_problem(flag, value):
    """'--FLAG/ENV: why' when ``value`` (as given: text, or argparse's number) is not what the
    flag takes (FLAGS), or None. Absent values (None) are not judged."""
    env, form = FLAGS[flag]
    if value is None:
        return None
    label = "%s/%s" % (flag, env) if env else flag
    if form in FORM_KINDS:
        why = value_problem(form, value if not isinstance(value, (int, float)) else str(value))
    else:
        number = _number(value, float if form in FLOAT_KINDS else int)
        why = ("%s is not a number" % _shown(value) if number is None
               else problem(form, number))
    return "%s: %s" % (label, why) if why else None


def _number(value, kind):
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    try:
        return kind(str(value).strip())
    except ValueError:
        return None


# The key of a list element that says which link an MTU is for.
LINK_KEY = "link_type"


def kind_of(name):
    """The kind of number ``name`` (a variable, VAR[].KEY, or a kind's own name) holds."""
    if name in VARIABLES:
        return VARIABLES[name]
    return name if name in KINDS else None


def bounds(kind, link_type=None):
    """(lowest, highest, what) of an integer kind; an MTU's highest depends on the link type."""
    low, high, what = KINDS[kind]
    if kind == "mtu" and link_type in MTU_MAX:
        high = MTU_MAX[link_type]
        what = "MTU for " + link_type.replace("_", " ").replace("ipoib", "IPoIB")
    return low, high, what


def problem(kind, value, link_type=None):
    """Why ``value`` (already of its argument-spec type) is out of range for ``kind``, or
    None. A bool is judged as the integer Ansible takes it for, and said to be one."""
    if kind in FLOAT_KINDS:
        low, high, what, open_low = FLOAT_KINDS[kind]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None  # not a number: the type check reports it
        if (low < value if open_low else low <= value) and value <= high:
            return None
        lowest = "more than %g" % low if open_low else "at least %g" % low
        return "%s is not a valid %s (%s, at most %g)" % (value, what, lowest, high)
    low, high, what = bounds(kind, link_type)
    if kind == "port_range" and isinstance(value, str):
        text = value.strip()
        first, sep, last = text.replace(":", "-").partition("-")
        if first.isdigit() and (not sep or last.isdigit()):
            lo, hi = int(first), int(last or first)
            if low <= lo <= hi <= high:
                return None
        return "%r is not a %s (%d..%d)" % (value, what, low, high)
    if kind == "port_range":
        what = KINDS["port"][2]
    if isinstance(value, bool):
        number = int(value)
        shown = "%s (a boolean, which Ansible takes as %d)" % (str(value).lower(), number)
    elif isinstance(value, int):
        number, shown = value, str(value)
    else:
        return None  # not a number: the type check reports it
    if low <= number <= high:
        return None
    return "%s is not a valid %s (%d..%d)" % (shown, what, low, high)


def host_link_type(link_layer, ipoib_mode=None):
    """Our link type of a host's interface from its facts (sysfs link layer and IPoIB mode)."""
    if link_layer == "infiniband":
        return "ipoib_connected" if ipoib_mode == "connected" else "ipoib_datagram"
    return "ethernet"


def problems(values):
    """["NAME: why"] for the ranged and formed variables among ``values`` (name -> value; a
    string of digits, as INI gives it, is taken as its number; a list is judged element by
    element)."""
    out = []
    for name in sorted(values):
        kind = kind_of(name)
        value = values[name]
        items = value if isinstance(value, list) else [value]
        for item in items:
            why = form_problem(name, item)
            if why:
                out.append("%s: %s" % (name, why))
        if kind is None or value is None:
            continue
        for item in items:
            why = _number_problem(kind, item)
            if why:
                out.append("%s: %s" % (name, why))
    return out


def _number_problem(kind, value):
    if kind in FLOAT_KINDS:
        number = _number(value, float)
        return "%r is not a number" % (value,) if number is None else problem(kind, number)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    elif isinstance(value, float) and value.is_integer():
        value = int(value)  # as Ansible converts it for an int option
    if not isinstance(value, (int, str)):
        return "%r is not a number" % (value,)
    why = problem(kind, value)
    if why is None and isinstance(value, str) and kind != "port_range":
        why = "%r is not a number" % value
    return why


_role_forms()
