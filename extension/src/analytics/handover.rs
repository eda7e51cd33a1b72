//! Handing a query to DuckDB: at plan time, decide whether DuckDB answers it exactly as
//! PostgreSQL would, and if so plan it as one `AnkerDuckDB` custom scan.
//!
//! A query is taken only when every node of it is on a list whose semantics match in both
//! engines (types, operators, functions, aggregates; see [`Check`]), every table it reads
//! is an anker table, and DuckDB, preparing the deparsed text (`pg_get_querydef`), reports
//! result types that convert exactly to the ones PostgreSQL planned. Anything else is left
//! to PostgreSQL, and the reason is kept for EXPLAIN ([`last_refusal`]).

use super::duckdb::{self as ddb, LogicalType};
use super::scan::{self, Input, Kind};
use super::{connect, engine, Engine};
use crate::scan_node::list_cells;
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
static mut LAST_REFUSAL: Option<String> = None;

pub fn install() {
    // SAFETY: hook chaining during postmaster start-up.
    unsafe {
        PREV_PLANNER = pg_sys::planner_hook;
        pg_sys::planner_hook = Some(plan);
    }
}

/// The reason the last query planned with DuckDB enabled was not handed over, if any.
pub fn last_refusal() -> Option<String> {
    // SAFETY: backend-local state.
    unsafe { (*(&raw const LAST_REFUSAL)).clone() }
}

#[pg_guard]
unsafe extern "C-unwind" fn plan(
    parse: *mut pg_sys::Query,
    query_string: *const std::ffi::c_char,
    cursor_options: i32,
    bound_params: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    let standard = |q: *mut pg_sys::Query| match PREV_PLANNER {
        Some(prev) => prev(q, query_string, cursor_options, bound_params),
        None => pg_sys::standard_planner(q, query_string, cursor_options, bound_params),
    };
    if engine() != Engine::DuckDb || !crate::shmem::is_loaded() || (*parse).commandType != pg_sys::CmdType::CMD_SELECT {
        return standard(parse);
    }
    let mut check = Check::default();
    check.query(parse);
    if check.tables.is_empty() && check.reason.is_none() {
        return standard(parse); // no anker table: not ours to judge
    }
    let taken = match check.reason.take() {
        Some(r) => Err(r),
        None => prepare(parse, &check),
    };
    match taken {
        Ok(handover) => {
            *(&raw mut LAST_REFUSAL) = None;
            // PostgreSQL plans the query too: its PlannedStmt carries the flattened range
            // table (permission checks, locks), relation and function dependencies (plan
            // invalidation); only its plan tree is replaced.
            let stmt = standard(pg_sys::copyObjectImpl(parse as *const std::ffi::c_void) as *mut pg_sys::Query);
            let pg_plan = (*stmt).planTree;
            let cscan = super::node::plan_node(&handover, parse);
            (*cscan).scan.plan.startup_cost = (*pg_plan).startup_cost;
            (*cscan).scan.plan.total_cost = (*pg_plan).total_cost;
            (*cscan).scan.plan.plan_rows = (*pg_plan).plan_rows;
            (*cscan).scan.plan.plan_width = (*pg_plan).plan_width;
            (*stmt).planTree = cscan as *mut pg_sys::Plan;
            (*stmt).subplans = std::ptr::null_mut();
            (*stmt).parallelModeNeeded = false;
            (*stmt).jitFlags = 0;
            stmt
        }
        Err(reason) => {
            *(&raw mut LAST_REFUSAL) = Some(reason);
            standard(parse)
        }
    }
}

/// A query DuckDB takes: its text and the anker tables it reads.
pub struct Handover {
    pub sql: String,
    /// Each table: relation, the name the text uses, the attributes read (0-based).
    pub tables: Vec<(pg_sys::Oid, String, Vec<usize>)>,
}

