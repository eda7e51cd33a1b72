//! Virtual snapshots: frozen content under concurrent writes, copy-on-write
//! accounting, memcpy snapshots, and no leaks under churn, for every
//! provider this machine has: `vm_snapshot` joins in when the kernel
//! provides it (the QEMU guest of `kernel-patch/run-tests.sh`, which sets
//! `ANKER_REQUIRE_VM_SNAPSHOT=1` so that a missing call fails instead).

use anker_engine::arena::Arena;
use anker_engine::snapshot::{Method, SnapshotError};
use anker_engine::table::{flag, ColumnSpec, Cursor, Directory, RowChange, Table, Value, ValueRef};
use std::sync::atomic::{AtomicBool, Ordering};

fn setup(mb: u64) -> Arena {
    let a = Arena::create_private(mb << 20).unwrap();
    a.format(8).unwrap();
    Directory::create(&a, 64).unwrap();
    a
}

fn insert(a: &Arena, t: &Table, v: u64, xid: u32) -> u64 {
    let text = format!("value {v} with some padding to be a blob");
    let vals = [Value::Fixed(&v.to_ne_bytes()), Value::Blob(text.as_bytes())];
    let mut blobs = vec![];
    t.prepare_blobs(a, &vals, &mut blobs).unwrap();
    let mut out = vec![];
    t.insert_rows(a, &[&vals], &blobs, xid, 0, flag::XMIN_COMMITTED, 0, &mut out).unwrap();
    out[0]
}

fn fixed(v: ValueRef) -> u64 {
    match v {
        ValueRef::Fixed(p) => unsafe { (p as *const u64).read_unaligned() },
        other => panic!("{other:?}"),
    }
}

/// Sum of column 0 and row count through a cursor (frozen or live),
/// counting rows that exist and are not deleted.
fn sum(a: &Arena, t: &Table, cur: &mut Cursor, cc: &mut anker_engine::table::ColCache, nrows: u64) -> (u64, u64) {
    let (mut s, mut n) = (0, 0);
    for r in 0..nrows {
        let Some(h) = t.cursor_header(a, cur, r) else { continue };
        if h.xmax != 0 {
            continue;
        }
        s += fixed(t.cursor_value(a, cc, r));
        n += 1;
    }
    (s, n)
}

/// Is the kernel's vm_snapshot(2) here? Fails the test where it must be.
fn vm_snapshot_here() -> bool {
    let found = anker_engine::arena::vm_snapshot_syscall();
    if std::env::var_os("ANKER_REQUIRE_VM_SNAPSHOT").is_some() {
        found.as_ref().expect("ANKER_REQUIRE_VM_SNAPSHOT is set");
    }
    found.is_ok()
}

fn methods() -> Vec<Method> {
    let mut m = vec![Method::Cow, Method::Memcpy];
    if vm_snapshot_here() {
        m.push(Method::VmSnapshot);
    }
    m
}

fn each_method(f: impl Fn(Method)) {
    for m in methods() {
        f(m);
    }
}

/// vm_snapshot images of `a` mapped in this process: mappings of its size
/// other than the arena itself.
fn images(a: &Arena) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .filter_map(|l| l.split_whitespace().next()?.split_once('-'))
        .filter(|(lo, hi)| {
            let (lo, hi) = (u64::from_str_radix(lo, 16).unwrap(), u64::from_str_radix(hi, 16).unwrap());
            hi - lo == a.size() && lo != a.base() as u64
        })
        .count()
}

