//! Writing rows: INSERT (plain, multi-row, speculative), DELETE, UPDATE and
//! row locks, with heap's concurrency behaviour.
//!
//! Every change to an existing row follows the same protocol: read the row
//! header, decide with PostgreSQL's transaction state what to do (go ahead,
//! wait for a transaction, or report a conflict), then apply the change with
//! [`Table::modify_row`], a compare-and-set under the row latch. If the row
//! moved on in between, start over. Waiting uses `XactLockTableWait`, so the
//! deadlock detector sees every wait.
//!
//! Row locks (`SELECT ... FOR KEY SHARE/SHARE/NO KEY UPDATE/UPDATE`) live in
//! the row's `locker` word: one transaction id with its lock mode, or a
//! MultiXactId when several transactions hold locks, as heap does.
//! Deleters and updaters write `xmax` and conflict with lockers according to
//! heap's lock conflict table (a non-key UPDATE takes NO KEY UPDATE, so it
//! does not wait for KEY SHARE lockers such as foreign-key checks).
//!
//! UPDATE changes a row in place when no indexed column changes (the
//! before-images go to an undo record, see `docs/mvcc.md`); otherwise it
//! writes a new version at a new row id and links the old one to it. Rows
//! are encoded with encoders each backend reuses, so a write allocates
//! little beyond what it stores.

use super::{row_to_tid, tid_to_row};
use crate::datum::Encoder;
use crate::error::{out_of_memory, OrRaise};
use crate::shmem;
use crate::durable;
use crate::storage::{table_for_write, table_of};
use crate::visibility::{xid_state, Seen, Visibility, XidState};
use anker_engine::arena::{AllocResult, Off};
use anker_engine::change::{Change, Val};
use anker_engine::table::{flag, RowChange, RowHeader, Table, Value, ValueRef};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use pg_sys::LockTupleMode::{LockTupleExclusive, LockTupleKeyShare, LockTupleNoKeyExclusive, LockTupleShare};
use pg_sys::TM_Result::*;

// storage/predicate.h is not in pgrx's bindings. Calls go through
// `pg_guard_ffi_boundary`, like every pgrx binding, so an ERROR raised
// inside becomes a Rust panic instead of a longjmp over Rust frames.
extern "C-unwind" {
    fn PredicateLockRelation(relation: pg_sys::Relation, snapshot: pg_sys::Snapshot);
    fn CheckForSerializableConflictIn(relation: pg_sys::Relation, tid: pg_sys::ItemPointer, blkno: pg_sys::BlockNumber);
    fn CheckForSerializableConflictOut(relation: pg_sys::Relation, xid: pg_sys::TransactionId, snapshot: pg_sys::Snapshot);
}
use pg_sys::ffi::pg_guard_ffi_boundary as guarded;

const XACT_SERIALIZABLE: i32 = 3;

pub fn serializable() -> bool {
    // SAFETY: plain read of a backend global.
    unsafe { pg_sys::XactIsoLevel == XACT_SERIALIZABLE }
}

/// SERIALIZABLE reads take a predicate lock on the whole relation
/// (relation-level locks are anker's granularity).
pub fn predicate_lock_relation(rel: pg_sys::Relation, snapshot: pg_sys::Snapshot) {
    if serializable() && !snapshot.is_null() {
        // SAFETY: valid relation and snapshot.
        unsafe { guarded(|| PredicateLockRelation(rel, snapshot)) };
    }
}

/// SERIALIZABLE writes check for rw-conflicts with readers of the relation.
fn conflict_in(rel: pg_sys::Relation) {
    if serializable() {
        // SAFETY: valid relation; NULL tid means the whole relation.
        unsafe { guarded(|| CheckForSerializableConflictIn(rel, std::ptr::null_mut(), pg_sys::InvalidBlockNumber)) };
    }
}

/// SERIALIZABLE reads report rw-conflicts with concurrent writers of the
/// row they looked at (as heap's `HeapCheckForSerializableConflictOut` does
/// for every tuple version it meets): the creators of the versions the
/// snapshot does not see (the live one and, for an older version seen,
/// every newer one in the chain), or the deleter of a visible version.
/// The caller is inside a reclamation epoch when the row has a chain.
pub fn conflict_out(rel: pg_sys::Relation, table: &Table, h: &RowHeader, seen: Seen, vis: &Visibility) {
    let snapshot = vis.snapshot();
    let report = |xid: u32, flags: u32, committed: u32, aborted: u32| {
        if matches!(xid_state(xid, flags, committed, aborted, &mut 0), XidState::Aborted | XidState::Current) {
            return;
        }
        // SAFETY: plain transaction-state lookups.
        unsafe {
            if crate::pg_leaf::TransactionIdPrecedes(xid.into(), pg_sys::TransactionXmin) {
                return;
            }
            let top = pg_sys::SubTransGetTopmostTransaction(xid.into());
            if top == pg_sys::GetTopTransactionIdIfAny() {
                return;
            }
            guarded(|| CheckForSerializableConflictOut(rel, top, snapshot));
        }
    };
    let creators_unseen = |upto: usize| {
        report(h.xmin, h.flags, flag::XMIN_COMMITTED, flag::XMIN_ABORTED);
        let arena = shmem::arena();
        let mut cur = h.chain;
        for _ in 1..upto {
            if cur == 0 {
                break;
            }
            // SAFETY: chain records are read inside a reclamation epoch.
            let rec = unsafe { table.undo_rec(arena, cur) };
            report(rec.xmin, rec.xmin_flags, flag::XMIN_COMMITTED, flag::XMIN_ABORTED);
            cur = rec.next.load(std::sync::atomic::Ordering::Acquire);
        }
    };
    match seen {
        Seen::Live if h.xmax != 0 => report(h.xmax, h.flags, flag::XMAX_COMMITTED, flag::XMAX_ABORTED),
        Seen::Live => {}
        Seen::Older(k) => creators_unseen(k),
        Seen::None if h.xmax != 0 && vis.live_created_visible(h) => {
            report(h.xmax, h.flags, flag::XMAX_COMMITTED, flag::XMAX_ABORTED)
        }
        Seen::None => creators_unseen(usize::MAX),
    }
}

/// Dead-tuple credits given this transaction, per relation (its pending
/// statistics entry, which lives until the transaction's statistics are
/// flushed, also for a relation dropped meanwhile): an in-place update
/// leaves no dead tuple, but PostgreSQL counts every update as one when the
/// transaction ends; the credit cancels it at once.
static mut DEAD_CREDITS: Vec<(*mut pg_sys::PgStat_TableStatus, i64)> = Vec::new();

unsafe fn credit_dead_tuple(rel: pg_sys::Relation) {
    crate::pg_leaf::count_dead_tuples_removed(rel, 1);
    let stats = (*rel).pgstat_info;
    if stats.is_null() {
        return;
    }
    let credits = &mut *(&raw mut DEAD_CREDITS);
    match credits.iter_mut().find(|(s, _)| *s == stats) {
        Some((_, n)) => *n += 1,
        None => credits.push((stats, 1)),
    }
}

/// Transaction end: at PREPARE, take the credits back. Whoever finishes the
/// prepared transaction adds its updates to the dead tuples in another
/// session's statistics, and a credit flushed before that debit would be
/// lost to PostgreSQL's clamp at zero, making the count depend on flush
/// order; a prepared transaction's in-place updates count as heap's do.
pub unsafe fn settle_dead_tuple_credits(prepared: bool) {
    let credits = std::mem::take(&mut *(&raw mut DEAD_CREDITS));
    if !prepared {
        return;
    }
    for (stats, n) in credits {
        // SAFETY: pending entries live until the statistics are flushed,
        // after the transaction.
        (*stats).t_counts.t_delta_dead_tuples += n;
    }
}

