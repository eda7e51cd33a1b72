//! The analytics engine: read-only queries over anker tables executed by an embedded
//! DuckDB reading anker's column snapshots (issue 19; docs/analytics.md).
//!
//! * [`handover`] decides at plan time whether DuckDB can answer a query exactly as
//!   PostgreSQL would, deparses it, and plans it as one `AnkerDuckDB` custom scan;
//! * [`scan`] is DuckDB's `anker_scan` table function over one anker table, with
//!   visibility resolved on the backend's thread;
//! * [`node`] runs the query and converts DuckDB's results to PostgreSQL's planned types;
//! * [`duckdb`] holds the C API declarations.
//!
//! `anker.olap_engine` (`postgres` or `duckdb`) switches per session; `anker.olap_threads`
//! and `anker.olap_memory_limit` bound DuckDB.

mod avg;
pub mod duckdb;
mod handover;
mod node;
mod scan;

use duckdb::*;
use pgrx::pg_sys;
use anker_engine::signals::with_signals_blocked;

/// Values of `anker.olap_engine`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Engine {
    Postgres = 0,
    DuckDb = 1,
}

static mut ENGINE: i32 = Engine::Postgres as i32;
static mut THREADS: i32 = 1;
static mut MEMORY_LIMIT_MB: i32 = 1024;
static mut MIN_SCAN_FRACTION: f64 = 0.5;
static mut MIN_COST: f64 = 1000.0;

/// `anker.olap_min_scan_fraction`.
fn min_scan_fraction() -> f64 {
    // SAFETY: plain read of our GUC variable.
    unsafe { MIN_SCAN_FRACTION }
}

/// `anker.olap_min_cost`.
fn min_cost() -> f64 {
    // SAFETY: plain read of our GUC variable.
    unsafe { MIN_COST }
}

static mut ENGINES: [pg_sys::config_enum_entry; 3] = [
    pg_sys::config_enum_entry { name: c"postgres".as_ptr(), val: Engine::Postgres as i32, hidden: false },
    pg_sys::config_enum_entry { name: c"duckdb".as_ptr(), val: Engine::DuckDb as i32, hidden: false },
    pg_sys::config_enum_entry { name: std::ptr::null(), val: 0, hidden: false },
];

fn engine() -> Engine {
    // SAFETY: plain read of our GUC variable.
    if unsafe { ENGINE } == Engine::DuckDb as i32 {
        Engine::DuckDb
    } else {
        Engine::Postgres
    }
}

pub fn install() {
    // SAFETY: the Define* functions keep pointers to our statics, which live for the
    // whole process; called once from _PG_init.
    unsafe {
        pg_sys::DefineCustomEnumVariable(
            c"anker.olap_engine".as_ptr(),
            c"Which engine executes read-only queries over anker tables.".as_ptr(),
            c"postgres: PostgreSQL's executor (with AnkerScan and AnkerAgg); duckdb: the embedded DuckDB, for queries it answers exactly as PostgreSQL would (EXPLAIN shows which).".as_ptr(),
            &raw mut ENGINE,
            Engine::Postgres as i32,
            (&raw const ENGINES).cast(),
            pg_sys::GucContext::PGC_USERSET,
            0,
            None,
            None,
            None,
        );
        pg_sys::DefineCustomIntVariable(
            c"anker.olap_threads".as_ptr(),
            c"Threads DuckDB uses for one query.".as_ptr(),
            std::ptr::null(),
            &raw mut THREADS,
            1,
            1,
            64,
            pg_sys::GucContext::PGC_USERSET,
            0,
            None,
            None,
            None,
        );
        pg_sys::DefineCustomIntVariable(
            c"anker.olap_memory_limit".as_ptr(),
            c"Memory DuckDB may use for one backend's queries.".as_ptr(),
            c"A query that needs more fails with SQLSTATE 53200.".as_ptr(),
            &raw mut MEMORY_LIMIT_MB,
            1024,
            16,
            i32::MAX,
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GUC_UNIT_MB as i32,
            None,
            None,
            None,
        );
    }
    // SAFETY: as above.
    unsafe {
        pg_sys::DefineCustomRealVariable(
            c"anker.olap_min_scan_fraction".as_ptr(),
            c"A query whose PostgreSQL plan uses indexes goes to DuckDB only when that plan costs at least this fraction of reading every table DuckDB would read in full.".as_ptr(),
            c"DuckDB has no indexes: a query PostgreSQL answers through index lookups (OLTP statements) is far cheaper in PostgreSQL. 0 hands over every query DuckDB can answer exactly.".as_ptr(),
            &raw mut MIN_SCAN_FRACTION,
            0.5,
            0.0,
            1e6,
            pg_sys::GucContext::PGC_USERSET,
            0,
            None,
            None,
            None,
        );
    }
    // SAFETY: as above.
    unsafe {
        pg_sys::DefineCustomRealVariable(
            c"anker.olap_min_cost".as_ptr(),
            c"A query whose PostgreSQL plan costs less than this stays in PostgreSQL.".as_ptr(),
            c"Each DuckDB query starts with a fixed cost (about half a millisecond on 2 cores), more than a cheap plan takes in all: TPC-C's lookups in small tables, prepared or in PL/pgSQL. 0 hands over every query DuckDB can answer exactly.".as_ptr(),
            &raw mut MIN_COST,
            1000.0,
            0.0,
            1e12,
            pg_sys::GucContext::PGC_USERSET,
            0,
            None,
            None,
            None,
        );
    }
    handover::install();
    node::install();
}

