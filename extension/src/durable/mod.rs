//! Durability: every change to an anker table goes to its change log, kept
//! in the relation's main fork through PostgreSQL's buffer manager and
//! protected by WAL records of our resource manager (`redo.rs`); images
//! written from virtual snapshots keep the log short (`compact.rs`). The
//! file's layout: `pages.rs`. Design, invariants and what was rejected:
//! `docs/durability.md`.
//!
//! The log is a byte stream of *chunks* (`anker_engine::chunk`): a chunk
//! of kind `WHOLE` holds complete framed entries; an entry too large for
//! one WAL record is cut into `FIRST`, `MIDDLE`... `LAST` pieces. One WAL
//! record appends exactly one chunk.
//!
//! Writers run the engine change and log it while holding the exclusive
//! content lock of the log's last block: the log lock, which orders a
//! table's changes as the engine applied them. A table's entries carry
//! consecutive sequence numbers (`Table::durable_seq`); an image's entries
//! all carry the number of the last change it includes.

pub mod compact;
pub mod horizon;
pub mod logical;
mod pages;
pub mod redo;

use crate::shmem;
use anker_engine::change::{frame, frame_for_page_and_record, Change, Entries};
use anker_engine::chunk::{self, chunk, Assembler, CHUNK_HEADER_MAX, FIRST, LAST, MIDDLE, WHOLE, WHOLE_FOR_RECORD};
use anker_engine::table::{ColumnState, Table, TableKey};
use pages::{Meta, Part, INVALID, PAGE_DATA, PAGE_HEADER};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use std::sync::atomic::Ordering;

/// Our resource manager id (custom range 128..=255, PostgreSQL 15).
pub const RMGR_ID: u8 = 133;

/// Pages one WAL record may fill (at most 32 block references a record:
/// room for the tail block and the metapage).
const MAX_RECORD_PAGES: usize = 30;

// ---- writing ---------------------------------------------------------------------

/// The changes one write makes, framed as log entries: as the log's pages
/// hold them, and as the WAL record carries them, without the xid its
/// header holds (`record_xid`: the transaction's, if it had one at every
/// change; else 0, and the record carries the page's entries).
pub struct Log {
    entries: Vec<u8>,
    record_entries: Vec<u8>,
    record_xid: u32,
    next_seq: u64,
    count: u64,
    enabled: bool,
}

impl Log {
    fn new(enabled: bool, next_seq: u64, entries: Vec<u8>, record_entries: Vec<u8>) -> Log {
        Log { entries, record_entries, record_xid: 0, next_seq, count: 0, enabled }
    }

    /// Record `change` (made to the engine table just now).
    pub fn push(&mut self, change: &Change) {
        if self.enabled {
            // The xid XLogInsert will put in the record's header, if it
            // does not change before then (`append_to_tail` checks).
            // SAFETY: reads backend state.
            let xid: u32 = unsafe { crate::pg_leaf::GetCurrentTransactionIdIfAny() }.into();
            if self.count == 0 {
                self.record_xid = xid;
            }
            // Entries that outgrow a block go to several, in a record of
            // page operations (`append_chunk`), not in the shorter form only
            // an append to the tail block logs: stop framing that form (a
            // COPY batch's thousand rows).
            if xid != self.record_xid || self.entries.len() > PAGE_DATA {
                self.record_xid = 0;
            }
            if self.record_xid != 0 {
                frame_for_page_and_record(self.next_seq, change, xid, &mut self.entries, &mut self.record_entries);
            } else {
                frame(self.next_seq, change, &mut self.entries);
            }
            self.next_seq += 1;
            self.count += 1;
        }
    }

    /// The entries as a record carrying `record_xid` may carry them, where
    /// that is shorter.
    fn for_record(&self) -> Option<(&[u8], u32)> {
        (self.record_xid != 0 && self.record_entries.len() < self.entries.len()).then_some((&self.record_entries[..], self.record_xid))
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }
}

/// The main fork that holds a table's log: a relation file (possibly not
/// yet the one the relcache entry names: a new relfilenode), its relation
/// (for the extension lock, which PostgreSQL takes per relation) and
/// whether it is WAL-logged.
#[derive(Clone, Copy)]
struct Fork {
    rel: pg_sys::Relation,
    rnode: pg_sys::RelFileNode,
    /// The buffers' persistence: the file of a permanent table (else
    /// unlogged, and reset after a crash).
    permanent: bool,
    /// Whether changes to the file are WAL-logged: a permanent table's
    /// are, except where `wal_level = minimal` skips WAL for a file created
    /// in the running transaction (docs/durability.md, "DDL").
    logged: bool,
}

impl Fork {
    /// The fork `rel`'s relcache entry names, unless `rel` is temporary
    /// (temporary tables keep no log: they end with their session).
    unsafe fn of(rel: pg_sys::Relation, rnode: pg_sys::RelFileNode, persistence: std::ffi::c_char) -> Option<Fork> {
        if persistence == pg_sys::RELPERSISTENCE_TEMP as std::ffi::c_char {
            return None;
        }
        Some(Fork::new(rel, rnode, persistence == pg_sys::RELPERSISTENCE_PERMANENT as std::ffi::c_char))
    }

    /// `RelationNeedsWAL` by file: below `wal_level = replica` PostgreSQL
    /// writes no WAL for a file created in the running transaction, and at
    /// its commit WAL-logs the file's pages whole or fsyncs it
    /// (`smgrDoPendingSyncs`; from then on the file is logged again). The
    /// answer holds for one write: each makes its own fork.
    unsafe fn new(rel: pg_sys::Relation, rnode: pg_sys::RelFileNode, permanent: bool) -> Fork {
        let logged = permanent
            && (pg_sys::wal_level >= pg_sys::WalLevel::WAL_LEVEL_REPLICA as i32 || !pg_sys::RelFileNodeSkippingWAL(rnode));
        Fork { rel, rnode, permanent, logged }
    }

    unsafe fn current(rel: pg_sys::Relation) -> Option<Fork> {
        Fork::of(rel, (*rel).rd_node, (*(*rel).rd_rel).relpersistence)
    }

