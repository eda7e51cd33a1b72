//! Images: compacting a table's change log.
//!
//! A log grows with every change. When the log written since the last image
//! outgrows what an image of the table would take now ([`due_bytes`]; at
//! least [`MIN_LOG_BYTES`]; [`SAME_CYCLE_FACTOR`] times that if the table
//! was imaged since the last checkpoint began), VACUUM writes a new image:
//!
//! 1. Under the log lock, for a few microseconds: the number S of the last
//!    change, where the log goes on after it (the tail block and its end),
//!    and a copy-on-write snapshot of every column. No writer is between an
//!    engine change and its log entry then, so the snapshot is exactly the
//!    table after change S.
//! 2. Without any lock writers wait for: the image (`Table::image`, every
//!    entry numbered S) is written from the snapshot into blocks of its own
//!    chain, in WAL-logged records that redo applies to pages only, at the
//!    pace of VACUUM's cost-based delay, as heap's VACUUM writes pages.
//! 3. Under the log lock again, one record: the image's last page links to
//!    where the log went on after S, the image becomes the head, and the
//!    blocks before that point join the free chain, which later appends use
//!    before the file grows.
//!
//! A crash or an error before step 3 leaves the old log as it was; the
//! metapage remembers the unfinished image, whose blocks the next
//! compaction frees.

use super::pages::{self, Meta, Part, INVALID, PAGE_HEADER};
use super::{append, corrupt, lock_tail, Fork};
use crate::shmem;
use anker_engine::change::frame;
use anker_engine::snapshot::Method;
use anker_engine::table::Table;
use pgrx::pg_sys;
use std::sync::atomic::Ordering;

/// Logs smaller than this are never compacted.
pub const MIN_LOG_BYTES: u64 = 1 << 20;
/// Image bytes per WAL record batch.
const BATCH: usize = 64 << 10;
/// Rows of the image read between two of VACUUM's delay points. The delay
/// sleeps in proportion to the cost run up since the last one, but at most
/// four times `vacuum_cost_delay`: points a few pages apart keep the rate
/// where the cost limit puts it (autovacuum's defaults: about 10 pages per
/// 2 ms).
const PART_ROWS: u64 = 256;

/// The size of log at which `table` calls for an image: what an image of
/// the table would take now, estimated as the last image's bytes per row
/// times the rows the table has now. A log that is mostly inserts of rows
/// the table still holds stays below it (replaying it costs about what
/// loading their image would, so an image would only copy the table: under
/// TPC-C, `order_line` was imaged whole, 368 MB at W=4, each time its
/// inserts since the last image outgrew that image, and TPC-C ran at 60 %
/// for the seven seconds it took); a log of updates, deletes and versions
/// of the same rows passes it. So the file stays within about two images
/// and two logs of the table as it is, as before. Without an image with
/// rows to go by (a new or emptied table): the last image's bytes.
pub fn due_bytes(table: &Table) -> u64 {
    let bytes = table.image_bytes.load(Ordering::Relaxed);
    let rows = table.image_rows.load(Ordering::Relaxed);
    let now = if rows == 0 { bytes } else { (bytes as u128 * table.nrows().max(rows) as u128 / rows as u128) as u64 };
    now.max(MIN_LOG_BYTES)
}

/// Within one checkpoint cycle, a WAL-logged table is imaged again only
/// when its log has grown to this many times [`due_bytes`].
///
/// An image is to anker what full-page images are to heap: WAL written so
/// that what came before can be recovered from the relation file. Heap
/// writes a page's image once per checkpoint cycle, on the page's first
/// change after the checkpoint; with checkpoints far apart it writes almost
/// none. An image whenever the log reached `due_bytes` wrote an updated
/// table whole each time its log grew by the table's size, however rarely
/// checkpoints came. Deferred to the next cycle, images follow checkpoints
/// as heap's page images do; the factor bounds the log (and the file, and
/// the time a start-up spends replaying it) when checkpoints are far apart.
pub const SAME_CYCLE_FACTOR: u64 = 2;

/// The redo pointer of the checkpoint cycle now (it moves when a checkpoint
/// starts).
fn cycle() -> u64 {
    // SAFETY: reads shared state under its spinlock; raises no error.
    unsafe { pg_sys::GetRedoRecPtr() }
}

/// Has `table` (WAL-logged) been imaged since the last checkpoint began?
fn imaged_this_cycle(table: &Table) -> bool {
    let last = table.image_cycle.load(Ordering::Relaxed);
    last != 0 && table.log_permanent.load(Ordering::Acquire) != 0 && last == cycle()
}

