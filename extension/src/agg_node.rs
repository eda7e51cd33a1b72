//! `AnkerAgg`: `count`/`sum`/`avg` with an optional integer `GROUP BY`,
//! computed inside the scan of one anker table.
//!
//! PostgreSQL's executor aggregates one row at a time: a slot per row, a
//! hash probe through generic comparison functions, and an `fmgr` call per
//! aggregate per row that, for `numeric`, does arbitrary-precision
//! arithmetic with allocations. On a wide group-by that is most of the
//! query's time, whatever the scan costs (DESIGN §8). So for a query whose
//! grouping step reads a single anker table, the `create_upper_paths_hook`
//! offers a custom path that does the whole grouping in one plan node: it
//! reads the column snapshot block by block, feeds clean blocks (every row
//! visible, unversioned) straight from column pages into the engine's
//! [`Groups`] table, and reads other rows through the ordinary visibility
//! path. Results equal PostgreSQL's exactly: integer sums are exact, numeric
//! sums keep every digit, and averages are divided by PostgreSQL's own
//! `numeric_div`.
//!
//! What qualifies (everything else keeps PostgreSQL's Agg node): one anker
//! base relation; `GROUP BY` of at most four plain columns of types whose
//! equality is bitwise (integers, `bool`, `"char"`, `oid`, `date`,
//! `timestamp[tz]`); aggregates `count(*)`, `count(col)`, and `sum`/`avg`
//! of `int2`/`int4`/`int8`/`numeric` columns, without `DISTINCT`, `ORDER
//! BY` or `FILTER`; no `HAVING`, no grouping sets; `WHERE` clauses on the
//! table's own columns without subqueries or outer parameters. Expressions
//! over the grouped results (`sum(a) / count(*)`) are projected as usual.
//!
//! `anker.enable_agg_node = off` keeps PostgreSQL's Agg node.

use crate::datum;
use crate::scan_node::{explain_columns, is_anker_rte, list_cells, SnapChoice};
use crate::tam::scan::{self, Reader, RowSink};
use anker_engine::agg::{parse_numeric, AggFn, Groups, Key, Numeric, Output, MAX_KEYS};
use anker_engine::table::{Table, ValueRef};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use std::ffi::CStr;

const NAME: &CStr = c"AnkerAgg";
/// Cost against a sequential scan of the table: the same rows, without
/// the executor's per-row work.
const COST_FACTOR: f64 = 0.5;

pub static ENABLE: pgrx::GucSetting<bool> = pgrx::GucSetting::<bool>::new(true);

static mut PREV_CREATE_UPPER_PATHS: pg_sys::create_upper_paths_hook_type = None;

static mut PATH_METHODS: pg_sys::CustomPathMethods = pg_sys::CustomPathMethods {
    CustomName: NAME.as_ptr(),
    PlanCustomPath: Some(plan_path),
    ReparameterizeCustomPathByChild: None,
};

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
    pgrx::GucRegistry::define_bool_guc(
        c"anker.enable_agg_node",
        c"Compute simple aggregates over one anker table inside its scan (AnkerAgg).",
        c"count, sum and avg, optionally grouped by integer columns.",
        &ENABLE,
        pgrx::GucContext::Userset,
        pgrx::GucFlags::default(),
    );
    // SAFETY: hook chaining during postmaster start-up.
    unsafe {
        pg_sys::RegisterCustomScanMethods(&raw const SCAN_METHODS);
        PREV_CREATE_UPPER_PATHS = pg_sys::create_upper_paths_hook;
        pg_sys::create_upper_paths_hook = Some(create_upper_paths);
    }
}

// ---- planning ---------------------------------------------------------------

/// Group key types whose equality is equality of their bytes.
const KEY_TYPES: [pg_sys::Oid; 9] = [
    pg_sys::INT2OID,
    pg_sys::INT4OID,
    pg_sys::INT8OID,
    pg_sys::BOOLOID,
    pg_sys::CHAROID,
    pg_sys::OIDOID,
    pg_sys::DATEOID,
    pg_sys::TIMESTAMPOID,
    pg_sys::TIMESTAMPTZOID,
];

/// The aggregate behind a built-in aggregate function (pg_proc OIDs are
/// fixed for built-ins).
fn agg_fn(aggfnoid: pg_sys::Oid) -> Option<AggFn> {
    Some(match aggfnoid.to_u32() {
        2803 => AggFn::CountRows,         // count(*)
        2147 => AggFn::CountValues,       // count("any")
        2108 | 2109 => AggFn::SumInt,     // sum(int4), sum(int2)
        2107 => AggFn::SumIntWide,        // sum(int8)
        2100..=2102 => AggFn::AvgInt,     // avg(int8), avg(int4), avg(int2)
        2114 => AggFn::SumNumeric,        // sum(numeric)
        2103 => AggFn::AvgNumeric,        // avg(numeric)
        _ => return None,
    })
}

