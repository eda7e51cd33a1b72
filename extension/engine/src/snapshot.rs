//! Virtual snapshots of columns (DESIGN §5).
//!
//! A snapshot freezes some columns of a table (always with the system
//! columns) as they are at one instant, while writers go on. It keeps, per
//! captured page table, the directory of its chunks (one word per 1,024
//! pages; see `column.rs`). Providers:
//!
//! * [`Method::Cow`]: the live chunks, and the table's snapshot epoch moves
//!   on; a writer that meets a chunk or a page born before a live
//!   snapshot's epoch copies it first (`PageTable::page_for_write`).
//!   Creating one copies chunk offsets only.
//! * [`Method::Memcpy`]: private chunks pointing at private copies of every
//!   page (the physical-snapshot baseline).
//! * [`Method::VmSnapshot`]: the live chunks and pages, read through a
//!   copy-on-write image of the whole arena that the kernel's
//!   `vm_snapshot(2)` (`kernel-patch/`) maps elsewhere in the address space;
//!   writers write in place and the kernel copies the physical page they
//!   fault on. A process-private arena (the engine's single-process mode)
//!   is frozen by the first patch; the shared memfd arena of PostgreSQL by
//!   the second (`MFD_SNAPSHOT`), where the first only aliases it. The
//!   image is a mapping of the process that created the snapshot: only
//!   that process finds, attaches to and releases such a snapshot. Refused,
//!   never replaced by another provider, when the kernel lacks the call.
//!
//! Creation takes the table's latch exclusively, so no row is captured half
//! written. Snapshots are reference-counted; the last release frees the
//! arrays and private pages, lowers the copy-on-write horizon, and lets
//! memory retired while the snapshot lived (replaced pages, undo records,
//! blobs) be reclaimed.

use crate::arena::{AllocError, AllocResult, Arena, Off, PageOwner, NULL_OFF, PAGE_SHIFT, PAGE_SIZE};
use crate::column::{page_no_off, PageTable, CHUNK_ENTRIES};
use crate::table::{ColCache, Cursor, Table};
use crate::version::SUMMARY_ROWS_SHIFT;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Method {
    Cow = 0,
    Memcpy = 1,
    VmSnapshot = 2,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Cow => "cow",
            Method::Memcpy => "memcpy",
            Method::VmSnapshot => "vm_snapshot",
        }
    }

    pub fn from_u32(m: u32) -> Option<Method> {
        [Method::Cow, Method::Memcpy, Method::VmSnapshot].into_iter().find(|x| *x as u32 == m)
    }
}

/// Why no snapshot was made.
#[derive(Debug)]
pub enum SnapshotError {
    OutOfMemory(AllocError),
    /// The provider cannot work here (arena kind, kernel); says why.
    Unsupported(String),
    /// `vm_snapshot(2)` failed.
    Kernel(std::io::Error),
}

impl From<AllocError> for SnapshotError {
    fn from(e: AllocError) -> Self {
        SnapshotError::OutOfMemory(e)
    }
}

impl std::fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapshotError::OutOfMemory(e) => e.fmt(f),
            SnapshotError::Unsupported(why) => f.write_str(why),
            SnapshotError::Kernel(e) => write!(f, "vm_snapshot failed: {e}"),
        }
    }
}

/// The `vm_snapshot(2)` system call number, if the provider can serve
/// `arena`; otherwise why not.
pub fn vm_snapshot_ready(arena: &Arena) -> Result<libc::c_long, SnapshotError> {
    if !arena.can_freeze() {
        let why = crate::arena::vm_snapshot_shared_memfd().err().unwrap_or_else(|| {
            "the arena's memfd was created without MFD_SNAPSHOT".into()
        });
        return Err(SnapshotError::Unsupported(format!(
            "this arena is shared between processes, and {why}"
        )));
    }
    crate::arena::vm_snapshot_syscall().map_err(SnapshotError::Unsupported)
}

/// Part ids for the system page tables; user columns use their index.
pub const PART_STAMPS: u32 = u32::MAX;
pub const PART_CIDS: u32 = u32::MAX - 1;
pub const PART_LINKS: u32 = u32::MAX - 2;
pub const PART_SUMMARIES: u32 = u32::MAX - 3;
/// A user column's null bitmap: `PART_NULLS_BIT | column`.
pub const PART_NULLS_BIT: u32 = 1 << 30;

