//! `anker_scan`: DuckDB's view of one anker table.
//!
//! The backend prepares everything that needs PostgreSQL before DuckDB runs: it takes the
//! column snapshot AnkerScan would take, resolves visibility for the statement's snapshot
//! (clog, transactions in flight, version chains) and records which rows DuckDB may read
//! from the frozen columns, as row ranges, and copies the few rows the snapshot sees at an
//! older version (or every row, when the statement reads the live columns) into owned
//! memory. DuckDB's threads then fill their vectors from those ranges and copies with
//! anker-engine calls only: no PostgreSQL function ever runs on a DuckDB thread.

use super::duckdb::*;
use crate::datum;
use crate::scan_node::SnapChoice;
use crate::shmem;
use crate::storage::table_of;
use crate::tam::scan::{self as tscan, Reader, RowSink};
use anker_engine::arena::{Arena, Off};
use anker_engine::decimal;
use anker_engine::table::{decode_slot, ColCache, Cursor, Run, Table, ValueRef, VAR_SLOT};
use pgrx::pg_sys;
use std::collections::HashMap;
use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

/// Rows in one unit of work (DuckDB's vector size).
const UNIT_ROWS: u64 = 2048;

/// PostgreSQL counts dates and timestamps from 2000-01-01, DuckDB from 1970-01-01.
const DAYS_1970_TO_2000: i32 = 10_957;
const MICROS_1970_TO_2000: i64 = 946_684_800_000_000;

/// How a PostgreSQL type is handed to DuckDB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Bool,
    Int2,
    Int4,
    Int8,
    Float4,
    Float8,
    Date,
    Timestamp,
    /// numeric(width, scale), width at most 38.
    Decimal(u8, u8),
    Text,
    /// char(n): handed over without its trailing blanks, which PostgreSQL ignores in
    /// comparisons.
    Bpchar,
}

impl Kind {
    /// The kind of values of type `typid` with modifier `typmod`, if DuckDB can take them
    /// exactly.
    pub fn of(typid: pg_sys::Oid, typmod: i32) -> Option<Kind> {
        Some(match typid {
            pg_sys::BOOLOID => Kind::Bool,
            pg_sys::INT2OID => Kind::Int2,
            pg_sys::INT4OID => Kind::Int4,
            pg_sys::INT8OID => Kind::Int8,
            pg_sys::FLOAT4OID => Kind::Float4,
            pg_sys::FLOAT8OID => Kind::Float8,
            pg_sys::DATEOID => Kind::Date,
            pg_sys::TIMESTAMPOID => Kind::Timestamp,
            pg_sys::TEXTOID | pg_sys::VARCHAROID => Kind::Text,
            pg_sys::BPCHAROID => Kind::Bpchar,
            pg_sys::NUMERICOID if typmod >= 4 => {
                // typmod: ((precision << 16) | scale) + VARHDRSZ
                let precision = ((typmod - 4) >> 16) & 0xFFFF;
                let scale = (typmod - 4) & 0x7FF;
                if !(1..=38).contains(&precision) || scale > precision {
                    return None;
                }
                Kind::Decimal(precision as u8, scale as u8)
            }
            _ => return None,
        })
    }

    pub fn logical_type(self) -> LogicalType {
        match self {
            Kind::Bool => LogicalType::new(TYPE_BOOLEAN),
            Kind::Int2 => LogicalType::new(TYPE_SMALLINT),
            Kind::Int4 => LogicalType::new(TYPE_INTEGER),
            Kind::Int8 => LogicalType::new(TYPE_BIGINT),
            Kind::Float4 => LogicalType::new(TYPE_FLOAT),
            Kind::Float8 => LogicalType::new(TYPE_DOUBLE),
            Kind::Date => LogicalType::new(TYPE_DATE),
            Kind::Timestamp => LogicalType::new(TYPE_TIMESTAMP),
            Kind::Decimal(w, s) => LogicalType::decimal(w, s),
            Kind::Text | Kind::Bpchar => LogicalType::new(TYPE_VARCHAR),
        }
    }
}

/// One column of the table as DuckDB sees it.
pub struct Column {
    pub name: String,
    /// The attribute (0-based).
    pub att: usize,
    /// None: a type DuckDB is never asked for (the query does not read it).
    pub kind: Option<Kind>,
    /// Infinite dates and timestamps are an error (DuckDB's EXTRACT makes them NULL).
    pub finite: bool,
    /// Smallest and largest value, as DuckDB stores them, that the scan can produce: the
    /// column's bounds in anker (integer-like types only). DuckDB's optimizer relies on
    /// them ([`anker_scan_bounds`]).
    pub bounds: Option<(i64, i64)>,
}

/// A unit of work: rows of the frozen columns, or copied rows.
#[derive(Clone, Copy, Debug)]
enum Unit {
    Rows(u64, u64),
    Copied(usize, usize),
}

