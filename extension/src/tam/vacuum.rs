//! VACUUM, VACUUM FULL / CLUSTER and ALTER TABLE ... SET TABLESPACE.
//!
//! VACUUM makes one pass over the rows: rows whose insert aborted, and rows
//! deleted (or moved to a new row id by an UPDATE) by a transaction that
//! committed before every running snapshot, are dead. Their index entries
//! are removed first (`index_bulk_delete`), then their memory: blobs are
//! freed, the rows become vacant and reusable, and pages holding only vacant
//! rows go back to the arena. Live rows get their creator frozen once it is
//! older than the freeze limit, and finished row lockers are cleared, so
//! `relfrozenxid` and `relminmxid` can advance.
//!
//! VACUUM FULL and CLUSTER copy every row some snapshot may still see into
//! the new storage, in index order for CLUSTER, keeping creator and deleter
//! stamps and remapping successor links.

use super::{blocks_for_rows, tid_to_row, ROWS_PER_BLOCK};
use crate::error::OrRaise;
use crate::shmem;
use crate::storage::{self, table_of};
use crate::visibility::{xid_state, XidState, FROZEN_XID, FIRST_NORMAL_XID};
use anker_engine::change::{Change, Val};
use anker_engine::table::{flag, RowChange, RowHeader, Table, Value};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::collections::HashMap;

/// What VACUUM may do with a row.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Fate {
    /// No snapshot can see it: reclaim.
    Dead,
    /// Deleted, but some snapshot may still see it.
    RecentlyDead,
    Live,
    /// Being inserted or deleted by a running transaction.
    InProgress,
}

/// Classify a row against `oldest_xmin` (as heap's `HeapTupleSatisfiesVacuum`).
/// Hint bits learnt on the way are added to `hints`.
///
/// A row whose newest version an aborted transaction updated in place is
/// not dead: its older versions, in the chain, are the row. Callers put
/// such updates back first, but the updater may abort between that and
/// this (until 2026-11-29 VACUUM then vacated the row, losing its
/// committed version); the next VACUUM or writer puts it back.
pub fn fate(h: &RowHeader, oldest_xmin: u32, hints: &mut u32) -> Fate {
    match xid_state(h.xmin, h.flags, flag::XMIN_COMMITTED, flag::XMIN_ABORTED, hints) {
        XidState::Aborted if h.chain != 0 => return Fate::InProgress,
        XidState::Aborted => return Fate::Dead,
        XidState::InProgress | XidState::Current => return Fate::InProgress,
        XidState::Committed => {}
    }
    if h.xmax == 0 {
        return Fate::Live;
    }
    match xid_state(h.xmax, h.flags, flag::XMAX_COMMITTED, flag::XMAX_ABORTED, hints) {
        XidState::Aborted => Fate::Live,
        XidState::InProgress | XidState::Current => Fate::InProgress,
        XidState::Committed => {
            // SAFETY: plain xid comparison.
            if unsafe { pg_sys::TransactionIdPrecedes(h.xmax.into(), oldest_xmin.into()) } {
                Fate::Dead
            } else {
                Fate::RecentlyDead
            }
        }
    }
}

/// Charge VACUUM's cost accounting (when active: autovacuum, or
/// `vacuum_cost_delay` set) for reading `bytes` of a table: a page hit
/// (`vacuum_cost_page_hit`) for each `BLCKSZ`, as heap's VACUUM and ANALYZE
/// are charged for each page they read from shared buffers. Without it,
/// `autovacuum_vacuum_cost_limit` could not hold back their work on anker
/// tables, only the log pages they write.
pub(super) fn charge_read(bytes: usize) {
    // SAFETY: backend-local globals of vacuum's cost accounting.
    unsafe {
        if pg_sys::VacuumCostActive {
            let pages = bytes.div_ceil(pg_sys::BLCKSZ as usize) as i64;
            let balance = pg_sys::VacuumCostBalance as i64 + pages * pg_sys::VacuumCostPageHit as i64;
            pg_sys::VacuumCostBalance = balance.min(i32::MAX as i64) as i32;
        }
    }
}

