#!/usr/bin/env bash
# A real Slurm on this machine: munged, slurmctld and two slurmd (nodes n1 and n2, one host), for the tests,
# CI and docs/cluster.md.
#
#   scripts/slurm-local.sh up [DIR]      install (Debian, as root, where missing), configure, start, wait for idle nodes
#   scripts/slurm-local.sh status [DIR]  what runs, and the nodes' states
#   scripts/slurm-local.sh down [DIR]    cancel the cluster's jobs, stop the daemons this script started
#
# DIR (default $SLURM_LOCAL_DIR, else $TMPDIR/slurm-local) holds everything: slurm.conf, the munge key and
# socket, the daemons' state, logs and pid files. Point the Slurm commands at it with
#   export SLURM_CONF=DIR/slurm.conf
# The configuration needs no cgroups and no systemd (proctrack/linuxproc, task/none, no accounting); each node
# has half of this host's CPUs (at least one), so the two together have what the host has.
# Exit status: 0 done; 3 Slurm cannot run here (not root, no apt-get, ...: the one line on stderr says why);
# 1 anything else.
set -euo pipefail

cmd=${1:-}
dir=${2:-${SLURM_LOCAL_DIR:-${TMPDIR:-/tmp}/slurm-local}}
NODES=(n1 n2)
MARKER=.slurm-local  # written in DIR: the folder is this script's, so a stale one may be cleared
WAIT_S=${SLURM_LOCAL_WAIT_S:-180}  # how long `up` waits for the nodes to be idle (a busy machine is slow)

cannot() { echo "slurm-local: $*" >&2; exit 3; }
fail() { echo "slurm-local: $*" >&2; exit 1; }

# True when FILE names a live process whose command is NAME (a pid that was reused is not ours).
alive() {
  local file=$1 name=$2 pid
  [[ -s $file ]] || return 1
  pid=$(<"$file")
  [[ -r /proc/$pid/comm && $(<"/proc/$pid/comm") == "$name" ]]
}

install_packages() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
      && command -v munged >/dev/null; then
    return
  fi
  [[ $(id -u) == 0 ]] || cannot "Slurm is not installed and installing it needs root (apt-get install slurm-wlm munge)"
  command -v apt-get >/dev/null || cannot "Slurm is not installed and there is no apt-get to install it with"
  # The packages' maintainer scripts would start the daemons with the system's configuration: a policy
  # that forbids it, unless the system already has one.
  local policy=/usr/sbin/policy-rc.d added=""
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && added=1
  fi
  local apt=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends slurm-wlm munge)
  "${apt[@]}" >"$dir.apt.log" 2>&1 || { apt-get update -q >>"$dir.apt.log" 2>&1 && "${apt[@]}" >>"$dir.apt.log" 2>&1; } \
    || { [[ -z $added ]] || rm -f "$policy"; cannot "apt-get install slurm-wlm munge failed (see $dir.apt.log)"; }
  [[ -z $added ]] || rm -f "$policy"
  rm -f "$dir.apt.log"
}

free_ports() {  # N ports free on 127.0.0.1 now (bound together, so distinct)
  python3 -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}

write_config() {
  local cpus mem ports
  cpus=$(( $(nproc) / 2 )); (( cpus >= 1 )) || cpus=1
  mem=$(awk '/^MemTotal:/ {print int($2 / 1024 / 2)}' /proc/meminfo)  # MB per node: half the host's each
  read -r -a ports <<<"$(free_ports 3)"
  mkdir -p "$dir/ctld" "$dir/munge"
  {
    echo "# written by scripts/slurm-local.sh for $(hostname -s): ${#NODES[@]} nodes on one host"
    echo "ClusterName=local"
    echo "SlurmctldHost=$(hostname -s)(127.0.0.1)"
    echo "SlurmctldPort=${ports[0]}"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "AuthInfo=socket=$dir/munge/munge.socket"
    echo "StateSaveLocation=$dir/ctld"
    echo "SlurmctldPidFile=$dir/slurmctld.pid"
    echo "SlurmctldLogFile=$dir/slurmctld.log"
    echo "SlurmdSpoolDir=$dir/%n"
    echo "SlurmdPidFile=$dir/%n/slurmd.pid"
    echo "SlurmdLogFile=$dir/%n/slurmd.log"
    # No cgroups: processes tracked through their parents, tasks not bound to CPUs, nothing accounted.
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobCompType=jobcomp/none"
    echo "MpiDefault=none"
    # CPUs are what jobs are placed by; memory is only checked against a node's size.
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_CPU"
    # The nodes are given half the host each, not what slurmd counts on the host.
    echo "SlurmdParameters=config_overrides"
    echo "ReturnToService=2"
    echo "KillWait=5"
    echo "MessageTimeout=30"
    echo "InactiveLimit=0"
    for i in "${!NODES[@]}"; do
      echo "NodeName=${NODES[$i]} NodeHostname=localhost NodeAddr=127.0.0.1 Port=${ports[$((i + 1))]}" \
           "CPUs=$cpus RealMemory=$mem State=UNKNOWN"
    done
    echo "PartitionName=local Nodes=$(IFS=,; echo "${NODES[*]}") Default=YES MaxTime=INFINITE State=UP"
  } >"$dir/slurm.conf"
  for node in "${NODES[@]}"; do mkdir -p "$dir/$node"; done
}