    unsafe fn nblocks(&self) -> u32 {
        let smgr = pg_sys::smgropen(self.rnode, pg_sys::InvalidBackendId);
        if !pg_sys::smgrexists(smgr, pg_sys::ForkNumber::MAIN_FORKNUM) {
            return 0;
        }
        pg_sys::smgrnblocks(smgr, pg_sys::ForkNumber::MAIN_FORKNUM)
    }

    /// Block `block` pinned (not locked); `InvalidBlockNumber` extends the
    /// fork by a zeroed block, returned locked.
    unsafe fn read(&self, block: pg_sys::BlockNumber, mode: pg_sys::ReadBufferMode::Type) -> pg_sys::Buffer {
        pg_sys::ReadBufferWithoutRelcache(self.rnode, pg_sys::ForkNumber::MAIN_FORKNUM, block, mode, std::ptr::null_mut(), self.permanent)
    }

    unsafe fn read_locked(&self, block: pg_sys::BlockNumber) -> pg_sys::Buffer {
        let buf = self.read(block, pg_sys::ReadBufferMode::RBM_NORMAL);
        pg_sys::LockBuffer(buf, pg_sys::BUFFER_LOCK_EXCLUSIVE as i32);
        buf
    }

    /// A new block at the end of the fork, zeroed, pinned and locked. The
    /// caller holds the metapage's lock, or the extension lock while the
    /// fork has no metapage yet: either serialises the fork's extenders.
    unsafe fn extend(&self) -> pg_sys::Buffer {
        self.read(pg_sys::InvalidBlockNumber, pg_sys::ReadBufferMode::RBM_ZERO_AND_LOCK)
    }

    /// The metapage, pinned and locked in `mode`, with its fields.
    unsafe fn meta(&self, mode: u32) -> (pg_sys::Buffer, Meta) {
        let buf = self.read(0, pg_sys::ReadBufferMode::RBM_NORMAL);
        pg_sys::LockBuffer(buf, mode as i32);
        match pages::meta_of(pages::page(buf)) {
            Ok(m) => (buf, m),
            Err(why) => {
                pg_sys::UnlockReleaseBuffer(buf);
                corrupt(&self.rnode, &why)
            }
        }
    }

    unsafe fn lock_extension(&self) {
        pg_sys::LockRelationForExtension(self.rel, pg_sys::ExclusiveLock as pg_sys::LOCKMODE);
    }

    unsafe fn unlock_extension(&self) {
        pg_sys::UnlockRelationForExtension(self.rel, pg_sys::ExclusiveLock as pg_sys::LOCKMODE);
    }
}

/// Make a change to `table` (the storage of `rel`) durable: `op` applies it
/// to the engine table and describes it in the [`Log`]; both happen under
/// the log lock, and what `op` recorded is appended (and WAL-logged) before
/// the lock is released.
pub fn write<R>(rel: pg_sys::Relation, table: &Table, op: impl FnOnce(&mut Log) -> R) -> R {
    // SAFETY: rel is open.
    let fork = unsafe { Fork::current(rel) };
    let before = table.log_bytes.load(Ordering::Relaxed);
    let r = write_to(fork, table, op);
    if fork.is_some() {
        compact::nudge_autovacuum(rel, table, before);
    }
    r
}

/// [`write`] without a relation at hand (transaction callbacks): a table
/// whose log has been written or loaded in this server's life. Others
/// (temporary tables, or none yet) change in memory only, and so do the
/// tables in `removed`, whose files the ending transaction removes
/// ([`files_removed_at_end`]).
pub fn write_table<R>(table: &Table, removed: &[TableKey], op: impl FnOnce(&mut Log) -> R) -> R {
    let key = table.key;
    let logged = key[3] == pg_sys::InvalidBackendId as u32 && table.log_tail.load(Ordering::Acquire) != u32::MAX && !removed.contains(&key);
    let fork = logged.then(|| {
        let rnode = pg_sys::RelFileNode { spcNode: key[0].into(), dbNode: key[1].into(), relNode: key[2].into() };
        // SAFETY: reads backend state.
        unsafe { Fork::new(std::ptr::null_mut(), rnode, table.log_permanent.load(Ordering::Acquire) != 0) }
    });
    write_to(fork, table, op)
}

/// The relation files that the ending transaction or subtransaction removes
/// (created in it, if it aborts; dropped or replaced in it, if it commits:
/// `for_commit`), as table keys. Transaction callbacks run after the commit
/// or abort record, whose redo removes those files, and before the files go
/// on the primary: a record about one of them written then would reach
/// redo after its file is gone (on a hot standby, a PANIC for a reference
/// to a page that does not exist; in crash recovery, an empty file created
/// again and left behind), so their changes there stay in memory, which is
/// freed with them.
pub fn files_removed_at_end(for_commit: bool) -> Vec<TableKey> {
    let mut nodes: *mut pg_sys::RelFileNode = std::ptr::null_mut();
    // SAFETY: reads this backend's pending deletes (non-temporary relations
    // only, as temporary tables are not logged); the array is palloc'd.
    unsafe {
        let n = pg_sys::smgrGetPendingDeletes(for_commit, &mut nodes);
        let keys = (0..n.max(0) as usize)
            .map(|i| {
                let r = *nodes.add(i);
                [r.spcNode.into(), r.dbNode.into(), r.relNode.into(), pg_sys::InvalidBackendId as u32]
            })
            .collect();
        if !nodes.is_null() {
            pg_sys::pfree(nodes.cast());
        }
        keys
    }
}