/// Rows copied on the backend's thread: per row and column, the value's bytes in the
/// layout of a column page (fixed-width bytes, or a varlena), or NULL.
#[derive(Default)]
struct Copied {
    /// (offset, length) into `bytes` per row and copied column; length `u32::MAX` is
    /// NULL (a value is at most 1 GB, PostgreSQL's limit).
    cells: Vec<(usize, u32)>,
    bytes: Vec<u8>,
    ncols: usize,
    rows: usize,
}

impl Copied {
    fn value(&self, row: usize, col: usize, fixed: bool) -> ValueRef {
        let (off, len) = self.cells[row * self.ncols + col];
        if len == u32::MAX {
            return ValueRef::Null;
        }
        let p = self.bytes[off..].as_ptr();
        if fixed {
            ValueRef::Fixed(p)
        } else {
            ValueRef::Blob(p, len)
        }
    }
}

/// What DuckDB reads at execution: set up by [`Input::collect`].
struct Source {
    arena: &'static Arena,
    table: &'static Table,
    /// The column snapshot the row ranges are read from.
    snap: Option<Off>,
    units: Vec<Unit>,
    copied: Copied,
    /// For each column of `Input::columns`, its index in `copied`.
    copied_col: Vec<Option<usize>>,
}

/// One anker table of a query, as the `anker_scan` table function reads it.
pub struct Input {
    pub columns: Vec<Column>,
    pub estimated_rows: u64,
    /// Text other than ASCII is an error: the database encoding is not UTF8 (read on the
    /// backend's thread; DuckDB's threads call no PostgreSQL function).
    ascii_only: bool,
    source: Option<Source>,
}

// SAFETY: `Source` points into the shared arena, mapped at the same address for the
// process's whole life, and at a column snapshot the backend holds (its scan stays open)
// until the query's registry entry is gone; the copies are owned and read-only once
// DuckDB runs.
unsafe impl Send for Input {}
unsafe impl Sync for Input {}

impl Input {
    /// The columns of relation `rel` (open), without data.
    pub unsafe fn describe(rel: pg_sys::Relation) -> Input {
        let columns = datum::attrs((*rel).rd_att)
            .iter()
            .enumerate()
            .filter(|(_, a)| !a.attisdropped)
            .map(|(i, a)| Column {
                name: std::ffi::CStr::from_ptr(a.attname.data.as_ptr()).to_string_lossy().into_owned(),
                att: i,
                kind: Kind::of(a.atttypid, a.atttypmod),
                finite: false,
                bounds: None,
            })
            .collect();
        // The statement prepared at planning keeps this estimate for its execution:
        // PostgreSQL's, or before the first VACUUM or ANALYZE the table's row ids so far
        // (an upper bound), not zero.
        let reltuples = (*(*rel).rd_rel).reltuples;
        let estimated_rows = if reltuples >= 0.0 { reltuples as u64 } else { table_of(rel).nrows() };
        let mut input = Input { columns, estimated_rows, ascii_only: !super::handover::utf8_database(), source: None };
        input.read_bounds(rel);
        input
    }

    /// Read the columns' bounds from the table. They only widen, so bounds read after
    /// [`collect`](Self::collect) cover every value it found.
    unsafe fn read_bounds(&mut self, rel: pg_sys::Relation) {
        let arena = shmem::arena();
        let table = table_of(rel);
        let atts = datum::attrs((*rel).rd_att);
        for c in &mut self.columns {
            c.bounds = None;
            // Values are read from the pages only when stored as the attribute says (others
            // come through the reader, which may add values the column never held).
            if !table.has_column(arena, c.att) {
                continue;
            }
            let column = table.column(arena, c.att);
            let Some((lo, hi)) = column.bounds().filter(|_| column.spec().reads_as(datum::spec_for(&atts[c.att]))) else { continue };
            c.bounds = match c.kind {
                Some(Kind::Int2 | Kind::Int4 | Kind::Int8) => Some((lo, hi)),
                // (the conversions of the scan, which keep the order)
                Some(Kind::Date) => duck_date(lo as i32, false).ok().zip(duck_date(hi as i32, false).ok()).map(|(l, h)| (l as i64, h as i64)),
                Some(Kind::Timestamp) => duck_timestamp(lo, false).ok().zip(duck_timestamp(hi, false).ok()),
                _ => None,
            };
        }
    }

    /// The bounds DuckDB may have been given for each column.
    pub fn bounds(&self) -> Vec<Option<(i64, i64)>> {
        self.columns.iter().map(|c| c.bounds).collect()
    }