#[test]
fn snapshot_is_frozen_while_writers_go_on() {
    each_method(|method| {
        let a = setup(512);
        let dir = Directory::get(&a).unwrap();
        let t = dir.get_or_create(&a, &[1, 1, 1, 0], &|| vec![ColumnSpec::fixed(8), ColumnSpec::var()]).unwrap();
        let n = 50_000u64;
        for i in 0..n {
            insert(&a, t, i, 10);
        }
        let base_bytes = t.bytes();
        let cow0 = a.counter(anker_engine::stats::COW_PAGE_COPIES);
        let snap_off = t.create_snapshot(&a, &[0], method, 0).unwrap();
        let snap = t.snapshot(&a, snap_off);
        assert_eq!(snap.nrows, n);
        // writers: in-place updates, deletes, inserts
        for r in (0..n).step_by(7) {
            let h = t.header(&a, r).unwrap();
            let nv = (r + 1_000_000).to_ne_bytes();
            let mut blobs = vec![];
            t.prepare_blobs(&a, &[Value::Fixed(&nv)], &mut blobs).unwrap();
            assert!(t.update_in_place(&a, r, &h, 11, 0, &[(0, Value::Fixed(&nv))], &blobs).unwrap());
        }
        for r in (3..n).step_by(11) {
            let h = t.header(&a, r).unwrap();
            t.modify_row(&a, r, &h, &RowChange { xmax: Some((12, 0)), ..Default::default() }).unwrap();
        }
        for i in 0..1000 {
            insert(&a, t, i, 13);
        }
        // the snapshot still holds the state at creation
        let mut cur = Cursor::NEW;
        let mut cc = t.col_cache(&a, 0);
        t.bind_snapshot(&a, snap, &mut cur, &mut [(0, &mut cc)]);
        let (s, cnt) = sum(&a, t, &mut cur, &mut cc, snap.nrows);
        assert_eq!(cnt, n);
        assert_eq!(s, n * (n - 1) / 2);
        // ...while the live table moved on
        let mut live = Cursor::NEW;
        let mut lc = t.col_cache(&a, 0);
        let (_, live_cnt) = sum(&a, t, &mut live, &mut lc, t.nrows());
        assert_eq!(live_cnt, n - (3..n).step_by(11).count() as u64 + 1000);
        let copies = a.counter(anker_engine::stats::COW_PAGE_COPIES) - cow0;
        match method {
            Method::Cow => assert!(copies > 0, "writers copied shared pages"),
            Method::Memcpy => assert_eq!(copies, 0, "memcpy snapshots share nothing"),
            Method::VmSnapshot => assert_eq!(copies, 0, "the kernel copies, not the engine"),
        }
        t.release_snapshot(&a, snap_off);
        // copies made for the snapshot are gone again; only new data stays
        let after = t.bytes();
        assert!(after < base_bytes + (4 << 20), "{after} vs {base_bytes}");
        // writes after release no longer copy
        let cow1 = a.counter(anker_engine::stats::COW_PAGE_COPIES);
        let h = t.header(&a, 1).unwrap();
        t.modify_row(&a, 1, &h, &RowChange { locker: Some(5), ..Default::default() }).unwrap();
        assert_eq!(a.counter(anker_engine::stats::COW_PAGE_COPIES), cow1);
    });
}

#[test]
fn snapshots_are_reused_and_reference_counted() {
    let a = setup(256);
    let dir = Directory::get(&a).unwrap();
    let t = dir.get_or_create(&a, &[2, 2, 2, 0], &|| vec![ColumnSpec::fixed(8), ColumnSpec::var()]).unwrap();
    for i in 0..10_000 {
        insert(&a, t, i, 10);
    }
    let s1 = t.create_snapshot(&a, &[0, 1], Method::Cow, 100).unwrap();
    assert_eq!(t.find_snapshot(&a, &[1], Method::Cow, &|s| s >= 100), Some(s1));
    assert_eq!(t.find_snapshot(&a, &[0], Method::Cow, &|s| s >= 101), None, "too old for this query");
    assert_eq!(t.find_snapshot(&a, &[0], Method::Memcpy, &|_| true), None);
    let id = t.snapshot(&a, s1).id;
    assert_eq!(t.attach_snapshot(&a, id), Some(s1));
    assert_eq!(t.snapshot(&a, s1).refs.load(Ordering::Relaxed), 3);
    t.release_snapshot(&a, s1);
    t.release_snapshot(&a, s1);
    let mut live = 0;
    t.for_each_snapshot(&a, |_| live += 1);
    assert_eq!(live, 1);
    t.release_snapshot(&a, s1);
    live = 0;
    t.for_each_snapshot(&a, |_| live += 1);
    assert_eq!(live, 0);
    assert_eq!(t.attach_snapshot(&a, id), None);
}