/// Set `pg_stat_progress_vacuum`'s fields (PostgreSQL's `PROGRESS_VACUUM_*`
/// numbers) as heap's VACUUM does; its blocks are anker's TID blocks of 256
/// row ids, and its dead tuples the rows found dead.
unsafe fn progress(fields: &[(u32, i64)]) {
    for &(field, value) in fields {
        pg_sys::pgstat_progress_update_param(field as i32, value);
    }
}

fn precedes(a: u32, b: u32) -> bool {
    // SAFETY: plain xid comparison.
    unsafe { pg_sys::TransactionIdPrecedes(a.into(), b.into()) }
}

/// Is the row's locker (an xid or a multixact) finished?
unsafe fn locker_finished(h: &RowHeader) -> bool {
    if h.locker == 0 || h.flags & flag::SPECULATIVE != 0 {
        return false;
    }
    if h.flags & flag::LOCKER_MULTI != 0 {
        !pg_sys::MultiXactIdIsRunning(h.locker.into(), true)
    } else {
        !pg_sys::TransactionIdIsInProgress(h.locker.into()) && !pg_sys::TransactionIdIsCurrentTransactionId(h.locker.into())
    }
}

/// `IndexBulkDeleteCallback`: is this TID among the dead rows (sorted)?
#[pg_guard]
unsafe extern "C-unwind" fn tid_is_dead(tid: pg_sys::ItemPointer, state: *mut std::ffi::c_void) -> bool {
    let dead = &*(state as *const Vec<u64>);
    matches!(tid_to_row(tid), Some(r) if dead.binary_search(&r).is_ok())
}