fn write_to<R>(fork: Option<Fork>, table: &Table, op: impl FnOnce(&mut Log) -> R) -> R {
    // A hot standby's memory follows the primary's log through redo; what
    // it settles itself (loading) is not written.
    // SAFETY: a flag read.
    let Some(fork) = fork.filter(|_| unsafe { !crate::pg_leaf::RecoveryInProgress() }) else {
        return op(&mut Log::new(false, 0, vec![], vec![]));
    };
    // SAFETY: buffers are pinned and locked by us until the end of this
    // function (an error releases them with the transaction).
    unsafe {
        let mut tail = lock_tail(fork, table);
        if pages::room(pages::page(tail)) < ROOM_BEFORE_CHANGE {
            tail = fresh_tail(fork, tail, table);
        }
        let mut entries = std::mem::take(&mut *(&raw mut ENTRIES));
        let mut record_entries = std::mem::take(&mut *(&raw mut RECORD_ENTRIES));
        entries.clear();
        record_entries.clear();
        let mut log = Log::new(true, table.durable_seq.load(Ordering::Acquire) + 1, entries, record_entries);
        let r = op(&mut log);
        let tail = if log.count > 0 {
            let tail = append(fork, Some(tail), &log.entries, log.for_record(), pages::XLOG_ANKER_APPEND, Some(table));
            // Published once the entries are in the log (an append that
            // fails must leave no gap in the numbers), and before the new
            // tail is unlocked: whoever locked an old tail meanwhile saw it
            // move on and waits for this one.
            table.durable_seq.fetch_add(log.count, Ordering::AcqRel);
            table.log_bytes.fetch_add(log.entries.len() as u64, Ordering::Relaxed);
            tail
        } else {
            tail
        };
        crate::pg_leaf::UnlockReleaseBuffer(tail);
        *(&raw mut ENTRIES) = log.entries;
        *(&raw mut RECORD_ENTRIES) = log.record_entries;
        r
    }
}

/// Bytes the log's last block must have free before an engine change, else
/// the log moves on to a fresh block first. Taking a block can fail (no
/// space left to extend the file), and it must fail before the change, not
/// between the change and its entry: memory would be ahead of the log, and
/// a change that is not transactional (an abort's undo, VACUUM's) would be
/// lost at the next load while later entries build on it. Entries this
/// small (row locks, deletes, undo, most row changes) then never need a
/// block after their change; larger ones may, and are changes of the
/// writing transaction, which the failure aborts.
const ROOM_BEFORE_CHANGE: usize = 256;

/// Link a fresh block (from the free chain, else a new one) after the log's
/// last block `tail`, in one APPEND record without entries; returns it,
/// locked, as the new tail (`tail` is released).
unsafe fn fresh_tail(fork: Fork, tail: pg_sys::Buffer, table: &Table) -> pg_sys::Buffer {
    let (mbuf, mut meta) = fork.meta(pg_sys::BUFFER_LOCK_EXCLUSIVE);
    let buf = take_block(fork, &mut meta);
    let block = pg_sys::BufferGetBlockNumber(buf);
    let parts = [
        Part { buf: tail, new: false, meta: false, op: pages::log_op(Some((block, PAGE_HEADER)), &[]), logged: None },
        Part { buf, new: true, meta: false, op: pages::log_op(Some((INVALID, PAGE_HEADER)), &[]), logged: None },
        Part { buf: mbuf, new: false, meta: true, op: pages::meta_op(meta), logged: None },
    ];
    pages::log_and_apply(fork.logged, &parts, pages::XLOG_ANKER_APPEND);
    table.log_tail.store(block, Ordering::Release);
    pg_sys::UnlockReleaseBuffer(tail);
    pg_sys::UnlockReleaseBuffer(mbuf);
    buf
}

/// A block for the log, pinned and locked: the first of the free chain
/// (`meta`, of the metapage the caller holds exclusively, then names the
/// next one), else a new one at the end of the file. The record that uses
/// it must also write the metapage.
unsafe fn take_block(fork: Fork, meta: &mut Meta) -> pg_sys::Buffer {
    if meta.free == INVALID {
        return fork.extend();
    }
    let b = fork.read_locked(meta.free);
    meta.free = pages::link_of(pages::page(b)).0;
    b
}

/// The entries of a write being framed (for the page and for the record),
/// and the page operation of an append that fits its tail block (for the
/// page and for the record): kept per backend, so that a row change's trip
/// to the log allocates nothing (a write nested in another, or one an error
/// cut short, gets a fresh buffer).
static mut ENTRIES: Vec<u8> = Vec::new();
static mut RECORD_ENTRIES: Vec<u8> = Vec::new();
static mut TAIL_OP: Vec<u8> = Vec::new();
static mut RECORD_TAIL_OP: Vec<u8> = Vec::new();

/// Pin and exclusively lock the last block of the log (creating the fork's
/// first blocks if it has none): the table's log lock.
unsafe fn lock_tail(fork: Fork, table: &Table) -> pg_sys::Buffer {
    loop {
        let tail = table.log_tail.load(Ordering::Acquire);
        if tail == INVALID {
            // (only with a relation: `write_table` never gets here)
            fork.lock_extension();
            if table.log_tail.load(Ordering::Acquire) == INVALID {
                if fork.nblocks() >= 2 {
                    let tail = ChainWalk::new(&fork).last_block();
                    table.log_permanent.store(fork.permanent as u32, Ordering::Release);
                    table.log_tail.store(tail, Ordering::Release);
                } else {
                    // a fork without a log: an unlogged table reset after a
                    // crash
                    init_fork(fork, table);
                }
            }
            fork.unlock_extension();
            continue;
        }
        // Most writes find the tail where the last one left it: pin it
        // there without the buffer mapping lookup.
        let hint = table.log_tail_hint.load(Ordering::Relaxed);
        let buf = if hint != 0 && pg_sys::ReadRecentBuffer(fork.rnode, pg_sys::ForkNumber::MAIN_FORKNUM, tail, hint) {
            lock_tail_buffer(hint);
            hint
        } else {
            let buf = fork.read(tail, pg_sys::ReadBufferMode::RBM_NORMAL);
            lock_tail_buffer(buf);
            table.log_tail_hint.store(buf, Ordering::Relaxed);
            buf
        };
        if table.log_tail.load(Ordering::Acquire) == tail {
            return buf;
        }
        pg_sys::UnlockReleaseBuffer(buf);
    }
}

/// Times [`lock_tail_buffer`] retries a held tail lock before it queues.
const TAIL_LOCK_SPINS: u32 = 64;

/// Lock the pinned tail block exclusively. Writers hold the tail only for
/// one change (a few microseconds), but an LWLock that is taken queues and
/// sleeps at once: with two backends writing one table, the loser slept and
/// its core went idle until woken (`LWLock:BufferContent` in
/// pg_stat_activity, idle CPU under TPC-C). Retrying for a few microseconds
/// first usually finds it free; after that, sleep as LockBuffer does.
unsafe fn lock_tail_buffer(buf: pg_sys::Buffer) {
    for _ in 0..TAIL_LOCK_SPINS {
        if crate::pg_leaf::ConditionalLockBuffer(buf) {
            return;
        }
        for _ in 0..8 {
            std::hint::spin_loop();
        }
    }
    crate::pg_leaf::LockBuffer(buf, pg_sys::BUFFER_LOCK_EXCLUSIVE as i32);
}

