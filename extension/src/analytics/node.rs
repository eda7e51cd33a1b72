//! `AnkerDuckDB`: the plan node of a query DuckDB runs. It prepares the anker tables the
//! query reads (visibility on the backend's thread, see [`scan`]), runs the query in
//! DuckDB, checking for cancellation between DuckDB's tasks, and returns DuckDB's rows
//! converted to the types PostgreSQL planned.

use super::duckdb::{self as ddb, Chunk, LogicalType, Pending, Prepared, QueryResult};
use super::handover::Handover;
use super::scan::{self, Input};
use super::{give_back, take_ready, Ready, Session};
use crate::scan_node::{list_cells, new_scan_state};
use anker_engine::decimal;
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use std::collections::HashMap;
use std::ffi::CStr;

const NAME: &CStr = c"AnkerDuckDB";

static mut SCAN_METHODS: pg_sys::CustomScanMethods =
    pg_sys::CustomScanMethods { CustomName: NAME.as_ptr(), CreateCustomScanState: Some(create_state) };

static mut EXEC_METHODS: pg_sys::CustomExecMethods = pg_sys::CustomExecMethods {
    CustomName: NAME.as_ptr(),
    BeginCustomScan: Some(begin),
    ExecCustomScan: Some(exec),
    EndCustomScan: Some(end),
    ReScanCustomScan: Some(rescan),
    MarkPosCustomScan: None,
    RestrPosCustomScan: None,
    EstimateDSMCustomScan: None,
    InitializeDSMCustomScan: None,
    ReInitializeDSMCustomScan: None,
    InitializeWorkerCustomScan: None,
    ShutdownCustomScan: None,
    ExplainCustomScan: Some(explain),
};

pub fn install() {
    // SAFETY: registration during postmaster start-up.
    unsafe { pg_sys::RegisterCustomScanMethods(&raw const SCAN_METHODS) };
}

/// `custom_private`: the SQL text, then per table its relation id, its name in the text,
/// and the list of attributes read (0-based).
const P_SQL: usize = 0;
const P_RELIDS: usize = 1;
const P_NAMES: usize = 2;
const P_ATTS: usize = 3;
/// 1 if DuckDB keeps the FROM list's join order (`handover::set_join_order`).
const P_ORDERED: usize = 4;
/// Per table, the attributes that must hold no infinite values (under EXTRACT).
const P_FINITE: usize = 5;
/// The token of the query DuckDB prepared at planning (`super::keep_ready`).
const P_READY: usize = 6;

