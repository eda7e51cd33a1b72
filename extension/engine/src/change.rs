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
//! Changes are framed into log entries ([`frame`], [`Entries`]): a
//! per-table sequence number, then the change (varints, as is every number
//! in a change: most are small, and WAL volume is what they cost), so that
//! redo can tell which changes a table loaded from disk already has. An
//! entry has no length and no checksum of its own: a change's encoding
//! delimits itself, WAL records carry PostgreSQL's CRC, and the log's pages
//! on disk a checksum of their bytes (the extension's `pages.rs`). A reader
//! stops at the first entry that does not decode (a cut-off tail).

use crate::arena::{AllocResult, Arena};
use crate::table::{flag, ColumnKind, ColumnSpec, ColumnState, RowChange, Table, Value, ValueRef};

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
    /// A short numeric's varlena ([`Value::Numeric`]): logged without the slot's tag.
    Numeric(&'a [u8]),
}

impl<'a> Val<'a> {
    pub fn from_value(v: &Value<'a>) -> Val<'a> {
        match *v {
            Value::Null => Val::Null,
            Value::Fixed(b) => Val::Fixed(b),
            Value::Inline(b) => Val::Inline(b),
            Value::Blob(b) => Val::Blob(b),
            Value::Numeric(b) => Val::Numeric(b),
        }
    }

    pub fn value(&self) -> Value<'a> {
        match *self {
            Val::Null => Value::Null,
            Val::Fixed(b) => Value::Fixed(b),
            Val::Inline(b) => Value::Inline(b),
            Val::Blob(b) => Value::Blob(b),
            Val::Numeric(b) => Value::Numeric(b),
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
            ValueRef::Inline(p) => {
                let slot = std::slice::from_raw_parts(p, 1 << spec.width_shift);
                crate::decimal::tagged_numeric(slot).map_or(Val::Inline(slot), Val::Numeric)
            }
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
    BadNumber,
    BadSpec,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Truncated => write!(f, "truncated change"),
            DecodeError::BadKind(k) => write!(f, "unknown change kind {k}"),
            DecodeError::BadValue(k) => write!(f, "bad value tag {k}"),
            DecodeError::BadNumber => write!(f, "number out of range"),
            DecodeError::BadSpec => write!(f, "bad column layout"),
        }
    }
}

// ---- encoding ---------------------------------------------------------------
//
// Integers are LEB128 varints (row ids, xids and command ids are mostly
// small); a value is one varint of its length and tag, then its bytes, with
// the trailing zeros of fixed-width and inline values left out (the engine
// pads values with zeros to the column width). An int4 of 3 is two bytes.

/// `v` as a LEB128 varint (seven bits a byte, low bits first): the bytes
/// and how many of them are used.
pub fn varint(mut v: u64) -> ([u8; 10], usize) {
    let (mut b, mut n) = ([0; 10], 0);
    while v >= 0x80 {
        b[n] = v as u8 | 0x80;
        v >>= 7;
        n += 1;
    }
    b[n] = v as u8;
    (b, n + 1)
}

/// Append `v` as a LEB128 varint.
#[inline]
pub fn put_varint(out: &mut Vec<u8>, v: u64) {
    if v < 0x80 {
        // most numbers of a change: kinds, counts, columns, short lengths
        out.push(v as u8);
        return;
    }
    let (b, n) = varint(v);
    out.extend_from_slice(&b[..n]);
}

/// Read a varint written by [`put_varint`] at `*at`, advancing it.
pub fn get_varint(buf: &[u8], at: &mut usize) -> Result<u64, DecodeError> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*at).ok_or(DecodeError::Truncated)?;
        *at += 1;
        v |= ((b & 0x7f) as u64) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(DecodeError::BadNumber)
}

const V_NULL: u64 = 0;
const V_FIXED: u64 = 1;
const V_INLINE: u64 = 2;
const V_BLOB: u64 = 3;
/// V_NULL's tag with a length: a short numeric ([`Val::Numeric`]), its varlena only
/// (the tag and scaled value are computed again when it is stored).
const V_NUMERIC: u64 = V_NULL;

