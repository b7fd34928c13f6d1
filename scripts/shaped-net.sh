#!/usr/bin/env bash
# Runs a command (usually mpirun with its ranks) on an emulated cluster network:
# every emulated node is a Linux network namespace with one link to a switch,
# and the kernel's token-bucket filter (tc tbf) holds each link to the chosen
# bandwidth in each direction, so every byte between nodes is really sent and
# every wait really waited. Ranks on the same node talk over shared memory.
#
# Usage (as root):
#   scripts/shaped-net.sh [--gbit G] [--nodes N] [--ranks-per-node K]
#                         [--burst-kb B] [--queue-ms Q] [--mtu M] [--steady]
#                         [--tcp-cc NAME] [--quiet] -- COMMAND...
#
#   --gbit G            bandwidth per rank in Gbit/s (a node's link carries
#                       K x G each way); 0 leaves the links unshaped (TCP over
#                       virtual links, as fast as the machine moves it). Default 1.
#   --nodes N           emulated nodes (default 2); mpirun's hostfile names
#                       them node0..node(N-1), each with K slots.
#   --ranks-per-node K  ranks sharing one node's link (default 1).
#   --burst-kb B        the token bucket's depth in KiB. Default: 1 ms at the
#                       link's rate, at least 256 KiB. A depth below the link's
#                       MTU (1500 B) stalls every full-size packet: only for
#                       reproducing a misconfigured link.
#   --queue-ms Q        how long a packet may queue at the link (default 10).
#   --mtu M             the links' MTU in bytes (default 1500; 9000 is a
#                       cluster's jumbo frames).
#   --steady            hold bursts to the rate too. The bucket alone lets a
#                       message that follows a pause pass at the machine's full
#                       speed up to the bucket's depth (a 247 KB gradient sum
#                       at 1 Gbit/s: 1.0 ms instead of the rate's 2.0), where a
#                       cluster's link moves it at line rate. With --steady the
#                       filter also has a peak rate 1% above the rate over a
#                       36 KB peak bucket, and the links hand it packets of at
#                       most 32 KiB (GSO size capped), so none needs cutting up;
#                       measured at 1 Gbit/s: 256 KiB point to point in 1.94
#                       against 1.03 ms, at about 1.5x the kernel's core time
#                       per MB moved.
#   --tcp-cc NAME       TCP congestion control in every namespace (default
#                       reno). A new namespace otherwise takes the host's
#                       default, which may be anything (bbr on some VMs: its
#                       pacing cost this machine's cores 3.5 ms per MB summed
#                       at 3 Gbit/s, reno 2.1), so the testbed would measure
#                       differently from host to host. A namespace may only
#                       take one the host lists in its
#                       net.ipv4.tcp_allowed_congestion_control; reno always
#                       is. Linux's own default, cubic, is loss-based as reno
#                       is, and with the namespaces' microsecond round trips
#                       grows its window as reno does.
#   --quiet             no summary line on standard error.
#
# COMMAND runs as node0, in node0's namespace, with Open MPI set up through its
# environment (OMPI_MCA_*): the hostfile, a launcher agent that starts each
# node's daemon in that node's namespace, the ob1 messaging layer over TCP on
# the emulated links and shared memory within a node. A plain
#   scripts/shaped-net.sh --gbit 1 --nodes 2 -- mpirun -np 2 build/burstpool train JOB.ini
# therefore puts rank 0 on node0 and rank 1 on node1. COMMAND also sees what
# it runs on: SHAPED_NET_GBIT_PER_RANK, SHAPED_NET_NODES,
# SHAPED_NET_RANKS_PER_NODE and SHAPED_NET_STEADY (1 with --steady, else 0).
# Everything the script creates (namespaces, links, /etc/netns/<namespace>) is
# removed when it ends, also on Ctrl-C, SIGTERM or failure; the host's own
# interfaces are never touched (every link is created inside the namespaces).
# The exit status is COMMAND's.
#
# Addresses come from 198.18.0.0/15, the block set aside for network
# benchmarks (RFC 2544), and exist only inside the namespaces.
set -euo pipefail

die() { echo "shaped-net: $*" >&2; exit 2; }

# As Open MPI's launcher agent ("ssh HOST COMMAND..."): run COMMAND as HOST, in
# HOST's namespace with HOST as its host name, through a shell as ssh would.
if [[ ${1:-} == --agent ]]; then
  host=$2
  shift 2
  [[ $host =~ ^node[0-9]+$ ]] || die "agent: unknown host '$host'"
  exec ip netns exec "${SHAPED_NET_PREFIX:?}$host" unshare --uts sh -c "hostname $host && $*"
fi