#[repr(C)]
#[derive(Clone, Copy)]
struct Part {
    which: u32,
    _pad: u32,
    npages: u64,
    /// `[Off; npages / CHUNK_ENTRIES rounded up]`: the page table's chunks
    /// (memcpy: the snapshot's own), 0 for missing ones.
    chunks: Off,
}

impl Part {
    // Arena memory is mutable behind `&`; the part's array is the
    // snapshot's, written only while the snapshot is being built.
    #[allow(clippy::mut_from_ref)]
    fn chunks<'a>(&self, arena: &'a Arena) -> &'a mut [Off] {
        // SAFETY: `chunks` holds that many offsets, owned by the snapshot.
        unsafe { std::slice::from_raw_parts_mut(arena.ptr::<Off>(self.chunks), nchunks(self.npages)) }
    }
}

fn nchunks(npages: u64) -> usize {
    npages.div_ceil(CHUNK_ENTRIES as u64) as usize
}

#[repr(C)]
pub struct Snapshot {
    pub id: u64,
    /// The table's snapshot epoch this snapshot created.
    pub epoch: u32,
    pub method: u32,
    pub refs: AtomicU32,
    nparts: u32,
    /// Rows covered (the table's row count at creation).
    pub nrows: u64,
    /// Creation time (µs since the Unix epoch) and how long it took (ns).
    pub created_us: u64,
    pub create_ns: u64,
    /// Caller's ordering stamp (for PostgreSQL: the oldest transaction id
    /// still running at creation): decides which queries may reuse it.
    pub completion: u64,
    /// Page numbers captured, and pages copied (memcpy at creation; for
    /// cow, the table's copy-on-write count when created).
    pub pages_captured: u64,
    pub pages_copied: u64,
    pub cow_at_create: u64,
    /// Address of the arena image mapped by `vm_snapshot(2)`, or 0, in the
    /// address space of process `creator`.
    image: u64,
    creator: u32,
    next: AtomicU64,
    /// Private page copies (memcpy).
    owner: PageOwner,
    parts: Off,
}

impl Snapshot {
    fn parts<'a>(&self, arena: &'a Arena) -> &'a [Part] {
        // SAFETY: `parts` holds `nparts` entries for the snapshot's life.
        unsafe { std::slice::from_raw_parts(arena.ptr::<Part>(self.parts), self.nparts as usize) }
    }

    /// The user columns captured.
    pub fn columns(&self, arena: &Arena) -> Vec<usize> {
        self.parts(arena)
            .iter()
            .filter(|p| p.which < PART_NULLS_BIT)
            .map(|p| p.which as usize)
            .collect()
    }

    /// Is the snapshot a `vm_snapshot` image, readable only by the process
    /// that created it?
    pub fn process_local(&self) -> bool {
        self.image != 0
    }

    /// Can this process read the snapshot? Not another process's
    /// `vm_snapshot` image.
    pub fn readable_here(&self) -> bool {
        !self.process_local() || self.creator == std::process::id()
    }

    pub fn covers(&self, arena: &Arena, cols: &[usize]) -> bool {
        let have = self.columns(arena);
        cols.iter().all(|c| have.contains(c))
    }

    fn part<'a>(&self, arena: &'a Arena, which: u32) -> Option<&'a Part> {
        self.parts(arena).iter().find(|p| p.which == which)
    }
}

/// A frozen page table, as cursors use it (see `column::frozen_page`).
#[derive(Clone, Copy, Debug)]
pub struct Frozen {
    pub chunks: *const Off,
    pub npages: u64,
    /// Where page numbers resolve: the arena, or a `vm_snapshot` image of it.
    pub base: *const u8,
}

/// Does a snapshot made with `method` hold private copies of part `which`
/// (rather than sharing the live pages)? memcpy copies everything; cow
/// copies the block summaries, which writers bump in place.
fn part_is_copied(method: u32, which: u32) -> bool {
    method == Method::Memcpy as u32 || (method == Method::Cow as u32 && which == PART_SUMMARIES)
}

fn now_us() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

impl Table {
    fn page_table_of<'a>(&'a self, arena: &'a Arena, which: u32) -> &'a PageTable {
        match which {
            PART_STAMPS => &self.stamps,
            PART_CIDS => &self.cids,
            PART_LINKS => &self.links,
            PART_SUMMARIES => &self.summaries,
            w if w & PART_NULLS_BIT != 0 => &self.column(arena, (w & !PART_NULLS_BIT) as usize).nulls,
            w => &self.column(arena, w as usize).values,
        }
    }

