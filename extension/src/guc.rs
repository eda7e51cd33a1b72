//! Configuration parameters (`anker.*`).

use pgrx::pg_sys;

/// `anker.memory_limit`, in megabytes: the size of the shared arena that
/// holds all anker tables. Read once, when the postmaster creates the arena.
static mut MEMORY_LIMIT_MB: i32 = 0;

/// Half of physical memory, the default arena size.
fn default_memory_limit_mb() -> i32 {
    // SAFETY: sysconf has no preconditions.
    let (pages, page_size) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    let total_mb = (pages.max(0) as u64 * page_size.max(0) as u64) >> 20;
    (total_mb / 2).clamp(64, i32::MAX as u64) as i32
}

/// `anker.malloc_trim_threshold`, in kilobytes (0: glibc's own heuristics).
static mut MALLOC_TRIM_THRESHOLD_KB: i32 = 0;

/// Define the `anker.*` settings (from `_PG_init`).
pub fn define(preloading: bool) {
    let context = if preloading { pg_sys::GucContext::PGC_POSTMASTER } else { pg_sys::GucContext::PGC_INTERNAL };
    // SAFETY: DefineCustomIntVariable keeps pointers to our statics, which
    // live for the whole process; called once from _PG_init.
    unsafe {
        pg_sys::DefineCustomIntVariable(
            c"anker.memory_limit".as_ptr(),
            c"Size of the shared memory arena that holds all anker tables.".as_ptr(),
            c"Memory is reserved as address space and used only as table data grows. Defaults to half of physical memory.".as_ptr(),
            &raw mut MEMORY_LIMIT_MB,
            default_memory_limit_mb(),
            64,
            i32::MAX,
            context,
            pg_sys::GUC_UNIT_MB as i32,
            None,
            None,
            None,
        );
        pg_sys::DefineCustomIntVariable(
            c"anker.malloc_trim_threshold".as_ptr(),
            c"Free memory a server process keeps at the top of its malloc heap instead of returning it to the system.".as_ptr(),
            c"Sets glibc's trim threshold (and half of it as the mmap threshold) in every server process. 0 leaves glibc's own heuristics, under which processes reading anker tables can return and re-fault heap memory thousands of times a second.".as_ptr(),
            &raw mut MALLOC_TRIM_THRESHOLD_KB,
            16 * 1024,
            0,
            // twice glibc's largest mmap threshold (32 MB on 64-bit)
            64 * 1024,
            context,
            pg_sys::GUC_UNIT_KB as i32,
            None,
            None,
            None,
        );
    }
}

/// Apply `anker.malloc_trim_threshold` in the postmaster; server processes
/// inherit the setting when they are forked.
///
/// glibc returns the top of the heap to the system whenever a free leaves
/// more than the trim threshold there, and takes it back (with page faults)
/// on the next allocation. Its default threshold only grows after a large
/// `mmap`ed block was freed. Executor memory of statements on anker tables
/// sits just at the boundary: measured under TPC-C (W=4, two clients), an
/// anker backend made ~3,000 `brk` calls a second and spent ~3.5 % of its
/// time in the kernel on them, where heap backends made almost none.
/// Setting the thresholds explicitly keeps up to this much freed memory per
/// process for reuse; blocks below half of it come from the heap, never
/// from a fresh `mmap` (PostgreSQL's memory contexts use blocks up to 8 MB).
pub fn apply_malloc_settings() {
    // SAFETY: plain read of a GUC variable owned by this process.
    let kb = unsafe { MALLOC_TRIM_THRESHOLD_KB };
    if kb <= 0 {
        return;
    }
    let bytes = (kb as i64 * 1024).min(i32::MAX as i64) as i32;
    // SAFETY: mallopt only changes allocator parameters; postmaster start-up
    // is single-threaded.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, bytes / 2);
        libc::mallopt(libc::M_TRIM_THRESHOLD, bytes);
    }
}

/// Claim the `anker.` prefix: unknown `anker.*` settings become errors.
/// Called after every `anker.*` parameter is defined, since reserving also
/// drops the placeholders of settings not defined yet (a value for one of
/// them in postgresql.conf would be lost).
pub fn reserve_prefix() {
    // SAFETY: called from _PG_init, after our DefineCustom*Variable calls.
    unsafe { pg_sys::MarkGUCPrefixReserved(c"anker".as_ptr()) };
}

pub fn memory_limit_bytes() -> u64 {
    // SAFETY: plain read of a GUC variable owned by this process.
    (unsafe { MEMORY_LIMIT_MB }) as u64 * 1024 * 1024
}

