//! The shared arena: one large mapping that holds every anker table.
//!
//! PostgreSQL backends are processes, so table data must live in memory that
//! all of them map at the same address. The arena is a `MAP_SHARED |
//! MAP_NORESERVE` mapping of a memfd created by the postmaster before it
//! forks; children inherit it. Physical memory is taken page by page with
//! `fallocate` (so exhaustion is a clean error, not a SIGBUS) and given back
//! with `FALLOC_FL_PUNCH_HOLE`.
//!
//! Layout, in units of [`PAGE_SIZE`] pages:
//!
//! ```text
//! [header + reader slots] [page metadata array] [data pages ...]
//! ```
//!
//! Everything stored in the arena refers to other arena memory by byte
//! offset ([`Off`]), never by pointer, so the layout can later be written to
//! disk as it is. Data pages are handed out by a buddy allocator (runs of
//! contiguous pages) under one spin lock; small objects come from per-owner
//! [`Heap`]s that carve size-classed objects out of pages. Every page belongs
//! to an owner list, so dropping a table frees all its memory in one walk.

use crate::sync::SpinLock;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Size of an arena page: the unit of column storage, copy-on-write and
/// memory accounting. One constant for the whole engine (DESIGN §3).
pub const PAGE_SHIFT: u32 = 16;
pub const PAGE_SIZE: usize = 1 << PAGE_SHIFT;

/// Byte offset into the arena. 0 is the header, so 0 doubles as "null".
pub type Off = u64;
pub const NULL_OFF: Off = 0;

const MAGIC: u64 = 0x616e_6b65_7241_524e; // "ankerARN"
const LAYOUT_VERSION: u32 = 3;
const NIL: u32 = u32::MAX;

/// Why an allocation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocError {
    /// The arena (sized by `anker.memory_limit`) or the machine has no room
    /// for `requested` more bytes.
    OutOfMemory { requested: u64 },
}

impl std::fmt::Display for AllocError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AllocError::OutOfMemory { requested } => {
                write!(f, "out of arena memory allocating {requested} bytes")
            }
        }
    }
}

pub type AllocResult<T> = Result<T, AllocError>;

/// How the arena obtains and returns physical memory.
pub trait Backing: Send + Sync {
    /// Make `[off, off+len)` backed by memory; false when the system refuses.
    fn commit(&self, off: u64, len: u64) -> bool;
    /// Give `[off, off+len)` back to the system; contents become zero.
    fn release(&self, off: u64, len: u64);
}

/// A memfd shared by all processes that inherit it (the PostgreSQL case).
pub struct MemfdBacking {
    fd: libc::c_int,
}

impl Backing for MemfdBacking {
    fn commit(&self, off: u64, len: u64) -> bool {
        // tmpfs's fallocate gives up with EINTR, undoing its work, whenever a
        // signal is pending, and PostgreSQL signals backends all the time:
        // that is not a lack of memory. Retrying could starve under a stream
        // of signals, so they wait for the call, a few pages long.
        crate::signals::with_signals_blocked(|| {
            // SAFETY: plain syscall on our own fd; no memory is touched.
            unsafe { libc::fallocate(self.fd, 0, off as libc::off_t, len as libc::off_t) == 0 }
        })
    }
    fn release(&self, off: u64, len: u64) {
        // SAFETY: plain syscall on our own fd. Punching a hole zeroes the range
        // for every process that maps it; callers only release free pages.
        unsafe {
            libc::fallocate(
                self.fd,
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                off as libc::off_t,
                len as libc::off_t,
            );
        }
    }
}

/// Process-private anonymous memory: the engine's single-process mode and tests.
pub struct PrivateBacking {
    base: usize,
}

impl Backing for PrivateBacking {
    fn commit(&self, _off: u64, _len: u64) -> bool {
        true
    }
    fn release(&self, off: u64, len: u64) {
        // SAFETY: the range lies inside our own private mapping and holds only
        // free pages; MADV_DONTNEED turns them back into zero-fill pages.
        unsafe {
            libc::madvise((self.base + off as usize) as *mut libc::c_void, len as usize, libc::MADV_DONTNEED);
        }
    }
}

/// Per-page bookkeeping, kept outside the pages so that free pages are never
/// touched (touching a punched page would take memory back).
#[repr(C)]
struct PageMeta {
    state: u8,
    order: u8,
    class: u8,
    _pad: u8,
    /// Used run head: number of pages in the run.
    run_pages: u32,
    /// Buddy free list (free block heads) or a heap's partial list (slab pages).
    prev: u32,
    next: u32,
    /// The owner's page list (run heads and slab pages).
    owner_prev: u32,
    owner_next: u32,
    /// Slab pages: live objects, first free object (offset in page) and the
    /// bump offset of never-used space.
    in_use: u32,
    free_head: u32,
    bump: u32,
    _pad2: u32,
}

const ST_UNUSED: u8 = 0;
const ST_FREE_HEAD: u8 = 1;
const ST_RUN_HEAD: u8 = 2;
const ST_RUN_TAIL: u8 = 3;
const ST_SLAB: u8 = 4;
/// Free, but kept committed in the header's warm stack.
const ST_WARM: u8 = 5;

/// Single pages kept committed after being freed, so that the next
/// allocation skips the system call and the page faults of fresh memory:
/// copy-on-write copies, undo slabs and blob pages come and go at a high
/// rate. 64 MiB at most.
const WARM_PAGES: usize = 1024;

/// Bytes per reader slot: each process's epoch word on cache lines of its
/// own (two, for the adjacent-line prefetcher), then its event counters on
/// two more. Packed 8 bytes apart, the slots of concurrent backends shared a
/// line, and every row a reader entered moved that line between their
/// cores; counters shared by all processes did the same for every counted
/// event (several per TPC-C transaction).
const READER_SLOT_BYTES: usize = 256;
/// Where a slot's event counters start.
const SLOT_COUNTERS_AT: usize = 128;
/// Event counters a slot has room for.
const SLOT_COUNTERS: usize = (READER_SLOT_BYTES - SLOT_COUNTERS_AT) / 8;

/// The reader slot this process last entered an epoch with: its event
/// counts go to that slot's counters (u32::MAX: none yet, the header's).
static PROCESS_SLOT: AtomicU32 = AtomicU32::new(u32::MAX);

