//! `AnkerScan`: anker's own sequential-scan plan node.
//!
//! PostgreSQL's table AM interface does not tell a scan which columns the
//! plan needs, yet reading only those is the point of a column store. So
//! the planner hook offers, next to every sequential-scan path on an anker
//! relation, a custom path that costs a bit less. Its plan node carries the
//! attribute numbers the target list and quals reference, and its executor
//! fills only those attributes of each row. It is parallel-aware (workers
//! share the table AM's parallel scan state) and shows in EXPLAIN.
//!
//! `anker.enable_scan_node = off` keeps PostgreSQL's own SeqScan.

use crate::snapshots;
use crate::storage::table_of;
use crate::tam::{self, scan};
use anker_engine::snapshot::Method;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::CStr;

const NAME: &CStr = c"AnkerScan";
/// Run-cost discount against a heap-style sequential scan: columnar reads
/// skip untouched columns.
const RUN_COST_FACTOR: f64 = 0.8;
/// `custom_private` marker: every attribute is needed (whole-row reference).
const ALL_ATTRS: i32 = -1;

pub static ENABLE: pgrx::GucSetting<bool> = pgrx::GucSetting::<bool>::new(true);

static mut PREV_SET_REL_PATHLIST: pg_sys::set_rel_pathlist_hook_type = None;

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
    EstimateDSMCustomScan: Some(estimate_dsm),
    InitializeDSMCustomScan: Some(initialize_dsm),
    ReInitializeDSMCustomScan: Some(reinitialize_dsm),
    InitializeWorkerCustomScan: Some(initialize_worker),
    ShutdownCustomScan: None,
    ExplainCustomScan: Some(explain),
};

pub fn install() {
    pgrx::GucRegistry::define_bool_guc(
        c"anker.enable_scan_node",
        c"Plan sequential scans of anker tables with the AnkerScan node.",
        c"AnkerScan reads only the columns a query needs.",
        &ENABLE,
        pgrx::GucContext::Userset,
        pgrx::GucFlags::default(),
    );
    // SAFETY: hook chaining during postmaster start-up.
    unsafe {
        pg_sys::RegisterCustomScanMethods(&raw const SCAN_METHODS);
        PREV_SET_REL_PATHLIST = pg_sys::set_rel_pathlist_hook;
        pg_sys::set_rel_pathlist_hook = Some(set_rel_pathlist);
    }
}

pub(crate) unsafe fn list_cells<'a>(l: *mut pg_sys::List) -> &'a [pg_sys::ListCell] {
    if l.is_null() {
        &[]
    } else {
        std::slice::from_raw_parts((*l).elements, (*l).length as usize)
    }
}

/// A PostgreSQL List of the nodes `items`, in order.
pub(crate) unsafe fn node_list(items: impl IntoIterator<Item = *mut pg_sys::Node>) -> *mut pg_sys::List {
    items.into_iter().fold(std::ptr::null_mut(), |l, n| pg_sys::lappend(l, n as *mut std::ffi::c_void))
}

/// Is the range-table entry a plain anker table we can scan?
pub(crate) unsafe fn is_anker_rte(rte: *mut pg_sys::RangeTblEntry) -> bool {
    if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION
        || (*rte).inh
        || !(*rte).tablesample.is_null()
        || ((*rte).relkind as u8 != pg_sys::RELKIND_RELATION && (*rte).relkind as u8 != pg_sys::RELKIND_MATVIEW)
    {
        return false;
    }
    let rel = pg_sys::RelationIdGetRelation((*rte).relid);
    if rel.is_null() {
        return false;
    }
    let ours = tam::is_anker(rel);
    pg_sys::RelationClose(rel);
    ours
}

/// A copy of `seq` (a SeqScan path) as an AnkerScan path, a bit cheaper.
unsafe fn custom_path_from(seq: *mut pg_sys::Path) -> *mut pg_sys::Path {
    let cp = pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomPath>()) as *mut pg_sys::CustomPath;
    (*cp).path = *seq;
    (*cp).path.type_ = pg_sys::NodeTag::T_CustomPath;
    (*cp).path.pathtype = pg_sys::NodeTag::T_CustomScan;
    let run = (*seq).total_cost - (*seq).startup_cost;
    (*cp).path.total_cost = (*seq).startup_cost + run * RUN_COST_FACTOR;
    // Scans run backward too (cursors: FETCH BACKWARD, and WHERE CURRENT OF
    // needs the scan itself, without a Materialize on top).
    (*cp).flags = pg_sys::CUSTOMPATH_SUPPORT_BACKWARD_SCAN;
    (*cp).custom_paths = std::ptr::null_mut();
    (*cp).custom_private = std::ptr::null_mut();
    (*cp).methods = &raw const PATH_METHODS;
    cp as *mut pg_sys::Path
}