/// Write the metapage and a first log block holding [`Change::Create`] of
/// the table as it is. The caller holds the extension lock; the fork is
/// empty or holds only a metapage.
unsafe fn init_fork(fork: Fork, table: &Table) {
    let arena = shmem::arena();
    let seq = table.durable_seq.load(Ordering::Acquire) + 1;
    let mut entries = vec![];
    frame(seq, &Change::Create { columns: table.columns(arena) }, &mut entries);
    let meta = if fork.nblocks() == 0 { fork.extend() } else { fork.read_locked(0) };
    let first = fork.extend();
    let first_block = pg_sys::BufferGetBlockNumber(first);
    let chunk = chunk(WHOLE, &entries);
    let parts = [
        Part { buf: meta, new: true, meta: true, op: pages::meta_op(Meta { head: first_block, free: INVALID, generation: 0, pending: INVALID }), logged: None },
        Part { buf: first, new: true, meta: false, op: pages::log_op(Some((INVALID, PAGE_HEADER)), &chunk), logged: None },
    ];
    pages::log_and_apply(fork.logged, &parts, pages::XLOG_ANKER_APPEND);
    pg_sys::UnlockReleaseBuffer(meta);
    pg_sys::UnlockReleaseBuffer(first);
    table.durable_seq.store(seq, Ordering::Release);
    table.log_bytes.store(entries.len() as u64, Ordering::Relaxed);
    table.image_bytes.store(0, Ordering::Relaxed);
    table.image_rows.store(0, Ordering::Relaxed);
    table.log_permanent.store(fork.permanent as u32, Ordering::Release);
    table.log_tail.store(first_block, Ordering::Release);
}

/// Append framed `entries` to a chain whose last block is `tail` (pinned,
/// locked; None: the chain starts now) in records of kind `info`: one
/// chunk, or pieces when they would fill more pages than a record may
/// carry. `for_record`: the same entries framed for a record carrying that
/// xid, which an append to the tail block logs instead. Returns the new
/// last block, pinned and locked (the caller releases it). With `table`,
/// the chain is its log, whose tail moves.
unsafe fn append(
    fork: Fork,
    mut tail: Option<pg_sys::Buffer>,
    entries: &[u8],
    for_record: Option<(&[u8], u32)>,
    info: u8,
    table: Option<&Table>,
) -> pg_sys::Buffer {
    if let Some(t) = tail {
        if append_to_tail(fork, t, entries, for_record, info) {
            return t;
        }
    }
    let max_piece = (MAX_RECORD_PAGES - 1) * PAGE_DATA - 2 * CHUNK_HEADER_MAX;
    if entries.len() <= max_piece {
        return append_chunk(fork, tail, &chunk(WHOLE, entries), info, table);
    }
    let pieces: Vec<&[u8]> = entries.chunks(max_piece).collect();
    for (k, p) in pieces.iter().enumerate() {
        let kind = if k == 0 {
            FIRST
        } else if k + 1 == pieces.len() {
            LAST
        } else {
            MIDDLE
        };
        tail = Some(append_chunk(fork, tail, &chunk(kind, p), info, table));
    }
    tail.expect("at least one piece")
}

/// Append `entries` as one chunk to the tail block `tail` when they fit
/// there (the common case: a row change or a few), building the page
/// operation in a reused buffer; the log's tail stays where it is. False:
/// they do not fit, nothing was done.
unsafe fn append_to_tail(fork: Fork, tail: pg_sys::Buffer, entries: &[u8], for_record: Option<(&[u8], u32)>, info: u8) -> bool {
    let (header, header_len) = chunk::header(WHOLE, entries.len());
    if header_len + entries.len() > pages::room(pages::page(tail)) {
        return false;
    }
    let end = (INVALID, PAGE_HEADER);
    let link = (pages::link_of(pages::page(tail)) != end).then_some(end);
    let mut op = std::mem::take(&mut *(&raw mut TAIL_OP));
    pages::log_op_into(&mut op, link, &[&header[..header_len], entries]);
    // The record carries the entries without its xid when it is the one
    // XLogInsert will write (GetCurrentTransactionIdIfAny, as there).
    let logged = for_record.filter(|&(_, xid)| fork.logged && u32::from(crate::pg_leaf::GetCurrentTransactionIdIfAny()) == xid).map(|(short, _)| {
        let (header, header_len) = chunk::header(WHOLE_FOR_RECORD, short.len());
        let mut logged = std::mem::take(&mut *(&raw mut RECORD_TAIL_OP));
        pages::log_op_into(&mut logged, link, &[&header[..header_len], short]);
        logged
    });
    let parts = [Part { buf: tail, new: false, meta: false, op, logged }];
    pages::log_and_apply(fork.logged, &parts, info);
    let [part] = parts;
    *(&raw mut TAIL_OP) = part.op;
    if let Some(logged) = part.logged {
        *(&raw mut RECORD_TAIL_OP) = logged;
    }
    true
}

