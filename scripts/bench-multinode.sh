#!/usr/bin/env bash
# Two "nodes" on one machine, measured against the link's own limit and against MPICH, in one
# run (issue 10 item 9). Needs root, iproute2, python3, ucx_perftest (Debian: ucx-utils) and,
# for the MPICH columns, mpiexec (MPICH with ch4:ucx, Debian's mpich).
#
#   scripts/bench-multinode.sh [-r ROUNDS] [-n ITERS] [-b BUILD_DIR[:PLAN_DIR]]... [-s SIZES]
#                              [--no-mpi] [--json FILE]
#
# -b may be given several times (a build of main and one of a branch, say): every build runs
# in every round, interleaved, so that their numbers share the machine's moment. A build may
# name its own plan folder (BUILD:PLANS, e.g. main's plans/ beside a branch's, same binary);
# else every build uses $MSCCLPP_PLAN_DIR, default this tree's plans/. -s "8 64 4096 ..."
# replaces the message sizes (bytes; default "8 16777216"). --json FILE
# writes the medians and samples to FILE and every raw sample to FILE.raw. A run that fails or
# passes BENCH_RUN_LIMIT seconds (default 180) loses its sample only (said on stderr).
#
# What runs, ROUNDS times (medians over the rounds are reported: on a shared machine single
# runs vary by 2x or more):
#   link     two network namespaces joined by veth pairs on a bridge, as `mscclpp-bench
#            --nodes` makes them (tools/netns.c); UCX over tcp only (UCX_TLS=tcp,self) on the
#            veth (UCX_NET_DEVICES), since namespaces still share /dev/shm
#   peer     ucx_perftest between the two namespaces: ucp_put_lat 8 B (ping-pong; one-way
#            latency) and ucp_put_bw 16 MiB (puts back to back; MB/s as UCX counts, 2^20 B/s),
#            also with -O 1 (one put in flight); ucp_am_lat 8 B and ucp_am_bw 16 MiB (active
#            messages: what our ucx transport sends since wave/net); and a plain TCP stream
#            over the same veth (python3 sockets), the link's own limit
#   ours     mscclpp-bench {allreduce,allgather} --np 2 --nodes 2 at 8 B and 16 MiB (or -s)
#            (out-of-place: the multi-node plans of plans/multinode/2x1; the launcher makes
#            two namespaces of its own exactly like the ones above)
#   ours+MPI the same bench under mpiexec, one rank in each of the two namespaces above (MPI
#            bootstrap), with --mpi: MPICH's MPI_Allreduce / MPI_Allgather timed in the same
#            processes. MPIR_CVAR_NOLOCAL=1 keeps MPICH off shared memory (both ranks have the
#            same host name, so MPICH would treat them as one node), and MPICH's UCX gets the
#            same UCX_TLS / UCX_NET_DEVICES as ucx_perftest.
# Ratios printed:
#   < 1 MiB  our time / ucx_perftest one-way put latency and / am latency (link latencies
#            per call)
#   >= 1 MiB bytes each rank sends per call (allreduce 16 MiB, allgather 8 MiB) / our time,
#            over ucx_perftest put bandwidth (issue 10 target: >= 0.90), over the -O 1 put
#            bandwidth, over the am bandwidth, and over the TCP stream
#   MPICH    MPICH time / ours (above 1: we are faster)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
rounds=3
iters=20
builds=()
sizes="8 16777216"
use_mpi=1
json=""
while [ $# -gt 0 ]; do
    case $1 in
    -r) rounds=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -b)
        case $2 in
        *:*) builds+=("$(cd "${2%%:*}" && pwd):$(cd "${2#*:}" && pwd)") ;;
        *) builds+=("$(cd "$2" && pwd)") ;;
        esac
        shift 2
        ;;
    -s) sizes=$2; shift 2 ;;
    --no-mpi) use_mpi=0; shift ;;
    --json) json=$2; shift 2 ;;
    -h | --help) sed -n '2,41s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "bench-multinode: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[ ${#builds[@]} -gt 0 ] || builds=("$top/build")
