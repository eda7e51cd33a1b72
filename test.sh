#!/usr/bin/env bash
# Set up everything and run every anker test:
#   engine unit and property tests (cargo test), pg_regress suites (sql/),
#   pg_isolation_regress specs (specs/), PostgreSQL's own regress (with a
#   streaming standby), isolation, logical replication and recovery suites
#   with anker as the default AM (tests/pg-suites/),
#   server-level tests (tests/*.sh),
#   the kernel patch's selftests in QEMU (kernel-patch/run-tests.sh) and the
#   benchmark smoke run (bench/htap.sh --smoke).
# The last line of output is "N passed, N failed".
#
# Environment: ANKER_SKIP=kernel,bench,... skips suites by name
# (engine, regress, isolation, server, pg-suites, kernel, bench);
# ANKER_REGRESS="setup dml" runs only those pg_regress tests.
set -uo pipefail
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$ROOT"
PG_BINDIR=/usr/lib/postgresql/15/bin
PGXS_TEST=/usr/lib/postgresql/15/lib/pgxs/src/test
# (vm_snapshot runs in the QEMU guest of kernel-patch/run-tests.sh, on a kernel that has it)
REGRESS_TESTS=(setup types basic scan_node agg_node olap dml differential mvcc snapshots errors rewrites compat logical_decoding projection assigned)
# ANKER_REGRESS="setup rewrites" runs a subset.
[ -n "${ANKER_REGRESS:-}" ] && read -ra REGRESS_TESTS <<< "$ANKER_REGRESS"
PASSED=0
FAILED=0
FAILED_SUITES=()

skip() { [[ ",${ANKER_SKIP:-}," == *",$1,"* ]]; }
banner() { printf '\n==== %s ====\n' "$*"; }
record() { # suite passed failed
    PASSED=$((PASSED + $2)); FAILED=$((FAILED + $3))
    [ "$3" -gt 0 ] && FAILED_SUITES+=("$1")
    printf -- '---- %s: %d passed, %d failed\n' "$1" "$2" "$3"
}

banner "setup"
if ! scripts/setup.sh; then
    echo "setup failed"
    echo "0 passed, 1 failed"
    exit 1
fi
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

# A scratch directory the postgres user owns, for test servers and outputs.
WORK=$(mktemp -d /tmp/anker-test.XXXXXX)
chmod 755 "$WORK"
[ "${ANKER_KEEP_WORK:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT

if ! skip engine; then
    banner "engine: cargo test"
    # Own target dir: plain cargo builds must not disturb cargo-pgrx's.
    (cd extension/engine && CARGO_TARGET_DIR="$ROOT/target/engine-tests" cargo test --release 2>&1) | tee "$WORK/engine.log"
    p=$(grep -Eo '^test result: [a-zA-Z]+\. [0-9]+ passed' "$WORK/engine.log" | awk '{s+=$4} END {print s+0}')
    f=$(grep -Eo '[0-9]+ failed' "$WORK/engine.log" | awk '{s+=$1} END {print s+0}')
    grep -q '^test result:' "$WORK/engine.log" || f=$((f + 1))
    record engine "$p" "$f"
fi

# Run pg_regress-style tests in a temp instance with anker preloaded.
run_pg_regress() { # name driver tests...
    local name=$1 driver=$2; shift 2
    local dir="$WORK/$name"
    rm -f "$ROOT/$name.diffs"
    mkdir -p "$dir"
    cp -r sql expected specs "$dir"/
    cat > "$dir/anker.conf" <<CONF
shared_preload_libraries = 'anker'
anker.memory_limit = '256MB'
max_prepared_transactions = 10
max_worker_processes = 8
max_parallel_workers = 4
lc_messages = 'C'
# logical decoding (sql/logical_decoding.sql)
wal_level = logical
# the suites' tables are small: let them use snapshots all the same
anker.snapshot_min_rows = 0
${EXTRA_CONF:-}
CONF
    chown -R postgres "$dir"
    # The servers see RUST_BACKTRACE as a user's environment may set it:
    # no backtrace may reach an error message.
    (cd "$dir" && runuser -u postgres -- env RUST_BACKTRACE=1 "$driver" --temp-instance="$dir/tmp_check" \
        --temp-config="$dir/anker.conf" --bindir="$PG_BINDIR" --inputdir="$dir" \
        --outputdir="$dir" --encoding=UTF8 --no-locale "$@" 2>&1) | tee "$dir/run.log"
    local total ok bad
    total=$#
    if grep -Eq 'All [0-9]+ tests passed' "$dir/run.log"; then
        ok=$total; bad=0
    else
        bad=$(grep -Eo '[0-9]+ of [0-9]+ tests failed' "$dir/run.log" | awk '{print $1}')
        bad=${bad:-$total}
        ok=$((total - bad))
        [ -f "$dir/regression.diffs" ] && head -n 200 "$dir/regression.diffs"
        cp -f "$dir/regression.diffs" "$ROOT/$name.diffs" 2>/dev/null || true
    fi
    record "$name" "$ok" "$bad"
}

if ! skip regress; then
    banner "pg_regress: ${REGRESS_TESTS[*]}"
    run_pg_regress regress "$PGXS_TEST/regress/pg_regress" "${REGRESS_TESTS[@]}"
fi

if ! skip isolation; then
    mapfile -t SPECS < <(ls specs/*.spec 2>/dev/null | xargs -r -n1 basename | sed 's/\.spec$//')
    if [ ${#SPECS[@]} -gt 0 ]; then
        banner "pg_isolation_regress: ${SPECS[*]}"
        # Specs create tables with the default access method: anker here,
        # heap when scripts/isolation-expected.sh makes the expected output.
        EXTRA_CONF="default_table_access_method = '${ANKER_ISOLATION_AM:-anker}'" \
            run_pg_regress isolation "$PGXS_TEST/isolation/pg_isolation_regress" "${SPECS[@]}"
    fi
fi

if ! skip pg-suites; then
    banner "PostgreSQL's regress (with a standby), isolation, logical replication, recovery and programs' (pg_rewind, pg_basebackup, pg_checksums, pg_dump, scripts) suites, heap and anker: tests/pg-suites/run.sh"
    tests/pg-suites/run.sh 2>&1 | tee "$WORK/pg-suites.log"
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$WORK/pg-suites.log" | tail -n 1)
    if [ -n "$line" ]; then
        record pg-suites "$(echo "$line" | awk '{print $1}')" "$(echo "$line" | awk '{print $3}')"
    else
        record pg-suites 0 1
    fi
fi

if ! skip server; then
    for t in tests/*.sh; do
        banner "server test: $t"
        if bash "$t"; then record "$t" 1 0; else record "$t" 0 1; fi
    done
fi

if ! skip kernel && [ -x kernel-patch/run-tests.sh ]; then
    banner "kernel: kernel-patch/run-tests.sh"
    kernel-patch/run-tests.sh 2>&1 | tee "$WORK/kernel.log"
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$WORK/kernel.log" | tail -n 1)
    if [ -n "$line" ]; then
        record kernel "$(echo "$line" | awk '{print $1}')" "$(echo "$line" | awk '{print $3}')"
    else
        record kernel 0 1
    fi
fi

if ! skip bench && [ -x bench/htap.sh ]; then
    banner "bench: bench/htap.sh --smoke"
    if bench/htap.sh --smoke; then record bench-smoke 1 0; else record bench-smoke 0 1; fi
fi

banner "summary"
[ ${#FAILED_SUITES[@]} -gt 0 ] && echo "failing suites: ${FAILED_SUITES[*]}"
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
