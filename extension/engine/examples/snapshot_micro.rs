//! The engine's own snapshot providers in the experiments of
//! `bench/snapshot-micro` (the AnKer papers' Table 1 and Figure 4), with the
//! same options and CSV rows as `snapshot_micro.c`, so that the plots put
//! them next to memcpy, fork, rewiring and vm_snapshot on raw memory:
//!
//! * `engine-cow`: the `cow` provider (software copy-on-write of 64 KiB
//!   arena pages);
//! * `engine-vm_snapshot`: the `vm_snapshot` provider (a kernel
//!   copy-on-write image of the whole private arena), only where the kernel
//!   has the call; elsewhere a `#` line says why.
//!
//! Columns are `int8` columns of a table: a "page" of the experiments is
//! 4 KiB of one column, i.e. 512 rows, and a write is an in-place update of
//! one row through the engine's MVCC write path (undo record included),
//! pruned at once so that no version chain grows.
//!
//! `cargo run --release --example snapshot_micro -- [-p PAGES] [-t COLS]
//!  [-c LIST] [-m LIST] [-r N] [-f PAGES] [-s STEP] [-d N] [-x table1|fig4]
//!  [-M LIST] [-e ENV] [-o FILE]` (meanings as in `snapshot_micro -h`).

use anker_engine::arena::{vm_snapshot_syscall, Arena};
use anker_engine::snapshot::Method;
use anker_engine::table::{flag, ColumnSpec, Directory, Table, Value};
use std::io::Write;
use std::time::Instant;

/// Rows of an int8 column in one 4 KiB page.
const ROWS_PER_4K: u64 = 4096 / 8;

struct Opts {
    col_pages: u64,
    table_cols: usize,
    snap_cols: Vec<usize>,
    mods: Vec<u64>,
    reps: usize,
    fig4_pages: u64,
    fig4_step: u64,
    fig4_dense: u64,
    experiment: Option<String>,
    methods: Option<Vec<String>>,
    env: String,
    out: Box<dyn Write>,
}

fn parse_opts() -> Opts {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut o = Opts {
        col_pages: 51200,
        table_cols: 50,
        snap_cols: vec![1, 25, 50],
        mods: vec![0, 500, 5000, 50000],
        reps: 3,
        fig4_pages: 51200,
        fig4_step: 512,
        fig4_dense: 2048,
        experiment: None,
        methods: None,
        env: "host".into(),
        out: Box::new(std::io::stdout()),
    };
    let list = |v: &str| v.split(',').map(|x| x.parse().expect("a list of numbers")).collect::<Vec<u64>>();
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).map(String::as_str).unwrap_or_else(|| panic!("{} needs a value", args[i]));
        match args[i].as_str() {
            "-p" => o.col_pages = v.parse().unwrap(),
            "-t" => o.table_cols = v.parse().unwrap(),
            "-c" => o.snap_cols = list(v).into_iter().map(|x| x as usize).collect(),
            "-m" => o.mods = list(v),
            "-r" => o.reps = v.parse().unwrap(),
            "-f" => o.fig4_pages = v.parse().unwrap(),
            "-s" => o.fig4_step = v.parse().unwrap(),
            "-d" => o.fig4_dense = v.parse().unwrap(),
            "-x" => o.experiment = Some(v.into()),
            "-M" => o.methods = Some(v.split(',').map(String::from).collect()),
            "-e" => o.env = v.into(),
            "-o" => {
                let f = std::fs::OpenOptions::new().create(true).append(true).open(v).expect("output file");
                o.out = Box::new(f);
            }
            other => panic!("unknown option {other} (see the module documentation)"),
        }
        i += 2;
    }
    o
}

/// xorshift, as in snapshot_micro.c (any fixed sequence will do).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// The first `m` of a random permutation of 0..n.
    fn pick(&mut self, n: u64, m: u64) -> Vec<u64> {
        let mut idx: Vec<u64> = (0..n).collect();
        for i in 0..m.min(n) {
            let j = i + self.next() % (n - i);
            idx.swap(i as usize, j as usize);
        }
        idx.truncate(m as usize);
        idx
    }
}

fn load(a: &Arena, ncols: usize, rows: u64) -> &Table {
    let t = Directory::get(a).unwrap().get_or_create(a, &[1, 1, 1, 0], &|| vec![ColumnSpec::fixed(8); ncols]).unwrap();
    let zero = [0u8; 8];
    let batch = 4096u64;
    let mut r = 0;
    while r < rows {
        let n = batch.min(rows - r) as usize;
        let vals: Vec<Vec<Value>> = (0..n).map(|_| vec![Value::Fixed(&zero); ncols]).collect();
        let refs: Vec<&[Value]> = vals.iter().map(|v| v.as_slice()).collect();
        t.insert_rows(a, &refs, &vec![0u64; n * ncols], 10, 0, flag::XMIN_COMMITTED, 0, &mut vec![]).unwrap();
        r += n as u64;
    }
    t
}

/// Update column `col` of `row` in place to `v` (transaction `xid`), and
/// prune the before-image at once.
fn write(a: &Arena, t: &Table, row: u64, col: usize, v: u64, xid: u32) {
    let h = t.header(a, row).unwrap();
    let bytes = v.to_ne_bytes();
    assert!(t.update_in_place(a, row, &h, xid, 0, &[(col, Value::Fixed(&bytes))], &[0]).unwrap());
    t.prune_chain(a, row, &|_| true);
}

