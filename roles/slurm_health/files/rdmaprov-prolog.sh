#!/bin/sh
# Slurm Prolog (slurm.conf: Prolog=/etc/slurm/rdmaprov-prolog.sh): run `rdmaprov check` before
# each job on each allocated node. A failed check drains this node with rdmaprov's own reason
# and fails the prolog, so Slurm requeues the job elsewhere instead of starting it here.
#
# Expectations come from /etc/rdmaprov/check.yml (or $RDMAPROV_CHECK_CONFIG).
# RDMAPROV: the rdmaprov command (default: rdmaprov on PATH).
# RDMAPROV_PROLOG_DRAIN=0 only reports (exit 1 still fails the prolog).

RDMAPROV=${RDMAPROV:-rdmaprov}
node=${SLURMD_NODENAME:-$(hostname -s)}

# --nhc: nothing on stdout when healthy, else exactly one reason line.
reason=$("$RDMAPROV" check --nhc 2>&1)
rc=$?
[ "$rc" -eq 0 ] && exit 0

# rc 1 is a broken check configuration, not a broken node; it still must not run jobs blind.
[ "$rc" -eq 1 ] && reason="rdmaprov check config error: $reason"
reason=$(printf '%s' "$reason" | head -n 1 | tr '"' "'" | cut -c1-200)
logger -t rdmaprov-prolog "job ${SLURM_JOB_ID:-?} on $node: $reason" 2>/dev/null
if [ "${RDMAPROV_PROLOG_DRAIN:-1}" = 1 ]; then
    scontrol update nodename="$node" state=drain reason="rdmaprov: $reason"
fi
exit 1
