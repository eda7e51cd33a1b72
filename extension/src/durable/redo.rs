//! anker's WAL resource manager: redo of its three record kinds (APPEND:
//! log bytes added to a table's change log; IMAGE: pages of an image being
//! written; SWITCH: an image made the log's head, blocks freed), and
//! descriptions for `pg_waldump` and `pg_walinspect`. Every record is a list
//! of page operations that `pages::apply` executes. A fourth kind, ROW,
//! exists for logical decoding only (`logical.rs`, also our `rm_decode`):
//! redo has nothing to do for it. A fifth, HORIZON, touches no page: on a
//! hot standby it resolves recovery conflicts (`horizon.rs`).
//!
//! Redo runs in the startup process, which inherits the arena, without
//! catalog access: a record names its relation file through its block
//! references, and its chunk carries complete entries (or pieces of one;
//! a row change's entries leave out the xid the record's header carries,
//! and are expanded before they reach a page: `pages::expand_op`).
//! Pages are redone by PostgreSQL's rules (page LSN, full-page images).
//! Crash recovery redoes pages only; tables are loaded from their forks by
//! the backends that use them, once the forks are consistent. On a hot
//! standby, tables its backends have loaded also get the changes, by
//! sequence number (a table loaded meanwhile skips those it has).

use super::horizon::{self, XLOG_ANKER_HORIZON};
use super::logical::{self, XLOG_ANKER_ROW};
use super::pages::{self, RecordHeader, XLOG_ANKER_APPEND, XLOG_ANKER_IMAGE, XLOG_ANKER_SWITCH, XLOG_ANKER_XID_LEFT_OUT};
use super::RMGR_ID;
use anker_engine::chunk::{parse_chunk, FIRST, LAST, MIDDLE, WHOLE};
use crate::shmem;
use anker_engine::change::{Change, DecodeError, Entries};
use anker_engine::table::TableKey;
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

static mut RMGR: pg_sys::RmgrData = pg_sys::RmgrData {
    rm_name: c"anker".as_ptr(),
    rm_redo: Some(redo),
    rm_desc: Some(desc),
    rm_identify: Some(identify),
    rm_startup: None,
    rm_cleanup: Some(cleanup),
    rm_mask: None,
    rm_decode: Some(logical::decode),
};

/// Register the resource manager (postmaster, `shared_preload_libraries`).
pub fn register() {
    // SAFETY: called once from _PG_init while preloading; PostgreSQL keeps
    // the pointer to our static.
    unsafe { pg_sys::RegisterCustomRmgr(RMGR_ID, &raw mut RMGR) };
}

unsafe fn record_header(record: *mut pg_sys::XLogReaderState) -> RecordHeader {
    let d = (*record).record;
    if (*d).main_data_len as usize >= std::mem::size_of::<RecordHeader>() {
        ((*d).main_data as *const RecordHeader).read_unaligned()
    } else {
        RecordHeader { new_pages: 0, meta_pages: 0 }
    }
}

/// The block references of a record, in order: id, relation file, block
/// number, data.
unsafe fn blocks(record: *mut pg_sys::XLogReaderState) -> Vec<(u8, pg_sys::RelFileNode, u32, &'static [u8])> {
    let d = (*record).record;
    let mut out = vec![];
    for id in 0..=(*d).max_block_id {
        if id < 0 || !(*(*d).blocks.as_ptr().add(id as usize)).in_use {
            continue;
        }
        let mut rnode = pg_sys::RelFileNode::default();
        let mut fork = pg_sys::ForkNumber::MAIN_FORKNUM;
        let mut block = 0;
        pg_sys::XLogRecGetBlockTag(record, id as u8, &mut rnode, &mut fork, &mut block);
        let mut len: pg_sys::Size = 0;
        let p = pg_sys::XLogRecGetBlockData(record, id as u8, &mut len);
        let data = if p.is_null() { &[][..] } else { std::slice::from_raw_parts(p as *const u8, len) };
        out.push((id as u8, rnode, block, data));
    }
    out
}

fn key_of(rnode: &pg_sys::RelFileNode) -> TableKey {
    [rnode.spcNode.into(), rnode.dbNode.into(), rnode.relNode.into(), pg_sys::InvalidBackendId as u32]
}

