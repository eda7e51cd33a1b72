# bench/lib/cluster.sh -- throwaway PostgreSQL 15 clusters for benchmarks, demos and tests.
#
# Source it from bash:   . bench/lib/cluster.sh
#
# Every cluster lives in its own `mktemp -d` directory (data dir, unix socket dir, server log),
# listens on a unix socket only (listen_addresses = ''), and is owned by the `postgres` user when
# the caller is root (PostgreSQL refuses to run as root). Nothing outside that directory is touched.
#
# Functions
#   cluster_start [CONF_LINE ...]
#       initdb + start a new cluster; each argument is appended verbatim to postgresql.conf
#       (e.g. "shared_preload_libraries = 'anker'" "anker.snapshot_method = 'cow'").
#       Sets and exports CLUSTER_DIR, CLUSTER_DATA, CLUSTER_SOCK, CLUSTER_PORT, CLUSTER_LOG.
#       Returns non-zero (and prints the tail of the server log) if the server does not start;
#       the directory is kept until cluster_cleanup so the log can be read. CLUSTER_INITDB_ARGS,
#       if set, is added to initdb's arguments (e.g. --data-checksums).
#   cluster_psql [PSQL_ARGS ...]
#       psql on the cluster's `postgres` database as the postgres superuser, with -X (no psqlrc)
#       and ON_ERROR_STOP=1. Use -d to pick another database.
#   cluster_pgbench [PGBENCH_ARGS ...]
#       pgbench against the cluster (PGHOST/PGPORT/PGUSER set; pass the database name yourself
#       or rely on PGDATABASE=postgres). Runs in the current directory, which must be writable by
#       the postgres user if you ask pgbench for log files (see cluster_workdir).
#   cluster_run CMD [ARGS ...]
#       run any command as the cluster owner with PGHOST/PGPORT/PGUSER/PGDATABASE set.
#   cluster_standby_start DIR PORT [CONF_LINE ...]
#       pg_basebackup -R -X stream into DIR (new), then start that hot standby on PORT in the
#       same socket directory, its log in DIR.log; cluster_cleanup stops it.
#   cluster_psql_port PORT [PSQL_ARGS ...]
#       cluster_psql, for another server in the socket directory (a standby, a restored backup).
#   cluster_catch_up PORT
#       wait (up to two minutes) until the server on PORT has replayed the WAL the cluster's
#       server has written so far; non-zero if it has not.
#   cluster_workdir
#       print a directory inside CLUSTER_DIR that is writable by the cluster owner (created once).
#   cluster_log_tail [N]
#       print the last N (default 40) lines of the server log.
#   cluster_pg_ctl PG_CTL_ARGS ...
#       pg_ctl on the cluster's data directory as its owner (its server log, waiting up to
#       120 s), e.g. `cluster_pg_ctl restart`, `cluster_pg_ctl -m immediate stop`.
#   cluster_wait_ready [PORT]
#       wait (up to two minutes) until the server on PORT (default: the cluster's) answers a
#       query; non-zero if it does not.
#   cluster_kill_postmaster
#       a crash of the whole server: kill -9 of the postmaster and its children, waiting until
#       they are gone, then the pid and socket lock files removed so that `cluster_pg_ctl start`
#       runs crash recovery.
#   cluster_peak_anon_growth PID
#       sample process PID's anonymous resident memory (RssAnon) every 10 ms until it exits;
#       print its peak growth over the first sample in kB (nothing if PID is not running).
#   cluster_stop
#       fast shutdown (falls back to immediate after 60 s); a no-op if nothing is running.
#   cluster_cleanup
#       cluster_stop, then remove CLUSTER_DIR. Safe to call more than once and from a trap:
#           trap cluster_cleanup EXIT
#       Only for a cluster cluster_start made in this shell: a script that refused to start
#       because the environment names another cluster leaves that one alone.
#
# Environment (optional)
#   PG_BINDIR       PostgreSQL binaries (default: /usr/lib/postgresql/15/bin, else pg_config --bindir)
#   CLUSTER_TMPBASE parent of the temp directory (default: ${TMPDIR:-/tmp})
#   CLUSTER_OWNER   user that runs the server when the caller is root (default: postgres)
#   CLUSTER_KEEP=1  cluster_cleanup stops the server but keeps the directory (for debugging)

