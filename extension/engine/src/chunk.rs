//! Chunks: how a table's log stream carries its entries. A chunk is a
//! varint of its length and kind, then its bytes. A [`WHOLE`] chunk holds
//! complete framed entries ([`crate::change::frame`]); an entry too large
//! for one WAL record is cut into [`FIRST`], [`MIDDLE`]... [`LAST`] pieces.
//! The stream ends at its end, at a zero byte where a chunk would start
//! (zeroed space), at a chunk cut off, or at a kind it does not know.
//!
//! [`Assembler`] reads a stream fed in parts (a page at a time), so that
//! loading a table holds one chunk of its log in memory, not the whole log.

use crate::change::{get_varint, varint};

pub const WHOLE: u8 = 1;
pub const FIRST: u8 = 2;
pub const MIDDLE: u8 = 3;
pub const LAST: u8 = 4;
/// In WAL records only: a [`WHOLE`] chunk whose entries leave out the
/// record's xid ([`crate::change::frame_for_record`]). Redo makes it the
/// `WHOLE` chunk of the expanded entries before it reaches a page; a page
/// holding one would end its log there (a kind a stream does not know).
pub const WHOLE_FOR_RECORD: u8 = 5;
/// At most: a varint of a u64.
pub const CHUNK_HEADER_MAX: usize = 10;

/// The header of a chunk of kind `kind` holding `len` bytes: its bytes and
/// how many of them are used.
pub fn header(kind: u8, len: usize) -> ([u8; CHUNK_HEADER_MAX], usize) {
    varint((len as u64) << 3 | kind as u64)
}

/// `bytes` as one chunk of kind `kind`.
pub fn chunk(kind: u8, bytes: &[u8]) -> Vec<u8> {
    let (h, n) = header(kind, bytes.len());
    let mut c = Vec::with_capacity(n + bytes.len());
    c.extend_from_slice(&h[..n]);
    c.extend_from_slice(bytes);
    c
}

/// The first chunk of `stream`: its kind, its bytes and its whole length
/// (None: the stream ends, in zeroed space or in a chunk cut off).
pub fn parse_chunk(stream: &[u8]) -> Option<(u8, &[u8], usize)> {
    if stream.first() == Some(&0) {
        return None;
    }
    let mut at = 0;
    let v = get_varint(stream, &mut at).ok()?;
    let len = usize::try_from(v >> 3).ok()?;
    let body = stream.get(at..)?.get(..len)?;
    Some(((v & 7) as u8, body, at + len))
}

/// Turns a log stream, fed in parts, into runs of complete framed entries
/// (a whole chunk's bytes, or an entry pieced together). Pieces never
/// finished (a crash while writing them) are dropped when the next whole
/// chunk or first piece comes, or at the end; pieces whose first piece was
/// lost are skipped.
#[derive(Default)]
pub struct Assembler {
    /// Bytes fed and not yet parsed start at `read`.
    stream: Vec<u8>,
    read: usize,
    /// The entry being pieced together, while `piecing`.
    piece: Vec<u8>,
    piecing: bool,
    /// Zeroed space or an unknown kind was met: nothing after it counts.
    ended: bool,
}

impl Assembler {
    /// Add the next bytes of the stream. Runs handed out before are gone.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.ended {
            return;
        }
        self.stream.drain(..self.read);
        self.read = 0;
        self.stream.extend_from_slice(bytes);
    }

    /// The next run of complete entries the bytes fed so far hold, or None
    /// until more are fed (or for good, after the stream's end).
    pub fn next_run(&mut self) -> Option<&[u8]> {
        loop {
            if self.ended {
                return None;
            }
            let rest = &self.stream[self.read..];
            if rest.first() == Some(&0) {
                self.ended = true;
                return None;
            }
            let (kind, body, len) = parse_chunk(rest)?;
            let from = self.read + len - body.len();
            let to = self.read + len;
            self.read = to;
            match kind {
                WHOLE => {
                    self.piecing = false;
                    return Some(&self.stream[from..to]);
                }
                FIRST => {
                    self.piece.clear();
                    self.piece.extend_from_slice(&self.stream[from..to]);
                    self.piecing = true;
                }
                MIDDLE | LAST if self.piecing => {
                    self.piece.extend_from_slice(&self.stream[from..to]);
                    if kind == LAST {
                        self.piecing = false;
                        return Some(&self.piece);
                    }
                }
                MIDDLE | LAST => {} // its first piece was lost
                _ => {
                    self.ended = true;
                    return None;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every run of a stream fed at once.
    fn runs_whole(stream: &[u8]) -> Vec<Vec<u8>> {
        let mut a = Assembler::default();
        a.feed(stream);
        let mut out = vec![];
        while let Some(r) = a.next_run() {
            out.push(r.to_vec());
        }
        out
    }

    #[test]
    fn pieces_whole_and_lost() {
        let mut s = chunk(WHOLE, b"ab");
        s.extend(chunk(FIRST, b"c"));
        s.extend(chunk(MIDDLE, b"d"));
        s.extend(chunk(LAST, b"e"));
        s.extend(chunk(MIDDLE, b"lost start"));
        s.extend(chunk(LAST, b"lost start"));
        s.extend(chunk(FIRST, b"never finished"));
        s.extend(chunk(WHOLE, b"f"));
        s.extend(chunk(FIRST, b"cut by the end"));
        assert_eq!(runs_whole(&s), vec![b"ab".to_vec(), b"cde".to_vec(), b"f".to_vec()]);
        // zeroed space ends the stream, whatever follows
        let mut z = chunk(WHOLE, b"x");
        z.push(0);
        z.extend(chunk(WHOLE, b"y"));
        assert_eq!(runs_whole(&z), vec![b"x".to_vec()]);
        // a chunk cut off ends it too
        let w = chunk(WHOLE, b"xyz");
        assert_eq!(runs_whole(&w[..w.len() - 1]), Vec::<Vec<u8>>::new());
    }

    proptest::proptest! {
        /// Fed a page at a time, with runs taken after each feed, a stream
        /// gives the runs it gives when fed at once.
        #[test]
        fn fed_in_parts_as_at_once(
            chunks in proptest::collection::vec((1u8..=5, proptest::collection::vec(proptest::num::u8::ANY, 0..300)), 0..40),
            cut in 0usize..64,
            parts in proptest::collection::vec(1usize..700, 1..50),
        ) {
            let mut s = vec![];
            for (kind, bytes) in &chunks {
                s.extend(chunk(*kind, bytes));
            }
            s.truncate(s.len().saturating_sub(cut));
            let whole = runs_whole(&s);
            let mut a = Assembler::default();
            let mut got = vec![];
            let (mut at, mut k) = (0, 0);
            while at < s.len() {
                let n = parts[k % parts.len()].min(s.len() - at);
                a.feed(&s[at..at + n]);
                at += n;
                k += 1;
                while let Some(r) = a.next_run() {
                    got.push(r.to_vec());
                }
            }
            proptest::prop_assert_eq!(got, whole);
        }
    }
}
