#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for trying the SLURM profile for real (make cluster-up,
# make cluster-down; tests/pipeline/test_slurm.py). Debian's SLURM and munge, installed when
# missing; slurm.conf written from the machine's cores and memory at SLURM's default path (the
# executor plugin's job step strips every SLURM_* variable, so SLURM_CONF alone would leave the
# inner srun with no configuration); every state, spool, pid and log file under one scratch
# folder; the daemons started and stopped by their pid files.
#
#   workflow/slurm/local_cluster.sh start|stop|status
#
# No accounting daemon: the profile tracks jobs with squeue (--slurm-status-command squeue,
# docs/pipeline.md), and MinJobAge keeps finished jobs visible to scontrol for an hour.
set -euo pipefail

SCRATCH=${LINEFUSE_SLURM_DIR:-/tmp/linefuse-slurm}
CONF=/etc/slurm/slurm.conf
PARTITIONS="cpu gpu"  # the names the shipped profile uses; both are this node's cores here
PACKAGES="slurmctld slurmd slurm-client munge"

fail() { echo "local_cluster: $*" >&2; exit 1; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo -n "$@"; else
    fail "needs root (or passwordless sudo) to install SLURM and write $CONF"; fi
}

install() {
  command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
    && command -v sbatch >/dev/null && return
  command -v apt-get >/dev/null || fail "SLURM is not installed and there is no apt-get; install $PACKAGES"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $PACKAGES >/dev/null \
    || as_root sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $PACKAGES" >/dev/null \
    || fail "apt-get could not install $PACKAGES"
}

write_conf() {
  local host cpus memory
  host=$(hostname -s)
  # the machine's cores: nproc alone obeys OMP_NUM_THREADS, which a caller may have set lower
  cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
  memory=$(( $(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo) * 9 / 10 ))  # MB, 10% spare
  as_root mkdir -p /etc/slurm "$SCRATCH/state" "$SCRATCH/spool"
  as_root tee "$CONF" >/dev/null <<EOF
# written by workflow/slurm/local_cluster.sh: one node, $cpus cores, $memory MB
ClusterName=linefuse
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$(( memory / cpus ))
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MinJobAge=3600
ReturnToService=2
StateSaveLocation=$SCRATCH/state
SlurmdSpoolDir=$SCRATCH/spool
SlurmctldPidFile=$SCRATCH/slurmctld.pid
SlurmdPidFile=$SCRATCH/slurmd.pid
SlurmctldLogFile=$SCRATCH/slurmctld.log
SlurmdLogFile=$SCRATCH/slurmd.log
NodeName=$host CPUs=$cpus RealMemory=$memory State=UNKNOWN
EOF
  local default=YES
  for partition in $PARTITIONS; do
    echo "PartitionName=$partition Nodes=$host Default=$default MaxTime=INFINITE State=UP" \
      | as_root tee -a "$CONF" >/dev/null
    default=NO
  done
}

stop_pid() {  # stop_pid FILE: the daemon whose pid FILE holds, if it runs
  local pid
  [ -f "$1" ] || return 0
  pid=$(cat "$1")
  if kill -0 "$pid" 2>/dev/null; then
    as_root kill "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && as_root kill -9 "$pid"
  fi
  as_root rm -f "$1"
}

start() {
  install
  stop  # a cluster left from an earlier run: start clean
  write_conf
  as_root mkdir -p /run/munge
  as_root chown munge:munge /run/munge
  as_root runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid \
    || fail "munged did not start (see /var/log/munge/munged.log)"
  as_root slurmctld || fail "slurmctld did not start (see $SCRATCH/slurmctld.log)"
  as_root slurmd || fail "slurmd did not start (see $SCRATCH/slurmd.log)"
  for _ in $(seq 100); do
    if sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
      echo "local_cluster: up: $(sinfo -h -o '%P %D nodes, %c cpus, %m MB' | tr '\n' ';')"
      return
    fi
    sleep 0.1
  done
  fail "the node did not come up (see $SCRATCH/slurmctld.log and $SCRATCH/slurmd.log)"
}

stop() {
  stop_pid "$SCRATCH/slurmd.pid"
  stop_pid "$SCRATCH/slurmctld.pid"
  stop_pid /run/munge/munged.pid
  as_root rm -rf "$SCRATCH/state" "$SCRATCH/spool"
}

case "${1:-}" in
  start) start ;;
  stop) stop; echo "local_cluster: stopped" ;;
  status) sinfo ;;
  *) fail "usage: $0 start|stop|status" ;;
esac