/// This backend's DuckDB database and the settings it was last given.
struct Database {
    db: duckdb_database,
    threads: i32,
    memory_mb: i32,
}

static mut DATABASE: Option<Database> = None;

/// A connection to this backend's DuckDB and the join-order setting it has
/// (`handover::set_join_order`, None: not set yet).
pub struct Session {
    pub con: Connection,
    ordered: Option<bool>,
}

/// Idle connections: connecting and setting the join order cost about 0.3 ms a query,
/// twice per query (planning, execution) before they were kept.
static mut IDLE: Vec<Session> = Vec::new();
const MAX_IDLE: usize = 4;

/// A connection to this backend's DuckDB (an idle one if there is one, with the same join
/// order setting if possible), with `anker.olap_threads`, `anker.olap_memory_limit` and
/// the join order `ordered` applied. The database is created on first use.
fn session(ordered: bool) -> Result<Session, String> {
    // SAFETY: backend-thread only; DATABASE and IDLE are this process's.
    unsafe {
        let (threads, memory_mb) = (THREADS, MEMORY_LIMIT_MB);
        let d = &mut *(&raw mut DATABASE);
        if d.is_none() {
            *d = Some(with_signals_blocked(|| open(threads, memory_mb))?);
        }
        let d = d.as_mut().expect("opened");
        let idle = &mut *(&raw mut IDLE);
        let kept = idle.iter().rposition(|s| s.ordered == Some(ordered)).map(|i| idle.remove(i)).or_else(|| idle.pop());
        let mut s = match kept {
            Some(s) => s,
            None => {
                let mut con = std::ptr::null_mut();
                if duckdb_connect(d.db, &mut con) != SUCCESS {
                    return Err("anker: cannot connect to DuckDB".into());
                }
                Session { con: Connection(con), ordered: None }
            }
        };
        if d.threads != threads || d.memory_mb != memory_mb {
            // (database-wide settings)
            with_signals_blocked(|| s.con.execute(&format!("SET threads = {threads}; SET memory_limit = '{memory_mb}MB'")))?;
            d.threads = threads;
            d.memory_mb = memory_mb;
        }
        if s.ordered != Some(ordered) {
            handover::set_join_order(&s.con, ordered)?;
            s.ordered = Some(ordered);
        }
        Ok(s)
    }
}

/// Keep `s` for a later query: a connection whose statement DuckDB refused to prepare, or
/// whose query returned all its rows, never one an error or interrupt stopped.
fn give_back(s: Session) {
    // SAFETY: backend-thread only.
    let idle = unsafe { &mut *(&raw mut IDLE) };
    if idle.len() < MAX_IDLE {
        idle.push(s);
    }
}