/// Encodings of [`AggFn`] in plan lists.
const AGG_FNS: [AggFn; 7] =
    [AggFn::CountRows, AggFn::CountValues, AggFn::SumInt, AggFn::SumIntWide, AggFn::AvgInt, AggFn::SumNumeric, AggFn::AvgNumeric];

fn agg_code(f: AggFn) -> i32 {
    AGG_FNS.iter().position(|&g| g == f).expect("listed") as i32 + 1
}

/// One column of the node's output (its `custom_scan_tlist`).
#[derive(Clone, Copy, Debug)]
enum Out {
    /// Grouping column `i` (index into the keys).
    Key(usize),
    /// Aggregate over attribute `attno` (0 for `count(*)`).
    Agg(AggFn, i16),
}

/// A plain column of relation `relid` (not a system column), if `node` is one.
unsafe fn column_of(node: *mut pg_sys::Node, relid: u32) -> Option<*mut pg_sys::Var> {
    if node.is_null() || (*node).type_ != pg_sys::NodeTag::T_Var {
        return None;
    }
    let v = node as *mut pg_sys::Var;
    ((*v).varno as u32 == relid && (*v).varlevelsup == 0 && (*v).varattno > 0).then_some(v)
}

/// The aggregate an `Aggref` computes, if AnkerAgg can.
unsafe fn supported_agg(a: *mut pg_sys::Aggref, relid: u32) -> Option<Out> {
    let f = agg_fn((*a).aggfnoid)?;
    if !(*a).aggdistinct.is_null()
        || !(*a).aggorder.is_null()
        || !(*a).aggfilter.is_null()
        || (*a).agglevelsup != 0
        || (*a).aggkind as u8 != b'n' // AGGKIND_NORMAL
        || (*a).aggsplit != pg_sys::AggSplit::AGGSPLIT_SIMPLE
    {
        return None;
    }
    if f == AggFn::CountRows {
        return (*a).aggstar.then_some(Out::Agg(f, 0));
    }
    let args = list_cells((*a).args);
    if args.len() != 1 {
        return None;
    }
    let te = args[0].ptr_value as *mut pg_sys::TargetEntry;
    let v = column_of((*te).expr as *mut pg_sys::Node, relid)?;
    Some(Out::Agg(f, (*v).varattno))
}

/// The outputs for the Vars and Aggrefs in `exprs`, in order of first
/// appearance, with the expressions themselves; None if any is beyond us.
unsafe fn outputs(exprs: *mut pg_sys::List, relid: u32, keys: &[i16]) -> Option<Vec<(*mut pg_sys::Node, Out)>> {
    let flags = (pg_sys::PVC_INCLUDE_AGGREGATES | pg_sys::PVC_INCLUDE_WINDOWFUNCS | pg_sys::PVC_INCLUDE_PLACEHOLDERS) as i32;
    let found = pg_sys::pull_var_clause(exprs as *mut pg_sys::Node, flags);
    let mut outs: Vec<(*mut pg_sys::Node, Out)> = vec![];
    for c in list_cells(found) {
        let n = c.ptr_value as *mut pg_sys::Node;
        if outs.iter().any(|(e, _)| pg_sys::equal(*e as *const _, n as *const _)) {
            continue;
        }
        let out = match (*n).type_ {
            pg_sys::NodeTag::T_Var => {
                let v = column_of(n, relid)?;
                Out::Key(keys.iter().position(|&k| k == (*v).varattno)?)
            }
            pg_sys::NodeTag::T_Aggref => supported_agg(n as *mut pg_sys::Aggref, relid)?,
            _ => return None,
        };
        outs.push((n, out));
    }
    Some(outs)
}

/// The grouping columns, if the query groups by plain columns of key types.
unsafe fn group_keys(root: *mut pg_sys::PlannerInfo, relid: u32) -> Option<Vec<i16>> {
    let parse = (*root).parse;
    let mut keys = vec![];
    for c in list_cells((*parse).groupClause) {
        let sgc = c.ptr_value as *mut pg_sys::SortGroupClause;
        let e = pg_sys::get_sortgroupclause_expr(sgc, (*root).processed_tlist);
        let v = column_of(e, relid)?;
        if !KEY_TYPES.contains(&(*v).vartype) {
            return None;
        }
        if !keys.contains(&(*v).varattno) {
            keys.push((*v).varattno);
        }
    }
    (keys.len() <= MAX_KEYS).then_some(keys)
}