/// Pieces of entries too large for one record, per table, until the last.
static mut PIECES: Option<HashMap<TableKey, Vec<u8>>> = None;

fn pieces() -> &'static mut HashMap<TableKey, Vec<u8>> {
    // SAFETY: the startup process is single-threaded; only redo uses it.
    unsafe { (*(&raw mut PIECES)).get_or_insert_with(HashMap::new) }
}

/// The record's kind (`xl_info` without the bits PostgreSQL uses).
pub(super) fn kind(record: *mut pg_sys::XLogReaderState) -> u8 {
    // SAFETY: a decoded record.
    unsafe { (*(*record).record).header.xl_info & !(pg_sys::XLR_INFO_MASK as u8 | XLOG_ANKER_XID_LEFT_OUT) }
}

/// A block's operation as the page gets it: the record's own, or, in a
/// record flagged `XLOG_ANKER_XID_LEFT_OUT`, its log operation with the
/// record's xid put back (`pages::expand_op`).
fn page_op<'d>(record: *mut pg_sys::XLogReaderState, is_meta: bool, logged: &'d [u8]) -> Result<std::borrow::Cow<'d, [u8]>, DecodeError> {
    // SAFETY: a decoded record.
    let h = unsafe { &(*(*record).record).header };
    if is_meta || h.xl_info & XLOG_ANKER_XID_LEFT_OUT == 0 {
        return Ok(logged.into());
    }
    pages::expand_op(logged, h.xl_xid.into()).map(Into::into)
}

#[pg_guard]
unsafe extern "C-unwind" fn redo(record: *mut pg_sys::XLogReaderState) {
    free_dropped_tables_now_and_then();
    match kind(record) {
        XLOG_ANKER_ROW => return,
        XLOG_ANKER_HORIZON => return horizon::redo(record),
        _ => {}
    }
    let lsn = (*record).EndRecPtr;
    let header = record_header(record);
    let mut chunk: Vec<u8> = vec![];
    let mut file = None;
    let mut last_block = 0;
    let mut exists = true;
    // Every page of the record stays locked until all are redone: a backend
    // of a hot standby loading the table reads the log a page at a time
    // along its links, and must find a record's pages all before it or all
    // after it (a link to a page not yet written would hand it that page's
    // old bytes; a switch half done, a chain it never had).
    let mut held = Vec::with_capacity(4);
    let blocks = blocks(record);
    // A switch changes the chain a loading backend of a hot standby walks:
    // it waits for a load in progress, and loads wait for it.
    let _switch = match (kind(record), blocks.first()) {
        (XLOG_ANKER_SWITCH, Some(&(_, rnode, _, _))) => Some(Switch::begin(&key_of(&rnode))),
        _ => None,
    };
    for (id, rnode, block, logged) in blocks {
        file = Some(rnode);
        let is_meta = header.meta_pages & (1 << id) != 0;
        let op = page_op(record, is_meta, logged).unwrap_or_else(|e| unreadable(&rnode, lsn, e));
        let data = &op[..];
        let buf = if header.new_pages & (1 << id) != 0 {
            let buf = pg_sys::XLogInitBufferForRedo(record, id);
            pages::apply(pages::page(buf), true, is_meta, data);
            pages::set_lsn(pages::page(buf), lsn);
            pg_sys::MarkBufferDirty(buf);
            buf
        } else {
            let mut buf: pg_sys::Buffer = 0;
            match pg_sys::XLogReadBufferForRedo(record, id, &mut buf) {
                pg_sys::XLogRedoAction::BLK_NEEDS_REDO => {
                    pages::apply(pages::page(buf), false, is_meta, data);
                    pages::set_lsn(pages::page(buf), lsn);
                    pg_sys::MarkBufferDirty(buf);
                }
                pg_sys::XLogRedoAction::BLK_NOTFOUND => exists = false,
                _ => {}
            }
            buf
        };
        if buf != 0 {
            held.push(buf);
        }
        if let Some((_, bytes)) = pages::parse_log_op(data).filter(|_| !is_meta) {
            chunk.extend_from_slice(bytes);
            last_block = block;
        }
    }
    for buf in held {
        pg_sys::UnlockReleaseBuffer(buf);
    }
    // Only appends change a table: images and switches rearrange pages.
    // The relation file was dropped later in the WAL: its changes need no
    // table in memory.
    let (Some(rnode), true, XLOG_ANKER_APPEND) = (file, exists, kind(record)) else { return };
    let key = key_of(&rnode);
    let table = loaded_table(&key);
    if let Some(t) = table {
        // where a promoted standby's writers go on appending (also after
        // an append without entries, which only moved the tail on)
        t.log_tail.store(last_block, Ordering::Release);
    }
    let Some((chunk_kind, body, _)) = parse_chunk(&chunk) else { return };
    let entries: Vec<u8> = match chunk_kind {
        WHOLE => body.to_vec(),
        FIRST => {
            pieces().insert(key, body.to_vec());
            return;
        }
        MIDDLE => {
            if let Some(p) = pieces().get_mut(&key) {
                p.extend_from_slice(body);
            }
            return;
        }
        LAST => match pieces().remove(&key) {
            Some(mut p) => {
                p.extend_from_slice(body);
                p
            }
            None => return, // the first pieces precede our redo start: the fork has them
        },
        _ => return,
    };
    if let Some(t) = table {
        apply_entries(t, &key, rnode, &entries, lsn);
    }
}

