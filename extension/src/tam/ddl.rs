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
    // An empty file reserves the relfilenode (PostgreSQL picks new ones by
    // checking for existing files) and lets PostgreSQL's own pending-delete
    // machinery manage it. The data lives in the arena.
    pg_sys::RelationCreateStorage(*newrnode, persistence, true);
    storage::create_new_storage(rel, &*newrnode);
}

#[pg_guard]
pub unsafe extern "C-unwind" fn relation_nontransactional_truncate(rel: pg_sys::Relation) {
    storage::truncate_in_place(rel);
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

/// Pages are TID blocks. Tuples scale the density PostgreSQL last measured
/// (ANALYZE/VACUUM) to the current size, as heap does.
#[pg_guard]
pub unsafe extern "C-unwind" fn relation_estimate_size(
    rel: pg_sys::Relation,
    _attr_widths: *mut i32,
    pages: *mut pg_sys::BlockNumber,
    tuples: *mut f64,
    allvisfrac: *mut f64,
) {
    let nrows = table_of(rel).nrows();
    let blocks = blocks_for_rows(nrows);
    *pages = blocks as pg_sys::BlockNumber;
    *allvisfrac = 0.0;
    let relpages = (*(*rel).rd_rel).relpages;
    let reltuples = (*(*rel).rd_rel).reltuples;
    *tuples = if relpages > 0 && reltuples >= 0.0 {
        (reltuples as f64 / relpages as f64 * blocks as f64).round()
    } else {
        nrows as f64
    };
}