// ---- durable changes ----------------------------------------------------------
//
// Every change to a row goes through these: the engine change and its log
// entry under the table's log lock (`durable::write`).

/// [`Table::modify_row`], logged.
pub(super) fn modify_logged(rel: pg_sys::Relation, table: &Table, row: u64, h: &RowHeader, change: &RowChange) -> bool {
    durable::write(rel, table, |log| {
        let ok = table.modify_row(shmem::arena(), row, h, change).or_raise();
        if ok {
            log.push(&Change::Modify { row, change: *change });
        }
        ok
    })
}

/// [`Table::undo_update`] (the repair of an aborted in-place update),
/// logged. False: nothing of `xid` to undo (any more).
pub(super) fn undo_logged(rel: pg_sys::Relation, table: &Table, row: u64, xid: u32) -> bool {
    durable::write(rel, table, |log| undo_update_into(table, row, xid, log)).or_raise()
}

/// Put back what aborted in-place updates left in `row` (whose header the
/// caller read as `h`), so that its stored values and stamps are those of
/// its last version that did not abort, and return its header then (None:
/// the row id is vacant). An aborting backend
/// undoes its own updates at once, but a crash, `ROLLBACK PREPARED` or a
/// standby's promotion leaves them in place, read through by readers and
/// put back by the row's next writer. Code that copies rows or judges them
/// by their stored stamps (VACUUM, CLUSTER and VACUUM FULL, index builds,
/// ANALYZE) calls this first: CLUSTER dropped such rows and CREATE INDEX
/// left them out of the index.
///
/// Another backend may put the same update back first (the aborting one,
/// or a writer): the header is then read again, never judged as it was.
/// Until 2026-11-29 a lost race returned the header read before, with the
/// aborted creator, and VACUUM vacated the row, losing its committed
/// version (`tests/twin_fuzz.sh` found it, with autovacuum running beside
/// rollbacks).
pub(super) unsafe fn put_back_aborted(rel: pg_sys::Relation, table: &Table, row: u64, mut h: RowHeader) -> Option<RowHeader> {
    while h.chain != 0 && xid_state(h.xmin, h.flags, flag::XMIN_COMMITTED, flag::XMIN_ABORTED, &mut 0) == XidState::Aborted {
        let undone = undo_logged(rel, table, row, h.xmin);
        let now = super::header_now(table, row)?;
        if !undone && (now.xmin, now.chain) == (h.xmin, h.chain) {
            // (the row did not change, yet its newest update was not the
            // aborted creator's: judging the row by it could vacate a
            // committed version)
            let name = std::ffi::CStr::from_ptr((*(*rel).rd_rel).relname.data.as_ptr()).to_string_lossy();
            pgrx::error!("anker: cannot put back the aborted update of row {row} of \"{name}\"");
        }
        h = now;
    }
    Some(h)
}

/// [`Table::undo_update`] described in `log` (the body of a durable write:
/// also the eager undo of an aborting transaction, `undo.rs`).
pub(crate) fn undo_update_into(table: &Table, row: u64, xid: u32, log: &mut durable::Log) -> AllocResult<bool> {
    // (it reads the record before latching the row: another undo of the
    // same update may retire it meanwhile)
    let done = {
        let _epoch = shmem::enter_epoch();
        table.undo_update(shmem::arena(), row, xid)?
    };
    if done {
        log.push(&Change::Undo { row, xid });
    }
    Ok(done)
}

/// [`Table::insert_rows`], logged. `rows` must have as many values as the
/// table has columns.
#[allow(clippy::too_many_arguments)] // insert_rows' arguments
fn insert_logged(
    rel: pg_sys::Relation,
    table: &Table,
    rows: &[&[Value]],
    blobs: &[Off],
    xid: u32,
    cid: u32,
    flags: u32,
    locker: u32,
    ids: &mut Vec<u64>,
    scratch: &mut Vec<Val<'static>>,
) {
    durable::write(rel, table, |log| {
        table.insert_rows(shmem::arena(), rows, blobs, xid, cid, flags, locker, ids).or_raise();
        if log.is_enabled() {
            // (one vector of values for all the rows, the scratch one's)
            let mut values = relabel(std::mem::take(scratch));
            for (k, &row) in ids.iter().enumerate() {
                values.clear();
                values.extend(rows[k].iter().map(Val::from_value));
                let change = Change::Insert { row, xmin: xid, cmin: cid, flags, locker, values };
                log.push(&change);
                let Change::Insert { values: v, .. } = change else { unreachable!() };
                values = v;
            }
            *scratch = relabel(values);
        }
    })
}

// ---- inserts ----------------------------------------------------------------

/// Rows of earlier committed in-place updates whose chains each write
/// prunes when no snapshot needs them any more (`undo::collect_garbage`):
/// a few per write keeps pace with the updates of OLTP transactions.
const GARBAGE_PER_WRITE: usize = 16;

/// `slot_getallattrs` without a guarded call when every attribute is
/// there already (virtual slots, ours).
unsafe fn getallattrs(slot: *mut pg_sys::TupleTableSlot) {
    let natts = (*(*slot).tts_tupleDescriptor).natts;
    if ((*slot).tts_nvalid as i32) < natts {
        pg_sys::slot_getsomeattrs_int(slot, natts);
    }
}

/// Insert `slots` as new rows created by the current command.
unsafe fn insert_slots(
    rel: pg_sys::Relation,
    slots: &[*mut pg_sys::TupleTableSlot],
    cid: pg_sys::CommandId,
    flags: u32,
    token: u32,
) {
    let arena = shmem::arena();
    let table = table_for_write(rel);
    conflict_in(rel);
    crate::undo::collect_garbage(GARBAGE_PER_WRITE);
    let desc = (*rel).rd_att;
    let natts = (*desc).natts as usize;
    let ncols = table.ncols();
    let xid: u32 = crate::pg_leaf::current_transaction_id();
    let mut lent = Lent::take(slots.len());
    let scratch = &mut lent.0;
    for (&slot, enc) in slots.iter().zip(scratch.encoders.iter_mut()) {
        getallattrs(slot);
        let values = std::slice::from_raw_parts((*slot).tts_values, natts);
        let nulls = std::slice::from_raw_parts((*slot).tts_isnull, natts);
        enc.encode(desc, values, nulls, Some(table));
    }
    // (every row's values in one vector)
    let mut values = relabel(std::mem::take(&mut scratch.values));
    for e in &scratch.encoders[..slots.len()] {
        e.values_into(&mut values);
    }
    // (a value for every column in each row: the row slices below rely on it)
    assert_eq!(values.len(), slots.len() * ncols);
    scratch.blobs.clear();
    if let Err(e) = table.prepare_blobs(arena, &values, &mut scratch.blobs) {
        out_of_memory(e);
    }
    let one_row: [&[_]; 1];
    let many_rows: Vec<&[_]>;
    let rows: &[&[_]] = if slots.len() == 1 {
        one_row = [&values[..]];
        &one_row
    } else {
        many_rows = (0..slots.len()).map(|k| &values[k * ncols..(k + 1) * ncols]).collect();
        &many_rows
    };
    let ids = &mut scratch.ids;
    ids.clear();
    insert_logged(rel, table, rows, &scratch.blobs, xid, cid, flags, token, ids, &mut scratch.logged_values);
    scratch.values = relabel(values);
    // (a speculative insertion is decoded once confirmed)
    if flags & flag::SPECULATIVE == 0 && durable::logical::wanted(rel) {
        durable::logical::log_insert(rel, slots);
    }
    // RETURNING may read the new rows' system columns.
    let stamps = RowHeader { xmin: xid, cmin: cid, ..Default::default() };
    for (k, &slot) in slots.iter().enumerate() {
        (*slot).tts_tableOid = (*rel).rd_id;
        row_to_tid(ids[k], &mut (*slot).tts_tid);
        super::slot::set_stamps(slot, Some(&stamps));
    }
    crate::pg_leaf::count_inserts(rel, slots.len() as i64);
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_insert(
    rel: pg_sys::Relation,
    slot: *mut pg_sys::TupleTableSlot,
    cid: pg_sys::CommandId,
    _options: std::ffi::c_int,
    _bistate: *mut pg_sys::BulkInsertStateData,
) {
    insert_slots(rel, &[slot], cid, 0, 0);
}

#[pg_guard]
pub unsafe extern "C-unwind" fn multi_insert(
    rel: pg_sys::Relation,
    slots: *mut *mut pg_sys::TupleTableSlot,
    nslots: std::ffi::c_int,
    cid: pg_sys::CommandId,
    _options: std::ffi::c_int,
    _bistate: *mut pg_sys::BulkInsertStateData,
) {
    insert_slots(rel, std::slice::from_raw_parts(slots, nslots as usize), cid, 0, 0);
}

#[pg_guard]
pub unsafe extern "C-unwind" fn finish_bulk_insert(_rel: pg_sys::Relation, _options: std::ffi::c_int) {}

/// INSERT ... ON CONFLICT: the row carries the speculative-insertion token
/// (reported to DIRTY snapshots, which wait on it) until completed.
#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_insert_speculative(
    rel: pg_sys::Relation,
    slot: *mut pg_sys::TupleTableSlot,
    cid: pg_sys::CommandId,
    _options: std::ffi::c_int,
    _bistate: *mut pg_sys::BulkInsertStateData,
    spec_token: u32,
) {
    insert_slots(rel, &[slot], cid, flag::SPECULATIVE, spec_token);
}

