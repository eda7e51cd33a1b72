//! PostgreSQL's `avg` inside queries DuckDB runs.
//!
//! At the top level PostgreSQL computes `avg` itself on top of DuckDB's sum and count
//! (handover's split). Below it (a sub-query, HAVING, WHERE) the value stays inside DuckDB,
//! whose own `avg` is a double. There DuckDB is given PostgreSQL's value instead:
//! `numeric_div(sum, count)` rounded as numeric.c rounds it, by the scalar function
//! `anker_avg_units` (below), as a DECIMAL(38, f). The value is exact, its scale is not
//! PostgreSQL's, so the walk takes such an `avg` only where scales cannot show: inside
//! comparisons, or as a column of a sub-query in FROM that the query reads only in
//! comparisons.
//!
//! The deparsed text carries each `avg` to rewrite with a marker that changes nothing,
//! `avg(x) FILTER (WHERE (k <> 0))`; [`emulate`] replaces the marked calls.

use super::duckdb::*;
use crate::scan_node::list_cells;
use anker_engine::decimal;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::c_void;

// pg_proc and pg_operator OIDs (fixed in PostgreSQL's catalog data).
const F_AVG_INT8: u32 = 2100;
const F_AVG_INT4: u32 = 2101;
const F_AVG_INT2: u32 = 2102;
const F_AVG_NUMERIC: u32 = 2103;
const OP_INT4NE: u32 = 518;
const F_INT4NE: u32 = 144;

/// Is `e` PostgreSQL's `avg` of an integer or numeric?
pub unsafe fn is_avg(e: *mut pg_sys::Node) -> bool {
    !e.is_null()
        && (*e).type_ == pg_sys::NodeTag::T_Aggref
        && [F_AVG_INT2, F_AVG_INT4, F_AVG_INT8, F_AVG_NUMERIC].contains(&(*(e as *mut pg_sys::Aggref)).aggfnoid.to_u32())
}

/// The sum's scale and the scale `f` of the DECIMAL(38, f) DuckDB gives an `avg` it can
/// compute as PostgreSQL does: 38 digits less those of the argument's integer part.
pub unsafe fn form(a: &pg_sys::Aggref) -> Result<(u32, u32), String> {
    if a.agglevelsup > 0 || !a.aggorder.is_null() || !a.aggdistinct.is_null() || !a.aggfilter.is_null() || a.aggkind as u8 != b'n' {
        return Err("the aggregate avg in this form".into());
    }
    let arg = (*(list_cells(a.args)[0].ptr_value as *mut pg_sys::TargetEntry)).expr as *mut pg_sys::Node;
    let (sum_scale, integer_digits) = match pg_sys::exprType(arg) {
        pg_sys::INT2OID => (0, 5),
        pg_sys::INT4OID => (0, 10),
        pg_sys::NUMERICOID => match super::scan::Kind::of(pg_sys::NUMERICOID, pg_sys::exprTypmod(arg)) {
            Some(super::scan::Kind::Decimal(p, s)) => (s as u32, (p - s) as u32),
            _ => return Err("avg of a numeric without a declared precision and scale".into()),
        },
        t => return Err(format!("avg of {} below the top level", super::handover::type_name(t))),
    };
    if integer_digits > INTEGER_DIGITS {
        return Err(format!("avg of values of more than {INTEGER_DIGITS} integer digits below the top level"));
    }
    Ok((sum_scale, SCALE))
}

/// An `avg` DuckDB computes is a DECIMAL(38, SCALE): PostgreSQL gives a quotient below 1 at
/// least 20 decimals, below 10^-4 (or an average of zeros over 10,000 rows) 24; beyond
/// that the query fails (0A000). What it is compared with, and the values averaged, may
/// have INTEGER_DIGITS digits before the point (DuckDB compares them as DECIMAL(38, SCALE)).
const SCALE: u32 = 24;
pub const INTEGER_DIGITS: u32 = 38 - SCALE;

