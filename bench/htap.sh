#!/usr/bin/env bash
# bench/htap.sh -- TPC-C + analytical queries (HTAP) on heap and anker tables, one throwaway
# PostgreSQL 15 cluster per configuration. See bench/README.md.
#
#   bench/htap.sh --smoke                  CI: W=1, 5 s phases, heap + available anker configs;
#                                          asserts consistency (also during the mixed phase)
#   bench/htap.sh --demo                   W=2, 30 s phases; prints the summary and the plots' paths
#   bench/htap.sh --warehouses 10 --duration 120 --configs heap,anker-none,anker-cow,anker-memcpy
#
# Exit status: 0 when every configuration ran and passed its consistency checks (skipped ones
# allowed), 1 when any failed, 2 on a usage error.
set -uo pipefail

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$BENCH/lib/cluster.sh"

usage() {
    cat <<'EOF'
usage: bench/htap.sh [--smoke | --demo] [options]

  --warehouses W        TPC-C warehouses (default 2)
  --duration S          seconds per phase: OLTP alone, OLAP alone, both (default 30)
  --configs LIST        comma-separated: heap, anker-none, anker-cow, anker-memcpy,
                        anker-vm_snapshot, anker-duckdb (cow snapshots, anker.olap_engine =
                        duckdb) (default: heap plus every anker config but anker-duckdb when
                        the extension is installed)
  --clients N           OLTP clients (pgbench -c), default 2; one OLAP stream always
  --out DIR             output directory (default bench/out/<date>-W<W>-S<S>)
  --mix standard|paper  standard: NewOrder 45, Payment 43, OrderStatus/Delivery/StockLevel 4
                        each; paper: NewOrder, Payment, OrderStatus picked uniformly (AnKer
                        paper, Sec. 6.2). Default standard
  --uniform             warehouse drawn uniformly per transaction instead of a home
                        warehouse per client
  --queries LIST        OLAP queries from bench/olap (default q1,...,q8,ch1,ch6); ch: the
                        22 CH-benCHmark queries of bench/olap/ch
  --warmup S            warm-up seconds of OLTP before measuring (default S/5, 2..30)
  --max-tries N         pgbench --max-tries (retries of serialization/deadlock failures;
                        default 1: failures are counted and reported, not retried)
  --shared-buffers X    default 2GB
  --olap-parallel N     max_parallel_workers_per_gather (default 0: one process per stream)
  --conf LINE           extra postgresql.conf line for every config (repeatable)
  --anker-conf LINE     extra postgresql.conf line for anker configs (repeatable),
                        e.g. --anker-conf "anker.memory_limit = '8GB'"
  --online-check        also run the consistency checks continuously during the mixed phase
                        (on by default in --smoke)
  --no-plots            CSV and summary only
  --smoke               W=1, 5 s phases, 2 s warm-up, --online-check; plots only if
                        matplotlib is already there (installs nothing)
  --demo                W=2, 30 s phases
EOF
}

# ---------------------------------------------------------------- options
WAREHOUSES=2
DURATION=30
CONFIGS=
CLIENTS=2
OUT=
MIX=standard
UNIFORM=0
QUERIES=q1,q2,q3,q4,q5,q6,q7,q8,ch1,ch6
WARMUP=
MAX_TRIES=1
SHARED_BUFFERS=2GB
OLAP_PARALLEL=0
ONLINE_CHECK=0
PLOTS=1
INSTALL_PLOTS=1
MODE=custom
EXTRA_CONF=()
ANKER_CONF=()
ARGS_ORIG=("$@")

while [ $# -gt 0 ]; do
    case "$1" in
        --warehouses) WAREHOUSES=$2; shift 2 ;;
        --duration) DURATION=$2; shift 2 ;;
        --configs) CONFIGS=$2; shift 2 ;;
        --clients) CLIENTS=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --mix) MIX=$2; shift 2 ;;
        --uniform) UNIFORM=1; shift ;;
        --queries) QUERIES=$2; shift 2 ;;
        --warmup) WARMUP=$2; shift 2 ;;
        --max-tries) MAX_TRIES=$2; shift 2 ;;
        --shared-buffers) SHARED_BUFFERS=$2; shift 2 ;;
        --olap-parallel) OLAP_PARALLEL=$2; shift 2 ;;
        --conf) EXTRA_CONF+=("$2"); shift 2 ;;
        --anker-conf) ANKER_CONF+=("$2"); shift 2 ;;
        --online-check) ONLINE_CHECK=1; shift ;;
        --no-plots) PLOTS=0; shift ;;
        --smoke) MODE=smoke; WAREHOUSES=1; DURATION=5; WARMUP=2; ONLINE_CHECK=1; INSTALL_PLOTS=0; shift ;;
        --demo) MODE=demo; WAREHOUSES=2; DURATION=30; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "htap.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    esac