/// `b` without its trailing zero bytes.
fn trim_zeros(b: &[u8]) -> &[u8] {
    let n = b.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1);
    &b[..n]
}

struct Writer<'o>(&'o mut Vec<u8>);

/// The xid a WAL record's header carries, which a change's own xid fields
/// may leave out ([`frame_for_record`]); None on pages, where every xid is
/// written.
type RecordXid = Option<u32>;

impl Writer<'_> {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn num(&mut self, v: u64) {
        put_varint(self.0, v);
    }
    fn tagged(&mut self, tag: u64, b: &[u8]) {
        self.num((b.len() as u64) << 2 | tag);
        self.0.extend_from_slice(b);
    }
    fn val(&mut self, v: &Val) {
        match v {
            Val::Null => self.num(V_NULL),
            Val::Fixed(b) => self.tagged(V_FIXED, trim_zeros(b)),
            Val::Inline(b) => self.tagged(V_INLINE, trim_zeros(b)),
            Val::Blob(b) => self.tagged(V_BLOB, b),
            Val::Numeric(b) => self.tagged(V_NUMERIC, b),
        }
    }
    fn spec(&mut self, s: ColumnSpec, state: ColumnState) {
        self.u8(s.kind as u8);
        self.u8(s.width_shift as u8);
        self.u8(state as u8);
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
    fn u64(&mut self) -> Result<u64, DecodeError> {
        get_varint(self.buf, &mut self.at)
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        u32::try_from(self.u64()?).map_err(|_| DecodeError::BadNumber)
    }
    fn val(&mut self) -> Result<Val<'a>, DecodeError> {
        let v = self.u64()?;
        let n = usize::try_from(v >> 2).map_err(|_| DecodeError::BadNumber)?;
        Ok(match v & 3 {
            V_NULL if n == 0 => Val::Null,
            V_NUMERIC => {
                let b = self.take(n)?;
                if n > crate::decimal::SLOT_NUMERIC_MAX || usize::from(b[0]) != (n << 1) | 1 {
                    return Err(DecodeError::BadValue(V_NUMERIC as u8));
                }
                Val::Numeric(b)
            }
            V_FIXED => Val::Fixed(self.take(n)?),
            V_INLINE => Val::Inline(self.take(n)?),
            V_BLOB => Val::Blob(self.take(n)?),
            t => return Err(DecodeError::BadValue(t as u8)),
        })
    }
    fn spec(&mut self) -> Result<(ColumnSpec, ColumnState), DecodeError> {
        let kind = if self.u8()? == ColumnKind::Var as u8 { ColumnKind::Var } else { ColumnKind::Fixed };
        let width_shift = self.u8()? as u32;
        let state = column_state(self.u8()?);
        let spec = ColumnSpec { kind, width_shift };
        if !spec.is_valid() {
            return Err(DecodeError::BadSpec);
        }
        Ok((spec, state))
    }
    fn count(&mut self) -> Result<usize, DecodeError> {
        let n = self.u64()?;
        // every element takes at least a byte: refuse absurd counts early
        if n > (self.buf.len() - self.at) as u64 {
            return Err(DecodeError::Truncated);
        }
        Ok(n as usize)
    }
}

fn column_state(b: u8) -> ColumnState {
    match b {
        1 => ColumnState::Tentative,
        2 => ColumnState::Leftover,
        _ => ColumnState::Permanent,
    }
}

/// Which optional parts of a [`Change::Modify`] follow its row id.
const M_XMIN: u8 = 1;
const M_XMAX: u8 = 2;
const M_LOCKER: u8 = 4;
const M_NEXT: u8 = 8;
const M_SET: u8 = 16;
const M_CLEAR: u8 = 32;

/// In WAL records only: a [`Change::Modify`]'s deleter, or its locker, is
/// the record's xid and left out.
const M_XMAX_IS_RECORD_XID: u8 = 64;
const M_LOCKER_IS_RECORD_XID: u8 = 128;