/// Does `e` contain an `avg`, also as an output column of a sub-query it holds?
pub unsafe fn contains_avg(e: *mut pg_sys::Node) -> bool {
    any_node(e, &mut |n| {
        is_avg(n) || (*n).type_ == pg_sys::NodeTag::T_Query && list_cells((*(n as *mut pg_sys::Query)).targetList).iter().any(|c| contains_avg(c.ptr_value as *mut pg_sys::Node))
    })
}

/// Does `f` hold for `e` or one of its sub-expressions? Sub-queries are shown to `f` but
/// not entered.
pub unsafe fn any_node(e: *mut pg_sys::Node, f: &mut dyn FnMut(*mut pg_sys::Node) -> bool) -> bool {
    let mut f = f;
    step(e, &mut f as *mut &mut dyn FnMut(*mut pg_sys::Node) -> bool as *mut c_void)
}

#[pg_guard]
unsafe extern "C-unwind" fn step(node: *mut pg_sys::Node, ctx: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    let f = &mut *(ctx as *mut &mut dyn FnMut(*mut pg_sys::Node) -> bool);
    if f(node) {
        return true;
    }
    if (*node).type_ == pg_sys::NodeTag::T_Query {
        return false;
    }
    pg_sys::expression_tree_walker(node, Some(step), ctx)
}

/// Number every `avg` of `q`, at every level, with a marker for [`emulate`]; returns each
/// one's [`form`], by number (from 1). Only `avg`s the walk accepted are left in `q`.
pub unsafe fn mark(q: *mut pg_sys::Query) -> Vec<(u32, u32)> {
    let mut found: Vec<(u32, u32)> = vec![];
    pg_sys::query_tree_walker(q, Some(mark_walker), &mut found as *mut _ as *mut c_void, 0);
    found
}

#[pg_guard]
unsafe extern "C-unwind" fn mark_walker(node: *mut pg_sys::Node, ctx: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    if (*node).type_ == pg_sys::NodeTag::T_Query {
        return pg_sys::query_tree_walker(node as *mut pg_sys::Query, Some(mark_walker), ctx, 0);
    }
    if is_avg(node) {
        let found = &mut *(ctx as *mut Vec<(u32, u32)>);
        let a = node as *mut pg_sys::Aggref;
        found.push(form(&*a).unwrap_or((0, 0)));
        let int4 = |v: i32| pg_sys::makeConst(pg_sys::INT4OID, -1, pg_sys::InvalidOid, 4, pg_sys::Datum::from(v), false, true) as *mut c_void;
        let ne = pg_sys::palloc0(std::mem::size_of::<pg_sys::OpExpr>()) as *mut pg_sys::OpExpr;
        (*ne).xpr.type_ = pg_sys::NodeTag::T_OpExpr;
        (*ne).opno = pg_sys::Oid::from(OP_INT4NE);
        (*ne).opfuncid = pg_sys::Oid::from(F_INT4NE);
        (*ne).opresulttype = pg_sys::BOOLOID;
        (*ne).args = pg_sys::lappend(pg_sys::lappend(std::ptr::null_mut(), int4(found.len() as i32)), int4(0));
        (*ne).location = -1;
        (*a).aggfilter = ne as *mut pg_sys::Expr;
    }
    pg_sys::expression_tree_walker(node, Some(mark_walker), ctx)
}

// Comparisons of an integer with an `avg` (pg_operator, pg_proc OIDs).
const OP_NUMERIC_LT: u32 = 1754;
const OP_NUMERIC_LE: u32 = 1755;
const OP_NUMERIC_GT: u32 = 1756;
const OP_NUMERIC_GE: u32 = 1757;
const F_NUMERIC_CEIL: u32 = 1711;
const F_NUMERIC_FLOOR: u32 = 1712;
const F_INT4_TO_NUMERIC: u32 = 1740;
const F_INT2_TO_NUMERIC: u32 = 1782;
const F_INT8_TO_NUMERIC: u32 = 1781;
const F_INT4_TO_INT8: u32 = 481;
const F_INT2_TO_INT8: u32 = 754;
const F_NUMERIC_TO_INT8: u32 = 1779;
/// bigint <, <=, >, >= and their functions.
const OP_INT8LT: (u32, u32) = (412, 469);
const OP_INT8LE: (u32, u32) = (414, 471);
const OP_INT8GT: (u32, u32) = (413, 470);
const OP_INT8GE: (u32, u32) = (415, 472);

