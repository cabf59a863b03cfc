#!/usr/bin/env bash
# Two "nodes" on one machine, measured against the link's own limit and against MPICH, in one
# run (issue 10 item 9). Needs root, iproute2, ucx_perftest (Debian: ucx-utils) and, for the
# MPICH columns, mpiexec (MPICH with ch4:ucx, Debian's mpich).
#
#   scripts/bench-multinode.sh [-r ROUNDS] [-n ITERS] [-b BUILD_DIR] [--no-mpi] [--json FILE]
#
# What runs, ROUNDS times interleaved (the medians over rounds are reported, because on a
# shared machine single runs vary by 2x or more):
#   link     two network namespaces joined by veth pairs on a bridge, as `mscclpp-bench
#            --nodes` makes them (tools/netns.c), UCX over tcp only (UCX_TLS=tcp,self) on the
#            veth (UCX_NET_DEVICES), since namespaces still share /dev/shm
#   peer     ucx_perftest between the two namespaces: ucp_put_lat, 8 B (ping-pong, one-way
#            latency) and ucp_put_bw, 16 MiB (puts back to back, MB/s as UCX counts: 2^20 B/s)
#   ours     mscclpp-bench {allreduce,allgather} --np 2 --nodes 2 at 8 B and 16 MiB
#            (out-of-place: the multi-node plans of plans/multinode/2x1; the launcher makes
#            its own two namespaces exactly like the ones above)
#   ours+MPI the same bench under mpiexec, one rank in each of the two namespaces above (MPI
#            bootstrap), with --mpi: MPICH's MPI_Allreduce / MPI_Allgather timed in the same
#            processes. MPIR_CVAR_NOLOCAL=1 keeps MPICH off shared memory (both ranks have the
#            same host name, so MPICH would otherwise treat them as one node), and MPICH's UCX
#            gets the same UCX_TLS / UCX_NET_DEVICES as ucx_perftest.
# Ratios printed:
#   16 MiB   link use = bytes each rank sends over the link per call / time, against the
#            ucx_perftest put bandwidth (allreduce sends 16 MiB each way, allgather 8 MiB);
#            the target of issue 10 is >= 0.90
#   8 B      time / ucx_perftest one-way put latency (how many link latencies a call costs)
#   MPICH    MPICH time / ours (above 1: we are faster)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
rounds=3
iters=20
build=$top/build
use_mpi=1
json=""
while [ $# -gt 0 ]; do
    case $1 in
    -r) rounds=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -b) build=$2; shift 2 ;;
    --no-mpi) use_mpi=0; shift ;;
    --json) json=$2; shift 2 ;;
    -h | --help) sed -n '2,30s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "bench-multinode: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
bench=$build/tools/mscclpp-bench
die() { echo "bench-multinode: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "network namespaces need root"
command -v ip >/dev/null || die "the ip command (iproute2) is missing"
command -v ucx_perftest >/dev/null || die "ucx_perftest is missing (apt-get install ucx-utils)"
command -v python3 >/dev/null || die "python3 is missing (it computes the medians)"
[ -x "$bench" ] || die "$bench not built (scripts/build.sh)"
if [ $use_mpi = 1 ] && ! command -v mpiexec >/dev/null; then
    echo "bench-multinode: no mpiexec: the MPICH columns are left out" >&2
    use_mpi=0
fi
export MSCCLPP_PLAN_DIR=${MSCCLPP_PLAN_DIR:-$top/plans}

# ---- the link: two namespaces on a bridge, as tools/netns.c makes them ------------------------
id=$$
sub=$((20 + (id + 101) % 200)) # not the subnet of a launcher with the same pid
br=mbm$((id % 100000))
ns=(mbm$id-n0 mbm$id-n1)
dev=(mbv$((id % 10000))n0 mbv$((id % 10000))n1)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-multinode.XXXXXX")
cleanup() {
    for k in 0 1; do ip netns del "${ns[$k]}" 2>/dev/null || true; done
    ip link del "$br" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ip link add "$br" type bridge
ip addr add 10.77.$sub.254/24 dev "$br"
ip link set "$br" up
for k in 0 1; do
    peer=mbp$((id % 10000))n$k
    ip netns add "${ns[$k]}"
    ip link add "${dev[$k]}" type veth peer name "$peer"
    ip link set "${dev[$k]}" netns "${ns[$k]}"
    ip link set "$peer" master "$br"
    ip link set "$peer" up
    ip netns exec "${ns[$k]}" ip addr add 10.77.$sub.$((k + 1))/24 dev "${dev[$k]}"
    ip netns exec "${ns[$k]}" ip link set "${dev[$k]}" up
    ip netns exec "${ns[$k]}" ip link set lo up
done
# run in node k with the transport settings every contender gets
in_node() {
    local k=$1
    shift
    ip netns exec "${ns[$k]}" env UCX_TLS=tcp,self UCX_NET_DEVICES="${dev[$k]}" \
        MSCCLPP_SOCKET_IFNAME="${dev[$k]}" MPIR_CVAR_NOLOCAL=1 "$@"
}

# ---- the peer: ucx_perftest ---------------------------------------------------------------
port=$((20000 + id % 20000))
perftest() { # perftest TEST SIZE ITERS -> the "Final" line's numbers
    local out=$tmp/perftest.out
    port=$((port + 1))
    in_node 1 timeout 300 ucx_perftest -p $port >"$tmp/perftest.srv" 2>&1 &
    local srv=$!
    local tries=0
    # the server needs a moment to listen; the client fails fast until it does
    until in_node 0 timeout 300 ucx_perftest 10.77.$sub.2 -p $port -t "$1" -s "$2" -n "$3" \
        -w $(($3 / 10 + 1)) -f >"$out" 2>&1; do
        tries=$((tries + 1))
        if [ $tries -ge 20 ] || ! kill -0 $srv 2>/dev/null; then
            cat "$out" "$tmp/perftest.srv" >&2
            wait $srv || true
            die "ucx_perftest $1 failed"
        fi
        sleep 0.3
    done
    wait $srv || true
    # Final line: iterations, latency 50%ile / average / overall (us), bandwidth average /
    # overall (MB/s), message rate average / overall
    awk 'NF == 8 && $1 ~ /^[0-9]+$/ {line = $0} END {print line}' "$out"
}

# ---- ours and MPICH -------------------------------------------------------------------------
ours() { # ours COLL SIZE -> out-of-place time (us)
    local j=$tmp/ours.json
    rm -f "$j"
    timeout 600 "$bench" "$1" --np 2 --nodes 2 -b "$2" -e "$2" -n $iters -w 3 --json "$j" \
        >"$tmp/ours.out" 2>&1 || { cat "$tmp/ours.out" >&2; die "mscclpp-bench $1 $2 failed"; }
    python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["out_of_place"]["time_us"])' "$j"
}
with_mpi() { # with_mpi COLL SIZE -> "ours_us mpi_us" (both timed under mpiexec)
    local j=$tmp/mpi.json
    rm -f "$j"
    local args=("$bench" "$1" --mpi -b "$2" -e "$2" -n $iters -w 3)
    timeout 600 mpiexec -n 1 ip netns exec "${ns[0]}" env UCX_TLS=tcp,self \
        UCX_NET_DEVICES="${dev[0]}" MSCCLPP_SOCKET_IFNAME="${dev[0]}" MPIR_CVAR_NOLOCAL=1 \
        "${args[@]}" --json "$j" : -n 1 ip netns exec "${ns[1]}" env UCX_TLS=tcp,self \
        UCX_NET_DEVICES="${dev[1]}" MSCCLPP_SOCKET_IFNAME="${dev[1]}" MPIR_CVAR_NOLOCAL=1 \
        "${args[@]}" >"$tmp/mpi.out" 2>&1 || { cat "$tmp/mpi.out" >&2; die "mpiexec $1 $2 failed"; }
    python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).readline()); print(r["out_of_place"]["time_us"], r["mpi_time_us"])' "$j"
}

