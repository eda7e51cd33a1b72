#!/usr/bin/env bash
# TPC-C OLTP alone on heap and on anker in the same run: one throwaway cluster with anker
# preloaded, the TPC-C tables loaded USING heap in one database and USING anker in another,
# then OLTP rounds that alternate the two, so the machine's drift falls on both.
#
#   bench/tpcc_ab.sh [--warehouses W] [--clients C] [--duration SEC] [--rounds R]
#                    [--method cow|none|memcpy] [--mix standard|paper] [--perf SEC] [--out DIR]
#                    [--conf 'postgresql.conf line' ...]
#
# Rounds run heap then anker, then anker then heap, and so on (ABBA), so a drift of the machine
# over the run favours neither. Prints tps per database per round (with its UTC times), the
# anker/heap ratio of the sums and of each pair of rounds (their spread is the run's noise),
# WAL bytes per transaction of each engine, twice: as written during its rounds, and with each
# record that names a block of one database counted for that database's engine (autovacuum
# and anker's images run on into the next round, which may be the other engine's), and checks
# the TPC-C consistency conditions in both
# databases at the end. `--conf 'synchronous_commit = on'` overrides a default. --perf SEC
# records `perf record -a -g` for SEC seconds in the middle of each engine's last round (needs
# linux-perf) into DIR (default: a new directory under /tmp) and prints the top symbols.
# It lists the images anker's VACUUM wrote (from the server log, with their times), and the CPU
# that autovacuum's VACUUMs and ANALYZEs of each database's tables took during the rounds, and how many ran
# (their own `system usage` lines), per transaction of that database's engine.
# It also prints the CPU milliseconds per transaction of the cluster's processes by kind
# (client backends, autovacuum workers, walwriter, ...; bench/lib/pgcpu.py samples /proc), the
# whole machine's user and system CPU per transaction (/proc/stat) and WAL flushes per transaction.
# And each transaction type's mean latency on both engines (NewOrder, Payment, ...).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/bench
W=4; CLIENTS=2; DURATION=60; ROUNDS=4; METHOD=cow; MIX=standard; PERF=0; OUT=; CONF=()
while [ $# -gt 0 ]; do
    case $1 in
        --warehouses) W=$2; shift 2 ;;
        --clients) CLIENTS=$2; shift 2 ;;
        --duration) DURATION=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --method) METHOD=$2; shift 2 ;;
        --mix) MIX=$2; shift 2 ;;
        --perf) PERF=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --conf) CONF+=("$2"); shift 2 ;;
        *) sed -n '2,14p' "$0" >&2; exit 2 ;;
    esac
done
. "$BENCH/lib/cluster.sh"
. "$BENCH/lib/tpcc.sh"
tpcc_mix_args "$MIX" || { echo "--mix standard|paper" >&2; exit 2; }
if [ "$PERF" -gt 0 ]; then
    command -v perf >/dev/null || { echo "--perf needs perf (Debian: linux-perf)" >&2; exit 2; }
    [ -n "$OUT" ] || OUT=$(mktemp -d /tmp/tpcc_ab.XXXXXX)
    mkdir -p "$OUT"
fi
export PGOPTIONS="-c client_min_messages=warning"
trap cluster_cleanup EXIT
cluster_start "shared_preload_libraries = 'anker'" "anker.snapshot_method = '$METHOD'" \
    "shared_buffers = '2GB'" "synchronous_commit = off" "max_wal_size = '16GB'" \
    "checkpoint_timeout = '30min'" "max_parallel_workers_per_gather = 0" "jit = off" \
    "log_autovacuum_min_duration = 0" "log_timezone = 'UTC'" "wal_keep_size = '32GB'" "${CONF[@]}"
WORK=$(cluster_workdir)
for am in heap anker; do
    tpcc_create_db "tpcc_$am" "$am" "$W"
    echo "tpcc_$am: W=$W loaded USING $am"
done
cluster_psql -q -c CHECKPOINT -c "CREATE EXTENSION pg_walinspect"