/// An integer `x` compared with an `avg` `a` DuckDB computes (CH Q17's `ol_quantity <
/// t.a`) makes DuckDB cast every `x` to the avg's DECIMAL(38, 24), a 128-bit multiply per
/// row: half of Q17's time. For integers, `x < a` is `x < ceil(a)`, `x <= a` is
/// `x <= floor(a)`, `x > a` is `x > floor(a)` and `x >= a` is `x >= ceil(a)`, so such
/// comparisons become bigint ones, and DuckDB rounds the avg once per value of it instead.
/// `a`: an `avg` output column of a sub-query in FROM, or a scalar sub-query of one `avg`.
/// Exact: ceil and floor of PostgreSQL's avg are integers within bigint (the values
/// averaged have at most 14 integer digits, [`INTEGER_DIGITS`]).
pub unsafe fn compare_integers_with_rounded_avgs(q: *mut pg_sys::Query) {
    pg_sys::query_tree_walker(q, Some(rounding_walker), q as *mut c_void, 0);
}

#[pg_guard]
unsafe extern "C-unwind" fn rounding_walker(node: *mut pg_sys::Node, ctx: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    if (*node).type_ == pg_sys::NodeTag::T_Query {
        let q = node as *mut pg_sys::Query;
        return pg_sys::query_tree_walker(q, Some(rounding_walker), q as *mut c_void, 0);
    }
    if (*node).type_ == pg_sys::NodeTag::T_OpExpr {
        round_avg_comparison(node as *mut pg_sys::OpExpr, ctx as *mut pg_sys::Query);
    }
    pg_sys::expression_tree_walker(node, Some(rounding_walker), ctx)
}

unsafe fn round_avg_comparison(op: *mut pg_sys::OpExpr, q: *mut pg_sys::Query) {
    let opno = (*op).opno.to_u32();
    if ![OP_NUMERIC_LT, OP_NUMERIC_LE, OP_NUMERIC_GT, OP_NUMERIC_GE].contains(&opno) {
        return;
    }
    let args = list_cells((*op).args);
    let (l, r) = (args[0].ptr_value as *mut pg_sys::Node, args[1].ptr_value as *mut pg_sys::Node);
    let (x, a, avg_right) = match (integer_of(l), integer_of(r)) {
        (Some(x), None) if is_avg_value(r, q) => (x, r, true),
        (None, Some(x)) if is_avg_value(l, q) => (x, l, false),
        _ => return,
    };
    // `x op a`, or `a op x` read as `x op' a`.
    let op_x_first = if avg_right {
        opno
    } else {
        match opno {
            OP_NUMERIC_LT => OP_NUMERIC_GT,
            OP_NUMERIC_LE => OP_NUMERIC_GE,
            OP_NUMERIC_GT => OP_NUMERIC_LT,
            _ => OP_NUMERIC_LE,
        }
    };
    let rounding = if matches!(op_x_first, OP_NUMERIC_LT | OP_NUMERIC_GE) { F_NUMERIC_CEIL } else { F_NUMERIC_FLOOR };
    let (int8_op, int8_fn) = match opno {
        OP_NUMERIC_LT => OP_INT8LT,
        OP_NUMERIC_LE => OP_INT8LE,
        OP_NUMERIC_GT => OP_INT8GT,
        _ => OP_INT8GE,
    };
    let x8 = match pg_sys::exprType(x) {
        pg_sys::INT8OID => x,
        pg_sys::INT4OID => call(F_INT4_TO_INT8, pg_sys::INT8OID, x, pg_sys::CoercionForm::COERCE_EXPLICIT_CAST),
        _ => call(F_INT2_TO_INT8, pg_sys::INT8OID, x, pg_sys::CoercionForm::COERCE_EXPLICIT_CAST),
    };
    let rounded = call(rounding, pg_sys::NUMERICOID, a, pg_sys::CoercionForm::COERCE_EXPLICIT_CALL);
    let a8 = call(F_NUMERIC_TO_INT8, pg_sys::INT8OID, rounded, pg_sys::CoercionForm::COERCE_EXPLICIT_CAST);
    let (first, second) = if avg_right { (x8, a8) } else { (a8, x8) };
    (*op).opno = pg_sys::Oid::from(int8_op);
    (*op).opfuncid = pg_sys::Oid::from(int8_fn);
    (*op).inputcollid = pg_sys::InvalidOid;
    (*op).args = pg_sys::lappend(pg_sys::lappend(std::ptr::null_mut(), first as *mut c_void), second as *mut c_void);
}