res=$tmp/results
: >"$res"
echo "# bench-multinode: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $rounds rounds x $iters iterations" >&2
for r in $(seq 1 "$rounds"); do
    echo "# round $r/$rounds" >&2
    v=$(perftest ucp_put_lat 8 $((iters * 100)))
    set -- $v
    echo "ucx put_lat_us $2" >>"$res" # median one-way latency
    v=$(perftest ucp_put_bw 16777216 $iters)
    set -- $v
    echo "ucx put_bw_MBps $6" >>"$res" # overall: every put of the run, flushed
    for coll in allreduce allgather; do
        for size in 8 16777216; do
            v=$(ours $coll $size)
            echo "ours ${coll}_$size $v" >>"$res"
            if [ $use_mpi = 1 ]; then
                v=$(with_mpi $coll $size)
                set -- $v
                echo "oursmpi ${coll}_$size $1" >>"$res"
                echo "mpich ${coll}_$size $2" >>"$res"
            fi
        done
    done
done

python3 - "$res" "$json" <<'EOF'
import json, statistics, sys
vals = {}
for line in open(sys.argv[1]):
    who, what, v = line.split()
    vals.setdefault((who, what), []).append(float(v))
med = {k: statistics.median(v) for k, v in vals.items()}
lat = med[("ucx", "put_lat_us")]
bw = med[("ucx", "put_bw_MBps")] * 1048576.0  # bytes/s
print(f"ucx_perftest: put latency 8 B {lat:.1f} us (one-way), put bandwidth 16 MiB "
      f"{bw / 1e6:.1f} MB/s (10^6 B/s)")
print(f"{'case':<18}{'ours us':>12}{'ratio':>10}{'ours/mpx us':>13}{'MPICH us':>11}{'MPICH/ours':>11}")
out = {"ucx_put_lat_us": lat, "ucx_put_bw_Bps": bw, "rows": []}
for coll in ("allreduce", "allgather"):
    for size in (8, 16777216):
        key = f"{coll}_{size}"
        t = med.get(("ours", key))
        tm = med.get(("oursmpi", key))
        m = med.get(("mpich", key))
        if size == 8:
            ratio = t / lat  # link latencies per call
            rtxt = f"{ratio:.1f} lat"
        else:
            sent = size if coll == "allreduce" else size / 2
            ratio = sent / (t * 1e-6) / bw  # share of the put bandwidth
            rtxt = f"{ratio:.2f} bw"
        mtxt = f"{m:11.1f}{m / t:11.2f}" if m else f"{'-':>11}{'-':>11}"
        ttxt = f"{tm:13.1f}" if tm else f"{'-':>13}"
        name = f"{coll} {'8 B' if size == 8 else '16 MiB'}"
        print(f"{name:<18}{t:12.1f}{rtxt:>10}{ttxt}{mtxt}")
        out["rows"].append({"case": key, "ours_us": t, "ratio": ratio, "ours_mpiexec_us": tm,
                            "mpich_us": m, "samples": {w: vals.get((w, key)) for w in
                                                       ("ours", "oursmpi", "mpich")}})
print("ratio: 8 B = our time / ucx_perftest one-way put latency; 16 MiB = bytes each rank "
      "sends per call / time / ucx_perftest put bandwidth (target >= 0.90)")
print("MPICH/ours above 1: we are faster; 'ours/mpx': our bench under the same mpiexec")
if sys.argv[2]:
    json.dump(out, open(sys.argv[2], "w"), indent=1)
EOF
