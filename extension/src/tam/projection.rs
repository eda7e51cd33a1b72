//! Scans of a query fill only the columns the query reads.
//!
//! anker hands rows out in virtual slots, one column page per attribute
//! filled; heap deforms a tuple only up to the last attribute asked for.
//! PostgreSQL 15 tells a table AM nothing about the attributes a scan
//! needs, so a Seq Scan of `district` (40 rows, 11 columns) filled all 440
//! values to find one row by two of them. The executor's range table does
//! say: `selectedCols` of a relation's entry holds every column the query
//! reads from it (the parser marks each column reference there for column
//! privileges; views, rules and SQL functions are parsed queries too), and
//! `updatedCols` those an UPDATE assigns, which it also reads when it
//! assigns an element or a field of one (`SET a[2] = 0`). After
//! `standard_ExecutorStart` the Seq, Index and Bitmap Heap Scans of anker
//! tables are restricted to those columns, once per execution and without
//! walking expressions (a version that collected the columns of each
//! node's expressions at every start cost more than it saved). Seq and
//! Index Scans are begun where PostgreSQL begins them, on the node's first
//! call (so a scan that never runs takes no predicate lock and counts no
//! scan), through a wrapper of that call.
//!
//! Left unrestricted, because `selectedCols` may not name every column
//! read: whole-row references (they need all columns anyway), relations
//! with row-level security (policy quals are not marked), inheritance
//! children and partitions scanned through a parent (the parent's policies
//! apply to them, translated), parallel-aware scans (their descriptors are
//! made later, in shared memory) and EXPLAIN without ANALYZE. Rows fetched
//! by TID (ModifyTable's old row, triggers, EvalPlanQual, foreign-key and
//! unique checks) use readers of their own and stay whole.

use super::modify::Columns;
use crate::scan_node::list_cells;
use pgrx::pg_sys;
use pgrx::prelude::*;

static mut PREV_EXECUTOR_START: pg_sys::ExecutorStart_hook_type = None;

pub fn install() {
    // SAFETY: called once from _PG_init in the postmaster.
    unsafe {
        PREV_EXECUTOR_START = pg_sys::ExecutorStart_hook;
        pg_sys::ExecutorStart_hook = Some(executor_start);
    }
}

/// Starts the executor, then restricts its scans. Start-up runs user code
/// (initial partition pruning evaluates stable functions), and an ERROR
/// there must reach PostgreSQL as raised: through pgrx's guard it lost its
/// CONTEXT lines, for every query of the cluster. So this frame has no
/// guard and calls PostgreSQL through `pg_raw` (see there); it holds
/// nothing an ERROR's `longjmp` would skip.
unsafe extern "C-unwind" fn executor_start(query: *mut pg_sys::QueryDesc, eflags: std::ffi::c_int) {
    match *(&raw const PREV_EXECUTOR_START) {
        Some(prev) => prev(query, eflags),
        None => crate::pg_raw::standard_executor_start(query, eflags),
    }
    restrict_started(query, eflags);
}

#[pg_guard]
unsafe extern "C-unwind" fn restrict_started(query: *mut pg_sys::QueryDesc, eflags: std::ffi::c_int) {
    if eflags & pg_sys::EXEC_FLAG_EXPLAIN_ONLY as i32 != 0 || (*query).planstate.is_null() {
        return;
    }
    restrict_tree((*query).planstate, (*query).estate);
}

/// Restrict the scans of anker tables in the plan state tree under `node`.
unsafe fn restrict_tree(node: *mut pg_sys::PlanState, estate: *mut pg_sys::EState) {
    use pg_sys::NodeTag::*;
    if node.is_null() {
        return;
    }
    match (*node).type_ {
        // PostgreSQL begins these on the node's first call: restrict them
        // there.
        T_SeqScanState | T_IndexScanState => {
            let rel = (*(node as *mut pg_sys::ScanState)).ss_currentRelation;
            if !(*(*node).plan).parallel_aware && !rel.is_null() && super::is_anker(rel) {
                wrap_first_call(node);
            }
        }
        // (begun by ExecInitBitmapHeapScan)
        T_BitmapHeapScanState => {
            let ss = node as *mut pg_sys::ScanState;
            if !(*ss).ss_currentScanDesc.is_null() {
                if let Some(wanted) = columns_read(estate, scanrelid(node), (*ss).ss_currentRelation) {
                    super::scan::restrict_scan_to((*ss).ss_currentScanDesc, &wanted);
                }
            }
        }
        T_AppendState => {
            let a = node as *mut pg_sys::AppendState;
            for i in 0..(*a).as_nplans.max(0) as usize {
                restrict_tree(*(*a).appendplans.add(i), estate);
            }
        }
        T_MergeAppendState => {
            let m = node as *mut pg_sys::MergeAppendState;
            for i in 0..(*m).ms_nplans.max(0) as usize {
                restrict_tree(*(*m).mergeplans.add(i), estate);
            }
        }
        T_SubqueryScanState => restrict_tree((*(node as *mut pg_sys::SubqueryScanState)).subplan, estate),
        T_CustomScanState => {
            for child in list_cells((*(node as *mut pg_sys::CustomScanState)).custom_ps) {
                restrict_tree(child.ptr_value as *mut pg_sys::PlanState, estate);
            }
        }
        _ => {}
    }
    restrict_tree((*node).lefttree, estate);
    restrict_tree((*node).righttree, estate);
    for list in [(*node).initPlan, (*node).subPlan] {
        for sp in list_cells(list) {
            restrict_tree((*(sp.ptr_value as *mut pg_sys::SubPlanState)).planstate, estate);
        }
    }
}