/// In WAL records only, a bit of the kind byte: the change's own xid
/// ([`Change::Insert`]'s xmin, [`Change::Update`]'s and [`Change::Undo`]'s
/// xid) is the record's and left out.
const K_RECORD_XID: u8 = 128;

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
        self.encode_with(out, None)
    }

    /// [`encode`](Self::encode), leaving out xid fields equal to
    /// `record_xid` (flagged, so that decoding with the same xid puts them
    /// back).
    fn encode_with(&self, out: &mut Vec<u8>, record_xid: RecordXid) {
        self.encode_head(out, record_xid);
        self.encode_values(out);
    }

    /// The row values an insert or in-place update ends with (nothing for
    /// other changes): the same bytes on a page and in a record, which
    /// [`frame_for_page_and_record`] encodes once for both.
    fn encode_values(&self, out: &mut Vec<u8>) {
        let mut w = Writer(out);
        match self {
            Change::Insert { values, .. } => {
                for v in values {
                    w.val(v);
                }
            }
            Change::Update { changes, .. } => {
                for (c, v) in changes {
                    w.num(*c as u64);
                    w.val(v);
                }
            }
            _ => {}
        }
    }

    /// The encoding up to [`encode_values`](Self::encode_values)' part.
    fn encode_head(&self, out: &mut Vec<u8>, record_xid: RecordXid) {
        let mut w = Writer(out);
        let is_record_xid = |x: u32| record_xid == Some(x);
        let kind = |k: u8, x: u32| if is_record_xid(x) { k | K_RECORD_XID } else { k };
        match self {
            Change::Create { columns } => {
                w.u8(K_CREATE);
                w.num(columns.len() as u64);
                for (s, st) in columns {
                    w.spec(*s, *st);
                }
            }
            Change::Insert { row, xmin, cmin, flags, locker, values } => {
                w.u8(kind(K_INSERT, *xmin));
                w.num(*row);
                if !is_record_xid(*xmin) {
                    w.num(*xmin as u64);
                }
                for n in [*cmin as u64, *flags as u64, *locker as u64, values.len() as u64] {
                    w.num(n);
                }
            }
            Change::Modify { row, change } => {
                w.u8(K_MODIFY);
                w.num(*row);
                let present = [
                    (M_XMIN, change.xmin.is_some()),
                    (M_XMAX, change.xmax.is_some()),
                    (M_LOCKER, change.locker.is_some()),
                    (M_NEXT, change.next.is_some()),
                    (M_SET, change.set_flags != 0),
                    (M_CLEAR, change.clear_flags != 0),
                    (M_XMAX_IS_RECORD_XID, change.xmax.is_some_and(|(x, _)| is_record_xid(x))),
                    (M_LOCKER_IS_RECORD_XID, change.locker.is_some_and(is_record_xid)),
                ];
                w.u8(present.iter().filter(|(_, p)| *p).fold(0, |m, (bit, _)| m | bit));
                if let Some(x) = change.xmin {
                    w.num(x as u64);
                }
                if let Some((x, c)) = change.xmax {
                    if !is_record_xid(x) {
                        w.num(x as u64);
                    }
                    w.num(c as u64);
                }
                if let Some(l) = change.locker.filter(|l| !is_record_xid(*l)) {
                    w.num(l as u64);
                }
                if let Some(n) = change.next {
                    w.num(n);
                }
                for f in [change.set_flags, change.clear_flags] {
                    if f != 0 {
                        w.num(f as u64);
                    }
                }
            }
            Change::Update { row, xid, cid, changes } => {
                w.u8(kind(K_UPDATE, *xid));
                w.num(*row);
                if !is_record_xid(*xid) {
                    w.num(*xid as u64);
                }
                for n in [*cid as u64, changes.len() as u64] {
                    w.num(n);
                }
            }
            Change::Undo { row, xid } => {
                w.u8(kind(K_UNDO, *xid));
                w.num(*row);
                if !is_record_xid(*xid) {
                    w.num(*xid as u64);
                }
            }
            Change::Chain { row, records } => {
                w.u8(K_CHAIN);
                w.num(*row);
                w.num(records.len() as u64);
                for r in records {
                    for n in [r.xmin, r.cmin, r.superseded_by, r.xmin_flags, r.images.len() as u32] {
                        w.num(n as u64);
                    }
                    for (c, v) in &r.images {
                        w.num(*c as u64);
                        w.val(v);
                    }
                }
            }
            Change::SetColumn { col, spec, fill, state, owner_xid } => {
                w.u8(K_SET_COLUMN);
                w.num(*col as u64);
                w.spec(*spec, *state);
                w.num(*owner_xid as u64);
                w.val(fill);
            }
            Change::ColumnState { col, state } => {
                w.u8(K_COLUMN_STATE);
                w.num(*col as u64);
                w.u8(*state as u8);
            }
            Change::Vacate { rows } => {
                // rows as differences from the previous one (zigzag: any order)
                w.u8(K_VACATE);
                w.num(rows.len() as u64);
                let mut prev = 0u64;
                for &r in rows {
                    let d = r.wrapping_sub(prev) as i64;
                    w.num(((d << 1) ^ (d >> 63)) as u64);
                    prev = r;
                }
            }
        }
    }

    /// Read a change encoded by [`encode`](Self::encode), all of `buf`; it
    /// borrows values from `buf`.
    pub fn decode(buf: &'a [u8]) -> Result<Change<'a>, DecodeError> {
        match Self::decode_prefix(buf)? {
            (change, n) if n == buf.len() => Ok(change),
            _ => Err(DecodeError::Truncated),
        }
    }

    /// Read the change encoded at the start of `buf`: the change and the
    /// bytes its encoding took (an encoding delimits itself).
    pub fn decode_prefix(buf: &'a [u8]) -> Result<(Change<'a>, usize), DecodeError> {
        Self::decode_prefix_with(buf, None)
    }

    /// [`decode_prefix`](Self::decode_prefix) of an encoding that may leave
    /// out xid fields equal to `record_xid`; with None, one that does is
    /// refused.
    fn decode_prefix_with(buf: &'a [u8], record_xid: RecordXid) -> Result<(Change<'a>, usize), DecodeError> {
        let mut r = Reader { buf, at: 0 };
        let kind_byte = r.u8()?;
        let left_out = kind_byte & K_RECORD_XID != 0;
        let kind = kind_byte & !K_RECORD_XID;
        if left_out && (record_xid.is_none() || !matches!(kind, K_INSERT | K_UPDATE | K_UNDO)) {
            return Err(DecodeError::BadKind(kind_byte));
        }
        // the change's own xid: the record's, or the next number
        let own_xid = |r: &mut Reader| match record_xid.filter(|_| left_out) {
            Some(x) => Ok(x),
            None => r.u32(),
        };
        let change = match kind {
            K_CREATE => {
                let n = r.count()?;
                let mut columns = Vec::with_capacity(n);
                for _ in 0..n {
                    columns.push(r.spec()?);
                }
                Change::Create { columns }
            }
            K_INSERT => {
                let (row, xmin) = (r.u64()?, own_xid(&mut r)?);
                let (cmin, flags, locker) = (r.u32()?, r.u32()?, r.u32()?);
                let n = r.count()?;
                let mut values = Vec::with_capacity(n);
                for _ in 0..n {
                    values.push(r.val()?);
                }
                Change::Insert { row, xmin, cmin, flags, locker, values }
            }
            K_MODIFY => {
                let row = r.u64()?;
                let present = r.u8()?;
                let has = |bit: u8| present & bit != 0;
                let left_out_without = |bit: u8, field: u8| has(bit) && (record_xid.is_none() || !has(field));
                if left_out_without(M_XMAX_IS_RECORD_XID, M_XMAX) || left_out_without(M_LOCKER_IS_RECORD_XID, M_LOCKER) {
                    return Err(DecodeError::BadKind(kind_byte));
                }
                // an xid, or the record's where it was left out
                let xid_unless = |r: &mut Reader, bit: u8| match record_xid.filter(|_| has(bit)) {
                    Some(x) => Ok(x),
                    None => r.u32(),
                };
                let xmin = if has(M_XMIN) { Some(r.u32()?) } else { None };
                let xmax = if has(M_XMAX) { Some((xid_unless(&mut r, M_XMAX_IS_RECORD_XID)?, r.u32()?)) } else { None };
                let locker = if has(M_LOCKER) { Some(xid_unless(&mut r, M_LOCKER_IS_RECORD_XID)?) } else { None };
                let next = if has(M_NEXT) { Some(r.u64()?) } else { None };
                let set_flags = if has(M_SET) { r.u32()? } else { 0 };
                let clear_flags = if has(M_CLEAR) { r.u32()? } else { 0 };
                Change::Modify { row, change: RowChange { xmin, xmax, set_flags, clear_flags, locker, next } }
            }
            K_UPDATE => {
                let (row, xid) = (r.u64()?, own_xid(&mut r)?);
                let cid = r.u32()?;
                let n = r.count()?;
                let mut changes = Vec::with_capacity(n);
                for _ in 0..n {
                    changes.push((r.u32()? as usize, r.val()?));
                }
                Change::Update { row, xid, cid, changes }
            }
            K_UNDO => Change::Undo { row: r.u64()?, xid: own_xid(&mut r)? },
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
                Change::ColumnState { col, state: column_state(r.u8()?) }
            }
            K_VACATE => {
                let n = r.count()?;
                let mut rows = Vec::with_capacity(n);
                let mut prev = 0u64;
                for _ in 0..n {
                    let z = r.u64()?;
                    let d = ((z >> 1) as i64) ^ -((z & 1) as i64);
                    prev = prev.wrapping_add(d as u64);
                    rows.push(prev);
                }
                Change::Vacate { rows }
            }
            k => return Err(DecodeError::BadKind(k)),
        };
        Ok((change, r.at))
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

/// CRC-32C (Castagnoli), as PostgreSQL's WAL uses it: with the CPU's
/// instruction where it has one (SSE 4.2), else a table a byte at a time.
pub fn crc32c(crc: u32, bytes: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.2") {
        // SAFETY: the CPU has SSE 4.2 (checked just now).
        return !unsafe { crc32c_sse42(!crc, bytes) };
    }
    !crc32c_table(!crc, bytes)
}