#[pg_guard]
pub unsafe extern "C-unwind" fn relation_vacuum(
    rel: pg_sys::Relation,
    params: *mut pg_sys::VacuumParams,
    bstrategy: pg_sys::BufferAccessStrategy,
) {
    let arena = shmem::arena();
    let table = table_of(rel);
    let p = &*params;
    let report = Report::begin(rel, p);
    let (mut oldest_xmin, mut oldest_mxact, mut freeze_limit, mut multi_cutoff) =
        (pg_sys::TransactionId::from(0), pg_sys::MultiXactId::from(0), pg_sys::TransactionId::from(0), pg_sys::MultiXactId::from(0));
    pg_sys::vacuum_set_xid_limits(
        rel,
        p.freeze_min_age,
        p.freeze_table_age,
        p.multixact_freeze_min_age,
        p.multixact_freeze_table_age,
        &mut oldest_xmin,
        &mut oldest_mxact,
        &mut freeze_limit,
        &mut multi_cutoff,
    );
    let (oldest_xmin, freeze_limit): (u32, u32) = (oldest_xmin.into(), freeze_limit.into());

    // Pass 1: classify rows, freeze old creators, clear finished lockers.
    let nrows = table.nrows();
    let total_blocks = blocks_for_rows(nrows) as i64;
    pg_sys::pgstat_progress_start_command(pg_sys::ProgressCommandType::PROGRESS_COMMAND_VACUUM, (*rel).rd_id);
    progress(&[
        (pg_sys::PROGRESS_VACUUM_PHASE, pg_sys::PROGRESS_VACUUM_PHASE_SCAN_HEAP as i64),
        (pg_sys::PROGRESS_VACUUM_TOTAL_HEAP_BLKS, total_blocks),
        (pg_sys::PROGRESS_VACUUM_MAX_DEAD_TUPLES, nrows as i64),
    ]);
    let mut dead: Vec<u64> = vec![];
    let (mut live, mut recently_dead) = (0f64, 0f64);
    // The oldest xid left in the table bounds relfrozenxid.
    let mut oldest_left = oldest_xmin;
    let mut chains_pruned = 0usize;
    // Versions some snapshot still needs: dead tuples for the statistics
    // (as heap's recently dead HOT tuples), so autovacuum comes back for them.
    let mut records_kept = 0f64;
    // What a hot standby's snapshots must have finished with before redo
    // goes on (durable::horizon): the newest deleter of a row vacated; a
    // creator frozen.
    let mut vacate_horizon = 0u32;
    let mut freeze_horizon_logged = false;
    for row in 0..nrows {
        if row % 4096 == 0 {
            progress(&[
                (pg_sys::PROGRESS_VACUUM_HEAP_BLKS_SCANNED, (row / ROWS_PER_BLOCK) as i64),
                (pg_sys::PROGRESS_VACUUM_NUM_DEAD_TUPLES, dead.len() as i64),
            ]);
            charge_read(4096 * std::mem::size_of::<anker_engine::table::Stamp>());
            pg_sys::vacuum_delay_point();
        }
        // (a live row that looked dead would be vacated)
        let Some(mut h) = super::header_now(table, row).and_then(|h| super::modify::put_back_aborted(rel, table, row, h)) else { continue };
        if h.chain != 0 {
            // Drop the versions no snapshot can need any more.
            let _epoch = shmem::enter_epoch();
            let removable = |x: u32| precedes(x, oldest_xmin) && crate::undo::updater_committed(x);
            chains_pruned += table.prune_chain(arena, row, &removable);
            if let Some(again) = table.header(arena, row) {
                h = again;
            }
            // Creators of the versions kept still need their clog entries.
            let mut cur = h.chain;
            while cur != 0 {
                let rec = table.undo_rec(arena, cur);
                records_kept += 1.0;
                for x in [rec.xmin, rec.superseded_by] {
                    if x >= FIRST_NORMAL_XID && precedes(x, oldest_left) {
                        oldest_left = x;
                    }
                }
                cur = rec.next.load(std::sync::atomic::Ordering::Acquire);
            }
        }
        let mut hints = 0;
        let f = fate(&h, oldest_xmin, &mut hints);
        if hints != 0 {
            // As heap's VACUUM: after a bulk load, this spares the first
            // reader of every row its clog lookups.
            let _epoch = shmem::enter_epoch();
            table.set_hint(arena, row, &h, hints);
            h.flags |= hints;
        }
        match f {
            Fate::Dead => {
                if h.xmax >= FIRST_NORMAL_XID
                    && h.flags & flag::XMAX_LOCK_ONLY == 0
                    && (vacate_horizon == 0 || precedes(vacate_horizon, h.xmax))
                {
                    vacate_horizon = h.xmax;
                }
                dead.push(row);
                continue;
            }
            Fate::RecentlyDead => recently_dead += 1.0,
            Fate::Live | Fate::InProgress => live += 1.0,
        }
        let mut change = RowChange::default();
        let mut changed = false;
        if f == Fate::Live && h.xmin >= FIRST_NORMAL_XID && precedes(h.xmin, freeze_limit) {
            if !freeze_horizon_logged {
                crate::durable::horizon::log(rel, crate::durable::horizon::before(freeze_limit));
                freeze_horizon_logged = true;
            }
            change.xmin = Some(FROZEN_XID);
            change.set_flags |= flag::XMIN_COMMITTED;
            changed = true;
        }
        if locker_finished(&h) {
            change.locker = Some(0);
            change.clear_flags |= flag::LOCKER_MULTI | flag::LOCK_MODE_MASK;
            changed = true;
        }
        if changed {
            // A concurrent writer may win; the row is then simply left as is.
            let _ = super::modify::modify_logged(rel, table, row, &h, &change);
        }
        for xid in [if change.xmin.is_some() { 0 } else { h.xmin }, h.xmax] {
            if xid >= FIRST_NORMAL_XID && precedes(xid, oldest_left) {
                oldest_left = xid;
            }
        }
        if h.locker >= FIRST_NORMAL_XID
            && h.flags & (flag::LOCKER_MULTI | flag::SPECULATIVE) == 0
            && change.locker.is_none()
            && precedes(h.locker, oldest_left)
        {
            oldest_left = h.locker;
        }
    }

    progress(&[
        (pg_sys::PROGRESS_VACUUM_HEAP_BLKS_SCANNED, total_blocks),
        (pg_sys::PROGRESS_VACUUM_NUM_DEAD_TUPLES, dead.len() as i64),
    ]);

    // Pass 2: index entries of dead rows, then the rows themselves.
    let mut nindexes: std::ffi::c_int = 0;
    let mut irels: *mut pg_sys::Relation = std::ptr::null_mut();
    pg_sys::vac_open_indexes(rel, pg_sys::RowExclusiveLock as i32, &mut nindexes, &mut irels);
    // anker's VACUUM is never parallel; say so where heap's would have been
    // and cannot (heap's dead_items_alloc), with heap's words.
    if p.nworkers > 0
        && nindexes > 1
        && p.index_cleanup != pg_sys::VacOptValue::VACOPTVALUE_DISABLED
        && (*(*rel).rd_rel).relpersistence == pg_sys::RELPERSISTENCE_TEMP as std::ffi::c_char
    {
        let name = std::ffi::CStr::from_ptr((*(*rel).rd_rel).relname.data.as_ptr()).to_string_lossy();
        pgrx::warning!("disabling parallel option of vacuum on \"{name}\" --- cannot vacuum temporary tables in parallel");
    }
    let indexes: &[pg_sys::Relation] = if nindexes > 0 { std::slice::from_raw_parts(irels, nindexes as usize) } else { &[] };
    let mut stats: Vec<*mut pg_sys::IndexBulkDeleteResult> = vec![std::ptr::null_mut(); indexes.len()];
    let info = |index: pg_sys::Relation| pg_sys::IndexVacuumInfo {
        index,
        analyze_only: false,
        report_progress: false,
        estimated_count: false,
        message_level: pg_sys::DEBUG2 as i32,
        num_heap_tuples: live + recently_dead,
        strategy: bstrategy,
    };
    if !dead.is_empty() {
        // before the index entries go: a standby's index scans lose them too
        crate::durable::horizon::log(rel, vacate_horizon);
        if !indexes.is_empty() {
            progress(&[(pg_sys::PROGRESS_VACUUM_PHASE, pg_sys::PROGRESS_VACUUM_PHASE_VACUUM_INDEX as i64)]);
        }
        for (i, &ind) in indexes.iter().enumerate() {
            let mut ivinfo = info(ind);
            stats[i] = pg_sys::index_bulk_delete(&mut ivinfo, stats[i], Some(tid_is_dead), &dead as *const Vec<u64> as *mut _);
        }
        progress(&[
            (pg_sys::PROGRESS_VACUUM_NUM_INDEX_VACUUMS, i64::from(!indexes.is_empty())),
            (pg_sys::PROGRESS_VACUUM_PHASE, pg_sys::PROGRESS_VACUUM_PHASE_VACUUM_HEAP as i64),
        ]);
        crate::durable::write(rel, table, |log| {
            table.vacate_rows(arena, &dead);
            log.push(&anker_engine::change::Change::Vacate { rows: dead.clone() });
        });
        progress(&[(pg_sys::PROGRESS_VACUUM_HEAP_BLKS_VACUUMED, total_blocks)]);
    }
    table.release_vacant_pages(arena);
    table.reclaim(arena);
    if !indexes.is_empty() {
        progress(&[(pg_sys::PROGRESS_VACUUM_PHASE, pg_sys::PROGRESS_VACUUM_PHASE_INDEX_CLEANUP as i64)]);
    }
    for (i, &ind) in indexes.iter().enumerate() {
        let mut ivinfo = info(ind);
        stats[i] = pg_sys::index_vacuum_cleanup(&mut ivinfo, stats[i]);
        if !stats[i].is_null() && !(*stats[i]).estimated_count {
            pg_sys::vac_update_relstats(
                ind,
                (*stats[i]).num_pages,
                (*stats[i]).num_index_tuples,
                0,
                false,
                pg_sys::InvalidTransactionId,
                pg_sys::MultiXactId::from(0),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                false,
            );
        }
    }
    pg_sys::vac_close_indexes(nindexes, irels, pg_sys::NoLock as i32);

    // Statistics and xid horizons in pg_class; an image if one is due.
    progress(&[(pg_sys::PROGRESS_VACUUM_PHASE, pg_sys::PROGRESS_VACUUM_PHASE_FINAL_CLEANUP as i64)]);
    let blocks = blocks_for_rows(table.nrows()) as pg_sys::BlockNumber;
    pg_sys::vac_update_relstats(
        rel,
        blocks,
        live,
        0,
        nindexes > 0,
        oldest_left.into(),
        oldest_mxact,
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        false,
    );
    pg_sys::pgstat_report_vacuum((*rel).rd_id, (*(*rel).rd_rel).relisshared, live as i64, (recently_dead + records_kept) as i64);
    crate::durable::compact::maybe_compact(rel, table);
    pg_sys::pgstat_progress_end_command();
    report.end(u32::from(!dead.is_empty() && nindexes > 0), dead.len(), live, recently_dead, chains_pruned, records_kept);
}