/// Where the reader slots start: after the header, on a slot boundary, off
/// the lines of header words that processes write.
fn reader_slots_off() -> u64 {
    std::mem::size_of::<Header>().next_multiple_of(READER_SLOT_BYTES) as u64
}

/// The event counters of processes that have no reader slot yet, on cache
/// lines of their own (the epoch words before them are read for every row
/// a reader enters).
#[repr(C, align(128))]
struct Counters([AtomicU64; SLOT_COUNTERS]);

#[repr(C)]
struct Header {
    magic: u64,
    layout_version: u32,
    max_order: u32,
    size: u64,
    /// First data page (pages before it hold the header and metadata).
    first_data_page: u32,
    n_data_pages: u32,
    lock: SpinLock,
    free_heads: [u32; 40],
    pages_in_use: AtomicU64,
    peak_pages: AtomicU64,
    /// Arena offset of the client's root object (the table directory).
    root: AtomicU64,
    /// Incremented on every format, so caches can tell a reset arena.
    generation: AtomicU64,
    /// Epoch-based reclamation: global epoch and per-process reader slots.
    epoch: AtomicU64,
    reader_slots_off: u64,
    n_reader_slots: u32,
    _pad: u32,
    /// Event counters (see [`crate::stats`]) of processes without a slot.
    counters: Counters,
    /// Warm free pages (relative page numbers), under `lock`.
    warm: [u32; WARM_PAGES],
    n_warm: u32,
}

/// A handle on a mapped arena. Cheap to copy around inside one process.
pub struct Arena {
    base: *mut u8,
    size: u64,
    backing: Box<dyn Backing>,
    /// Keeps the memfd open for the lifetime of the handle (postmaster case).
    _fd: Option<libc::c_int>,
    /// The memfd was created with `MFD_SNAPSHOT`: `vm_snapshot(2)` freezes
    /// it (kernel-patch/0002).
    frozen_shared: bool,
}

// SAFETY: the arena is designed for concurrent use; all shared state inside
// it is accessed through atomics or under its spin locks.
unsafe impl Send for Arena {}
unsafe impl Sync for Arena {}

/// An owner of pages: a table, a snapshot, the directory.
#[repr(C)]
pub struct PageOwner {
    head: AtomicU32,
    pages: AtomicU64,
}

impl Default for PageOwner {
    fn default() -> Self {
        Self::new()
    }
}

impl PageOwner {
    pub const fn new() -> PageOwner {
        PageOwner { head: AtomicU32::new(NIL), pages: AtomicU64::new(0) }
    }

