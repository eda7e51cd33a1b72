//! Handing a query to DuckDB: at plan time, decide whether DuckDB answers it exactly as
//! PostgreSQL would, and if so plan it as one `AnkerDuckDB` custom scan.
//!
//! A query is taken only when every node of it is on a list whose semantics match in both
//! engines (types, operators, functions, aggregates; see [`Check`]), every table it reads
//! is an anker table, and DuckDB, preparing the deparsed text (`pg_get_querydef`), reports
//! result types that convert exactly to the ones PostgreSQL planned. Anything else is left
//! to PostgreSQL, and the reason is kept for EXPLAIN ([`Refusal`]).

use super::duckdb::{self as ddb, LogicalType};
use super::avg;
use super::scan::{self, Input, Kind};
use super::{engine, give_back, keep_ready, session, Engine, Ready};
use crate::scan_node::{list_cells, node_list};
use crate::tam;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::collections::{BTreeSet, HashMap};
use std::ffi::CStr;

extern "C-unwind" {
    // utils/pg_locale.h; not in pgrx's bindings.
    fn lc_collate_is_c(collation: pg_sys::Oid) -> bool;
}

static mut PREV_PLANNER: pg_sys::planner_hook_type = None;

/// Why the last query planned with `anker.olap_engine = duckdb` stayed in PostgreSQL.
static mut LAST_REFUSAL: Option<Refusal> = None;

enum Refusal {
    /// What the check or the translation found.
    Reason(String),
    /// PostgreSQL's plan cost `cost`, less than `min_cost` (`anker.olap_min_cost`). Most
    /// OLTP statements end here, so EXPLAIN, not the planner, finds out whether the
    /// query reads an anker table (only then is the reason told) and words it.
    TooCheap { cost: f64, min_cost: f64 },
}

static mut PREV_EXPLAIN: pg_sys::ExplainOneQuery_hook_type = None;

pub fn install() {
    // SAFETY: hook chaining during postmaster start-up.
    unsafe {
        PREV_PLANNER = pg_sys::planner_hook;
        pg_sys::planner_hook = Some(plan);
        PREV_EXPLAIN = pg_sys::ExplainOneQuery_hook;
        pg_sys::ExplainOneQuery_hook = Some(explain_one);
    }
}

/// EXPLAIN of a query planned with `anker.olap_engine = duckdb` that stayed in
/// PostgreSQL ends with the reason (text format): what PostgreSQL's own ExplainOneQuery
/// does, then one line. Planning and EXPLAIN ANALYZE's execution run user code, so this
/// frame calls them through `pg_raw` and has no guard, as [`plan`].
unsafe extern "C-unwind" fn explain_one(
    query: *mut pg_sys::Query,
    cursor_options: i32,
    into: *mut pg_sys::IntoClause,
    es: *mut pg_sys::ExplainState,
    query_string: *const std::ffi::c_char,
    params: pg_sys::ParamListInfo,
    query_env: *mut pg_sys::QueryEnvironment,
) {
    if let Some(prev) = PREV_EXPLAIN {
        return prev(query, cursor_options, into, es, query_string, params, query_env);
    }
    *(&raw mut LAST_REFUSAL) = None;
    // As PostgreSQL's ExplainOneQuery: planning time and, with BUFFERS, planning's buffers.
    let buffers_before = *(&raw const pg_sys::pgBufferUsage);
    let started = std::time::Instant::now();
    let stmt = crate::pg_raw::pg_plan_query(query, query_string, cursor_options, params);
    let took = started.elapsed();
    let planning = pg_sys::instr_time { tv_sec: took.as_secs() as _, tv_nsec: took.subsec_nanos() as _ };
    let buffers = buffers_since(&buffers_before);
    let buffers = if (*es).buffers { &buffers as *const pg_sys::BufferUsage } else { std::ptr::null() };
    crate::pg_raw::explain_one_plan(stmt, into, es, query_string, params, query_env, &planning, buffers);
    explain_refusal(stmt, es);
}

#[pg_guard]
unsafe extern "C-unwind" fn buffers_since(before: &pg_sys::BufferUsage) -> pg_sys::BufferUsage {
    let mut buffers = pg_sys::BufferUsage::default();
    pg_sys::BufferUsageAccumDiff(&mut buffers, &raw const pg_sys::pgBufferUsage, before);
    buffers
}

/// The line EXPLAIN of a query DuckDB did not take ends with.
#[pg_guard]
unsafe extern "C-unwind" fn explain_refusal(stmt: *mut pg_sys::PlannedStmt, es: *mut pg_sys::ExplainState) {
    let reason = match &*(&raw const LAST_REFUSAL) {
        Some(Refusal::Reason(r)) => Some(r.clone()),
        Some(Refusal::TooCheap { cost, min_cost }) if reads_anker_tables(stmt) => Some(format!(
            "PostgreSQL's plan costs {cost:.0}, less than DuckDB's start-up is worth (anker.olap_min_cost = {min_cost})"
        )),
        _ => None,
    };
    if let Some(reason) = reason {
        if (*es).format == pg_sys::ExplainFormat::EXPLAIN_FORMAT_TEXT {
            let line = super::duckdb::cstring(&format!("DuckDB not used: {reason}\n"));
            pg_sys::appendStringInfoString((*es).str_, line.as_ptr());
        }
    }
}

/// Plans a query: PostgreSQL's planner, then, with `anker.olap_engine = duckdb`, the
/// hand-over ([`hand_over`]). The planner runs user code (stable functions evaluated for
/// estimates, SQL functions inlined), and an ERROR there must reach PostgreSQL as raised:
/// through pgrx's guard it lost its CONTEXT lines, for every query of the cluster. So this
/// frame has no guard and calls the planner through `pg_raw` (see there); it holds nothing
/// an ERROR's `longjmp` would skip.
unsafe extern "C-unwind" fn plan(
    parse: *mut pg_sys::Query,
    query_string: *const std::ffi::c_char,
    cursor_options: i32,
    bound_params: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    let standard = |q: *mut pg_sys::Query| match PREV_PLANNER {
        Some(prev) => prev(q, query_string, cursor_options, bound_params),
        None => crate::pg_raw::standard_planner(q, query_string, cursor_options, bound_params),
    };
    if engine() != Engine::DuckDb || !crate::shmem::is_loaded() || (*parse).commandType != pg_sys::CmdType::CMD_SELECT {
        return standard(parse);
    }
    *(&raw mut LAST_REFUSAL) = None;
    // PostgreSQL plans the query first: its PlannedStmt carries the flattened range table
    // (permission checks, locks) and the relation and function dependencies (plan
    // invalidation), and its plan the join order DuckDB is told to follow. Only the plan
    // tree is replaced. It plans a copy: the check and the translation read the query as
    // parsed.
    let stmt = standard(copy_query(parse));
    hand_over(parse, cursor_options, bound_params, stmt)
}

#[pg_guard]
unsafe extern "C-unwind" fn copy_query(parse: *mut pg_sys::Query) -> *mut pg_sys::Query {
    pg_sys::copyObjectImpl(parse as *const std::ffi::c_void) as *mut pg_sys::Query
}

/// The plan tree of `stmt`, PostgreSQL's plan of `parse`, replaced by a DuckDB node when
/// DuckDB can take the query (docs/analytics.md, the rules); else why not, for EXPLAIN.
#[pg_guard]
unsafe extern "C-unwind" fn hand_over(
    parse: *mut pg_sys::Query,
    cursor_options: i32,
    bound_params: pg_sys::ParamListInfo,
    stmt: *mut pg_sys::PlannedStmt,
) -> *mut pg_sys::PlannedStmt {
    let pg_plan = (*stmt).planTree;
    if (*pg_plan).total_cost < super::min_cost() {
        // Too cheap to hand over, whatever the check would say: OLTP statements end here
        // unchecked (checking them took 3.5 % of TPC-C Payment's CPU, whose PL/pgSQL
        // plans some statements again at every execution).
        *(&raw mut LAST_REFUSAL) = Some(Refusal::TooCheap { cost: (*pg_plan).total_cost, min_cost: super::min_cost() });
        return stmt;
    }
    let mut check = Check { top_outputs: true, params: bound_params, ..Default::default() };
    check.query(parse);
    let split = if check.reason.is_none() { check.split_outputs(parse) } else { None };
    check.check_avg_outputs();
    if cursor_options & pg_sys::CURSOR_OPT_SCROLL as i32 != 0 {
        check.refuse("a scrollable cursor (DuckDB's results are read forward only)");
    }
    if check.tables.is_empty() && check.reason.is_none() {
        return stmt; // no anker table: not ours to judge
    }
    if let Some(r) = check.reason.take() {
        *(&raw mut LAST_REFUSAL) = Some(Refusal::Reason(r));
        return stmt;
    }
    if let Some(r) = cheaper_by_index(&check, stmt) {
        *(&raw mut LAST_REFUSAL) = Some(Refusal::Reason(r));
        return stmt;
    }
    if check.generic {
        // DuckDB gets parameters as constants, so it takes only the custom plans of a
        // prepared statement. PostgreSQL's plan cache switches to the generic plan after
        // five custom ones when that costs no more than they did on average
        // (choose_custom_plan): this cost keeps it with the custom plans.
        (*pg_plan).total_cost += GENERIC_PLAN_PENALTY;
        *(&raw mut LAST_REFUSAL) = Some(Refusal::Reason("a generic plan of a prepared statement (DuckDB takes its custom plans, where parameters are values)".into()));
        return stmt;
    }
    match prepare(parse, &check, split.expect("checked"), stmt) {
        Ok(handover) => {
            let cscan = super::node::plan_node(&handover);
            (*cscan).scan.plan.startup_cost = (*pg_plan).startup_cost;
            (*cscan).scan.plan.total_cost = (*pg_plan).total_cost;
            (*cscan).scan.plan.plan_rows = (*pg_plan).plan_rows;
            (*cscan).scan.plan.plan_width = (*pg_plan).plan_width;
            (*stmt).planTree = cscan as *mut pg_sys::Plan;
            (*stmt).subplans = std::ptr::null_mut();
            (*stmt).parallelModeNeeded = false;
            (*stmt).jitFlags = 0;
        }
        Err(reason) => *(&raw mut LAST_REFUSAL) = Some(Refusal::Reason(reason)),
    }
    stmt
}

// pg_proc and pg_operator OIDs (fixed in PostgreSQL's catalog data).
const F_SUM_INT2: u32 = 2109;
const F_SUM_INT4: u32 = 2108;
const F_SUM_INT8: u32 = 2107;
const F_SUM_NUMERIC: u32 = 2114;
const F_COUNT_ANY: u32 = 2147;
const F_NUMERIC_INT8: u32 = 1781;
const F_NUMERIC_DIV: u32 = 1727;
const OP_NUMERIC_DIV: u32 = 1761;

const F_ROUND_NUMERIC_INT4: u32 = 1707;
const F_INT8GT: u32 = 470;
const OP_INT8GT: u32 = 413;

/// `sum(CASE …)` over numerics whose branches have known, different scales: the CASE and
/// its branches' scales (ascending), if `e` is one.
unsafe fn mixed_case_sum(e: *mut pg_sys::Node) -> Option<(*mut pg_sys::CaseExpr, Vec<u32>)> {
    let a = &*(e as *mut pg_sys::Aggref);
    if CStr::from_ptr(pg_sys::get_func_name(a.aggfnoid)).to_bytes() != b"sum" || a.aggtype != pg_sys::NUMERICOID || !a.aggdistinct.is_null() {
        return None;
    }
    let arg = (*(list_cells(a.args).first()?.ptr_value as *mut pg_sys::TargetEntry)).expr as *mut pg_sys::Node;
    if (*arg).type_ != pg_sys::NodeTag::T_CaseExpr || branch_scales(arg).is_some() {
        return None;
    }
    let c = arg as *mut pg_sys::CaseExpr;
    let mut branches: Vec<*mut pg_sys::Node> = list_cells((*c).args).iter().map(|w| (*(w.ptr_value as *mut pg_sys::CaseWhen)).result as *mut pg_sys::Node).collect();
    branches.push((*c).defresult as *mut pg_sys::Node);
    let mut scales = vec![];
    for b in branches {
        if b.is_null() {
            continue;
        }
        if let Some(x) = numeric_scale(b)? {
            scales.push(x);
        }
    }
    scales.sort_unstable();
    scales.dedup();
    (scales.len() >= 2).then_some((c, scales))
}

/// `round(x, scale)` (numeric, int4).
unsafe fn round_numeric(x: *mut pg_sys::Node, scale: u32) -> *mut pg_sys::Node {
    let s = pg_sys::makeConst(pg_sys::INT4OID, -1, pg_sys::InvalidOid, 4, pg_sys::Datum::from(scale as i32), false, true);
    let args = pg_sys::lappend(pg_sys::lappend(std::ptr::null_mut(), x as *mut std::ffi::c_void), s as *mut std::ffi::c_void);
    pg_sys::makeFuncExpr(pg_sys::Oid::from(F_ROUND_NUMERIC_INT4), pg_sys::NUMERICOID, args, pg_sys::InvalidOid, pg_sys::InvalidOid, pg_sys::CoercionForm::COERCE_EXPLICIT_CALL) as *mut pg_sys::Node
}

