//! Changes to a table's durable state: what the write-ahead log and a
//! table's on-disk change log carry, and how redo repeats them.
//!
//! Every change that makes a table what it is (not hint bits, not block
//! summaries, not the free-row list, which are derived) is one [`Change`],
//! applied by the writer with the engine's own operations and described
//! here well enough that [`Table::replay`] brings a table in the same state
//! to the same next state. Row ids are part of the description: PostgreSQL's
//! indexes point at TIDs, so after recovery every row id must name the row
//! it named before.
//!
//! Changes are framed into log entries ([`frame`], [`Entries`]): length,
//! CRC-32C and a per-table sequence number, so that a reader of a torn or
//! half-written log stops at the first entry it cannot trust, and redo can
//! tell which changes a table loaded from disk already has.

use crate::arena::{AllocResult, Arena};
use crate::table::{flag, ColumnKind, ColumnSpec, ColumnState, RowChange, Table, Value, ValueRef, VAR_SLOT};

/// One older version of a row, as an undo record holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainRecord<'a> {
    /// Creator of the version this record restores, and its command id.
    pub xmin: u32,
    pub cmin: u32,
    /// Creator of the next newer version.
    pub superseded_by: u32,
    /// Commit hint of `xmin` when the record was made.
    pub xmin_flags: u32,
    /// Before-images: column and value.
    pub images: Vec<(usize, Val<'a>)>,
}

/// A stored value in a change (a [`Value`] that can be compared and owned).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Val<'a> {
    Null,
    Fixed(&'a [u8]),
    Inline(&'a [u8]),
    Blob(&'a [u8]),
}

impl<'a> Val<'a> {
    pub fn from_value(v: &Value<'a>) -> Val<'a> {
        match *v {
            Value::Null => Val::Null,
            Value::Fixed(b) => Val::Fixed(b),
            Value::Inline(b) => Val::Inline(b),
            Value::Blob(b) => Val::Blob(b),
        }
    }

    pub fn value(&self) -> Value<'a> {
        match *self {
            Val::Null => Value::Null,
            Val::Fixed(b) => Value::Fixed(b),
            Val::Inline(b) => Value::Inline(b),
            Val::Blob(b) => Value::Blob(b),
        }
    }

    /// The value stored at `v` in a column of layout `spec`.
    ///
    /// # Safety
    /// `v` must point at a stored element (or blob) that outlives `'a`.
    pub unsafe fn from_stored(v: ValueRef, spec: ColumnSpec) -> Val<'a> {
        match v {
            ValueRef::Null => Val::Null,
            ValueRef::Fixed(p) => Val::Fixed(std::slice::from_raw_parts(p, 1 << spec.width_shift)),
            ValueRef::Inline(p) => Val::Inline(std::slice::from_raw_parts(p, VAR_SLOT)),
            ValueRef::Blob(p, n) => Val::Blob(std::slice::from_raw_parts(p, n as usize)),
        }
    }
}

/// A change to one table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change<'a> {
    /// The table starts (again) empty with these columns: creation, and
    /// truncation of a table created in the same transaction.
    Create { columns: Vec<(ColumnSpec, ColumnState)> },
    /// A new row (or a vacant row id reused) with its full stamp.
    Insert { row: u64, xmin: u32, cmin: u32, flags: u32, locker: u32, values: Vec<Val<'a>> },
    /// [`Table::modify_row`]: deleter, locks, successor, freezing.
    Modify { row: u64, change: RowChange },
    /// [`Table::update_in_place`].
    Update { row: u64, xid: u32, cid: u32, changes: Vec<(usize, Val<'a>)> },
    /// [`Table::undo_update`]: the newest in-place update by `xid` undone.
    Undo { row: u64, xid: u32 },
    /// The version chain of a row a rewrite copied (oldest record last).
    Chain { row: u64, records: Vec<ChainRecord<'a>> },
    /// [`Table::set_column`]: column `col` (new, or replacing a leftover)
    /// with `fill` in every existing row; a tentative one records the
    /// transaction that added its attribute (redo settles it by its fate).
    SetColumn { col: usize, spec: ColumnSpec, fill: Val<'a>, state: ColumnState, owner_xid: u32 },
    /// A tentative column settled.
    ColumnState { col: usize, state: ColumnState },
    /// [`Table::vacate_rows`]: dead rows given up (VACUUM).
    Vacate { rows: Vec<u64> },
}

/// Why a change or log entry cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    Truncated,
    BadKind(u8),
    BadValue(u8),
    BadChecksum { seq: u64 },
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Truncated => write!(f, "truncated change"),
            DecodeError::BadKind(k) => write!(f, "unknown change kind {k}"),
            DecodeError::BadValue(k) => write!(f, "unknown value tag {k}"),
            DecodeError::BadChecksum { seq } => write!(f, "checksum mismatch in change {seq}"),
        }
    }
}

// ---- encoding ---------------------------------------------------------------

struct Writer<'o>(&'o mut Vec<u8>);

impl Writer<'_> {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
    }
    fn val(&mut self, v: &Val) {
        match v {
            Val::Null => self.u8(0),
            Val::Fixed(b) => {
                self.u8(1);
                self.bytes(b);
            }
            Val::Inline(b) => {
                self.u8(2);
                self.bytes(b);
            }
            Val::Blob(b) => {
                self.u8(3);
                self.bytes(b);
            }
        }
    }
    fn spec(&mut self, s: ColumnSpec, state: ColumnState) {
        self.u8(s.kind as u8);
        self.u8(s.width_shift as u8);
        self.u8(state as u8);
    }
    fn opt_u32(&mut self, v: Option<u32>) {
        match v {
            Some(x) => {
                self.u8(1);
                self.u32(x);
            }
            None => self.u8(0),
        }
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.at.checked_add(n).ok_or(DecodeError::Truncated)?;
        let b = self.buf.get(self.at..end).ok_or(DecodeError::Truncated)?;
        self.at = end;
        Ok(b)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn val(&mut self) -> Result<Val<'a>, DecodeError> {
        Ok(match self.u8()? {
            0 => Val::Null,
            1 => Val::Fixed(self.bytes()?),
            2 => Val::Inline(self.bytes()?),
            3 => Val::Blob(self.bytes()?),
            t => return Err(DecodeError::BadValue(t)),
        })
    }
    fn spec(&mut self) -> Result<(ColumnSpec, ColumnState), DecodeError> {
        let kind = if self.u8()? == ColumnKind::Var as u8 { ColumnKind::Var } else { ColumnKind::Fixed };
        let width_shift = self.u8()? as u32;
        let state = match self.u8()? {
            1 => ColumnState::Tentative,
            2 => ColumnState::Leftover,
            _ => ColumnState::Permanent,
        };
        Ok((ColumnSpec { kind, width_shift }, state))
    }
    fn opt_u32(&mut self) -> Result<Option<u32>, DecodeError> {
        Ok(if self.u8()? != 0 { Some(self.u32()?) } else { None })
    }
    fn count(&mut self) -> Result<usize, DecodeError> {
        let n = self.u32()? as usize;
        // every element takes at least a byte: refuse absurd counts early
        if n > self.buf.len() - self.at {
            return Err(DecodeError::Truncated);
        }
        Ok(n)
    }
}

