//! SQL-visible functions and views in schema `anker`.

use crate::shmem;
use crate::tam::blocks_for_rows;
use pgrx::prelude::*;

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
        tables,
    ))
}

/// One row per stored table of every database.
#[pg_extern]
fn table_storage() -> TableIterator<
    'static,
    (
        name!(spcnode, pg_sys::Oid),
        name!(dbnode, pg_sys::Oid),
        name!(relfilenode, pg_sys::Oid),
        name!(row_slots, i64),
        name!(blocks, i64),
        name!(bytes, i64),
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

pgrx::extension_sql!(
    r#"
CREATE VIEW anker.stats AS SELECT * FROM anker.counters();
COMMENT ON VIEW anker.stats IS 'anker event counters since server start (all databases)';
CREATE VIEW anker.memory AS SELECT * FROM anker.memory_usage();
COMMENT ON VIEW anker.memory IS 'anker arena: limit (anker.memory_limit), bytes in use, peak';

CREATE VIEW anker.tables AS
SELECT pg_filenode_relation(
         CASE WHEN s.spcnode = d.dattablespace THEN 0 ELSE s.spcnode END,
         s.relfilenode) AS relation,
       s.relfilenode, s.row_slots, s.blocks, s.bytes
  FROM anker.table_storage() s
  JOIN pg_database d ON d.oid = s.dbnode
 WHERE d.datname = current_database();
COMMENT ON VIEW anker.tables IS 'anker tables of the current database and the memory they hold';
"#,
    name = "views",
    requires = [memory_usage, table_storage, counters]
);
