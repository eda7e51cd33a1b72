//! Tables: a set of page-table columns plus the system columns that carry
//! row versions.
//!
//! Every row has, besides its user columns:
//!
//! * a [`Stamp`] (16 bytes): `xmin` (creator of the newest version),
//!   `xmax` (deleter, or updater that moved the row to a new row id),
//!   `flags` (hint bits, the row latch and a modification counter) and
//!   `locker` (row-lock holder, or a speculative-insertion token);
//! * [`Cids`] (8 bytes): command ids of `xmin` and `xmax`;
//! * [`Links`] (16 bytes): the head of the row's version chain (before-images,
//!   newest first) and the successor row id after a new-row-id update.
//!
//! Row ids are handed out densely from 0. A row whose `xmin` is still 0 is
//! being written (or its writer failed) and is skipped by every reader;
//! `xmin` is stored last, with release ordering, when a row is complete.
//!
//! Values: fixed-width columns store `2^width_shift` bytes per row; the
//! extension decides their byte image. Variable-length columns store a
//! 16-byte slot: either the value itself when it fits (the extension passes
//! bytes whose first byte is non-zero) or a zero tag, the length and the
//! arena offset of an immutable blob allocated from the table's heap.

use crate::arena::{AllocError, AllocResult, Arena, Heap, Off, PageOwner, NULL_OFF, PAGE_SIZE};
use crate::column::{bits, page_no_off, PageTable, Replaced};
use crate::decimal;
use crate::sync::{RwLatch, SpinLock};
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};

pub const MAX_COLUMNS: usize = 1600;
/// Bytes of a variable-length slot: the narrowest, and always a numeric's
/// (its scaled value sits beside the varlena, see `decimal::numeric_slot`).
pub const VAR_SLOT: usize = 16;
/// Bytes of the widest variable-length slot ([`ColumnSpec::var_slot`]).
pub const MAX_VAR_SLOT: usize = 64;

/// Identifies a table's storage: PostgreSQL's (tablespace, database,
/// relfilenode, temp-backend) but the engine only needs it to be unique.
pub type TableKey = [u32; 4];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ColumnKind {
    Fixed = 0,
    Var = 1,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnSpec {
    pub kind: ColumnKind,
    /// log2 of the bytes stored per row (Var: 4 to 6, a slot of
    /// [`VAR_SLOT`] to [`MAX_VAR_SLOT`] bytes).
    pub width_shift: u32,
}

impl ColumnSpec {
    pub fn fixed(width: usize) -> ColumnSpec {
        ColumnSpec { kind: ColumnKind::Fixed, width_shift: width.max(1).next_power_of_two().trailing_zeros() }
    }
    pub fn var() -> ColumnSpec {
        ColumnSpec::var_slot(VAR_SLOT)
    }
    /// A variable-length column whose slots take `bytes` (rounded up to a
    /// power of two, within [`VAR_SLOT`]..=[`MAX_VAR_SLOT`]): a value
    /// shorter than its slot is stored in it, longer ones in a blob.
    pub fn var_slot(bytes: usize) -> ColumnSpec {
        let bytes = bytes.clamp(VAR_SLOT, MAX_VAR_SLOT).next_power_of_two();
        ColumnSpec { kind: ColumnKind::Var, width_shift: bytes.trailing_zeros() }
    }
    /// Bytes of one stored element: the fixed width, or a variable-length
    /// column's slot.
    pub fn copy_bytes(&self) -> usize {
        1 << self.width_shift
    }
    /// Whether the layout is one a table can hold (specs come from WAL and
    /// images too).
    pub fn is_valid(&self) -> bool {
        match self.kind {
            ColumnKind::Var => (VAR_SLOT.trailing_zeros()..=MAX_VAR_SLOT.trailing_zeros()).contains(&self.width_shift),
            ColumnKind::Fixed => self.width_shift <= 6,
        }
    }
    /// Whether values stored with layout `self` read as values of layout
    /// `attr` (the one an attribute now asks for): the same fixed width, or
    /// both variable-length, whatever their slots (ALTER TABLE changes a
    /// varchar's length limit without rewriting the table).
    pub fn reads_as(&self, attr: ColumnSpec) -> bool {
        self.kind == attr.kind && (self.kind == ColumnKind::Var || self.width_shift == attr.width_shift)
    }
}

/// A value to store.
#[derive(Clone, Copy, Debug)]
pub enum Value<'a> {
    Null,
    /// Fixed-width bytes (at most the column width; the rest is zero).
    Fixed(&'a [u8]),
    /// Variable-length bytes stored in the slot itself (1..=16 bytes, first
    /// byte non-zero).
    Inline(&'a [u8]),
    /// Variable-length bytes stored out of line in a blob.
    Blob(&'a [u8]),
    /// A numeric's short varlena of at most [`decimal::SLOT_NUMERIC_MAX`] bytes, stored
    /// inline with its scaled value beside it ([`decimal::numeric_slot`]); read back as
    /// [`ValueRef::Inline`].
    Numeric(&'a [u8]),
}

/// Ask the CPU to start loading the cache line at `p` (no effect on
/// other targets).
#[inline(always)]
pub fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Where a stored value is. Pointers into live pages are only stable while
/// the row does not change; blob pointers stay valid until the blob is freed
/// by version garbage collection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueRef {
    Null,
    Fixed(*const u8),
    Inline(*const u8),
    Blob(*const u8, u32),
}

/// Consecutive rows of one column on one values page and one null bitmap page
/// ([`Table::cursor_run`]).
#[derive(Clone, Copy, Debug)]
pub struct Run {
    /// The first row's element; elements are [`ColCache::width`] bytes apart. Null when
    /// the rows have no values page (every row is NULL).
    pub values: *const u8,
    /// The null bitmap page (null: no row is NULL) and the first row's bit in it.
    nulls: *mut u8,
    first_bit: u64,
    pub len: u64,
}

impl Run {
    /// Is row `i` of the run NULL?
    #[inline(always)]
    pub fn is_null(&self, i: u64) -> bool {
        self.values.is_null() || !self.nulls.is_null() && bits::get(self.nulls, self.first_bit + i)
    }

    /// Is any row of the run NULL? (A word of the bitmap at a time.)
    pub fn any_null(&self) -> bool {
        if self.values.is_null() {
            return self.len > 0;
        }
        if self.nulls.is_null() || self.len == 0 {
            return false;
        }
        let (first, last) = (self.first_bit, self.first_bit + self.len - 1);
        (first >> 6..=last >> 6).any(|w| {
            let mut word = bits::word(self.nulls, w << 6).load(Ordering::Relaxed);
            if w == first >> 6 {
                word &= u64::MAX << (first & 63);
            }
            if w == last >> 6 {
                word &= u64::MAX >> (63 - (last & 63));
            }
            word != 0
        })
    }
}

/// One cached page of a page table: `idx` is the page index, `ptr` its
/// address (null when the page does not exist).
#[derive(Clone, Copy, Debug)]
pub struct PageCache {
    idx: u64,
    ptr: *mut u8,
    /// When set, pages come from a snapshot's frozen chunk directory, not
    /// the live page table.
    frozen: *const Off,
    nfrozen: u64,
    /// Where frozen chunks and pages are mapped (the arena or an image of it).
    frozen_base: *const u8,
}

impl PageCache {
    pub const EMPTY: PageCache = PageCache {
        idx: u64::MAX,
        ptr: std::ptr::null_mut(),
        frozen: std::ptr::null(),
        nfrozen: 0,
        frozen_base: std::ptr::null(),
    };

    /// Forget the cached page (keeps the frozen source).
    fn forget(&mut self) {
        self.idx = u64::MAX;
        self.ptr = std::ptr::null_mut();
    }

    fn freeze(&mut self, f: Option<crate::snapshot::Frozen>) {
        self.forget();
        match f {
            Some(f) => {
                self.frozen = f.chunks;
                self.nfrozen = f.npages;
                self.frozen_base = f.base;
            }
            None => {
                // a part the snapshot lacks reads as absent
                static ABSENT: [Off; 1] = [0];
                self.frozen = ABSENT.as_ptr();
                self.nfrozen = 0;
            }
        }
    }

    #[inline(always)]
    fn page(&mut self, arena: &Arena, pt: &PageTable, row: u64) -> Option<*mut u8> {
        let idx = row >> pt.rows_shift();
        if idx != self.idx {
            self.idx = idx;
            self.ptr = if self.frozen.is_null() {
                pt.page_for_row(arena, row).unwrap_or(std::ptr::null_mut())
            } else if idx < self.nfrozen {
                // SAFETY: the frozen directory covers nfrozen pages; a
                // snapshot's chunks stay unchanged while it is bound.
                unsafe { crate::column::frozen_page(self.frozen_base, self.frozen, idx) }
            } else {
                std::ptr::null_mut()
            };
        }
        if self.ptr.is_null() {
            None
        } else {
            Some(self.ptr)
        }
    }
}

/// A scan position's cached system-column pages. Plain data: it can live in
/// memory PostgreSQL frees on error.
#[derive(Clone, Copy, Debug)]
pub struct Cursor {
    cow_gen: u64,
    stamps: PageCache,
    cids: PageCache,
    links: PageCache,
    summaries: PageCache,
    /// Reading a snapshot: nothing changes under the cursor.
    frozen: bool,
}

impl Cursor {
    pub const NEW: Cursor = Cursor {
        cow_gen: u64::MAX,
        stamps: PageCache::EMPTY,
        cids: PageCache::EMPTY,
        links: PageCache::EMPTY,
        summaries: PageCache::EMPTY,
        frozen: false,
    };

    pub(crate) fn freeze(
        &mut self,
        stamps: Option<crate::snapshot::Frozen>,
        cids: Option<crate::snapshot::Frozen>,
        links: Option<crate::snapshot::Frozen>,
        summaries: Option<crate::snapshot::Frozen>,
    ) {
        self.stamps.freeze(stamps);
        self.cids.freeze(cids);
        self.links.freeze(links);
        self.summaries.freeze(summaries);
        self.frozen = true;
    }

    /// Does the cursor read a snapshot?
    pub fn is_frozen(&self) -> bool {
        self.frozen
    }
}

/// A user column's cached pages.
#[derive(Clone, Copy, Debug)]
pub struct ColCache {
    col: *const Column,
    kind: u32,
    width_shift: u32,
    values: PageCache,
    nulls: PageCache,
}

impl ColCache {
    /// Bytes per stored element.
    #[inline]
    pub fn width(&self) -> usize {
        1 << self.width_shift
    }

    /// The column's storage kind (for [`decode_slot`]).
    #[inline]
    pub fn kind(&self) -> u32 {
        self.kind
    }

    pub(crate) fn freeze(&mut self, values: Option<crate::snapshot::Frozen>, nulls: Option<crate::snapshot::Frozen>) {
        self.values.freeze(values);
        self.nulls.freeze(nulls);
    }
}

pub mod flag {
    /// The row is being modified (held for a few stores, never across waits).
    pub const LATCH: u32 = 1;
    pub const XMIN_COMMITTED: u32 = 1 << 1;
    pub const XMIN_ABORTED: u32 = 1 << 2;
    pub const XMAX_COMMITTED: u32 = 1 << 3;
    pub const XMAX_ABORTED: u32 = 1 << 4;
    /// `xmax` moved the row to a new row id (`Links::next`).
    pub const UPDATED: u32 = 1 << 5;
    /// `locker` is a MultiXactId.
    pub const LOCKER_MULTI: u32 = 1 << 6;
    /// Lock strength of a single `locker` (2 bits).
    pub const LOCK_MODE_SHIFT: u32 = 7;
    pub const LOCK_MODE_MASK: u32 = 3 << LOCK_MODE_SHIFT;
    /// The row slot holds no row (vacuumed, or its insert failed).
    pub const VACANT: u32 = 1 << 9;
    /// The row is a speculative insertion; `locker` holds the token.
    pub const SPECULATIVE: u32 = 1 << 10;
    /// `xmax` only locks; it neither deletes nor updates.
    pub const XMAX_LOCK_ONLY: u32 = 1 << 11;
    /// The row's links (version chain, successor) are set.
    pub const HAS_LINKS: u32 = 1 << 12;
    /// The row was moved to another partition by an UPDATE.
    pub const MOVED: u32 = 1 << 13;
    /// `xmax` updated the row without changing a key column (heap's
    /// NO KEY UPDATE, no `HEAP_KEYS_UPDATED`): KEY SHARE lockers need not
    /// wait for it. Never set for deletes.
    pub const KEYS_KEPT: u32 = 1 << 14;
    /// Bits 16..32 count modifications: readers of live rows compare
    /// `flags & SEQ_CHECK` before and after reading values.
    pub const SEQ_SHIFT: u32 = 16;
    pub const SEQ_ONE: u32 = 1 << SEQ_SHIFT;
    pub const SEQ_CHECK: u32 = !((1 << SEQ_SHIFT) - 1) | LATCH;
    /// Hint bits: set without the latch, ignored by the sequence check.
    pub const HINTS: u32 = XMIN_COMMITTED | XMIN_ABORTED | XMAX_COMMITTED | XMAX_ABORTED;
}

#[repr(C)]
pub struct Stamp {
    pub xmin: AtomicU32,
    pub xmax: AtomicU32,
    pub flags: AtomicU32,
    pub locker: AtomicU32,
}

impl Stamp {
    /// Under the row latch (`flags` as they were before latching): does
    /// the row still have the header `expected` was read as, hint bits
    /// aside?
    pub fn still_is(&self, flags: u32, expected: &RowHeader) -> bool {
        flags & !flag::HINTS & !flag::LATCH == expected.flags & !flag::HINTS & !flag::LATCH
            && self.xmin.load(Ordering::Relaxed) == expected.xmin
            && self.xmax.load(Ordering::Relaxed) == expected.xmax
            && self.locker.load(Ordering::Relaxed) == expected.locker
    }
}

#[repr(C)]
pub struct Cids {
    pub cmin: AtomicU32,
    pub cmax: AtomicU32,
}

#[repr(C)]
pub struct Links {
    pub chain: AtomicU64,
    pub next: AtomicU64,
}

/// A consistent copy of a row's system columns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowHeader {
    pub xmin: u32,
    pub xmax: u32,
    pub flags: u32,
    pub locker: u32,
    pub cmin: u32,
    pub cmax: u32,
    pub chain: Off,
    pub next: u64,
}

/// A change to an existing row, applied by [`Table::modify_row`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowChange {
    /// New creator (VACUUM's freezing; `FrozenTransactionId`).
    pub xmin: Option<u32>,
    /// New deleter and its command id (clears the deleter's hint bits).
    pub xmax: Option<(u32, u32)>,
    pub set_flags: u32,
    pub clear_flags: u32,
    pub locker: Option<u32>,
    /// Successor row id (sets `HAS_LINKS`).
    pub next: Option<u64>,
}

#[repr(C)]
pub struct Column {
    pub spec_kind: u32,
    pub width_shift: u32,
    pub values: PageTable,
    /// One bit per row, set for NULL. Pages are created on the first NULL.
    pub nulls: PageTable,
    /// A [`ColumnState`].
    state: AtomicU32,
    /// For a tentative column: the transaction that added its attribute.
    owner_xid: AtomicU32,
    /// Bounds of every fixed-width value ever stored in the column, read as a signed
    /// integer of the column's width (an empty range, `lo > hi`, until the first).
    /// They only widen: every version a snapshot can see lies within them, which makes
    /// them statistics a query optimizer may rely on ([`Column::bounds`]).
    lo: AtomicI64,
    hi: AtomicI64,
}

/// Where a column added after the table was created stands. ALTER TABLE ADD
/// COLUMN changes only the catalog; storage follows on first use, possibly
/// inside the ALTER's own transaction, which may still abort.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub enum ColumnState {
    /// Belongs to a committed attribute.
    Permanent = 0,
    /// Belongs to an attribute added by a transaction still in progress
    /// (which holds the relation exclusively until it ends).
    Tentative = 1,
    /// Its attribute's transaction aborted: the values are garbage, and the
    /// next attribute at this position replaces the column.
    Leftover = 2,
}

impl Column {
    pub fn state(&self) -> ColumnState {
        match self.state.load(Ordering::Acquire) {
            1 => ColumnState::Tentative,
            2 => ColumnState::Leftover,
            _ => ColumnState::Permanent,
        }
    }

    fn set_state(&self, state: ColumnState) {
        self.state.store(state as u32, Ordering::Release);
    }

    /// The transaction whose attribute a tentative column stores.
    pub fn owner_xid(&self) -> u32 {
        self.owner_xid.load(Ordering::Acquire)
    }

    pub fn set_owner_xid(&self, xid: u32) {
        self.owner_xid.store(xid, Ordering::Release);
    }