const K_CREATE: u8 = 1;
const K_INSERT: u8 = 2;
const K_MODIFY: u8 = 3;
const K_UPDATE: u8 = 4;
const K_UNDO: u8 = 5;
const K_CHAIN: u8 = 6;
const K_SET_COLUMN: u8 = 7;
const K_COLUMN_STATE: u8 = 8;
const K_VACATE: u8 = 9;

impl<'a> Change<'a> {
    /// Append the encoding of this change to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer(out);
        match self {
            Change::Create { columns } => {
                w.u8(K_CREATE);
                w.u32(columns.len() as u32);
                for (s, st) in columns {
                    w.spec(*s, *st);
                }
            }
            Change::Insert { row, xmin, cmin, flags, locker, values } => {
                w.u8(K_INSERT);
                w.u64(*row);
                w.u32(*xmin);
                w.u32(*cmin);
                w.u32(*flags);
                w.u32(*locker);
                w.u32(values.len() as u32);
                for v in values {
                    w.val(v);
                }
            }
            Change::Modify { row, change } => {
                w.u8(K_MODIFY);
                w.u64(*row);
                w.opt_u32(change.xmin);
                match change.xmax {
                    Some((x, c)) => {
                        w.u8(1);
                        w.u32(x);
                        w.u32(c);
                    }
                    None => w.u8(0),
                }
                w.u32(change.set_flags);
                w.u32(change.clear_flags);
                w.opt_u32(change.locker);
                match change.next {
                    Some(n) => {
                        w.u8(1);
                        w.u64(n);
                    }
                    None => w.u8(0),
                }
            }
            Change::Update { row, xid, cid, changes } => {
                w.u8(K_UPDATE);
                w.u64(*row);
                w.u32(*xid);
                w.u32(*cid);
                w.u32(changes.len() as u32);
                for (c, v) in changes {
                    w.u32(*c as u32);
                    w.val(v);
                }
            }
            Change::Undo { row, xid } => {
                w.u8(K_UNDO);
                w.u64(*row);
                w.u32(*xid);
            }
            Change::Chain { row, records } => {
                w.u8(K_CHAIN);
                w.u64(*row);
                w.u32(records.len() as u32);
                for r in records {
                    w.u32(r.xmin);
                    w.u32(r.cmin);
                    w.u32(r.superseded_by);
                    w.u32(r.xmin_flags);
                    w.u32(r.images.len() as u32);
                    for (c, v) in &r.images {
                        w.u32(*c as u32);
                        w.val(v);
                    }
                }
            }
            Change::SetColumn { col, spec, fill, state, owner_xid } => {
                w.u8(K_SET_COLUMN);
                w.u32(*col as u32);
                w.spec(*spec, *state);
                w.u32(*owner_xid);
                w.val(fill);
            }
            Change::ColumnState { col, state } => {
                w.u8(K_COLUMN_STATE);
                w.u32(*col as u32);
                w.u8(*state as u8);
            }
            Change::Vacate { rows } => {
                w.u8(K_VACATE);
                w.u32(rows.len() as u32);
                for r in rows {
                    w.u64(*r);
                }
            }
        }
    }

    /// Read a change encoded by [`encode`](Self::encode); it borrows values
    /// from `buf`.
    pub fn decode(buf: &'a [u8]) -> Result<Change<'a>, DecodeError> {
        let mut r = Reader { buf, at: 0 };
        let change = match r.u8()? {
            K_CREATE => {
                let n = r.count()?;
                let mut columns = Vec::with_capacity(n);
                for _ in 0..n {
                    columns.push(r.spec()?);
                }
                Change::Create { columns }
            }
            K_INSERT => {
                let (row, xmin, cmin, flags, locker) = (r.u64()?, r.u32()?, r.u32()?, r.u32()?, r.u32()?);
                let n = r.count()?;
                let mut values = Vec::with_capacity(n);
                for _ in 0..n {
                    values.push(r.val()?);
                }
                Change::Insert { row, xmin, cmin, flags, locker, values }
            }
            K_MODIFY => {
                let row = r.u64()?;
                let xmin = r.opt_u32()?;
                let xmax = if r.u8()? != 0 { Some((r.u32()?, r.u32()?)) } else { None };
                let set_flags = r.u32()?;
                let clear_flags = r.u32()?;
                let locker = r.opt_u32()?;
                let next = if r.u8()? != 0 { Some(r.u64()?) } else { None };
                Change::Modify { row, change: RowChange { xmin, xmax, set_flags, clear_flags, locker, next } }
            }
            K_UPDATE => {
                let (row, xid, cid) = (r.u64()?, r.u32()?, r.u32()?);
                let n = r.count()?;
                let mut changes = Vec::with_capacity(n);
                for _ in 0..n {
                    changes.push((r.u32()? as usize, r.val()?));
                }
                Change::Update { row, xid, cid, changes }
            }
            K_UNDO => Change::Undo { row: r.u64()?, xid: r.u32()? },
            K_CHAIN => {
                let row = r.u64()?;
                let n = r.count()?;
                let mut records = Vec::with_capacity(n);
                for _ in 0..n {
                    let (xmin, cmin, superseded_by, xmin_flags) = (r.u32()?, r.u32()?, r.u32()?, r.u32()?);
                    let k = r.count()?;
                    let mut images = Vec::with_capacity(k);
                    for _ in 0..k {
                        images.push((r.u32()? as usize, r.val()?));
                    }
                    records.push(ChainRecord { xmin, cmin, superseded_by, xmin_flags, images });
                }
                Change::Chain { row, records }
            }
            K_SET_COLUMN => {
                let col = r.u32()? as usize;
                let (spec, state) = r.spec()?;
                let owner_xid = r.u32()?;
                Change::SetColumn { col, spec, fill: r.val()?, state, owner_xid }
            }
            K_COLUMN_STATE => {
                let col = r.u32()? as usize;
                let state = match r.u8()? {
                    1 => ColumnState::Tentative,
                    2 => ColumnState::Leftover,
                    _ => ColumnState::Permanent,
                };
                Change::ColumnState { col, state }
            }
            K_VACATE => {
                let n = r.count()?;
                let mut rows = Vec::with_capacity(n);
                for _ in 0..n {
                    rows.push(r.u64()?);
                }
                Change::Vacate { rows }
            }
            k => return Err(DecodeError::BadKind(k)),
        };
        if r.at != buf.len() {
            return Err(DecodeError::Truncated);
        }
        Ok(change)
    }

    /// A one-line description (for `pg_walinspect` and logs).
    pub fn describe(&self) -> String {
        match self {
            Change::Create { columns } => format!("create, {} columns", columns.len()),
            Change::Insert { row, xmin, values, .. } => format!("insert row {row} by {xmin}, {} values", values.len()),
            Change::Modify { row, change } => {
                let mut parts = vec![];
                if let Some(x) = change.xmin {
                    parts.push(format!("xmin {x}"));
                }
                if let Some((x, c)) = change.xmax {
                    parts.push(format!("xmax {x}/{c}"));
                }
                if let Some(l) = change.locker {
                    parts.push(format!("locker {l}"));
                }
                if let Some(n) = change.next {
                    parts.push(format!("next row {n}"));
                }
                if change.set_flags != 0 || change.clear_flags != 0 {
                    parts.push(format!("flags +{:#x} -{:#x}", change.set_flags, change.clear_flags));
                }
                format!("modify row {row}: {}", parts.join(", "))
            }
            Change::Update { row, xid, changes, .. } => format!("update row {row} in place by {xid}, {} columns", changes.len()),
            Change::Undo { row, xid } => format!("undo update of row {row} by {xid}"),
            Change::Chain { row, records } => format!("chain of row {row}, {} versions", records.len()),
            Change::SetColumn { col, state, .. } => format!("set column {} ({state:?})", col + 1),
            Change::ColumnState { col, state } => format!("column {} {state:?}", col + 1),
            Change::Vacate { rows } => format!("vacate {} rows", rows.len()),
        }
    }
}