fn arena_for(cols: usize, pages: u64) -> Arena {
    // values + stamps (16 B/row) + cids (8 B) + links (16 B), and room
    // for the copies Table 1's writes make while a snapshot of one column
    // lives: that column and every system column, + slack
    let rows = pages * ROWS_PER_4K;
    let bytes = (cols as u64 + 1) * pages * 4096 + 2 * rows * 48 + (256 << 20);
    let a = Arena::create_private(bytes).expect("arena");
    a.format(4).unwrap();
    Directory::create(&a, 4).unwrap();
    a
}

struct Emit<'a> {
    out: &'a mut dyn Write,
    env: &'a str,
}

impl Emit<'_> {
    #[allow(clippy::too_many_arguments)]
    fn row(&mut self, exp: &str, method: &str, cols: usize, col_pages: u64, m: u64, x: u64, ns: u128) {
        writeln!(self.out, "{exp},{},{method},{cols},{col_pages},{m},1,{x},{ns}", self.env).unwrap();
        self.out.flush().unwrap();
    }
}

fn table1(o: &Opts, methods: &[(Method, &str)], emit: &mut Emit, rng: &mut Rng) {
    let a = arena_for(o.table_cols, o.col_pages);
    let t = load(&a, o.table_cols, o.col_pages * ROWS_PER_4K);
    let scaled = |m: u64| (m * o.col_pages / 51200).min(o.col_pages);
    let mut xid = 100u32;
    // as for swcow: the cost does not depend on the pages modified before,
    // so measure the first and the last setting only
    let mods: Vec<u64> = match o.mods.as_slice() {
        [] => vec![],
        [only] => vec![*only],
        [first, .., last] => vec![*first, *last],
    };
    for m in mods.into_iter().map(scaled) {
        if m > 0 {
            for c in 0..o.table_cols {
                let s = t.create_snapshot(&a, &[c], Method::Cow, 0).unwrap();
                for p in rng.pick(o.col_pages, m) {
                    write(&a, t, p * ROWS_PER_4K, c, p, xid);
                    xid += 1;
                }
                t.release_snapshot(&a, s);
            }
        }
        for &(method, name) in methods {
            for &n in &o.snap_cols {
                let cols: Vec<usize> = (0..n.min(o.table_cols)).collect();
                for r in 0..o.reps {
                    let t0 = Instant::now();
                    let s = t.create_snapshot(&a, &cols, method, 0).unwrap();
                    let ns = t0.elapsed().as_nanos();
                    t.release_snapshot(&a, s);
                    emit.row("table1", name, n, o.col_pages, m, r as u64, ns);
                }
            }
        }
    }
}

fn is_sample(o: &Opts, w: u64) -> bool {
    w == 0 || w == o.fig4_pages || w.is_multiple_of(if w < o.fig4_dense { 32 } else { o.fig4_step })
}

fn fig4(o: &Opts, method: Method, name: &str, emit: &mut Emit, rng: &mut Rng) {
    let n = o.fig4_pages;
    let a = arena_for(1, n);
    let t = load(&a, 1, n * ROWS_PER_4K);
    let order = rng.pick(n, n);
    let (mut wsum, mut wcount) = (0u128, 0u128);
    let mut snap = None;
    for w in 0..=n {
        if w > 0 {
            let t0 = Instant::now();
            write(&a, t, order[w as usize - 1] * ROWS_PER_4K, 0, w, 100 + w as u32);
            wsum += t0.elapsed().as_nanos();
            wcount += 1;
        }
        if !is_sample(o, w) {
            continue;
        }
        if let Some(mean) = wsum.checked_div(wcount) {
            emit.row("fig4_write", name, 1, n, w, w, mean);
        }
        (wsum, wcount) = (0, 0);
        let t0 = Instant::now();
        let s = t.create_snapshot(&a, &[0], method, 0).unwrap();
        emit.row("fig4_snapshot", name, 1, n, w, w, t0.elapsed().as_nanos());
        if let Some(old) = snap.replace(s) {
            t.release_snapshot(&a, old);
        }
    }
    if let Some(s) = snap {
        t.release_snapshot(&a, s);
    }
}

fn main() {
    let mut o = parse_opts();
    let wanted = |name: &str| o.methods.as_ref().is_none_or(|m| m.iter().any(|x| x == name));
    let mut methods = vec![];
    if wanted("engine-cow") {
        methods.push((Method::Cow, "engine-cow"));
    }
    let mut notes = vec![];
    if wanted("engine-vm_snapshot") {
        match vm_snapshot_syscall() {
            Ok(_) => methods.push((Method::VmSnapshot, "engine-vm_snapshot")),
            Err(why) => notes.push(format!("# engine-vm_snapshot skipped: {why}")),
        }
    }
    let mut out = std::mem::replace(&mut o.out, Box::new(std::io::sink()));
    for n in notes {
        writeln!(out, "{n}").unwrap();
    }
    let env = o.env.clone();
    let mut emit = Emit { out: &mut *out, env: &env };
    let mut rng = Rng(88172645463325252);
    if o.experiment.as_deref() != Some("fig4") {
        table1(&o, &methods, &mut emit, &mut rng);
    }
    if o.experiment.as_deref() != Some("table1") {
        for &(method, name) in &methods {
            fig4(&o, method, name, &mut emit, &mut rng);
        }
    }
}
