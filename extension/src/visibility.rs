//! Row visibility against PostgreSQL snapshots.
//!
//! anker rows carry PostgreSQL transaction ids and command ids, so
//! visibility follows the rules of `heapam_visibility.c`, applied to our row
//! header instead of a heap tuple header (we never call
//! `HeapTupleSatisfies*`, which needs heap buffers). Every snapshot type a
//! table can meet is handled: MVCC, SELF, ANY, DIRTY and NON_VACUUMABLE.
//! TOAST and HISTORIC_MVCC (logical decoding of catalogs) do not apply to
//! user tables and raise an error.
//!
//! Hint bits (`XMIN_COMMITTED`, ...) cache clog lookups in the row, as heap
//! does. anker data is not WAL-logged yet, so there is no "hint bit may not
//! be set before the commit record is flushed" rule to honour.

use anker_engine::table::{flag, RowHeader, Table};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

pub const INVALID_XID: u32 = 0;
pub const FROZEN_XID: u32 = 2;
pub const FIRST_NORMAL_XID: u32 = 3;

#[inline]
fn is_current(xid: u32) -> bool {
    // SAFETY: plain lookup in this backend's transaction state.
    unsafe { crate::pg_leaf::TransactionIdIsCurrentTransactionId(xid.into()) }
}
#[inline]
fn in_progress(xid: u32) -> bool {
    // SAFETY: plain lookup in the proc array.
    unsafe { pg_sys::TransactionIdIsInProgress(xid.into()) }
}
#[inline]
fn did_commit(xid: u32) -> bool {
    // SAFETY: plain clog lookup for a normal xid.
    unsafe { pg_sys::TransactionIdDidCommit(xid.into()) }
}

/// Outcome of looking at one transaction id, caching hint bits.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum XidState {
    /// This backend's transaction (or one of its live subtransactions).
    Current,
    InProgress,
    Committed,
    Aborted,
}

/// Status of `xid` for a row, given its hint bits (`committed_hint`,
/// `aborted_hint`); newly learnt final states are added to `hints`.
#[inline]
pub fn xid_state(xid: u32, flags: u32, committed_hint: u32, aborted_hint: u32, hints: &mut u32) -> XidState {
    if xid < FIRST_NORMAL_XID || flags & committed_hint != 0 {
        return XidState::Committed;
    }
    if flags & aborted_hint != 0 {
        return XidState::Aborted;
    }
    if is_current(xid) {
        return XidState::Current;
    }
    if in_progress(xid) {
        return XidState::InProgress;
    }
    if did_commit(xid) {
        *hints |= committed_hint;
        XidState::Committed
    } else {
        *hints |= aborted_hint;
        XidState::Aborted
    }
}

