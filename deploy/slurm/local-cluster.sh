#!/usr/bin/env bash
# A real single-node SLURM on this machine (munged + slurmctld + slurmd on localhost), to try
# `cluster.kind: slurm` and to run the `slurm` tests. Needs root and Debian's packages:
#
#   apt-get install -y slurm-wlm munge
#   deploy/slurm/local-cluster.sh up       # write slurm.conf, start munged, slurmctld, slurmd
#   sinfo; squeue                          # one partition "debug", one node, idle
#   .venv/bin/python -m pytest -q -m slurm tests/slurm
#   deploy/slurm/local-cluster.sh down     # cancel every job, stop the daemons, remove the conf
#   deploy/slurm/local-cluster.sh status
#
# The node offers max(cores, 8) CPUs (SlurmdParameters=config_overrides lets a small machine
# pretend to have more, so a few single-core worker jobs and their replacements fit at once)
# and 90 % of the memory. Daemons run as root, without cgroups or accounting storage: sacct
# needs slurmdbd, so finished jobs are logged by jobcomp/filetxt in $STATE/jobcomp.log instead.
#
# Environment: SLURM_LOCAL_STATE (state and logs, default /var/lib/cloudremoval-slurm),
# SLURM_LOCAL_CPUS, SLURM_LOCAL_MEMORY_MB. An /etc/slurm/slurm.conf not written by this script
# is never overwritten or removed.
set -euo pipefail

STATE=${SLURM_LOCAL_STATE:-/var/lib/cloudremoval-slurm}
CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
MARK="# written by cloudremoval deploy/slurm/local-cluster.sh"
NODE=$(hostname -s)

die() { echo "local-cluster.sh: $*" >&2; exit 1; }

need_root() {
    [ "$(id -u)" -eq 0 ] || die "must run as root (it starts munged, slurmctld and slurmd)"
    for cmd in munged slurmctld slurmd sinfo scontrol; do
        command -v "$cmd" >/dev/null || die "$cmd not found: apt-get install -y slurm-wlm munge"
    done
}

ours() { [ -f "$CONF" ] && head -n 1 "$CONF" | grep -qF "$MARK"; }

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

write_conf() {
    local cores mem_kb cpus mem_mb
    cores=$(nproc)
    cpus=${SLURM_LOCAL_CPUS:-$(( cores > 8 ? cores : 8 ))}
    mem_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
    mem_mb=${SLURM_LOCAL_MEMORY_MB:-$(( mem_kb / 1024 * 9 / 10 ))}
    mkdir -p "$CONF_DIR" "$STATE/ctld" "$STATE/d"
    cat >"$CONF.tmp" <<EOF
$MARK ($(date -u +%FT%TZ))
ClusterName=cloudremoval-local
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$STATE/jobcomp.log
MinJobAge=300
KillWait=10
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
    mv "$CONF.tmp" "$CONF"
    echo "wrote $CONF: node $NODE, $cpus CPUs, $mem_mb MB"
}

start_munge() {
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        echo "munged already running"
        return
    fi
    if [ ! -s /etc/munge/munge.key ]; then
        mkdir -p /etc/munge
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=128 status=none
    fi
    chown munge:munge /etc/munge /etc/munge/munge.key
    chmod 0700 /etc/munge
    chmod 0400 /etc/munge/munge.key
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown munge:munge /run/munge /var/lib/munge /var/log/munge
    runuser -u munge -- /usr/sbin/munged
    touch "$STATE/munged.ours"  # down stops only a munged that up started
    for _ in $(seq 50); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && { echo "munged started"; return; }
        sleep 0.2
    done
    die "munged did not come up (see /var/log/munge/munged.log)"
}

wait_idle() {
    local state=""
    for _ in $(seq 60); do
        state=$(sinfo -h -n "$NODE" -o %T 2>/dev/null || true)
        case $state in
            idle*|mixed*|allocated*) echo "node $NODE: $state"; return ;;
            down*|drain*|fail*) scontrol update NodeName="$NODE" State=RESUME 2>/dev/null || true ;;
        esac
        sleep 1
    done
    die "node $NODE not idle after 60 s (state '$state'); see $STATE/slurmctld.log, $STATE/slurmd.log"
}

up() {
    need_root
    if [ -f "$CONF" ] && ! ours; then
        die "$CONF exists and was not written by this script: not touching it"
    fi
    if pid_alive "$STATE/slurmctld.pid" || pid_alive "$STATE/slurmd.pid"; then
        echo "already up"; wait_idle; return
    fi
    write_conf
    start_munge
    slurmctld -c  # -c: clean start, no jobs from an earlier cluster
    slurmd
    wait_idle
    sinfo
}

stop_pid() {
    local file=$1 name=$2
    if pid_alive "$file"; then
        local pid
        pid=$(cat "$file")
        kill "$pid"
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
        echo "stopped $name ($pid)"
    fi
    rm -f "$file"
}

down() {
    need_root
    if pid_alive "$STATE/slurmctld.pid"; then
        local jobs
        jobs=$(squeue -h -o %i 2>/dev/null || true)
        if [ -n "$jobs" ]; then
            # shellcheck disable=SC2086
            scancel $jobs || true
            echo "cancelled jobs: $(echo $jobs)"
            sleep 2
        fi
    fi
    stop_pid "$STATE/slurmd.pid" slurmd
    stop_pid "$STATE/slurmctld.pid" slurmctld
    if [ -f "$STATE/munged.ours" ]; then
        stop_pid /run/munge/munged.pid munged
        rm -f "$STATE/munged.ours"
    fi
    if ours; then rm -f "$CONF"; echo "removed $CONF"; fi
    echo "logs kept in $STATE"
}

status() {
    if ours && pid_alive "$STATE/slurmctld.pid"; then
        sinfo && squeue
    else
        echo "not up"; return 1
    fi
}

case ${1:-} in
    up) up ;;
    down) down ;;
    status) status ;;
    *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