/// The integer expression `e` casts to numeric, if it is such a cast.
unsafe fn integer_of(e: *mut pg_sys::Node) -> Option<*mut pg_sys::Node> {
    if (*e).type_ != pg_sys::NodeTag::T_FuncExpr {
        return None;
    }
    let f = &*(e as *mut pg_sys::FuncExpr);
    let args = list_cells(f.args);
    ([F_INT2_TO_NUMERIC, F_INT4_TO_NUMERIC, F_INT8_TO_NUMERIC].contains(&f.funcid.to_u32()) && args.len() == 1).then(|| args[0].ptr_value as *mut pg_sys::Node)
}

/// Is `e` an `avg`: a column of a sub-query in FROM of `q` that is one, or a scalar
/// sub-query whose one output is one?
unsafe fn is_avg_value(e: *mut pg_sys::Node, q: *mut pg_sys::Query) -> bool {
    let output_is_avg = |sub: *mut pg_sys::Query, attno: usize| {
        let tl = list_cells((*sub).targetList);
        tl.get(attno).is_some_and(|c| is_avg((*(c.ptr_value as *mut pg_sys::TargetEntry)).expr as *mut pg_sys::Node))
    };
    match (*e).type_ {
        pg_sys::NodeTag::T_Var => {
            let v = &*(e as *mut pg_sys::Var);
            if v.varlevelsup != 0 || v.varattno <= 0 {
                return false;
            }
            let rte = pg_sys::list_nth((*q).rtable, v.varno - 1) as *mut pg_sys::RangeTblEntry;
            (*rte).rtekind == pg_sys::RTEKind::RTE_SUBQUERY && !(*rte).subquery.is_null() && output_is_avg((*rte).subquery, v.varattno as usize - 1)
        }
        pg_sys::NodeTag::T_SubLink => {
            let s = &*(e as *mut pg_sys::SubLink);
            s.subLinkType == pg_sys::SubLinkType::EXPR_SUBLINK && list_cells((*(s.subselect as *mut pg_sys::Query)).targetList).len() == 1 && output_is_avg(s.subselect as *mut pg_sys::Query, 0)
        }
        _ => false,
    }
}

/// A call of function `oid` returning `result` on `arg`.
unsafe fn call(oid: u32, result: pg_sys::Oid, arg: *mut pg_sys::Node, format: pg_sys::CoercionForm::Type) -> *mut pg_sys::Node {
    pg_sys::makeFuncExpr(pg_sys::Oid::from(oid), result, pg_sys::lappend(std::ptr::null_mut(), arg as *mut c_void), pg_sys::InvalidOid, pg_sys::InvalidOid, format) as *mut pg_sys::Node
}