/// `a` precedes `b` in PostgreSQL's circular xid order (normal xids).
#[inline(always)]
fn precedes(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// A snapshot, unpacked once per scan.
pub struct Visibility {
    snap: pg_sys::Snapshot,
    kind: pg_sys::SnapshotType::Type,
    curcid: u32,
    /// MVCC: the snapshot's xmin and xmax, and the last xid looked up in it.
    xmin: u32,
    xmax: u32,
    last_xid: std::cell::Cell<u32>,
    last_in_snapshot: std::cell::Cell<bool>,
    /// A SERIALIZABLE transaction's MVCC snapshot: reads report conflicts.
    /// For SnapshotAny: the TID named the newest version
    /// ([`crate::tam::row_to_newest_tid`]), not the one a scan saw.
    pub any_newest: bool,
    pub serializable: bool,
}

impl Visibility {
    pub fn new(snap: pg_sys::Snapshot) -> Visibility {
        // SAFETY: callers pass a valid snapshot.
        let (kind, curcid) = unsafe { ((*snap).snapshot_type, (*snap).curcid) };
        if kind == pg_sys::SnapshotType::SNAPSHOT_TOAST || kind == pg_sys::SnapshotType::SNAPSHOT_HISTORIC_MVCC {
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                "anker tables cannot be read with a TOAST or historic (logical decoding) snapshot"
            );
        }
        if kind == pg_sys::SnapshotType::SNAPSHOT_DIRTY {
            // SAFETY: as above; DIRTY snapshots report what they saw here.
            unsafe {
                (*snap).xmin = INVALID_XID.into();
                (*snap).xmax = INVALID_XID.into();
                (*snap).speculativeToken = 0;
            }
        }
        // SAFETY: as above.
        let (xmin, xmax) = unsafe { ((*snap).xmin.into(), (*snap).xmax.into()) };
        Visibility {
            snap,
            kind,
            curcid,
            xmin,
            xmax,
            last_xid: std::cell::Cell::new(INVALID_XID),
            last_in_snapshot: std::cell::Cell::new(false),
            serializable: kind == pg_sys::SnapshotType::SNAPSHOT_MVCC && crate::tam::modify::serializable(),
            any_newest: false,
        }
    }

    pub fn snapshot(&self) -> pg_sys::Snapshot {
        self.snap
    }

    pub fn is_mvcc(&self) -> bool {
        self.kind == pg_sys::SnapshotType::SNAPSHOT_MVCC
    }

    /// MVCC: did `xid` (a committed creator) finish before the snapshot,
    /// so that the snapshot sees it without looking it up?
    pub fn committed_before_snapshot(&self, xid: u32) -> bool {
        xid < FIRST_NORMAL_XID || precedes(xid, self.xmin)
    }

    /// `XidInMVCCSnapshot`, answering the common cases without a call:
    /// xids before the snapshot's xmin are not in it, xids from its xmax on
    /// are, and consecutive rows usually share their xid.
    #[inline]
    fn in_snapshot(&self, xid: u32) -> bool {
        if precedes(xid, self.xmin) {
            return false;
        }
        if !precedes(xid, self.xmax) {
            return true;
        }
        if xid == self.last_xid.get() {
            return self.last_in_snapshot.get();
        }
        // SAFETY: MVCC snapshot, normal xid.
        let r = unsafe { pg_sys::XidInMVCCSnapshot(xid.into(), self.snap) };
        self.last_xid.set(xid);
        self.last_in_snapshot.set(r);
        r
    }

    /// Which version of the row with header `h` does the snapshot see?
    /// Hint bits learnt about the live version are added to `hints`.
    /// Older versions are found by walking the undo chain; the caller must
    /// be inside a reclamation epoch when `h.chain` is set.
    #[inline]
    pub fn version(&self, table: &Table, h: &RowHeader, hints: &mut u32) -> Seen {
        use pg_sys::SnapshotType::*;
        if self.kind == SNAPSHOT_ANY {
            return self.any_version(table, h, hints);
        }
        // The common case: committed creator, never deleted.
        if self.kind == SNAPSHOT_MVCC && h.flags & flag::XMIN_COMMITTED != 0 && h.xmax == INVALID_XID {
            if h.xmin < FIRST_NORMAL_XID || !self.in_snapshot(h.xmin) {
                return Seen::Live;
            }
        } else if self.creator_seen(h.xmin, h.cmin, h.flags, hints, Some(h)) {
            return if self.deleted(h, hints) { Seen::None } else { Seen::Live };
        }
        if h.chain == 0 {
            return Seen::None;
        }
        let arena = crate::shmem::arena();
        let mut cur = h.chain;
        let mut k = 1;
        while cur != 0 {
            // SAFETY: chain links are read inside a reclamation epoch.
            let rec = unsafe { table.undo_rec(arena, cur) };
            if self.creator_seen(rec.xmin, rec.cmin, rec.xmin_flags, &mut 0, None) {
                return Seen::Older(k);
            }
            k += 1;
            cur = rec.next.load(std::sync::atomic::Ordering::Acquire);
        }
        Seen::None
    }

    /// SnapshotAny stands for "the row the TID names". With in-place
    /// updates one TID names several versions; the one a caller can have
    /// seen is the newest made by a committed transaction or by ours (the
    /// executor builds an UPDATE's new row from it, and a concurrent,
    /// possibly aborting, in-place update must not leak into that) before
    /// the current command: heap's old TID keeps naming the old version
    /// after an update, and transition tables (OLD TABLE) and a second
    /// update of the same row in one command fetch it right after.
    fn any_version(&self, table: &Table, h: &RowHeader, hints: &mut u32) -> Seen {
        if h.chain == 0 {
            return Seen::Live;
        }
        // The version the statement's snapshot saw (a row EvalPlanQual
        // fetches for reference, or the row an UPDATE builds its new version
        // from), unless the TID names the newest version: after a lock
        // EvalPlanQual works on that one.
        // SAFETY: plain accessors of snapshot and lock state.
        unsafe {
            if !self.any_newest && crate::pg_leaf::ActiveSnapshotSet() {
                let active = crate::pg_leaf::GetActiveSnapshot();
                if (*active).snapshot_type == pg_sys::SnapshotType::SNAPSHOT_MVCC {
                    match Visibility::new(active).version(table, h, hints) {
                        Seen::None => {}
                        seen => return seen,
                    }
                }
            }
        }
        let command = crate::pg_leaf::current_command_id();
        let settled = |xid: u32, cid: u32, flags: u32, hints: &mut u32| {
            match xid_state(xid, flags, flag::XMIN_COMMITTED, flag::XMIN_ABORTED, hints) {
                XidState::Committed => true,
                XidState::Current => cid < command,
                _ => false,
            }
        };
        if settled(h.xmin, h.cmin, h.flags, hints) {
            return Seen::Live;
        }
        let arena = crate::shmem::arena();
        let mut cur = h.chain;
        let mut k = 1;
        while cur != 0 {
            // SAFETY: chain links are read inside a reclamation epoch.
            let rec = unsafe { table.undo_rec(arena, cur) };
            if settled(rec.xmin, rec.cmin, rec.xmin_flags, &mut 0) {
                return Seen::Older(k);
            }
            k += 1;
            cur = rec.next.load(std::sync::atomic::Ordering::Acquire);
        }
        Seen::Live
    }

    /// Does the snapshot see the live version's creation (deleted or not)?
    pub fn live_created_visible(&self, h: &RowHeader) -> bool {
        self.creator_seen(h.xmin, h.cmin, h.flags, &mut 0, Some(h))
    }

    /// Is the live version of the row visible (ignoring older versions)?
    pub fn live_visible(&self, h: &RowHeader, hints: &mut u32) -> bool {
        self.creator_seen(h.xmin, h.cmin, h.flags, hints, Some(h)) && !self.deleted(h, hints)
    }

    /// Does the snapshot see changes of creator `(xid, cid)` (commit hint in
    /// `flags`)? `live` is the row header when `xid` created the live
    /// version (DIRTY snapshots report it).
    fn creator_seen(&self, xid: u32, cid: u32, flags: u32, hints: &mut u32, live: Option<&RowHeader>) -> bool {
        use pg_sys::SnapshotType::*;
        if self.kind == SNAPSHOT_ANY {
            return true;
        }
        if self.kind == SNAPSHOT_MVCC {
            if xid < FIRST_NORMAL_XID {
                return true;
            }
            if flags & flag::XMIN_COMMITTED != 0 {
                return !self.in_snapshot(xid);
            }
            if flags & flag::XMIN_ABORTED != 0 {
                return false;
            }
            if is_current(xid) {
                return cid < self.curcid; // else made after this scan started
            }
            if self.in_snapshot(xid) {
                return false;
            }
            if did_commit(xid) {
                *hints |= flag::XMIN_COMMITTED;
                return true;
            }
            *hints |= flag::XMIN_ABORTED;
            return false;
        }
        match xid_state(xid, flags, flag::XMIN_COMMITTED, flag::XMIN_ABORTED, hints) {
            XidState::Aborted => false,
            XidState::Committed | XidState::Current => true,
            XidState::InProgress => match self.kind {
                SNAPSHOT_DIRTY => {
                    // SAFETY: DIRTY snapshots are plain structs owned by the caller.
                    unsafe {
                        if let Some(h) = live {
                            if h.flags & flag::SPECULATIVE != 0 {
                                (*self.snap).speculativeToken = h.locker;
                            }
                        }
                        (*self.snap).xmin = xid.into();
                    }
                    true
                }
                SNAPSHOT_NON_VACUUMABLE => true,
                _ => false,
            },
        }
    }

    /// Is the live version deleted (or moved away) for this snapshot?
    fn deleted(&self, h: &RowHeader, hints: &mut u32) -> bool {
        use pg_sys::SnapshotType::*;
        if h.xmax == INVALID_XID || h.flags & (flag::XMAX_ABORTED | flag::XMAX_LOCK_ONLY) != 0 {
            return false;
        }
        match self.kind {
            SNAPSHOT_ANY => false,
            SNAPSHOT_MVCC => {
                if h.flags & flag::XMAX_COMMITTED != 0 {
                    return !self.in_snapshot(h.xmax);
                }
                if is_current(h.xmax) {
                    return h.cmax < self.curcid; // else deleted after this scan started
                }
                if self.in_snapshot(h.xmax) {
                    return false;
                }
                if did_commit(h.xmax) {
                    *hints |= flag::XMAX_COMMITTED;
                    true
                } else {
                    *hints |= flag::XMAX_ABORTED;
                    false
                }
            }
            SNAPSHOT_NON_VACUUMABLE => match xid_state(h.xmax, h.flags, flag::XMAX_COMMITTED, flag::XMAX_ABORTED, hints) {
                // Dead only once no snapshot can need it (heap's
                // HeapTupleSatisfiesNonVacuumable).
                // SAFETY: NON_VACUUMABLE snapshots carry a vistest.
                XidState::Committed => unsafe { crate::pg_leaf::GlobalVisTestIsRemovableXid((*self.snap).vistest, h.xmax.into()) },
                _ => false,
            },
            _ => match xid_state(h.xmax, h.flags, flag::XMAX_COMMITTED, flag::XMAX_ABORTED, hints) {
                XidState::Aborted => false,
                XidState::Current | XidState::Committed => true,
                XidState::InProgress => {
                    if self.kind == SNAPSHOT_DIRTY {
                        // SAFETY: as above.
                        unsafe { (*self.snap).xmax = h.xmax.into() };
                    }
                    false
                }
            },
        }
    }
}

