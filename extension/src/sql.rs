//! SQL-visible functions and views in schema `anker`.

use crate::shmem;
use crate::tam::blocks_for_rows;
use anker_engine::snapshot::Method;
use pgrx::prelude::*;
use std::sync::atomic::Ordering;

/// Raise a clear error unless anker was loaded by the postmaster. The
/// extension script calls it first, so CREATE EXTENSION fails cleanly.
#[pg_extern]
pub fn assert_preloaded() {
    if !shmem::is_loaded() {
        shmem::not_preloaded();
    }
}

/// Arena-wide memory use.
#[pg_extern]
fn memory_usage() -> TableIterator<
    'static,
    (
        name!(limit_bytes, i64),
        name!(used_bytes, i64),
        name!(peak_bytes, i64),
        name!(metadata_bytes, i64),
        name!(warm_bytes, i64),
        name!(tables, i64),
    ),
> {
    let arena = shmem::arena();
    let s = arena.stats();
    let tables = shmem::directory().len() as i64;
    TableIterator::once((
        s.limit_bytes as i64,
        s.used_bytes as i64,
        s.peak_bytes as i64,
        s.metadata_bytes as i64,
        s.warm_bytes as i64,
        tables,
    ))
}

/// One row per stored table of every database: its memory, and its log on
/// disk (`log_bytes` written since the last image of `image_bytes`; VACUUM
/// writes the next image once the log passes `image_mark_bytes`, see
/// `durable::compact`).
#[pg_extern]
#[allow(clippy::type_complexity)] // the row type of the SQL function
fn table_storage() -> TableIterator<
    'static,
    (
        name!(spcnode, pg_sys::Oid),
        name!(dbnode, pg_sys::Oid),
        name!(relfilenode, pg_sys::Oid),
        name!(row_slots, i64),
        name!(blocks, i64),
        name!(bytes, i64),
        name!(log_bytes, i64),
        name!(image_bytes, i64),
        name!(image_mark_bytes, i64),
    ),
> {
    let arena = shmem::arena();
    let mut rows = vec![];
    shmem::directory().for_each(arena, |t| {
        rows.push((
            pg_sys::Oid::from(t.key[0]),
            pg_sys::Oid::from(t.key[1]),
            pg_sys::Oid::from(t.key[2]),
            t.nrows() as i64,
            blocks_for_rows(t.nrows()) as i64,
            t.bytes() as i64,
            t.log_bytes.load(Ordering::Relaxed) as i64,
            t.image_bytes.load(Ordering::Relaxed) as i64,
            crate::durable::compact::mark(t) as i64,
        ));
    });
    TableIterator::new(rows)
}

/// One row per table being loaded from its relation file now, in every
/// database: the loading backend, when it began, the file's bytes read so
/// far and in all, the rows and log entries replayed so far.
#[pg_extern]
#[allow(clippy::type_complexity)] // the row type of the SQL function
fn load_progress() -> TableIterator<
    'static,
    (
        name!(pid, i32),
        name!(spcnode, pg_sys::Oid),
        name!(dbnode, pg_sys::Oid),
        name!(relfilenode, pg_sys::Oid),
        name!(started_at, TimestampWithTimeZone),
        name!(bytes_read, i64),
        name!(bytes_total, i64),
        name!(rows_loaded, i64),
        name!(changes_replayed, i64),
    ),
> {
    let arena = shmem::arena();
    let mut rows = vec![];
    shmem::directory().for_each(arena, |t| {
        let p = &t.load_progress;
        let pid = p.pid.load(Ordering::Acquire);
        if t.loading.load(Ordering::Acquire) == 0 || pid == 0 {
            return;
        }
        rows.push((
            pid as i32,
            pg_sys::Oid::from(t.key[0]),
            pg_sys::Oid::from(t.key[1]),
            pg_sys::Oid::from(t.key[2]),
            // (PostgreSQL's clock: the loader read GetCurrentTimestamp)
            TimestampWithTimeZone::try_from(p.started.load(Ordering::Relaxed)).unwrap_or_else(|_| TimestampWithTimeZone::negative_infinity()),
            p.bytes_read.load(Ordering::Relaxed) as i64,
            p.bytes_total.load(Ordering::Relaxed) as i64,
            t.nrows() as i64,
            p.changes.load(Ordering::Relaxed) as i64,
        ));
    });
    TableIterator::new(rows)
}