done

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }
for v in WAREHOUSES DURATION CLIENTS MAX_TRIES OLAP_PARALLEL; do
    is_uint "${!v}" || { echo "htap.sh: $v must be a non-negative integer (got '${!v}')" >&2; exit 2; }
done
[ "$WAREHOUSES" -ge 1 ] && [ "$DURATION" -ge 1 ] && [ "$CLIENTS" -ge 1 ] ||
    { echo "htap.sh: --warehouses, --duration and --clients must be >= 1" >&2; exit 2; }
if [ -z "$WARMUP" ]; then
    WARMUP=$(( DURATION / 5 )); [ "$WARMUP" -lt 2 ] && WARMUP=2; [ "$WARMUP" -gt 30 ] && WARMUP=30
fi
is_uint "$WARMUP" || { echo "htap.sh: --warmup must be an integer" >&2; exit 2; }
case "$MIX" in
    standard) OLTP_SCRIPTS=(neworder@45 payment@43 orderstatus@4 delivery@4 stocklevel@4) ;;
    paper)    OLTP_SCRIPTS=(neworder@1 payment@1 orderstatus@1) ;;
    *) echo "htap.sh: --mix must be standard or paper" >&2; exit 2 ;;
esac
[ "$QUERIES" = ch ] && QUERIES=$(cd "$BENCH/olap" && ls ch/q*.sql | sed 's/\.sql$//' | paste -sd,)
IFS=, read -r -a QUERY_LIST <<<"$QUERIES"
# The file of query $1: bench/olap/$1.pgbench or bench/olap/$1.sql.
query_file() { if [ -f "$BENCH/olap/$1.pgbench" ]; then echo "$BENCH/olap/$1.pgbench"; else echo "$BENCH/olap/$1.sql"; fi; }
for q in "${QUERY_LIST[@]}"; do
    [ -f "$(query_file "$q")" ] || { echo "htap.sh: no query bench/olap/$q.pgbench or .sql" >&2; exit 2; }
done

PKGLIBDIR=$("$PG_BINDIR/pg_config" --pkglibdir 2>/dev/null || echo /usr/lib/postgresql/15/lib)
SHAREDIR=$("$PG_BINDIR/pg_config" --sharedir 2>/dev/null || echo /usr/share/postgresql/15)
anker_installed() { [ -f "$PKGLIBDIR/anker.so" ] && [ -f "$SHAREDIR/extension/anker.control" ]; }
ALL_ANKER=(anker-none anker-cow anker-memcpy anker-vm_snapshot)

NOTES=()
if [ -z "$CONFIGS" ]; then
    CONFIGS=heap
    if anker_installed; then
        CONFIGS="heap,$(IFS=,; echo "${ALL_ANKER[*]}")"
    else
        NOTES+=("anker is not installed ($PKGLIBDIR/anker.so missing): ran heap only; build and install it with 'cargo pgrx install' to add the anker configurations")
    fi
fi
IFS=, read -r -a CONFIG_LIST <<<"$CONFIGS"
for c in "${CONFIG_LIST[@]}"; do
    case "$c" in
        heap) ;;
        anker-none|anker-cow|anker-memcpy|anker-vm_snapshot|anker-duckdb)
            anker_installed || { echo "htap.sh: configuration '$c' needs the anker extension, which is not installed (no $PKGLIBDIR/anker.so); run 'cargo pgrx install' in extension/ first" >&2; exit 2; } ;;
        *) echo "htap.sh: unknown configuration '$c' (heap, anker-none, anker-cow, anker-memcpy, anker-vm_snapshot, anker-duckdb)" >&2; exit 2 ;;
    esac
done

[ -n "$OUT" ] || OUT="$BENCH/out/$(date +%Y%m%d-%H%M%S)-W$WAREHOUSES-S$DURATION"
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)

