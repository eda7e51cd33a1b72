//! Which engine table backs a relation, and when storage is created and freed.
//!
//! Storage is keyed by the relation's `RelFileNode` (tablespace, database,
//! relfilenode) plus the owning backend for temporary tables, never by OID:
//! TRUNCATE, VACUUM FULL, CLUSTER and table rewrites give a relation a new
//! relfilenode, and the old storage must survive until the transaction
//! commits (a rollback keeps using it).
//!
//! Life cycle, mirroring PostgreSQL's own `pendingDeletes` for files:
//!
//! * `relation_set_new_filenode` creates the new storage and records it as
//!   *created*; the relation's previous storage, if any, is recorded as
//!   *dropped*.
//! * `DROP TABLE` (seen through `object_access_hook`) records *dropped*.
//! * At commit, *dropped* storage is freed; at abort, *created* storage is.
//!   Subtransactions hand their records to the parent on commit and undo
//!   them on abort.
//!
//! A relation whose storage is missing (the server restarted: anker tables
//! are in memory) gets empty storage on first use.

use crate::datum;
use crate::error::OrRaise;
use crate::shmem;
use crate::xact_list::XactList;
use anker_engine::arena::Off;
use anker_engine::table::{Table, TableKey};
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

/// What `rd_amcache` holds for an anker relation: the engine table, and a
/// reader for single-row fetches whose scratch memory follows the struct in
/// the same chunk (PostgreSQL frees `rd_amcache` with one `pfree` when the
/// relcache entry is invalidated).
#[repr(C)]
struct AmCache {
    generation: u64,
    key: TableKey,
    table: Off,
    /// Bytes of reader scratch memory in the chunk.
    scratch: usize,
    /// `fetch` is set up for `table`.
    fetch_ready: bool,
    fetch: std::mem::MaybeUninit<crate::tam::scan::Reader>,
}

/// Offset of the reader's scratch memory in an `AmCache` chunk.
const SCRATCH_AT: usize = std::mem::size_of::<AmCache>().next_multiple_of(16);

pub fn key_of(rel: pg_sys::Relation) -> TableKey {
    // SAFETY: rel is an open relation.
    unsafe { node_key(&(*rel).rd_node, (*rel).rd_backend) }
}

fn node_key(n: &pg_sys::RelFileNode, backend: pg_sys::BackendId) -> TableKey {
    [n.spcNode.into(), n.dbNode.into(), n.relNode.into(), backend as u32]
}

/// The engine table behind `rel`, created empty if missing.
pub fn table_of(rel: pg_sys::Relation) -> &'static Table {
    let arena = shmem::arena();
    let key = key_of(rel);
    // SAFETY: rd_amcache is ours for table AMs; it is either NULL or an
    // AmCache we allocated in CacheMemoryContext.
    unsafe {
        let c = (*rel).rd_amcache as *const AmCache;
        if !c.is_null() && (*c).generation == arena.generation() && (*c).key == key {
            let t = arena.get::<Table>((*c).table);
            if t.ncols() >= (*(*rel).rd_att).natts as usize {
                return t;
            }
        }
        let desc = (*rel).rd_att;
        let t = shmem::directory().get_or_create(arena, &key, &|| datum::specs_for(desc)).or_raise();
        sync_columns(t, desc);
        let scratch = crate::tam::scan::Reader::scratch_bytes(desc);
        if !(*rel).rd_amcache.is_null() && (*((*rel).rd_amcache as *const AmCache)).scratch != scratch {
            pg_sys::pfree((*rel).rd_amcache);
            (*rel).rd_amcache = std::ptr::null_mut();
        }
        if (*rel).rd_amcache.is_null() {
            (*rel).rd_amcache = pg_sys::MemoryContextAlloc(pg_sys::CacheMemoryContext, SCRATCH_AT + scratch);
            (*((*rel).rd_amcache as *mut AmCache)).scratch = scratch;
        }
        let c = (*rel).rd_amcache as *mut AmCache;
        (*c).generation = arena.generation();
        (*c).key = key;
        (*c).table = arena.off_of(t as *const Table);
        (*c).fetch_ready = false;
        t
    }
}

