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
//! visible in its newest version) straight from column pages into the engine's
//! [`Groups`] table; in other blocks it checks each row's header and reads
//! the rows visible at their frozen version from the column pages too, and
//! only rows seen at an older version through a slot. Results equal PostgreSQL's exactly: integer sums are exact, numeric
//! sums keep every digit, and averages are divided by PostgreSQL's own
//! `numeric_div`.
//!
//! What qualifies (everything else keeps PostgreSQL's Agg node):
//!
//! * the grouping reads one anker table, or one anker table inner-joined to
//!   one other relation (any access method) on a single equality of
//!   key-type columns; then the node groups the anker table by its join
//!   column in the scan, runs the other relation's plan as its child, and
//!   adds each row's partner group into that row's group (aggregation
//!   pushed below the join: the star join of the benchmark's Q1);
//! * `GROUP BY` at most four plain columns (of the other relation, in a
//!   join) of types whose equality is bitwise (integers, `bool`, `"char"`,
//!   `oid`, `date`, `timestamp[tz]`); no grouping sets, no `HAVING`;
//! * aggregates `count(*)`, `count(col)`, and `sum`/`avg` of
//!   `int2`/`int4`/`int8`/`numeric` columns of the anker table, without
//!   `DISTINCT`, `ORDER BY` or `FILTER`; expressions over the results
//!   (`sum(a) / count(*)`) are projected as usual;
//! * `WHERE` clauses on the anker table's own columns, without subqueries
//!   or executor parameters (the other relation's go to its own plan).
//!
//! `anker.enable_agg_node = off` keeps PostgreSQL's Agg node.

use crate::datum;
use crate::scan_node::{explain_columns, is_anker_rte, list_cells, new_scan_state, recheck, SnapChoice};
use crate::tam::scan::{self, Reader, RowSink};
use anker_engine::agg::{parse_numeric, AccKind, AggFn, Groups, Key, Numeric, Output, MAX_KEYS};
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

/// Which columns group keys are: the aggregated table's own, or, when it is
/// joined to another relation, that relation's (the aggregated table's join
/// column stands for the other side's, which equals it).
#[derive(Clone, Copy)]
struct KeyMap {
    /// Range-table index of the aggregated (anker) table.
    fact: u32,
    /// Join: range-table index of the other relation (0: no join), and the
    /// equality's column on each side.
    dim: u32,
    fact_col: i16,
    dim_col: i16,
}

impl KeyMap {
    /// The key column `node` is (an attno of the key relation), if any.
    unsafe fn key_column(&self, node: *mut pg_sys::Node) -> Option<i16> {
        if self.dim == 0 {
            return column_of(node, self.fact).map(|v| (*v).varattno);
        }
        if let Some(v) = column_of(node, self.dim) {
            return Some((*v).varattno);
        }
        column_of(node, self.fact).filter(|&v| (*v).varattno == self.fact_col).map(|_| self.dim_col)
    }
}

/// The outputs for the Vars and Aggrefs in `exprs`, in order of first
/// appearance, with the expressions themselves; None if any is beyond us.
unsafe fn outputs(exprs: *mut pg_sys::List, map: KeyMap, keys: &[i16]) -> Option<Vec<(*mut pg_sys::Node, Out)>> {
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
                let col = map.key_column(n)?;
                Out::Key(keys.iter().position(|&k| k == col)?)
            }
            pg_sys::NodeTag::T_Aggref => supported_agg(n as *mut pg_sys::Aggref, map.fact)?,
            _ => return None,
        };
        outs.push((n, out));
    }
    Some(outs)
}

/// The grouping columns, if the query groups by plain key columns of key
/// types.
unsafe fn group_keys(root: *mut pg_sys::PlannerInfo, map: KeyMap) -> Option<Vec<i16>> {
    let parse = (*root).parse;
    let mut keys = vec![];
    for c in list_cells((*parse).groupClause) {
        let sgc = c.ptr_value as *mut pg_sys::SortGroupClause;
        let e = pg_sys::get_sortgroupclause_expr(sgc, (*root).processed_tlist);
        let col = map.key_column(e)?;
        if !KEY_TYPES.contains(&(*(e as *mut pg_sys::Var)).vartype) {
            return None;
        }
        if !keys.contains(&col) {
            keys.push(col);
        }
    }
    (keys.len() <= MAX_KEYS).then_some(keys)
}

/// Built-in equality operators of the key types (fixed pg_operator OIDs):
/// int2, int4, int8, bool, "char", oid, date, timestamp, timestamptz.
const KEY_EQUALITY_OPS: [u32; 9] = [94, 96, 410, 91, 92, 607, 1093, 2060, 1320];

