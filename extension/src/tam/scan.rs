//! Reading rows: sequential, TID-range, bitmap, sample and ANALYZE scans,
//! parallel scans, and single-row fetches by TID.
//!
//! All of them funnel into [`Reader::read`], which finds the row version visible
//! to a snapshot and stores the requested attributes in a virtual slot.

use super::{blocks_for_rows, row_to_tid, tid_to_row, ROWS_PER_BLOCK};
use crate::datum;
use crate::shmem;
use crate::storage::table_of;
use crate::visibility::{xid_state, Seen, Visibility, XidState};
use anker_engine::stats;
use anker_engine::arena::Off;
use anker_engine::snapshot::Snapshot;
use anker_engine::table::{flag, ColCache, Cursor, RowHeader, Table, ValueRef};
use anker_engine::version::{summary_clean, SUMMARY_ROWS_SHIFT};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};

/// Rows a parallel worker claims at a time.
const PARALLEL_CHUNK: u64 = 8192;

/// Reads rows of one table into virtual slots: caches page pointers
/// between rows, fills only the attributes asked for, and copies unstable
/// values into a per-reader buffer that the next row overwrites. Lives in
/// palloc'd memory and owns no Rust allocations.
#[repr(C)]
pub struct Reader {
    cur: Cursor,
    /// Header of the row last looked at by [`read`](Self::read), if any
    /// (scans use it to summarise blocks).
    pub last: Option<RowHeader>,
    /// Version depth of the last row returned (0: the stored version).
    pub last_depth: usize,
    natts: usize,
    /// `natts` flags: attributes to fill from their columns.
    needed: *mut bool,
    /// `natts` flags: attributes to fill with the slot descriptor's
    /// "missing" value (added by ALTER TABLE, not stored yet, or stored in
    /// a leftover column), as heap does for tuples older than a column.
    /// Attributes in neither read as NULL.
    missing: *mut bool,
    /// Some attribute is `missing`: a writer may add its column meanwhile.
    has_missing: bool,
    /// The table's column generation when `needed` was set up.
    schema_gen: u32,
    cols: *mut ColCache,
    /// Row buffer: by-reference values read from live pages are copied
    /// here, `buf_stride` bytes per attribute, so a row needs no allocation.
    buf: *mut u8,
    buf_stride: usize,
    /// The last slot descriptor found to match the stored columns.
    checked_desc: pg_sys::TupleDesc,
}

impl Reader {
    /// A reader for `table` (the storage of `rel`) in CurrentMemoryContext:
    /// a copy of the one cached with the relation when there is one (setting
    /// a reader up looks at every attribute and its column, which cost more
    /// than the fetch itself for the single-row index scans of OLTP).
    pub unsafe fn new(rel: pg_sys::Relation, table: &Table) -> Reader {
        if let Some((template, bytes)) = crate::storage::reader_template(rel, table) {
            return template.copy_in(table, crate::pg_leaf::palloc(bytes));
        }
        Reader::new_in(rel, table, crate::pg_leaf::palloc(Reader::scratch_bytes((*rel).rd_att, table)))
    }

    /// A reader like this one with its arrays in `scratch` (as many bytes
    /// as this reader's), no pages cached and an empty row buffer.
    unsafe fn copy_in(&self, table: &Table, scratch: *mut u8) -> Reader {
        let n = self.natts.max(1);
        let needed = scratch as *mut bool;
        let missing = scratch.add(n) as *mut bool;
        let cols = scratch.add(Self::cols_at(n)) as *mut ColCache;
        let buf = (cols as *mut u8).add(n * std::mem::size_of::<ColCache>());
        std::ptr::copy_nonoverlapping(self.needed, needed, self.natts);
        std::ptr::copy_nonoverlapping(self.missing, missing, self.natts);
        std::ptr::copy_nonoverlapping(self.cols, cols, self.natts);
        let mut r = Reader { cur: Cursor::NEW, last: None, last_depth: 0, needed, missing, cols, buf, ..*self };
        r.reset(table);
        r
    }

    /// Bytes of scratch memory a reader of `table` for a relation with
    /// descriptor `desc` needs (its flags, column caches and row buffer).
    /// Small: index scans make one per execution, in the statement's memory.
    pub unsafe fn scratch_bytes(desc: pg_sys::TupleDesc, table: &Table) -> usize {
        let n = ((*desc).natts as usize).max(1);
        Self::cols_at(n) + n * std::mem::size_of::<ColCache>() + n * Self::buf_stride(desc, table)
    }

    /// Row buffer bytes per attribute: room for the largest value a live
    /// page can hand out that must be copied (short varlenas and small
    /// fixed-length by-reference values; blobs are read in place), 8-byte
    /// aligned. A column whose layout no longer matches its attribute (the
    /// transaction changed its type; the rewrite reads it through a slot
    /// with the old descriptor) counts with its stored width.
    unsafe fn buf_stride(desc: pg_sys::TupleDesc, table: &Table) -> usize {
        let arena = shmem::arena();
        let widest = datum::attrs(desc)
            .iter()
            .enumerate()
            .filter(|(_, a)| !a.attisdropped)
            .map(|(i, a)| {
                let by_att = match a.attlen {
                    _ if a.attbyval => 0,
                    -1 => datum::spec_for(a).copy_bytes(),
                    n if n > 0 && n <= datum::MAX_INLINE_FIXED => n as usize,
                    _ => 0,
                };
                let by_storage = if i < table.ncols() && datum::spec_for(a) != table.column(arena, i).spec() {
                    table.column(arena, i).spec().copy_bytes()
                } else {
                    0
                };
                by_att.max(by_storage)
            })
            .max()
            .unwrap_or(0);
        widest.next_multiple_of(8)
    }

    /// Offset of the column caches in the scratch memory (after the two
    /// flag arrays).
    fn cols_at(n: usize) -> usize {
        (2 * n).next_multiple_of(std::mem::align_of::<ColCache>())
    }

    /// A reader whose arrays live in `scratch` (at least
    /// [`scratch_bytes`](Self::scratch_bytes), MAXALIGNed, owned by the
    /// reader until it is dropped or re-made).
    pub unsafe fn new_in(rel: pg_sys::Relation, table: &Table, scratch: *mut u8) -> Reader {
        let arena = shmem::arena();
        let atts = datum::attrs((*rel).rd_att);
        let natts = atts.len();
        let n = natts.max(1);
        let needed = scratch as *mut bool;
        let missing = scratch.add(n) as *mut bool;
        let cols = scratch.add(Self::cols_at(n)) as *mut ColCache;
        let buf = (cols as *mut u8).add(n * std::mem::size_of::<ColCache>());
        let buf_stride = Self::buf_stride((*rel).rd_att, table);
        let schema_gen = table.schema_gen();
        let mut has_missing = false;
        for (i, att) in atts.iter().enumerate() {
            let stored = !att.attisdropped && table.has_column(arena, i);
            *needed.add(i) = stored;
            *missing.add(i) = !att.attisdropped && !stored;
            has_missing |= *missing.add(i);
            if stored {
                std::ptr::write(cols.add(i), table.col_cache(arena, i));
            } else {
                std::ptr::write_bytes(cols.add(i), 0, 1);
            }
        }
        let mut r = Reader {
            cur: Cursor::NEW,
            last: None,
            last_depth: 0,
            natts,
            needed,
            missing,
            has_missing,
            schema_gen,
            cols,
            buf,
            buf_stride,
            checked_desc: std::ptr::null_mut(),
        };
        r.reset(table);
        r
    }

