#!/usr/bin/env bash
# PostgreSQL 15's own regression and isolation suites with anker as the
# default table access method, and on heap in the same run as the baseline
# (DESIGN §12); and its TAP suites of logical replication and recovery
# (src/test/subscription, src/test/recovery) and of the programs that work on
# a cluster's files and tables (src/bin/pg_rewind, pg_basebackup,
# pg_checksums, pg_dump, scripts: vacuumdb, clusterdb, reindexdb...) the same
# way, where heap runs only the tests anker fails (tap_verdict).
# The regression and isolation suites run against a primary with a streaming
# standby, and the two must end up with the same pg_dumpall (standby_dump, a
# test of its own on each access method, as PostgreSQL's 027_stream_regress.pl);
# after a crash of the primary, it must dump the same again (crash_dump); and
# after a crash in the middle of the regression suite run once more, it must
# dump what the standby replayed (midway_crash).
#
#   tests/pg-suites/run.sh [--suites regress,isolation,subscription,recovery,pg_rewind,...] [--ams heap,anker] [--keep]
#                          [--tests "name ..."]   (those tests instead of the schedule)
#                          [--accept]   (keep anker's output of every test that fails
#                                        only on anker as its alternative expected file:
#                                        for reviewed differences only, see differences.md)
#                          [--anker-conf LINE]   (an extra postgresql.conf line for the
#                                        anker cluster, repeatable: experiments such as
#                                        "anker.olap_engine = 'duckdb'")
#
# The suites come from Debian's source package of the installed postgresql-15
# (fetched with `apt-get source`, cached under /var/tmp/anker-pgsrc). Each
# access method gets its own throwaway cluster with anker preloaded,
# `CREATE EXTENSION anker` in template1 and postgres, and
# `default_table_access_method` set; the test databases are made from
# template1, so they have the extension too.
#
# anker's run reads its expected files from the source tree overlaid with
# tests/pg-suites/expected/<suite>/: alternative outputs (`name_N.out`, which
# pg_regress accepts beside `name.out`) for differences that follow from
# anker's layout, each explained in tests/pg-suites/differences.md.
#
# Verdict: a test that passes on heap must pass on anker. Tests listed in
# tests/pg-suites/known-failures (bugs not fixed yet, each with its reason)
# are reported but do not fail the run; a listed test that passes is
# reported too, so the list only shrinks. The last line is "N passed, N failed",
# counting the tests that pass on heap and are not known failures.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PG_BINDIR=/usr/lib/postgresql/15/bin
PG_CONFIG=$PG_BINDIR/pg_config
PGXS_TEST=$($PG_CONFIG --pkglibdir)/pgxs/src/test
CACHE=${ANKER_PGSRC_CACHE:-/var/tmp/anker-pgsrc}
SUITES=regress,isolation,subscription,recovery,pg_rewind,pg_basebackup,pg_checksums,pg_dump,scripts
AMS=heap,anker
KEEP=0
ONLY=
ACCEPT=0
ANKER_CONF=()
while [ $# -gt 0 ]; do
    case $1 in
        --suites) SUITES=$2; shift 2 ;;
        --ams) AMS=$2; shift 2 ;;
        --keep) KEEP=1; shift ;;
        --tests) ONLY=$2; shift 2 ;;
        --accept) ACCEPT=1; shift ;;
        --anker-conf) ANKER_CONF+=("$2"); shift 2 ;;
        *) echo "usage: $0 [--suites regress,isolation,subscription,recovery,pg_rewind,...] [--ams heap,anker] [--keep] [--tests \"name ...\"] [--accept] [--anker-conf LINE]" >&2; exit 2 ;;
    esac
done
unset RUST_BACKTRACE RUST_LIB_BACKTRACE

fail_setup() {
    echo "pg-suites: $*" >&2
    echo "0 passed, 1 failed"
    exit 1
}