/// The plan node for `handover`.
pub unsafe fn plan_node(handover: &Handover) -> *mut pg_sys::CustomScan {
    let cs = pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomScan>()) as *mut pg_sys::CustomScan;
    (*cs).scan.plan.type_ = pg_sys::NodeTag::T_CustomScan;
    (*cs).methods = &raw const SCAN_METHODS;
    let mut tlist = std::ptr::null_mut();
    let mut scan_tlist = std::ptr::null_mut();
    // The scan tuple: DuckDB's columns, the leaves. Typed NULLs rather than Vars: EXPLAIN
    // VERBOSE resolves INDEX_VAR through this list, and a Var here would refer to itself.
    for (i, &(typid, typmod, coll)) in handover.leaves.iter().enumerate() {
        let (mut len, mut byval) = (0i16, false);
        pg_sys::get_typlenbyval(typid, &mut len, &mut byval);
        let placeholder = pg_sys::makeConst(typid, typmod, coll, len as i32, pg_sys::Datum::from(0usize), true, byval);
        let name = pg_sys::pstrdup(ddb::cstring(&format!("c{}", i + 1)).as_ptr());
        scan_tlist = pg_sys::lappend(scan_tlist, pg_sys::makeTargetEntry(placeholder as *mut pg_sys::Expr, i as i16 + 1, name, false) as *mut std::ffi::c_void);
    }
    // The query's columns: leaves as they are, or PostgreSQL's expressions over them.
    for (i, &(expr, name)) in handover.outputs.iter().enumerate() {
        tlist = pg_sys::lappend(tlist, pg_sys::makeTargetEntry(expr as *mut pg_sys::Expr, i as i16 + 1, name, false) as *mut std::ffi::c_void);
    }
    (*cs).scan.plan.targetlist = tlist;
    (*cs).custom_scan_tlist = scan_tlist;
    let sql = pg_sys::makeString(pg_sys::pstrdup(ddb::cstring(&handover.sql).as_ptr()));
    let mut relids = std::ptr::null_mut();
    let mut names = std::ptr::null_mut();
    let mut atts = std::ptr::null_mut();
    let mut finite = std::ptr::null_mut();
    for t in &handover.tables {
        relids = pg_sys::lappend_oid(relids, t.relid);
        names = pg_sys::lappend(names, pg_sys::makeString(pg_sys::pstrdup(ddb::cstring(&t.name).as_ptr())) as *mut std::ffi::c_void);
        let (mut l, mut f) = (std::ptr::null_mut(), std::ptr::null_mut());
        for &a in &t.atts {
            l = pg_sys::lappend_int(l, a as i32);
        }
        for &a in &t.finite {
            f = pg_sys::lappend_int(f, a as i32);
        }
        atts = pg_sys::lappend(atts, l as *mut std::ffi::c_void);
        finite = pg_sys::lappend(finite, f as *mut std::ffi::c_void);
    }
    let mut private = std::ptr::null_mut();
    private = pg_sys::lappend(private, sql as *mut std::ffi::c_void);
    private = pg_sys::lappend(private, relids as *mut std::ffi::c_void);
    private = pg_sys::lappend(private, names as *mut std::ffi::c_void);
    private = pg_sys::lappend(private, atts as *mut std::ffi::c_void);
    private = pg_sys::lappend(private, pg_sys::makeInteger(handover.ordered as i32) as *mut std::ffi::c_void);
    private = pg_sys::lappend(private, finite as *mut std::ffi::c_void);
    private = pg_sys::lappend(private, pg_sys::makeInteger(handover.ready) as *mut std::ffi::c_void);
    (*cs).custom_private = private;
    cs
}

/// A query running in DuckDB. Owned by the executor state through a pointer, and freed
/// by [`end`] or, after an error, by the query memory context's reset callback.
struct Running {
    /// Inputs registered for DuckDB (taken out after the DuckDB objects below are gone),
    /// and the scans holding their snapshots.
    inputs: Vec<scan::Registration>,
    scans: Vec<(pg_sys::Relation, pg_sys::TableScanDesc)>,
    // Field order is drop order: the result before the statement and the connection.
    chunk: Option<Chunk>,
    row: usize,
    result: Option<QueryResult>,
    types: Vec<LogicalType>,
    prepared: Option<Prepared>,
    session: Option<Session>,
    rows_in: u64,
    elapsed_ms: f64,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.chunk = None;
        self.result = None;
        self.prepared = None;
        self.session = None;
    }
}

#[repr(C)]
struct State {
    css: pg_sys::CustomScanState,
    running: *mut Running,
    done: bool,
    /// The memory context callback that frees `running` after an error.
    callback: *mut pg_sys::MemoryContextCallback,
}

#[pg_guard]
unsafe extern "C-unwind" fn create_state(cscan: *mut pg_sys::CustomScan) -> *mut pg_sys::Node {
    new_scan_state(std::mem::size_of::<State>(), cscan, &raw const EXEC_METHODS)
}

unsafe fn private(node: *mut pg_sys::CustomScanState, i: usize) -> *mut std::ffi::c_void {
    let cscan = (*node).ss.ps.plan as *mut pg_sys::CustomScan;
    list_cells((*cscan).custom_private)[i].ptr_value
}

/// The anker tables of the plan: relation and the name the query text uses.
unsafe fn tables_of(node: *mut pg_sys::CustomScanState) -> Vec<(pg_sys::Oid, String)> {
    let relids = list_cells(private(node, P_RELIDS) as *mut pg_sys::List);
    let names = list_cells(private(node, P_NAMES) as *mut pg_sys::List);
    relids
        .iter()
        .zip(names)
        .map(|(r, n)| (r.oid_value, CStr::from_ptr((*(n.ptr_value as *mut pg_sys::String)).sval).to_string_lossy().into_owned()))
        .collect()
}

unsafe fn ordered(node: *mut pg_sys::CustomScanState) -> bool {
    (*(private(node, P_ORDERED) as *mut pg_sys::Integer)).ival != 0
}

unsafe fn ready_token(node: *mut pg_sys::CustomScanState) -> i32 {
    (*(private(node, P_READY) as *mut pg_sys::Integer)).ival
}

