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

pub fn define(preloading: bool) {
    let context = if preloading { pg_sys::GucContext::PGC_POSTMASTER } else { pg_sys::GucContext::PGC_INTERNAL };
    // SAFETY: DefineCustomIntVariable keeps a pointer to our static, which
    // lives for the whole process; called once from _PG_init.
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

