//! Durability: every change to an anker table goes to its change log, kept
//! in the relation's main fork through PostgreSQL's buffer manager and
//! protected by WAL records of our resource manager (`redo.rs`). Design,
//! invariants and what was rejected: `docs/durability.md`.
//!
//! Fork layout (8 kB pages with PostgreSQL's page header, so WAL's page LSN
//! interlock and full-page images work as for any relation):
//!
//! * block 0: metapage (magic, format version);
//! * blocks 1..: the log, a byte stream over the pages' data areas (from the
//!   header to `pd_lower`) made of *chunks* `[length u32][kind u8][bytes]`.
//!   A chunk of kind [`WHOLE`] holds complete framed entries
//!   (`anker_engine::change::frame`); an entry too large for one WAL record
//!   is cut into [`FIRST`], [`MIDDLE`]... [`LAST`] pieces. One WAL record
//!   appends exactly one chunk.
//!
//! Writers run the engine change and log it while holding the exclusive
//! content lock of the log's last block: the log lock, which orders a
//! table's changes as the engine applied them. A table's entries carry
//! consecutive sequence numbers (`Table::durable_seq`), so redo can tell
//! which changes a table loaded from disk already has.

pub mod redo;

use crate::shmem;
use anker_engine::change::{frame, Change, Entries};
use anker_engine::table::{ColumnState, Table, TableKey};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use std::sync::atomic::Ordering;

/// Our resource manager id (custom range 128..=255, PostgreSQL 15).
pub const RMGR_ID: u8 = 133;
const MAGIC: u32 = 0x414e_4b52; // "ANKR"
const FORMAT_VERSION: u32 = 1;

/// Chunk kinds.
const WHOLE: u8 = 1;
const FIRST: u8 = 2;
const MIDDLE: u8 = 3;
const LAST: u8 = 4;
const CHUNK_HEADER: usize = 5;

/// Bytes of a page's header (`SizeOfPageHeaderData`).
const PAGE_HEADER: usize = 24;
const BLOCK: usize = pg_sys::BLCKSZ as usize;
/// Log bytes per page.
const PAGE_DATA: usize = BLOCK - PAGE_HEADER;
/// Pages one WAL record may fill (at most 33 block references a record;
/// room for the tail block and the metapage).
const MAX_RECORD_PAGES: usize = 30;

// ---- pages -----------------------------------------------------------------------

/// The page of a pinned buffer.
unsafe fn page(buf: pg_sys::Buffer) -> *mut u8 {
    if buf < 0 {
        *pg_sys::LocalBufferBlockPointers.offset((-buf - 1) as isize) as *mut u8
    } else {
        (pg_sys::BufferBlocks as *mut u8).add((buf as usize - 1) * BLOCK)
    }
}

unsafe fn header(p: *mut u8) -> &'static mut pg_sys::PageHeaderData {
    &mut *(p as *mut pg_sys::PageHeaderData)
}

unsafe fn init_page(p: *mut u8) {
    pg_sys::PageInit(p as pg_sys::Page, BLOCK, 0);
}

unsafe fn set_lsn(p: *mut u8, lsn: pg_sys::XLogRecPtr) {
    header(p).pd_lsn = pg_sys::PageXLogRecPtr { xlogid: (lsn >> 32) as u32, xrecoff: lsn as u32 };
}

/// Append `bytes` to the page's data area (they fit).
unsafe fn append_to_page(p: *mut u8, bytes: &[u8]) {
    let h = header(p);
    let at = h.pd_lower as usize;
    debug_assert!(at + bytes.len() <= BLOCK);
    std::ptr::copy_nonoverlapping(bytes.as_ptr(), p.add(at), bytes.len());
    h.pd_lower = (at + bytes.len()) as u16;
}

/// Free bytes in a log page.
unsafe fn room(p: *mut u8) -> usize {
    BLOCK - header(p).pd_lower as usize
}

/// The metapage's contents.
fn meta_bytes() -> Vec<u8> {
    let mut v = MAGIC.to_le_bytes().to_vec();
    v.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    v
}

// ---- writing ---------------------------------------------------------------------

/// The changes one write makes, framed as log entries.
pub struct Log {
    entries: Vec<u8>,
    next_seq: u64,
    count: u64,
    enabled: bool,
}