/// What `VACUUM (VERBOSE)` and `log_autovacuum_min_duration` report of
/// anker's VACUUM, in heap's words where they apply (PostgreSQL's
/// `heap_vacuum_rel`): INFO at the start and end of a verbose VACUUM; one
/// LOG line for an autovacuum that took at least the threshold. The CPU
/// time includes an image written on the way (`maybe_compact`).
struct Report {
    name: Option<String>,
    verbose: bool,
    /// autovacuum's `log_min_duration` (ms), when this is autovacuum and it logs
    log_after_ms: Option<u64>,
    started: std::time::Instant,
    cpu: (f64, f64),
}

impl Report {
    unsafe fn begin(rel: pg_sys::Relation, p: &pg_sys::VacuumParams) -> Report {
        let verbose = p.options & pg_sys::VACOPT_VERBOSE != 0;
        let log_after_ms = (pg_sys::MyBackendType == pg_sys::BackendType::B_AUTOVAC_WORKER && p.log_min_duration >= 0)
            .then_some(p.log_min_duration as u64);
        let name = (verbose || log_after_ms.is_some()).then(|| qualified_name(rel));
        if let (true, Some(n)) = (verbose, &name) {
            pgrx::info!("vacuuming \"{n}\"");
        }
        Report { name, verbose, log_after_ms, started: std::time::Instant::now(), cpu: cpu_seconds() }
    }