/// The deparsed text with each marked `avg(x)` replaced by PostgreSQL's value of it as a
/// DECIMAL(38, f): `anker_avg_units` of DuckDB's exact sum (an integer of the sum's scale)
/// and count, times 10^-f.
pub fn emulate(sql: &str, avgs: &[(u32, u32)]) -> Result<String, String> {
    let mut replaced = 0;
    let out = anker_engine::sql_text::replace_marked_calls(sql, "avg", |k, arg| {
        let &(ds, f) = avgs.get((k as usize).checked_sub(1)?)?;
        replaced += 1;
        let units = if ds == 0 { format!("CAST(sum({arg}) AS HUGEINT)") } else { format!("CAST(sum({arg}) * 1{} AS HUGEINT)", "0".repeat(ds as usize)) };
        let ulp = if f == 0 { "1".to_string() } else { format!("0.{}1", "0".repeat(f as usize - 1)) };
        Some(format!("(CAST(anker_avg_units({units}, count({arg}), {ds}, {f}) AS DECIMAL(38,0)) * CAST('{ulp}' AS DECIMAL(38,{f})))"))
    })?;
    if replaced != avgs.len() {
        return Err("an avg(…) the query text does not show as written".into());
    }
    Ok(out)
}

/// Register `anker_avg_units(sum HUGEINT, count BIGINT, sum_scale INTEGER, scale INTEGER)
/// -> HUGEINT` ([`decimal::pg_div_units`]; NULL for no rows) with DuckDB.
pub unsafe fn register(con: duckdb_connection) -> Result<(), String> {
    let mut f = duckdb_create_scalar_function();
    duckdb_scalar_function_set_name(f, c"anker_avg_units".as_ptr());
    for t in [TYPE_HUGEINT, TYPE_BIGINT, TYPE_INTEGER, TYPE_INTEGER] {
        duckdb_scalar_function_add_parameter(f, LogicalType::new(t).0);
    }
    duckdb_scalar_function_set_return_type(f, LogicalType::new(TYPE_HUGEINT).0);
    duckdb_scalar_function_set_function(f, Some(avg_units));
    let ok = duckdb_register_scalar_function(con, f) == SUCCESS;
    duckdb_destroy_scalar_function(&mut f);
    if ok {
        Ok(())
    } else {
        Err("anker: DuckDB refused the anker_avg_units function".into())
    }
}

const TOO_MANY_DIGITS: &std::ffi::CStr =
    c"anker: avg has more digits than DuckDB's DECIMAL holds; run the query with anker.olap_engine = postgres";

/// DuckDB's callback (any thread; DuckDB hands it flat vectors).
unsafe extern "C" fn avg_units(info: duckdb_function_info, input: duckdb_data_chunk, output: duckdb_vector) {
    let n = duckdb_data_chunk_get_size(input) as usize;
    let column = |i: u64| {
        let v = duckdb_data_chunk_get_vector(input, i);
        (duckdb_vector_get_data(v), duckdb_vector_get_validity(v))
    };
    let (sums, sums_valid) = column(0);
    let (counts, counts_valid) = column(1);
    let (sum_scales, _) = column(2);
    let (scales, _) = column(3);
    let valid = |mask: *mut u64, i: usize| mask.is_null() || *mask.add(i / 64) & (1 << (i % 64)) != 0;
    let out = duckdb_vector_get_data(output) as *mut duckdb_hugeint;
    for i in 0..n {
        let count = *(counts as *const i64).add(i);
        if !valid(sums_valid, i) || !valid(counts_valid, i) || count == 0 {
            duckdb_vector_ensure_validity_writable(output);
            *duckdb_vector_get_validity(output).add(i / 64) &= !(1u64 << (i % 64));
            continue;
        }
        let h = *(sums as *const duckdb_hugeint).add(i);
        let sum = ((h.upper as i128) << 64) | h.lower as i128;
        let (ds, f) = (*(sum_scales as *const i32).add(i), *(scales as *const i32).add(i));
        match decimal::pg_div_units(sum, count, ds as u32, f as u32) {
            Some(u) => *out.add(i) = duckdb_hugeint { lower: u as u64, upper: (u >> 64) as i64 },
            None => {
                duckdb_scalar_function_set_error(info, TOO_MANY_DIGITS.as_ptr());
                return;
            }
        }
    }
}