# ---------------------------------------------------------------- helpers
ts() { date +%H:%M:%S; }
say() { echo "[$(ts)] $*"; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
pyok() { "$1" -c 'import matplotlib, numpy' >/dev/null 2>&1; }

# A python3 with matplotlib: an existing one, else Debian's package, else pip.
find_python() {
    local py
    for py in python3 /usr/bin/python3; do
        command -v "$py" >/dev/null 2>&1 && pyok "$py" && { echo "$py"; return 0; }
    done
    if [ "$PLOTS" != 1 ] || [ "$INSTALL_PLOTS" != 1 ]; then
        [ "$PLOTS" = 1 ] && say "no python3 with matplotlib: no plots (--smoke installs nothing)" >&2
        command -v python3 >/dev/null 2>&1 && echo python3 || echo /usr/bin/python3
        return 0
    fi
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "installing python3-matplotlib (Debian) for the plots" >&2
        { apt-get -o DPkg::Lock::Timeout=600 install -y -q python3-matplotlib ||
          { apt-get update -q && apt-get -o DPkg::Lock::Timeout=600 install -y -q python3-matplotlib; }; } >&2
        pyok /usr/bin/python3 && { echo /usr/bin/python3; return 0; }
    fi
    if command -v python3 >/dev/null 2>&1; then
        say "installing matplotlib with pip for the plots" >&2
        python3 -m pip install -q --user matplotlib >&2 && pyok python3 && { echo python3; return 0; }
    fi
    say "WARNING: no python3 with matplotlib; writing CSV and the summary without plots" >&2
    PLOTS=0
    command -v python3 >/dev/null 2>&1 && echo python3 || echo /usr/bin/python3
}

# ---------------------------------------------------------------- one configuration
# Runs in a subshell; writes $CDIR/status ("ok", "skipped: why" or "failed: why").
CFG= CDIR= WORK= BG_PIDS=()

config_status() { printf '%s\n' "$1" >"$CDIR/status"; }

fail() {
    local msg
    msg=$(printf '%s' "$*" | tr -s '\n' ' ')
    say "[$CFG] FAILED: $msg" >&2
    config_status "failed: $msg"
    exit 1
}

skip() {
    say "[$CFG] SKIPPED: $*"
    config_status "skipped: $*"
    exit 0
}

config_cleanup() {
    local p
    for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${BG_PIDS[@]}"; do wait "$p" 2>/dev/null; done
    if [ -n "${CLUSTER_DIR:-}" ]; then
        [ -f "${CLUSTER_LOG:-}" ] && cp "$CLUSTER_LOG" "$CDIR/server.log" 2>/dev/null
        cluster_cleanup
    fi
    [ -s "$CDIR/status" ] || config_status "failed: interrupted"
}

psql_c() { cluster_psql -At "$@"; }

# Consistency conditions; $1 = label. Fails the configuration when any is violated.
check_consistency() {
    local label=$1 out bad
    if ! out=$(psql_c -F '|' -f "$BENCH/tpcc/check.sql" 2>&1); then
        printf '%s\n' "$out" >"$CDIR/check-$label.txt"
        fail "consistency check ($label) did not run: $out"
    fi
    printf '%s\n' "$out" >"$CDIR/check-$label.txt"
    printf '%s\n' "$out" | awk -F'|' -v c="$CFG" -v l="$label" '{print c "," l "," substr($1,1,1) "," $2 "," $3}' \
        >>"$CDIR/checks.csv"
    bad=$(printf '%s\n' "$out" | awk -F'|' '$2 != 0')
    if [ -n "$bad" ]; then
        fail "TPC-C consistency violated after $label: $(printf '%s' "$bad" | tr '\n' ';')"
    fi
    say "[$CFG] consistency conditions 1-6 hold ($label)"
}

# anker introspection: every view in schema anker and every argument-less function whose name
# mentions counter/stat, dumped as JSON; $1 = tag. Nothing happens for heap or when absent.
ANKER_SOURCES=
discover_anker_stats() {
    ANKER_SOURCES=$(psql_c -c "
        SELECT 'view ' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'anker' AND c.relkind IN ('v', 'm')
        UNION ALL
        SELECT 'func ' || p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname = 'anker' AND p.pronargs = 0 AND p.prokind = 'f'
           AND p.proname ~ '(counter|stat)' AND p.prorettype <> 'void'::regtype
        ORDER BY 1" 2>/dev/null)
    if [ -n "$ANKER_SOURCES" ]; then
        say "[$CFG] anker introspection found: $(printf '%s' "$ANKER_SOURCES" | tr '\n' ',' | sed 's/,$//')"
    else
        say "[$CFG] anker introspection: no views or counter functions in schema anker yet (snapshot plot will be skipped)"
    fi
}

collect_anker_stats() {
    local tag=$1 kind name json from
    [ -n "$ANKER_SOURCES" ] || return 0
    while read -r kind name; do
        [ -n "$name" ] || continue
        if [ "$kind" = view ]; then from="anker.$name"; else from="anker.$name()"; fi
        json=$(psql_c -c "SELECT coalesce(json_agg(t), '[]') FROM $from AS t" 2>/dev/null | tr -d '\n') ||
            json='null'
        printf '{"config":"%s","tag":"%s","epoch_ms":%s,"source":"%s","rows":%s}\n' \
            "$CFG" "$tag" "$(now_ms)" "$name" "${json:-null}" >>"$CDIR/anker_stats.jsonl"
    done <<<"$ANKER_SOURCES"
}

# Samples the view anker.snapshots (live snapshots) once a second until $1 (a file) exists.
sample_snapshots() {
    local stop=$1 phase=$2 json
    while [ ! -e "$stop" ]; do
        json=$(psql_c -c "SELECT coalesce(json_agg(t), '[]') FROM anker.snapshots AS t" 2>/dev/null | tr -d '\n')
        printf '{"config":"%s","tag":"sample:%s","epoch_ms":%s,"source":"snapshots","rows":%s}\n' \
            "$CFG" "$phase" "$(now_ms)" "${json:-null}" >>"$CDIR/anker_stats.jsonl"
        sleep 1
    done
}
has_snapshot_view() { printf '%s\n' "$ANKER_SOURCES" | grep -qx 'view snapshots'; }

# One OLTP pgbench run of $2 seconds; $1 = phase name. Sets OLTP_RC.
run_oltp() {
    local phase=$1 secs=$2 s args=()
    for s in "${OLTP_SCRIPTS[@]}"; do args+=(-f "$BENCH/tpcc/${s%@*}.pgbench@${s#*@}"); done
    local threads=$CLIENTS nproc
    nproc=$(nproc 2>/dev/null || echo 2)
    [ "$threads" -gt "$nproc" ] && threads=$nproc
    rm -f "$WORK/$phase".*
    ( cd "$WORK" && cluster_pgbench -n -M prepared -c "$CLIENTS" -j "$threads" -T "$secs" -P 1 \
        --max-tries="$MAX_TRIES" -D warehouses="$WAREHOUSES" -D uniform="$UNIFORM" \
        -l --log-prefix="$WORK/$phase" --aggregate-interval=1 "${args[@]}" ) \
        >"$CDIR/$phase.pgbench.txt" 2> >(tee "$CDIR/$phase.progress.txt" | sed -u "s/^/    [$CFG $phase] /" >&2)
    OLTP_RC=$?
    local f i=0
    for f in "$WORK/$phase".*; do
        [ -e "$f" ] || continue
        cp "$f" "$CDIR/$phase.agg.$i"; i=$((i + 1))
    done
    return "$OLTP_RC"
}

# The OLAP stream: cycles over the queries, one pgbench -t 1 per query, until $2 seconds have
# passed (a query started before the deadline runs to its end). $1 = phase; $3 = a pid: stop
# when it exits too; $4 = 1 to finish the first full cycle whatever the deadline.
run_olap() {
    local phase=$1 secs=$2 watch=${3:-} full=${4:-0}
    local deadline=$(( $(now_ms) + secs * 1000 )) seq=0 cycle=0 q line lat start rc
    local csv="$CDIR/$phase.olap.csv"
    echo "config,phase,query,seq,cycle,start_ms,latency_ms" >"$csv"
    while :; do
        for q in "${QUERY_LIST[@]}"; do
            if [ "$(now_ms)" -ge "$deadline" ] && ! { [ "$full" = 1 ] && [ "$cycle" -eq 0 ]; }; then
                break 2
            fi
            if [ -n "$watch" ] && ! kill -0 "$watch" 2>/dev/null; then break 2; fi
            rm -f "$WORK/olap".*
            start=$(now_ms)
            ( cd "$WORK" && cluster_pgbench -n -t 1 -f "$(query_file "$q")" -l --log-prefix="$WORK/olap" ) \
                >"$WORK/olap.out" 2>&1
            rc=$?
            line=$(cat "$WORK"/olap.[0-9]* 2>/dev/null | head -n 1)
            lat=$(printf '%s' "$line" | awk '{print $3}')
            if [ $rc -ne 0 ] || ! [[ "$lat" =~ ^[0-9]+$ ]]; then
                cat "$WORK/olap.out" >>"$CDIR/$phase.olap-errors.txt"
                fail "OLAP query $q failed in phase $phase: $(grep -m1 -i error "$WORK/olap.out")"
            fi
            lat=$(awk -v u="$lat" 'BEGIN { printf "%.3f", u / 1000 }')
            echo "$CFG,$phase,$q,$seq,$cycle,$start,$lat" >>"$csv"
            echo "    [$CFG $phase] $q $lat ms"
            seq=$((seq + 1))
        done
        cycle=$((cycle + 1))
    done
}

# Consistency checks back to back until $1 (a file) exists; violations go to $2.
online_checks() {
    local stop=$1 report=$2 out n=0
    while [ ! -e "$stop" ]; do
        if ! out=$(psql_c -F '|' -f "$BENCH/tpcc/check.sql" 2>&1); then
            printf 'check did not run: %s\n' "$out" >>"$report"; return
        fi
        n=$((n + 1))
        printf '%s\n' "$out" | awk -F'|' '$2 != 0' >>"$report"
    done
    echo "$n" >"$report.count"
}

rollbacks() { psql_c -c "SELECT count(*) FROM tpcc_rollbacks"; }

# A phase that committed no OLTP transaction proves nothing: fail. $1 = phase.
require_transactions() {
    local n
    n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$CDIR/$1.pgbench.txt")
    [ "${n:-0}" -gt 0 ] || fail "no OLTP transaction completed in phase $1 (see $CDIR/$1.pgbench.txt)"
}

# CPU accounting, to tell how much of the machine other work took during a phase (these
# machines are shared, and a concurrent build skews every figure). Prints
# "busy own" in clock ticks: busy = all CPUs' non-idle time (/proc/stat); own = the cluster
# (postmaster, its live children, and the children it reaped: cutime/cstime) plus this driver
# process and the children it reaped (pgbench, psql).
_proc_ticks() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{ print $12 + $13 + $14 + $15 }'; }
cpu_ticks() {
    local busy own=0 pm p t
    busy=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat)
    pm=$(head -n 1 "$CLUSTER_DATA/postmaster.pid" 2>/dev/null)
    if [ -n "$pm" ]; then
        for p in "$pm" $(pgrep -P "$pm" 2>/dev/null); do
            t=$(_proc_ticks "$p"); own=$(( own + ${t:-0} ))
        done
    fi
    t=$(_proc_ticks "$DRIVER_PID"); own=$(( own + ${t:-0} ))
    echo "$busy $own"
}
CPU_MARK=
cpu_mark() { CPU_MARK="$(now_ms) $(cpu_ticks)"; }
# $1 = phase: appends phase,seconds,busy_cores,own_cores,other_cores,loadavg_1min to cpu.csv
cpu_record() {
    local phase=$1 t0 b0 o0 b1 o1 hz secs pm p i busy_children
    read -r t0 b0 o0 <<<"$CPU_MARK"
    # Let the client backends of the phase exit and be reaped first (an exiting backend can
    # fall between reading it and reading the postmaster's cutime); at most 5 s.
    pm=$(head -n 1 "$CLUSTER_DATA/postmaster.pid" 2>/dev/null)
    for i in $(seq 50); do
        busy_children=0
        for p in $(pgrep -P "${pm:-0}" 2>/dev/null); do
            case "$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f1)" in Z) busy_children=1 ;; esac
            case "$(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline")" in "postgres: postgres "*) busy_children=1 ;; esac
        done
        [ "$busy_children" = 0 ] && break
        sleep 0.1
    done
    read -r b1 o1 <<<"$(cpu_ticks)"
    hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
    [ -s "$CDIR/cpu.csv" ] || echo "phase,seconds,busy_cores,own_cores,other_cores,loadavg_1min" >"$CDIR/cpu.csv"
    awk -v p="$phase" -v ms=$(( $(now_ms) - t0 )) -v b=$(( b1 - b0 )) -v o=$(( o1 - o0 )) -v hz="$hz" \
        -v la="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
            s = ms / 1000; if (s <= 0) s = 1
            other = (b - o) / hz / s; if (other < 0) other = 0
            printf "%s,%.1f,%.2f,%.2f,%.2f,%s\n", p, s, b / hz / s, o / hz / s, other, la }' >>"$CDIR/cpu.csv"
}

