//! anker's tuple slot: a virtual slot that also knows the row's
//! transaction stamps, so `xmin`, `xmax`, `cmin` and `cmax` can be read as
//! system columns (foreign-key triggers read `xmin`, and users may too).
//!
//! The operations are PostgreSQL's virtual-slot operations with a larger
//! slot and our own `getsysattr`, `init`, `clear` and `copyslot`, and, for
//! rows whose values are read only when asked for ([`store_pending`]),
//! `getsomeattrs`, `materialize` and the tuple copies.

use anker_engine::table::{flag, RowHeader};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

/// The slot; `base` must come first (it is a virtual slot).
#[repr(C)]
pub struct AnkerSlot {
    base: pg_sys::VirtualTupleTableSlot,
    /// Stamps of the stored row; `valid` is false for rows built elsewhere.
    valid: bool,
    xmin: u32,
    xmax: u32,
    cmin: u32,
    cmax: u32,
    /// Memory of the slot's own for the values of rows fetched by TID
    /// ([`row_buffer`]), reused from fetch to fetch.
    buf: *mut u8,
    buf_len: usize,
    /// A row stored without its values ([`store_pending`]).
    pending: Option<Pending>,
}

/// How to read the values of a row stored without them: `read(arg, slot)`
/// fills `slot` with them (storing the row again, as a scan does); it is a
/// guarded function, as it may raise an error.
#[derive(Clone, Copy)]
pub struct Pending {
    pub read: unsafe extern "C-unwind" fn(*mut std::ffi::c_void, *mut pg_sys::TupleTableSlot),
    pub arg: *mut std::ffi::c_void,
}

static mut OPS: pg_sys::TupleTableSlotOps = pg_sys::TupleTableSlotOps {
    base_slot_size: 0,
    init: None,
    release: None,
    clear: None,
    getsomeattrs: None,
    getsysattr: None,
    materialize: None,
    copyslot: None,
    get_heap_tuple: None,
    get_minimal_tuple: None,
    copy_heap_tuple: None,
    copy_minimal_tuple: None,
};

/// Build the operations from PostgreSQL's virtual ones (in `_PG_init`).
pub fn init_ops() {
    // SAFETY: single-threaded postmaster start-up; TTSOpsVirtual is a
    // constant of the server.
    unsafe {
        OPS = pg_sys::TTSOpsVirtual;
        OPS.base_slot_size = std::mem::size_of::<AnkerSlot>();
        OPS.init = Some(slot_init);
        OPS.clear = Some(slot_clear);
        OPS.release = Some(slot_release);
        OPS.getsysattr = Some(slot_getsysattr);
        OPS.copyslot = Some(slot_copy);
        OPS.getsomeattrs = Some(slot_getsomeattrs);
        OPS.materialize = Some(slot_materialize);
        OPS.copy_heap_tuple = Some(slot_copy_heap_tuple);
        OPS.copy_minimal_tuple = Some(slot_copy_minimal_tuple);
    }
}

pub fn ops() -> *const pg_sys::TupleTableSlotOps {
    &raw const OPS
}

#[inline]
pub fn is_ours(slot: *mut pg_sys::TupleTableSlot) -> bool {
    // SAFETY: slot is a valid slot.
    unsafe { std::ptr::eq((*slot).tts_ops, &raw const OPS) }
}

/// Record the stamps of the row stored in `slot` (if it is ours).
#[inline]
pub fn set_stamps(slot: *mut pg_sys::TupleTableSlot, h: Option<&RowHeader>) {
    if !is_ours(slot) {
        return;
    }
    // SAFETY: our ops allocate AnkerSlot-sized slots.
    let s = unsafe { &mut *(slot as *mut AnkerSlot) };
    match h {
        Some(h) => {
            s.valid = true;
            s.xmin = h.xmin;
            // Heap's xmax also names row lockers (a lone xid or a
            // multixact), and applications rely on it: `RETURNING xmax = 0`
            // tells an upsert's insert from its update.
            s.xmax = if h.xmax != 0 || h.flags & flag::SPECULATIVE != 0 { h.xmax } else { h.locker };
            s.cmin = h.cmin;
            s.cmax = h.cmax;
        }
        None => s.valid = false,
    }
}