// ---- log entries -----------------------------------------------------------------

/// Bytes before an entry's change: length of the change, CRC-32C of
/// sequence number and change, sequence number.
pub const ENTRY_HEADER: usize = 16;

/// CRC-32C (Castagnoli), as PostgreSQL's WAL uses it.
pub fn crc32c(mut crc: u32, bytes: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 { (c >> 1) ^ 0x82F6_3B78 } else { c >> 1 };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    };
    crc = !crc;
    for &b in bytes {
        crc = TABLE[((crc ^ b as u32) & 0xff) as usize] ^ (crc >> 8);
    }
    !crc
}

/// Append change `seq` as a log entry.
pub fn frame(seq: u64, change: &Change, out: &mut Vec<u8>) {
    let at = out.len();
    out.extend_from_slice(&[0; ENTRY_HEADER]);
    change.encode(out);
    let len = (out.len() - at - ENTRY_HEADER) as u32;
    out[at + 8..at + 16].copy_from_slice(&seq.to_le_bytes());
    let crc = crc32c(crc32c(0, &out[at + 8..at + 16]), &out[at + ENTRY_HEADER..]);
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
    out[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
}

/// The entries of a log, in order, until its end or the first entry that is
/// incomplete or fails its checksum (a torn or half-written tail).
pub struct Entries<'a> {
    buf: &'a [u8],
    at: usize,
    /// Why reading stopped before the end, if it did.
    pub stopped: Option<DecodeError>,
}