    /// Bytes of a row this reader reads: its stamp and the elements of the
    /// columns it fills.
    pub fn row_bytes(&self) -> usize {
        let values: usize = (0..self.natts)
            // SAFETY: cols and needed have natts entries.
            .filter(|&i| unsafe { *self.needed.add(i) })
            .map(|i| unsafe { (*self.cols.add(i)).width() })
            .sum();
        std::mem::size_of::<anker_engine::table::Stamp>() + values
    }

    /// Fill only the attributes (0-based) for which `wanted` holds.
    pub fn restrict(&mut self, wanted: impl Fn(usize) -> bool) {
        for i in 0..self.natts {
            let w = wanted(i);
            // SAFETY: needed and missing have natts entries.
            unsafe {
                *self.needed.add(i) = *self.needed.add(i) && w;
                *self.missing.add(i) = *self.missing.add(i) && w;
            }
        }
    }

    /// A writer gave columns to attributes this (live) reader fills with
    /// their missing values: read those columns from now on.
    #[cold]
    fn adopt_new_columns(&mut self, table: &Table) {
        let arena = shmem::arena();
        self.schema_gen = table.schema_gen();
        self.has_missing = false;
        for i in 0..self.natts {
            // SAFETY: needed, missing and cols have natts entries.
            unsafe {
                if *self.missing.add(i) && table.has_column(arena, i) {
                    *self.missing.add(i) = false;
                    *self.needed.add(i) = true;
                    std::ptr::write(self.cols.add(i), table.col_cache(arena, i));
                }
                self.has_missing |= *self.missing.add(i);
            }
        }
        self.reset(table);
    }

    /// Read from snapshot `snap` of `table` instead of the live columns.
    pub fn bind(&mut self, table: &Table, snap: &Snapshot) {
        let arena = shmem::arena();
        let mut caches: Vec<(usize, &mut ColCache)> = vec![];
        for i in 0..self.natts {
            // SAFETY: needed and cols have natts entries.
            unsafe {
                if *self.needed.add(i) {
                    caches.push((i, &mut *self.cols.add(i)));
                }
            }
        }
        table.bind_snapshot(arena, snap, &mut self.cur, &mut caches);
    }

    /// Forget cached pages (after a rescan, or a long pause).
    pub fn reset(&mut self, table: &Table) {
        // SAFETY: cols has natts entries; unused ones are zeroed and harmless.
        let cols = unsafe { std::slice::from_raw_parts_mut(self.cols, self.natts) };
        table.cursor_reset(&mut self.cur, cols);
    }

    /// Find the version of `row` visible to `vis` and store it in `slot`.
    ///
    /// # Safety
    /// `slot` must be a slot for `rel`'s descriptor; its by-reference values
    /// stay valid until this reader reads the next row.
    #[inline]
    pub unsafe fn read(
        &mut self,
        rel: pg_sys::Relation,
        table: &Table,
        row: u64,
        vis: &Visibility,
        slot: *mut pg_sys::TupleTableSlot,
    ) -> bool {
        self.read_to(rel, table, row, vis, slot, self.buf)
    }

    /// [`read`](Self::read), copying unstable values to `buf` (at least
    /// [`row_buffer_bytes`](Self::row_buffer_bytes)) instead of the
    /// reader's row buffer: they then stay valid as long as `buf`.
    #[inline]
    pub unsafe fn read_to(
        &mut self,
        rel: pg_sys::Relation,
        table: &Table,
        row: u64,
        vis: &Visibility,
        slot: *mut pg_sys::TupleTableSlot,
        buf: *mut u8,
    ) -> bool {
        let arena = shmem::arena();
        loop {
            self.last = None;
            let _epoch = self.guard_live(table);
            let Some(h) = table.cursor_header(arena, &mut self.cur, row) else { return false };
            let seen = self.judge(rel, table, row, &h, vis);
            if !self.materialize(rel, table, row, &h, seen, slot, buf) {
                return false;
            }
            let cols = std::slice::from_raw_parts_mut(self.cols, self.natts);
            if table.cursor_unchanged(arena, &mut self.cur, cols, row, &h) {
                return true;
            }
            // A writer changed the row while we copied it: read it again.
        }
    }

    /// Enter the reclamation epoch to read one row of the live columns, and
    /// make the cursor forget the pages it cached if any page was replaced
    /// since. Inside the epoch nothing the read reaches (pages, undo
    /// records, blobs) is freed. Before it, a page the cursor cached may have
    /// been: copy-on-write replaced it, the snapshot sharing it ended, and
    /// the memory went to a new owner (a row read there looks absent, or
    /// worse). A reader bound to a snapshot needs neither: its pages and
    /// the undo records its frozen headers lead to are kept until the
    /// snapshot is released (`Table::reclaim_retired`).
    #[inline]
    pub fn guard_live(&mut self, table: &Table) -> Option<shmem::EpochGuard> {
        if self.cur.is_frozen() {
            return None;
        }
        let guard = shmem::enter_epoch();
        // SAFETY: cols has natts entries.
        let cols = unsafe { std::slice::from_raw_parts_mut(self.cols, self.natts) };
        table.cursor_pages_ok(&mut self.cur, cols);
        Some(guard)
    }

    /// Which version of the row with header `h` does `vis` see? Records
    /// the header in [`last`](Self::last) and the depth in
    /// [`last_depth`](Self::last_depth), stores hint bits learnt on the way
    /// and, for SERIALIZABLE readers, reports the read. Walking the chain
    /// needs a reclamation epoch unless the reader is frozen.
    #[inline]
    unsafe fn judge(&mut self, rel: pg_sys::Relation, table: &Table, row: u64, h: &RowHeader, vis: &Visibility) -> Seen {
        self.last = Some(*h);
        let mut hints = 0;
        let seen = vis.version(table, h, &mut hints);
        if hints != 0 {
            // (inside the epoch, also for a frozen reader: the hint goes to
            // the live page, which must not be freed between finding and
            // writing it)
            let _epoch = shmem::enter_epoch();
            table.set_hint(shmem::arena(), row, h, hints);
            if let Some(l) = self.last.as_mut() {
                l.flags |= hints;
            }
        }
        if vis.serializable {
            super::modify::conflict_out(rel, table, h, seen, vis);
        }
        self.last_depth = if let Seen::Older(k) = seen { k } else { 0 };
        seen
    }

    /// Store version `seen` of `row` (header `h`) in `slot`; false if the
    /// snapshot sees no version.
    #[inline]
    unsafe fn materialize(
        &mut self,
        rel: pg_sys::Relation,
        table: &Table,
        row: u64,
        h: &RowHeader,
        seen: Seen,
        slot: *mut pg_sys::TupleTableSlot,
        buf: *mut u8,
    ) -> bool {
        match seen {
            Seen::None => return false,
            Seen::Live => self.fill_to(rel, table, row, slot, Some(h), buf),
            Seen::Older(k) => {
                shmem::arena().count(stats::CHAIN_WALKS, 1);
                self.fill_to(rel, table, row, slot, Some(h), buf);
                self.apply_older(table, slot, h, k, buf);
            }
        }
        true
    }