fn is_seqscan(p: *mut pg_sys::Path) -> bool {
    // SAFETY: p is a planner path.
    unsafe { (*p).pathtype == pg_sys::NodeTag::T_SeqScan }
}

#[pg_guard]
unsafe extern "C-unwind" fn set_rel_pathlist(
    root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    rti: pg_sys::Index,
    rte: *mut pg_sys::RangeTblEntry,
) {
    if let Some(prev) = PREV_SET_REL_PATHLIST {
        prev(root, rel, rti, rte);
    }
    if !ENABLE.get() || !is_anker_rte(rte) || !snapshots::worth_anker_nodes((*rel).tuples) {
        return;
    }
    let seqs: Vec<*mut pg_sys::Path> = list_cells((*rel).pathlist)
        .iter()
        .map(|c| c.ptr_value as *mut pg_sys::Path)
        .filter(|&p| is_seqscan(p))
        .collect();
    for p in seqs {
        pg_sys::add_path(rel, custom_path_from(p));
    }
    let partial: Vec<*mut pg_sys::Path> = list_cells((*rel).partial_pathlist)
        .iter()
        .map(|c| c.ptr_value as *mut pg_sys::Path)
        .filter(|&p| is_seqscan(p) && (*p).parallel_aware)
        .collect();
    for p in partial {
        pg_sys::add_partial_path(rel, custom_path_from(p));
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn plan_path(
    _root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    best_path: *mut pg_sys::CustomPath,
    tlist: *mut pg_sys::List,
    clauses: *mut pg_sys::List,
    _custom_plans: *mut pg_sys::List,
) -> *mut pg_sys::Plan {
    let cs = pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomScan>()) as *mut pg_sys::CustomScan;
    (*cs).scan.plan.type_ = pg_sys::NodeTag::T_CustomScan;
    (*cs).scan.plan.targetlist = tlist;
    (*cs).scan.plan.parallel_aware = (*best_path).path.parallel_aware;
    (*cs).scan.scanrelid = (*rel).relid;
    let mut quals: *mut pg_sys::List = std::ptr::null_mut();
    for c in list_cells(clauses) {
        let ri = c.ptr_value as *mut pg_sys::RestrictInfo;
        if !(*ri).pseudoconstant {
            quals = pg_sys::lappend(quals, (*ri).clause as *mut std::ffi::c_void);
        }
    }
    (*cs).scan.plan.qual = quals;
    (*cs).methods = &raw const SCAN_METHODS;
    (*cs).flags = (*best_path).flags;
    // The attributes the node must fill.
    let mut attrs: *mut pg_sys::Bitmapset = std::ptr::null_mut();
    pg_sys::pull_varattnos(tlist as *mut pg_sys::Node, (*rel).relid, &mut attrs);
    pg_sys::pull_varattnos(quals as *mut pg_sys::Node, (*rel).relid, &mut attrs);
    let offset = pg_sys::FirstLowInvalidHeapAttributeNumber;
    let mut private: *mut pg_sys::List = std::ptr::null_mut();
    if pg_sys::bms_is_member(-offset, attrs) {
        private = pg_sys::lappend_int(private, ALL_ATTRS); // whole-row reference
    } else {
        let mut m = -1;
        loop {
            m = pg_sys::bms_next_member(attrs, m);
            if m < 0 {
                break;
            }
            let attno = m + offset;
            if attno > 0 {
                private = pg_sys::lappend_int(private, attno);
            }
        }
    }
    (*cs).custom_private = private;
    cs as *mut pg_sys::Plan
}

/// Executor state; `css` must come first.
#[repr(C)]
struct State {
    css: pg_sys::CustomScanState,
    scan: pg_sys::TableScanDesc,
    /// One flag per attribute of the relation (palloc'd).
    wanted: *mut bool,
    natts: usize,
    snap: SnapChoice,
}

/// Which columns a scan of an anker table reads: a column snapshot (in a
/// read-only statement) or the live columns; and, for EXPLAIN, the
/// snapshot it got. Shared by AnkerScan and AnkerAgg.
#[derive(Clone, Copy, Default)]
pub(crate) struct SnapChoice {
    /// Read a column snapshot with this method, or the live columns.
    method: Option<Method>,
    /// The snapshot used: id, reused, creation time (ns).
    snap_id: u64,
    snap_reused: bool,
    snap_create_ns: u64,
    /// No snapshot: the table is below `anker.snapshot_min_rows`.
    small_table: bool,
}

/// `snap_id` of a scan that could not get a snapshot.
const NO_SNAPSHOT: u64 = u64::MAX;

impl SnapChoice {
    /// Scans of read-only statements run on a snapshot (hybrid execution),
    /// unless the table is small.
    pub(crate) unsafe fn for_statement(estate: *mut pg_sys::EState, rel: pg_sys::Relation) -> SnapChoice {
        let stmt = (*estate).es_plannedstmt;
        let read_only = (*stmt).commandType == pg_sys::CmdType::CMD_SELECT
            && !(*stmt).hasModifyingCTE
            && (*stmt).rowMarks.is_null()
            && !(*estate).es_snapshot.is_null()
            && (*(*estate).es_snapshot).snapshot_type == pg_sys::SnapshotType::SNAPSHOT_MVCC;
        let mut c = SnapChoice { method: if read_only { snapshots::provider().method() } else { None }, ..Default::default() };
        if c.method.is_some() && !snapshots::worth_a_snapshot(table_of(rel)) {
            c.method = None;
            c.small_table = true;
        }
        c
    }

    /// Take (or reuse) the snapshot of columns `cols` (0-based), if the
    /// statement reads one.
    pub(crate) unsafe fn take(&mut self, rel: pg_sys::Relation, cols: &[usize], snapshot: pg_sys::Snapshot) -> Option<snapshots::Acquired> {
        let method = self.method?;
        let table = table_of(rel);
        let Some(a) = snapshots::acquire(table, cols, method, snapshot) else {
            self.snap_id = NO_SNAPSHOT;
            return None;
        };
        self.snap_id = a.id;
        self.snap_reused = a.reused;
        self.snap_create_ns = table.snapshot(crate::shmem::arena(), a.snap).create_ns;
        Some(a)
    }

    /// The EXPLAIN line "Snapshot: ...".
    pub(crate) unsafe fn explain(&self, es: *mut pg_sys::ExplainState) {
        let snap = match self.method {
            None if self.small_table => "none (live columns: fewer rows than anker.snapshot_min_rows)".to_string(),
            None => "none (live columns)".to_string(),
            Some(_) if self.snap_id == NO_SNAPSHOT => {
                format!("{} (no memory for it: read the live columns)", snapshots::provider_name().to_string_lossy())
            }
            Some(_) if self.snap_id == 0 => format!("{} (taken at first row)", snapshots::provider_name().to_string_lossy()),
            // Ids, times and reuse (of a snapshot a concurrent query took)
            // change from run to run: only with TIMING.
            Some(m) if !(*es).timing => m.name().to_string(),
            Some(m) => {
                let how = if self.snap_reused {
                    "reused".to_string()
                } else {
                    format!("created in {:.3} ms", self.snap_create_ns as f64 / 1e6)
                };
                format!("{} #{} ({})", m.name(), self.snap_id, how)
            }
        };
        let snap = std::ffi::CString::new(snap).expect("no NUL");
        pg_sys::ExplainPropertyText(c"Snapshot".as_ptr(), snap.as_ptr(), es);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn create_state(cscan: *mut pg_sys::CustomScan) -> *mut pg_sys::Node {
    new_scan_state(std::mem::size_of::<State>(), cscan, &raw const EXEC_METHODS)
}

/// A zeroed executor state of `size` bytes, which start with a
/// `CustomScanState`, for plan node `cscan` run by `methods`.
pub(crate) unsafe fn new_scan_state(
    size: usize,
    cscan: *mut pg_sys::CustomScan,
    methods: *const pg_sys::CustomExecMethods,
) -> *mut pg_sys::Node {
    let css = pg_sys::palloc0(size) as *mut pg_sys::CustomScanState;
    (*css).ss.ps.type_ = pg_sys::NodeTag::T_CustomScanState;
    (*css).methods = methods;
    (*css).flags = (*cscan).flags;
    css as *mut pg_sys::Node
}

unsafe fn relation(node: *mut pg_sys::CustomScanState) -> pg_sys::Relation {
    (*node).ss.ss_currentRelation
}

#[pg_guard]
unsafe extern "C-unwind" fn begin(node: *mut pg_sys::CustomScanState, estate: *mut pg_sys::EState, _eflags: i32) {
    let s = node as *mut State;
    // PostgreSQL 15 gives custom scans a plain virtual slot; use anker's
    // (a virtual slot that also carries xmin/xmax for system columns).
    (*node).ss.ss_ScanTupleSlot =
        pg_sys::ExecAllocTableSlot(&mut (*estate).es_tupleTable, (*relation(node)).rd_att, crate::tam::slot::ops());
    let cscan = (*node).ss.ps.plan as *mut pg_sys::CustomScan;
    let natts = (*(*relation(node)).rd_att).natts as usize;
    let wanted = pg_sys::palloc0(natts.max(1)) as *mut bool;
    for c in list_cells((*cscan).custom_private) {
        let a = c.int_value;
        if a == ALL_ATTRS {
            for i in 0..natts {
                *wanted.add(i) = true;
            }
        } else if a >= 1 && (a as usize) <= natts {
            *wanted.add(a as usize - 1) = true;
        }
    }
    (*s).wanted = wanted;
    (*s).natts = natts;
    (*s).snap = SnapChoice::for_statement(estate, relation(node));
}

/// The user columns the scan reads (0-based).
unsafe fn wanted_cols(s: *mut State) -> Vec<usize> {
    (0..(*s).natts).filter(|&i| *(*s).wanted.add(i)).collect()
}

/// Take (or reuse) the column snapshot for this scan.
unsafe fn take_snapshot(s: *mut State, snapshot: pg_sys::Snapshot) -> Option<snapshots::Acquired> {
    let cols = wanted_cols(s);
    (*s).snap.take(relation(s as *mut pg_sys::CustomScanState), &cols, snapshot)
}

unsafe fn restrict(s: *mut State) {
    scan::restrict_scan((*s).scan, std::slice::from_raw_parts((*s).wanted, (*s).natts));
}

#[pg_guard]
unsafe extern "C-unwind" fn next(ss: *mut pg_sys::ScanState) -> *mut pg_sys::TupleTableSlot {
    let s = ss as *mut State;
    let estate = (*ss).ps.state;
    if (*s).scan.is_null() {
        let flags = pg_sys::ScanOptions::SO_TYPE_SEQSCAN
            | pg_sys::ScanOptions::SO_ALLOW_STRAT
            | pg_sys::ScanOptions::SO_ALLOW_SYNC
            | pg_sys::ScanOptions::SO_ALLOW_PAGEMODE;
        (*s).scan = scan::scan_begin(
            (*ss).ss_currentRelation,
            (*estate).es_snapshot,
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            flags,
        );
        restrict(s);
        if let Some(a) = take_snapshot(s, (*estate).es_snapshot) {
            scan::use_snapshot((*s).scan, a.snap);
        }
    }
    let slot = (*ss).ss_ScanTupleSlot;
    // Already inside a guarded callback: call the scan directly.
    if scan::getnext((*s).scan, (*estate).es_direction, slot) {
        slot
    } else {
        std::ptr::null_mut()
    }
}

/// `ExecScan`'s recheck: anker's nodes are never rechecked (no EPQ
/// substitution of their rows).
#[pg_guard]
pub(crate) unsafe extern "C-unwind" fn recheck(_ss: *mut pg_sys::ScanState, _slot: *mut pg_sys::TupleTableSlot) -> bool {
    true
}

/// Not guarded: errors of the quals reach the client as raised
/// (`pg_raw`); `next` is guarded and raises ours itself.
unsafe extern "C-unwind" fn exec(node: *mut pg_sys::CustomScanState) -> *mut pg_sys::TupleTableSlot {
    crate::pg_raw::exec_scan(&mut (*node).ss, Some(next), Some(recheck))
}

#[pg_guard]
unsafe extern "C-unwind" fn end(node: *mut pg_sys::CustomScanState) {
    let s = node as *mut State;
    if !(*s).scan.is_null() {
        scan::scan_end((*s).scan);
        (*s).scan = std::ptr::null_mut();
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn rescan(node: *mut pg_sys::CustomScanState) {
    let s = node as *mut State;
    if !(*s).scan.is_null() {
        scan::scan_rescan((*s).scan, std::ptr::null_mut(), false, false, false, false);
    }
    pg_sys::ExecScanReScan(&mut (*node).ss);
}

/// Our part of the parallel query's shared memory: the snapshot id (0:
/// live columns), then the table AM's parallel scan state.
const DSM_PREFIX: usize = 16;

#[pg_guard]
unsafe extern "C-unwind" fn estimate_dsm(node: *mut pg_sys::CustomScanState, _pcxt: *mut pg_sys::ParallelContext) -> pg_sys::Size {
    DSM_PREFIX + pg_sys::table_parallelscan_estimate(relation(node), (*(*node).ss.ps.state).es_snapshot)
}

#[pg_guard]
unsafe extern "C-unwind" fn initialize_dsm(
    node: *mut pg_sys::CustomScanState,
    _pcxt: *mut pg_sys::ParallelContext,
    coordinate: *mut std::ffi::c_void,
) {
    let s = node as *mut State;
    let pscan = (coordinate as *mut u8).add(DSM_PREFIX) as pg_sys::ParallelTableScanDesc;
    let snapshot = (*(*node).ss.ps.state).es_snapshot;
    pg_sys::table_parallelscan_initialize(relation(node), pscan, snapshot);
    (*s).scan = pg_sys::table_beginscan_parallel(relation(node), pscan);
    restrict(s);
    // The leader takes the snapshot; workers join it by id. A vm_snapshot
    // image is the leader's own mapping: workers then read the live columns,
    // which gives the same rows for the statement's MVCC snapshot, more slowly.
    let id = match take_snapshot(s, snapshot) {
        Some(a) => {
            scan::use_snapshot((*s).scan, a.snap);
            let table = table_of(relation(node));
            if table.snapshot(crate::shmem::arena(), a.snap).process_local() {
                0
            } else {
                a.id
            }
        }
        None => 0,
    };
    *(coordinate as *mut u64) = id;
}

#[pg_guard]
unsafe extern "C-unwind" fn reinitialize_dsm(
    node: *mut pg_sys::CustomScanState,
    _pcxt: *mut pg_sys::ParallelContext,
    coordinate: *mut std::ffi::c_void,
) {
    scan::parallelscan_reinitialize(relation(node), (coordinate as *mut u8).add(DSM_PREFIX) as pg_sys::ParallelTableScanDesc);
}

#[pg_guard]
unsafe extern "C-unwind" fn initialize_worker(
    node: *mut pg_sys::CustomScanState,
    _toc: *mut pg_sys::shm_toc,
    coordinate: *mut std::ffi::c_void,
) {
    let s = node as *mut State;
    let pscan = (coordinate as *mut u8).add(DSM_PREFIX) as pg_sys::ParallelTableScanDesc;
    (*s).scan = pg_sys::table_beginscan_parallel(relation(node), pscan);
    restrict(s);
    let id = *(coordinate as *const u64);
    if id != 0 {
        let table = table_of(relation(node));
        match snapshots::attach(table, id) {
            Some(snap) => scan::use_snapshot((*s).scan, snap),
            // the leader holds it until the workers are done
            None => pgrx::error!("anker: column snapshot {id} of the parallel scan is gone"),
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn explain(node: *mut pg_sys::CustomScanState, _ancestors: *mut pg_sys::List, es: *mut pg_sys::ExplainState) {
    let s = node as *mut State;
    explain_columns(relation(node), std::slice::from_raw_parts((*s).wanted, (*s).natts), es);
    (*s).snap.explain(es);
}

/// The EXPLAIN line "Columns: ..." naming the attributes flagged in `wanted`.
pub(crate) unsafe fn explain_columns(rel: pg_sys::Relation, wanted: &[bool], es: *mut pg_sys::ExplainState) {
    let names: Vec<String> = crate::datum::attrs((*rel).rd_att)
        .iter()
        .zip(wanted)
        .filter(|(_, &w)| w)
        .map(|(att, _)| CStr::from_ptr(att.attname.data.as_ptr()).to_string_lossy().into_owned())
        .collect();
    let text = if names.is_empty() { "(none)".to_string() } else { names.join(", ") };
    let text = std::ffi::CString::new(text).expect("attribute names have no NUL");
    pg_sys::ExplainPropertyText(c"Columns".as_ptr(), text.as_ptr(), es);
}