impl<'a> Entries<'a> {
    pub fn new(buf: &'a [u8]) -> Entries<'a> {
        Entries { buf, at: 0, stopped: None }
    }

    /// Bytes consumed by the entries returned so far.
    pub fn consumed(&self) -> usize {
        self.at
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = (u64, Change<'a>);

    fn next(&mut self) -> Option<(u64, Change<'a>)> {
        let rest = &self.buf[self.at..];
        if rest.len() < ENTRY_HEADER {
            if !rest.is_empty() {
                self.stopped = Some(DecodeError::Truncated);
            }
            return None;
        }
        let len = u32::from_le_bytes(rest[0..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(rest[4..8].try_into().expect("4 bytes"));
        let seq = u64::from_le_bytes(rest[8..16].try_into().expect("8 bytes"));
        if len == 0 && crc == 0 && seq == 0 {
            return None; // zeroed space: the end of the log
        }
        let Some(body) = rest.get(ENTRY_HEADER..ENTRY_HEADER + len) else {
            self.stopped = Some(DecodeError::Truncated);
            return None;
        };
        if crc32c(crc32c(0, &rest[8..16]), body) != crc {
            self.stopped = Some(DecodeError::BadChecksum { seq });
            return None;
        }
        match Change::decode(body) {
            Ok(c) => {
                self.at += ENTRY_HEADER + len;
                Some((seq, c))
            }
            Err(e) => {
                self.stopped = Some(e);
                None
            }
        }
    }
}

// ---- redo ---------------------------------------------------------------------------

impl Table {
    /// Repeat `change` (all kinds but [`Change::Create`], which makes a new
    /// table). The table must be in the state the change was made in; no
    /// writer may run concurrently (redo is single-threaded). Free-row
    /// bookkeeping is not kept: call [`rebuild_free_rows`](Self::rebuild_free_rows)
    /// before writers use the table.
    pub fn replay(&self, arena: &Arena, change: &Change) -> AllocResult<()> {
        match change {
            Change::Create { .. } => panic!("Create makes a new table; it is not replayed into one"),
            Change::Insert { row, xmin, cmin, flags, locker, values } => {
                let values: Vec<Value> = values.iter().map(|v| v.value()).collect();
                self.insert_row_at(arena, *row, &values, *xmin, *cmin, *flags, *locker)
            }
            Change::Modify { row, change } => loop {
                let Some(h) = self.header(arena, *row) else { return Ok(()) };
                if self.modify_row(arena, *row, &h, change)? {
                    return Ok(());
                }
            },
            Change::Update { row, xid, cid, changes } => {
                let changes: Vec<(usize, Value)> = changes.iter().map(|(c, v)| (*c, v.value())).collect();
                let mut blobs = vec![];
                self.prepare_blobs(arena, changes.iter().map(|(_, v)| v), &mut blobs)?;
                loop {
                    let Some(h) = self.header(arena, *row) else {
                        self.discard_blobs(arena, &blobs);
                        return Ok(());
                    };
                    if self.update_in_place(arena, *row, &h, *xid, *cid, &changes, &blobs)? {
                        return Ok(());
                    }
                }
            }
            Change::Undo { row, xid } => {
                self.undo_update(arena, *row, *xid);
                Ok(())
            }
            Change::Chain { row, records } => self.build_chain(arena, *row, records),
            Change::SetColumn { col, spec, fill, state, owner_xid } => {
                let _g = self.schema_lock.lock();
                self.set_column(arena, *col, *spec, fill.value(), *state)?;
                self.column(arena, *col).set_owner_xid(*owner_xid);
                Ok(())
            }
            Change::ColumnState { col, state } => {
                if *col < self.ncols() {
                    self.column(arena, *col).set_state(*state);
                }
                Ok(())
            }
            Change::Vacate { rows } => {
                self.vacate_rows(arena, rows);
                Ok(())
            }
        }
    }

    /// The column layout and states, as [`Change::Create`] records them.
    pub fn columns(&self, arena: &Arena) -> Vec<(ColumnSpec, ColumnState)> {
        (0..self.ncols()).map(|i| (self.column(arena, i).spec(), self.column(arena, i).state())).collect()
    }

    /// The version chain of `row` as [`Change::Chain`] records it (newest
    /// record first). The caller keeps the chain from being pruned.
    pub fn chain_records<'a>(&self, arena: &'a Arena, row: u64) -> Vec<ChainRecord<'a>> {
        match self.header(arena, row) {
            Some(h) => self.chain_records_from(arena, h.chain),
            None => vec![],
        }
    }

    /// The version chain that starts at record `chain` (0: none), as
    /// [`chain_records`](Self::chain_records) gives it.
    pub fn chain_records_from<'a>(&self, arena: &'a Arena, chain: crate::arena::Off) -> Vec<ChainRecord<'a>> {
        let mut out = vec![];
        let mut cur = chain;
        let mut images = vec![];
        while cur != 0 {
            // SAFETY: the caller keeps the chain alive (rewrites hold an
            // exclusive lock on the relation).
            let rec = unsafe { self.undo_rec(arena, cur) };
            // SAFETY: as above.
            unsafe { self.before_images(arena, rec, &mut images) };
            out.push(ChainRecord {
                xmin: rec.xmin,
                cmin: rec.cmin,
                superseded_by: rec.superseded_by,
                xmin_flags: rec.xmin_flags,
                images: images
                    .iter()
                    // SAFETY: as above; the images outlive the borrow.
                    .map(|im| (im.col, unsafe { Val::from_stored(im.value, self.column(arena, im.col).spec()) }))
                    .collect(),
            });
            cur = rec.next.load(std::sync::atomic::Ordering::Acquire);
        }
        out
    }

    /// Rebuild the list of reusable row ids from the vacant rows (after
    /// redo, which does not keep it).
    pub fn rebuild_free_rows(&self, arena: &Arena) {
        self.clear_free_rows(arena);
        let vacant: Vec<u64> = (0..self.nrows())
            .filter(|&r| self.stamp(arena, r).is_some_and(|s| s.flags.load(std::sync::atomic::Ordering::Relaxed) & flag::VACANT != 0))
            .collect();
        self.push_vacant_rows(arena, &vacant);
    }
}