# ---- the source package ----------------------------------------------------------
# The installed version's source, or (when the archive no longer serves it,
# as happens with security updates) the newest other 15.x source it has.
installed=$(dpkg-query -W -f='${Version}' postgresql-15 2>/dev/null) || fail_setup "postgresql-15 is not installed"
# A cached source of another version is used only when the installed one cannot be
# fetched (a server upgraded under a cache must not be tested with older suites).
SRC=
[ -f "$CACHE/postgresql-15-$installed/.complete" ] && { SRC=$CACHE/postgresql-15-$installed; version=$installed; }
if [ -z "$SRC" ]; then
    if ! grep -rqs '^\(Types: deb-src\|deb-src \)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        # deb-src entries built from the existing Debian sources.
        src=/etc/apt/sources.list.d/debian.sources
        [ -f "$src" ] || fail_setup "no deb-src line and no $src to derive one from"
        sed 's/^Types: deb$/Types: deb-src/' "$src" > /etc/apt/sources.list.d/anker-deb-src.sources
        apt-get -o DPkg::Lock::Timeout=600 update -qq || fail_setup "apt-get update failed"
    fi
    command -v dpkg-source >/dev/null || apt-get -o DPkg::Lock::Timeout=600 install -y -qq dpkg-dev >/dev/null
    mkdir -p "$CACHE"
    for v in $( (echo "$installed"; apt-cache showsrc postgresql-15 2>/dev/null | sed -n 's/^Version: //p' | sort -rV) | awk '!seen[$0]++'); do
        [ -f "$CACHE/postgresql-15-$v/.complete" ] && { SRC=$CACHE/postgresql-15-$v; version=$v; break; }
        dl=$CACHE/download-$v
        rm -rf "$dl" && mkdir -p "$dl"
        echo "pg-suites: fetching the source package of postgresql-15 $v into $CACHE"
        if (cd "$dl" && apt-get source -qq --download-only "postgresql-15=$v" >/dev/null 2>&1); then
            (cd "$dl" && dpkg-source -x ./*.dsc "$CACHE/postgresql-15-$v" >/dev/null) || fail_setup "dpkg-source -x failed"
            touch "$CACHE/postgresql-15-$v/.complete"
            SRC=$CACHE/postgresql-15-$v
            version=$v
            rm -rf "$dl"
            break
        fi
        rm -rf "$dl"
        echo "pg-suites: the archive does not serve the source of postgresql-15 $v"
    done
fi
if [ -z "$SRC" ]; then
    for v in $(ls -d "$CACHE"/postgresql-15-* 2>/dev/null | sed 's|.*/postgresql-15-||' | sort -rV); do
        [ -f "$CACHE/postgresql-15-$v/.complete" ] && { SRC=$CACHE/postgresql-15-$v; version=$v; break; }
    done
    [ -n "$SRC" ] || fail_setup "no source package of postgresql-15 could be fetched (is a deb-src line configured?)"
fi
[ "$version" = "$installed" ] || echo "pg-suites: using the suites of postgresql-15 $version with the installed server $installed"
REGRESS_SRC=$SRC/src/test/regress
ISOLATION_SRC=$SRC/src/test/isolation
# The TAP suites' framework (PostgreSQL::Test::Cluster) runs on IPC::Run.
if [[ ",$SUITES," == *",subscription,"* || ",$SUITES," == *",recovery,"* ]] && ! perl -MIPC::Run -e1 2>/dev/null; then
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq libipc-run-perl >/dev/null || fail_setup "installing libipc-run-perl failed"
fi

# ---- C modules the regression suite loads (regress.so, refint.so, autoinc.so) ----
LIBDIR=$CACHE/lib-$version
if [ ! -f "$LIBDIR/regress.so" ] || [ ! -f "$LIBDIR/refint.so" ] || [ ! -f "$LIBDIR/autoinc.so" ]; then
    echo "pg-suites: building regress.so, refint.so, autoinc.so"
    rm -rf "$LIBDIR" && mkdir -p "$LIBDIR"
    cp "$REGRESS_SRC/regress.c" "$SRC/contrib/spi/refint.c" "$SRC/contrib/spi/autoinc.c" "$LIBDIR"/
    cat > "$LIBDIR/Makefile" <<EOF
MODULES = regress refint autoinc
PG_CONFIG = $PG_CONFIG
PGXS := \$(shell \$(PG_CONFIG) --pgxs)
include \$(PGXS)
EOF
    make -s -C "$LIBDIR" >"$LIBDIR/build.log" 2>&1 || { tail -20 "$LIBDIR/build.log"; fail_setup "building the test modules failed"; }
fi

# The number of anker's alternative expected files: pg_regress tries
# name_0.out .. name_9.out; PostgreSQL's own alternatives use low numbers.
ALT=9

# ---- running one suite on one access method ---------------------------------------
WORK=$(mktemp -d /tmp/anker-pgsuites.XXXXXX)
chmod 755 "$WORK"
. "$ROOT/bench/lib/cluster.sh"
cleanup() {
    cluster_cleanup
    [ "$KEEP" = 1 ] && echo "pg-suites: outputs kept in $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT

# The settings pg_regress gives its own temporary instances, plus anker's.
conf_for() { # am
    cat <<EOF
shared_preload_libraries = 'anker'
anker.memory_limit = '2GB'
default_table_access_method = '$1'
max_prepared_transactions = 2
log_autovacuum_min_duration = 0
log_checkpoints = on
log_lock_waits = on
log_temp_files = 128kB
lc_messages = 'C'
fsync = off
EOF
    if [ "$1" = anker ] && [ ${#ANKER_CONF[@]} -gt 0 ]; then printf '%s\n' "${ANKER_CONF[@]}"; fi
}

# dumpall PORT FILE [--no-unlogged-table-data]: pg_dumpall of the server on
# PORT into FILE (its errors into dumps.log beside it).
dumpall() {
    cluster_run "$PG_BINDIR/pg_dumpall" -p "$1" --restrict-key=test --no-sync ${3:+"$3"} -f "$2" 2>>"$(dirname "$2")/dumps.log"
}

# standby_dump OUT PORT DB: once the standby on PORT has replayed all the
# primary wrote, a pg_dumpall of each (the primary's without unlogged
# tables' rows, which a standby does not have) into OUT; prints ok when the
# two are the same, else failed (their diff in OUT/standby.diff). Sequences
# are first moved past their cached values, as 027_stream_regress.pl does.
standby_dump() {
    local out=$1 port=$2 db=$3
    cluster_psql -d "$db" -c "SELECT setval(seqrelid, nextval(seqrelid)) FROM pg_sequence" >/dev/null 2>&1
    if ! cluster_catch_up "$port"; then
        echo "pg-suites: the standby did not catch up" >&2
        echo failed
        return
    fi
    dumpall "$CLUSTER_PORT" "$out/primary.dump" --no-unlogged-table-data && dumpall "$port" "$out/standby.dump" \
        || { echo failed; return; }
    if diff "$out/primary.dump" "$out/standby.dump" > "$out/standby.diff"; then echo ok; else echo failed; fi
}

# standby_reader PORT DB: reads every anker table of DB on the standby on
# PORT, over and over, until killed: the standby loads the tables as the
# suite makes them, and redo then applies the suite's changes to tables in
# memory as well as to their files (what is not loaded by the end is loaded
# from its replayed file by the dump). Errors (a table dropped meanwhile)
# are ignored; a standby that stops fails standby_dump.
standby_reader() {
    local port=$1 db=$2
    while sleep 1; do
        cluster_psql_port "$port" -d "$db" -Atc "SELECT format('SELECT count(*) FROM %s;', c.oid::regclass)
            FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE a.amname = 'anker' AND c.relpersistence = 'p'" 2>/dev/null \
            | cluster_psql_port "$port" -d "$db" -v ON_ERROR_STOP=0 >/dev/null 2>&1
    done
}

# crash_dump OUT: after standby_dump, an immediate shutdown of the primary
# (a crash: recovery replays the WAL since the last checkpoint, which the
# suites themselves request now and then, and every table is loaded again
# from its file), a start, and a pg_dumpall that must be the one taken
# before; prints ok or failed (diff in OUT/crash.diff).
crash_dump() {
    local out=$1
    [ -f "$out/primary.dump" ] || { echo failed; return; }
    cluster_pg_ctl -m immediate stop && cluster_pg_ctl start && cluster_wait_ready || { echo failed; return; }
    dumpall "$CLUSTER_PORT" "$out/after-crash.dump" --no-unlogged-table-data || { echo failed; return; }
    if diff "$out/primary.dump" "$out/after-crash.dump" > "$out/crash.diff"; then echo ok; else echo failed; fi
}

# create_test_db DB: as pg_regress makes its database, from template1
# instead of template0.
create_test_db() {
    local db=$1
    cluster_psql -c "CREATE DATABASE \"$db\" TEMPLATE=template1 ENCODING='UTF8' LC_COLLATE='C' LC_CTYPE='C'" \
        -c "ALTER DATABASE \"$db\" SET lc_messages TO 'C'" -c "ALTER DATABASE \"$db\" SET lc_monetary TO 'C'" \
        -c "ALTER DATABASE \"$db\" SET lc_numeric TO 'C'" -c "ALTER DATABASE \"$db\" SET lc_time TO 'C'" \
        -c "ALTER DATABASE \"$db\" SET bytea_output TO 'hex'" \
        -c "ALTER DATABASE \"$db\" SET timezone_abbreviations TO 'Default'" >/dev/null
}

# run_driver OUTDIR DB DRIVER ARGS...: the suite's driver (pg_regress or
# pg_isolation_regress) against the primary's database DB, writing into
# OUTDIR; ARGS name the inputs (--inputdir) and the schedule or the tests.
run_driver() {
    local outdir=$1 db=$2 driver=$3
    shift 3
    (cd "$outdir" && runuser -u postgres -- env PG_LIBDIR="$LIBDIR" PG_DLSUFFIX=.so PGISOLATIONTIMEOUT=60 \
        "$driver" --use-existing --host="$CLUSTER_SOCK" --port="$CLUSTER_PORT" --user=postgres --dbname="$db" \
        --bindir="$PG_BINDIR" --outputdir="$outdir" --dlpath="$LIBDIR" --max-concurrent-tests=20 "$@" >"$outdir/run.log" 2>&1)
}

# midway_crash OUT PORT DRIVER SECONDS: after crash_dump, the regression
# suite once more, in a database of its own, and the primary killed (the
# postmaster and its children, kill -9) at a random point of it, SECONDS
# being how long the suite took the first time (ANKER_MIDWAY_PERCENT=N
# kills it at N % of that, to repeat a run). Its crash recovery, from the
# suite's last checkpoint onto the files and then loads, must bring it to
# what the standby on PORT replayed of the same WAL, onto tables in memory
# (a reader loads them as the suite makes them) and files: prints ok when
# the two dump the same (files in OUT/midway).
midway_crash() {
    local out=$1 port=$2 driver=$3 took=$4 db=regression_midway
    local percent=${ANKER_MIDWAY_PERCENT:-$((10 + RANDOM % 81))}
    mkdir -p "$out/midway" && chown postgres "$out/midway"
    # (streaming again since crash_dump's restart)
    cluster_catch_up "$port" || { echo "pg-suites: the standby did not catch up" >&2; echo failed; return; }
    create_test_db "$db"
    standby_reader "$port" "$db" &
    local reader=$!
    run_driver "$out/midway" "$db" "$driver" --inputdir="$out" --schedule="$out/parallel_schedule" 2>/dev/null &
    local driver_pid=$!
    sleep "$(awk -v t="$took" -v p="$percent" 'BEGIN { printf "%.1f", t * p / 100 }')"
    echo "pg-suites: midway_crash: the primary killed at $percent % of the suite (ANKER_MIDWAY_PERCENT=$percent), in: $(tail -n 1 "$out/midway/run.log")" >&2
    cluster_kill_postmaster
    # (no test may start once the primary is back: the driver goes first)
    pkill -f -- "--outputdir=$out/midway" 2>/dev/null
    wait "$driver_pid" 2>/dev/null
    kill "$reader" 2>/dev/null
    wait "$reader" 2>/dev/null
    cluster_pg_ctl start && cluster_wait_ready || { echo failed; return; }
    standby_dump "$out/midway" "$port" "$db"
}

# run_suite SUITE AM: results in $WORK/SUITE-AM/{results.tsv,regression.diffs,...}
run_suite() {
    local suite=$1 am=$2 out="$WORK/$1-$2" db driver src schedule
    mkdir -p "$out"
    case $suite in
        regress) db=regression; driver=$PGXS_TEST/regress/pg_regress; src=$REGRESS_SRC; schedule=parallel_schedule ;;
        isolation) db=isolation_regression; driver=$PGXS_TEST/isolation/pg_isolation_regress; src=$ISOLATION_SRC; schedule=isolation_schedule ;;
    esac
    # A private copy of the suite's inputs: expected files overlaid for anker.
    cp -r "$src/sql" "$src/expected" "$out/" 2>/dev/null
    [ -d "$src/specs" ] && cp -r "$src/specs" "$out/"
    [ -d "$src/data" ] && cp -r "$src/data" "$out/"
    [ -f "$src/resultmap" ] && cp "$src/resultmap" "$out/"
    cp "$src/$schedule" "$out/"
    if [ "$am" = anker ] && [ -d "$HERE/expected/$suite" ]; then
        cp "$HERE/expected/$suite/"*.out "$out/expected/" 2>/dev/null
    fi
    chown -R postgres "$out"

    local -a confs
    mapfile -t confs < <(conf_for "$am")
    # The standby is not to fall behind for good when the primary recycles
    # WAL while it reconnects after a crash.
    confs+=("wal_keep_size = '4GB'")
    # Servers see RUST_BACKTRACE the way a user's environment may set it:
    # anker must not put backtraces into error messages.
    if ! RUST_BACKTRACE=1 cluster_start "${confs[@]}"; then
        echo "pg-suites: cluster for $suite/$am did not start"
        return 1
    fi
    cluster_psql -d template1 -c "CREATE EXTENSION anker" >/dev/null
    cluster_psql -c "CREATE EXTENSION anker" >/dev/null
    create_test_db "$db"
    # Each suite runs with a streaming standby, which must end up with what
    # the primary has (PostgreSQL's own 027_stream_regress.pl; as
    # there, replay waits for the standby's dump rather than cancel it).
    local standby_port=$((CLUSTER_PORT + 1))
    if ! cluster_standby_start "$out/standby" "$standby_port" "max_standby_streaming_delay = 600s" >"$out/standby-start.log" 2>&1; then
        echo "pg-suites: the standby for $suite/$am did not start"
        return 1
    fi
    standby_reader "$standby_port" "$db" &
    local reader=$!
    local start=$SECONDS
    # A step blocked for a minute is a hang (isolationtester's default
    # waits five minutes before cancelling it: PGISOLATIONTIMEOUT).
    run_driver "$out" "$db" "$driver" --inputdir="$out" $([ -n "$ONLY" ] && echo "$ONLY" || echo "--schedule=$out/$schedule")
    local took=$((SECONDS - start))
    echo "pg-suites: $suite on $am ran in $took s"
    kill "$reader" 2>/dev/null
    wait "$reader" 2>/dev/null
    # "test name ... ok", "     name ... FAILED", "test name ... failed (ignored)"
    sed -nE 's/^(test| ) +([a-zA-Z0-9_.-]+) +\.\.\. +(ok|FAILED|failed \(ignored\)).*/\2\t\3/p' "$out/run.log" \
        | sed 's/failed (ignored)/ignored/; s/FAILED/failed/' > "$out/results.tsv"
    printf 'standby_dump\t%s\n' "$(standby_dump "$out" "$standby_port" "$db")" >> "$out/results.tsv"
    printf 'crash_dump\t%s\n' "$(crash_dump "$out")" >> "$out/results.tsv"
    if [ "$suite" = regress ] && [ -z "$ONLY" ]; then
        printf 'midway_crash\t%s\n' "$(midway_crash "$out" "$standby_port" "$driver" "$took")" >> "$out/results.tsv"
    fi
    cp "$CLUSTER_LOG" "$out/server.log" 2>/dev/null
    if grep -Eq 'terminated by signal|server process .* was terminated' "$out/server.log" 2>/dev/null; then
        echo "pg-suites: a server process crashed during $suite on $am:"
        grep -E 'terminated by signal|was terminated' "$out/server.log" | head -5
        touch "$out/crashed"
    fi
    cluster_cleanup
    return 0
}

# TAP tests not run, each explained in differences.md: recovery's
# 027_stream_regress runs the regression suite against a primary with a
# standby, which run_suite does with anker's reviewed expected outputs
# (standby_dump); 043_vacuum_horizon_floor needs VACUUM to wait for a
# cursor's pin on a heap page. The others meet the harness, not anker: a
# database made from template0 has no anker extension, so no table can be
# created in it with anker as the default (scripts/020_createdb), and a dump
# restored into a database made from template1 meets the extension's schema
# there already (pg_dump/004_pg_dump_parallel, 010_dump_connstr: heap's run
# fails them too); scripts/090_reindexdb reindexes a table's TOAST table,
# which anker tables do not have.
TAP_NOT_RUN=(recovery/027_stream_regress recovery/043_vacuum_horizon_floor
    scripts/020_createdb scripts/090_reindexdb pg_dump/004_pg_dump_parallel pg_dump/010_dump_connstr)

# The source of TAP suite SUITE: src/test/SUITE, or a program's src/bin/SUITE.
tap_suite_dir() {
    if [ -d "$SRC/src/test/$1/t" ]; then echo "$SRC/src/test/$1"; else echo "$SRC/src/bin/$1"; fi
}

# run_tap_suite SUITE AM [TEST ...]: one of PostgreSQL's TAP suites
# (tap_suite_dir; all its tests but those of TAP_NOT_RUN, or the named ones),
# every cluster they make set up like run_suite's:
# anker preloaded and created in template1 and postgres (an initdb wrapper
# first in PATH), default_table_access_method set (TEMP_CONFIG, which
# PostgreSQL::Test::Cluster appends to each cluster's configuration).
# Results in $WORK/SUITE-AM/results.tsv (name, ok|failed|skipped).
run_tap_suite() {
    local suite=$1 am=$2 out="$WORK/$1-$2" t
    shift 2
    rm -rf "$out" && mkdir -p "$out/bin"
    cp -r "$(tap_suite_dir "$suite")" "$SRC/src/test/perl" "$out/"
    conf_for "$am" > "$out/temp.conf"
    cat > "$out/bin/initdb" <<EOF
#!/bin/sh
set -e
"$PG_BINDIR/initdb" "\$@"
while [ \$# -gt 0 ]; do [ "\$1" = -D ] && pgdata=\$2; shift; done
for db in template1 postgres; do
    echo "CREATE EXTENSION anker;" | "$PG_BINDIR/postgres" --single -D "\$pgdata" \\
        -c shared_preload_libraries=anker -c anker.memory_limit=256MB "\$db" >/dev/null
done
EOF
    chmod 755 "$out/bin/initdb"
    chown -R postgres "$out"
    local -a tests=()
    for t in "$@"; do tests+=("t/$t.pl"); done
    [ ${#tests[@]} -gt 0 ] || mapfile -t tests < <(cd "$out/$suite" && ls t/*.pl \
        | grep -Fxv -f <(printf '%s\n' "${TAP_NOT_RUN[@]}" | sed -n "s#^$suite/\(.*\)#t/\1.pl#p"))
    local start=$SECONDS with_icu=no
    "$PG_CONFIG" --configure | grep -q -- --with-icu && with_icu=yes
    (cd "$out/$suite" && runuser -u postgres -- env PATH="$out/bin:$PG_BINDIR:$PATH" \
        TESTDIR="$out/$suite" PG_REGRESS="$PGXS_TEST/regress/pg_regress" REGRESS_SHLIB="$LIBDIR/regress.so" \
        TEMP_CONFIG="$out/temp.conf" with_icu=$with_icu RUST_BACKTRACE=1 \
        prove -I ../perl -I . "${tests[@]}" >"$out/run.log" 2>&1)
    echo "pg-suites: $suite on $am ran in $((SECONDS - start)) s"
    # "t/001_rep_changes.pl ..... ok", "... skipped: why", "... Failed 2/37 subtests", "... Dubious, ..."
    sed -nE 's#^t/([a-zA-Z0-9_]+)\.pl \.+ (.*)$#\1\t\2#p' "$out/run.log" \
        | awk -F'\t' '{ r = ($2 == "ok") ? "ok" : ($2 ~ /^skipped/) ? "skipped" : "failed"; print $1 "\t" r }' > "$out/results.tsv"
    if grep -Eq 'terminated by signal (6|7|11)' "$out/$suite"/tmp_check/log/*.log 2>/dev/null; then
        echo "pg-suites: a server process crashed during $suite on $am:"
        grep -Eh 'terminated by signal (6|7|11)' "$out/$suite"/tmp_check/log/*.log | head -5
        touch "$out/crashed"
    fi
}

# A TAP suite on anker, then the tests anker fails on heap: one that fails
# there too is outside the yardstick (reported, not counted).
tap_verdict() {
    local suite=$1
    run_tap_suite "$suite" anker $ONLY
    local anker="$WORK/$suite-anker/results.tsv" name result s_pass s_fail=0 s_heap=0
    s_pass=$(awk -F'\t' '$2 == "ok"' "$anker" | wc -l)
    local -a bad
    mapfile -t bad < <(awk -F'\t' '$2 == "failed" {print $1}' "$anker")
    if [ ${#bad[@]} -gt 0 ]; then
        run_tap_suite "$suite" heap "${bad[@]}"
        for name in "${bad[@]}"; do
            result=$(awk -F'\t' -v n="$name" '$1 == n {print $2}' "$WORK/$suite-heap/results.tsv")
            if [ "$result" = ok ]; then
                s_fail=$((s_fail + 1))
                echo "pg-suites: $suite/$name passes on heap, fails on anker"
            else
                s_heap=$((s_heap + 1))
                echo "pg-suites: $suite/$name fails on heap too (${result:-not run}): not counted"
            fi
        done
    fi
    [ -s "$anker" ] || { s_fail=$((s_fail + 1)); echo "pg-suites: the $suite suite ran no test (see $WORK/$suite-anker/run.log)"; }
    [ -f "$WORK/$suite-anker/crashed" ] && s_fail=$((s_fail + 1))
    echo "pg-suites: $suite: anker passes $s_pass of $(wc -l < "$anker") ($(awk -F'\t' '$2 == "skipped"' "$anker" | wc -l) skipped by the suite itself); $s_fail fail only on anker, $s_heap on heap too"
    if [ "$s_fail" -gt 0 ]; then
        cp "$WORK/$suite-anker/run.log" "$ROOT/pg-suites-$suite.log"
        echo "pg-suites: anker's TAP output is in pg-suites-$suite.log"
    fi
    passed=$((passed + s_pass))
    failed=$((failed + s_fail))
}

passed=0
failed=0
known=0
IFS=, read -ra suite_list <<< "$SUITES"
IFS=, read -ra am_list <<< "$AMS"
for suite in "${suite_list[@]}"; do
    if [ "$suite" != regress ] && [ "$suite" != isolation ]; then
        [[ ",$AMS," == *",anker,"* ]] && tap_verdict "$suite"
        continue
    fi
    ran=1
    for am in "${am_list[@]}"; do
        # A suite that cannot run is a failure, not zero tests.
        run_suite "$suite" "$am" || { failed=$((failed + 1)); ran=0; }
    done
    [ "$ran" = 1 ] || continue
    [[ ",$AMS," == *",anker,"* && ",$AMS," == *",heap,"* ]] || continue
    heap="$WORK/$suite-heap/results.tsv" anker="$WORK/$suite-anker/results.tsv"
    total=$(wc -l < "$heap")
    heap_ok=$(awk -F'\t' '$2 == "ok"' "$heap" | wc -l)
    anker_ok=$(awk -F'\t' '$2 == "ok"' "$anker" | wc -l)
    echo "pg-suites: $suite: heap passes $heap_ok of $total, anker $anker_ok of $total"
    s_pass=0 s_fail=0 s_known=0
    while IFS=$'\t' read -r name result; do
        [ "$result" = ok ] || continue
        a=$(awk -F'\t' -v n="$name" '$1 == n {print $2}' "$anker")
        known=$(grep -Ev '^\s*(#|$)' "$HERE/known-failures" 2>/dev/null | awk -v s="$suite" -v n="$name" '$1 == s && $2 == n' | head -1)
        if [ "$a" = ok ]; then
            s_pass=$((s_pass + 1))
            [ -n "$known" ] && echo "pg-suites: $suite/$name passes now: remove it from tests/pg-suites/known-failures"
        elif [ -n "$known" ]; then
            s_known=$((s_known + 1))
        elif [ "$ACCEPT" = 1 ] && [ "$a" = failed ]; then
            mkdir -p "$HERE/expected/$suite"
            cp "$WORK/$suite-anker/results/$name.out" "$HERE/expected/$suite/${name}_$ALT.out"
            echo "pg-suites: $suite/$name: anker's output kept as expected/$suite/${name}_$ALT.out"
        else
            s_fail=$((s_fail + 1))
            echo "pg-suites: $suite/$name passes on heap, fails on anker (${a:-not run})"
        fi
    done < "$heap"
    [ -f "$WORK/$suite-anker/crashed" ] && s_fail=$((s_fail + 1))
    echo "pg-suites: $suite: $s_pass of $heap_ok heap-passing tests pass on anker; $s_known known failures (tests/pg-suites/known-failures); $s_fail unexpected"
    if [ "$s_fail" -gt 0 ] && [ -f "$WORK/$suite-anker/regression.diffs" ]; then
        cp "$WORK/$suite-anker/regression.diffs" "$ROOT/pg-suites-$suite.diffs"
        echo "pg-suites: anker's diffs are in pg-suites-$suite.diffs"
    fi
    passed=$((passed + s_pass))
    failed=$((failed + s_fail))
    known=$((known + s_known))
done
[ "$known" -gt 0 ] && echo "pg-suites: $known known failures not counted"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