fn crc32c_table(mut crc: u32, bytes: &[u8]) -> u32 {
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
    for &b in bytes {
        crc = TABLE[((crc ^ b as u32) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn crc32c_sse42(crc: u32, bytes: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let mut words = bytes.chunks_exact(8);
    let mut c = crc as u64;
    for w in &mut words {
        c = _mm_crc32_u64(c, u64::from_le_bytes(w.try_into().expect("8 bytes")));
    }
    let mut c = c as u32;
    for &b in words.remainder() {
        c = _mm_crc32_u8(c, b);
    }
    c
}

/// Append change `seq` as a log entry: the sequence number (a varint, never
/// 0, so a zero byte where an entry would start ends a log) and the change.
pub fn frame(seq: u64, change: &Change, out: &mut Vec<u8>) {
    debug_assert!(seq > 0, "sequence numbers start at 1");
    put_varint(out, seq);
    change.encode(out);
}

/// [`frame`] for a WAL record whose header carries `record_xid`: the
/// change's xid fields equal to it are left out (a TPC-C row change's xid is
/// three of its record's 60-odd bytes). Such entries never reach a page:
/// redo expands them first ([`expand_record_entries`]), so a log page
/// always holds the entries [`frame`] writes.
pub fn frame_for_record(seq: u64, change: &Change, record_xid: u32, out: &mut Vec<u8>) {
    debug_assert!(seq > 0, "sequence numbers start at 1");
    put_varint(out, seq);
    change.encode_with(out, Some(record_xid));
}

/// [`frame`] into `page` and [`frame_for_record`] into `record` at once:
/// the values, which both forms share, are encoded once (a row change is
/// framed both ways on every write).
pub fn frame_for_page_and_record(seq: u64, change: &Change, record_xid: u32, page: &mut Vec<u8>, record: &mut Vec<u8>) {
    debug_assert!(seq > 0, "sequence numbers start at 1");
    put_varint(page, seq);
    change.encode_head(page, None);
    let values = page.len();
    change.encode_values(page);
    put_varint(record, seq);
    change.encode_head(record, Some(record_xid));
    record.extend_from_slice(&page[values..]);
}

/// Entries framed by [`frame_for_record`] for a record carrying
/// `record_xid`, appended to `out` as [`frame`] writes them: byte for byte
/// the entries the writer put on its page. All of `bytes` must decode.
pub fn expand_record_entries(bytes: &[u8], record_xid: u32, out: &mut Vec<u8>) -> Result<(), DecodeError> {
    let mut entries = Entries { buf: bytes, at: 0, record_xid: Some(record_xid), stopped: None };
    for (seq, change) in &mut entries {
        frame(seq, &change, out);
    }
    match entries.stopped {
        Some(e) => Err(e),
        None if entries.consumed() < bytes.len() => Err(DecodeError::Truncated),
        None => Ok(()),
    }
}

/// The entries of a log, in order, until its end, a zero byte, or the first
/// entry that does not decode (a cut-off tail).
pub struct Entries<'a> {
    buf: &'a [u8],
    at: usize,
    record_xid: RecordXid,
    /// Why reading stopped before the end, if it did.
    pub stopped: Option<DecodeError>,
}

impl<'a> Entries<'a> {
    pub fn new(buf: &'a [u8]) -> Entries<'a> {
        Entries { buf, at: 0, record_xid: None, stopped: None }
    }

    /// Bytes consumed by the entries returned so far.
    pub fn consumed(&self) -> usize {
        self.at
    }

    fn entry(&self) -> Result<Option<(usize, u64, Change<'a>)>, DecodeError> {
        let mut at = self.at;
        if at == self.buf.len() || self.buf[at] == 0 {
            return Ok(None); // the end, or zeroed space: the end of the log
        }
        let seq = get_varint(self.buf, &mut at)?;
        let (change, n) = Change::decode_prefix_with(&self.buf[at..], self.record_xid)?;
        Ok(Some((at + n, seq, change)))
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = (u64, Change<'a>);

    fn next(&mut self) -> Option<(u64, Change<'a>)> {
        match self.entry() {
            Ok(Some((end, seq, change))) => {
                self.at = end;
                Some((seq, change))
            }
            Ok(None) => None,
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
            Change::Undo { row, xid } => self.undo_update(arena, *row, *xid).map(|_| ()),
            Change::Chain { row, records } => self.build_chain(arena, *row, records),
            Change::SetColumn { col, spec, fill, state, owner_xid } => {
                let _g = self.schema_lock.lock();
                self.set_column(arena, *col, *spec, fill.value(), *state)?;
                self.column(arena, *col).set_owner_xid(*owner_xid);
                Ok(())
            }
            Change::ColumnState { col, state } => {
                if *col < self.ncols() {
                    self.set_column_state(arena, *col, *state);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for v in [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX - 1, u64::MAX] {
            let mut b = vec![];
            put_varint(&mut b, v);
            let mut at = 0;
            assert_eq!(get_varint(&b, &mut at), Ok(v));
            assert_eq!(at, b.len());
        }
        assert_eq!(get_varint(&[0x80], &mut 0), Err(DecodeError::Truncated));
        assert_eq!(get_varint(&[0xff; 11], &mut 0), Err(DecodeError::BadNumber));
    }

    #[test]
    fn both_crcs_agree_with_the_standard() {
        // the CRC-32C check value (RFC 3720)
        assert_eq!(crc32c(0, b"123456789"), 0xE306_9283);
        // extended piece by piece, as a log page's checksum is
        assert_eq!(crc32c(crc32c(crc32c(0, b"1234"), b""), b"56789"), 0xE306_9283);
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + i / 3) as u8).collect();
        for n in [0, 1, 7, 8, 9, 999, 1000] {
            assert_eq!(crc32c(0, &data[..n]), !crc32c_table(!0, &data[..n]), "{n} bytes");
        }
    }

    /// What decoding gives back: the change, with trailing zeros of fixed
    /// and inline values dropped (the engine pads them again).
    fn trimmed<'a>(c: &Change<'a>) -> Change<'a> {
        let t = |v: &Val<'a>| match *v {
            Val::Fixed(b) => Val::Fixed(trim_zeros(b)),
            Val::Inline(b) => Val::Inline(trim_zeros(b)),
            v => v,
        };
        match c {
            Change::Insert { row, xmin, cmin, flags, locker, values } => {
                Change::Insert { row: *row, xmin: *xmin, cmin: *cmin, flags: *flags, locker: *locker, values: values.iter().map(t).collect() }
            }
            Change::Update { row, xid, cid, changes } => {
                Change::Update { row: *row, xid: *xid, cid: *cid, changes: changes.iter().map(|(c, v)| (*c, t(v))).collect() }
            }
            Change::Chain { row, records } => Change::Chain {
                row: *row,
                records: records.iter().map(|r| ChainRecord { images: r.images.iter().map(|(c, v)| (*c, t(v))).collect(), ..r.clone() }).collect(),
            },
            Change::SetColumn { col, spec, fill, state, owner_xid } => {
                Change::SetColumn { col: *col, spec: *spec, fill: t(fill), state: *state, owner_xid: *owner_xid }
            }
            c => c.clone(),
        }
    }

    #[test]
    fn every_kind_round_trips() {
        let blob = vec![0u8; 40];
        let changes = vec![
            Change::Create {
                columns: vec![
                    (ColumnSpec::fixed(4), ColumnState::Permanent),
                    (ColumnSpec::var(), ColumnState::Tentative),
                    (ColumnSpec::var_slot(64), ColumnState::Permanent),
                ],
            },
            Change::Insert {
                row: 1 << 40,
                xmin: u32::MAX,
                cmin: 0,
                flags: 3,
                locker: 0,
                values: vec![Val::Null, Val::Fixed(&[5, 0, 0, 0]), Val::Fixed(&[0; 8]), Val::Inline(&[9, b'a', 0, 0]), Val::Blob(&blob), Val::Numeric(&[11, 0x00, 0x81, 0x0C, 0])],
            },
            Change::Modify { row: 7, change: RowChange { xmin: None, xmax: Some((9, 2)), set_flags: 0x40, clear_flags: 0, locker: None, next: Some(8) } },
            Change::Modify { row: 7, change: RowChange { xmin: Some(3), xmax: None, set_flags: 0, clear_flags: 1, locker: Some(0), next: None } },
            Change::Update { row: 3, xid: 100, cid: 1, changes: vec![(0, Val::Fixed(&[1, 0, 0, 0, 0, 0, 0, 1])), (4, Val::Null)] },
            Change::Undo { row: 3, xid: 100 },
            Change::Chain { row: 2, records: vec![ChainRecord { xmin: 4, cmin: 1, superseded_by: 5, xmin_flags: 2, images: vec![(1, Val::Inline(&[3, 0]))] }] },
            Change::SetColumn { col: 2, spec: ColumnSpec::fixed(8), fill: Val::Fixed(&[7, 0]), state: ColumnState::Tentative, owner_xid: 77 },
            Change::ColumnState { col: 2, state: ColumnState::Leftover },
            Change::Vacate { rows: vec![5, 3, 1 << 33, 0] },
        ];
        let mut log = vec![];
        for (k, c) in changes.iter().enumerate() {
            let mut one = vec![];
            c.encode(&mut one);
            assert_eq!(Change::decode(&one).as_ref(), Ok(&trimmed(c)), "{c:?}");
            frame(k as u64 + 1, c, &mut log);
        }
        let mut e = Entries::new(&log);
        let back: Vec<(u64, Change)> = (&mut e).collect();
        assert_eq!(e.stopped, None);
        assert_eq!(back, changes.iter().enumerate().map(|(k, c)| (k as u64 + 1, trimmed(c))).collect::<Vec<_>>());
    }

    #[test]
    fn entries_for_a_record_leave_its_xid_out_and_expand_to_the_page_bytes() {
        let x = 2_000_000;
        let changes = [
            Change::Insert { row: 9, xmin: x, cmin: 3, flags: 0, locker: x, values: vec![Val::Fixed(&[1, 2])] },
            Change::Insert { row: 9, xmin: x + 1, cmin: 3, flags: 0, locker: 0, values: vec![] },
            Change::Update { row: 300, xid: x, cid: 1, changes: vec![(2, Val::Inline(&[4, b'z']))] },
            Change::Update { row: 300, xid: 7, cid: 1, changes: vec![] },
            Change::Undo { row: 300, xid: x },
            Change::Modify { row: 8, change: RowChange { xmin: Some(x), xmax: Some((x, 4)), set_flags: 0, clear_flags: 0, locker: Some(x), next: Some(9) } },
            Change::Modify { row: 8, change: RowChange { xmin: None, xmax: Some((5, 4)), set_flags: 1, clear_flags: 0, locker: Some(x), next: None } },
            Change::Modify { row: 8, change: RowChange { xmin: None, xmax: Some((x, 0)), set_flags: 0, clear_flags: 2, locker: Some(6), next: None } },
            Change::Vacate { rows: vec![1, 2] },
            Change::SetColumn { col: 2, spec: ColumnSpec::fixed(8), fill: Val::Null, state: ColumnState::Tentative, owner_xid: x },
        ];
        let (mut page, mut record) = (vec![], vec![]);
        for (k, c) in changes.iter().enumerate() {
            let before = (page.len(), record.len());
            frame(k as u64 + 1, c, &mut page);
            frame_for_record(k as u64 + 1, c, x, &mut record);
            let (on_page, in_record) = (page.len() - before.0, record.len() - before.1);
            let (mut both_page, mut both_record) = (vec![], vec![]);
            frame_for_page_and_record(k as u64 + 1, c, x, &mut both_page, &mut both_record);
            assert_eq!((&both_page[..], &both_record[..]), (&page[before.0..], &record[before.1..]), "{c:?}");
            // x takes three bytes as a varint: each field equal to it is left out
            let left_out = match c {
                Change::Insert { xmin, .. } => (*xmin == x) as usize,
                Change::Update { xid, .. } | Change::Undo { xid, .. } => (*xid == x) as usize,
                Change::Modify { change, .. } => change.xmax.is_some_and(|m| m.0 == x) as usize + (change.locker == Some(x)) as usize,
                _ => 0,
            };
            assert_eq!(on_page - in_record, 3 * left_out, "{c:?}");
        }
        let mut expanded = vec![];
        expand_record_entries(&record, x, &mut expanded).unwrap();
        assert_eq!(expanded, page);
        // Left-out xids never decode without the record's: a page holding
        // such an entry would end its log there, not read a wrong xid.
        let mut e = Entries::new(&record);
        assert_eq!(e.by_ref().count(), 0);
        assert_eq!(e.stopped, Some(DecodeError::BadKind(K_INSERT | K_RECORD_XID)));
        let mut modify = vec![];
        frame_for_record(1, &changes[6], x, &mut modify);
        let mut e = Entries::new(&modify);
        assert_eq!(e.next(), None);
        assert_eq!(e.stopped, Some(DecodeError::BadKind(K_MODIFY)));
        // With another record's xid, the same bytes are another change; the
        // record's CRC is what ties them to their xid. Cut off, they fail.
        assert_eq!(expand_record_entries(&record[..record.len() - 1], x, &mut vec![]), Err(DecodeError::Truncated));
    }

    #[test]
    fn layouts_no_table_can_hold_are_refused() {
        for spec in [ColumnSpec { kind: ColumnKind::Var, width_shift: 3 }, ColumnSpec { kind: ColumnKind::Var, width_shift: 7 }, ColumnSpec { kind: ColumnKind::Fixed, width_shift: 9 }] {
            let mut b = vec![];
            Change::Create { columns: vec![(spec, ColumnState::Permanent)] }.encode(&mut b);
            assert_eq!(Change::decode(&b), Err(DecodeError::BadSpec), "{spec:?}");
            b.clear();
            Change::SetColumn { col: 1, spec, fill: Val::Null, state: ColumnState::Permanent, owner_xid: 0 }.encode(&mut b);
            assert_eq!(Change::decode(&b), Err(DecodeError::BadSpec), "{spec:?}");
        }
    }

    #[test]
    fn small_values_take_few_bytes() {
        let mut b = vec![];
        Change::Update { row: 1000, xid: 5000, cid: 0, changes: vec![(3, Val::Fixed(&[42, 0, 0, 0]))] }.encode(&mut b);
        // kind, row (2), xid (2), cid, count, column, value (tag and byte)
        assert_eq!(b.len(), 10);
    }
}