threads=$CLIENTS; [ "$threads" -gt "$(nproc)" ] && threads=$(nproc)
postmaster=$(head -n1 "$CLUSTER_DATA/postmaster.pid")
# the machine's user and system CPU time so far (clock ticks)
machine_cpu() { awk '/^cpu / {print $2 + $3, $4}' /proc/stat; }
wal_syncs() { cluster_psql -At -c "SELECT wal_sync FROM pg_stat_wal"; }
oltp() { # $1 = database, $2 = seconds; prints "tps transactions wal_bytes from_lsn to_lsn
         # user_ticks system_ticks wal_syncs kind=cpu_seconds..."
    local before out user0 sys0 user1 sys1 syncs0
    before=$(cluster_psql -At -c "SELECT pg_current_wal_insert_lsn()")
    syncs0=$(wal_syncs)
    read -r user0 sys0 < <(machine_cpu)
    out=$(cd "$WORK" && cluster_run python3 "$BENCH/lib/pgcpu.py" "$postmaster" -- \
        "$PG_BINDIR/pgbench" -n -M prepared -c "$CLIENTS" -j "$threads" -T "$2" \
        -D warehouses="$W" -D uniform=0 "${TPCC_MIX_ARGS[@]}" "$1" 2>&1)
    read -r user1 sys1 < <(machine_cpu)
    # each transaction type's mean latency, for the main loop ("name ms" lines)
    echo "$out" | awk '/^SQL script/ {n = $NF; sub(/.*\//, "", n); sub(/\.pgbench$/, "", n)}
                       /latency average/ && n != "" {print n, $(NF - 1); n = ""}' > "$WORK/latency_by_type"
    echo "$(echo "$out" | grep -Eo 'tps = [0-9.]+' | head -n1 | awk '{print $3}')" \
        "$(echo "$out" | grep -Eo 'transactions actually processed: [0-9]+' | awk '{print $4}')" \
        "$(cluster_psql -At -F ' ' -c "SELECT pg_wal_lsn_diff(l, '$before')::bigint, '$before', l FROM pg_current_wal_insert_lsn() l")" \
        $((user1 - user0)) $((sys1 - sys0)) $(( $(wal_syncs) - syncs0 )) \
        "$(echo "$out" | sed -n 's/^cpu: //p')"
}
for am in heap anker; do oltp "tpcc_$am" 10 >/dev/null; done   # warm-up
rounds_began=$(date -u '+%Y-%m-%d %H:%M:%S')

declare -A wattr sum xsum wsum usersum syssum syncsum breakdown cpu round_tps latency
ratios=(); round_lsns=()
for r in $(seq 1 "$ROUNDS"); do
    order="heap anker"; [ $((r % 2)) = 0 ] && order="anker heap"
    for am in $order; do
        perf_pid=
        if [ "$PERF" -gt 0 ] && [ "$r" = "$ROUNDS" ]; then
            (sleep $(( (DURATION - PERF) / 2 )); perf record -q -a -g -o "$OUT/perf.$am.data" -- sleep "$PERF" >/dev/null 2>&1) &
            perf_pid=$!
        fi
        started=$(date -u +%T)
        read -r tps xacts wal from to user sys syncs usage < <(oltp "tpcc_$am" "$DURATION")
        ended=$(date -u +%T)
        round_lsns+=("$am $from $to")
        for pair in $usage; do
            cpu[$am.${pair%%=*}]=$(echo "${cpu[$am.${pair%%=*}]:-0} + ${pair#*=}" | bc -l)
        done
        if [ "$r" = "$ROUNDS" ]; then
            # where this round's WAL went (pg_walinspect reads flushed WAL only:
            # the switch flushes; read now, before a checkpoint recycles it),
            # by type (PostgreSQL's statistics split a type by xl_info's flags)
            cluster_psql -At -c "SELECT pg_switch_wal()" >/dev/null
            breakdown[$am]=$(cluster_psql -At -F ' ' -c "SELECT \"resource_manager/record_type\", round(sum(combined_size)::numeric / $xacts), round(sum(count)::numeric / $xacts, 2), round(sum(fpi_size)::numeric / $xacts) FROM pg_get_wal_stats('$from', '$to', true) WHERE combined_size > 0 GROUP BY 1 ORDER BY sum(combined_size) DESC LIMIT 12" 2>/dev/null | sed 's/^/  /') ||
                breakdown[$am]="  (a checkpoint recycled the round's WAL before it was read)"
        fi
        [ -n "$perf_pid" ] && wait "$perf_pid"
        echo "round $r $am: $tps tps, $((wal / (xacts > 0 ? xacts : 1))) WAL bytes per transaction ($started-$ended UTC)"
        round_tps[$am]=$tps
        sum[$am]=$(echo "${sum[$am]:-0} + $tps" | bc -l)
        xsum[$am]=$(( ${xsum[$am]:-0} + xacts )); wsum[$am]=$(( ${wsum[$am]:-0} + wal ))
        usersum[$am]=$(( ${usersum[$am]:-0} + user )); syssum[$am]=$(( ${syssum[$am]:-0} + sys ))
        syncsum[$am]=$(( ${syncsum[$am]:-0} + syncs ))
        while read -r name ms; do
            latency[$name.$am]=$(echo "${latency[$name.$am]:-0} + $ms / $ROUNDS" | bc -l)
        done < "$WORK/latency_by_type"
    done
    ratios+=("$(echo "${round_tps[anker]} / ${round_tps[heap]}" | bc -l)")