    /// Whether `promised` (this table's [`bounds`](Self::bounds) when a statement was
    /// prepared) still covers every value found by [`collect`](Self::collect).
    pub fn within(&self, promised: &[Option<(i64, i64)>]) -> bool {
        promised.len() == self.columns.len()
            && self.columns.iter().zip(promised).all(|(c, p)| match (p, c.bounds) {
                (None, _) => true,
                (Some((lo, hi)), Some((l, h))) => *lo <= l && h <= *hi,
                (Some(_), None) => false,
            })
    }

    /// Resolve visibility of `rel`'s rows for the statement and record what DuckDB reads:
    /// row ranges of a column snapshot of attributes `atts` (0-based), and copies of the
    /// other visible rows. The returned scan holds the snapshot: end it (`tscan::scan_end`)
    /// only after DuckDB is done.
    pub unsafe fn collect(&mut self, rel: pg_sys::Relation, atts: &[usize], estate: *mut pg_sys::EState) -> pg_sys::TableScanDesc {
        let arena = shmem::arena();
        let table = table_of(rel);
        let natts = (*(*rel).rd_att).natts as usize;
        let mut wanted = vec![false; natts];
        for &a in atts {
            wanted[a] = true;
        }
        let snapshot = (*estate).es_snapshot;
        let flags = pg_sys::ScanOptions::SO_TYPE_SEQSCAN | pg_sys::ScanOptions::SO_ALLOW_PAGEMODE;
        let sd = tscan::scan_begin(rel, snapshot, 0, std::ptr::null_mut(), std::ptr::null_mut(), flags);
        tscan::restrict_scan(sd, &wanted);
        let mut choice = SnapChoice::for_statement(estate, rel);
        let snap = choice.take(rel, atts, snapshot).map(|a| {
            tscan::use_snapshot(sd, a.snap);
            a.snap
        });
        // Columns read from pages must be stored as the attributes say; otherwise
        // every row goes through the reader, which adds missing values or refuses.
        let atts_desc = datum::attrs((*rel).rd_att);
        let pages_ok = atts.iter().all(|&a| table.has_column(arena, a) && table.column(arena, a).spec().reads_as(datum::spec_for(&atts_desc[a])));
        let copied_col: Vec<Option<usize>> = {
            let mut k = 0;
            self.columns
                .iter()
                .map(|c| {
                    wanted[c.att].then(|| {
                        k += 1;
                        k - 1
                    })
                })
                .collect()
        };
        let fixed: Vec<(usize, i16, bool)> = self
            .columns
            .iter()
            .filter(|c| wanted[c.att])
            .map(|c| (c.att, atts_desc[c.att].attlen, atts_desc[c.att].attbyval))
            .collect();
        let mut sink = Collector { units: vec![], copied: Copied { ncols: fixed.len(), ..Default::default() }, atts: fixed, blocks: pages_ok && snap.is_some() };
        let slot = pg_sys::MakeSingleTupleTableSlot((*rel).rd_att, crate::tam::slot::ops());
        tscan::scan_rows(sd, slot, &mut sink);
        pg_sys::ExecDropSingleTupleTableSlot(slot);
        self.source = Some(Source { arena, table, snap: snap.filter(|_| sink.blocks), units: sink.units, copied: sink.copied, copied_col });
        self.read_bounds(rel);
        sd
    }

    /// Attributes `atts` (0-based) must hold no infinite values.
    pub fn require_finite(&mut self, atts: &[usize]) {
        for c in &mut self.columns {
            c.finite |= atts.contains(&c.att);
        }
    }

    /// Rows DuckDB will read (after [`collect`](Self::collect)).
    pub fn rows(&self) -> u64 {
        self.source.as_ref().map_or(0, |s| {
            s.units.iter().map(|u| match *u {
                Unit::Rows(lo, hi) => hi - lo,
                Unit::Copied(lo, hi) => (hi - lo) as u64,
            }).sum()
        })
    }
}

/// The consumer of the backend's visibility pass.
struct Collector {
    units: Vec<Unit>,
    copied: Copied,
    /// Attributes copied from slots: (attribute, attlen, attbyval).
    atts: Vec<(usize, i16, bool)>,
    /// Rows may be read from the frozen column pages.
    blocks: bool,
}

impl Collector {
    /// Add rows `rows` of the frozen columns, in units of at most [`UNIT_ROWS`].
    fn add_rows(&mut self, rows: std::ops::Range<u64>) {
        let mut lo = rows.start;
        while lo < rows.end {
            if let Some(Unit::Rows(ulo, uhi)) = self.units.last_mut() {
                if *uhi == lo && *uhi - *ulo < UNIT_ROWS {
                    let end = rows.end.min(*ulo + UNIT_ROWS);
                    *uhi = end;
                    lo = end;
                    continue;
                }
            }
            let end = rows.end.min(lo + UNIT_ROWS);
            self.units.push(Unit::Rows(lo, end));
            lo = end;
        }
    }
}

