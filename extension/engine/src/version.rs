//! HyPer-style versioning: in-place updates with undo chains, and per-block
//! summaries that let scans skip version checks.
//!
//! **In-place updates.** An UPDATE that changes no indexed column writes the
//! new values over the live ones, at the same row id. Before that it pushes
//! an [`UndoRec`] onto the row's chain (newest first): the old creator
//! (`xmin`, `cmin`, its commit hint) and the before-images of the changed
//! columns. Version 0 of a row is the live one; version `j + 1` is version
//! `j` with the before-images of chain record `j` applied, created by that
//! record's `xmin`. A reader walks the chain until it finds a version whose
//! creator its snapshot sees.
//!
//! Blobs of replaced variable-length values move into the record and are
//! freed with it. Records are immutable once linked, except for the `next`
//! link that pruning cuts.
//!
//! **Undo.** A transaction that aborts (or a rolled-back savepoint) puts the
//! before-images back ([`Table::undo_update`]). Readers do not depend on it:
//! a live version whose creator aborted is simply not visible, and the chain
//! leads to the previous one.
//!
//! **Pruning.** Record `j` is needed only by snapshots that do not see
//! version `j`'s creator, stored in the record as `superseded_by`. Once that
//! creator committed before every running snapshot, record `j` and all older
//! ones can go ([`Table::prune_chain`]). Pruned and undone records are
//! retired through epoch-based reclamation, since a reader may be walking
//! them.
//!
//! **Block summaries.** Per block of 4096 rows (one stamps page) a word
//! records whether every row was committed, never deleted and unversioned,
//! and the newest creator among them. Writers clear it (and bump its
//! version) before touching a row of the block; scans set it when they find
//! a block clean. A scan whose snapshot is newer than the block's newest
//! creator reads the block's values without per-row checks.

use crate::arena::{AllocResult, Arena, Off, NULL_OFF};
use crate::column::bits;
use crate::table::{flag, Cids, ColumnKind, Links, RetiredKind, RowHeader, Stamp, Table, Value, ValueRef};
use std::sync::atomic::{AtomicU64, Ordering};

/// Header of an undo record; entries follow.
#[repr(C)]
pub struct UndoRec {
    /// The next older record, or 0.
    pub next: AtomicU64,
    /// Creator of the version this record restores.
    pub xmin: u32,
    pub cmin: u32,
    /// Creator of the next newer version (the updater that pushed us).
    pub superseded_by: u32,
    /// Commit hint of `xmin` at the time of the update.
    pub xmin_flags: u32,
    pub nvals: u32,
    _pad: u32,
}

/// One before-image inside an undo record: column, null flag, then the
/// stored element (its column's width, at least 8 bytes).
#[repr(C)]
struct UndoEntry {
    col: u32,
    null: u32,
}

const HEADER: usize = std::mem::size_of::<UndoRec>();
const ENTRY_HEADER: usize = std::mem::size_of::<UndoEntry>();

fn entry_bytes(width_shift: u32) -> usize {
    ENTRY_HEADER + (1usize << width_shift).max(8)
}

/// A before-image read from a record.
#[derive(Clone, Copy, Debug)]
pub struct BeforeImage {
    pub col: usize,
    pub value: ValueRef,
}

/// Private pages for an in-place update: stamps, cids, links, and per
/// changed column its values page and (if needed) null bitmap page.
type WritablePages = (*mut u8, *mut u8, *mut u8, Vec<(*mut u8, Option<*mut u8>)>);

/// Bits of a block summary word.
const SUMMARY_CLEAN: u64 = 1 << 32;
const SUMMARY_VERSION_SHIFT: u32 = 33;
/// log2 of the rows a summary covers (one stamps page).
pub const SUMMARY_ROWS_SHIFT: u32 = 12;

