#!/usr/bin/env bash
# The shaped-network testbed (scripts/shaped-net.sh): ranks land on their
# emulated nodes; the network profile measured through it finds the rate that
# was set (within 25%); --steady holds a message after a pause to the rate;
# ssgd and local-sgd on 2 ranks train the same bits on a shaped link as over
# shared memory;
# a link whose token bucket is below the packet size
# ends the profile with a message naming the stalled size instead of a silent
# wait; every namespace's TCP runs the congestion control asked for, whatever
# the host's default; the namespaces are gone afterwards, also after SIGTERM;
# a user without root is told so in one line. Exits 77 (skipped) where namespaces or tc
# cannot be had.
# Usage: shaped_net.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"
cd "$work" || exit 1
launcher=$src/scripts/shaped-net.sh

skip() { echo "skip: $*"; exit 77; }
((EUID == 0)) || skip "the testbed needs root (network namespaces and tc)"
for tool in ip tc unshare; do command -v $tool >/dev/null || skip "no '$tool' here (Debian: iproute2, util-linux)"; done
probe="bpprobe$$"
ip netns add "$probe" 2>/dev/null || skip "network namespaces cannot be created here"
ip netns exec "$probe" tc qdisc add dev lo root tbf rate 1mbit burst 64kb latency 10ms 2>/dev/null
tbf=$?
ip netns del "$probe"
((tbf == 0)) || skip "tc cannot add a tbf qdisc here (kernel module sch_tbf)"

namespaces() { ip netns list | grep -c '^bp[0-9]*-' || true; }
before=$(namespaces)

# Placement: 2 nodes x 2 ranks, each rank reporting its host.
hosts=$(timeout 60 "$launcher" --quiet --nodes 2 --ranks-per-node 2 -- mpirun -np 4 hostname 2>&1 | sort | tr '\n' ' ')
[[ $hosts == "node0 node0 node1 node1 " ]] && echo "ok   4 ranks on 2 emulated nodes: $hosts" ||
  fail "placement: '$hosts'"
# Binding: each emulated node's daemon would bind its first rank to core 0,
# putting one rank of every node on the same core.
bound=$(timeout 60 "$launcher" --quiet --nodes 2 -- mpirun -np 2 --report-bindings true 2>&1 | grep -c " bound to ")
[[ $bound == 0 ]] && echo "ok   ranks of the emulated nodes are not bound to one core" ||
  fail "binding: $bound rank(s) bound: $(timeout 60 "$launcher" --quiet --nodes 2 -- mpirun -np 2 --report-bindings true 2>&1 | head -2)"

# TCP congestion control: reno unless told otherwise, on every node; one the
# host does not allow in a namespace is refused with the ones it has.
cc=$(timeout 60 "$launcher" --quiet --nodes 2 -- mpirun -np 2 cat /proc/sys/net/ipv4/tcp_congestion_control 2>&1 |
  sort | tr '\n' ' ')
[[ $cc == "reno reno " ]] && echo "ok   both nodes' TCP: $cc" || fail "congestion control: '$cc'"
msg=$(timeout 60 "$launcher" --quiet --tcp-cc no_such_cc -- true 2>&1)
[[ $msg == "shaped-net: cannot set TCP congestion control 'no_such_cc' (a namespace may take: "* ]] &&
  echo "ok   unknown congestion control: $msg" || fail "unknown congestion control: '$msg'"

# The rate: 0.5 Gbit/s per rank is 62.5 MB/s; both fits must find it.
gbit=0.5
if timeout 120 "$launcher" --gbit $gbit -- mpirun -np 2 "$bin" profile --network --max-bytes 4194304 \
  --out net.json >profile.out 2>&1; then
  if out=$(python3 - "$gbit" <<'PY' 2>&1
import json, sys
rate = float(sys.argv[1]) * 1e9 / 8
net = json.load(open("net.json"))
for kind in ("p2p", "allreduce"):
    measured = net[kind]["bandwidth_bytes_per_s"]
    assert abs(measured / rate - 1) <= 0.25, f"{kind}: {measured / 1e6:.1f} MB/s against {rate / 1e6:.1f} MB/s set"
    print(f"{kind} {measured / 1e6:.1f} MB/s", end="; ")
# A sum over TCP takes the computing rank's core: copies into and out of the
# sockets, the additions. Some, and less than the link's own time per byte.
core = net["allreduce"]["core_seconds_per_byte"]
assert 0 < core < 1 / rate, f"a sum's core time {core * 1e9:.3f} ms per MB against the link's {1e9 / rate:.1f}"
print(f"set {rate / 1e6:.1f} MB/s; sums take {core * 1e9:.2f} ms of core per MB")
PY
  ); then echo "ok   measured through the testbed: $out"; else fail "rate: $out"; fi