impl RowSink for Collector {
    fn takes_blocks(&self) -> bool {
        self.blocks
    }

    fn clean(&mut self, _reader: &mut Reader, _table: &Table, rows: std::ops::Range<u64>) {
        self.add_rows(rows);
    }

    fn checked(&mut self, _reader: &mut Reader, _table: &Table, rows: std::ops::Range<u64>) {
        self.add_rows(rows);
    }

    fn row(&mut self, slot: *mut pg_sys::TupleTableSlot) {
        let c = &mut self.copied;
        for &(att, attlen, byval) in &self.atts {
            // SAFETY: the reader filled the attributes the scan reads.
            let (isnull, d) = unsafe { (*(*slot).tts_isnull.add(att), *(*slot).tts_values.add(att)) };
            if isnull {
                c.cells.push((0, u32::MAX));
                continue;
            }
            let off = c.bytes.len();
            if byval {
                let v = d.value() as u64;
                c.bytes.extend_from_slice(&v.to_ne_bytes()[..attlen as usize]);
            } else if attlen > 0 {
                // SAFETY: a by-reference fixed-width value of attlen bytes.
                c.bytes.extend_from_slice(unsafe { std::slice::from_raw_parts(d.cast_mut_ptr::<u8>(), attlen as usize) });
            } else {
                let p = d.cast_mut_ptr::<u8>() as *const u8;
                // SAFETY: anker's values are detoasted varlenas.
                c.bytes.extend_from_slice(unsafe { std::slice::from_raw_parts(p, datum::varsize_any(p)) });
            }
            c.cells.push((off, (c.bytes.len() - off) as u32));
        }
        c.rows += 1;
        let n = c.rows;
        match self.units.last_mut() {
            Some(Unit::Copied(lo, hi)) if *hi == n - 1 && *hi - *lo < UNIT_ROWS as usize => *hi = n,
            _ => self.units.push(Unit::Copied(n - 1, n)),
        }
    }
}

// ---- the registry -------------------------------------------------------------------

/// Inputs of the queries of this backend, by id, and the names the query being
/// prepared uses for them. DuckDB's callbacks find their input here; they may run on
/// DuckDB's threads, hence the lock.
struct Registry {
    next: i64,
    inputs: HashMap<i64, Arc<Input>>,
    names: HashMap<String, i64>,
}

static REGISTRY: LazyLock<Mutex<Registry>> =
    LazyLock::new(|| Mutex::new(Registry { next: 1, inputs: HashMap::new(), names: HashMap::new() }));

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// An input in the registry; dropping it takes the input out (an error on the way drops it
/// too).
pub struct Registration(i64);

impl Registration {
    pub fn id(&self) -> i64 {
        self.0
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        registry().inputs.remove(&self.0);
    }
}

/// Register `input`.
pub fn register(input: Input) -> Registration {
    let id = {
        let mut r = registry();
        r.next += 1;
        r.next - 1
    };
    register_as(id, input)
}

/// Register `input` under `id`, which a statement DuckDB prepared earlier was bound to
/// (and whose registration is gone): its scans read `input` when it runs.
pub fn register_as(id: i64, input: Input) -> Registration {
    registry().inputs.insert(id, Arc::new(input));
    Registration(id)
}

/// Run `f`, which has DuckDB bind a query, with the query's table names resolving to the
/// inputs `names` gives.
pub fn with_names<T>(names: HashMap<String, i64>, f: impl FnOnce() -> T) -> T {
    registry().names = names;
    let r = f();
    registry().names = HashMap::new();
    r
}

fn input(id: i64) -> Option<Arc<Input>> {
    registry().inputs.get(&id).cloned()
}

/// DuckDB's replacement scan: a table name of the query being bound becomes
/// `anker_scan(id)`.
pub unsafe extern "C" fn replace_table(info: duckdb_replacement_scan_info, name: *const c_char, _data: *mut c_void) {
    if let Err(msg) = guarded(|| replace_table_body(info, name)) {
        eprintln!("anker: {msg}");
    }
}

unsafe fn replace_table_body(info: duckdb_replacement_scan_info, name: *const c_char) {
    let name = text(name);
    let Some(&id) = registry().names.get(&name) else { return };
    duckdb_replacement_scan_set_function_name(info, c"anker_scan".as_ptr());
    let mut v = duckdb_create_int64(id);
    duckdb_replacement_scan_add_parameter(info, v);
    duckdb_destroy_value(&mut v);
}