/// The reader cached with `rel`'s relcache entry, for single-row fetches
/// (its values stay valid until the next fetch from `rel`). `table` is
/// `table_of(rel)`, just called.
pub unsafe fn fetch_reader(rel: pg_sys::Relation, table: &Table) -> &'static mut crate::tam::scan::Reader {
    let c = (*rel).rd_amcache as *mut AmCache;
    debug_assert!(!c.is_null(), "table_of(rel) sets rd_amcache");
    // SAFETY: table_of made the chunk for rel's descriptor, with
    // SCRATCH_AT + scratch_bytes(rd_att) bytes; the reader is re-made
    // whenever table_of rebinds the relation.
    if !(*c).fetch_ready {
        (*c).fetch.write(crate::tam::scan::Reader::new_in(rel, table, (c as *mut u8).add(SCRATCH_AT)));
        (*c).fetch_ready = true;
    }
    let r = (*c).fetch.assume_init_mut();
    r.reset(table);
    r
}

/// Make the stored columns match the relation's attributes: columns added
/// by ALTER TABLE without a rewrite get the attribute's "missing" value in
/// every existing row; a column left behind by an aborted ALTER TABLE is
/// replaced.
fn sync_columns(t: &Table, desc: pg_sys::TupleDesc) {
    let arena = shmem::arena();
    let atts = datum::attrs(desc);
    let stale = |i: usize| {
        let c = t.column(arena, i);
        !datum::spec_matches(c.spec().kind, c.width_shift, &atts[i])
    };
    if t.ncols() >= atts.len() && !(0..atts.len()).any(stale) {
        return;
    }
    let _g = t.schema_lock.lock();
    for (i, att) in atts.iter().enumerate() {
        if i < t.ncols() && !stale(i) {
            continue;
        }
        let mut isnull = true;
        // SAFETY: attnum is within the descriptor.
        let missing = unsafe { pg_sys::getmissingattr(desc, i as i32 + 1, &mut isnull) };
        let mut enc = datum::Encoder::default();
        let mut values = vec![pg_sys::Datum::from(0usize); atts.len()];
        let mut nulls = vec![true; atts.len()];
        values[i] = missing;
        nulls[i] = isnull || att.attisdropped;
        // SAFETY: the missing value has the attribute's type.
        unsafe { enc.encode(desc, &values, &nulls) };
        let v = enc.values()[i];
        t.set_column(arena, i, datum::spec_for(att), v).or_raise();
    }
}

// ---- pending creates and drops ------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum PendingKind {
    /// Storage created in this transaction: freed if it aborts.
    Created,
    /// Storage dropped in this transaction: freed if it commits.
    Dropped,
    /// A database dropped: all its tables are freed at commit.
    DroppedDatabase,
}

#[derive(Clone, Copy, Debug)]
struct Pending {
    key: TableKey,
    kind: PendingKind,
}

static mut PENDING: XactList<Pending> = XactList::new();

fn pending() -> &'static mut XactList<Pending> {
    // SAFETY: backends are single-threaded; only this module touches it.
    unsafe { &mut *(&raw mut PENDING) }
}

fn free_storage(key: &TableKey) {
    shmem::directory().drop_table(shmem::arena(), key);
}

fn free_database(db: u32) {
    let arena = shmem::arena();
    let mut keys = vec![];
    shmem::directory().for_each(arena, |t| {
        if t.key[1] == db {
            keys.push(t.key);
        }
    });
    for k in keys {
        free_storage(&k);
    }
}