impl Table {
    /// The undo record at `off`.
    ///
    /// # Safety
    /// `off` must come from a chain link read while the record was linked,
    /// by a reader inside a reclamation epoch (or holding the row latch).
    pub unsafe fn undo_rec<'a>(&self, arena: &'a Arena, off: Off) -> &'a UndoRec {
        arena.get::<UndoRec>(off)
    }

    /// The before-images of record `rec`.
    ///
    /// # Safety
    /// As for [`undo_rec`](Self::undo_rec).
    pub unsafe fn before_images(&self, arena: &Arena, rec: &UndoRec, out: &mut Vec<BeforeImage>) {
        out.clear();
        self.each_before_image(arena, rec, |im| out.push(im));
    }

    /// [`before_images`](Self::before_images), one at a time.
    unsafe fn each_before_image(&self, arena: &Arena, rec: &UndoRec, mut f: impl FnMut(BeforeImage)) {
        let mut p = (rec as *const UndoRec as *const u8).add(HEADER);
        for _ in 0..rec.nvals {
            let e = &*(p as *const UndoEntry);
            let c = self.column(arena, e.col as usize);
            let data = p.add(ENTRY_HEADER);
            let value = if e.null != 0 { ValueRef::Null } else { crate::table::decode_slot(arena, c.spec_kind, data) };
            f(BeforeImage { col: e.col as usize, value });
            p = p.add(entry_bytes(c.width_shift));
        }
    }

    /// Free an undo record; with `with_blobs`, also the blobs its
    /// before-images reference (they are no longer referenced elsewhere).
    pub(crate) fn free_undo_rec(&self, arena: &Arena, off: Off, with_blobs: bool) {
        if with_blobs {
            // SAFETY: the record is retired and no reader can reach it.
            unsafe {
                self.each_before_image(arena, arena.get::<UndoRec>(off), |im| {
                    if let ValueRef::Blob(p, _) = im.value {
                        self.heap.free(arena, arena.off_of(p));
                    }
                })
            };
        }
        self.heap.free(arena, off);
    }

    /// Update `row` in place (its header read as `expected`) to the values
    /// in `changes` (column, value; blobs prepared in `blobs`, one per
    /// change), created by `(xid, cid)`. Returns false, changing nothing and
    /// freeing nothing of the caller's, when the row moved on.
    #[allow(clippy::too_many_arguments)] // the header to expect and the new version, spelt out
    pub fn update_in_place(
        &self,
        arena: &Arena,
        row: u64,
        expected: &RowHeader,
        xid: u32,
        cid: u32,
        changes: &[(usize, Value)],
        blobs: &[Off],
    ) -> AllocResult<bool> {
        let size = HEADER + changes.iter().map(|(c, _)| entry_bytes(self.column(arena, *c).width_shift)).sum::<usize>();
        let rec_off = self.heap.alloc(arena, size)?;
        let _g = self.latch.shared();
        let epoch = self.snap_epoch.load(Ordering::Acquire);
        let mut retire = |r| self.retire_replaced(arena, r);
        let prepared = (|| -> AllocResult<WritablePages> {
            let sp = self.stamps.page_for_write(arena, &self.heap, row, epoch, &mut retire)?;
            let cp = self.cids.page_for_write(arena, &self.heap, row, epoch, &mut retire)?;
            let lp = self.links.page_for_write(arena, &self.heap, row, epoch, &mut retire)?;
            let mut pages = Vec::with_capacity(changes.len());
            for (c, _) in changes {
                let col = self.column(arena, *c);
                let vp = col.values.page_for_write(arena, &self.heap, row, epoch, &mut retire)?;
                // The null bitmap page must exist (privately) when the old
                // or the new value is NULL, so writing below cannot allocate.
                let np = if col.nulls.page_for_row(arena, row).is_some() || matches!(changes[pages.len()].1, Value::Null) {
                    Some(col.nulls.page_for_write(arena, &self.heap, row, epoch, &mut retire)?)
                } else {
                    None
                };
                pages.push((vp, np));
            }
            Ok((sp, cp, lp, pages))
        })();
        let (sp, cp, lp, pages) = match prepared {
            Ok(p) => p,
            Err(e) => {
                self.heap.free(arena, rec_off);
                return Err(e);
            }
        };
        self.touch_block(arena, row);
        // SAFETY: element indexes are within their pages.
        let (s, c, l) = unsafe {
            (
                self.stamps.element::<Stamp>(sp, row),
                self.cids.element::<Cids>(cp, row),
                self.links.element::<Links>(lp, row),
            )
        };
        let old = Self::latch_row(s);
        if !s.still_is(old, expected) {
            s.flags.store(old, Ordering::Release);
            drop(_g);
            self.heap.free(arena, rec_off);
            return Ok(false);
        }
        let has_links = old & flag::HAS_LINKS != 0;
        // SAFETY: rec_off is a fresh allocation of `size` bytes, ours until
        // linked; element pointers are within their pages.
        unsafe {
            let rec = arena.ptr::<UndoRec>(rec_off);
            std::ptr::write(
                rec,
                UndoRec {
                    next: AtomicU64::new(if has_links { l.chain.load(Ordering::Relaxed) } else { NULL_OFF }),
                    xmin: s.xmin.load(Ordering::Relaxed),
                    cmin: c.cmin.load(Ordering::Relaxed),
                    superseded_by: xid,
                    xmin_flags: old & flag::XMIN_COMMITTED,
                    nvals: changes.len() as u32,
                    _pad: 0,
                },
            );
            let mut p = (rec as *mut u8).add(HEADER);
            for (k, (ci, v)) in changes.iter().enumerate() {
                let col = self.column(arena, *ci);
                let width = 1usize << col.width_shift;
                let (vp, np) = pages[k];
                let elem = vp.add(((row & (col.values.rows_per_page() - 1)) as usize) << col.width_shift);
                let was_null = np.is_some_and(|np| bits::get(np, row & (col.nulls.rows_per_page() - 1)));
                std::ptr::write(p as *mut UndoEntry, UndoEntry { col: *ci as u32, null: was_null as u32 });
                std::ptr::copy_nonoverlapping(elem, p.add(ENTRY_HEADER), width);
                p = p.add(entry_bytes(col.width_shift));
                // The new value. Every page it touches was made private
                // above (and no snapshot can start: we hold the latch), so
                // this allocates nothing and cannot fail.
                let written = self.write_one(arena, col, row, v, blobs[k], epoch, &mut |_| {});
                debug_assert!(written.is_ok());
            }
            if !has_links {
                l.next.store(u64::MAX, Ordering::Relaxed);
            }
            l.chain.store(rec_off, Ordering::Release);
            c.cmin.store(cid, Ordering::Relaxed);
            // an aborted deleter's mark goes; the row is ours now
            s.xmax.store(0, Ordering::Relaxed);
            s.xmin.store(xid, Ordering::Release);
        }
        arena.count(crate::stats::IN_PLACE_UPDATES, 1);
        let flags = (old | flag::HAS_LINKS)
            & !(flag::XMIN_COMMITTED | flag::XMIN_ABORTED | flag::XMAX_COMMITTED | flag::XMAX_ABORTED | flag::LATCH);
        s.flags.store(flags.wrapping_add(flag::SEQ_ONE), Ordering::Release);
        Ok(true)
    }

    /// Undo the newest in-place update of `row` if `xid` made it: put the
    /// before-images back and unlink the record. Returns false when there
    /// is nothing of `xid` to undo (someone else may just have undone it),
    /// an error when a page copy finds no memory.
    pub fn undo_update(&self, arena: &Arena, row: u64, xid: u32) -> AllocResult<bool> {
        let _g = self.latch.shared();
        let epoch = self.snap_epoch.load(Ordering::Acquire);
        let mut retire = |r| self.retire_replaced(arena, r);
        let Some(h) = self.header(arena, row) else { return Ok(false) };
        if h.xmin != xid || h.chain == NULL_OFF {
            return Ok(false);
        }
        // SAFETY: the record is linked from the row; we are its only writer.
        let rec = unsafe { arena.get::<UndoRec>(h.chain) };
        if rec.superseded_by != xid {
            return Ok(false);
        }
        let mut images = vec![];
        // SAFETY: as above.
        unsafe { self.before_images(arena, rec, &mut images) };
        let sp = self.stamps.page_for_write(arena, &self.heap, row, epoch, &mut retire)?;
        let cp = self.cids.page_for_write(arena, &self.heap, row, epoch, &mut retire)?;
        let lp = self.links.page_for_write(arena, &self.heap, row, epoch, &mut retire)?;
        let mut pages = Vec::with_capacity(images.len());
        for im in &images {
            let col = self.column(arena, im.col);
            let vp = col.values.page_for_write(arena, &self.heap, row, epoch, &mut retire)?;
            let np = if im.value == ValueRef::Null || col.nulls.page_for_row(arena, row).is_some() {
                Some(col.nulls.page_for_write(arena, &self.heap, row, epoch, &mut retire)?)
            } else {
                None
            };
            pages.push((vp, np));
        }
        self.touch_block(arena, row);
        // SAFETY: element indexes are within their pages.
        let (s, c, l) = unsafe {
            (
                self.stamps.element::<Stamp>(sp, row),
                self.cids.element::<Cids>(cp, row),
                self.links.element::<Links>(lp, row),
            )
        };
        let old = Self::latch_row(s);
        if s.xmin.load(Ordering::Relaxed) != xid || l.chain.load(Ordering::Relaxed) != h.chain {
            s.flags.store(old, Ordering::Release);
            return Ok(false);
        }
        let mut dead_blobs = vec![];
        for (k, im) in images.iter().enumerate() {
            let col = self.column(arena, im.col);
            let (vp, np) = pages[k];
            let width = 1usize << col.width_shift;
            // SAFETY: element within the page; entry data is `width` bytes.
            unsafe {
                let elem = vp.add(((row & (col.values.rows_per_page() - 1)) as usize) << col.width_shift);
                if col.spec_kind == ColumnKind::Var as u32 {
                    if let ValueRef::Blob(p, _) = crate::table::decode_slot(arena, col.spec_kind, elem) {
                        let is_null_now = np.is_some_and(|np| bits::get(np, row & (col.nulls.rows_per_page() - 1)));
                        if !is_null_now {
                            dead_blobs.push(arena.off_of(p));
                        }
                    }
                }
                let src = self.entry_data(arena, rec, k);
                std::ptr::copy_nonoverlapping(src, elem, width);
                if let Some(np) = np {
                    bits::set(np, row & (col.nulls.rows_per_page() - 1), im.value == ValueRef::Null);
                }
            }
        }
        s.xmin.store(rec.xmin, Ordering::Relaxed);
        c.cmin.store(rec.cmin, Ordering::Relaxed);
        l.chain.store(rec.next.load(Ordering::Relaxed), Ordering::Release);
        let flags = (old & !(flag::XMIN_COMMITTED | flag::XMIN_ABORTED | flag::LATCH)) | rec.xmin_flags;
        s.flags.store(flags.wrapping_add(flag::SEQ_ONE), Ordering::Release);
        drop(_g);
        arena.count(crate::stats::UNDONE_UPDATES, 1);
        // Readers may still be looking at the record or the new blobs.
        self.retire(arena, RetiredKind::Object, h.chain);
        for b in dead_blobs {
            self.retire(arena, RetiredKind::Object, b);
        }
        Ok(true)
    }

    /// Pointer to the element data of entry `k` of `rec`.
    unsafe fn entry_data(&self, arena: &Arena, rec: &UndoRec, k: usize) -> *const u8 {
        let mut p = (rec as *const UndoRec as *const u8).add(HEADER);
        for _ in 0..k {
            let e = &*(p as *const UndoEntry);
            p = p.add(entry_bytes(self.column(arena, e.col as usize).width_shift));
        }
        p.add(ENTRY_HEADER)
    }

    /// Cut the chain of `row` at the first record whose `superseded_by`
    /// satisfies `removable` (its updater committed before every snapshot),
    /// retiring that record and all older ones. Returns records retired.
    pub fn prune_chain(&self, arena: &Arena, row: u64, removable: &dyn Fn(u32) -> bool) -> usize {
        self.prune_chain_within(arena, row, removable, usize::MAX).unwrap_or(0)
    }

    /// [`prune_chain`](Self::prune_chain), looking at no more than `walk`
    /// records from the newest: None when the first `walk` records are not
    /// removable and there are more (the cut, if any, lies deeper).
    pub fn prune_chain_within(&self, arena: &Arena, row: u64, removable: &dyn Fn(u32) -> bool, walk: usize) -> Option<usize> {
        let Some(h) = self.header(arena, row) else { return Some(0) };
        if h.chain == NULL_OFF {
            return Some(0);
        }
        let _g = self.latch.shared();
        let epoch = self.snap_epoch.load(Ordering::Acquire);
        let mut retire = |r| self.retire_replaced(arena, r);
        // The head link may be cut: its page must be private.
        let Ok(sp) = self.stamps.page_for_write(arena, &self.heap, row, epoch, &mut retire) else { return Some(0) };
        let Ok(lp) = self.links.page_for_write(arena, &self.heap, row, epoch, &mut retire) else { return Some(0) };
        // SAFETY: element indexes are within their pages.
        let (s, l) = unsafe {
            (
                self.stamps.element::<Stamp>(sp, row),
                self.links.element::<Links>(lp, row),
            )
        };
        let old = Self::latch_row(s);
        let unlatch = || s.flags.store(old, Ordering::Release);
        if old & flag::HAS_LINKS == 0 {
            unlatch();
            return Some(0);
        }
        // Find the cut: the link (row head or a record's `next`) to clear.
        let mut link: &AtomicU64 = &l.chain;
        let mut cur = l.chain.load(Ordering::Relaxed);
        let mut walked = 0;
        while cur != NULL_OFF {
            if walked == walk {
                unlatch();
                return None;
            }
            walked += 1;
            // SAFETY: records reachable under the row latch are linked.
            let rec = unsafe { arena.get::<UndoRec>(cur) };
            if removable(rec.superseded_by) {
                break;
            }
            link = &rec.next;
            cur = rec.next.load(Ordering::Relaxed);
        }
        if cur == NULL_OFF {
            unlatch();
            return Some(0);
        }
        // Noted before the cut, under the latch, so that a snapshot that
        // misses the records knows it. (Updaters hold the row in turn, but
        // xids are taken earlier: the newest record's updater need not be
        // the newest xid.)
        let mut newest = 0u32;
        let mut r = cur;
        while r != NULL_OFF {
            // SAFETY: linked records are allocated.
            let rec = unsafe { arena.get::<UndoRec>(r) };
            if rec.superseded_by >= 3 && (newest == 0 || crate::table::xid_follows(rec.superseded_by, newest)) {
                newest = rec.superseded_by;
            }
            r = rec.next.load(Ordering::Relaxed);
        }
        self.note_removed(newest);
        link.store(NULL_OFF, Ordering::Release);
        // A row left with neither chain nor successor drops HAS_LINKS: it
        // reads like a row never updated, and its block can be summarised
        // clean again (scans skip per-row checks there).
        let whole_chain = std::ptr::eq(link, &l.chain);
        if whole_chain && l.next.load(Ordering::Relaxed) == u64::MAX {
            s.flags.store(old & !flag::HAS_LINKS, Ordering::Release);
        } else {
            unlatch();
        }
        drop(_g);
        let mut n = 0;
        while cur != NULL_OFF {
            // SAFETY: now unlinked, still allocated until reclaimed.
            let next = unsafe { arena.get::<UndoRec>(cur) }.next.load(Ordering::Relaxed);
            self.retire(arena, RetiredKind::UndoRec, cur);
            cur = next;
            n += 1;
        }
        arena.count(crate::stats::UNDO_RECORDS_PRUNED, n as u64);
        Some(n)
    }

    /// Deep-copy the undo chain starting at `chain` into `dst` (same column
    /// layout), blobs included; returns the new head. For table rewrites,
    /// which keep older versions for snapshots that may still need them.
    pub fn copy_chain_to(&self, arena: &Arena, chain: Off, dst: &Table) -> AllocResult<Off> {
        let mut head = NULL_OFF;
        let mut tail: Option<&UndoRec> = None;
        let mut cur = chain;
        let mut images = vec![];
        while cur != NULL_OFF {
            // SAFETY: rewrites hold an exclusive lock; the chain is stable.
            let rec = unsafe { arena.get::<UndoRec>(cur) };
            let size = HEADER
                + (0..rec.nvals as usize)
                    .map(|k| {
                        // SAFETY: as above.
                        let col = unsafe { (*(self.entry_data(arena, rec, k).sub(ENTRY_HEADER) as *const UndoEntry)).col };
                        entry_bytes(self.column(arena, col as usize).width_shift)
                    })
                    .sum::<usize>();
            let new = dst.heap.alloc(arena, size)?;
            // SAFETY: fresh allocation of `size` bytes; source is `size` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(rec as *const UndoRec as *const u8, arena.ptr::<u8>(new), size);
                (*arena.ptr::<UndoRec>(new)).next = AtomicU64::new(NULL_OFF);
                self.before_images(arena, rec, &mut images);
                let new_rec = arena.get::<UndoRec>(new);
                for (k, im) in images.iter().enumerate() {
                    if let ValueRef::Blob(p, n) = im.value {
                        let b = dst.heap.alloc(arena, (n as usize).max(1))?;
                        std::ptr::copy_nonoverlapping(p, arena.ptr::<u8>(b), n as usize);
                        let data = dst.entry_data(arena, new_rec, k) as *mut u8;
                        (data.add(8) as *mut u64).write_unaligned(b);
                    }
                }
            }
            // SAFETY: as above.
            let new_rec = unsafe { arena.get::<UndoRec>(new) };
            match tail {
                None => head = new,
                Some(t) => t.next.store(new, Ordering::Relaxed),
            }
            tail = Some(new_rec);
            cur = rec.next.load(Ordering::Acquire);
        }
        Ok(head)
    }

    /// Set the chain head of `row` in a table being built by a rewrite
    /// (nobody else uses it yet).
    pub fn set_chain(&self, arena: &Arena, row: u64, chain: Off) -> AllocResult<()> {
        let epoch = self.snap_epoch.load(Ordering::Acquire);
        let lp = self.links.page_for_write(arena, &self.heap, row, epoch, &mut |_| {})?;
        let Some(s) = self.stamp(arena, row) else { return Ok(()) };
        // SAFETY: element index within the page.
        let l = unsafe { self.links.element::<Links>(lp, row) };
        if s.flags.load(Ordering::Relaxed) & flag::HAS_LINKS == 0 {
            l.next.store(u64::MAX, Ordering::Relaxed);
        }
        l.chain.store(chain, Ordering::Release);
        s.flags.fetch_or(flag::HAS_LINKS, Ordering::Release);
        Ok(())
    }

    /// Give `row` the version chain `records` (newest first): redo of a
    /// rewrite's copy, whose table nobody else uses yet.
    pub fn build_chain(&self, arena: &Arena, row: u64, records: &[crate::change::ChainRecord]) -> AllocResult<()> {
        let mut head = NULL_OFF;
        // Build from the oldest record up, each linking to the one before.
        for r in records.iter().rev() {
            let size = HEADER + r.images.iter().map(|(c, _)| entry_bytes(self.column(arena, *c).width_shift)).sum::<usize>();
            let off = self.heap.alloc(arena, size)?;
            // SAFETY: a fresh allocation of `size` bytes, ours until linked.
            unsafe {
                std::ptr::write(
                    arena.ptr::<UndoRec>(off),
                    UndoRec {
                        next: AtomicU64::new(head),
                        xmin: r.xmin,
                        cmin: r.cmin,
                        superseded_by: r.superseded_by,
                        xmin_flags: r.xmin_flags,
                        nvals: r.images.len() as u32,
                        _pad: 0,
                    },
                );
                let mut p = arena.ptr::<u8>(off).add(HEADER);
                for (c, v) in &r.images {
                    let col = self.column(arena, *c);
                    let width = 1usize << col.width_shift;
                    std::ptr::write(p as *mut UndoEntry, UndoEntry { col: *c as u32, null: matches!(v, crate::change::Val::Null) as u32 });
                    let data = p.add(ENTRY_HEADER);
                    std::ptr::write_bytes(data, 0, entry_bytes(col.width_shift) - ENTRY_HEADER);
                    match v {
                        crate::change::Val::Null => {}
                        crate::change::Val::Fixed(b) => {
                            std::ptr::copy_nonoverlapping(b.as_ptr(), data, b.len().min(width));
                            // (a version snapshots may read, never stored in the column here)
                            col.widen(b);
                        }
                        crate::change::Val::Inline(b) => {
                            std::ptr::copy_nonoverlapping(b.as_ptr(), data, b.len().min(width));
                        }
                        crate::change::Val::Numeric(b) => {
                            let slot = crate::decimal::numeric_slot(b);
                            std::ptr::copy_nonoverlapping(slot.as_ptr(), data, slot.len().min(width));
                        }
                        crate::change::Val::Blob(b) => {
                            let blob = self.heap.alloc(arena, b.len().max(1))?;
                            std::ptr::copy_nonoverlapping(b.as_ptr(), arena.ptr::<u8>(blob), b.len());
                            (data.add(4) as *mut u32).write_unaligned(b.len() as u32);
                            (data.add(8) as *mut u64).write_unaligned(blob);
                        }
                    }
                    p = p.add(entry_bytes(col.width_shift));
                }
            }
            head = off;
        }
        self.set_chain(arena, row, head)
    }

    /// Length of the chain of `row` (for statistics and tests).
    pub fn chain_len(&self, arena: &Arena, row: u64) -> usize {
        let Some(h) = self.header(arena, row) else { return 0 };
        let mut n = 0;
        let mut cur = h.chain;
        while cur != NULL_OFF {
            n += 1;
            // SAFETY: callers use this while no pruning runs (tests, VACUUM).
            cur = unsafe { arena.get::<UndoRec>(cur) }.next.load(Ordering::Acquire);
        }
        n
    }

    // ---- block summaries ----------------------------------------------------

    fn summary_word<'a>(&self, arena: &'a Arena, block: u64) -> Option<&'a AtomicU64> {
        let p = self.summaries.page_for_row(arena, block)?;
        // SAFETY: the page holds 8192 summary words.
        Some(unsafe { self.summaries.element::<AtomicU64>(p, block) })
    }

    /// A writer is about to change a row: the block is no longer clean.
    pub(crate) fn touch_block(&self, arena: &Arena, row: u64) {
        if let Some(w) = self.summary_word(arena, row >> SUMMARY_ROWS_SHIFT) {
            touch_summary(w);
        }
    }

    /// The summary word of `block` (0 when never summarised).
    #[inline]
    pub fn block_summary(&self, arena: &Arena, block: u64) -> u64 {
        self.summary_word(arena, block).map_or(0, |w| w.load(Ordering::Acquire))
    }

    /// Mark `block` clean with newest creator `max_xmin`, unless a writer
    /// touched it since its summary read `seen`. Summary pages are never
    /// shared with snapshots (cow copies them), and every block with rows
    /// has one (`insert_rows` makes it), so writers always bump the word
    /// this compares against.
    pub fn mark_block_clean(&self, arena: &Arena, block: u64, seen: u64, max_xmin: u32) {
        let Some(w) = self.summary_word(arena, block) else { return };
        let clean = (seen & !(SUMMARY_CLEAN | 0xffff_ffff)) | SUMMARY_CLEAN | max_xmin as u64;
        let _ = w.compare_exchange(seen, clean, Ordering::AcqRel, Ordering::Relaxed);
    }
}

