//! Index support: fetching rows by TID for index scans, building indexes,
//! and answering the index AMs' deletion questions.

use super::scan::Reader;
use super::{row_to_tid, tid_to_row, ROWS_PER_BLOCK};
use crate::shmem;
use crate::storage::table_of;
use crate::visibility::{surely_dead, xid_state, Visibility, XidState};
use anker_engine::table::{flag, Table};
use pgrx::pg_sys;
use pgrx::prelude::*;

#[repr(C)]
struct IndexFetch {
    base: pg_sys::IndexFetchTableData,
    table: *const Table,
    /// Reused for every fetch: values stay valid until the next one, which
    /// is what an index scan's slot promises.
    reader: Reader,
}

#[pg_guard]
pub unsafe extern "C-unwind" fn index_fetch_begin(rel: pg_sys::Relation) -> *mut pg_sys::IndexFetchTableData {
    let table = table_of(rel);
    let f = crate::pg_leaf::palloc0(std::mem::size_of::<IndexFetch>()) as *mut IndexFetch;
    std::ptr::write(f, IndexFetch { base: pg_sys::IndexFetchTableData { rel }, table, reader: Reader::new(rel, table) });
    f as *mut pg_sys::IndexFetchTableData
}

/// Fill only the attributes flagged in `wanted` in the rows `data` fetches
/// (see `projection`).
///
/// # Safety
/// `data` was made by [`index_fetch_begin`].
pub(super) unsafe fn restrict_fetch(data: *mut pg_sys::IndexFetchTableData, wanted: &super::modify::Columns) {
    (*(data as *mut IndexFetch)).reader.restrict(|i| wanted.contains(i));
}

/// (nothing to do, so no guard either)
pub unsafe extern "C-unwind" fn index_fetch_reset(_data: *mut pg_sys::IndexFetchTableData) {}

#[pg_guard]
pub unsafe extern "C-unwind" fn index_fetch_end(data: *mut pg_sys::IndexFetchTableData) {
    crate::pg_leaf::pfree(data as *mut std::ffi::c_void);
}

#[pg_guard]
pub unsafe extern "C-unwind" fn index_fetch_tuple(
    scan: *mut pg_sys::IndexFetchTableData,
    tid: pg_sys::ItemPointer,
    snapshot: pg_sys::Snapshot,
    slot: *mut pg_sys::TupleTableSlot,
    call_again: *mut bool,
    all_dead: *mut bool,
) -> bool {
    let f = &mut *(scan as *mut IndexFetch);
    let table = &*f.table;
    // No HOT chains: one TID, one row.
    *call_again = false;
    if !all_dead.is_null() {
        *all_dead = false;
    }
    super::modify::predicate_lock_relation(f.base.rel, snapshot);
    let Some(row) = tid_to_row(tid) else { return false };
    if row >= table.nrows() {
        return false;
    }
    f.reader.prefetch(table, row);
    if f.reader.read(f.base.rel, table, row, &Visibility::new(snapshot), slot) {
        return true;
    }
    // Tell the index AM when nobody can see the row any more: it marks the
    // entry dead and later scans skip it (without this, Delivery's
    // `min(no_o_id)` walked every delivered order until the next VACUUM).
    if !all_dead.is_null() {
        if let Some(h) = &f.reader.last {
            *all_dead = surely_dead(h, crate::pg_leaf::GlobalVisTestFor(f.base.rel));
        }
    }
    false
}

/// Which index entries may the index AM delete? Those it already knows
/// are dead (marked after a fetch reported `all_dead`), and those whose rows
/// no snapshot can see. Returns the newest deleter among them (the conflict
/// horizon the index AM logs).
#[pg_guard]
pub unsafe extern "C-unwind" fn index_delete_tuples(
    rel: pg_sys::Relation,
    delstate: *mut pg_sys::TM_IndexDeleteOp,
) -> pg_sys::TransactionId {
    let table = table_of(rel);
    let vistest = crate::pg_leaf::GlobalVisTestFor(rel);
    let n = (*delstate).ndeltids as usize;
    let deltids = std::slice::from_raw_parts((*delstate).deltids, n);
    let status = std::slice::from_raw_parts_mut((*delstate).status, n);
    let mut horizon = pg_sys::InvalidTransactionId;
    for d in deltids {
        let s = &mut status[d.id as usize];
        let row = tid_to_row(&d.tid).filter(|&r| r < table.nrows());
        // (a live row that looked dead would lose its index entry)
        let h = row.and_then(|r| super::header_now(table, r));
        if !s.knowndeletable {
            s.knowndeletable = matches!(&h, Some(h) if surely_dead(h, vistest));
        }
        if s.knowndeletable {
            if let Some(h) = h.filter(|h| h.xmax != 0 && h.flags & flag::XMAX_LOCK_ONLY == 0) {
                if horizon == pg_sys::InvalidTransactionId || crate::pg_leaf::TransactionIdFollows(h.xmax.into(), horizon) {
                    horizon = h.xmax.into();
                }
            }
        }
    }
    horizon
}

