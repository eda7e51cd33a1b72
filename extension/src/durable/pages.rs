//! The relation file of an anker table: a metapage and chains of log pages,
//! read and written through PostgreSQL's buffer manager, every change
//! WAL-logged as one record of page operations (`apply` builds a page on
//! the primary and redoes it, so both do exactly the same).
//!
//! * Block 0, the metapage: magic, format version, the first block of the
//!   log chain (`head`), the first block of the chain of free blocks
//!   (`free`), a generation that every compaction bumps, and the first
//!   block of an image being written (`pending`: freed by the next
//!   compaction if its writer died).
//! * Log pages: 8 kB pages with PostgreSQL's header (page LSN interlock and
//!   full-page images as for any relation); their data area (header to
//!   `pd_lower`) holds a byte stream of chunks, and their special space the
//!   link to the next page of the chain, where reading starts there, and a
//!   CRC-32C of the data area, extended by every append (on the primary and
//!   in redo alike) and checked when a table is loaded.
//!
//! The log is read from `head`, following links. A compaction writes an
//! image into blocks of its own chain and then, in one record, links the
//! image's last page to the point of the old log where the image's moment
//! ends, makes the image the head, and hands the old blocks before that
//! point to the free chain, from which appends take blocks before the file
//! grows. So the file stays about as large as the image plus the log since.

use anker_engine::chunk::{chunk, parse_chunk, WHOLE, WHOLE_FOR_RECORD};
use pgrx::pg_sys;

pub const MAGIC: u32 = 0x414e_4b52; // "ANKR"
pub const FORMAT_VERSION: u32 = 4;
pub const INVALID: u32 = pg_sys::InvalidBlockNumber;

/// Bytes of a page's header (`SizeOfPageHeaderData`).
pub const PAGE_HEADER: usize = 24;
pub const BLOCK: usize = pg_sys::BLCKSZ as usize;
/// A log page's special space: next block (u32), where reading starts in
/// it (u16), padding, the CRC-32C of the data area (u32), padding (a
/// special space is MAXALIGNed).
const SPECIAL: usize = 16;
const CRC_AT: usize = 8;
const LOG_END: usize = BLOCK - SPECIAL;
/// Log bytes per page.
pub const PAGE_DATA: usize = LOG_END - PAGE_HEADER;
/// A log page operation that only appends bytes starting with a byte other
/// than zero (a chunk's header: nearly every append to a log's tail) is
/// those bytes. Any other starts with a zero byte, then one saying whether
/// the page's link follows (6 bytes: next block u32, start u16), then the
/// bytes to append.
const OP_LONG: u8 = 0;
const OP_LINKED: u8 = 1;
const LINK_LEN: usize = 6;
const META_LEN: usize = 24;

/// Record kinds (`xl_info`): log appends (also applied to a table in
/// memory), image pages, and the switch to an image.
pub const XLOG_ANKER_APPEND: u8 = 0x10;
pub const XLOG_ANKER_IMAGE: u8 = 0x20;
pub const XLOG_ANKER_SWITCH: u8 = 0x30;
/// A flag of an APPEND record: its one page operation appends a
/// [`WHOLE_FOR_RECORD`] chunk ([`expand_op`]). Only the flag says so: the
/// bytes a record appends to a page after its first may start anywhere in
/// a chunk.
pub const XLOG_ANKER_XID_LEFT_OUT: u8 = 0x80;

/// Main data of a record: which block references are new pages (redo
/// initialises them) and which is the metapage. A record with neither
/// (most appends) has no main data.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RecordHeader {
    pub new_pages: u64,
    pub meta_pages: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    pub head: u32,
    pub free: u32,
    pub generation: u32,
    pub pending: u32,
}

/// The page of a pinned buffer.
pub unsafe fn page(buf: pg_sys::Buffer) -> *mut u8 {
    if buf < 0 {
        *pg_sys::LocalBufferBlockPointers.offset((-buf - 1) as isize) as *mut u8
    } else {
        (pg_sys::BufferBlocks as *mut u8).add((buf as usize - 1) * BLOCK)
    }
}