/// Deparse `parse`, let DuckDB prepare it and compare its result types with PostgreSQL's.
unsafe fn prepare(parse: *mut pg_sys::Query, check: &Check) -> Result<Handover, String> {
    let copy = pg_sys::copyObjectImpl(parse as *const std::ffi::c_void) as *mut pg_sys::Query;
    let sql = CStr::from_ptr(pg_sys::pg_get_querydef(copy, false)).to_string_lossy().into_owned();
    let mut tables = vec![];
    let mut names: HashMap<String, i64> = HashMap::new();
    let mut ids = vec![];
    for (&relid, atts) in &check.tables {
        let relid = pg_sys::Oid::from(relid);
        let name = CStr::from_ptr(pg_sys::get_rel_name(relid)).to_string_lossy().into_owned();
        if names.contains_key(&name) {
            return Err(format!("two tables named \"{name}\""));
        }
        let rel = pg_sys::RelationIdGetRelation(relid);
        let input = Input::describe(rel);
        pg_sys::RelationClose(rel);
        let id = scan::register(input);
        ids.push(id);
        names.insert(name.clone(), id);
        tables.push((relid, name, atts.iter().copied().collect()));
    }
    let result = (|| {
        let con = connect()?;
        scan::set_names(names);
        let prepared = ddb::Prepared::new(con.0, &sql);
        scan::set_names(HashMap::new());
        let prepared = prepared.map_err(|e| format!("DuckDB cannot prepare it: {e}"))?;
        compare_types(parse, &prepared.column_types())
    })();
    for id in ids {
        scan::unregister(id);
    }
    result.map(|_| Handover { sql, tables })
}

/// Do DuckDB's result columns convert exactly to the types PostgreSQL planned?
unsafe fn compare_types(parse: *mut pg_sys::Query, duck: &[LogicalType]) -> Result<(), String> {
    let outs = outputs(parse);
    if outs.len() != duck.len() {
        return Err(format!("DuckDB returns {} columns where PostgreSQL returns {}", duck.len(), outs.len()));
    }
    for (i, ((typid, typmod), t)) in outs.iter().zip(duck).enumerate() {
        if !converts(*typid, *typmod, t) {
            return Err(format!("output column {} is of a type DuckDB does not return exactly", i + 1));
        }
    }
    Ok(())
}