impl Log {
    /// Record `change` (made to the engine table just now).
    pub fn push(&mut self, change: &Change) {
        if self.enabled {
            frame(self.next_seq, change, &mut self.entries);
            self.next_seq += 1;
            self.count += 1;
        }
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
    permanent: bool,
}

impl Fork {
    /// The fork `rel`'s relcache entry names, unless `rel` is temporary
    /// (temporary tables keep no log: they end with their session).
    unsafe fn of(rel: pg_sys::Relation, rnode: pg_sys::RelFileNode, persistence: std::ffi::c_char) -> Option<Fork> {
        if persistence == pg_sys::RELPERSISTENCE_TEMP as std::ffi::c_char {
            return None;
        }
        Some(Fork { rel, rnode, permanent: persistence == pg_sys::RELPERSISTENCE_PERMANENT as std::ffi::c_char })
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
    /// caller holds the extension lock or the log lock (appenders are
    /// serialised by the log lock, first writers by the extension lock).
    unsafe fn extend(&self) -> pg_sys::Buffer {
        self.read(pg_sys::InvalidBlockNumber, pg_sys::ReadBufferMode::RBM_ZERO_AND_LOCK)
    }

    unsafe fn lock_extension(&self) {
        pg_sys::LockRelationForExtension(self.rel, pg_sys::ExclusiveLock as pg_sys::LOCKMODE);
    }

    unsafe fn unlock_extension(&self) {
        pg_sys::UnlockRelationForExtension(self.rel, pg_sys::ExclusiveLock as pg_sys::LOCKMODE);
    }
}

/// `START_CRIT_SECTION()`: errors become PANICs until the end.
unsafe fn start_crit_section() {
    pg_sys::CritSectionCount += 1;
}

unsafe fn end_crit_section() {
    pg_sys::CritSectionCount -= 1;
}

/// Make a change to `table` (the storage of `rel`) durable: `op` applies it
/// to the engine table and describes it in the [`Log`]; both happen under
/// the log lock, and what `op` recorded is appended (and WAL-logged) before
/// the lock is released.
pub fn write<R>(rel: pg_sys::Relation, table: &Table, op: impl FnOnce(&mut Log) -> R) -> R {
    // SAFETY: rel is open.
    let fork = unsafe { Fork::current(rel) };
    write_to(fork, table, op)
}

/// [`write`] without a relation at hand (transaction callbacks): a table
/// whose log has been written or loaded in this server's life. Others
/// (temporary tables, or none yet) change in memory only.
pub fn write_table<R>(table: &Table, op: impl FnOnce(&mut Log) -> R) -> R {
    let key = table.key;
    let fork = (key[3] == pg_sys::InvalidBackendId as u32 && table.log_tail.load(Ordering::Acquire) != u32::MAX).then(|| Fork {
        rel: std::ptr::null_mut(),
        rnode: pg_sys::RelFileNode { spcNode: key[0].into(), dbNode: key[1].into(), relNode: key[2].into() },
        permanent: table.log_permanent.load(Ordering::Acquire) != 0,
    });
    write_to(fork, table, op)
}

fn write_to<R>(fork: Option<Fork>, table: &Table, op: impl FnOnce(&mut Log) -> R) -> R {
    // A hot standby's memory follows the primary's log through redo; what
    // it settles itself (loading) is not written.
    // SAFETY: a flag read.
    let Some(fork) = fork.filter(|_| unsafe { !pg_sys::RecoveryInProgress() }) else {
        let mut log = Log { entries: vec![], next_seq: 0, count: 0, enabled: false };
        return op(&mut log);
    };
    // SAFETY: buffers are pinned and locked by us until the end of this
    // function (an error releases them with the transaction).
    unsafe {
        let tail = lock_tail(fork, table);
        let mut log = Log { entries: Vec::new(), next_seq: table.durable_seq.load(Ordering::Acquire) + 1, count: 0, enabled: true };
        let r = op(&mut log);
        let tail = if log.count > 0 {
            // Published before `append` lets go of any block: whoever gets
            // an old tail sees it moved, and waits for the new one we hold.
            table.durable_seq.fetch_add(log.count, Ordering::AcqRel);
            append(fork, table, tail, &log.entries)
        } else {
            tail
        };
        pg_sys::UnlockReleaseBuffer(tail);
        r
    }
}

/// Pin and exclusively lock the last block of the log (creating the fork's
/// first blocks if it has none): the table's log lock.
unsafe fn lock_tail(fork: Fork, table: &Table) -> pg_sys::Buffer {
    loop {
        let tail = table.log_tail.load(Ordering::Acquire);
        if tail == u32::MAX {
            // (only with a relation: `write_table` never gets here)
            fork.lock_extension();
            if table.log_tail.load(Ordering::Acquire) == u32::MAX {
                let n = fork.nblocks();
                if n >= 2 {
                    table.log_permanent.store(fork.permanent as u32, Ordering::Release);
                    table.log_tail.store(n - 1, Ordering::Release);
                } else {
                    // a fork without a log: a table from before durability,
                    // or an unlogged one reset after a crash
                    init_fork(fork, table);
                }
            }
            fork.unlock_extension();
            continue;
        }
        let buf = fork.read_locked(tail);
        if table.log_tail.load(Ordering::Acquire) == tail {
            return buf;
        }
        pg_sys::UnlockReleaseBuffer(buf);
    }
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
    let chunk = chunk(WHOLE, &entries);
    let mb = meta_bytes();
    start_crit_section();
    let mp = page(meta);
    init_page(mp);
    append_to_page(mp, &mb);
    pg_sys::MarkBufferDirty(meta);
    let fp = page(first);
    init_page(fp);
    append_to_page(fp, &chunk);
    pg_sys::MarkBufferDirty(first);
    if fork.permanent {
        pg_sys::XLogBeginInsert();
        let main = redo::RecordHeader { new_pages: 0b11, meta_pages: 0b01 };
        pg_sys::XLogRegisterData(&main as *const _ as *mut std::ffi::c_char, std::mem::size_of::<redo::RecordHeader>() as i32);
        pg_sys::XLogRegisterBuffer(0, meta, pg_sys::REGBUF_WILL_INIT as u8);
        pg_sys::XLogRegisterBufData(0, mb.as_ptr() as *mut std::ffi::c_char, mb.len() as i32);
        pg_sys::XLogRegisterBuffer(1, first, pg_sys::REGBUF_WILL_INIT as u8);
        pg_sys::XLogRegisterBufData(1, chunk.as_ptr() as *mut std::ffi::c_char, chunk.len() as i32);
        let lsn = pg_sys::XLogInsert(RMGR_ID, redo::XLOG_ANKER_APPEND);
        set_lsn(mp, lsn);
        set_lsn(fp, lsn);
    }
    end_crit_section();
    let first_block = pg_sys::BufferGetBlockNumber(first);
    pg_sys::UnlockReleaseBuffer(meta);
    pg_sys::UnlockReleaseBuffer(first);
    table.durable_seq.store(seq, Ordering::Release);
    table.log_permanent.store(fork.permanent as u32, Ordering::Release);
    table.log_tail.store(first_block, Ordering::Release);
}

fn chunk(kind: u8, bytes: &[u8]) -> Vec<u8> {
    let mut c = Vec::with_capacity(CHUNK_HEADER + bytes.len());
    c.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    c.push(kind);
    c.extend_from_slice(bytes);
    c
}

/// Append framed `entries` to the log whose last block is `tail` (pinned,
/// locked): one chunk, or pieces when they would fill more pages than a WAL
/// record may carry. Returns the new last block, pinned and locked (the
/// caller releases it).
unsafe fn append(fork: Fork, table: &Table, mut tail: pg_sys::Buffer, entries: &[u8]) -> pg_sys::Buffer {
    let max_piece = (MAX_RECORD_PAGES - 1) * PAGE_DATA - 2 * CHUNK_HEADER;
    if entries.len() <= max_piece {
        return append_chunk(fork, table, tail, &chunk(WHOLE, entries));
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
        tail = append_chunk(fork, table, tail, &chunk(kind, p));
    }
    tail
}

/// Append one chunk in one WAL record.
unsafe fn append_chunk(fork: Fork, table: &Table, tail: pg_sys::Buffer, chunk: &[u8]) -> pg_sys::Buffer {
    // Which pages take which bytes: what fits in the tail, then new pages.
    let mut parts: Vec<(pg_sys::Buffer, bool, &[u8])> = vec![];
    let mut rest = chunk;
    let in_tail = room(page(tail)).min(rest.len());
    parts.push((tail, false, &rest[..in_tail]));
    rest = &rest[in_tail..];
    while !rest.is_empty() {
        let n = PAGE_DATA.min(rest.len());
        parts.push((fork.extend(), true, &rest[..n]));
        rest = &rest[n..];
    }
    if fork.permanent && parts.len() > pg_sys::XLR_NORMAL_MAX_BLOCK_ID as usize {
        // (allocates: before the critical section)
        pg_sys::XLogEnsureRecordSpace(parts.len() as i32 - 1, parts.len() as i32 + 1);
    }
    start_crit_section();
    for (buf, new, bytes) in &parts {
        let p = page(*buf);
        if *new {
            init_page(p);
        }
        append_to_page(p, bytes);
        pg_sys::MarkBufferDirty(*buf);
    }
    if fork.permanent {
        pg_sys::XLogBeginInsert();
        let mut new_pages = 0u64;
        for (k, (_, new, _)) in parts.iter().enumerate() {
            if *new {
                new_pages |= 1 << k;
            }
        }
        let main = redo::RecordHeader { new_pages, meta_pages: 0 };
        pg_sys::XLogRegisterData(&main as *const _ as *mut std::ffi::c_char, std::mem::size_of::<redo::RecordHeader>() as i32);
        for (k, (buf, new, bytes)) in parts.iter().enumerate() {
            // A full-page image of the tail would leave the bytes out of the
            // record; redo applies them to the table in memory as well.
            let flags = if *new { pg_sys::REGBUF_WILL_INIT } else { pg_sys::REGBUF_STANDARD | pg_sys::REGBUF_KEEP_DATA };
            pg_sys::XLogRegisterBuffer(k as u8, *buf, flags as u8);
            pg_sys::XLogRegisterBufData(k as u8, bytes.as_ptr() as *mut std::ffi::c_char, bytes.len() as i32);
        }
        let lsn = pg_sys::XLogInsert(RMGR_ID, redo::XLOG_ANKER_APPEND);
        for (buf, _, _) in &parts {
            set_lsn(page(*buf), lsn);
        }
    }
    end_crit_section();
    // Keep the new last block locked; release the others once writers
    // waiting for them can see the log moved on.
    let (last, _, _) = *parts.last().expect("at least the tail");
    if last != tail {
        table.log_tail.store(pg_sys::BufferGetBlockNumber(last), Ordering::Release);
    }
    for (buf, _, _) in &parts[..parts.len() - 1] {
        pg_sys::UnlockReleaseBuffer(*buf);
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

/// The log bytes of a fork read block by block.
fn log_stream(nblocks: u32, mut read: impl FnMut(u32) -> Vec<u8>) -> Result<Vec<u8>, String> {
    if nblocks == 0 {
        return Ok(vec![]);
    }
    let meta = read(0);
    if meta.len() < 8 || meta[..4] != MAGIC.to_le_bytes() {
        return Err("its first block is not an anker metapage".into());
    }
    let version = u32::from_le_bytes(meta[4..8].try_into().expect("4 bytes"));
    if version != FORMAT_VERSION {
        return Err(format!("its format version is {version}, this anker reads {FORMAT_VERSION}"));
    }
    let mut stream = Vec::with_capacity(nblocks as usize * PAGE_DATA);
    for b in 1..nblocks {
        stream.extend_from_slice(&read(b));
    }
    Ok(stream)
}

/// The framed entries of a log stream, pieces reassembled; a chunk cut off
/// or pieces never finished (a crash while writing them) end the log.
fn entry_bytes(stream: &[u8]) -> Vec<u8> {
    let mut out = vec![];
    let mut pending: Option<Vec<u8>> = None;
    let mut at = 0;
    while at + CHUNK_HEADER <= stream.len() {
        let len = u32::from_le_bytes(stream[at..at + 4].try_into().expect("4 bytes")) as usize;
        let kind = stream[at + 4];
        let Some(body) = stream.get(at + CHUNK_HEADER..at + CHUNK_HEADER + len) else { break };
        match kind {
            WHOLE => {
                pending = None;
                out.extend_from_slice(body);
            }
            FIRST => pending = Some(body.to_vec()),
            MIDDLE | LAST => match pending.as_mut() {
                Some(p) => {
                    p.extend_from_slice(body);
                    if kind == LAST {
                        out.extend_from_slice(&pending.take().expect("pending"));
                    }
                }
                None => {} // the start was lost: skip
            },
            _ => break,
        }
        at += CHUNK_HEADER + len;
    }
    out
}

/// Bytes of the data area of a log page (or of the metapage).
unsafe fn page_data(p: *const u8) -> Vec<u8> {
    let lower = (*(p as *const pg_sys::PageHeaderData)).pd_lower as usize;
    if (PAGE_HEADER..=BLOCK).contains(&lower) {
        std::slice::from_raw_parts(p.add(PAGE_HEADER), lower - PAGE_HEADER).to_vec()
    } else {
        vec![] // a never-initialised (zero) page
    }
}

fn corrupt(rnode: &pg_sys::RelFileNode, why: &str) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
        format!("anker: cannot load relation file {}/{}/{}: {why}", rnode.spcNode, rnode.dbNode, rnode.relNode)
    );
}

/// The log bytes of relation file `rnode`, or None when it has no log (no
/// file, or an empty one).
unsafe fn read_log(rnode: pg_sys::RelFileNode, permanent: bool) -> Option<(Vec<u8>, u32)> {
    let fork = Fork { rel: std::ptr::null_mut(), rnode, permanent };
    let nblocks = fork.nblocks();
    if nblocks == 0 {
        return None;
    }
    let read = |b: u32| {
        let buf = fork.read(b, pg_sys::ReadBufferMode::RBM_NORMAL);
        pg_sys::LockBuffer(buf, pg_sys::BUFFER_LOCK_SHARE as i32);
        let d = page_data(page(buf));
        pg_sys::UnlockReleaseBuffer(buf);
        d
    };
    match log_stream(nblocks, read) {
        Ok(s) if s.is_empty() => None,
        Ok(s) => Some((s, nblocks)),
        Err(why) => corrupt(&rnode, &why),
    }
}

/// The engine table of relation file `rnode` (key `key`), loaded from its
/// log if it is not in memory: every entry the fork holds, replayed in
/// sequence. None when the fork has no log (the caller starts the table
/// from the relation's layout). Whoever finds a table being loaded waits.
///
/// Tables are loaded by the backends that use them, never by redo: crash
/// recovery restores the fork page by page (PostgreSQL's rules: page LSNs,
/// full-page images), and a table is read only from a fork that is
/// consistent. On a hot standby redo goes on while a backend loads: the
/// table is published (marked loading) before the fork is read, and redo
/// writes a record's pages before it looks for the table in memory, so
/// every change is either in what the loader reads or applied by redo
/// after the load (docs/durability.md).
pub fn ensure_loaded(key: &TableKey, rnode: pg_sys::RelFileNode, permanent: bool) -> Option<&'static Table> {
    let arena = shmem::arena();
    let dir = shmem::directory();
    if let Some(t) = dir.lookup(arena, key) {
        wait_loaded(t);
        return Some(t);
    }
    let started = std::time::Instant::now();
    // SAFETY: reading blocks of an existing relation file through shared
    // buffers; no relcache needed.
    let (stream, _) = unsafe { read_log(rnode, permanent)? };
    let bytes = entry_bytes(&stream);
    let Some((_, Change::Create { columns })) = Entries::new(&bytes).next() else {
        corrupt(&rnode, "its log does not start with the table's creation")
    };
    let specs: Vec<_> = columns.iter().map(|(s, _)| *s).collect();
    let (table, created) = match dir.find_or_create(arena, key, &|| specs.clone(), true) {
        Ok(x) => x,
        Err(e) => crate::error::out_of_memory(e),
    };
    if !created {
        wait_loaded(table);
        return Some(table);
    }
    // Should loading fail (out of memory, a damaged log), the half-loaded
    // table stays marked as failed: its waiters raise an error instead of
    // using it.
    struct Failed<'a>(&'a Table, bool);
    impl Drop for Failed<'_> {
        fn drop(&mut self) {
            if !self.1 {
                self.0.loading.store(LOAD_FAILED, Ordering::Release);
            }
        }
    }
    let mut guard = Failed(table, false);
    // Published: on a standby redo may have appended since the first read.
    // SAFETY: as above; a flag read.
    let (stream, nblocks) = if unsafe { pg_sys::RecoveryInProgress() } {
        unsafe { read_log(rnode, permanent) }.expect("a log does not vanish while its table is used")
    } else {
        (stream, unsafe { Fork { rel: std::ptr::null_mut(), rnode, permanent }.nblocks() })
    };
    let bytes = entry_bytes(&stream);
    let mut entries = Entries::new(&bytes);
    let Some((first_seq, Change::Create { columns })) = entries.next() else {
        corrupt(&rnode, "its log does not start with the table's creation")
    };
    for (i, (_, st)) in columns.iter().enumerate() {
        table.column(arena, i).set_state(*st);
    }
    table.durable_seq.store(first_seq, Ordering::Release);
    let mut n = 1u64;
    let mut gap = None;
    for (seq, change) in &mut entries {
        if seq != table.durable_seq.load(Ordering::Acquire) + 1 {
            gap = Some(seq);
            break;
        }
        if let Change::Create { .. } = change {
            break; // cannot happen: a log starts anew in a new file
        }
        if let Err(e) = table.replay(arena, &change) {
            crate::error::out_of_memory(e);
        }
        table.durable_seq.store(seq, Ordering::Release);
        n += 1;
    }
    let end = table.durable_seq.load(Ordering::Acquire);
    if let Some(why) = gap.map(|g| format!("change {g} follows")).or(entries.stopped.as_ref().map(|e| e.to_string())) {
        // A consistent fork ends with whole entries. A cut-off chunk at the
        // end is a standby's load racing redo (redo applies the rest);
        // anything else means the file was damaged behind PostgreSQL's back.
        // SAFETY: a flag read.
        let level = if unsafe { pg_sys::RecoveryInProgress() } { PgLogLevel::LOG } else { PgLogLevel::WARNING };
        pgrx::ereport!(
            level,
            PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
            format!("anker: the log of relation file {}/{}/{} ends after change {end}: {why}", rnode.spcNode, rnode.dbNode, rnode.relNode)
        );
    }
    table.log_permanent.store(permanent as u32, Ordering::Release);
    table.log_tail.store(nblocks - 1, Ordering::Release);
    table.rebuild_free_rows(arena);
    guard.1 = true;
    table.loading.store(0, Ordering::Release);
    settle_tentative_columns(table);
    let ms = started.elapsed().as_secs_f64() * 1e3;
    if stream.len() > 1 << 20 || ms > 100.0 {
        pgrx::log!(
            "anker: loaded relation file {}/{}/{}: {} rows from {} changes, {} kB of log, in {:.0} ms",
            rnode.spcNode,
            rnode.dbNode,
            rnode.relNode,
            table.nrows(),
            n,
            stream.len() / 1024,
            ms
        );
    }
    Some(table)
}

/// `Table::loading` after a load that failed.
pub(crate) const LOAD_FAILED: u32 = 2;

/// Wait while another process loads `table`.
pub fn wait_loaded(table: &Table) {
    loop {
        match table.loading.load(Ordering::Acquire) {
            0 => return,
            LOAD_FAILED => {
                ereport!(
                    ERROR,
                    PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                    "anker: loading this table from disk failed",
                    "The server log says why (out of memory: raise anker.memory_limit and restart the server)."
                );
            }
            _ => {}
        }
        // SAFETY: a plain sleep; interrupts are honoured.
        unsafe {
            pg_sys::pg_usleep(1000);
        }
        pg_sys::check_for_interrupts!();
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
        set_column_state(table, i, state);
    }
}

/// Settle tentative column `col` of `table` as `state`, logged.
pub fn set_column_state(table: &Table, col: usize, state: ColumnState) {
    let arena = shmem::arena();
    write_table(table, |log| {
        let c = table.column(arena, col);
        if c.state() == ColumnState::Tentative {
            c.set_state(state);
            log.push(&Change::ColumnState { col, state });
        }
    });
}