unsafe fn header(p: *mut u8) -> &'static mut pg_sys::PageHeaderData {
    &mut *(p as *mut pg_sys::PageHeaderData)
}

pub unsafe fn set_lsn(p: *mut u8, lsn: pg_sys::XLogRecPtr) {
    header(p).pd_lsn = pg_sys::PageXLogRecPtr { xlogid: (lsn >> 32) as u32, xrecoff: lsn as u32 };
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// The metapage's fields, or why the page is not an anker metapage.
pub unsafe fn meta_of(p: *const u8) -> Result<Meta, String> {
    let lower = (*(p as *const pg_sys::PageHeaderData)).pd_lower as usize;
    if !(PAGE_HEADER + META_LEN..=BLOCK).contains(&lower) {
        return Err("its first block is not an anker metapage".into());
    }
    let b = std::slice::from_raw_parts(p.add(PAGE_HEADER), META_LEN);
    if u32_at(b, 0) != MAGIC {
        return Err("its first block is not an anker metapage".into());
    }
    let version = u32_at(b, 4);
    if version != FORMAT_VERSION {
        return Err(format!("its format version is {version}, this anker reads {FORMAT_VERSION}"));
    }
    Ok(Meta { head: u32_at(b, 8), free: u32_at(b, 12), generation: u32_at(b, 16), pending: u32_at(b, 20) })
}

/// A link (next block, where reading starts there) as it is stored, in a
/// log page's special space and in a page operation alike.
fn link_bytes((next, start): (u32, usize)) -> [u8; LINK_LEN] {
    let mut b = [0; LINK_LEN];
    b[..4].copy_from_slice(&next.to_le_bytes());
    b[4..].copy_from_slice(&(start as u16).to_le_bytes());
    b
}

fn link_from(b: &[u8]) -> (u32, usize) {
    (u32_at(b, 0), u16::from_le_bytes([b[4], b[5]]) as usize)
}

/// A log page's link: next block and where reading starts there.
pub unsafe fn link_of(p: *const u8) -> (u32, usize) {
    link_from(std::slice::from_raw_parts(p.add(LOG_END), LINK_LEN))
}

/// Log bytes of page `p` from `start` on.
pub unsafe fn log_bytes(p: *const u8, start: usize) -> &'static [u8] {
    let lower = (*(p as *const pg_sys::PageHeaderData)).pd_lower as usize;
    if (PAGE_HEADER..=LOG_END).contains(&lower) && start < lower {
        std::slice::from_raw_parts(p.add(start), lower - start)
    } else {
        &[] // a never-initialised (zero) page, or nothing after `start`
    }
}

/// The checksum a log page's special space holds for its data area.
unsafe fn stored_crc(p: *const u8) -> u32 {
    u32_at(std::slice::from_raw_parts(p.add(LOG_END + CRC_AT), 4), 0)
}

/// Does the data area of log page `p` match its checksum? (A page never
/// initialised, all zeros, does.)
pub unsafe fn checksum_ok(p: *const u8) -> bool {
    let lower = (*(p as *const pg_sys::PageHeaderData)).pd_lower as usize;
    if !(PAGE_HEADER..=LOG_END).contains(&lower) {
        return lower == 0 && stored_crc(p) == 0;
    }
    let data = std::slice::from_raw_parts(p.add(PAGE_HEADER), lower - PAGE_HEADER);
    anker_engine::change::crc32c(0, data) == stored_crc(p)
}

/// Free bytes in a log page.
pub unsafe fn room(p: *mut u8) -> usize {
    LOG_END.saturating_sub(header(p).pd_lower as usize)
}

/// Where the next chunk will start in log page `p`.
pub unsafe fn end_of(p: *mut u8) -> usize {
    header(p).pd_lower as usize
}

/// The operation on one page of a record, as block data.
pub fn meta_op(m: Meta) -> Vec<u8> {
    let mut v = Vec::with_capacity(16);
    v.extend_from_slice(&m.head.to_le_bytes());
    v.extend_from_slice(&m.free.to_le_bytes());
    v.extend_from_slice(&m.generation.to_le_bytes());
    v.extend_from_slice(&m.pending.to_le_bytes());
    v
}

