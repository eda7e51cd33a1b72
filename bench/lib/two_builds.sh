# Shared by bench/build_ab.sh and bench/layout_ab.sh: their options, the installed anker.so
# saved and put back at exit (also on failure), build A installed and a throwaway cluster
# started with it. Source it, set the defaults (W, CLIENTS, DURATION, ROUNDS), then call
# two_builds_start USAGE_LINES "$@" (USAGE_LINES: the sed range of the script's usage text).
# Scripts with a cluster of their own (bench/bulk_minimal.sh) call two_builds_install A
# before cluster_start and two_builds_restart_with to swap builds.
BENCH=${BENCH:?set BENCH before sourcing two_builds.sh}
. "$BENCH/lib/cluster.sh"
. "$BENCH/lib/tpcc.sh"
A=; B=; CONF=()
LIB=$("${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}" --pkglibdir)/anker.so

two_builds_start() { # usage_lines args...
    local usage=$1
    shift
    while [ $# -gt 0 ]; do
        case $1 in
            --a) A=$2; shift 2 ;;
            --b) B=$2; shift 2 ;;
            --warehouses) W=$2; shift 2 ;;
            --clients) CLIENTS=$2; shift 2 ;;
            --duration) DURATION=$2; shift 2 ;;
            --rounds) ROUNDS=$2; shift 2 ;;
            --conf) CONF+=("$2"); shift 2 ;;
            *) sed -n "$usage" "$0" >&2; exit 2 ;;
        esac
    done
    tpcc_mix_args standard
    two_builds_install "$A"
    export PGOPTIONS="-c client_min_messages=warning"
    cluster_start "shared_preload_libraries = 'anker'" "shared_buffers = '2GB'" "synchronous_commit = off" \
        "max_wal_size = '16GB'" "checkpoint_timeout = '30min'" "max_parallel_workers_per_gather = 0" \
        "jit = off" "${CONF[@]}"
    WORK=$(cluster_workdir)
    threads=$CLIENTS
    if [ "$threads" -gt "$(nproc)" ]; then threads=$(nproc); fi
}

# Check that $A and $B name two builds, save the installed anker.so (put back at exit, with
# the cluster cleaned up, also on failure) and install `$1`.
two_builds_install() {
    [ -f "$A" ] && [ -f "$B" ] || { echo "--a and --b must name two anker.so files" >&2; exit 2; }
    SAVED=$(mktemp /tmp/anker-installed.XXXXXX.so)
    cp "$LIB" "$SAVED"
    trap two_builds_finish EXIT
    cp "$1" "$LIB"
}

two_builds_finish() {
    cluster_cleanup
    cp "$SAVED" "$LIB" && rm -f "$SAVED"
}

# Restart the cluster with `$1` (an anker.so) in place of the installed one.
two_builds_restart_with() {
    cluster_stop
    cp "$1" "$LIB"
    _cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DATA" -l "$CLUSTER_LOG" -w -t 120 start >/dev/null
}
