//! Redo reproduces a table: random sequences of writes, each described as a
//! `Change` in a framed log, replayed into a fresh table, give the same rows
//! under the same row ids (stamps, values, links, version chains).

use anker_engine::arena::Arena;
use anker_engine::change::{expand_record_entries, frame, frame_for_page_and_record, frame_for_record, Change, Entries, Val};
use anker_engine::snapshot::Method;
use anker_engine::table::{flag, ColumnSpec, ColumnState, Directory, RowChange, Table, Value, VAR_SLOT};
use proptest::prelude::*;

fn setup() -> Arena {
    let a = Arena::create_private(256 << 20).unwrap();
    a.format(4).unwrap();
    Directory::create(&a, 64).unwrap();
    a
}

#[derive(Clone, Debug)]
enum Op {
    Insert(Vec<(u64, Option<u8>)>),
    Update { row: u64, a: Option<u64>, b: Option<u8> },
    Delete(u64),
    Lock(u64, u32),
    Freeze(u64),
    Undo(u64),
    Vacate(Vec<u64>),
    AddColumn(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => prop::collection::vec((any::<u64>(), prop::option::of(0u8..40)), 1..4).prop_map(Op::Insert),
        4 => (0u64..40, prop::option::of(any::<u64>()), prop::option::of(0u8..40)).prop_map(|(row, a, b)| Op::Update { row, a, b }),
        1 => (0u64..40).prop_map(Op::Delete),
        1 => (0u64..40, 0u32..4).prop_map(|(r, m)| Op::Lock(r, m)),
        1 => (0u64..40).prop_map(Op::Freeze),
        2 => (0u64..40).prop_map(Op::Undo),
        1 => prop::collection::vec(0u64..40, 1..5).prop_map(Op::Vacate),
        1 => (0u32..1000).prop_map(Op::AddColumn),
    ]
}

/// A var value of `n` bytes: inline when short, a blob otherwise.
fn var_bytes(n: u8) -> Vec<u8> {
    (0..n).map(|i| i.wrapping_mul(7).wrapping_add(n) | 1).collect()
}

fn var_value(bytes: &[u8]) -> Value<'_> {
    if bytes.len() < VAR_SLOT {
        Value::Inline(bytes)
    } else {
        Value::Blob(bytes)
    }
}

/// Everything of a row that must survive: stamps without hint bits, links,
/// values, chain records (without their commit hints).
fn dump(a: &Arena, t: &Table) -> Vec<String> {
    let durable = flag::UPDATED | flag::MOVED | flag::KEYS_KEPT | flag::LOCKER_MULTI | flag::LOCK_MODE_MASK | flag::VACANT | flag::SPECULATIVE | flag::XMAX_LOCK_ONLY | flag::HAS_LINKS;
    let mut out = vec![];
    for row in 0..t.nrows() {
        let Some(h) = t.header(a, row) else {
            out.push(format!("{row}: absent"));
            continue;
        };
        let mut line = format!(
            "{row}: xmin {} cmin {} xmax {} cmax {} locker {} flags {:#x} next {}",
            h.xmin,
            h.cmin,
            h.xmax,
            h.cmax,
            h.locker,
            h.flags & durable,
            if h.flags & flag::HAS_LINKS != 0 { h.next as i64 } else { -1 }
        );
        if h.flags & flag::VACANT == 0 {
            for c in 0..t.ncols() {
                let spec = t.column(a, c).spec();
                // SAFETY: values of a quiescent table.
                let v = unsafe { Val::from_stored(t.value(a, c, row), spec) };
                line.push_str(&format!(" | {v:?}"));
            }
            for r in t.chain_records(a, row) {
                line.push_str(&format!(" <- [{} {} {} {:?}]", r.xmin, r.cmin, r.superseded_by, r.images));
            }
        }
        out.push(line);
    }
    out
}

