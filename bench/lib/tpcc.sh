# bench/lib/tpcc.sh -- TPC-C databases in a cluster of bench/lib/cluster.sh (source both).
#
#   tpcc_create_db DB AM W
#       create database DB (with the anker extension when AM is anker), the TPC-C schema
#       USING AM, W warehouses loaded, indexes, the transaction functions, VACUUM (ANALYZE).
#       With TPCC_LOAD_TIME set, rows are stamped with that time instead of the load's, so
#       two databases loaded with the same W and TPCC_LOAD_TIME have identical rows.

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
