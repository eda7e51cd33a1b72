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
//! entries allocated from the table's heap on demand. Chunks never move, so
//! readers need no protection against page-table growth.
//!
//! Each entry packs the page's arena page number (low 32 bits) with its
//! *birth epoch* (high 32 bits): the table's snapshot epoch when the page
//! became private to the live column. A column snapshot taken at epoch `e`
//! shares every page born before `e`; a writer that meets such a page copies
//! it first and swaps the entry (software copy-on-write, DESIGN §5). Packing
//! both into one word makes the swap a single compare-and-swap.

use crate::arena::{AllocResult, Arena, Heap, Off, PAGE_SHIFT, PAGE_SIZE};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

pub const DIR_ENTRIES: usize = 256;
pub const CHUNK_SHIFT: u32 = 10;
pub const CHUNK_ENTRIES: usize = 1 << CHUNK_SHIFT;
/// Pages a page table can address.
pub const MAX_PAGES: u64 = (DIR_ENTRIES * CHUNK_ENTRIES) as u64;

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
    fn chunk<'a>(&self, arena: &'a Arena, page_idx: u64) -> Option<&'a [AtomicU64; CHUNK_ENTRIES]> {
        let d = (page_idx >> CHUNK_SHIFT) as usize;
        if d >= DIR_ENTRIES {
            return None;
        }
        let c = self.dir[d].load(Ordering::Acquire);
        if c == 0 {
            return None;
        }
        // SAFETY: a non-zero directory entry is a published chunk of
        // CHUNK_ENTRIES atomics that lives as long as the table.
        Some(unsafe { arena.get::<[AtomicU64; CHUNK_ENTRIES]>(c) })
    }

    /// The entry for page `page_idx`, 0 when the page does not exist.
    #[inline(always)]
    pub fn entry(&self, arena: &Arena, page_idx: u64) -> u64 {
        match self.chunk(arena, page_idx) {
            Some(c) => c[(page_idx as usize) & (CHUNK_ENTRIES - 1)].load(Ordering::Acquire),
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

    fn entry_slot<'a>(&self, arena: &'a Arena, heap: &Heap, page_idx: u64) -> AllocResult<&'a AtomicU64> {
        let d = (page_idx >> CHUNK_SHIFT) as usize;
        assert!(d < DIR_ENTRIES, "column exceeds {MAX_PAGES} pages");
        let mut c = self.dir[d].load(Ordering::Acquire);
        if c == 0 {
            let bytes = CHUNK_ENTRIES * 8;
            let fresh = heap.alloc(arena, bytes)?;
            // SAFETY: fresh allocation of `bytes` bytes, ours alone until published.
            unsafe { std::ptr::write_bytes(arena.ptr::<u8>(fresh), 0, bytes) };
            match self.dir[d].compare_exchange(0, fresh, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => c = fresh,
                Err(winner) => {
                    heap.free(arena, fresh);
                    c = winner;
                }
            }
        }
        // SAFETY: as in `chunk`.
        let chunk = unsafe { arena.get::<[AtomicU64; CHUNK_ENTRIES]>(c) };
        Ok(&chunk[(page_idx as usize) & (CHUNK_ENTRIES - 1)])
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
        retire: &mut dyn FnMut(u32),
    ) -> AllocResult<*mut u8> {
        let page_idx = row >> self.rows_shift;
        let slot = self.entry_slot(arena, heap, page_idx)?;
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
                    retire(entry_page(e));
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
            let chunk = unsafe { arena.get::<[AtomicU64; CHUNK_ENTRIES]>(c) };
            for (i, e) in chunk.iter().enumerate() {
                let e = e.load(Ordering::Acquire);
                if e != 0 {
                    f(((d << CHUNK_SHIFT) | i) as u64, e);
                }
            }
        }
    }

    /// Copy the page numbers of pages `0..npages` into `out` (a snapshot's
    /// frozen page table). Missing pages become 0.
    pub fn copy_pages(&self, arena: &Arena, npages: u64, out: &mut [u32]) {
        let mut p = 0u64;
        while p < npages {
            let d = (p >> CHUNK_SHIFT) as usize;
            let n = (CHUNK_ENTRIES as u64 - (p & (CHUNK_ENTRIES as u64 - 1))).min(npages - p);
            let c = self.dir[d].load(Ordering::Acquire);
            if c == 0 {
                out[p as usize..(p + n) as usize].fill(0);
            } else {
                // SAFETY: as in `chunk`.
                let chunk = unsafe { arena.get::<[AtomicU64; CHUNK_ENTRIES]>(c) };
                let base = (p as usize) & (CHUNK_ENTRIES - 1);
                for i in 0..n as usize {
                    out[p as usize + i] = entry_page(chunk[base + i].load(Ordering::Relaxed));
                }
            }
            p += n;
        }
    }

    /// Replace page `page_idx` (a page being reclaimed); returns the old entry.
    pub fn take_page(&self, arena: &Arena, page_idx: u64) -> u64 {
        match self.chunk(arena, page_idx) {
            Some(c) => c[(page_idx as usize) & (CHUNK_ENTRIES - 1)].swap(0, Ordering::AcqRel),
            None => 0,
        }
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