/// A plain table scanned by the base-relation machinery (no inheritance).
unsafe fn plain_table(root: *mut pg_sys::PlannerInfo, rel: *mut pg_sys::RelOptInfo) -> bool {
    if rel.is_null()
        || (*rel).reloptkind != pg_sys::RelOptKind::RELOPT_BASEREL
        || (*rel).rtekind != pg_sys::RTEKind::RTE_RELATION
        || !(*rel).lateral_relids.is_null()
        || !(*rel).joininfo.is_null()
    {
        return false;
    }
    let rte = *(*root).simple_rte_array.add((*rel).relid as usize);
    !(*rte).inh
}

/// The grouping input as AnkerAgg can compute it: one anker table, or an
/// anker table inner-joined to one other relation on a single equality of
/// key-type columns (a star join with one dimension: `Q1` of the HTAP
/// benchmark). The anker table is aggregated by its join column in its
/// scan; the other relation's rows then pick up their partner groups.
unsafe fn shape(root: *mut pg_sys::PlannerInfo, input_rel: *mut pg_sys::RelOptInfo) -> Option<KeyMap> {
    let anker = |rel: *mut pg_sys::RelOptInfo| {
        is_anker_rte(*(*root).simple_rte_array.add((*rel).relid as usize)) && crate::snapshots::worth_anker_nodes((*rel).tuples)
    };
    if (*input_rel).reloptkind == pg_sys::RelOptKind::RELOPT_BASEREL {
        return ((*input_rel).lateral_relids.is_null() && anker(input_rel))
            .then_some(KeyMap { fact: (*input_rel).relid, dim: 0, fact_col: 0, dim_col: 0 });
    }
    if (*input_rel).reloptkind != pg_sys::RelOptKind::RELOPT_JOINREL
        || pg_sys::bms_num_members((*input_rel).relids) != 2
        || !(*root).join_info_list.is_null()
    {
        return None;
    }
    let first = pg_sys::bms_next_member((*input_rel).relids, -1);
    let second = pg_sys::bms_next_member((*input_rel).relids, first);
    let (a, b) = (*(*root).simple_rel_array.add(first as usize), *(*root).simple_rel_array.add(second as usize));
    if !plain_table(root, a) || !plain_table(root, b) {
        return None;
    }
    // The anker side aggregated in its scan: the bigger one if both are.
    let (fact, dim) = match (anker(a), anker(b)) {
        (true, true) if (*b).tuples > (*a).tuples => (b, a),
        (true, _) => (a, b),
        (false, true) => (b, a),
        (false, false) => return None,
    };
    let clauses = pg_sys::generate_join_implied_equalities(root, (*input_rel).relids, (*fact).relids, dim);
    let [clause] = list_cells(clauses) else { return None };
    let op = (*(clause.ptr_value as *mut pg_sys::RestrictInfo)).clause as *mut pg_sys::OpExpr;
    if (*op).xpr.type_ != pg_sys::NodeTag::T_OpExpr || !KEY_EQUALITY_OPS.contains(&(*op).opno.to_u32()) {
        return None;
    }
    let [l, r] = list_cells((*op).args) else { return None };
    let (l, r) = (l.ptr_value as *mut pg_sys::Node, r.ptr_value as *mut pg_sys::Node);
    let (f, d) = match (column_of(l, (*fact).relid), column_of(r, (*dim).relid)) {
        (Some(f), Some(d)) => (f, d),
        _ => (column_of(r, (*fact).relid)?, column_of(l, (*dim).relid)?),
    };
    ((*f).vartype == (*d).vartype && KEY_TYPES.contains(&(*f).vartype)).then_some(KeyMap {
        fact: (*fact).relid,
        dim: (*dim).relid,
        fact_col: (*f).varattno,
        dim_col: (*d).varattno,
    })
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
    if !(*parse).groupingSets.is_null()
        || (*parse).hasTargetSRFs
        || !(*extra).havingQual.is_null()
        || (*extra).patype != pg_sys::PartitionwiseAggregateType::PARTITIONWISE_AGGREGATE_NONE
    {
        return;
    }
    let Some(map) = shape(root, input_rel) else { return };
    let Some(keys) = group_keys(root, map) else { return };
    if outputs((*(*output_rel).reltarget).exprs, map, &keys).is_none() {
        return;
    }
    let fact = *(*root).simple_rel_array.add(map.fact as usize);
    let Some(quals) = row_quals(fact) else { return };
    // Cost: a fraction of reading the anker table sequentially, plus the
    // other relation's cheapest plan.
    let Some(seq_cost) = list_cells((*fact).pathlist)
        .iter()
        .map(|c| c.ptr_value as *mut pg_sys::Path)
        .filter(|&p| matches!((*p).pathtype, pg_sys::NodeTag::T_SeqScan | pg_sys::NodeTag::T_CustomScan) && (*p).param_info.is_null())
        .map(|p| (*p).total_cost)
        .reduce(f64::min)
    else {
        return;
    };
    let mut children: *mut pg_sys::List = std::ptr::null_mut();
    let mut child_cost = 0.0;
    if map.dim != 0 {
        let dim_path = (*(*(*root).simple_rel_array.add(map.dim as usize))).cheapest_total_path;
        if dim_path.is_null() {
            return;
        }
        child_cost = (*dim_path).total_cost;
        children = pg_sys::lappend(children, dim_path as *mut _);
    }
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
    let cost = seq_cost * COST_FACTOR + child_cost + rows * pg_sys::cpu_tuple_cost;
    (*cp).path.startup_cost = cost;
    (*cp).path.total_cost = cost;
    (*cp).methods = &raw const PATH_METHODS;
    (*cp).custom_paths = children;
    let rte = *(*root).simple_rte_array.add(map.fact as usize);
    let oid_list = pg_sys::lappend_oid(std::ptr::null_mut(), (*rte).relid);
    let mut private = pg_sys::lappend(std::ptr::null_mut(), oid_list as *mut _);
    private = pg_sys::lappend(private, int_list(&[map.fact as i32, map.dim as i32, map.fact_col as i32, map.dim_col as i32]) as *mut _);
    let keys: Vec<i32> = keys.iter().map(|&k| k as i32).collect();
    private = pg_sys::lappend(private, int_list(&keys) as *mut _);
    private = pg_sys::lappend(private, quals as *mut _);
    (*cp).custom_private = private;
    pg_sys::add_path(output_rel, cp as *mut pg_sys::Path);
}