/// Append one chunk in one WAL record: what fits in the tail, then blocks
/// from the free chain or new ones (taken under the metapage's lock, which
/// the record then also changes).
unsafe fn append_chunk(fork: Fork, tail: Option<pg_sys::Buffer>, chunk: &[u8], info: u8, table: Option<&Table>) -> pg_sys::Buffer {
    let mut bufs: Vec<(pg_sys::Buffer, bool, &[u8])> = vec![];
    let mut rest = chunk;
    if let Some(t) = tail {
        let n = pages::room(pages::page(t)).min(rest.len());
        bufs.push((t, false, &rest[..n]));
        rest = &rest[n..];
    }
    let mut meta: Option<(pg_sys::Buffer, Meta)> = None;
    while !rest.is_empty() {
        let (_, m) = meta.get_or_insert_with(|| fork.meta(pg_sys::BUFFER_LOCK_EXCLUSIVE));
        let buf = take_block(fork, m);
        if bufs.is_empty() {
            // the first block of an image: remembered until the image is
            // the log's head (or freed)
            m.pending = pg_sys::BufferGetBlockNumber(buf);
        }
        let n = PAGE_DATA.min(rest.len());
        bufs.push((buf, true, &rest[..n]));
        rest = &rest[n..];
    }
    let mut parts: Vec<Part> = Vec::with_capacity(bufs.len() + 1);
    for (k, (buf, new, bytes)) in bufs.iter().enumerate() {
        let link = match bufs.get(k + 1) {
            Some((b, _, _)) => (pg_sys::BufferGetBlockNumber(*b), PAGE_HEADER),
            None => (INVALID, PAGE_HEADER),
        };
        let same = !*new && pages::link_of(pages::page(*buf)) == link;
        parts.push(Part { buf: *buf, new: *new, meta: false, op: pages::log_op((!same).then_some(link), bytes), logged: None });
    }
    if let Some((mbuf, m)) = meta {
        parts.push(Part { buf: mbuf, new: false, meta: true, op: pages::meta_op(m), logged: None });
    }
    pages::log_and_apply(fork.logged, &parts, info);
    // Keep the new last block locked; release the others once writers
    // waiting for them can see the log moved on.
    let last = bufs.last().expect("a chunk is never empty").0;
    if let Some(t) = table {
        if Some(last) != tail {
            t.log_tail.store(pg_sys::BufferGetBlockNumber(last), Ordering::Release);
        }
    }
    for part in &parts {
        if part.buf != last {
            pg_sys::UnlockReleaseBuffer(part.buf);
        }
    }
    last
}

/// New storage `rnode` for `rel` (CREATE, TRUNCATE, rewrites): its fork
/// gets the metapage and a log starting with [`Change::Create`].
pub fn start_log(rel: pg_sys::Relation, rnode: pg_sys::RelFileNode, persistence: std::ffi::c_char, table: &Table) {
    // SAFETY: rel is open; the new storage is ours alone.
    unsafe {
        let Some(fork) = Fork::of(rel, rnode, persistence) else { return };
        fork.lock_extension();
        init_fork(fork, table);
        fork.unlock_extension();
    }
}

// ---- loading ---------------------------------------------------------------------

fn corrupt(rnode: &pg_sys::RelFileNode, why: &str) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
        format!("anker: cannot load relation file {}/{}/{}: {why}", rnode.spcNode, rnode.dbNode, rnode.relNode)
    );
}

/// A walk along the log of a fork, from the metapage's head, a page at a
/// time.
struct ChainWalk<'f> {
    fork: &'f Fork,
    nblocks: u32,
    /// The next block to read (INVALID: the walk is over) and where its
    /// log bytes start.
    block: u32,
    start: usize,
    pages: u32,
    /// The metapage's generation when the walk started.
    generation: u32,
    /// The last block read, and where its log bytes ended then.
    last: u32,
    last_end: usize,
}

impl<'f> ChainWalk<'f> {
    /// # Safety
    /// Reads the metapage of an existing relation file through shared buffers.
    unsafe fn new(fork: &'f Fork) -> ChainWalk<'f> {
        let nblocks = fork.nblocks();
        let (mbuf, meta) = fork.meta(pg_sys::BUFFER_LOCK_SHARE);
        pg_sys::UnlockReleaseBuffer(mbuf);
        ChainWalk { fork, nblocks, block: meta.head, start: PAGE_HEADER, pages: 0, generation: meta.generation, last: INVALID, last_end: 0 }
    }

    /// Hand the log bytes of the next page to `consume` (while the page is
    /// share-locked: it should only copy them). False when the chain has
    /// ended; a damaged chain or page is an error naming the relation file.
    ///
    /// # Safety
    /// As for [`new`](Self::new).
    unsafe fn next(&mut self, consume: impl FnOnce(&[u8])) -> bool {
        if self.block == INVALID {
            return false;
        }
        if self.pages == self.nblocks {
            corrupt(&self.fork.rnode, "its log's links form a loop");
        }
        if self.block >= self.nblocks {
            // (on a hot standby redo may have grown the file since)
            self.nblocks = self.fork.nblocks();
            if self.block >= self.nblocks {
                corrupt(&self.fork.rnode, &format!("its log links to block {}, past its end ({} blocks)", self.block, self.nblocks));
            }
        }
        let buf = self.fork.read(self.block, pg_sys::ReadBufferMode::RBM_NORMAL);
        pg_sys::LockBuffer(buf, pg_sys::BUFFER_LOCK_SHARE as i32);
        let p = pages::page(buf);
        if !pages::checksum_ok(p) {
            let block = self.block;
            pg_sys::UnlockReleaseBuffer(buf);
            corrupt(&self.fork.rnode, &format!("its log is damaged: block {block} does not match its checksum"));
        }
        let bytes = pages::log_bytes(p, self.start);
        consume(bytes);
        let (next, next_start) = pages::link_of(p);
        pg_sys::UnlockReleaseBuffer(buf);
        self.last_end = self.start + bytes.len();
        self.last = self.block;
        self.pages += 1;
        (self.block, self.start) = (next, next_start);
        true
    }

    /// Is the log still the one the walk started on? On a hot standby redo
    /// may compact it (a new generation) while it is read.
    unsafe fn same_generation(&self) -> bool {
        let (mbuf, meta) = self.fork.meta(pg_sys::BUFFER_LOCK_SHARE);
        pg_sys::UnlockReleaseBuffer(mbuf);
        meta.generation == self.generation
    }

    /// After the walk ended: go on from where it ended, with the bytes
    /// added to its last page since and the pages linked after it (on a hot
    /// standby redo appends while a backend loads).
    fn resume(&mut self) {
        if self.block == INVALID && self.last != INVALID {
            (self.block, self.start) = (self.last, self.last_end);
            self.pages -= 1; // (that page is read again)
        }
    }

    /// Walk to the end: the last block.
    unsafe fn last_block(mut self) -> u32 {
        while self.next(|_| {}) {}
        self.last
    }
}

/// The table's layout, from the first entry of its log (a Create at the
/// start of the first run): read a page at a time until it is whole, and
/// again if redo compacted the log meanwhile (on a hot standby).
unsafe fn first_layout(fork: &Fork) -> Vec<anker_engine::table::ColumnSpec> {
    loop {
        let mut log = Assembler::default();
        let mut walk = ChainWalk::new(fork);
        let specs = loop {
            if let Some(run) = log.next_run() {
                if let Some((_, Change::Create { columns })) = Entries::new(run).next() {
                    break Some(columns.iter().map(|(s, _)| *s).collect());
                }
                break None;
            }
            if !walk.next(|bytes| log.feed(bytes)) {
                break None;
            }
        };
        if walk.same_generation() {
            return specs.unwrap_or_else(|| corrupt(&fork.rnode, "its log does not start with the table's creation"));
        }
    }
}

/// Replays a log's runs of entries into a table being loaded.
struct Loader<'t> {
    table: &'t Table,
    rnode: pg_sys::RelFileNode,
    /// Entries replayed, the Create included.
    changes: u64,
    first_seq: u64,
    /// Bytes of entries in runs replayed whole.
    done: usize,
    /// An image: the entries after the Create that carry its number. The
    /// log after it goes on at the next number.
    in_image: bool,
    image_end: usize,
    image_rows: u64,
    /// Why replaying stopped early: a change out of sequence, or an entry
    /// that does not decode.
    stopped: Option<String>,
    progress: Progress,
    pruner: crate::undo::ReplayPruner,
}

