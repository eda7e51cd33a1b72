//! The table access method: PostgreSQL's `TableAmRoutine` for anker.
//!
//! Every callback is set (PostgreSQL 15 only asserts their presence, so a
//! missing one would crash a release build). Callbacks for features anker
//! does not have raise `ERRCODE_FEATURE_NOT_SUPPORTED` naming the operation.
//!
//! Row ids map to TIDs as `block = row / ROWS_PER_BLOCK`,
//! `offset = row % ROWS_PER_BLOCK + 1` (DESIGN §3); `ROWS_PER_BLOCK` stays
//! below `MaxHeapTuplesPerPage`, which bitmap scans and GIN assume.

// Callback signatures are PostgreSQL's.
#![allow(clippy::too_many_arguments)]

use pgrx::pg_sys;
use pgrx::prelude::*;
#[allow(unused_imports)]
use crate::sql::assert_preloaded;

pub mod assigned;
pub mod ddl;
mod index;
pub mod modify;
pub mod projection;
pub mod scan;
pub mod slot;
mod vacuum;

/// The attribute numbers in an attribute bitmap (members offset by
/// `FirstLowInvalidHeapAttributeNumber`, as in the relcache's index
/// bitmaps and a range table entry's column sets): 0 for a whole-row
/// reference, negative for system columns. None for an empty set (NULL).
///
/// # Safety
/// `b` is NULL or a valid Bitmapset that outlives the iterator.
pub unsafe fn bitmap_attnos<'a>(b: *const pg_sys::Bitmapset) -> impl Iterator<Item = i32> + 'a {
    let words: &[u64] = if b.is_null() { &[] } else { (*b).words.as_slice((*b).nwords as usize) };
    words.iter().enumerate().flat_map(|(w, &word)| {
        let mut bits = word;
        std::iter::from_fn(move || {
            (bits != 0).then(|| {
                let member = w as i32 * 64 + bits.trailing_zeros() as i32;
                bits &= bits - 1;
                member + pg_sys::FirstLowInvalidHeapAttributeNumber
            })
        })
    })
}

/// Rows per TID block; at most MaxHeapTuplesPerPage (291 for 8 kB blocks).
pub const ROWS_PER_BLOCK: u64 = 256;

#[inline]
pub fn row_to_tid(row: u64, tid: &mut pg_sys::ItemPointerData) {
    let block = (row / ROWS_PER_BLOCK) as u32;
    let off = (row % ROWS_PER_BLOCK) as u16 + 1;
    tid.ip_blkid.bi_hi = (block >> 16) as u16;
    tid.ip_blkid.bi_lo = block as u16;
    tid.ip_posid = off;
}

/// `ItemPointerSetInvalid`: a TID that names no row (of rows built
/// elsewhere, and of tuples that come from no table).
pub const INVALID_TID: pg_sys::ItemPointerData =
    pg_sys::ItemPointerData { ip_blkid: pg_sys::BlockIdData { bi_hi: 0xFFFF, bi_lo: 0xFFFF }, ip_posid: 0 };

/// A TID for the *newest* version of `row`. With in-place updates one TID
/// names every version of a row; heap tells the version a scan saw from the
/// newest one by their TIDs, and the executor relies on it after locking a
/// row that changed under its snapshot: it retries at the TID `tuple_lock`
/// reports, expecting no further re-check there (MERGE loops forever
/// otherwise), and fetches the newest version through it. Such TIDs carry
/// the offset plus [`ROWS_PER_BLOCK`]; they never reach an index or a user.
#[inline]
pub fn row_to_newest_tid(row: u64, tid: &mut pg_sys::ItemPointerData) {
    row_to_tid(row, tid);
    tid.ip_posid += ROWS_PER_BLOCK as u16;
}

/// Does `tid` name the newest version of its row ([`row_to_newest_tid`])?
#[inline]
pub fn tid_is_newest(tid: *const pg_sys::ItemPointerData) -> bool {
    // SAFETY: callers pass a valid ItemPointer.
    let off = unsafe { (*tid).ip_posid } as u64;
    off > ROWS_PER_BLOCK && off <= 2 * ROWS_PER_BLOCK
}

/// The row id of a TID, or None for a TID that cannot name an anker row.
#[inline]
pub fn tid_to_row(tid: *const pg_sys::ItemPointerData) -> Option<u64> {
    // SAFETY: callers pass a valid ItemPointer.
    let t = unsafe { &*tid };
    let block = ((t.ip_blkid.bi_hi as u64) << 16) | t.ip_blkid.bi_lo as u64;
    let mut off = t.ip_posid as u64;
    if off > ROWS_PER_BLOCK && off <= 2 * ROWS_PER_BLOCK {
        off -= ROWS_PER_BLOCK;
    }
    if off == 0 || off > ROWS_PER_BLOCK {
        return None;
    }
    Some(block * ROWS_PER_BLOCK + off - 1)
}