unsafe fn int_list(values: &[i32]) -> *mut pg_sys::List {
    let mut l: *mut pg_sys::List = std::ptr::null_mut();
    for &v in values {
        l = pg_sys::lappend_int(l, v);
    }
    l
}

/// `custom_private` of the path: [anker table OID (an OID list), the
/// [`KeyMap`] (an int list), key attnos, row quals]; `custom_paths` holds
/// the other relation's path in a join.
///
/// `custom_private` of the plan: [anker table OID, join (an int list:
/// empty, or the anker table's join attno and the position of the other
/// side's join column in its plan's output), keys (attnos of the anker
/// table, or positions in the other plan's output), output codes (pairs: 0
/// and key index, or aggregate code and attno), row quals].
#[pg_guard]
unsafe extern "C-unwind" fn plan_path(
    _root: *mut pg_sys::PlannerInfo,
    _rel: *mut pg_sys::RelOptInfo,
    best_path: *mut pg_sys::CustomPath,
    tlist: *mut pg_sys::List,
    _clauses: *mut pg_sys::List,
    custom_plans: *mut pg_sys::List,
) -> *mut pg_sys::Plan {
    let private = list_cells((*best_path).custom_private);
    let oid_list = private[0].ptr_value as *mut pg_sys::List;
    let m: Vec<i32> = list_cells(private[1].ptr_value as *mut pg_sys::List).iter().map(|c| c.int_value).collect();
    let map = KeyMap { fact: m[0] as u32, dim: m[1] as u32, fact_col: m[2] as i16, dim_col: m[3] as i16 };
    let keys: Vec<i16> = list_cells(private[2].ptr_value as *mut pg_sys::List).iter().map(|c| c.int_value as i16).collect();
    let quals = pg_sys::copyObjectImpl(private[3].ptr_value) as *mut pg_sys::List;
    // setrefs does not see custom_private: fill in operator function OIDs.
    pg_sys::fix_opfuncids(quals as *mut pg_sys::Node);

    let mut exprs: *mut pg_sys::List = std::ptr::null_mut();
    for c in list_cells(tlist) {
        exprs = pg_sys::lappend(exprs, (*(c.ptr_value as *mut pg_sys::TargetEntry)).expr as *mut _);
    }
    let Some(outs) = outputs(exprs, map, &keys) else {
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
    let (join, key_list) = if map.dim == 0 {
        (std::ptr::null_mut(), private[2].ptr_value as *mut pg_sys::List)
    } else {
        // Where the other relation's plan outputs its join and key columns.
        let child = list_cells(custom_plans)[0].ptr_value as *mut pg_sys::Plan;
        let position = |attno: i16| -> i32 {
            for c in list_cells((*child).targetlist) {
                let te = c.ptr_value as *mut pg_sys::TargetEntry;
                if column_of((*te).expr as *mut pg_sys::Node, map.dim).is_some_and(|v| (*v).varattno == attno) {
                    return (*te).resno as i32;
                }
            }
            pgrx::error!("anker: AnkerAgg's join input lacks a column it needs");
        };
        let key_positions: Vec<i32> = keys.iter().map(|&k| position(k)).collect();
        (int_list(&[map.fact_col as i32, position(map.dim_col)]), int_list(&key_positions))
    };

    let cs = pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomScan>()) as *mut pg_sys::CustomScan;
    (*cs).scan.plan.type_ = pg_sys::NodeTag::T_CustomScan;
    (*cs).scan.plan.targetlist = tlist;
    (*cs).scan.scanrelid = 0;
    (*cs).custom_scan_tlist = scan_tlist;
    (*cs).custom_plans = custom_plans;
    (*cs).methods = &raw const SCAN_METHODS;
    let mut p = pg_sys::lappend(std::ptr::null_mut(), oid_list as *mut _);
    for l in [join, key_list, codes, quals] {
        p = pg_sys::lappend(p, l as *mut _);
    }
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
    /// For EXPLAIN ANALYZE: rows aggregated, how many of them came
    /// straight from clean blocks, and how many were checked one by one
    /// and read from the column pages without a slot.
    rows: u64,
    rows_clean: u64,
    rows_checked: u64,
}