    fn end(self, index_scans: u32, removed: usize, live: f64, recently_dead: f64, pruned: usize, kept: f64) {
        let Some(name) = self.name else { return };
        let elapsed = self.started.elapsed();
        let logged = self.log_after_ms.is_some_and(|ms| elapsed.as_millis() >= ms as u128);
        if !self.verbose && !logged {
            return;
        }
        let cpu = cpu_seconds();
        let what = if self.verbose { "finished vacuuming" } else { "automatic vacuum of table" };
        let text = format!(
            "{what} \"{name}\": index scans: {index_scans}\n\
             rows: {removed} removed, {live} remain, {recently_dead} are dead but not yet removable\n\
             version records: {pruned} pruned, {kept} kept\n\
             system usage: CPU: user: {:.2} s, system: {:.2} s, elapsed: {:.2} s",
            cpu.0 - self.cpu.0,
            cpu.1 - self.cpu.1,
            elapsed.as_secs_f64()
        );
        if self.verbose {
            pgrx::info!("{text}");
        } else {
            pgrx::log!("{text}");
        }
    }
}

/// This process's user and system CPU seconds so far.
fn cpu_seconds() -> (f64, f64) {
    // SAFETY: getrusage fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(u.ru_utime), secs(u.ru_stime))
}

/// "database.schema.table", as heap's VACUUM names a table.
unsafe fn qualified_name(rel: pg_sys::Relation) -> String {
    let text = |p: *const std::ffi::c_char| if p.is_null() { "?".into() } else { std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned() };
    format!(
        "{}.{}.{}",
        text(pg_sys::get_database_name(pg_sys::MyDatabaseId)),
        text(pg_sys::get_namespace_name((*(*rel).rd_rel).relnamespace)),
        text((*(*rel).rd_rel).relname.data.as_ptr())
    )
}