/// Confirm a speculative insertion, or kill the row when a conflict was
/// found after all: it becomes invisible to everyone at once, as if its
/// insert had aborted.
#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_complete_speculative(
    rel: pg_sys::Relation,
    slot: *mut pg_sys::TupleTableSlot,
    _spec_token: u32,
    succeeded: bool,
) {
    let table = table_of(rel);
    let arena = shmem::arena();
    let row = tid_to_row(&(*slot).tts_tid).expect("speculative row has a TID");
    let change = if succeeded {
        RowChange { clear_flags: flag::SPECULATIVE, locker: Some(0), ..Default::default() }
    } else {
        RowChange { clear_flags: flag::SPECULATIVE | flag::XMIN_COMMITTED, set_flags: flag::XMIN_ABORTED, locker: Some(0), ..Default::default() }
    };
    loop {
        let h = table.header(arena, row).expect("speculative row exists");
        if modify_logged(rel, table, row, &h, &change) {
            break;
        }
    }
    if succeeded && durable::logical::wanted(rel) {
        getallattrs(slot);
        durable::logical::log_insert(rel, &[slot]);
    }
}

// ---- conflicts ----------------------------------------------------------------

/// Does a lock held in mode `held` conflict with a request for `want`?
/// (heap's `tupleLockConflicts`, LockTupleMode numbering.)
fn modes_conflict(held: u32, want: u32) -> bool {
    const CONFLICTS: [u8; 4] = [
        0b1000, // KEY SHARE conflicts with EXCLUSIVE
        0b1100, // SHARE with NO KEY EXCLUSIVE, EXCLUSIVE
        0b1110, // NO KEY EXCLUSIVE with SHARE, NO KEY EXCLUSIVE, EXCLUSIVE
        0b1111, // EXCLUSIVE with everything
    ];
    CONFLICTS[held as usize & 3] & (1 << (want & 3)) != 0
}

/// Running lockers of the row, other than us, whose locks conflict with `mode`.
unsafe fn conflicting_lockers(h: &RowHeader, mode: u32) -> Vec<u32> {
    let mut out = vec![];
    if h.locker == 0 || h.flags & flag::SPECULATIVE != 0 {
        return out;
    }
    let mut consider = |xid: u32, held: u32| {
        if modes_conflict(held, mode)
            && !crate::pg_leaf::TransactionIdIsCurrentTransactionId(xid.into())
            && pg_sys::TransactionIdIsInProgress(xid.into())
        {
            out.push(xid);
        }
    };
    if h.flags & flag::LOCKER_MULTI != 0 {
        for m in multi_members(h.locker) {
            consider(m.xid.into(), status_mode(m.status));
        }
    } else {
        consider(h.locker, (h.flags & flag::LOCK_MODE_MASK) >> flag::LOCK_MODE_SHIFT);
    }
    out
}

unsafe fn multi_members(multi: u32) -> Vec<pg_sys::MultiXactMember> {
    let mut members: *mut pg_sys::MultiXactMember = std::ptr::null_mut();
    let n = pg_sys::GetMultiXactIdMembers(multi.into(), &mut members, false, true);
    if n <= 0 || members.is_null() {
        return vec![];
    }
    let v = std::slice::from_raw_parts(members, n as usize).to_vec();
    pg_sys::pfree(members as *mut std::ffi::c_void);
    v
}

/// The lock mode of a (lock-only) multixact member status.
fn status_mode(status: pg_sys::MultiXactStatus::Type) -> u32 {
    match status {
        0 => LockTupleKeyShare,
        1 => LockTupleShare,
        2 | 4 => LockTupleNoKeyExclusive,
        _ => LockTupleExclusive,
    }
}

/// The multixact status for a lock mode.
fn mode_status(mode: u32) -> pg_sys::MultiXactStatus::Type {
    mode // ForKeyShare..ForUpdate share LockTupleMode's numbering
}

/// What stands between us and changing (or locking) a row.
enum Obstacle {
    /// Nothing: go ahead.
    None,
    /// The row is not visible to this command.
    Invisible,
    /// Updated or deleted by this transaction's current (or a later)
    /// command: by `(xid, cid)`.
    SelfModified(u32, u32),
    /// A running transaction modified or locked it: wait for these.
    Running(Vec<u32>, pg_sys::XLTW_Oper::Type),
    /// A committed transaction updated (or deleted) it.
    Committed { deleted: bool },
    /// An aborted transaction's in-place update is still in place: undo it
    /// (the aborting backend did not get to it), then look again.
    Repair(u32),
}

/// Does this transaction hold a lock on the row (taken after seeing its
/// newest version, e.g. by EvalPlanQual's re-lock)?
unsafe fn locked_by_us(h: &RowHeader) -> bool {
    if h.locker == 0 || h.flags & flag::SPECULATIVE != 0 {
        return false;
    }
    if h.flags & flag::LOCKER_MULTI != 0 {
        multi_members(h.locker).iter().any(|m| crate::pg_leaf::TransactionIdIsCurrentTransactionId(m.xid))
    } else {
        crate::pg_leaf::TransactionIdIsCurrentTransactionId(h.locker.into())
    }
}