/// The version of a row a snapshot sees.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Seen {
    None,
    /// The live version.
    Live,
    /// Version `k` (k >= 1): the live one with the before-images of the
    /// first `k` undo records applied.
    Older(usize),
}

impl Seen {
    pub fn any(self) -> bool {
        self != Seen::None
    }
}

/// Can no snapshot, running or future, see any version of the row (heap's
/// `HeapTupleIsSurelyDead`)? True for a delete (or a move to a new row id)
/// that committed before every running snapshot, and for an aborted insert
/// with no older versions behind it. Index scans then mark the entry dead,
/// so later scans skip it without asking us.
///
/// # Safety
/// `vistest` comes from `GlobalVisTestFor` for the row's relation.
pub unsafe fn surely_dead(h: &RowHeader, vistest: *mut pg_sys::GlobalVisState) -> bool {
    let mut hints = 0;
    match xid_state(h.xmin, h.flags, flag::XMIN_COMMITTED, flag::XMIN_ABORTED, &mut hints) {
        // An aborted in-place update leaves the version before it visible.
        XidState::Aborted => return h.chain == 0,
        XidState::Current | XidState::InProgress => return false,
        XidState::Committed => {}
    }
    if h.xmax == INVALID_XID || h.flags & flag::XMAX_LOCK_ONLY != 0 {
        return false;
    }
    xid_state(h.xmax, h.flags, flag::XMAX_COMMITTED, flag::XMAX_ABORTED, &mut hints) == XidState::Committed
        && crate::pg_leaf::GlobalVisTestIsRemovableXid(vistest, h.xmax.into())
}