    /// Freeze the system columns and user columns `cols` as they are now.
    pub fn create_snapshot(
        &self,
        arena: &Arena,
        cols: &[usize],
        method: Method,
        completion: u64,
    ) -> Result<Off, SnapshotError> {
        let vm_snapshot_nr = match method {
            Method::VmSnapshot => Some(vm_snapshot_ready(arena)?),
            _ => None,
        };
        let started = std::time::Instant::now();
        let mut which: Vec<u32> = vec![PART_STAMPS, PART_CIDS, PART_LINKS, PART_SUMMARIES];
        for &c in cols {
            which.push(c as u32);
            which.push(PART_NULLS_BIT | c as u32);
        }
        let off = self.heap.alloc(arena, std::mem::size_of::<Snapshot>())?;
        let parts_off = match self.heap.alloc(arena, which.len() * std::mem::size_of::<Part>()) {
            Ok(p) => p,
            Err(e) => {
                self.heap.free(arena, off);
                return Err(e.into());
            }
        };
        // SAFETY: fresh allocations, ours until published.
        let snap = unsafe {
            let s = arena.ptr::<Snapshot>(off);
            std::ptr::write(
                s,
                Snapshot {
                    id: 0,
                    epoch: 0,
                    method: method as u32,
                    refs: AtomicU32::new(1),
                    nparts: 0,
                    nrows: 0,
                    created_us: now_us(),
                    create_ns: 0,
                    completion,
                    pages_captured: 0,
                    pages_copied: 0,
                    cow_at_create: 0,
                    image: 0,
                    creator: std::process::id(),
                    next: AtomicU64::new(NULL_OFF),
                    owner: PageOwner::new(),
                    parts: parts_off,
                },
            );
            &mut *s
        };
        let result = (|| -> Result<(), SnapshotError> {
            let _g = self.latch.exclusive();
            let nrows = self.nrows();
            snap.nrows = nrows;
            snap.epoch = self.snap_epoch.fetch_add(1, Ordering::AcqRel) + 1;
            snap.cow_at_create = arena.counter(crate::stats::COW_PAGE_COPIES);
            for &w in &which {
                let pt = self.page_table_of(arena, w);
                let units = if w == PART_SUMMARIES { nrows.div_ceil(1 << SUMMARY_ROWS_SHIFT) } else { nrows };
                let npages = units.div_ceil(pt.rows_per_page());
                let chunks = self.heap.alloc(arena, (nchunks(npages) * 8).max(8))?;
                let part = Part { which: w, _pad: 0, npages, chunks };
                let arr = part.chunks(arena);
                pt.capture_chunks(npages, arr);
                // SAFETY: parts_off holds which.len() entries; recorded now,
                // so that a failure below frees what the part holds.
                unsafe { *arena.ptr::<Part>(parts_off).add(snap.nparts as usize) = part };
                snap.nparts += 1;
                snap.pages_captured += npages;
                match method {
                    // Block summaries are copied, not shared: writers bump
                    // them in place, and a scan of the snapshot that marks a
                    // block clean must compare the live word with the one
                    // frozen here (one page covers 33 M rows).
                    _ if part_is_copied(method as u32, w) => self.copy_part(arena, snap, arr, npages)?,
                    Method::Cow => pt.set_shared_epoch(snap.epoch),
                    Method::Memcpy => unreachable!("memcpy copies every part"),
                    Method::VmSnapshot => {}
                }
            }
            if let Some(nr) = vm_snapshot_nr {
                // Still under the exclusive latch: the image holds no row
                // of this table half written. Other tables' pages in it
                // may be, but nothing reads them there.
                snap.image = arena.map_frozen_image(nr).map_err(SnapshotError::Kernel)? as u64;
            }
            arena.count(crate::stats::SNAPSHOTS_CREATED, 1);
            arena.count(crate::stats::SNAPSHOT_PAGES_SHARED, if method == Method::Memcpy { 0 } else { snap.pages_captured });
            snap.id = arena.counter(crate::stats::SNAPSHOTS_CREATED);
            snap.create_ns = started.elapsed().as_nanos() as u64;
            arena.count(crate::stats::SNAPSHOT_CREATE_NS, snap.create_ns);
            // Listed before the latch is released: from then on writers
            // copy the pages it shares and retire the originals, and both
            // reclamation (`oldest_snapshot_epoch`) and
            // `refresh_shared_epochs` go by the list. Until 2026-12-06 it
            // was listed after, and in between a writer's retired page
            // could be freed and reused (the snapshot then read another
            // page as its stamps: wrong sums, a scan spinning on a latch
            // bit that was not one) or the shared epoch lowered under it.
            let _g = self.snap_lock.lock();
            snap.next.store(self.snapshots.load(Ordering::Relaxed), Ordering::Relaxed);
            self.snapshots.store(off, Ordering::Release);
            Ok(())
        })();
        if let Err(e) = result {
            self.free_snapshot(arena, snap, off);
            self.refresh_shared_epochs(arena);
            return Err(e);
        }
        Ok(off)
    }

