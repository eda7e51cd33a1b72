//! Eager undo of in-place updates when a transaction or savepoint aborts,
//! and eager garbage collection of their versions after commit.
//!
//! Each backend remembers the rows it updated in place, with the xid that
//! did it (a subtransaction's own xid). On abort the before-images go back
//! in reverse order. Readers never depend on this (an aborted creator is
//! invisible and the chain holds the previous version), and writers and
//! VACUUM repair what is left over, so the list may stop growing: past
//! [`MAX_REMEMBERED`] rows, the rest is repaired lazily. After PREPARE the
//! list is dropped: a later ROLLBACK PREPARED leaves repair to others.
//!
//! On commit the rows move to a queue. Once no snapshot can need the
//! versions an update left behind (its xid is older than every snapshot,
//! `GlobalVisTestIsRemovableXid`), the backend's next writes prune those
//! rows' chains ([`collect_garbage`]), as HyPer collects a committed
//! transaction's version records. Without it, a row kept its last record
//! until it was updated again or VACUUMed: most rows of an OLTP table then
//! carried a chain, and every scan of them read the link and paid for it.
//! Past [`MAX_COMMITTED`] queued rows, the rest is left to those paths.
//! The records pruned are retired; once enough wait, the same backend frees
//! those no reader or snapshot can reach (`Table::reclaim_due`), so that
//! new records reuse their memory instead of growing the table.
//!
//! Pruning is not logged: replaying a log (loading a table after a start, or
//! a standby's redo) brings back every version its in-place updates left.
//! [`ReplayPruner`] prunes them again as they are replayed, so that a loaded
//! table holds what the table held, not its whole history since its image,
//! and a standby, where nobody writes or VACUUMs, does not grow with every
//! update it replays.

use crate::shmem;
use crate::xact_list::XactList;
use anker_engine::change::Change;
use anker_engine::table::{Table, TableKey};
use anker_engine::version::PruneWalks;
use pgrx::pg_sys;
use pgrx::prelude::*;

const MAX_REMEMBERED: usize = 1 << 20;
const MAX_COMMITTED: usize = 1 << 16;

#[derive(Clone, Copy)]
struct Entry {
    key: TableKey,
    row: u64,
    xid: u32,
}

static mut LIST: XactList<Entry> = XactList::new();
/// Rows of committed in-place updates, oldest first (this backend's
/// commits are in xid-completion order, which is all the queue needs: it
/// stops at the first entry not yet collectable).
static mut COMMITTED: std::collections::VecDeque<Entry> = std::collections::VecDeque::new();

fn list() -> &'static mut XactList<Entry> {
    // SAFETY: backends are single-threaded; only this module touches it.
    unsafe { &mut *(&raw mut LIST) }
}

fn committed() -> &'static mut std::collections::VecDeque<Entry> {
    // SAFETY: as for `list`.
    unsafe { &mut *(&raw mut COMMITTED) }
}

/// Prune the chains of up to `budget` queued rows whose updates no snapshot
/// can see past any more. Called by writers, inside a transaction.
pub fn collect_garbage(budget: usize) {
    let q = committed();
    if q.is_empty() {
        return;
    }
    let arena = shmem::arena();
    let dir = shmem::directory();
    // SAFETY: inside a transaction that took a snapshot (a writer's). The
    // shared-relation horizon is the most conservative one: it holds for
    // rows of any table.
    let vistest = unsafe { crate::pg_leaf::GlobalVisTestFor(std::ptr::null_mut()) };
    for _ in 0..budget {
        let Some(e) = q.front().copied() else { break };
        // SAFETY: as above.
        if !unsafe { crate::pg_leaf::GlobalVisTestIsRemovableXid(vistest, e.xid.into()) } {
            break;
        }
        q.pop_front();
        if let Some(t) = dir.lookup(arena, &e.key) {
            // SAFETY: as above.
            unsafe { prune_row_for(t, e.row, vistest) };
        }
    }
}

/// Did `xid`, the updater an undo record names, commit? Callers have
/// checked that it is older than every snapshot. An updater older than the
/// oldest transaction the clog still knows did: VACUUM puts back (logged)
/// the records of aborted in-place updates before it lets `relfrozenxid`
/// pass their updaters, so the records older than the clog that come back
/// when a log is replayed (pruning is not logged) are committed ones. The
/// clog's horizon is read under XactTruncationLock, held across the lookup,
/// as `TransactionIdInRecentPast` does.
pub unsafe fn updater_committed(xid: u32) -> bool {
    // XactTruncationLock, number 44 in PostgreSQL 15's lwlocknames.txt (no
    // symbol of its own: a macro over the main lock array).
    let lock = &raw mut (*pg_sys::MainLWLockArray.add(44)).lock;
    crate::pg_leaf::LWLockAcquire(lock, pg_sys::LWLockMode::LW_SHARED);
    // (the special xids, bootstrap, frozen and invalid, are answered without the clog)
    let known = xid < crate::visibility::FIRST_NORMAL_XID
        || !crate::pg_leaf::TransactionIdPrecedes(xid.into(), (*pg_sys::ShmemVariableCache).oldestClogXid);
    let committed = !known || pg_sys::TransactionIdDidCommit(xid.into());
    crate::pg_leaf::LWLockRelease(lock);
    committed
}