    /// Take over the pages of `other`, which must not be used afterwards.
    pub fn adopt(&self, other: &PageOwner) {
        self.head.store(other.head.load(Ordering::Relaxed), Ordering::Relaxed);
        self.pages.store(other.pages.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    pub fn init(&self) {
        self.head.store(NIL, Ordering::Relaxed);
        self.pages.store(0, Ordering::Relaxed);
    }
    /// Pages currently owned, in bytes.
    pub fn bytes(&self) -> u64 {
        self.pages.load(Ordering::Relaxed) * PAGE_SIZE as u64
    }
}

/// Memory use of the whole arena.
#[derive(Debug, Clone, Copy)]
pub struct ArenaStats {
    pub limit_bytes: u64,
    pub used_bytes: u64,
    pub peak_bytes: u64,
    pub metadata_bytes: u64,
    /// Free pages kept committed for quick reuse (not in `used_bytes`).
    pub warm_bytes: u64,
}

fn ceil_log2(n: u64) -> u32 {
    if n <= 1 {
        0
    } else {
        64 - (n - 1).leading_zeros()
    }
}

impl Arena {
    /// Reserve `size` bytes backed by a new memfd, shared with future forks.
    /// On a kernel whose `vm_snapshot(2)` freezes shared memfds, the memfd
    /// opts in (`MFD_SNAPSHOT`): its writers then take a write-protect fault
    /// on the first write to a page after each snapshot.
    pub fn create_shared(size: u64) -> std::io::Result<Arena> {
        let size = (size / PAGE_SIZE as u64) * PAGE_SIZE as u64;
        let name = b"anker-arena\0";
        let frozen_shared = vm_snapshot_shared_memfd().is_ok();
        let flags = libc::MFD_CLOEXEC | if frozen_shared { MFD_SNAPSHOT } else { 0 };
        // SAFETY: FFI calls with valid arguments; results are checked.
        unsafe {
            let fd = libc::memfd_create(name.as_ptr() as *const libc::c_char, flags);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::ftruncate(fd, size as libc::off_t) != 0 {
                let e = std::io::Error::last_os_error();
                libc::close(fd);
                return Err(e);
            }
            let p = libc::mmap(
                std::ptr::null_mut(),
                size as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_NORESERVE,
                fd,
                0,
            );
            if p == libc::MAP_FAILED {
                let e = std::io::Error::last_os_error();
                libc::close(fd);
                return Err(e);
            }
            Ok(Arena { base: p as *mut u8, size, backing: Box::new(MemfdBacking { fd }), _fd: Some(fd), frozen_shared })
        }
    }

    /// Reserve `size` bytes of process-private memory (single-process mode).
    pub fn create_private(size: u64) -> std::io::Result<Arena> {
        let size = (size / PAGE_SIZE as u64) * PAGE_SIZE as u64;
        // SAFETY: anonymous mapping; result checked.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                size as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            );
            if p == libc::MAP_FAILED {
                return Err(std::io::Error::last_os_error());
            }
            Ok(Arena {
                base: p as *mut u8,
                size,
                backing: Box::new(PrivateBacking { base: p as usize }),
                _fd: None,
                frozen_shared: false,
            })
        }
    }

    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// Is the arena shared with other processes (a memfd), rather than
    /// private to this one?
    pub fn is_shared(&self) -> bool {
        self._fd.is_some()
    }

    /// Can [`Arena::map_frozen_image`] freeze this arena? A private one
    /// always; a shared one when its memfd opted in (`MFD_SNAPSHOT`).
    pub fn can_freeze(&self) -> bool {
        !self.is_shared() || self.frozen_shared
    }

    /// Map a copy-on-write image of the whole arena, frozen as it is now,
    /// with the kernel's `vm_snapshot(2)` (system call `nr`, see
    /// [`vm_snapshot_syscall`]). Returns the image's base address: arena
    /// offset `o` reads as of now at `image + o`, whatever is written to the
    /// arena later, by this process or (shared arena) any other. The image
    /// is this process's mapping. Costs one page-table entry per populated
    /// 4 KiB page of the arena (and, for a shared arena, a walk over the
    /// writers' page tables).
    pub fn map_frozen_image(&self, nr: libc::c_long) -> std::io::Result<*const u8> {
        debug_assert!(self.can_freeze());
        // SAFETY: vm_snapshot(NULL, src, len) creates a new mapping at an
        // address the kernel picks and touches nothing of ours: the source
        // range is our own mapping, page-aligned, `size` bytes long.
        let r = unsafe { libc::syscall(nr, std::ptr::null_mut::<u8>(), self.base, self.size as usize) };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(r as usize as *const u8)
    }

    /// Unmap an image made by [`Arena::map_frozen_image`].
    ///
    /// # Safety
    /// `image` came from `map_frozen_image` on this arena and nothing reads
    /// it any more.
    pub unsafe fn unmap_frozen_image(&self, image: *const u8) {
        // SAFETY: the image is a mapping of exactly `size` bytes (caller).
        unsafe { libc::munmap(image as *mut libc::c_void, self.size as usize) };
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    fn header(&self) -> &Header {
        // SAFETY: the header lives at offset 0 of a mapping at least one page
        // long; it is only mutated through atomics or under `lock`.
        unsafe { &*(self.base as *const Header) }
    }

    #[allow(clippy::mut_from_ref)]
    fn header_mut(&self) -> &mut Header {
        // SAFETY: callers hold the header lock (or are formatting the arena
        // with no other user); see each call site.
        unsafe { &mut *(self.base as *mut Header) }
    }

    /// Translate an offset into a pointer.
    #[inline(always)]
    pub fn ptr<T>(&self, off: Off) -> *mut T {
        debug_assert!(off < self.size);
        // SAFETY: offsets handed out by this arena are within the mapping.
        unsafe { self.base.add(off as usize) as *mut T }
    }

    /// Translate a pointer into this arena back into an offset.
    #[inline(always)]
    pub fn off_of<T>(&self, p: *const T) -> Off {
        (p as usize - self.base as usize) as Off
    }

    /// A shared reference to an arena object.
    ///
    /// # Safety
    /// `off` must point at a live, initialised `T` owned by the caller's
    /// structure; `T` must be safe to share (atomics or immutable data).
    #[inline(always)]
    pub unsafe fn get<T>(&self, off: Off) -> &T {
        &*self.ptr::<T>(off)
    }

    /// Initialise (or reset after a crash) the whole arena. Every previous
    /// object is forgotten and all physical memory is returned.
    ///
    /// Must run while no other process uses the arena: in the postmaster's
    /// shared-memory startup, before any backend exists.
    pub fn format(&self, n_reader_slots: u32) -> AllocResult<()> {
        self.backing.release(0, self.size);
        let total_pages = (self.size / PAGE_SIZE as u64) as u32;
        let header_bytes = reader_slots_off() + (READER_SLOT_BYTES * n_reader_slots as usize) as u64;
        let header_pages = header_bytes.div_ceil(PAGE_SIZE as u64) as u32;
        // meta for every page of the arena (simpler indexing; header pages unused)
        let meta_bytes = total_pages as u64 * std::mem::size_of::<PageMeta>() as u64;
        let meta_pages = meta_bytes.div_ceil(PAGE_SIZE as u64) as u32;
        let first_data_page = header_pages + meta_pages;
        if first_data_page + 1 > total_pages {
            return Err(AllocError::OutOfMemory { requested: first_data_page as u64 * PAGE_SIZE as u64 });
        }
        if !self.backing.commit(0, first_data_page as u64 * PAGE_SIZE as u64) {
            return Err(AllocError::OutOfMemory { requested: first_data_page as u64 * PAGE_SIZE as u64 });
        }
        let n_data = total_pages - first_data_page;
        let h = self.header_mut();
        let generation = if h.magic == MAGIC { h.generation.load(Ordering::Relaxed) + 1 } else { 1 };
        h.magic = MAGIC;
        h.layout_version = LAYOUT_VERSION;
        h.size = self.size;
        h.first_data_page = first_data_page;
        h.n_data_pages = n_data;
        h.lock.init();
        h.free_heads = [NIL; 40];
        h.warm = [NIL; WARM_PAGES];
        h.n_warm = 0;
        h.max_order = 31 - n_data.leading_zeros();
        h.pages_in_use.store(0, Ordering::Relaxed);
        h.peak_pages.store(0, Ordering::Relaxed);
        h.root.store(NULL_OFF, Ordering::Relaxed);
        h.generation.store(generation, Ordering::Relaxed);
        h.epoch.store(1, Ordering::Relaxed);
        for c in h.counters.0.iter() {
            c.store(0, Ordering::Relaxed);
        }
        h.reader_slots_off = reader_slots_off();
        h.n_reader_slots = n_reader_slots;
        for slot in 0..n_reader_slots {
            self.reader_slot(slot).store(0, Ordering::Relaxed);
            for which in 0..SLOT_COUNTERS {
                self.slot_counter(slot, which).store(0, Ordering::Relaxed);
            }
        }
        // Data page i (relative) is buddy-aligned to i; carve maximal blocks.
        let mut i: u32 = 0;
        while i < n_data {
            let mut o = if i == 0 { 31 } else { i.trailing_zeros() };
            while o > 0 && (i as u64 + (1u64 << o)) > n_data as u64 {
                o -= 1;
            }
            self.push_free(i, o);
            i += 1 << o;
        }
        Ok(())
    }

    /// Check that the mapping holds a formatted arena.
    pub fn is_formatted(&self) -> bool {
        let h = self.header();
        h.magic == MAGIC && h.layout_version == LAYOUT_VERSION
    }

    pub fn generation(&self) -> u64 {
        self.header().generation.load(Ordering::Relaxed)
    }

    /// Add `n` to event counter `which` (a [`crate::stats`] constant), in
    /// this process's slot: no other process writes its cache line.
    #[inline]
    pub fn count(&self, which: usize, n: u64) {
        let h = self.header();
        let slot = PROCESS_SLOT.load(Ordering::Relaxed);
        let c = if slot < h.n_reader_slots { self.slot_counter(slot, which) } else { &h.counters.0[which] };
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// Current value of event counter `which`, summed over all processes.
    pub fn counter(&self, which: usize) -> u64 {
        let h = self.header();
        let in_slots = (0..h.n_reader_slots).map(|s| self.slot_counter(s, which).load(Ordering::Relaxed));
        in_slots.fold(h.counters.0[which].load(Ordering::Relaxed), u64::wrapping_add)
    }

    fn slot_counter(&self, slot: u32, which: usize) -> &AtomicU64 {
        assert!(which < SLOT_COUNTERS, "event counter {which} out of range");
        let epoch_word = self.reader_slot(slot) as *const AtomicU64;
        // SAFETY: `reader_slot` checked the slot; its counters follow the
        // epoch word inside its READER_SLOT_BYTES, 8-byte aligned.
        unsafe { &*epoch_word.add((SLOT_COUNTERS_AT + 8 * which) / 8) }
    }

    pub fn root(&self) -> &AtomicU64 {
        &self.header().root
    }

    pub fn stats(&self) -> ArenaStats {
        let h = self.header();
        ArenaStats {
            limit_bytes: self.size,
            used_bytes: h.pages_in_use.load(Ordering::Relaxed) * PAGE_SIZE as u64,
            peak_bytes: h.peak_pages.load(Ordering::Relaxed) * PAGE_SIZE as u64,
            metadata_bytes: h.first_data_page as u64 * PAGE_SIZE as u64,
            warm_bytes: h.n_warm as u64 * PAGE_SIZE as u64,
        }
    }

    // ---- page metadata -------------------------------------------------

    #[allow(clippy::mut_from_ref)]
    fn meta(&self, rel_page: u32) -> &mut PageMeta {
        let h = self.header();
        let idx = (h.first_data_page + rel_page) as usize;
        // SAFETY: the metadata array starts right after the header pages and
        // has one entry per page; callers hold the lock that guards the
        // fields they touch (header lock for buddy/owner links, the owning
        // heap's lock for slab fields).
        unsafe {
            let meta_base = self
                .base
                .add((h.reader_slots_off as usize + READER_SLOT_BYTES * h.n_reader_slots as usize).div_ceil(PAGE_SIZE) * PAGE_SIZE)
                as *mut PageMeta;
            &mut *meta_base.add(idx)
        }
    }

    fn page_off(&self, rel_page: u32) -> Off {
        (self.header().first_data_page as u64 + rel_page as u64) << PAGE_SHIFT
    }

    fn rel_page_of(&self, off: Off) -> u32 {
        ((off >> PAGE_SHIFT) - self.header().first_data_page as u64) as u32
    }

    // ---- buddy allocator (header lock held) ----------------------------

    fn push_free(&self, page: u32, order: u32) {
        let h = self.header_mut();
        let head = h.free_heads[order as usize];
        let m = self.meta(page);
        m.state = ST_FREE_HEAD;
        m.order = order as u8;
        m.prev = NIL;
        m.next = head;
        if head != NIL {
            self.meta(head).prev = page;
        }
        h.free_heads[order as usize] = page;
    }

    fn unlink_free(&self, page: u32) {
        let h = self.header_mut();
        let (prev, next, order) = {
            let m = self.meta(page);
            (m.prev, m.next, m.order)
        };
        if prev != NIL {
            self.meta(prev).next = next;
        } else {
            h.free_heads[order as usize] = next;
        }
        if next != NIL {
            self.meta(next).prev = prev;
        }
        self.meta(page).state = ST_UNUSED;
    }

    fn free_block(&self, mut page: u32, mut order: u32) {
        let h = self.header();
        let n = h.n_data_pages;
        while order < h.max_order {
            let buddy = page ^ (1 << order);
            if buddy as u64 + (1u64 << order) > n as u64 {
                break;
            }
            let bm = self.meta(buddy);
            if bm.state != ST_FREE_HEAD || bm.order as u32 != order {
                break;
            }
            self.unlink_free(buddy);
            page = page.min(buddy);
            order += 1;
        }
        self.push_free(page, order);
    }

    fn free_range(&self, start: u32, n: u32) {
        let mut i = start;
        let end = start + n;
        while i < end {
            let mut o = if i == 0 { 31 } else { i.trailing_zeros() };
            while (i as u64 + (1u64 << o)) > end as u64 {
                o -= 1;
            }
            self.free_block(i, o);
            i += 1 << o;
        }
    }

    /// Take `n` contiguous pages from the buddy lists (header lock held).
    fn take_run(&self, n: u32) -> Option<u32> {
        let h = self.header_mut();
        let want = ceil_log2(n as u64);
        if want > h.max_order {
            return None;
        }
        let mut k = want;
        while k <= h.max_order && h.free_heads[k as usize] == NIL {
            k += 1;
        }
        if k > h.max_order {
            return None;
        }
        let page = h.free_heads[k as usize];
        self.unlink_free(page);
        while k > want {
            k -= 1;
            self.push_free(page + (1 << k), k);
        }
        let block = 1u32 << want;
        if n < block {
            self.free_range(page + n, block - n);
        }
        Some(page)
    }

    // ---- public page API ------------------------------------------------

    /// Allocate a run of `n` zeroed pages owned by `owner`.
    pub fn alloc_pages(&self, owner: &PageOwner, n: u32) -> AllocResult<Off> {
        let requested = n as u64 * PAGE_SIZE as u64;
        if n == 1 {
            if let Some(off) = self.alloc_warm(owner, true) {
                return Ok(off);
            }
        }
        let page = {
            let mut g = self.header().lock.lock();
            let mut run = self.take_run(n);
            if run.is_none() && self.header().n_warm > 0 {
                // warm pages may be what splits the free space: return them
                drop(g);
                self.cool_down();
                g = self.header().lock.lock();
                run = self.take_run(n);
            }
            let _g = g;
            let Some(page) = run else {
                return Err(AllocError::OutOfMemory { requested });
            };
            {
                let m = self.meta(page);
                m.state = ST_RUN_HEAD;
                m.run_pages = n;
            }
            for i in 1..n {
                self.meta(page + i).state = ST_RUN_TAIL;
            }
            page
        };
        if !self.backing.commit(self.page_off(page), requested) {
            let _g = self.header().lock.lock();
            self.free_range(page, n);
            return Err(AllocError::OutOfMemory { requested });
        }
        let _g = self.header().lock.lock();
        self.owner_link(owner, page);
        owner.pages.fetch_add(n as u64, Ordering::Relaxed);
        let h = self.header();
        let used = h.pages_in_use.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
        h.peak_pages.fetch_max(used, Ordering::Relaxed);
        Ok(self.page_off(page))
    }

    /// Free a run returned by [`alloc_pages`](Self::alloc_pages) and give its
    /// memory back to the system.
    pub fn free_pages(&self, owner: &PageOwner, off: Off) {
        let page = self.rel_page_of(off);
        let n = self.meta(page).run_pages;
        self.release_run(owner, page, n);
    }

    /// One page that the caller overwrites entirely before anything reads
    /// it (a copy-on-write copy): like `alloc_pages(owner, 1)`, but a warm
    /// page is not zeroed first.
    pub fn alloc_page_to_overwrite(&self, owner: &PageOwner) -> AllocResult<Off> {
        match self.alloc_warm(owner, false) {
            Some(off) => Ok(off),
            None => self.alloc_pages(owner, 1),
        }
    }

    /// A warm page for `owner` (zeroed if `zero`), if there is one.
    fn alloc_warm(&self, owner: &PageOwner, zero: bool) -> Option<Off> {
        let page = {
            let _g = self.header().lock.lock();
            let h = self.header_mut();
            if h.n_warm == 0 {
                return None;
            }
            h.n_warm -= 1;
            let page = h.warm[h.n_warm as usize];
            let m = self.meta(page);
            m.state = ST_RUN_HEAD;
            m.run_pages = 1;
            self.owner_link(owner, page);
            owner.pages.fetch_add(1, Ordering::Relaxed);
            let used = h.pages_in_use.fetch_add(1, Ordering::Relaxed) + 1;
            h.peak_pages.fetch_max(used, Ordering::Relaxed);
            page
        };
        if zero {
            // SAFETY: the page is ours alone now and lies inside the mapping.
            unsafe { std::ptr::write_bytes(self.ptr::<u8>(self.page_off(page)), 0, PAGE_SIZE) };
        }
        Some(self.page_off(page))
    }

    /// Give every warm page back to the system and the buddy allocator.
    fn cool_down(&self) {
        let pages: Vec<u32> = {
            let _g = self.header().lock.lock();
            let h = self.header_mut();
            let n = std::mem::take(&mut h.n_warm) as usize;
            h.warm[..n].to_vec()
        };
        for &p in &pages {
            self.backing.release(self.page_off(p), PAGE_SIZE as u64);
        }
        let _g = self.header().lock.lock();
        for p in pages {
            self.meta(p).state = ST_UNUSED;
            self.free_range(p, 1);
        }
    }

    fn release_run(&self, owner: &PageOwner, page: u32, n: u32) {
        if n == 1 {
            let _g = self.header().lock.lock();
            let h = self.header_mut();
            if (h.n_warm as usize) < WARM_PAGES {
                self.owner_unlink(owner, page);
                owner.pages.fetch_sub(1, Ordering::Relaxed);
                h.pages_in_use.fetch_sub(1, Ordering::Relaxed);
                self.meta(page).state = ST_WARM;
                h.warm[h.n_warm as usize] = page;
                h.n_warm += 1;
                return;
            }
        }
        self.backing.release(self.page_off(page), n as u64 * PAGE_SIZE as u64);
        let _g = self.header().lock.lock();
        self.owner_unlink(owner, page);
        owner.pages.fetch_sub(n as u64, Ordering::Relaxed);
        self.header().pages_in_use.fetch_sub(n as u64, Ordering::Relaxed);
        for i in 0..n {
            self.meta(page + i).state = ST_UNUSED;
        }
        self.free_range(page, n);
    }

    fn owner_link(&self, owner: &PageOwner, page: u32) {
        let head = owner.head.load(Ordering::Relaxed);
        {
            let m = self.meta(page);
            m.owner_prev = NIL;
            m.owner_next = head;
        }
        if head != NIL {
            self.meta(head).owner_prev = page;
        }
        owner.head.store(page, Ordering::Relaxed);
    }

    fn owner_unlink(&self, owner: &PageOwner, page: u32) {
        let (prev, next) = {
            let m = self.meta(page);
            (m.owner_prev, m.owner_next)
        };
        if prev != NIL {
            self.meta(prev).owner_next = next;
        } else {
            owner.head.store(next, Ordering::Relaxed);
        }
        if next != NIL {
            self.meta(next).owner_prev = prev;
        }
    }

    /// Free every page `owner` holds (dropping a table or a snapshot).
    /// No other process may use the owner's memory any more.
    pub fn free_owner(&self, owner: &PageOwner) {
        loop {
            let page = {
                let _g = self.header().lock.lock();
                owner.head.load(Ordering::Relaxed)
            };
            if page == NIL {
                break;
            }
            let n = {
                let m = self.meta(page);
                if m.state == ST_SLAB {
                    1
                } else {
                    m.run_pages
                }
            };
            self.release_run(owner, page, n);
        }
    }

    // ---- epoch-based reclamation -----------------------------------------

    fn reader_slot(&self, slot: u32) -> &AtomicU64 {
        let h = self.header();
        assert!(slot < h.n_reader_slots, "reader slot {slot} out of range");
        // SAFETY: the slot array follows the header and has n_reader_slots
        // entries of READER_SLOT_BYTES, each aligned for an AtomicU64.
        unsafe { &*(self.base.add(h.reader_slots_off as usize + READER_SLOT_BYTES * slot as usize) as *const AtomicU64) }
    }

    /// Announce that process `slot` may hold pointers to memory that a
    /// concurrent writer could retire. Pair with [`epoch_exit`](Self::epoch_exit).
    pub fn epoch_enter(&self, slot: u32) {
        PROCESS_SLOT.store(slot, Ordering::Relaxed);
        let e = self.header().epoch.load(Ordering::SeqCst);
        // The slot must be visible before the caller reads any pointer
        // (a store-load order). On x86-64 the swap is a locked instruction,
        // a full barrier already; elsewhere a fence follows. Readers enter
        // once per row of a live scan, so the second barrier showed.
        self.reader_slot(slot).swap(e, Ordering::SeqCst);
        #[cfg(not(target_arch = "x86_64"))]
        std::sync::atomic::fence(Ordering::SeqCst);
    }

    pub fn epoch_exit(&self, slot: u32) {
        self.reader_slot(slot).store(0, Ordering::Release);
    }

    /// Start a new epoch and return the one during which the caller retired
    /// something; memory retired in epoch `e` may be freed once `e` is below
    /// [`oldest_reader_epoch`](Self::oldest_reader_epoch).
    pub fn epoch_retire(&self) -> u64 {
        self.header().epoch.fetch_add(1, Ordering::SeqCst)
    }

    /// The epoch the longest-inside reader entered at (u64::MAX when none
    /// is inside): memory retired in an epoch below it is unreachable.
    pub fn oldest_reader_epoch(&self) -> u64 {
        std::sync::atomic::fence(Ordering::SeqCst);
        let n = self.header().n_reader_slots;
        (0..n)
            .map(|s| self.reader_slot(s).load(Ordering::SeqCst))
            .filter(|&v| v != 0)
            .min()
            .unwrap_or(u64::MAX)
    }
}

// ---- small objects -------------------------------------------------------

/// Object size classes (bytes): 8-byte steps up to 128, then eight classes
/// per doubling, so no object wastes more than about 12%. Larger objects take
/// whole page runs.
const CLASSES: [u32; N_SMALL_CLASSES] = [
    16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128, 144, 160, 176, 192, 208, 224,
    240, 256, 288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 832, 896, 960, 1024, 1152,
    1280, 1408, 1536, 1664, 1792, 1920, 2048, 2304, 2560, 2816, 3072, 3328, 3584, 3840, 4096, 4608,
    5120, 5632, 6144, 6656, 7168, 7680, 8192, 9216, 10240, 11264, 12288, 13312, 14336, 15360, 16384,
    18432, 20480, 22528, 24576, 26624, 28672, 30720, 32768,
];
/// Largest size served from slab pages; beyond it, page runs.
pub const MAX_SMALL: usize = 32768;
const N_SMALL_CLASSES: usize = 79;

/// The smallest class of at least `size` bytes (1..=MAX_SMALL), computed
/// from the classes' shape rather than searched for (a search's branches
/// mispredict on every other allocation): steps of 8 bytes up to 128, then
/// eight classes in each doubling.
#[inline]
fn class_of(size: usize) -> usize {
    debug_assert!((1..=MAX_SMALL).contains(&size));
    if size <= 128 {
        return size.saturating_sub(9) / 8;
    }
    // 2^b < size <= 2^(b+1), in eight steps of 2^(b-3)
    let b = (usize::BITS - 1 - (size - 1).leading_zeros()) as usize;
    let k = (size - (1 << b)).div_ceil(1 << (b - 3));
    14 + (b - 7) * 8 + k
}

/// A small-object allocator whose pages all belong to one owner. Each table
/// has one, for its variable-length values and version records; dropping the
/// table frees the owner's pages wholesale.
#[repr(C)]
pub struct Heap {
    lock: SpinLock,
    /// Per class, the first page with free objects (guarded by `lock`).
    partial: std::cell::UnsafeCell<[u32; N_SMALL_CLASSES]>,
    pub owner: PageOwner,
    /// Bytes of live objects (the payload the heap hands out, class-rounded).
    live_bytes: AtomicU64,
}

// SAFETY: `partial` (the only interior-mutable field that is not atomic) is
// read and written only under `lock`.
unsafe impl Sync for Heap {}

impl Heap {
    pub fn init(&self) {
        self.lock.init();
        // SAFETY: called once on fresh arena memory before the heap is shared.
        unsafe { *self.partial.get() = [NIL; N_SMALL_CLASSES] };
        self.owner.init();
        self.live_bytes.store(0, Ordering::Relaxed);
    }

    pub fn live_bytes(&self) -> u64 {
        self.live_bytes.load(Ordering::Relaxed)
    }

    /// Allocate `size` bytes, 8-byte aligned, contents unspecified.
    pub fn alloc(&self, arena: &Arena, size: usize) -> AllocResult<Off> {
        if size > MAX_SMALL {
            let pages = size.div_ceil(PAGE_SIZE) as u32;
            let off = arena.alloc_pages(&self.owner, pages)?;
            self.live_bytes.fetch_add(pages as u64 * PAGE_SIZE as u64, Ordering::Relaxed);
            return Ok(off);
        }
        let class = class_of(size.max(1));
        let csize = CLASSES[class];
        let _g = self.lock.lock();
        // SAFETY: the heap lock guards `partial` and the slab fields of our pages.
        let partial = unsafe { &mut *self.partial.get() };
        let mut page = partial[class];
        if page == NIL {
            let off = arena.alloc_pages(&self.owner, 1)?;
            page = arena.rel_page_of(off);
            {
                let _hg = arena.header().lock.lock();
                let m = arena.meta(page);
                m.state = ST_SLAB;
            }
            let m = arena.meta(page);
            m.class = class as u8;
            m.in_use = 0;
            m.free_head = NIL;
            m.bump = 0;
            m.prev = NIL;
            m.next = NIL;
            partial[class] = page;
        }
        let m = arena.meta(page);
        let page_off = arena.page_off(page);
        let obj = if m.free_head != NIL {
            let o = m.free_head;
            // SAFETY: free objects store the offset of the next free object.
            m.free_head = unsafe { *(arena.ptr::<u32>(page_off + o as u64)) };
            o
        } else {
            let o = m.bump;
            m.bump += csize;
            o
        };
        m.in_use += 1;
        let full = m.free_head == NIL && (m.bump as usize + csize as usize) > PAGE_SIZE;
        if full {
            // unlink from partial list
            let next = m.next;
            partial[class] = next;
            if next != NIL {
                arena.meta(next).prev = NIL;
            }
            m.next = NIL;
            m.prev = NIL;
        }
        self.live_bytes.fetch_add(csize as u64, Ordering::Relaxed);
        Ok(page_off + obj as u64)
    }

    /// Free an object returned by [`alloc`](Self::alloc).
    pub fn free(&self, arena: &Arena, off: Off) {
        let page = arena.rel_page_of(off);
        let m = arena.meta(page);
        if m.state == ST_RUN_HEAD {
            let pages = m.run_pages;
            self.live_bytes.fetch_sub(pages as u64 * PAGE_SIZE as u64, Ordering::Relaxed);
            arena.release_run(&self.owner, page, pages);
            return;
        }
        debug_assert_eq!(m.state, ST_SLAB);
        let _g = self.lock.lock();
        // SAFETY: as in alloc, the heap lock guards the slab fields.
        let partial = unsafe { &mut *self.partial.get() };
        let class = m.class as usize;
        let csize = CLASSES[class];
        let page_off = arena.page_off(page);
        let was_full = m.free_head == NIL && (m.bump as usize + csize as usize) > PAGE_SIZE;
        let obj = (off - page_off) as u32;
        // SAFETY: the object is ours and at least 16 bytes long.
        unsafe { *(arena.ptr::<u32>(off)) = m.free_head };
        m.free_head = obj;
        m.in_use -= 1;
        self.live_bytes.fetch_sub(csize as u64, Ordering::Relaxed);
        if m.in_use == 0 {
            // Give the empty page back unless it is the only one of its class.
            if !was_full {
                let (prev, next) = (m.prev, m.next);
                if prev == NIL && next == NIL && partial[class] == page {
                    return; // keep one warm page per class
                }
                if prev != NIL {
                    arena.meta(prev).next = next;
                } else {
                    partial[class] = next;
                }
                if next != NIL {
                    arena.meta(next).prev = prev;
                }
            }
            arena.release_run(&self.owner, page, 1);
        } else if was_full {
            let head = partial[class];
            m.prev = NIL;
            m.next = head;
            if head != NIL {
                arena.meta(head).prev = page;
            }
            partial[class] = page;
        }
    }

    /// Free all memory of this heap (the owner is being dropped).
    pub fn free_all(&self, arena: &Arena) {
        arena.free_owner(&self.owner);
        // SAFETY: nobody else uses the heap any more.
        unsafe { *self.partial.get() = [NIL; N_SMALL_CLASSES] };
        self.live_bytes.store(0, Ordering::Relaxed);
    }
}

// ---- the kernel's vm_snapshot(2) ---------------------------------------------

/// Where a kernel built with `kernel-patch/` announces `vm_snapshot(2)`.
pub const VM_SNAPSHOT_SYSFS: &str = "/sys/kernel/mm/vm_snapshot";

/// The `vm_snapshot` semantics this engine relies on.
const VM_SNAPSHOT_ABI: u32 = 1;

/// `memfd_create` flag of kernel-patch/0002: snapshots of the memfd's
/// shared mappings are frozen.
const MFD_SNAPSHOT: libc::c_uint = 0x0020;

/// Does `vm_snapshot(2)` freeze `MAP_SHARED` mappings of `MFD_SNAPSHOT`
/// memfds on this kernel (kernel-patch/0002)? Err says why not. Detected
/// once per process, like [`vm_snapshot_syscall`].
pub fn vm_snapshot_shared_memfd() -> Result<libc::c_long, String> {
    static DETECTED: std::sync::OnceLock<Result<libc::c_long, String>> = std::sync::OnceLock::new();
    DETECTED
        .get_or_init(|| {
            let nr = vm_snapshot_syscall()?;
            match std::fs::read_to_string(format!("{VM_SNAPSHOT_SYSFS}/shared_memfd")) {
                Ok(s) if s.trim() == "1" => Ok(nr),
                _ => Err(format!(
                    "this kernel's vm_snapshot only aliases shared memory ({VM_SNAPSHOT_SYSFS}/shared_memfd is missing); \
                     freezing it needs kernel-patch/0002-mm-vm_snapshot-frozen-snapshots-of-shared-memfds.patch"
                )),
            }
        })
        .clone()
}

/// The system call number of `vm_snapshot(2)` on the running kernel, or why
/// it cannot be used. Detected once per process through sysfs: the number
/// alone proves nothing, as later kernels give it to other calls.
pub fn vm_snapshot_syscall() -> Result<libc::c_long, String> {
    static DETECTED: std::sync::OnceLock<Result<libc::c_long, String>> = std::sync::OnceLock::new();
    DETECTED
        .get_or_init(|| {
            let read = |name: &str| std::fs::read_to_string(format!("{VM_SNAPSHOT_SYSFS}/{name}"));
            let abi = read("abi_version").map_err(|_| {
                format!(
                    "this kernel has no vm_snapshot system call ({VM_SNAPSHOT_SYSFS} is missing); \
                     it needs kernel-patch/0001-mm-add-vm_snapshot-system-call.patch"
                )
            })?;
            match abi.trim().parse::<u32>() {
                Ok(VM_SNAPSHOT_ABI) => {}
                _ => {
                    return Err(format!(
                        "the kernel's vm_snapshot ABI version is {:?}; anker needs version {VM_SNAPSHOT_ABI}",
                        abi.trim()
                    ))
                }
            }
            let nr = read("syscall_nr").map_err(|e| format!("cannot read {VM_SNAPSHOT_SYSFS}/syscall_nr: {e}"))?;
            nr.trim().parse::<libc::c_long>().map_err(|_| format!("bad vm_snapshot syscall_nr {:?}", nr.trim()))
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arena(mb: u64) -> Arena {
        let a = Arena::create_private(mb << 20).unwrap();
        a.format(8).unwrap();
        a
    }

    #[test]
    fn class_of_is_the_smallest_class_that_fits() {
        for size in 1..=MAX_SMALL {
            let c = class_of(size);
            assert!(CLASSES[c] as usize >= size, "{size}: class {c}");
            assert!(c == 0 || (CLASSES[c - 1] as usize) < size, "{size}: class {c}");
        }
    }

    #[test]
    fn reader_slots_have_lines_of_their_own() {
        // Enough slots that they span header pages; the page metadata and
        // data pages after them must not overlap the last one.
        let a = Arena::create_private(64 << 20).unwrap();
        let n = 300;
        a.format(n).unwrap();
        let addr = |s: u32| a.reader_slot(s) as *const AtomicU64 as usize;
        let counters = &a.header().counters as *const Counters as usize;
        assert!(addr(0) >= counters + std::mem::size_of::<Counters>());
        assert_eq!(addr(1) - addr(0), READER_SLOT_BYTES);
        assert_eq!((addr(0) - a.base as usize) % READER_SLOT_BYTES, 0);
        assert_eq!(std::mem::offset_of!(Header, counters) % 128, 0);
        a.epoch_enter(n - 1);
        let e = a.oldest_reader_epoch();
        let owner = PageOwner::new();
        let mut offs = vec![];
        for _ in 0..64 {
            offs.push(a.alloc_pages(&owner, 1).unwrap());
        }
        assert_eq!(a.oldest_reader_epoch(), e);
        for o in offs {
            a.free_pages(&owner, o);
        }
        a.epoch_exit(n - 1);
        assert_eq!(a.oldest_reader_epoch(), u64::MAX);
    }

    /// A process counts events on the lines of its own slot, apart from its
    /// epoch word (which reclaimers read), and `counter` sums all processes.
    #[test]
    fn event_counters_sit_on_their_process_lines() {
        let a = Arena::create_private(64 << 20).unwrap();
        a.format(4).unwrap();
        assert!(crate::stats::NAMES.len() <= SLOT_COUNTERS);
        for s in 0..4 {
            let epoch = a.reader_slot(s) as *const AtomicU64 as usize;
            let first = a.slot_counter(s, 0) as *const AtomicU64 as usize;
            let last = a.slot_counter(s, SLOT_COUNTERS - 1) as *const AtomicU64 as usize;
            assert_eq!(first - epoch, 128);
            assert!(last + 8 <= epoch + READER_SLOT_BYTES);
        }
        let which = crate::stats::IN_PLACE_UPDATES;
        let before = a.counter(which);
        a.count(which, 2); // before this process has a slot here (or with another test's)
        a.epoch_enter(3);
        a.epoch_exit(3);
        a.count(which, 5);
        // (other tests share the process slot, but not this arena)
        assert_eq!(a.counter(which), before + 7);
        assert_eq!(a.counter(crate::stats::NEW_ROW_UPDATES), 0);
    }

    #[test]
    fn pages_round_trip_and_coalesce() {
        let a = arena(64);
        let owner = PageOwner::new();
        let before = a.stats().used_bytes;
        let mut offs = vec![];
        for n in [1u32, 3, 7, 16, 2] {
            let o = a.alloc_pages(&owner, n).unwrap();
            // touch every page
            for i in 0..n as u64 {
                unsafe { *a.ptr::<u64>(o + i * PAGE_SIZE as u64) = 42 };
            }
            offs.push(o);
        }
        assert_eq!(owner.pages.load(Ordering::Relaxed), 29);
        for o in offs {
            a.free_pages(&owner, o);
        }
        assert_eq!(a.stats().used_bytes, before);
        // after coalescing, a run of nearly the whole arena fits again
        let h = a.header();
        let big = 1u32 << h.max_order;
        let o = a.alloc_pages(&owner, big).unwrap();
        a.free_pages(&owner, o);
    }

    #[test]
    fn freed_single_pages_stay_warm_and_come_back_zeroed() {
        let a = arena(128);
        let owner = PageOwner::new();
        let o = a.alloc_pages(&owner, 1).unwrap();
        unsafe { *a.ptr::<u64>(o + 8) = 42 };
        a.free_pages(&owner, o);
        assert_eq!(a.stats().used_bytes, 0);
        assert_eq!(a.stats().warm_bytes, PAGE_SIZE as u64);
        let again = a.alloc_pages(&owner, 1).unwrap();
        assert_eq!(again, o, "the warm page is reused first");
        assert_eq!(unsafe { *a.ptr::<u64>(again + 8) }, 0);
        assert_eq!(a.stats().warm_bytes, 0);
        // more frees than the stack holds: the rest go back to the system
        let pages: Vec<Off> = (0..WARM_PAGES + 10).map(|_| a.alloc_pages(&owner, 1).unwrap()).collect();
        for p in pages {
            a.free_pages(&owner, p);
        }
        a.free_pages(&owner, again);
        assert_eq!(a.stats().warm_bytes, (WARM_PAGES * PAGE_SIZE) as u64);
        assert_eq!(owner.pages.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn out_of_memory_is_an_error() {
        let a = arena(8);
        let owner = PageOwner::new();
        let err = a.alloc_pages(&owner, 1000).unwrap_err();
        assert!(matches!(err, AllocError::OutOfMemory { .. }));
        // a failed allocation leaves the arena usable
        let o = a.alloc_pages(&owner, 1).unwrap();
        a.free_pages(&owner, o);
    }

    #[test]
    fn free_owner_returns_everything() {
        let a = arena(64);
        let owner = PageOwner::new();
        for n in 1..10 {
            a.alloc_pages(&owner, n).unwrap();
        }
        a.free_owner(&owner);
        assert_eq!(a.stats().used_bytes, 0);
        assert_eq!(owner.pages.load(Ordering::Relaxed), 0);
    }

    fn heap_in(a: &Arena, owner: &PageOwner) -> &'static Heap {
        let off = a.alloc_pages(owner, 1).unwrap();
        let h: &Heap = unsafe { &*a.ptr::<Heap>(off) };
        h.init();
        unsafe { std::mem::transmute::<&Heap, &'static Heap>(h) }
    }

    #[test]
    fn heap_alloc_free() {
        let a = arena(64);
        let root = PageOwner::new();
        let h = heap_in(&a, &root);
        let mut objs = vec![];
        for i in 0..5000usize {
            let size = (i * 37) % 3000 + 1;
            let o = h.alloc(&a, size).unwrap();
            assert_eq!(o % 8, 0);
            unsafe { std::ptr::write_bytes(a.ptr::<u8>(o), (i % 251) as u8, size) };
            objs.push((o, size, (i % 251) as u8));
        }
        for &(o, size, b) in &objs {
            let s = unsafe { std::slice::from_raw_parts(a.ptr::<u8>(o), size) };
            assert!(s.iter().all(|&x| x == b));
        }
        for (o, _, _) in objs {
            h.free(&a, o);
        }
        assert_eq!(h.live_bytes(), 0);
        // only warm pages (at most one per class) remain
        assert!(h.owner.pages.load(Ordering::Relaxed) <= N_SMALL_CLASSES as u64);
        h.free_all(&a);
        assert_eq!(h.owner.pages.load(Ordering::Relaxed), 0);
    }

    proptest! {
        #[test]
        fn heap_never_overlaps(ops in proptest::collection::vec((0usize..100_000, any::<bool>()), 1..300)) {
            let a = arena(128);
            let root = PageOwner::new();
            let h = heap_in(&a, &root);
            let mut live: Vec<(Off, usize)> = vec![];
            for (size, free) in ops {
                if free && !live.is_empty() {
                    let (o, _) = live.swap_remove(size % live.len());
                    h.free(&a, o);
                } else {
                    let size = size % 70_000 + 1;
                    let o = h.alloc(&a, size).unwrap();
                    for &(p, s) in &live {
                        prop_assert!(o + size as u64 <= p || p + s as u64 <= o, "overlap");
                    }
                    live.push((o, size));
                }
            }
            for (o, _) in live { h.free(&a, o); }
            prop_assert_eq!(h.live_bytes(), 0);
        }
    }
}