done
printf 'heap %.0f tps, anker-%s %.0f tps, anker/heap = %.3f\n' \
    "$(echo "${sum[heap]} / $ROUNDS" | bc -l)" "$METHOD" "$(echo "${sum[anker]} / $ROUNDS" | bc -l)" \
    "$(echo "${sum[anker]} / ${sum[heap]}" | bc -l)"
# Each round pair's ratio: their spread is the run's noise.
printf 'anker/heap by round: %s (median %.3f)\n' "$(printf '%.3f ' "${ratios[@]}")" \
    "$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}')"
printf 'WAL bytes per transaction: heap %.0f, anker %.0f, anker/heap = %.3f\n' \
    "$(echo "${wsum[heap]} / ${xsum[heap]}" | bc -l)" "$(echo "${wsum[anker]} / ${xsum[anker]}" | bc -l)" \
    "$(echo "(${wsum[anker]} / ${xsum[anker]}) / (${wsum[heap]} / ${xsum[heap]})" | bc -l)"
# The WAL of a round is not all its engine's: autovacuum, and the images anker's VACUUM
# writes, run on into the other engine's next round. Count each record that names a block of
# one of the two databases for that database's engine (the rest, commits among them, for the
# round's engine), moving record_length bytes (without the record's alignment padding).
# Reads the whole run's WAL once more (wal_keep_size keeps it): 2-3 minutes per GB here, 5-9
# minutes after 8 pairs of rounds at W=4.
cluster_psql -At -c "SELECT pg_switch_wal()" >/dev/null
declare -A moved_from moved_to
attributed=1
for round in "${round_lsns[@]}"; do
    read -r am from to <<< "$round"
    other=heap; [ "$am" = heap ] && other=anker
    bytes=$(cluster_psql -At -c "SELECT coalesce(sum(record_length), 0) FROM pg_get_wal_records_info('$from', '$to')
        WHERE substring(block_ref from '^blkref #[0-9]+: rel [0-9]+/([0-9]+)/')::oid = (SELECT oid FROM pg_database WHERE datname = 'tpcc_$other')" 2>/dev/null) ||
        { attributed=0; break; }
    moved_from[$am]=$(( ${moved_from[$am]:-0} + bytes )); moved_to[$other]=$(( ${moved_to[$other]:-0} + bytes ))
done
if [ "$attributed" = 1 ]; then
    for am in heap anker; do
        wattr[$am]=$(( wsum[$am] - ${moved_from[$am]:-0} + ${moved_to[$am]:-0} ))
    done
    printf 'WAL bytes per transaction, records counted for the engine whose database they name: heap %.0f, anker %.0f, anker/heap = %.3f (moved from anker rounds to heap %.0f, from heap rounds to anker %.0f bytes per transaction)\n' \
        "$(echo "${wattr[heap]} / ${xsum[heap]}" | bc -l)" "$(echo "${wattr[anker]} / ${xsum[anker]}" | bc -l)" \
        "$(echo "(${wattr[anker]} / ${xsum[anker]}) / (${wattr[heap]} / ${xsum[heap]})" | bc -l)" \
        "$(echo "${moved_to[heap]:-0} / ${xsum[heap]}" | bc -l)" "$(echo "${moved_to[anker]:-0} / ${xsum[anker]}" | bc -l)"
else
    echo "WAL by database: not available (the run's WAL was no longer there to read)"
fi
# Each transaction type's latency, mean of the rounds' means: where one engine spends more
# per transaction (with two clients on two cores, latency is mostly CPU).
for name in $(printf '%s\n' "${!latency[@]}" | sed -n 's/\.heap$//p' | sort); do
    [ -n "${latency[$name.anker]:-}" ] &&
        printf 'latency of %s: heap %.3f ms, anker %.3f ms, anker/heap = %.3f\n' "$name" \
            "${latency[$name.heap]}" "${latency[$name.anker]}" "$(echo "${latency[$name.anker]} / ${latency[$name.heap]}" | bc -l)"
done
# CPU of the cluster's processes by kind (bench/lib/pgcpu.py), per transaction, all rounds
for am in heap anker; do
    line=
    for key in $(printf '%s\n' "${!cpu[@]}" | sed -n "s/^$am\.//p" | sort); do
        line+=$(printf ' %s %.3f' "$key" "$(echo "${cpu[$am.$key]} * 1000 / ${xsum[$am]}" | bc -l)")
    done
    echo "CPU ms per transaction, $am:$line"
done
# The whole machine's CPU (all processes: pgbench and pgcpu.py's sampling too, alike for both
# engines) split into user and system time, and the WAL flushes (pg_stat_wal.wal_sync) per
# transaction.
tick_ms=$(echo "1000 / $(getconf CLK_TCK)" | bc -l)
for am in heap anker; do
    printf 'machine CPU ms per transaction, %s: user %.3f system %.3f; WAL flushes per transaction %.3f\n' "$am" \
        "$(echo "${usersum[$am]} * $tick_ms / ${xsum[$am]}" | bc -l)" "$(echo "${syssum[$am]} * $tick_ms / ${xsum[$am]}" | bc -l)" \
        "$(echo "${syncsum[$am]} / ${xsum[$am]}" | bc -l)"
done
for am in heap anker; do
    echo "WAL of the last $am round by record type (bytes, records and full-page image bytes per transaction):"
    echo "${breakdown[$am]}"
done
for am in heap anker; do
    echo "tpcc_$am autovacuum runs: $(cluster_psql -At -d "tpcc_$am" -c "SELECT coalesce(string_agg(relname || ' ' || autovacuum_count, ', ' ORDER BY relname), 'none') FROM pg_stat_user_tables WHERE autovacuum_count > 0")"
done
# Autovacuum's CPU by database and table, from the `system usage` line of each automatic
# VACUUM and ANALYZE logged since the rounds began (an image is part of its VACUUM's).
echo "autovacuum CPU during the rounds (server log; user + system seconds and runs, and ms per transaction of the engine):"
awk -v since="$rounds_began" '
    / LOG:  automatic (vacuum|analyze) of table "/ {
        kind = ($0 ~ / LOG:  automatic vacuum/) ? "vacuum" : "analyze"
        split($0, q, "\""); name = q[2]; counting = ($1 " " substr($2, 1, 8) >= since); next }
    counting && /system usage: CPU: user: / {
        sub(/.*CPU: user: /, ""); split($0, f, /[ ,]+/)   # "0.05 s, system: 0.00 s, elapsed: ..."
        split(name, n, "."); cpu[n[1] " " kind " " n[3]] += f[1] + f[4]; runs[n[1] " " kind " " n[3]]++; db[n[1]] += f[1] + f[4]; counting = 0 }
    END { for (k in cpu) if (cpu[k] > 0) printf "  %s %.2f s in %d runs\n", k, cpu[k], runs[k]; for (d in db) printf "total %s %.3f\n", d, db[d] }