    /// A live snapshot made with `method` that covers `cols` and whose
    /// stamp `accept`s; it gains a reference.
    pub fn find_snapshot(&self, arena: &Arena, cols: &[usize], method: Method, accept: &dyn Fn(u64) -> bool) -> Option<Off> {
        let _g = self.snap_lock.lock();
        let mut cur = self.snapshots.load(Ordering::Relaxed);
        while cur != NULL_OFF {
            // SAFETY: listed snapshots are live.
            let s = unsafe { arena.get::<Snapshot>(cur) };
            if s.method == method as u32 && s.readable_here() && accept(s.completion) && s.covers(arena, cols) {
                s.refs.fetch_add(1, Ordering::AcqRel);
                arena.count(crate::stats::SNAPSHOTS_REUSED, 1);
                return Some(cur);
            }
            cur = s.next.load(Ordering::Relaxed);
        }
        None
    }

    /// Take another reference to a live snapshot (a parallel worker).
    /// None when it is gone, or is another process's `vm_snapshot` image.
    pub fn attach_snapshot(&self, arena: &Arena, id: u64) -> Option<Off> {
        let _g = self.snap_lock.lock();
        let mut cur = self.snapshots.load(Ordering::Relaxed);
        while cur != NULL_OFF {
            // SAFETY: listed snapshots are live.
            let s = unsafe { arena.get::<Snapshot>(cur) };
            if s.id == id {
                if !s.readable_here() {
                    return None;
                }
                s.refs.fetch_add(1, Ordering::AcqRel);
                return Some(cur);
            }
            cur = s.next.load(Ordering::Relaxed);
        }
        None
    }