/// The table's restriction clauses, if AnkerAgg can evaluate them itself
/// on each row: only the table's own columns, no subplans, no executor
/// parameters, no security barrier quals.
unsafe fn row_quals(rel: *mut pg_sys::RelOptInfo) -> Option<*mut pg_sys::List> {
    let relid = (*rel).relid;
    let mut quals: *mut pg_sys::List = std::ptr::null_mut();
    for c in list_cells((*rel).baserestrictinfo) {
        let ri = c.ptr_value as *mut pg_sys::RestrictInfo;
        let clause = (*ri).clause as *mut pg_sys::Node;
        if (*ri).security_level > 0
            || pg_sys::contain_subplans(clause)
            || !pg_sys::pull_paramids((*ri).clause).is_null()
        {
            return None;
        }
        let vars = pg_sys::pull_var_clause(clause, 0);
        if list_cells(vars).iter().any(|v| column_of(v.ptr_value as *mut pg_sys::Node, relid).is_none()) {
            return None;
        }
        quals = pg_sys::lappend(quals, clause as *mut std::ffi::c_void);
    }
    Some(quals)
}

#[pg_guard]
unsafe extern "C-unwind" fn create_upper_paths(
    root: *mut pg_sys::PlannerInfo,
    stage: pg_sys::UpperRelationKind::Type,
    input_rel: *mut pg_sys::RelOptInfo,
    output_rel: *mut pg_sys::RelOptInfo,
    extra: *mut std::ffi::c_void,
) {
    if let Some(prev) = PREV_CREATE_UPPER_PATHS {
        prev(root, stage, input_rel, output_rel, extra);
    }
    if !ENABLE.get() || stage != pg_sys::UpperRelationKind::UPPERREL_GROUP_AGG {
        return;
    }
    let extra = extra as *mut pg_sys::GroupPathExtraData;
    let parse = (*root).parse;
    if (*input_rel).reloptkind != pg_sys::RelOptKind::RELOPT_BASEREL
        || !(*parse).groupingSets.is_null()
        || (*parse).hasTargetSRFs
        || !(*extra).havingQual.is_null()
        || (*extra).patype != pg_sys::PartitionwiseAggregateType::PARTITIONWISE_AGGREGATE_NONE
        || !(*input_rel).lateral_relids.is_null()
    {
        return;
    }
    let relid = (*input_rel).relid;
    let rte = *(*root).simple_rte_array.add(relid as usize);
    if !is_anker_rte(rte) {
        return;
    }
    let Some(keys) = group_keys(root, relid) else { return };
    if outputs((*(*output_rel).reltarget).exprs, relid, &keys).is_none() {
        return;
    }
    let Some(quals) = row_quals(input_rel) else { return };
    // Cost: a fraction of reading the table sequentially.
    let Some(seq_cost) = list_cells((*input_rel).pathlist)
        .iter()
        .map(|c| c.ptr_value as *mut pg_sys::Path)
        .filter(|&p| matches!((*p).pathtype, pg_sys::NodeTag::T_SeqScan | pg_sys::NodeTag::T_CustomScan) && (*p).param_info.is_null())
        .map(|p| (*p).total_cost)
        .reduce(f64::min)
    else {
        return;
    };
    let rows = list_cells((*output_rel).pathlist)
        .iter()
        .map(|c| (*(c.ptr_value as *mut pg_sys::Path)).rows)
        .reduce(f64::min)
        .unwrap_or(1.0);

    let cp = pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomPath>()) as *mut pg_sys::CustomPath;
    (*cp).path.type_ = pg_sys::NodeTag::T_CustomPath;
    (*cp).path.pathtype = pg_sys::NodeTag::T_CustomScan;
    (*cp).path.parent = output_rel;
    (*cp).path.pathtarget = (*output_rel).reltarget;
    (*cp).path.parallel_safe = false;
    (*cp).path.rows = rows;
    let cost = seq_cost * COST_FACTOR + rows * pg_sys::cpu_tuple_cost;
    (*cp).path.startup_cost = cost;
    (*cp).path.total_cost = cost;
    (*cp).methods = &raw const PATH_METHODS;
    let mut key_list: *mut pg_sys::List = std::ptr::null_mut();
    for k in &keys {
        key_list = pg_sys::lappend_int(key_list, *k as i32);
    }
    let oid_list = pg_sys::lappend_oid(std::ptr::null_mut(), (*rte).relid);
    let mut private = pg_sys::lappend(std::ptr::null_mut(), oid_list as *mut _);
    private = pg_sys::lappend(private, pg_sys::lappend_int(std::ptr::null_mut(), relid as i32) as *mut _);
    private = pg_sys::lappend(private, key_list as *mut _);
    private = pg_sys::lappend(private, quals as *mut _);
    (*cp).custom_private = private;
    pg_sys::add_path(output_rel, cp as *mut pg_sys::Path);
}

