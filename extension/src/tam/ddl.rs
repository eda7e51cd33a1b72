//! Storage-level DDL and maintenance: new relfilenodes, truncation, copies,
//! VACUUM, sizes and estimates.

use super::blocks_for_rows;
use crate::error::not_supported;
use crate::storage::{self, table_of};
use pgrx::pg_sys;
use pgrx::prelude::*;

#[pg_guard]
pub unsafe extern "C-unwind" fn relation_set_new_filenode(
    rel: pg_sys::Relation,
    newrnode: *const pg_sys::RelFileNode,
    persistence: std::ffi::c_char,
    freeze_xid: *mut pg_sys::TransactionId,
    minmulti: *mut pg_sys::MultiXactId,
) {
    *freeze_xid = pg_sys::RecentXmin;
    *minmulti = pg_sys::GetOldestMultiXactId();
    // The relation file holds the table's change log (`durable`); creating
    // and dropping it is PostgreSQL's business, as for heap files.
    let srel = pg_sys::RelationCreateStorage(*newrnode, persistence, true);
    if persistence == pg_sys::RELPERSISTENCE_UNLOGGED as std::ffi::c_char {
        // After a crash PostgreSQL resets the main fork from this (empty)
        // init fork: an unlogged table comes back empty, as heap's do.
        pg_sys::smgrcreate(srel, pg_sys::ForkNumber::INIT_FORKNUM, false);
        log_smgrcreate(&*newrnode, pg_sys::ForkNumber::INIT_FORKNUM);
        pg_sys::smgrimmedsync(srel, pg_sys::ForkNumber::INIT_FORKNUM);
    }
    let table = storage::create_new_storage(rel, &*newrnode);
    crate::durable::start_log(rel, *newrnode, persistence, table);
}

extern "C-unwind" {
    // catalog/storage_xlog.h; not in pgrx's bindings.
    #[link_name = "log_smgrcreate"]
    fn log_smgrcreate_c(rnode: *const pg_sys::RelFileNode, fork: pg_sys::ForkNumber::Type);
}

/// WAL-log the creation of a fork (heap does so for unlogged init forks).
pub unsafe fn log_smgrcreate(rnode: &pg_sys::RelFileNode, fork: pg_sys::ForkNumber::Type) {
    log_smgrcreate_c(rnode, fork);
}

/// TRUNCATE of a table created in the same transaction: empty the log's
/// file (WAL-logged, as heap's) and start the log afresh.
#[pg_guard]
pub unsafe extern "C-unwind" fn relation_nontransactional_truncate(rel: pg_sys::Relation) {
    let table = storage::truncate_in_place(rel);
    pg_sys::RelationTruncate(rel, 0);
    crate::durable::start_log(rel, (*rel).rd_node, (*(*rel).rd_rel).relpersistence, table);
}

#[pg_guard]
pub unsafe extern "C-unwind" fn relation_size(rel: pg_sys::Relation, fork: pg_sys::ForkNumber::Type) -> u64 {
    if fork != pg_sys::ForkNumber::MAIN_FORKNUM && fork != pg_sys::ForkNumber::InvalidForkNumber {
        return 0;
    }
    blocks_for_rows(table_of(rel).nrows()) * pg_sys::BLCKSZ as u64
}

#[pg_guard]
pub unsafe extern "C-unwind" fn relation_needs_toast_table(_rel: pg_sys::Relation) -> bool {
    false
}

#[pg_guard]
pub unsafe extern "C-unwind" fn relation_toast_am(_rel: pg_sys::Relation) -> pg_sys::Oid {
    pg_sys::InvalidOid
}

#[pg_guard]
pub unsafe extern "C-unwind" fn relation_fetch_toast_slice(
    _toastrel: pg_sys::Relation,
    _valueid: pg_sys::Oid,
    _attrsize: i32,
    _sliceoffset: i32,
    _slicelength: i32,
    _result: *mut pg_sys::varlena,
) {
    not_supported("TOAST tables");
}

/// What the planner is told: the pages a heap table with the same rows
/// would occupy, and heap's rules for tables without statistics (a
/// never-analyzed table counts at least 10 pages, full ones). PostgreSQL's
/// cost model is calibrated for heap, and plans must not depend on the
/// access method in odd ways: estimating a fresh table as empty makes
/// PostgreSQL pick plans (and, in corner cases, raise planner errors) that
/// heap never meets. Rows come from the table itself, scaled by the density
/// ANALYZE or VACUUM last measured, as heap does.
#[pg_guard]
pub unsafe extern "C-unwind" fn relation_estimate_size(
    rel: pg_sys::Relation,
    attr_widths: *mut i32,
    pages: *mut pg_sys::BlockNumber,
    tuples: *mut f64,
    allvisfrac: *mut f64,
) {
    let nrows = table_of(rel).nrows();
    let blocks = blocks_for_rows(nrows);
    let relpages = (*(*rel).rd_rel).relpages;
    let reltuples = (*(*rel).rd_rel).reltuples as f64;
    let analyzed = reltuples >= 0.0;
    let rows = if analyzed && relpages > 0 { (reltuples / relpages as f64 * blocks as f64).round() } else { nrows as f64 };
    // heap's HEAP_OVERHEAD_BYTES_PER_TUPLE and HEAP_USABLE_BYTES_PER_PAGE
    let overhead = 24 + std::mem::size_of::<pg_sys::ItemIdData>() as i32;
    let usable = pg_sys::BLCKSZ as i32 - 24;
    let width = pg_sys::get_rel_data_width(rel, attr_widths) + overhead;
    let per_page = (usable / width.max(1)).max(1) as f64;
    let mut heap_pages = (rows / per_page).ceil();
    if heap_pages < 10.0 && !analyzed && !(*(*rel).rd_rel).relhassubclass {
        heap_pages = 10.0;
    }
    *pages = heap_pages as pg_sys::BlockNumber;
    *tuples = if heap_pages == 0.0 {
        0.0
    } else if analyzed {
        rows
    } else {
        (per_page * heap_pages).round()
    };
    *allvisfrac = 0.0;
}
