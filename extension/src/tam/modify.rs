//! Writing rows: INSERT, COPY and multi-row inserts. UPDATE, DELETE, row
//! locks and speculative insertion come with the complete-TAM work and are
//! refused cleanly until then.

use super::row_to_tid;
use crate::datum::Encoder;
use crate::error::{not_supported, OrRaise};
use crate::shmem;
use crate::storage::table_of;
use pgrx::pg_sys;
use pgrx::prelude::*;

/// Insert `slots` as new rows created by the current command.
unsafe fn insert_slots(rel: pg_sys::Relation, slots: &[*mut pg_sys::TupleTableSlot], cid: pg_sys::CommandId) {
    let arena = shmem::arena();
    let table = table_of(rel);
    let desc = (*rel).rd_att;
    let natts = (*desc).natts as usize;
    let xid: u32 = pg_sys::GetCurrentTransactionId().into();
    let mut encoders: Vec<Encoder> = Vec::with_capacity(slots.len());
    for &slot in slots {
        pg_sys::slot_getallattrs(slot);
        let values = std::slice::from_raw_parts((*slot).tts_values, natts);
        let nulls = std::slice::from_raw_parts((*slot).tts_isnull, natts);
        let mut enc = Encoder::default();
        enc.encode(desc, values, nulls);
        encoders.push(enc);
    }
    let rows: Vec<Vec<_>> = encoders.iter().map(|e| e.values()).collect();
    let mut blobs = Vec::with_capacity(rows.len() * natts);
    for (k, r) in rows.iter().enumerate() {
        if let Err(e) = table.prepare_blobs(arena, r, &mut blobs) {
            table.discard_blobs(arena, &blobs[..k * natts]);
            crate::error::out_of_memory(e);
        }
    }
    let row_refs: Vec<&[_]> = rows.iter().map(|r| r.as_slice()).collect();
    let first = table.insert_rows(arena, &row_refs, &blobs, xid, cid, 0, 0).or_raise();
    for (k, &slot) in slots.iter().enumerate() {
        (*slot).tts_tableOid = (*rel).rd_id;
        row_to_tid(first + k as u64, &mut (*slot).tts_tid);
    }
    pg_sys::pgstat_count_heap_insert(rel, slots.len() as i64);
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_insert(
    rel: pg_sys::Relation,
    slot: *mut pg_sys::TupleTableSlot,
    cid: pg_sys::CommandId,
    _options: std::ffi::c_int,
    _bistate: *mut pg_sys::BulkInsertStateData,
) {
    insert_slots(rel, &[slot], cid);
}

#[pg_guard]
pub unsafe extern "C-unwind" fn multi_insert(
    rel: pg_sys::Relation,
    slots: *mut *mut pg_sys::TupleTableSlot,
    nslots: std::ffi::c_int,
    cid: pg_sys::CommandId,
    _options: std::ffi::c_int,
    _bistate: *mut pg_sys::BulkInsertStateData,
) {
    insert_slots(rel, std::slice::from_raw_parts(slots, nslots as usize), cid);
}

#[pg_guard]
pub unsafe extern "C-unwind" fn finish_bulk_insert(_rel: pg_sys::Relation, _options: std::ffi::c_int) {}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_insert_speculative(
    _rel: pg_sys::Relation,
    _slot: *mut pg_sys::TupleTableSlot,
    _cid: pg_sys::CommandId,
    _options: std::ffi::c_int,
    _bistate: *mut pg_sys::BulkInsertStateData,
    _spec_token: u32,
) {
    not_supported("INSERT ... ON CONFLICT");
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_complete_speculative(
    _rel: pg_sys::Relation,
    _slot: *mut pg_sys::TupleTableSlot,
    _spec_token: u32,
    _succeeded: bool,
) {
    not_supported("INSERT ... ON CONFLICT");
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_delete(
    _rel: pg_sys::Relation,
    _tid: pg_sys::ItemPointer,
    _cid: pg_sys::CommandId,
    _snapshot: pg_sys::Snapshot,
    _crosscheck: pg_sys::Snapshot,
    _wait: bool,
    _tmfd: *mut pg_sys::TM_FailureData,
    _changing_part: bool,
) -> pg_sys::TM_Result::Type {
    not_supported("DELETE");
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_update(
    _rel: pg_sys::Relation,
    _otid: pg_sys::ItemPointer,
    _slot: *mut pg_sys::TupleTableSlot,
    _cid: pg_sys::CommandId,
    _snapshot: pg_sys::Snapshot,
    _crosscheck: pg_sys::Snapshot,
    _wait: bool,
    _tmfd: *mut pg_sys::TM_FailureData,
    _lockmode: *mut pg_sys::LockTupleMode::Type,
    _update_indexes: *mut bool,
) -> pg_sys::TM_Result::Type {
    not_supported("UPDATE");
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_lock(
    _rel: pg_sys::Relation,
    _tid: pg_sys::ItemPointer,
    _snapshot: pg_sys::Snapshot,
    _slot: *mut pg_sys::TupleTableSlot,
    _cid: pg_sys::CommandId,
    _mode: pg_sys::LockTupleMode::Type,
    _wait_policy: pg_sys::LockWaitPolicy::Type,
    _flags: u8,
    _tmfd: *mut pg_sys::TM_FailureData,
) -> pg_sys::TM_Result::Type {
    not_supported("row locking (SELECT ... FOR UPDATE/SHARE)");
}