/// Positions in the plan's `custom_private` (see [`plan_path`]).
const P_OID: usize = 0;
const P_JOIN: usize = 1;
const P_KEYS: usize = 2;
const P_OUTPUTS: usize = 3;
const P_QUALS: usize = 4;

unsafe fn private_list(cscan: *mut pg_sys::CustomScan, i: usize) -> *mut pg_sys::List {
    list_cells((*cscan).custom_private)[i].ptr_value as *mut pg_sys::List
}

#[pg_guard]
unsafe extern "C-unwind" fn create_state(cscan: *mut pg_sys::CustomScan) -> *mut pg_sys::Node {
    new_scan_state(std::mem::size_of::<State>(), cscan, &raw const EXEC_METHODS)
}

#[pg_guard]
unsafe extern "C-unwind" fn begin(node: *mut pg_sys::CustomScanState, estate: *mut pg_sys::EState, eflags: i32) {
    let s = node as *mut State;
    let cscan = (*node).ss.ps.plan as *mut pg_sys::CustomScan;
    let oid = list_cells(private_list(cscan, P_OID))[0].oid_value;
    // The executor already holds the range table's locks and checked
    // permissions on this relation (it is in the range table).
    let rel = pg_sys::table_open(oid, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    // Clean blocks are read from the columns directly: every attribute
    // needs its column.
    crate::storage::table_for_write(rel);
    (*s).rel = rel;
    (*s).row_slot = pg_sys::ExecAllocTableSlot(&mut (*estate).es_tupleTable, (*rel).rd_att, crate::tam::slot::ops());
    let quals = private_list(cscan, P_QUALS);
    (*s).qual = pg_sys::ExecInitQual(split_quals(quals).1, &mut (*node).ss.ps);
    let natts = (*(*rel).rd_att).natts as usize;
    let wanted = pg_sys::palloc0(natts.max(1)) as *mut bool;
    let want = |attno: i32| {
        if attno >= 1 && attno as usize <= natts {
            *wanted.add(attno as usize - 1) = true;
        }
    };
    let join = list_cells(private_list(cscan, P_JOIN));
    if let Some(fact_col) = join.first() {
        // A join: the other relation's plan runs as our child; the anker
        // table is grouped by its join column.
        want(fact_col.int_value);
        let child = list_cells((*cscan).custom_plans)[0].ptr_value as *mut pg_sys::Plan;
        let child_state = pg_sys::ExecInitNode(child, estate, eflags);
        (*node).custom_ps = pg_sys::lappend(std::ptr::null_mut(), child_state as *mut _);
    } else {
        for c in list_cells(private_list(cscan, P_KEYS)) {
            want(c.int_value);
        }
    }
    for pair in list_cells(private_list(cscan, P_OUTPUTS)).chunks(2) {
        if pair[0].int_value != 0 {
            want(pair[1].int_value);
        }
    }
    // (the quals hold only this table's columns: `row_quals`)
    for v in list_cells(pg_sys::pull_var_clause(quals as *mut pg_sys::Node, 0)) {
        want((*(v.ptr_value as *mut pg_sys::Var)).varattno as i32);
    }
    (*s).wanted = wanted;
    (*s).natts = natts;
    (*s).snap = SnapChoice::for_statement(estate, rel);
}

/// How an aggregate reads its input.
#[derive(Clone, Copy, PartialEq, Eq)]
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
    /// The input of each accumulator of a group.
    inputs: Vec<Input>,
    /// WHERE clauses evaluated natively, and the rest (or null).
    preds: Vec<Pred>,
    qual: *mut pg_sys::ExprState,
    econtext: *mut pg_sys::ExprContext,
    rows: u64,
    rows_clean: u64,
    rows_checked: u64,
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

fn numeric_from(payload: &[u8]) -> Numeric<'_> {
    match parse_numeric(payload) {
        Some(n) => n,
        None => {
            ereport!(ERROR, PgSqlErrorCode::ERRCODE_DATA_CORRUPTED, "anker: a stored numeric value is malformed");
        }
    }
}