unsafe fn sql_of(node: *mut pg_sys::CustomScanState) -> String {
    let s = private(node, P_SQL) as *mut pg_sys::String;
    CStr::from_ptr((*s).sval).to_string_lossy().into_owned()
}

#[pg_guard]
unsafe extern "C-unwind" fn begin(node: *mut pg_sys::CustomScanState, estate: *mut pg_sys::EState, _eflags: i32) {
    let s = node as *mut State;
    // Free what DuckDB holds if the query ends in an error (end is not called then).
    let cb = pg_sys::MemoryContextAllocZero((*estate).es_query_cxt, std::mem::size_of::<pg_sys::MemoryContextCallback>())
        as *mut pg_sys::MemoryContextCallback;
    (*cb).func = Some(release_callback);
    (*cb).arg = s as *mut std::ffi::c_void;
    pg_sys::MemoryContextRegisterResetCallback((*estate).es_query_cxt, cb);
    (*s).callback = cb;
}

#[pg_guard]
unsafe extern "C-unwind" fn release_callback(arg: *mut std::ffi::c_void) {
    // Only an error gets here: `end` releases otherwise. The (sub)transaction's
    // abort has by now given back the relation references and registered
    // snapshots (resource owners) and anker's column snapshots (its transaction
    // callbacks); closing them again failed the abort itself ("relcache reference
    // ... is not owned by resource owner", then "AbortTransaction while in ABORT
    // state"). What is left is DuckDB's.
    drop(take_running(arg as *mut State));
}

/// The running query, now the caller's (None when there is none).
unsafe fn take_running(s: *mut State) -> Option<Box<Running>> {
    let r = std::mem::replace(&mut (*s).running, std::ptr::null_mut());
    (!r.is_null()).then(|| Box::from_raw(r))
}

/// Free the running query: DuckDB's objects, the registry entries, the snapshots. The
/// connection is kept for another query if this one returned all its rows.
unsafe fn release(s: *mut State) {
    let Some(mut r) = take_running(s) else { return };
    let scans: Vec<_> = r.scans.clone();
    let session = if (*s).done { r.session.take() } else { None };
    drop(r);
    for (rel, sd) in scans {
        crate::tam::scan::scan_end(sd);
        pg_sys::RelationClose(rel);
    }
    if let Some(session) = session {
        give_back(session);
    }
}