    /// The smallest and largest value ever stored, for a fixed-width column of 1, 2, 4 or
    /// 8 bytes that held one. A value is counted before the write that stores it returns,
    /// so before its transaction can commit.
    pub fn bounds(&self) -> Option<(i64, i64)> {
        let (lo, hi) = (self.lo.load(Ordering::Acquire), self.hi.load(Ordering::Acquire));
        (self.spec_kind == ColumnKind::Fixed as u32 && self.width_shift <= 3 && lo <= hi).then_some((lo, hi))
    }

    /// Count `bytes`, a value stored in this column (its first `width` bytes).
    pub(crate) fn widen(&self, bytes: &[u8]) {
        if self.spec_kind != ColumnKind::Fixed as u32 || self.width_shift > 3 {
            return;
        }
        let mut b = [0u8; 8];
        let n = bytes.len().min(1 << self.width_shift);
        b[..n].copy_from_slice(&bytes[..n]);
        let v = match self.width_shift {
            0 => b[0] as i8 as i64,
            1 => i16::from_ne_bytes([b[0], b[1]]) as i64,
            2 => i32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as i64,
            _ => i64::from_ne_bytes(b),
        };
        if v < self.lo.load(Ordering::Relaxed) {
            self.lo.fetch_min(v, Ordering::AcqRel);
        }
        if v > self.hi.load(Ordering::Relaxed) {
            self.hi.fetch_max(v, Ordering::AcqRel);
        }
    }

    pub fn spec(&self) -> ColumnSpec {
        ColumnSpec {
            kind: if self.spec_kind == 1 { ColumnKind::Var } else { ColumnKind::Fixed },
            width_shift: self.width_shift,
        }
    }
}

/// A chunk of the free-row stack.
#[repr(C)]
struct FreeChunk {
    next: Off,
    count: u32,
    _pad: u32,
    rows: [u64; FREE_CHUNK_ROWS],
}
const FREE_CHUNK_ROWS: usize = 1022;

/// Retired records past which writers reclaim ([`Table::reclaim_due`]).
const RECLAIM_BATCH: u64 = 256;

/// A page replaced by copy-on-write, kept until no snapshot or reader that
/// could still see it remains.
#[repr(C)]
struct Retired {
    next: Off,
    /// A page number, or the offset of a heap object.
    what: u64,
    kind: u32,
    /// The table's snapshot epoch when it was retired.
    snap_epoch: u32,
    /// The arena reclamation epoch when it was retired.
    ebr_epoch: u64,
}

/// What a [`Retired`] record holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub(crate) enum RetiredKind {
    /// A column page replaced by copy-on-write or released by VACUUM.
    Page = 0,
    /// A heap object (a blob, or an undo record whose blobs live on).
    Object = 1,
    /// An undo record together with the blobs of its before-images.
    UndoRec = 2,
}

#[repr(C)]
pub struct Table {
    pub key: TableKey,
    /// Writers of rows hold it shared; snapshot creation holds it exclusively.
    pub latch: RwLatch,
    pub(crate) retire_lock: SpinLock,
    /// Serialises changes of the column set.
    pub schema_lock: SpinLock,
    /// All memory of the table except its header page.
    pub heap: Heap,
    /// Row ids handed out so far.
    pub(crate) nrows: AtomicU64,
    /// Vacant row ids ready for reuse: a stack of [`FreeChunk`]s.
    free_lock: SpinLock,
    free_head: AtomicU64,
    free_count: AtomicU64,
    pub(crate) ncols: AtomicU32,
    /// Incremented whenever a column is added or replaced.
    schema_gen: AtomicU32,
    /// Durability (kept by the PostgreSQL boundary): sequence number of the
    /// last change logged or replayed, the last block of the on-disk change
    /// log (`u32::MAX`: not known yet), whether that log is WAL-logged
    /// (1) or unlogged (0), and whether the table is being loaded from disk
    /// (others wait).
    pub durable_seq: AtomicU64,
    pub log_tail: AtomicU32,
    /// Where the boundary last found the log's last block in its cache (a
    /// hint it checks; 0: none).
    pub log_tail_hint: AtomicI32,
    pub log_permanent: AtomicU32,
    /// [`LOADING`] while the boundary loads the table (0: loaded).
    pub loading: AtomicU32,
    /// The loader, in the boundary's terms (0: not known), for redo to
    /// cancel on a hot standby when the load holds it back too long.
    pub loader: AtomicU64,
    /// How far the load has got, for a progress view.
    pub load_progress: LoadProgress,
    /// After its load failed ([`Directory::abandon`]): the reclamation
    /// epoch it was abandoned in, and the next abandoned table.
    abandoned_epoch: AtomicU64,
    abandoned_next: AtomicU64,
    /// Taken by the boundary's loader to end a load, and by redo to see
    /// whether the table is loaded yet (on a hot standby).
    pub load_lock: SpinLock,
    /// Bytes of the on-disk log after its image, of the image, and the
    /// rows (row ids) the image holds: the boundary compacts the log when
    /// it outgrows what an image of the table would take now.
    pub log_bytes: AtomicU64,
    /// The newest updater whose committed update let pruning retire older
    /// versions of a row ([`Table::note_removed`]; 0: none yet). An image
    /// leaves out what was retired, so a hot standby's snapshots that may
    /// see this xid as running must not read the table from that image.
    /// (Written by pruning writers: beside `log_bytes`, which every writer
    /// writes anyway, not beside fields only read, such as `snap_epoch`.)
    removed_horizon: AtomicU32,
    pub image_bytes: AtomicU64,
    pub image_rows: AtomicU64,
    /// The boundary's mark of the checkpoint cycle its last image was
    /// written in (PostgreSQL's redo pointer then); 0: none since start-up.
    pub image_cycle: AtomicU64,
    /// A prepared transaction (two-phase commit) that created or dropped
    /// this storage; 0 if none. See [`Directory::mark_prepared`].
    prepared_xid: AtomicU32,
    /// 1: free the storage if `prepared_xid` commits (it dropped it);
    /// 0: free it if that transaction aborts (it created it).
    prepared_drop: AtomicU32,
    /// Incremented by every snapshot of this table.
    pub snap_epoch: AtomicU32,
    /// `[AtomicU64; MAX_COLUMNS]`: offsets of the [`Column`]s.
    pub(crate) cols: Off,
    /// Retired memory, oldest first (appended under `retire_lock`), and how
    /// many records the list holds.
    pub(crate) retired: AtomicU64,
    retired_tail: AtomicU64,
    retired_len: AtomicU64,
    /// Incremented whenever a page is replaced by copy-on-write; readers
    /// that cache page pointers revalidate against it.
    pub(crate) cow_gen: AtomicU64,
    pub stamps: PageTable,
    pub cids: PageTable,
    pub links: PageTable,
    /// Per block of 4096 rows, a [`crate::version`] summary word.
    pub summaries: PageTable,
    /// Live snapshots of the table (a list through `Snapshot::next`).
    pub(crate) snap_lock: SpinLock,
    pub(crate) snapshots: AtomicU64,
}

/// How far the boundary's load of a table has got, while
/// [`Table::loading`]: written by the loader, read by anyone (figures of the
/// boundary's choosing).
#[repr(C)]
#[derive(Default)]
pub struct LoadProgress {
    pub pid: AtomicU32,
    /// When the load began, on the boundary's clock.
    pub started: AtomicI64,
    pub bytes_read: AtomicU64,
    pub bytes_total: AtomicU64,
    pub changes: AtomicU64,
}

/// Is normal xid `a` newer than normal xid `b`? (PostgreSQL's
/// `TransactionIdFollows`: modulo 2^32, within 2^31 of each other.)
pub(crate) fn xid_follows(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// Store non-NULL `v` (`blob`: its prepared blob, if any) at `dst`, column
/// `c`'s element for a row, in a page private to the live column.
#[inline]
fn write_value(c: &Column, dst: *mut u8, v: &Value, blob: Off) {
    let width = 1usize << c.width_shift;
    match v {
        Value::Null => {}
        Value::Fixed(b) => {
            write_fixed(dst, width, b);
            c.widen(b);
        }
        Value::Inline(b) => {
            debug_assert!(b.len() <= width && !b.is_empty() && b[0] != 0);
            write_fixed(dst, width, b)
        }
        Value::Numeric(b) => write_fixed(dst, width, &decimal::numeric_slot(b)),
        Value::Blob(b) => {
            let mut slot = [0u8; VAR_SLOT];
            slot[4..8].copy_from_slice(&(b.len() as u32).to_ne_bytes());
            slot[8..16].copy_from_slice(&blob.to_ne_bytes());
            write_fixed(dst, width, &slot)
        }
    }
}

/// The page of one page table that a batch's rows last went to. A batch
/// of consecutive rows stays on a page for thousands of rows, so the page
/// is looked up when the rows move to the next one, not for every row.
struct RunPage {
    idx: u64,
    page: *mut u8,
    writable: bool,
}

impl RunPage {
    fn new() -> RunPage {
        RunPage { idx: u64::MAX, page: std::ptr::null_mut(), writable: false }
    }

    /// The page holding `row`, null when it was never written.
    #[inline]
    fn readable_or_null(&mut self, pt: &PageTable, arena: &Arena, row: u64) -> *mut u8 {
        let idx = row >> pt.rows_shift();
        if idx != self.idx {
            self.idx = idx;
            self.page = pt.page_for_row(arena, row).unwrap_or(std::ptr::null_mut());
            self.writable = false;
        }
        self.page
    }

    /// The page holding `row`, which must exist.
    #[inline]
    fn readable(&mut self, pt: &PageTable, arena: &Arena, row: u64) -> *mut u8 {
        let p = self.readable_or_null(pt, arena, row);
        assert!(!p.is_null(), "page of row {row} missing");
        p
    }

    /// [`PageTable::page_for_write`] for `row`, once per page: a page made
    /// private stays the live column's while the caller holds the table's
    /// latch (no snapshot can start).
    #[inline]
    fn writable(
        &mut self,
        pt: &PageTable,
        arena: &Arena,
        heap: &Heap,
        row: u64,
        epoch: u32,
        retire: &mut dyn FnMut(Replaced),
    ) -> AllocResult<*mut u8> {
        let idx = row >> pt.rows_shift();
        if idx != self.idx || !self.writable {
            self.page = pt.page_for_write(arena, heap, row, epoch, retire)?;
            self.idx = idx;
            self.writable = true;
        }
        Ok(self.page)
    }
}

fn write_fixed(dst: *mut u8, width: usize, src: &[u8]) {
    let n = src.len().min(width);
    // SAFETY: dst points at a `width`-byte element inside a writable page.
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), dst, n);
        if n < width {
            std::ptr::write_bytes(dst.add(n), 0, width - n);
        }
    }
}