    /// Start loading `row`'s stamp and the values the reader fills, before
    /// [`read`](Self::read) needs them (random single-row access: index
    /// fetches, fetches by TID).
    #[inline]
    pub fn prefetch(&mut self, table: &Table, row: u64) {
        let arena = shmem::arena();
        for i in 0..self.natts {
            // SAFETY: needed and cols have natts entries; a needed column's
            // cache is set up.
            unsafe {
                if *self.needed.add(i) {
                    table.cursor_prefetch(arena, &mut *self.cols.add(i), row);
                }
            }
        }
        table.cursor_prefetch_stamp(arena, &mut self.cur, row);
    }

    /// Store `row` of a block its summary vouches for: its newest version
    /// committed before the snapshot, never deleted. No visibility checks; false
    /// when a writer touched the block meanwhile (the caller then reads
    /// the row the slow way).
    #[inline]
    pub unsafe fn read_clean(
        &mut self,
        rel: pg_sys::Relation,
        table: &Table,
        row: u64,
        summary: u64,
        slot: *mut pg_sys::TupleTableSlot,
    ) -> bool {
        let arena = shmem::arena();
        let _epoch = self.guard_live(table);
        let h = RowHeader { xmin: table.cursor_xmin(arena, &mut self.cur, row), flags: flag::XMIN_COMMITTED, ..Default::default() };
        self.fill(rel, table, row, slot, Some(&h));
        if self.cur.is_frozen() {
            return true; // frozen pages cannot change
        }
        let cols = std::slice::from_raw_parts_mut(self.cols, self.natts);
        table.cursor_pages_ok(&mut self.cur, cols) && table.block_summary(arena, row >> SUMMARY_ROWS_SHIFT) == summary
    }

    /// Is the reader bound to a snapshot's frozen pages (values never change)?
    pub fn is_frozen(&self) -> bool {
        self.cur.is_frozen()
    }

    /// Where attribute `att` (0-based, one the reader fills) of `row` is.
    #[inline]
    pub fn value(&mut self, table: &Table, att: usize, row: u64) -> ValueRef {
        debug_assert!(att < self.natts);
        // SAFETY: cols has natts entries; `att` is one the reader fills, so
        // its cache is set up (and bound to the snapshot, if any).
        unsafe {
            debug_assert!(*self.needed.add(att));
            table.cursor_value(shmem::arena(), &mut *self.cols.add(att), row)
        }
    }

    /// The summary word of `block` as this reader sees the table.
    pub fn summary(&mut self, table: &Table, block: u64) -> u64 {
        table.cursor_summary(shmem::arena(), &mut self.cur, block)
    }

    /// Turn the live values in `slot` into those of version `k`: apply the
    /// before-images of the first `k` undo records, newest first, so the
    /// oldest one wins. The caller is inside a reclamation epoch.
    unsafe fn apply_older(&mut self, table: &Table, slot: *mut pg_sys::TupleTableSlot, h: &RowHeader, k: usize, buf: *mut u8) {
        let arena = shmem::arena();
        let atts = datum::attrs((*slot).tts_tupleDescriptor);
        let values = std::slice::from_raw_parts_mut((*slot).tts_values, atts.len());
        let nulls = std::slice::from_raw_parts_mut((*slot).tts_isnull, atts.len());
        let mut images = Vec::new();
        let mut cur = h.chain;
        let mut last_creator = (h.xmin, h.cmin);
        for _ in 0..k {
            let rec = table.undo_rec(arena, cur);
            table.before_images(arena, rec, &mut images);
            for im in &images {
                let i = im.col;
                if i >= atts.len() || i >= self.natts || !*self.needed.add(i) {
                    continue;
                }
                match datum::to_datum_buffered(&atts[i], im.value, buf.add(i * self.buf_stride)) {
                    Some(d) => {
                        values[i] = d;
                        nulls[i] = false;
                    }
                    None => nulls[i] = true,
                }
            }
            last_creator = (rec.xmin, rec.cmin);
            cur = rec.next.load(std::sync::atomic::Ordering::Acquire);
        }
        // System columns describe the version returned.
        let older = RowHeader { xmin: last_creator.0, cmin: last_creator.1, xmax: 0, cmax: 0, ..*h };
        super::slot::set_stamps(slot, Some(&older));
    }

    /// Values are decoded with the slot's descriptor, which is the
    /// relation's except while ALTER TABLE rewrites a table (the old rows
    /// are read with the old descriptor). Refuse to reinterpret stored
    /// bytes as another type.
    #[cold]
    unsafe fn check_desc(&mut self, rel: pg_sys::Relation, table: &Table, desc: pg_sys::TupleDesc) {
        let arena = shmem::arena();
        for (i, att) in datum::attrs(desc).iter().enumerate().take(self.natts) {
            if *self.needed.add(i) && !table.column(arena, i).spec().reads_as(datum::spec_for(att)) {
                let name = std::ffi::CStr::from_ptr((*(*rel).rd_rel).relname.data.as_ptr());
                pgrx::error!(
                    "anker: stored column {} of \"{}\" does not match attribute \"{}\"",
                    i + 1,
                    name.to_string_lossy(),
                    std::ffi::CStr::from_ptr(att.attname.data.as_ptr()).to_string_lossy()
                );
            }
        }
        self.checked_desc = desc;
    }

    /// Store the live values of `row` in `slot`, ignoring visibility.
    ///
    /// # Safety
    /// As for [`read`](Self::read).
    pub unsafe fn fill(
        &mut self,
        rel: pg_sys::Relation,
        table: &Table,
        row: u64,
        slot: *mut pg_sys::TupleTableSlot,
        h: Option<&RowHeader>,
    ) {
        self.fill_to(rel, table, row, slot, h, self.buf)
    }

    /// Bytes of the row buffer unstable values of a row are copied to.
    pub fn row_buffer_bytes(&self) -> usize {
        self.natts * self.buf_stride
    }

    #[inline]
    unsafe fn fill_to(
        &mut self,
        rel: pg_sys::Relation,
        table: &Table,
        row: u64,
        slot: *mut pg_sys::TupleTableSlot,
        h: Option<&RowHeader>,
        buf: *mut u8,
    ) {
        let arena = shmem::arena();
        clear_slot(slot);
        // A frozen reader keeps its missing values: its snapshot predates
        // the columns.
        if self.has_missing && !self.cur.is_frozen() && table.schema_gen() != self.schema_gen {
            self.adopt_new_columns(table);
        }
        let desc = (*slot).tts_tupleDescriptor;
        if desc != self.checked_desc {
            self.check_desc(rel, table, desc);
        }
        let atts = datum::attrs(desc);
        let n = atts.len().min(self.natts);
        let values = std::slice::from_raw_parts_mut((*slot).tts_values, atts.len());
        let nulls = std::slice::from_raw_parts_mut((*slot).tts_isnull, atts.len());
        // Frozen snapshot pages never change: hand out pointers into them.
        let stable = self.cur.is_frozen();
        for i in 0..atts.len() {
            let d = if i < n && *self.needed.add(i) {
                let v = table.cursor_value(arena, &mut *self.cols.add(i), row);
                if stable {
                    datum::to_datum_stable(&atts[i], v)
                } else {
                    datum::to_datum_buffered(&atts[i], v, buf.add(i * self.buf_stride))
                }
            } else if i < n && *self.missing.add(i) {
                let mut isnull = true;
                let d = pg_sys::getmissingattr(desc, i as i32 + 1, &mut isnull);
                (!isnull).then_some(d)
            } else {
                None
            };
            match d {
                Some(d) => {
                    values[i] = d;
                    nulls[i] = false;
                }
                None => {
                    values[i] = pg_sys::Datum::from(0usize);
                    nulls[i] = true;
                }
            }
        }
        store_slot(slot, atts.len());
        super::slot::set_stamps(slot, h);
        row_to_tid(row, &mut (*slot).tts_tid);
        (*slot).tts_tableOid = (*rel).rd_id;
    }
}

