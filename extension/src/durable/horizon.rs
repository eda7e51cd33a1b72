//! Recovery conflicts on a hot standby (`docs/durability.md`, "Hot
//! standby, backups, PITR").
//!
//! The primary removes what none of *its* snapshots can see any more:
//! VACUUM vacates dead rows and freezes old creators, and an image leaves
//! out the versions pruning retired. A hot standby's queries are not among
//! those snapshots (unless `hot_standby_feedback` is on), and redo would
//! take such rows from under them: a REPEATABLE READ transaction on the
//! standby would see rows vanish. Heap's PRUNE and FREEZE records, and
//! btree's REUSE_PAGE, carry the newest xid whose outcome made something
//! removable, and redo resolves the conflict before it changes anything;
//! ours do the same in a HORIZON record written just before the change.
//! Redo calls `ResolveRecoveryConflictWithSnapshot`: a query whose snapshot
//! may still see that xid as running holds replay back for up to
//! `max_standby_streaming_delay`, and is then cancelled, as for heap. The
//! record touches no page and no table.

use super::RMGR_ID;
use crate::visibility::FIRST_NORMAL_XID;
use pgrx::pg_sys;

/// Record kind (`xl_info`) of a conflict horizon.
pub const XLOG_ANKER_HORIZON: u8 = 0x50;

/// Main data of a HORIZON record.
#[repr(C)]
#[derive(Clone, Copy)]
struct Horizon {
    rnode: pg_sys::RelFileNode,
    xid: pg_sys::TransactionId,
}

/// Before a change to `rel` that removes what a snapshot seeing `xid` as
/// running may still read: a hot standby waits for such queries, or
/// cancels them, before it replays the change. Nothing is written for a
/// table without WAL, below `wal_level = replica` (no standby), or for a
/// special xid (0: nothing removed).
pub fn log(rel: pg_sys::Relation, xid: u32) {
    // SAFETY: rel is open; an ordinary WAL insertion outside recovery.
    unsafe {
        if xid < FIRST_NORMAL_XID
            || (*(*rel).rd_rel).relpersistence != pg_sys::RELPERSISTENCE_PERMANENT as std::ffi::c_char
            || pg_sys::wal_level < pg_sys::WalLevel::WAL_LEVEL_REPLICA as i32
        {
            return;
        }
        let rec = Horizon { rnode: (*rel).rd_node, xid: xid.into() };
        pg_sys::XLogBeginInsert();
        pg_sys::XLogRegisterData(&rec as *const Horizon as *mut std::ffi::c_char, std::mem::size_of::<Horizon>() as i32);
        pg_sys::XLogInsert(RMGR_ID, XLOG_ANKER_HORIZON);
    }
}

/// The xid before `xid`, skipping the special ones (`TransactionIdRetreat`):
/// the horizon of freezing creators older than `xid`.
pub fn before(xid: u32) -> u32 {
    let mut x = xid.wrapping_sub(1);
    while x < FIRST_NORMAL_XID {
        x = x.wrapping_sub(1);
    }
    x
}

unsafe fn read(record: *mut pg_sys::XLogReaderState) -> Option<Horizon> {
    let d = (*record).record;
    ((*d).main_data_len as usize >= std::mem::size_of::<Horizon>()).then(|| ((*d).main_data as *const Horizon).read_unaligned())
}

/// Redo: on a hot standby, the conflict (crash recovery has no queries).
///
/// # Safety
/// A decoded HORIZON record, in the startup process.
pub unsafe fn redo(record: *mut pg_sys::XLogReaderState) {
    // InHotStandby
    if pg_sys::standbyState < pg_sys::HotStandbyState::STANDBY_SNAPSHOT_PENDING {
        return;
    }
    if let Some(h) = read(record) {
        pg_sys::ResolveRecoveryConflictWithSnapshot(h.xid, h.rnode);
    }
}

/// `rm_desc`'s text.
///
/// # Safety
/// A decoded HORIZON record.
pub unsafe fn describe(record: *mut pg_sys::XLogReaderState) -> String {
    match read(record) {
        Some(h) => format!(
            "rel {}/{}/{}: conflicts with snapshots that may see xid {} as running",
            h.rnode.spcNode,
            h.rnode.dbNode,
            h.rnode.relNode,
            h.xid.into_inner()
        ),
        None => "truncated horizon".into(),
    }
}