/// Prepare the tables, run the query in DuckDB up to its first rows.
unsafe fn start(s: *mut State) {
    let node = s as *mut pg_sys::CustomScanState;
    let estate = (*node).ss.ps.state;
    let started = std::time::Instant::now();
    let new = Box::new(Running {
        inputs: vec![],
        scans: vec![],
        chunk: None,
        row: 0,
        result: None,
        types: vec![],
        prepared: None,
        session: None,
        rows_in: 0,
        elapsed_ms: 0.0,
    });
    let tables = tables_of(node);
    let atts: Vec<Vec<usize>> = list_cells(private(node, P_ATTS) as *mut pg_sys::List)
        .iter()
        .map(|c| list_cells(c.ptr_value as *mut pg_sys::List).iter().map(|a| a.int_value as usize).collect())
        .collect();
    let finite: Vec<Vec<usize>> = list_cells(private(node, P_FINITE) as *mut pg_sys::List)
        .iter()
        .map(|c| list_cells(c.ptr_value as *mut pg_sys::List).iter().map(|a| a.int_value as usize).collect())
        .collect();
    // The query as DuckDB prepared it at planning, if this plan's execution is the first.
    let ready = take_ready(ready_token(node));
    let mut by_name = HashMap::new();
    // Owned by `s` from here on (the only owner): an error below frees what was set up
    // so far, through the memory context callback.
    (*s).running = Box::into_raw(new);
    let running = &mut *(*s).running;
    let mut collected = vec![];
    for (((relid, name), cols), finite) in tables.into_iter().zip(&atts).zip(&finite) {
        let rel = pg_sys::RelationIdGetRelation(relid);
        let mut input = Input::describe(rel);
        input.require_finite(finite);
        let sd = input.collect(rel, cols, estate);
        running.rows_in += input.rows();
        running.scans.push((rel, sd));
        collected.push((name, input));
    }
    // The statement was bound to as many tables and optimized with the column bounds of
    // planning: rows written since may lie outside them, and then it is prepared again.
    let ready = match ready {
        Some(r) if r.ids.len() != collected.len() || !collected.iter().zip(&r.bounds).all(|((_, input), promised)| input.within(promised)) => {
            let Ready { prepared, session, .. } = r;
            drop(prepared);
            give_back(session);
            None
        }
        r => r,
    };
    for (i, (name, input)) in collected.into_iter().enumerate() {
        let r = match &ready {
            Some(ready) => scan::register_as(ready.ids[i], input),
            None => scan::register(input),
        };
        by_name.insert(name, r.id());
        running.inputs.push(r);
    }
    let outcome = (|| -> Result<(), (u32, String)> {
        let (prepared, session) = match ready {
            Some(ready) => (ready.prepared, ready.session),
            None => {
                let session = super::session(ordered(node)).map_err(|e| (0, e))?;
                let prepared = scan::with_names(by_name.clone(), || Prepared::new(session.con.0, &sql_of(node))).map_err(|e| (0, e))?;
                (prepared, session)
            }
        };
        running.types = prepared.column_types();
        let mut pending = Pending(std::ptr::null_mut());
        // (the names again, should DuckDB bind the statement anew)
        if scan::with_names(by_name, || ddb::duckdb_pending_prepared_streaming(prepared.0, &mut pending.0)) != ddb::SUCCESS {
            return Err((0, ddb::text(ddb::duckdb_pending_error(pending.0))));
        }
        // DuckDB works in tasks; between two, honour a cancel or timeout.
        loop {
            if pg_sys::InterruptPending != 0 {
                ddb::duckdb_interrupt(session.con.0);
            }
            match ddb::duckdb_pending_execute_task(pending.0) {
                ddb::PENDING_RESULT_READY => break,
                ddb::PENDING_ERROR => return Err((0, ddb::text(ddb::duckdb_pending_error(pending.0)))),
                _ => {}
            }
        }
        let mut result = QueryResult(ddb::duckdb_result::EMPTY);
        if ddb::duckdb_execute_pending(pending.0, &mut result.0) != ddb::SUCCESS {
            let (kind, msg) = result.error();
            return Err((kind, msg));
        }
        running.result = Some(result);
        running.prepared = Some(prepared);
        running.session = Some(session);
        Ok(())
    })();
    running.elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
    if let Err((kind, msg)) = outcome {
        release(s);
        pg_sys::check_for_interrupts!();
        raise(kind, &msg);
    }
}

fn fail(code: PgSqlErrorCode, msg: &str) -> ! {
    ereport!(ERROR, code, msg.to_string());
}

/// A DuckDB error as a PostgreSQL error with the SQLSTATE PostgreSQL would use.
fn raise(kind: ddb::duckdb_error_type, msg: &str) -> ! {
    let code = match kind {
        ddb::ERROR_DIVIDE_BY_ZERO => PgSqlErrorCode::ERRCODE_DIVISION_BY_ZERO,
        ddb::ERROR_OUT_OF_RANGE | ddb::ERROR_DECIMAL => PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
        ddb::ERROR_CONVERSION => PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
        ddb::ERROR_OUT_OF_MEMORY => PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
        ddb::ERROR_INTERRUPT => PgSqlErrorCode::ERRCODE_QUERY_CANCELED,
        // Raised by anker_scan: a value DuckDB cannot take exactly.
        _ if msg.contains("anker: ") => PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        _ if msg.starts_with("Out of Memory Error") => PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
        _ if msg.starts_with("Out of Range Error") => PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
        _ if msg.starts_with("INTERRUPT Error") => PgSqlErrorCode::ERRCODE_QUERY_CANCELED,
        _ if msg.contains("More than one row returned by a subquery") => PgSqlErrorCode::ERRCODE_CARDINALITY_VIOLATION,
        _ => PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
    };
    fail(code, &format!("anker: DuckDB: {msg}"))
}

/// Not guarded: errors of the projection PostgreSQL computes on top of DuckDB's columns
/// reach the client as raised (`pg_raw`); `next` is guarded and raises ours itself.
unsafe extern "C-unwind" fn exec(node: *mut pg_sys::CustomScanState) -> *mut pg_sys::TupleTableSlot {
    crate::pg_raw::exec_scan(&mut (*node).ss, Some(next), Some(crate::scan_node::recheck))
}