/// `custom_private` of the path: [relation OID (an OID list), range-table
/// index (an int list), key attnos, row quals].
///
/// `custom_private` of the plan: [relation OID (an OID list), key attnos,
/// output codes (pairs: 0 and key index, or aggregate code and attno),
/// row quals].
#[pg_guard]
unsafe extern "C-unwind" fn plan_path(
    _root: *mut pg_sys::PlannerInfo,
    _rel: *mut pg_sys::RelOptInfo,
    best_path: *mut pg_sys::CustomPath,
    tlist: *mut pg_sys::List,
    _clauses: *mut pg_sys::List,
    _custom_plans: *mut pg_sys::List,
) -> *mut pg_sys::Plan {
    let private = list_cells((*best_path).custom_private);
    let oid_list = private[0].ptr_value as *mut pg_sys::List;
    let relid = list_cells(private[1].ptr_value as *mut pg_sys::List)[0].int_value as u32;
    let key_list = private[2].ptr_value as *mut pg_sys::List;
    let keys: Vec<i16> = list_cells(key_list).iter().map(|c| c.int_value as i16).collect();
    let quals = pg_sys::copyObjectImpl(private[3].ptr_value) as *mut pg_sys::List;
    // setrefs does not see custom_private: fill in operator function OIDs.
    pg_sys::fix_opfuncids(quals as *mut pg_sys::Node);

    let mut exprs: *mut pg_sys::List = std::ptr::null_mut();
    for c in list_cells(tlist) {
        exprs = pg_sys::lappend(exprs, (*(c.ptr_value as *mut pg_sys::TargetEntry)).expr as *mut _);
    }
    let Some(outs) = outputs(exprs, relid, &keys) else {
        pgrx::error!("anker: AnkerAgg cannot compute the target list it was planned for");
    };
    let mut scan_tlist: *mut pg_sys::List = std::ptr::null_mut();
    let mut codes: *mut pg_sys::List = std::ptr::null_mut();
    for (i, (e, out)) in outs.iter().enumerate() {
        let te = pg_sys::makeTargetEntry(*e as *mut pg_sys::Expr, (i + 1) as i16, std::ptr::null_mut(), false);
        scan_tlist = pg_sys::lappend(scan_tlist, te as *mut _);
        let (a, b) = match *out {
            Out::Key(k) => (0, k as i32),
            Out::Agg(f, attno) => (agg_code(f), attno as i32),
        };
        codes = pg_sys::lappend_int(pg_sys::lappend_int(codes, a), b);
    }

    let cs = pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomScan>()) as *mut pg_sys::CustomScan;
    (*cs).scan.plan.type_ = pg_sys::NodeTag::T_CustomScan;
    (*cs).scan.plan.targetlist = tlist;
    (*cs).scan.scanrelid = 0;
    (*cs).custom_scan_tlist = scan_tlist;
    (*cs).methods = &raw const SCAN_METHODS;
    let mut p = pg_sys::lappend(std::ptr::null_mut(), oid_list as *mut _);
    p = pg_sys::lappend(p, key_list as *mut _);
    p = pg_sys::lappend(p, codes as *mut _);
    p = pg_sys::lappend(p, quals as *mut _);
    (*cs).custom_private = p;
    cs as *mut pg_sys::Plan
}

// ---- execution ---------------------------------------------------------------

/// Executor state; `css` must come first. Plain data in palloc'd memory:
/// the Rust-side group table lives only inside [`aggregate`], so an error
/// leaks nothing.
#[repr(C)]
struct State {
    css: pg_sys::CustomScanState,
    rel: pg_sys::Relation,
    /// Rows of the table read the slow way land here.
    row_slot: *mut pg_sys::TupleTableSlot,
    qual: *mut pg_sys::ExprState,
    /// One flag per attribute: read by the scan.
    wanted: *mut bool,
    natts: usize,
    snap: SnapChoice,
    done: bool,
    /// Results: `ngroups` rows of `nout` datums and null flags.
    values: *mut pg_sys::Datum,
    nulls: *mut bool,
    nout: usize,
    ngroups: usize,
    next: usize,
    /// For EXPLAIN ANALYZE: rows aggregated, and how many of them came
    /// straight from clean blocks.
    rows: u64,
    rows_clean: u64,
}