/// [`Table::touch_block`] on a block's summary word the caller has found.
pub(crate) fn touch_summary(w: &AtomicU64) {
    let _ = w.fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| Some(((s >> SUMMARY_VERSION_SHIFT) + 1) << SUMMARY_VERSION_SHIFT));
}

/// Is a summary word clean, and if so, its newest creator.
#[inline]
pub fn summary_clean(word: u64) -> Option<u32> {
    if word & SUMMARY_CLEAN != 0 {
        Some(word as u32)
    } else {
        None
    }
}

/// How far a writer's pruning walks a row's chain: at most [`SHORT`](Self::SHORT)
/// records from the newest, and the whole chain only now and then.
///
/// While an old snapshot (a long query or transaction) holds the horizon
/// back, no record of a hot row's chain is removable and the chain grows
/// with every update; a walk to its end at every update made updating the
/// row cost as much as its chain was long (`bench/hot_row_hold.sh`: one row
/// updated by one client fell from 12,800 updates a second to 2,900 within
/// 15 s of an idle REPEATABLE READ transaction). Once the horizon moves on,
/// the newest removable record is near the head and a short walk finds it.
/// For a horizon that lags more than `SHORT` updates of a row behind, a
/// whole walk comes after `whole_after` short walks that gave up:
/// [`MIN_WHOLE_AFTER`](Self::MIN_WHOLE_AFTER) after a walk that cut
/// something, twice as many as before after a whole walk that did not (up
/// to [`MAX_WHOLE_AFTER`](Self::MAX_WHOLE_AFTER)), so that the whole walks
/// of a chain that only grows cost each write less and less, and garbage
/// behind a lagging horizon still goes.
pub struct PruneWalks {
    /// Short walks that gave up since the last whole walk or cut.
    missed: u32,
    whole_after: u32,
}