/// `n > 0` for an int8 `n`.
unsafe fn int8_positive(n: *mut pg_sys::Node) -> *mut pg_sys::Node {
    let zero = pg_sys::makeConst(pg_sys::INT8OID, -1, pg_sys::InvalidOid, 8, pg_sys::Datum::from(0i64), false, true);
    let gt = pg_sys::palloc0(std::mem::size_of::<pg_sys::OpExpr>()) as *mut pg_sys::OpExpr;
    (*gt).xpr.type_ = pg_sys::NodeTag::T_OpExpr;
    (*gt).opno = pg_sys::Oid::from(OP_INT8GT);
    (*gt).opfuncid = pg_sys::Oid::from(F_INT8GT);
    (*gt).opresulttype = pg_sys::BOOLOID;
    (*gt).args = pg_sys::lappend(pg_sys::lappend(std::ptr::null_mut(), n as *mut std::ffi::c_void), zero as *mut std::ffi::c_void);
    (*gt).location = -1;
    gt as *mut pg_sys::Node
}

/// `CASE WHEN cond THEN then ELSE otherwise END` over numerics.
unsafe fn case_when(cond: *mut pg_sys::Node, then: *mut pg_sys::Node, otherwise: *mut pg_sys::Node) -> *mut pg_sys::Node {
    let w = pg_sys::palloc0(std::mem::size_of::<pg_sys::CaseWhen>()) as *mut pg_sys::CaseWhen;
    (*w).xpr.type_ = pg_sys::NodeTag::T_CaseWhen;
    (*w).expr = cond as *mut pg_sys::Expr;
    (*w).result = then as *mut pg_sys::Expr;
    (*w).location = -1;
    let c = pg_sys::palloc0(std::mem::size_of::<pg_sys::CaseExpr>()) as *mut pg_sys::CaseExpr;
    (*c).xpr.type_ = pg_sys::NodeTag::T_CaseExpr;
    (*c).casetype = pg_sys::NUMERICOID;
    (*c).args = pg_sys::lappend(std::ptr::null_mut(), w as *mut std::ffi::c_void);
    (*c).defresult = otherwise as *mut pg_sys::Expr;
    (*c).location = -1;
    c as *mut pg_sys::Node
}

/// A reference to leaf number `k` (from 1) of DuckDB's result.
unsafe fn leaf_var(e: *mut pg_sys::Node, k: usize) -> *mut pg_sys::Node {
    pg_sys::makeVar(pg_sys::INDEX_VAR, k as i16, pg_sys::exprType(e), pg_sys::exprTypmod(e), pg_sys::exprCollation(e), 0) as *mut pg_sys::Node
}

/// Does the planned statement read an anker table (its flattened range table names one)?
unsafe fn reads_anker_tables(stmt: *mut pg_sys::PlannedStmt) -> bool {
    list_cells((*stmt).rtable).iter().any(|c| crate::scan_node::is_anker_rte(c.ptr_value as *mut pg_sys::RangeTblEntry))
}

/// A query DuckDB takes: its text and the anker tables it reads.
pub struct Handover {
    pub sql: String,
    pub tables: Vec<Table>,
    /// The FROM list follows PostgreSQL's join order, which DuckDB keeps.
    pub ordered: bool,
    /// DuckDB's result columns: type, type modifier, collation.
    pub leaves: Vec<(pg_sys::Oid, i32, pg_sys::Oid)>,
    /// The query's columns: an expression over the leaves (`Var`s of INDEX_VAR, numbered
    /// from 1) that PostgreSQL computes, and the column's name.
    pub outputs: Vec<(*mut pg_sys::Node, *mut std::ffi::c_char)>,
    /// The token of the query DuckDB prepared for this plan (`super::keep_ready`).
    pub ready: i32,
}

/// The query's columns split between the engines: DuckDB computes the leaves, PostgreSQL
/// the rest of each column's expression over them (`avg`, numeric division, …).
struct Split {
    /// Expression, sort/group reference, name.
    leaves: Vec<(*mut pg_sys::Node, u32, *mut std::ffi::c_char)>,
    outputs: Vec<(*mut pg_sys::Node, *mut std::ffi::c_char)>,
}

/// An anker table the query reads.
pub struct Table {
    pub relid: pg_sys::Oid,
    /// The name the query text uses.
    pub name: String,
    /// Attributes read (0-based).
    pub atts: Vec<usize>,
    /// Attributes whose infinite values DuckDB cannot take (under EXTRACT).
    pub finite: Vec<usize>,
}

/// Does the plan read an index (DuckDB has none)?
unsafe fn plan_uses_index(plan: *mut pg_sys::Plan) -> bool {
    use pg_sys::NodeTag::*;
    if plan.is_null() {
        return false;
    }
    matches!((*plan).type_, T_IndexScan | T_IndexOnlyScan | T_BitmapIndexScan)
        || plan_uses_index((*plan).lefttree)
        || plan_uses_index((*plan).righttree)
        || ((*plan).type_ == T_BitmapAnd || (*plan).type_ == T_BitmapOr) && {
            let l = if (*plan).type_ == T_BitmapAnd { (*(plan as *mut pg_sys::BitmapAnd)).bitmapplans } else { (*(plan as *mut pg_sys::BitmapOr)).bitmapplans };
            list_cells(l).iter().any(|c| plan_uses_index(c.ptr_value as *mut pg_sys::Plan))
        }
        || (*plan).type_ == T_Append && list_cells((*(plan as *mut pg_sys::Append)).appendplans).iter().any(|c| plan_uses_index(c.ptr_value as *mut pg_sys::Plan))
}

/// Added to the cost of a generic plan DuckDB would have taken with the parameters' values:
/// PostgreSQL's `disable_cost`, which no real plan approaches.
const GENERIC_PLAN_PENALTY: f64 = 1.0e10;

/// Why PostgreSQL's plan `stmt` should stay: it uses indexes and costs less than
/// `anker.olap_min_scan_fraction` of reading the tables in full, as DuckDB would.
unsafe fn cheaper_by_index(check: &Check, stmt: *mut pg_sys::PlannedStmt) -> Option<String> {
    let pg_plan = (*stmt).planTree;
    let scans = full_scan_cost(check);
    let uses_index = plan_uses_index(pg_plan) || list_cells((*stmt).subplans).iter().any(|c| plan_uses_index(c.ptr_value as *mut pg_sys::Plan));
    (uses_index && (*pg_plan).total_cost < super::min_scan_fraction() * scans).then(|| {
        format!(
            "PostgreSQL's plan uses indexes and (cost {:.0}) is cheaper than {} of reading its tables in full (cost {:.0}), as DuckDB would (anker.olap_min_scan_fraction)",
            (*pg_plan).total_cost,
            super::min_scan_fraction(),
            scans
        )
    })
}

/// What reading every table of the query in full costs in PostgreSQL's units (its
/// sequential-scan formula over the tables' statistics): what DuckDB, which has no indexes,
/// does.
unsafe fn full_scan_cost(check: &Check) -> f64 {
    check
        .tables
        .keys()
        .map(|&relid| {
            let rel = pg_sys::RelationIdGetRelation(pg_sys::Oid::from(relid));
            if rel.is_null() {
                return 0.0;
            }
            let c = &*(*rel).rd_rel;
            let cost = c.relpages.max(0) as f64 * pg_sys::seq_page_cost + c.reltuples.max(0.0) as f64 * pg_sys::cpu_tuple_cost;
            pg_sys::RelationClose(rel);
            cost
        })
        .sum()
}

/// Deparse `parse` (its FROM list in the join order of PostgreSQL's plan `stmt`, if
/// that plan joins exactly the FROM list's tables), let DuckDB prepare it and compare its
/// result types with PostgreSQL's.
unsafe fn prepare(parse: *mut pg_sys::Query, check: &Check, split: Split, stmt: *mut pg_sys::PlannedStmt) -> Result<Handover, String> {
    let copy = pg_sys::copyObjectImpl(parse as *const std::ffi::c_void) as *mut pg_sys::Query;
    // DuckDB returns the leaves; the junk entries stay for ORDER BY and GROUP BY.
    let mut tlist = std::ptr::null_mut();
    let mut resno = 0i16;
    for &(leaf, sortgroupref, name) in &split.leaves {
        resno += 1;
        let tle = pg_sys::makeTargetEntry(pg_sys::copyObjectImpl(leaf as *const std::ffi::c_void) as *mut pg_sys::Expr, resno, name, false);
        (*tle).ressortgroupref = sortgroupref;
        tlist = pg_sys::lappend(tlist, tle as *mut std::ffi::c_void);
    }
    for c in list_cells((*copy).targetList) {
        let tle = c.ptr_value as *mut pg_sys::TargetEntry;
        if (*tle).resjunk {
            resno += 1;
            (*tle).resno = resno;
            tlist = pg_sys::lappend(tlist, tle as *mut std::ffi::c_void);
        }
    }
    (*copy).targetList = tlist;
    if !check.params.is_null() {
        let mutator: Mutator = params_to_constants;
        // SAFETY: PostgreSQL 15 declares mutators without their arguments (`Node *(*)()`).
        let mutator = std::mem::transmute::<Mutator, unsafe extern "C-unwind" fn() -> *mut pg_sys::Node>(mutator);
        pg_sys::query_tree_mutator(copy, Some(mutator), check.params as *mut std::ffi::c_void, pg_sys::QTW_DONT_COPY_QUERY as i32);
    }
    pin_numeric_constants(copy as *mut pg_sys::Node, std::ptr::null_mut());
    let ordered = follow_join_order(copy, stmt);
    follow_sublink_orders(copy, stmt);
    if !ordered && relations_joined((*copy).jointree as *mut pg_sys::Node) >= 3 {
        return Err("DuckDB would choose the join order without statistics, and PostgreSQL's plan cannot be followed".into());
    }
    add_or_restrictions(copy);
    avg::compare_integers_with_rounded_avgs(copy);
    let avgs = avg::mark(copy);
    let sql = avg::emulate(&deparse(copy), &avgs).map_err(|e| format!("DuckDB cannot be given avg: {e}"))?;
    if !utf8_database() && !sql.is_ascii() {
        return Err("the query's text is not ASCII and the database encoding is not UTF8 (DuckDB reads UTF-8)".into());
    }
    let mut tables = vec![];
    let mut names: HashMap<String, i64> = HashMap::new();
    let mut registered = vec![];
    // The column bounds DuckDB's optimizer may rely on (its column statistics).
    let mut promised = vec![];
    for (&relid, atts) in &check.tables {
        let relid = pg_sys::Oid::from(relid);
        let name = CStr::from_ptr(pg_sys::get_rel_name(relid)).to_string_lossy().into_owned();
        if names.contains_key(&name) {
            return Err(format!("two tables named \"{name}\""));
        }
        let rel = pg_sys::RelationIdGetRelation(relid);
        let input = Input::describe(rel);
        pg_sys::RelationClose(rel);
        // A query that reads no column (count(*)) still gets one from DuckDB's scan, which
        // asks for a column to count rows by: prepare the first it can take.
        let mut atts = atts.clone();
        if atts.is_empty() {
            match input.columns.iter().find(|c| c.kind.is_some()) {
                Some(c) => {
                    atts.insert(c.att);
                }
                // (DuckDB would ask for one anyway, and find it unprepared)
                None => return Err(format!("\"{name}\" has no column of a type DuckDB takes, to count its rows by")),
            }
        }
        promised.push(input.bounds());
        let r = scan::register(input);
        names.insert(name.clone(), r.id());
        registered.push(r);
        let finite = check.finite.iter().filter(|(r, _)| *r == relid.to_u32()).map(|&(_, a)| a).collect();
        tables.push(Table { relid, name, atts: atts.iter().copied().collect(), finite });
    }
    let session = session(ordered)?;
    let checked = scan::with_names(names, || ddb::Prepared::new(session.con.0, &sql))
        .map_err(|e| format!("DuckDB cannot prepare it: {e}"))
        .and_then(|p| compare_types(&split.leaves, &p.column_types()).map(|()| p));
    let prepared = match checked {
        Ok(p) => p,
        Err(e) => {
            // (a connection whose statement was refused is as good as new)
            give_back(session);
            return Err(e);
        }
    };
    let ids = registered.iter().map(|r| r.id()).collect();
    drop(registered);
    let ready = keep_ready(Ready { prepared, session, ids, bounds: promised });
    let leaves = split
        .leaves
        .iter()
        .map(|&(e, _, _)| {
            let e = e as *const pg_sys::Node;
            (pg_sys::exprType(e), pg_sys::exprTypmod(e), pg_sys::exprCollation(e))
        })
        .collect();
    Ok(Handover { sql, tables, ordered, leaves, outputs: split.outputs, ready })
}

/// DuckDB reads text as UTF-8. In a database of another encoding only ASCII, which every
/// server encoding shares with UTF-8, is handed over: the query's text here, the values in
/// `anker_scan` (others raise 0A000). Otherwise `LIKE 'caf_'` matched LATIN1's two-byte
/// 'Ã©' as DuckDB's one-character 'é'.
pub fn utf8_database() -> bool {
    // SAFETY: reads the backend's database encoding, set at connection start.
    unsafe { pg_sys::GetDatabaseEncoding() == pg_sys::pg_enc::PG_UTF8 as i32 }
}

