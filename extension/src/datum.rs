//! Datums to engine values and back.
//!
//! Storage per attribute (DESIGN §3):
//!
//! * pass-by-value types (`attlen` 1, 2, 4, 8): their bytes, inline;
//! * fixed-length pass-by-reference types up to [`MAX_INLINE_FIXED`] bytes
//!   (uuid, interval, name, point, box, macaddr, ...): their bytes, inline,
//!   the element width rounded up to a power of two;
//! * variable-length types (`attlen` -1): detoasted on write. A value
//!   shorter than the column's slot is stored in it as a short (1-byte
//!   header) varlena; longer ones as an immutable blob with a regular 4-byte
//!   header, so a scan can hand out a pointer to it without copying. Slots
//!   take 16 bytes, or up to 64 for a `varchar(n)` or `char(n)` whose `n`
//!   one-byte characters fit ([`var_slot_bytes`]);
//! * C strings (`attlen` -2) and larger fixed-length types: blobs.
//!
//! Dropped attributes store nothing (they are always NULL).

use anker_engine::decimal::SLOT_NUMERIC_MAX;
use anker_engine::table::{ColumnKind, ColumnSpec, Table, Value, ValueRef, MAX_VAR_SLOT, VAR_SLOT};
use pgrx::pg_sys;

/// Fixed-length pass-by-reference values larger than this go to blobs.
pub const MAX_INLINE_FIXED: i16 = 64;

/// The attributes of a tuple descriptor.
pub fn attrs<'a>(desc: pg_sys::TupleDesc) -> &'a [pg_sys::FormData_pg_attribute] {
    // SAFETY: a tuple descriptor holds `natts` attributes.
    unsafe { (*desc).attrs.as_slice((*desc).natts as usize) }
}

/// How an attribute is stored.
pub fn spec_for(att: &pg_sys::FormData_pg_attribute) -> ColumnSpec {
    if att.attisdropped {
        ColumnSpec::fixed(1)
    } else if att.attbyval || (att.attlen > 0 && att.attlen <= MAX_INLINE_FIXED) {
        ColumnSpec::fixed(att.attlen as usize)
    } else if att.attlen == -1 {
        ColumnSpec::var_slot(var_slot_bytes(att))
    } else {
        ColumnSpec::var()
    }
}

/// The slot a new variable-length column gets. A `varchar(n)` or `char(n)`
/// of up to 63 characters gets one that holds `n` one-byte characters after
/// the header (`char(24)`: 25 bytes, a 32-byte slot; `varchar(50)`: 64),
/// which keeps them out of blobs: a blob costs a second cache miss per read
/// and an allocation per write, and takes about as much memory as the slot
/// (its length, allocator header and 4-byte varlena header). A value longer
/// than its slot (multi-byte characters) still goes to a blob. Other types
/// keep 16 bytes, which is what most short values need.
fn var_slot_bytes(att: &pg_sys::FormData_pg_attribute) -> usize {
    let limited = att.atttypid == pg_sys::VARCHAROID || att.atttypid == pg_sys::BPCHAROID;
    let header = pg_sys::VARHDRSZ as i32;
    match att.atttypmod - header {
        n if limited && n > 0 && (n as usize) < MAX_VAR_SLOT => n as usize + 1,
        _ => VAR_SLOT,
    }
}

/// Bytes of the slot attribute `i` is stored in: its column's in `table`,
/// or, for a column not there yet, the one [`spec_for`] gives it.
#[inline]
fn slot_bytes(att: &pg_sys::FormData_pg_attribute, i: usize, table: Option<&Table>) -> usize {
    match table {
        Some(t) if i < t.ncols() => match t.column(crate::shmem::arena(), i).spec() {
            spec if spec.kind == ColumnKind::Var => spec.copy_bytes(),
            _ => VAR_SLOT,
        },
        _ => spec_for(att).copy_bytes(),
    }
}

pub fn specs_for(desc: pg_sys::TupleDesc) -> Vec<ColumnSpec> {
    attrs(desc).iter().map(spec_for).collect()
}

/// One encoded value, owning whatever bytes it needs.
enum Enc {
    Null,
    Fixed([u8; 8], usize),
    FixedRef(*const u8, usize),
    /// A short varlena (its bytes in the first `.1` of `.0`).
    Inline([u8; MAX_VAR_SLOT], usize),
    /// A short numeric: its short varlena (in a slot's bytes) and length.
    Numeric([u8; VAR_SLOT], usize),
    BlobRef(*const u8, usize),
    BlobOwned(Vec<u8>),
}

/// Converts rows of datums into engine values. Reused across rows to keep
/// allocations down.
#[derive(Default)]
pub struct Encoder {
    encs: Vec<Enc>,
}