/// Where a row's values come from: a clean block's column pages, or a slot.
trait RowValues {
    fn is_null(&mut self, att: usize) -> bool;
    /// An integer-like attribute of `width` bytes, sign-extended; None if NULL.
    fn int(&mut self, att: usize, width: usize) -> Option<i64>;
    /// A variable-length attribute (its varlena header first); None if NULL.
    fn varlena(&mut self, att: usize) -> Option<*const u8>;
    /// A numeric as its column slot's scaled value and display scale, where the row is
    /// read from column pages and the slot has one (`decimal::numeric_slot`).
    fn numeric_scaled(&mut self, _att: usize) -> Option<(i64, u16)> {
        None
    }
}

/// Row `row` of a clean block, read from column pages.
struct PageRow<'a> {
    reader: &'a mut Reader,
    table: &'a Table,
    row: u64,
}

impl RowValues for PageRow<'_> {
    #[inline]
    fn is_null(&mut self, att: usize) -> bool {
        self.reader.value(self.table, att, self.row) == ValueRef::Null
    }
    #[inline]
    fn int(&mut self, att: usize, width: usize) -> Option<i64> {
        match self.reader.value(self.table, att, self.row) {
            // SAFETY: an integer-like column's element.
            ValueRef::Fixed(p) => Some(unsafe { read_int(p, width) }),
            _ => None,
        }
    }
    #[inline]
    fn varlena(&mut self, att: usize) -> Option<*const u8> {
        // Inline slots hold a short varlena, blobs a 4-byte-header one.
        match self.reader.value(self.table, att, self.row) {
            ValueRef::Inline(p) | ValueRef::Blob(p, _) => Some(p),
            _ => None,
        }
    }
    #[inline]
    fn numeric_scaled(&mut self, att: usize) -> Option<(i64, u16)> {
        match self.reader.value(self.table, att, self.row) {
            // SAFETY: an inline value is a whole 16-byte slot of a column page.
            ValueRef::Inline(p) => unsafe { anker_engine::decimal::slot_scaled(p) },
            _ => None,
        }
    }
}

/// The row in a slot of the scanned relation, filled with (at least) the
/// attributes the node reads.
struct SlotRow(*mut pg_sys::TupleTableSlot);

impl RowValues for SlotRow {
    #[inline]
    fn is_null(&mut self, att: usize) -> bool {
        // SAFETY: the slot has an entry per attribute of the relation.
        unsafe { *(*self.0).tts_isnull.add(att) }
    }
    #[inline]
    fn int(&mut self, att: usize, width: usize) -> Option<i64> {
        // SAFETY: as above.
        (!self.is_null(att)).then(|| widen(unsafe { *(*self.0).tts_values.add(att) }.value() as u64, width))
    }
    #[inline]
    fn varlena(&mut self, att: usize) -> Option<*const u8> {
        // SAFETY: as above; a non-NULL varlena datum is a pointer.
        (!self.is_null(att)).then(|| unsafe { *(*self.0).tts_values.add(att) }.cast_mut_ptr::<u8>() as *const u8)
    }
}

impl Aggregator {
    /// Does the row pass the natively evaluated WHERE clauses?
    #[inline]
    fn passes_preds(&self, v: &mut impl RowValues) -> bool {
        self.preds.iter().all(|p| v.int(p.att, p.width).is_some_and(|x| p.op.holds(x, p.value)))
    }

    /// Add a row that passed the WHERE clauses to its group.
    #[inline]
    fn add(&mut self, v: &mut impl RowValues) {
        self.rows += 1;
        let mut key = Key::default();
        for (k, &(att, width)) in self.keys.iter().enumerate() {
            match v.int(att, width) {
                Some(x) => key.values[k] = x,
                None => key.nulls |= 1 << k,
            }
        }
        let g = self.groups.group(key);
        for (acc, inp) in self.groups.accs_mut(g).iter_mut().zip(&self.inputs) {
            match *inp {
                Input::Rows => acc.add_count(),
                Input::NotNull(att) => {
                    if !v.is_null(att) {
                        acc.add_count()
                    }
                }
                Input::Int(att, width) => {
                    if let Some(x) = v.int(att, width) {
                        acc.add_int(x)
                    }
                }
                Input::Numeric(att) => {
                    if let Some((units, dscale)) = v.numeric_scaled(att) {
                        acc.add_scaled(units, dscale);
                    } else if let Some(p) = v.varlena(att) {
                        // SAFETY: an in-memory varlena (snapshot pages are
                        // frozen; slot values live until the next row).
                        acc.add_numeric(numeric_from(unsafe { datum::varlena_payload(p) }));
                    }
                }
            }
        }
    }
}