fn run(ops: &[Op]) {
    let a = setup();
    let dir = Directory::get(&a).unwrap();
    let specs = vec![ColumnSpec::fixed(8), ColumnSpec::var()];
    let t = dir.get_or_create(&a, &[1, 1, 1, 0], &|| specs.clone()).unwrap();
    let log = std::cell::RefCell::new(vec![]);
    let seq = std::cell::Cell::new(0u64);
    // the xid of the op being logged: its WAL record's
    let record_xid = std::cell::Cell::new(0u32);
    let log_change = |c: Change| {
        seq.set(seq.get() + 1);
        let mut page = vec![];
        frame(seq.get(), &c, &mut page);
        // a WAL record leaves the op's xid out; redo puts back the page's
        // bytes (the writer frames both forms at once)
        let (mut both_page, mut record, mut expanded) = (vec![], vec![], vec![]);
        frame_for_page_and_record(seq.get(), &c, record_xid.get(), &mut both_page, &mut record);
        assert_eq!(both_page, page, "{c:?}");
        let mut alone = vec![];
        frame_for_record(seq.get(), &c, record_xid.get(), &mut alone);
        assert_eq!(alone, record, "{c:?}");
        expand_record_entries(&record, record_xid.get(), &mut expanded).unwrap();
        assert_eq!(expanded, page, "{c:?}");
        log.borrow_mut().extend_from_slice(&page);
    };
    let mut xid = 100u32;
    // Halfway, an image from a snapshot: replayed with the changes made
    // after it, it must give the same table as the whole log.
    let mut image: Option<(Vec<u8>, u64)> = None;
    for (k, op) in ops.iter().enumerate() {
        // (once a change is logged: sequence numbers start at 1, and a zero
        // byte ends a log)
        if k >= ops.len() / 2 && image.is_none() && seq.get() > 0 {
            let cols: Vec<usize> = (0..t.ncols()).collect();
            let snap = t.create_snapshot(&a, &cols, Method::Cow, 0).unwrap();
            let at = seq.get();
            let mut bytes = vec![];
            t.image(&a, snap, &t.columns(&a), |c| frame(at, c, &mut bytes));
            t.release_snapshot(&a, snap);
            image = Some((bytes, at));
        }
        xid += 1;
        record_xid.set(xid);
        let live = |row: u64| t.header(&a, row).filter(|h| h.flags & flag::VACANT == 0 && h.xmin != 0);
        match op {
            Op::Insert(rows) => {
                let owned: Vec<(Vec<u8>, Option<Vec<u8>>)> =
                    rows.iter().map(|(x, b)| (x.to_ne_bytes().to_vec(), b.map(var_bytes))).collect();
                let ncols = t.ncols();
                let values: Vec<Vec<Value>> = owned
                    .iter()
                    .map(|(x, b)| {
                        let mut v = vec![Value::Fixed(x), b.as_ref().map_or(Value::Null, |b| var_value(b))];
                        v.resize(ncols, Value::Null);
                        v
                    })
                    .collect();
                let refs: Vec<&[Value]> = values.iter().map(|v| v.as_slice()).collect();
                let mut blobs = vec![];
                for v in &values {
                    t.prepare_blobs(&a, v, &mut blobs).unwrap();
                }
                let mut ids = vec![];
                t.insert_rows(&a, &refs, &blobs, xid, 0, 0, 0, &mut ids).unwrap();
                for (k, &row) in ids.iter().enumerate() {
                    log_change(Change::Insert {
                        row,
                        xmin: xid,
                        cmin: 0,
                        flags: 0,
                        locker: 0,
                        values: values[k].iter().map(Val::from_value).collect(),
                    });
                }
            }
            Op::Update { row, a: x, b } => {
                let Some(h) = live(*row) else { continue };
                let xb = x.map(|x| x.to_ne_bytes());
                let bb = b.map(var_bytes);
                let mut changes: Vec<(usize, Value)> = vec![];
                if let Some(xb) = &xb {
                    changes.push((0, Value::Fixed(xb)));
                }
                if let Some(bb) = &bb {
                    changes.push((1, var_value(bb)));
                }
                if changes.is_empty() {
                    changes.push((1, Value::Null));
                }
                let mut blobs = vec![];
                t.prepare_blobs(&a, changes.iter().map(|(_, v)| v), &mut blobs).unwrap();
                assert!(t.update_in_place(&a, *row, &h, xid, 1, &changes, &blobs).unwrap());
                log_change(Change::Update { row: *row, xid, cid: 1, changes: changes.iter().map(|(c, v)| (*c, Val::from_value(v))).collect() });
            }
            Op::Delete(row) => {
                let Some(h) = live(*row) else { continue };
                let change = RowChange { xmax: Some((xid, 2)), set_flags: flag::UPDATED, next: Some(row + 1), ..Default::default() };
                assert!(t.modify_row(&a, *row, &h, &change).unwrap());
                log_change(Change::Modify { row: *row, change });
            }
            Op::Lock(row, mode) => {
                let Some(h) = live(*row) else { continue };
                let change = RowChange {
                    locker: Some(xid),
                    set_flags: mode << flag::LOCK_MODE_SHIFT,
                    clear_flags: flag::LOCK_MODE_MASK & !(mode << flag::LOCK_MODE_SHIFT),
                    ..Default::default()
                };
                assert!(t.modify_row(&a, *row, &h, &change).unwrap());
                log_change(Change::Modify { row: *row, change });
            }
            Op::Freeze(row) => {
                let Some(h) = live(*row) else { continue };
                let change = RowChange { xmin: Some(2), ..Default::default() };
                assert!(t.modify_row(&a, *row, &h, &change).unwrap());
                log_change(Change::Modify { row: *row, change });
            }
            Op::Undo(row) => {
                let Some(h) = live(*row) else { continue };
                if t.undo_update(&a, *row, h.xmin).unwrap() {
                    log_change(Change::Undo { row: *row, xid: h.xmin });
                }
            }
            Op::Vacate(rows) => {
                let mut rows: Vec<u64> = rows.iter().copied().filter(|&r| live(r).is_some()).collect();
                rows.sort_unstable();
                rows.dedup();
                if rows.is_empty() {
                    continue;
                }
                t.vacate_rows(&a, &rows);
                log_change(Change::Vacate { rows });
            }
            Op::AddColumn(fill) => {
                if t.ncols() >= 5 {
                    continue;
                }
                let fb = fill.to_ne_bytes();
                let col = t.ncols();
                let _g = t.schema_lock.lock();
                t.set_column(&a, col, ColumnSpec::fixed(4), Value::Fixed(&fb), ColumnState::Permanent).unwrap();
                log_change(Change::SetColumn { col, spec: ColumnSpec::fixed(4), fill: Val::Fixed(&fb), state: ColumnState::Permanent, owner_xid: 0 });
            }
        }
    }
    let log = log.into_inner();
    // Redo into a fresh table of the first layout.
    let r = dir.get_or_create(&a, &[2, 2, 2, 0], &|| specs.clone()).unwrap();
    let mut entries = Entries::new(&log);
    for (expect, (s, change)) in (1..).zip(&mut entries) {
        assert_eq!(s, expect);
        r.replay(&a, &change).unwrap();
    }
    assert!(entries.stopped.is_none(), "{:?}", entries.stopped);
    assert_eq!(entries.consumed(), log.len());
    assert_eq!(dump(&a, t), dump(&a, r));
    // Every row described from the live table (as a rewrite logs the rows
    // it copies), replayed into a fresh table of the same columns.
    let cols = t.columns(&a);
    let specs_now: Vec<ColumnSpec> = cols.iter().map(|(s, _)| *s).collect();
    let d = dir.get_or_create(&a, &[6, 6, 6, 0], &|| specs_now.clone()).unwrap();
    for (i, (_, st)) in cols.iter().enumerate() {
        d.set_column_state(&a, i, *st);
    }
    for row in 0..t.nrows() {
        t.describe_row(&a, row, |c| d.replay(&a, c).unwrap());
    }
    assert_eq!(dump(&a, t), dump(&a, d), "rows described one by one");
    if let Some((bytes, at)) = image {
        let mut entries = Entries::new(&bytes);
        let Some((s0, Change::Create { columns })) = entries.next() else { panic!("an image starts with Create") };
        assert_eq!(s0, at);
        let specs: Vec<ColumnSpec> = columns.iter().map(|(s, _)| *s).collect();
        let im = dir.get_or_create(&a, &[3, 3, 3, 0], &|| specs.clone()).unwrap();
        for (i, (_, st)) in columns.iter().enumerate() {
            im.set_column_state(&a, i, *st);
        }
        for (s, change) in &mut entries {
            assert_eq!(s, at);
            im.replay(&a, &change).unwrap();
        }
        assert!(entries.stopped.is_none());
        for (s, change) in Entries::new(&log) {
            if s > at {
                im.replay(&a, &change).unwrap();
            }
        }
        assert_eq!(dump(&a, t), dump(&a, im), "image at change {at} and the changes after it");
    }
    // The free list rebuilt from vacant rows offers the same rows.
    r.rebuild_free_rows(&a);
    let vacant = |tab: &Table| {
        (0..tab.nrows())
            .filter(|&x| tab.stamp(&a, x).is_some_and(|s| s.flags.load(std::sync::atomic::Ordering::Relaxed) & flag::VACANT != 0))
            .count() as u64
    };
    assert_eq!(vacant(r), vacant(t));
    assert_eq!(r.free_rows(), vacant(r));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]
    #[test]
    fn replaying_the_change_log_rebuilds_the_table(ops in prop::collection::vec(op(), 1..60)) {
        run(&ops);
    }
}