/// `ExecClearTuple` for our virtual slots without a guarded FFI call in the
/// common case (nothing to free).
#[inline]
unsafe fn clear_slot(slot: *mut pg_sys::TupleTableSlot) {
    if (*slot).tts_flags & pg_sys::TTS_FLAG_SHOULDFREE as u16 != 0
        || !super::slot::is_ours(slot)
    {
        pg_sys::ExecClearTuple(slot);
        return;
    }
    (*slot).tts_nvalid = 0;
    (*slot).tts_flags |= pg_sys::TTS_FLAG_EMPTY as u16;
    super::slot::forget_pending(slot);
}

/// `ExecStoreVirtualTuple` after [`clear_slot`] and filling the arrays.
#[inline]
unsafe fn store_slot(slot: *mut pg_sys::TupleTableSlot, natts: usize) {
    if !super::slot::is_ours(slot) {
        pg_sys::ExecStoreVirtualTuple(slot);
        return;
    }
    (*slot).tts_flags &= !(pg_sys::TTS_FLAG_EMPTY as u16);
    (*slot).tts_nvalid = natts as i16;
}

/// Shared state of a parallel scan, in dynamic shared memory.
#[repr(C)]
struct ParallelScan {
    base: pg_sys::ParallelTableScanDescData,
    next_row: AtomicU64,
    nrows: u64,
}

/// anker's scan descriptor; `base` must come first (PostgreSQL sees only
/// it). It lives in palloc'd memory and holds no Rust-owned allocations, so
/// an error that skips `scan_end` leaks nothing.
#[repr(C)]
pub struct ScanDesc {
    pub base: pg_sys::TableScanDescData,
    table: *const Table,
    vis: Option<Visibility>,
    /// The scan covers rows `lo..end`; `cur` is the last position visited
    /// (`lo - 1` before the start, `end` after the end).
    lo: u64,
    end: u64,
    cur: i64,
    started: bool,
    parallel: *mut ParallelScan,
    par_next: u64,
    par_end: u64,
    /// Bitmap, sample and analyze scans: rows of the current block
    /// (`ROWS_PER_BLOCK` entries; null for other scans, which need none).
    block_rows: *mut u64,
    block_n: usize,
    block_pos: usize,
    sample_block: u64,
    reader: Reader,
    /// Block summaries (see `anker_engine::version`): the current block,
    /// its summary word when we entered it, whether it is read without
    /// checks, and whether what we read so far keeps it clean.
    blk: u64,
    blk_word: u64,
    blk_fast: bool,
    blk_clean: bool,
    blk_rows: u32,
    blk_max_xmin: u32,
    /// Rows of the current block a snapshot gave without a chain walk
    /// although the live row changed since.
    blk_avoided: u64,
    /// Writers had touched the current block since the snapshot when the
    /// scan entered it (only then are avoided chain walks counted; never
    /// for a scan of the live columns).
    blk_moved: bool,
    /// The column snapshot this scan reads (0: the live columns), held.
    pub snap: Off,
    /// ANALYZE: the row last counted as live and its header then, whose
    /// values are read only if ANALYZE keeps the row (`read_analyze_row`).
    analyze_row: (u64, RowHeader),
}

#[inline]
unsafe fn desc<'a>(scan: pg_sys::TableScanDesc) -> &'a mut ScanDesc {
    &mut *(scan as *mut ScanDesc)
}

impl ScanDesc {
    #[inline]
    unsafe fn read(&mut self, row: u64, slot: *mut pg_sys::TupleTableSlot) -> bool {
        let vis = self.vis.as_ref().expect("scan has a snapshot");
        self.reader.read(self.base.rs_rd, &*self.table, row, vis, slot)
    }

    /// Queue `row` of the current block (bitmap, sample and analyze scans).
    unsafe fn push_block_row(&mut self, row: u64) {
        assert!(!self.block_rows.is_null() && self.block_n < ROWS_PER_BLOCK as usize);
        // SAFETY: block_rows holds ROWS_PER_BLOCK entries (checked above).
        *self.block_rows.add(self.block_n) = row;
        self.block_n += 1;
    }