run_config() {
    CFG=$1
    DRIVER_PID=$BASHPID
    CDIR="$OUT/$CFG"
    rm -rf "$CDIR"; mkdir -p "$CDIR"
    trap config_cleanup EXIT
    trap 'exit 130' INT TERM

    local am=heap method=
    local engine=postgres
    case "$CFG" in anker-duckdb) am=anker; method=cow; engine=duckdb ;; anker-*) am=anker; method=${CFG#anker-} ;; esac
    local conf=(
        "shared_buffers = '$SHARED_BUFFERS'"
        "synchronous_commit = off"
        "max_connections = $(( CLIENTS + 50 ))"
        "max_wal_size = '16GB'"
        "checkpoint_timeout = '30min'"
        "max_parallel_workers_per_gather = $OLAP_PARALLEL"
        "log_min_duration_statement = -1"
        "${EXTRA_CONF[@]}"
    )
    if [ "$am" = anker ]; then
        conf+=("shared_preload_libraries = 'anker'" "anker.snapshot_method = '$method'" "anker.olap_engine = '$engine'" "${ANKER_CONF[@]}")
    fi

    say "[$CFG] starting a throwaway cluster (W=$WAREHOUSES, $CLIENTS OLTP clients + 1 OLAP stream, ${DURATION}s per phase)"
    if ! cluster_start "${conf[@]}" 2>"$CDIR/start.err"; then
        cat "$CDIR/start.err" >&2
        if [ "$method" = vm_snapshot ] && grep -qi 'vm_snapshot' "$CDIR/start.err" "${CLUSTER_LOG:-/dev/null}" 2>/dev/null; then
            skip "the server refused anker.snapshot_method = vm_snapshot: $(grep -hi -m1 'vm_snapshot' "${CLUSTER_LOG:-/dev/null}" "$CDIR/start.err" | head -n1)"
        fi
        fail "the server did not start (see $CDIR/server.log)"
    fi
    [ -s "$CDIR/start.err" ] || rm -f "$CDIR/start.err"
    WORK=$(cluster_workdir)
    psql_c -c "SELECT version()" >"$CDIR/version.txt"

    if [ "$am" = anker ]; then
        psql_c -c "CREATE EXTENSION anker" >/dev/null 2>"$CDIR/extension.err" ||
            fail "CREATE EXTENSION anker: $(cat "$CDIR/extension.err")"
        # Probe: a tiny anker table scanned with this snapshot method.
        local probe
        if ! probe=$(psql_c -c "CREATE TABLE anker_probe (a int) USING anker" \
                            -c "INSERT INTO anker_probe SELECT generate_series(1, 100)" \
                            -c "SELECT count(*) FROM anker_probe" -c "DROP TABLE anker_probe" 2>&1); then
            if [ "$method" = vm_snapshot ]; then
                skip "anker.snapshot_method = vm_snapshot is not available here: $(printf '%s' "$probe" | grep -m1 -i error)"
            fi
            fail "anker probe table failed: $probe"
        fi
        # The configuration's snapshot method must be in effect (set in postgresql.conf above).
        local got
        got=$(psql_c -c "SELECT current_setting('anker.snapshot_method', true)" 2>/dev/null)
        if [ "$got" != "$method" ]; then
            [ "$method" = vm_snapshot ] &&
                skip "anker.snapshot_method is '${got:-not defined by this build}', not vm_snapshot"
            say "[$CFG] WARNING: anker.snapshot_method is '${got:-not defined by this build of anker}', not '$method'; running anyway"
            echo "anker.snapshot_method was '${got:-undefined}', not '$method': this run does not measure that method" >>"$CDIR/notes.txt"
        fi
        discover_anker_stats
    fi

    say "[$CFG] loading TPC-C + CH tables USING $am"
    local t0; t0=$(now_ms)
    psql_c -v am="$am" -f "$BENCH/tpcc/schema.sql" >"$CDIR/load.txt" 2>&1 || fail "schema.sql: $(tail -n 3 "$CDIR/load.txt")"
    cluster_psql -v warehouses="$WAREHOUSES" -f "$BENCH/tpcc/load.sql" 2>&1 | tee -a "$CDIR/load.txt" | sed -u "s/^/    [$CFG load] /"
    [ "${PIPESTATUS[0]}" -eq 0 ] || fail "load.sql: $(tail -n 3 "$CDIR/load.txt")"
    psql_c -f "$BENCH/tpcc/indexes.sql" >>"$CDIR/load.txt" 2>&1 || fail "indexes.sql: $(tail -n 3 "$CDIR/load.txt")"
    psql_c -f "$BENCH/tpcc/functions.sql" >>"$CDIR/load.txt" 2>&1 || fail "functions.sql: $(tail -n 3 "$CDIR/load.txt")"
    if ! psql_c -c "VACUUM (ANALYZE)" >>"$CDIR/load.txt" 2>&1; then
        say "[$CFG] WARNING: VACUUM failed ($(tail -n 1 "$CDIR/load.txt")); running ANALYZE only"
        echo "VACUUM failed after load; ANALYZE only" >>"$CDIR/notes.txt"
        psql_c -c "ANALYZE" >>"$CDIR/load.txt" 2>&1 || fail "ANALYZE: $(tail -n 3 "$CDIR/load.txt")"
    fi
    psql_c -c "CHECKPOINT" >/dev/null 2>&1
    echo "$(( $(now_ms) - t0 ))" >"$CDIR/load_ms"
    { echo "table,rows_estimate,total_bytes"
      psql_c -F, -c "SELECT relname, n_live_tup, pg_total_relation_size(relid) FROM pg_stat_user_tables ORDER BY 1"
    } >"$CDIR/tables.csv" 2>/dev/null
    say "[$CFG] loaded in $(( ($(now_ms) - t0) / 1000 )) s"
    check_consistency load

    say "[$CFG] warm-up: ${WARMUP}s OLTP, then one pass over the queries"
    run_oltp warmup "$WARMUP" >/dev/null
    [ "$OLTP_RC" -eq 0 ] || fail "OLTP warm-up: pgbench exited $OLTP_RC: $(grep -m1 -i error "$CDIR/warmup.progress.txt")"
    run_olap warmup 0 "" 1 >/dev/null
    collect_anker_stats "before:oltp"

    say "[$CFG] phase 1/3: OLTP alone, ${DURATION}s"
    local rb0 rb1
    rb0=$(rollbacks)
    cpu_mark
    run_oltp oltp "$DURATION"
    cpu_record oltp
    [ "$OLTP_RC" -eq 0 ] || fail "OLTP phase: pgbench exited $OLTP_RC: $(grep -m1 -i error "$CDIR/oltp.progress.txt")"
    require_transactions oltp
    rb1=$(rollbacks); echo $((rb1 - rb0)) >"$CDIR/oltp.rollbacks"
    collect_anker_stats "after:oltp"
    check_consistency oltp

    say "[$CFG] phase 2/3: OLAP alone, ${DURATION}s (one stream cycling over ${#QUERY_LIST[@]} queries)"
    local stop="$WORK/stop-sampler"
    rm -f "$stop"
    collect_anker_stats "before:olap"
    if has_snapshot_view; then sample_snapshots "$stop" olap & BG_PIDS+=($!); fi
    cpu_mark
    run_olap olap "$DURATION" "" 1
    cpu_record olap
    touch "$stop"; wait "${BG_PIDS[@]}" 2>/dev/null; BG_PIDS=()
    collect_anker_stats "after:olap"

    say "[$CFG] phase 3/3: OLTP + OLAP together, ${DURATION}s"
    rm -f "$stop"
    rb0=$(rollbacks)
    collect_anker_stats "before:mixed"
    cpu_mark
    run_oltp mixed "$DURATION" & local oltp_pid=$!
    BG_PIDS+=("$oltp_pid")
    if has_snapshot_view; then sample_snapshots "$stop" mixed & BG_PIDS+=($!); fi
    if [ "$ONLINE_CHECK" = 1 ]; then
        : >"$CDIR/online-check-violations.txt"
        online_checks "$stop" "$CDIR/online-check-violations.txt" & BG_PIDS+=($!)
    fi
    sleep 0.5   # let the OLTP clients connect first
    run_olap mixed "$DURATION" "$oltp_pid" 0
    wait "$oltp_pid"; local mixed_rc=$?
    touch "$stop"; wait "${BG_PIDS[@]}" 2>/dev/null; BG_PIDS=()
    cpu_record mixed
    # run_oltp ran in a subshell: take its exit status from the wait, re-read its logs
    [ "$mixed_rc" -eq 0 ] || fail "mixed phase: OLTP pgbench exited $mixed_rc: $(grep -m1 -i error "$CDIR/mixed.progress.txt")"
    require_transactions mixed
    rb1=$(rollbacks); echo $((rb1 - rb0)) >"$CDIR/mixed.rollbacks"
    collect_anker_stats "after:mixed"
    if [ "$ONLINE_CHECK" = 1 ]; then
        if [ -s "$CDIR/online-check-violations.txt" ]; then
            fail "consistency violated DURING the mixed phase (a query saw an inconsistent state): $(head -n 3 "$CDIR/online-check-violations.txt" | tr '\n' ';')"
        fi
        say "[$CFG] online consistency checks during the mixed phase: $(cat "$CDIR/online-check-violations.txt.count" 2>/dev/null || echo 0) runs, no violation"
    fi
    check_consistency mixed
    config_status ok
    say "[$CFG] done"
}