#[test]
fn churn_of_snapshots_under_writers_leaks_nothing() {
    let a = setup(1024);
    let dir = Directory::get(&a).unwrap();
    let t = dir.get_or_create(&a, &[3, 3, 3, 0], &|| vec![ColumnSpec::fixed(8), ColumnSpec::var()]).unwrap();
    let n = 20_000u64;
    for i in 0..n {
        insert(&a, t, i, 10);
    }
    let baseline = a.stats().used_bytes;
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        let (a, stop) = (&a, &stop);
        // a writer that keeps updating rows in place (and pruning)
        sc.spawn(move || {
            let mut x = 20u32;
            let mut r = 0u64;
            while !stop.load(Ordering::Relaxed) {
                r = (r + 4099) % n;
                let h = t.header(a, r).unwrap();
                let nv = r.to_ne_bytes();
                let mut blobs = vec![];
                t.prepare_blobs(a, &[Value::Fixed(&nv)], &mut blobs).unwrap();
                if t.update_in_place(a, r, &h, x, 0, &[(0, Value::Fixed(&nv))], &blobs).unwrap() {
                    t.prune_chain(a, r, &|s| s < x);
                } else {
                    t.discard_blobs(a, &blobs);
                }
                x += 1;
            }
        });
        let methods = methods();
        for i in 0..1000 {
            // mostly cow; every fifth another provider
            let method = if i % 5 == 0 { methods[1 + (i / 5) % (methods.len() - 1)] } else { Method::Cow };
            let s = t.create_snapshot(a, &[0, 1], method, 0).unwrap();
            let snap = t.snapshot(a, s);
            let mut cur = Cursor::NEW;
            let mut cc = t.col_cache(a, 0);
            t.bind_snapshot(a, snap, &mut cur, &mut [(0, &mut cc)]);
            assert!(t.cursor_header(a, &mut cur, (i * 13) as u64 % n).is_some());
            t.release_snapshot(a, s);
        }
        stop.store(true, Ordering::Relaxed);
    });
    // prune what the writer left and reclaim
    for r in 0..n {
        t.prune_chain(&a, r, &|_| true);
    }
    t.reclaim(&a);
    let used = a.stats().used_bytes;
    assert!(used <= baseline + (2 << 20), "memory after churn {used} vs baseline {baseline}");
    let mut live = 0;
    t.for_each_snapshot(&a, |_| live += 1);
    assert_eq!(live, 0);
    assert_eq!(images(&a), 0, "every vm_snapshot image is unmapped");
}

/// Writers update both columns of a row to one value, in place, while
/// snapshots are taken: a snapshot never holds a torn row, and reading it
/// twice gives the same answer however far the writers got.
#[test]
fn no_torn_rows_in_snapshots_under_concurrent_writers() {
    each_method(|method| {
        let a = setup(512);
        let dir = Directory::get(&a).unwrap();
        let t = dir.get_or_create(&a, &[5, 5, 5, method as u32], &|| vec![ColumnSpec::fixed(8), ColumnSpec::fixed(8)]).unwrap();
        let n = 40_000u64;
        for i in 0..n {
            let v = i.to_ne_bytes();
            let vals = [Value::Fixed(&v), Value::Fixed(&v)];
            let mut blobs = vec![];
            t.prepare_blobs(&a, &vals, &mut blobs).unwrap();
            let mut out = vec![];
            t.insert_rows(&a, &[&vals], &blobs, 10, 0, flag::XMIN_COMMITTED, 0, &mut out).unwrap();
        }
        let stop = AtomicBool::new(false);
        std::thread::scope(|sc| {
            let (a, stop) = (&a, &stop);
            for w in 0..2u64 {
                sc.spawn(move || {
                    let mut blobs = vec![];
                    let mut x = 20u32;
                    let mut r = w;
                    while !stop.load(Ordering::Relaxed) {
                        r = (r + 7919) % n;
                        let h = t.header(a, r).unwrap();
                        let v = (x as u64 * n + r).to_ne_bytes();
                        let changes = [(0, Value::Fixed(&v)), (1, Value::Fixed(&v))];
                        t.prepare_blobs(a, &[Value::Fixed(&v), Value::Fixed(&v)], &mut blobs).unwrap();
                        if t.update_in_place(a, r, &h, x, 0, &changes, &blobs).unwrap() {
                            t.prune_chain(a, r, &|_| true);
                        } else {
                            t.discard_blobs(a, &blobs);
                        }
                        blobs.clear();
                        x += 1;
                    }
                });
            }
            for _ in 0..20 {
                let s = t.create_snapshot(a, &[0, 1], method, 0).unwrap();
                let snap = t.snapshot(a, s);
                let read = || {
                    let mut cur = Cursor::NEW;
                    let mut c0 = t.col_cache(a, 0);
                    let mut c1 = t.col_cache(a, 1);
                    t.bind_snapshot(a, snap, &mut cur, &mut [(0, &mut c0), (1, &mut c1)]);
                    let mut sum = 0u64;
                    for r in 0..snap.nrows {
                        assert!(t.cursor_header(a, &mut cur, r).is_some());
                        let (v0, v1) = (fixed(t.cursor_value(a, &mut c0, r)), fixed(t.cursor_value(a, &mut c1, r)));
                        assert_eq!(v0, v1, "{method:?}: row {r} torn");
                        assert_eq!(v0 % n, r, "{method:?}: row {r} holds another row's value");
                        sum = sum.wrapping_add(v0);
                    }
                    sum
                };
                let first = read();
                std::thread::sleep(std::time::Duration::from_millis(5));
                assert_eq!(read(), first, "{method:?}: the snapshot changed under the writers");
                t.release_snapshot(a, s);
            }
            stop.store(true, Ordering::Relaxed);
        });
    });
}