/// A query DuckDB prepared while PostgreSQL planned it, kept for the plan's execution so
/// that DuckDB does not parse, bind and optimize it a second time: its connection, the
/// statement, and the registry ids its `anker_scan`s were bound to, in the order of the
/// plan's tables (execution registers the tables' prepared inputs under them).
pub struct Ready {
    // Field order is drop order: the statement before its connection.
    pub prepared: Prepared,
    pub session: Session,
    pub ids: Vec<i64>,
    /// Per table, the column bounds the statement was optimized with: it may run only on
    /// inputs whose values lie within them (`scan::Input::within`).
    pub bounds: Vec<Vec<Option<(i64, i64)>>>,
}

/// Prepared queries waiting for their plan's execution, by token. A plan that is never
/// executed (EXPLAIN, an invalidated cached plan) leaves its entry until newer ones push it
/// out; a plan executed without its entry prepares the query again.
static mut READY: Vec<(i32, Ready)> = Vec::new();
static mut NEXT_TOKEN: i32 = 1;
const MAX_READY: usize = 8;

/// Keep `r` for the execution of the plan being made; the token the plan carries.
fn keep_ready(r: Ready) -> i32 {
    // SAFETY: backend-thread only.
    unsafe {
        let ready = &mut *(&raw mut READY);
        if ready.len() >= MAX_READY {
            ready.remove(0);
        }
        let token = NEXT_TOKEN;
        // (0 is no token; a token wraps long after its entry is gone)
        NEXT_TOKEN = NEXT_TOKEN.checked_add(1).unwrap_or(1);
        ready.push((token, r));
        token
    }
}

/// The query kept for the plan with `token`, now the caller's.
fn take_ready(token: i32) -> Option<Ready> {
    // SAFETY: backend-thread only.
    let ready = unsafe { &mut *(&raw mut READY) };
    let i = ready.iter().position(|(t, _)| *t == token)?;
    Some(ready.remove(i).1)
}

/// Open an in-memory DuckDB that reads nothing but anker tables.
unsafe fn open(threads: i32, memory_mb: i32) -> Result<Database, String> {
    let mut config = std::ptr::null_mut();
    if duckdb_create_config(&mut config) != SUCCESS {
        return Err("anker: cannot configure DuckDB".into());
    }
    let settings = [
        ("threads", threads.to_string()),
        ("memory_limit", format!("{memory_mb}MB")),
        // Nothing spills to disk: a query over anker.olap_memory_limit fails instead.
        // (Before the next setting, which forbids changing it.)
        ("temp_directory", String::new()),
        // No files, no network, no extensions fetched: DuckDB only reads what anker gives it.
        ("enable_external_access", "false".into()),
        ("autoinstall_known_extensions", "false".into()),
        ("autoload_known_extensions", "false".into()),
        // PostgreSQL's NULL order: last ascending, first descending.
        ("default_null_order", "nulls_last_on_asc_first_on_desc".into()),
    ];
    for (name, value) in &settings {
        let (n, v) = (cstring(name), cstring(value));
        if duckdb_set_config(config, n.as_ptr(), v.as_ptr()) != SUCCESS {
            duckdb_destroy_config(&mut config);
            return Err(format!("anker: DuckDB refused the setting {name} = {value}"));
        }
    }
    let mut db = std::ptr::null_mut();
    let mut err: *mut std::ffi::c_char = std::ptr::null_mut();
    let ok = duckdb_open_ext(std::ptr::null(), &mut db, config, &mut err) == SUCCESS;
    duckdb_destroy_config(&mut config);
    if !ok {
        let msg = text(err);
        duckdb_free(err as *mut std::ffi::c_void);
        return Err(format!("anker: cannot open DuckDB: {msg}"));
    }
    duckdb_add_replacement_scan(db, Some(scan::replace_table), std::ptr::null_mut(), None);
    let mut con = std::ptr::null_mut();
    if duckdb_connect(db, &mut con) != SUCCESS {
        return Err("anker: cannot connect to DuckDB".into());
    }
    let con = Connection(con);
    scan::register_function(con.0)?;
    avg::register(con.0)?;
    Ok(Database { db, threads, memory_mb })
}

/// DuckDB's version, for EXPLAIN.
pub fn version() -> String {
    // SAFETY: returns a static string.
    text(unsafe { duckdb_library_version() })
}