/// A log cut anywhere yields exactly the entries before the cut: a strict
/// prefix of an entry never decodes. (A flipped bit is the page
/// checksum's to find: `tests/durability.sh`, case 9.)
#[test]
fn cut_logs_stop_at_the_last_whole_entry() {
    let mut log = vec![];
    let big = vec![9u8; 300];
    for s in 1..=20u64 {
        let change = Change::Insert { row: s, xmin: 5, cmin: 0, flags: 0, locker: 0, values: vec![Val::Fixed(&[1; 8]), Val::Blob(&big)] };
        frame(s, &change, &mut log);
        frame(s, &Change::Update { row: s, xid: 6, cid: 1, changes: vec![(0, Val::Fixed(&[2, 0, 0, 0, 0, 0, 0, 3]))] }, &mut log);
    }
    let ends: Vec<usize> = {
        let mut e = Entries::new(&log);
        let mut ends = vec![];
        while e.next().is_some() {
            ends.push(e.consumed());
        }
        assert_eq!(e.stopped, None);
        ends
    };
    assert_eq!(ends.len(), 40);
    for cut in 0..log.len() {
        let mut e = Entries::new(&log[..cut]);
        let n = (&mut e).count();
        assert_eq!(n, ends.iter().filter(|&&e| e <= cut).count(), "cut at {cut}");
        assert_eq!(e.stopped.is_some(), !ends.contains(&cut) && cut > 0, "cut at {cut}");
    }
}