/// Copy rows (`rows`, in order) of `src` (the storage of `src_rel`) into
/// `dst` (the storage of `dst_rel`), keeping stamps and remapping successor
/// links. Returns (live, recently dead, removed).
pub unsafe fn copy_rows(
    src_rel: pg_sys::Relation,
    src: &Table,
    dst_rel: pg_sys::Relation,
    dst: &Table,
    rows: impl Iterator<Item = u64>,
    oldest_xmin: Option<u32>,
) -> (f64, f64, f64) {
    let arena = shmem::arena();
    let mut map: HashMap<u64, u64> = HashMap::new();
    let mut successors: Vec<(u64, u64)> = vec![];
    let (mut live, mut recent, mut removed) = (0f64, 0f64, 0f64);
    for (n, row) in rows.enumerate() {
        if n % 4096 == 0 {
            pg_sys::check_for_interrupts!();
        }
        let Some(h) = src.header(arena, row).and_then(|h| super::modify::put_back_aborted(src_rel, src, row, h)) else { continue };
        if let Some(ox) = oldest_xmin {
            match fate(&h, ox, &mut 0) {
                Fate::Dead => {
                    removed += 1.0;
                    continue;
                }
                Fate::RecentlyDead => recent += 1.0,
                _ => live += 1.0,
            }
        } else {
            live += 1.0;
        }
        let new = crate::durable::write(dst_rel, dst, |log| {
            let new = src.copy_row_to(arena, row, &h, dst).or_raise();
            if log.is_enabled() {
                // SAFETY (for the values read): the new table is ours alone
                // until the rewrite commits.
                dst.describe_row(arena, new, |change| log.push(change));
            }
            new
        });
        map.insert(row, new);
        if h.flags & flag::UPDATED != 0 && h.next != u64::MAX {
            successors.push((new, h.next));
        }
    }
    for (new, old_next) in successors {
        let h = dst.header(arena, new).expect("copied row");
        let change = match map.get(&old_next) {
            Some(&n) => RowChange { next: Some(n), ..Default::default() },
            // The successor is gone, so nobody can follow the link.
            None => RowChange { clear_flags: flag::UPDATED, ..Default::default() },
        };
        super::modify::modify_logged(dst_rel, dst, new, &h, &change);
    }
    (live, recent, removed)
}

#[pg_guard]
pub unsafe extern "C-unwind" fn relation_copy_for_cluster(
    old_table: pg_sys::Relation,
    new_table: pg_sys::Relation,
    old_index: pg_sys::Relation,
    _use_sort: bool,
    oldest_xmin: pg_sys::TransactionId,
    _xid_cutoff: *mut pg_sys::TransactionId,
    _multi_cutoff: *mut pg_sys::MultiXactId,
    num_tuples: *mut f64,
    tups_vacuumed: *mut f64,
    tups_recently_dead: *mut f64,
) {
    // The source's columns match its descriptor first: a column added
    // with a default and never written yet exists only as the catalog's
    // missing value, which the copy must carry (it was NULL after VACUUM
    // FULL).
    let src = crate::storage::table_for_write(old_table);
    let dst = table_of(new_table);
    let mut order: Vec<u64> = vec![];
    if !old_index.is_null() {
        // CLUSTER: the index's order (sorting would give the same).
        let scan = pg_sys::index_beginscan(old_table, old_index, &raw mut pg_sys::SnapshotAnyData, 0, 0);
        pg_sys::index_rescan(scan, std::ptr::null_mut(), 0, std::ptr::null_mut(), 0);
        loop {
            let tid = pg_sys::index_getnext_tid(scan, pg_sys::ScanDirection::ForwardScanDirection);
            if tid.is_null() {
                break;
            }
            if let Some(r) = tid_to_row(tid) {
                order.push(r);
            }
        }
        pg_sys::index_endscan(scan);
        // Rows the index does not cover (none for a non-partial index) follow.
        let mut seen = order.clone();
        seen.sort_unstable();
        seen.dedup();
        let rest: Vec<u64> = (0..src.nrows()).filter(|r| seen.binary_search(r).is_err()).collect();
        order.extend(rest);
    } else {
        order.extend(0..src.nrows());
    }
    adopt_layout(new_table, src, dst);
    let (live, recent, removed) = copy_rows(old_table, src, new_table, dst, order.into_iter(), Some(oldest_xmin.into()));
    *num_tuples = live + recent;
    *tups_vacuumed = removed;
    *tups_recently_dead = recent;
}