impl Loader<'_> {
    /// Replay the runs `log` holds now; false when replaying stopped.
    fn replay(&mut self, log: &mut Assembler) -> bool {
        while let Some(run) = log.next_run() {
            if !self.run(run) {
                return false;
            }
        }
        true
    }

    fn run(&mut self, run: &[u8]) -> bool {
        let arena = shmem::arena();
        let table = self.table;
        let mut entries = Entries::new(run);
        while let Some((seq, change)) = entries.next() {
            if self.changes == 0 {
                let Change::Create { columns } = change else {
                    corrupt(&self.rnode, "its log does not start with the table's creation")
                };
                // The table was made from the layout read before it was
                // published; on a hot standby a switch may have come in
                // between, whose image starts with columns added since.
                for (spec, _) in columns.iter().skip(table.ncols()) {
                    if let Err(e) = table.add_column(arena, *spec) {
                        crate::error::out_of_memory(e);
                    }
                }
                for (i, (_, st)) in columns.iter().enumerate() {
                    table.set_column_state(arena, i, *st);
                }
                table.durable_seq.store(seq, Ordering::Release);
                self.first_seq = seq;
                self.changes = 1;
                self.image_end = self.done + entries.consumed();
                continue;
            }
            if self.changes.is_multiple_of(16384) {
                self.progress.report(self.done + entries.consumed(), table.nrows(), self.changes);
            }
            self.in_image &= seq == self.first_seq;
            let out_of_sequence = matches!(change, Change::Create { .. }) // a log starts anew only in a new file
                || (!self.in_image && seq != table.durable_seq.load(Ordering::Acquire) + 1);
            if out_of_sequence {
                self.stopped = Some(format!("change {seq} follows"));
                return false;
            }
            if let Err(e) = table.replay(arena, &change) {
                crate::error::out_of_memory(e);
            }
            self.pruner.after(table, &change);
            table.durable_seq.store(seq, Ordering::Release);
            self.changes += 1;
            if self.in_image {
                self.image_end = self.done + entries.consumed();
                self.image_rows = table.nrows();
            }
        }
        if let Some(e) = &entries.stopped {
            self.stopped = Some(e.to_string());
            return false;
        }
        self.done += run.len();
        true
    }
}