/// `row`'s header, read inside the reclamation epoch: the page holding it
/// may be replaced by a copy-on-write and freed between finding and reading
/// it, and a header read from a reused page could make a live row look dead.
/// (Callers that walk the undo chain after hold their own epoch across both.)
pub fn header_now(table: &anker_engine::table::Table, row: u64) -> Option<anker_engine::table::RowHeader> {
    let _epoch = crate::shmem::enter_epoch();
    table.header(crate::shmem::arena(), row)
}

pub fn blocks_for_rows(nrows: u64) -> u64 {
    nrows.div_ceil(ROWS_PER_BLOCK)
}

/// Is `rel` an anker relation?
pub fn is_anker(rel: pg_sys::Relation) -> bool {
    // SAFETY: rel is a valid open relation.
    unsafe { std::ptr::eq((*rel).rd_tableam, &raw const ROUTINE) }
}

#[pg_guard]
unsafe extern "C-unwind" fn slot_callbacks(_rel: pg_sys::Relation) -> *const pg_sys::TupleTableSlotOps {
    slot::ops()
}

static mut ROUTINE: pg_sys::TableAmRoutine = pg_sys::TableAmRoutine {
    type_: pg_sys::NodeTag::T_TableAmRoutine,
    slot_callbacks: Some(slot_callbacks),
    scan_begin: Some(scan::scan_begin),
    scan_end: Some(scan::scan_end),
    scan_rescan: Some(scan::scan_rescan),
    scan_getnextslot: Some(scan::scan_getnextslot),
    scan_set_tidrange: Some(scan::scan_set_tidrange),
    scan_getnextslot_tidrange: Some(scan::scan_getnextslot_tidrange),
    parallelscan_estimate: Some(scan::parallelscan_estimate),
    parallelscan_initialize: Some(scan::parallelscan_initialize),
    parallelscan_reinitialize: Some(scan::parallelscan_reinitialize),
    index_fetch_begin: Some(index::index_fetch_begin),
    index_fetch_reset: Some(index::index_fetch_reset),
    index_fetch_end: Some(index::index_fetch_end),
    index_fetch_tuple: Some(index::index_fetch_tuple),
    tuple_fetch_row_version: Some(scan::tuple_fetch_row_version),
    tuple_tid_valid: Some(scan::tuple_tid_valid),
    tuple_get_latest_tid: Some(scan::tuple_get_latest_tid),
    tuple_satisfies_snapshot: Some(scan::tuple_satisfies_snapshot),
    index_delete_tuples: Some(index::index_delete_tuples),
    tuple_insert: Some(modify::tuple_insert),
    tuple_insert_speculative: Some(modify::tuple_insert_speculative),
    tuple_complete_speculative: Some(modify::tuple_complete_speculative),
    multi_insert: Some(modify::multi_insert),
    tuple_delete: Some(modify::tuple_delete),
    tuple_update: Some(modify::tuple_update),
    tuple_lock: Some(modify::tuple_lock),
    finish_bulk_insert: Some(modify::finish_bulk_insert),
    relation_set_new_filenode: Some(ddl::relation_set_new_filenode),
    relation_nontransactional_truncate: Some(ddl::relation_nontransactional_truncate),
    relation_copy_data: Some(vacuum::relation_copy_data),
    relation_copy_for_cluster: Some(vacuum::relation_copy_for_cluster),
    relation_vacuum: Some(vacuum::relation_vacuum),
    scan_analyze_next_block: Some(scan::scan_analyze_next_block),
    scan_analyze_next_tuple: Some(scan::scan_analyze_next_tuple),
    index_build_range_scan: Some(index::index_build_range_scan),
    index_validate_scan: Some(index::index_validate_scan),
    relation_size: Some(ddl::relation_size),
    relation_needs_toast_table: Some(ddl::relation_needs_toast_table),
    relation_toast_am: Some(ddl::relation_toast_am),
    relation_fetch_toast_slice: Some(ddl::relation_fetch_toast_slice),
    relation_estimate_size: Some(ddl::relation_estimate_size),
    scan_bitmap_next_block: Some(scan::scan_bitmap_next_block),
    scan_bitmap_next_tuple: Some(scan::scan_bitmap_next_tuple),
    scan_sample_next_block: Some(scan::scan_sample_next_block),
    scan_sample_next_tuple: Some(scan::scan_sample_next_tuple),
};

#[no_mangle]
#[doc(hidden)]
pub extern "C" fn pg_finfo_anker_tableam_handler() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// `anker.anker_tableam_handler(internal) RETURNS table_am_handler`.
#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn anker_tableam_handler(_fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    pg_sys::Datum::from(&raw const ROUTINE)
}

pgrx::extension_sql!(
    r#"
SELECT anker.assert_preloaded();
CREATE FUNCTION anker.anker_tableam_handler(internal) RETURNS table_am_handler
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'anker_tableam_handler';
CREATE ACCESS METHOD anker TYPE TABLE HANDLER anker.anker_tableam_handler;
COMMENT ON ACCESS METHOD anker IS 'in-memory columnar tables with virtual snapshots';
"#,
    name = "access_method",
    requires = [assert_preloaded]
);
