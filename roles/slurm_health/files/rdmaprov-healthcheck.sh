#!/bin/sh
# Slurm HealthCheckProgram (slurm.conf: HealthCheckProgram=/etc/slurm/rdmaprov-healthcheck.sh,
# HealthCheckInterval=300): drain the node when `rdmaprov check` fails, and resume it when the
# check passes again, but only if rdmaprov drained it (an admin's own drain is left alone).
# Also refreshes node_exporter metrics when RDMAPROV_TEXTFILE_DIR is set.

RDMAPROV=${RDMAPROV:-rdmaprov}
node=${SLURMD_NODENAME:-$(hostname -s)}
prom=""
[ -n "$RDMAPROV_TEXTFILE_DIR" ] && prom="--prometheus $RDMAPROV_TEXTFILE_DIR"

# shellcheck disable=SC2086  # $prom is two words or none
reason=$("$RDMAPROV" check --nhc $prom 2>&1)
rc=$?
current=$(scontrol show node "$node" 2>/dev/null | sed -n 's/^ *Reason=\(.*\) \[.*$/\1/p')

if [ "$rc" -ne 0 ]; then
    [ "$rc" -eq 1 ] && reason="rdmaprov check config error: $reason"
    reason=$(printf '%s' "$reason" | head -n 1 | tr '"' "'" | cut -c1-200)
    scontrol update nodename="$node" state=drain reason="rdmaprov: $reason"
    exit 0
fi
case "$current" in
    rdmaprov:*) scontrol update nodename="$node" state=resume ;;
esac
exit 0