impl Aggregator {
    /// Add the rows `rows` that pass the WHERE clauses, read from column pages.
    #[inline]
    fn add_pages(&mut self, r: &mut Reader, t: &Table, rows: std::ops::Range<u64>) {
        for row in rows {
            let mut v = PageRow { reader: &mut *r, table: t, row };
            if self.passes_preds(&mut v) {
                self.add(&mut v);
            }
        }
    }
}

impl RowSink for Aggregator {
    fn takes_blocks(&self) -> bool {
        self.qual.is_null()
    }

    fn clean(&mut self, r: &mut Reader, t: &Table, rows: std::ops::Range<u64>) {
        let before = self.rows;
        self.add_pages(r, t, rows);
        self.rows_clean += self.rows - before;
    }

    fn checked(&mut self, r: &mut Reader, t: &Table, rows: std::ops::Range<u64>) {
        let before = self.rows;
        self.add_pages(r, t, rows);
        self.rows_checked += self.rows - before;
    }

    fn row(&mut self, slot: *mut pg_sys::TupleTableSlot) {
        let mut v = SlotRow(slot);
        // SAFETY: `passes` evaluates the remaining clauses on this slot.
        if self.passes_preds(&mut v) && (self.qual.is_null() || unsafe { self.passes(slot) }) {
            self.add(&mut v);
        }
    }
}

/// A comparison of an integer-like column with a constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cmp {
    Lt,
    Le,
    Eq,
    Ge,
    Gt,
    Ne,
}

impl Cmp {
    #[inline]
    fn holds(self, a: i64, b: i64) -> bool {
        match self {
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
            Cmp::Eq => a == b,
            Cmp::Ge => a >= b,
            Cmp::Gt => a > b,
            Cmp::Ne => a != b,
        }
    }

    /// The comparison with its operands swapped (`5 < x` is `x > 5`).
    fn flipped(self) -> Cmp {
        match self {
            Cmp::Lt => Cmp::Gt,
            Cmp::Le => Cmp::Ge,
            Cmp::Gt => Cmp::Lt,
            Cmp::Ge => Cmp::Le,
            same => same,
        }
    }
}

/// The built-in same-type comparison operators of the integer-like types
/// (fixed pg_operator OIDs), which compare the values as integers:
/// `<`, `<=`, `=`, `>=`, `>`, `<>` of int2, int4, int8, date, timestamp and
/// timestamptz.
const CMP_OPS: [(u32, pg_sys::Oid, Cmp); 36] = {
    use Cmp::*;
    const I2: pg_sys::Oid = pg_sys::INT2OID;
    const I4: pg_sys::Oid = pg_sys::INT4OID;
    const I8: pg_sys::Oid = pg_sys::INT8OID;
    const D: pg_sys::Oid = pg_sys::DATEOID;
    const TS: pg_sys::Oid = pg_sys::TIMESTAMPOID;
    const TZ: pg_sys::Oid = pg_sys::TIMESTAMPTZOID;
    [
        (95, I2, Lt), (522, I2, Le), (94, I2, Eq), (524, I2, Ge), (520, I2, Gt), (519, I2, Ne),
        (97, I4, Lt), (523, I4, Le), (96, I4, Eq), (525, I4, Ge), (521, I4, Gt), (518, I4, Ne),
        (412, I8, Lt), (414, I8, Le), (410, I8, Eq), (415, I8, Ge), (413, I8, Gt), (411, I8, Ne),
        (1095, D, Lt), (1096, D, Le), (1093, D, Eq), (1098, D, Ge), (1097, D, Gt), (1094, D, Ne),
        (2062, TS, Lt), (2063, TS, Le), (2060, TS, Eq), (2065, TS, Ge), (2064, TS, Gt), (2061, TS, Ne),
        (1322, TZ, Lt), (1323, TZ, Le), (1320, TZ, Eq), (1325, TZ, Ge), (1324, TZ, Gt), (1321, TZ, Ne),
    ]
};

/// A WHERE clause the node evaluates itself: `column <op> constant` on an
/// integer-like column (NULL never passes, as in SQL).
#[derive(Clone, Copy, Debug)]
struct Pred {
    att: usize,
    width: usize,
    op: Cmp,
    value: i64,
}