running() {
  alive "$dir/munge/munged.pid" munged && alive "$dir/slurmctld.pid" slurmctld \
    && for node in "${NODES[@]}"; do alive "$dir/$node/slurmd.pid" slurmd || return 1; done
}

wait_idle() {
  local deadline=$(( SECONDS + WAIT_S )) states
  while (( SECONDS < deadline )); do
    states=$(SLURM_CONF=$dir/slurm.conf sinfo -h -N -o '%N %t' 2>/dev/null | sort -u || true)
    if [[ $(grep -c ' idle$' <<<"$states") == "${#NODES[@]}" ]]; then
      return
    fi
    running || fail "a daemon stopped while starting (logs in $dir)"
    sleep 0.2
  done
  fail "the nodes were not idle after ${WAIT_S}s: ${states:-no answer from slurmctld} (logs in $dir)"
}

up() {
  if [[ -e $dir/$MARKER ]] && running; then
    echo "slurm-local: already up in $dir"
    echo "export SLURM_CONF=$dir/slurm.conf"
    return
  fi
  [[ $(id -u) == 0 ]] || cannot "running slurmd needs root (it starts jobs as their users)"
  if [[ -e $dir ]]; then
    [[ -e $dir/$MARKER ]] || fail "$dir exists and was not made by this script; give another DIR"
    down >/dev/null
    rm -rf "$dir"
  fi
  mkdir -p "$dir"
  chmod 700 "$dir"
  touch "$dir/$MARKER"
  install_packages
  slurmd -h 2>&1 | grep -q -- '-N' || cannot "this slurmd cannot run several nodes on one host (built without --enable-multiple-slurmd)"
  write_config
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  munged --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" --pid-file="$dir/munge/munged.pid" \
    --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed" --force \
    || fail "munged did not start (see $dir/munge/munged.log)"
  local conf=$dir/slurm.conf
  slurmctld -f "$conf" -i || fail "slurmctld did not start (see $dir/slurmctld.log)"
  for node in "${NODES[@]}"; do
    slurmd -f "$conf" -N "$node" || fail "slurmd $node did not start (see $dir/$node/slurmd.log)"
  done
  wait_idle
  echo "slurm-local: up in $dir, nodes ${NODES[*]}, partition local"
  echo "export SLURM_CONF=$conf"
}

# Stop the process FILE names (if it is NAME), TERM first and KILL when it outlives the deadline.
stop() {
  local file=$1 name=$2 pid deadline=$(( SECONDS + 30 ))
  alive "$file" "$name" || return 0
  pid=$(<"$file")
  kill -TERM "$pid" 2>/dev/null || return 0
  while alive "$file" "$name" && (( SECONDS < deadline )); do sleep 0.1; done
  ! alive "$file" "$name" || kill -KILL "$pid" 2>/dev/null || true
}

down() {
  [[ -e $dir/$MARKER ]] || { echo "slurm-local: nothing started in $dir"; return; }
  local conf=$dir/slurm.conf deadline=$(( SECONDS + 60 ))
  if alive "$dir/slurmctld.pid" slurmctld; then
    # Jobs first, while slurmd can still end their processes.
    SLURM_CONF=$conf squeue -h -o %A 2>/dev/null | sort -u | xargs -r env SLURM_CONF="$conf" scancel 2>/dev/null || true
    while [[ -n $(SLURM_CONF=$conf squeue -h -o %A 2>/dev/null) ]] && (( SECONDS < deadline )); do sleep 0.2; done
  fi
  for node in "${NODES[@]}"; do stop "$dir/$node/slurmd.pid" slurmd; done
  stop "$dir/slurmctld.pid" slurmctld
  stop "$dir/munge/munged.pid" munged
  echo "slurm-local: down ($dir)"
}

status() {
  [[ -e $dir/$MARKER ]] || { echo "slurm-local: nothing started in $dir"; return 1; }
  local file name
  for entry in "munge/munged.pid munged" "slurmctld.pid slurmctld" "n1/slurmd.pid slurmd" "n2/slurmd.pid slurmd"; do
    read -r file name <<<"$entry"
    if alive "$dir/$file" "$name"; then echo "$name ($file): running, pid $(<"$dir/$file")"
    else echo "$name ($file): not running"; fi
  done
  SLURM_CONF=$dir/slurm.conf sinfo -N 2>/dev/null || true
  running
}

case $cmd in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up|down|status [DIR]" >&2; exit 2 ;;
esac