    /// The `i`-th queued row of the current block (`i < block_n`).
    unsafe fn block_row(&self, i: usize) -> u64 {
        debug_assert!(i < self.block_n);
        // SAFETY: only push_block_row fills entries below block_n.
        *self.block_rows.add(i)
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_begin(
    rel: pg_sys::Relation,
    snapshot: pg_sys::Snapshot,
    nkeys: std::ffi::c_int,
    key: *mut pg_sys::ScanKeyData,
    pscan: pg_sys::ParallelTableScanDesc,
    flags: u32,
) -> pg_sys::TableScanDesc {
    if nkeys > 0 {
        crate::error::not_supported("scan keys in sequential scans");
    }
    let table = table_of(rel);
    let nrows = if pscan.is_null() { table.nrows() } else { (*(pscan as *mut ParallelScan)).nrows };
    super::modify::predicate_lock_relation(rel, snapshot);
    if flags & pg_sys::ScanOptions::SO_TYPE_SEQSCAN != 0 {
        if let Some(c) = table_counts(rel) {
            c.t_numscans += 1;
        }
    }
    let d = crate::pg_leaf::palloc0(std::mem::size_of::<ScanDesc>()) as *mut ScanDesc;
    std::ptr::write(
        d,
        ScanDesc {
            base: pg_sys::TableScanDescData {
                rs_rd: rel,
                rs_snapshot: snapshot,
                rs_nkeys: nkeys,
                rs_key: key,
                rs_mintid: Default::default(),
                rs_maxtid: Default::default(),
                rs_flags: flags,
                rs_parallel: pscan,
            },
            table,
            vis: if snapshot.is_null() { None } else { Some(Visibility::new(snapshot)) },
            lo: 0,
            end: nrows,
            cur: -1,
            started: false,
            parallel: pscan as *mut ParallelScan,
            par_next: 0,
            par_end: 0,
            block_rows: if flags & (pg_sys::ScanOptions::SO_TYPE_BITMAPSCAN | pg_sys::ScanOptions::SO_TYPE_SAMPLESCAN | pg_sys::ScanOptions::SO_TYPE_ANALYZE) != 0 {
                pg_sys::palloc(ROWS_PER_BLOCK as usize * std::mem::size_of::<u64>()) as *mut u64
            } else {
                std::ptr::null_mut()
            },
            block_n: 0,
            block_pos: 0,
            sample_block: 0,
            reader: Reader::new(rel, table),
            blk: u64::MAX,
            blk_word: 0,
            blk_fast: false,
            blk_clean: false,
            blk_rows: 0,
            blk_max_xmin: 0,
            blk_avoided: 0,
            blk_moved: false,
            snap: 0,
            analyze_row: (0, RowHeader::default()),
        },
    );
    pg_sys::RelationIncrementReferenceCount(rel);
    d as pg_sys::TableScanDesc
}

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_end(scan: pg_sys::TableScanDesc) {
    let d = desc(scan);
    if d.snap != 0 {
        crate::snapshots::release(&*d.table, d.snap);
    }
    pg_sys::RelationDecrementReferenceCount(d.base.rs_rd);
    if d.base.rs_flags & pg_sys::ScanOptions::SO_TEMP_SNAPSHOT != 0 {
        pg_sys::UnregisterSnapshot(d.base.rs_snapshot);
    }
    crate::pg_leaf::pfree(scan as *mut std::ffi::c_void);
}

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_rescan(
    scan: pg_sys::TableScanDesc,
    _key: *mut pg_sys::ScanKeyData,
    _set_params: bool,
    _allow_strat: bool,
    _allow_sync: bool,
    _allow_pagemode: bool,
) {
    let d = desc(scan);
    d.lo = 0;
    d.end = if d.parallel.is_null() { (*d.table).nrows() } else { (*d.parallel).nrows };
    d.started = false;
    d.par_next = 0;
    d.par_end = 0;
    d.block_n = 0;
    d.block_pos = 0;
    d.blk = u64::MAX;
    d.reader.reset(&*d.table);
}

/// Make the scan read column snapshot `snap` (a reference the scan now
/// owns and releases at its end).
pub fn use_snapshot(scan: pg_sys::TableScanDesc, snap: Off) {
    // SAFETY: scan was created by scan_begin.
    let d = unsafe { desc(scan) };
    let table = unsafe { &*d.table };
    let s = table.snapshot(shmem::arena(), snap);
    d.reader.bind(table, s);
    d.snap = snap;
    if d.parallel.is_null() {
        d.end = s.nrows;
    }
}

/// Restrict the scan to the attributes flagged in `wanted`.
pub fn restrict_scan(scan: pg_sys::TableScanDesc, wanted: &[bool]) {
    // SAFETY: scan was created by scan_begin.
    unsafe { desc(scan).reader.restrict(|i| wanted.get(i).copied().unwrap_or(true)) };
}

/// [`restrict_scan`] to a set of columns.
pub(super) fn restrict_scan_to(scan: pg_sys::TableScanDesc, wanted: &super::modify::Columns) {
    // SAFETY: scan was created by scan_begin.
    unsafe { desc(scan).reader.restrict(|i| wanted.contains(i)) };
}

/// The next row id of a scan in forward order (parallel scans: this
/// worker's share), for callers that read rows themselves.
pub unsafe fn next_row(scan: pg_sys::TableScanDesc) -> Option<u64> {
    next_candidate(desc(scan), true)
}

/// The next row id to try, or None at the end of the scan.
unsafe fn next_candidate(d: &mut ScanDesc, forward: bool) -> Option<u64> {
    if !d.parallel.is_null() {
        if d.par_next >= d.par_end {
            let p = &*d.parallel;
            let start = p.next_row.fetch_add(PARALLEL_CHUNK, Ordering::AcqRel);
            if start >= p.nrows {
                return None;
            }
            d.par_next = start;
            d.par_end = (start + PARALLEL_CHUNK).min(p.nrows);
        }
        d.par_next += 1;
        return Some(d.par_next - 1);
    }
    let (lo, hi) = (d.lo as i64, d.end as i64);
    if !d.started {
        d.cur = if forward { lo - 1 } else { hi };
        d.started = true;
    }
    if forward {
        d.cur += 1;
        if d.cur >= hi {
            d.cur = hi;
            return None;
        }
    } else {
        d.cur -= 1;
        if d.cur < lo {
            d.cur = lo - 1;
            return None;
        }
    }
    Some(d.cur as u64)
}

pub unsafe fn getnext(
    scan: pg_sys::TableScanDesc,
    direction: pg_sys::ScanDirection::Type,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    let found = next_visible(scan, direction, slot);
    if found {
        count_returned((*scan).rs_rd, 1);
    }
    found
}

/// The table's statistics counters for this transaction (PostgreSQL 15's
/// `pgstat_count_heap_*` are macros over them), if statistics are kept.
unsafe fn table_counts(rel: pg_sys::Relation) -> Option<&'static mut pg_sys::PgStat_TableCounts> {
    if (*rel).pgstat_info.is_null() {
        if !(*rel).pgstat_enabled {
            return None;
        }
        pg_sys::pgstat_assoc_relation(rel);
        if (*rel).pgstat_info.is_null() {
            return None;
        }
    }
    Some(&mut (*(*rel).pgstat_info).t_counts)
}

/// `pg_stat_*_tables.seq_tup_read`: rows a sequential scan returned.
pub unsafe fn count_returned(rel: pg_sys::Relation, n: u64) {
    if let Some(c) = table_counts(rel) {
        c.t_tuples_returned += n as i64;
    }
}

unsafe fn next_visible(
    scan: pg_sys::TableScanDesc,
    direction: pg_sys::ScanDirection::Type,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    let d = desc(scan);
    let forward = direction != pg_sys::ScanDirection::BackwardScanDirection;
    // Block summaries need whole blocks in order: forward scans of the
    // whole table (parallel chunks are whole blocks) with MVCC snapshots.
    let summarize = forward
        && d.lo == 0
        && d.base.rs_flags & pg_sys::ScanOptions::SO_TYPE_TIDRANGESCAN == 0
        && d.vis.as_ref().is_some_and(|v| v.is_mvcc());
    let mut visited = 0u32;
    loop {
        let Some(row) = next_candidate(d, forward) else {
            if summarize {
                d.finish_block();
            }
            pg_sys::ExecClearTuple(slot);
            return false;
        };
        visited += 1;
        if visited.is_multiple_of(8192) {
            pg_sys::check_for_interrupts!();
        }
        if !summarize {
            if d.read(row, slot) {
                return true;
            }
            continue;
        }
        let block = row >> SUMMARY_ROWS_SHIFT;
        if block != d.blk {
            d.finish_block();
            d.start_block(block);
        }
        if d.blk_fast {
            if d.reader.read_clean(d.base.rs_rd, &*d.table, row, d.blk_word, slot) {
                return true;
            }
            d.blk_fast = false; // a writer came by: check rows from here on
        }
        if d.read_in_block(row, slot) {
            return true;
        }
    }
}

/// A consumer of [`scan_rows`].
pub trait RowSink {
    /// May whole clean blocks go to [`clean`](Self::clean)?
    fn takes_blocks(&self) -> bool;
    /// Rows `rows`, all visible, to be read with [`Reader::value`].
    fn clean(&mut self, reader: &mut Reader, table: &Table, rows: std::ops::Range<u64>);
    /// Rows `rows` of a block that is not clean, each checked and found
    /// visible at the version the frozen columns hold, to be read with
    /// [`Reader::value`].
    fn checked(&mut self, reader: &mut Reader, table: &Table, rows: std::ops::Range<u64>);
    /// One visible row, in `slot`.
    fn row(&mut self, slot: *mut pg_sys::TupleTableSlot);
}

/// Read every row of a forward scan for a consumer that works without
/// slots where it can: the rows of each block whose summary vouches for all
/// of them (newest versions committed before the snapshot, undeleted), in a
/// frozen column snapshot, go to `sink.clean` as a range. In the other
/// blocks each row's header is checked; runs of rows whose frozen version
/// is the visible one go to `sink.checked`, and only rows the snapshot sees
/// at an older version are read into `slot` and given to `sink.row`. On
/// live columns, or when the sink takes no blocks, every row goes to
/// `sink.row`.
pub unsafe fn scan_rows(scan: pg_sys::TableScanDesc, slot: *mut pg_sys::TupleTableSlot, sink: &mut dyn RowSink) {
    let d = desc(scan);
    let by_blocks = d.parallel.is_null()
        && d.lo == 0
        && d.reader.is_frozen()
        && d.base.rs_flags & pg_sys::ScanOptions::SO_TYPE_TIDRANGESCAN == 0
        && d.vis.as_ref().is_some_and(|v| v.is_mvcc());
    if !by_blocks || !sink.takes_blocks() {
        while getnext(scan, pg_sys::ScanDirection::ForwardScanDirection, slot) {
            sink.row(slot);
        }
        return;
    }
    let table = &*d.table;
    let rows_per_block = 1u64 << SUMMARY_ROWS_SHIFT;
    d.started = true;
    let mut block = 0;
    let mut returned = 0;
    while block * rows_per_block < d.end {
        pg_sys::check_for_interrupts!();
        let lo = block * rows_per_block;
        let hi = (lo + rows_per_block).min(d.end);
        d.cur = lo as i64; // (start_block checks we enter at the first row)
        d.start_block(block);
        if d.blk_fast {
            sink.clean(&mut d.reader, table, lo..hi);
            returned += hi - lo;
        } else {
            // Rows run..row are visible at their frozen version, not yet handed out.
            let mut run = lo;
            for row in lo..hi {
                d.cur = row as i64;
                let judged = d.check_in_block(row);
                if matches!(judged, Some((_, Seen::Live))) {
                    continue;
                }
                if run < row {
                    sink.checked(&mut d.reader, table, run..row);
                    returned += row - run;
                }
                run = row + 1;
                if let Some((h, seen)) = judged {
                    if d.reader.materialize(d.base.rs_rd, table, row, &h, seen, slot, d.reader.buf) {
                        sink.row(slot);
                        returned += 1;
                    }
                }
            }
            if run < hi {
                sink.checked(&mut d.reader, table, run..hi);
                returned += hi - run;
            }
        }
        d.finish_block();
        block += 1;
    }
    d.cur = d.end as i64;
    count_returned(d.base.rs_rd, returned);
}

impl ScanDesc {
    /// Read `row` of the current block with visibility checks, and account
    /// for it in the block's summary and the avoided-chain-walk counter.
    #[inline]
    unsafe fn read_in_block(&mut self, row: u64, slot: *mut pg_sys::TupleTableSlot) -> bool {
        let found = self.read(row, slot);
        self.account(row, found && self.reader.last_depth == 0);
        found
    }

