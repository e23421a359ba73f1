#!/usr/bin/env bash
# rdmaprov's entry points for a newcomer and for CI, on a Debian/Ubuntu machine, as root.
#
#   ./run.sh demo     install, bring up a 3-node lab, bootstrap it with rdmaprov
#   ./run.sh test     install, run the whole test suite (unit + lab integration)
#   ./run.sh setup    install only: system packages and the .venv
#   ./run.sh lint     ansible-lint, yamllint, ruff, mypy
set -euo pipefail
cd "$(dirname "$0")"

VENV=${RDMAPROV_VENV:-.venv}
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
  if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
  fi
  "$VENV/bin/pip" install -q --upgrade pip >/dev/null
  "$VENV/bin/pip" install -q -e ".[test,lint]"
}

with_worker() {
  # The validation worker's tests need torch; 2.13.0's CPU wheel is what this kind of machine
  # carries. A control host does not need torch at all.
  "$VENV/bin/python" -c 'import torch' 2>/dev/null || "$VENV/bin/pip" install -q "torch==2.13.0"
}

case "${1:-}" in
  setup) setup ;;
  demo)
    setup
    "$VENV/bin/rdmaprov" lab up --nodes "${RDMAPROV_DEMO_NODES:-3}"
    rc=0
    "$VENV/bin/rdmaprov" bootstrap /var/lib/rdmaprov/lab/lab/inventory.ini || rc=$?
    # rdmaprov lives in the venv, not on PATH: say how to reach it for the README's next steps.
    bin=$(cd "$VENV/bin" && pwd)
    cat >&2 <<EOT

run.sh: rdmaprov is installed in $bin. To use it as the README shows:
  export PATH="$bin:\$PATH"
  rdmaprov lab status
  rdmaprov status /var/lib/rdmaprov/lab/lab/inventory.ini
  rdmaprov lab down
EOT
    exit "$rc"
    ;;
  test)
    setup
    with_worker
    shift
    RDMAPROV_REQUIRE_LAB=1 "$VENV/bin/pytest" -ra "$@"
    ;;
  lint)
    "$VENV/bin/ansible-lint" roles playbooks
    "$VENV/bin/yamllint" -s roles playbooks
    "$VENV/bin/ruff" check rdmaprov tests bench
    "$VENV/bin/mypy"
    ;;
  *) sed -n 2,8p "$0"; exit 2 ;;
esac