die() { echo "bench-multinode: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "network namespaces need root"
command -v ip >/dev/null || die "the ip command (iproute2) is missing"
command -v ucx_perftest >/dev/null || die "ucx_perftest is missing (apt-get install ucx-utils)"
command -v python3 >/dev/null || die "python3 is missing (TCP stream, medians)"
for b in "${builds[@]}"; do
    [ -x "${b%%:*}/tools/mscclpp-bench" ] || die "${b%%:*}/tools/mscclpp-bench not built (scripts/build.sh)"
done
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
# in_node K CMD...: run CMD in node K with the transport settings every contender gets
node_env() {
    echo ip netns exec "${ns[$1]}" env UCX_TLS=tcp,self UCX_NET_DEVICES="${dev[$1]}" \
        MSCCLPP_SOCKET_IFNAME="${dev[$1]}" MPIR_CVAR_NOLOCAL=1
}
in_node() {
    local k=$1
    shift
    $(node_env "$k") "$@"
}

# ---- the peer: ucx_perftest and a TCP stream ------------------------------------------------
port=$((20000 + id % 20000))
perftest() { # perftest "TEST [OPTIONS]" SIZE ITERS -> the "Final" line's numbers
    local out=$tmp/perftest.out
    port=$((port + 1))
    in_node 1 timeout 300 ucx_perftest -p $port >"$tmp/perftest.srv" 2>&1 &
    local srv=$!
    local tries=0
    # the server needs a moment to listen; the client fails fast until it does ($1 unquoted:
    # a test name and its options)
    until in_node 0 timeout 300 ucx_perftest 10.77.$sub.2 -p $port -t $1 -s "$2" -n "$3" \
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
cat >"$tmp/stream.py" <<'PY'
# TCP stream, node 0 -> node 1: 20 sends of 16 MiB; the client prints bytes/s
import socket, sys, time
host, port = sys.argv[2], int(sys.argv[3])
if sys.argv[1] == "s":
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    s.listen(1)
    s.settimeout(120)
    c, _ = s.accept()
    buf = bytearray(1 << 20)
    while c.recv_into(buf):
        pass
    c.sendall(b"k")
else:
    for i in range(100):
        try:
            c = socket.create_connection((host, port))
            break
        except OSError:
            time.sleep(0.1)
    data = b"x" * (16 << 20)
    t = time.time()
    for i in range(20):
        c.sendall(data)
    c.shutdown(socket.SHUT_WR)
    c.recv(1)
    print(20 * len(data) / (time.time() - t))
PY
tcp_stream() {
    port=$((port + 1))
    in_node 1 timeout 300 python3 "$tmp/stream.py" s 10.77.$sub.2 $port &
    local srv=$!
    in_node 0 timeout 300 python3 "$tmp/stream.py" c 10.77.$sub.2 $port
    wait $srv || true
}

# ---- ours and MPICH -------------------------------------------------------------------------
json_field() { # json_field FILE EXPR -> EXPR of the file's first record `r`
    local prog='import json, sys; r = json.loads(open(sys.argv[1]).readline())'
    python3 -c "$prog; print(eval(sys.argv[2]))" "$1" "$2"
}
# A run that fails or hangs (MPICH's start-up between namespaces hung once in ~40 runs, in
# PMI) costs its sample, not the whole measurement: it is reported on stderr and left out.
limit=${BENCH_RUN_LIMIT:-180}
ours() { # ours BENCH COLL SIZE [PLANS] -> out-of-place time (us), or nothing
    local j=$tmp/ours.json
    rm -f "$j"
    if ! MSCCLPP_PLAN_DIR=${4:-$MSCCLPP_PLAN_DIR} \
        timeout -k 5 $limit "$1" "$2" --np 2 --nodes 2 -b "$3" -e "$3" -n $iters -w 3 \
        --json "$j" >"$tmp/ours.out" 2>&1; then
        echo "bench-multinode: mscclpp-bench $2 $3 ($1) failed; sample left out:" >&2
        tail -n 5 "$tmp/ours.out" >&2
        return 0
    fi
    json_field "$j" 'r["out_of_place"]["time_us"]'
}
with_mpi() { # with_mpi BENCH COLL SIZE [PLANS] -> "ours_us mpi_us" (both under mpiexec)
    local j=$tmp/mpi.json
    rm -f "$j"
    local args=("$1" "$2" --mpi -b "$3" -e "$3" -n $iters -w 3)
    local pd=MSCCLPP_PLAN_DIR=${4:-$MSCCLPP_PLAN_DIR}
    if ! timeout -k 5 $limit mpiexec -n 1 $(node_env 0) $pd "${args[@]}" --json "$j" \
        : -n 1 $(node_env 1) $pd "${args[@]}" >"$tmp/mpi.out" 2>&1; then
        echo "bench-multinode: mpiexec $2 $3 ($1) failed; sample left out:" >&2
        tail -n 5 "$tmp/mpi.out" >&2
        return 0
    fi
    json_field "$j" '"%s %s" % (r["out_of_place"]["time_us"], r["mpi_time_us"])'
}

res=$tmp/results
[ -z "$json" ] || res=$json.raw # kept: every sample, one per line
: >"$res"
echo "# bench-multinode: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs," \
    "load $(cut -d' ' -f1-3 /proc/loadavg), $rounds rounds x $iters iterations" >&2
for r in $(seq 1 "$rounds"); do
    echo "# round $r/$rounds" >&2
    v=$(perftest ucp_put_lat 8 $((iters * 100)))
    set -- $v
    echo "ucx - put_lat_us $2" >>"$res" # median one-way latency
    v=$(perftest ucp_put_bw 16777216 $iters)
    set -- $v
    echo "ucx - put_bw_MBps $6" >>"$res" # overall: every put of the run, flushed
    v=$(perftest "ucp_put_bw -O 1" 16777216 $iters)
    set -- $v
    echo "ucx - put_bw1_MBps $6" >>"$res"
    v=$(perftest ucp_am_lat 8 $((iters * 100)))
    set -- $v
    echo "ucx - am_lat_us $2" >>"$res"
    v=$(perftest ucp_am_bw 16777216 $iters)
    set -- $v
    echo "ucx - am_bw_MBps $6" >>"$res"
    v=$(tcp_stream)
    echo "tcp - stream_Bps $v" >>"$res"
    for bp in "${builds[@]}"; do
        b=${bp%%:*}
        pd=
        [ "$b" = "$bp" ] || pd=${bp#*:}
        for coll in allreduce allgather; do
            for size in $sizes; do
                v=$(ours "$b/tools/mscclpp-bench" $coll $size $pd)
                [ -z "$v" ] || echo "ours $bp ${coll}_$size $v" >>"$res"
                if [ $use_mpi = 1 ]; then
                    v=$(with_mpi "$b/tools/mscclpp-bench" $coll $size $pd)
                    set -- $v
                    [ $# -lt 2 ] || echo "oursmpi $bp ${coll}_$size $1" >>"$res"
                    [ $# -lt 2 ] || echo "mpich $bp ${coll}_$size $2" >>"$res"
                fi
            done
        done
    done
done

cat >"$tmp/report.py" <<'PY'
import json, statistics, sys
vals = {}
for line in open(sys.argv[1]):
    who, build, what, v = line.split()
    vals.setdefault((who, build, what), []).append(float(v))
med = {k: statistics.median(v) for k, v in vals.items()}
lat = med[("ucx", "-", "put_lat_us")]
bw = med[("ucx", "-", "put_bw_MBps")] * 1048576.0  # bytes/s
bw1 = med[("ucx", "-", "put_bw1_MBps")] * 1048576.0
alat = med[("ucx", "-", "am_lat_us")]
abw = med[("ucx", "-", "am_bw_MBps")] * 1048576.0
tcp = med[("tcp", "-", "stream_Bps")]
print(f"# {sys.argv[3]}, {sys.argv[4]} CPUs, load at the end "
      f"{open('/proc/loadavg').read().split()[0]}; medians of {sys.argv[5]} rounds")
print(f"ucx_perftest: put latency 8 B {lat:.1f} us (one-way); put bandwidth 16 MiB "
      f"{bw / 1e6:.1f} MB/s, one put in flight (-O 1) {bw1 / 1e6:.1f} MB/s (10^6 B/s)")
print(f"ucx_perftest: am latency 8 B {alat:.1f} us (one-way); am bandwidth 16 MiB "
      f"{abw / 1e6:.1f} MB/s")
print(f"TCP stream over the same veth: {tcp / 1e6:.1f} MB/s")
out = {"date": sys.argv[3], "ucx_put_lat_us": lat, "ucx_put_bw_Bps": bw, "ucx_put_bw1_Bps": bw1,
       "ucx_am_lat_us": alat, "ucx_am_bw_Bps": abw,
       "tcp_stream_Bps": tcp, "samples": {f"{w}:{k}": v for (w, b, k), v in vals.items()
                                          if b == "-"}, "builds": {}}
for b in sorted({b for (w, b, _) in vals if w == "ours"}):
    print(f"build {b}")
    print(f"  {'case':<17}{'ours us':>11}{'xlat/bw':>9}{'/bw1':>7}{'xam/am':>8}{'/tcp':>7}"
          f"{'mpx us':>11}{'MPICH us':>11}{'MPICH/ours':>11}")
    rows = []
    sizes = sorted({int(k.rsplit("_", 1)[1]) for (w, bb, k) in vals if w == "ours" and bb == b})
    for coll in ("allreduce", "allgather"):
        for size in sizes:
            key = f"{coll}_{size}"
            t = med.get(("ours", b, key))
            tm = med.get(("oursmpi", b, key))
            m = med.get(("mpich", b, key))
            if t is None:
                print(f"  {coll} {size}: every run failed")
                continue
            row = {"case": key, "ours_us": t, "ours_mpiexec_us": tm, "mpich_us": m,
                   "samples": {w: vals.get((w, b, key)) for w in ("ours", "oursmpi", "mpich")}}
            if size < 1048576:
                row.update(x_lat=t / lat, x_am_lat=t / alat)
                rtxt = f"{t / lat:9.1f}{'':>7}{t / alat:8.1f}{'':>7}"
            else:
                sent = size if coll == "allreduce" else size / 2  # bytes each rank sends
                rate = sent / (t * 1e-6)
                row.update(of_put_bw=rate / bw, of_put_bw1=rate / bw1, of_am_bw=rate / abw,
                           of_tcp=rate / tcp)
                rtxt = f"{rate / bw:9.2f}{rate / bw1:7.2f}{rate / abw:8.2f}{rate / tcp:7.2f}"
            mtxt = f"{m:11.1f}{m / t:11.2f}" if m else f"{'-':>11}{'-':>11}"
            ttxt = f"{tm:11.1f}" if tm else f"{'-':>11}"
            name = f"{coll} {size} B" if size < 1048576 else f"{coll} {size >> 20} MiB"
            print(f"  {name:<17}{t:11.1f}{rtxt}{ttxt}{mtxt}")
            rows.append(row)
    out["builds"][b] = rows
print("xlat, xam (8 B): our time / ucx_perftest one-way put, am latency. bw, bw1, am, tcp")
print("(16 MiB): bytes each rank sends per call / our time, over the put bandwidth, the -O 1 put")
print("bandwidth, the am bandwidth and the TCP stream (issue 10 target: bw >= 0.90). mpx: our")
print("bench under the same mpiexec as MPICH. MPICH/ours above 1: we are faster.")
if sys.argv[2]:
    json.dump(out, open(sys.argv[2], "w"), indent=1)
PY
python3 "$tmp/report.py" "$res" "$json" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$(nproc)" "$rounds"