impl Table {
    /// Create a table's storage. Its header page belongs to `header_owner`.
    pub fn create<'a>(
        arena: &'a Arena,
        header_owner: &PageOwner,
        key: TableKey,
        specs: &[ColumnSpec],
    ) -> AllocResult<&'a Table> {
        assert!(specs.len() <= MAX_COLUMNS);
        assert!(std::mem::size_of::<Table>() <= PAGE_SIZE);
        let off = arena.alloc_pages(header_owner, 1)?;
        let t: *mut Table = arena.ptr(off);
        // SAFETY: a fresh zeroed page that nobody else knows about yet.
        let table = unsafe {
            (*t).key = key;
            (*t).latch.init();
            (*t).retire_lock.init();
            (*t).schema_lock.init();
            (*t).heap.init();
            (*t).nrows = AtomicU64::new(0);
            (*t).free_lock.init();
            (*t).free_head = AtomicU64::new(NULL_OFF);
            (*t).free_count = AtomicU64::new(0);
            (*t).ncols = AtomicU32::new(0);
            (*t).schema_gen = AtomicU32::new(0);
            (*t).durable_seq = AtomicU64::new(0);
            (*t).log_tail = AtomicU32::new(u32::MAX);
            (*t).log_tail_hint = AtomicI32::new(0);
            (*t).log_permanent = AtomicU32::new(0);
            (*t).log_bytes = AtomicU64::new(0);
            (*t).image_bytes = AtomicU64::new(0);
            (*t).image_rows = AtomicU64::new(0);
            (*t).image_cycle = AtomicU64::new(0);
            (*t).loading = AtomicU32::new(0);
            (*t).loader = AtomicU64::new(0);
            (*t).load_progress = LoadProgress::default();
            (*t).abandoned_epoch = AtomicU64::new(0);
            (*t).abandoned_next = AtomicU64::new(NULL_OFF);
            (*t).load_lock.init();
            (*t).prepared_xid = AtomicU32::new(0);
            (*t).prepared_drop = AtomicU32::new(0);
            (*t).snap_epoch = AtomicU32::new(1);
            (*t).removed_horizon = AtomicU32::new(0);
            (*t).retired = AtomicU64::new(NULL_OFF);
            (*t).retired_tail = AtomicU64::new(NULL_OFF);
            (*t).retired_len = AtomicU64::new(0);
            (*t).cow_gen = AtomicU64::new(0);
            (*t).stamps.init(4);
            (*t).cids.init(3);
            (*t).links.init(4);
            (*t).summaries.init(3);
            (*t).snap_lock.init();
            (*t).snapshots = AtomicU64::new(NULL_OFF);
            &mut *t
        };
        let cols = match table.heap.alloc(arena, MAX_COLUMNS * 8) {
            Ok(c) => c,
            Err(e) => {
                table.heap.free_all(arena);
                arena.free_pages(header_owner, off);
                return Err(e);
            }
        };
        // SAFETY: fresh allocation of MAX_COLUMNS words.
        unsafe { std::ptr::write_bytes(arena.ptr::<u8>(cols), 0, MAX_COLUMNS * 8) };
        table.cols = cols;
        for s in specs {
            if let Err(e) = table.add_column(arena, *s) {
                table.heap.free_all(arena);
                arena.free_pages(header_owner, off);
                return Err(e);
            }
        }
        Ok(table)
    }

    /// Free all memory of the table. Nobody may use it any more.
    pub fn destroy(&self, arena: &Arena, header_owner: &PageOwner) {
        self.heap.free_all(arena);
        arena.free_pages(header_owner, arena.off_of(self as *const Table));
    }

    /// Append a column (ALTER TABLE ADD COLUMN). Existing rows read NULL
    /// until written.
    pub fn add_column(&self, arena: &Arena, spec: ColumnSpec) -> AllocResult<usize> {
        let n = self.ncols.load(Ordering::Acquire) as usize;
        assert!(n < MAX_COLUMNS);
        let c = self.heap.alloc(arena, std::mem::size_of::<Column>())?;
        // SAFETY: fresh allocation big enough for a Column.
        unsafe {
            let col: *mut Column = arena.ptr(c);
            (*col).spec_kind = spec.kind as u32;
            (*col).width_shift = spec.width_shift;
            (*col).values.init(spec.width_shift);
            (*col).nulls.init(u32::MAX);
            (*col).state = AtomicU32::new(ColumnState::Permanent as u32);
            (*col).owner_xid = AtomicU32::new(0);
            (*col).lo = AtomicI64::new(i64::MAX);
            (*col).hi = AtomicI64::new(i64::MIN);
        }
        self.col_slot(arena, n).store(c, Ordering::Release);
        self.ncols.store(n as u32 + 1, Ordering::Release);
        self.schema_gen.fetch_add(1, Ordering::AcqRel);
        Ok(n)
    }

    /// Give column `i` (an existing one, or the next one to append) the
    /// layout `spec` and store `fill` in every existing row. Used when
    /// ALTER TABLE adds a column without rewriting the table (PostgreSQL
    /// then supplies the column's "missing" value for old rows), and to
    /// replace a [`ColumnState::Leftover`] column.
    ///
    /// Blocks writers (exclusive latch); the caller holds `schema_lock` and
    /// guarantees that nobody reads column `i` yet.
    pub fn set_column(&self, arena: &Arena, i: usize, spec: ColumnSpec, fill: Value, state: ColumnState) -> AllocResult<()> {
        let _g = self.latch.exclusive();
        let n = self.ncols();
        assert!(i <= n);
        let c = self.heap.alloc(arena, std::mem::size_of::<Column>())?;
        // SAFETY: fresh allocation big enough for a Column.
        unsafe {
            let col: *mut Column = arena.ptr(c);
            (*col).spec_kind = spec.kind as u32;
            (*col).width_shift = spec.width_shift;
            (*col).values.init(spec.width_shift);
            (*col).nulls.init(u32::MAX);
            (*col).state = AtomicU32::new(state as u32);
            (*col).owner_xid = AtomicU32::new(0);
            (*col).lo = AtomicI64::new(i64::MAX);
            (*col).hi = AtomicI64::new(i64::MIN);
        }
        // Fill before publishing; on failure drop the half-built column.
        let epoch = self.snap_epoch.load(Ordering::Acquire);
        let mut retire = |_: Replaced| {};
        // SAFETY: the column is ours until published.
        let col = unsafe { arena.get::<Column>(c) };
        let rows = self.nrows();
        let res = (|| -> AllocResult<()> {
            let (mut values, mut nulls) = (RunPage::new(), RunPage::new());
            for row in 0..rows {
                let mut blob = NULL_OFF;
                if let Value::Blob(b) = fill {
                    blob = self.heap.alloc(arena, b.len().max(1))?;
                    // SAFETY: fresh allocation of b.len() bytes.
                    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), arena.ptr::<u8>(blob), b.len()) };
                }
                self.write_run_value(arena, col, row, &fill, blob, epoch, &mut values, &mut nulls, &mut retire)?;
            }
            Ok(())
        })();
        // On failure, pages and blobs of the half-built column stay owned
        // by the table's heap and are freed with the table.
        res?;
        self.col_slot(arena, i).store(c, Ordering::Release);
        if i == n {
            self.ncols.store(n as u32 + 1, Ordering::Release);
        }
        self.schema_gen.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    fn col_slot<'a>(&self, arena: &'a Arena, i: usize) -> &'a AtomicU64 {
        // SAFETY: `cols` is an array of MAX_COLUMNS atomics owned by the table.
        unsafe { &*arena.ptr::<AtomicU64>(self.cols + 8 * i as u64) }
    }

    pub fn ncols(&self) -> usize {
        self.ncols.load(Ordering::Acquire) as usize
    }

    /// Give column `i` the state `state`. A change of state is a change of
    /// schema: writers (`sync_columns` in the extension) skip their check
    /// of the columns while the generation they checked at holds.
    pub fn set_column_state(&self, arena: &Arena, i: usize, state: ColumnState) {
        let c = self.column(arena, i);
        if c.state() != state {
            c.set_state(state);
            self.schema_gen.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Changes whenever a column is added or replaced, or changes state.
    pub fn schema_gen(&self) -> u32 {
        self.schema_gen.load(Ordering::Acquire)
    }

    /// Does column `i` exist and hold values of its attribute (it is not a
    /// [`ColumnState::Leftover`])?
    pub fn has_column(&self, arena: &Arena, i: usize) -> bool {
        i < self.ncols() && self.column(arena, i).state() != ColumnState::Leftover
    }

    pub fn column<'a>(&self, arena: &'a Arena, i: usize) -> &'a Column {
        let off = self.col_slot(arena, i).load(Ordering::Acquire);
        debug_assert!(off != 0);
        // SAFETY: published column descriptors live as long as the table.
        unsafe { arena.get::<Column>(off) }
    }

    /// Row ids handed out so far (an upper bound for scans).
    pub fn nrows(&self) -> u64 {
        self.nrows.load(Ordering::Acquire)
    }

    /// Bytes of arena memory the table holds.
    pub fn bytes(&self) -> u64 {
        self.heap.owner.bytes() + PAGE_SIZE as u64
    }

    // ---- system columns --------------------------------------------------

    #[inline(always)]
    pub fn stamp<'a>(&self, arena: &'a Arena, row: u64) -> Option<&'a Stamp> {
        let p = self.stamps.page_for_row(arena, row)?;
        let i = (row & (self.stamps.rows_per_page() - 1)) as usize;
        // SAFETY: the page holds rows_per_page stamps.
        Some(unsafe { &*(p as *const Stamp).add(i) })
    }

    #[inline(always)]
    pub fn cids_of<'a>(&self, arena: &'a Arena, row: u64) -> Option<&'a Cids> {
        let p = self.cids.page_for_row(arena, row)?;
        let i = (row & (self.cids.rows_per_page() - 1)) as usize;
        // SAFETY: as above.
        Some(unsafe { &*(p as *const Cids).add(i) })
    }

    #[inline(always)]
    pub fn links_of<'a>(&self, arena: &'a Arena, row: u64) -> Option<&'a Links> {
        let p = self.links.page_for_row(arena, row)?;
        let i = (row & (self.links.rows_per_page() - 1)) as usize;
        // SAFETY: as above.
        Some(unsafe { &*(p as *const Links).add(i) })
    }

    /// Read a row's system columns. None while the row is absent or still
    /// being written. The copy can be torn against a concurrent modifier;
    /// pair it with [`row_unchanged`](Self::row_unchanged).
    pub fn header(&self, arena: &Arena, row: u64) -> Option<RowHeader> {
        let mut cur = Cursor::NEW;
        self.cursor_header(arena, &mut cur, row)
    }

    /// True when the row has not been modified since `h` was read.
    #[inline]
    pub fn row_unchanged(&self, arena: &Arena, row: u64, h: &RowHeader) -> bool {
        std::sync::atomic::fence(Ordering::Acquire);
        match self.stamp(arena, row) {
            Some(s) => (s.flags.load(Ordering::Acquire) & flag::SEQ_CHECK) == (h.flags & flag::SEQ_CHECK),
            None => false,
        }
    }

    /// Set hint bits learnt from the header `h`, unless the row changed
    /// since (a hint about an old `xmax` must not land on a new one). The
    /// caller is inside a reclamation epoch: the live stamp page found here
    /// may otherwise be replaced and freed before the bits land.
    pub fn set_hint(&self, arena: &Arena, row: u64, h: &RowHeader, bits: u32) {
        let Some(s) = self.stamp(arena, row) else { return };
        let bits = bits & flag::HINTS;
        let mut cur = s.flags.load(Ordering::Relaxed);
        while cur & flag::SEQ_CHECK == h.flags & flag::SEQ_CHECK && cur & bits != bits {
            match s.flags.compare_exchange_weak(cur, cur | bits, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
    }

    /// Take the row latch of `s`; returns the flags word as it was.
    pub(crate) fn latch_row(s: &Stamp) -> u32 {
        let mut spins = 0u32;
        loop {
            let f = s.flags.load(Ordering::Relaxed);
            if f & flag::LATCH == 0
                && s.flags.compare_exchange_weak(f, f | flag::LATCH, Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                return f;
            }
            spins += 1;
            if spins > 100 {
                std::thread::yield_now();
            }
            std::hint::spin_loop();
        }
    }

    /// Apply `change` to `row` if its header still equals `expected` (hint
    /// bits aside). This is the one place where existing rows change, so
    /// concurrent writers serialise here and, later, logging goes here.
    /// Returns false (and changes nothing) when the row moved on.
    pub fn modify_row(&self, arena: &Arena, row: u64, expected: &RowHeader, change: &RowChange) -> AllocResult<bool> {
        let _g = self.latch.shared();
        let epoch = self.snap_epoch.load(Ordering::Acquire);
        let mut retire = |r| self.retire_replaced(arena, r);
        // Make every page we may write private first (copy-on-write).
        let sp = self.stamps.page_for_write(arena, &self.heap, row, epoch, &mut retire)?;
        self.touch_block(arena, row);
        let cp = if change.xmax.is_some() { Some(self.cids.page_for_write(arena, &self.heap, row, epoch, &mut retire)?) } else { None };
        let lp = if change.next.is_some() { Some(self.links.page_for_write(arena, &self.heap, row, epoch, &mut retire)?) } else { None };
        // SAFETY: element indexes are within their pages.
        let s = unsafe { self.stamps.element::<Stamp>(sp, row) };
        let old = Self::latch_row(s);
        if !s.still_is(old, expected) {
            s.flags.store(old, Ordering::Release);
            return Ok(false);
        }
        let mut flags = old;
        if let Some(xmin) = change.xmin {
            s.xmin.store(xmin, Ordering::Relaxed);
        }
        if let Some((xmax, cmax)) = change.xmax {
            s.xmax.store(xmax, Ordering::Relaxed);
            flags &= !(flag::XMAX_COMMITTED | flag::XMAX_ABORTED);
            // SAFETY: as above, for cids.
            let c = unsafe { self.cids.element::<Cids>(cp.unwrap(), row) };
            c.cmax.store(cmax, Ordering::Relaxed);
        }
        flags = (flags | change.set_flags) & !change.clear_flags;
        if let Some(locker) = change.locker {
            s.locker.store(locker, Ordering::Relaxed);
        }
        if let Some(next) = change.next {
            // SAFETY: as above, for links.
            let l = unsafe { self.links.element::<Links>(lp.unwrap(), row) };
            if flags & flag::HAS_LINKS == 0 {
                l.chain.store(NULL_OFF, Ordering::Relaxed);
            }
            l.next.store(next, Ordering::Relaxed);
            flags |= flag::HAS_LINKS;
        }
        s.flags.store((flags & !flag::LATCH).wrapping_add(flag::SEQ_ONE), Ordering::Release);
        Ok(true)
    }

    // ---- cursors: scans that cache page pointers ------------------------------

    /// Start (or restart) a cursor: forget cached pages.
    pub fn cursor_reset(&self, cur: &mut Cursor, cols: &mut [ColCache]) {
        cur.cow_gen = self.cow_gen.load(Ordering::Acquire);
        cur.stamps.forget();
        cur.cids.forget();
        cur.links.forget();
        cur.summaries.forget();
        for c in cols.iter_mut() {
            c.values.forget();
            c.nulls.forget();
        }
    }

    /// Read a row's header through the cursor. Command ids and links are
    /// read only when they can matter: command ids while `xmin` or `xmax`
    /// may still belong to a running transaction, links when the row has a
    /// version chain or a successor.
    #[inline]
    pub fn cursor_header(&self, arena: &Arena, cur: &mut Cursor, row: u64) -> Option<RowHeader> {
        let sp = cur.stamps.page(arena, &self.stamps, row)?;
        // SAFETY: the page holds rows_per_page stamps.
        let s = unsafe { self.stamps.element::<Stamp>(sp, row) };
        let mut spins = 0u32;
        // A seqlock read: the fields are read between two loads of the
        // flags and read again if a writer latched the row in between.
        // Until 2026-11-29 they were not checked, and a header could pair
        // the creator before an undo with the chain after it: an aborted
        // in-place update read as an aborted insert, which VACUUM vacated.
        loop {
            let flags = loop {
                let f = s.flags.load(Ordering::Acquire);
                if f & flag::LATCH == 0 {
                    break f;
                }
                spins += 1;
                if spins > 100 {
                    std::thread::yield_now();
                }
                std::hint::spin_loop();
            };
            let h = self.header_fields(arena, cur, row, s, flags);
            if s.flags.load(Ordering::Acquire) & flag::SEQ_CHECK == flags & flag::SEQ_CHECK {
                return h;
            }
        }
    }

    /// The fields of a header whose flags word read `flags` (see
    /// [`cursor_header`](Self::cursor_header), which checks they belong together).
    #[inline]
    fn header_fields(&self, arena: &Arena, cur: &mut Cursor, row: u64, s: &Stamp, flags: u32) -> Option<RowHeader> {
        let xmin = s.xmin.load(Ordering::Acquire);
        if xmin == 0 || flags & flag::VACANT != 0 {
            return None;
        }
        let xmax = s.xmax.load(Ordering::Acquire);
        let mut h = RowHeader { xmin, xmax, flags, locker: s.locker.load(Ordering::Acquire), ..Default::default() };
        if flags & flag::XMIN_COMMITTED == 0 || (xmax != 0 && flags & (flag::XMAX_COMMITTED | flag::XMAX_ABORTED) == 0) {
            let cp = cur.cids.page(arena, &self.cids, row)?;
            // SAFETY: as above, for cids.
            let c = unsafe { self.cids.element::<Cids>(cp, row) };
            h.cmin = c.cmin.load(Ordering::Acquire);
            h.cmax = c.cmax.load(Ordering::Acquire);
        }
        if flags & flag::HAS_LINKS != 0 {
            let lp = cur.links.page(arena, &self.links, row)?;
            // SAFETY: as above, for links.
            let l = unsafe { self.links.element::<Links>(lp, row) };
            h.chain = l.chain.load(Ordering::Acquire);
            h.next = l.next.load(Ordering::Acquire);
        } else {
            h.next = u64::MAX;
        }
        Some(h)
    }

    /// Everything of `row`'s header, read through the cursor, and whether
    /// the row is vacant (None: no row there). For images of the table.
    pub fn cursor_full_header(&self, arena: &Arena, cur: &mut Cursor, row: u64) -> Option<(RowHeader, bool)> {
        let sp = cur.stamps.page(arena, &self.stamps, row)?;
        // SAFETY: the page holds rows_per_page stamps.
        let s = unsafe { self.stamps.element::<Stamp>(sp, row) };
        let flags = loop {
            let f = s.flags.load(Ordering::Acquire);
            if f & flag::LATCH == 0 {
                break f;
            }
            std::hint::spin_loop();
        };
        let xmin = s.xmin.load(Ordering::Acquire);
        if xmin == 0 && flags & flag::VACANT == 0 {
            return None;
        }
        let mut h = RowHeader { xmin, xmax: s.xmax.load(Ordering::Acquire), flags, locker: s.locker.load(Ordering::Acquire), ..Default::default() };
        if let Some(cp) = cur.cids.page(arena, &self.cids, row) {
            // SAFETY: as above, for cids.
            let c = unsafe { self.cids.element::<Cids>(cp, row) };
            h.cmin = c.cmin.load(Ordering::Acquire);
            h.cmax = c.cmax.load(Ordering::Acquire);
        }
        h.next = u64::MAX;
        if flags & flag::HAS_LINKS != 0 {
            if let Some(lp) = cur.links.page(arena, &self.links, row) {
                // SAFETY: as above, for links.
                let l = unsafe { self.links.element::<Links>(lp, row) };
                h.chain = l.chain.load(Ordering::Acquire);
                h.next = l.next.load(Ordering::Acquire);
            }
        }
        Some((h, flags & flag::VACANT != 0))
    }

    /// The creator of `row`, read through the cursor (no other checks: for
    /// blocks a summary vouches for).
    #[inline]
    pub fn cursor_xmin(&self, arena: &Arena, cur: &mut Cursor, row: u64) -> u32 {
        let Some(sp) = cur.stamps.page(arena, &self.stamps, row) else { return 0 };
        // SAFETY: the page holds rows_per_page stamps.
        unsafe { self.stamps.element::<Stamp>(sp, row) }.xmin.load(Ordering::Acquire)
    }

    /// True when no page the cursor may cache was replaced since it was
    /// (re)started; otherwise the cursor is reset.
    #[inline]
    pub fn cursor_pages_ok(&self, cur: &mut Cursor, cols: &mut [ColCache]) -> bool {
        if cur.frozen {
            return true;
        }
        if self.cow_gen.load(Ordering::Acquire) != cur.cow_gen {
            self.cursor_reset(cur, cols);
            return false;
        }
        true
    }

    /// True when neither the row nor any page the cursor caches changed
    /// since `h` was read. On false, the cursor has been reset: read again.
    #[inline]
    pub fn cursor_unchanged(&self, arena: &Arena, cur: &mut Cursor, cols: &mut [ColCache], row: u64, h: &RowHeader) -> bool {
        if cur.frozen {
            return true;
        }
        std::sync::atomic::fence(Ordering::Acquire);
        if self.cow_gen.load(Ordering::Acquire) != cur.cow_gen {
            self.cursor_reset(cur, cols);
            return false;
        }
        let Some(sp) = cur.stamps.page(arena, &self.stamps, row) else { return false };
        // SAFETY: as in cursor_header.
        let s = unsafe { self.stamps.element::<Stamp>(sp, row) };
        (s.flags.load(Ordering::Acquire) & flag::SEQ_CHECK) == (h.flags & flag::SEQ_CHECK)
    }

    /// The summary word of `block` as the cursor sees it (frozen or live).
    #[inline]
    pub fn cursor_summary(&self, arena: &Arena, cur: &mut Cursor, block: u64) -> u64 {
        match cur.summaries.page(arena, &self.summaries, block) {
            // SAFETY: the page holds rows_per_page summary words.
            Some(p) => unsafe {
                self.summaries.element::<AtomicU64>(p, block).load(Ordering::Acquire)
            },
            None => 0,
        }
    }

    /// Prepare a column cache for column `col`.
    pub fn col_cache(&self, arena: &Arena, col: usize) -> ColCache {
        let c = self.column(arena, col);
        ColCache {
            col: c as *const Column,
            kind: c.spec_kind,
            width_shift: c.width_shift,
            values: PageCache::EMPTY,
            nulls: PageCache::EMPTY,
        }
    }

    /// Start loading where `row`'s value (and null bit) in a column cache's
    /// column is. A hint: reading one row touches one cache line per column,
    /// and issuing every line first lets the misses overlap instead of
    /// queueing behind each other (index fetches of wide rows).
    #[inline]
    pub fn cursor_prefetch(&self, arena: &Arena, cc: &mut ColCache, row: u64) {
        // SAFETY: the cache was made by col_cache for a column of this table.
        let c = unsafe { &*cc.col };
        if let Some(np) = cc.nulls.page(arena, &c.nulls, row) {
            prefetch(np.wrapping_add(((row & (c.nulls.rows_per_page() - 1)) >> 3) as usize));
        }
        if let Some(p) = cc.values.page(arena, &c.values, row) {
            prefetch(p.wrapping_add(((row & (c.values.rows_per_page() - 1)) << cc.width_shift) as usize));
        }
    }

    /// [`cursor_prefetch`](Self::cursor_prefetch) for a row's stamp.
    #[inline]
    pub fn cursor_prefetch_stamp(&self, arena: &Arena, cur: &mut Cursor, row: u64) {
        if let Some(sp) = cur.stamps.page(arena, &self.stamps, row) {
            prefetch(sp.wrapping_add(((row & (self.stamps.rows_per_page() - 1)) as usize) * std::mem::size_of::<Stamp>()));
        }
    }

    /// Rows `row..row + max` of a column read through a cache, as far as the first of them
    /// share one values page and one null bitmap page: for filling vectors a page at a
    /// time instead of a value at a time.
    #[inline]
    pub fn cursor_run(&self, arena: &Arena, cc: &mut ColCache, row: u64, max: u64) -> Run {
        // SAFETY: the cache was made by col_cache for a column of this table.
        let c = unsafe { &*cc.col };
        let (per_values, per_nulls) = (c.values.rows_per_page(), c.nulls.rows_per_page());
        let len = max.min(per_values - (row & (per_values - 1))).min(per_nulls - (row & (per_nulls - 1)));
        let values = cc.values.page(arena, &c.values, row).map_or(std::ptr::null(), |p| {
            // SAFETY: the row's element is within its page.
            unsafe { p.add(((row & (per_values - 1)) << cc.width_shift) as usize) as *const u8 }
        });
        let nulls = cc.nulls.page(arena, &c.nulls, row).map_or(std::ptr::null_mut(), |p| p);
        Run { values, nulls, first_bit: row & (per_nulls - 1), len }
    }

    /// Read a value through a column cache.
    #[inline]
    pub fn cursor_value(&self, arena: &Arena, cc: &mut ColCache, row: u64) -> ValueRef {
        // SAFETY: the cache was made by col_cache for a column of this table.
        let c = unsafe { &*cc.col };
        if let Some(np) = cc.nulls.page(arena, &c.nulls, row) {
            if bits::get(np, row & (c.nulls.rows_per_page() - 1)) {
                return ValueRef::Null;
            }
        }
        let Some(p) = cc.values.page(arena, &c.values, row) else {
            return ValueRef::Null;
        };
        let elem = (row & (c.values.rows_per_page() - 1)) << cc.width_shift;
        // SAFETY: elem is within the page, an element of this column.
        unsafe { decode_slot(arena, cc.kind, p.add(elem as usize)) }
    }

    // ---- values -----------------------------------------------------------

    /// Where the value of column `col` of `row` is stored in the live table.
    #[inline]
    pub fn value(&self, arena: &Arena, col: usize, row: u64) -> ValueRef {
        let c = self.column(arena, col);
        if let Some(np) = c.nulls.page_for_row(arena, row) {
            if bits::get(np, row & (c.nulls.rows_per_page() - 1)) {
                return ValueRef::Null;
            }
        }
        let Some(p) = c.values.page_for_row(arena, row) else {
            return ValueRef::Null;
        };
        let elem = (row & (c.values.rows_per_page() - 1)) << c.width_shift;
        // SAFETY: elem is within the page, an element of this column.
        unsafe { decode_slot(arena, c.spec_kind, p.add(elem as usize)) }
    }

    // ---- writing ------------------------------------------------------------

    /// Copy the blob values of one row into the heap (outside any latch).
    /// Returns one offset per value (NULL_OFF for non-blobs). Takes any
    /// sequence of values, so callers holding them in pairs (an in-place
    /// UPDATE's changed columns) need not collect them first.
    pub fn prepare_blobs<'v, 'b: 'v>(
        &self,
        arena: &Arena,
        values: impl IntoIterator<Item = &'v Value<'b>>,
        out: &mut Vec<Off>,
    ) -> AllocResult<()> {
        let start = out.len();
        for v in values {
            let off = match v {
                Value::Blob(b) => match self.heap.alloc(arena, b.len().max(1)) {
                    Ok(off) => {
                        // SAFETY: fresh allocation of at least b.len() bytes.
                        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), arena.ptr::<u8>(off), b.len()) };
                        off
                    }
                    Err(e) => {
                        for o in out.drain(start..) {
                            if o != NULL_OFF {
                                self.heap.free(arena, o);
                            }
                        }
                        return Err(e);
                    }
                },
                _ => NULL_OFF,
            };
            out.push(off);
        }
        Ok(())
    }

    /// Free blobs prepared by [`prepare_blobs`](Self::prepare_blobs) that
    /// were not stored.
    pub fn discard_blobs(&self, arena: &Arena, blobs: &[Off]) {
        for &o in blobs {
            if o != NULL_OFF {
                self.heap.free(arena, o);
            }
        }
    }

    pub(crate) fn retire_page(&self, arena: &Arena, page: u32) {
        self.cow_gen.fetch_add(1, Ordering::AcqRel);
        self.retire(arena, RetiredKind::Page, page as u64);
    }

    /// Retire what a page-table write replaced: cursors that cached it
    /// start over (`cow_gen`).
    pub(crate) fn retire_replaced(&self, arena: &Arena, r: Replaced) {
        match r {
            Replaced::Page(p) => self.retire_page(arena, p),
            Replaced::Chunk(c) => {
                self.cow_gen.fetch_add(1, Ordering::AcqRel);
                self.retire(arena, RetiredKind::Object, c);
            }
        }
    }

    /// Keep `what` until no reader or snapshot that could hold a pointer to
    /// it remains, then free it ([`reclaim`](Self::reclaim)).
    pub(crate) fn retire(&self, arena: &Arena, kind: RetiredKind, what: u64) {
        let rec = match self.heap.alloc(arena, std::mem::size_of::<Retired>()) {
            Ok(r) => r,
            // Without room to remember it, leak the page into the table: it
            // is freed with the table. Correct, merely wasteful.
            Err(_) => return,
        };
        let _g = self.retire_lock.lock();
        // SAFETY: fresh allocation for a Retired record; the tail, if any, is
        // a live record on the list (both under retire_lock).
        unsafe {
            let r: *mut Retired = arena.ptr(rec);
            (*r).what = what;
            (*r).kind = kind as u32;
            (*r).snap_epoch = self.snap_epoch.load(Ordering::Acquire);
            (*r).ebr_epoch = arena.epoch_retire();
            (*r).next = NULL_OFF;
            match self.retired_tail.load(Ordering::Relaxed) {
                NULL_OFF => self.retired.store(rec, Ordering::Relaxed),
                tail => (*arena.ptr::<Retired>(tail)).next = rec,
            }
        }
        self.retired_tail.store(rec, Ordering::Relaxed);
        self.retired_len.fetch_add(1, Ordering::Relaxed);
    }

    /// True when enough memory waits on the retired list that a writer
    /// should reclaim it ([`reclaim`](Self::reclaim)) rather than leave it
    /// to VACUUM: freed undo records and pages are then reused while they
    /// are still in the caches, instead of the table growing into fresh
    /// pages between VACUUMs.
    pub fn reclaim_due(&self) -> bool {
        self.retired_len.load(Ordering::Relaxed) >= RECLAIM_BATCH
    }

    /// Free retired memory that no snapshot and no reader can still use;
    /// returns how many records were freed. The list is in retirement
    /// order, and both epochs a record carries grow along it, so the
    /// records to free are a prefix of it.
    pub fn reclaim(&self, arena: &Arena) -> usize {
        let mut freed = 0;
        let _g = self.retire_lock.lock();
        // Both horizons are read under the lock, after every record on the
        // list was retired: a snapshot listed since shares none of those
        // pages with the live table (they were replaced before it was
        // made). Read before the lock (until 2026-12-06), a snapshot could
        // be made and a page it shared replaced and retired in between, and
        // that page freed under it.
        let oldest_snapshot = self.oldest_snapshot_epoch(arena);
        let oldest_reader = arena.oldest_reader_epoch();
        let mut cur = self.retired.load(Ordering::Relaxed);
        while cur != NULL_OFF {
            let r: *mut Retired = arena.ptr(cur);
            // SAFETY: records on the list are live allocations of ours.
            let (next, what, kind, se, ee) = unsafe { ((*r).next, (*r).what, (*r).kind, (*r).snap_epoch, (*r).ebr_epoch) };
            if se >= oldest_snapshot || ee >= oldest_reader {
                break;
            }
            match kind {
                k if k == RetiredKind::Page as u32 => arena.free_pages(&self.heap.owner, page_no_off(what as u32)),
                k if k == RetiredKind::UndoRec as u32 => self.free_undo_rec(arena, what, true),
                _ => self.heap.free(arena, what),
            }
            self.heap.free(arena, cur);
            freed += 1;
            cur = next;
        }
        self.retired.store(cur, Ordering::Relaxed);
        if cur == NULL_OFF {
            self.retired_tail.store(NULL_OFF, Ordering::Relaxed);
        }
        self.retired_len.fetch_sub(freed as u64, Ordering::Relaxed);
        freed
    }

    /// Store one value (`blob`: its prepared blob, if any) in column `c`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn write_one(
        &self,
        arena: &Arena,
        c: &Column,
        row: u64,
        v: &Value,
        blob: Off,
        epoch: u32,
        retire: &mut dyn FnMut(Replaced),
    ) -> AllocResult<()> {
        self.write_run_value(arena, c, row, v, blob, epoch, &mut RunPage::new(), &mut RunPage::new(), retire)
    }

    /// Insert rows created by `(xid, cid)`. `rows[i]` holds one value per
    /// column; `blobs` the result of [`prepare_blobs`](Self::prepare_blobs)
    /// for all rows in order. The new rows' ids go to `out`.
    ///
    /// On error no row of the batch is published: all stay vacant, go back
    /// to the free list, and their blobs are freed.
    #[allow(clippy::too_many_arguments)] // a row's full stamp, spelt out
    pub fn insert_rows(
        &self,
        arena: &Arena,
        rows: &[&[Value]],
        blobs: &[Off],
        xid: u32,
        cid: u32,
        extra_flags: u32,
        locker: u32,
        out: &mut Vec<u64>,
    ) -> AllocResult<()> {
        let ncols = self.ncols();
        assert!(rows.iter().all(|values| values.len() == ncols));
        out.clear();
        self.take_free_rows(arena, rows.len(), out);
        let _g = self.latch.shared();
        let epoch = self.snap_epoch.load(Ordering::Acquire);
        if out.len() < rows.len() {
            let n = (rows.len() - out.len()) as u64;
            let first = self.nrows.fetch_add(n, Ordering::AcqRel);
            out.extend(first..first + n);
        }
        if let Err(e) = self.write_new_rows(arena, out, rows, blobs, xid, cid, extra_flags, locker, epoch) {
            for &r in out.iter() {
                if let Some(s) = self.stamp(arena, r) {
                    s.flags.fetch_or(flag::VACANT, Ordering::Release);
                }
            }
            self.discard_blobs(arena, blobs);
            let ids = std::mem::take(out);
            drop(_g);
            self.push_free_rows(arena, &ids);
            return Err(e);
        }
        Ok(())
    }

    /// Write whole rows at `ids`, ids nobody else uses (fresh, from the free
    /// list, or given by redo), and publish them. The system columns' pages
    /// come first and keep the rows unpublished; then each column is
    /// written down the batch, so that a page is looked up once for the
    /// rows it holds rather than once per value (a COPY batch's rows are
    /// consecutive); then the stamps publish the rows. An error leaves
    /// every row unpublished. The caller holds the latch shared.
    #[allow(clippy::too_many_arguments)] // a row's full stamp, spelt out
    fn write_new_rows(
        &self,
        arena: &Arena,
        ids: &[u64],
        rows: &[&[Value]],
        blobs: &[Off],
        xid: u32,
        cid: u32,
        extra_flags: u32,
        locker: u32,
        epoch: u32,
    ) -> AllocResult<()> {
        let ncols = self.ncols();
        let mut retire = |r| self.retire_replaced(arena, r);
        let (mut stamps, mut cids, mut summaries) = (RunPage::new(), RunPage::new(), RunPage::new());
        for &row in ids {
            // system columns first: their pages must exist before xmin is set
            let sp = stamps.writable(&self.stamps, arena, &self.heap, row, epoch, &mut retire)?;
            // SAFETY: element index within the page; the row id is ours alone.
            let s = unsafe { self.stamps.element::<Stamp>(sp, row) };
            // Keep the row unpublished while we write it: fresh rows have
            // xmin 0, reused ones stay VACANT until the final store.
            let old = s.flags.load(Ordering::Relaxed);
            s.flags.store(old | flag::VACANT, Ordering::Relaxed);
            // The block's summary word must exist, so that every later
            // writer's touch bumps it (see `mark_block_clean`); ours first.
            let block = row >> crate::version::SUMMARY_ROWS_SHIFT;
            let wp = summaries.writable(&self.summaries, arena, &self.heap, block, epoch, &mut retire)?;
            // SAFETY: the live page holding `block`'s word.
            crate::version::touch_summary(unsafe { self.summaries.element::<AtomicU64>(wp, block) });
            cids.writable(&self.cids, arena, &self.heap, row, epoch, &mut retire)?;
        }
        for i in 0..ncols {
            let c = self.column(arena, i);
            let (mut values, mut nulls) = (RunPage::new(), RunPage::new());
            for (k, &row) in ids.iter().enumerate() {
                self.write_run_value(arena, c, row, &rows[k][i], blobs[k * ncols + i], epoch, &mut values, &mut nulls, &mut retire)?;
            }
        }
        // Publish. Every page below was made private above (and no snapshot
        // can start: we hold the latch), so reading it suffices.
        let (mut stamps, mut cids) = (RunPage::new(), RunPage::new());
        for &row in ids {
            // SAFETY: element indexes within their pages, made above.
            let (s, c) = unsafe {
                (
                    self.stamps.element::<Stamp>(stamps.readable(&self.stamps, arena, row), row),
                    self.cids.element::<Cids>(cids.readable(&self.cids, arena, row), row),
                )
            };
            c.cmin.store(cid, Ordering::Relaxed);
            c.cmax.store(0, Ordering::Relaxed);
            // Links stay unwritten (their pages may not even exist) until a
            // row gets a version chain or a successor.
            s.xmax.store(0, Ordering::Relaxed);
            s.locker.store(locker, Ordering::Relaxed);
            s.xmin.store(xid, Ordering::Release);
            let seq = (s.flags.load(Ordering::Relaxed) & !((1 << flag::SEQ_SHIFT) - 1)).wrapping_add(flag::SEQ_ONE);
            s.flags.store(seq | extra_flags, Ordering::Release);
        }
        Ok(())
    }

    /// [`write_one`](Self::write_one), where `values` and `nulls` are the
    /// column's pages the rows before this one went to (a batch written
    /// column by column), looked up again only when `row` is on another.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn write_run_value(
        &self,
        arena: &Arena,
        c: &Column,
        row: u64,
        v: &Value,
        blob: Off,
        epoch: u32,
        values: &mut RunPage,
        nulls: &mut RunPage,
        retire: &mut dyn FnMut(Replaced),
    ) -> AllocResult<()> {
        let is_null = matches!(v, Value::Null);
        // The null bitmap page only exists once a NULL was stored.
        if is_null || !nulls.readable_or_null(&c.nulls, arena, row).is_null() {
            let np = nulls.writable(&c.nulls, arena, &self.heap, row, epoch, retire)?;
            bits::set(np, row & (c.nulls.rows_per_page() - 1), is_null);
        }
        if is_null {
            return Ok(());
        }
        let p = values.writable(&c.values, arena, &self.heap, row, epoch, retire)?;
        // SAFETY: element index within the page.
        let dst = unsafe { p.add(((row & (c.values.rows_per_page() - 1)) as usize) << c.width_shift) };
        write_value(c, dst, v, blob);
        Ok(())
    }

    /// Redo of an insert: write a row at the given id, extending the table
    /// if needed (ids in between stay absent). `flags` are the row's flags
    /// as first stored (hint and latch bits are dropped).
    #[allow(clippy::too_many_arguments)] // a row's full stamp, spelt out
    pub fn insert_row_at(
        &self,
        arena: &Arena,
        row: u64,
        values: &[Value],
        xmin: u32,
        cmin: u32,
        flags: u32,
        locker: u32,
    ) -> AllocResult<()> {
        let mut padded: Vec<Value> = values.to_vec();
        padded.resize(self.ncols(), Value::Null);
        let mut blobs = vec![];
        self.prepare_blobs(arena, &padded, &mut blobs)?;
        let _g = self.latch.shared();
        let epoch = self.snap_epoch.load(Ordering::Acquire);
        let keep = flags & !(flag::HINTS | flag::LATCH | flag::SEQ_CHECK);
        let res = self.write_new_rows(arena, &[row], &[&padded], &blobs, xmin, cmin, keep, locker, epoch);
        if res.is_err() {
            self.discard_blobs(arena, &blobs);
        } else {
            self.nrows.fetch_max(row + 1, Ordering::AcqRel);
        }
        res
    }

    /// Forget every reusable row id (redo rebuilds the list afterwards).
    pub(crate) fn clear_free_rows(&self, arena: &Arena) {
        let _g = self.free_lock.lock();
        let mut head = self.free_head.swap(NULL_OFF, Ordering::Relaxed);
        while head != NULL_OFF {
            // SAFETY: chunks on the stack are live allocations of ours.
            let next = unsafe { (*arena.ptr::<FreeChunk>(head)).next };
            self.heap.free(arena, head);
            head = next;
        }
        self.free_count.store(0, Ordering::Relaxed);
    }

    /// Offer vacant rows for reuse.
    pub(crate) fn push_vacant_rows(&self, arena: &Arena, rows: &[u64]) {
        self.push_free_rows(arena, rows);
    }

    /// Pop up to `n` reusable row ids into `out`.
    fn take_free_rows(&self, arena: &Arena, n: usize, out: &mut Vec<u64>) {
        if self.free_count.load(Ordering::Relaxed) == 0 {
            return;
        }
        let _g = self.free_lock.lock();
        while out.len() < n {
            let head = self.free_head.load(Ordering::Relaxed);
            if head == NULL_OFF {
                break;
            }
            // SAFETY: chunks on the stack are live allocations of ours,
            // guarded by free_lock.
            let c = unsafe { &mut *arena.ptr::<FreeChunk>(head) };
            while out.len() < n && c.count > 0 {
                c.count -= 1;
                out.push(c.rows[c.count as usize]);
                self.free_count.fetch_sub(1, Ordering::Relaxed);
            }
            if c.count == 0 {
                self.free_head.store(c.next, Ordering::Relaxed);
                self.heap.free(arena, head);
            }
        }
    }

    /// Make vacant rows available for reuse. Rows that do not fit for lack
    /// of memory simply stay vacant.
    fn push_free_rows(&self, arena: &Arena, rows: &[u64]) {
        let _g = self.free_lock.lock();
        for &r in rows {
            let mut head = self.free_head.load(Ordering::Relaxed);
            // SAFETY: as in take_free_rows.
            if head == NULL_OFF || unsafe { (*arena.ptr::<FreeChunk>(head)).count } as usize == FREE_CHUNK_ROWS {
                let Ok(fresh) = self.heap.alloc(arena, std::mem::size_of::<FreeChunk>()) else { return };
                // SAFETY: fresh allocation for a FreeChunk.
                unsafe {
                    let c = arena.ptr::<FreeChunk>(fresh);
                    (*c).next = head;
                    (*c).count = 0;
                }
                self.free_head.store(fresh, Ordering::Relaxed);
                head = fresh;
            }
            // SAFETY: as above.
            let c = unsafe { &mut *arena.ptr::<FreeChunk>(head) };
            c.rows[c.count as usize] = r;
            c.count += 1;
            self.free_count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Copy `row` (header `h`) into `dst`, a table with the same column
    /// layout, keeping its creator and deleter stamps (VACUUM FULL, CLUSTER,
    /// SET TABLESPACE). Returns the new row id; successor links are the
    /// caller's to remap.
    pub fn copy_row_to(&self, arena: &Arena, row: u64, h: &RowHeader, dst: &Table) -> AllocResult<u64> {
        self.copy_row_to_at(arena, row, h, dst, None)
    }

    /// [`copy_row_to`](Self::copy_row_to), at row id `at` of `dst` when
    /// given (copies that keep every row id).
    pub fn copy_row_to_at(&self, arena: &Arena, row: u64, h: &RowHeader, dst: &Table, at: Option<u64>) -> AllocResult<u64> {
        let ncols = self.ncols().min(dst.ncols());
        let mut holders: Vec<ValueRef> = Vec::with_capacity(dst.ncols());
        for i in 0..dst.ncols() {
            holders.push(if i < ncols { self.value(arena, i, row) } else { ValueRef::Null });
        }
        let values: Vec<Value> = holders
            .iter()
            .enumerate()
            .map(|(i, v)| {
                // SAFETY: pointers from `value` point at stored elements of
                // the column's width (or blobs of their recorded length).
                unsafe {
                    match *v {
                        ValueRef::Null => Value::Null,
                        ValueRef::Fixed(p) => {
                            Value::Fixed(std::slice::from_raw_parts(p, 1 << self.column(arena, i).width_shift))
                        }
                        ValueRef::Inline(p) => Value::Inline(std::slice::from_raw_parts(p, 1 << self.column(arena, i).width_shift)),
                        ValueRef::Blob(p, n) => Value::Blob(std::slice::from_raw_parts(p, n as usize)),
                    }
                }
            })
            .collect();
        debug_assert!((0..ncols).all(|i| self.column(arena, i).spec() == dst.column(arena, i).spec()));
        let mut blobs = vec![];
        dst.prepare_blobs(arena, &values, &mut blobs)?;
        let keep = h.flags & (flag::HINTS | flag::SPECULATIVE);
        let new = match at {
            Some(r) => {
                dst.discard_blobs(arena, &blobs);
                dst.insert_row_at(arena, r, &values, h.xmin, h.cmin, keep & flag::SPECULATIVE, 0)?;
                r
            }
            None => {
                let mut out = vec![];
                dst.insert_rows(arena, &[&values], &blobs, h.xmin, h.cmin, keep & !(flag::XMAX_COMMITTED | flag::XMAX_ABORTED), 0, &mut out)?;
                out[0]
            }
        };
        if h.chain != NULL_OFF {
            let chain = self.copy_chain_to(arena, h.chain, dst)?;
            dst.set_chain(arena, new, chain)?;
        }
        if h.xmax != 0 {
            let now = dst.header(arena, new).expect("row just written");
            let change = RowChange {
                xmax: Some((h.xmax, h.cmax)),
                set_flags: h.flags & (flag::XMAX_COMMITTED | flag::XMAX_ABORTED | flag::UPDATED | flag::MOVED),
                ..Default::default()
            };
            dst.modify_row(arena, new, &now, &change)?;
        }
        Ok(new)
    }

    /// Reusable row ids.
    pub fn free_rows(&self) -> u64 {
        self.free_count.load(Ordering::Relaxed)
    }

    /// Remember that versions superseded by `xid` (a committed updater or
    /// deleter) were removed: the horizon only moves forward, in xid order
    /// (modulo 2^32, as PostgreSQL compares normal xids). Special xids
    /// (below 3) are ignored.
    pub fn note_removed(&self, xid: u32) {
        if xid < 3 {
            return;
        }
        let mut cur = self.removed_horizon.load(Ordering::Acquire);
        while cur == 0 || xid_follows(xid, cur) {
            match self.removed_horizon.compare_exchange_weak(cur, xid, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
    }

    /// The newest xid [`note_removed`](Self::note_removed) was given (0: none).
    pub fn removed_horizon(&self) -> u32 {
        self.removed_horizon.load(Ordering::Acquire)
    }

    /// Reclaim dead rows (VACUUM): free their blobs, mark them vacant and
    /// make them reusable. The caller guarantees no snapshot can see them
    /// and their index entries are gone.
    pub fn vacate_rows(&self, arena: &Arena, rows: &[u64]) {
        let mut freed = Vec::with_capacity(rows.len());
        {
            let _g = self.latch.shared();
            let epoch = self.snap_epoch.load(Ordering::Acquire);
            let mut retire = |r| self.retire_replaced(arena, r);
            let ncols = self.ncols();
            for &row in rows {
                if self.stamp(arena, row).is_none() {
                    continue;
                }
                // Snapshots keep seeing the row as it was: write a private page.
                let Ok(sp) = self.stamps.page_for_write(arena, &self.heap, row, epoch, &mut retire) else { continue };
                // SAFETY: element index within the page.
                let s = unsafe { self.stamps.element::<Stamp>(sp, row) };
                self.touch_block(arena, row);
                let old = Self::latch_row(s);
                if old & flag::VACANT != 0 {
                    s.flags.store(old, Ordering::Release);
                    continue;
                }
                for i in 0..ncols {
                    let c = self.column(arena, i);
                    if c.spec_kind != ColumnKind::Var as u32 {
                        continue;
                    }
                    if let ValueRef::Blob(p, _) = self.value(arena, i, row) {
                        self.heap.free(arena, arena.off_of(p));
                    }
                }
                // Older versions of a dead row are dead too.
                if old & flag::HAS_LINKS != 0 {
                    if let Some(l) = self.links_of(arena, row) {
                        let mut cur = l.chain.swap(NULL_OFF, Ordering::AcqRel);
                        while cur != NULL_OFF {
                            // SAFETY: linked records are allocated.
                            let next = unsafe { arena.get::<crate::version::UndoRec>(cur) }.next.load(Ordering::Acquire);
                            self.retire(arena, RetiredKind::UndoRec, cur);
                            cur = next;
                        }
                    }
                }
                s.flags.store((old | flag::VACANT).wrapping_add(flag::SEQ_ONE) & !flag::LATCH, Ordering::Release);
                freed.push(row);
            }
        }
        self.push_free_rows(arena, &freed);
    }

    /// Give back pages whose rows are all vacant (after VACUUM). Returns the
    /// number of pages released.
    pub fn release_vacant_pages(&self, arena: &Arena) -> usize {
        let _g = self.latch.exclusive();
        let nrows = self.nrows();
        let per = self.stamps.rows_per_page();
        // Which stamp pages (runs of `per` rows) hold only vacant rows?
        let nstamp_pages = nrows.div_ceil(per);
        let mut vacant = vec![false; nstamp_pages as usize];
        for (p, v) in vacant.iter_mut().enumerate() {
            let first = p as u64 * per;
            let Some(page) = self.stamps.page_for_row(arena, first) else {
                *v = true;
                continue;
            };
            let last = (first + per).min(nrows);
            // SAFETY: the page holds `per` stamps.
            let stamps = unsafe { std::slice::from_raw_parts(page as *const Stamp, per as usize) };
            *v = (first..last).all(|r| stamps[(r - first) as usize].flags.load(Ordering::Relaxed) & flag::VACANT != 0)
                && last == first + per;
        }
        let all_vacant = |first: u64, n: u64| -> bool {
            let (a, b) = (first / per, (first + n).div_ceil(per));
            b <= nstamp_pages && (a..b).all(|p| vacant[p as usize])
        };
        let mut released = 0;
        let mut release = |pt: &PageTable| {
            let rpp = pt.rows_per_page();
            let mut idxs = vec![];
            pt.for_each_entry(arena, |idx, _| {
                if all_vacant(idx * rpp, rpp) {
                    idxs.push(idx);
                }
            });
            let epoch = self.snap_epoch.load(Ordering::Acquire);
            let mut retire = |r| self.retire_replaced(arena, r);
            for idx in idxs {
                // Without memory to copy a shared chunk, the page stays.
                let Ok(e) = pt.take_page(arena, &self.heap, idx, epoch, &mut retire) else { break };
                if e != 0 {
                    retire(Replaced::Page(crate::column::entry_page(e)));
                    released += 1;
                }
            }
        };
        for i in 0..self.ncols() {
            let c = self.column(arena, i);
            release(&c.values);
            release(&c.nulls);
        }
        release(&self.cids);
        release(&self.links);
        release(&self.stamps);
        released
    }
}

/// Decode a stored element of a column of kind `kind` at `ptr`.
///
/// # Safety
/// `ptr` must point at a stored element of such a column (16 bytes for
/// variable-length columns).
#[inline(always)]
pub unsafe fn decode_slot(arena: &Arena, kind: u32, ptr: *const u8) -> ValueRef {
    if kind == ColumnKind::Var as u32 {
        // SAFETY: var slots are 16 bytes.
        unsafe {
            if *ptr != 0 {
                ValueRef::Inline(ptr)
            } else {
                let len = (ptr.add(4) as *const u32).read_unaligned();
                let off = (ptr.add(8) as *const u64).read_unaligned();
                ValueRef::Blob(arena.ptr::<u8>(off), len)
            }
        }
    } else {
        ValueRef::Fixed(ptr)
    }
}

/// [`Table::loading`] while the table is being loaded: whoever finds it
/// waits.
pub const LOADING: u32 = 1;

/// The set of tables: an open-addressing hash from [`TableKey`] to table.
#[repr(C)]
pub struct Directory {
    lock: SpinLock,
    capacity: u32,
    count: u32,
    /// Tables whose fate a prepared transaction decides.
    prepared: AtomicU32,
    /// The table whose log redo is switching to a new image now (on a hot
    /// standby), if `switching_set`; guarded by `lock`. See
    /// [`begin_switch`](Self::begin_switch).
    switching: TableKey,
    switching_set: u32,
    /// Tables whose load failed, out of the directory but perhaps still
    /// seen by a process that looked them up (a list through
    /// `Table::abandoned_next`; guarded by `lock`). See
    /// [`abandon`](Self::abandon).
    abandoned: AtomicU64,
    slots: Off,
    /// Header pages of the tables and the slot array itself.
    pub owner: PageOwner,
}

#[repr(C)]
struct DirSlot {
    key: TableKey,
    table: Off,
    state: u32,
    _pad: u32,
}

const SLOT_EMPTY: u32 = 0;
const SLOT_USED: u32 = 1;
const SLOT_TOMB: u32 = 2;

fn hash_key(k: &TableKey) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for w in k {
        h ^= *w as u64;
        h = h.wrapping_mul(0x1000_0000_01b3);
        h ^= h >> 29;
    }
    h
}

impl Directory {
    /// Create the directory in a fresh arena and publish it as the root.
    pub fn create(arena: &Arena, capacity: u32) -> AllocResult<&Directory> {
        let capacity = capacity.next_power_of_two();
        let bytes = std::mem::size_of::<Directory>() + capacity as usize * std::mem::size_of::<DirSlot>();
        let pages = bytes.div_ceil(PAGE_SIZE) as u32;
        // The directory owns its own pages; a temporary owner records them.
        let tmp = PageOwner::new();
        let off = arena.alloc_pages(&tmp, pages)?;
        let d: *mut Directory = arena.ptr(off);
        // SAFETY: fresh zeroed pages.
        unsafe {
            (*d).lock.init();
            (*d).capacity = capacity;
            (*d).count = 0;
            (*d).prepared = AtomicU32::new(0);
            (*d).switching = [0; 4];
            (*d).switching_set = 0;
            (*d).abandoned = AtomicU64::new(NULL_OFF);
            (*d).slots = off + std::mem::size_of::<Directory>().next_multiple_of(64) as u64;
            (*d).owner.adopt(&tmp);
        }
        arena.root().store(off, Ordering::Release);
        // SAFETY: initialised above.
        Ok(unsafe { &*d })
    }

    /// The directory of a formatted arena, if created.
    pub fn get(arena: &Arena) -> Option<&Directory> {
        let off = arena.root().load(Ordering::Acquire);
        if off == NULL_OFF {
            None
        } else {
            // SAFETY: the root is the directory published by `create`.
            Some(unsafe { arena.get::<Directory>(off) })
        }
    }

    // Arena memory is shared and mutable behind `&`; `lock` guards slots.
    #[allow(clippy::mut_from_ref)]
    fn slot<'a>(&self, arena: &'a Arena, i: u32) -> &'a mut DirSlot {
        // SAFETY: i < capacity; the lock guards slot contents.
        unsafe { &mut *arena.ptr::<DirSlot>(self.slots + i as u64 * std::mem::size_of::<DirSlot>() as u64) }
    }

    fn find(&self, arena: &Arena, key: &TableKey) -> Option<u32> {
        let mask = self.capacity - 1;
        let mut i = (hash_key(key) as u32) & mask;
        for _ in 0..self.capacity {
            let s = self.slot(arena, i);
            match s.state {
                SLOT_EMPTY => return None,
                SLOT_USED if s.key == *key => return Some(i),
                _ => {}
            }
            i = (i + 1) & mask;
        }
        None
    }

    pub fn lookup<'a>(&self, arena: &'a Arena, key: &TableKey) -> Option<&'a Table> {
        let _g = self.lock.lock();
        let i = self.find(arena, key)?;
        // SAFETY: used slots point at live tables.
        Some(unsafe { arena.get::<Table>(self.slot(arena, i).table) })
    }

    /// Find the table for `key`, creating it with `specs` if missing.
    pub fn get_or_create<'a>(
        &self,
        arena: &'a Arena,
        key: &TableKey,
        specs: &dyn Fn() -> Vec<ColumnSpec>,
    ) -> AllocResult<&'a Table> {
        self.find_or_create(arena, key, specs, false).map(|(t, _)| t)
    }

    /// Find the table for `key`, or create it with `specs`: then, with
    /// `loading`, it is published with its `loading` flag set (whoever
    /// finds it waits until the creator has filled it). Returns whether it
    /// was created.
    pub fn find_or_create<'a>(
        &self,
        arena: &'a Arena,
        key: &TableKey,
        specs: &dyn Fn() -> Vec<ColumnSpec>,
        loading: bool,
    ) -> AllocResult<(&'a Table, bool)> {
        let _g = self.lock.lock();
        if let Some(i) = self.find(arena, key) {
            // SAFETY: used slots point at live tables.
            return Ok((unsafe { arena.get::<Table>(self.slot(arena, i).table) }, false));
        }
        if (self.count + 1) * 4 > self.capacity * 3 {
            return Err(AllocError::OutOfMemory { requested: std::mem::size_of::<DirSlot>() as u64 });
        }
        let table = Table::create(arena, &self.owner, *key, &specs())?;
        table.loading.store(if loading { LOADING } else { 0 }, Ordering::Release);
        let mask = self.capacity - 1;
        let mut i = (hash_key(key) as u32) & mask;
        loop {
            let s = self.slot(arena, i);
            if s.state != SLOT_USED {
                s.key = *key;
                s.table = arena.off_of(table as *const Table);
                s.state = SLOT_USED;
                break;
            }
            i = (i + 1) & mask;
        }
        // SAFETY: count is guarded by the lock.
        unsafe { (*(self as *const Directory as *mut Directory)).count += 1 };
        Ok((table, true))
    }

    /// Remove and free the table for `key`. Returns false if there is none.
    pub fn drop_table(&self, arena: &Arena, key: &TableKey) -> bool {
        let table = {
            let _g = self.lock.lock();
            let Some(i) = self.find(arena, key) else { return false };
            let s = self.slot(arena, i);
            s.state = SLOT_TOMB;
            // SAFETY: count is guarded by the lock.
            unsafe { (*(self as *const Directory as *mut Directory)).count -= 1 };
            s.table
        };
        // SAFETY: the slot pointed at a live table, now unreachable.
        let t = unsafe { arena.get::<Table>(table) };
        t.destroy(arena, &self.owner);
        true
    }

    /// Take `table`, whose load failed (an error, a cancel, its loader
    /// exiting), out of the directory, so that the next process to look its
    /// key up creates it afresh and loads it again. Others may have looked
    /// it up already: it is freed by [`free_abandoned`](Self::free_abandoned)
    /// once every process that was inside a reclamation epoch then has left
    /// it. So whoever waits for a load looks the key up again, inside an
    /// epoch, each time it checks whether the load is over.
    pub fn abandon(&self, arena: &Arena, table: &Table) {
        let off = arena.off_of(table as *const Table);
        {
            let _g = self.lock.lock();
            let Some(i) = self.find(arena, &table.key).filter(|&i| self.slot(arena, i).table == off) else {
                // (no longer listed: dropped, and freed, by whoever removed it)
                return;
            };
            self.slot(arena, i).state = SLOT_TOMB;
            // SAFETY: count is guarded by the lock.
            unsafe { (*(self as *const Directory as *mut Directory)).count -= 1 };
            // Retired after it became unreachable: a process that can still
            // hold it entered its epoch before this one ended.
            table.abandoned_epoch.store(arena.epoch_retire(), Ordering::Relaxed);
            table.abandoned_next.store(self.abandoned.load(Ordering::Relaxed), Ordering::Relaxed);
            self.abandoned.store(off, Ordering::Relaxed);
        }
        self.free_abandoned(arena);
    }

    /// Free the abandoned tables that no process can still hold; returns
    /// how many.
    pub fn free_abandoned(&self, arena: &Arena) -> usize {
        if self.abandoned.load(Ordering::Relaxed) == NULL_OFF {
            return 0;
        }
        let mut unreachable = vec![];
        {
            let _g = self.lock.lock();
            let oldest_reader = arena.oldest_reader_epoch();
            let mut link = &self.abandoned;
            loop {
                let cur = link.load(Ordering::Relaxed);
                if cur == NULL_OFF {
                    break;
                }
                // SAFETY: the list holds abandoned tables not yet freed.
                let t = unsafe { arena.get::<Table>(cur) };
                if t.abandoned_epoch.load(Ordering::Relaxed) < oldest_reader {
                    link.store(t.abandoned_next.load(Ordering::Relaxed), Ordering::Relaxed);
                    unreachable.push(t);
                } else {
                    link = &t.abandoned_next;
                }
            }
        }
        // (outside the lock: freeing a large table's pages takes a while)
        for t in &unreachable {
            t.destroy(arena, &self.owner);
        }
        unreachable.len()
    }

    /// Redo is about to make an image the head of `key`'s log (a switch:
    /// the chain a loader walks changes, and freed blocks may be reused).
    /// Unless a load of the table is in progress (false: the caller waits
    /// and asks again), note the switch until
    /// [`end_switch`](Self::end_switch): a load published from now on waits
    /// for it before reading the log ([`switching`](Self::switching)). Both
    /// sides decide under the directory's lock, so a load never walks a log
    /// while redo switches it.
    pub fn begin_switch(&self, arena: &Arena, key: &TableKey) -> bool {
        let _g = self.lock.lock();
        if let Some(i) = self.find(arena, key) {
            // SAFETY: used slots point at live tables.
            let t = unsafe { arena.get::<Table>(self.slot(arena, i).table) };
            if t.loading.load(Ordering::Acquire) == LOADING {
                return false;
            }
        }
        // SAFETY: guarded by the lock.
        unsafe {
            let d = self as *const Directory as *mut Directory;
            (*d).switching = *key;
            (*d).switching_set = 1;
        }
        true
    }

    /// The switch noted by [`begin_switch`](Self::begin_switch) is done.
    pub fn end_switch(&self) {
        let _g = self.lock.lock();
        // SAFETY: guarded by the lock.
        unsafe { (*(self as *const Directory as *mut Directory)).switching_set = 0 };
    }

    /// Is redo switching `key`'s log now?
    pub fn switching(&self, key: &TableKey) -> bool {
        let _g = self.lock.lock();
        self.switching_set != 0 && self.switching == *key
    }

    /// Visit every table.
    pub fn for_each(&self, arena: &Arena, mut f: impl FnMut(&Table)) {
        let _g = self.lock.lock();
        for i in 0..self.capacity {
            let s = self.slot(arena, i);
            if s.state == SLOT_USED {
                // SAFETY: used slots point at live tables.
                f(unsafe { arena.get::<Table>(s.table) });
            }
        }
    }

    pub fn len(&self) -> usize {
        let _g = self.lock.lock();
        self.count as usize
    }

    /// Two-phase commit: the storage under `key` was created (`dropped`
    /// false) or dropped by prepared transaction `xid`, which another
    /// session will commit or roll back. Whoever next sees `xid` finished
    /// calls [`settle_prepared`](Self::settle_prepared). False if there is
    /// no such table.
    pub fn mark_prepared(&self, arena: &Arena, key: &TableKey, xid: u32, dropped: bool) -> bool {
        let Some(t) = self.lookup(arena, key) else { return false };
        t.prepared_drop.store(dropped as u32, Ordering::Relaxed);
        if t.prepared_xid.swap(xid, Ordering::AcqRel) == 0 {
            self.prepared.fetch_add(1, Ordering::AcqRel);
        }
        true
    }

    /// Tables waiting for a prepared transaction: `(key, xid)` pairs (none,
    /// cheaply, in the common case).
    pub fn prepared_tables(&self, arena: &Arena) -> Vec<(TableKey, u32)> {
        if self.prepared.load(Ordering::Acquire) == 0 {
            return vec![];
        }
        let mut out = vec![];
        self.for_each(arena, |t| {
            let xid = t.prepared_xid.load(Ordering::Acquire);
            if xid != 0 {
                out.push((t.key, xid));
            }
        });
        out
    }

    /// Prepared transaction `xid` ended (`committed` or not): free the
    /// storage under `key` if that is its fate, else keep it for good.
    pub fn settle_prepared(&self, arena: &Arena, key: &TableKey, xid: u32, committed: bool) {
        let Some(t) = self.lookup(arena, key) else { return };
        if t.prepared_xid.compare_exchange(xid, 0, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return; // someone else settled it
        }
        self.prepared.fetch_sub(1, Ordering::AcqRel);
        if (t.prepared_drop.load(Ordering::Acquire) == 1) == committed {
            self.drop_table(arena, key);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> Arena {
        let a = Arena::create_private(256 << 20).unwrap();
        a.format(4).unwrap();
        Directory::create(&a, 1024).unwrap();
        a
    }

    /// A table of one int8 column whose row 0, inserted by xid 10, was
    /// updated in place by each xid of `updaters` in turn.
    fn row_with_chain(a: &Arena, key: TableKey, updaters: std::ops::Range<u32>) -> &Table {
        let dir = Directory::get(a).unwrap();
        let t = dir.get_or_create(a, &key, &|| vec![ColumnSpec::fixed(8)]).unwrap();
        let v = 1u64.to_ne_bytes();
        t.insert_rows(a, &[&[Value::Fixed(&v)]], &[0], 10, 0, 0, 0, &mut vec![]).unwrap();
        for x in updaters {
            let h = t.header(a, 0).unwrap();
            let nv = (x as u64).to_ne_bytes();
            assert!(t.update_in_place(a, 0, &h, x, 0, &[(0, Value::Fixed(&nv))], &[0]).unwrap());
        }
        t
    }

    fn read(arena: &Arena, t: &Table, col: usize, row: u64) -> Option<Vec<u8>> {
        match t.value(arena, col, row) {
            ValueRef::Null => None,
            ValueRef::Fixed(p) => {
                let w = 1usize << t.column(arena, col).width_shift;
                Some(unsafe { std::slice::from_raw_parts(p, w) }.to_vec())
            }
            ValueRef::Inline(p) => Some(unsafe { std::slice::from_raw_parts(p, 1 << t.column(arena, col).width_shift) }.to_vec()),
            ValueRef::Blob(p, n) => Some(unsafe { std::slice::from_raw_parts(p, n as usize) }.to_vec()),
        }
    }

    /// A variable-length column with wider slots holds values up to its slot
    /// inline and longer ones in blobs, through in-place updates (and their undo
    /// records) and copies.
    #[test]
    fn wide_var_slots_hold_longer_values_inline() {
        let wide = ColumnSpec::var_slot(25);
        assert_eq!(wide, ColumnSpec { kind: ColumnKind::Var, width_shift: 5 });
        assert_eq!(ColumnSpec::var_slot(51).copy_bytes(), 64);
        assert_eq!(ColumnSpec::var_slot(1000).copy_bytes(), MAX_VAR_SLOT);
        assert_eq!(ColumnSpec::var_slot(3), ColumnSpec::var());
        assert!(wide.is_valid() && ColumnSpec::var().is_valid());
        assert!(wide.reads_as(ColumnSpec::var()) && ColumnSpec::var().reads_as(wide));
        assert!(!ColumnSpec::fixed(8).reads_as(ColumnSpec::fixed(4)) && !wide.reads_as(ColumnSpec::fixed(16)));
        let a = setup();
        let dir = Directory::get(&a).unwrap();
        let specs = || vec![ColumnSpec::fixed(4), wide];
        let t = dir.get_or_create(&a, &[8, 8, 8, 0], &specs).unwrap();
        let dst = dir.get_or_create(&a, &[8, 8, 8, 1], &specs).unwrap();
        let mut inline = [b'a'; 25];
        inline[0] = (25 << 1) | 1;
        let big = vec![4u8; 40];
        let r1 = insert_one(&a, t, &[Value::Fixed(&[1, 0, 0, 0]), Value::Inline(&inline)], 70);
        let r2 = insert_one(&a, t, &[Value::Fixed(&[2, 0, 0, 0]), Value::Blob(&big)], 70);
        assert!(matches!(t.value(&a, 1, r1), ValueRef::Inline(_)));
        let padded = |b: &[u8]| [b, &vec![0; 32 - b.len()]].concat();
        assert_eq!(read(&a, t, 1, r1).unwrap(), padded(&inline));
        assert_eq!(read(&a, t, 1, r2).unwrap(), big);
        // in place, blob to inline: the undo record keeps the blob
        let h = t.header(&a, r2).unwrap();
        let mut short = [b'b'; 20];
        short[0] = (20 << 1) | 1;
        assert!(t.update_in_place(&a, r2, &h, 71, 0, &[(1, Value::Inline(&short))], &[NULL_OFF]).unwrap());
        assert_eq!(read(&a, t, 1, r2).unwrap(), padded(&short));
        let h = t.header(&a, r2).unwrap();
        let mut images = vec![];
        unsafe { t.before_images(&a, a.get::<crate::version::UndoRec>(h.chain), &mut images) };
        assert!(matches!(images[0].value, ValueRef::Blob(_, 40)));
        for r in [r1, r2] {
            let h = t.header(&a, r).unwrap();
            let n = t.copy_row_to(&a, r, &h, dst).unwrap();
            assert_eq!(read(&a, dst, 1, n), read(&a, t, 1, r));
        }
    }

    #[test]
    fn insert_read_drop() {
        let a = setup();
        let dir = Directory::get(&a).unwrap();
        let base = a.stats().used_bytes;
        let key = [1, 2, 3, 0];
        let t = dir
            .get_or_create(&a, &key, &|| vec![ColumnSpec::fixed(8), ColumnSpec::var(), ColumnSpec::fixed(1)])
            .unwrap();
        let big = vec![7u8; 200_000];
        let mut inline = [0u8; 16];
        inline[0] = 9;
        let n = 100_000u64;
        for i in 0..n {
            let k = i.to_ne_bytes();
            let vals = [
                Value::Fixed(&k),
                if i % 3 == 0 { Value::Blob(&big[..(i as usize % 1000) + 20]) } else if i % 3 == 1 { Value::Inline(&inline) } else { Value::Null },
                if i % 2 == 0 { Value::Null } else { Value::Fixed(&[1]) },
            ];
            let mut blobs = vec![];
            t.prepare_blobs(&a, &vals, &mut blobs).unwrap();
            let mut out = vec![];
            t.insert_rows(&a, &[&vals], &blobs, 100, 0, 0, 0, &mut out).unwrap();
            assert_eq!(out, vec![i]);
        }
        assert_eq!(t.nrows(), n);
        for i in 0..n {
            assert_eq!(read(&a, t, 0, i).unwrap(), i.to_ne_bytes());
            let v = read(&a, t, 1, i);
            match i % 3 {
                0 => assert_eq!(v.unwrap().len(), (i as usize % 1000) + 20),
                1 => assert_eq!(v.unwrap()[0], 9),
                _ => assert!(v.is_none()),
            }
            assert_eq!(read(&a, t, 2, i).is_none(), i % 2 == 0);
            let h = t.header(&a, i).unwrap();
            assert_eq!(h.xmin, 100);
        }
        // Runs agree with reading value by value, across page boundaries.
        for col in 0..3 {
            let (mut cc, mut one) = (t.col_cache(&a, col), t.col_cache(&a, col));
            let (mut row, mut step) = (0, 1);
            while row < n {
                let run = t.cursor_run(&a, &mut cc, row, step.min(n - row));
                assert!(run.len >= 1 && run.len <= step);
                assert_eq!(run.any_null(), (0..run.len).any(|i| run.is_null(i)));
                for i in 0..run.len {
                    let v = t.cursor_value(&a, &mut one, row + i);
                    assert_eq!(run.is_null(i), matches!(v, ValueRef::Null));
                    if !run.is_null(i) {
                        // SAFETY: an element of the run.
                        let got = unsafe { decode_slot(&a, cc.kind(), run.values.add(i as usize * cc.width())) };
                        assert_eq!(format!("{got:?}"), format!("{v:?}"));
                    }
                }
                row += run.len;
                step = step * 7 % 5003 + 1;
            }
        }
        // a big blob spanning pages
        let vals = [Value::Fixed(&[0; 8]), Value::Blob(&big), Value::Null];
        let mut blobs = vec![];
        t.prepare_blobs(&a, &vals, &mut blobs).unwrap();
        let mut out = vec![];
        t.insert_rows(&a, &[&vals], &blobs, 100, 0, 0, 0, &mut out).unwrap();
        assert_eq!(read(&a, t, 1, out[0]).unwrap(), big);
        assert!(a.stats().used_bytes > base);
        assert!(dir.drop_table(&a, &key));
        assert_eq!(a.stats().used_bytes, base);
        assert!(dir.lookup(&a, &key).is_none());
    }

    /// Batches, as COPY writes them, go in a column at a time: across page
    /// boundaries, with a null bitmap page that first appears within a
    /// batch, into reused row ids whose old NULL bits must be cleared; and
    /// a batch that runs out of memory publishes none of its rows.
    #[test]
    fn batches_write_whole_rows_or_none() {
        let a = setup();
        let dir = Directory::get(&a).unwrap();
        let specs = || vec![ColumnSpec::fixed(8), ColumnSpec::var(), ColumnSpec::fixed(4)];
        let t = dir.get_or_create(&a, &[6, 6, 6, 0], &specs).unwrap();
        let text = vec![b't'; 400];
        let mut inline = [0u8; 16];
        inline[0] = b'i';
        // (first column, None: NULL; second: 0 blob, 1 inline, 2 NULL; third)
        type Row = (Option<u64>, u8, u32);
        fn values_of<'v>(r: &Row, k0: &'v [u8; 8], k2: &'v [u8; 4], text: &'v [u8], inline: &'v [u8]) -> Vec<Value<'v>> {
            let len = 20 + (r.2 as usize % 300);
            let var = match r.1 {
                0 => Value::Blob(&text[..len]),
                1 => Value::Inline(inline),
                _ => Value::Null,
            };
            vec![r.0.map_or(Value::Null, |_| Value::Fixed(k0)), var, Value::Fixed(k2)]
        }
        let insert = |rows: &[Row]| -> AllocResult<Vec<u64>> {
            let keys: Vec<([u8; 8], [u8; 4])> = rows.iter().map(|r| (r.0.unwrap_or(0).to_ne_bytes(), r.2.to_ne_bytes())).collect();
            let vals: Vec<Vec<Value>> = rows.iter().zip(&keys).map(|(r, (k0, k2))| values_of(r, k0, k2, &text, &inline)).collect();
            let flat: Vec<Value> = vals.iter().flatten().cloned().collect();
            let mut blobs = vec![];
            t.prepare_blobs(&a, &flat, &mut blobs)?;
            let refs: Vec<&[Value]> = vals.iter().map(|v| v.as_slice()).collect();
            let mut out = vec![];
            t.insert_rows(&a, &refs, &blobs, 100, 0, 0, 0, &mut out)?;
            Ok(out)
        };
        let check = |row: u64, r: &Row| {
            assert_eq!(read(&a, t, 0, row), r.0.map(|k| k.to_ne_bytes().to_vec()), "row {row}");
            match r.1 {
                0 => assert_eq!(read(&a, t, 1, row).unwrap(), text[..20 + (r.2 as usize % 300)]),
                1 => assert_eq!(read(&a, t, 1, row).unwrap()[0], b'i'),
                _ => assert!(read(&a, t, 1, row).is_none()),
            }
            assert_eq!(read(&a, t, 2, row).unwrap(), r.2.to_ne_bytes());
            assert_eq!(t.header(&a, row).unwrap().xmin, 100);
        };
        // 20 batches of 1,000: the first column's first NULL is row 10,003
        let rows: Vec<Row> =
            (0..20_000u64).map(|i| ((i < 10_000 || i % 7 != 0).then_some(i), (i % 3) as u8, i as u32)).collect();
        for (b, batch) in rows.chunks(1000).enumerate() {
            assert_eq!(insert(batch).unwrap(), (b as u64 * 1000..(b as u64 + 1) * 1000).collect::<Vec<_>>());
        }
        for (i, r) in rows.iter().enumerate() {
            check(i as u64, r);
        }
        // vacate every other row of 10,000..12,000 (NULLs among them), then
        // refill them and 500 fresh ones with values that are never NULL
        let vacated: Vec<u64> = (10_000..12_000).step_by(2).collect();
        t.vacate_rows(&a, &vacated);
        let refill: Vec<Row> = (0..1500u64).map(|j| (Some(1_000_000 + j), (j % 2) as u8, 7 + j as u32)).collect();
        let ids = insert(&refill).unwrap();
        let mut reused: Vec<u64> = ids.iter().copied().filter(|&r| r < 20_000).collect();
        reused.sort_unstable();
        assert_eq!(reused, vacated);
        assert_eq!(ids.iter().filter(|&&r| r >= 20_000).count(), 500);
        for (id, r) in ids.iter().zip(&refill) {
            check(*id, r);
        }
        for row in (10_001..12_000).step_by(2) {
            check(row, &rows[row as usize]);
        }

        // memory runs out: every batch is all there or not there at all
        let a = Arena::create_private(16 << 20).unwrap();
        a.format(4).unwrap();
        let dir = Directory::create(&a, 64).unwrap();
        let t = dir.get_or_create(&a, &[7, 7, 7, 0], &|| vec![ColumnSpec::fixed(8); 6]).unwrap();
        let mut batches = 0u64;
        loop {
            let keys: Vec<[u8; 8]> = (0..1000u64).map(|i| (batches * 1000 + i).to_ne_bytes()).collect();
            let vals: Vec<Vec<Value>> = keys.iter().map(|k| vec![Value::Fixed(k); 6]).collect();
            let refs: Vec<&[Value]> = vals.iter().map(|v| v.as_slice()).collect();
            if t.insert_rows(&a, &refs, &[NULL_OFF; 6000], 10, 0, 0, 0, &mut vec![]).is_err() {
                break;
            }
            batches += 1;
        }
        assert!(batches > 0);
        let live: Vec<u64> = (0..t.nrows()).filter(|&r| t.header(&a, r).is_some()).collect();
        assert_eq!(live.len() as u64, batches * 1000);
        // (the failed batch's ids go to the free list as far as memory for it lasts)
        assert!(t.free_rows() <= t.nrows() - batches * 1000);
        for (k, &r) in live.iter().enumerate() {
            for col in 0..6 {
                assert_eq!(read(&a, t, col, r).unwrap(), (k as u64).to_ne_bytes());
            }
        }
    }

    #[test]
    fn a_run_looks_for_nulls_only_in_its_rows() {
        let mut page = vec![0u64; 8];
        page[1] = 1 << 5; // row 69 is NULL
        let values = [0u8; 1];
        for first_bit in 0..200u64 {
            for len in 1..150u64 {
                let run = Run { values: values.as_ptr(), nulls: page.as_mut_ptr() as *mut u8, first_bit, len };
                assert_eq!(run.any_null(), (first_bit..first_bit + len).contains(&69), "{first_bit} {len}");
            }
        }
    }

    /// A column added for an uncommitted attribute becomes a leftover when
    /// its transaction aborts; the next attribute at its position replaces
    /// it, filling every existing row, and readers see the new generation.
    #[test]
    fn leftover_columns_are_replaced_with_the_new_fill() {
        let a = setup();
        let dir = Directory::get(&a).unwrap();
        let t = dir.get_or_create(&a, &[6, 6, 6, 6], &|| vec![ColumnSpec::fixed(4)]).unwrap();
        for i in 0..10u32 {
            let k = i.to_ne_bytes();
            let mut out = vec![];
            t.insert_rows(&a, &[&[Value::Fixed(&k)]], &[NULL_OFF], 100, 0, 0, 0, &mut out).unwrap();
        }
        assert!(!t.has_column(&a, 1));
        let gen = t.schema_gen();
        t.set_column(&a, 1, ColumnSpec::fixed(4), Value::Fixed(&7u32.to_ne_bytes()), ColumnState::Tentative).unwrap();
        assert!(t.schema_gen() != gen && t.has_column(&a, 1));
        let gen = t.schema_gen();
        t.set_column_state(&a, 1, ColumnState::Leftover);
        assert!(!t.has_column(&a, 1) && t.schema_gen() != gen);
        // rows written meanwhile carry a value for the leftover column
        let mut out = vec![];
        t.insert_rows(&a, &[&[Value::Fixed(&[9, 0, 0, 0]), Value::Null]], &[NULL_OFF, NULL_OFF], 100, 0, 0, 0, &mut out).unwrap();
        t.set_column(&a, 1, ColumnSpec::var(), Value::Inline(&[5, b'x', b'y']), ColumnState::Permanent).unwrap();
        assert_eq!(t.ncols(), 2);
        for row in 0..11 {
            assert_eq!(&read(&a, t, 1, row).unwrap()[..3], &[5, b'x', b'y']);
        }
        assert_eq!(read(&a, t, 0, 3).unwrap(), 3u32.to_ne_bytes());
    }

    /// A scan of a cow snapshot that finds a block clean may mark the live
    /// block clean only if no writer touched it after the snapshot froze:
    /// the snapshot's summary words are its own, so a writer's bump shows.
    #[test]
    fn a_snapshot_scan_cannot_mark_a_block_written_after_the_snapshot() {
        let a = setup();
        let dir = Directory::get(&a).unwrap();
        let t = dir.get_or_create(&a, &[5, 5, 5, 5], &|| vec![ColumnSpec::fixed(8)]).unwrap();
        let v = 1u64.to_ne_bytes();
        t.insert_rows(&a, &[&[Value::Fixed(&v)]], &[0], 10, 0, 0, 0, &mut vec![]).unwrap();
        let live_before = t.block_summary(&a, 0);
        assert_ne!(live_before, 0, "inserting makes the block's summary word");
        let off = t.create_snapshot(&a, &[0], crate::snapshot::Method::Cow, 0).unwrap();
        // a writer updates the row after the snapshot
        let h = t.header(&a, 0).unwrap();
        assert!(t.update_in_place(&a, 0, &h, 11, 0, &[(0, Value::Fixed(&2u64.to_ne_bytes()))], &[0]).unwrap());
        // the snapshot still has the word it froze; the live one moved on
        let mut cur = Cursor::NEW;
        t.bind_snapshot(&a, t.snapshot(&a, off), &mut cur, &mut []);
        let frozen = t.cursor_summary(&a, &mut cur, 0);
        assert_eq!(frozen, live_before);
        assert_ne!(t.block_summary(&a, 0), frozen);
        t.mark_block_clean(&a, 0, frozen, 10);
        assert!(crate::version::summary_clean(t.block_summary(&a, 0)).is_none());
        // a scan of the live table after the write may mark it
        let now = t.block_summary(&a, 0);
        t.mark_block_clean(&a, 0, now, 11);
        assert_eq!(crate::version::summary_clean(t.block_summary(&a, 0)), Some(11));
        t.release_snapshot(&a, off);
    }

    #[test]
    fn a_bounded_prune_gives_up_before_a_deep_cut() {
        let a = setup();
        let t = row_with_chain(&a, [4, 4, 4, 5], 11..21);
        // records newest first, superseded by 20, 19, ... 11
        assert_eq!(t.chain_len(&a, 0), 10);
        // the newest removable record is the 8th: a walk of 7 gives up
        assert_eq!(t.prune_chain_within(&a, 0, &|x| x <= 13, 7), None);
        assert_eq!(t.chain_len(&a, 0), 10);
        // a walk of 8 reaches it and cuts it and the two older ones
        assert_eq!(t.prune_chain_within(&a, 0, &|x| x <= 13, 8), Some(3));
        assert_eq!(t.chain_len(&a, 0), 7);
        // a chain shorter than the walk with nothing removable: nothing to give up on
        assert_eq!(t.prune_chain_within(&a, 0, &|_| false, 32), Some(0));
        assert_eq!(read(&a, t, 0, 0).unwrap(), 20u64.to_ne_bytes());
    }

    #[test]
    fn prune_walks_look_at_a_whole_chain_less_often_while_nothing_is_removable() {
        use crate::version::PruneWalks;
        let a = setup();
        let t = row_with_chain(&a, [4, 4, 4, 6], 11..111);
        // records newest first, superseded by 110 down to 11: 100 of them
        let looked = std::cell::Cell::new(0usize);
        let mut walks = PruneWalks::new();
        let prune = |walks: &mut PruneWalks, removable: &dyn Fn(u32) -> bool| {
            looked.set(0);
            let n = walks.prune(t, &a, 0, &|x| {
                looked.set(looked.get() + 1);
                removable(x)
            });
            (n, looked.get())
        };
        // nothing removable (a held horizon): short walks, the whole chain
        // after 64 of them, then after 128
        for _ in 0..PruneWalks::MIN_WHOLE_AFTER {
            assert_eq!(prune(&mut walks, &|_| false), (0, PruneWalks::SHORT));
        }
        assert_eq!(prune(&mut walks, &|_| false), (0, 100));
        for _ in 0..2 * PruneWalks::MIN_WHOLE_AFTER {
            assert_eq!(prune(&mut walks, &|_| false), (0, PruneWalks::SHORT));
        }
        // a cut deeper than a short walk (a lagging horizon) waits for the
        // whole walk, which cuts it and the older records
        assert_eq!(prune(&mut walks, &|x| x <= 50), (40, 61));
        assert_eq!(t.chain_len(&a, 0), 60);
        // after a cut, whole walks come after 64 short ones again
        for _ in 0..PruneWalks::MIN_WHOLE_AFTER {
            assert_eq!(prune(&mut walks, &|x| x <= 70), (0, PruneWalks::SHORT));
        }
        assert_eq!(prune(&mut walks, &|x| x <= 70), (20, 41));
        // a horizon that moved on: the short walk finds the cut near the head
        assert_eq!(prune(&mut walks, &|x| x <= 108), (38, 3));
        assert_eq!(t.chain_len(&a, 0), 2);
    }

    #[test]
    fn pruning_notes_the_newest_updater_it_removed() {
        let a = setup();
        let t = row_with_chain(&a, [4, 4, 4, 4], 11..15);
        assert_eq!(t.removed_horizon(), 0);
        // nothing removed, nothing noted
        assert_eq!(t.prune_chain(&a, 0, &|_| false), 0);
        assert_eq!(t.removed_horizon(), 0);
        // records superseded by 12 and 11 go: the newest of them is noted
        assert_eq!(t.prune_chain(&a, 0, &|x| x <= 12), 2);
        assert_eq!(t.removed_horizon(), 12);
        assert_eq!(t.prune_chain(&a, 0, &|x| x <= 14), 2);
        assert_eq!(t.removed_horizon(), 14);
        // in xid order, modulo 2^32; never backwards; special xids ignored
        t.note_removed(13);
        assert_eq!(t.removed_horizon(), 14);
        t.note_removed(1 << 31);
        assert_eq!(t.removed_horizon(), 1 << 31);
        t.note_removed(u32::MAX - 5);
        assert_eq!(t.removed_horizon(), u32::MAX - 5);
        t.note_removed(10);
        assert_eq!(t.removed_horizon(), 10);
        t.note_removed(u32::MAX - 10);
        t.note_removed(2);
        assert_eq!(t.removed_horizon(), 10);
    }

    #[test]
    fn pruning_a_whole_chain_drops_the_links_flag() {
        let a = setup();
        let t = row_with_chain(&a, [4, 4, 4, 4], 11..14);
        assert_eq!(t.chain_len(&a, 0), 3);
        // a partial cut keeps the chain, and the flag
        assert_eq!(t.prune_chain(&a, 0, &|x| x <= 11), 1);
        assert_ne!(t.header(&a, 0).unwrap().flags & flag::HAS_LINKS, 0);
        // cutting at the head leaves a row like one never updated
        assert_eq!(t.prune_chain(&a, 0, &|_| true), 2);
        let h = t.header(&a, 0).unwrap();
        assert_eq!(h.flags & flag::HAS_LINKS, 0);
        assert_eq!((h.chain, h.xmin), (NULL_OFF, 13));
        assert_eq!(read(&a, t, 0, 0).unwrap(), 13u64.to_ne_bytes());
        // and it can be updated again, starting a fresh chain
        let nv = 14u64.to_ne_bytes();
        assert!(t.update_in_place(&a, 0, &h, 14, 0, &[(0, Value::Fixed(&nv))], &[0]).unwrap());
        assert_eq!(t.chain_len(&a, 0), 1);
    }

    #[test]
    fn a_switch_and_a_load_of_one_table_exclude_each_other() {
        let a = Arena::create_private(16 << 20).unwrap();
        a.format(4).unwrap();
        let dir = Directory::create(&a, 64).unwrap();
        let (k, other) = ([1, 2, 3, 0], [1, 2, 4, 0]);
        let specs = || vec![ColumnSpec::fixed(8)];
        // no table: the switch is noted, for this key only
        assert!(dir.begin_switch(&a, &k));
        assert!(dir.switching(&k) && !dir.switching(&other));
        dir.end_switch();
        assert!(!dir.switching(&k));
        // a load in progress: the switch must wait for it
        let (t, created) = dir.find_or_create(&a, &k, &specs, true).unwrap();
        assert!(created);
        assert!(!dir.begin_switch(&a, &k));
        assert!(!dir.switching(&k));
        assert!(dir.begin_switch(&a, &other));
        dir.end_switch();
        // loaded: switches go ahead
        t.loading.store(0, Ordering::Release);
        assert!(dir.begin_switch(&a, &k));
        dir.end_switch();
    }

    #[test]
    fn an_abandoned_load_is_freed_once_no_reader_can_hold_it() {
        let a = Arena::create_private(16 << 20).unwrap();
        a.format(4).unwrap();
        let dir = Directory::create(&a, 64).unwrap();
        let k = [1, 2, 3, 0];
        let specs = || vec![ColumnSpec::fixed(8), ColumnSpec::var()];
        let before = a.stats();
        let (t, created) = dir.find_or_create(&a, &k, &specs, true).unwrap();
        assert!(created);
        let v = 7u64.to_ne_bytes();
        let row = [Value::Fixed(&v), Value::Blob(&[1u8; 5000])];
        let mut blobs = vec![];
        t.prepare_blobs(&a, &row, &mut blobs).unwrap();
        t.insert_rows(&a, &[&row], &blobs, 10, 0, 0, 0, &mut vec![]).unwrap();
        // a waiter looked the table up inside its epoch
        a.epoch_enter(1);
        assert!(std::ptr::eq(dir.lookup(&a, &k).unwrap(), t));
        dir.abandon(&a, t);
        assert!(dir.lookup(&a, &k).is_none());
        assert_eq!(dir.len(), 0);
        // the waiter may still read it
        assert_eq!(t.loading.load(Ordering::Acquire), LOADING);
        assert_eq!(dir.free_abandoned(&a), 0);
        // a new load of the key starts from an empty table
        let (t2, created) = dir.find_or_create(&a, &k, &specs, true).unwrap();
        assert!(created && !std::ptr::eq(t, t2));
        assert_eq!(t2.nrows(), 0);
        // a reader entering after the abandonment does not hold it back
        a.epoch_exit(1);
        a.epoch_enter(2);
        assert_eq!(dir.free_abandoned(&a), 1);
        assert_eq!(dir.free_abandoned(&a), 0);
        a.epoch_exit(2);
        // the second load fails too: all memory is back
        dir.abandon(&a, t2);
        assert_eq!(a.stats().used_bytes, before.used_bytes);
    }

    #[test]
    fn out_of_memory_leaves_table_intact() {
        let a = Arena::create_private(16 << 20).unwrap();
        a.format(4).unwrap();
        let dir = Directory::create(&a, 64).unwrap();
        let t = dir.get_or_create(&a, &[9, 9, 9, 9], &|| vec![ColumnSpec::var()]).unwrap();
        let small = [Value::Blob(&[5u8; 100])];
        let mut blobs = vec![];
        t.prepare_blobs(&a, &small, &mut blobs).unwrap();
        t.insert_rows(&a, &[&small], &blobs, 10, 0, 0, 0, &mut vec![]).unwrap();
        let huge = vec![1u8; 64 << 20];
        let mut blobs = vec![];
        let err = t.prepare_blobs(&a, &[Value::Blob(&huge)], &mut blobs).unwrap_err();
        assert!(matches!(err, AllocError::OutOfMemory { .. }));
        assert!(blobs.is_empty());
        assert_eq!(read(&a, t, 0, 0).unwrap(), vec![5u8; 100]);
        // fill until failure: every row that was inserted reads back
        let mut n = 1;
        loop {
            let v = [Value::Blob(&[3u8; 3000])];
            let mut blobs = vec![];
            if t.prepare_blobs(&a, &v, &mut blobs).is_err() {
                break;
            }
            if t.insert_rows(&a, &[&v], &blobs, 10, 0, 0, 0, &mut vec![]).is_err() {
                break;
            }
            n += 1;
        }
        for r in 1..n {
            assert_eq!(read(&a, t, 0, r).unwrap(), vec![3u8; 3000]);
        }
        assert!(dir.drop_table(&a, &[9, 9, 9, 9]));
    }

    fn insert_one(a: &Arena, t: &Table, vals: &[Value], xid: u32) -> u64 {
        let mut blobs = vec![];
        t.prepare_blobs(a, vals, &mut blobs).unwrap();
        let mut out = vec![];
        t.insert_rows(a, &[vals], &blobs, xid, 0, 0, 0, &mut out).unwrap();
        out[0]
    }

    #[test]
    fn modify_row_is_compare_and_set() {
        let a = setup();
        let dir = Directory::get(&a).unwrap();
        let t = dir.get_or_create(&a, &[4, 4, 4, 0], &|| vec![ColumnSpec::fixed(8)]).unwrap();
        let row = insert_one(&a, t, &[Value::Fixed(&[1; 8])], 50);
        let h = t.header(&a, row).unwrap();
        let winners = std::sync::atomic::AtomicU32::new(0);
        std::thread::scope(|sc| {
            for xid in 100..108u32 {
                let (a, winners, h) = (&a, &winners, h);
                sc.spawn(move || {
                    let change = RowChange { xmax: Some((xid, 1)), ..Default::default() };
                    if t.modify_row(a, row, &h, &change).unwrap() {
                        winners.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
        });
        assert_eq!(winners.load(Ordering::SeqCst), 1);
        let now = t.header(&a, row).unwrap();
        assert!((100..108).contains(&now.xmax));
        assert_eq!(now.cmax, 1);
        // a stale header no longer matches
        assert!(!t.modify_row(&a, row, &h, &RowChange { locker: Some(9), ..Default::default() }).unwrap());
        // hints learnt from a stale header are dropped
        t.set_hint(&a, row, &h, flag::XMAX_ABORTED);
        assert_eq!(t.header(&a, row).unwrap().flags & flag::XMAX_ABORTED, 0);
        t.set_hint(&a, row, &now, flag::XMAX_COMMITTED);
        assert_ne!(t.header(&a, row).unwrap().flags & flag::XMAX_COMMITTED, 0);
        // successor links
        let next = insert_one(&a, t, &[Value::Fixed(&[2; 8])], 51);
        let now = t.header(&a, row).unwrap();
        assert!(t.modify_row(&a, row, &now, &RowChange { next: Some(next), set_flags: flag::UPDATED, ..Default::default() }).unwrap());
        let h = t.header(&a, row).unwrap();
        assert_eq!(h.next, next);
        assert_ne!(h.flags & flag::UPDATED, 0);
    }

    /// A cursor caches page pointers between rows without holding a
    /// reclamation epoch. Copy-on-write can replace a cached page and, once
    /// the snapshot sharing it ends, free it to a new owner: what the cursor
    /// then reads there is not the row. Readers therefore enter the epoch
    /// and check `cursor_pages_ok` before each row of the live table (the
    /// extension's `Reader::guard_live`); this is what that check must catch.
    #[test]
    fn a_cursor_finds_out_that_a_cached_page_was_freed() {
        let a = setup();
        let dir = Directory::get(&a).unwrap();
        let t = dir.get_or_create(&a, &[9, 9, 9, 1], &|| vec![ColumnSpec::fixed(8)]).unwrap();
        for i in 0..10u64 {
            insert_one(&a, t, &[Value::Fixed(&i.to_ne_bytes())], 90);
        }
        let mut cur = Cursor::NEW;
        t.cursor_reset(&mut cur, &mut []);
        assert_eq!(t.cursor_header(&a, &mut cur, 0).unwrap().xmin, 90);
        let cached = t.stamps.page_for_row(&a, 0).unwrap();
        // A snapshot shares the page, a writer copies it, the snapshot ends.
        let snap = t.create_snapshot(&a, &[0], crate::snapshot::Method::Cow, 0).unwrap();
        let h = t.header(&a, 5).unwrap();
        assert!(t.modify_row(&a, 5, &h, &RowChange { xmax: Some((91, 0)), ..Default::default() }).unwrap());
        assert_ne!(t.stamps.page_for_row(&a, 0).unwrap(), cached, "the write copied the page");
        t.release_snapshot(&a, snap); // frees the old page: no reader is inside
        // ...and the next allocation takes it, zeroed.
        let pages: Vec<Off> = (0..8).map(|_| a.alloc_pages(&t.heap.owner, 1).unwrap()).collect();
        assert!(pages.iter().any(|&p| a.ptr::<u8>(p) == cached), "the freed page was reused");
        assert!(t.cursor_header(&a, &mut cur, 5).is_none(), "read through the stale pointer, the row is gone");
        // The check readers make first: the cursor starts over.
        assert!(!t.cursor_pages_ok(&mut cur, &mut []));
        let now = t.cursor_header(&a, &mut cur, 5).unwrap();
        assert_eq!((now.xmin, now.xmax), (90, 91));
        assert!(t.cursor_pages_ok(&mut cur, &mut []));
    }

    #[test]
    fn retired_memory_is_freed_in_order_once_readers_and_snapshots_let_go() {
        let a = setup();
        let dir = Directory::get(&a).unwrap();
        let t = dir.get_or_create(&a, &[9, 9, 9, 0], &|| vec![ColumnSpec::fixed(8)]).unwrap();
        insert_one(&a, t, &[Value::Fixed(&[1; 8])], 90);
        let retire_one = || t.retire(&a, RetiredKind::Object, t.heap.alloc(&a, 64).unwrap());
        retire_one();
        a.epoch_enter(0); // a reader that may have seen what is retired from now on
        retire_one();
        assert_eq!(t.reclaim(&a), 1, "only what was retired before the reader entered");
        let snap = t.create_snapshot(&a, &[0], crate::snapshot::Method::Cow, 0).unwrap();
        retire_one();
        a.epoch_exit(0);
        assert_eq!(t.reclaim(&a), 1, "the snapshot keeps what was retired after it");
        assert_eq!(t.retired_len.load(Ordering::Relaxed), 1);
        t.release_snapshot(&a, snap); // reclaims
        assert_eq!(t.retired_len.load(Ordering::Relaxed), 0);
        assert_eq!(t.reclaim(&a), 0);
        // the list is usable again after running empty
        for _ in 0..RECLAIM_BATCH {
            assert!(!t.reclaim_due());
            retire_one();
        }
        assert!(t.reclaim_due());
        assert_eq!(t.reclaim(&a), RECLAIM_BATCH as usize);
        assert!(!t.reclaim_due());
    }

    #[test]
    fn vacuumed_rows_are_reused_and_pages_returned() {
        let a = setup();
        let dir = Directory::get(&a).unwrap();
        let t = dir.get_or_create(&a, &[5, 5, 5, 0], &|| vec![ColumnSpec::fixed(8), ColumnSpec::var()]).unwrap();
        let text = vec![b'x'; 100];
        let n = 50_000u64;
        for i in 0..n {
            insert_one(&a, t, &[Value::Fixed(&i.to_ne_bytes()), Value::Blob(&text)], 60);
        }
        let full = t.bytes();
        let rows: Vec<u64> = (0..n).collect();
        t.vacate_rows(&a, &rows);
        assert_eq!(t.free_rows(), n);
        for r in 0..n {
            assert!(t.header(&a, r).is_none());
        }
        let released = t.release_vacant_pages(&a);
        assert!(released > 0);
        t.reclaim(&a);
        assert!(t.bytes() < full / 4, "{} of {} bytes left", t.bytes(), full);
        // inserts reuse vacant row ids before growing the table
        for i in 0..1000u64 {
            let r = insert_one(&a, t, &[Value::Fixed(&i.to_ne_bytes()), Value::Null], 61);
            assert!(r < n);
        }
        assert_eq!(t.nrows(), n);
        assert_eq!(t.free_rows(), n - 1000);
        let live = (0..n).filter(|&r| t.header(&a, r).is_some()).count();
        assert_eq!(live, 1000);
    }

    #[test]
    fn copy_row_keeps_stamps_and_values() {
        let a = setup();
        let dir = Directory::get(&a).unwrap();
        let specs = || vec![ColumnSpec::fixed(4), ColumnSpec::var(), ColumnSpec::var()];
        let src = dir.get_or_create(&a, &[6, 6, 6, 0], &specs).unwrap();
        let dst = dir.get_or_create(&a, &[7, 7, 7, 0], &specs).unwrap();
        let mut inline = [0u8; 16];
        inline[0] = 7;
        let big = vec![3u8; 5000];
        let row = insert_one(&a, src, &[Value::Fixed(&[1, 2, 3, 4]), Value::Inline(&inline), Value::Blob(&big)], 70);
        let h = src.header(&a, row).unwrap();
        src.modify_row(&a, row, &h, &RowChange { xmax: Some((71, 3)), ..Default::default() }).unwrap();
        let h = src.header(&a, row).unwrap();
        let new = src.copy_row_to(&a, row, &h, dst).unwrap();
        let g = dst.header(&a, new).unwrap();
        assert_eq!((g.xmin, g.xmax, g.cmax), (70, 71, 3));
        assert_eq!(read(&a, dst, 0, new).unwrap(), vec![1, 2, 3, 4]);
        assert_eq!(read(&a, dst, 1, new).unwrap()[0], 7);
        assert_eq!(read(&a, dst, 2, new).unwrap(), big);
    }

    /// Column bounds cover every value a snapshot can read: inserted, written in place
    /// (the old version stays in the undo chain), filled by ALTER TABLE, and rebuilt
    /// chains of replay; they never narrow, and only integer-like columns have them.
    #[test]
    fn column_bounds_cover_every_stored_version() {
        let a = setup();
        let dir = Directory::get(&a).unwrap();
        let t = dir.get_or_create(&a, &[7, 7, 7, 7], &|| vec![ColumnSpec::fixed(4), ColumnSpec::fixed(2), ColumnSpec::var()]).unwrap();
        assert_eq!(t.column(&a, 0).bounds(), None, "empty before the first value");
        for v in [5i32, -3, 40] {
            let vals = [Value::Fixed(&v.to_ne_bytes()), Value::Null, Value::Inline(&[5, b'x'])];
            t.insert_rows(&a, &[&vals], &[NULL_OFF; 3], 100, 0, 0, 0, &mut vec![]).unwrap();
        }
        assert_eq!(t.column(&a, 0).bounds(), Some((-3, 40)));
        assert_eq!(t.column(&a, 1).bounds(), None, "only NULLs so far");
        assert_eq!(t.column(&a, 2).bounds(), None, "not a fixed-width column");
        // an update in place widens; deleting or overwriting the extreme does not narrow
        let h = t.header(&a, 2).unwrap();
        assert!(t.update_in_place(&a, 2, &h, 11, 0, &[(0, Value::Fixed(&(-70000i32).to_ne_bytes())), (1, Value::Fixed(&(-2i16).to_ne_bytes()))], &[NULL_OFF; 2]).unwrap());
        assert_eq!(t.column(&a, 0).bounds(), Some((-70000, 40)));
        assert_eq!(t.column(&a, 1).bounds(), Some((-2, -2)), "sign-extended from two bytes");
        let h = t.header(&a, 2).unwrap();
        assert!(t.update_in_place(&a, 2, &h, 11, 1, &[(0, Value::Fixed(&0i32.to_ne_bytes()))], &[NULL_OFF]).unwrap());
        assert_eq!(t.column(&a, 0).bounds(), Some((-70000, 40)));
        // a rebuilt chain holds a version the column never stored
        let old = i32::MAX.to_ne_bytes();
        let rec = crate::change::ChainRecord { xmin: 5, cmin: 0, superseded_by: 12, xmin_flags: 0, images: vec![(0, crate::change::Val::Fixed(&old))] };
        t.build_chain(&a, 1, &[rec]).unwrap();
        assert_eq!(t.column(&a, 0).bounds(), Some((-70000, i32::MAX as i64)));
        // ALTER TABLE's fill is stored in every row
        t.set_column(&a, 3, ColumnSpec::fixed(8), Value::Fixed(&i64::MIN.to_ne_bytes()), ColumnState::Permanent).unwrap();
        assert_eq!(t.column(&a, 3).bounds(), Some((i64::MIN, i64::MIN)));
    }
}