/// `bytes` of memory owned by `slot` (if it is ours) that values stored in
/// it may point to: they stay valid until the slot is filled again or
/// dropped, as a materialized slot's would, without copying them twice.
pub unsafe fn row_buffer(slot: *mut pg_sys::TupleTableSlot, bytes: usize) -> Option<*mut u8> {
    if !is_ours(slot) {
        return None;
    }
    let s = &mut *(slot as *mut AnkerSlot);
    if s.buf.is_null() || s.buf_len < bytes {
        // (a smaller one is left to the memory context: the row the slot
        // still holds may point into it until the fetch replaces the row)
        let len = bytes.max(8);
        s.buf = crate::pg_leaf::alloc((*slot).tts_mcxt, len, false);
        s.buf_len = len;
    }
    Some(s.buf)
}

/// Store a row in `slot` (ours, cleared or holding a row) without its
/// values: they are read by `pending.read` when something first asks for
/// them (a deformation, a copy, materialization). The caller sets the TID,
/// table and stamps. ANALYZE counts every row of the blocks it samples and
/// copies only the few it keeps; reading the others cost it twice heap's
/// time, which only points its slot at a tuple in a buffer.
pub unsafe fn store_pending(slot: *mut pg_sys::TupleTableSlot, pending: Pending) {
    debug_assert!(is_ours(slot));
    if (*slot).tts_flags & pg_sys::TTS_FLAG_SHOULDFREE as u16 != 0 {
        pg_sys::ExecClearTuple(slot);
    }
    (*slot).tts_nvalid = 0;
    (*slot).tts_flags &= !(pg_sys::TTS_FLAG_EMPTY as u16);
    (*(slot as *mut AnkerSlot)).pending = Some(pending);
}

/// Read the values of a row [`store_pending`] stored, if it is one.
#[inline]
unsafe fn read_pending(slot: *mut pg_sys::TupleTableSlot) {
    // (taken first: the read stores the row again through a clear)
    if let Some(p) = (*(slot as *mut AnkerSlot)).pending.take() {
        (p.read)(p.arg, slot);
    }
}

/// Not guarded, like `slot_clear`: the pending read is a guarded call of
/// its own, and the virtual slot's operations are plain C.
unsafe extern "C-unwind" fn slot_getsomeattrs(slot: *mut pg_sys::TupleTableSlot, natts: std::ffi::c_int) {
    if (*(slot as *mut AnkerSlot)).pending.is_some() {
        read_pending(slot);
    } else if let Some(getsomeattrs) = pg_sys::TTSOpsVirtual.getsomeattrs {
        getsomeattrs(slot, natts); // (an error: nothing else leaves values unread)
    }
}

unsafe extern "C-unwind" fn slot_materialize(slot: *mut pg_sys::TupleTableSlot) {
    read_pending(slot);
    if let Some(materialize) = pg_sys::TTSOpsVirtual.materialize {
        materialize(slot);
    }
}

/// A copy keeps the row's TID and table, as a heap slot's copy does (the
/// virtual slot's leaves them invalid): ANALYZE sorts the rows it keeps by
/// TID to measure how well a column's order follows the table's.
unsafe extern "C-unwind" fn slot_copy_heap_tuple(slot: *mut pg_sys::TupleTableSlot) -> pg_sys::HeapTuple {
    read_pending(slot);
    let copy = pg_sys::TTSOpsVirtual.copy_heap_tuple.expect("virtual slots copy heap tuples")(slot);
    (*copy).t_self = (*slot).tts_tid;
    (*copy).t_tableOid = (*slot).tts_tableOid;
    copy
}

