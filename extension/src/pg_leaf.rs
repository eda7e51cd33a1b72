//! PostgreSQL functions that raise no error, called without pgrx's guard.
//!
//! pgrx wraps every `pg_sys` function in a guard (a thread check, a
//! `sigsetjmp`, saving and restoring the error stacks) so that an error
//! raised inside becomes a Rust panic. On the row paths the guards cost
//! more than the functions they wrap: 1.7 % of the CPU of TPC-C's mix went
//! to them (visibility checks, the log's tail lock, the transaction's
//! nesting level, pruning's clog horizon), against 0.3 % on heap tables.
//!
//! The functions here read backend or shared state, take and release
//! LWLocks, buffer locks and buffer pins, or free memory. PostgreSQL 15
//! raises no error in them except on an internal inconsistency (a lock not
//! held, a buffer not pinned, a chunk not allocated, more than 200 LWLocks
//! held), which it treats as a bug. Should one be raised all the same, it
//! unwinds by `longjmp`, as from [`pg_raw`](crate::pg_raw): the
//! transaction's abort releases locks, pins and this backend's reclamation
//! epoch.
//!
//! Functions that read the clog or the subtransaction log (I/O that can
//! fail), allocate memory, or assign a transaction id stay guarded; memory
//! is allocated here with `MCXT_ALLOC_NO_OOM`, which returns NULL where
//! an allocation would raise, and only then through the guard, which
//! raises PostgreSQL's error ([`alloc`]). The statistics counts of row
//! changes bump PostgreSQL's counters inline where they exist, and call
//! the guarded function where it would create them ([`count_update`]).

use pgrx::pg_sys;

unsafe extern "C-unwind" {
    pub fn TransactionIdPrecedes(a: pg_sys::TransactionId, b: pg_sys::TransactionId) -> bool;
    pub fn TransactionIdFollows(a: pg_sys::TransactionId, b: pg_sys::TransactionId) -> bool;
    pub fn TransactionIdIsCurrentTransactionId(xid: pg_sys::TransactionId) -> bool;
    pub fn GetCurrentTransactionNestLevel() -> std::ffi::c_int;
    pub fn GetCurrentTransactionIdIfAny() -> pg_sys::TransactionId;
    pub fn ActiveSnapshotSet() -> bool;
    pub fn GetActiveSnapshot() -> pg_sys::Snapshot;
    pub fn IsLogicalWorker() -> bool;
    pub fn RecoveryInProgress() -> bool;
    pub fn GlobalVisTestFor(rel: pg_sys::Relation) -> *mut pg_sys::GlobalVisState;
    pub fn GlobalVisTestIsRemovableXid(state: *mut pg_sys::GlobalVisState, xid: pg_sys::TransactionId) -> bool;
    pub fn LWLockAcquire(lock: *mut pg_sys::LWLock, mode: pg_sys::LWLockMode::Type) -> bool;
    pub fn LWLockRelease(lock: *mut pg_sys::LWLock);
    pub fn ConditionalLockBuffer(buffer: pg_sys::Buffer) -> bool;
    pub fn LockBuffer(buffer: pg_sys::Buffer, mode: std::ffi::c_int);
    pub fn UnlockReleaseBuffer(buffer: pg_sys::Buffer);
    pub fn pfree(pointer: *mut std::ffi::c_void);
    fn MemoryContextAllocExtended(context: pg_sys::MemoryContext, size: usize, flags: std::ffi::c_int) -> *mut std::ffi::c_void;
}

/// PostgreSQL's `MaxAllocSize` (utils/memutils.h, not in pgrx's bindings).
const MAX_ALLOC_SIZE: usize = 0x3fff_ffff;

/// `MemoryContextAlloc` (`zeroed`: `MemoryContextAllocZero`) without the
/// guard: out of memory, or asked for more than `MaxAllocSize`, it goes
/// through the guarded call, which raises the error PostgreSQL raises.
///
/// # Safety
/// `context` is a valid memory context.
#[inline]
pub unsafe fn alloc(context: pg_sys::MemoryContext, size: usize, zeroed: bool) -> *mut u8 {
    if size <= MAX_ALLOC_SIZE {
        let flags = pg_sys::MCXT_ALLOC_NO_OOM as std::ffi::c_int | if zeroed { pg_sys::MCXT_ALLOC_ZERO as std::ffi::c_int } else { 0 };
        // SAFETY: with NO_OOM and a valid size it raises no error.
        let p = unsafe { MemoryContextAllocExtended(context, size, flags) };
        if !p.is_null() {
            return p as *mut u8;
        }
    }
    // SAFETY: the caller's contract.
    unsafe {
        if zeroed {
            pg_sys::MemoryContextAllocZero(context, size) as *mut u8
        } else {
            pg_sys::MemoryContextAlloc(context, size) as *mut u8
        }
    }
}