    /// Account for `row`, just judged, in the block's cleanliness and, if
    /// it was returned at its stored version, in the avoided chain walks.
    #[inline]
    unsafe fn account(&mut self, row: u64, at_stored_version: bool) {
        self.track(row);
        if at_stored_version {
            self.note_avoided(row);
        }
    }

    /// Judge `row` of the current block of a frozen reader from its header
    /// alone, accounting for it as [`read_in_block`](Self::read_in_block)
    /// does. None for a row id past the stored rows (a visible row needs
    /// [`Reader::materialize`] or [`Reader::value`] after this).
    #[inline]
    unsafe fn check_in_block(&mut self, row: u64) -> Option<(RowHeader, Seen)> {
        debug_assert!(self.reader.is_frozen(), "frozen pages need no reclamation epoch and never change");
        let table = &*self.table;
        let vis = self.vis.as_ref().expect("scan has a snapshot");
        self.reader.last = None;
        let Some(h) = table.cursor_header(shmem::arena(), &mut self.reader.cur, row) else {
            self.account(row, false);
            return None;
        };
        let seen = self.reader.judge(self.base.rs_rd, table, row, &h, vis);
        self.account(row, seen == Seen::Live);
        Some((h, seen))
    }

    unsafe fn start_block(&mut self, block: u64) {
        let arena = shmem::arena();
        let table = &*self.table;
        let vis = self.vis.as_ref().expect("scan has a snapshot");
        self.blk = block;
        self.blk_word = self.reader.summary(table, block);
        self.blk_avoided = 0;
        self.blk_moved = self.snap != 0 && table.block_summary(arena, block) != self.blk_word;
        self.blk_fast = summary_clean(self.blk_word).is_some_and(|mx| vis.committed_before_snapshot(mx));
        // Only a block we see from its first row can be found clean.
        self.blk_clean = !self.blk_fast && (self.cur < 0 || block << SUMMARY_ROWS_SHIFT == self.next_row_hint());
        self.blk_rows = 0;
        self.blk_max_xmin = 0;
        arena.count(if self.blk_fast { stats::BLOCKS_FAST } else { stats::BLOCKS_CHECKED }, 1);
    }

    /// The row just handed out (for the clean-block check).
    fn next_row_hint(&self) -> u64 {
        if self.parallel.is_null() {
            self.cur.max(0) as u64
        } else {
            self.par_next.saturating_sub(1)
        }
    }

    /// Account for the row just read in the current block's cleanliness.
    fn track(&mut self, _row: u64) {
        if !self.blk_clean {
            return;
        }
        match &self.reader.last {
            Some(h)
                if h.flags & flag::XMIN_COMMITTED != 0
                    && h.xmax == 0
                    // (a row updated in place counts by its newest version: a
                    // reader that sees the newest creator needs no older one)
                    && h.flags & (flag::SPECULATIVE | flag::VACANT) == 0 =>
            {
                self.blk_rows += 1;
                if h.xmin >= crate::visibility::FIRST_NORMAL_XID
                    && (self.blk_max_xmin == 0 || precedes(self.blk_max_xmin, h.xmin))
                {
                    self.blk_max_xmin = h.xmin;
                }
            }
            _ => self.blk_clean = false,
        }
    }

    unsafe fn finish_block(&mut self) {
        // Only scans of a column snapshot mark blocks: the snapshot froze
        // rows and summary words together (writers are excluded while it is
        // made), so the CAS succeeds only if no writer touched the block
        // since. A scan of the live columns could read a row after a
        // writer announced itself (bumped the word) but before it wrote,
        // and mark a block the writer is about to change.
        if self.blk != u64::MAX && self.blk_clean && self.blk_rows == 1 << SUMMARY_ROWS_SHIFT && self.reader.is_frozen() {
            (*self.table).mark_block_clean(shmem::arena(), self.blk, self.blk_word, self.blk_max_xmin.max(1));
        }
        if self.blk_avoided != 0 {
            shmem::arena().count(stats::CHAIN_WALKS_AVOIDED, self.blk_avoided);
        }
        self.blk = u64::MAX;
    }