/// Prunes the chains that replayed in-place updates extend (see the module
/// documentation), against the transaction horizon of the moment it was
/// made: an updater that committed before it is seen by every snapshot,
/// on a primary and, through KnownAssignedXids, on a hot standby.
/// The horizon is taken at the first in-place update replayed (redo makes
/// one pruner per WAL record, most of which hold none).
#[derive(Default)]
pub struct ReplayPruner {
    horizon: Option<pg_sys::TransactionId>,
}

impl ReplayPruner {
    /// After `change` was replayed into `table`.
    pub fn after(&mut self, table: &Table, change: &Change) {
        let Change::Update { row, .. } = change else { return };
        // SAFETY: a scan of the proc array (also in the startup process).
        let horizon = *self.horizon.get_or_insert_with(|| unsafe { pg_sys::GetOldestNonRemovableTransactionId(std::ptr::null_mut()) });
        let arena = shmem::arena();
        {
            let _epoch = shmem::enter_epoch();
            // SAFETY: plain xid comparisons and clog lookups.
            let removable = |xid: u32| unsafe { crate::pg_leaf::TransactionIdPrecedes(xid.into(), horizon) && updater_committed(xid) };
            table.prune_chain(arena, *row, &removable);
        }
        reclaim_if_due(table);
    }
}

/// Prune the chain of `row` down to what the snapshots `vistest` covers may
/// still need, then free what waits. An updater that committed and is older
/// than every such snapshot is seen by all of them: the records behind it are
/// garbage.
///
/// # Safety
/// Inside a transaction; `vistest` is from `GlobalVisTestFor`.
pub unsafe fn prune_row_for(table: &Table, row: u64, vistest: *mut pg_sys::GlobalVisState) {
    {
        let _epoch = shmem::enter_epoch();
        let removable = |xid: u32| crate::pg_leaf::GlobalVisTestIsRemovableXid(vistest, xid.into()) && updater_committed(xid);
        // SAFETY: backends are single-threaded; only this function touches it.
        let walks = unsafe { &mut *(&raw mut WALKS) };
        walks.prune(table, shmem::arena(), row, &removable);
    }
    reclaim_if_due(table);
}

/// This backend's pruning walks (how far its writers walk a chain).
static mut WALKS: PruneWalks = PruneWalks::new();

/// Free what `table` retired, once enough waits (`Table::reclaim_due`).
/// Called by whoever prunes, outside its own reclamation epoch (inside it,
/// its own retirements could not be freed).
pub fn reclaim_if_due(table: &Table) {
    if table.reclaim_due() {
        table.reclaim(shmem::arena());
    }
}

/// Remember an in-place update of `row` by `xid`.
pub fn remember(table: &Table, row: u64, xid: u32) {
    let l = list();
    if l.len() < MAX_REMEMBERED {
        l.push(Entry { key: table.key, row, xid });
    }
}

/// Put back the rows of `entries`, newest first. The files the abort
/// removes (created in the aborted transaction) are put back in memory only
/// (`durable::files_removed_at_end`).
fn undo(entries: &[Entry]) {
    if entries.is_empty() {
        return;
    }
    let arena = shmem::arena();
    let dir = shmem::directory();
    let removed = crate::durable::files_removed_at_end(false);
    for e in entries.iter().rev() {
        if let Some(t) = dir.lookup(arena, &e.key) {
            // Logged: replaying a table's log must not need the clog to
            // know which versions were put back.
            // Out of memory for a page copy, the update stays: readers read
            // through it and the row's next writer or VACUUM puts it back
            // (an error here, in abort processing, would escalate).
            let _ = crate::durable::write_table(t, &removed, |log| crate::tam::modify::undo_update_into(t, e.row, e.xid, log));
        }
    }
}

pub fn install_hooks() {
    // SAFETY: callback registration during postmaster start-up. Registered
    // after storage's callbacks, so they run first: undo happens before
    // storage created in the aborted transaction is freed.
    unsafe {
        pg_sys::RegisterXactCallback(Some(xact_callback), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(subxact_callback), std::ptr::null_mut());
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn xact_callback(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    use pg_sys::XactEvent::*;
    match event {
        XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT => {
            shmem::reset_epoch();
            undo(&list().take_all());
            crate::tam::modify::settle_dead_tuple_credits(false);
        }
        XACT_EVENT_COMMIT | XACT_EVENT_PARALLEL_COMMIT => {
            let q = committed();
            let room = MAX_COMMITTED.saturating_sub(q.len());
            q.extend(list().take_all().into_iter().take(room));
            crate::tam::modify::settle_dead_tuple_credits(false);
        }
        XACT_EVENT_PRE_PREPARE => crate::tam::modify::settle_dead_tuple_credits(true),
        XACT_EVENT_PREPARE => list().clear(),
        _ => {}
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn subxact_callback(
    event: pg_sys::SubXactEvent::Type,
    _my_subid: pg_sys::SubTransactionId,
    _parent_subid: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    use pg_sys::SubXactEvent::*;
    let l = list();
    if l.is_empty() {
        return;
    }
    match event {
        SUBXACT_EVENT_COMMIT_SUB => l.hand_to_parent(),
        SUBXACT_EVENT_ABORT_SUB => undo(&l.take_aborted()),
        _ => {}
    }
}