/// DuckDB's next row in the scan slot (its columns: the query's leaves), or NULL.
#[pg_guard]
unsafe extern "C-unwind" fn next(ss: *mut pg_sys::ScanState) -> *mut pg_sys::TupleTableSlot {
    let node = ss as *mut pg_sys::CustomScanState;
    let s = node as *mut State;
    if (*s).done {
        return std::ptr::null_mut();
    }
    if (*s).running.is_null() {
        start(s);
    }
    let r = &mut *(*s).running;
    let slot = (*node).ss.ss_ScanTupleSlot;
    pg_sys::ExecClearTuple(slot);
    if r.chunk.as_ref().is_none_or(|c| r.row >= c.len()) {
        pg_sys::check_for_interrupts!();
        r.chunk = None;
        let c = ddb::duckdb_fetch_chunk(r.result.as_ref().expect("started").0);
        if c.is_null() {
            let (kind, msg) = r.result.as_mut().expect("started").error();
            if !msg.is_empty() {
                release(s);
                raise(kind, &msg);
            }
            (*s).done = true;
            return std::ptr::null_mut();
        }
        r.chunk = Some(Chunk(c));
        r.row = 0;
        if r.chunk.as_ref().is_some_and(|c| c.len() == 0) {
            (*s).done = true;
            return std::ptr::null_mut();
        }
    }
    // In the per-tuple memory ExecScan resets before each row.
    let econtext = (*node).ss.ps.ps_ExprContext;
    let old = pg_sys::MemoryContextSwitchTo((*econtext).ecxt_per_tuple_memory);
    let desc = (*slot).tts_tupleDescriptor;
    let chunk = r.chunk.as_ref().expect("a chunk");
    for (i, t) in r.types.iter().enumerate() {
        let att = &crate::datum::attrs(desc)[i];
        let (d, isnull) = value(chunk.vector(i), r.row, t, att.atttypid, att.atttypmod);
        *(*slot).tts_values.add(i) = d;
        *(*slot).tts_isnull.add(i) = isnull;
    }
    pg_sys::MemoryContextSwitchTo(old);
    r.row += 1;
    pg_sys::ExecStoreVirtualTuple(slot);
    slot
}

/// Convert value `row` of DuckDB vector `v` (of type `t`) to a datum of PostgreSQL's type
/// `typid`/`typmod`, in the current memory context; (datum, is NULL).
unsafe fn value(v: ddb::duckdb_vector, row: usize, t: &LogicalType, typid: pg_sys::Oid, typmod: i32) -> (pg_sys::Datum, bool) {
    let validity = ddb::duckdb_vector_get_validity(v);
    if !validity.is_null() && *validity.add(row / 64) & (1u64 << (row % 64)) == 0 {
        return (pg_sys::Datum::from(0usize), true);
    }
    let data = ddb::duckdb_vector_get_data(v);
    let d = match t.id() {
        ddb::TYPE_BOOLEAN => pg_sys::Datum::from(*(data as *const bool).add(row)),
        ddb::TYPE_SMALLINT => pg_sys::Datum::from(*(data as *const i16).add(row)),
        ddb::TYPE_INTEGER => pg_sys::Datum::from(*(data as *const i32).add(row)),
        ddb::TYPE_BIGINT if typid == pg_sys::NUMERICOID => {
            crate::agg_node::numeric_datum(&(*(data as *const i64).add(row)).to_string())
        }
        ddb::TYPE_BIGINT => pg_sys::Datum::from(*(data as *const i64).add(row)),
        ddb::TYPE_FLOAT => pg_sys::Datum::from((*(data as *const f32).add(row)).to_bits()),
        ddb::TYPE_DOUBLE => pg_sys::Datum::from((*(data as *const f64).add(row)).to_bits()),
        ddb::TYPE_DATE => pg_sys::Datum::from(match *(data as *const i32).add(row) {
            i32::MAX => i32::MAX,
            d if d == -i32::MAX => i32::MIN,
            d => d - 10_957,
        }),
        ddb::TYPE_TIMESTAMP => pg_sys::Datum::from(match *(data as *const i64).add(row) {
            i64::MAX => i64::MAX,
            t if t == -i64::MAX => i64::MIN,
            t => t - 946_684_800_000_000,
        }),
        ddb::TYPE_HUGEINT => {
            let units = *(data as *const i128).add(row);
            if typid == pg_sys::INT8OID {
                match i64::try_from(units) {
                    Ok(v) => pg_sys::Datum::from(v),
                    Err(_) => fail(PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE, "bigint out of range"),
                }
            } else {
                crate::agg_node::numeric_datum(&decimal::literal(units, 0))
            }
        }
        ddb::TYPE_DECIMAL => {
            let (_, scale) = t.decimal_shape();
            let units = match t.decimal_storage() {
                ddb::TYPE_SMALLINT => *(data as *const i16).add(row) as i128,
                ddb::TYPE_INTEGER => *(data as *const i32).add(row) as i128,
                ddb::TYPE_BIGINT => *(data as *const i64).add(row) as i128,
                _ => *(data as *const i128).add(row),
            };
            crate::agg_node::numeric_datum(&decimal::literal(units, scale as u32))
        }
        ddb::TYPE_VARCHAR => {
            let s = (*(data as *const ddb::duckdb_string_t).add(row)).bytes();
            if typid == pg_sys::BPCHAROID {
                // char(n)'s input function puts the trailing blanks back.
                let cs = std::ffi::CString::new(s).unwrap_or_default();
                pg_sys::OidInputFunctionCall(pg_sys::Oid::from(pg_sys::F_BPCHARIN), cs.as_ptr() as *mut _, pg_sys::InvalidOid, typmod)
            } else {
                pg_sys::Datum::from(pg_sys::cstring_to_text_with_len(s.as_ptr() as *const std::ffi::c_char, s.len() as i32))
            }
        }
        other => fail(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, &format!("anker: DuckDB returned a value of type {other}")),
    };
    (d, false)
}

