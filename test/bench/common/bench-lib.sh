# shellcheck shell=bash
# test/bench/common/bench-lib.sh — sourced by the benchmark run scripts (test/bench/*/run):
# the places an MPI program can run in one benchmark run, side by side:
#   psport one node     our mpirun with a psid of our own (socket in the output directory,
#                       UDP port $PSP_UDP_PORT, default 18700)
#   psport two nodes    our mpirun on test/cluster nodes 0 and 1 (one psid each)
#   mpich one node      Debian's mpiexec.hydra (ch4:ucx, shared memory between the ranks)
#   mpich two nodes     mpiexec.hydra started in node 0, node 1 reached through
#                       osu-config/netns-rsh (own hostname and /dev/shm per node), UCX
#                       restricted to TCP on the nodes' interface (UCX_TLS=self,tcp,
#                       UCX_NET_DEVICES=psp0, MPIR_CVAR_NOLOCAL=1): the namespaces share one
#                       kernel, and UCX would otherwise take the shared-memory path
# A program built with Debian's mpicc.mpich runs on psport through LD_LIBRARY_PATH (set
# BENCH_PSPORT_LDPATH=1): psport's libmpich.so.12 is ABI compatible.
#
# The caller sets SRCDIR, PREFIX (psport's install), OUT (output directory) and ME (its name for
# messages); BENCH_CLUSTER names the test cluster (psport-cluster --prefix).

BENCH_CLUSTER=${BENCH_CLUSTER:-psp-bench}
BENCH_CLUSTER_UP=0
BENCH_PSID_PID=
BENCH_PSPORT_LDPATH=${BENCH_PSPORT_LDPATH:-0}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-1800}
export PSP_UDP_PORT=${PSP_UDP_PORT:-18700}

bench_say() {
    echo "$ME: $*" >&2
}

# True when psport's MPICH (ch3:psport) is installed in PREFIX.
bench_have_psport() {
    grep -qs 'ch3:psport' <("$PREFIX/bin/mpichversion" 2>/dev/null)
}

bench_have_mpich() {
    command -v mpicc.mpich >/dev/null && command -v mpiexec.hydra >/dev/null
}

bench_is_root() {
    [ "$(id -u)" = 0 ]
}

# Starts a psid of our own for the one-node runs (mpirun would otherwise look for or start
# the default one, which other users of this machine may share).
bench_start_psid() {
    export PSP_PSID_SOCKET=$OUT/psid.sock
    "$PREFIX/bin/psid" --foreground --socket "$PSP_PSID_SOCKET" --pidfile "$OUT/psid.pid" \
        >"$OUT/psid.log" 2>&1 &
    BENCH_PSID_PID=$!
    for ((i = 0; i < 200; i++)); do
        [ -S "$PSP_PSID_SOCKET" ] && return 0
        kill -0 "$BENCH_PSID_PID" 2>/dev/null || break
        sleep 0.05
    done
    bench_say "psid did not come up (no socket $PSP_PSID_SOCKET): see $OUT/psid.log"
    return 1
}

# Brings up test/cluster nodes 0 and 1 with one psid each; returns non-zero on failure.
bench_cluster_up() {
    PSP_PSID=$PREFIX/bin/psid bash "$SRCDIR/test/cluster/psport-cluster" --prefix "$BENCH_CLUSTER" \
        up 2 --psid >"$OUT/cluster-up.log" 2>&1 || {
        bench_say "psport-cluster --prefix $BENCH_CLUSTER up 2 --psid failed: see $OUT/cluster-up.log"
        return 1
    }
    BENCH_CLUSTER_UP=1
}

# Stops what bench_start_psid and bench_cluster_up started (call from an EXIT trap).
bench_cleanup() {
    if [ -n "$BENCH_PSID_PID" ]; then
        kill "$BENCH_PSID_PID" 2>/dev/null
        wait "$BENCH_PSID_PID" 2>/dev/null
        BENCH_PSID_PID=
    fi
    if [ "$BENCH_CLUSTER_UP" = 1 ]; then
        bash "$SRCDIR/test/cluster/psport-cluster" --prefix "$BENCH_CLUSTER" down >/dev/null 2>&1
        BENCH_CLUSTER_UP=0
    fi
}

# bench_run PLACE NP LOG PROGRAM ARGS... — runs PROGRAM with NP ranks at PLACE (psport-local,
# psport-nodes, mpich-local, mpich-nodes), output to LOG; returns the launcher's status.
bench_run() {
    local place=$1 np=$2 log=$3
    shift 3
    local ldpath=()
    [ "$BENCH_PSPORT_LDPATH" = 1 ] && ldpath=(LD_LIBRARY_PATH="$PREFIX/lib")
    case $place in
    psport-local)
        env -u PSP_NODES_FILE "${ldpath[@]}" OPENBLAS_NUM_THREADS=1 timeout "$BENCH_TIMEOUT" \
            "$PREFIX/bin/mpirun" -np "$np" "$@" >"$log" 2>&1
        ;;
    psport-nodes)
        bash "$SRCDIR/test/cluster/psport-cluster" --prefix "$BENCH_CLUSTER" exec 0 \
            env "${ldpath[@]}" OPENBLAS_NUM_THREADS=1 timeout "$BENCH_TIMEOUT" \
            "$PREFIX/bin/mpirun" -np "$np" -hosts 0,1 "$@" >"$log" 2>&1
        ;;
    mpich-local)
        env -u LD_LIBRARY_PATH OPENBLAS_NUM_THREADS=1 timeout "$BENCH_TIMEOUT" \
            mpiexec.hydra -np "$np" -genv OPENBLAS_NUM_THREADS 1 "$@" >"$log" 2>&1
        ;;
    mpich-nodes)
        env -u LD_LIBRARY_PATH OSU_NETNS_PREFIX="$BENCH_CLUSTER" \
            "$SRCDIR/osu-config/netns-rsh" --node 0 timeout "$BENCH_TIMEOUT" mpiexec.hydra \
            -launcher ssh -launcher-exec "$SRCDIR/osu-config/netns-rsh" -iface psp0 \
            -hosts 198.18.0.1,198.18.0.2 -np "$np" -genv OPENBLAS_NUM_THREADS 1 \
            -genv UCX_TLS self,tcp -genv UCX_NET_DEVICES psp0 -genv MPIR_CVAR_NOLOCAL 1 \
            "$@" >"$log" 2>&1
        ;;
    *)
        bench_say "bench_run: unknown place '$place'"
        return 2
        ;;
    esac
}

# Human-readable name of a place for tables.
bench_place_title() {
    case $1 in
    psport-local) echo "psport, one node" ;;
    psport-nodes) echo "psport, two nodes" ;;
    mpich-local) echo "Debian MPICH, one node" ;;
    mpich-nodes) echo "Debian MPICH, two nodes" ;;
    esac
}

# The machine's load when a run starts, for the record: "load1 load5 load15".
bench_load() {
    cut -d' ' -f1-3 /proc/loadavg
}