/// The provider is used when the kernel has the call and refused with the
/// reason when it does not; a shared arena is always refused, as the kernel
/// would alias its pages instead of freezing them.
#[test]
fn vm_snapshot_is_used_when_detected_and_refused_otherwise() {
    // A shared arena (PostgreSQL's) is frozen only by the second patch.
    let shared = Arena::create_shared(32 << 20).unwrap(); // not the size of `a` below
    shared.format(4).unwrap();
    let t = Directory::create(&shared, 4).unwrap().get_or_create(&shared, &[6, 6, 6, 0], &|| vec![ColumnSpec::fixed(8), ColumnSpec::var()]).unwrap();
    for i in 0..1000 {
        insert(&shared, t, i, 10);
    }
    let frozen_shared = anker_engine::arena::vm_snapshot_shared_memfd().is_ok();
    if std::env::var_os("ANKER_REQUIRE_VM_SNAPSHOT").is_some() {
        assert!(frozen_shared, "ANKER_REQUIRE_VM_SNAPSHOT is set: the kernel must freeze shared memfds");
    }
    match (frozen_shared, t.create_snapshot(&shared, &[0], Method::VmSnapshot, 0)) {
        (true, Ok(s)) => {
            assert_eq!(images(&shared), 1);
            let snap = t.snapshot(&shared, s);
            for r in 0..1000 {
                let h = t.header(&shared, r).unwrap();
                let nv = (r + 5000).to_ne_bytes();
                let mut blobs = vec![];
                t.prepare_blobs(&shared, &[Value::Fixed(&nv)], &mut blobs).unwrap();
                assert!(t.update_in_place(&shared, r, &h, 11, 0, &[(0, Value::Fixed(&nv))], &blobs).unwrap());
            }
            let mut cur = Cursor::NEW;
            let mut cc = t.col_cache(&shared, 0);
            t.bind_snapshot(&shared, snap, &mut cur, &mut [(0, &mut cc)]);
            assert_eq!(sum(&shared, t, &mut cur, &mut cc, snap.nrows), (999 * 1000 / 2, 1000), "the image is frozen");
            let mut live = Cursor::NEW;
            let mut lc = t.col_cache(&shared, 0);
            assert_eq!(sum(&shared, t, &mut live, &mut lc, t.nrows()), (999 * 1000 / 2 + 5000 * 1000, 1000));
            t.release_snapshot(&shared, s);
            assert_eq!(images(&shared), 0);
        }
        (false, Err(SnapshotError::Unsupported(why))) => assert!(why.contains("shared between processes"), "{why}"),
        (here, other) => panic!("shared memfds frozen: {here}, yet: {other:?}"),
    }

    let a = setup(64);
    let t = Directory::get(&a).unwrap().get_or_create(&a, &[6, 6, 6, 0], &|| vec![ColumnSpec::fixed(8), ColumnSpec::var()]).unwrap();
    insert(&a, t, 42, 10);
    match (vm_snapshot_here(), t.create_snapshot(&a, &[0], Method::VmSnapshot, 0)) {
        (true, Ok(s)) => {
            assert_eq!(t.snapshot(&a, s).method, Method::VmSnapshot as u32);
            assert_eq!(images(&a), 1, "the image is one new mapping");
            t.release_snapshot(&a, s);
            assert_eq!(images(&a), 0);
        }
        (false, Err(SnapshotError::Unsupported(why))) => {
            assert!(why.contains("kernel-patch/0001-mm-add-vm_snapshot-system-call.patch"), "{why}")
        }
        (here, other) => panic!("vm_snapshot detected: {here}, yet: {other:?}"),
    }
    let mut live = 0;
    t.for_each_snapshot(&a, |_| live += 1);
    assert_eq!(live, 0);
}

