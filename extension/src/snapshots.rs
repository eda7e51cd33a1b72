//! Virtual snapshots inside PostgreSQL: the `anker.snapshot_method` setting,
//! which scans use snapshots, and the references a backend holds.
//!
//! A sequential scan (anker's AnkerScan node) of a read-only statement runs
//! on a column snapshot of the columns it reads, taken after the statement's
//! PostgreSQL snapshot; a live snapshot taken late enough is reused. Every
//! other scan reads the live columns, and so do scans of tables with fewer
//! than `anker.snapshot_min_rows` rows. References are tracked per backend so
//! an error or a cancelled query releases them at transaction end.

use crate::shmem;
use crate::xact_list::XactList;
use anker_engine::arena::Off;
use anker_engine::snapshot::{Method, SnapshotError};
use anker_engine::table::{Table, TableKey};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::CStr;

/// Values of `anker.snapshot_method`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Provider {
    Cow = 0,
    Memcpy = 1,
    None = 2,
    VmSnapshot = 3,
}

impl Provider {
    pub fn method(self) -> Option<Method> {
        match self {
            Provider::Cow => Some(Method::Cow),
            Provider::Memcpy => Some(Method::Memcpy),
            Provider::VmSnapshot => Some(Method::VmSnapshot),
            Provider::None => None,
        }
    }
}

static mut METHOD: i32 = Provider::Cow as i32;

/// `anker.snapshot_min_rows`: tables with fewer rows are scanned live.
static mut MIN_ROWS: i32 = 10_000;

static mut OPTIONS: [pg_sys::config_enum_entry; 5] = [
    pg_sys::config_enum_entry { name: c"cow".as_ptr(), val: Provider::Cow as i32, hidden: false },
    pg_sys::config_enum_entry { name: c"memcpy".as_ptr(), val: Provider::Memcpy as i32, hidden: false },
    pg_sys::config_enum_entry { name: c"none".as_ptr(), val: Provider::None as i32, hidden: false },
    pg_sys::config_enum_entry { name: c"vm_snapshot".as_ptr(), val: Provider::VmSnapshot as i32, hidden: false },
    pg_sys::config_enum_entry { name: std::ptr::null(), val: 0, hidden: false },
];

extern "C-unwind" {
    // utils/guc.h; not in pgrx's bindings. Only sets a variable.
    fn GUC_check_errcode(sqlerrcode: std::ffi::c_int);
}

pub fn define_guc() {
    // SAFETY: DefineCustomEnumVariable keeps pointers to our statics, which
    // live for the whole process; called once from _PG_init.
    unsafe {
        pg_sys::DefineCustomEnumVariable(
            c"anker.snapshot_method".as_ptr(),
            c"How analytical scans of anker tables snapshot the columns they read.".as_ptr(),
            c"cow: copy-on-write page tables (default); memcpy: physical copies; none: read the live, versioned columns; vm_snapshot: the kernel system call of kernel-patch/ (needs its second patch, which freezes shared memory).".as_ptr(),
            &raw mut METHOD,
            Provider::Cow as i32,
            (&raw const OPTIONS).cast(),
            pg_sys::GucContext::PGC_USERSET,
            0,
            Some(check_method),
            None,
            None,
        );
        pg_sys::DefineCustomIntVariable(
            c"anker.snapshot_min_rows".as_ptr(),
            c"Tables with fewer rows are scanned on their live columns, without a snapshot, by PostgreSQL's own plan nodes.".as_ptr(),
            c"A snapshot makes the next writer of every page it shares copy that page; for a small table, which a scan reads in microseconds, that costs more than it saves, and small tables are often the hottest in OLTP work. The planner uses AnkerScan and AnkerAgg only for tables it estimates at this many rows or more.".as_ptr(),
            &raw mut MIN_ROWS,
            10_000,
            0,
            i32::MAX,
            pg_sys::GucContext::PGC_USERSET,
            0,
            None,
            None,
            None,
        );
    }
}

/// Does the planner's row estimate make a table worth anker's own plan
/// nodes? Below the snapshot threshold they read the live columns as a Seq
/// Scan does, and PostgreSQL's nodes keep plans (and EXPLAIN) as users
/// know them.
pub fn worth_anker_nodes(estimated_rows: f64) -> bool {
    // SAFETY: plain read of our GUC variable.
    estimated_rows >= (unsafe { MIN_ROWS }).max(0) as f64
}