if [ -z "${PG_BINDIR:-}" ]; then
    if [ -x /usr/lib/postgresql/15/bin/postgres ]; then
        PG_BINDIR=/usr/lib/postgresql/15/bin
    elif command -v pg_config >/dev/null 2>&1; then
        PG_BINDIR=$(pg_config --bindir)
    fi
fi
CLUSTER_OWNER=${CLUSTER_OWNER:-postgres}
_CLUSTER_STANDBYS=()
CLUSTER_DIR=${CLUSTER_DIR:-}

# Run "$@" as the cluster owner (directly when we are not root).
_cluster_as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u "$CLUSTER_OWNER" -- "$@"
    else
        "$@"
    fi
}

_cluster_env() {
    _cluster_as_owner env PGHOST="$CLUSTER_SOCK" PGPORT="$CLUSTER_PORT" PGUSER=postgres \
        PGDATABASE="${PGDATABASE:-postgres}" PGAPPNAME="${PGAPPNAME:-anker-bench}" "$@"
}

cluster_start() {
    if [ -n "${CLUSTER_DIR:-}" ] && [ -d "$CLUSTER_DIR" ]; then
        echo "cluster_start: a cluster is already set up in $CLUSTER_DIR (call cluster_cleanup first)" >&2
        return 1
    fi
    [ -x "$PG_BINDIR/initdb" ] || { echo "cluster_start: no initdb in '$PG_BINDIR' (set PG_BINDIR)" >&2; return 1; }
    CLUSTER_DIR=$(mktemp -d "${CLUSTER_TMPBASE:-${TMPDIR:-/tmp}}/anker-pg.XXXXXX") || return 1
    CLUSTER_DATA=$CLUSTER_DIR/data
    CLUSTER_SOCK=$CLUSTER_DIR/sock
    CLUSTER_LOG=$CLUSTER_DIR/server.log
    # The port only names the socket file (no TCP), so any value works; vary it for readability.
    CLUSTER_PORT=$(( 20000 + RANDOM % 20000 ))
    export CLUSTER_DIR CLUSTER_DATA CLUSTER_SOCK CLUSTER_LOG CLUSTER_PORT
    _CLUSTER_STARTED_HERE=$CLUSTER_DIR
    mkdir -p "$CLUSTER_SOCK" "$CLUSTER_DIR/work"
    chmod 755 "$CLUSTER_DIR"
    if [ "$(id -u)" -eq 0 ]; then
        chown -R "$CLUSTER_OWNER" "$CLUSTER_DIR"
    fi
    if ! _cluster_as_owner "$PG_BINDIR/initdb" -D "$CLUSTER_DATA" -U postgres -A trust -E UTF8 \
            --locale=C -N ${CLUSTER_INITDB_ARGS:-} >"$CLUSTER_DIR/initdb.log" 2>&1; then
        echo "cluster_start: initdb failed:" >&2
        tail -n 20 "$CLUSTER_DIR/initdb.log" >&2
        return 1
    fi
    {
        echo ""
        echo "# --- bench/lib/cluster.sh ---"
        echo "port = $CLUSTER_PORT"
        echo "listen_addresses = ''"
        echo "unix_socket_directories = '$CLUSTER_SOCK'"
        echo "logging_collector = off"
        echo "log_line_prefix = '%m [%p] %a '"
        local line
        for line in "$@"; do
            echo "$line"
        done
    } | _cluster_as_owner tee -a "$CLUSTER_DATA/postgresql.conf" >/dev/null
    if ! _cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DATA" -l "$CLUSTER_LOG" -w -t 120 \
            start >"$CLUSTER_DIR/pg_ctl.log" 2>&1; then
        echo "cluster_start: the server did not start; end of its log ($CLUSTER_LOG):" >&2
        cluster_log_tail 20 >&2
        return 1
    fi
}

cluster_psql() {
    _cluster_env "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 "$@"
}

# psql on another server in this cluster's socket directory (a standby, a restored
# backup) that listens on port $1
cluster_psql_port() {
    local CLUSTER_PORT=$1
    shift
    cluster_psql "$@"
}

