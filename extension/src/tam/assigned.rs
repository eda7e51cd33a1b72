//! The columns the running statements' UPDATEs assign.
//!
//! An in-place UPDATE writes the columns whose value changes, and finding
//! them compared every column of the new row with the stored one (a TPC-C
//! stock row: 17 values, 11 of them strings, to change 4). PostgreSQL
//! builds the new row from the old one: a column the statement does not
//! assign keeps the value the old row was fetched with, which is the
//! stored value once `claim` has the row (a row changed since makes the
//! update fail or run again on the new version). The range table names
//! the columns an UPDATE, a MERGE or an `INSERT … ON CONFLICT DO UPDATE`
//! assigns (`updatedCols`, translated for inheritance children), so only
//! those, the stored generated columns, and attributes the table has no
//! column for yet are compared.
//!
//! `tuple_update` is not told which statement calls it. The executors
//! running in this backend are kept on a stack (pushed around ExecutorRun
//! and ExecutorFinish, the two places ModifyTable nodes and AFTER triggers
//! run, popped on the way out, errors included, as `PG_FINALLY` would), and
//! the union over those that have `rel` among their result relations is
//! used: the caller is one of them, so the union holds every column it
//! assigns. No answer (every column is compared) when none has, when
//! BEFORE ROW UPDATE triggers may change any column, or in a logical
//! replication worker (it updates without an executor, while its triggers
//! may run statements).

use crate::scan_node::list_cells;
use pgrx::pg_sys;

use super::modify::Columns;

static mut PREV_EXECUTOR_RUN: pg_sys::ExecutorRun_hook_type = None;
static mut PREV_EXECUTOR_FINISH: pg_sys::ExecutorFinish_hook_type = None;

/// The executor states of the statements running in this backend,
/// innermost last.
static mut RUNNING: Vec<*mut pg_sys::EState> = Vec::new();

pub fn install() {
    // SAFETY: called once from _PG_init in the postmaster.
    unsafe {
        PREV_EXECUTOR_RUN = pg_sys::ExecutorRun_hook;
        pg_sys::ExecutorRun_hook = Some(executor_run);
        PREV_EXECUTOR_FINISH = pg_sys::ExecutorFinish_hook;
        pg_sys::ExecutorFinish_hook = Some(executor_finish);
    }
}

/// Runs `run` with `estate` on the running stack, and takes it off however
/// `run` ends (an ERROR goes on untouched: see `pg_raw`).
///
/// # Safety
/// As `pg_raw::try_finally`.
unsafe fn while_running(estate: *mut pg_sys::EState, run: impl FnOnce()) {
    // A statement that writes no table (most of them: plain queries) opens
    // no result relation, before or while it runs: `columns` would pass it
    // by, so it is not pushed.
    if (*estate).es_opened_result_relations.is_null() {
        return run();
    }
    // SAFETY (of the stack): backends are single-threaded, and executors
    // nest, so the one pushed here is the last when `run` ends.
    (*(&raw mut RUNNING)).push(estate);
    crate::pg_raw::try_finally(run, || {
        (*(&raw mut RUNNING)).pop();
    });
}

unsafe extern "C-unwind" fn executor_run(
    query: *mut pg_sys::QueryDesc,
    direction: pg_sys::ScanDirection::Type,
    count: u64,
    execute_once: bool,
) {
    while_running((*query).estate, || match *(&raw const PREV_EXECUTOR_RUN) {
        Some(prev) => prev(query, direction, count, execute_once),
        None => crate::pg_raw::standard_executor_run(query, direction, count, execute_once),
    });
}

unsafe extern "C-unwind" fn executor_finish(query: *mut pg_sys::QueryDesc) {
    while_running((*query).estate, || match *(&raw const PREV_EXECUTOR_FINISH) {
        Some(prev) => prev(query),
        None => crate::pg_raw::standard_executor_finish(query),
    });
}

/// The columns (0-based) that the running statements updating `rel` may
/// assign, or None when any column may change (see the module
/// documentation).
///
/// # Safety
/// In a backend, with `rel` open.
pub(super) unsafe fn columns(rel: pg_sys::Relation) -> Option<Columns> {
    let trigdesc = (*rel).trigdesc;
    if (!trigdesc.is_null() && (*trigdesc).trig_update_before_row) || crate::pg_leaf::IsLogicalWorker() {
        return None;
    }
    let mut set = Columns::default();
    let mut found = false;
    for &estate in (*(&raw const RUNNING)).iter() {
        for list in [(*estate).es_opened_result_relations, (*estate).es_tuple_routing_result_relations] {
            for cell in list_cells(list) {
                let rri = cell.ptr_value as *mut pg_sys::ResultRelInfo;
                if (*rri).ri_RelationDesc != rel {
                    continue;
                }
                found = true;
                // For a partition that tuple routing opened, the root's
                // columns mapped to the partition's attribute numbers (a
                // new set, or the range table's: not freed).
                set.add_bitmap(pg_sys::ExecGetUpdatedCols(rri, estate));
            }
        }
    }
    if found {
        add_generated(rel, &mut set);
    }
    found.then_some(set)
}

/// Adds the stored generated columns of `rel`: an UPDATE computes them
/// again. (Only those depending on assigned columns change, but which
/// those are PostgreSQL 15 works out in the executor, on first use, with
/// effects on the statement's state that asking here could bring about.)
unsafe fn add_generated(rel: pg_sys::Relation, set: &mut Columns) {
    let desc = (*rel).rd_att;
    let constr = (*desc).constr;
    if constr.is_null() || !(*constr).has_generated_stored {
        return;
    }
    let attrs = (*desc).attrs.as_slice((*desc).natts as usize);
    for (i, att) in attrs.iter().enumerate() {
        if att.attgenerated == pg_sys::ATTRIBUTE_GENERATED_STORED as std::ffi::c_char {
            set.add(i);
        }
    }
}