/// `clause` as a [`Pred`], if it is one.
unsafe fn as_pred(clause: *mut pg_sys::Node) -> Option<Pred> {
    if clause.is_null() || (*clause).type_ != pg_sys::NodeTag::T_OpExpr {
        return None;
    }
    let op = clause as *mut pg_sys::OpExpr;
    let &(_, ty, cmp) = CMP_OPS.iter().find(|(oid, _, _)| *oid == (*op).opno.to_u32())?;
    let [l, r] = list_cells((*op).args) else { return None };
    let (l, r) = (l.ptr_value as *mut pg_sys::Node, r.ptr_value as *mut pg_sys::Node);
    let is_var = |n: *mut pg_sys::Node| {
        (*n).type_ == pg_sys::NodeTag::T_Var && (*(n as *mut pg_sys::Var)).varattno > 0 && (*(n as *mut pg_sys::Var)).varlevelsup == 0
    };
    let is_const = |n: *mut pg_sys::Node| (*n).type_ == pg_sys::NodeTag::T_Const && !(*(n as *mut pg_sys::Const)).constisnull;
    let (var, konst, cmp) = if is_var(l) && is_const(r) {
        (l as *mut pg_sys::Var, r as *mut pg_sys::Const, cmp)
    } else if is_const(l) && is_var(r) {
        (r as *mut pg_sys::Var, l as *mut pg_sys::Const, cmp.flipped())
    } else {
        return None;
    };
    if (*var).vartype != ty || (*konst).consttype != ty || !(*konst).constbyval {
        return None;
    }
    let width = (*konst).constlen as usize;
    Some(Pred { att: (*var).varattno as usize - 1, width, op: cmp, value: widen((*konst).constvalue.value() as u64, width) })
}