/// A log page operation: set the page's link to `link` (next block, where
/// reading starts there) unless None, then append `bytes`.
pub fn log_op(link: Option<(u32, usize)>, bytes: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(1 + LINK_LEN + bytes.len());
    log_op_into(&mut v, link, &[bytes]);
    v
}

/// [`log_op`] into `out` (cleared first), the bytes given in pieces.
pub fn log_op_into(out: &mut Vec<u8>, link: Option<(u32, usize)>, pieces: &[&[u8]]) {
    out.clear();
    let first = pieces.iter().find_map(|p| p.first().copied());
    match (link, first) {
        (None, Some(b)) if b != OP_LONG => {}
        (None, _) => out.extend_from_slice(&[OP_LONG, 0]),
        (Some(l), _) => {
            out.extend_from_slice(&[OP_LONG, OP_LINKED]);
            out.extend_from_slice(&link_bytes(l));
        }
    }
    for p in pieces {
        out.extend_from_slice(p);
    }
}

/// A page's link: the next block of its chain and where reading starts there.
pub type Link = (u32, usize);

/// A log page operation's link and bytes (None: not an operation).
pub fn parse_log_op(op: &[u8]) -> Option<(Option<Link>, &[u8])> {
    if op.first()? != &OP_LONG {
        return Some((None, op));
    }
    match *op.get(1)? {
        OP_LINKED => {
            let link = link_from(op.get(2..2 + LINK_LEN)?);
            Some((Some(link), &op[2 + LINK_LEN..]))
        }
        0 => Some((None, &op[2..])),
        _ => None,
    }
}

/// Apply a page operation (block data `op`) to page `p`: initialise it if
/// `new`, then set the metapage's fields, or a log page's link and append
/// bytes. The primary and redo both build pages with this.
pub unsafe fn apply(p: *mut u8, new: bool, is_meta: bool, op: &[u8]) {
    if is_meta {
        if new {
            pg_sys::PageInit(p as pg_sys::Page, BLOCK, 0);
            let d = p.add(PAGE_HEADER);
            std::ptr::copy_nonoverlapping(MAGIC.to_le_bytes().as_ptr(), d, 4);
            std::ptr::copy_nonoverlapping(FORMAT_VERSION.to_le_bytes().as_ptr(), d.add(4), 4);
            header(p).pd_lower = (PAGE_HEADER + META_LEN) as u16;
        }
        std::ptr::copy_nonoverlapping(op.as_ptr(), p.add(PAGE_HEADER + 8), 16);
        return;
    }
    if new {
        pg_sys::PageInit(p as pg_sys::Page, BLOCK, SPECIAL);
    }
    let (link, bytes) = parse_log_op(op).expect("anker: a malformed log page operation");
    if let Some(l) = link {
        std::ptr::copy_nonoverlapping(link_bytes(l).as_ptr(), p.add(LOG_END), LINK_LEN);
    }
    let h = header(p);
    let at = h.pd_lower as usize;
    assert!(at + bytes.len() <= LOG_END, "anker: a log page overflows");
    std::ptr::copy_nonoverlapping(bytes.as_ptr(), p.add(at), bytes.len());
    h.pd_lower = (at + bytes.len()) as u16;
    let crc = anker_engine::change::crc32c(stored_crc(p), bytes);
    std::ptr::copy_nonoverlapping(crc.to_le_bytes().as_ptr(), p.add(LOG_END + CRC_AT), 4);
}

/// One page of a record being built: its buffer (pinned, exclusively
/// locked), whether it is new, whether it is the metapage, its operation,
/// and what the record carries instead where that is shorter (an append
/// whose entries leave out the record's xid: [`expand_op`] gives `op` back).
pub struct Part {
    pub buf: pg_sys::Buffer,
    pub new: bool,
    pub meta: bool,
    pub op: Vec<u8>,
    pub logged: Option<Vec<u8>>,
}

