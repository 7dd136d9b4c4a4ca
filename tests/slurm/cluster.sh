#!/usr/bin/env bash
# A real 3-node Slurm cluster on this machine, for drun's Slurm tests.
#
#   tests/slurm/cluster.sh up      # network, munged, slurmctld, 3 slurmd; waits until idle
#   tests/slurm/cluster.sh down    # jobs cancelled, daemons stopped, network removed
#   tests/slurm/cluster.sh env     # prints `export SLURM_CONF=...` for clients
#   tests/slurm/cluster.sh stock on|off   # the running cluster's nodes as stock lab PCs, or not
#
# Layout (subnet 10.213.61.0/24, nothing of it ever leaves the machine):
#   root namespace  drs-root 10.213.61.1 (clients: sbatch, scontrol, ...)
#   drs-br          the bridge br0 every veth below is a port of
#   drs-ctl         10.213.61.10 hostname ctl   slurmctld
#   drs-n1..drs-n3  10.213.61.11-13 hostnames node1..node3   slurmd (one each)
# Each daemon runs in its network namespace, with its own UTS and mount namespaces (hostname,
# and /etc/hosts bind-mounted from the state dir): `ip netns exec` cannot be used for slurmd,
# whose cgroup probing fails on the /sys it remounts. munged is private (own key and socket).
# Every pid started here is recorded in $STATE/pids and stopped by that pid; what remains in
# the test namespaces afterwards (job steps) is found with `ip netns pids`, never by name.
#
# Stock mode (off after `up`; `down` ends it too): the nodes as Debian and Ubuntu install a PC,
# switched on a running cluster so the other tests keep theirs. `stock on` stacks a second bind
# mount on each slurmd's /etc/hosts (so its job steps, which share its mount namespace, see it)
# with the node's own name on 127.0.1.1 first, and gives each node namespace a decoy second
# interface docker0 (a veth pair with both ends there: it leads nowhere) in 10.213.62.0/24,
# whose `unreachable` route in the root namespace comes first. `stock off` undoes each part.
# $STATE/stock marks the mode (tests/slurm/slurm_testlib.py reads it).
#
# Exit codes: 0 done, 77 skipped (not root, or a tool is missing: the reason is printed),
# 1 failed (the daemons' logs are printed).
set -euo pipefail

STATE=${DRUN_SLURM_STATE:-/tmp/drun-slurm-test}
SUBNET=10.213.61.0/24
NET=10.213.61
ROOT_IF=drs-root
BR_NS=drs-br
CTL_NS=drs-ctl
NODES=(node1 node2 node3)
NODE_NS=(drs-n1 drs-n2 drs-n3)
CONF=$STATE/slurm.conf
MUNGE_SOCKET=$STATE/munge/munge.socket.2
BOUND=${DRUN_SLURM_SETUP_TIMEOUT:-30}  # seconds; a bound, not a delay
DECOY_SUBNET=10.213.62.0/24  # stock mode's decoy interfaces; used by nothing else
DECOY_NET=10.213.62
STOCK_MARK=$STATE/stock

log() { printf 'cluster: %s\n' "$*" >&2; }
skip() { printf 'SKIP: %s\n' "$*"; exit 77; }

preflight() {
  [ "$(id -u)" -eq 0 ] || skip "the Slurm tests need root (network namespaces, slurmd, munged)"
  local t
  for t in ip nsenter unshare mount munged mungekey slurmctld slurmd sbatch srun scontrol squeue scancel; do
    command -v "$t" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin command -v "$t" >/dev/null 2>&1 ||
      skip "'$t' is not installed (tests/install_deps.sh installs slurmctld slurmd slurm-client munge iproute2)"
  done
  ip netns list >/dev/null 2>&1 || skip "'ip netns' does not work here (no network namespace support)"
}

# Runs "$@" until it succeeds, at most $BOUND seconds (a bounded poll).
poll_until() {
  local end=$((SECONDS + BOUND))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $end ] || return 1
    sleep 0.1  # poll interval of a bounded wait, not a delay that makes anything happen
  done
}