/// New storage for `rel` under `new_node`; the old storage (if different)
/// is dropped at commit.
pub fn create_new_storage(rel: pg_sys::Relation, new_node: &pg_sys::RelFileNode) -> &'static Table {
    // SAFETY: rel is open.
    let backend = unsafe { (*rel).rd_backend };
    let new_key = node_key(new_node, backend);
    let old_key = key_of(rel);
    if old_key != new_key && shmem::directory().lookup(shmem::arena(), &old_key).is_some() {
        pending().push(Pending { key: old_key, kind: PendingKind::Dropped });
    }
    // SAFETY: rel is open.
    let desc = unsafe { (*rel).rd_att };
    // A leftover with the same key (relfilenodes are reused only after the
    // old storage was dropped) is replaced.
    free_storage(&new_key);
    let t = shmem::directory().get_or_create(shmem::arena(), &new_key, &|| datum::specs_for(desc)).or_raise();
    pending().push(Pending { key: new_key, kind: PendingKind::Created });
    t
}

/// TRUNCATE of a table created in this transaction: empty it in place.
pub fn truncate_in_place(rel: pg_sys::Relation) {
    let key = key_of(rel);
    free_storage(&key);
    // SAFETY: rel is open.
    let desc = unsafe { (*rel).rd_att };
    shmem::directory().get_or_create(shmem::arena(), &key, &|| datum::specs_for(desc)).or_raise();
}

pub fn install_hooks() {
    // SAFETY: hook chaining and callback registration during postmaster
    // start-up; children inherit them.
    unsafe {
        PREV_OBJECT_ACCESS_HOOK = pg_sys::object_access_hook;
        pg_sys::object_access_hook = Some(object_access);
        pg_sys::RegisterXactCallback(Some(xact_callback), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(subxact_callback), std::ptr::null_mut());
    }
}

static mut PREV_OBJECT_ACCESS_HOOK: pg_sys::object_access_hook_type = None;

#[pg_guard]
unsafe extern "C-unwind" fn object_access(
    access: pg_sys::ObjectAccessType::Type,
    class_id: pg_sys::Oid,
    object_id: pg_sys::Oid,
    sub_id: std::ffi::c_int,
    arg: *mut std::ffi::c_void,
) {
    if let Some(prev) = PREV_OBJECT_ACCESS_HOOK {
        prev(access, class_id, object_id, sub_id, arg);
    }
    if access != pg_sys::ObjectAccessType::OAT_DROP || sub_id != 0 {
        return;
    }
    if class_id == pg_sys::RelationRelationId {
        let rel = pg_sys::RelationIdGetRelation(object_id);
        if rel.is_null() {
            return;
        }
        if crate::tam::is_anker(rel) {
            pending().push(Pending { key: key_of(rel), kind: PendingKind::Dropped });
        }
        pg_sys::RelationClose(rel);
    } else if class_id == pg_sys::DatabaseRelationId {
        pending().push(Pending { key: [0, object_id.into(), 0, 0], kind: PendingKind::DroppedDatabase });
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn xact_callback(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    use pg_sys::XactEvent::*;
    let list = pending();
    if list.is_empty() {
        return;
    }
    match event {
        XACT_EVENT_PRE_PREPARE => {
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                "cannot PREPARE a transaction that created, truncated, rewrote or dropped anker tables"
            );
        }
        XACT_EVENT_COMMIT | XACT_EVENT_PARALLEL_COMMIT => {
            for p in list.take_all() {
                match p.kind {
                    PendingKind::Dropped => free_storage(&p.key),
                    PendingKind::DroppedDatabase => free_database(p.key[1]),
                    PendingKind::Created => {}
                }
            }
        }
        XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT => {
            for p in list.take_all() {
                if p.kind == PendingKind::Created {
                    free_storage(&p.key);
                }
            }
        }
        _ => {}
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn subxact_callback(
    event: pg_sys::SubXactEvent::Type,
    _my_subid: pg_sys::SubTransactionId,
    _parent_subid: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    use pg_sys::SubXactEvent::*;
    let list = pending();
    if list.is_empty() {
        return;
    }
    match event {
        SUBXACT_EVENT_COMMIT_SUB => list.hand_to_parent(),
        SUBXACT_EVENT_ABORT_SUB => {
            for p in list.take_aborted() {
                if p.kind == PendingKind::Created {
                    free_storage(&p.key);
                }
            }
        }
        _ => {}
    }
}