/// What keeps command `cid` from changing or locking (in `mode`) the row
/// with header `h`? `vis` is the statement's MVCC snapshot: a row updated
/// in place after it was taken counts as updated by a committed
/// transaction (the caller saw an older version), unless we have since
/// locked the newest one.
///
/// KEY SHARE is compatible with updates that keep every key column, as in
/// heap: with in-place updates (which never change an indexed column) and
/// with updates at a new row id flagged `KEYS_KEPT`, running or committed.
///
/// `successor`: the row is a newer version reached by following an update
/// whose older version we just locked; its creator is not judged (heap's
/// `heap_lock_updated_tuple`), except that an aborted one ends the chain.
unsafe fn obstacle(
    h: &RowHeader,
    cid: u32,
    mode: u32,
    oper: pg_sys::XLTW_Oper::Type,
    vis: Option<&Visibility>,
    successor: bool,
) -> Obstacle {
    let mut hints = 0;
    let in_place = h.chain != 0;
    let key_share = mode == LockTupleKeyShare;
    match xid_state(h.xmin, h.flags, flag::XMIN_COMMITTED, flag::XMIN_ABORTED, &mut hints) {
        XidState::Aborted if in_place => return Obstacle::Repair(h.xmin),
        XidState::Aborted => return Obstacle::Invisible,
        _ if successor => {}
        XidState::InProgress if in_place && key_share => {}
        XidState::InProgress if in_place => return Obstacle::Running(vec![h.xmin], oper),
        XidState::InProgress => return Obstacle::Invisible,
        XidState::Current if h.cmin >= cid => {
            return if in_place { Obstacle::SelfModified(h.xmin, h.cmin) } else { Obstacle::Invisible };
        }
        _ => {}
    }
    if h.xmax != 0 {
        let keys_kept = key_share && h.flags & flag::KEYS_KEPT != 0;
        match xid_state(h.xmax, h.flags, flag::XMAX_COMMITTED, flag::XMAX_ABORTED, &mut hints) {
            XidState::Aborted => {}
            XidState::Current => {
                return if h.cmax >= cid { Obstacle::SelfModified(h.xmax, h.cmax) } else { Obstacle::Invisible };
            }
            XidState::InProgress | XidState::Committed if keys_kept => {}
            XidState::InProgress => return Obstacle::Running(vec![h.xmax], oper),
            XidState::Committed => return Obstacle::Committed { deleted: h.flags & (flag::UPDATED | flag::MOVED) == 0 },
        }
    }
    let lockers = conflicting_lockers(h, mode);
    if !lockers.is_empty() {
        return Obstacle::Running(lockers, oper);
    }
    if let Some(vis) = vis {
        if in_place && !key_share && !successor && !vis.live_visible(h, &mut 0) && !locked_by_us(h) {
            return Obstacle::Committed { deleted: false };
        }
    }
    Obstacle::None
}

/// Fill `tmfd` for a failed change of `row` whose header is `h`.
unsafe fn fill_failure(tmfd: *mut pg_sys::TM_FailureData, row: u64, h: &RowHeader, self_modified: Option<(u32, u32)>) {
    let t = &mut *tmfd;
    if h.flags & flag::MOVED != 0 {
        // ItemPointerSetMovedPartitions: the executor reports the move.
        t.ctid.ip_blkid.bi_hi = 0xffff;
        t.ctid.ip_blkid.bi_lo = 0xffff;
        t.ctid.ip_posid = 0xfffd;
    } else if h.flags & flag::UPDATED != 0 && h.next != u64::MAX {
        row_to_tid(h.next, &mut t.ctid);
    } else {
        // deleted, or updated in place: the newest version is here
        row_to_tid(row, &mut t.ctid);
    }
    match self_modified {
        Some((xid, cid)) => {
            t.xmax = xid.into();
            t.cmax = cid;
        }
        None => {
            t.xmax = if h.xmax != 0 { h.xmax.into() } else { h.xmin.into() };
            t.cmax = pg_sys::InvalidCommandId;
        }
    }
    t.traversed = false;
}

unsafe fn wait_for(xids: &[u32], rel: pg_sys::Relation, row: u64, oper: pg_sys::XLTW_Oper::Type) {
    let mut tid = pg_sys::ItemPointerData::default();
    row_to_tid(row, &mut tid);
    for &x in xids {
        pg_sys::XactLockTableWait(x.into(), rel, &mut tid, oper);
    }
}

unsafe fn invisible(what: &str) -> ! {
    ereport!(ERROR, PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("attempted to {what} invisible tuple"));
}

/// Read the header of `row` or fail loudly: executor TIDs always name rows.
unsafe fn header_of(table: &Table, row: u64, what: &str) -> RowHeader {
    match super::header_now(table, row) {
        Some(h) => h,
        None => invisible(what),
    }
}

/// The statement snapshot as a `Visibility`, when it is an MVCC one.
unsafe fn mvcc(snapshot: pg_sys::Snapshot) -> Option<Visibility> {
    if !snapshot.is_null() && (*snapshot).snapshot_type == pg_sys::SnapshotType::SNAPSHOT_MVCC {
        Some(Visibility::new(snapshot))
    } else {
        None
    }
}

/// heap's heavyweight tuple lock (`heap_acquire_tuplock`): taken before
/// sleeping on the transaction that holds a row, so that the waiters of a
/// row queue up in order instead of racing when it is freed (a later
/// waiter winning the race could block an earlier one behind itself for
/// good), and held until the change or lock is made. Released when dropped,
/// except while unwinding from an error: the abort releases it then.
pub struct TupleLock {
    rel: pg_sys::Relation,
    tid: pg_sys::ItemPointerData,
    held: Option<pg_sys::LOCKMODE>,
}

impl TupleLock {
    fn new(rel: pg_sys::Relation) -> TupleLock {
        TupleLock { rel, tid: Default::default(), held: None }
    }

    /// Before waiting for `row`'s holders, in row-lock mode `mode`.
    unsafe fn acquire(&mut self, row: u64, mode: u32) {
        if self.held.is_some() {
            return;
        }
        // heap's tupleLockExtraInfo: the lock mode standing for each row-lock mode
        const HEAVYWEIGHT: [u32; 4] =
            [pg_sys::AccessShareLock, pg_sys::RowShareLock, pg_sys::ExclusiveLock, pg_sys::AccessExclusiveLock];
        let lockmode = HEAVYWEIGHT[mode as usize & 3] as pg_sys::LOCKMODE;
        row_to_tid(row, &mut self.tid);
        pg_sys::LockTuple(self.rel, &mut self.tid, lockmode);
        self.held = Some(lockmode);
    }
}

impl Drop for TupleLock {
    fn drop(&mut self) {
        if let Some(mode) = self.held {
            if !std::thread::panicking() {
                // SAFETY: we took this lock on this relation and TID.
                unsafe { pg_sys::UnlockTuple(self.rel, &mut self.tid, mode) };
            }
        }
    }
}

/// Claim `row` for a change in `mode`: wait out running writers and
/// lockers, repair leftovers of aborted in-place updates, and report
/// conflicts. Returns the header to change, or the TM_Result to return.
#[allow(clippy::too_many_arguments)]
unsafe fn claim(
    rel: pg_sys::Relation,
    table: &Table,
    row: u64,
    cid: u32,
    mode: u32,
    oper: pg_sys::XLTW_Oper::Type,
    snapshot: pg_sys::Snapshot,
    crosscheck: pg_sys::Snapshot,
    wait: bool,
    tmfd: *mut pg_sys::TM_FailureData,
    what: &str,
    tuple_lock: &mut TupleLock,
) -> Result<RowHeader, pg_sys::TM_Result::Type> {
    let vis = mvcc(snapshot);
    loop {
        let h = header_of(table, row, what);
        match obstacle(&h, cid, mode, oper, vis.as_ref(), false) {
            Obstacle::Invisible => invisible(what),
            Obstacle::SelfModified(x, c) => {
                fill_failure(tmfd, row, &h, Some((x, c)));
                return Err(TM_SelfModified);
            }
            Obstacle::Running(xids, oper) => {
                if !wait {
                    fill_failure(tmfd, row, &h, None);
                    return Err(TM_BeingModified);
                }
                // (not when upgrading a lock we hold: heap's skip_tuple_lock,
                // else we could deadlock with a waiter queued on it)
                if !locked_by_us(&h) {
                    tuple_lock.acquire(row, mode);
                }
                wait_for(&xids, rel, row, oper);
                continue;
            }
            Obstacle::Committed { deleted } => {
                fill_failure(tmfd, row, &h, None);
                return Err(if deleted { TM_Deleted } else { TM_Updated });
            }
            Obstacle::Repair(xid) => {
                undo_logged(rel, table, row, xid);
                continue;
            }
            Obstacle::None => {}
        }
        if !crosscheck.is_null() && !Visibility::new(crosscheck).live_visible(&h, &mut 0) {
            fill_failure(tmfd, row, &h, None);
            return Err(TM_Updated);
        }
        return Ok(h);
    }
}

