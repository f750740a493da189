#!/usr/bin/env bash
# A Slurm test cluster on this host, without systemd: munged, slurmctld and two slurmd
# (node1, node2), each node with 4 fake GPUs, partition `gpu`. Run as root.
#
#   scripts/slurm/cluster.sh start    # idempotent; waits until both nodes are idle and
#                                     # prints the `export SLURM_CONF=...` to use
#   scripts/slurm/cluster.sh status   # what runs, and sinfo
#   scripts/slurm/cluster.sh stop     # stops exactly the daemons it started (pid files)
#
# Everything (configuration, state, logs, the munge key and socket, the fake devices)
# lives under SLURM_TEST_DIR (default /tmp/gpuq-slurm). SLURM_TEST_PORT (default 16817)
# is slurmctld's port; node1 and node2 listen on the next two.
#
# Needs Debian's slurmctld slurmd slurm-client munge (Slurm 22.05). What it relies on:
# several `slurmd -N nodeN` on one host work when each NodeName has its own Port; a fake
# GPU is a character device (`mknod PATH c 1 3`, i.e. /dev/null's numbers) listed in
# gres.conf with AutoDetect=off (a count without File= makes the node invalid); munged
# wants its socket directory owned by munge, mode 711; proctrack/linuxproc, task/none,
# no accounting storage and SlurmdParameters=config_overrides need no cgroups and no
# database (jobacct_gather/linux, which enforces --mem here, needs neither);
# every client needs SLURM_CONF (else it tries a DNS SRV lookup).
set -euo pipefail

DIR="${SLURM_TEST_DIR:-/tmp/gpuq-slurm}"
PORT="${SLURM_TEST_PORT:-16817}"
NODES=(node1 node2)
GPUS_PER_NODE=4
CPUS_PER_NODE=8
CONF="$DIR/etc/slurm.conf"
MUNGE_SOCKET="$DIR/munge/run/munge.socket.2"
export SLURM_CONF="$CONF"

say() { printf 'cluster: %s\n' "$*" >&2; }

