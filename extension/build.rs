//! Links DuckDB's C library (issue 19, docs/analytics.md) from the prebuilt static archives
//! that `scripts/duckdb-prebuilt.sh` caches outside the clone. Building DuckDB from source
//! takes about two hours on two cores; the archives take seconds to fetch and link.

use std::path::Path;

/// Where `scripts/duckdb-prebuilt.sh` puts DuckDB 1.5.6 (keep the two in step).
const DEFAULT_DIR: &str =
    "/var/tmp/anker-gopath/pkg/mod/github.com/duckdb/duckdb-go-bindings/lib/linux-amd64@v0.10506.0";

/// The C++ headers of the same DuckDB release (`scripts/duckdb-prebuilt.sh`).
const DEFAULT_INCLUDE: &str = "/var/tmp/anker-duckdb-cpp/v1.5.6/include";

/// The archives, each before those it uses (GNU ld resolves left to right).
const LIBS: &[&str] = &[
    "duckdb_static",
    "duckdb_generated_extension_loader",
    "autocomplete_extension",
    "core_functions_extension",
    "icu_extension",
    "json_extension",
    "parquet_extension",
    "tpcds_extension",
    "tpch_extension",
    "duckdb_fastpforlib",
    "duckdb_fmt",
    "duckdb_fsst",
    "duckdb_hyperloglog",
    "duckdb_mbedtls",
    "duckdb_miniz",
    "duckdb_pg_query",
    "duckdb_re2",
    "duckdb_skiplistlib",
    "duckdb_utf8proc",
    "duckdb_yyjson",
    "duckdb_zstd",
];

fn main() {
    println!("cargo:rerun-if-env-changed=ANKER_DUCKDB_DIR");
    let dir = std::env::var("ANKER_DUCKDB_DIR").unwrap_or_else(|_| DEFAULT_DIR.to_string());
    if !Path::new(&dir).join("libduckdb_static.a").exists() {
        panic!("DuckDB's prebuilt library is not in {dir}: run scripts/duckdb-prebuilt.sh (or set ANKER_DUCKDB_DIR)");
    }
    println!("cargo:rerun-if-changed={dir}/libduckdb_static.a");
    // Column statistics for anker_scan, which DuckDB's C API has no call for: a C++ file
    // that sets the table function's statistics callback (src/analytics/duckdb_stats.cpp).
    println!("cargo:rerun-if-env-changed=ANKER_DUCKDB_INCLUDE");
    println!("cargo:rerun-if-changed=src/analytics/duckdb_stats.cpp");
    let include = std::env::var("ANKER_DUCKDB_INCLUDE").unwrap_or_else(|_| DEFAULT_INCLUDE.to_string());
    if !Path::new(&include).join("duckdb/main/capi/capi_internal_table.hpp").exists() {
        panic!("DuckDB's C++ headers are not in {include}: run scripts/duckdb-prebuilt.sh (or set ANKER_DUCKDB_INCLUDE)");
    }
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .include(&include)
        .define("DUCKDB_STATIC_BUILD", None)
        .define("NDEBUG", None)
        .warnings(false)
        .file("src/analytics/duckdb_stats.cpp")
        .compile("anker_duckdb_stats");
    println!("cargo:rustc-link-search=native={dir}");
    // One group: the extension loader and DuckDB refer to each other.
    println!("cargo:rustc-link-arg=-Wl,--start-group");
    for lib in LIBS {
        println!("cargo:rustc-link-arg=-l{lib}");
    }
    println!("cargo:rustc-link-arg=-Wl,--end-group");
    println!("cargo:rustc-link-arg=-lstdc++");
}
