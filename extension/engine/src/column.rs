//! Page-table columns.
//!
//! A column is an array of fixed-size arena pages plus a page table that
//! maps page numbers to them. Row `r` of a column whose elements take
//! `2^elem_shift` bytes lives in page `r >> rows_shift` at element
//! `r & (rows_per_page - 1)`. Every element width is a power of two, so all
//! of this is shifts and masks.
//!
//! The page table has two levels: a fixed directory of [`DIR_ENTRIES`]
//! chunk offsets inside the column header, and chunks of [`CHUNK_ENTRIES`]
//! entries allocated from the table's heap on demand.
//!
//! Each entry packs the page's arena page number (low 32 bits) with its
//! *birth epoch* (high 32 bits): the table's snapshot epoch when the page
//! became private to the live column. A column snapshot taken at epoch `e`
//! shares every page born before `e`; a writer that meets such a page copies
//! it first and swaps the entry (software copy-on-write, DESIGN §5). Packing
//! both into one word makes the swap a single compare-and-swap.
//!
//! Chunks are shared the same way, one level up: a snapshot keeps the
//! directory's chunk offsets, not the entries, and every chunk records its
//! own birth epoch; a writer about to change an entry of a chunk born before
//! the shared epoch copies the chunk and swaps the directory entry first.
//! Creating a snapshot so costs one word per 1,024 pages. A replaced chunk
//! or page is retired, not freed, so a reader that still holds it reads a
//! consistent older state (and finds out through the table's `cow_gen`).
//!
//! All writers of entries hold the table's snapshot latch shared, and the
//! shared epoch changes only under the latch held exclusively: every writer
//! of one latch period agrees on what is shared.

use crate::arena::{AllocResult, Arena, Heap, Off, PAGE_SHIFT, PAGE_SIZE};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

pub const DIR_ENTRIES: usize = 256;
pub const CHUNK_SHIFT: u32 = 10;
pub const CHUNK_ENTRIES: usize = 1 << CHUNK_SHIFT;
/// Pages a page table can address.
pub const MAX_PAGES: u64 = (DIR_ENTRIES * CHUNK_ENTRIES) as u64;

/// A chunk of page-table entries.
#[repr(C)]
pub struct Chunk {
    /// Snapshot epoch at which the chunk became private to the live column.
    birth: u64,
    entries: [AtomicU64; CHUNK_ENTRIES],
}

/// What a writer replaced and must retire (snapshots may still read it).
#[derive(Clone, Copy, Debug)]
pub enum Replaced {
    /// A page (its arena page number).
    Page(u32),
    /// A chunk of the page table (its arena offset).
    Chunk(Off),
}

/// Read the page number of page `idx` from a frozen chunk directory
/// (`chunks`, one offset per chunk, 0 for none) whose chunks and pages are
/// mapped at `base`. Null when the page is missing.
///
/// # Safety
/// `chunks` holds at least `idx / CHUNK_ENTRIES + 1` offsets of chunks that
/// `base` maps and that stay unchanged while the caller reads them.
#[inline(always)]
pub unsafe fn frozen_page(base: *const u8, chunks: *const Off, idx: u64) -> *mut u8 {
    // SAFETY: the caller's contract.
    unsafe {
        let c = *chunks.add((idx >> CHUNK_SHIFT) as usize);
        if c == 0 {
            return std::ptr::null_mut();
        }
        let chunk = &*(base.add(c as usize) as *const Chunk);
        let e = chunk.entries[(idx as usize) & (CHUNK_ENTRIES - 1)].load(Ordering::Relaxed);
        if e == 0 {
            std::ptr::null_mut()
        } else {
            base.add(page_no_off(entry_page(e)) as usize) as *mut u8
        }
    }
}

#[inline(always)]
pub fn entry_page(e: u64) -> u32 {
    e as u32
}
#[inline(always)]
pub fn entry_birth(e: u64) -> u32 {
    (e >> 32) as u32
}
#[inline(always)]
fn make_entry(page: u32, birth: u32) -> u64 {
    ((birth as u64) << 32) | page as u64
}
#[inline(always)]
pub fn page_no_off(page: u32) -> Off {
    (page as Off) << PAGE_SHIFT
}