# Wait up to two minutes until the server on port $1 has replayed all the WAL the cluster's
# server has written so far; returns 1 if it has not. A standby that is reconnecting (after
# its primary was killed) answers nothing for a few seconds: that is waited out too.
cluster_catch_up() {
    local port=$1 target
    target=$(cluster_psql -Atc "SELECT pg_current_wal_lsn()")
    for _ in $(seq 1 120); do
        [ "$(cluster_psql_port "$port" -Atc "SELECT pg_last_wal_replay_lsn() >= '$target'" 2>/dev/null)" = t ] && return 0
        sleep 1
    done
    return 1
}

cluster_standby_start() {
    local dir=$1 port=$2 line
    shift 2
    _cluster_env "$PG_BINDIR/pg_basebackup" -D "$dir" -R -X stream -c fast || return 1
    for line in "port = $port" "$@"; do echo "$line" >> "$dir/postgresql.conf"; done
    _CLUSTER_STANDBYS+=("$dir")
    _cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$dir" -l "$dir.log" -w -t 120 start >/dev/null
}

cluster_pgbench() {
    _cluster_env "$PG_BINDIR/pgbench" "$@"
}

cluster_run() {
    _cluster_env "$@"
}

cluster_workdir() {
    echo "$CLUSTER_DIR/work"
}

cluster_log_tail() {
    [ -n "${CLUSTER_LOG:-}" ] && [ -f "$CLUSTER_LOG" ] && tail -n "${1:-40}" "$CLUSTER_LOG"
    return 0
}

cluster_pg_ctl() {
    cluster_run "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DATA" -l "$CLUSTER_LOG" -w -t 120 "$@" >/dev/null
}

cluster_wait_ready() {
    local port=${1:-$CLUSTER_PORT}
    for _ in $(seq 1 120); do
        cluster_psql_port "$port" -Atc "SELECT 1" >/dev/null 2>&1 && return 0
        sleep 1
    done
    return 1
}

cluster_kill_postmaster() {
    local pm children
    pm=$(head -n 1 "$CLUSTER_DATA/postmaster.pid")
    children=$(pgrep -P "$pm" | tr '\n' ' ' || true)
    # shellcheck disable=SC2086 # one argument per child
    kill -9 "$pm" $children 2>/dev/null || true
    # shellcheck disable=SC2086
    while kill -0 "$pm" $children 2>/dev/null; do sleep 0.1; done
    rm -f "$CLUSTER_DATA/postmaster.pid" "$CLUSTER_SOCK/.s.PGSQL.$CLUSTER_PORT.lock"
}

# RssAnon of process $1 in kB (nothing once it has exited)
_cluster_rss_anon() { awk '/RssAnon/ {print $2}' "/proc/$1/status" 2>/dev/null; }

cluster_peak_anon_growth() {
    local pid=$1 base peak a
    base=$(_cluster_rss_anon "$pid")
    [ -n "$base" ] || return 0
    peak=$base
    while kill -0 "$pid" 2>/dev/null; do
        a=$(_cluster_rss_anon "$pid")
        [ "${a:-0}" -gt "$peak" ] && peak=$a
        sleep 0.01
    done
    echo $((peak - base))
}

cluster_stop() {
    [ -n "${CLUSTER_DATA:-}" ] && [ -f "$CLUSTER_DATA/postmaster.pid" ] || return 0
    if ! _cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DATA" -m fast -w -t 60 stop >/dev/null 2>&1; then
        echo "cluster_stop: fast shutdown failed, using immediate" >&2
        _cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DATA" -m immediate -w -t 60 stop >/dev/null 2>&1 || true
    fi
}

cluster_cleanup() {
    [ -n "${CLUSTER_DIR:-}" ] || return 0
    [ "$CLUSTER_DIR" = "${_CLUSTER_STARTED_HERE:-}" ] || return 0
    local d
    for d in "${_CLUSTER_STANDBYS[@]:-}"; do
        [ -n "$d" ] && [ -f "$d/postmaster.pid" ] &&
            _cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$d" -m immediate -w stop >/dev/null 2>&1 || true
    done
    _CLUSTER_STANDBYS=()
    cluster_stop
    if [ "${CLUSTER_KEEP:-0}" = 1 ]; then
        echo "cluster_cleanup: keeping $CLUSTER_DIR (CLUSTER_KEEP=1)" >&2
    else
        rm -rf "$CLUSTER_DIR"
    fi
    CLUSTER_DIR=
    CLUSTER_DATA=
}