/// `palloc` into the current memory context, as [`alloc`].
#[inline]
pub fn palloc(size: usize) -> *mut u8 {
    // SAFETY: the current memory context is valid.
    unsafe { alloc(pg_sys::CurrentMemoryContext, size, false) }
}

/// `palloc0`, as [`alloc`].
#[inline]
pub fn palloc0(size: usize) -> *mut u8 {
    // SAFETY: as in `palloc`.
    unsafe { alloc(pg_sys::CurrentMemoryContext, size, true) }
}

unsafe extern "C-unwind" {
    #[link_name = "GetCurrentCommandId"]
    fn get_current_command_id(used: bool) -> pg_sys::CommandId;
}

/// `GetCurrentCommandId(false)`: the command id of the current statement,
/// not marked as used (marking it can raise an error in parallel mode).
#[inline]
pub fn current_command_id() -> pg_sys::CommandId {
    // SAFETY: reads backend state.
    unsafe { get_current_command_id(false) }
}

/// `GetCurrentTransactionId`: the current (sub)transaction's id, assigned
/// first if it has none. Only the assignment can raise an error (xid
/// wraparound protection), so only it goes through the guard.
#[inline]
pub fn current_transaction_id() -> u32 {
    // SAFETY: reads backend state.
    let xid: u32 = unsafe { GetCurrentTransactionIdIfAny() }.into();
    if xid != pg_sys::InvalidTransactionId.into_inner() {
        return xid;
    }
    // SAFETY: a backend in a transaction that may write.
    unsafe { pg_sys::GetCurrentTransactionId() }.into()
}

/// The current transaction level's statistics record of `rel`, when the
/// relation's statistics entry and that record exist (after its first
/// counted change at this level): the common case of PostgreSQL's
/// `pgstat_count_heap_*`, which otherwise create them (allocating).
///
/// # Safety
/// `rel` is open.
unsafe fn xact_counts(rel: pg_sys::Relation) -> Option<*mut pg_sys::PgStat_TableXactStatus> {
    // SAFETY: the caller's contract; entries are PostgreSQL's, alive while
    // the relation is open in this transaction.
    unsafe {
        let info = (*rel).pgstat_info;
        if info.is_null() {
            return None;
        }
        let trans = (*info).trans;
        (!trans.is_null() && (*trans).nest_level == GetCurrentTransactionNestLevel()).then_some(trans)
    }
}

/// `pgstat_count_heap_insert`, its common case inline ([`xact_counts`]),
/// as pgstat.h inlines the counts that are not transactional.
///
/// # Safety
/// `rel` is open.
pub unsafe fn count_inserts(rel: pg_sys::Relation, n: i64) {
    // SAFETY: the caller's contract.
    unsafe {
        match xact_counts(rel) {
            Some(trans) => (*trans).tuples_inserted += n,
            None => pg_sys::pgstat_count_heap_insert(rel, n),
        }
    }
}

/// `pgstat_count_heap_update`, as [`count_inserts`].
///
/// # Safety
/// `rel` is open.
pub unsafe fn count_update(rel: pg_sys::Relation, hot: bool) {
    // SAFETY: the caller's contract.
    unsafe {
        match xact_counts(rel) {
            Some(trans) => {
                (*trans).tuples_updated += 1;
                if hot {
                    (*(*rel).pgstat_info).t_counts.t_tuples_hot_updated += 1;
                }
            }
            None => pg_sys::pgstat_count_heap_update(rel, hot),
        }
    }
}

/// `pgstat_count_heap_delete`, as [`count_inserts`].
///
/// # Safety
/// `rel` is open.
pub unsafe fn count_delete(rel: pg_sys::Relation) {
    // SAFETY: the caller's contract.
    unsafe {
        match xact_counts(rel) {
            Some(trans) => (*trans).tuples_deleted += 1,
            None => pg_sys::pgstat_count_heap_delete(rel),
        }
    }
}

/// `pgstat_update_heap_dead_tuples`, inline when the relation has its
/// statistics entry.
///
/// # Safety
/// `rel` is open.
pub unsafe fn count_dead_tuples_removed(rel: pg_sys::Relation, n: i32) {
    // SAFETY: the caller's contract.
    unsafe {
        let info = (*rel).pgstat_info;
        if info.is_null() {
            pg_sys::pgstat_update_heap_dead_tuples(rel, n);
        } else {
            (*info).t_counts.t_delta_dead_tuples -= n as i64;
        }
    }
}
