#!/usr/bin/env bash
# DuckDB's C library, prebuilt: static PIC archives and duckdb.h from the Go module proxy
# (github.com/duckdb/duckdb-go-bindings/lib/linux-amd64, the per-platform library that
# DuckDB's Go driver links), cached under /var/tmp outside any clone. Prints the directory.
# Building DuckDB from source takes about 2 hours on 2 cores; this takes seconds.
# Also the C++ headers of the same release (from the libduckdb-sys crate on crates.io, whose
# sources carry them), for the one C++ file anker compiles against DuckDB's internals
# (extension/src/analytics/duckdb_stats.cpp: column statistics, which the C API lacks).
#
#   scripts/duckdb-prebuilt.sh [--check]
#
# --check also links a shared object against the archives, loads it with dlopen and runs a
# query (what an extension embedding DuckDB would do), printing DuckDB's version.
# docs/analytics.md says why this library and how anker will use it (issue 19).
set -euo pipefail
MODULE=github.com/duckdb/duckdb-go-bindings/lib/linux-amd64
VERSION=v0.10506.0   # DuckDB 1.5.6, the newest the proxy served on 2026-11-25
CACHE=/var/tmp/anker-gopath
# The crate whose sources are DuckDB 1.5.6 (source id 069cc9f9b5, as the archives), its
# SHA-256 from the crates.io index, and where its headers go (build.rs reads them there).
CRATE=libduckdb-sys-1.10506.0
CRATE_SHA256=0aac3459f2f7f0221d5be9114fa77ff5877040c8de456d3b986a680579fe202b
INCLUDE=/var/tmp/anker-duckdb-cpp/v1.5.6/include
LIBS="-lduckdb_static -lduckdb_generated_extension_loader -lautocomplete_extension -lcore_functions_extension
 -licu_extension -ljson_extension -lparquet_extension -ltpcds_extension -ltpch_extension -lduckdb_fastpforlib
 -lduckdb_fmt -lduckdb_fsst -lduckdb_hyperloglog -lduckdb_mbedtls -lduckdb_miniz -lduckdb_pg_query -lduckdb_re2
 -lduckdb_skiplistlib -lduckdb_utf8proc -lduckdb_yyjson -lduckdb_zstd"
dir=$CACHE/pkg/mod/$MODULE@$VERSION
if [ ! -f "$dir/libduckdb_static.a" ]; then
    command -v go >/dev/null || apt-get -o DPkg::Lock::Timeout=600 install -y -q golang-go >/dev/null
    work=$(mktemp -d)
    (cd "$work" && GOPATH=$CACHE GOFLAGS=-mod=mod go mod download "$MODULE@$VERSION")
    rm -rf "$work"
fi
[ -f "$dir/libduckdb_static.a" ] || { echo "duckdb-prebuilt: $MODULE@$VERSION did not download" >&2; exit 1; }
if [ ! -f "$INCLUDE/duckdb/main/capi/capi_internal_table.hpp" ]; then
    work=$(mktemp -d)
    curl -sSfL -m 300 -o "$work/crate.tar.gz" "https://static.crates.io/crates/libduckdb-sys/$CRATE.crate"
    echo "$CRATE_SHA256  $work/crate.tar.gz" | sha256sum -c --quiet -
    tar xzf "$work/crate.tar.gz" -C "$work" "$CRATE/duckdb.tar.gz"
    mkdir -p "$work/src"
    tar xzf "$work/$CRATE/duckdb.tar.gz" -C "$work/src" duckdb/src/include duckdb/src/function/table/version/pragma_version.cpp
    grep -q '"069cc9f9b5"' "$work/src/duckdb/src/function/table/version/pragma_version.cpp" \
        || { echo "duckdb-prebuilt: $CRATE is not DuckDB 1.5.6" >&2; exit 1; }
    mkdir -p "$(dirname "$INCLUDE")"
    rm -rf "$INCLUDE" && mv "$work/src/duckdb/src/include" "$INCLUDE"
    rm -rf "$work"
fi
if [ "${1:-}" = --check ]; then
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    cat > "$work/probe.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
#ifndef MAIN
#include "duckdb.h"
int probe(void) {
    duckdb_database db; duckdb_connection con; duckdb_result res;
    if (duckdb_open(NULL, &db) != DuckDBSuccess || duckdb_connect(db, &con) != DuckDBSuccess) return 1;
    if (duckdb_query(con, "SELECT version(), sum(i) FROM range(1000000) t(i)", &res) != DuckDBSuccess) return 2;
    printf("duckdb %s: sum = %s\n", duckdb_value_varchar(&res, 0, 0), duckdb_value_varchar(&res, 1, 0));
    duckdb_destroy_result(&res); duckdb_disconnect(&con); duckdb_close(&db);
    return 0;
}
#else
int main(void) {
    void *h = dlopen(SO, RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("%s\n", dlerror()); return 3; }
    return ((int (*)(void)) dlsym(h, "probe"))();
}
#endif
C
    # shellcheck disable=SC2086
    gcc -shared -fPIC -O2 -I"$dir" -DDUCKDB_STATIC_BUILD "$work/probe.c" -o "$work/probe.so" -L"$dir" $LIBS -lstdc++ -lm -ldl -lpthread
    gcc -DMAIN -DSO="\"$work/probe.so\"" -I"$dir" "$work/probe.c" -o "$work/probe" -ldl
    "$work/probe" >&2
fi
echo "$dir"