gbit=1 nodes=2 per_node=1 burst_kb="" queue_ms=10 mtu=1500 steady=0 tcp_cc=reno quiet=0
while (($#)); do
  case $1 in
    --gbit) gbit=${2:?--gbit needs a value}; shift 2 ;;
    --nodes) nodes=${2:?--nodes needs a value}; shift 2 ;;
    --ranks-per-node) per_node=${2:?--ranks-per-node needs a value}; shift 2 ;;
    --burst-kb) burst_kb=${2:?--burst-kb needs a value}; shift 2 ;;
    --queue-ms) queue_ms=${2:?--queue-ms needs a value}; shift 2 ;;
    --mtu) mtu=${2:?--mtu needs a value}; shift 2 ;;
    --steady) steady=1; shift ;;
    --tcp-cc) tcp_cc=${2:?--tcp-cc needs a value}; shift 2 ;;
    --quiet) quiet=1; shift ;;
    --) shift; break ;;
    *) die "unknown option '$1' (usage: scripts/shaped-net.sh [--gbit G] [--nodes N] [--ranks-per-node K] -- COMMAND...)" ;;
  esac
done
(($#)) || die "no command given (usage: scripts/shaped-net.sh [options] -- COMMAND...)"
is_number() { [[ $1 =~ ^[0-9]+([.][0-9]+)?$ ]]; }
is_number "$gbit" || die "--gbit '$gbit' is not a non-negative number of Gbit/s"
[[ $nodes =~ ^[0-9]+$ ]] && ((nodes >= 1 && nodes <= 250)) || die "--nodes '$nodes' must be 1 to 250"
[[ $per_node =~ ^[0-9]+$ ]] && ((per_node >= 1)) || die "--ranks-per-node '$per_node' must be a positive whole number"
[[ -z $burst_kb ]] || is_number "$burst_kb" || die "--burst-kb '$burst_kb' is not a number of KiB"
[[ $queue_ms =~ ^[0-9]+$ ]] && ((queue_ms >= 1)) || die "--queue-ms '$queue_ms' must be a positive whole number"
[[ $mtu =~ ^[0-9]+$ ]] && ((mtu >= 576 && mtu <= 65535)) || die "--mtu '$mtu' must be 576 to 65535 bytes"
[[ $tcp_cc =~ ^[a-z0-9_]+$ ]] || die "--tcp-cc '$tcp_cc' is not a congestion control's name"

# What the testbed needs, each missing piece named in one line.
((EUID == 0)) || die "needs root (network namespaces and tc); run it as root"
for tool in ip tc unshare mpirun; do
  command -v "$tool" >/dev/null || die "needs '$tool' (Debian: iproute2, util-linux, openmpi-bin)"
done

prefix="bp$$-"
export SHAPED_NET_PREFIX=$prefix
made=()
cleanup() {
  local ns pid
  for ns in "${made[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
  [[ -z ${scratch:-} ]] || rm -rf "$scratch"
}
trap cleanup EXIT
scratch=$(mktemp -d)

add_ns() {
  ip netns add "$1" 2>/dev/null || die "cannot create network namespace '$1' (is this a container without CAP_SYS_ADMIN?)"
  made+=("$1")
  ip -n "$1" link set lo up
  ip netns exec "$1" sysctl -qw "net.ipv4.tcp_congestion_control=$tcp_cc" 2>/dev/null ||
    die "cannot set TCP congestion control '$tcp_cc' (a namespace may take: $(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control))"
}
add_ns "${prefix}switch"
ip -n "${prefix}switch" link add br0 type bridge
ip -n "${prefix}switch" link set br0 up

# Rates in kbit/s (tc takes whole units): a node's link carries its ranks' share.
link_kbit=$(awk -v g="$gbit" -v k="$per_node" 'BEGIN { printf "%d", g * k * 1e6 }')
if [[ -z $burst_kb ]]; then
  burst_kb=$(awk -v r="$link_kbit" 'BEGIN { b = r / 8 / 1000; printf "%d", (b < 256 ? 256 : b) }')
fi
burst_bytes=$(awk -v b="$burst_kb" 'BEGIN { printf "%d", b * 1024 }')
# --steady: the largest packet the links hand the filter (GSO size, or the MTU
# where that is larger), and a peak bucket that holds one with room for headers.
gso_bytes=32768
peak=()
if ((steady)); then
  peak=(peakrate "$((link_kbit + link_kbit / 100 + 1))kbit" mtu "$(((mtu > gso_bytes ? mtu : gso_bytes) + 4096))")
fi
shape() {  # shape NAMESPACE DEVICE: that device's sending side held to the link's rate
  ((link_kbit > 0)) || return 0
  ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "${link_kbit}kbit" burst "$burst_bytes" \
    latency "${queue_ms}ms" "${peak[@]}" 2>/dev/null || die "tc cannot add a tbf qdisc (kernel module sch_tbf missing?)"
}
gso=()
((steady == 0)) || gso=(gso_max_size "$gso_bytes")

hosts="$scratch/hosts" hostfile="$scratch/hostfile"
printf '127.0.0.1 localhost\n' >"$hosts"
: >"$hostfile"
for ((i = 0; i < nodes; i++)); do
  printf '198.18.%d.%d node%d\n' $(((i + 1) / 256)) $(((i + 1) % 256)) "$i" >>"$hosts"
  printf 'node%d slots=%d\n' "$i" "$per_node" >>"$hostfile"
done
for ((i = 0; i < nodes; i++)); do
  ns="${prefix}node$i"
  add_ns "$ns"
  # Both ends are made inside the namespaces: nothing appears on the host.
  ip -n "${prefix}switch" link add "port$i" type veth peer name eth0 netns "$ns"
  ip -n "${prefix}switch" link set "port$i" mtu "$mtu" "${gso[@]}" master br0 up
  ip -n "$ns" link set eth0 mtu "$mtu" "${gso[@]}"
  ip -n "$ns" addr add "198.18.$(((i + 1) / 256)).$(((i + 1) % 256))/15" dev eth0
  ip -n "$ns" link set eth0 up
  shape "$ns" eth0                  # node -> switch
  shape "${prefix}switch" "port$i"  # switch -> node
  mkdir -p "/etc/netns/$ns"         # ip netns exec shows it as the namespace's /etc/hosts
  cp "$hosts" "/etc/netns/$ns/hosts"
done

# Open MPI: daemons started through this script as agent, ob1 over TCP on the
# emulated links (and shared memory within a node; never UCX, which would pick
# its own transports). Two TCP links per peer pair: with one, Open MPI's TCP
# transport moves each direction at half the link's rate while both directions
# are busy (measured at 1 Gbit/s: 0.47 each way with one link, 0.93 with two),
# and a cluster's link is full duplex.
export OMPI_MCA_plm=rsh OMPI_MCA_plm_rsh_agent="$(realpath "$0") --agent"
export OMPI_MCA_orte_default_hostfile=$hostfile
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_osc="^ucx"
export OMPI_MCA_btl_tcp_if_include=eth0 OMPI_MCA_oob_tcp_if_include=eth0 OMPI_MCA_btl_tcp_links=2
# The emulated links are processed by the kernel on the same cores as the
# ranks: a rank spinning in MPI starves that processing, and every small
# message then waits about a scheduler tick (measured: 4 B one way in 4.0 ms
# spinning, 0.025 ms yielding). Ranks yield while they poll unless told otherwise
# (with a background job, tell it 0: the foreground's waits sleep by themselves,
# and a yield would hand its core to the background until the next tick).
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
# Past its eager limit (64 KiB by default), Open MPI's TCP transport moves a
# message only inside MPI calls: a slice a rank sends before computing on would
# leave between its layers while its receiver waits (vgg16_cifar, global batch
# 32, 2 ranks at 1 Gbit/s steady, the burst plan's step: 167-172 ms; simulated
# 148). Messages up to 4 MiB are therefore sent eagerly: the kernel's socket
# buffer takes them at once and they move while the sender computes (the same
# plan: 144-157 ms; data parallel's step and the ranks' peak memory unchanged;
# docs/parallel.md). Open MPI's TCP progress thread would do it too, but with
# Open MPI 4.1.4 it hung a run in MPI_Init's first collective, so it stays off.
export OMPI_MCA_btl_tcp_eager_limit=${OMPI_MCA_btl_tcp_eager_limit:-4194304}
export OMPI_MCA_btl_tcp_max_send_size=${OMPI_MCA_btl_tcp_max_send_size:-4194304}
export OMPI_MCA_btl_tcp_rndv_eager_limit=${OMPI_MCA_btl_tcp_rndv_eager_limit:-4194304}
# Every emulated node's daemon sees the whole machine and binds its first rank
# to core 0, so the nodes' ranks would all share core 0 (measured: 2 ranks of
# a LeNet-5 job, 7688 samples/s bound so, 14123 unbound). Ranks are left
# unbound unless told otherwise, for the kernel to spread them over the cores.
export OMPI_MCA_hwloc_base_binding_policy=${OMPI_MCA_hwloc_base_binding_policy:-none}
export SHAPED_NET_GBIT_PER_RANK=$gbit SHAPED_NET_NODES=$nodes SHAPED_NET_RANKS_PER_NODE=$per_node SHAPED_NET_STEADY=$steady

if ((quiet == 0)); then
  if ((link_kbit > 0)); then
    echo "shaped-net: $nodes node(s) x $per_node rank(s), $gbit Gbit/s per rank (each node's link" \
      "$(awk -v r="$link_kbit" 'BEGIN { print r / 1e6 }') Gbit/s each way, burst $burst_kb KiB$( ((steady == 0)) || echo ', steady')), Open MPI over TCP" >&2
  else
    echo "shaped-net: $nodes node(s) x $per_node rank(s), links unshaped, Open MPI over TCP" >&2
  fi
fi

# COMMAND runs in the background so that a signal to this script reaches it
# (forwarded as SIGTERM) and the namespaces still go once it has ended.
ip netns exec "${prefix}node0" unshare --uts sh -c 'hostname node0 && exec "$@"' sh "$@" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null || true' INT TERM
status=0
wait "$child" || status=$?
while kill -0 "$child" 2>/dev/null; do wait "$child" || status=$?; done
exit "$status"