# ---------------------------------------------------------------- main
T_START=$(now_ms)
PY=$(find_python)
[ "$PLOTS" = 1 ] && ! pyok "$PY" && PLOTS=0   # find_python ran in a subshell
{
    echo "command: bench/htap.sh ${ARGS_ORIG[*]}"
    echo "mode: $MODE"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "git: $(git -C "$BENCH" rev-parse --short HEAD 2>/dev/null || echo none)"
    echo "host: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), kernel $(uname -r)"
    echo "postgres: $("$PG_BINDIR/postgres" --version)"
    echo "warehouses: $WAREHOUSES"
    echo "duration_s: $DURATION"
    echo "warmup_s: $WARMUP"
    echo "clients: $CLIENTS"
    echo "olap_streams: 1"
    echo "mix: $MIX (${OLTP_SCRIPTS[*]})"
    echo "uniform: $UNIFORM"
    echo "max_tries: $MAX_TRIES"
    echo "shared_buffers: $SHARED_BUFFERS"
    echo "olap_parallel: $OLAP_PARALLEL"
    echo "queries: $QUERIES"
    echo "configs: $CONFIGS"
    echo "online_check: $ONLINE_CHECK"
} >"$OUT/meta.txt"
for n in "${NOTES[@]}"; do say "NOTE: $n"; echo "$n" >>"$OUT/notes.txt"; done
say "output: $OUT"

