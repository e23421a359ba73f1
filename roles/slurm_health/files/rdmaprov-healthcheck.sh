#!/bin/sh
# Slurm HealthCheckProgram (slurm.conf: HealthCheckProgram=/etc/slurm/rdmaprov-healthcheck.sh,
# HealthCheckInterval=300). Installed by the rdmaprov.cluster.slurm_health role; settings come
# from /etc/rdmaprov/slurm.env. `rdmaprov check --drain` applies NHC's rules: an unhealthy node is
# drained "rdmaprov: <reason>" unless it is DOWN or drained for another reason (kept), and a
# healthy node is resumed only if rdmaprov drained it. The node_exporter textfile
# (RDMAPROV_CHECK_PROMETHEUS) is rewritten on every run. slurmd kills this after 60 s: keep
# RDMAPROV_CHECK_BUDGET below that when the check runs --nccl. --verify (the role's proof; Slurm
# passes no argument): the same check without --drain, its reason and its exit code.

[ -r /etc/rdmaprov/slurm.env ] && { set -a; . /etc/rdmaprov/slurm.env; set +a; }
[ "${1:-}" = --verify ] && exec "${RDMAPROV:-rdmaprov}" check --nhc
"${RDMAPROV:-rdmaprov}" check --nhc --drain >/dev/null
exit 0