unsafe extern "C-unwind" fn slot_copy_minimal_tuple(slot: *mut pg_sys::TupleTableSlot) -> pg_sys::MinimalTuple {
    read_pending(slot);
    pg_sys::TTSOpsVirtual.copy_minimal_tuple.expect("virtual slots copy minimal tuples")(slot)
}

#[pg_guard]
unsafe extern "C-unwind" fn slot_init(slot: *mut pg_sys::TupleTableSlot) {
    if let Some(init) = pg_sys::TTSOpsVirtual.init {
        init(slot);
    }
    let s = &mut *(slot as *mut AnkerSlot);
    s.valid = false;
    s.buf = std::ptr::null_mut();
    s.buf_len = 0;
    std::ptr::write(&raw mut s.pending, None);
}

#[pg_guard]
unsafe extern "C-unwind" fn slot_release(slot: *mut pg_sys::TupleTableSlot) {
    if let Some(release) = pg_sys::TTSOpsVirtual.release {
        release(slot);
    }
    let s = &mut *(slot as *mut AnkerSlot);
    if !s.buf.is_null() {
        pg_sys::pfree(s.buf as *mut std::ffi::c_void);
        s.buf = std::ptr::null_mut();
    }
}

/// Not guarded (it runs for every row a node clears): nothing here can
/// panic, and the virtual slot's `clear` is a plain C call.
unsafe extern "C-unwind" fn slot_clear(slot: *mut pg_sys::TupleTableSlot) {
    if let Some(clear) = pg_sys::TTSOpsVirtual.clear {
        clear(slot);
    }
    let s = &mut *(slot as *mut AnkerSlot);
    s.valid = false;
    s.pending = None;
}

/// Forget a row stored without its values (a scan storing another row in
/// the slot without `ExecClearTuple`).
#[inline]
pub unsafe fn forget_pending(slot: *mut pg_sys::TupleTableSlot) {
    (*(slot as *mut AnkerSlot)).pending = None;
}

/// Copy a row into one of our slots. Like a heap slot's copy, and unlike a
/// virtual slot's, the copy of a row we read keeps its TID, table and
/// stamps (a row built elsewhere has none): logical replication's apply
/// finds a row by a sequential scan, copies it, and locks and changes it
/// through the copy's TID (`RelationFindReplTupleSeq`).
#[pg_guard]
unsafe extern "C-unwind" fn slot_copy(dst: *mut pg_sys::TupleTableSlot, src: *mut pg_sys::TupleTableSlot) {
    if is_ours(src) {
        read_pending(src);
    }
    if let Some(copy) = pg_sys::TTSOpsVirtual.copyslot {
        copy(dst, src);
    }
    let d = &mut *(dst as *mut AnkerSlot);
    d.pending = None;
    if is_ours(src) {
        let s = &*(src as *mut AnkerSlot);
        (*dst).tts_tid = (*src).tts_tid;
        (*dst).tts_tableOid = (*src).tts_tableOid;
        d.valid = s.valid;
        (d.xmin, d.xmax, d.cmin, d.cmax) = (s.xmin, s.xmax, s.cmin, s.cmax);
    } else {
        (*dst).tts_tid = super::INVALID_TID;
        (*dst).tts_tableOid = pg_sys::InvalidOid;
        d.valid = false;
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn slot_getsysattr(
    slot: *mut pg_sys::TupleTableSlot,
    attnum: std::ffi::c_int,
    isnull: *mut bool,
) -> pg_sys::Datum {
    let s = &*(slot as *mut AnkerSlot);
    if !s.valid {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            "cannot retrieve a system column in this context"
        );
    }
    *isnull = false;
    let v = match attnum {
        pg_sys::MinTransactionIdAttributeNumber => s.xmin,
        pg_sys::MaxTransactionIdAttributeNumber => s.xmax,
        pg_sys::MinCommandIdAttributeNumber => s.cmin,
        pg_sys::MaxCommandIdAttributeNumber => s.cmax,
        _ => {
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                format!("anker tables have no system column number {attnum}")
            );
        }
    };
    pg_sys::Datum::from(v as usize)
}