/// Register `anker_scan` with DuckDB (once per database).
pub unsafe fn register_function(con: duckdb_connection) -> Result<(), String> {
    let mut f = duckdb_create_table_function();
    duckdb_table_function_set_name(f, c"anker_scan".as_ptr());
    let t = LogicalType::new(TYPE_BIGINT);
    duckdb_table_function_add_parameter(f, t.0);
    duckdb_table_function_set_bind(f, Some(bind));
    duckdb_table_function_set_init(f, Some(init));
    duckdb_table_function_set_local_init(f, Some(local_init));
    duckdb_table_function_set_function(f, Some(scan));
    duckdb_table_function_supports_projection_pushdown(f, true);
    anker_table_function_statistics(f);
    let ok = duckdb_register_table_function(con, f) == SUCCESS;
    duckdb_destroy_table_function(&mut f);
    if ok {
        Ok(())
    } else {
        Err("anker: DuckDB refused the anker_scan table function".into())
    }
}

unsafe extern "C" fn drop_box<T>(p: *mut c_void) {
    if let Err(msg) = guarded(|| drop(Box::from_raw(p as *mut T))) {
        eprintln!("anker: {msg}");
    }
}

/// Run a callback of DuckDB's: a panic must not cross into C++ (it would abort the
/// backend), so it becomes an error message.
fn guarded(f: impl FnOnce()) -> Result<(), String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|payload| {
        let what = payload.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| payload.downcast_ref::<String>().cloned());
        format!("anker_scan failed: {}", what.unwrap_or_else(|| "a panic".into()))
    })
}

// ---- DuckDB's callbacks (any thread: no PostgreSQL calls) ----------------------------

extern "C" {
    /// duckdb_stats.cpp: make `f`'s statistics callback ask [`anker_scan_bounds`].
    fn anker_table_function_statistics(f: duckdb_table_function);
}

/// DuckDB's statistics callback (through duckdb_stats.cpp), while it optimizes a query:
/// the bounds of column `column` of the input `bind_data` names, with their type as a
/// code duckdb_stats.cpp knows. False: no statistics. (`bind_data` is the bind's boxed
/// registry id or null; the out-pointers are the caller's locals, valid for the call.)
#[no_mangle]
unsafe extern "C" fn anker_scan_bounds(bind_data: *mut c_void, column: u64, kind: *mut i32, lo: *mut i64, hi: *mut i64) -> bool {
    let mut found = false;
    let outcome = guarded(|| {
        if bind_data.is_null() {
            return;
        }
        let Some(input) = input(*(bind_data as *const i64)) else { return };
        let Some(c) = input.columns.get(column as usize) else { return };
        let (Some((l, h)), Some(k)) = (c.bounds, c.kind) else { return };
        *kind = match k {
            Kind::Int2 => 0,
            Kind::Int4 => 1,
            Kind::Int8 => 2,
            Kind::Date => 3,
            Kind::Timestamp => 4,
            _ => return,
        };
        (*lo, *hi) = (l, h);
        found = true;
    });
    outcome.is_ok() && found
}

unsafe extern "C" fn bind(info: duckdb_bind_info) {
    if let Err(msg) = guarded(|| bind_body(info)) {
        let msg = cstring(&msg);
        duckdb_bind_set_error(info, msg.as_ptr());
    }
}

unsafe fn bind_body(info: duckdb_bind_info) {
    let mut v = duckdb_bind_get_parameter(info, 0);
    let id = duckdb_get_int64(v);
    duckdb_destroy_value(&mut v);
    let Some(input) = input(id) else {
        duckdb_bind_set_error(info, c"anker_scan: no such input".as_ptr());
        return;
    };
    for c in &input.columns {
        let t = c.kind.unwrap_or(Kind::Text).logical_type();
        let name = cstring(&c.name);
        duckdb_bind_add_result_column(info, name.as_ptr(), t.0);
    }
    duckdb_bind_set_cardinality(info, input.source.as_ref().map_or(input.estimated_rows, |_| input.rows()), false);
    // The id, not the input: a statement prepared at planning runs on the input the
    // execution registers under the same id (`register_as`).
    duckdb_bind_set_bind_data(info, Box::into_raw(Box::new(id)) as *mut c_void, Some(drop_box::<i64>));
}

/// The input a scan being initialized reads: the one registered now under its bind id.
unsafe fn bound_input(info: duckdb_init_info) -> Result<Arc<Input>, &'static std::ffi::CStr> {
    let id = *(duckdb_init_get_bind_data(info) as *const i64);
    match input(id) {
        Some(i) if i.source.is_some() => Ok(i),
        _ => Err(c"anker_scan: the table was not prepared for this query"),
    }
}

/// DuckDB's column identifier for the row id (`COLUMN_IDENTIFIER_ROW_ID`).
const ROW_ID: u64 = u64::MAX;

struct Global {
    input: Arc<Input>,
    /// Columns asked for, as indexes into `Input::columns` (or [`ROW_ID`]).
    projected: Vec<u64>,
    next: AtomicUsize,
}