/// The page operation of an APPEND record flagged
/// [`XLOG_ANKER_XID_LEFT_OUT`], from the one the record carries: it
/// appends a [`WHOLE_FOR_RECORD`] chunk, and the page gets the [`WHOLE`]
/// chunk of its entries with `record_xid` put back.
pub fn expand_op(op: &[u8], record_xid: u32) -> Result<Vec<u8>, anker_engine::change::DecodeError> {
    use anker_engine::change::{expand_record_entries, DecodeError};
    let (link, bytes) = parse_log_op(op).ok_or(DecodeError::Truncated)?;
    match parse_chunk(bytes) {
        Some((WHOLE_FOR_RECORD, body, len)) if len == bytes.len() => {
            let mut entries = Vec::with_capacity(body.len() + 16);
            expand_record_entries(body, record_xid, &mut entries)?;
            Ok(log_op(link, &chunk(WHOLE, &entries)))
        }
        Some((kind, _, _)) => Err(DecodeError::BadKind(kind)),
        None => Err(DecodeError::Truncated),
    }
}

/// The buffer and WAL functions `log_and_apply` calls inside its critical
/// section, declared without pgrx's guard (a `sigsetjmp` per call, 1-2 % of
/// a TPC-C transaction's CPU over all of anker's calls): in a critical
/// section `errstart` turns every ERROR into a PANIC, which aborts the
/// process, so no `longjmp` can come back through these frames.
mod in_crit_section {
    use pgrx::pg_sys;
    unsafe extern "C" {
        pub fn MarkBufferDirty(buffer: pg_sys::Buffer);
        pub fn XLogBeginInsert();
        pub fn XLogRegisterData(data: *mut std::ffi::c_char, len: std::ffi::c_int);
        pub fn XLogRegisterBuffer(block_id: u8, buffer: pg_sys::Buffer, flags: u8);
        pub fn XLogRegisterBufData(block_id: u8, data: *mut std::ffi::c_char, len: std::ffi::c_int);
        pub fn XLogInsert(rmid: pg_sys::RmgrId, info: u8) -> pg_sys::XLogRecPtr;
    }
}

/// Apply `parts` and, for a `logged` relation file, log them as one record of
/// kind `info`, in one critical section (`START_CRIT_SECTION`: an error in
/// it is a PANIC, as for heap).
pub unsafe fn log_and_apply(logged: bool, parts: &[Part], info: u8) {
    use in_crit_section::*;
    if logged && parts.len() > pg_sys::XLR_NORMAL_MAX_BLOCK_ID as usize {
        // (allocates: before the critical section)
        pg_sys::XLogEnsureRecordSpace(parts.len() as i32 - 1, parts.len() as i32 + 1);
    }
    pg_sys::CritSectionCount += 1;
    for part in parts {
        apply(page(part.buf), part.new, part.meta, &part.op);
        MarkBufferDirty(part.buf);
    }
    if logged {
        XLogBeginInsert();
        let mut main = RecordHeader { new_pages: 0, meta_pages: 0 };
        for (k, part) in parts.iter().enumerate() {
            main.new_pages |= (part.new as u64) << k;
            main.meta_pages |= (part.meta as u64) << k;
        }
        if main.new_pages != 0 || main.meta_pages != 0 {
            XLogRegisterData(&main as *const _ as *mut std::ffi::c_char, std::mem::size_of::<RecordHeader>() as i32);
        }
        for (k, part) in parts.iter().enumerate() {
            // With a full-page image the record keeps the bytes: redo of
            // a standby applies them to a table in memory too.
            let flags = if part.new { pg_sys::REGBUF_WILL_INIT } else { pg_sys::REGBUF_STANDARD | pg_sys::REGBUF_KEEP_DATA };
            XLogRegisterBuffer(k as u8, part.buf, flags as u8);
            let op = part.logged.as_ref().unwrap_or(&part.op);
            XLogRegisterBufData(k as u8, op.as_ptr() as *mut std::ffi::c_char, op.len() as i32);
        }
        let xid_left_out = parts.iter().any(|p| p.logged.is_some());
        debug_assert!(!xid_left_out || (parts.len() == 1 && info == XLOG_ANKER_APPEND));
        let lsn = XLogInsert(super::RMGR_ID, if xid_left_out { info | XLOG_ANKER_XID_LEFT_OUT } else { info });
        for part in parts {
            set_lsn(page(part.buf), lsn);
        }
    }
    pg_sys::CritSectionCount -= 1;
}