alive() { # alive PIDFILE: the process named in the pid file runs
  [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

write_config() {
  mkdir -p "$DIR"/{etc,state,log,spool,run,dev}
  local host
  host="$(hostname -s)"
  {
    echo "# Written by scripts/slurm/cluster.sh: a test cluster, not for production."
    echo "ClusterName=gpuq"
    echo "SlurmctldHost=$host(127.0.0.1)"
    echo "SlurmctldPort=$PORT"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "AuthInfo=socket=$MUNGE_SOCKET"
    echo "StateSaveLocation=$DIR/state"
    echo "SlurmdSpoolDir=$DIR/spool/%n"
    echo "SlurmctldPidFile=$DIR/run/slurmctld.pid"
    echo "SlurmdPidFile=$DIR/run/slurmd-%n.pid"
    echo "SlurmctldLogFile=$DIR/log/slurmctld.log"
    echo "SlurmdLogFile=$DIR/log/slurmd-%n.log"
    echo "SlurmctldDebug=info"
    echo "SlurmdDebug=info"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "SlurmdParameters=config_overrides"
    echo "SelectType=select/cons_tres"
    # Memory is allocated (CR_Core_Memory) so a job's --mem is its limit; a job that asks
    # for none gets 500 MB a CPU (8 CPUs: the node's 4000 MB, so memory never fits fewer
    # jobs on a node than its CPUs do).
    echo "SelectTypeParameters=CR_Core_Memory"
    echo "DefMemPerCPU=500"
    echo "GresTypes=gpu"
    echo "AccountingStorageType=accounting_storage/none"
    # No cgroups, so the memory limit is enforced by polling: every second slurmstepd sums
    # the RSS of the job's processes and kills it past its --mem (it writes "exceeded
    # memory limit" on the job's output; Slurm 22.05 then reports FAILED, signal 9, not
    # OUT_OF_MEMORY, which only task/cgroup's OOM events give).
    echo "JobAcctGatherType=jobacct_gather/linux"
    echo "JobAcctGatherParams=OverMemoryKill"
    echo "JobAcctGatherFrequency=task=1"
    echo "JobCompType=jobcomp/none"
    echo "MpiDefault=none"
    # The product decides every start and restart: Slurm never requeues a job itself
    # (a node failure ends it; the product's retry rules start a new attempt, a new
    # Slurm job). A job Slurm did requeue would wait out BeginTime (about 2 min).
    echo "JobRequeue=0"
    # Ended jobs stay known (scontrol show job: exit code, reason) for 20 s (then
    # slurmctld's purge, every few seconds, forgets them): a reconciliation every second
    # reads an end long before, and a test of a reconciler that was down longer than
    # MinJobAge (the run forgotten, its launcher's exit record the only word on how it
    # ended) waits 20-30 s, not 5 min. A site keeps its own (300 s by default).
    echo "MinJobAge=20"
    # A submitted job starts at once (the main scheduler) or within a second (backfill,
    # every second): the product decided already, Slurm only places it.
    echo "SchedulerType=sched/backfill"
    echo "SchedulerParameters=sched_interval=5,bf_interval=1,sched_min_interval=0,batch_sched_delay=0"
    # scancel/time limit: SIGKILL this long after SIGTERM (the product sends its own).
    echo "KillWait=30"
    # A silent slurmd is DOWN after 20 s; it comes back by itself when it registers.
    echo "SlurmdTimeout=20"
    echo "SlurmctldTimeout=20"
    echo "ReturnToService=2"
    echo "InactiveLimit=0"
    local port=$((PORT + 1))
    for node in "${NODES[@]}"; do
      echo "NodeName=$node NodeHostname=$host NodeAddr=127.0.0.1 Port=$port" \
        "CPUs=$CPUS_PER_NODE RealMemory=4000 Gres=gpu:$GPUS_PER_NODE State=UNKNOWN"
      port=$((port + 1))
    done
    echo "PartitionName=gpu Nodes=$(IFS=,; echo "${NODES[*]}") Default=YES MaxTime=UNLIMITED State=UP OverSubscribe=NO"
  } >"$CONF.new"
  # Idempotent: the same configuration leaves running daemons alone; a changed one (an
  # older version of this script started them) restarts Slurm's daemons on it.
  if cmp -s "$CONF.new" "$CONF"; then
    rm -f "$CONF.new"
  else
    [ -f "$CONF" ] && CHANGED=1
    mv "$CONF.new" "$CONF"
  fi
  {
    echo "AutoDetect=off"
    for node in "${NODES[@]}"; do
      echo "NodeName=$node Name=gpu File=$DIR/dev/$node-gpu[0-$((GPUS_PER_NODE - 1))]"
    done
  } >"$DIR/etc/gres.conf"
  for node in "${NODES[@]}"; do
    mkdir -p "$DIR/spool/$node"
    for ((gpu = 0; gpu < GPUS_PER_NODE; gpu++)); do
      [ -c "$DIR/dev/$node-gpu$gpu" ] || mknod "$DIR/dev/$node-gpu$gpu" c 1 3
    done
  done
}

start_munge() {
  local pidfile="$DIR/munge/run/munged.pid"
  if alive "$pidfile"; then return; fi
  mkdir -p "$DIR/munge"/{etc,run,log,lib}
  chown -R munge:munge "$DIR/munge"
  chmod 700 "$DIR/munge"/{etc,log,lib}
  chmod 711 "$DIR/munge/run" "$DIR/munge"
  if [ ! -s "$DIR/munge/etc/munge.key" ]; then
    mungekey --create --keyfile="$DIR/munge/etc/munge.key"
    chown munge:munge "$DIR/munge/etc/munge.key"
    chmod 400 "$DIR/munge/etc/munge.key"
  fi
  runuser -u munge -- munged --socket="$MUNGE_SOCKET" \
    --key-file="$DIR/munge/etc/munge.key" --pid-file="$pidfile" \
    --log-file="$DIR/munge/log/munged.log" --seed-file="$DIR/munge/lib/munged.seed"
  for _ in $(seq 1 50); do
    [ -S "$MUNGE_SOCKET" ] && return
    sleep 0.1
  done
  say "munged did not start; see $DIR/munge/log/munged.log"
  exit 1
}

start_slurm() {
  if [ "${CHANGED:-0}" = 1 ] && alive "$DIR/run/slurmctld.pid"; then
    say "slurm.conf changed: restarting slurmctld and the slurmd"
    stop_slurm
  fi
  if ! alive "$DIR/run/slurmctld.pid"; then
    slurmctld -f "$CONF"
  fi
  for node in "${NODES[@]}"; do
    if ! alive "$DIR/run/slurmd-$node.pid"; then
      slurmd -f "$CONF" -N "$node"
    fi
  done
}

wait_idle() {
  local deadline=$((SECONDS + ${SLURM_TEST_START_TIMEOUT:-60}))
  while ((SECONDS < deadline)); do
    local states
    states="$(sinfo -h -N -p gpu -o '%N %t' 2>/dev/null | sort -u || true)"
    if [ "$(grep -cE ' (idle|mix|alloc)$' <<<"$states")" -eq "${#NODES[@]}" ]; then
      return
    fi
    # A node left DOWN by an earlier run (its slurmd was killed) comes back at once.
    for node in $(awk '$2 ~ /down|drain|fail/ {print $1}' <<<"$states"); do
      scontrol update NodeName="$node" State=RESUME 2>/dev/null || true
    done
    sleep 0.2
  done
  say "the nodes are not idle after ${SLURM_TEST_START_TIMEOUT:-60} s:"
  sinfo -N -p gpu >&2 || true
  say "logs: $DIR/log/"
  exit 1
}

stop_pidfile() { # stop_pidfile PIDFILE NAME
  if alive "$1"; then
    local pid
    pid="$(cat "$1")"
    kill "$pid"
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    say "stopped $2 (pid $pid)"
  fi
  rm -f "$1"
}

stop_slurm() {
  for node in "${NODES[@]}"; do
    stop_pidfile "$DIR/run/slurmd-$node.pid" "slurmd $node"
  done
  stop_pidfile "$DIR/run/slurmctld.pid" slurmctld
}

case "${1:-}" in
  start)
    started=$SECONDS
    write_config
    start_munge
    start_slurm
    wait_idle
    say "ready in $((SECONDS - started)) s: ${NODES[*]} idle, $GPUS_PER_NODE GPUs each, partition gpu"
    echo "export SLURM_CONF=$CONF"
    ;;
  stop)
    stop_slurm
    stop_pidfile "$DIR/munge/run/munged.pid" munged
    ;;
  status)
    for pidfile in "$DIR/munge/run/munged.pid" "$DIR/run/slurmctld.pid" \
      "${NODES[@]/#/$DIR/run/slurmd-}"; do
      pidfile="${pidfile%.pid}.pid"
      name="$(basename "$pidfile" .pid)"
      if alive "$pidfile"; then echo "$name: running (pid $(cat "$pidfile"))"; else echo "$name: stopped"; fi
    done
    [ -f "$CONF" ] && { echo "export SLURM_CONF=$CONF"; sinfo -N -p gpu 2>/dev/null || true; }
    ;;
  *)
    echo "usage: $0 start|stop|status" >&2
    exit 2
    ;;
esac
