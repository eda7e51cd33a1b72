"""Standalone DuckDB on the rows of a TPC-C database, for bench/ch.sh.

    python ch_duckdb.py DATA_DIR QUERY_DIR RUNS THREADS

DATA_DIR holds <table>.csv (PostgreSQL's COPY ... CSV) and <table>.cols (one line per column:
name and PostgreSQL type, tab-separated). Loads every table into an in-memory DuckDB with the
same column types, then runs every qNN.sql of QUERY_DIR RUNS times on THREADS threads and
prints one line per query: name, median milliseconds, rows returned (or the error).
"""
import os
import re
import statistics
import sys
import time

import duckdb


def duck_type(pg: str) -> str:
    if pg.startswith("character varying") or pg.startswith("character(") or pg == "text":
        return "VARCHAR"  # char(n) arrives trimmed (cast to text on export)
    if pg == "timestamp without time zone":
        return "TIMESTAMP"
    if pg == "timestamp with time zone":
        return "TIMESTAMPTZ"
    if pg.startswith("numeric"):
        return pg.upper()
    return {"integer": "INTEGER", "smallint": "SMALLINT", "bigint": "BIGINT"}[pg]


def main() -> None:
    data, queries, runs, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    started = time.time()
    for f in sorted(os.listdir(data)):
        if not f.endswith(".cols"):
            continue
        table = f[: -len(".cols")]
        cols = [line.rstrip("\n").split("\t") for line in open(os.path.join(data, f)) if line.strip()]
        ddl = ", ".join(f'"{n}" {duck_type(t)}' for n, t in cols)
        con.execute(f'CREATE TABLE "{table}" ({ddl})')
        con.execute(f"COPY \"{table}\" FROM '{os.path.join(data, table + '.csv')}' (FORMAT csv, HEADER false)")
    print(f"duckdb {duckdb.__version__}: loaded in {time.time() - started:.1f} s", file=sys.stderr)
    for q in sorted(os.listdir(queries)):
        if not re.fullmatch(r"q\d+\.sql", q):
            continue
        sql = open(os.path.join(queries, q)).read()
        times, rows = [], None
        try:
            for _ in range(runs):
                t = time.perf_counter()
                rows = len(con.execute(sql).fetchall())
                times.append((time.perf_counter() - t) * 1e3)
            print(f"{q[:-4]}\t{statistics.median(times):.1f}\t{rows}")
        except duckdb.Error as e:
            print(f"{q[:-4]}\terror\t{str(e).splitlines()[0]}")
        sys.stdout.flush()


main()