else
  fail "profile under shaping: $(tail -3 profile.out)"
fi

# The token bucket alone passes a message up to its depth (256 KiB) at the
# machine's speed; --steady holds it to the rate: a 256 KiB message one way
# takes at least 75% of the time the rate gives it (0.5 Gbit/s: 4.2 ms).
one_way_256k() {  # the profile's one-way time of 256 KiB in ms, from $1
  python3 -c 'import json, sys
print("%.2f" % next(s["seconds"] * 1e3 for s in json.load(open(sys.argv[1]))["samples"] if s["kind"] == "p2p" and s["bytes"] == 262144))' "$1"
}
if timeout 120 "$launcher" --steady --gbit $gbit -- mpirun -np 2 "$bin" profile --network --max-bytes 1048576 \
  --out steady.json >steady.out 2>&1 && steady=$(one_way_256k steady.json) && bucket=$(one_way_256k net.json); then
  ideal=$(awk -v g=$gbit 'BEGIN { printf "%.2f", 262144 * 8 / (g * 1e9) * 1e3 }')
  awk -v s="$steady" -v i="$ideal" 'BEGIN { exit !(s >= 0.75 * i) }' &&
    echo "ok   --steady: 256 KiB one way in $steady ms (rate: $ideal ms; the bucket alone: $bucket ms)" ||
    fail "--steady: 256 KiB one way in $steady ms, under 75% of the rate's $ideal ms"
else
  fail "profile under --steady shaping: $(tail -3 steady.out)"
fi

# The link changes a run's time, not its arithmetic: on 2 ranks ssgd (a sum of
# two gradients is exact in either order) and local-sgd (its averages at fixed
# iterations) end bit for bit as over shared memory, so a learning-rate grid
# tuned on one link ranks its settings the same on every other.
synthetic_job same.ini "$src/jobs/models/lenet5.ini" "steps = 12" "[sync]" "learners = 1" "local_steps = 4"
for strategy in ssgd local-sgd; do
  set_strategy=(--set sync.strategy=$strategy)  # batch 32: ssgd's global batch, local-sgd's per learner
  if timeout 120 mpirun -np 2 "$bin" train same.ini "${set_strategy[@]}" --checkpoint $strategy.shm.h5 \
    >$strategy.shm.out 2>&1 &&
    timeout 120 "$launcher" --quiet --gbit $gbit -- mpirun -np 2 "$bin" train same.ini "${set_strategy[@]}" \
      --checkpoint $strategy.tcp.h5 >$strategy.tcp.out 2>&1; then
    h5same $strategy.shm.h5 $strategy.tcp.h5 &&
      echo "ok   $strategy on 2 ranks: the same bits over shared memory and at $gbit Gbit/s" ||
      fail "$strategy: the shaped link changed the trained weights"
  else
    fail "$strategy runs: $(tail -2 $strategy.shm.out $strategy.tcp.out)"
  fi
done

# A bucket below the packet size stalls large messages: an error, in bounded time.
start=$SECONDS
timeout 120 "$launcher" --gbit 1 --mtu 9000 --burst-kb 4 -- mpirun -np 2 "$bin" profile --network \
  --deadline 3 --out stalled.json >stalled.out 2>&1
status=$?
if ((status != 0 && status != 124)) && grep -q "did not complete within 3 s" stalled.out; then
  echo "ok   a stalled link is named in $((SECONDS - start)) s: $(grep -m1 -o 'a [0-9]* [KMG]*i*B message[^:]*' stalled.out)"
else
  fail "stalled link (exit $status): $(tail -3 stalled.out)"
fi

# SIGTERM to the launcher ends the command and removes everything.
"$launcher" --quiet -- sleep 60 &
pid=$!
sleep 2
kill -TERM $pid
start=$SECONDS
wait $pid
(((SECONDS - start) <= 10)) && echo "ok   SIGTERM ended the command in $((SECONDS - start)) s" ||
  fail "SIGTERM took $((SECONDS - start)) s"

after=$(namespaces)
[[ $after == "$before" ]] && echo "ok   no namespace left behind ($after before and after)" ||
  fail "namespaces left: $(ip netns list | grep '^bp[0-9]*-')"

if command -v setpriv >/dev/null; then
  msg=$(setpriv --reuid=65534 --regid=65534 --clear-groups bash "$launcher" -- true 2>&1)
  [[ $msg == "shaped-net: needs root"* ]] && echo "ok   without root: $msg" || fail "without root: '$msg'"
fi
finish shaped_net