unsafe extern "C" fn init(info: duckdb_init_info) {
    if let Err(msg) = guarded(|| init_body(info)) {
        let msg = cstring(&msg);
        duckdb_init_set_error(info, msg.as_ptr());
    }
}

unsafe fn init_body(info: duckdb_init_info) {
    let input = match bound_input(info) {
        Ok(i) => i,
        Err(msg) => return duckdb_init_set_error(info, msg.as_ptr()),
    };
    let n = duckdb_init_get_column_count(info);
    let projected: Vec<u64> = (0..n).map(|i| duckdb_init_get_column_index(info, i)).collect();
    let source = input.source.as_ref().expect("checked above");
    for &p in &projected {
        // Only the columns the backend prepared (snapshot, copies) can be read.
        if p != ROW_ID && source.copied_col.get(p as usize).is_none_or(|c| c.is_none()) {
            let name = input.columns.get(p as usize).map_or("?", |c| c.name.as_str());
            let msg = cstring(&format!("anker_scan: DuckDB asked for column \"{name}\", which the query was not prepared to read"));
            duckdb_init_set_error(info, msg.as_ptr());
            return;
        }
    }
    let units = input.source.as_ref().map_or(0, |s| s.units.len());
    duckdb_init_set_max_threads(info, units.max(1) as u64);
    let g = Global { input, projected, next: AtomicUsize::new(0) };
    duckdb_init_set_init_data(info, Box::into_raw(Box::new(g)) as *mut c_void, Some(drop_box::<Global>));
}

/// One DuckDB thread's column caches over the snapshot.
struct Local {
    caches: Vec<Option<ColCache>>,
}

unsafe extern "C" fn local_init(info: duckdb_init_info) {
    if let Err(msg) = guarded(|| local_init_body(info)) {
        let msg = cstring(&msg);
        duckdb_init_set_error(info, msg.as_ptr());
    }
}

unsafe fn local_init_body(info: duckdb_init_info) {
    let g = match bound_input(info) {
        Ok(i) => i,
        Err(msg) => return duckdb_init_set_error(info, msg.as_ptr()),
    };
    let s = g.source.as_ref().expect("checked by bound_input");
    let n = duckdb_init_get_column_count(info);
    let mut caches: Vec<Option<ColCache>> = vec![];
    let mut cur = Cursor::NEW;
    for i in 0..n {
        let p = duckdb_init_get_column_index(info, i);
        caches.push(match (s.snap, g.columns.get(p as usize)) {
            (Some(_), Some(c)) if p != ROW_ID => Some(s.table.col_cache(s.arena, c.att)),
            _ => None,
        });
    }
    if let Some(snap) = s.snap {
        let mut pairs: Vec<(usize, &mut ColCache)> = vec![];
        for (i, c) in caches.iter_mut().enumerate() {
            if let Some(cc) = c.as_mut() {
                let p = duckdb_init_get_column_index(info, i as u64) as usize;
                pairs.push((g.columns[p].att, cc));
            }
        }
        s.table.bind_snapshot(s.arena, s.table.snapshot(s.arena, snap), &mut cur, &mut pairs);
    }
    duckdb_init_set_init_data(info, Box::into_raw(Box::new(Local { caches })) as *mut c_void, Some(drop_box::<Local>));
}

unsafe extern "C" fn scan(info: duckdb_function_info, out: duckdb_data_chunk) {
    if let Err(msg) = guarded(|| scan_body(info, out)) {
        let msg = cstring(&msg);
        duckdb_function_set_error(info, msg.as_ptr());
    }
}

unsafe fn scan_body(info: duckdb_function_info, out: duckdb_data_chunk) {
    let g = &*(duckdb_function_get_init_data(info) as *const Global);
    let local = &mut *(duckdb_function_get_local_init_data(info) as *mut Local);
    let s = g.input.source.as_ref().expect("checked by init");
    let i = g.next.fetch_add(1, Ordering::Relaxed);
    let Some(&unit) = s.units.get(i) else {
        duckdb_data_chunk_set_size(out, 0);
        return;
    };
    let n = match unit {
        Unit::Rows(lo, hi) => (hi - lo) as usize,
        Unit::Copied(lo, hi) => hi - lo,
    };
    for (j, &p) in g.projected.iter().enumerate() {
        let vec = duckdb_data_chunk_get_vector(out, j as u64);
        if p == ROW_ID {
            let data = duckdb_vector_get_data(vec) as *mut i64;
            for k in 0..n {
                *data.add(k) = match unit {
                    Unit::Rows(lo, _) => (lo + k as u64) as i64,
                    Unit::Copied(lo, _) => -1 - (lo + k) as i64,
                };
            }
            continue;
        }
        let col = &g.input.columns[p as usize];
        let kind = col.kind.expect("checked by init");
        let mut w = Writer { finite: col.finite, ascii_only: g.input.ascii_only, vec, data: duckdb_vector_get_data(vec), validity: std::ptr::null_mut() };
        let result = match unit {
            Unit::Rows(lo, _) => {
                let cc = local.caches[j].as_mut().expect("a snapshot column");
                let mut k = 0;
                let mut result = Ok(());
                while k < n && result.is_ok() {
                    let run = s.table.cursor_run(s.arena, cc, lo + k as u64, (n - k) as u64);
                    result = w.put_run(k, kind, &run, s.arena, cc);
                    k += run.len as usize;
                }
                result
            }
            Unit::Copied(lo, _) => {
                let ci = s.copied_col[p as usize].expect("a copied column");
                let fixed = !matches!(kind, Kind::Text | Kind::Bpchar | Kind::Decimal(..));
                (0..n).try_for_each(|k| w.put(k, kind, s.copied.value(lo + k, ci, fixed)))
            }
        };
        if let Err(msg) = result {
            let msg = cstring(&msg);
            duckdb_function_set_error(info, msg.as_ptr());
            return;
        }
    }
    duckdb_data_chunk_set_size(out, n as u64);
}