/// How many times [`due_bytes`] the log must reach for an image now.
fn cycle_factor(table: &Table) -> u64 {
    if imaged_this_cycle(table) {
        SAME_CYCLE_FACTOR
    } else {
        1
    }
}

/// The log size at which `table` calls for an image now.
pub fn mark(table: &Table) -> u64 {
    cycle_factor(table) * due_bytes(table)
}

/// Does `table`'s log call for an image?
pub fn due(table: &Table) -> bool {
    table.log_bytes.load(Ordering::Relaxed) > mark(table)
}

/// What a compaction did.
pub struct Compacted {
    pub rows: u64,
    pub image_bytes: u64,
    pub log_bytes_before: u64,
    pub blocks_freed: u64,
}

/// Write an image of `table` (the storage of `rel`, a permanent or unlogged
/// relation) and make it the head of its log. The caller holds a lock that
/// keeps other compactions of `rel` out (VACUUM's).
pub fn compact(rel: pg_sys::Relation, table: &Table) -> Option<Compacted> {
    // SAFETY: rel is open; buffers are pinned and locked by us and released
    // before returning (or by the transaction's abort).
    unsafe {
        let fork = Fork::current(rel)?;
        let arena = shmem::arena();
        free_unfinished_image(fork);

        // 1. the moment
        let cycle_now = cycle();
        let tail = lock_tail(fork, table);
        let seq = table.durable_seq.load(Ordering::Acquire);
        let resume = (pg_sys::BufferGetBlockNumber(tail), pages::end_of(pages::page(tail)));
        let log_bytes_before = table.log_bytes.load(Ordering::Relaxed);
        let columns = table.columns(arena);
        let cols: Vec<usize> = (0..columns.len()).collect();
        let snap = table.create_snapshot(arena, &cols, Method::Cow, 0);
        // the versions pruning retired before the snapshot, which the image leaves out
        let removed_horizon = table.removed_horizon();
        pg_sys::UnlockReleaseBuffer(tail);
        let snap = match snap {
            Ok(s) => s,
            Err(e) => {
                pgrx::warning!("anker: no image of relation file {}: {e}", fork.rnode.relNode);
                return None;
            }
        };
        struct Release<'a>(&'a Table, anker_engine::arena::Off);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.release_snapshot(shmem::arena(), self.1);
            }
        }
        let release = Release(table, snap);

        // 2. the image, in batches of records
        let mut image_head = INVALID;
        let mut image_tail = INVALID;
        let mut batch = Vec::with_capacity(BATCH * 2);
        let mut image_bytes = 0u64;
        let mut flush = |batch: &mut Vec<u8>| {
            let tail = (image_tail != INVALID).then(|| fork.read_locked(image_tail));
            let charged_before = pg_sys::VacuumCostBalance;
            let last = append(fork, tail, batch, None, pages::XLOG_ANKER_IMAGE, None);
            charge_written_pages(batch.len(), charged_before);
            image_tail = pg_sys::BufferGetBlockNumber(last);
            if image_head == INVALID {
                // the first block, which the metapage remembers as pending
                let (mbuf, meta) = fork.meta(pg_sys::BUFFER_LOCK_SHARE);
                pg_sys::UnlockReleaseBuffer(mbuf);
                image_head = meta.pending;
            }
            pg_sys::UnlockReleaseBuffer(last);
            image_bytes += batch.len() as u64;
            batch.clear();
        };
        {
            let mut epoch = Some(shmem::enter_epoch());
            let pause = || {
                drop(epoch.take());
                // VACUUM's cost-based delay (autovacuum's by default, a
                // manual VACUUM's or anker.compact's when vacuum_cost_delay
                // is set); it also takes interrupts, which abandon the
                // image.
                pg_sys::vacuum_delay_point();
                epoch.replace(shmem::enter_epoch());
            };
            table.image_in_parts(arena, snap, &columns, PART_ROWS, pause, |change| {
                frame(seq, change, &mut batch);
                if batch.len() >= BATCH {
                    flush(&mut batch);
                }
            });
        }
        if !batch.is_empty() {
            flush(&mut batch);
        }
        let rows = table.snapshot(arena, snap).nrows;
        drop(release);

        // 3. the switch, after which a hot standby loads the table from
        // the image: its queries that may need what the image left out
        // are done first (a table without WAL writes nothing)
        super::horizon::log(rel, removed_horizon);
        let tail = lock_tail(fork, table);
        let (mbuf, meta) = fork.meta(pg_sys::BUFFER_LOCK_EXCLUSIVE);
        // the old chain up to where the log goes on after the image
        let mut freed_last = INVALID;
        let mut blocks_freed = 0u64;
        let mut b = meta.head;
        while b != resume.0 {
            if b == INVALID || blocks_freed > fork.nblocks() as u64 {
                pg_sys::UnlockReleaseBuffer(mbuf);
                pg_sys::UnlockReleaseBuffer(tail);
                corrupt(&fork.rnode, &format!("block {} is not on its log's chain", resume.0));
            }
            freed_last = b;
            blocks_freed += 1;
            b = next_of(fork, b);
        }
        let last = fork.read_locked(image_tail);
        let mut parts = vec![Part { buf: last, new: false, meta: false, op: pages::log_op(Some(resume), &[]), logged: None }];
        let mut new_meta = Meta { head: image_head, free: meta.free, generation: meta.generation.wrapping_add(1), pending: INVALID };
        if freed_last != INVALID {
            let fl = fork.read_locked(freed_last);
            parts.push(Part { buf: fl, new: false, meta: false, op: pages::log_op(Some((meta.free, PAGE_HEADER)), &[]), logged: None });
            new_meta.free = meta.head;
        }
        parts.push(Part { buf: mbuf, new: false, meta: true, op: pages::meta_op(new_meta), logged: None });
        pages::log_and_apply(fork.logged, &parts, pages::XLOG_ANKER_SWITCH);
        for part in &parts {
            pg_sys::UnlockReleaseBuffer(part.buf);
        }
        table.log_bytes.fetch_sub(log_bytes_before.min(table.log_bytes.load(Ordering::Relaxed)), Ordering::Relaxed);
        table.image_bytes.store(image_bytes, Ordering::Relaxed);
        table.image_rows.store(rows, Ordering::Relaxed);
        table.image_cycle.store(cycle_now, Ordering::Relaxed);
        pg_sys::UnlockReleaseBuffer(tail);
        Some(Compacted { rows, image_bytes, log_bytes_before, blocks_freed })
    }
}

