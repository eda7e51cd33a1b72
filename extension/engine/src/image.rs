//! Images: a table's durable state as one frozen moment describes it, as
//! [`Change`]s that rebuild it in an empty table.
//!
//! An image is read from a snapshot of every column (copy-on-write, so
//! writers go on while it is read), and starts with the [`Change::Create`]
//! of the columns as they were. Every row follows with its stamps, older
//! versions and links; vacant rows keep their stamps and become vacant
//! again at the end, so every row id names what it named in the table.
//! Replaying the image and then the changes made after the snapshot gives
//! the table as it is (`tests/replay.rs`). The durability layer writes
//! images to compact a table's on-disk change log (`docs/durability.md`),
//! and describes rows a rewrite copies the same way (`describe_row`).

use crate::arena::{Arena, Off};
use crate::change::{Change, ChainRecord, Val};
use crate::table::{flag, ColCache, ColumnSpec, ColumnState, Cursor, RowChange, Table, ValueRef};

/// Flags an image carries: what the row is, not what readers learnt about
/// it (hint bits) or transient state.
const IMAGE_FLAGS: u32 = flag::UPDATED
    | flag::MOVED
    | flag::KEYS_KEPT
    | flag::LOCKER_MULTI
    | flag::LOCK_MODE_MASK
    | flag::SPECULATIVE
    | flag::XMAX_LOCK_ONLY;

impl Table {
    /// Emit the image of snapshot `snap` of this table (a snapshot of every
    /// column in `columns`, the layout it was taken with) to `emit`, one
    /// change at a time. The caller keeps the snapshot, and the version
    /// records its rows reach, alive meanwhile.
    pub fn image(&self, arena: &Arena, snap: Off, columns: &[(ColumnSpec, ColumnState)], emit: impl FnMut(&Change)) {
        self.image_in_parts(arena, snap, columns, u64::MAX, || {}, emit);
    }

    /// [`Table::image`], read `part_rows` rows at a time, with `between`
    /// called between parts. Nothing read is kept across that call (each
    /// part binds its own cursor to the snapshot), so the caller may leave
    /// the reclamation epoch there and pause: a writer of the image paces
    /// itself without holding back the freeing of memory in other tables
    /// (what this table's writers retire meanwhile stays until the
    /// snapshot is released, as for any snapshot).
    pub fn image_in_parts(
        &self,
        arena: &Arena,
        snap: Off,
        columns: &[(ColumnSpec, ColumnState)],
        part_rows: u64,
        mut between: impl FnMut(),
        mut emit: impl FnMut(&Change),
    ) {
        emit(&Change::Create { columns: columns.to_vec() });
        let specs: Vec<ColumnSpec> = columns.iter().map(|(s, _)| *s).collect();
        let nrows = self.snapshot(arena, snap).nrows;
        let mut vacant = vec![];
        let mut start = 0;
        while start < nrows {
            if start > 0 {
                between();
            }
            let end = start.saturating_add(part_rows.max(1)).min(nrows);
            let snapshot = self.snapshot(arena, snap);
            let mut cur = Cursor::NEW;
            let mut caches: Vec<_> = (0..columns.len()).map(|c| self.col_cache(arena, c)).collect();
            {
                let mut bind: Vec<_> = caches.iter_mut().enumerate().collect();
                self.bind_snapshot(arena, snapshot, &mut cur, &mut bind);
            }
            for row in start..end {
                if self.emit_row(arena, &mut cur, &mut caches, &specs, row, &mut emit) == Some(true) {
                    vacant.push(row);
                }
            }
            start = end;
        }
        for rows in vacant.chunks(4096) {
            emit(&Change::Vacate { rows: rows.to_vec() });
        }
    }

    /// Emit the changes that rebuild `row` of the live table (a row a
    /// rewrite just copied, say) in an empty one. The caller keeps the row
    /// from changing meanwhile.
    pub fn describe_row(&self, arena: &Arena, row: u64, mut emit: impl FnMut(&Change)) {
        let mut cur = Cursor::NEW;
        let specs: Vec<ColumnSpec> = (0..self.ncols()).map(|c| self.column(arena, c).spec()).collect();
        let mut caches: Vec<_> = (0..specs.len()).map(|c| self.col_cache(arena, c)).collect();
        if self.emit_row(arena, &mut cur, &mut caches, &specs, row, &mut emit) == Some(true) {
            emit(&Change::Vacate { rows: vec![row] });
        }
    }

    /// Emit `row` as `cur` and `caches` read it: its stamps and values
    /// (`Insert`), older versions (`Chain`), deleter, successor and the
    /// hint that kills a speculative insertion (`Modify`). Returns whether
    /// the row is vacant (the caller vacates it after), None if there is no
    /// row there.
    fn emit_row(
        &self,
        arena: &Arena,
        cur: &mut Cursor,
        caches: &mut [ColCache],
        specs: &[ColumnSpec],
        row: u64,
        emit: &mut impl FnMut(&Change),
    ) -> Option<bool> {
        let (h, is_vacant) = self.cursor_full_header(arena, cur, row)?;
        let values: Vec<Val> = if is_vacant {
            vec![Val::Null; specs.len()]
        } else {
            caches
                .iter_mut()
                .zip(specs)
                .map(|(cc, spec)| {
                    let v: ValueRef = self.cursor_value(arena, cc, row);
                    // SAFETY: the caller keeps the value (and its blob)
                    // alive while the row is read.
                    unsafe { Val::from_stored(v, *spec) }
                })
                .collect()
        };
        emit(&Change::Insert { row, xmin: h.xmin, cmin: h.cmin, flags: h.flags & IMAGE_FLAGS, locker: h.locker, values });
        if !is_vacant && h.chain != 0 {
            let records: Vec<ChainRecord> = self.chain_records_from(arena, h.chain);
            emit(&Change::Chain { row, records });
        }
        let change = RowChange {
            xmax: (h.xmax != 0 || h.cmax != 0).then_some((h.xmax, h.cmax)),
            // A speculative insertion killed after a conflict is dead by
            // this hint alone (its creator committed): part of the state.
            set_flags: h.flags & flag::XMIN_ABORTED,
            next: (h.flags & flag::HAS_LINKS != 0).then_some(h.next),
            ..Default::default()
        };
        if change != RowChange::default() {
            emit(&Change::Modify { row, change });
        }
        Some(is_vacant)
    }
}
