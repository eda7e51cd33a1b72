//! Snapshot micro-benchmarks of the engine (process-private arena):
//!
//! (a) snapshot creation time for 1, 25 and 50 columns of `--mb` MiB each,
//!     copy-on-write against memcpy, and against fork() of this process
//!     holding the same memory (the paper's Table 1 setting);
//! (b) the cost of the first write to a page shared with a snapshot (it is
//!     copied) against a write to a private page (the paper's Figure 4b).
//!
//! `cargo run --release --example snapshot_bench -- [--mb 200] [--columns 1,25,50] [--csv DIR]`
//! Prints Markdown tables; with --csv writes creation.csv and first_write.csv.

use anker_engine::arena::Arena;
use anker_engine::snapshot::Method;
use anker_engine::table::{flag, ColumnSpec, Directory, Table, Value};
use std::time::Instant;

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned()).unwrap_or_else(|| default.to_string())
}

fn fill(a: &Arena, t: &Table, rows: u64, ncols: usize) {
    let batch = 4096u64;
    let zero = [0u8; 8];
    let mut r = 0;
    while r < rows {
        let n = batch.min(rows - r) as usize;
        let keys: Vec<[u8; 8]> = (0..n as u64).map(|i| (r + i).to_ne_bytes()).collect();
        let rows_vals: Vec<Vec<Value>> = keys
            .iter()
            .map(|k| (0..ncols).map(|c| Value::Fixed(if c == 0 { &k[..] } else { &zero[..] })).collect())
            .collect();
        let refs: Vec<&[Value]> = rows_vals.iter().map(|v| v.as_slice()).collect();
        let blobs = vec![0u64; n * ncols];
        t.insert_rows(a, &refs, &blobs, 10, 0, flag::XMIN_COMMITTED, 0, &mut vec![]).unwrap();
        r += n as u64;
    }
}

fn main() {
    let mb: u64 = arg("--mb", "200").parse().unwrap();
    let columns: Vec<usize> = arg("--columns", "1,25,50").split(',').map(|c| c.parse().unwrap()).collect();
    let csv = std::env::args().any(|a| a == "--csv").then(|| arg("--csv", "."));
    let max_cols = *columns.iter().max().unwrap();
    let rows = mb * 1024 * 1024 / 8;
    // table + one memcpy snapshot of everything + slack
    let bytes = (max_cols as u64 * mb * 2 + 2 * ((rows * 40) >> 20) + 1024) << 20;
    let a = Arena::create_private(bytes).unwrap();
    a.format(4).unwrap();
    let dir = Directory::create(&a, 16).unwrap();
    let t = dir.get_or_create(&a, &[1, 1, 1, 0], &|| vec![ColumnSpec::fixed(8); max_cols]).unwrap();
    eprintln!("loading {max_cols} columns x {mb} MiB ({rows} rows)...");
    let t0 = Instant::now();
    fill(&a, t, rows, max_cols);
    eprintln!("loaded in {:.1} s; arena holds {} MiB", t0.elapsed().as_secs_f64(), a.stats().used_bytes >> 20);

    println!("## (a) snapshot creation, {mb} MiB per column\n");
    println!("| columns | data | cow (ms) | memcpy (ms) | fork (ms) | memcpy / cow | fork / cow |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    let mut creation_csv = String::from("columns,mib,cow_ms,memcpy_ms,fork_ms\n");
    for &n in &columns {
        let cols: Vec<usize> = (0..n).collect();
        let time = |m: Method| {
            let mut best = f64::MAX;
            for _ in 0..3 {
                let s = Instant::now();
                let off = t.create_snapshot(&a, &cols, m, 0).unwrap();
                best = best.min(s.elapsed().as_secs_f64() * 1e3);
                t.release_snapshot(&a, off);
            }
            best
        };
        let cow = time(Method::Cow);
        let memcpy = time(Method::Memcpy);
        // fork: this process holds all columns; the child exits at once
        let mut fork_ms = f64::MAX;
        for _ in 0..3 {
            let s = Instant::now();
            // SAFETY: the child only calls _exit.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                unsafe { libc::_exit(0) };
            }
            let elapsed = s.elapsed().as_secs_f64() * 1e3;
            unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
            fork_ms = fork_ms.min(elapsed);
        }
        println!(
            "| {n} | {} MiB | {cow:.3} | {memcpy:.1} | {fork_ms:.1} | {:.0}x | {:.0}x |",
            n as u64 * mb,
            memcpy / cow,
            fork_ms / cow
        );
        creation_csv += &format!("{n},{},{cow:.4},{memcpy:.3},{fork_ms:.3}\n", n as u64 * mb);
    }

    println!("\n## (b) first write to a shared page vs a private page\n");
    let snap = t.create_snapshot(&a, &(0..max_cols.min(4)).collect::<Vec<_>>(), Method::Cow, 0).unwrap();
    let per_page = 8192u64; // int8 rows per 64 KiB page
    let pages = (rows / per_page).min(2000);
    let write = |row: u64, x: u32| {
        let h = t.header(&a, row).unwrap();
        let v = (row + 1).to_ne_bytes();
        let s = Instant::now();
        assert!(t.update_in_place(&a, row, &h, x, 0, &[(0, Value::Fixed(&v))], &[0]).unwrap());
        s.elapsed().as_nanos() as f64
    };
    let (mut first, mut second) = (0f64, 0f64);
    let mut x = 100u32;
    for p in 0..pages {
        let row = p * per_page + 17;
        first += write(row, x);
        x += 1;
        second += write(row + 1, x);
        x += 1;
    }
    t.release_snapshot(&a, snap);
    let (first, second) = (first / pages as f64, second / pages as f64);
    println!("| write | ns per update |\n|---|---:|");
    println!("| first write to a page shared with a snapshot (page copied) | {first:.0} |");
    println!("| next write to the same, now private, page | {second:.0} |");
    println!("| ratio | {:.1}x |", first / second);
    if let Some(dir) = csv {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(format!("{dir}/creation.csv"), creation_csv).unwrap();
        std::fs::write(format!("{dir}/first_write.csv"), format!("kind,ns\nshared,{first:.1}\nprivate,{second:.1}\n")).unwrap();
    }
}