/// Split WHERE clauses into those evaluated natively and the rest.
unsafe fn split_quals(quals: *mut pg_sys::List) -> (Vec<Pred>, *mut pg_sys::List) {
    let mut preds = vec![];
    let mut rest: *mut pg_sys::List = std::ptr::null_mut();
    for c in list_cells(quals) {
        match as_pred(c.ptr_value as *mut pg_sys::Node) {
            Some(p) => preds.push(p),
            None => rest = pg_sys::lappend(rest, c.ptr_value),
        }
    }
    (preds, rest)
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
        let d = crate::pg_raw::catching(|| eval(qual, econtext, &mut isnull));
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
    let join: Vec<i32> = list_cells(private_list(cscan, P_JOIN)).iter().map(|c| c.int_value).collect();
    let key_list: Vec<i32> = list_cells(private_list(cscan, P_KEYS)).iter().map(|c| c.int_value).collect();
    // The anker table's grouping: its key columns, or its join column.
    let fact_keys = if join.is_empty() { key_list.clone() } else { vec![join[0]] };
    let keys: Vec<(usize, usize)> = fact_keys
        .iter()
        .map(|&attno| {
            let att = attno as usize - 1;
            (att, width(att))
        })
        .collect();
    let outs: Vec<Out> = list_cells(private_list(cscan, P_OUTPUTS))
        .chunks(2)
        .map(|p| match p[0].int_value {
            0 => Out::Key(p[1].int_value as usize),
            code => Out::Agg(AGG_FNS[code as usize - 1], p[1].int_value as i16),
        })
        .collect();
    // Each aggregate and its accumulator; aggregates of one input with
    // the same kind of state share one (sum(x) and avg(x) in CH-Q1).
    let mut funcs: Vec<(AggFn, usize)> = vec![];
    let mut inputs: Vec<Input> = vec![];
    let mut kinds: Vec<AccKind> = vec![];
    for out in &outs {
        if let Out::Agg(f, attno) = *out {
            let att = (attno.max(1) - 1) as usize;
            let input = match f {
                AggFn::CountRows => Input::Rows,
                AggFn::CountValues => Input::NotNull(att),
                _ if f.takes_numeric() => Input::Numeric(att),
                _ => Input::Int(att, width(att)),
            };
            let acc = match (0..inputs.len()).find(|&a| inputs[a] == input && kinds[a] == f.acc_kind()) {
                Some(a) => a,
                None => {
                    inputs.push(input);
                    kinds.push(f.acc_kind());
                    inputs.len() - 1
                }
            };
            funcs.push((f, acc));
        }
    }
    let mut agg = Aggregator {
        groups: Groups::new(&kinds, !keys.is_empty()),
        keys,
        inputs,
        preds: split_quals(private_list(cscan, P_QUALS)).0,
        qual: (*s).qual,
        econtext: (*node).ss.ps.ps_ExprContext,
        rows: 0,
        rows_clean: 0,
        rows_checked: 0,
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
    (*s).rows_checked = agg.rows_checked;
    let groups = if join.is_empty() {
        agg.groups
    } else {
        let child = list_cells((*node).custom_ps)[0].ptr_value as *mut pg_sys::PlanState;
        join_groups(child, &agg.groups, &kinds, join[1], &key_list)
    };

    // Results, in the query's memory: they outlive this call.
    let old = pg_sys::CurrentMemoryContext;
    pg_sys::CurrentMemoryContext = (*estate).es_query_cxt;
    let groups = &groups;
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
                    let (f, acc) = funcs[a];
                    a += 1;
                    to_datum(groups.output(g, acc, f))
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

/// The join: every row of the other relation (from its plan, `child`)
/// whose join column (at position `join_pos` of its output) matches a group
/// of the anker table adds that group's accumulators to its own group,
/// keyed by the columns at `key_positions`. An inner join: rows without a
/// partner, and NULL join values, contribute nothing.
unsafe fn join_groups(
    child: *mut pg_sys::PlanState,
    fact: &Groups,
    kinds: &[AccKind],
    join_pos: i32,
    key_positions: &[i32],
) -> Groups {
    let mut out = Groups::new(kinds, !key_positions.is_empty());
    let last = key_positions.iter().copied().chain([join_pos]).max().unwrap_or(join_pos);
    let mut rows = 0u64;
    loop {
        let slot = crate::pg_raw::catching(|| crate::pg_raw::exec_proc_node(child));
        if slot.is_null() || (*slot).tts_flags & pg_sys::TTS_FLAG_EMPTY as u16 != 0 {
            break;
        }
        rows += 1;
        if rows.is_multiple_of(8192) {
            pg_sys::check_for_interrupts!();
        }
        pg_sys::slot_getsomeattrs(slot, last);
        let atts = datum::attrs((*slot).tts_tupleDescriptor);
        let value = |pos: i32| -> Option<i64> {
            let i = pos as usize - 1;
            (!*(*slot).tts_isnull.add(i)).then(|| widen((*(*slot).tts_values.add(i)).value() as u64, atts[i].attlen as usize))
        };
        let Some(x) = value(join_pos) else { continue };
        let mut fact_key = Key::default();
        fact_key.values[0] = x;
        let Some(partner) = fact.find(&fact_key) else { continue };
        let mut key = Key::default();
        for (k, &pos) in key_positions.iter().enumerate() {
            match value(pos) {
                Some(v) => key.values[k] = v,
                None => key.nulls |= 1 << k,
            }
        }
        let g = out.group(key);
        for (acc, from) in out.accs_mut(g).iter_mut().zip(fact.accs(partner)) {
            acc.merge(from);
        }
    }
    out
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
pub(crate) unsafe fn numeric_datum(literal: &str) -> pg_sys::Datum {
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
        // Errors of the quals and of the joined plan are raised as
        // PostgreSQL raised them (`pg_raw::catching` below).
        crate::pg_raw::rethrowing(|| aggregate(s));
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

/// Not guarded: errors of the quals reach the client as raised
/// (`pg_raw`); `next` is guarded and raises ours itself.
unsafe extern "C-unwind" fn exec(node: *mut pg_sys::CustomScanState) -> *mut pg_sys::TupleTableSlot {
    crate::pg_raw::exec_scan(&mut (*node).ss, Some(next), Some(recheck))
}

#[pg_guard]
unsafe extern "C-unwind" fn end(node: *mut pg_sys::CustomScanState) {
    let s = node as *mut State;
    for c in list_cells((*node).custom_ps) {
        pg_sys::ExecEndNode(c.ptr_value as *mut pg_sys::PlanState);
    }
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
    let cscan = (*node).ss.ps.plan as *mut pg_sys::CustomScan;
    if let Some(fact_col) = list_cells(private_list(cscan, P_JOIN)).first() {
        let att = &datum::attrs((*(*s).rel).rd_att)[fact_col.int_value as usize - 1];
        pg_sys::ExplainPropertyText(c"Join Column".as_ptr(), att.attname.data.as_ptr(), es);
    }
    (*s).snap.explain(es);
    if (*es).analyze && (*s).done {
        pg_sys::ExplainPropertyInteger(c"Rows Aggregated".as_ptr(), std::ptr::null(), (*s).rows as i64, es);
        // How rows were read depends on what writers and earlier scans left
        // (like heap's buffer counts): shown on request only.
        if (*es).verbose {
            pg_sys::ExplainPropertyInteger(c"Rows From Clean Blocks".as_ptr(), std::ptr::null(), (*s).rows_clean as i64, es);
            pg_sys::ExplainPropertyInteger(c"Rows Checked Without Slot".as_ptr(), std::ptr::null(), (*s).rows_checked as i64, es);
        }
    }
}