/// Event counters of all processes since the server started.
#[pg_extern]
fn counters() -> TableIterator<'static, (name!(name, String), name!(value, i64))> {
    let arena = shmem::arena();
    TableIterator::new(
        anker_engine::stats::NAMES.iter().map(|(n, i)| (n.to_string(), arena.counter(*i) as i64)).collect::<Vec<_>>(),
    )
}

/// Live column snapshots of every table.
#[allow(clippy::type_complexity)] // the row type of the SQL function
#[pg_extern]
fn snapshot_list() -> TableIterator<
    'static,
    (
        name!(id, i64),
        name!(spcnode, pg_sys::Oid),
        name!(dbnode, pg_sys::Oid),
        name!(relfilenode, pg_sys::Oid),
        name!(method, String),
        name!(columns, Vec<i32>),
        name!(created_at, TimestampWithTimeZone),
        name!(create_ms, f64),
        name!(pages_shared, i64),
        name!(pages_copied, i64),
        name!(readers, i32),
    ),
> {
    let arena = shmem::arena();
    let cow_now = arena.counter(anker_engine::stats::COW_PAGE_COPIES);
    let mut rows = vec![];
    shmem::directory().for_each(arena, |t| {
        t.for_each_snapshot(arena, |s| {
            let cow = s.method == Method::Cow as u32;
            // µs since the Unix epoch -> PostgreSQL's µs since 2000-01-01
            let pg_us = s.created_us as i64 - 946_684_800_000_000;
            rows.push((
                s.id as i64,
                pg_sys::Oid::from(t.key[0]),
                pg_sys::Oid::from(t.key[1]),
                pg_sys::Oid::from(t.key[2]),
                Method::from_u32(s.method).map_or("?", Method::name).to_string(),
                s.columns(arena).iter().map(|c| *c as i32 + 1).collect(),
                TimestampWithTimeZone::try_from(pg_us).unwrap_or_else(|_| TimestampWithTimeZone::negative_infinity()),
                s.create_ns as f64 / 1e6,
                if cow { s.pages_captured as i64 } else { 0 },
                if cow { (cow_now - s.cow_at_create) as i64 } else { s.pages_copied as i64 },
                s.refs.load(std::sync::atomic::Ordering::Relaxed) as i32,
            ));
        });
    });
    TableIterator::new(rows)
}

pgrx::extension_sql!(
    r#"
CREATE VIEW anker.snapshots AS
SELECT s.id,
       pg_filenode_relation(CASE WHEN s.spcnode = d.dattablespace THEN 0 ELSE s.spcnode END, s.relfilenode) AS "table",
       s.method, s.columns, s.created_at, now() - s.created_at AS age, s.create_ms,
       s.pages_shared, s.pages_copied, s.readers
  FROM anker.snapshot_list() s
  JOIN pg_database d ON d.oid = s.dbnode
 WHERE d.datname = current_database();
COMMENT ON VIEW anker.snapshots IS 'live column snapshots: columns are attribute numbers; pages_copied counts copy-on-write copies made while the snapshot lived (cow) or pages copied at creation (memcpy)';
CREATE VIEW anker.stats AS SELECT * FROM anker.counters();
COMMENT ON VIEW anker.stats IS 'anker event counters since server start (all databases)';
CREATE VIEW anker.memory AS SELECT * FROM anker.memory_usage();
COMMENT ON VIEW anker.memory IS 'anker arena: limit (anker.memory_limit), bytes in use, peak, metadata, free pages kept for reuse (warm), tables';

CREATE VIEW anker.tables AS
SELECT pg_filenode_relation(
         CASE WHEN s.spcnode = d.dattablespace THEN 0 ELSE s.spcnode END,
         s.relfilenode) AS relation,
       s.relfilenode, s.row_slots, s.blocks, s.bytes
  FROM anker.table_storage() s
  JOIN pg_database d ON d.oid = s.dbnode
 WHERE d.datname = current_database();
COMMENT ON VIEW anker.tables IS 'anker tables of the current database and the memory they hold';

CREATE VIEW anker.loads AS
SELECT l.pid, d.datname,
       CASE WHEN d.datname = current_database() THEN
         pg_filenode_relation(CASE WHEN l.spcnode = d.dattablespace THEN 0 ELSE l.spcnode END, l.relfilenode)
       END AS relation,
       l.relfilenode, l.started_at, clock_timestamp() - l.started_at AS elapsed,
       l.bytes_read, l.bytes_total, l.rows_loaded, l.changes_replayed
  FROM anker.load_progress() l
  JOIN pg_database d ON d.oid = l.dbnode;
COMMENT ON VIEW anker.loads IS 'anker tables being loaded from their relation files now (first use after a start), in every database: like pg_stat_progress_*; relation only for the current database';
"#,
    name = "views",
    requires = [memory_usage, table_storage, counters, snapshot_list, load_progress]
);