unsafe fn private_list(cscan: *mut pg_sys::CustomScan, i: usize) -> *mut pg_sys::List {
    list_cells((*cscan).custom_private)[i].ptr_value as *mut pg_sys::List
}

#[pg_guard]
unsafe extern "C-unwind" fn create_state(cscan: *mut pg_sys::CustomScan) -> *mut pg_sys::Node {
    let s = pg_sys::palloc0(std::mem::size_of::<State>()) as *mut State;
    (*s).css.ss.ps.type_ = pg_sys::NodeTag::T_CustomScanState;
    (*s).css.methods = &raw const EXEC_METHODS;
    (*s).css.flags = (*cscan).flags;
    s as *mut pg_sys::Node
}

#[pg_guard]
unsafe extern "C-unwind" fn begin(node: *mut pg_sys::CustomScanState, estate: *mut pg_sys::EState, _eflags: i32) {
    let s = node as *mut State;
    let cscan = (*node).ss.ps.plan as *mut pg_sys::CustomScan;
    let oid = list_cells(private_list(cscan, 0))[0].oid_value;
    // The executor already holds the range table's locks and checked
    // permissions on this relation (it is in the range table).
    let rel = pg_sys::table_open(oid, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    (*s).rel = rel;
    (*s).row_slot = pg_sys::ExecAllocTableSlot(&mut (*estate).es_tupleTable, (*rel).rd_att, crate::tam::slot::ops());
    let quals = private_list(cscan, 3);
    (*s).qual = pg_sys::ExecInitQual(quals, &mut (*node).ss.ps);
    let natts = (*(*rel).rd_att).natts as usize;
    let wanted = pg_sys::palloc0(natts.max(1)) as *mut bool;
    let want = |attno: i32| {
        if attno >= 1 && attno as usize <= natts {
            *wanted.add(attno as usize - 1) = true;
        }
    };
    for c in list_cells(private_list(cscan, 1)) {
        want(c.int_value);
    }
    for pair in list_cells(private_list(cscan, 2)).chunks(2) {
        if pair[0].int_value != 0 {
            want(pair[1].int_value);
        }
    }
    let mut qual_attrs: *mut pg_sys::Bitmapset = std::ptr::null_mut();
    let mut m = -1;
    // (the quals' Vars carry the planner's range-table index; any index
    // will do for collecting attribute numbers: take them from the first)
    let vars = pg_sys::pull_var_clause(quals as *mut pg_sys::Node, 0);
    if let Some(first) = list_cells(vars).first() {
        let varno = (*(first.ptr_value as *mut pg_sys::Var)).varno as pg_sys::Index;
        pg_sys::pull_varattnos(quals as *mut pg_sys::Node, varno, &mut qual_attrs);
    }
    loop {
        m = pg_sys::bms_next_member(qual_attrs, m);
        if m < 0 {
            break;
        }
        want(m + pg_sys::FirstLowInvalidHeapAttributeNumber);
    }
    (*s).wanted = wanted;
    (*s).natts = natts;
    (*s).snap = SnapChoice::for_statement(estate, rel);
}

/// How an aggregate reads its input.
#[derive(Clone, Copy)]
enum Input {
    Rows,
    NotNull(usize),
    /// An integer attribute and its width in bytes.
    Int(usize, usize),
    Numeric(usize),
}

/// The row consumer: keys and inputs to the group table.
struct Aggregator {
    groups: Groups,
    /// Grouping attributes (0-based) and widths.
    keys: Vec<(usize, usize)>,
    inputs: Vec<Input>,
    qual: *mut pg_sys::ExprState,
    econtext: *mut pg_sys::ExprContext,
    rows: u64,
    rows_clean: u64,
    /// Rows the quals were evaluated on.
    evaluated: u64,
}

/// Sign-extend a `width`-byte integer.
#[inline]
fn widen(v: u64, width: usize) -> i64 {
    match width {
        1 => v as u8 as i8 as i64,
        2 => v as u16 as i16 as i64,
        4 => v as u32 as i32 as i64,
        _ => v as i64,
    }
}

/// An integer stored in a column page.
#[inline]
unsafe fn read_int(p: *const u8, width: usize) -> i64 {
    match width {
        1 => *p as i8 as i64,
        2 => (p as *const i16).read_unaligned() as i64,
        4 => (p as *const i32).read_unaligned() as i64,
        _ => (p as *const i64).read_unaligned(),
    }
}

/// The payload of an in-memory varlena (after its 1- or 4-byte header).
#[inline]
unsafe fn varlena_payload<'a>(p: *const u8) -> &'a [u8] {
    let total = datum::varsize_any(p);
    let header = if *p & 0x01 == 0x01 { 1 } else { 4 };
    std::slice::from_raw_parts(p.add(header), total.saturating_sub(header))
}

fn numeric_from(payload: &[u8]) -> Numeric<'_> {
    match parse_numeric(payload) {
        Some(n) => n,
        None => {
            ereport!(ERROR, PgSqlErrorCode::ERRCODE_DATA_CORRUPTED, "anker: a stored numeric value is malformed");
        }
    }
}