/// The query's text for DuckDB: constants written in the formats DuckDB reads (ISO dates,
/// floats with every digit), whatever the session's DateStyle and extra_float_digits.
unsafe fn deparse(q: *mut pg_sys::Query) -> String {
    let level = pg_sys::NewGUCNestLevel();
    for (name, value) in [(c"datestyle", c"ISO, YMD"), (c"intervalstyle", c"postgres"), (c"extra_float_digits", c"3")] {
        pg_sys::set_config_option(
            name.as_ptr(),
            value.as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
    }
    let sql = CStr::from_ptr(pg_sys::pg_get_querydef(q, false)).to_string_lossy().into_owned();
    pg_sys::AtEOXact_GUC(true, level);
    sql
}

/// DuckDB has no statistics of anker's columns (its C API cannot pass them), so its join
/// order optimizer guesses distinct counts and can pick joins whose results explode (all
/// of stock with all of customer on a warehouse id, in CH-benCHmark Q5). PostgreSQL's
/// planner has the statistics: when its plan joins the tables of the FROM list and nothing
/// else, list them in its order and have DuckDB keep that order (its filter pushdown still
/// turns the WHERE clause into the joins' conditions).
pub unsafe fn set_join_order(con: &super::duckdb::Connection, ordered: bool) -> Result<(), String> {
    con.execute(if ordered { "SET disabled_optimizers = 'join_order,build_side_probe_side'" } else { "RESET disabled_optimizers" })
}

/// The join tree of a PostgreSQL plan, as far as DuckDB can follow it. Range-table indexes
/// are those of the PlannedStmt's flattened range table.
enum PlanTree {
    /// A scan and the rows DuckDB gets from it by PostgreSQL's estimates: the table's row
    /// count for a parameterized scan, whose estimate is per loop.
    Scan(i32, f64),
    /// An inner join: its outer (probe) side, then its inner (build) side, the sides
    /// DuckDB's hash join gives them too; and the estimate of its rows.
    Join(Box<PlanTree>, Box<PlanTree>, f64),
    /// An aggregate or the like: the top of a query level, or the plan of a sub-query in
    /// FROM, with the index of its SubqueryScan unless PostgreSQL removed that node.
    Above(Option<i32>, Option<Box<PlanTree>>),
}

impl PlanTree {
    /// The range-table indexes this tree joins at its own level.
    fn scans(&self, out: &mut Vec<i32>) {
        match self {
            PlanTree::Scan(i, _) | PlanTree::Above(Some(i), _) => out.push(*i),
            PlanTree::Join(l, r, _) => {
                l.scans(out);
                r.scans(out);
            }
            PlanTree::Above(None, t) => t.iter().for_each(|t| t.scans(out)),
        }
    }
}

/// `per_loop`: the plan is the inner side of a nested loop that passes it parameters; its
/// scans' estimates are then per loop, and DuckDB, which reads such a table whole, gets the
/// table's row count (`rtable`: the PlannedStmt's).
unsafe fn plan_tree(plan: *mut pg_sys::Plan, per_loop: bool, rtable: *mut pg_sys::List) -> Option<PlanTree> {
    use pg_sys::NodeTag::*;
    if plan.is_null() {
        return None;
    }
    // Only for nodes that are scans.
    let scanrelid = || (*(plan as *mut pg_sys::Scan)).scanrelid as i32;
    let rows = if per_loop { f64::NAN } else { (*plan).plan_rows };
    let scan_rows = || if per_loop { table_rows(rtable, scanrelid()) } else { rows };
    Some(match (*plan).type_ {
        T_SeqScan | T_IndexScan | T_IndexOnlyScan | T_BitmapHeapScan | T_TidScan | T_TidRangeScan | T_SampleScan => PlanTree::Scan(scanrelid(), scan_rows()),
        T_CustomScan if scanrelid() > 0 => PlanTree::Scan(scanrelid(), scan_rows()),
        T_SubqueryScan => PlanTree::Above(Some(scanrelid()), plan_tree((*(plan as *mut pg_sys::SubqueryScan)).subplan, false, rtable).map(Box::new)),
        T_NestLoop | T_HashJoin | T_MergeJoin => match (*(plan as *mut pg_sys::Join)).jointype {
            // The inner side of a semi- or anti-join of a pulled-up EXISTS/IN is the
            // sub-query's, which DuckDB joins as it decorrelates the sub-query.
            pg_sys::JoinType::JOIN_SEMI | pg_sys::JoinType::JOIN_ANTI => plan_tree((*plan).lefttree, per_loop, rtable)?,
            pg_sys::JoinType::JOIN_INNER => {
                let parameterized = (*plan).type_ == T_NestLoop && !(*(plan as *mut pg_sys::NestLoop)).nestParams.is_null();
                let (outer, inner) = (plan_tree((*plan).lefttree, per_loop, rtable)?, plan_tree((*plan).righttree, per_loop || parameterized, rtable)?);
                PlanTree::Join(Box::new(outer), Box::new(inner), rows)
            }
            _ => return None,
        },
        T_Agg | T_Group | T_Unique | T_Limit | T_WindowAgg => PlanTree::Above(None, Some(Box::new(plan_tree((*plan).lefttree, per_loop, rtable)?))),
        T_Hash | T_Material | T_Memoize | T_Sort | T_IncrementalSort | T_Result | T_Gather | T_GatherMerge if (*plan).righttree.is_null() => {
            plan_tree((*plan).lefttree, per_loop, rtable)?
        }
        _ => return None,
    })
}

/// The row count PostgreSQL keeps for relation `rtindex` of `rtable` (NaN if none).
unsafe fn table_rows(rtable: *mut pg_sys::List, rtindex: i32) -> f64 {
    let rte = pg_sys::list_nth(rtable, rtindex - 1) as *mut pg_sys::RangeTblEntry;
    if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION {
        return f64::NAN;
    }
    // (the planner holds a lock on every relation of the plan)
    let rel = pg_sys::RelationIdGetRelation((*rte).relid);
    if rel.is_null() {
        return f64::NAN;
    }
    let rows = (*(*rel).rd_rel).reltuples as f64;
    pg_sys::RelationClose(rel);
    if rows >= 0.0 { rows } else { f64::NAN }
}

/// The join tree of one query level, over its own range-table indexes.
enum JoinTree {
    /// A FROM item and the estimate of its rows (NaN: not known).
    Item(i32, f64),
    /// Probe side, build side, estimated rows.
    Join(Box<JoinTree>, Box<JoinTree>, f64),
}

impl JoinTree {
    fn items(&self, out: &mut Vec<i32>) {
        match self {
            JoinTree::Item(i, _) => out.push(*i),
            JoinTree::Join(l, r, _) => {
                l.items(out);
                r.items(out);
            }
        }
    }

    fn rows(&self) -> f64 {
        match self {
            JoinTree::Item(_, rows) | JoinTree::Join(_, _, rows) => *rows,
        }
    }

    /// PostgreSQL joins a dimension's own dimension last: `(stock ⋈ supplier) ⋈ nation`
    /// with nation filtered to one row, in CH-benCHmark Q11 and Q21, where its cost model
    /// sees little difference. DuckDB then carries every row of `stock ⋈ supplier`
    /// (400,000) into a second hash join. Joining the dimension first, `stock ⋈ (supplier ⋈
    /// nation)`, builds one hash table of the few suppliers left and probes it once.
    /// Rewritten so when the item joined last (`c`) shares conditions with the inner side
    /// (`b`) and none with the outer (`a`), and by PostgreSQL's estimates `b ⋈ c` (b's
    /// rows times the fraction of `a ⋈ b` that joining `c` keeps) is smaller than `a ⋈ b`.
    /// Inner joins with every condition in WHERE: any order gives the same rows.
    fn dimensions_first(self, groups: &[*mut pg_sys::Bitmapset]) -> JoinTree {
        let JoinTree::Join(l, c, rows) = self else { return self };
        let (l, c) = (l.dimensions_first(groups), c.dimensions_first(groups));
        match l {
            JoinTree::Join(a, b, ab_rows) if shares(groups, &b, &c) && !shares(groups, &a, &c) && b.rows() * rows / ab_rows < ab_rows => {
                let bc_rows = b.rows() * rows / ab_rows;
                JoinTree::Join(a, Box::new(JoinTree::Join(b, Box::new(c), bc_rows)), rows)
            }
            l => JoinTree::Join(Box::new(l), Box::new(c), rows),
        }
    }

    /// DuckDB builds a hash table of a join's right side and probes it with the left. In a
    /// plan of index lookups (CH Q9: the few order lines of the items left by a LIKE, then
    /// stock, supplier and orders by index) PostgreSQL's inner sides are whole tables to
    /// DuckDB, which built hash tables of all of stock and orders for 120 probing rows. So
    /// each join builds its smaller side by PostgreSQL's estimates (a parameterized scan
    /// counts as its whole table), and DuckDB's own choice, made without statistics, is off
    /// (`set_join_order`).
    fn smaller_side_built(self) -> JoinTree {
        let JoinTree::Join(l, r, rows) = self else { return self };
        let (l, r) = (l.smaller_side_built(), r.smaller_side_built());
        if l.rows() < r.rows() {
            JoinTree::Join(Box::new(r), Box::new(l), rows)
        } else {
            JoinTree::Join(Box::new(l), Box::new(r), rows)
        }
    }
}

/// Does some WHERE condition (or class of equal expressions: `groups`, from
/// [`join_groups`]) read relations of both `x` and `y`?
fn shares(groups: &[*mut pg_sys::Bitmapset], x: &JoinTree, y: &JoinTree) -> bool {
    let (mut xs, mut ys) = (vec![], vec![]);
    x.items(&mut xs);
    y.items(&mut ys);
    // SAFETY: the groups are Bitmapsets join_groups made.
    let spans = |g: *mut pg_sys::Bitmapset, side: &[i32]| side.iter().any(|&i| unsafe { pg_sys::bms_is_member(i, g) });
    groups.iter().any(|&g| spans(g, &xs) && spans(g, &ys))
}

/// One query level being matched with a plan: the query, where its range table starts in
/// the flattened one, and the flattened range table.
struct Level {
    q: *mut pg_sys::Query,
    offset: i32,
    flat: *mut pg_sys::List,
}

impl Level {
    /// Turn `a JOIN b ON c` (inner, without USING or an alias) into FROM items `a, b` and `c`
    /// in WHERE, as the planner sees them, so that the plan's order can be followed; the
    /// join's range-table entry becomes an empty RTE_RESULT (ruleutils prints every
    /// RTE_JOIN it finds as a join). Left as it is if any join of the level is another kind.
    unsafe fn flatten_inner_joins(&self) {
        unsafe fn collect(n: *mut pg_sys::Node, items: &mut Vec<*mut pg_sys::Node>, quals: &mut Vec<*mut pg_sys::Node>, joins: &mut Vec<i32>) -> bool {
            match (*n).type_ {
                pg_sys::NodeTag::T_RangeTblRef => {
                    items.push(n);
                    true
                }
                pg_sys::NodeTag::T_JoinExpr => {
                    let j = &*(n as *mut pg_sys::JoinExpr);
                    if j.jointype != pg_sys::JoinType::JOIN_INNER || j.isNatural || !j.usingClause.is_null() || !j.alias.is_null() || !j.join_using_alias.is_null() {
                        return false;
                    }
                    joins.push(j.rtindex);
                    if !j.quals.is_null() {
                        quals.push(j.quals);
                    }
                    collect(j.larg, items, quals, joins) && collect(j.rarg, items, quals, joins)
                }
                _ => false,
            }
        }
        let jt = (*self.q).jointree;
        let (mut items, mut quals, mut joins) = (vec![], vec![], vec![]);
        if !list_cells((*jt).fromlist).iter().all(|c| collect(c.ptr_value as *mut pg_sys::Node, &mut items, &mut quals, &mut joins)) || joins.is_empty() {
            return;
        }
        let mut conjuncts = pg_sys::make_ands_implicit((*jt).quals as *mut pg_sys::Expr);
        for q in quals {
            conjuncts = pg_sys::list_concat(conjuncts, pg_sys::make_ands_implicit(q as *mut pg_sys::Expr));
        }
        (*jt).fromlist = node_list(items);
        (*jt).quals = pg_sys::make_ands_explicit(conjuncts) as *mut pg_sys::Node;
        for j in joins {
            let rte = self.rte(j);
            (*rte).rtekind = pg_sys::RTEKind::RTE_RESULT;
            (*rte).eref = pg_sys::makeAlias(c"unnamed_join".as_ptr(), std::ptr::null_mut());
            (*rte).joinaliasvars = std::ptr::null_mut();
            (*rte).joinleftcols = std::ptr::null_mut();
            (*rte).joinrightcols = std::ptr::null_mut();
            (*rte).inFromCl = false;
        }
    }

    /// The FROM list's items (range-table indexes), if they are all plain references.
    unsafe fn fromlist_items(&self) -> Option<Vec<i32>> {
        list_cells((*(*self.q).jointree).fromlist)
            .iter()
            .map(|c| {
                let n = c.ptr_value as *mut pg_sys::Node;
                ((*n).type_ == pg_sys::NodeTag::T_RangeTblRef).then(|| (*(n as *mut pg_sys::RangeTblRef)).rtindex)
            })
            .collect()
    }

    /// The part of `t` that joins this level's FROM items: parts that join only relations of
    /// pulled-up sub-links are left out (DuckDB joins those as it decorrelates them); the
    /// plan of a sub-query in FROM becomes its item, and its own FROM list follows it where
    /// it can. Err when the plan cannot be followed.
    unsafe fn resolve(&self, t: &PlanTree, from: &[i32], used: &mut Vec<i32>) -> Result<Option<JoinTree>, ()> {
        let local = |i: i32| Some(i - self.offset).filter(|l| from.contains(l));
        Ok(match t {
            PlanTree::Scan(i, rows) => local(*i).map(|i| JoinTree::Item(i, *rows)),
            PlanTree::Join(l, r, rows) => match (self.resolve(l, from, used)?, self.resolve(r, from, used)?) {
                (Some(l), Some(r)) => Some(JoinTree::Join(Box::new(l), Box::new(r), *rows)),
                (one, None) | (None, one) => one,
            },
            PlanTree::Above(Some(s), inner) => {
                let Some(s) = local(*s) else { return Ok(None) };
                if let Some(inner) = inner {
                    self.order_subquery(s, inner);
                }
                used.push(s);
                Some(JoinTree::Item(s, f64::NAN))
            }
            PlanTree::Above(None, Some(inner)) => {
                let mut scans = vec![];
                inner.scans(&mut scans);
                if scans.iter().any(|&i| local(i).is_some()) {
                    return self.resolve(inner, from, used);
                }
                // PostgreSQL removed the SubqueryScan of a sub-query in FROM: find the
                // sub-query whose relations these are.
                let Some(s) = from.iter().copied().find(|s| !used.contains(s) && self.subquery_offset(*s, &scans).is_some()) else {
                    return Ok(None);
                };
                self.order_subquery(s, inner);
                used.push(s);
                Some(JoinTree::Item(s, f64::NAN))
            }
            PlanTree::Above(None, None) => return Err(()),
        })
    }

    unsafe fn rte(&self, rtindex: i32) -> *mut pg_sys::RangeTblEntry {
        pg_sys::list_nth((*self.q).rtable, rtindex - 1) as *mut pg_sys::RangeTblEntry
    }

    /// Where sub-query item `s`'s range table starts in the flattened one, if the
    /// relations `scans` can be its (PostgreSQL appends a planned sub-query's range table
    /// whole).
    unsafe fn subquery_offset(&self, s: i32, scans: &[i32]) -> Option<i32> {
        let rte = self.rte(s);
        if (*rte).rtekind != pg_sys::RTEKind::RTE_SUBQUERY || (*rte).subquery.is_null() {
            return None;
        }
        rtable_offset((*(*rte).subquery).rtable, self.flat, scans)
    }

    /// Have sub-query item `s`'s FROM list follow the plan `inner` of it, if it can (if not,
    /// DuckDB joins it as written).
    unsafe fn order_subquery(&self, s: i32, inner: &PlanTree) {
        let mut scans = vec![];
        inner.scans(&mut scans);
        if let Some(offset) = self.subquery_offset(s, &scans) {
            Level { q: (*self.rte(s)).subquery, offset, flat: self.flat }.follow(inner);
        }
    }

    /// Rewrite this level's FROM list as the join tree of `plan`, with DuckDB's join order
    /// optimizer off; how many items it joins, if it did.
    unsafe fn follow(&self, plan: &PlanTree) -> Option<usize> {
        self.flatten_inner_joins();
        let from = self.fromlist_items().filter(|f| f.len() >= 2)?;
        let Ok(Some(tree)) = self.resolve(plan, &from, &mut vec![]) else { return None };
        let mut items = vec![];
        tree.items(&mut items);
        let mut listed = from.clone();
        listed.sort_unstable();
        items.sort_unstable();
        let groups = join_groups(self.q);
        let tree = tree.dimensions_first(&groups).smaller_side_built();
        if listed != items || !connected(&tree, &groups) {
            return None;
        }
        (*(*self.q).jointree).fromlist = node_list([self.fromlist_item(&tree)]);
        Some(listed.len())
    }

    /// `t` as a FROM item: a table, or `(left CROSS JOIN right)` (the WHERE clause keeps the
    /// join conditions; DuckDB's filter pushdown makes them the joins').
    unsafe fn fromlist_item(&self, t: &JoinTree) -> *mut pg_sys::Node {
        let (l, r) = match t {
            JoinTree::Item(i, _) => {
                let r = pg_sys::palloc0(std::mem::size_of::<pg_sys::RangeTblRef>()) as *mut pg_sys::RangeTblRef;
                (*r).type_ = pg_sys::NodeTag::T_RangeTblRef;
                (*r).rtindex = *i;
                return r as *mut pg_sys::Node;
            }
            JoinTree::Join(l, r, _) => (self.fromlist_item(l), self.fromlist_item(r)),
        };
        // ruleutils prints a JoinExpr from its RTE_JOIN: the join's columns, those of the
        // left side then those of the right, as the parser would have made them.
        let (mut names, mut vars, mut left_cols, mut right_cols) = (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
        for (side, cols) in [(l, &mut left_cols), (r, &mut right_cols)] {
            let rtindex = if (*side).type_ == pg_sys::NodeTag::T_JoinExpr {
                (*(side as *mut pg_sys::JoinExpr)).rtindex
            } else {
                (*(side as *mut pg_sys::RangeTblRef)).rtindex
            };
            let rte = self.rte(rtindex);
            let (mut side_names, mut side_vars) = (std::ptr::null_mut(), std::ptr::null_mut());
            pg_sys::expandRTE(rte, rtindex, 0, -1, false, &mut side_names, &mut side_vars);
            for (k, (n, v)) in list_cells(side_names).iter().zip(list_cells(side_vars)).enumerate() {
                names = pg_sys::lappend(names, n.ptr_value);
                vars = pg_sys::lappend(vars, v.ptr_value);
                // The side's attribute number: a table's skips its dropped columns.
                let attno = if (*rte).rtekind == pg_sys::RTEKind::RTE_JOIN { k as i32 + 1 } else { (*(v.ptr_value as *mut pg_sys::Var)).varattno as i32 };
                *cols = pg_sys::lappend_int(*cols, attno);
            }
        }
        let rte = pg_sys::palloc0(std::mem::size_of::<pg_sys::RangeTblEntry>()) as *mut pg_sys::RangeTblEntry;
        (*rte).type_ = pg_sys::NodeTag::T_RangeTblEntry;
        (*rte).rtekind = pg_sys::RTEKind::RTE_JOIN;
        (*rte).jointype = pg_sys::JoinType::JOIN_INNER;
        (*rte).joinaliasvars = vars;
        (*rte).joinleftcols = left_cols;
        (*rte).joinrightcols = right_cols;
        (*rte).eref = pg_sys::makeAlias(c"unnamed_join".as_ptr(), names);
        (*rte).inFromCl = true;
        (*self.q).rtable = pg_sys::lappend((*self.q).rtable, rte as *mut std::ffi::c_void);
        let j = pg_sys::palloc0(std::mem::size_of::<pg_sys::JoinExpr>()) as *mut pg_sys::JoinExpr;
        (*j).type_ = pg_sys::NodeTag::T_JoinExpr;
        (*j).jointype = pg_sys::JoinType::JOIN_INNER;
        (*j).larg = l;
        (*j).rarg = r;
        (*j).rtindex = list_cells((*self.q).rtable).len() as i32;
        j as *mut pg_sys::Node
    }
}

/// Rewrite `q`'s FROM list (and those of its sub-queries in FROM, where their plans can be
/// found) as the join tree of PostgreSQL's plan `stmt`; whether DuckDB is to keep that
/// order: when the top level joins three or more items and follows the plan. With fewer,
/// DuckDB's optimizer chooses (from the scans' row counts), also for the sub-queries in
/// WHERE, whose order the plan does not give (CH Q20 ran 4x slower in their written order).
unsafe fn follow_join_order(q: *mut pg_sys::Query, stmt: *mut pg_sys::PlannedStmt) -> bool {
    let Some(tree) = plan_tree((*stmt).planTree, false, (*stmt).rtable) else { return false };
    Level { q, offset: 0, flat: (*stmt).rtable }.follow(&tree).is_some_and(|items| items >= 3)
}

/// Where a planned sub-query's range table `sub` starts in the flattened one `flat`, if
/// the relations `scans` can be its (PostgreSQL appends it whole).
unsafe fn rtable_offset(sub: *mut pg_sys::List, flat: *mut pg_sys::List, scans: &[i32]) -> Option<i32> {
    let (sub, flat) = (list_cells(sub), list_cells(flat));
    let lowest = *scans.iter().min()?;
    (1..=sub.len() as i32).map(|k| lowest - k).find(|&o| {
        o >= 0
            && scans.iter().all(|&i| i > o && i - o <= sub.len() as i32)
            && sub.iter().enumerate().all(|(k, c)| {
                let (a, b) = (c.ptr_value as *mut pg_sys::RangeTblEntry, flat.get(o as usize + k).map(|c| c.ptr_value as *mut pg_sys::RangeTblEntry));
                b.is_some_and(|b| (*a).rtekind == (*b).rtekind && (*a).relid == (*b).relid)
            })
    })
}

/// Have the sub-query of each sub-link of `q` that PostgreSQL planned on its own (an
/// InitPlan or SubPlan: `stmt.subplans`) follow that plan's join order, as sub-queries in
/// FROM do: with its join order optimizer off DuckDB would join them as written, and a
/// sub-query whose joins are the query's then looks the same to DuckDB, which evaluates a
/// repeated sub-plan once (CH Q11's HAVING repeats the query's three-way join).
unsafe fn follow_sublink_orders(q: *mut pg_sys::Query, stmt: *mut pg_sys::PlannedStmt) {
    let mut sublinks = vec![];
    let mut collect = |n: *mut pg_sys::Node| {
        if (*n).type_ == pg_sys::NodeTag::T_SubLink {
            sublinks.push((*(n as *mut pg_sys::SubLink)).subselect as *mut pg_sys::Query);
        }
        false
    };
    for e in [(*q).targetList as *mut pg_sys::Node, (*q).havingQual, (*(*q).jointree).quals] {
        avg::any_node(e, &mut collect);
    }
    let plans: Vec<PlanTree> = list_cells((*stmt).subplans).iter().filter_map(|c| plan_tree(c.ptr_value as *mut pg_sys::Plan, false, (*stmt).rtable)).collect();
    for sub in sublinks {
        for tree in &plans {
            let mut scans = vec![];
            tree.scans(&mut scans);
            if let Some(offset) = rtable_offset((*sub).rtable, (*stmt).rtable, &scans) {
                Level { q: sub, offset, flat: (*stmt).rtable }.follow(tree);
                break;
            }
        }
    }
}

/// PostgreSQL's planner derives from `(a1 AND b1) OR (a2 AND b2)`, where the `a`s read only
/// table A, the restriction `a1 OR a2` for A's scan (orclauses.c); DuckDB 1.5.6 does not,
/// and joined every row before filtering (CH Q19: 1.2 M joined rows). Add such restrictions
/// to `q`'s WHERE clause: they follow from it, so the rows are the same.
unsafe fn add_or_restrictions(q: *mut pg_sys::Query) {
    let jt = (*q).jointree;
    if jt.is_null() || (*jt).quals.is_null() {
        return;
    }
    let conjuncts: Vec<*mut pg_sys::Node> = list_cells(pg_sys::make_ands_implicit((*jt).quals as *mut pg_sys::Expr)).iter().map(|c| c.ptr_value as *mut pg_sys::Node).collect();
    // The one table a condition reads, if it reads one and can be evaluated twice.
    let single = |e: *mut pg_sys::Node| {
        let mut rel = -1;
        let movable = !pg_sys::contain_volatile_functions(e) && !avg::any_node(e, &mut |n| (*n).type_ == pg_sys::NodeTag::T_SubLink);
        (movable && pg_sys::bms_get_singleton_member(pg_sys::pull_varnos(std::ptr::null_mut(), e), &mut rel)).then_some(rel)
    };
    let mut derived = vec![];
    for &c in &conjuncts {
        if !pg_sys::is_orclause(c as *const std::ffi::c_void) {
            continue;
        }
        let arms: Vec<Vec<*mut pg_sys::Node>> = list_cells((*(c as *mut pg_sys::BoolExpr)).args)
            .iter()
            .map(|a| list_cells(pg_sys::make_ands_implicit(a.ptr_value as *mut pg_sys::Expr)).iter().map(|x| x.ptr_value as *mut pg_sys::Node).collect())
            .collect();
        let mut rels: Vec<i32> = arms[0].iter().filter_map(|&x| single(x)).collect();
        rels.sort_unstable();
        rels.dedup();
        for rel in rels {
            let parts: Vec<Vec<*mut pg_sys::Node>> = arms.iter().map(|arm| arm.iter().copied().filter(|&x| single(x) == Some(rel)).collect()).collect();
            // Every arm must restrict the table; an OR that reads only it is pushed down already.
            if parts.iter().any(|p| p.is_empty()) || parts.iter().zip(&arms).all(|(p, a)| p.len() == a.len()) {
                continue;
            }
            let arms = node_list(parts.into_iter().map(|p| pg_sys::make_ands_explicit(node_list(p)) as *mut pg_sys::Node));
            derived.push(pg_sys::make_orclause(arms) as *mut pg_sys::Node);
        }
    }
    if derived.is_empty() {
        return;
    }
    (*jt).quals = pg_sys::make_ands_explicit(node_list(conjuncts.into_iter().chain(derived))) as *mut pg_sys::Node;
}

/// How many FROM items a join tree joins (through explicit joins of any kind).
unsafe fn relations_joined(n: *mut pg_sys::Node) -> usize {
    match (*n).type_ {
        pg_sys::NodeTag::T_FromExpr => list_cells((*(n as *mut pg_sys::FromExpr)).fromlist).iter().map(|c| relations_joined(c.ptr_value as *mut pg_sys::Node)).sum(),
        pg_sys::NodeTag::T_JoinExpr => relations_joined((*(n as *mut pg_sys::JoinExpr)).larg) + relations_joined((*(n as *mut pg_sys::JoinExpr)).rarg),
        _ => 1,
    }
}

/// The relations each WHERE condition of `q`, or class of equal expressions, spans.
/// Equalities are transitive, as they are to both planners: `a.x = b.y AND b.y = c.z`
/// joins a and c.
unsafe fn join_groups(q: *mut pg_sys::Query) -> Vec<*mut pg_sys::Bitmapset> {
    let conjuncts = pg_sys::make_ands_implicit((*(*q).jointree).quals as *mut pg_sys::Expr);
    let mut groups: Vec<*mut pg_sys::Bitmapset> = vec![];
    let mut classes: Vec<(Vec<String>, *mut pg_sys::Bitmapset)> = vec![];
    for c in list_cells(conjuncts) {
        let clause = c.ptr_value as *mut pg_sys::Node;
        groups.push(pg_sys::pull_varnos(std::ptr::null_mut(), clause));
        if (*clause).type_ != pg_sys::NodeTag::T_OpExpr || opname((*(clause as *mut pg_sys::OpExpr)).opno) != "=" {
            continue;
        }
        let args = list_cells((*(clause as *mut pg_sys::OpExpr)).args);
        if args.len() != 2 {
            continue;
        }
        let keys: Vec<String> = args.iter().map(|a| expression_key(a.ptr_value as *mut pg_sys::Node)).collect();
        let mut merged = (keys.clone(), groups[groups.len() - 1]);
        classes.retain(|(members, rels)| {
            if members.iter().any(|m| keys.contains(m)) {
                merged.0.extend(members.iter().cloned());
                merged.1 = pg_sys::bms_union(merged.1, *rels);
                false
            } else {
                true
            }
        });
        classes.push(merged);
    }
    groups.extend(classes.iter().map(|(_, rels)| *rels));
    groups
}

/// Do the two sides of every join of `tree` share a WHERE condition (so that DuckDB joins
/// them on it, not as a cross product)?
fn connected(tree: &JoinTree, groups: &[*mut pg_sys::Bitmapset]) -> bool {
    let JoinTree::Join(l, r, _) = tree else { return true };
    shares(groups, l, r) && connected(l, groups) && connected(r, groups)
}

/// An expression as text, without the query-text locations its nodes carry (the same
/// column written twice must compare equal).
unsafe fn expression_key(e: *mut pg_sys::Node) -> String {
    let text = CStr::from_ptr(pg_sys::nodeToString(e as *const std::ffi::c_void)).to_string_lossy().into_owned();
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(i) = rest.find(":location ") {
        out.push_str(&rest[..i]);
        rest = rest[i + ":location ".len()..].trim_start_matches(|c: char| c == '-' || c.is_ascii_digit());
    }
    out.push_str(rest);
    out
}

/// Do DuckDB's result columns convert exactly to the types of the leaves?
unsafe fn compare_types(leaves: &[(*mut pg_sys::Node, u32, *mut std::ffi::c_char)], duck: &[LogicalType]) -> Result<(), String> {
    if leaves.len() != duck.len() {
        return Err(format!("DuckDB returns {} columns where {} are expected", duck.len(), leaves.len()));
    }
    for (i, (&(e, _, _), t)) in leaves.iter().zip(duck).enumerate() {
        if !converts(pg_sys::exprType(e), pg_sys::exprTypmod(e), t) {
            return Err(format!("output column {} is of a type DuckDB does not return exactly", i + 1));
        }
    }
    Ok(())
}

/// Can a DuckDB value of type `t` become a PostgreSQL value of `typid`/`typmod` exactly?
pub fn converts(typid: pg_sys::Oid, typmod: i32, t: &LogicalType) -> bool {
    let id = t.id();
    match typid {
        pg_sys::BOOLOID => id == ddb::TYPE_BOOLEAN,
        pg_sys::INT2OID => id == ddb::TYPE_SMALLINT,
        pg_sys::INT4OID => id == ddb::TYPE_INTEGER,
        // sum(int2/int4) is a HUGEINT in DuckDB; range-checked on the way back.
        pg_sys::INT8OID => id == ddb::TYPE_BIGINT || id == ddb::TYPE_HUGEINT,
        pg_sys::FLOAT4OID => id == ddb::TYPE_FLOAT,
        pg_sys::FLOAT8OID => id == ddb::TYPE_DOUBLE,
        pg_sys::DATEOID => id == ddb::TYPE_DATE,
        pg_sys::TIMESTAMPOID => id == ddb::TYPE_TIMESTAMP,
        pg_sys::NUMERICOID => match id {
            // sum(int8), and EXTRACT of integer fields: integers of scale 0.
            ddb::TYPE_HUGEINT | ddb::TYPE_BIGINT => typmod < 0,
            ddb::TYPE_DECIMAL => match Kind::of(typid, typmod) {
                Some(Kind::Decimal(_, scale)) => t.decimal_shape().1 == scale,
                _ => typmod < 0,
            },
            _ => false,
        },
        pg_sys::TEXTOID | pg_sys::VARCHAROID => id == ddb::TYPE_VARCHAR,
        // Blanks are stripped on the way in and put back by char(n)'s input function.
        pg_sys::BPCHAROID => id == ddb::TYPE_VARCHAR && typmod >= 0,
        _ => false,
    }
}

// ---- the check --------------------------------------------------------------------------

/// Walks a query and everything in it; keeps the first reason DuckDB cannot take it and
/// the anker tables and attributes it reads.
struct Check {
    reason: Option<String>,
    /// The enclosing queries, innermost last.
    levels: Vec<*mut pg_sys::Query>,
    tables: std::collections::BTreeMap<u32, BTreeSet<usize>>,
    /// Columns (relation, attribute) that must hold no infinite dates or timestamps.
    finite: BTreeSet<(u32, usize)>,
    /// The top query's output columns are judged by `split_outputs`, not by the walk.
    top_outputs: bool,
    /// The values of a custom plan's parameters, which DuckDB gets as constants.
    params: pg_sys::ParamListInfo,
    /// The query has parameters without values: this is a generic plan.
    generic: bool,
    /// Inside the arguments of comparisons (numeric scales cannot show).
    scale_free: u32,
    /// Sub-queries in FROM.
    from_subqueries: BTreeSet<usize>,
    /// Output columns (sub-query, attribute) of sub-queries in FROM that are an `avg`, and
    /// those read where numeric scales show: the two must not meet.
    avg_outputs: BTreeSet<(usize, i16)>,
    scaled_reads: BTreeSet<(usize, i16)>,
    /// Walking an `avg` that is a sub-query's output column.
    in_avg_output: bool,
    /// A column of a join (JOIN … USING) read where numeric scales show.
    scaled_join_read: bool,
}

impl Default for Check {
    fn default() -> Check {
        Check {
            reason: None,
            levels: vec![],
            tables: Default::default(),
            finite: Default::default(),
            top_outputs: false,
            params: std::ptr::null_mut(),
            generic: false,
            scale_free: 0,
            from_subqueries: Default::default(),
            avg_outputs: Default::default(),
            scaled_reads: Default::default(),
            in_avg_output: false,
            scaled_join_read: false,
        }
    }
}

impl Check {
    /// After the walk: is every `avg` output column of a sub-query in FROM read only in
    /// comparisons?
    fn check_avg_outputs(&mut self) {
        if !self.avg_outputs.is_empty() && (self.scaled_join_read || self.avg_outputs.intersection(&self.scaled_reads).next().is_some()) {
            self.refuse("the aggregate avg as a column of a sub-query that is read other than in comparisons (DuckDB's scale of it would show)");
        }
    }

    /// Does `e` hold an `avg` DuckDB computes, directly, as a sub-query's output, or as a
    /// column of a sub-query in FROM?
    unsafe fn mentions_avg(&self, e: *mut pg_sys::Node) -> bool {
        avg::contains_avg(e)
            || avg::any_node(e, &mut |n| {
                (*n).type_ == pg_sys::NodeTag::T_Var && self.subquery_column(&*(n as *mut pg_sys::Var)).is_some_and(|c| avg::contains_avg(c))
            })
    }

    /// The expression of the sub-query output column `v` reads, if it reads one.
    unsafe fn subquery_column(&self, v: &pg_sys::Var) -> Option<*mut pg_sys::Node> {
        let rte = self.rte_of(v)?;
        if (*rte).rtekind != pg_sys::RTEKind::RTE_SUBQUERY || (*rte).subquery.is_null() {
            return None;
        }
        let tle = list_cells((*(*rte).subquery).targetList).get((v.varattno as usize).checked_sub(1)?)?.ptr_value as *mut pg_sys::TargetEntry;
        Some((*tle).expr as *mut pg_sys::Node)
    }

    /// Are `e`'s values known to have at most avg::INTEGER_DIGITS digits before the point?
    unsafe fn narrow(&self, e: *mut pg_sys::Node) -> bool {
        // A sub-query's output is judged by its type alone (its columns are of another level).
        match (*e).type_ {
            pg_sys::NodeTag::T_Var => narrow_type(self.subquery_column(&*(e as *mut pg_sys::Var)).unwrap_or(e)),
            pg_sys::NodeTag::T_SubLink => {
                let q = (*(e as *mut pg_sys::SubLink)).subselect as *mut pg_sys::Query;
                list_cells((*q).targetList).first().is_some_and(|c| narrow_type((*(c.ptr_value as *mut pg_sys::TargetEntry)).expr as *mut pg_sys::Node))
            }
            _ => narrow_type(e),
        }
    }

    fn refuse(&mut self, why: impl Into<String>) -> bool {
        if self.reason.is_none() {
            self.reason = Some(why.into());
        }
        true
    }

    unsafe fn query(&mut self, q: *mut pg_sys::Query) -> bool {
        let q = &*q;
        if q.commandType != pg_sys::CmdType::CMD_SELECT || !q.utilityStmt.is_null() {
            return self.refuse("not a SELECT");
        }
        if !q.rowMarks.is_null() || q.hasForUpdate {
            return self.refuse("FOR UPDATE/SHARE");
        }
        if q.hasModifyingCTE {
            return self.refuse("a data-modifying WITH");
        }
        if q.hasWindowFuncs {
            return self.refuse("window functions");
        }
        if q.hasTargetSRFs {
            return self.refuse("set-returning functions");
        }
        if q.hasRecursive {
            return self.refuse("WITH RECURSIVE");
        }
        if !q.groupingSets.is_null() {
            return self.refuse("grouping sets");
        }
        if q.hasDistinctOn {
            return self.refuse("DISTINCT ON");
        }
        if q.limitOption == pg_sys::LimitOption::LIMIT_OPTION_WITH_TIES {
            return self.refuse("FETCH … WITH TIES");
        }
        if q.hasRowSecurity {
            return self.refuse("row-level security");
        }
        self.levels.push(q as *const _ as *mut pg_sys::Query);
        let stop = pg_sys::query_tree_walker(
            q as *const _ as *mut pg_sys::Query,
            Some(walk),
            self as *mut Check as *mut std::ffi::c_void,
            pg_sys::QTW_EXAMINE_RTES_BEFORE as i32,
        );
        self.levels.pop();
        stop
    }

    /// Is `e`, an expression of the top query, exact in DuckDB? (Keeps no reason.)
    unsafe fn exact(&mut self, q: *mut pg_sys::Query, e: *mut pg_sys::Node) -> Result<(), String> {
        let saved = self.reason.take();
        let top = std::mem::replace(&mut self.top_outputs, false);
        self.levels.push(q);
        walk(e, self as *mut Check as *mut std::ffi::c_void);
        self.levels.pop();
        self.top_outputs = top;
        match std::mem::replace(&mut self.reason, saved) {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }

    /// Split the top query's output columns: each is a leaf DuckDB computes when exact,
    /// or PostgreSQL's expression over leaves; None (and the reason kept) if one cannot be.
    unsafe fn split_outputs(&mut self, q: *mut pg_sys::Query) -> Option<Split> {
        let mut split = Split { leaves: vec![], outputs: vec![] };
        for c in list_cells((*q).targetList) {
            let tle = c.ptr_value as *mut pg_sys::TargetEntry;
            if (*tle).resjunk {
                continue;
            }
            let e = (*tle).expr as *mut pg_sys::Node;
            let expr = if self.exact(q, e).is_ok() {
                split.leaves.push((e, (*tle).ressortgroupref, (*tle).resname));
                leaf_var(e, split.leaves.len())
            } else {
                // PostgreSQL computes this column: it cannot be what DuckDB sorts,
                // groups or de-duplicates by, nor a column of a set operation.
                if (*tle).ressortgroupref != 0 || !(*q).setOperations.is_null() {
                    let why = self.exact(q, e).err().unwrap_or_default();
                    self.refuse(why);
                    return None;
                }
                match self.split(q, e, &mut split.leaves) {
                    Ok(x) => x,
                    Err(why) => {
                        self.refuse(why);
                        return None;
                    }
                }
            };
            split.outputs.push((expr, (*tle).resname));
        }
        Some(split)
    }

    /// `e` as a leaf DuckDB computes where scales do not matter (the value is exact at
    /// DuckDB's scale, and PostgreSQL's projection above sets the scale), if it is exact.
    unsafe fn scale_free_leaf(
        &mut self,
        q: *mut pg_sys::Query,
        e: *mut pg_sys::Node,
        leaves: &mut Vec<(*mut pg_sys::Node, u32, *mut std::ffi::c_char)>,
    ) -> Option<*mut pg_sys::Node> {
        self.scale_free += 1;
        let exact = self.exact(q, e);
        self.scale_free -= 1;
        exact.ok()?;
        leaves.push((e, 0, std::ptr::null_mut()));
        Some(leaf_var(e, leaves.len()))
    }

    /// PostgreSQL's side of `e`: DuckDB's leaves replaced by Vars of INDEX_VAR.
    unsafe fn split(
        &mut self,
        q: *mut pg_sys::Query,
        e: *mut pg_sys::Node,
        leaves: &mut Vec<(*mut pg_sys::Node, u32, *mut std::ffi::c_char)>,
    ) -> Result<*mut pg_sys::Node, String> {
        use pg_sys::NodeTag::*;
        let why = match self.exact(q, e) {
            Ok(()) => {
                leaves.push((e, 0, std::ptr::null_mut()));
                return Ok(leaf_var(e, leaves.len()));
            }
            Err(why) => why,
        };
        let copy = |n: *mut pg_sys::Node| pg_sys::copyObjectImpl(n as *const std::ffi::c_void) as *mut pg_sys::Node;
        match (*e).type_ {
            T_Const => Ok(copy(e)),
            T_Aggref if mixed_case_sum(e).is_some() => {
                // sum(CASE … THEN x ELSE 0 END): PostgreSQL's result has the largest scale
                // of the values summed, so it depends on which branches rows took; DuckDB
                // sums at the largest scale of all branches. DuckDB returns the sum and, per
                // scale, how many rows took a branch of that scale; PostgreSQL rounds the sum
                // to the largest scale that occurred (exact: smaller-scale values have no
                // digits beyond it).
                let (case, scales) = mixed_case_sum(e).expect("checked");
                let Some(sum) = self.scale_free_leaf(q, e, leaves) else { return Err(why) };
                // Largest scale first: CASE WHEN rows of scale 4 THEN … WHEN rows of 2 … ELSE 0.
                let mut result = round_numeric(sum, scales[0]);
                for &scale in &scales[1..] {
                    // count(CASE … the branches of this scale … ELSE NULL END)
                    let branch_case = copy(case as *mut pg_sys::Node) as *mut pg_sys::CaseExpr;
                    let null = || pg_sys::makeConst(pg_sys::NUMERICOID, -1, pg_sys::InvalidOid, -1, pg_sys::Datum::from(0usize), true, false) as *mut pg_sys::Expr;
                    for w in list_cells((*branch_case).args) {
                        let w = w.ptr_value as *mut pg_sys::CaseWhen;
                        if numeric_scale((*w).result as *mut pg_sys::Node) != Some(Some(scale)) {
                            (*w).result = null();
                        }
                    }
                    if numeric_scale((*branch_case).defresult as *mut pg_sys::Node) != Some(Some(scale)) {
                        (*branch_case).defresult = null();
                    }
                    let n = copy(e) as *mut pg_sys::Aggref;
                    (*n).aggfnoid = pg_sys::Oid::from(F_COUNT_ANY);
                    (*n).aggtype = pg_sys::INT8OID;
                    let tle = pg_sys::makeTargetEntry(branch_case as *mut pg_sys::Expr, 1, std::ptr::null_mut(), false);
                    (*n).args = pg_sys::lappend(std::ptr::null_mut(), tle as *mut std::ffi::c_void);
                    let Some(n) = self.scale_free_leaf(q, n as *mut pg_sys::Node, leaves) else { return Err(why) };
                    result = case_when(int8_positive(n), round_numeric(sum, scale), result);
                }
                Ok(result)
            }
            T_Aggref => {
                let a = e as *mut pg_sys::Aggref;
                let avg_of = list_cells((*a).aggargtypes).first().map(|c| c.oid_value);
                let sum = match (CStr::from_ptr(pg_sys::get_func_name((*a).aggfnoid)).to_bytes(), avg_of) {
                    (b"avg", Some(pg_sys::INT2OID)) => (F_SUM_INT2, pg_sys::INT8OID),
                    (b"avg", Some(pg_sys::INT4OID)) => (F_SUM_INT4, pg_sys::INT8OID),
                    (b"avg", Some(pg_sys::INT8OID)) => (F_SUM_INT8, pg_sys::NUMERICOID),
                    (b"avg", Some(pg_sys::NUMERICOID)) => (F_SUM_NUMERIC, pg_sys::NUMERICOID),
                    _ => return Err(why),
                };
                if !(*a).aggdistinct.is_null() {
                    return Err("avg(DISTINCT …)".into());
                }
                // avg is sum / count in numeric, PostgreSQL's own final step (int8_avg,
                // numeric_avg): DuckDB computes both, PostgreSQL divides.
                let s = copy(e) as *mut pg_sys::Aggref;
                (*s).aggfnoid = pg_sys::Oid::from(sum.0);
                (*s).aggtype = sum.1;
                let n = copy(e) as *mut pg_sys::Aggref;
                (*n).aggfnoid = pg_sys::Oid::from(F_COUNT_ANY);
                (*n).aggtype = pg_sys::INT8OID;
                let s = self.split(q, s as *mut pg_sys::Node, leaves)?;
                let n = self.split(q, n as *mut pg_sys::Node, leaves)?;
                let as_numeric = |x: *mut pg_sys::Node| {
                    if pg_sys::exprType(x) == pg_sys::NUMERICOID {
                        x
                    } else {
                        let l = pg_sys::lappend(std::ptr::null_mut(), x as *mut std::ffi::c_void);
                        pg_sys::makeFuncExpr(
                            pg_sys::Oid::from(F_NUMERIC_INT8),
                            pg_sys::NUMERICOID,
                            l,
                            pg_sys::InvalidOid,
                            pg_sys::InvalidOid,
                            pg_sys::CoercionForm::COERCE_IMPLICIT_CAST,
                        ) as *mut pg_sys::Node
                    }
                };
                let div = pg_sys::palloc0(std::mem::size_of::<pg_sys::OpExpr>()) as *mut pg_sys::OpExpr;
                (*div).xpr.type_ = T_OpExpr;
                (*div).opno = pg_sys::Oid::from(OP_NUMERIC_DIV);
                (*div).opfuncid = pg_sys::Oid::from(F_NUMERIC_DIV);
                (*div).opresulttype = pg_sys::NUMERICOID;
                (*div).args = pg_sys::lappend(pg_sys::lappend(std::ptr::null_mut(), as_numeric(s) as *mut std::ffi::c_void), as_numeric(n) as *mut std::ffi::c_void);
                (*div).location = -1;
                Ok(div as *mut pg_sys::Node)
            }
            // PostgreSQL evaluates the operator or function over its arguments' leaves.
            T_OpExpr | T_FuncExpr | T_RelabelType | T_CoalesceExpr => {
                let c = copy(e);
                let args: *mut *mut pg_sys::List = match (*e).type_ {
                    T_OpExpr => &mut (*(c as *mut pg_sys::OpExpr)).args,
                    T_FuncExpr => &mut (*(c as *mut pg_sys::FuncExpr)).args,
                    T_CoalesceExpr => &mut (*(c as *mut pg_sys::CoalesceExpr)).args,
                    _ => {
                        let r = c as *mut pg_sys::RelabelType;
                        (*r).arg = self.split(q, (*r).arg as *mut pg_sys::Node, leaves)? as *mut pg_sys::Expr;
                        return Ok(c);
                    }
                };
                let mut out = std::ptr::null_mut();
                for a in list_cells(*args) {
                    out = pg_sys::lappend(out, self.split(q, a.ptr_value as *mut pg_sys::Node, leaves)? as *mut std::ffi::c_void);
                }
                *args = out;
                Ok(c)
            }
            _ => Err(why),
        }
    }

    /// The range-table entry a Var refers to.
    unsafe fn rte_of(&self, v: &pg_sys::Var) -> Option<*mut pg_sys::RangeTblEntry> {
        let level = self.levels.len().checked_sub(1 + v.varlevelsup as usize)?;
        let cells = list_cells((*self.levels[level]).rtable);
        let i = (v.varno as usize).checked_sub(1)?;
        cells.get(i).map(|c| c.ptr_value as *mut pg_sys::RangeTblEntry)
    }

    unsafe fn rte(&mut self, rte: &pg_sys::RangeTblEntry) -> bool {
        if !rte.securityQuals.is_null() {
            return self.refuse("row-level security");
        }
        match rte.rtekind {
            pg_sys::RTEKind::RTE_RELATION => {
                if !rte.tablesample.is_null() {
                    return self.refuse("TABLESAMPLE");
                }
                if rte.relkind as u8 != pg_sys::RELKIND_RELATION {
                    return self.refuse("a table that is not a plain table");
                }
                let rel = pg_sys::RelationIdGetRelation(rte.relid);
                if rel.is_null() {
                    return self.refuse("a table that is gone");
                }
                let ours = tam::is_anker(rel);
                let children = (*(*rel).rd_rel).relhassubclass;
                let persistent = (*(*rel).rd_rel).relpersistence as u8 != pg_sys::RELPERSISTENCE_TEMP;
                pg_sys::RelationClose(rel);
                if !ours {
                    return self.refuse("it reads a table that is not an anker table");
                }
                if children {
                    return self.refuse("an anker table with inheritance children");
                }
                if !persistent {
                    return self.refuse("a temporary table");
                }
                self.tables.entry(rte.relid.to_u32()).or_default();
                false
            }
            pg_sys::RTEKind::RTE_JOIN | pg_sys::RTEKind::RTE_SUBQUERY | pg_sys::RTEKind::RTE_CTE => false,
            _ => self.refuse("a range-table entry that is not a table, join, sub-query or WITH query"),
        }
    }

    unsafe fn collation_ok(&mut self, coll: pg_sys::Oid) -> bool {
        coll == pg_sys::InvalidOid || lc_collate_is_c(coll)
    }

    unsafe fn node(&mut self, node: *mut pg_sys::Node) -> bool {
        use pg_sys::NodeTag::*;
        match (*node).type_ {
            T_Query => return self.query(node as *mut pg_sys::Query),
            T_RangeTblEntry => {
                let rte = &*(node as *mut pg_sys::RangeTblEntry);
                if rte.rtekind == pg_sys::RTEKind::RTE_SUBQUERY {
                    self.from_subqueries.insert(rte.subquery as usize);
                }
                if self.rte(rte) {
                    return true;
                }
                return false; // the walker goes on into its sub-query, if any
            }
            T_Var => {
                let v = &*(node as *mut pg_sys::Var);
                if v.varattno <= 0 {
                    return self.refuse("a system column or whole-row reference");
                }
                if !self.collation_ok(v.varcollid) {
                    return self.refuse("a collation other than C");
                }
                let Some(rte) = self.rte_of(v) else { return self.refuse("an unresolved column") };
                if (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION {
                    if Kind::of(v.vartype, v.vartypmod).is_none() {
                        return self.refuse(format!("a column of type {}", type_name(v.vartype)));
                    }
                    self.tables.entry((*rte).relid.to_u32()).or_default().insert(v.varattno as usize - 1);
                } else if !expr_type_ok(v.vartype) {
                    return self.refuse(format!("a value of type {}", type_name(v.vartype)));
                }
                if self.scale_free == 0 {
                    match (*rte).rtekind {
                        pg_sys::RTEKind::RTE_SUBQUERY => {
                            self.scaled_reads.insert(((*rte).subquery as usize, v.varattno));
                        }
                        pg_sys::RTEKind::RTE_JOIN => self.scaled_join_read = true,
                        _ => {}
                    }
                }
                return false;
            }
            T_Const => {
                let c = &*(node as *mut pg_sys::Const);
                if let Some(why) = const_problem(c) {
                    return self.refuse(why);
                }
                return false;
            }
            // The outputs of an IN (…) sub-query, in its test expression.
            T_Param if (*(node as *mut pg_sys::Param)).paramkind == pg_sys::ParamKind::PARAM_SUBLINK => return false,
            // A custom plan's parameter: its value, as a constant.
            // A generic plan's parameter: judged by its type (its values by the custom plans).
            T_Param => {
                let p = &*(node as *mut pg_sys::Param);
                return match bound_value(self.params, node as *mut pg_sys::Param) {
                    Some(c) => match const_problem(&*c) {
                        Some(why) => self.refuse(why),
                        None => false,
                    },
                    None if p.paramkind == pg_sys::ParamKind::PARAM_EXTERN && expr_type_ok(p.paramtype) => {
                        self.generic = true;
                        false
                    }
                    None => self.refuse(format!("a parameter of type {}", type_name(p.paramtype))),
                };
            }
            T_OpExpr => {
                let o = &*(node as *mut pg_sys::OpExpr);
                if !self.collation_ok(o.inputcollid) {
                    return self.refuse("a collation other than C");
                }
                if let Some(why) = operator_problem(o.opno, o.args) {
                    return self.refuse(why);
                }
                if is_comparison(o.opno) {
                    // DuckDB compares an avg it computes as DECIMAL(38, 24): what it is
                    // compared with must fit that.
                    let args: Vec<*mut pg_sys::Node> = list_cells(o.args).iter().map(|c| c.ptr_value as *mut pg_sys::Node).collect();
                    let with_avg: Vec<bool> = args.iter().map(|&a| self.mentions_avg(a)).collect();
                    for (i, &a) in args.iter().enumerate() {
                        if with_avg.iter().enumerate().any(|(j, &m)| m && j != i) && !self.narrow(a) {
                            return self.refuse(format!(
                                "avg compared with a value that may have more than {} integer digits",
                                avg::INTEGER_DIGITS
                            ));
                        }
                    }
                    // Below a comparison numeric scales do not matter (values compare
                    // exactly at any scale): integers cast to numeric are fine there.
                    self.scale_free += 1;
                    let stop = pg_sys::expression_tree_walker(node, Some(walk), self as *mut Check as *mut std::ffi::c_void);
                    self.scale_free -= 1;
                    return stop;
                }
            }
            T_FuncExpr if self.scale_free > 0 && is_int_to_numeric(node) => {}
            T_FuncExpr => {
                let f = &*(node as *mut pg_sys::FuncExpr);
                if let Some(why) = function_problem(f) {
                    return self.refuse(why);
                }
                if CStr::from_ptr(pg_sys::get_func_name(f.funcid)).to_bytes() == b"extract" {
                    // DuckDB's EXTRACT of ±infinity is NULL, PostgreSQL's ±Infinity: the
                    // column's scan refuses infinite values.
                    let arg = list_cells(f.args)[1].ptr_value as *mut pg_sys::Node;
                    let base = ((*arg).type_ == T_Var).then(|| &*(arg as *mut pg_sys::Var)).and_then(|v| {
                        let rte = self.rte_of(v)?;
                        ((*rte).rtekind == pg_sys::RTEKind::RTE_RELATION && v.varattno > 0).then(|| ((*rte).relid.to_u32(), v.varattno as usize - 1))
                    });
                    match base {
                        Some(column) => {
                            self.finite.insert(column);
                        }
                        None => return self.refuse("EXTRACT from an expression"),
                    }
                }
            }
            T_RelabelType => {
                let r = &*(node as *mut pg_sys::RelabelType);
                if !expr_type_ok(r.resulttype) {
                    return self.refuse(format!("a value of type {}", type_name(r.resulttype)));
                }
            }
            T_Aggref => {
                let a = &*(node as *mut pg_sys::Aggref);
                if !self.collation_ok(a.inputcollid) {
                    return self.refuse("a collation other than C");
                }
                let compared = self.scale_free > 0 || std::mem::take(&mut self.in_avg_output);
                if avg::is_avg(node) {
                    // DuckDB computes PostgreSQL's value of it, but at a fixed scale: only
                    // where scales cannot show.
                    if !compared {
                        return self.refuse("the aggregate avg (below the top level, DuckDB takes it only in comparisons)");
                    }
                    if let Err(why) = avg::form(a) {
                        return self.refuse(why);
                    }
                } else if let Some(why) = aggregate_problem(a) {
                    return self.refuse(why);
                }
            }
            // An `avg` that is an output column of a sub-query in FROM: allowed if the
            // query reads that column only in comparisons (checked at the end).
            T_TargetEntry
                if self.levels.len() > 1
                    && self.from_subqueries.contains(&(*self.levels.last().expect("in a query") as usize))
                    && !(*(node as *mut pg_sys::TargetEntry)).resjunk
                    && avg::is_avg((*(node as *mut pg_sys::TargetEntry)).expr as *mut pg_sys::Node) =>
            {
                let tle = &*(node as *mut pg_sys::TargetEntry);
                self.avg_outputs.insert((*self.levels.last().expect("in a query") as usize, tle.resno));
                self.in_avg_output = true;
                let stop = pg_sys::expression_tree_walker(node, Some(walk), self as *mut Check as *mut std::ffi::c_void);
                self.in_avg_output = false;
                return stop;
            }
            // x IN (a, b, …): `x = ANY (ARRAY[a, b, …])` in both, NULLs alike.
            T_ScalarArrayOpExpr => {
                let o = &*(node as *mut pg_sys::ScalarArrayOpExpr);
                if !self.collation_ok(o.inputcollid) {
                    return self.refuse("a collation other than C");
                }
                let args = list_cells(o.args);
                let list = args.get(1).map(|c| c.ptr_value as *mut pg_sys::Node);
                if !is_comparison(o.opno) || !list.is_some_and(|a| (*a).type_ == T_ArrayExpr) {
                    return self.refuse("an ANY/ALL comparison other than with a list of values");
                }
                if let Some(why) = operator_problem(o.opno, o.args) {
                    return self.refuse(why);
                }
            }
            T_ArrayExpr => {
                if (*(node as *mut pg_sys::ArrayExpr)).multidims {
                    return self.refuse("a multi-dimensional array");
                }
            }
            T_SubLink => {
                let s = &*(node as *mut pg_sys::SubLink);
                use pg_sys::SubLinkType::*;
                if !matches!(s.subLinkType, EXISTS_SUBLINK | ANY_SUBLINK | EXPR_SUBLINK) {
                    return self.refuse("a sub-query other than EXISTS, IN or a scalar sub-query");
                }
            }
            T_NullTest => {
                if (*(node as *mut pg_sys::NullTest)).argisrow {
                    return self.refuse("IS NULL on a row");
                }
            }
            // PostgreSQL keeps each numeric value's own scale; DuckDB gives a CASE or
            // COALESCE the widest scale of its branches.
            T_CaseExpr | T_CoalesceExpr
                if self.scale_free == 0 && pg_sys::exprType(node) == pg_sys::NUMERICOID && branch_scales(node).is_none() =>
            {
                return self.refuse("a CASE or COALESCE whose numeric branches may differ in scale");
            }
            // (Only the query's own output columns: an aggregate's arguments are TargetEntries
            // too, and must be walked.)
            T_TargetEntry
                if self.top_outputs
                    && self.levels.len() == 1
                    && !(*(node as *mut pg_sys::TargetEntry)).resjunk
                    && list_cells((*self.levels[0]).targetList).iter().any(|c| c.ptr_value == node as *mut std::ffi::c_void) =>
            {
                return false;
            }
            T_BoolExpr | T_CaseExpr | T_CaseWhen | T_CaseTestExpr | T_CoalesceExpr | T_List | T_TargetEntry | T_SortGroupClause
            | T_FromExpr | T_JoinExpr | T_RangeTblRef | T_CommonTableExpr => {}
            tag => return self.refuse(format!("an expression DuckDB is not given ({tag:?})")),
        }
        pg_sys::expression_tree_walker(node, Some(walk), self as *mut Check as *mut std::ffi::c_void)
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn walk(node: *mut pg_sys::Node, ctx: *mut std::ffi::c_void) -> bool {
    if node.is_null() {
        return false;
    }
    (*(ctx as *mut Check)).node(node)
}

pub unsafe fn type_name(typid: pg_sys::Oid) -> String {
    CStr::from_ptr(pg_sys::format_type_be(typid)).to_string_lossy().into_owned()
}

/// Types an expression may have (numeric of any scale: DuckDB's decimal scales follow
/// PostgreSQL's for the operators allowed).
fn expr_type_ok(typid: pg_sys::Oid) -> bool {
    typid == pg_sys::NUMERICOID || Kind::of(typid, -1).is_some()
}

/// Integers, numerics and floats.
fn is_number(t: pg_sys::Oid) -> bool {
    matches!(t, pg_sys::INT2OID | pg_sys::INT4OID | pg_sys::INT8OID | pg_sys::NUMERICOID | pg_sys::FLOAT4OID | pg_sys::FLOAT8OID)
}

fn is_text(t: pg_sys::Oid) -> bool {
    matches!(t, pg_sys::TEXTOID | pg_sys::VARCHAROID)
}

fn is_datetime(t: pg_sys::Oid) -> bool {
    matches!(t, pg_sys::DATEOID | pg_sys::TIMESTAMPOID)
}

/// The scale of every value of numeric expression `e`, where it is known from the
/// expression alone: `Some(None)` for a NULL constant (any scale), None if unknown.
unsafe fn numeric_scale(e: *mut pg_sys::Node) -> Option<Option<u32>> {
    use pg_sys::NodeTag::*;
    let args = |l: *mut pg_sys::List| -> Vec<*mut pg_sys::Node> { list_cells(l).iter().map(|c| c.ptr_value as *mut pg_sys::Node).collect() };
    match (*e).type_ {
        T_Const => {
            let c = &*(e as *mut pg_sys::Const);
            if c.constisnull {
                Some(None)
            } else {
                numeric_shape(&const_text(c)).map(|(_, s)| Some(s))
            }
        }
        T_Var => match Kind::of(pg_sys::exprType(e), pg_sys::exprTypmod(e)) {
            Some(Kind::Decimal(_, s)) => Some(Some(s as u32)),
            _ => None,
        },
        T_RelabelType => numeric_scale((*(e as *mut pg_sys::RelabelType)).arg as *mut pg_sys::Node),
        // an integer as numeric has scale 0 in PostgreSQL
        T_FuncExpr if is_int_to_numeric(e) => Some(Some(0)),
        T_OpExpr => {
            let o = &*(e as *mut pg_sys::OpExpr);
            let a = args(o.args);
            let scales: Option<Vec<u32>> = a.iter().map(|&x| numeric_scale(x).flatten()).collect();
            let scales = scales?;
            match (opname(o.opno).as_str(), scales.as_slice()) {
                ("+" | "-", [l, r]) => Some(Some(*l.max(r))),
                ("-", [x]) => Some(Some(*x)),
                ("*", [l, r]) => Some(Some(l + r)),
                _ => None,
            }
        }
        T_Aggref => {
            let a = &*(e as *mut pg_sys::Aggref);
            let name = CStr::from_ptr(pg_sys::get_func_name(a.aggfnoid)).to_string_lossy().into_owned();
            let arg = list_cells(a.args).first().map(|c| (*(c.ptr_value as *mut pg_sys::TargetEntry)).expr as *mut pg_sys::Node)?;
            matches!(name.as_str(), "sum" | "min" | "max").then(|| numeric_scale(arg)).flatten()
        }
        T_CaseExpr | T_CoalesceExpr => branch_scales(e).map(Some),
        _ => None,
    }
}

/// The one scale of all branches of a numeric CASE or COALESCE, if they share one.
unsafe fn branch_scales(e: *mut pg_sys::Node) -> Option<u32> {
    let branches: Vec<*mut pg_sys::Node> = if (*e).type_ == pg_sys::NodeTag::T_CaseExpr {
        let c = &*(e as *mut pg_sys::CaseExpr);
        let mut b: Vec<*mut pg_sys::Node> =
            list_cells(c.args).iter().map(|w| (*(w.ptr_value as *mut pg_sys::CaseWhen)).result as *mut pg_sys::Node).collect();
        b.push(c.defresult as *mut pg_sys::Node);
        b
    } else {
        list_cells((*(e as *mut pg_sys::CoalesceExpr)).args).iter().map(|c| c.ptr_value as *mut pg_sys::Node).collect()
    };
    let mut scale = None;
    for b in branches {
        if b.is_null() {
            continue; // CASE without ELSE: NULL
        }
        match numeric_scale(b)? {
            None => {}
            Some(s) if scale.is_none_or(|x| x == s) => scale = Some(s),
            Some(_) => return None,
        }
    }
    Some(scale.unwrap_or(0))
}

/// Precision and scale of a numeric constant's text (`-12.50`: 4, 2), if DuckDB's DECIMAL
/// holds it.
fn numeric_shape(s: &str) -> Option<(u32, u32)> {
    let s = s.strip_prefix('-').unwrap_or(s);
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let int = int.trim_start_matches('0');
    let precision = (int.len() + frac.len()).max(1) as u32;
    (precision <= 38).then_some((precision.max(frac.len() as u32), frac.len() as u32))
}

/// Does `e`'s type (or value, for a constant) keep it within avg::INTEGER_DIGITS digits
/// before the point? (`form` bounds the values an avg averages.)
unsafe fn narrow_type(e: *mut pg_sys::Node) -> bool {
    let digits_ok = |d: u32| d <= avg::INTEGER_DIGITS;
    match (*e).type_ {
        pg_sys::NodeTag::T_Const => {
            let c = &*(e as *mut pg_sys::Const);
            return match c.consttype {
                _ if c.constisnull => true,
                pg_sys::NUMERICOID => numeric_shape(&const_text(c)).is_some_and(|(p, s)| digits_ok(p - s)),
                t => matches!(t, pg_sys::INT2OID | pg_sys::INT4OID),
            };
        }
        pg_sys::NodeTag::T_FuncExpr if is_int_to_numeric(e) => {
            return narrow_type(list_cells((*(e as *mut pg_sys::FuncExpr)).args)[0].ptr_value as *mut pg_sys::Node);
        }
        _ if avg::is_avg(e) => return true,
        _ => {}
    }
    match pg_sys::exprType(e) {
        pg_sys::INT2OID | pg_sys::INT4OID => true,
        pg_sys::NUMERICOID => matches!(Kind::of(pg_sys::NUMERICOID, pg_sys::exprTypmod(e)), Some(Kind::Decimal(p, s)) if digits_ok((p - s) as u32)),
        _ => false,
    }
}

/// The value of parameter `p` of a custom plan, as a constant; None for a generic plan.
unsafe fn bound_value(params: pg_sys::ParamListInfo, p: *mut pg_sys::Param) -> Option<*mut pg_sys::Const> {
    let p = &*p;
    if params.is_null() || p.paramkind != pg_sys::ParamKind::PARAM_EXTERN || p.paramid < 1 || p.paramid > (*params).numParams {
        return None;
    }
    let mut workspace = std::mem::zeroed::<pg_sys::ParamExternData>();
    let data = match (*params).paramFetch {
        Some(fetch) => fetch(params, p.paramid, false, &mut workspace),
        None => (*params).params.as_mut_ptr().add(p.paramid as usize - 1),
    };
    if data.is_null() || (*data).pflags as u32 & pg_sys::PARAM_FLAG_CONST == 0 || (*data).ptype != p.paramtype {
        return None;
    }
    let (mut len, mut byval) = (0i16, false);
    pg_sys::get_typlenbyval(p.paramtype, &mut len, &mut byval);
    Some(pg_sys::makeConst(p.paramtype, p.paramtypmod, p.paramcollid, len as i32, (*data).value, (*data).isnull, byval))
}

/// A node mutator as `expression_tree_mutator` calls it.
type Mutator = unsafe extern "C-unwind" fn(*mut pg_sys::Node, *mut std::ffi::c_void) -> *mut pg_sys::Node;

/// Replace a custom plan's parameters by their values (the copy to be deparsed).
#[pg_guard]
unsafe extern "C-unwind" fn params_to_constants(node: *mut pg_sys::Node, ctx: *mut std::ffi::c_void) -> *mut pg_sys::Node {
    if node.is_null() {
        return node;
    }
    let mutator: Mutator = params_to_constants;
    // SAFETY: as in prepare.
    let mutator = std::mem::transmute::<Mutator, unsafe extern "C-unwind" fn() -> *mut pg_sys::Node>(mutator);
    match (*node).type_ {
        pg_sys::NodeTag::T_Param => match bound_value(ctx as pg_sys::ParamListInfo, node as *mut pg_sys::Param) {
            Some(c) => c as *mut pg_sys::Node,
            None => node,
        },
        pg_sys::NodeTag::T_Query => {
            pg_sys::query_tree_mutator(node as *mut pg_sys::Query, Some(mutator), ctx, pg_sys::QTW_DONT_COPY_QUERY as i32) as *mut pg_sys::Node
        }
        _ => pg_sys::expression_tree_mutator(node, Some(mutator), ctx),
    }
}

/// ruleutils writes a numeric constant that is not a plain decimal (`5`, `-1.5`) as
/// `'5'::numeric`, which DuckDB reads as DECIMAL(18,3): a scale PostgreSQL's value does not
/// have. Give every numeric constant of the copy to be deparsed its own precision and
/// scale as type modifier, so it is written `'5'::numeric(1,0)`.
#[pg_guard]
unsafe extern "C-unwind" fn pin_numeric_constants(node: *mut pg_sys::Node, ctx: *mut std::ffi::c_void) -> bool {
    if node.is_null() {
        return false;
    }
    match (*node).type_ {
        pg_sys::NodeTag::T_Const => {
            let c = &mut *(node as *mut pg_sys::Const);
            if c.consttype == pg_sys::NUMERICOID {
                // A NULL gets the narrowest type, so that it widens no CASE or COALESCE.
                let shape = if c.constisnull { Some((1, 0)) } else { numeric_shape(&const_text(c)) };
                if let Some((p, s)) = shape {
                    c.consttypmod = ((p << 16) | s) as i32 + pg_sys::VARHDRSZ as i32;
                }
            }
            false
        }
        pg_sys::NodeTag::T_Query => pg_sys::query_tree_walker(node as *mut pg_sys::Query, Some(pin_numeric_constants), ctx, 0),
        _ => pg_sys::expression_tree_walker(node, Some(pin_numeric_constants), ctx),
    }
}

/// Why DuckDB cannot take this constant as PostgreSQL deparses it, if it cannot.
unsafe fn const_problem(c: &pg_sys::Const) -> Option<String> {
    if !expr_type_ok(c.consttype) {
        return Some(format!("a constant of type {}", type_name(c.consttype)));
    }
    if c.constisnull {
        return None;
    }
    let out = || const_text(c);
    match c.consttype {
        // Written with its precision and scale for DuckDB (`pin_numeric_constants`), which
        // DuckDB's DECIMAL must hold.
        pg_sys::NUMERICOID if numeric_shape(&out()).is_none() => Some("a numeric constant of more than 38 digits, or not a number".into()),
        // PostgreSQL's LIKE escapes with a backslash by default, DuckDB's does not.
        pg_sys::TEXTOID | pg_sys::VARCHAROID if out().contains('\\') => Some("a text constant with a backslash".into()),
        // char(n) comparisons ignore trailing blanks; the stored values are handed over
        // without them, constants are not.
        pg_sys::BPCHAROID if out().ends_with(' ') => Some("a char(n) constant with trailing blanks".into()),
        _ => None,
    }
}

unsafe fn opname(opno: pg_sys::Oid) -> String {
    CStr::from_ptr(pg_sys::get_opname(opno)).to_string_lossy().into_owned()
}

unsafe fn is_comparison(opno: pg_sys::Oid) -> bool {
    matches!(opname(opno).as_str(), "=" | "<>" | "<" | "<=" | ">" | ">=")
}

/// An implicit cast of an integer to numeric (DuckDB's DECIMAL(18,3): the value, not
/// PostgreSQL's scale).
unsafe fn is_int_to_numeric(node: *mut pg_sys::Node) -> bool {
    let f = &*(node as *mut pg_sys::FuncExpr);
    let args = list_cells(f.args);
    f.funcresulttype == pg_sys::NUMERICOID
        && f.funcformat != pg_sys::CoercionForm::COERCE_EXPLICIT_CALL
        && args.len() == 1
        && is_int(pg_sys::exprType(args[0].ptr_value as *const pg_sys::Node))
}

/// A non-NULL constant argument.
unsafe fn const_arg(args: &[pg_sys::ListCell], i: usize) -> Option<&pg_sys::Const> {
    let n = args.get(i)?.ptr_value as *mut pg_sys::Node;
    ((*n).type_ == pg_sys::NodeTag::T_Const && !(*(n as *mut pg_sys::Const)).constisnull).then(|| &*(n as *mut pg_sys::Const))
}

/// The integer value of an integer constant.
unsafe fn const_int(c: &pg_sys::Const) -> Option<i64> {
    let v = c.constvalue.value() as i64;
    match c.consttype {
        pg_sys::INT2OID => Some(v as i16 as i64),
        pg_sys::INT4OID => Some(v as i32 as i64),
        pg_sys::INT8OID => Some(v),
        _ => None,
    }
}

unsafe fn const_text(c: &pg_sys::Const) -> String {
    let mut typoutput = pg_sys::InvalidOid;
    let mut varlena = false;
    pg_sys::getTypeOutputInfo(c.consttype, &mut typoutput, &mut varlena);
    CStr::from_ptr(pg_sys::OidOutputFunctionCall(typoutput, c.constvalue)).to_string_lossy().into_owned()
}

fn is_int(t: pg_sys::Oid) -> bool {
    matches!(t, pg_sys::INT2OID | pg_sys::INT4OID | pg_sys::INT8OID)
}

/// Why DuckDB cannot take this operator, if it cannot.
unsafe fn operator_problem(opno: pg_sys::Oid, args: *mut pg_sys::List) -> Option<String> {
    let name = opname(opno);
    let (mut l, mut r) = (pg_sys::InvalidOid, pg_sys::InvalidOid);
    pg_sys::op_input_types(opno, &mut l, &mut r);
    let args = list_cells(args);
    let ok = match name.as_str() {
        "=" | "<>" | "<" | "<=" | ">" | ">=" => {
            (is_number(l) && is_number(r))
                || (is_text(l) && is_text(r))
                || (l == pg_sys::BPCHAROID && r == pg_sys::BPCHAROID)
                || (is_datetime(l) && is_datetime(r))
                || (l == pg_sys::BOOLOID && r == pg_sys::BOOLOID)
        }
        // Integer and numeric arithmetic: same types, overflow errors and decimal scales
        // in both engines.
        "+" | "-" | "*" => {
            let int_or_numeric = |t| is_int(t) || t == pg_sys::NUMERICOID;
            // Mixed integer widths give the wider type in both.
            (l == pg_sys::InvalidOid || int_or_numeric(l))
                && int_or_numeric(r)
                && (l == r || l == pg_sys::InvalidOid || (is_int(l) && is_int(r)))
        }
        // Integer remainder truncates in both; DuckDB's is NULL where PostgreSQL's
        // divides by zero, so only by a non-zero constant.
        "%" => is_int(l) && l == r && const_arg(args, 1).and_then(|c| const_int(c)).is_some_and(|d| d != 0),
        "~~" | "!~~" if is_text(l) && is_text(r) => true,
        // LIKE on char(n) sees the blanks PostgreSQL pads with and DuckDB's copy lacks;
        // a pattern ending in % without _ or blanks matches both alike.
        "~~" | "!~~" if l == pg_sys::BPCHAROID && is_text(r) => const_arg(args, 1).is_some_and(|c| {
            let p = const_text(c);
            p.ends_with('%') && !p.contains(['_', ' ', '\\'])
        }),
        _ => false,
    };
    (!ok).then(|| format!("the operator {} ({}, {})", name, type_name_or_none(l), type_name_or_none(r)))
}

unsafe fn type_name_or_none(t: pg_sys::Oid) -> String {
    if t == pg_sys::InvalidOid {
        "none".into()
    } else {
        type_name(t)
    }
}

/// Why DuckDB cannot take this function call, if it cannot.
unsafe fn function_problem(f: &pg_sys::FuncExpr) -> Option<String> {
    let args = list_cells(f.args);
    let arg_type = |i: usize| args.get(i).map_or(pg_sys::InvalidOid, |c| pg_sys::exprType(c.ptr_value as *const pg_sys::Node));
    let name = CStr::from_ptr(pg_sys::get_func_name(f.funcid)).to_string_lossy().into_owned();
    let cast = f.funcformat != pg_sys::CoercionForm::COERCE_EXPLICIT_CALL && args.len() == 1;
    let ok = match name.as_str() {
        // Widening casts.
        _ if cast
            && matches!(
                (arg_type(0), f.funcresulttype),
                (pg_sys::INT2OID, pg_sys::INT4OID)
                    | (pg_sys::INT2OID, pg_sys::INT8OID)
                    | (pg_sys::INT4OID, pg_sys::INT8OID)
                    | (pg_sys::DATEOID, pg_sys::TIMESTAMPOID)
                    | (pg_sys::FLOAT4OID, pg_sys::FLOAT8OID)
                    | (pg_sys::INT2OID | pg_sys::INT4OID | pg_sys::INT8OID, pg_sys::FLOAT8OID)
            ) =>
        {
            true
        }
        // char(n) to text drops the trailing blanks, which DuckDB's copy never had.
        "text" => cast && arg_type(0) == pg_sys::BPCHAROID,
        // As the % operator.
        "mod" => is_int(arg_type(0)) && arg_type(0) == arg_type(1) && const_arg(args, 1).and_then(|c| const_int(c)).is_some_and(|d| d != 0),
        // Positions count from 1 in both; DuckDB reads a negative start from the end.
        "substr" | "substring" => {
            is_text(arg_type(0))
                && const_arg(args, 1).and_then(|c| const_int(c)).is_some_and(|s| s >= 1)
                && (args.len() == 2 || const_arg(args, 2).and_then(|c| const_int(c)).is_some_and(|n| n >= 0))
        }
        "ascii" => is_text(arg_type(0)),
        // Integer-valued fields; numeric in PostgreSQL, BIGINT in DuckDB.
        "extract" => const_arg(args, 0).is_some_and(|c| {
            let field = const_text(c).to_ascii_lowercase();
            match arg_type(1) {
                pg_sys::TIMESTAMPOID => matches!(field.as_str(), "year" | "month" | "day" | "hour" | "minute" | "quarter" | "doy" | "dow"),
                pg_sys::DATEOID => matches!(field.as_str(), "year" | "month" | "day" | "quarter" | "doy" | "dow"),
                _ => false,
            }
        }),
        _ => false,
    };
    (!ok).then(|| format!("the function {name}"))
}

/// Why DuckDB cannot take this aggregate, if it cannot.
unsafe fn aggregate_problem(a: &pg_sys::Aggref) -> Option<String> {
    let name = CStr::from_ptr(pg_sys::get_func_name(a.aggfnoid)).to_string_lossy().into_owned();
    if a.agglevelsup > 0 || !a.aggorder.is_null() || !a.aggdirectargs.is_null() || a.aggkind as u8 != b'n' {
        return Some(format!("the aggregate {name} in this form"));
    }
    let arg = list_cells(a.aggargtypes).first().map(|c| c.oid_value);
    let ok = match (name.as_str(), arg) {
        ("count", _) => true,
        ("sum", Some(t)) => matches!(t, pg_sys::INT2OID | pg_sys::INT4OID | pg_sys::INT8OID | pg_sys::NUMERICOID),
        ("min" | "max", Some(t)) => t != pg_sys::BOOLOID && (is_number(t) || is_text(t) || is_datetime(t) || t == pg_sys::BPCHAROID),
        _ => false,
    };
    if !ok {
        return Some(format!("the aggregate {name}"));
    }
    if !a.aggdistinct.is_null() && name != "count" {
        return Some(format!("{name}(DISTINCT …)"));
    }
    None
}