#[inline]
fn is_1b(p: *const u8) -> bool {
    // SAFETY: p points at a varlena header.
    unsafe { *p & 0x01 == 0x01 }
}

/// Is this varlena external (a TOAST pointer or an expanded object) or
/// compressed, so that it must go through `pg_detoast_datum_packed`? The
/// header tests of `varatt.h` for little-endian machines; plain values
/// (nearly all of them) skip the guarded call.
#[inline]
fn needs_detoast(p: *const u8) -> bool {
    // SAFETY: p points at a varlena header.
    let b = unsafe { *p };
    if is_1b(p) {
        is_external(p)
    } else {
        b & 0x03 == 0x02 // VARATT_IS_4B_C
    }
}

/// `VARATT_IS_EXTERNAL`: a TOAST pointer or an expanded object, whose value
/// is stored elsewhere (a one-byte header of 0x01).
#[inline]
pub fn is_external(p: *const u8) -> bool {
    // SAFETY: p points at a varlena header.
    unsafe { *p == 0x01 }
}

/// Total size of an in-memory (not external, not compressed) varlena.
#[inline]
pub fn varsize_any(p: *const u8) -> usize {
    // SAFETY: p points at a detoasted varlena header.
    unsafe {
        if is_1b(p) {
            ((*p >> 1) & 0x7f) as usize
        } else {
            (((p as *const u32).read_unaligned() >> 2) & 0x3fff_ffff) as usize
        }
    }
}

/// The payload of an in-memory (not external, not compressed) varlena: the bytes after
/// its 1- or 4-byte header.
///
/// # Safety
/// `p` points at such a varlena, which outlives the slice.
#[inline]
pub unsafe fn varlena_payload<'a>(p: *const u8) -> &'a [u8] {
    let total = varsize_any(p);
    let header = if is_1b(p) { 1 } else { 4 };
    std::slice::from_raw_parts(p.add(header), total.saturating_sub(header))
}

impl Encoder {
    /// Encode `values`/`nulls` (one per attribute of `desc`) for `table`
    /// (None: for columns about to be created with [`spec_for`]): columns
    /// beyond the attributes (left behind by an aborted ALTER TABLE) get
    /// NULL.
    ///
    /// # Safety
    /// The datums must be valid for their attributes' types and outlive the
    /// values returned by [`values`](Self::values).
    pub unsafe fn encode(&mut self, desc: pg_sys::TupleDesc, values: &[pg_sys::Datum], nulls: &[bool], table: Option<&Table>) {
        self.encode_some(desc, values, nulls, table, |_| true);
    }

    /// [`encode`](Self::encode) the attributes `wanted` accepts (0-based);
    /// the others get NULL, as placeholders the caller must not store.
    ///
    /// # Safety
    /// As for [`encode`](Self::encode).
    pub unsafe fn encode_some(&mut self, desc: pg_sys::TupleDesc, values: &[pg_sys::Datum], nulls: &[bool], table: Option<&Table>, wanted: impl Fn(usize) -> bool) {
        let ncols = table.map_or(0, |t| t.ncols());
        self.encs.clear();
        let atts = attrs(desc);
        self.encs.reserve(atts.len().max(ncols));
        for (i, att) in atts.iter().enumerate() {
            if nulls[i] || att.attisdropped || !wanted(i) {
                self.encs.push(Enc::Null);
                continue;
            }
            let d = values[i];
            let enc = if att.attbyval {
                Enc::Fixed((d.value() as u64).to_ne_bytes(), att.attlen as usize)
            } else if att.attlen > 0 && att.attlen <= MAX_INLINE_FIXED {
                Enc::FixedRef(d.cast_mut_ptr::<u8>(), att.attlen as usize)
            } else if att.attlen > 0 {
                Enc::BlobRef(d.cast_mut_ptr::<u8>(), att.attlen as usize)
            } else if att.attlen == -2 {
                let s = std::ffi::CStr::from_ptr(d.cast_mut_ptr::<std::ffi::c_char>());
                Enc::BlobRef(s.as_ptr() as *const u8, s.to_bytes_with_nul().len())
            } else {
                // Flatten external, compressed and expanded values.
                let mut p = d.cast_mut_ptr::<u8>() as *const u8;
                if needs_detoast(p) {
                    p = pg_sys::pg_detoast_datum_packed(p as *mut pg_sys::varlena) as *const u8;
                }
                let total = varsize_any(p);
                let header = if is_1b(p) { 1 } else { 4 };
                let payload = total - header;
                if payload < slot_bytes(att, i, table) {
                    // as a short varlena, whatever header it came with
                    let mut slot = [0u8; MAX_VAR_SLOT];
                    slot[0] = (((payload + 1) as u8) << 1) | 1;
                    std::ptr::copy_nonoverlapping(p.add(header), slot.as_mut_ptr().add(1), payload);
                    if att.atttypid == pg_sys::NUMERICOID && payload < SLOT_NUMERIC_MAX {
                        let mut short = [0u8; VAR_SLOT];
                        short.copy_from_slice(&slot[..VAR_SLOT]);
                        Enc::Numeric(short, payload + 1)
                    } else {
                        Enc::Inline(slot, payload + 1)
                    }
                } else if header == 1 {
                    // Re-header as a 4-byte varlena for the blob.
                    let mut v = Vec::with_capacity(payload + 4);
                    v.extend_from_slice(&(((payload + 4) as u32) << 2).to_ne_bytes());
                    v.extend_from_slice(std::slice::from_raw_parts(p.add(1), payload));
                    Enc::BlobOwned(v)
                } else {
                    Enc::BlobRef(p, total)
                }
            };
            self.encs.push(enc);
        }
        while self.encs.len() < ncols {
            self.encs.push(Enc::Null);
        }
    }