impl RowSink for Aggregator {
    fn takes_blocks(&self) -> bool {
        self.qual.is_null()
    }

    fn clean(&mut self, r: &mut Reader, t: &Table, rows: std::ops::Range<u64>) {
        self.rows += rows.end - rows.start;
        self.rows_clean += rows.end - rows.start;
        for row in rows {
            let mut key = Key::default();
            for (k, &(att, width)) in self.keys.iter().enumerate() {
                match r.value(t, att, row) {
                    // SAFETY: key columns are fixed-width integers.
                    ValueRef::Fixed(p) => key.values[k] = unsafe { read_int(p, width) },
                    _ => key.nulls |= 1 << k,
                }
            }
            let g = self.groups.group(key);
            let accs = self.groups.accs_mut(g);
            for (acc, inp) in accs.iter_mut().zip(&self.inputs) {
                match *inp {
                    Input::Rows => acc.add_count(),
                    Input::NotNull(att) => {
                        if r.value(t, att, row) != ValueRef::Null {
                            acc.add_count()
                        }
                    }
                    Input::Int(att, width) => {
                        if let ValueRef::Fixed(p) = r.value(t, att, row) {
                            // SAFETY: an integer column's element.
                            acc.add_int(unsafe { read_int(p, width) })
                        }
                    }
                    Input::Numeric(att) => {
                        // SAFETY: inline slots hold a short varlena, blobs a
                        // 4-byte-header one; snapshot pages are frozen.
                        let payload = match r.value(t, att, row) {
                            ValueRef::Inline(p) | ValueRef::Blob(p, _) => unsafe { varlena_payload(p) },
                            _ => continue,
                        };
                        acc.add_numeric(numeric_from(payload));
                    }
                }
            }
        }
    }

    fn row(&mut self, slot: *mut pg_sys::TupleTableSlot) {
        // SAFETY: slot is the anker slot of the scanned relation, filled
        // with (at least) the attributes we read.
        unsafe {
            if !self.qual.is_null() && !self.passes(slot) {
                return;
            }
            self.rows += 1;
            let values = (*slot).tts_values;
            let nulls = (*slot).tts_isnull;
            let mut key = Key::default();
            for (k, &(att, width)) in self.keys.iter().enumerate() {
                if *nulls.add(att) {
                    key.nulls |= 1 << k;
                } else {
                    key.values[k] = widen((*values.add(att)).value() as u64, width);
                }
            }
            let g = self.groups.group(key);
            let accs = self.groups.accs_mut(g);
            for (acc, inp) in accs.iter_mut().zip(&self.inputs) {
                match *inp {
                    Input::Rows => acc.add_count(),
                    Input::NotNull(att) => {
                        if !*nulls.add(att) {
                            acc.add_count()
                        }
                    }
                    Input::Int(att, width) => {
                        if !*nulls.add(att) {
                            acc.add_int(widen((*values.add(att)).value() as u64, width))
                        }
                    }
                    Input::Numeric(att) => {
                        if !*nulls.add(att) {
                            let payload = varlena_payload((*values.add(att)).cast_mut_ptr::<u8>());
                            acc.add_numeric(numeric_from(payload));
                        }
                    }
                }
            }
        }
    }
}

/// Rows between resets of the quals' per-row memory.
const QUAL_RESET_ROWS: u64 = 1024;