const NOT_EXACT: &str = "anker: a numeric value DuckDB cannot read exactly (NaN, infinity, or more digits than its type)";
const MALFORMED: &str = "anker: a column page holds no value for a row that is not NULL";
const NOT_ASCII: &str = "anker: DuckDB reads text as UTF-8, and a value is not ASCII in a database whose encoding is not UTF8; run the query with anker.olap_engine = postgres";
const INFINITE: &str = "anker: DuckDB cannot EXTRACT fields of infinite dates or timestamps as PostgreSQL does; run the query with anker.olap_engine = postgres";

/// A PostgreSQL date as DuckDB's: days since 1970 instead of 2000; PostgreSQL's ±infinity
/// (i32::MAX/MIN) are DuckDB's ±i32::MAX, or an error where the query needs finite values.
#[inline]
fn duck_date(d: i32, finite: bool) -> Result<i32, String> {
    Ok(match d {
        i32::MAX | i32::MIN if finite => return Err(INFINITE.into()),
        i32::MAX => i32::MAX,
        i32::MIN => -i32::MAX,
        d => d + DAYS_1970_TO_2000,
    })
}

/// A PostgreSQL timestamp as DuckDB's (microseconds since 1970), as [`duck_date`] does.
#[inline]
fn duck_timestamp(t: i64, finite: bool) -> Result<i64, String> {
    Ok(match t {
        i64::MAX | i64::MIN if finite => return Err(INFINITE.into()),
        i64::MAX => i64::MAX,
        i64::MIN => -i64::MAX,
        t => t.checked_add(MICROS_1970_TO_2000).ok_or("anker: a timestamp is out of DuckDB's range")?,
    })
}

/// Fills one output vector.
struct Writer {
    finite: bool,
    ascii_only: bool,
    vec: duckdb_vector,
    data: *mut c_void,
    validity: *mut u64,
}

impl Writer {
    #[inline]
    unsafe fn null(&mut self, k: usize) {
        if self.validity.is_null() {
            duckdb_vector_ensure_validity_writable(self.vec);
            self.validity = duckdb_vector_get_validity(self.vec);
        }
        *self.validity.add(k / 64) &= !(1u64 << (k % 64));
    }