/// A rewrite's copy of a row with older versions (`Change::Chain`) gives
/// the copy the same chain.
#[test]
fn copied_chains_replay() {
    let a = setup();
    let dir = Directory::get(&a).unwrap();
    let specs = vec![ColumnSpec::fixed(8), ColumnSpec::var()];
    let t = dir.get_or_create(&a, &[3, 3, 3, 0], &|| specs.clone()).unwrap();
    let long = var_bytes(30);
    let first = [Value::Fixed(&[1; 8]), Value::Blob(&long)];
    let mut blobs = vec![];
    t.prepare_blobs(&a, &first, &mut blobs).unwrap();
    let mut ids = vec![];
    t.insert_rows(&a, &[&first], &blobs, 10, 0, 0, 0, &mut ids).unwrap();
    for (xid, v) in [(11u32, var_bytes(3)), (12, var_bytes(20))] {
        let h = t.header(&a, 0).unwrap();
        let changes = [(1usize, var_value(&v)), (0, Value::Fixed(&[xid as u8; 8]))];
        let mut blobs = vec![];
        t.prepare_blobs(&a, changes.iter().map(|(_, v)| v), &mut blobs).unwrap();
        assert!(t.update_in_place(&a, 0, &h, xid, 0, &changes, &blobs).unwrap());
    }
    let records = t.chain_records(&a, 0);
    assert_eq!(records.len(), 2);
    let r = dir.get_or_create(&a, &[4, 4, 4, 0], &|| specs.clone()).unwrap();
    let h = t.header(&a, 0).unwrap();
    let values: Vec<Val> = (0..2).map(|c| unsafe { Val::from_stored(t.value(&a, c, 0), t.column(&a, c).spec()) }).collect();
    let mut log = vec![];
    frame(1, &Change::Insert { row: 0, xmin: h.xmin, cmin: h.cmin, flags: 0, locker: 0, values }, &mut log);
    frame(2, &Change::Chain { row: 0, records }, &mut log);
    for (_, c) in Entries::new(&log) {
        r.replay(&a, &c).unwrap();
    }
    assert_eq!(dump(&a, t), dump(&a, r));
}