impl Aggregator {
    /// Evaluate the WHERE clauses on the row in `slot` (ExecQual).
    unsafe fn passes(&mut self, slot: *mut pg_sys::TupleTableSlot) -> bool {
        let econtext = self.econtext;
        (*econtext).ecxt_scantuple = slot;
        let per_row = (*econtext).ecxt_per_tuple_memory;
        let old = pg_sys::CurrentMemoryContext;
        pg_sys::CurrentMemoryContext = per_row;
        let mut isnull = false;
        let qual = self.qual;
        let eval = (*qual).evalfunc.expect("compiled expression");
        // SAFETY: a PostgreSQL error in the expression becomes a Rust panic
        // here, unwinding through our frames (no longjmp across them).
        let d = pg_sys::ffi::pg_guard_ffi_boundary(|| eval(qual, econtext, &mut isnull));
        pg_sys::CurrentMemoryContext = old;
        self.evaluated += 1;
        if self.evaluated.is_multiple_of(QUAL_RESET_ROWS) {
            pg_sys::MemoryContextReset(per_row);
        }
        !isnull && d.value() != 0
    }
}

/// Run the scan and compute every group's results into `s.values`/`s.nulls`.
unsafe fn aggregate(s: *mut State) {
    let node = s as *mut pg_sys::CustomScanState;
    let estate = (*node).ss.ps.state;
    let cscan = (*node).ss.ps.plan as *mut pg_sys::CustomScan;
    let rel = (*s).rel;
    let atts = datum::attrs((*rel).rd_att);
    let width = |att: usize| atts[att].attlen as usize;
    let keys: Vec<(usize, usize)> = list_cells(private_list(cscan, 1))
        .iter()
        .map(|c| {
            let att = c.int_value as usize - 1;
            (att, width(att))
        })
        .collect();
    let outs: Vec<Out> = list_cells(private_list(cscan, 2))
        .chunks(2)
        .map(|p| match p[0].int_value {
            0 => Out::Key(p[1].int_value as usize),
            code => Out::Agg(AGG_FNS[code as usize - 1], p[1].int_value as i16),
        })
        .collect();
    let mut funcs = vec![];
    let mut inputs = vec![];
    for out in &outs {
        if let Out::Agg(f, attno) = *out {
            let att = (attno.max(1) - 1) as usize;
            funcs.push(f);
            inputs.push(match f {
                AggFn::CountRows => Input::Rows,
                AggFn::CountValues => Input::NotNull(att),
                _ if f.takes_numeric() => Input::Numeric(att),
                _ => Input::Int(att, width(att)),
            });
        }
    }
    let mut agg = Aggregator {
        groups: Groups::new(&funcs, !keys.is_empty()),
        keys,
        inputs,
        qual: (*s).qual,
        econtext: (*node).ss.ps.ps_ExprContext,
        rows: 0,
        rows_clean: 0,
        evaluated: 0,
    };

    let snapshot = (*estate).es_snapshot;
    let flags = pg_sys::ScanOptions::SO_TYPE_SEQSCAN | pg_sys::ScanOptions::SO_ALLOW_PAGEMODE;
    let sd = scan::scan_begin(rel, snapshot, 0, std::ptr::null_mut(), std::ptr::null_mut(), flags);
    let wanted = std::slice::from_raw_parts((*s).wanted, (*s).natts);
    scan::restrict_scan(sd, wanted);
    let cols: Vec<usize> = (0..wanted.len()).filter(|&i| wanted[i]).collect();
    if let Some(a) = (*s).snap.take(rel, &cols, snapshot) {
        scan::use_snapshot(sd, a.snap);
    }
    scan::scan_rows(sd, (*s).row_slot, &mut agg);
    scan::scan_end(sd);
    (*s).rows = agg.rows;
    (*s).rows_clean = agg.rows_clean;

    // Results, in the query's memory: they outlive this call.
    let old = pg_sys::CurrentMemoryContext;
    pg_sys::CurrentMemoryContext = (*estate).es_query_cxt;
    let groups = &agg.groups;
    let (n, nout) = (groups.len(), outs.len());
    let values = pg_sys::palloc0((n * nout).max(1) * std::mem::size_of::<pg_sys::Datum>()) as *mut pg_sys::Datum;
    let nulls = pg_sys::palloc0((n * nout).max(1)) as *mut bool;
    for g in 0..n {
        let mut a = 0;
        for (i, out) in outs.iter().enumerate() {
            let at = g * nout + i;
            let d = match *out {
                Out::Key(k) => {
                    let key = groups.key(g);
                    (key.nulls & (1 << k) == 0).then(|| pg_sys::Datum::from(key.values[k] as usize))
                }
                Out::Agg(..) => {
                    a += 1;
                    to_datum(groups.output(g, a - 1))
                }
            };
            match d {
                Some(d) => *values.add(at) = d,
                None => *nulls.add(at) = true,
            }
        }
    }
    pg_sys::CurrentMemoryContext = old;
    (*s).values = values;
    (*s).nulls = nulls;
    (*s).nout = nout;
    (*s).ngroups = n;
}