/// Charge VACUUM's cost accounting (when active) for an image batch of
/// `bytes` at least what dirtying that many pages costs. The buffer manager
/// charges a page only when it was clean, and an image mostly fills blocks
/// a previous image freed, still dirty in shared buffers: a page it writes
/// costs a page write and its WAL all the same. `charged_before` is the
/// balance before the batch's append, whose own charges count towards it.
unsafe fn charge_written_pages(bytes: usize, charged_before: i32) {
    if !pg_sys::VacuumCostActive {
        return;
    }
    let pages = bytes.div_ceil(pg_sys::BLCKSZ as usize) as i64;
    let due = pages * pg_sys::VacuumCostPageDirty as i64;
    let charged = pg_sys::VacuumCostBalance as i64 - charged_before as i64;
    if charged < due {
        pg_sys::VacuumCostBalance = (pg_sys::VacuumCostBalance as i64 + due - charged).min(i32::MAX as i64) as i32;
    }
}

/// The next block on the chain after `block`.
unsafe fn next_of(fork: Fork, block: u32) -> u32 {
    let buf = fork.read(block, pg_sys::ReadBufferMode::RBM_NORMAL);
    pg_sys::LockBuffer(buf, pg_sys::BUFFER_LOCK_SHARE as i32);
    let next = pages::link_of(pages::page(buf)).0;
    pg_sys::UnlockReleaseBuffer(buf);
    next
}

/// Free the blocks of an image whose writer died before its switch.
unsafe fn free_unfinished_image(fork: Fork) {
    let (mbuf, meta) = fork.meta(pg_sys::BUFFER_LOCK_EXCLUSIVE);
    if meta.pending == INVALID {
        pg_sys::UnlockReleaseBuffer(mbuf);
        return;
    }
    let mut last = meta.pending;
    let mut n = 0;
    loop {
        let next = next_of(fork, last);
        n += 1;
        if next == INVALID || n > fork.nblocks() {
            break;
        }
        last = next;
    }
    let lbuf = fork.read_locked(last);
    let parts = [
        Part { buf: lbuf, new: false, meta: false, op: pages::log_op(Some((meta.free, PAGE_HEADER)), &[]), logged: None },
        Part { buf: mbuf, new: false, meta: true, op: pages::meta_op(Meta { free: meta.pending, pending: INVALID, ..meta }), logged: None },
    ];
    pages::log_and_apply(fork.logged, &parts, pages::XLOG_ANKER_SWITCH);
    pg_sys::UnlockReleaseBuffer(lbuf);
    pg_sys::UnlockReleaseBuffer(mbuf);
}