/// The engine table of relation file `rnode` (key `key`), loaded from its
/// log if it is not in memory: every entry the fork holds, replayed in
/// sequence. None when the fork has no log (the caller starts the table
/// from the relation's layout). Whoever finds a table being loaded waits.
/// A load takes interrupts between pages; one that fails (an interrupt,
/// an error, its backend exiting) leaves nothing behind, and the next
/// reader, a waiter included, loads the table anew.
///
/// The log is read a page at a time and replayed as it is read, so a load
/// holds one chunk of it in the backend's memory besides the table. On a
/// hot standby redo does not switch the log to a new image while it is
/// read (`Directory::begin_switch`).
///
/// Tables are loaded by the backends that use them, never by redo: crash
/// recovery restores the fork page by page (PostgreSQL's rules: page LSNs,
/// full-page images), and a table is read only from a fork that is
/// consistent. On a hot standby redo goes on while a backend loads: the
/// table is published (marked loading) before the fork is read, redo
/// writes a record's pages before it looks under the table's load lock
/// whether the table is loaded, and the loader reads on until, under that
/// lock, it finds nothing new and marks the table loaded; so every change is
/// either in what the loader reads or applied by redo after the load
/// (docs/durability.md).
pub fn ensure_loaded(key: &TableKey, rnode: pg_sys::RelFileNode, permanent: bool) -> Option<&'static Table> {
    let arena = shmem::arena();
    let dir = shmem::directory();
    // SAFETY: reads backend state.
    let fork = unsafe { Fork::new(std::ptr::null_mut(), rnode, permanent) };
    // SAFETY: a flag read.
    let recovery = unsafe { pg_sys::RecoveryInProgress() };
    let (table, started) = loop {
        if let Some(t) = wait_loaded(key) {
            return Some(t);
        }
        let started = std::time::Instant::now();
        // SAFETY: reading blocks of an existing relation file through shared
        // buffers; no relcache needed.
        if unsafe { fork.nblocks() } == 0 {
            return None;
        }
        // SAFETY: as above.
        let specs = unsafe { first_layout(&fork) };
        if recovery {
            free_tables_without_file();
        }
        dir.free_abandoned(arena);
        match dir.find_or_create(arena, key, &|| specs.clone(), true) {
            Ok((t, true)) => break (t, started),
            Ok((_, false)) => {} // another process loads it meanwhile
            Err(e) => crate::error::out_of_memory(e),
        }
    };
    // A load that fails in any way (an error, a cancel, this process
    // exiting) abandons the half-loaded table; the next reader loads it
    // again.
    let mut guard = LoadInProgress::begin(table);
    // SAFETY: as above.
    let file_bytes = unsafe { fork.nblocks() } as usize * pages::BLOCK;
    let shown = &table.load_progress;
    // SAFETY: a clock read.
    shown.started.store(unsafe { pg_sys::GetCurrentTimestamp() }, Ordering::Relaxed);
    shown.bytes_total.store(file_bytes as u64, Ordering::Relaxed);
    // (last: the view shows a load once its pid is set)
    // SAFETY: MyProcPid is set in every backend.
    shown.pid.store(unsafe { pg_sys::MyProcPid } as u32, Ordering::Release);
    let mut loader = Loader {
        table,
        rnode,
        changes: 0,
        first_seq: 0,
        done: 0,
        in_image: true,
        image_end: 0,
        image_rows: 0,
        stopped: None,
        progress: Progress::new(rnode, started, file_bytes),
        pruner: crate::undo::ReplayPruner::default(),
    };
    // Published: on a standby redo may have appended since the layout was
    // read. A switch redo began before we published may be under way: the
    // log is read once it is done, and redo begins none until the load is
    // over.
    if recovery {
        while dir.switching(key) {
            // SAFETY: a plain sleep.
            unsafe { pg_sys::pg_usleep(100) };
            pg_sys::check_for_interrupts!();
        }
    }
    let mut log = Assembler::default();
    // SAFETY: as above.
    let mut walk = unsafe { ChainWalk::new(&fork) };
    // Interrupts are taken between pages, except under the load lock,
    // which redo waits for: an interrupt that ends this process there would
    // leave it taken.
    // SAFETY: as above.
    let read_on = |walk: &mut ChainWalk, log: &mut Assembler, loader: &mut Loader, interruptible: bool| -> bool {
        let mut read = false;
        while unsafe { walk.next(|bytes| { read |= !bytes.is_empty(); log.feed(bytes) }) } && loader.replay(log) {
            shown.bytes_read.store(walk.pages as u64 * pages::BLOCK as u64, Ordering::Relaxed);
            shown.changes.store(loader.changes, Ordering::Relaxed);
            if interruptible {
                pg_sys::check_for_interrupts!();
            }
        }
        read
    };
    read_on(&mut walk, &mut log, &mut loader, true);
    // On a hot standby redo does not wait for the load: it writes its
    // records' pages and leaves a table being loaded to the loader. So the
    // loader reads on from where its walk ended until a pass finds nothing
    // new, and then once more under the table's load lock, which redo takes
    // to see whether the table is loaded: a record redo wrote before the
    // table counts as loaded is read here, a later one redo applies.
    let load_lock = recovery.then(|| {
        while loader.stopped.is_none() {
            walk.resume();
            if !read_on(&mut walk, &mut log, &mut loader, true) {
                break;
            }
        }
        let g = table.load_lock.lock();
        if loader.stopped.is_none() {
            walk.resume();
            read_on(&mut walk, &mut log, &mut loader, false);
        }
        g
    });
    if loader.changes == 0 {
        corrupt(&rnode, "its log does not start with the table's creation");
    }
    let end = table.durable_seq.load(Ordering::Acquire);
    if let Some(why) = &loader.stopped {
        // A consistent fork holds whole, consecutive entries (on a hot
        // standby too: a loader reads a record's pages all or none, and no
        // switch while it reads): the file was damaged behind PostgreSQL's
        // back, and the table is not loaded (its waiters get an error too).
        corrupt(&rnode, &format!("its log is damaged after change {end}: {why}"));
    }
    // SAFETY: as above.
    if recovery && !unsafe { walk.same_generation() } {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            format!(
                "anker: the log of relation file {}/{}/{} was switched to a new image while it was loaded",
                rnode.spcNode, rnode.dbNode, rnode.relNode
            )
        );
    }
    let log_len = loader.done;
    table.image_bytes.store(loader.image_end as u64, Ordering::Relaxed);
    table.image_rows.store(loader.image_rows, Ordering::Relaxed);
    table.log_bytes.store((log_len - loader.image_end) as u64, Ordering::Relaxed);
    table.log_permanent.store(permanent as u32, Ordering::Release);
    table.log_tail.store(walk.last, Ordering::Release);
    table.rebuild_free_rows(arena);
    guard.loaded();
    table.loading.store(0, Ordering::Release);
    drop(load_lock);
    settle_tentative_columns(table);
    let ms = started.elapsed().as_secs_f64() * 1e3;
    if log_len > 1 << 20 || ms > 100.0 {
        pgrx::log!(
            "anker: loaded relation file {}/{}/{}: {} rows from {} changes, {} kB of log, in {:.0} ms",
            rnode.spcNode,
            rnode.dbNode,
            rnode.relNode,
            table.nrows(),
            loader.changes,
            log_len / 1024,
            ms
        );
    }
    Some(table)
}

/// Progress lines of a long load, at PostgreSQL's
/// `log_startup_progress_interval` (10 s by default; 0: none), like the
/// startup process's own during recovery.
struct Progress {
    rnode: pg_sys::RelFileNode,
    started: std::time::Instant,
    interval: std::time::Duration,
    total: usize,
    next: std::time::Duration,
}

impl Progress {
    fn new(rnode: pg_sys::RelFileNode, started: std::time::Instant, total: usize) -> Progress {
        // SAFETY: a built-in GUC read by name; parse_int only reads it.
        let ms = unsafe {
            let v = pg_sys::GetConfigOption(c"log_startup_progress_interval".as_ptr(), true, false);
            let mut ms = 0;
            if v.is_null() || !pg_sys::parse_int(v, &mut ms, pg_sys::GUC_UNIT_MS as i32, std::ptr::null_mut()) {
                ms = 10_000;
            }
            ms.max(0) as u64
        };
        let interval = std::time::Duration::from_millis(ms);
        Progress { rnode, started, interval, total, next: interval }
    }

    fn report(&mut self, read: usize, rows: u64, changes: u64) {
        let elapsed = self.started.elapsed();
        if self.interval.is_zero() || elapsed < self.next {
            return;
        }
        self.next = elapsed + self.interval;
        pgrx::log!(
            "anker: loading relation file {}/{}/{}, elapsed time: {:.2} s, {} kB of log replayed (the file has {} kB), {rows} rows from {changes} changes so far",
            self.rnode.spcNode,
            self.rnode.dbNode,
            self.rnode.relNode,
            elapsed.as_secs_f64(),
            read / 1024,
            self.total / 1024
        );
    }
}