/// Open `relation` with `lock` for the SQL function `caller`, or raise
/// ERRCODE_WRONG_OBJECT_TYPE (lock released) when it is not an anker table.
/// The caller closes it with the same lock.
///
/// # Safety
/// Called in a transaction.
unsafe fn open_anker(relation: &pgrx::PgRelation, lock: pg_sys::LOCKMODE, caller: &str) -> pg_sys::Relation {
    let rel = pg_sys::relation_open(relation.oid(), lock);
    if !crate::tam::is_anker(rel) {
        pg_sys::relation_close(rel, lock);
        pgrx::ereport!(ERROR, PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE, format!("{caller}: not an anker table"));
    }
    rel
}

/// Compact an anker table's on-disk change log now: write an image of the
/// table from a virtual snapshot and free the log before it (VACUUM does
/// this by itself once the log since the last image outgrows the image).
/// Like a manual VACUUM, it writes at the pace `vacuum_cost_delay` and
/// `vacuum_cost_limit` set (unpaced by default).
#[pg_extern]
fn compact(
    relation: pgrx::PgRelation,
) -> TableIterator<'static, (name!(rows, i64), name!(image_bytes, i64), name!(log_bytes_before, i64), name!(blocks_freed, i64))> {
    // SAFETY: the relation is opened and closed here, with VACUUM's lock
    // (which keeps another compaction out).
    unsafe {
        // (a standby's tables follow its primary's images: ERROR 25006)
        pg_sys::PreventCommandDuringRecovery(c"anker.compact()".as_ptr());
        let lock = pg_sys::ShareUpdateExclusiveLock as pg_sys::LOCKMODE;
        let rel = open_anker(&relation, lock, "anker.compact");
        let table = crate::storage::table_of(rel);
        // paced as a manual VACUUM is: by vacuum_cost_delay, when it is set
        let _pacing = crate::durable::compact::VacuumCostAccounting::start();
        let done = crate::durable::compact::compact(rel, table);
        pg_sys::relation_close(rel, lock);
        let c = done.unwrap_or(crate::durable::compact::Compacted { rows: 0, image_bytes: 0, log_bytes_before: 0, blocks_freed: 0 });
        TableIterator::once((c.rows as i64, c.image_bytes as i64, c.log_bytes_before as i64, c.blocks_freed as i64))
    }
}

/// How an anker table stores each attribute: `fixed` values of `bytes`
/// bytes, or `var` slots of `bytes` bytes (longer values go to blobs).
#[pg_extern]
fn column_layout(relation: pgrx::PgRelation) -> TableIterator<'static, (name!(attnum, i32), name!(layout, String), name!(bytes, i32))> {
    // SAFETY: the relation is opened and closed here.
    unsafe {
        let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
        let rel = open_anker(&relation, lock, "anker.column_layout");
        let table = crate::storage::table_of(rel);
        let arena = shmem::arena();
        let rows: Vec<_> = (0..table.ncols())
            .map(|i| {
                let spec = table.column(arena, i).spec();
                let layout = match spec.kind {
                    anker_engine::table::ColumnKind::Fixed => "fixed",
                    anker_engine::table::ColumnKind::Var => "var",
                };
                (i as i32 + 1, layout.to_string(), spec.copy_bytes() as i32)
            })
            .collect();
        pg_sys::relation_close(rel, lock);
        TableIterator::new(rows)
    }
}