record_pid() { echo "$1 $2" >>"$STATE/pids"; }

# --- network ------------------------------------------------------------------------------

net_up() {
  # Safety first: from here on the test subnet can never leave through the default route,
  # whatever happens to the links below (they only ever add more specific routes).
  if ! ip route show "$SUBNET" | grep -q '^unreachable'; then
    ip route add unreachable "$SUBNET"
  fi
  ip netns add "$BR_NS"
  ip -n "$BR_NS" link set lo up
  ip -n "$BR_NS" link add br0 type bridge
  ip -n "$BR_NS" link set br0 up
  # The root namespace's link into the bridge, up before any client here uses the subnet.
  ip link add "$ROOT_IF" type veth peer name p-root netns "$BR_NS"
  ip -n "$BR_NS" link set p-root master br0 up
  ip addr add "$NET.1/24" dev "$ROOT_IF" noprefixroute
  ip link set "$ROOT_IF" up
  ip route add "$NET.0/25" dev "$ROOT_IF" src "$NET.1"
  local i ns addr
  for i in 0 1 2 3; do
    if [ "$i" -eq 0 ]; then ns=$CTL_NS; addr=$NET.10; else ns=${NODE_NS[i-1]}; addr=$NET.$((10 + i)); fi
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip link add "p-$ns" type veth peer name eth0 netns "$ns"
    ip link set "p-$ns" netns "$BR_NS"
    ip -n "$BR_NS" link set "p-$ns" master br0 up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
}

net_down() {
  # The root namespace's link first (deleting the bridge namespace would take it down too,
  # racing with a delete here), then the namespaces.
  if ip link show "$ROOT_IF" >/dev/null 2>&1; then ip link del "$ROOT_IF" 2>/dev/null || true; fi
  local ns
  for ns in "${NODE_NS[@]}" "$CTL_NS" "$BR_NS"; do
    if [ -e "/run/netns/$ns" ]; then ip netns del "$ns"; fi
  done
  # Last: the unreachable routes outlive every link into their subnets.
  local subnet
  for subnet in "$SUBNET" "$DECOY_SUBNET"; do
    if ip route show "$subnet" | grep -q '^unreachable'; then
      ip route del unreachable "$subnet"
    fi
  done
}

# --- stock mode ---------------------------------------------------------------------------

# The recorded pid of the daemon named $1 (slurmd of a node).
daemon_pid() { awk -v h="$1" '$2 == h { p = $1 } END { if (p) print p }' "$STATE/pids" 2>/dev/null || true; }

# How many mounts /etc/hosts has in the mount namespace of pid $1 (1 normally, 2 in stock mode).
hosts_mounts() { awk '$5 == "/etc/hosts"' "/proc/$1/mountinfo" 2>/dev/null | wc -l; }

require_running() {
  [ "$(id -u)" -eq 0 ] || skip "the Slurm tests need root"
  local host p
  for host in "${NODES[@]}"; do
    p=$(daemon_pid "$host")
    if [ -z "$p" ] || ! kill -0 "$p" 2>/dev/null; then
      log "no running test cluster here ($STATE: slurmd of $host is not running): $0 up first"
      exit 1
    fi
  done
}

