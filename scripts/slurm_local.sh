#!/usr/bin/env bash
# A one-node Slurm on this machine, in a directory of its own (munged, slurmctld and slurmd on
# loopback, on free ports, nothing in /etc): to try scripts/tune_slurm.sh, and for the fleet
# test. Needs root and Debian's slurm-wlm and munge.
#   scripts/slurm_local.sh start DIR   then: export SLURM_CONF=DIR/slurm.conf
#   scripts/slurm_local.sh stop DIR
# Exit status: 0 up (or stopped), 77 cannot start here (the reason on stderr), 2 usage.
set -uo pipefail

usage() {
  sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
}
[ $# -eq 2 ] || { usage >&2; exit 2; }
action=$1
dir=$2
PATH=/usr/sbin:$PATH

cannot() {
  echo "slurm_local.sh: $*" >&2
  exit 77
}

stop() {
  if [ -f "$dir/slurm.conf" ]; then
    SLURM_CONF=$dir/slurm.conf scancel --quiet --user="$(id -un)" 2>/dev/null
  fi
  for pidfile in slurmd.pid slurmctld.pid munged.pid; do
    [ -f "$dir/$pidfile" ] && kill "$(cat "$dir/$pidfile")" 2>/dev/null
    rm -f "$dir/$pidfile"
  done
  return 0
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
  for bin in munged slurmctld slurmd sbatch squeue scancel sinfo; do
    command -v "$bin" >/dev/null ||
      cannot "$bin is not installed (Debian packages slurm-wlm and munge; scripts/setup.sh --test installs them)"
  done
  [ "$(id -u)" -eq 0 ] ||
    cannot "slurmd starts jobs as their users and must run as root; this is $(id -un)"
  mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
  dir=$(realpath "$dir")
  chmod 755 "$dir"
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 700 "$dir/munge"
  chmod 600 "$dir/munge/munge.key"
  munged --force --socket="$dir/munge/socket" --key-file="$dir/munge/munge.key" \
    --log-file="$dir/log/munged.log" --pid-file="$dir/munged.pid" --seed-file="$dir/munge/seed" ||
    cannot "munged did not start: $(tail -2 "$dir/log/munged.log" 2>/dev/null)"
  local host cpus mem
  host=$(hostname -s)
  cpus=$(nproc)
  mem=$(awk '/MemTotal/ { print int($2 / 1024 * 0.8) }' /proc/meminfo)
  cat > "$dir/slurm.conf" <<EOF
ClusterName=tuneclocal
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
AuthInfo=socket=$dir/munge/socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=tunec Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -i || { stop; cannot "slurmctld did not start: $(tail -3 "$dir/log/slurmctld.log" 2>/dev/null)"; }
  slurmd || { stop; cannot "slurmd did not start: $(tail -3 "$dir/log/slurmd.log" 2>/dev/null)"; }
  for _ in $(seq 1 30); do
    sinfo --noheader --states=idle 2>/dev/null | grep -q idle && break
    sleep 1
  done
  if ! sinfo --noheader --states=idle 2>/dev/null | grep -q idle; then
    stop
    cannot "the node did not come up: $(tail -3 "$dir/log/slurmd.log" 2>/dev/null)"
  fi
  echo "slurm_local.sh: one-node Slurm up on $host ($cpus CPUs, $(sinfo --version)); export SLURM_CONF=$dir/slurm.conf"
}

case "$action" in
  start) start ;;
  stop) stop ;;
  *) usage >&2; exit 2 ;;
esac
