//! The shared arena's life cycle inside PostgreSQL.
//!
//! The postmaster reserves the arena in `_PG_init` (anker must be in
//! `shared_preload_libraries`), so every child process inherits the mapping
//! at the same address. The arena is formatted in the shared-memory startup
//! hook, which the postmaster runs at start and again after a crash of any
//! backend: the contents of a crashed cluster may be torn, so they are
//! dropped, never reused.

use anker_engine::arena::Arena;
use anker_engine::table::Directory;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

/// Tables the directory can hold.
const DIRECTORY_CAPACITY: u32 = 1 << 16;

static mut ARENA: Option<Arena> = None;
static mut PREV_SHMEM_STARTUP_HOOK: pg_sys::shmem_startup_hook_type = None;

pub fn reserve_arena() {
    let size = crate::guc::memory_limit_bytes();
    match Arena::create_shared(size) {
        // SAFETY: single-threaded postmaster start-up; no reader exists yet.
        Ok(a) => unsafe { ARENA = Some(a) },
        Err(e) => {
            ereport!(
                FATAL,
                PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
                format!("anker: could not reserve {size} bytes for anker.memory_limit: {e}")
            );
        }
    }
}

pub fn install_hooks() {
    // SAFETY: hook chaining during single-threaded postmaster start-up.
    unsafe {
        PREV_SHMEM_STARTUP_HOOK = pg_sys::shmem_startup_hook;
        pg_sys::shmem_startup_hook = Some(shmem_startup);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn shmem_startup() {
    if let Some(prev) = PREV_SHMEM_STARTUP_HOOK {
        prev();
    }
    // Backends started later inherit a formatted arena; only the postmaster
    // (at start and after a crash) formats it.
    if pg_sys::IsUnderPostmaster {
        return;
    }
    let arena = (*(&raw const ARENA)).as_ref().expect("arena reserved in _PG_init");
    let procs = (*pg_sys::ProcGlobal).allProcCount;
    if let Err(e) = arena.format(procs) {
        ereport!(FATAL, PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY, format!("anker: cannot format the arena: {e}"));
    }
    if let Err(e) = Directory::create(arena, DIRECTORY_CAPACITY) {
        ereport!(FATAL, PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY, format!("anker: cannot create the table directory: {e}"));
    }
}

/// The arena, or a clear error when anker was not preloaded.
pub fn arena() -> &'static Arena {
    // SAFETY: ARENA is written once in the postmaster before any backend
    // exists and never changes afterwards.
    match unsafe { (*(&raw const ARENA)).as_ref() } {
        Some(a) => a,
        None => not_preloaded(),
    }
}

pub fn is_loaded() -> bool {
    // SAFETY: as above.
    unsafe { (*(&raw const ARENA)).is_some() }
}

pub fn not_preloaded() -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "anker must be loaded via shared_preload_libraries",
        "Add anker to shared_preload_libraries in postgresql.conf and restart the server."
    );
}

pub fn directory() -> &'static Directory {
    Directory::get(arena()).expect("directory created at shared memory start-up")
}


/// Nesting depth of this process's reclamation epoch (backends are
/// single-threaded).
static mut EPOCH_DEPTH: u32 = 0;

/// While alive, memory retired by other processes (undo records, pages,
/// blobs) stays allocated, so pointers read from shared structures can be
/// followed. Cheap enough for every chain walk; not held across waits.
pub struct EpochGuard(());

pub fn enter_epoch() -> EpochGuard {
    // SAFETY: single-threaded backend; MyProc is set in every process that
    // reaches table code.
    unsafe {
        if EPOCH_DEPTH == 0 {
            arena().epoch_enter((*pg_sys::MyProc).pgprocno as u32);
        }
        EPOCH_DEPTH += 1;
    }
    EpochGuard(())
}

impl Drop for EpochGuard {
    fn drop(&mut self) {
        // SAFETY: as in enter_epoch.
        unsafe {
            EPOCH_DEPTH -= 1;
            if EPOCH_DEPTH == 0 {
                arena().epoch_exit((*pg_sys::MyProc).pgprocno as u32);
            }
        }
    }
}

/// Leave the reclamation epoch whatever the nesting (transaction abort:
/// guards skipped by an error are gone).
pub fn reset_epoch() {
    // SAFETY: as in enter_epoch.
    unsafe {
        if EPOCH_DEPTH != 0 {
            EPOCH_DEPTH = 0;
            arena().epoch_exit((*pg_sys::MyProc).pgprocno as u32);
        }
    }
}