/// Is `table` big enough for its scans to run on snapshots?
pub fn worth_a_snapshot(table: &Table) -> bool {
    // SAFETY: plain read of our GUC variable.
    table.nrows() >= (unsafe { MIN_ROWS }).max(0) as u64
}

/// `vm_snapshot` is never accepted silently: without the patched kernel,
/// or with only its first patch (whose copy-on-write covers private memory,
/// while anker's tables live in memory shared by all backends), it is
/// refused with the reason. With the second patch the arena's memfd opts
/// in (`MFD_SNAPSHOT`) and the kernel freezes it.
#[pg_guard]
unsafe extern "C-unwind" fn check_method(
    newval: *mut std::ffi::c_int,
    _extra: *mut *mut std::ffi::c_void,
    _source: pg_sys::GucSource::Type,
) -> bool {
    if *newval != Provider::VmSnapshot as i32 {
        return true;
    }
    let (msg, detail) = match anker_engine::arena::vm_snapshot_syscall() {
        Ok(_) if anker_engine::arena::vm_snapshot_shared_memfd().is_ok() => return true,
        Ok(_) => (
            "the vm_snapshot system call cannot snapshot anker tables",
            "This kernel's vm_snapshot gives copy-on-write only for process-private memory, and anker tables live in memory shared by all backends; freezing it needs kernel-patch/0002-mm-vm_snapshot-frozen-snapshots-of-shared-memfds.patch.".to_string(),
        ),
        Err(_) if !std::path::Path::new(anker_engine::arena::VM_SNAPSHOT_SYSFS).exists() => (
            "the vm_snapshot system call is not available on this kernel",
            format!("anker.snapshot_method = vm_snapshot needs a kernel built with kernel-patch/0001-mm-add-vm_snapshot-system-call.patch (detected through {}/abi_version).", anker_engine::arena::VM_SNAPSHOT_SYSFS),
        ),
        Err(why) => ("the vm_snapshot system call is not available on this kernel", format!("{why}.")),
    };
    GUC_check_errcode(pgrx::PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED as i32);
    pg_sys::GUC_check_errmsg_string = pg_sys::pstrdup(std::ffi::CString::new(msg).unwrap().as_ptr());
    pg_sys::GUC_check_errdetail_string = pg_sys::pstrdup(std::ffi::CString::new(detail).unwrap().as_ptr());
    false
}

pub fn provider() -> Provider {
    // SAFETY: plain read of our GUC variable.
    match unsafe { METHOD } {
        0 => Provider::Cow,
        1 => Provider::Memcpy,
        2 => Provider::None,
        _ => Provider::VmSnapshot,
    }
}

/// The stamp a new column snapshot records: the oldest transaction id still
/// running when it is taken. Every transaction with a smaller id had
/// finished, so its writes are in the snapshot.
fn creation_stamp() -> u64 {
    // SAFETY: a flag read; plain proc-array lookups.
    unsafe {
        if !pg_sys::RecoveryInProgress() {
            return u32::from(pg_sys::GetOldestActiveTransactionId()) as u64;
        }
        // On a hot standby the primary's running transactions are in
        // KnownAssignedXids, which GetOldestActiveTransactionId does not
        // read (it returned about the next xid, so a column snapshot served
        // queries that see as committed a transaction whose later changes
        // redo replayed after the snapshot: half of a transfer). A fresh
        // snapshot's xmin is the oldest of them.
        static mut STAMP_SNAPSHOT: std::mem::MaybeUninit<pg_sys::SnapshotData> = std::mem::MaybeUninit::zeroed();
        // SAFETY: single-threaded backend; GetSnapshotData fills a zeroed
        // SnapshotData and keeps its xid arrays (malloc'd) for reuse.
        let snap = pg_sys::GetSnapshotData((*(&raw mut STAMP_SNAPSHOT)).as_mut_ptr());
        u32::from((*snap).xmin) as u64
    }
}

/// May a column snapshot with creation stamp `stamp` serve a query whose
/// PostgreSQL snapshot is `pg_snap`? Yes when every transaction the query
/// could see as committed (ids below its xmax) had finished when the column
/// snapshot was taken.
unsafe fn serves(stamp: u64, pg_snap: pg_sys::Snapshot) -> bool {
    let xmax: u32 = (*pg_snap).xmax.into();
    let oldest_running = stamp as u32;
    oldest_running == xmax || pg_sys::TransactionIdPrecedes(xmax.into(), oldest_running.into())
}