/// Free the tables in memory whose relation file is gone: dropped,
/// truncated or rewritten on the primary and removed by redo, which does not
/// tell us (the files go with the commit record, not with one of ours). A
/// hot standby's loads call this, redo every ten seconds while it applies
/// anker records, and redo's cleanup at promotion. No backend still reads
/// such a table: redo took the relation's AccessExclusiveLock before
/// removing the file, cancelling readers.
pub(crate) fn free_tables_without_file() {
    let arena = shmem::arena();
    let dir = shmem::directory();
    let mut gone = vec![];
    dir.for_each(arena, |t| {
        if t.key[3] == pg_sys::InvalidBackendId as u32 && t.loading.load(Ordering::Acquire) == 0 {
            gone.push(t.key);
        }
    });
    gone.retain(|k| {
        let rnode = pg_sys::RelFileNode { spcNode: k[0].into(), dbNode: k[1].into(), relNode: k[2].into() };
        // SAFETY: opening an smgr handle by file name needs no relcache.
        unsafe {
            let smgr = pg_sys::smgropen(rnode, pg_sys::InvalidBackendId);
            !pg_sys::smgrexists(smgr, pg_sys::ForkNumber::MAIN_FORKNUM)
        }
    });
    for k in gone {
        dir.drop_table(arena, &k);
    }
}

/// The table of `key` once it is loaded; None when the directory has none
/// (not in memory, or its load failed: the caller loads it). Whoever finds
/// it being loaded waits, and looks it up again, inside a reclamation
/// epoch, each time it checks: a failed load frees the table
/// (`Directory::abandon`).
fn wait_loaded(key: &TableKey) -> Option<&'static Table> {
    let (arena, dir) = (shmem::arena(), shmem::directory());
    loop {
        {
            let _epoch = shmem::enter_epoch();
            match dir.lookup(arena, key) {
                None => return None,
                // (loaded tables are freed only under the relation's lock)
                Some(t) if t.loading.load(Ordering::Acquire) == 0 => return Some(t),
                Some(_) => {}
            }
        }
        // SAFETY: a 1 ms wait on our latch, shown in pg_stat_activity as
        // the wait event Extension; ends the process if the postmaster died.
        unsafe {
            pg_sys::WaitLatch(
                pg_sys::MyLatch,
                (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
                1,
                pg_sys::PG_WAIT_EXTENSION,
            );
            pg_sys::ResetLatch(pg_sys::MyLatch);
        }
        pg_sys::check_for_interrupts!();
    }
}

/// The load of a table by this process: unless [`loaded`](Self::loaded)
/// is called, the half-loaded table is abandoned (`Directory::abandon`),
/// when an error unwinds through the guard, or, for a FATAL error (a
/// terminated backend, a shutdown), which exits the process without
/// unwinding, by a callback at exit.
struct LoadInProgress {
    table: &'static Table,
    loaded: bool,
}

/// The table this process is loading, for [`abandon_load_at_exit`].
static mut LOADING_NOW: Option<&'static Table> = None;

/// The virtual transaction id of this backend's transaction, packed for
/// `Table::loader`.
fn own_vxid() -> u64 {
    // SAFETY: MyProc is this backend's; a transaction is in progress.
    unsafe { ((*pg_sys::MyProc).backendId as u32 as u64) << 32 | (*pg_sys::MyProc).lxid as u64 }
}

/// A `Table::loader` value as a virtual transaction id.
pub(crate) fn loader_vxid(packed: u64) -> pg_sys::VirtualTransactionId {
    pg_sys::VirtualTransactionId { backendId: (packed >> 32) as i32, localTransactionId: packed as u32 }
}

impl LoadInProgress {
    fn begin(table: &'static Table) -> LoadInProgress {
        table.loader.store(own_vxid(), Ordering::Release);
        static mut EXIT_CALLBACK: bool = false;
        // SAFETY: backends are single-threaded; registering a callback is
        // allowed at any time.
        unsafe {
            if !EXIT_CALLBACK {
                pg_sys::before_shmem_exit(Some(abandon_load_at_exit), pg_sys::Datum::from(0));
                EXIT_CALLBACK = true;
            }
            LOADING_NOW = Some(table);
        }
        LoadInProgress { table, loaded: false }
    }

    fn loaded(&mut self) {
        self.loaded = true;
    }
}

impl Drop for LoadInProgress {
    fn drop(&mut self) {
        // SAFETY: single-threaded; see begin.
        unsafe { LOADING_NOW = None };
        if !self.loaded {
            shmem::directory().abandon(shmem::arena(), self.table);
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn abandon_load_at_exit(_code: std::ffi::c_int, _arg: pg_sys::Datum) {
    // SAFETY: single-threaded; the arena is still attached.
    if let Some(t) = unsafe { (*(&raw mut LOADING_NOW)).take() } {
        shmem::directory().abandon(shmem::arena(), t);
    }
}

/// Columns added by transactions that ended without settling them in the
/// log (a crash between the commit or abort and the callback that logs
/// it): keep them or mark them left behind by the transaction's fate, and
/// log that.
fn settle_tentative_columns(table: &Table) {
    let arena = shmem::arena();
    for i in 0..table.ncols() {
        let c = table.column(arena, i);
        let xid = c.owner_xid();
        if c.state() != ColumnState::Tentative || xid == 0 {
            continue;
        }
        // SAFETY: clog lookups of an assigned transaction id, within the
        // clog's horizon (VACUUM loads the table, and so settles its
        // columns, before the horizon can pass them).
        let state = unsafe {
            if pg_sys::TransactionIdPrecedes(xid.into(), (*pg_sys::ShmemVariableCache).oldestClogXid)
                || pg_sys::TransactionIdIsInProgress(xid.into())
            {
                continue;
            }
            if pg_sys::TransactionIdDidCommit(xid.into()) {
                ColumnState::Permanent
            } else {
                ColumnState::Leftover
            }
        };
        set_column_state(table, i, state, &[]);
    }
}

/// Settle tentative column `col` of `table` as `state`, logged.
pub fn set_column_state(table: &Table, col: usize, state: ColumnState, removed: &[TableKey]) {
    let arena = shmem::arena();
    write_table(table, removed, |log| {
        if table.column(arena, col).state() == ColumnState::Tentative {
            table.set_column_state(arena, col, state);
            log.push(&Change::ColumnState { col, state });
        }
    });
}