/// What `ExecInitNode` leaves in every node's `ExecProcNode`: PostgreSQL's
/// `ExecProcNodeFirst` (static, so learnt from the first node seen).
static mut EXEC_PROC_NODE_FIRST: pg_sys::ExecProcNodeMtd = None;

/// Have the node's first call go through [`first_call`]. Left alone if
/// something other than `ExecProcNodeFirst` sits there.
unsafe fn wrap_first_call(node: *mut pg_sys::PlanState) {
    let current = (*node).ExecProcNode;
    let first = &mut *(&raw mut EXEC_PROC_NODE_FIRST);
    if first.is_none() {
        *first = current;
    }
    if current.is_some() && current.map(|f| f as usize) == first.map(|f| f as usize) {
        (*node).ExecProcNode = Some(first_call);
    }
}

/// A Seq or Index Scan's first call: begin its scan restricted to the
/// query's columns, then run the node as PostgreSQL would have. No Rust
/// value lives in this frame: an error in the node (a qual's, say) passes
/// through it by `longjmp`, as PostgreSQL raised it (see `pg_raw`).
unsafe extern "C-unwind" fn first_call(node: *mut pg_sys::PlanState) -> *mut pg_sys::TupleTableSlot {
    begin_restricted(node);
    (*node).ExecProcNode = *(&raw const EXEC_PROC_NODE_FIRST);
    (*node).ExecProcNode.expect("ExecProcNodeFirst")(node)
}

/// Begin the scan of a Seq or Index Scan node (before its first row, as
/// SeqNext and IndexNext would) restricted to the columns its query reads.
#[pg_guard]
unsafe extern "C-unwind" fn begin_restricted(node: *mut pg_sys::PlanState) {
    let estate = (*node).state;
    let ss = node as *mut pg_sys::ScanState;
    let rel = (*ss).ss_currentRelation;
    let Some(wanted) = columns_read(estate, scanrelid(node), rel) else {
        return;
    };
    let old = pg_sys::MemoryContextSwitchTo((*estate).es_query_cxt);
    if (*node).type_ == pg_sys::NodeTag::T_SeqScanState {
        if (*ss).ss_currentScanDesc.is_null() {
            // table_beginscan's flags
            let flags = pg_sys::ScanOptions::SO_TYPE_SEQSCAN
                | pg_sys::ScanOptions::SO_ALLOW_STRAT
                | pg_sys::ScanOptions::SO_ALLOW_SYNC
                | pg_sys::ScanOptions::SO_ALLOW_PAGEMODE;
            (*ss).ss_currentScanDesc =
                super::scan::scan_begin(rel, (*estate).es_snapshot, 0, std::ptr::null_mut(), std::ptr::null_mut(), flags);
        }
        super::scan::restrict_scan_to((*ss).ss_currentScanDesc, &wanted);
    } else {
        let iss = node as *mut pg_sys::IndexScanState;
        if (*iss).iss_ScanDesc.is_null() {
            // as IndexNext: keyed now unless run-time keys are still to come
            let desc = pg_sys::index_beginscan(
                rel,
                (*iss).iss_RelationDesc,
                (*estate).es_snapshot,
                (*iss).iss_NumScanKeys,
                (*iss).iss_NumOrderByKeys,
            );
            (*iss).iss_ScanDesc = desc;
            if (*iss).iss_NumRuntimeKeys == 0 || (*iss).iss_RuntimeKeysReady {
                pg_sys::index_rescan(desc, (*iss).iss_ScanKeys, (*iss).iss_NumScanKeys, (*iss).iss_OrderByKeys, (*iss).iss_NumOrderByKeys);
            }
        }
        let fetch = (*(*iss).iss_ScanDesc).xs_heapfetch;
        if !fetch.is_null() {
            super::index::restrict_fetch(fetch, &wanted);
        }
    }
    pg_sys::MemoryContextSwitchTo(old);
}

unsafe fn scanrelid(node: *mut pg_sys::PlanState) -> pg_sys::Index {
    (*((*node).plan as *mut pg_sys::Scan)).scanrelid
}

/// The attributes of `rel` (0-based) the query reads. None when the scan
/// must fill every column (see the module documentation) or reads them
/// all anyway.
unsafe fn columns_read(estate: *mut pg_sys::EState, rti: pg_sys::Index, rel: pg_sys::Relation) -> Option<Columns> {
    if rel.is_null() || !super::is_anker(rel) || (*(*rel).rd_rel).relrowsecurity || rti == 0 {
        return None;
    }
    let stmt = (*estate).es_plannedstmt;
    if !stmt.is_null() && list_cells((*stmt).appendRelations).iter().any(|a| (*(a.ptr_value as *mut pg_sys::AppendRelInfo)).child_relid == rti) {
        return None;
    }
    // (PostgreSQL's inline exec_rt_fetch)
    let rte = list_cells((*estate).es_range_table)[rti as usize - 1].ptr_value as *mut pg_sys::RangeTblEntry;
    let natts = (*(*rel).rd_att).natts as usize;
    let mut wanted = Columns::default();
    // An UPDATE's assignment to an element or field (`SET a[2] = 0`,
    // `SET r.f = 0`) reads the column's old value, but privileges make it
    // an updated column, not a selected one.
    for set in [(*rte).selectedCols, (*rte).updatedCols] {
        for attno in super::bitmap_attnos(set) {
            match attno {
                0 => return None, // a whole-row reference
                a if a > 0 && a as usize <= natts => wanted.add(a as usize - 1),
                _ => {} // system columns: always set
            }
        }
    }
    if wanted.len() == natts {
        return None;
    }
    crate::shmem::arena().count(anker_engine::stats::COLUMN_RESTRICTED_SCANS, 1);
    Some(wanted)
}