FAILED=()
trap 'echo "htap.sh: interrupted" >&2; exit 130' INT TERM
for cfg in "${CONFIG_LIST[@]}"; do
    ( run_config "$cfg" )
    st=$(cat "$OUT/$cfg/status" 2>/dev/null || echo "failed: no status")
    case "$st" in
        ok|skipped*) ;;
        *) FAILED+=("$cfg: $st") ;;
    esac
done
echo "wall_s: $(( ($(now_ms) - T_START) / 1000 ))" >>"$OUT/meta.txt"

REPORT_ARGS=("$OUT")
[ "$PLOTS" = 1 ] || REPORT_ARGS+=(--no-plots)
if ! "$PY" "$BENCH/lib/report.py" "${REPORT_ARGS[@]}"; then
    FAILED+=("report: bench/lib/report.py failed")
fi

echo
[ -f "$OUT/summary.md" ] && cat "$OUT/summary.md"
echo
say "results: $OUT (summary.md, *.csv$( [ "$PLOTS" = 1 ] && echo ', *.png'))"
for p in "$OUT"/*.png; do [ -e "$p" ] && echo "  plot: $p"; done
say "wall time: $(( ($(now_ms) - T_START) / 1000 )) s"
if [ ${#FAILED[@]} -gt 0 ]; then
    echo >&2
    echo "htap.sh: FAILED:" >&2
    for f in "${FAILED[@]}"; do echo "  - $f" >&2; done
    exit 1
fi
say "all configurations passed the consistency checks"
exit 0