/// Type and modifier of each column the query returns.
pub unsafe fn outputs(parse: *mut pg_sys::Query) -> Vec<(pg_sys::Oid, i32)> {
    list_cells((*parse).targetList)
        .iter()
        .map(|c| c.ptr_value as *mut pg_sys::TargetEntry)
        .filter(|&t| !(*t).resjunk)
        .map(|t| {
            let e = (*t).expr as *const pg_sys::Node;
            (pg_sys::exprType(e), pg_sys::exprTypmod(e))
        })
        .collect()
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
            ddb::TYPE_HUGEINT => typmod < 0,
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
#[derive(Default)]
struct Check {
    reason: Option<String>,
    /// Range tables of the enclosing queries, innermost last.
    levels: Vec<*mut pg_sys::List>,
    tables: std::collections::BTreeMap<u32, BTreeSet<usize>>,
}

impl Check {
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
        self.levels.push(q.rtable);
        let stop = pg_sys::query_tree_walker(
            q as *const _ as *mut pg_sys::Query,
            Some(walk),
            self as *mut Check as *mut std::ffi::c_void,
            pg_sys::QTW_EXAMINE_RTES_BEFORE as i32,
        );
        self.levels.pop();
        stop
    }

    /// The range-table entry a Var refers to.
    unsafe fn rte_of(&self, v: &pg_sys::Var) -> Option<*mut pg_sys::RangeTblEntry> {
        let level = self.levels.len().checked_sub(1 + v.varlevelsup as usize)?;
        let rtable = self.levels[level];
        let cells = list_cells(rtable);
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
                if self.rte(&*(node as *mut pg_sys::RangeTblEntry)) {
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
                return false;
            }
            T_Const => {
                let c = &*(node as *mut pg_sys::Const);
                if let Some(why) = const_problem(c) {
                    return self.refuse(why);
                }
                return false;
            }
            T_Param => return self.refuse("parameters"),
            T_OpExpr => {
                let o = &*(node as *mut pg_sys::OpExpr);
                if !self.collation_ok(o.inputcollid) {
                    return self.refuse("a collation other than C");
                }
                if let Some(why) = operator_problem(o.opno) {
                    return self.refuse(why);
                }
            }
            T_FuncExpr => {
                let f = &*(node as *mut pg_sys::FuncExpr);
                if let Some(why) = function_problem(f) {
                    return self.refuse(why);
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
                if let Some(why) = aggregate_problem(a) {
                    return self.refuse(why);
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
            T_BoolExpr | T_CaseExpr | T_CaseWhen | T_CaseTestExpr | T_CoalesceExpr | T_List | T_TargetEntry
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

unsafe fn type_name(typid: pg_sys::Oid) -> String {
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

/// Why DuckDB cannot take this constant as PostgreSQL deparses it, if it cannot.
unsafe fn const_problem(c: &pg_sys::Const) -> Option<String> {
    if !expr_type_ok(c.consttype) {
        return Some(format!("a constant of type {}", type_name(c.consttype)));
    }
    if c.constisnull {
        return None;
    }
    let out = || {
        let mut typoutput = pg_sys::InvalidOid;
        let mut varlena = false;
        pg_sys::getTypeOutputInfo(c.consttype, &mut typoutput, &mut varlena);
        CStr::from_ptr(pg_sys::OidOutputFunctionCall(typoutput, c.constvalue)).to_string_lossy().into_owned()
    };
    match c.consttype {
        // A numeric constant without a decimal point is deparsed as `n::numeric`, which
        // DuckDB reads as DECIMAL(18,3): a different scale.
        pg_sys::NUMERICOID if !out().contains('.') => Some("a numeric constant without a fractional part".into()),
        // PostgreSQL's LIKE escapes with a backslash by default, DuckDB's does not.
        pg_sys::TEXTOID | pg_sys::VARCHAROID if out().contains('\\') => Some("a text constant with a backslash".into()),
        // char(n) comparisons ignore trailing blanks; the stored values are handed over
        // without them, constants are not.
        pg_sys::BPCHAROID if out().ends_with(' ') => Some("a char(n) constant with trailing blanks".into()),
        _ => None,
    }
}

/// Why DuckDB cannot take operator `opno`, if it cannot.
unsafe fn operator_problem(opno: pg_sys::Oid) -> Option<String> {
    let name = CStr::from_ptr(pg_sys::get_opname(opno)).to_string_lossy().into_owned();
    let (mut l, mut r) = (pg_sys::InvalidOid, pg_sys::InvalidOid);
    pg_sys::op_input_types(opno, &mut l, &mut r);
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
            let int_or_numeric = |t| matches!(t, pg_sys::INT2OID | pg_sys::INT4OID | pg_sys::INT8OID | pg_sys::NUMERICOID);
            (l == pg_sys::InvalidOid || int_or_numeric(l)) && int_or_numeric(r) && (l == r || l == pg_sys::InvalidOid)
        }
        "~~" | "!~~" => is_text(l) && is_text(r),
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

/// Why DuckDB cannot take this function call, if it cannot: only widening casts are given.
unsafe fn function_problem(f: &pg_sys::FuncExpr) -> Option<String> {
    let args = list_cells(f.args);
    let widening = f.funcformat != pg_sys::CoercionForm::COERCE_EXPLICIT_CALL && args.len() == 1 && {
        let from = pg_sys::exprType(args[0].ptr_value as *const pg_sys::Node);
        matches!(
            (from, f.funcresulttype),
            (pg_sys::INT2OID, pg_sys::INT4OID)
                | (pg_sys::INT2OID, pg_sys::INT8OID)
                | (pg_sys::INT4OID, pg_sys::INT8OID)
                | (pg_sys::DATEOID, pg_sys::TIMESTAMPOID)
        )
    };
    (!widening).then(|| format!("the function {}", CStr::from_ptr(pg_sys::get_func_name(f.funcid)).to_string_lossy()))
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