    /// A snapshot scan returned `row` at its frozen version: would reading
    /// the live columns have meant a chain walk? Counted only in blocks
    /// writers had touched since the snapshot when the scan entered them:
    /// one look at the live summary per block, not per row (a statistic,
    /// it may miss writes made while the scan is in the block).
    unsafe fn note_avoided(&mut self, row: u64) {
        if !self.blk_moved {
            return;
        }
        let arena = shmem::arena();
        let table = &*self.table;
        if let (Some(frozen), Some(live)) = (self.reader.last, table.header(arena, row)) {
            if live.xmin != frozen.xmin || live.xmax != frozen.xmax {
                self.blk_avoided += 1;
            }
        }
    }
}

fn precedes(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_getnextslot(
    scan: pg_sys::TableScanDesc,
    direction: pg_sys::ScanDirection::Type,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    getnext(scan, direction, slot)
}

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_set_tidrange(
    scan: pg_sys::TableScanDesc,
    mintid: pg_sys::ItemPointer,
    maxtid: pg_sys::ItemPointer,
) {
    let d = desc(scan);
    let nrows = (*d.table).nrows();
    let block_of = |t: &pg_sys::ItemPointerData| ((t.ip_blkid.bi_hi as u64) << 16) | t.ip_blkid.bi_lo as u64;
    // First row at or after mintid; offsets past a block's rows round up.
    let lo = {
        let (block, off) = (block_of(&*mintid), ((*mintid).ip_posid as u64).max(1));
        if off > ROWS_PER_BLOCK {
            (block + 1) * ROWS_PER_BLOCK
        } else {
            block * ROWS_PER_BLOCK + off - 1
        }
    };
    // One past the last row at or before maxtid.
    let hi = {
        let (block, off) = (block_of(&*maxtid), (*maxtid).ip_posid as u64);
        block * ROWS_PER_BLOCK + off.min(ROWS_PER_BLOCK)
    };
    d.lo = lo.min(nrows);
    d.end = hi.min(nrows).max(d.lo);
    d.base.rs_mintid = *mintid;
    d.base.rs_maxtid = *maxtid;
    d.started = false;
}

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_getnextslot_tidrange(
    scan: pg_sys::TableScanDesc,
    direction: pg_sys::ScanDirection::Type,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    getnext(scan, direction, slot)
}

// ---- parallel scans -------------------------------------------------------

#[pg_guard]
pub unsafe extern "C-unwind" fn parallelscan_estimate(_rel: pg_sys::Relation) -> pg_sys::Size {
    std::mem::size_of::<ParallelScan>()
}

#[pg_guard]
pub unsafe extern "C-unwind" fn parallelscan_initialize(
    rel: pg_sys::Relation,
    pscan: pg_sys::ParallelTableScanDesc,
) -> pg_sys::Size {
    let p = pscan as *mut ParallelScan;
    (*p).base.phs_relid = (*rel).rd_id;
    (*p).base.phs_syncscan = false;
    std::ptr::write(&raw mut (*p).next_row, AtomicU64::new(0));
    (*p).nrows = table_of(rel).nrows();
    std::mem::size_of::<ParallelScan>()
}

#[pg_guard]
pub unsafe extern "C-unwind" fn parallelscan_reinitialize(rel: pg_sys::Relation, pscan: pg_sys::ParallelTableScanDesc) {
    let p = pscan as *mut ParallelScan;
    (*p).next_row.store(0, Ordering::Release);
    (*p).nrows = table_of(rel).nrows();
}

// ---- single rows ------------------------------------------------------------

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_fetch_row_version(
    rel: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    snapshot: pg_sys::Snapshot,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    let table = table_of(rel);
    super::modify::predicate_lock_relation(rel, snapshot);
    let Some(row) = tid_to_row(tid) else { return false };
    if row >= table.nrows() {
        return false;
    }
    let mut vis = Visibility::new(snapshot);
    if super::tid_is_newest(tid) {
        vis.any_newest = true;
    }
    fetch_into(rel, table, row, &vis, slot)
}

/// Read one row into a slot that outlives our scratch memory: the slot is
/// materialised (it owns copies of all values). Uses the relation's cached
/// reader (UPDATE and DELETE fetch every row they change this way).
pub unsafe fn fetch_into(
    rel: pg_sys::Relation,
    table: &Table,
    row: u64,
    vis: &Visibility,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    let reader = crate::storage::fetch_reader(rel, table);
    reader.prefetch(table, row);
    // The values must outlive the next fetch from `rel`: copied to memory
    // of the slot's own (or, for slots not ours, materialized).
    if let Some(buf) = super::slot::row_buffer(slot, reader.row_buffer_bytes()) {
        return reader.read_to(rel, table, row, vis, slot, buf);
    }
    let found = reader.read(rel, table, row, vis, slot);
    if found {
        pg_sys::ExecMaterializeSlot(slot);
    }
    found
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_tid_valid(scan: pg_sys::TableScanDesc, tid: pg_sys::ItemPointer) -> bool {
    let d = desc(scan);
    matches!(tid_to_row(tid), Some(r) if r < (*d.table).nrows())
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_get_latest_tid(scan: pg_sys::TableScanDesc, tid: pg_sys::ItemPointer) {
    let d = desc(scan);
    let table = &*d.table;
    let arena = shmem::arena();
    let Some(mut row) = tid_to_row(tid) else { return };
    let _epoch = shmem::enter_epoch();
    // Follow new-row-id updates whose updater committed or is us.
    for _ in 0..1_000_000 {
        let Some(h) = table.header(arena, row) else { break };
        if h.flags & flag::UPDATED == 0 || h.next >= table.nrows() {
            break;
        }
        let mut hints = 0;
        match xid_state(h.xmax, h.flags, flag::XMAX_COMMITTED, flag::XMAX_ABORTED, &mut hints) {
            XidState::Committed | XidState::Current => row = h.next,
            _ => break,
        }
    }
    row_to_tid(row, &mut *tid);
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_satisfies_snapshot(
    rel: pg_sys::Relation,
    slot: *mut pg_sys::TupleTableSlot,
    snapshot: pg_sys::Snapshot,
) -> bool {
    let table = table_of(rel);
    let Some(row) = tid_to_row(&(*slot).tts_tid) else { return false };
    // (entered first: the undo records the header leads to stay allocated)
    let _epoch = shmem::enter_epoch();
    let Some(h) = table.header(shmem::arena(), row) else { return false };
    Visibility::new(snapshot).version(table, &h, &mut 0).any()
}

// ---- bitmap scans -----------------------------------------------------------

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_bitmap_next_block(
    scan: pg_sys::TableScanDesc,
    tbmres: *mut pg_sys::TBMIterateResult,
) -> bool {
    let d = desc(scan);
    let nrows = (*d.table).nrows();
    let block = (*tbmres).blockno as u64;
    d.block_n = 0;
    d.block_pos = 0;
    let first = block * ROWS_PER_BLOCK;
    if first >= nrows {
        return false;
    }
    let ntuples = (*tbmres).ntuples;
    if ntuples >= 0 {
        let offs = (*tbmres).offsets.as_slice(ntuples as usize);
        for &o in offs {
            if o >= 1 && (o as u64) <= ROWS_PER_BLOCK && first + o as u64 - 1 < nrows {
                d.push_block_row(first + o as u64 - 1);
            }
        }
    } else {
        for r in first..(first + ROWS_PER_BLOCK).min(nrows) {
            d.push_block_row(r);
        }
    }
    d.block_n > 0
}

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_bitmap_next_tuple(
    scan: pg_sys::TableScanDesc,
    _tbmres: *mut pg_sys::TBMIterateResult,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    next_block_row(desc(scan), slot)
}

/// Return the next visible row among `block_rows`.
unsafe fn next_block_row(d: &mut ScanDesc, slot: *mut pg_sys::TupleTableSlot) -> bool {
    while d.block_pos < d.block_n {
        let row = d.block_row(d.block_pos);
        d.block_pos += 1;
        if d.read(row, slot) {
            return true;
        }
    }
    pg_sys::ExecClearTuple(slot);
    false
}

// ---- TABLESAMPLE ------------------------------------------------------------

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_sample_next_block(
    scan: pg_sys::TableScanDesc,
    scanstate: *mut pg_sys::SampleScanState,
) -> bool {
    let d = desc(scan);
    let nblocks = blocks_for_rows(d.end);
    let tsm = (*scanstate).tsmroutine;
    let block = if let Some(next_block) = (*tsm).NextSampleBlock {
        let b = next_block(scanstate, nblocks as pg_sys::BlockNumber);
        if b == pg_sys::InvalidBlockNumber {
            return false;
        }
        b as u64
    } else {
        let b = if d.started { d.sample_block + 1 } else { 0 };
        if b >= nblocks {
            return false;
        }
        b
    };
    d.started = true;
    d.sample_block = block;
    true
}

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_sample_next_tuple(
    scan: pg_sys::TableScanDesc,
    scanstate: *mut pg_sys::SampleScanState,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    let d = desc(scan);
    let tsm = (*scanstate).tsmroutine;
    let next_tuple = (*tsm).NextSampleTuple.expect("tablesample methods provide NextSampleTuple");
    loop {
        let off = next_tuple(scanstate, d.sample_block as pg_sys::BlockNumber, ROWS_PER_BLOCK as pg_sys::OffsetNumber);
        if off == 0 {
            pg_sys::ExecClearTuple(slot);
            return false;
        }
        let row = d.sample_block * ROWS_PER_BLOCK + off as u64 - 1;
        if row < d.end && d.read(row, slot) {
            return true;
        }
    }
}

// ---- ANALYZE ----------------------------------------------------------------

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_analyze_next_block(
    scan: pg_sys::TableScanDesc,
    blockno: pg_sys::BlockNumber,
    _bstrategy: pg_sys::BufferAccessStrategy,
) -> bool {
    let d = desc(scan);
    let first = blockno as u64 * ROWS_PER_BLOCK;
    let nrows = (*d.table).nrows();
    d.block_n = 0;
    d.block_pos = 0;
    for r in first.min(nrows)..(first + ROWS_PER_BLOCK).min(nrows) {
        d.push_block_row(r);
    }
    // (acquire_sample_rows calls vacuum_delay_point for each block)
    super::vacuum::charge_read(d.block_n * d.reader.row_bytes());
    true
}

#[pg_guard]
pub unsafe extern "C-unwind" fn scan_analyze_next_tuple(
    scan: pg_sys::TableScanDesc,
    _oldest_xmin: pg_sys::TransactionId,
    liverows: *mut f64,
    deadrows: *mut f64,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    let d = desc(scan);
    let table = &*d.table;
    let arena = shmem::arena();
    while d.block_pos < d.block_n {
        let row = d.block_row(d.block_pos);
        d.block_pos += 1;
        let _epoch = d.reader.guard_live(table);
        // (a row an aborted in-place update left would count as dead)
        let Some(h) = table.cursor_header(arena, &mut d.reader.cur, row).and_then(|h| super::modify::put_back_aborted(d.base.rs_rd, table, row, h)) else { continue };
        let mut hints = 0;
        let class = analyze_class(&h, &mut hints);
        if hints != 0 {
            // (as heap's ANALYZE does: the next reader need not ask the clog)
            table.set_hint(arena, row, &h, hints);
        }
        match class {
            RowClass::Live if super::slot::is_ours(slot) => {
                *liverows += 1.0;
                d.analyze_row = (row, h);
                let arg = d as *mut ScanDesc as *mut std::ffi::c_void;
                super::slot::store_pending(slot, super::slot::Pending { read: read_analyze_row, arg });
                super::slot::set_stamps(slot, Some(&h));
                row_to_tid(row, &mut (*slot).tts_tid);
                (*slot).tts_tableOid = (*d.base.rs_rd).rd_id;
                return true;
            }
            RowClass::Live => {
                *liverows += 1.0;
                d.reader.fill(d.base.rs_rd, table, row, slot, Some(&h));
                if table.row_unchanged(arena, row, &h) {
                    return true;
                }
                *liverows -= 1.0;
                d.block_pos -= 1; // changed under us: look again
            }
            RowClass::Dead => *deadrows += 1.0,
            RowClass::Ignore => {}
        }
    }
    pg_sys::ExecClearTuple(slot);
    false
}

/// Read the values of the row `scan_analyze_next_tuple` counted as live
/// (`arg` is its scan) when ANALYZE keeps it. If the row changed since it
/// was counted, ANALYZE still needs a value of it: the version a snapshot
/// taken now sees (never one an uncommitted writer left), or, if the row
/// was deleted since, its values as the delete found them.
#[pg_guard]
unsafe extern "C-unwind" fn read_analyze_row(arg: *mut std::ffi::c_void, slot: *mut pg_sys::TupleTableSlot) {
    let d = &mut *(arg as *mut ScanDesc);
    let (rel, table, arena) = (d.base.rs_rd, &*d.table, shmem::arena());
    let (row, h) = d.analyze_row;
    {
        let _epoch = d.reader.guard_live(table);
        d.reader.fill(rel, table, row, slot, Some(&h));
        if table.row_unchanged(arena, row, &h) {
            return;
        }
    }
    let mut vis = Visibility::new(pg_sys::GetLatestSnapshot());
    vis.serializable = false; // (not a read of the transaction's)
    if d.reader.read(rel, table, row, &vis, slot) {
        return;
    }
    loop {
        let _epoch = d.reader.guard_live(table);
        let h = table.header(arena, row);
        d.reader.fill(rel, table, row, slot, h.as_ref());
        if h.is_none_or(|h| table.row_unchanged(arena, row, &h)) {
            return;
        }
    }
}

enum RowClass {
    Live,
    Dead,
    Ignore,
}

/// How ANALYZE counts a row, following heap's `heapam_scan_analyze_next_tuple`.
/// A row whose newest version an aborted transaction updated in place (its
/// updater aborted after the put-back) is not dead: its chain is the row,
/// as VACUUM's `fate` has it; it is left out, like a row being changed.
/// Hint bits learnt on the way are added to `hints`.
fn analyze_class(h: &RowHeader, hints: &mut u32) -> RowClass {
    match xid_state(h.xmin, h.flags, flag::XMIN_COMMITTED, flag::XMIN_ABORTED, hints) {
        XidState::Aborted if h.chain != 0 => return RowClass::Ignore,
        XidState::Aborted => return RowClass::Dead,
        XidState::InProgress => return RowClass::Ignore,
        XidState::Current | XidState::Committed => {}
    }
    if h.xmax == 0 || h.flags & flag::XMAX_LOCK_ONLY != 0 {
        return RowClass::Live;
    }
    match xid_state(h.xmax, h.flags, flag::XMAX_COMMITTED, flag::XMAX_ABORTED, hints) {
        XidState::Committed => RowClass::Dead,
        XidState::Current => RowClass::Ignore,
        _ => RowClass::Live,
    }
}