/// Should an index build include this row? Everything some snapshot may
/// still see: live rows, rows inserted by our own transaction, and rows
/// whose deleter is not yet older than every snapshot (as heap's
/// RECENTLY_DEAD). Returns (include, alive).
fn build_includes(h: &anker_engine::table::RowHeader, oldest_xmin: u32) -> (bool, bool) {
    let mut hints = 0;
    match xid_state(h.xmin, h.flags, flag::XMIN_COMMITTED, flag::XMIN_ABORTED, &mut hints) {
        XidState::Aborted => return (false, false),
        XidState::InProgress | XidState::Current | XidState::Committed => {}
    }
    if h.xmax == 0 || h.flags & flag::XMAX_LOCK_ONLY != 0 {
        return (true, true);
    }
    match xid_state(h.xmax, h.flags, flag::XMAX_COMMITTED, flag::XMAX_ABORTED, &mut hints) {
        XidState::Committed => {
            // SAFETY: plain xid comparison.
            let removable = unsafe { crate::pg_leaf::TransactionIdPrecedes(h.xmax.into(), oldest_xmin.into()) };
            (!removable, false)
        }
        XidState::Aborted => (true, true),
        _ => (true, false),
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn index_build_range_scan(
    table_rel: pg_sys::Relation,
    index_rel: pg_sys::Relation,
    index_info: *mut pg_sys::IndexInfo,
    _allow_sync: bool,
    anyvisible: bool,
    _progress: bool,
    start_blockno: pg_sys::BlockNumber,
    numblocks: pg_sys::BlockNumber,
    callback: pg_sys::IndexBuildCallback,
    callback_state: *mut std::ffi::c_void,
    scan: pg_sys::TableScanDesc,
) -> f64 {
    let arena = shmem::arena();
    let table = table_of(table_rel);
    let callback = callback.expect("index build callback");
    let estate = pg_sys::CreateExecutorState();
    let econtext = pg_sys::MakePerTupleExprContext(estate);
    let slot = pg_sys::table_slot_create(table_rel, std::ptr::null_mut());
    (*econtext).ecxt_scantuple = slot;
    let predicate = pg_sys::ExecPrepareQual((*index_info).ii_Predicate, estate);
    let oldest_xmin: u32 = pg_sys::GetOldestNonRemovableTransactionId(table_rel).into();
    // A caller-provided scan fixes the snapshot; a concurrent build indexes
    // what a fresh MVCC snapshot sees (validation adds the rest later);
    // otherwise every row some snapshot may still see.
    let mut registered: pg_sys::Snapshot = std::ptr::null_mut();
    let given_mvcc = !scan.is_null()
        && !(*scan).rs_snapshot.is_null()
        && (*(*scan).rs_snapshot).snapshot_type == pg_sys::SnapshotType::SNAPSHOT_MVCC;
    let vis = if given_mvcc {
        Some(Visibility::new((*scan).rs_snapshot))
    } else if scan.is_null() && (*index_info).ii_Concurrent {
        registered = pg_sys::RegisterSnapshot(pg_sys::GetTransactionSnapshot());
        Some(Visibility::new(registered))
    } else {
        None
    };
    let nrows = table.nrows();
    let first = (start_blockno as u64 * ROWS_PER_BLOCK).min(nrows);
    let last = if numblocks == pg_sys::InvalidBlockNumber {
        nrows
    } else {
        ((start_blockno as u64 + numblocks as u64) * ROWS_PER_BLOCK).min(nrows)
    };
    let mut reader = Reader::new(table_rel, table);
    let mut values = [pg_sys::Datum::from(0usize); pg_sys::INDEX_MAX_KEYS as usize];
    let mut isnull = [false; pg_sys::INDEX_MAX_KEYS as usize];
    let mut reltuples = 0.0;
    // A scan handed in by a parallel build hands out our share of the rows;
    // like heap, we end it.
    let mut range = first..last;
    let mut next = || if scan.is_null() { range.next() } else { super::scan::next_row(scan) };
    let mut n = 0u64;
    while let Some(row) = next() {
        n += 1;
        if n.is_multiple_of(8192) {
            pg_sys::check_for_interrupts!();
        }
        // (entered before the header is read: the undo records it leads
        // to stay allocated)
        let _epoch = vis.is_some().then(crate::shmem::enter_epoch);
        // (an aborted in-place update would be indexed by values no
        // snapshot sees, or the row left out)
        let Some(h) = table.header(arena, row).and_then(|h| super::modify::put_back_aborted(table_rel, table, row, h)) else { continue };
        let (include, alive) = match &vis {
            Some(v) => {
                let ok = v.version(table, &h, &mut 0).any();
                (ok, ok)
            }
            None => {
                let (inc, alive) = build_includes(&h, oldest_xmin);
                (inc, alive || anyvisible)
            }
        };
        if !include {
            continue;
        }
        reltuples += 1.0;
        pg_sys::MemoryContextReset((*econtext).ecxt_per_tuple_memory);
        reader.fill(table_rel, table, row, slot, Some(&h));
        // (no destructors pending here: see `pg_raw`)
        if !crate::pg_raw::exec_qual(predicate, econtext) {
            continue;
        }
        crate::pg_raw::form_index_datum(index_info, slot, estate, values.as_mut_ptr(), isnull.as_mut_ptr());
        let mut tid = pg_sys::ItemPointerData::default();
        row_to_tid(row, &mut tid);
        callback(index_rel, &mut tid, values.as_mut_ptr(), isnull.as_mut_ptr(), alive, callback_state);
    }
    pg_sys::ExecDropSingleTupleTableSlot(slot);
    pg_sys::FreeExecutorState(estate);
    if !scan.is_null() {
        super::scan::scan_end(scan);
    }
    if !registered.is_null() {
        pg_sys::UnregisterSnapshot(registered);
    }
    (*index_info).ii_ExpressionsState = std::ptr::null_mut();
    (*index_info).ii_PredicateState = std::ptr::null_mut();
    reltuples
}

/// Second phase of CREATE INDEX CONCURRENTLY: insert index entries for the
/// rows visible to `snapshot` that the index does not have yet. The index's
/// TIDs arrive sorted in `state.tuplesort` (encoded as int8).
#[pg_guard]
pub unsafe extern "C-unwind" fn index_validate_scan(
    table_rel: pg_sys::Relation,
    index_rel: pg_sys::Relation,
    index_info: *mut pg_sys::IndexInfo,
    snapshot: pg_sys::Snapshot,
    state: *mut pg_sys::ValidateIndexState,
) {
    let table = table_of(table_rel);
    let mut indexed: Vec<u64> = vec![];
    loop {
        let mut d = pg_sys::Datum::from(0usize);
        let mut isnull = false;
        if !pg_sys::tuplesort_getdatum((*state).tuplesort, true, &mut d, &mut isnull, std::ptr::null_mut()) {
            break;
        }
        // itemptr_encode: block << 16 | offset
        let v = d.value() as u64;
        let mut tid = pg_sys::ItemPointerData::default();
        let block = (v >> 16) as u32;
        tid.ip_blkid.bi_hi = (block >> 16) as u16;
        tid.ip_blkid.bi_lo = block as u16;
        tid.ip_posid = (v & 0xffff) as u16;
        if let Some(r) = tid_to_row(&tid) {
            indexed.push(r);
        }
        (*state).itups += 1.0;
    }
    indexed.sort_unstable();
    // In statement memory, not a Vec: user expressions below may longjmp.
    let indexed = {
        let copy = pg_sys::palloc(indexed.len().max(1) * std::mem::size_of::<u64>()) as *mut u64;
        std::ptr::copy_nonoverlapping(indexed.as_ptr(), copy, indexed.len());
        std::slice::from_raw_parts(copy, indexed.len())
    };
    let estate = pg_sys::CreateExecutorState();
    let econtext = pg_sys::MakePerTupleExprContext(estate);
    let slot = pg_sys::table_slot_create(table_rel, std::ptr::null_mut());
    (*econtext).ecxt_scantuple = slot;
    let predicate = pg_sys::ExecPrepareQual((*index_info).ii_Predicate, estate);
    let vis = Visibility::new(snapshot);
    let mut reader = Reader::new(table_rel, table);
    let mut values = [pg_sys::Datum::from(0usize); pg_sys::INDEX_MAX_KEYS as usize];
    let mut isnull = [false; pg_sys::INDEX_MAX_KEYS as usize];
    let unique = if (*index_info).ii_Unique {
        pg_sys::IndexUniqueCheck::UNIQUE_CHECK_YES
    } else {
        pg_sys::IndexUniqueCheck::UNIQUE_CHECK_NO
    };
    for row in 0..table.nrows() {
        if row.is_multiple_of(8192) {
            pg_sys::check_for_interrupts!();
        }
        pg_sys::MemoryContextReset((*econtext).ecxt_per_tuple_memory);
        if !reader.read(table_rel, table, row, &vis, slot) {
            continue;
        }
        (*state).htups += 1.0;
        if indexed.binary_search(&row).is_ok() {
            continue;
        }
        // (no destructors pending here: see `pg_raw`)
        if !crate::pg_raw::exec_qual(predicate, econtext) {
            continue;
        }
        crate::pg_raw::form_index_datum(index_info, slot, estate, values.as_mut_ptr(), isnull.as_mut_ptr());
        let mut tid = pg_sys::ItemPointerData::default();
        row_to_tid(row, &mut tid);
        pg_sys::index_insert(index_rel, values.as_mut_ptr(), isnull.as_mut_ptr(), &mut tid, table_rel, unique, false, index_info);
        (*state).tups_inserted += 1.0;
    }
    pg_sys::ExecDropSingleTupleTableSlot(slot);
    pg_sys::FreeExecutorState(estate);
    (*index_info).ii_ExpressionsState = std::ptr::null_mut();
    (*index_info).ii_PredicateState = std::ptr::null_mut();
}
