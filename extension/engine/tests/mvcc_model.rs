//! Property test: random interleavings of transactions (begin, read, write,
//! commit, abort, savepoint, rollback to savepoint) against the engine's
//! in-place updates and undo chains, checked against a simple reference
//! model of versioned rows. Visibility here is snapshot isolation over a
//! toy transaction manager, the same rules the extension applies with
//! PostgreSQL's snapshots.

use anker_engine::arena::Arena;
use anker_engine::table::{ColumnSpec, Directory, RowHeader, Table, Value, ValueRef};
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Status {
    InProgress,
    Committed,
    Aborted,
}

/// A transaction's snapshot: xids below `xmin` finished, from `xmax` on
/// not started, in between those in `running` were in progress.
#[derive(Clone, Debug)]
struct Snap {
    xmax: u32,
    running: HashSet<u32>,
}

struct Txn {
    /// Top-level xid, then one xid per open savepoint level.
    xids: Vec<u32>,
    snap: Snap,
    /// (xid, row) of every in-place update, in order.
    writes: Vec<(u32, u64)>,
}

struct World {
    status: HashMap<u32, Status>,
    next_xid: u32,
    /// Reference model: per row, versions (value, creator) oldest first.
    versions: Vec<Vec<(u64, u32)>>,
}

impl World {
    fn committed_visible(&self, snap: &Snap, xid: u32) -> bool {
        xid < snap.xmax && !snap.running.contains(&xid) && self.status[&xid] == Status::Committed
    }
    fn sees(&self, t: &Txn, xid: u32) -> bool {
        (t.xids.contains(&xid) && self.status[&xid] != Status::Aborted) || self.committed_visible(&t.snap, xid)
    }
    fn model_read(&self, t: &Txn, row: u64) -> Option<u64> {
        self.versions[row as usize].iter().rev().find(|(_, x)| self.sees(t, *x)).map(|(v, _)| *v)
    }
}

fn value_of(v: ValueRef) -> u64 {
    match v {
        ValueRef::Fixed(p) => unsafe { (p as *const u64).read_unaligned() },
        other => panic!("unexpected {other:?}"),
    }
}

/// Read `row` through the engine: the newest version whose creator `t`
/// sees, walking the undo chain.
fn engine_read(arena: &Arena, table: &Table, w: &World, t: &Txn, row: u64) -> Option<u64> {
    let v = engine_read_version(arena, table, w, t, row)?;
    // Every version a reader can see lies within the column's bounds (DuckDB's statistics).
    let (lo, hi) = table.column(arena, 0).bounds().expect("a column that holds values has bounds");
    assert!((lo..=hi).contains(&(v as i64)), "version {v} of row {row} outside the bounds {lo}..={hi}");
    Some(v)
}

fn engine_read_version(arena: &Arena, table: &Table, w: &World, t: &Txn, row: u64) -> Option<u64> {
    let h: RowHeader = table.header(arena, row)?;
    let mut value = value_of(table.value(arena, 0, row));
    if w.sees(t, h.xmin) {
        return Some(value);
    }
    let mut cur = h.chain;
    let mut images = vec![];
    while cur != 0 {
        let rec = unsafe { table.undo_rec(arena, cur) };
        unsafe { table.before_images(arena, rec, &mut images) };
        for im in &images {
            if im.col == 0 {
                value = value_of(im.value);
            }
        }
        if w.sees(t, rec.xmin) {
            return Some(value);
        }
        cur = rec.next.load(std::sync::atomic::Ordering::Acquire);
    }
    None
}

#[derive(Clone, Debug)]
enum Op {
    Begin,
    Read(usize, u64),
    Write(usize, u64, u64),
    Commit(usize),
    Abort(usize, bool),
    Savepoint(usize),
    RollbackTo(usize),
    Prune(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Begin),
        6 => (0usize..4, 0u64..8).prop_map(|(t, r)| Op::Read(t, r)),
        6 => (0usize..4, 0u64..8, any::<u64>()).prop_map(|(t, r, v)| Op::Write(t, r, v)),
        2 => (0usize..4).prop_map(Op::Commit),
        1 => (0usize..4, any::<bool>()).prop_map(|(t, eager)| Op::Abort(t, eager)),
        1 => (0usize..4).prop_map(Op::Savepoint),
        1 => (0usize..4).prop_map(Op::RollbackTo),
        1 => (0u64..8).prop_map(Op::Prune),
    ]
}