stock_on() {
  require_running
  local exact addrs
  exact=$(ip -4 route show exact "$DECOY_SUBNET")
  addrs=$(ip -4 -o addr show to "$DECOY_SUBNET")
  if [ -n "$addrs" ] || { [ -n "$exact" ] && [[ $exact != unreachable* ]]; }; then
    log "the root namespace already uses $DECOY_SUBNET (${addrs:-$exact}); stock mode needs it free"
    exit 1
  fi
  # Safety first, as in net_up; and the mark before any change, so `stock off` and `down`
  # undo whatever part of this was done.
  [ -n "$exact" ] || ip route add unreachable "$DECOY_SUBNET"
  touch "$STOCK_MARK"
  local i host ns p
  for i in 0 1 2; do
    host=${NODES[i]} ns=${NODE_NS[i]}
    p=$(daemon_pid "$host")
    if [ "$(hosts_mounts "$p")" -lt 2 ]; then
      # glibc takes the first match: this line hides the node's address from itself.
      { echo "127.0.1.1 $host"; cat "$STATE/hosts"; } >"$STATE/hosts-stock-$host"
      nsenter --target "$p" --mount mount --bind "$STATE/hosts-stock-$host" /etc/hosts
    fi
    if ! ip -n "$ns" link show docker0 >/dev/null 2>&1; then
      ip -n "$ns" link add docker0 type veth peer name docker0p
      ip -n "$ns" addr add "$DECOY_NET.$((11 + i))/24" dev docker0
      ip -n "$ns" link set docker0 up
      ip -n "$ns" link set docker0p up
    fi
  done
  log "stock: each node's own name on 127.0.1.1 in its /etc/hosts, decoy docker0 in $DECOY_SUBNET"
}

stock_off() {
  require_running
  local i host ns p
  for i in 0 1 2; do
    host=${NODES[i]} ns=${NODE_NS[i]}
    p=$(daemon_pid "$host")
    if [ "$(hosts_mounts "$p")" -ge 2 ]; then nsenter --target "$p" --mount umount /etc/hosts; fi
    if ip -n "$ns" link show docker0 >/dev/null 2>&1; then ip -n "$ns" link del docker0; fi
    rm -f "$STATE/hosts-stock-$host"
  done
  if ip route show "$DECOY_SUBNET" | grep -q '^unreachable'; then
    ip route del unreachable "$DECOY_SUBNET"
  fi
  rm -f "$STOCK_MARK"
  log "stock mode off"
}

# --- munge and Slurm ----------------------------------------------------------------------

write_config() {
  mkdir -p "$STATE"/{munge,munge-key,log,ctld,spool,out,node-private}
  chmod 0755 "$STATE" "$STATE/munge"
  chmod 0700 "$STATE/munge-key"
  {
    echo "127.0.0.1 localhost"
    echo "$NET.10 ctl"
    local i
    for i in 0 1 2; do echo "$NET.$((11 + i)) ${NODES[i]}"; done
  } >"$STATE/hosts"
  cat >"$CONF" <<EOF
# Written by tests/slurm/cluster.sh: a 3-node test cluster in network namespaces.
ClusterName=drunlab
SlurmctldHost=ctl($NET.10)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool/%n
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd-%n.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
MpiParams=ports=12000-12999
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=10
MinJobAge=600
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=node1 NodeAddr=$NET.11 CPUs=4 State=UNKNOWN
NodeName=node2 NodeAddr=$NET.12 CPUs=4 State=UNKNOWN
NodeName=node3 NodeAddr=$NET.13 CPUs=4 State=UNKNOWN
PartitionName=debug Nodes=node[1-3] Default=YES MaxTime=INFINITE State=UP
EOF
}

# Starts "$@" inside namespace $1 with hostname $2 and the test /etc/hosts, detached; the pid
# (kept through nsenter, unshare and sh, which all exec) is recorded under name $2. Each
# namespace has a tmpfs of its own at $STATE/node-private: a path there is a directory no
# other node sees (tests/slurm/test_launcher.py, logs that stay on their node).
start_in_ns() {
  local ns=$1 host=$2
  shift 2
  setsid nsenter --net="/run/netns/$ns" unshare --uts --mount --propagation slave \
    sh -c 'mount --bind "$0" /etc/hosts && mount -t tmpfs -o mode=0755 drun-node-private "$1" &&
           hostname "$2" && shift 2 && exec "$@"' \
    "$STATE/hosts" "$STATE/node-private" "$host" "$@" </dev/null >>"$STATE/log/$host.console" 2>&1 &
  record_pid "$!" "$host"
}