    /// Drop a reference; the last one frees the snapshot.
    pub fn release_snapshot(&self, arena: &Arena, off: Off) {
        // SAFETY: the caller holds a reference, so the snapshot is live.
        let s = unsafe { arena.get::<Snapshot>(off) };
        {
            let _g = self.snap_lock.lock();
            if s.refs.fetch_sub(1, Ordering::AcqRel) != 1 {
                return;
            }
            // unlink
            let mut link: &AtomicU64 = &self.snapshots;
            let mut cur = link.load(Ordering::Relaxed);
            while cur != NULL_OFF && cur != off {
                // SAFETY: listed snapshots are live.
                link = unsafe { &arena.get::<Snapshot>(cur).next };
                cur = link.load(Ordering::Relaxed);
            }
            link.store(s.next.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        // SAFETY: unlinked with no references left: ours alone.
        let snap = unsafe { &mut *arena.ptr::<Snapshot>(off) };
        self.free_snapshot(arena, snap, off);
        self.refresh_shared_epochs(arena);
        self.reclaim(arena);
    }

    /// Replace a copied part's chunks (still the live ones) by private
    /// chunks of private page copies. On failure the part holds only what
    /// it owns.
    fn copy_part(&self, arena: &Arena, snap: &mut Snapshot, chunks: &mut [Off], npages: u64) -> AllocResult<()> {
        for k in 0..chunks.len() {
            if chunks[k] == 0 {
                continue;
            }
            let limit = (npages - (k * CHUNK_ENTRIES) as u64) as usize;
            let mut copy = |page: u32| -> AllocResult<u32> {
                let copy = arena.alloc_page_to_overwrite(&snap.owner)?;
                // SAFETY: both are whole pages; the source is stable under
                // the exclusive latch.
                unsafe { std::ptr::copy_nonoverlapping(arena.ptr::<u8>(page_no_off(page)), arena.ptr::<u8>(copy), PAGE_SIZE) };
                snap.pages_copied += 1;
                Ok((copy >> PAGE_SHIFT) as u32)
            };
            match PageTable::copy_chunk(arena, &self.heap, chunks[k], limit, &mut copy) {
                Ok(c) => chunks[k] = c,
                Err(e) => {
                    chunks[k..].fill(0);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    fn free_snapshot(&self, arena: &Arena, snap: &mut Snapshot, off: Off) {
        if snap.image != 0 {
            // SAFETY: the image is this snapshot's, and with no reference
            // left nothing reads it.
            unsafe { arena.unmap_frozen_image(snap.image as *const u8) };
        }
        for p in snap.parts(arena).to_vec() {
            if part_is_copied(snap.method, p.which) {
                for &c in p.chunks(arena).iter().filter(|c| **c != 0) {
                    self.heap.free(arena, c);
                }
            }
            self.heap.free(arena, p.chunks);
        }
        arena.free_owner(&snap.owner);
        self.heap.free(arena, snap.parts);
        self.heap.free(arena, off);
    }

    /// Recompute each page table's copy-on-write horizon from the live
    /// copy-on-write snapshots that cover it.
    ///
    /// Lowering it takes the table's latch exclusively: a writer decides
    /// whether to copy under the latch held shared, and writers of one
    /// latch period must agree (one that copies a page while another
    /// writes into it in place would lose the other's write).
    fn refresh_shared_epochs(&self, arena: &Arena) {
        let _latch = self.latch.exclusive();
        let _g = self.snap_lock.lock();
        let mut epochs: Vec<(u32, u32)> = vec![];
        let mut cur = self.snapshots.load(Ordering::Relaxed);
        while cur != NULL_OFF {
            // SAFETY: listed snapshots are live.
            let s = unsafe { arena.get::<Snapshot>(cur) };
            if s.method == Method::Cow as u32 {
                for p in s.parts(arena).iter().filter(|p| !part_is_copied(s.method, p.which)) {
                    epochs.push((p.which, s.epoch));
                }
            }
            cur = s.next.load(Ordering::Relaxed);
        }
        let max_for = |w: u32| epochs.iter().filter(|(x, _)| *x == w).map(|(_, e)| *e).max().unwrap_or(0);
        for w in [PART_STAMPS, PART_CIDS, PART_LINKS, PART_SUMMARIES] {
            self.page_table_of(arena, w).set_shared_epoch(max_for(w));
        }
        for c in 0..self.ncols() {
            self.page_table_of(arena, c as u32).set_shared_epoch(max_for(c as u32));
            self.page_table_of(arena, PART_NULLS_BIT | c as u32).set_shared_epoch(max_for(PART_NULLS_BIT | c as u32));
        }
    }

    /// Epoch of the oldest live snapshot, or u32::MAX.
    pub fn oldest_snapshot_epoch(&self, arena: &Arena) -> u32 {
        let _g = self.snap_lock.lock();
        let mut oldest = u32::MAX;
        let mut cur = self.snapshots.load(Ordering::Relaxed);
        while cur != NULL_OFF {
            // SAFETY: listed snapshots are live.
            let s = unsafe { arena.get::<Snapshot>(cur) };
            oldest = oldest.min(s.epoch);
            cur = s.next.load(Ordering::Relaxed);
        }
        oldest
    }

    /// Visit the live snapshots.
    pub fn for_each_snapshot(&self, arena: &Arena, mut f: impl FnMut(&Snapshot)) {
        let _g = self.snap_lock.lock();
        let mut cur = self.snapshots.load(Ordering::Relaxed);
        while cur != NULL_OFF {
            // SAFETY: listed snapshots are live.
            let s = unsafe { arena.get::<Snapshot>(cur) };
            f(s);
            cur = s.next.load(Ordering::Relaxed);
        }
    }

    /// The snapshot at `off` (the caller holds a reference).
    pub fn snapshot<'a>(&self, arena: &'a Arena, off: Off) -> &'a Snapshot {
        // SAFETY: a referenced snapshot is live.
        unsafe { arena.get::<Snapshot>(off) }
    }

    /// Point a cursor and column caches at a snapshot's frozen pages.
    pub fn bind_snapshot(&self, arena: &Arena, snap: &Snapshot, cur: &mut Cursor, cols: &mut [(usize, &mut ColCache)]) {
        let base = if snap.image != 0 { snap.image as *const u8 } else { arena.base() as *const u8 };
        let frozen = |w: u32| {
            snap.part(arena, w).map(|p| Frozen { chunks: arena.ptr::<Off>(p.chunks) as *const Off, npages: p.npages, base })
        };
        cur.freeze(frozen(PART_STAMPS), frozen(PART_CIDS), frozen(PART_LINKS), frozen(PART_SUMMARIES));
        for (c, cc) in cols.iter_mut() {
            cc.freeze(frozen(*c as u32), frozen(PART_NULLS_BIT | *c as u32));
        }
    }
}