    /// Rows `k..k + run.len` from a run of column pages: fixed-width numbers copied a page
    /// at a time, the rest value by value.
    unsafe fn put_run(&mut self, k: usize, kind: Kind, run: &Run, arena: &Arena, cc: &ColCache) -> Result<(), String> {
        let n = run.len as usize;
        let nulls = run.any_null();
        if nulls {
            for i in 0..n {
                if run.is_null(i as u64) {
                    self.null(k + i);
                }
            }
        }
        if run.values.is_null() {
            return Ok(()); // no values page: every row NULL
        }
        let width = cc.width();
        let same_bytes = match kind {
            Kind::Int2 => width == 2,
            Kind::Int4 | Kind::Float4 => width == 4,
            Kind::Int8 | Kind::Float8 => width == 8,
            _ => false,
        };
        if same_bytes {
            // NULL rows' bytes come along; their validity bits are off.
            std::ptr::copy_nonoverlapping(run.values, (self.data as *mut u8).add(k * width), n * width);
            return Ok(());
        }
        let present = (0..n).filter(|&i| !(nulls && run.is_null(i as u64)));
        match kind {
            // Dates and timestamps stored as PostgreSQL's fixed-width values: shifted to
            // DuckDB's epoch in one loop, without a slot decode per value.
            Kind::Date if width == 4 => {
                let src = run.values as *const i32;
                present.into_iter().try_for_each(|i| {
                    *(self.data as *mut i32).add(k + i) = duck_date(src.add(i).read_unaligned(), self.finite)?;
                    Ok(())
                })
            }
            Kind::Timestamp if width == 8 => {
                let src = run.values as *const i64;
                present.into_iter().try_for_each(|i| {
                    *(self.data as *mut i64).add(k + i) = duck_timestamp(src.add(i).read_unaligned(), self.finite)?;
                    Ok(())
                })
            }
            Kind::Decimal(digits, scale) => {
                // The hottest conversion (CH-benCHmark's amounts and quantities): one loop
                // per DuckDB storage width. Short numerics carry their scaled value in the
                // slot (`decimal::numeric_slot`); the rest are parsed.
                let tagged = width == VAR_SLOT;
                let units = |i: usize| {
                    let slot = run.values.add(i * width);
                    if let Some(u) = if tagged { decimal::slot_units(slot, scale as u32) } else { None } {
                        return Ok(u as i128);
                    }
                    let p = match decode_slot(arena, cc.kind(), slot) {
                        ValueRef::Null => return Err(MALFORMED.to_string()),
                        ValueRef::Fixed(p) | ValueRef::Inline(p) | ValueRef::Blob(p, _) => p,
                    };
                    decimal::payload_to_scaled(datum::varlena_payload(p), scale as u32).ok_or_else(|| NOT_EXACT.to_string())
                };
                match digits {
                    0..=4 => present.into_iter().try_for_each(|i| {
                        *(self.data as *mut i16).add(k + i) = units(i)? as i16;
                        Ok(())
                    }),
                    5..=9 => present.into_iter().try_for_each(|i| {
                        *(self.data as *mut i32).add(k + i) = units(i)? as i32;
                        Ok(())
                    }),
                    10..=18 => present.into_iter().try_for_each(|i| {
                        *(self.data as *mut i64).add(k + i) = units(i)? as i64;
                        Ok(())
                    }),
                    _ => present.into_iter().try_for_each(|i| {
                        *(self.data as *mut i128).add(k + i) = units(i)?;
                        Ok(())
                    }),
                }
            }
            _ => present.into_iter().try_for_each(|i| self.put(k + i, kind, decode_slot(arena, cc.kind(), run.values.add(i * width)))),
        }
    }

    #[inline]
    unsafe fn put(&mut self, k: usize, kind: Kind, v: ValueRef) -> Result<(), String> {
        let p = match v {
            ValueRef::Null => {
                self.null(k);
                return Ok(());
            }
            ValueRef::Fixed(p) | ValueRef::Inline(p) | ValueRef::Blob(p, _) => p,
        };
        match kind {
            Kind::Bool => *(self.data as *mut bool).add(k) = *p != 0,
            Kind::Int2 => *(self.data as *mut i16).add(k) = (p as *const i16).read_unaligned(),
            Kind::Int4 => *(self.data as *mut i32).add(k) = (p as *const i32).read_unaligned(),
            Kind::Int8 => *(self.data as *mut i64).add(k) = (p as *const i64).read_unaligned(),
            Kind::Float4 => *(self.data as *mut f32).add(k) = (p as *const f32).read_unaligned(),
            Kind::Float8 => *(self.data as *mut f64).add(k) = (p as *const f64).read_unaligned(),
            Kind::Date => *(self.data as *mut i32).add(k) = duck_date((p as *const i32).read_unaligned(), self.finite)?,
            Kind::Timestamp => *(self.data as *mut i64).add(k) = duck_timestamp((p as *const i64).read_unaligned(), self.finite)?,
            Kind::Decimal(width, scale) => {
                let units = decimal::payload_to_scaled(datum::varlena_payload(p), scale as u32).ok_or(NOT_EXACT)?;
                match width {
                    0..=4 => *(self.data as *mut i16).add(k) = units as i16,
                    5..=9 => *(self.data as *mut i32).add(k) = units as i32,
                    10..=18 => *(self.data as *mut i64).add(k) = units as i64,
                    _ => *(self.data as *mut i128).add(k) = units,
                }
            }
            Kind::Text | Kind::Bpchar => {
                let mut s = datum::varlena_payload(p);
                if kind == Kind::Bpchar {
                    while let [rest @ .., b' '] = s {
                        s = rest;
                    }
                }
                if self.ascii_only && !s.is_ascii() {
                    return Err(NOT_ASCII.into());
                }
                // Not copied into the vector: the bytes are in frozen column pages, blobs
                // or the copies, which the query holds until DuckDB is done with it (the
                // node drops DuckDB's objects first). Not checked as UTF-8 either: in a
                // UTF8 database PostgreSQL has, and elsewhere only ASCII gets here.
                *(self.data as *mut duckdb_string_t).add(k) = duckdb_string_t::borrowed(s);
            }
        }
        Ok(())
    }
}