/// How often redo looks for tables in memory whose relation file is gone.
const DROPPED_TABLES_SWEEP: std::time::Duration = std::time::Duration::from_secs(10);

/// Free the tables a hot standby's backends loaded whose relation files
/// redo has since removed (dropped, truncated or rewritten on the primary),
/// at most every [`DROPPED_TABLES_SWEEP`]: the file goes with a commit
/// record, which is not ours to see, so its table would otherwise stay in
/// memory until the standby's next load or its promotion. A look costs a
/// `stat` per table in memory.
fn free_dropped_tables_now_and_then() {
    static mut LAST: Option<std::time::Instant> = None;
    // SAFETY: only the startup process runs redo, on one thread.
    let last = unsafe { &mut *(&raw mut LAST) };
    let now = std::time::Instant::now();
    match last {
        Some(t) if now.duration_since(*t) < DROPPED_TABLES_SWEEP => {}
        _ => {
            *last = Some(now);
            super::free_tables_without_file();
        }
    }
}

/// A switch of a table's log that redo is applying (see
/// `Directory::begin_switch`); over when dropped.
struct Switch;

impl Switch {
    fn begin(key: &TableKey) -> Switch {
        let (arena, dir) = (shmem::arena(), shmem::directory());
        let mut waited = false;
        while !dir.begin_switch(arena, key) {
            if !waited {
                arena.count(anker_engine::stats::SWITCHES_AFTER_LOADS, 1);
                waited = true;
            }
            // SAFETY: reading the recovery state of this (startup) process.
            if unsafe { standby_delay_passed() } {
                cancel_loader(key);
            }
            // SAFETY: a plain sleep; interrupts are honoured.
            unsafe { pg_sys::pg_usleep(1000) };
            pg_sys::check_for_interrupts!();
        }
        Switch
    }
}

/// Has replay waited as long as `max_standby_streaming_delay` (or
/// `max_standby_archive_delay`, for WAL not streamed) allows since the WAL
/// it replays was received? PostgreSQL's own test before it cancels the
/// queries a record conflicts with.
unsafe fn standby_delay_passed() -> bool {
    let (mut received, mut streamed) = (0, false);
    pg_sys::GetXLogReceiptTime(&mut received, &mut streamed);
    let delay_ms = if streamed { pg_sys::max_standby_streaming_delay } else { pg_sys::max_standby_archive_delay };
    delay_ms >= 0 && pg_sys::GetCurrentTimestamp() >= received + delay_ms as i64 * 1000
}