#[repr(C)]
pub struct PageTable {
    rows_shift: u32,
    elem_shift: u32,
    /// Largest epoch of a live snapshot that covers this column; pages born
    /// before it are shared and must be copied before a write.
    shared_epoch: AtomicU32,
    _pad: u32,
    dir: [AtomicU64; DIR_ENTRIES],
}

impl PageTable {
    /// Set up a page table of `2^elem_shift`-byte elements. For bitmaps pass
    /// `elem_shift = u32::MAX` (one bit per row).
    pub fn init(&mut self, elem_shift: u32) {
        self.elem_shift = elem_shift;
        self.rows_shift = if elem_shift == u32::MAX { PAGE_SHIFT + 3 } else { PAGE_SHIFT - elem_shift };
        self.shared_epoch = AtomicU32::new(0);
        self._pad = 0;
        for d in self.dir.iter_mut() {
            *d = AtomicU64::new(0);
        }
    }

    #[inline(always)]
    pub fn rows_shift(&self) -> u32 {
        self.rows_shift
    }

    #[inline(always)]
    pub fn rows_per_page(&self) -> u64 {
        1 << self.rows_shift
    }

    #[inline(always)]
    pub fn elem_shift(&self) -> u32 {
        self.elem_shift
    }

    pub fn shared_epoch(&self) -> u32 {
        self.shared_epoch.load(Ordering::Acquire)
    }

    pub fn set_shared_epoch(&self, e: u32) {
        self.shared_epoch.store(e, Ordering::Release);
    }

