#!/usr/bin/env bash
# rdmaprov's entry points for a newcomer and for CI, on a Debian/Ubuntu machine, as root.
#
#   ./run.sh demo     install, bring up a 3-node lab, bootstrap it with rdmaprov
#   ./run.sh test     install, run the whole test suite (unit + lab integration)
#   ./run.sh setup    install only: system packages and the .venv
#   ./run.sh lint     ansible-lint (production profile, repository root), yamllint, ruff, mypy, changelog
#   ./run.sh sanity   ansible-test sanity over the built collection, as Galaxy/Automation Hub run it
set -euo pipefail
cd "$(dirname "$0")"

VENV=${RDMAPROV_VENV:-.venv}
# The distribution's Python (the README's machine, and what CI must prove), not whichever
# python3 is first on PATH (a pyenv or conda one); RDMAPROV_PYTHON names another on purpose.
PYTHON=${RDMAPROV_PYTHON:-/usr/bin/python3}
# Host packages: the lab (debootstrap, apt-ftparchive, namespaces, ssh), and venv support.
APT_PACKAGES=(debootstrap apt-utils iproute2 openssh-client util-linux python3 python3-venv python3-apt
              python3-pip git ca-certificates iputils-ping nftables)

need_root() { [ "$(id -u)" = 0 ] || { echo "run.sh: $1 needs root (sudo ./run.sh $1)" >&2; exit 1; }; }

setup() {
  need_root setup
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "run.sh: installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  venv
}

# The .venv with rdmaprov and its test and lint tools (no root needed).
venv() {
  if [ ! -x "$VENV/bin/python" ]; then
    [ -x "$PYTHON" ] || { echo "run.sh: no $PYTHON (install python3, or set RDMAPROV_PYTHON)" >&2; exit 1; }
    "$PYTHON" -m venv "$VENV"
  elif ! grep -qx "home = $(dirname "$(readlink -f "$PYTHON")")" "$VENV/pyvenv.cfg" 2>/dev/null \
       && ! grep -qx "home = $(dirname "$PYTHON")" "$VENV/pyvenv.cfg" 2>/dev/null; then
    echo "run.sh: note: $VENV was not made from $PYTHON ($(grep -s '^home' "$VENV/pyvenv.cfg"));" \
         "remove it to test with the distribution's Python" >&2
  fi
  "$VENV/bin/pip" install -q --upgrade pip >/dev/null
  "$VENV/bin/pip" install -q -e ".[test,lint,fast]"
}

# lint and sanity on their own: install only when a tool is missing.
venv_tools() {
  "$VENV/bin/python" -c 'import rdmaprov, ansiblelint, antsibull_changelog, yamllint, mypy, ruff' \
    2>/dev/null || venv
}

with_worker() {
  # The validation worker's tests need torch; 2.13.0's CPU wheel is what this kind of machine
  # carries. A control host does not need torch at all.
  "$VENV/bin/python" -c 'import torch' 2>/dev/null || "$VENV/bin/pip" install -q "torch==2.13.0"
}

# ansible-test sanity on the collection tarball, installed under ansible_collections/ the way a
# user (and Galaxy's or Automation Hub's import) gets it. Extra arguments go to ansible-test
# (e.g. --test validate-modules). Its sanity venvs are cached in ~/.ansible/test/venv.
sanity() {
  local work py pipver cache coll bin
  # Without shellcheck ansible-test skips its shellcheck test; Galaxy's and Hub's runs have it.
  if ! command -v shellcheck >/dev/null; then
    need_root sanity
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends shellcheck >/dev/null
  fi
  work=$(mktemp -d /tmp/rdmaprov-sanity.XXXXXX)
  "$VENV/bin/ansible-galaxy" collection build --output-path "$work" . >/dev/null
  ANSIBLE_COLLECTIONS_PATH="$work" "$VENV/bin/ansible-galaxy" collection install --force --no-deps \
    -p "$work" "$work"/rdmaprov-cluster-*.tar.gz >/dev/null 2>&1
  coll="$work/ansible_collections/rdmaprov/cluster"
  [ -f "$coll/MANIFEST.json" ] || { echo "run.sh: the collection did not install into $work" >&2; exit 1; }
  py=$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  # ansible-test starts each of its venvs with a get-pip script it downloads from Ansible's CI
  # file host, which a machine that reaches only package indexes cannot; this stand-in does the
  # same with the interpreter's own ensurepip, then installs the pip version asked for.
  pipver=$("$VENV/bin/python" -c 'from types import SimpleNamespace as N
from ansible_test._internal.python_requirements import get_venv_packages as g
print(g(N(version="'"$py"'"))["pip"])')
  cache="$HOME/.ansible/test/cache/get_pip_${pipver//./_}.py"
  if [ ! -f "$cache" ]; then
    mkdir -p "$(dirname "$cache")"
    cat >"$cache" <<'EOF'
"""Stand-in for get-pip.py (written by rdmaprov's run.sh): ensurepip, then pip install."""
import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.run([sys.executable, "-m", "ensurepip", "--default-pip"], check=True,
               stdout=subprocess.DEVNULL)
sys.exit(subprocess.run([sys.executable, "-m", "pip", "install", "--upgrade", *args]).returncode)
EOF
  fi
  bin=$(cd "$VENV/bin" && pwd)
  (cd "$coll" && "$bin/ansible-test" sanity --color no --python "$py" "$@")
  rm -rf "$work"
}

case "${1:-}" in
  setup) setup ;;
  demo)
    setup
    # lab up prints its inventory's path (the lab's name and state directory may come from
    # RDMAPROV_LAB_NAME / RDMAPROV_LAB_DIR): bootstrap that one.
    inv=$("$VENV/bin/rdmaprov" lab up --nodes "${RDMAPROV_DEMO_NODES:-3}")
    rc=0
    "$VENV/bin/rdmaprov" bootstrap "$inv" || rc=$?
    # rdmaprov lives in the venv, not on PATH: say how to reach it for the README's next steps.
    bin=$(cd "$VENV/bin" && pwd)
    cat >&2 <<EOT

run.sh: rdmaprov is installed in $bin. To use it as the README shows:
  export PATH="$bin:\$PATH"
  rdmaprov lab status
  rdmaprov status $inv
  rdmaprov lab down
EOT
    exit "$rc"
    ;;
  test)
    setup
    with_worker
    shift
    # --durations: the slowest tests, where the suite's time goes (issue 28: <= 30 min).
    RDMAPROV_REQUIRE_LAB=1 "$VENV/bin/pytest" -ra --durations=30 "$@"
    ;;
  lint)
    venv_tools
    # The whole repository as Galaxy and Automation Hub users lint a collection (.ansible-lint).
    "$VENV/bin/ansible-lint"
    "$VENV/bin/yamllint" -s roles playbooks molecule changelogs plugins meta
    "$VENV/bin/ruff" check rdmaprov tests bench
    "$VENV/bin/mypy"
    # Fragments well-formed, and CHANGELOG.md what changelogs/changelog.yaml says.
    "$VENV/bin/antsibull-changelog" lint
    "$VENV/bin/antsibull-changelog" generate
    git diff --exit-code -- CHANGELOG.md || {
      echo "run.sh: CHANGELOG.md was out of date with changelogs/changelog.yaml (regenerated above)" >&2
      exit 1
    }
    ;;
  sanity) shift; venv_tools; sanity "$@" ;;
  *) sed -n 2,9p "$0"; exit 2 ;;
esac