' "$CLUSTER_LOG" | sort > "$WORK/autovacuum_cpu"
grep -v '^total' "$WORK/autovacuum_cpu" || true
for am in heap anker; do
    s=$(awk -v d="tpcc_$am" '$1 == "total" && $2 == d {print $3}' "$WORK/autovacuum_cpu")
    printf '  tpcc_%s: %.2f s, %.3f ms per transaction\n' "$am" "${s:-0}" "$(echo "${s:-0} * 1000 / ${xsum[$am]}" | bc -l)"
done
# (the times say which round each image fell into)
echo "anker's images written by VACUUM (server log):"
grep -o '^[0-9-]* [0-9:]*.*anker: wrote an image of .*' "$CLUSTER_LOG" | sed -E 's/^[0-9-]* ([0-9:]*)[^ ]* .*anker: wrote an image of /  \1 /' || echo "  none"
bad=0
for am in heap anker; do tpcc_check "tpcc_$am" || bad=1; done
if [ "$PERF" -gt 0 ]; then
    for am in heap anker; do
        echo "== perf, $am: top symbols (self, all CPUs) =="
        perf report -i "$OUT/perf.$am.data" --no-children -g none --sort dso,symbol --stdio 2>/dev/null |
            grep -E '^ +[0-9]' | head -n 40
    done
fi
[ "$PERF" -gt 0 ] && echo "perf data: $OUT/perf.{heap,anker}.data"
exit "$bad"
