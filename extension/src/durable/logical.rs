//! Logical decoding of anker tables (`docs/durability.md`, "Logical
//! decoding").
//!
//! The change log's entries name rows by row id and carry only the columns
//! a change touched, in the engine's encoding: a decoder, which has neither
//! the table in memory nor its layout at that point of history, cannot turn
//! them into rows. So at `wal_level = logical` every row change of a
//! permanent table also writes a ROW record that carries the row in heap
//! tuple format, as heap's own records do: the new row of an INSERT or
//! UPDATE, and the old row's replica identity where heap logs it (DELETE;
//! UPDATE when an identity column changes; every UPDATE and DELETE under
//! REPLICA IDENTITY FULL). Redo ignores ROW records; [`decode`] (our
//! `rm_decode`) queues them in the reorder buffer, which hands them to
//! output plugins (pgoutput, test_decoding) at commit, like heap's changes.
//! Below `wal_level = logical` nothing is written.

use super::RMGR_ID;
use crate::visibility::Visibility;
use anker_engine::table::Table;
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

/// Record kind (`xl_info`) of a row change for logical decoding.
pub const XLOG_ANKER_ROW: u8 = 0x40;

const INSERT: u8 = 1;
const UPDATE: u8 = 2;
const DELETE: u8 = 3;

/// Main data of a ROW record; the new row's tuple (`new_len` bytes, a
/// `HeapTupleHeader` and its data) and the old row's follow.
#[repr(C)]
#[derive(Clone, Copy)]
struct RowRecord {
    rnode: pg_sys::RelFileNode,
    action: u8,
    _pad: [u8; 3],
    new_len: u32,
    old_len: u32,
}

/// `XLogRecordBuffer` (replication/decode.h), opaque in pgrx's bindings.
#[repr(C)]
struct RecordBuffer {
    origptr: pg_sys::XLogRecPtr,
    endptr: pg_sys::XLogRecPtr,
    record: *mut pg_sys::XLogReaderState,
}

// replication/snapbuild.h is not in pgrx's bindings; calls go through
// `pg_guard_ffi_boundary` like pgrx's own.
extern "C-unwind" {
    fn SnapBuildCurrentState(builder: *mut pg_sys::SnapBuild) -> std::ffi::c_int;
    fn SnapBuildProcessChange(builder: *mut pg_sys::SnapBuild, xid: pg_sys::TransactionId, lsn: pg_sys::XLogRecPtr) -> bool;
}
use pg_sys::ffi::pg_guard_ffi_boundary as guarded;

/// `SNAPBUILD_FULL_SNAPSHOT`: from here on, the decoder can decode changes.
const SNAPBUILD_FULL_SNAPSHOT: std::ffi::c_int = 1;

/// Do changes of `rel` need ROW records? heap's `RelationIsLogicallyLogged`.
pub unsafe fn wanted(rel: pg_sys::Relation) -> bool {
    pg_sys::wal_level >= pg_sys::WalLevel::WAL_LEVEL_LOGICAL as i32
        && (*(*rel).rd_rel).relpersistence == pg_sys::RELPERSISTENCE_PERMANENT as std::ffi::c_char
        && !pg_sys::IsCatalogRelation(rel)
}

/// Log the rows `slots` (all attributes present) as inserted into `rel`.
pub unsafe fn log_insert(rel: pg_sys::Relation, slots: &[*mut pg_sys::TupleTableSlot]) {
    for &slot in slots {
        let new = slot_tuple(rel, slot);
        write(rel, INSERT, Some(new), None);
    }
}

/// Log an update of a row of `rel` to the values of `slot`; `old` from
/// [`old_identity`].
pub unsafe fn log_update(rel: pg_sys::Relation, slot: *mut pg_sys::TupleTableSlot, old: Option<pg_sys::HeapTuple>) {
    let new = slot_tuple(rel, slot);
    write(rel, UPDATE, Some(new), old);
}

/// Log a delete of a row of `rel`; `old` from [`old_identity`].
pub unsafe fn log_delete(rel: pg_sys::Relation, old: Option<pg_sys::HeapTuple>) {
    write(rel, DELETE, None, old);
}