    #[inline(always)]
    fn chunk<'a>(&self, arena: &'a Arena, page_idx: u64) -> Option<&'a Chunk> {
        let d = (page_idx >> CHUNK_SHIFT) as usize;
        if d >= DIR_ENTRIES {
            return None;
        }
        let c = self.dir[d].load(Ordering::Acquire);
        if c == 0 {
            return None;
        }
        // SAFETY: a non-zero directory entry is a published chunk; one that
        // is replaced is retired, and readers hold a reclamation epoch.
        Some(unsafe { arena.get::<Chunk>(c) })
    }

    /// The element for `row` in `page`, this table's page holding `row`,
    /// whose elements are `T`s, one per row (system columns, summaries).
    ///
    /// # Safety
    /// `page` is that page, and stays allocated for `'a`.
    #[inline(always)]
    pub unsafe fn element<'a, T>(&self, page: *const u8, row: u64) -> &'a T {
        // SAFETY: the caller's contract; the index is below rows_per_page.
        unsafe { &*(page as *const T).add((row & (self.rows_per_page() - 1)) as usize) }
    }

    /// The entry for page `page_idx`, 0 when the page does not exist.
    #[inline(always)]
    pub fn entry(&self, arena: &Arena, page_idx: u64) -> u64 {
        match self.chunk(arena, page_idx) {
            Some(c) => c.entries[(page_idx as usize) & (CHUNK_ENTRIES - 1)].load(Ordering::Acquire),
            None => 0,
        }
    }

    /// The page holding `row`, for reading; None when it was never written.
    #[inline(always)]
    pub fn page_for_row(&self, arena: &Arena, row: u64) -> Option<*mut u8> {
        let e = self.entry(arena, row >> self.rows_shift);
        if e == 0 {
            None
        } else {
            Some(arena.ptr::<u8>(page_no_off(entry_page(e))))
        }
    }

    /// Chunk `d`, private to the live column and ready for its entries to
    /// change: allocated (empty) when missing, copied when a live snapshot
    /// shares it (the old one goes to `retire`). Same contract as
    /// [`page_for_write`](Self::page_for_write).
    fn chunk_for_write<'a>(
        &self,
        arena: &'a Arena,
        heap: &Heap,
        d: usize,
        epoch: u32,
        retire: &mut dyn FnMut(Replaced),
    ) -> AllocResult<&'a Chunk> {
        assert!(d < DIR_ENTRIES, "column exceeds {MAX_PAGES} pages");
        loop {
            let c = self.dir[d].load(Ordering::Acquire);
            // SAFETY: as in `chunk`.
            let old = (c != 0).then(|| unsafe { arena.get::<Chunk>(c) });
            if let Some(chunk) = old {
                if chunk.birth as u32 >= self.shared_epoch.load(Ordering::Acquire) {
                    return Ok(chunk);
                }
            }
            let fresh = heap.alloc(arena, std::mem::size_of::<Chunk>())?;
            // SAFETY: a fresh allocation the size of a chunk, ours until
            // published. A shared chunk is frozen: no writer changes it.
            let new = unsafe {
                let p = arena.ptr::<Chunk>(fresh);
                (*p).birth = epoch as u64;
                match old {
                    Some(o) => {
                        for (to, from) in (*p).entries.iter().zip(o.entries.iter()) {
                            to.store(from.load(Ordering::Relaxed), Ordering::Relaxed);
                        }
                    }
                    None => std::ptr::write_bytes((*p).entries.as_mut_ptr(), 0, CHUNK_ENTRIES),
                }
                &*p
            };
            match self.dir[d].compare_exchange(c, fresh, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    if c != 0 {
                        retire(Replaced::Chunk(c));
                    }
                    return Ok(new);
                }
                Err(_) => heap.free(arena, fresh),
            }
        }
    }

    /// The page holding `row`, private to the live column and ready for
    /// writing: allocated (zeroed) when missing, copied when a live snapshot
    /// shares it. `epoch` is the table's current snapshot epoch; the caller
    /// holds the table's snapshot latch in shared mode, so it cannot change.
    /// A copied page is handed to `retire` (snapshots still read it).
    pub fn page_for_write(
        &self,
        arena: &Arena,
        heap: &Heap,
        row: u64,
        epoch: u32,
        retire: &mut dyn FnMut(Replaced),
    ) -> AllocResult<*mut u8> {
        let page_idx = row >> self.rows_shift;
        let chunk = self.chunk_for_write(arena, heap, (page_idx >> CHUNK_SHIFT) as usize, epoch, retire)?;
        let slot = &chunk.entries[(page_idx as usize) & (CHUNK_ENTRIES - 1)];
        loop {
            let e = slot.load(Ordering::Acquire);
            if e == 0 {
                let fresh = arena.alloc_pages(&heap.owner, 1)?;
                let new = make_entry((fresh >> PAGE_SHIFT) as u32, epoch);
                match slot.compare_exchange(0, new, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => return Ok(arena.ptr::<u8>(fresh)),
                    Err(_) => {
                        arena.free_pages(&heap.owner, fresh);
                        continue;
                    }
                }
            }
            if entry_birth(e) >= self.shared_epoch.load(Ordering::Acquire) {
                return Ok(arena.ptr::<u8>(page_no_off(entry_page(e))));
            }
            // Shared with a snapshot: copy on write.
            let fresh = arena.alloc_page_to_overwrite(&heap.owner)?;
            // SAFETY: the old page is frozen (every writer copies it first)
            // and the fresh page is ours until published.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    arena.ptr::<u8>(page_no_off(entry_page(e))),
                    arena.ptr::<u8>(fresh),
                    PAGE_SIZE,
                );
            }
            let new = make_entry((fresh >> PAGE_SHIFT) as u32, epoch);
            match slot.compare_exchange(e, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    arena.count(crate::stats::COW_PAGE_COPIES, 1);
                    retire(Replaced::Page(entry_page(e)));
                    return Ok(arena.ptr::<u8>(fresh));
                }
                Err(_) => arena.free_pages(&heap.owner, fresh),
            }
        }
    }

    /// Visit every existing page entry as (page index, entry).
    pub fn for_each_entry(&self, arena: &Arena, mut f: impl FnMut(u64, u64)) {
        for d in 0..DIR_ENTRIES {
            let c = self.dir[d].load(Ordering::Acquire);
            if c == 0 {
                continue;
            }
            // SAFETY: as in `chunk`.
            let chunk = unsafe { arena.get::<Chunk>(c) };
            for (i, e) in chunk.entries.iter().enumerate() {
                let e = e.load(Ordering::Acquire);
                if e != 0 {
                    f(((d << CHUNK_SHIFT) | i) as u64, e);
                }
            }
        }
    }

    /// The directory entries (chunk offsets, 0 for none) covering pages
    /// `0..npages`, into `out` (one per chunk): a snapshot's frozen page
    /// table once the shared epoch covers them.
    pub fn capture_chunks(&self, npages: u64, out: &mut [Off]) {
        for (d, o) in out.iter_mut().enumerate().take(npages.div_ceil(CHUNK_ENTRIES as u64) as usize) {
            *o = self.dir[d].load(Ordering::Acquire);
        }
    }

    /// Remove page `page_idx` (a page being released); returns the old
    /// entry. Same contract as [`page_for_write`](Self::page_for_write).
    pub fn take_page(
        &self,
        arena: &Arena,
        heap: &Heap,
        page_idx: u64,
        epoch: u32,
        retire: &mut dyn FnMut(Replaced),
    ) -> AllocResult<u64> {
        if self.entry(arena, page_idx) == 0 {
            return Ok(0);
        }
        let chunk = self.chunk_for_write(arena, heap, (page_idx >> CHUNK_SHIFT) as usize, epoch, retire)?;
        Ok(chunk.entries[(page_idx as usize) & (CHUNK_ENTRIES - 1)].swap(0, Ordering::AcqRel))
    }

    /// A private copy of chunk `src` (frozen) for a physical snapshot: the
    /// first `limit` entries, each page number passed through `copy`, the
    /// rest empty. Allocated from `heap`; the caller frees it.
    pub fn copy_chunk(
        arena: &Arena,
        heap: &Heap,
        src: Off,
        limit: usize,
        copy: &mut dyn FnMut(u32) -> AllocResult<u32>,
    ) -> AllocResult<Off> {
        let fresh = heap.alloc(arena, std::mem::size_of::<Chunk>())?;
        // SAFETY: a fresh allocation the size of a chunk, ours alone; `src`
        // is a live chunk that no writer changes (the caller holds the
        // table's latch exclusively).
        let (new, old) = unsafe {
            let p = arena.ptr::<Chunk>(fresh);
            (*p).birth = 0;
            std::ptr::write_bytes((*p).entries.as_mut_ptr(), 0, CHUNK_ENTRIES);
            (&*p, arena.get::<Chunk>(src))
        };
        for i in 0..limit.min(CHUNK_ENTRIES) {
            let e = old.entries[i].load(Ordering::Relaxed);
            if e != 0 {
                match copy(entry_page(e)) {
                    Ok(page) => new.entries[i].store(make_entry(page, 0), Ordering::Relaxed),
                    Err(err) => {
                        heap.free(arena, fresh);
                        return Err(err);
                    }
                }
            }
        }
        Ok(fresh)
    }
}

/// Bitmap helpers over a page-table column of bits.
pub mod bits {
    use std::sync::atomic::{AtomicU64, Ordering};

    #[inline(always)]
    pub fn word(page: *mut u8, bit_in_page: u64) -> &'static AtomicU64 {
        // SAFETY: page is a PAGE_SIZE page; bit_in_page < PAGE_SIZE * 8.
        unsafe { &*(page as *const AtomicU64).add((bit_in_page >> 6) as usize) }
    }

    #[inline(always)]
    pub fn get(page: *mut u8, bit_in_page: u64) -> bool {
        word(page, bit_in_page).load(Ordering::Relaxed) & (1 << (bit_in_page & 63)) != 0
    }

    #[inline(always)]
    pub fn set(page: *mut u8, bit_in_page: u64, on: bool) {
        let mask = 1u64 << (bit_in_page & 63);
        if on {
            word(page, bit_in_page).fetch_or(mask, Ordering::Relaxed);
        } else {
            word(page, bit_in_page).fetch_and(!mask, Ordering::Relaxed);
        }
    }
}