/// ALTER TABLE ... SET TABLESPACE: the storage key changes with the
/// relfilenode, so copy every row to storage under the new key.
#[pg_guard]
pub unsafe extern "C-unwind" fn relation_copy_data(rel: pg_sys::Relation, newrnode: *const pg_sys::RelFileNode) {
    let persistence = (*(*rel).rd_rel).relpersistence;
    if persistence == pg_sys::RELPERSISTENCE_TEMP as std::ffi::c_char {
        // No log to copy: copy the rows, each at its own row id.
        pg_sys::RelationCreateStorage(*newrnode, persistence, true);
        let src = table_of(rel);
        let dst = storage::create_new_storage(rel, &*newrnode);
        adopt_layout(rel, src, dst);
        copy_rows_in_place(src, dst);
        pg_sys::RelationDropStorage(rel);
        return;
    }
    // Copy the relation files as heap does; the table under the new key is
    // loaded from the copied log on first use, with every row id the same
    // (indexes are copied, not rebuilt).
    pg_sys::FlushRelationBuffers(rel);
    let dst = pg_sys::RelationCreateStorage(*newrnode, persistence, true);
    let src = pg_sys::RelationGetSmgr(rel);
    pg_sys::RelationCopyStorage(src, dst, pg_sys::ForkNumber::MAIN_FORKNUM, persistence);
    if persistence == pg_sys::RELPERSISTENCE_UNLOGGED as std::ffi::c_char && pg_sys::smgrexists(src, pg_sys::ForkNumber::INIT_FORKNUM) {
        pg_sys::smgrcreate(dst, pg_sys::ForkNumber::INIT_FORKNUM, false);
        crate::tam::ddl::log_smgrcreate(&*newrnode, pg_sys::ForkNumber::INIT_FORKNUM);
        pg_sys::RelationCopyStorage(src, dst, pg_sys::ForkNumber::INIT_FORKNUM, persistence);
    }
    pg_sys::RelationDropStorage(rel);
    storage::adopt_copied_storage(rel, &*newrnode);
}

/// Give the empty `dst` (the storage of `dst_rel`) the slots of `src`'s
/// variable-length columns where they differ, before rows are copied byte
/// for byte with their older versions. `dst` was made with the slots its
/// attributes ask for, while `src` keeps the ones its columns were made
/// with (ALTER TABLE changes a `varchar`'s length without a rewrite).
unsafe fn adopt_layout(dst_rel: pg_sys::Relation, src: &Table, dst: &Table) {
    let arena = shmem::arena();
    let _schema = dst.schema_lock.lock();
    for i in 0..src.ncols().min(dst.ncols()) {
        let (from, to) = (src.column(arena, i), dst.column(arena, i));
        if from.spec() == to.spec() || !from.spec().reads_as(to.spec()) {
            continue;
        }
        let (spec, state, owner_xid) = (from.spec(), to.state(), to.owner_xid());
        crate::durable::write(dst_rel, dst, |log| {
            dst.set_column(arena, i, spec, Value::Null, state).or_raise();
            dst.column(arena, i).set_owner_xid(owner_xid);
            log.push(&Change::SetColumn { col: i, spec, fill: Val::Null, state, owner_xid });
        });
    }
}

/// Copy every row of `src` into the empty `dst` at the same row id
/// (temporary tables' SET TABLESPACE).
unsafe fn copy_rows_in_place(src: &Table, dst: &Table) {
    let arena = shmem::arena();
    for row in 0..src.nrows() {
        let Some(h) = src.header(arena, row) else { continue };
        src.copy_row_to_at(arena, row, &h, dst, Some(row)).or_raise();
        if h.flags & flag::UPDATED != 0 && h.next != u64::MAX {
            let now = dst.header(arena, row).expect("row just copied");
            dst.modify_row(arena, row, &now, &RowChange { next: Some(h.next), ..Default::default() }).or_raise();
        }
    }
}