/// PostgreSQL's numeric input and division, called through
/// `DirectFunctionCall` (pgrx's `pg_sys` versions are Rust wrappers, not
/// the C entry points fmgr needs).
mod numeric_fns {
    use pgrx::pg_sys::{Datum, FunctionCallInfo};
    extern "C-unwind" {
        pub fn numeric_in(fcinfo: FunctionCallInfo) -> Datum;
        pub fn numeric_div(fcinfo: FunctionCallInfo) -> Datum;
    }
}

/// A numeric datum from its literal.
unsafe fn numeric_datum(literal: &str) -> pg_sys::Datum {
    let text = std::ffi::CString::new(literal).expect("no NUL in a number");
    pg_sys::DirectFunctionCall3Coll(
        Some(numeric_fns::numeric_in),
        pg_sys::InvalidOid,
        pg_sys::Datum::from(text.as_ptr()),
        pg_sys::Datum::from(pg_sys::InvalidOid),
        pg_sys::Datum::from(-1i32),
    )
}

unsafe fn to_datum(o: Output) -> Option<pg_sys::Datum> {
    match o {
        Output::Null => None,
        Output::Int(v) => Some(pg_sys::Datum::from(v)),
        Output::Numeric(lit) => Some(numeric_datum(&lit)),
        Output::Quotient(sum, n) => {
            let count = pg_sys::Datum::from(pg_sys::int64_to_numeric(n));
            Some(pg_sys::DirectFunctionCall2Coll(Some(numeric_fns::numeric_div), pg_sys::InvalidOid, numeric_datum(&sum), count))
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn next(ss: *mut pg_sys::ScanState) -> *mut pg_sys::TupleTableSlot {
    let s = ss as *mut State;
    if !(*s).done {
        aggregate(s);
        (*s).done = true;
    }
    let slot = (*ss).ss_ScanTupleSlot;
    pg_sys::ExecClearTuple(slot);
    if (*s).next >= (*s).ngroups {
        return slot;
    }
    let at = (*s).next * (*s).nout;
    for i in 0..(*s).nout {
        *(*slot).tts_values.add(i) = *(*s).values.add(at + i);
        *(*slot).tts_isnull.add(i) = *(*s).nulls.add(at + i);
    }
    (*s).next += 1;
    pg_sys::ExecStoreVirtualTuple(slot)
}

#[pg_guard]
unsafe extern "C-unwind" fn recheck(_ss: *mut pg_sys::ScanState, _slot: *mut pg_sys::TupleTableSlot) -> bool {
    true
}

#[pg_guard]
unsafe extern "C-unwind" fn exec(node: *mut pg_sys::CustomScanState) -> *mut pg_sys::TupleTableSlot {
    pg_sys::ExecScan(&mut (*node).ss, Some(next), Some(recheck))
}

#[pg_guard]
unsafe extern "C-unwind" fn end(node: *mut pg_sys::CustomScanState) {
    let s = node as *mut State;
    if !(*s).rel.is_null() {
        pg_sys::table_close((*s).rel, pg_sys::NoLock as pg_sys::LOCKMODE);
        (*s).rel = std::ptr::null_mut();
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn rescan(node: *mut pg_sys::CustomScanState) {
    // Nothing the node reads can change within the statement (no executor
    // parameters): return the same groups again.
    (*(node as *mut State)).next = 0;
    pg_sys::ExecScanReScan(&mut (*node).ss);
}

#[pg_guard]
unsafe extern "C-unwind" fn explain(node: *mut pg_sys::CustomScanState, _ancestors: *mut pg_sys::List, es: *mut pg_sys::ExplainState) {
    let s = node as *mut State;
    let name = CStr::from_ptr((*(*s).rel).rd_rel.as_ref().expect("relation").relname.data.as_ptr());
    pg_sys::ExplainPropertyText(c"Table".as_ptr(), name.as_ptr(), es);
    explain_columns((*s).rel, std::slice::from_raw_parts((*s).wanted, (*s).natts), es);
    (*s).snap.explain(es);
    if (*es).analyze && (*s).done {
        pg_sys::ExplainPropertyInteger(c"Rows Aggregated".as_ptr(), std::ptr::null(), (*s).rows as i64, es);
        pg_sys::ExplainPropertyInteger(c"Rows From Clean Blocks".as_ptr(), std::ptr::null(), (*s).rows_clean as i64, es);
    }
}