// ---- DELETE -------------------------------------------------------------------

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_delete(
    rel: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    cid: pg_sys::CommandId,
    snapshot: pg_sys::Snapshot,
    crosscheck: pg_sys::Snapshot,
    wait: bool,
    tmfd: *mut pg_sys::TM_FailureData,
    changing_part: bool,
) -> pg_sys::TM_Result::Type {
    let table = table_of(rel);
    let row = tid_to_row(tid).unwrap_or(u64::MAX);
    conflict_in(rel);
    let xid: u32 = crate::pg_leaf::current_transaction_id();
    let mut tuple_lock = TupleLock::new(rel);
    let logical = durable::logical::wanted(rel);
    loop {
        let h = match claim(rel, table, row, cid, LockTupleExclusive, pg_sys::XLTW_Oper::XLTW_Delete, snapshot, crosscheck, wait, tmfd, "delete", &mut tuple_lock) {
            Ok(h) => h,
            Err(r) => return r,
        };
        let old_key = if logical { durable::logical::old_identity(rel, table, row, None) } else { None };
        let change = RowChange {
            xmax: Some((xid, cid)),
            set_flags: if changing_part { flag::MOVED } else { 0 },
            // Row locks stay: a DELETE in a subtransaction that rolls back
            // must leave the parent's lock in place.
            clear_flags: flag::UPDATED | flag::KEYS_KEPT,
            ..Default::default()
        };
        if modify_logged(rel, table, row, &h, &change) {
            if logical {
                durable::logical::log_delete(rel, old_key);
            }
            crate::pg_leaf::count_delete(rel);
            return TM_Ok;
        }
    }
}

// ---- UPDATE -------------------------------------------------------------------

/// Does `new` differ from the stored value of column `i` of `row`? Compares
/// stored bytes, which are canonical for equal datums.
unsafe fn column_changed(table: &Table, row: u64, i: usize, new: &Value) -> bool {
    let arena = shmem::arena();
    if i >= table.ncols() {
        return true;
    }
    let width = 1usize << table.column(arena, i).width_shift;
    let same = match (table.value(arena, i, row), new) {
        (ValueRef::Null, Value::Null) => true,
        (ValueRef::Fixed(p), Value::Fixed(b)) => {
            let stored = std::slice::from_raw_parts(p, width);
            stored[..b.len()] == **b && stored[b.len()..].iter().all(|&x| x == 0)
        }
        (ValueRef::Inline(p), Value::Inline(b)) => {
            let stored = std::slice::from_raw_parts(p, width);
            b.len() <= width && stored[..b.len()] == **b && stored[b.len()..].iter().all(|&x| x == 0)
        }
        (ValueRef::Inline(p), Value::Numeric(b)) => {
            std::slice::from_raw_parts(p, width.min(anker_engine::table::VAR_SLOT)) == anker_engine::decimal::numeric_slot(b)
        }
        // A column the statement assigns but leaves as it was (`SET c = CASE
        // ... ELSE c END`) comes back as the pointer to the stored blob we
        // handed out: equal without reading it.
        (ValueRef::Blob(p, n), Value::Blob(b)) => {
            (std::ptr::eq(p, b.as_ptr()) && n as usize == b.len()) || std::slice::from_raw_parts(p, n as usize) == *b
        }
        _ => false,
    };
    !same
}

/// Words of a [`Columns`] set: one bit per possible attribute.
const COLUMN_WORDS: usize = (pg_sys::MaxHeapAttributeNumber as usize).div_ceil(64);

/// A set of columns (0-based attribute numbers), held without allocating.
/// UPDATE tests every changed column against the relation's indexed
/// columns (a copy of the relcache's bitmap answers with a shift instead of
/// a guarded call) and the columns its statement assigns; restricted scans
/// keep the columns their query reads (`projection`).
#[derive(Default)]
pub(super) struct Columns([u64; COLUMN_WORDS]);

impl Columns {
    /// The user columns of a relcache attribute bitmap (members offset by
    /// `FirstLowInvalidHeapAttributeNumber`; system columns are dropped).
    unsafe fn from_bitmap(b: *const pg_sys::Bitmapset) -> Columns {
        let mut set = Columns::default();
        set.add_bitmap(b);
        set
    }

    /// Adds the user columns of an attribute bitmap, as `from_bitmap`.
    pub(super) unsafe fn add_bitmap(&mut self, b: *const pg_sys::Bitmapset) {
        for attno in super::bitmap_attnos(b) {
            if attno > 0 {
                self.add(attno as usize - 1);
            }
        }
    }

    pub(super) fn add(&mut self, i: usize) {
        if i < COLUMN_WORDS * 64 {
            self.0[i / 64] |= 1 << (i % 64);
        }
    }

    pub(super) fn contains(&self, i: usize) -> bool {
        i < COLUMN_WORDS * 64 && self.0[i / 64] >> (i % 64) & 1 != 0
    }

    /// How many columns the set holds.
    pub(super) fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().flat_map(|(w, &word)| {
            let mut bits = word;
            std::iter::from_fn(move || {
                (bits != 0).then(|| {
                    let i = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    i
                })
            })
        })
    }
}

/// The columns `rel`'s indexes use: all of them, and those a foreign key
/// can reference (columns of unique indexes). Read from the relcache's
/// cached bitmaps, which `RelationGetIndexAttrBitmap` would copy for us.
unsafe fn indexed_columns(rel: pg_sys::Relation) -> (Columns, Columns) {
    if (*rel).rd_indexattr.is_null() {
        // Not computed yet, or no index uses a column: the relcache works
        // it out (and caches it where the fast path below reads it).
        use pg_sys::IndexAttrBitmapKind::{INDEX_ATTR_BITMAP_ALL, INDEX_ATTR_BITMAP_KEY};
        let all = pg_sys::RelationGetIndexAttrBitmap(rel, INDEX_ATTR_BITMAP_ALL);
        let key = pg_sys::RelationGetIndexAttrBitmap(rel, INDEX_ATTR_BITMAP_KEY);
        let sets = (Columns::from_bitmap(all), Columns::from_bitmap(key));
        pg_sys::bms_free(all);
        pg_sys::bms_free(key);
        return sets;
    }
    (Columns::from_bitmap((*rel).rd_indexattr), Columns::from_bitmap((*rel).rd_keyattr))
}

/// Can column `i` of the new row differ from the stored one? Not when the
/// statement does not assign it (`assigned`, see `assigned.rs`) and the
/// table has the column.
fn may_change(table: &Table, assigned: &Option<Columns>, i: usize) -> bool {
    assigned.as_ref().is_none_or(|a| a.contains(i)) || i >= table.ncols()
}

/// Does the update change any column in `cols`?
unsafe fn changes_any(table: &Table, row: u64, new: &[Value], cols: &Columns, assigned: &Option<Columns>) -> bool {
    cols.iter().any(|i| i >= new.len() || (may_change(table, assigned, i) && column_changed(table, row, i, &new[i])))
}