impl PruneWalks {
    pub const SHORT: usize = 32;
    pub const MIN_WHOLE_AFTER: u32 = 64;
    pub const MAX_WHOLE_AFTER: u32 = 1 << 16;

    pub const fn new() -> PruneWalks {
        PruneWalks { missed: 0, whole_after: Self::MIN_WHOLE_AFTER }
    }

    /// Prune the chain of `row` ([`Table::prune_chain_within`]) as far as
    /// this walker's history says; returns records retired.
    pub fn prune(&mut self, table: &Table, arena: &Arena, row: u64, removable: &dyn Fn(u32) -> bool) -> usize {
        let whole = self.missed >= self.whole_after;
        let walk = if whole { usize::MAX } else { Self::SHORT };
        match table.prune_chain_within(arena, row, removable, walk) {
            None => {
                self.missed += 1;
                0
            }
            Some(0) => {
                if whole {
                    self.missed = 0;
                    self.whole_after = (self.whole_after * 2).min(Self::MAX_WHOLE_AFTER);
                }
                0
            }
            Some(n) => {
                self.missed = 0;
                self.whole_after = Self::MIN_WHOLE_AFTER;
                n
            }
        }
    }
}

impl Default for PruneWalks {
    fn default() -> PruneWalks {
        PruneWalks::new()
    }
}