#[pg_guard]
unsafe extern "C-unwind" fn end(node: *mut pg_sys::CustomScanState) {
    release(node as *mut State);
}

#[pg_guard]
unsafe extern "C-unwind" fn rescan(node: *mut pg_sys::CustomScanState) {
    // Run the query again from the start (a new snapshot of the tables).
    let s = node as *mut State;
    release(s);
    (*s).done = false;
}

/// DuckDB's physical plan of the query, as its EXPLAIN prints it (the tables described,
/// not read).
unsafe fn duckdb_plan(node: *mut pg_sys::CustomScanState) -> Result<String, String> {
    let mut by_name = HashMap::new();
    let mut registered = vec![];
    for (relid, name) in tables_of(node) {
        let rel = pg_sys::RelationIdGetRelation(relid);
        let r = scan::register(Input::describe(rel));
        pg_sys::RelationClose(rel);
        by_name.insert(name, r.id());
        registered.push(r);
    }
    let session = super::session(ordered(node))?;
    let rows = scan::with_names(by_name, || session.con.strings(&format!("EXPLAIN {}", sql_of(node))))?;
    drop(registered);
    give_back(session);
    Ok(rows.iter().filter_map(|r| r.get(1).cloned()).collect::<Vec<_>>().join("\n"))
}

#[pg_guard]
unsafe extern "C-unwind" fn explain(node: *mut pg_sys::CustomScanState, _ancestors: *mut pg_sys::List, es: *mut pg_sys::ExplainState) {
    let s = node as *mut State;
    let version = ddb::cstring(&super::version());
    pg_sys::ExplainPropertyText(c"DuckDB".as_ptr(), version.as_ptr(), es);
    let sql = ddb::cstring(&sql_of(node));
    pg_sys::ExplainPropertyText(c"DuckDB Query".as_ptr(), sql.as_ptr(), es);
    let plan = ddb::cstring(&duckdb_plan(node).unwrap_or_else(|e| format!("(unavailable: {e})")));
    pg_sys::ExplainPropertyText(c"DuckDB Plan".as_ptr(), plan.as_ptr(), es);
    if !(*s).running.is_null() && (*es).analyze {
        let r = &*(*s).running;
        pg_sys::ExplainPropertyInteger(c"Rows Read".as_ptr(), std::ptr::null(), r.rows_in as i64, es);
        if (*es).timing {
            pg_sys::ExplainPropertyFloat(c"DuckDB Time".as_ptr(), c"ms".as_ptr(), r.elapsed_ms, 3, es);
        }
    }
}
