# bench/lib/tpcc.sh -- TPC-C databases in a cluster of bench/lib/cluster.sh (source both).
#
#   tpcc_create_db DB AM W
#       create database DB (with the anker extension when AM is anker), the TPC-C schema
#       USING AM, W warehouses loaded, indexes, the transaction functions, VACUUM (ANALYZE).
#       With TPCC_LOAD_TIME set, rows are stamped with that time instead of the load's, so
#       two databases loaded with the same W and TPCC_LOAD_TIME have identical rows.
#
#   tpcc_mix_args [standard|paper]
#       set the array TPCC_MIX_ARGS to pgbench's -f options for the transaction mix: standard
#       (NewOrder 45, Payment 43, OrderStatus, Delivery, StockLevel 4 each; the default) or
#       paper (NewOrder, Payment, OrderStatus 1:1:1). Returns 1 for another name.
#
#   tpcc_check DB
#       check the TPC-C consistency conditions (tpcc/check.sql) in DB and say whether they
#       hold; returns 1 when one fails.

tpcc_create_db() {
    local db=$1 am=$2 w=$3 dir
    dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../tpcc" && pwd)
    cluster_psql -q -c "CREATE DATABASE $db"
    [ "$am" = anker ] && cluster_psql -q -d "$db" -c "CREATE EXTENSION anker"
    cluster_psql -q -d "$db" -v am="$am" -f "$dir/schema.sql" >/dev/null
    cluster_psql -q -d "$db" -v warehouses="$w" ${TPCC_LOAD_TIME:+-v load_time="$TPCC_LOAD_TIME"} -f "$dir/load.sql" >/dev/null
    cluster_psql -q -d "$db" -f "$dir/indexes.sql" >/dev/null
    cluster_psql -q -d "$db" -f "$dir/functions.sql" >/dev/null
    cluster_psql -q -d "$db" -c "VACUUM (ANALYZE)" >/dev/null
}

tpcc_mix_args() {
    local dir s scripts
    dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../tpcc" && pwd)
    case "${1:-standard}" in
        standard) scripts=(neworder@45 payment@43 orderstatus@4 delivery@4 stocklevel@4) ;;
        paper) scripts=(neworder@1 payment@1 orderstatus@1) ;;
        *) return 1 ;;
    esac
    TPCC_MIX_ARGS=()
    for s in "${scripts[@]}"; do TPCC_MIX_ARGS+=(-f "$dir/${s%@*}.pgbench@${s#*@}"); done
}

tpcc_check() {
    local db=$1 dir out
    dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../tpcc" && pwd)
    out=$(cluster_psql -At -F '|' -d "$db" -f "$dir/check.sql")
    if printf '%s\n' "$out" | awk -F'|' '$2 != 0 {bad = 1} END {exit !bad}'; then
        echo "$db: CONSISTENCY VIOLATED: $(printf '%s' "$out" | tr '\n' ';')"
        return 1
    fi
    echo "$db: consistency conditions hold"
}