    /// The engine values of the last encoded row.
    pub fn values(&self) -> Vec<Value<'_>> {
        let mut out = Vec::with_capacity(self.encs.len());
        self.values_into(&mut out);
        out
    }

    /// [`values`](Self::values), appended to `out`.
    pub fn values_into<'e>(&'e self, out: &mut Vec<Value<'e>>) {
        out.extend(self.encs.iter().map(|e| match e {
            Enc::Null => Value::Null,
            Enc::Fixed(b, n) => Value::Fixed(&b[..*n]),
            // SAFETY: encode's contract keeps the datums alive.
            Enc::FixedRef(p, n) => Value::Fixed(unsafe { std::slice::from_raw_parts(*p, *n) }),
            Enc::Inline(s, n) => Value::Inline(&s[..*n]),
            Enc::Numeric(v, n) => Value::Numeric(&v[..*n]),
            // SAFETY: as above.
            Enc::BlobRef(p, n) => Value::Blob(unsafe { std::slice::from_raw_parts(*p, *n) }),
            Enc::BlobOwned(v) => Value::Blob(v),
        }));
    }
}

/// Turn a stored value into a datum. By-reference bytes in live pages can
/// change under a reader, so they are copied into `buf` (8-byte aligned, with
/// room for a short varlena or the attribute's fixed length); blobs are immutable and handed
/// out in place.
///
/// # Safety
/// `v` must come from a column stored with [`spec_for`]`(att)`.
#[inline]
pub unsafe fn to_datum_buffered(att: &pg_sys::FormData_pg_attribute, v: ValueRef, buf: *mut u8) -> Option<pg_sys::Datum> {
    match v {
        ValueRef::Null => None,
        ValueRef::Fixed(p) => {
            if att.attbyval {
                let d = match att.attlen {
                    1 => (*(p as *const i8)) as i64 as u64,
                    2 => (p as *const i16).read_unaligned() as i64 as u64,
                    4 => (p as *const i32).read_unaligned() as i64 as u64,
                    _ => (p as *const u64).read_unaligned(),
                };
                Some(pg_sys::Datum::from(d as usize))
            } else {
                std::ptr::copy_nonoverlapping(p, buf, att.attlen as usize);
                Some(pg_sys::Datum::from(buf as usize))
            }
        }
        ValueRef::Inline(p) => {
            // (the slot's first byte is the short varlena's header: its length)
            std::ptr::copy_nonoverlapping(p, buf, (*p >> 1) as usize);
            Some(pg_sys::Datum::from(buf as usize))
        }
        ValueRef::Blob(p, _) => {
            // Handed out in place, and read by PostgreSQL only once the
            // row's other columns are filled: start loading it now, so that
            // the cache misses of a row's blobs overlap.
            anker_engine::table::prefetch(p);
            Some(pg_sys::Datum::from(p as usize))
        }
    }
}

/// Turn a value from memory that cannot change while the datum is in use
/// (a snapshot's frozen pages, or blobs) into a datum without copying.
///
/// # Safety
/// As for [`to_datum_buffered`].
#[inline]
pub unsafe fn to_datum_stable(att: &pg_sys::FormData_pg_attribute, v: ValueRef) -> Option<pg_sys::Datum> {
    match v {
        ValueRef::Fixed(p) if !att.attbyval => Some(pg_sys::Datum::from(p as usize)),
        ValueRef::Inline(p) => Some(pg_sys::Datum::from(p as usize)),
        other => to_datum_buffered(att, other, std::ptr::null_mut()),
    }
}