/// A speculative insertion killed after a conflict is dead by its
/// XMIN_ABORTED hint alone (its creator commits): an image keeps it dead.
#[test]
fn images_keep_killed_speculative_rows_dead() {
    let a = setup();
    let dir = Directory::get(&a).unwrap();
    let specs = vec![ColumnSpec::fixed(8)];
    let t = dir.get_or_create(&a, &[4, 4, 4, 0], &|| specs.clone()).unwrap();
    let x = 7u64.to_ne_bytes();
    let values = [Value::Fixed(&x)];
    let mut blobs = vec![];
    t.prepare_blobs(&a, &values, &mut blobs).unwrap();
    let mut ids = vec![];
    t.insert_rows(&a, &[&values], &blobs, 100, 0, flag::SPECULATIVE, 9, &mut ids).unwrap();
    let h = t.header(&a, ids[0]).unwrap();
    let kill = RowChange { clear_flags: flag::SPECULATIVE | flag::XMIN_COMMITTED, set_flags: flag::XMIN_ABORTED, locker: Some(0), ..Default::default() };
    assert!(t.modify_row(&a, ids[0], &h, &kill).unwrap());
    let snap = t.create_snapshot(&a, &[0], Method::Cow, 0).unwrap();
    let mut changes = vec![];
    t.image(&a, snap, &t.columns(&a), |c| frame(1, c, &mut changes));
    t.release_snapshot(&a, snap);
    let im = dir.get_or_create(&a, &[5, 5, 5, 0], &|| specs.clone()).unwrap();
    for (_, c) in Entries::new(&changes).skip(1) {
        im.replay(&a, &c).unwrap();
    }
    let h = im.header(&a, ids[0]).unwrap();
    assert_ne!(h.flags & flag::XMIN_ABORTED, 0, "the killed row came back to life");
    assert_eq!(h.flags & flag::SPECULATIVE, 0);
}

/// An image read in parts, with the table written between them (rows
/// updated in place, which copies their pages and grows their chains, and
/// rows added), is still the image of its snapshot: byte for byte the
/// image read at once.
#[test]
fn an_image_read_in_parts_while_writers_go_on_is_its_snapshots_image() {
    let a = setup();
    let dir = Directory::get(&a).unwrap();
    let specs = vec![ColumnSpec::fixed(8), ColumnSpec::var()];
    let t = dir.get_or_create(&a, &[6, 6, 6, 0], &|| specs.clone()).unwrap();
    let mut ids = vec![];
    for k in 0..40u64 {
        let x = k.to_ne_bytes();
        let long = var_bytes(30 + k as u8);
        let values = [Value::Fixed(&x), var_value(&long)];
        let mut blobs = vec![];
        t.prepare_blobs(&a, &values, &mut blobs).unwrap();
        t.insert_rows(&a, &[&values], &blobs, 100, 0, 0, 0, &mut ids).unwrap();
    }
    let update = |row: u64, xid: u32| {
        let h = t.header(&a, row).unwrap();
        let x = (xid as u64 * 1000 + row).to_ne_bytes();
        assert!(t.update_in_place(&a, row, &h, xid, 0, &[(0, Value::Fixed(&x))], &[0]).unwrap());
    };
    for row in (0..40).step_by(3) {
        update(row, 101);
    }
    let snap = t.create_snapshot(&a, &[0, 1], Method::Cow, 0).unwrap();
    let columns = t.columns(&a);
    let mut whole = vec![];
    t.image(&a, snap, &columns, |c| frame(9, c, &mut whole));
    let mut parts = vec![];
    let mut xid = 102;
    let mut pauses = 0;
    t.image_in_parts(
        &a,
        snap,
        &columns,
        3,
        || {
            pauses += 1;
            for row in 0..40 {
                update(row, xid);
            }
            let x = 0u64.to_ne_bytes();
            let values = [Value::Fixed(&x), Value::Inline(b"new")];
            t.insert_rows(&a, &[&values], &[0, 0], xid, 0, 0, 0, &mut vec![]).unwrap();
            xid += 1;
        },
        |c| frame(9, c, &mut parts),
    );
    t.release_snapshot(&a, snap);
    assert_eq!(pauses, 13, "40 rows in parts of 3");
    assert!(whole == parts, "the image changed while it was read ({} and {} bytes)", whole.len(), parts.len());
}