/// The old row's replica identity as heap logs it, read from `row` (locked
/// by us, not yet changed): all columns under REPLICA IDENTITY FULL, else
/// the identity index's columns (other columns NULL), or nothing when the
/// table has no identity. For an UPDATE, `changed(attribute index)` says
/// which columns it changes: the key is logged only when one of its columns
/// does (the new row names the row otherwise).
pub unsafe fn old_identity(
    rel: pg_sys::Relation,
    table: &Table,
    row: u64,
    changed: Option<&dyn Fn(usize) -> bool>,
) -> Option<pg_sys::HeapTuple> {
    let ident = (*(*rel).rd_rel).relreplident as u8;
    if ident == pg_sys::REPLICA_IDENTITY_NOTHING {
        return None;
    }
    let full = ident == pg_sys::REPLICA_IDENTITY_FULL;
    let key = if full {
        std::ptr::null_mut()
    } else {
        let key = pg_sys::RelationGetIndexAttrBitmap(rel, pg_sys::IndexAttrBitmapKind::INDEX_ATTR_BITMAP_IDENTITY_KEY);
        if key.is_null() {
            return None; // no identity index (an empty set is NULL)
        }
        key
    };
    let in_key = |i: usize| full || pg_sys::bms_is_member(i as i32 + 1 - pg_sys::FirstLowInvalidHeapAttributeNumber, key);
    let desc = (*rel).rd_att;
    let natts = (*desc).natts as usize;
    if let Some(changed) = changed {
        if !full && !(0..natts).any(|i| in_key(i) && changed(i)) {
            pg_sys::bms_free(key);
            return None;
        }
    }
    let slot = pg_sys::MakeSingleTupleTableSlot(desc, pg_sys::table_slot_callbacks(rel));
    // The newest version: the one the change replaces (a READ COMMITTED
    // update that waited for a concurrent one changes the version that one
    // made, not the one its snapshot saw).
    let mut newest = Visibility::new(&raw mut pg_sys::SnapshotAnyData);
    newest.any_newest = true;
    let found = crate::tam::scan::fetch_into(rel, table, row, &newest, slot);
    assert!(found, "a locked row can be read");
    if ((*slot).tts_nvalid as usize) < natts {
        pg_sys::slot_getsomeattrs_int(slot, natts as i32);
    }
    let tuple = form(desc, (*slot).tts_values, (*slot).tts_isnull, in_key);
    pg_sys::ExecDropSingleTupleTableSlot(slot);
    if !key.is_null() {
        pg_sys::bms_free(key);
    }
    Some(tuple)
}

unsafe fn slot_tuple(rel: pg_sys::Relation, slot: *mut pg_sys::TupleTableSlot) -> pg_sys::HeapTuple {
    form((*rel).rd_att, (*slot).tts_values, (*slot).tts_isnull, |_| true)
}

/// A heap tuple of the attributes `keep` selects (the others NULL). Values
/// stored elsewhere (TOAST pointers of the row's source, expanded objects)
/// are fetched: the decoder reads the record only, and anker tables have no
/// TOAST table it could look into.
unsafe fn form(
    desc: pg_sys::TupleDesc,
    values: *const pg_sys::Datum,
    nulls: *const bool,
    keep: impl Fn(usize) -> bool,
) -> pg_sys::HeapTuple {
    let atts = crate::datum::attrs(desc);
    let mut v = Vec::with_capacity(atts.len());
    let mut n = Vec::with_capacity(atts.len());
    for (i, att) in atts.iter().enumerate() {
        let null = *nulls.add(i) || att.attisdropped || !keep(i);
        let mut d = if null { pg_sys::Datum::from(0) } else { *values.add(i) };
        if !null && att.attlen == -1 && crate::datum::is_external(d.cast_mut_ptr::<u8>()) {
            d = pg_sys::Datum::from(pg_sys::detoast_external_attr(d.cast_mut_ptr()));
        }
        v.push(d);
        n.push(null);
    }
    pg_sys::heap_form_tuple(desc, v.as_mut_ptr(), n.as_mut_ptr())
}

/// The largest ROW record: WAL readers refuse records over 1 GB, and a
/// record nobody can read would end recovery there. (Heap's rows never come
/// close: it stores large values in TOAST tables.)
const MAX_RECORD: u64 = 1000 << 20;

unsafe fn write(rel: pg_sys::Relation, action: u8, new: Option<pg_sys::HeapTuple>, old: Option<pg_sys::HeapTuple>) {
    let len = |t: Option<pg_sys::HeapTuple>| t.map_or(0, |t| (*t).t_len);
    let head = RowRecord { rnode: (*rel).rd_node, action, _pad: [0; 3], new_len: len(new), old_len: len(old) };
    if head.new_len as u64 + head.old_len as u64 > MAX_RECORD {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("anker: a change of a row of {} bytes is too large to log for logical decoding", head.new_len as u64 + head.old_len as u64),
            "At wal_level = logical an anker row and its old replica identity must fit in 1000 MB together."
        );
    }
    pg_sys::XLogBeginInsert();
    // (so that subscribers can skip changes their own origin applied)
    pg_sys::XLogSetRecordFlags(pg_sys::XLOG_INCLUDE_ORIGIN as u8);
    pg_sys::XLogRegisterData(&head as *const RowRecord as *mut std::ffi::c_char, std::mem::size_of::<RowRecord>() as i32);
    for t in [new, old].into_iter().flatten() {
        pg_sys::XLogRegisterData((*t).t_data as *mut std::ffi::c_char, (*t).t_len as i32);
    }
    pg_sys::XLogInsert(RMGR_ID, XLOG_ANKER_ROW);
    for t in [new, old].into_iter().flatten() {
        pg_sys::heap_freetuple(t);
    }
}