slurm_up() {
  mungekey -c -f -k "$STATE/munge-key/munge.key" >/dev/null 2>&1 ||
    dd if=/dev/urandom of="$STATE/munge-key/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$STATE/munge-key/munge.key"
  setsid munged -F -f --socket="$MUNGE_SOCKET" --key-file="$STATE/munge-key/munge.key" \
    --pid-file="$STATE/munged.pid" --log-file="$STATE/log/munged.log" \
    --seed-file="$STATE/munge-key/munged.seed" </dev/null >>"$STATE/log/munged.console" 2>&1 &
  record_pid "$!" munged
  poll_until test -S "$MUNGE_SOCKET" || { log "munged did not create its socket"; return 1; }

  start_in_ns "$CTL_NS" ctl slurmctld -D -c -f "$CONF"
  local i
  for i in 0 1 2; do
    mkdir -p "$STATE/spool/${NODES[i]}"
    start_in_ns "${NODE_NS[i]}" "${NODES[i]}" slurmd -D -N "${NODES[i]}" -f "$CONF"
  done
  export SLURM_CONF=$CONF
  poll_until scontrol ping || { log "slurmctld does not answer"; return 1; }
  # All three nodes idle: the scheduler will place jobs at once.
  poll_until sh -c '[ "$(sinfo -h -N -o %t | grep -c "^idle")" -eq 3 ]' ||
    { log "the nodes did not become idle: $(sinfo -N 2>&1 | tr '\n' ' ')"; return 1; }
}

# Stops every recorded pid (SIGTERM, then SIGKILL after a bounded wait) and every process left in
# the test namespaces (job steps outliving slurmd).
stop_pids() {
  local pids=() p
  if [ -f "$STATE/pids" ]; then
    while read -r p _; do kill -0 "$p" 2>/dev/null && pids+=("$p"); done <"$STATE/pids"
  fi
  local ns
  for ns in "${NODE_NS[@]}" "$CTL_NS" "$BR_NS"; do
    [ -e "/run/netns/$ns" ] || continue
    for p in $(ip netns pids "$ns" 2>/dev/null); do pids+=("$p"); done
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  local end=$((SECONDS + 10))
  while [ $SECONDS -lt $end ]; do
    local alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.1  # poll interval of a bounded wait
  done
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null; done
  rm -f "$STATE/pids"
}

up() {
  preflight
  if [ -f "$STATE/pids" ]; then
    local p live=()
    while read -r p _; do kill -0 "$p" 2>/dev/null && live+=("$p"); done <"$STATE/pids"
    if [ ${#live[@]} -gt 0 ]; then
      log "a test cluster is already running (pids ${live[*]}, $STATE): another test run may be" \
        "using it; wait for it, or take it down with: $0 down"
      exit 1
    fi
  fi
  if [ -e "/run/netns/$CTL_NS" ] || [ -f "$STATE/pids" ]; then
    log "the remains of a previous cluster are still there; removing them first"
    down
  fi
  rm -rf "$STATE"
  mkdir -p "$STATE"
  write_config
  if ! { net_up && slurm_up; }; then
    log "setup failed; logs follow"
    tail -n 30 "$STATE"/log/* >&2 || true
    down
    exit 1
  fi
  log "up: SLURM_CONF=$CONF ($(sinfo -h -o '%D nodes %t' 2>&1))"
}

down() {
  [ "$(id -u)" -eq 0 ] || skip "the Slurm tests need root"
  # Slurm first, then the network.
  if [ -f "$STATE/pids" ] && [ -e "/run/netns/$CTL_NS" ]; then
    SLURM_CONF=$CONF timeout 10 scancel --full --quiet --user=root 2>/dev/null || true
  fi
  stop_pids
  net_down
  rm -f "$STOCK_MARK" "$STATE"/hosts-stock-*
  rm -rf "$STATE/munge-key"  # the outputs and logs stay for a look; the key goes
  log "down"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  stock)
    case "${2:-}" in
      on) stock_on ;;
      off) stock_off ;;
      *) echo "usage: $0 stock on|off" >&2; exit 2 ;;
    esac ;;
  *) echo "usage: $0 up|down|env|stock on|off" >&2; exit 2 ;;
esac
