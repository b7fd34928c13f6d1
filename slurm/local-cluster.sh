#!/usr/bin/env bash
# A real single-node Slurm on this machine, for tests and for trying burstpool
# without a cluster: munged, slurmctld and slurmd from Debian's packages.
#
#   slurm/local-cluster.sh start   # prints: export SLURM_CONF=...
#   slurm/local-cluster.sh stop    # stops the daemons it started, by pid
#   slurm/local-cluster.sh status
#
# State, logs and pid files live in $BURSTPOOL_SLURM_DIR (default
# /tmp/burstpool-slurm). Runs as root (as the tests and CI do). Settings known
# to work in a container: proctrack/linuxproc, task/none, MpiDefault=pmix.
set -euo pipefail
dir=${BURSTPOOL_SLURM_DIR:-/tmp/burstpool-slurm}
conf=$dir/slurm.conf
node=$(hostname -s)

start() {
  for exe in munged slurmctld slurmd sbatch srun; do
    command -v "$exe" >/dev/null || { echo "local-cluster: $exe missing (install slurm-wlm and munge)" >&2; exit 1; }
  done
  mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
  chmod 755 "$dir"  # the munge user must reach its folder inside
  # munge: its socket folder must belong to the munge user.
  mkdir -p /run/munge
  chown munge:munge /run/munge "$dir/munge"
  if [[ ! -f /etc/munge/munge.key ]]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
  fi
  if ! [[ -f $dir/munged.pid ]] || ! kill -0 "$(cat "$dir/munged.pid")" 2>/dev/null; then
    runuser -u munge -- munged --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
      --seed-file="$dir/munge/munged.seed"
    cp "$dir/munge/munged.pid" "$dir/munged.pid"
  fi
  local cpus mem
  cpus=$(nproc --all)  # not plain nproc: it follows OMP_NUM_THREADS
  mem=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024))
  cat >"$conf" <<CONF
ClusterName=burstpool-local
SlurmctldHost=$node
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
MpiDefault=pmix
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobRequeue=1
KillOnBadExit=1
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
  export SLURM_CONF=$conf
  kill -0 "$(cat "$dir/slurmctld.pid" 2>/dev/null)" 2>/dev/null || slurmctld -f "$conf"
  kill -0 "$(cat "$dir/slurmd.pid" 2>/dev/null)" 2>/dev/null || slurmd -f "$conf"
  for _ in $(seq 1 60); do
    if sinfo -h -o %T 2>/dev/null | grep -qE "idle|mixed|allocated"; then
      echo "export SLURM_CONF=$conf"
      return 0
    fi
    sleep 0.5
  done
  echo "local-cluster: the node did not come up; see $dir/slurmctld.log and $dir/slurmd.log" >&2
  tail -n 5 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
  exit 1
}

stop() {
  for daemon in slurmd slurmctld munged; do
    local pidfile=$dir/$daemon.pid
    [[ -f $pidfile ]] || continue
    local pid
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid"
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$pidfile"
  done
  echo "local-cluster: stopped"
}

status() {
  for daemon in munged slurmctld slurmd; do
    local pid
    pid=$(cat "$dir/$daemon.pid" 2>/dev/null || true)
    if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then echo "$daemon: running (pid $pid)"; else echo "$daemon: stopped"; fi
  done
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