/// Columns whose stored value differs from the new one (0-based), with the
/// new values, in `out`.
unsafe fn changed_columns<'a>(
    table: &Table,
    row: u64,
    new: &[Value<'a>],
    assigned: &Option<Columns>,
    out: &mut Vec<(usize, Value<'a>)>,
) {
    out.clear();
    out.extend(
        new.iter()
            .enumerate()
            .filter(|(i, v)| may_change(table, assigned, *i) && column_changed(table, row, *i, v))
            .map(|(i, v)| (i, *v)),
    );
}

/// What row writes fill and empty, kept per backend: encoders, and the
/// vectors of values, changes, blobs and row ids, so that writing a row
/// allocates nothing once a row of its table was written.
struct Scratch {
    encoders: Vec<Encoder>,
    values: Vec<Value<'static>>,
    changes: Vec<(usize, Value<'static>)>,
    logged_values: Vec<Val<'static>>,
    logged_changes: Vec<(usize, Val<'static>)>,
    blobs: Vec<Off>,
    ids: Vec<u64>,
}

impl Scratch {
    /// Nothing kept (a `static` cannot call `Default`).
    const EMPTY: Scratch = Scratch {
        encoders: Vec::new(),
        values: Vec::new(),
        changes: Vec::new(),
        logged_values: Vec::new(),
        logged_changes: Vec::new(),
        blobs: Vec::new(),
        ids: Vec::new(),
    };
}

static mut SCRATCH: Scratch = Scratch::EMPTY;

/// Encoders a backend keeps between writes (multi-row inserts may borrow
/// more; the rest are freed).
const ENCODERS_KEPT: usize = 64;

/// Elements a vector of the scratch may keep between writes (a row of the
/// widest table has 1,600 values; a multi-row insert's longer vectors are
/// freed).
const ELEMENTS_KEPT: usize = 2048;

/// Borrows the backend's [`Scratch`] with at least `n` encoders, handing it
/// back when dropped (also when an error unwinds: a vector lent out of it
/// then is lost, and the next write allocates again). A nested borrow gets
/// fresh ones.
struct Lent(Scratch);

impl Lent {
    fn take(n: usize) -> Lent {
        // SAFETY: backends are single-threaded; only this type touches it.
        let mut s = std::mem::replace(unsafe { &mut *(&raw mut SCRATCH) }, Scratch::EMPTY);
        s.encoders.resize_with(n.max(s.encoders.len()), Encoder::default);
        Lent(s)
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        let s = &mut self.0;
        s.encoders.truncate(ENCODERS_KEPT);
        fn bound<T>(v: &mut Vec<T>) {
            if v.capacity() > ELEMENTS_KEPT {
                *v = Vec::new();
            }
        }
        bound(&mut s.values);
        bound(&mut s.changes);
        bound(&mut s.logged_values);
        bound(&mut s.logged_changes);
        bound(&mut s.blobs);
        bound(&mut s.ids);
        // SAFETY: as in `take`; the backend's scratch is empty while lent.
        unsafe { *(&raw mut SCRATCH) = std::mem::replace(&mut self.0, Scratch::EMPTY) };
    }
}

/// `v`'s allocation, emptied, for elements that differ from its own only in
/// their lifetimes: collecting in place reuses it (were it not reused, this
/// would allocate, never misbehave).
fn relabel<T, U>(mut v: Vec<T>) -> Vec<U> {
    v.clear();
    v.into_iter().map(|_| -> U { unreachable!("the vector is empty") }).collect()
}

/// Prune the chain of `row` down to what running snapshots may need.
unsafe fn prune(rel: pg_sys::Relation, table: &Table, row: u64) {
    crate::undo::prune_row_for(table, row, crate::pg_leaf::GlobalVisTestFor(rel));
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_update(
    rel: pg_sys::Relation,
    otid: pg_sys::ItemPointer,
    slot: *mut pg_sys::TupleTableSlot,
    cid: pg_sys::CommandId,
    snapshot: pg_sys::Snapshot,
    crosscheck: pg_sys::Snapshot,
    wait: bool,
    tmfd: *mut pg_sys::TM_FailureData,
    lockmode: *mut pg_sys::LockTupleMode::Type,
    update_indexes: *mut bool,
) -> pg_sys::TM_Result::Type {
    let arena = shmem::arena();
    let table = table_for_write(rel);
    let row = tid_to_row(otid).unwrap_or(u64::MAX);
    conflict_in(rel);
    crate::undo::collect_garbage(GARBAGE_PER_WRITE);
    let mut tuple_lock = TupleLock::new(rel);
    let xid: u32 = crate::pg_leaf::current_transaction_id();
    let desc = (*rel).rd_att;
    let natts = (*desc).natts as usize;
    getallattrs(slot);
    let (datums, nulls) = (std::slice::from_raw_parts((*slot).tts_values, natts), std::slice::from_raw_parts((*slot).tts_isnull, natts));
    let assigned = super::assigned::columns(rel);
    // Only the columns the statement may change are compared and written
    // in place: encode those (a TPC-C stock update: 4 of 17 values, none of
    // its 11 strings), and the whole row only for a new row id, below.
    let mut lent = Lent::take(1);
    let Scratch { encoders, values: values_home, changes: changes_home, logged_values, logged_changes, blobs, ids } = &mut lent.0;
    let enc = &mut encoders[0];
    enc.encode_some(desc, datums, nulls, Some(table), |i| may_change(table, &assigned, i));
    let mut new_values = relabel(std::mem::take(values_home));
    enc.values_into(&mut new_values);
    // An update that changes a key column (of a unique index usable by
    // foreign keys) locks like DELETE; others let KEY SHARE lockers be.
    let (indexed, key_cols) = indexed_columns(rel);
    // AFTER ROW UPDATE triggers fetch the old row by TID when they fire,
    // after the update: it must still be there, so such tables (which
    // includes foreign-key tables) keep the new-row-id path.
    let trigdesc = (*rel).trigdesc;
    let in_place_allowed = (trigdesc.is_null() || !(*trigdesc).trig_update_after_row)
        && *(&raw const LAST_PLAIN_LOCK) != Some((table.key, row, cid));
    let mut changes = relabel(std::mem::take(changes_home));
    let mut keys_kept = false;
    let logical = durable::logical::wanted(rel);
    let mut old_key = None;
    // Some(result) when done in place or not at all; None: a new row id.
    let done_here = loop {
        let mode = if changes_any(table, row, &new_values, &key_cols, &assigned) { LockTupleExclusive } else { LockTupleNoKeyExclusive };
        *lockmode = mode;
        let h = match claim(rel, table, row, cid, mode, pg_sys::XLTW_Oper::XLTW_Update, snapshot, crosscheck, wait, tmfd, "update", &mut tuple_lock) {
            Ok(h) => h,
            Err(r) => break Some(r),
        };
        // One comparison per column, now that the row is ours.
        // (columns beyond the attributes stay as they are)
        changed_columns(table, row, &new_values[..natts], &assigned, &mut changes);
        old_key = if logical {
            durable::logical::old_identity(rel, table, row, Some(&|i| changes.iter().any(|&(c, _)| c == i)))
        } else {
            None
        };
        if in_place_allowed && !changes.iter().any(|&(i, _)| indexed.contains(i)) {
            // No indexed column changes: update in place, same row id.
            blobs.clear();
            table.prepare_blobs(arena, changes.iter().map(|(_, v)| v), blobs).or_raise();
            let done = durable::write(rel, table, |log| {
                let done = table.update_in_place(arena, row, &h, xid, cid, &changes, blobs).or_raise();
                if done {
                    let mut logged = relabel(std::mem::take(logged_changes));
                    logged.extend(changes.iter().map(|(c, v)| (*c, Val::from_value(v))));
                    let change = Change::Update { row, xid, cid, changes: logged };
                    log.push(&change);
                    let Change::Update { changes: logged, .. } = change else { unreachable!() };
                    *logged_changes = relabel(logged);
                }
                done
            });
            if !done {
                table.discard_blobs(arena, blobs);
                continue;
            }
            crate::undo::remember(table, row, xid);
            if logical {
                durable::logical::log_update(rel, slot, old_key);
            }
            if h.chain != 0 {
                // Older records may have become garbage (the one just
                // written never is).
                prune(rel, table, row);
            }
            (*slot).tts_tableOid = (*rel).rd_id;
            row_to_tid(row, &mut (*slot).tts_tid);
            super::slot::set_stamps(slot, Some(&RowHeader { xmin: xid, cmin: cid, ..Default::default() }));
            *update_indexes = false;
            // PostgreSQL counts every update as a dead tuple; an in-place
            // update leaves none (its undo record is collected once no
            // snapshot needs it, see `undo`). Counting them made autovacuum
            // rescan stock and customer under TPC-C for nothing.
            crate::pg_leaf::count_update(rel, true);
            credit_dead_tuple(rel);
            break Some(TM_Ok);
        }
        // An indexed column changes: a new version at a new row id, so that
        // index entries pointing here keep naming the old key's row.
        keys_kept = mode == LockTupleNoKeyExclusive;
        let set_flags = if keys_kept { flag::KEYS_KEPT } else { 0 };
        let change = RowChange {
            xmax: Some((xid, cid)),
            set_flags,
            clear_flags: (flag::UPDATED | flag::MOVED | flag::KEYS_KEPT) & !set_flags,
            ..Default::default()
        };
        if modify_logged(rel, table, row, &h, &change) {
            break None;
        }
    };
    *changes_home = relabel(changes);
    *values_home = relabel(new_values);
    if let Some(result) = done_here {
        return result;
    }
    // Write the new version, then link the old row to it. Should this fail
    // (out of memory), the transaction aborts and our xmax is ignored.
    // A key-keeping update hands the old row's (KEY SHARE) lockers on to
    // the new version, as heap does: a later delete of it must wait for
    // them. The new row is ours alone until linked, so its locker can be
    // brought up to date while lockers come and go on the old one.
    if assigned.is_some() {
        enc.encode(desc, datums, nulls, Some(table));
    }
    let mut new_values = relabel(std::mem::take(values_home));
    enc.values_into(&mut new_values);
    blobs.clear();
    table.prepare_blobs(arena, &new_values, blobs).or_raise();
    ids.clear();
    let mut carried = (0, 0);
    insert_logged(rel, table, &[&new_values], blobs, xid, cid, 0, 0, ids, logged_values);
    *values_home = relabel(new_values);
    let new_row = ids[0];
    loop {
        let h = header_of(table, row, "update");
        let lockers = if keys_kept && h.locker != 0 { (h.locker, h.flags & (flag::LOCKER_MULTI | flag::LOCK_MODE_MASK)) } else { (0, 0) };
        if lockers != carried {
            let new_h = header_of(table, new_row, "update");
            let change = RowChange {
                locker: Some(lockers.0),
                set_flags: lockers.1,
                clear_flags: (flag::LOCKER_MULTI | flag::LOCK_MODE_MASK) & !lockers.1,
                ..Default::default()
            };
            if !modify_logged(rel, table, new_row, &new_h, &change) {
                continue;
            }
            carried = lockers;
        }
        let change = RowChange { next: Some(new_row), set_flags: flag::UPDATED, ..Default::default() };
        if modify_logged(rel, table, row, &h, &change) {
            break;
        }
    }
    (*slot).tts_tableOid = (*rel).rd_id;
    row_to_tid(new_row, &mut (*slot).tts_tid);
    let stamps = RowHeader { xmin: xid, cmin: cid, locker: carried.0, flags: carried.1, ..Default::default() };
    super::slot::set_stamps(slot, Some(&stamps));
    *update_indexes = true;
    if logical {
        durable::logical::log_update(rel, slot, old_key);
    }
    arena.count(anker_engine::stats::NEW_ROW_UPDATES, 1);
    crate::pg_leaf::count_update(rel, false);
    TM_Ok
}

// ---- row locks ------------------------------------------------------------------

/// The new locker word (and flag bits) after adding our lock in `mode`, or
/// None when we already hold a lock at least that strong.
unsafe fn add_lock(h: &RowHeader, mode: u32) -> Option<(u32, u32, u32)> {
    let me: u32 = crate::pg_leaf::current_transaction_id();
    let single = |m: u32| (me, m << flag::LOCK_MODE_SHIFT, flag::LOCKER_MULTI | flag::LOCK_MODE_MASK);
    if h.locker == 0 {
        return Some(single(mode));
    }
    if h.flags & flag::LOCKER_MULTI == 0 {
        let held = (h.flags & flag::LOCK_MODE_MASK) >> flag::LOCK_MODE_SHIFT;
        let holder = h.locker;
        if holder == me {
            return if held >= mode { None } else { Some(single(mode)) };
        }
        if crate::pg_leaf::TransactionIdIsCurrentTransactionId(holder.into()) && held >= mode {
            return None; // a parent (sub)transaction of ours holds it
        }
        if !pg_sys::TransactionIdIsInProgress(holder.into()) {
            return Some(single(mode));
        }
        pg_sys::MultiXactIdSetOldestMember();
        let multi = pg_sys::MultiXactIdCreate(holder.into(), mode_status(held), me.into(), mode_status(mode));
        return Some((multi.into(), flag::LOCKER_MULTI, flag::LOCK_MODE_MASK));
    }
    let members = multi_members(h.locker);
    if members.iter().any(|m| {
        crate::pg_leaf::TransactionIdIsCurrentTransactionId(m.xid) && status_mode(m.status) >= mode
    }) {
        return None;
    }
    if !members.iter().any(|m| pg_sys::TransactionIdIsInProgress(m.xid)) {
        return Some(single(mode));
    }
    pg_sys::MultiXactIdSetOldestMember();
    let multi = pg_sys::MultiXactIdExpand(h.locker.into(), me.into(), mode_status(mode));
    Some((multi.into(), flag::LOCKER_MULTI, flag::LOCK_MODE_MASK))
}

/// The row (table, row id, command id) last locked without flags: the lock
/// INSERT ... ON CONFLICT DO UPDATE takes before updating the row. That
/// update goes to a new row id, never in place, so that the same command
/// meeting the row again (a second input row with the same key) finds a
/// version its own command created, which tuple_lock reports as invisible
/// and PostgreSQL as "ON CONFLICT DO UPDATE command cannot affect row a
/// second time" (SQLSTATE 21000). Updated in place, the row would read as
/// updated by the current command, which ON CONFLICT does not expect.
static mut LAST_PLAIN_LOCK: Option<(anker_engine::table::TableKey, u64, u32)> = None;

/// Add our lock in `mode` to `row` (header `h`); false if the row changed
/// meanwhile.
unsafe fn lock_row(rel: pg_sys::Relation, table: &Table, row: u64, h: &RowHeader, mode: u32) -> bool {
    let Some((locker, set, clear)) = add_lock(h, mode) else { return true };
    let change = RowChange { locker: Some(locker), set_flags: set, clear_flags: clear & !set, ..Default::default() };
    modify_logged(rel, table, row, h, &change)
}

/// After a KEY SHARE lock on `row`: lock the newer versions that
/// key-keeping updates made of it too (heap's `heap_lock_updated_tuple`),
/// so that whoever later deletes them, or changes their key, waits for us.
unsafe fn lock_successors(
    rel: pg_sys::Relation,
    table: &Table,
    row: u64,
    cid: u32,
    wait_policy: pg_sys::LockWaitPolicy::Type,
    follow: bool,
    tmfd: *mut pg_sys::TM_FailureData,
) -> Result<(), pg_sys::TM_Result::Type> {
    let mut cur = row;
    loop {
        let h = header_of(table, cur, "lock");
        let followed = flag::UPDATED | flag::KEYS_KEPT;
        if h.xmax == 0 || h.flags & followed != followed || h.flags & flag::MOVED != 0 || h.next >= table.nrows() {
            return Ok(());
        }
        if xid_state(h.xmax, h.flags, flag::XMAX_COMMITTED, flag::XMAX_ABORTED, &mut 0) == XidState::Aborted {
            return Ok(());
        }
        let next = h.next;
        loop {
            let hn = header_of(table, next, "lock");
            match obstacle(&hn, cid, LockTupleKeyShare, pg_sys::XLTW_Oper::XLTW_LockUpdated, None, true) {
                // its creator aborted: the version we locked is the last one
                Obstacle::Invisible | Obstacle::SelfModified(..) => return Ok(()),
                Obstacle::Repair(xid) => {
                    undo_logged(rel, table, next, xid);
                    continue;
                }
                Obstacle::Running(xids, oper) => {
                    match wait_policy {
                        pg_sys::LockWaitPolicy::LockWaitSkip => {
                            fill_failure(tmfd, next, &hn, None);
                            return Err(TM_WouldBlock);
                        }
                        pg_sys::LockWaitPolicy::LockWaitError => lock_not_available(rel),
                        _ => wait_for(&xids, rel, next, oper),
                    }
                    continue;
                }
                Obstacle::Committed { deleted } => {
                    if follow && hn.flags & flag::MOVED != 0 {
                        moved_away();
                    }
                    fill_failure(tmfd, next, &hn, None);
                    return Err(if deleted { TM_Deleted } else { TM_Updated });
                }
                Obstacle::None => {
                    if lock_row(rel, table, next, &hn, LockTupleKeyShare) {
                        break;
                    }
                }
            }
        }
        cur = next;
    }
}

/// heap's error for a row to lock (newest version) that an UPDATE moved to
/// another partition.
fn moved_away() -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
        "tuple to be locked was already moved to another partition due to concurrent update"
    );
}

unsafe fn lock_not_available(rel: pg_sys::Relation) -> ! {
    let name = std::ffi::CStr::from_ptr((*(*rel).rd_rel).relname.data.as_ptr()).to_string_lossy();
    ereport!(ERROR, PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE, format!("could not obtain lock on row in relation \"{name}\""));
}

#[pg_guard]
pub unsafe extern "C-unwind" fn tuple_lock(
    rel: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    snapshot: pg_sys::Snapshot,
    slot: *mut pg_sys::TupleTableSlot,
    cid: pg_sys::CommandId,
    mode: pg_sys::LockTupleMode::Type,
    wait_policy: pg_sys::LockWaitPolicy::Type,
    flags: u8,
    tmfd: *mut pg_sys::TM_FailureData,
) -> pg_sys::TM_Result::Type {
    let table = table_of(rel);
    let follow = flags as u32 & pg_sys::TUPLE_LOCK_FLAG_FIND_LAST_VERSION != 0;
    // REPEATABLE READ and SERIALIZABLE may only lock what their snapshot
    // sees; READ COMMITTED locks the newest version (and re-checks it).
    let xact_snapshot = pg_sys::XactIsoLevel >= 2;
    let vis = if xact_snapshot { mvcc(snapshot) } else { None };
    let mut row = tid_to_row(tid).unwrap_or(u64::MAX);
    // The caller is at the newest version already (it retries where an
    // earlier lock sent it): no re-check of in-place changes.
    let at_newest = super::tid_is_newest(tid);
    let mut tuple_lock = TupleLock::new(rel);
    let mut traversed = false;
    let mut newer_in_place = false;
    if flags == 0 {
        // INSERT ... ON CONFLICT DO UPDATE (or a BEFORE ROW trigger under
        // REPEATABLE READ) locks the row it is about to update.
        *(&raw mut LAST_PLAIN_LOCK) = Some((table.key, row, cid));
    }
    loop {
        let h = header_of(table, row, "lock");
        match obstacle(&h, cid, mode, pg_sys::XLTW_Oper::XLTW_Lock, vis.as_ref(), false) {
            Obstacle::Invisible => {
                // ON CONFLICT DO UPDATE turns this into "cannot affect row a
                // second time" when the row is ours: it reads xmin from the slot.
                let any = &raw mut pg_sys::SnapshotAnyData;
                super::scan::fetch_into(rel, table, row, &Visibility::new(any), slot);
                return TM_Invisible;
            }
            Obstacle::SelfModified(x, c) => {
                fill_failure(tmfd, row, &h, Some((x, c)));
                (*tmfd).traversed = traversed;
                return TM_SelfModified;
            }
            Obstacle::Running(xids, oper) => {
                match wait_policy {
                    pg_sys::LockWaitPolicy::LockWaitSkip => {
                        fill_failure(tmfd, row, &h, None);
                        return TM_WouldBlock;
                    }
                    pg_sys::LockWaitPolicy::LockWaitError => lock_not_available(rel),
                    _ => {
                        // (not when upgrading a lock we hold: heap's skip_tuple_lock,
                // else we could deadlock with a waiter queued on it)
                if !locked_by_us(&h) {
                    tuple_lock.acquire(row, mode);
                }
                        wait_for(&xids, rel, row, oper)
                    }
                }
                continue;
            }
            Obstacle::Repair(xid) => {
                undo_logged(rel, table, row, xid);
                continue;
            }
            Obstacle::Committed { deleted } => {
                if follow && h.flags & flag::MOVED != 0 {
                    moved_away();
                }
                if follow && !deleted && h.next < table.nrows() {
                    row = h.next;
                    traversed = true;
                    continue;
                }
                fill_failure(tmfd, row, &h, None);
                (*tmfd).traversed = traversed;
                return if deleted { TM_Deleted } else { TM_Updated };
            }
            Obstacle::None => {}
        }
        // READ COMMITTED meets a version newer than the statement: lock it,
        // and tell the executor to re-check it (EvalPlanQual).
        // (KEY SHARE is compatible with in-place updates, which keep keys:
        // heap locks the version it saw without a re-check.)
        if follow && h.chain != 0 && mode != LockTupleKeyShare && !at_newest {
            if let Some(v) = mvcc(snapshot) {
                if !v.live_visible(&h, &mut 0) {
                    traversed = true;
                    newer_in_place = true;
                }
            }
        }
        if !lock_row(rel, table, row, &h, mode) {
            continue;
        }
        break;
    }
    if mode == LockTupleKeyShare {
        if let Err(r) = lock_successors(rel, table, row, cid, wait_policy, follow, tmfd) {
            (*tmfd).traversed = traversed;
            return r;
        }
    }
    // Like heap, report the version we locked through `tid` and
    // `tmfd.ctid`: the executor retries its UPDATE or DELETE there (MERGE
    // reads `tmfd.ctid`).
    let mut locked = pg_sys::ItemPointerData::default();
    if newer_in_place || at_newest {
        super::row_to_newest_tid(row, &mut locked);
    } else {
        row_to_tid(row, &mut locked);
    }
    if traversed {
        *tid = locked;
    }
    (*tmfd).ctid = locked;
    // Hand back the locked (newest) row, whatever the snapshot says.
    let mut newest = Visibility::new(&raw mut pg_sys::SnapshotAnyData);
    newest.any_newest = true;
    if !super::scan::fetch_into(rel, table, row, &newest, slot) {
        // An empty slot would read as "no longer matches" to EvalPlanQual,
        // and the UPDATE would skip a row it holds locked.
        ereport!(ERROR, PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("anker: could not read row {row} just locked"));
    }
    (*tmfd).traversed = traversed;
    TM_Ok
}
