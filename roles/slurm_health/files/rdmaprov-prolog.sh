#!/bin/sh
# Slurm Prolog (slurm.conf: Prolog=/etc/slurm/rdmaprov-prolog.sh): `rdmaprov check` on each
# allocated node before the job's first step. Installed by the rdmaprov.cluster.slurm_health role;
# settings come from /etc/rdmaprov/slurm.env (RDMAPROV, RDMAPROV_CHECK_CONFIG, ...).
#
# rdmaprov check's exit code, and what this prolog then does:
#   0 healthy        exit 0: the job starts.
#   2 unhealthy      rdmaprov has drained the node "rdmaprov: <reason>" (NHC's rules: a node
#                    drained for another reason keeps it); exit 1: Slurm requeues the job, held
#                    unless SchedulerParameters=nohold_on_prolog_fail, and keeps that reason.
#   1 config error   drained "rdmaprov: config error: ..." (a bad flag is not drained by
#                    rdmaprov: Slurm drains it "Prolog error"); exit 1, as above.
#   anything else    (rdmaprov missing, killed at PrologEpilogTimeout) exit 1: Slurm drains the
#                    node "Prolog error" and requeues the job.
# RDMAPROV_PROLOG_DRAIN=0 leaves draining to Slurm ("Prolog error") and only logs the reason.
# --verify (the role's proof; Slurm passes no argument): the same check without --drain, its
# reason on stdout and its exit code.

[ -r /etc/rdmaprov/slurm.env ] && { set -a; . /etc/rdmaprov/slurm.env; set +a; }
drain=--drain
[ "${RDMAPROV_PROLOG_DRAIN:-1}" = 1 ] || drain=
[ "${1:-}" = --verify ] && drain=

# --nhc: nothing on stdout when healthy, else the one reason line.
reason=$("${RDMAPROV:-rdmaprov}" check --nhc $drain)
rc=$?
if [ "${1:-}" = --verify ]; then
    [ -n "$reason" ] && printf '%s\n' "$reason"
    exit "$rc"
fi
[ "$rc" -eq 0 ] && exit 0
logger -t rdmaprov-prolog "job ${SLURM_JOB_ID:-?} on ${SLURMD_NODENAME:-$(hostname -s)}:" \
    "check exit $rc: ${reason:-see stderr}" 2>/dev/null
exit 1