/// Cancel the transaction loading the table of `key`, as PostgreSQL
/// cancels a query that holds replay back (counted as a snapshot conflict:
/// the switch removes the log the load reads). The loader abandons the
/// table; the next reader loads it after the switch.
fn cancel_loader(key: &TableKey) {
    let loader = {
        // (in an epoch: a load that fails frees the table)
        let _epoch = shmem::enter_epoch();
        match shmem::directory().lookup(shmem::arena(), key) {
            Some(t) if t.loading.load(Ordering::Acquire) == anker_engine::table::LOADING => t.loader.load(Ordering::Acquire),
            _ => 0,
        }
    };
    if loader != 0 {
        // SAFETY: signals the backend of a virtual transaction id, if it is
        // still running; PostgreSQL's own call for recovery conflicts.
        unsafe { pg_sys::CancelVirtualTransaction(super::loader_vxid(loader), pg_sys::ProcSignalReason::PROCSIG_RECOVERY_CONFLICT_SNAPSHOT) };
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        shmem::directory().end_switch();
    }
}

/// The table of `key` if a backend of this hot standby has loaded it. A
/// table being loaded counts as not loaded: its loader reads on until, under
/// the table's load lock, it finds nothing new, so the pages of every record
/// redo wrote before it sees the table loaded are read by the loader.
fn loaded_table(key: &TableKey) -> Option<&'static anker_engine::table::Table> {
    // (in an epoch: a load that fails frees the table it was loading)
    let _epoch = shmem::enter_epoch();
    let t = shmem::directory().lookup(shmem::arena(), key)?;
    let _g = t.load_lock.lock();
    // (once loaded, a table stays so)
    (t.loading.load(Ordering::Acquire) == 0).then_some(t)
}

/// Apply the entries of one record to `t`, the table in memory, skipping
/// the entries it has.
unsafe fn apply_entries(t: &anker_engine::table::Table, key: &TableKey, rnode: pg_sys::RelFileNode, bytes: &[u8], lsn: pg_sys::XLogRecPtr) {
    let arena = shmem::arena();
    let mut entries = Entries::new(bytes);
    let mut pruner = crate::undo::ReplayPruner::default();
    for (seq, change) in &mut entries {
        let have = t.durable_seq.load(Ordering::Acquire);
        if seq <= have {
            continue;
        }
        if let Change::Create { .. } = &change {
            // The file starts a new log (a table created and truncated in
            // one transaction): what is in memory is gone; readers load
            // the new log.
            shmem::directory().drop_table(arena, key);
            return;
        }
        if seq != have + 1 {
            ereport!(
                FATAL,
                PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
                format!(
                    "anker: cannot apply change {seq} to relation file {}/{}/{} at WAL position {:X}/{:X}: the table has changes up to {have} only",
                    rnode.spcNode,
                    rnode.dbNode,
                    rnode.relNode,
                    lsn >> 32,
                    lsn as u32
                )
            );
        }
        if let Err(e) = t.replay(arena, &change) {
            out_of_memory_in_redo(e, &rnode, lsn);
        }
        pruner.after(t, &change);
        t.durable_seq.store(seq, Ordering::Release);
    }
    if let Some(e) = entries.stopped {
        unreadable(&rnode, lsn, e);
    }
}

fn unreadable(rnode: &pg_sys::RelFileNode, lsn: pg_sys::XLogRecPtr, e: DecodeError) -> ! {
    ereport!(
        FATAL,
        PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
        format!(
            "anker: unreadable change in the WAL record at {:X}/{:X} for relation file {}/{}/{}: {e}",
            lsn >> 32,
            lsn as u32,
            rnode.spcNode,
            rnode.dbNode,
            rnode.relNode
        )
    );
}

fn out_of_memory_in_redo(e: anker_engine::arena::AllocError, rnode: &pg_sys::RelFileNode, lsn: pg_sys::XLogRecPtr) -> ! {
    let anker_engine::arena::AllocError::OutOfMemory { requested } = e;
    ereport!(
        FATAL,
        PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
        format!(
            "anker: out of memory replaying relation file {}/{}/{} at WAL position {:X}/{:X} ({requested} bytes requested)",
            rnode.spcNode,
            rnode.dbNode,
            rnode.relNode,
            lsn >> 32,
            lsn as u32
        ),
        "Raise anker.memory_limit: the tables must fit in it to be recovered."
    );
}