/// VACUUM's cost accounting, on for a compaction outside VACUUM as
/// `vacuum()` turns it on for its own: active when `vacuum_cost_delay` is
/// set, off again when dropped (an error unwinding included).
pub struct VacuumCostAccounting(());

impl VacuumCostAccounting {
    pub fn start() -> VacuumCostAccounting {
        // SAFETY: backend-local globals, set as vacuum() sets them.
        unsafe {
            pg_sys::VacuumCostActive = pg_sys::VacuumCostDelay > 0.0;
            pg_sys::VacuumCostBalance = 0;
        }
        VacuumCostAccounting(())
    }
}

impl Drop for VacuumCostAccounting {
    fn drop(&mut self) {
        // SAFETY: as in start.
        unsafe {
            pg_sys::VacuumCostActive = false;
            pg_sys::VacuumCostBalance = 0;
        }
    }
}

/// VACUUM's part: compact `rel`'s log if it is due, and say so.
pub fn maybe_compact(rel: pg_sys::Relation, table: &Table) {
    if !due(table) {
        return;
    }
    let started = std::time::Instant::now();
    if let Some(c) = compact(rel, table) {
        // SAFETY: rel is open.
        let name = unsafe { pgrx::name_data_to_str(&(*(*rel).rd_rel).relname) }.to_string();
        pgrx::log!(
            "anker: wrote an image of \"{name}\": {} rows, {} kB (the log had {} kB since the last image); {} blocks freed, in {:.0} ms",
            c.rows,
            c.image_bytes / 1024,
            c.log_bytes_before / 1024,
            c.blocks_freed,
            started.elapsed().as_secs_f64() * 1e3
        );
    }
}

/// Autovacuum visits a table for its dead tuples, and a table updated only
/// in place has none: when its log has grown to twice what calls for an
/// image, report as many dead tuples as make autovacuum come (it runs
/// VACUUM, which compacts), and again each time the log grows by another
/// half of that, for a report autovacuum never acted on (statistics reset
/// by a crash, autovacuum off for a while) must not let the log grow for
/// ever. `before` is the log's size before this write. The report shows in
/// `pg_stat_user_tables.n_dead_tup` until then.
pub fn nudge_autovacuum(rel: pg_sys::Relation, table: &Table, before: u64) {
    let log_bytes = table.log_bytes.load(Ordering::Relaxed);
    if log_bytes <= 2 * table.image_bytes.load(Ordering::Relaxed).max(MIN_LOG_BYTES) {
        return; // (mark and due_bytes are never below the last image's bytes)
    }
    let due = due_bytes(table);
    let band = |bytes: u64| bytes.checked_sub(2 * due + 1).map(|over| over / due);
    let after = band(log_bytes);
    if after.is_none() || after == band(before) {
        return;
    }
    // (once per `due` bytes of log from here, so the redo pointer's lock is
    // not taken by every write)
    if log_bytes <= 2 * cycle_factor(table) * due {
        return; // imaged in this cycle: VACUUM would not compact yet
    }
    let setting = |name: &std::ffi::CStr, default: f64| -> f64 {
        // SAFETY: a GUC lookup; the string is PostgreSQL's, read at once.
        unsafe {
            let v = pg_sys::GetConfigOption(name.as_ptr(), true, false);
            if v.is_null() {
                return default;
            }
            std::ffi::CStr::from_ptr(v).to_str().ok().and_then(|s| s.parse().ok()).unwrap_or(default)
        }
    };
    // SAFETY: rel is open.
    let reltuples = unsafe { (*(*rel).rd_rel).reltuples }.max(0.0) as f64;
    let dead = setting(c"autovacuum_vacuum_threshold", 50.0) + setting(c"autovacuum_vacuum_scale_factor", 0.2) * reltuples + 1.0;
    // SAFETY: pending statistics of an open relation. (The function
    // reports dead tuples recovered: a negative count adds them.)
    unsafe { pg_sys::pgstat_update_heap_dead_tuples(rel, -(dead.min(i32::MAX as f64) as i32)) };
}