/// VACUUM gives back pages of vacant rows while a snapshot still reads
/// them: the snapshot keeps its rows, the memory returns after it ends.
#[test]
fn released_pages_stay_readable_for_live_snapshots() {
    each_method(|method| {
        let a = setup(256);
        let t = Directory::get(&a).unwrap().get_or_create(&a, &[7, 7, 7, method as u32], &|| vec![ColumnSpec::fixed(8), ColumnSpec::var()]).unwrap();
        let n = 100_000u64;
        for i in 0..n {
            insert(&a, t, i, 10);
        }
        let s = t.create_snapshot(&a, &[0], method, 0).unwrap();
        let before = t.bytes();
        // the first half of the rows goes away entirely
        let gone: Vec<u64> = (0..n / 2).collect();
        t.vacate_rows(&a, &gone);
        assert!(t.release_vacant_pages(&a) > 0);
        let snap = t.snapshot(&a, s);
        let mut cur = Cursor::NEW;
        let mut cc = t.col_cache(&a, 0);
        t.bind_snapshot(&a, snap, &mut cur, &mut [(0, &mut cc)]);
        assert_eq!(sum(&a, t, &mut cur, &mut cc, snap.nrows), (n * (n - 1) / 2, n), "{method:?}");
        t.release_snapshot(&a, s);
        t.reclaim(&a);
        assert!(t.bytes() < before, "{method:?}: {} not below {before}", t.bytes());
    });
}

/// Snapshots created and released by three readers at once, while writers
/// copy the pages they share and reclaim what they retire: each snapshot
/// reads the same rows twice. A snapshot made visible to reclamation only
/// after its creation latch was released (until 2026-12-06) could have a
/// page it shared retired and freed in between, and read a reused page.
#[test]
fn snapshots_made_while_others_are_released_keep_their_pages() {
    let a = setup(512);
    let dir = Directory::get(&a).unwrap();
    let t = dir.get_or_create(&a, &[6, 6, 6, 0], &|| vec![ColumnSpec::fixed(8)]).unwrap();
    let n = 20_000u64;
    for i in 0..n {
        let mut out = vec![];
        t.insert_rows(&a, &[&[Value::Fixed(&i.to_ne_bytes())]], &[0], 10, 0, flag::XMIN_COMMITTED, 0, &mut out).unwrap();
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        let (a, stop) = (&a, &stop);
        for w in 0..2u64 {
            sc.spawn(move || {
                let mut x = 20u32 + w as u32;
                let mut r = w;
                while !stop.load(Ordering::Relaxed) {
                    r = (r + 7919) % n;
                    // (live pages are read inside a reclamation epoch)
                    a.epoch_enter(w as u32);
                    let h = t.header(a, r).unwrap();
                    let v = (x as u64 * n + r).to_ne_bytes();
                    if t.update_in_place(a, r, &h, x, 0, &[(0, Value::Fixed(&v))], &[0]).unwrap() {
                        t.prune_chain(a, r, &|_| true);
                    }
                    a.epoch_exit(w as u32);
                    t.reclaim(a);
                    x += 2;
                }
            });
        }
        let readers: Vec<_> = (0..3)
            .map(|_| {
                sc.spawn(move || {
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
                    let mut made = 0;
                    while std::time::Instant::now() < deadline {
                        let s = t.create_snapshot(a, &[0], Method::Cow, 0).unwrap();
                        let snap = t.snapshot(a, s);
                        let read = || {
                            let mut cur = Cursor::NEW;
                            let mut cc = t.col_cache(a, 0);
                            t.bind_snapshot(a, snap, &mut cur, &mut [(0, &mut cc)]);
                            (0..snap.nrows)
                                .map(|r| {
                                    let h = t.cursor_header(a, &mut cur, r).expect("a row of the snapshot");
                                    let v = fixed(t.cursor_value(a, &mut cc, r));
                                    assert_eq!(v % n, r, "row {r} reads another page");
                                    (h.xmin as u64) ^ v
                                })
                                .fold(0u64, |s, x| s.wrapping_mul(31).wrapping_add(x))
                        };
                        let first = read();
                        assert_eq!(read(), first, "the snapshot changed");
                        t.release_snapshot(a, s);
                        made += 1;
                    }
                    made
                })
            })
            .collect();
        let made: usize = readers.into_iter().map(|r| r.join().unwrap()).sum();
        stop.store(true, Ordering::Relaxed);
        assert!(made > 10, "only {made} snapshots");
    });
}