const ROWS: u64 = 8;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]
    #[test]
    fn interleavings_match_the_model(ops in proptest::collection::vec(op(), 1..150)) {
        let arena = Arena::create_private(64 << 20).unwrap();
        arena.format(4).unwrap();
        let dir = Directory::create(&arena, 16).unwrap();
        let table = dir.get_or_create(&arena, &[1, 1, 1, 0], &|| vec![ColumnSpec::fixed(8), ColumnSpec::var()]).unwrap();
        let mut w = World { status: HashMap::new(), next_xid: 3, versions: vec![] };
        // initial rows, created by committed xid 2
        w.status.insert(2, Status::Committed);
        for r in 0..ROWS {
            let vals = [Value::Fixed(&(r * 1000).to_ne_bytes()), Value::Blob(&[7u8; 40])];
            let mut blobs = vec![];
            table.prepare_blobs(&arena, &vals, &mut blobs).unwrap();
            table.insert_rows(&arena, &[&vals], &blobs, 2, 0, anker_engine::table::flag::XMIN_COMMITTED, 0, &mut vec![]).unwrap();
            w.versions.push(vec![(r * 1000, 2)]);
        }
        let mut txns: Vec<Txn> = vec![];
        for op in ops {
            match op {
                Op::Begin => {
                    if txns.len() < 4 {
                        let xid = w.next_xid;
                        w.next_xid += 1;
                        w.status.insert(xid, Status::InProgress);
                        let running = w.status.iter().filter(|(x, s)| **s == Status::InProgress && **x != xid).map(|(x, _)| *x).collect();
                        txns.push(Txn { xids: vec![xid], snap: Snap { xmax: xid, running }, writes: vec![] });
                    }
                }
                Op::Read(t, r) => {
                    if let Some(tx) = txns.get(t) {
                        prop_assert_eq!(engine_read(&arena, table, &w, tx, r), w.model_read(tx, r), "read of row {}", r);
                    }
                }
                Op::Write(t, r, v) => {
                    if t >= txns.len() { continue; }
                    let tx = &txns[t];
                    let me = *tx.xids.last().unwrap();
                    // first updater wins; an update committed after our
                    // snapshot is a serialization conflict: skip both
                    let (_, latest) = *w.versions[r as usize].last().unwrap();
                    let blocked = match w.status[&latest] {
                        Status::InProgress => !tx.xids.contains(&latest),
                        Status::Committed => !w.sees(tx, latest),
                        Status::Aborted => unreachable!("the model drops aborted versions"),
                    };
                    if blocked { continue; }
                    // repair versions of aborted transactions left behind
                    loop {
                        let h = table.header(&arena, r).unwrap();
                        if w.status.get(&h.xmin) != Some(&Status::Aborted) { break; }
                        prop_assert!(table.undo_update(&arena, r, h.xmin).unwrap());
                    }
                    let h = table.header(&arena, r).unwrap();
                    let blob = vec![(v % 251) as u8; (v % 100) as usize + 20];
                    let changes = [(0usize, Value::Fixed(&v.to_ne_bytes())), (1usize, Value::Blob(&blob))];
                    let mut blobs = vec![];
                    table.prepare_blobs(&arena, &[changes[0].1, changes[1].1], &mut blobs).unwrap();
                    prop_assert!(table.update_in_place(&arena, r, &h, me, 0, &changes, &blobs).unwrap());
                    w.versions[r as usize].push((v, me));
                    txns[t].writes.push((me, r));
                }
                Op::Commit(t) => {
                    if t >= txns.len() { continue; }
                    let tx = txns.remove(t);
                    for x in tx.xids { w.status.insert(x, Status::Committed); }
                }
                Op::Abort(t, eager) => {
                    if t >= txns.len() { continue; }
                    let tx = txns.remove(t);
                    for &x in &tx.xids { w.status.insert(x, Status::Aborted); }
                    for (x, r) in tx.writes.iter().rev() {
                        w.versions[*r as usize].retain(|(_, c)| c != x);
                    }
                    if eager {
                        for (x, r) in tx.writes.iter().rev() {
                            prop_assert!(table.undo_update(&arena, *r, *x).unwrap());
                        }
                    }
                    // otherwise lazy: readers walk past the aborted versions,
                    // and the next writer of the row repairs it first
                }
                Op::Savepoint(t) => {
                    if t >= txns.len() { continue; }
                    let xid = w.next_xid;
                    w.next_xid += 1;
                    w.status.insert(xid, Status::InProgress);
                    txns[t].xids.push(xid);
                }
                Op::RollbackTo(t) => {
                    if t >= txns.len() || txns[t].xids.len() < 2 { continue; }
                    let sub = txns[t].xids.pop().unwrap();
                    w.status.insert(sub, Status::Aborted);
                    let mine: Vec<(u32, u64)> = txns[t].writes.iter().filter(|(x, _)| *x == sub).cloned().collect();
                    // readers first see the aborted versions through the chain
                    for tx in &txns {
                        for r in 0..ROWS {
                            prop_assert_eq!(engine_read(&arena, table, &w, tx, r), {
                                // model: aborted versions are invisible anyway
                                w.model_read(tx, r)
                            });
                        }
                    }
                    for (x, r) in mine.iter().rev() {
                        prop_assert!(table.undo_update(&arena, *r, *x).unwrap());
                        w.versions[*r as usize].retain(|(_, c)| c != x);
                    }
                    txns[t].writes.retain(|(x, _)| *x != sub);
                }
                Op::Prune(r) => {
                    // removable: committed, and seen by every running snapshot
                    // (PostgreSQL's xmin horizon gives exactly this guarantee)
                    let snaps: Vec<Snap> = txns.iter().map(|t| t.snap.clone()).collect();
                    let statuses = w.status.clone();
                    let removable = move |x: u32| {
                        statuses.get(&x) == Some(&Status::Committed)
                            && snaps.iter().all(|s| x < s.xmax && !s.running.contains(&x))
                    };
                    table.prune_chain(&arena, r, &removable);
                }
            }
            // every transaction's view matches after every step
            for tx in &txns {
                for r in 0..ROWS {
                    prop_assert_eq!(engine_read(&arena, table, &w, tx, r), w.model_read(tx, r), "row {}", r);
                }
            }
        }
        table.reclaim(&arena);
    }
}