// ---- references held by this backend --------------------------------------

#[derive(Clone, Copy)]
struct Held {
    key: TableKey,
    snap: Off,
}

static mut HELD: XactList<Held> = XactList::new();

fn held() -> &'static mut XactList<Held> {
    // SAFETY: backends are single-threaded; only this module touches it.
    unsafe { &mut *(&raw mut HELD) }
}

/// How a scan got its snapshot.
#[derive(Clone, Copy, Debug)]
pub struct Acquired {
    pub snap: Off,
    pub id: u64,
    pub reused: bool,
}

/// A snapshot of `cols` for a scan whose PostgreSQL snapshot is `pg_snap`:
/// reuse a live one taken late enough, or create one.
/// None when there is no memory for a new snapshot: the scan then reads the
/// live columns, which gives the same answer more slowly.
pub unsafe fn acquire(table: &Table, cols: &[usize], method: Method, pg_snap: pg_sys::Snapshot) -> Option<Acquired> {
    let arena = shmem::arena();
    // A transaction that wrote (has an xid) may have changed rows after a
    // shared snapshot was taken: it takes its own.
    let read_only = pg_sys::GetTopTransactionIdIfAny() == pg_sys::InvalidTransactionId;
    let found = if read_only { table.find_snapshot(arena, cols, method, &|s| serves(s, pg_snap)) } else { None };
    let (snap, reused) = match found {
        Some(s) => (s, true),
        None => match table.create_snapshot(arena, cols, method, creation_stamp()) {
            Ok(s) => (s, false),
            Err(SnapshotError::OutOfMemory(e)) => {
                pgrx::debug1!("anker: no column snapshot ({e}); reading the live columns");
                return None;
            }
            Err(e) => {
                pgrx::ereport!(
                    PgLogLevel::ERROR,
                    PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                    format!("anker cannot take a {} column snapshot: {e}", method.name())
                );
                unreachable!("ERROR does not return")
            }
        },
    };
    remember(table, snap);
    Some(Acquired { snap, id: table.snapshot(arena, snap).id, reused })
}

/// A parallel worker joins the leader's snapshot.
pub fn attach(table: &Table, id: u64) -> Option<Off> {
    let snap = table.attach_snapshot(shmem::arena(), id)?;
    remember(table, snap);
    Some(snap)
}

fn remember(table: &Table, snap: Off) {
    held().push(Held { key: table.key, snap });
}

/// The scan is done with its snapshot.
pub fn release(table: &Table, snap: Off) {
    if held().remove_last(|x| x.key == table.key && x.snap == snap).is_some() {
        table.release_snapshot(shmem::arena(), snap);
    }
}

fn release_each(gone: Vec<Held>) {
    let arena = shmem::arena();
    let dir = shmem::directory();
    for h in gone {
        if let Some(t) = dir.lookup(arena, &h.key) {
            t.release_snapshot(arena, h.snap);
        }
    }
}

pub fn install_hooks() {
    // SAFETY: callback registration during postmaster start-up.
    unsafe {
        pg_sys::RegisterXactCallback(Some(xact_callback), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(subxact_callback), std::ptr::null_mut());
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn xact_callback(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    use pg_sys::XactEvent::*;
    if held().is_empty() {
        return;
    }
    // Scans end before commit; whatever is still held belongs to a scan an
    // error or a cancel interrupted.
    if matches!(event, XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT | XACT_EVENT_COMMIT | XACT_EVENT_PARALLEL_COMMIT | XACT_EVENT_PREPARE) {
        release_each(held().take_all());
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn subxact_callback(
    event: pg_sys::SubXactEvent::Type,
    _my: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    use pg_sys::SubXactEvent::*;
    if held().is_empty() {
        return;
    }
    match event {
        SUBXACT_EVENT_ABORT_SUB => release_each(held().take_aborted()),
        SUBXACT_EVENT_COMMIT_SUB => held().hand_to_parent(),
        _ => {}
    }
}

/// Human name of the provider for EXPLAIN.
pub fn provider_name() -> &'static CStr {
    match provider() {
        Provider::Cow => c"cow",
        Provider::Memcpy => c"memcpy",
        Provider::None => c"none",
        Provider::VmSnapshot => c"vm_snapshot",
    }
}