/// End of redo: tables in memory take writers again (free-row lists), and
/// tables whose relation file was dropped meanwhile go.
#[pg_guard]
unsafe extern "C-unwind" fn cleanup() {
    let arena = shmem::arena();
    shmem::directory().for_each(arena, |t| t.rebuild_free_rows(arena));
    super::free_tables_without_file();
    if let Some(p) = (*(&raw mut PIECES)).as_mut() {
        p.clear();
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn desc(buf: pg_sys::StringInfo, record: *mut pg_sys::XLogReaderState) {
    let described = match kind(record) {
        XLOG_ANKER_ROW => Some(logical::describe(record)),
        XLOG_ANKER_HORIZON => Some(horizon::describe(record)),
        _ => None,
    };
    if let Some(text) = described {
        let c = std::ffi::CString::new(text).unwrap_or_default();
        pg_sys::appendStringInfoString(buf, c.as_ptr());
        return;
    }
    let header = record_header(record);
    let mut chunk = vec![];
    let mut file = None;
    let mut meta = None;
    let mut links = vec![];
    let mut unreadable = None;
    for (id, rnode, block, logged) in blocks(record) {
        file.get_or_insert((rnode, block));
        let is_meta = header.meta_pages & (1 << id) != 0;
        let op = page_op(record, is_meta, logged).unwrap_or_else(|e| {
            unreadable = Some(e);
            logged.into()
        });
        let data = &op[..];
        if is_meta {
            if data.len() >= 16 {
                let w = |k: usize| u32::from_le_bytes(data[k..k + 4].try_into().expect("4 bytes"));
                meta = Some((w(0), w(4), w(8)));
            }
        } else if let Some((link, bytes)) = pages::parse_log_op(data) {
            if let Some((next, _)) = link {
                links.push((block, next));
            }
            chunk.extend_from_slice(bytes);
        }
    }
    let mut text = String::new();
    if let Some((r, b)) = file {
        text.push_str(&format!("rel {}/{}/{} blk {b}: ", r.spcNode, r.dbNode, r.relNode));
    }
    if let Some(e) = unreadable {
        text.push_str(&format!("unreadable entries ({e})"));
        let c = std::ffi::CString::new(text).unwrap_or_default();
        pg_sys::appendStringInfoString(buf, c.as_ptr());
        return;
    }
    match kind(record) {
        XLOG_ANKER_SWITCH => {
            let links: Vec<String> = links.iter().map(|(b, n)| format!("{b}->{}", *n as i32)).collect();
            if let Some((head, free, generation)) = meta {
                text.push_str(&format!("log head {head}, generation {generation}, free chain from {}; links {}", free as i32, links.join(" ")));
            }
        }
        XLOG_ANKER_IMAGE => text.push_str(&format!("image, {} bytes", chunk.len())),
        _ => {
            if let Some((kind, body, _)) = parse_chunk(&chunk) {
                match kind {
                    WHOLE => {
                        let descs: Vec<String> = Entries::new(body).map(|(seq, c)| format!("#{seq} {}", c.describe())).collect();
                        text.push_str(&descs.join("; "));
                    }
                    FIRST | MIDDLE | LAST => text.push_str(&format!("piece of a large change, {} bytes", body.len())),
                    _ => text.push_str("unknown chunk"),
                }
            } else {
                text.push_str("no entries (the log moves on to a fresh block)");
            }
        }
    }
    let c = std::ffi::CString::new(text).unwrap_or_default();
    pg_sys::appendStringInfoString(buf, c.as_ptr());
}

#[pg_guard]
unsafe extern "C-unwind" fn identify(info: u8) -> *const std::ffi::c_char {
    match info & !(pg_sys::XLR_INFO_MASK as u8 | XLOG_ANKER_XID_LEFT_OUT) {
        XLOG_ANKER_APPEND => c"APPEND".as_ptr(),
        XLOG_ANKER_IMAGE => c"IMAGE".as_ptr(),
        XLOG_ANKER_SWITCH => c"SWITCH".as_ptr(),
        XLOG_ANKER_ROW => c"ROW".as_ptr(),
        XLOG_ANKER_HORIZON => c"HORIZON".as_ptr(),
        _ => std::ptr::null(),
    }
}