/// The parts of a ROW record: header, new row, old row.
unsafe fn parse(record: *mut pg_sys::XLogReaderState) -> Option<(RowRecord, &'static [u8], &'static [u8])> {
    let d = (*record).record;
    let len = (*d).main_data_len as usize;
    let size = std::mem::size_of::<RowRecord>();
    if len < size {
        return None;
    }
    let data = std::slice::from_raw_parts((*d).main_data as *const u8, len);
    let head = (data.as_ptr() as *const RowRecord).read_unaligned();
    let rest = &data[size..];
    let (new_len, old_len) = (head.new_len as usize, head.old_len as usize);
    if rest.len() != new_len + old_len {
        return None;
    }
    Some((head, &rest[..new_len], &rest[new_len..]))
}

/// `rm_desc` text of a ROW record.
pub unsafe fn describe(record: *mut pg_sys::XLogReaderState) -> String {
    let Some((head, new, old)) = parse(record) else { return "malformed row record".into() };
    let action = match head.action {
        INSERT => "insert",
        UPDATE => "update",
        DELETE => "delete",
        _ => "unknown change",
    };
    let r = head.rnode;
    format!("rel {}/{}/{}: {action} for logical decoding, new row {} bytes, old row {} bytes", r.spcNode, r.dbNode, r.relNode, new.len(), old.len())
}

/// `rm_decode`: queue a ROW record's change in the reorder buffer (heap's
/// `heap_decode` and `DecodeInsert`/`DecodeUpdate`/`DecodeDelete`); the
/// other record kinds change pages only.
#[pg_guard]
pub unsafe extern "C-unwind" fn decode(ctx: *mut pg_sys::LogicalDecodingContext, buf: *mut pg_sys::XLogRecordBuffer) {
    let buf = &*(buf as *const RecordBuffer);
    let record = buf.record;
    let d = (*record).record;
    let xid = (*d).header.xl_xid;
    let reorder = (*ctx).reorder;
    pg_sys::ReorderBufferProcessXid(reorder, xid, buf.origptr);
    if super::redo::kind(record) != XLOG_ANKER_ROW {
        return;
    }
    let builder = (*ctx).snapshot_builder;
    // No snapshot to decode with yet, or only moving the slot on.
    if guarded(|| SnapBuildCurrentState(builder)) < SNAPBUILD_FULL_SNAPSHOT || (*ctx).fast_forward {
        return;
    }
    if !guarded(|| SnapBuildProcessChange(builder, xid, buf.origptr)) {
        return;
    }
    let Some((head, new, old)) = parse(record) else {
        let lsn = buf.origptr;
        error!("anker: malformed row record at WAL position {:X}/{:X}", lsn >> 32, lsn as u32);
    };
    if head.rnode.dbNode != (*(*ctx).slot).data.database {
        return; // another database's
    }
    let origin = (*d).record_origin;
    if (*ctx).callbacks.filter_by_origin_cb.is_some() && pg_sys::filter_by_origin_cb_wrapper(ctx, origin) {
        return;
    }
    let change = pg_sys::ReorderBufferGetChange(reorder);
    (*change).action = match head.action {
        INSERT => pg_sys::ReorderBufferChangeType::REORDER_BUFFER_CHANGE_INSERT,
        UPDATE => pg_sys::ReorderBufferChangeType::REORDER_BUFFER_CHANGE_UPDATE,
        _ => pg_sys::ReorderBufferChangeType::REORDER_BUFFER_CHANGE_DELETE,
    };
    (*change).origin_id = origin;
    let tp = &mut (*change).data.tp;
    tp.relnode = head.rnode;
    tp.newtuple = tuple_buf(reorder, new);
    tp.oldtuple = tuple_buf(reorder, old);
    tp.clear_toast_afterwards = true;
    pg_sys::ReorderBufferQueueChange(reorder, xid, buf.origptr, change, false);
}

/// A reorder-buffer tuple holding `bytes` (a `HeapTupleHeader` and its
/// data); null for none.
unsafe fn tuple_buf(reorder: *mut pg_sys::ReorderBuffer, bytes: &[u8]) -> *mut pg_sys::ReorderBufferTupleBuf {
    const HEADER: usize = std::mem::offset_of!(pg_sys::HeapTupleHeaderData, t_bits);
    if bytes.len() < HEADER {
        return std::ptr::null_mut();
    }
    // (the size asked for excludes the tuple header, as heap's decoder's)
    let tb = pg_sys::ReorderBufferGetTupleBuf(reorder, bytes.len() - HEADER);
    let t = &mut (*tb).tuple;
    t.t_len = bytes.len() as u32;
    t.t_self = crate::tam::INVALID_TID;
    t.t_tableOid = pg_sys::InvalidOid;
    std::ptr::copy_nonoverlapping(bytes.as_ptr(), t.t_data as *mut u8, bytes.len());
    tb
}
