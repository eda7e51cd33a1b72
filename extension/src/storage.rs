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
use anker_engine::table::{ColumnState, Table, TableKey};
use pgrx::prelude::*;

/// What `rd_amcache` holds for an anker relation: the engine table, and a
/// reader for single-row fetches whose scratch memory follows the struct in
/// the same chunk (PostgreSQL frees `rd_amcache` with one `pfree` when the
/// relcache entry is invalidated).
#[repr(C)]
struct AmCache {
    generation: u64,
    key: TableKey,
    table: Off,
    /// The table's column generation the fetch reader was made for.
    schema_gen: u32,
    /// Bytes of reader scratch memory in the chunk.
    scratch: usize,
    /// `fetch` is set up for `table`.
    fetch_ready: bool,
    /// `table` has a column for every attribute of the relation's
    /// descriptor (the check of [`table_for_write`] found nothing to do at
    /// `schema_gen`).
    columns_synced: bool,
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

/// The engine table behind `rel`, created empty if missing. Its columns
/// may lag behind the relation's attributes (ALTER TABLE ADD COLUMN changes
/// only the catalog): readers fill such attributes with their missing
/// values; writers use [`table_for_write`].
pub fn table_of(rel: pg_sys::Relation) -> &'static Table {
    let arena = shmem::arena();
    let key = key_of(rel);
    // SAFETY: rd_amcache is ours for table AMs; it is either NULL or an
    // AmCache we allocated in CacheMemoryContext.
    unsafe {
        let c = (*rel).rd_amcache as *const AmCache;
        if !c.is_null() && (*c).generation == arena.generation() && (*c).key == key && (*c).schema_gen == arena.get::<Table>((*c).table).schema_gen() {
            return arena.get::<Table>((*c).table);
        }
        let desc = (*rel).rd_att;
        // Not in memory (a restart, a new relfilenode of another backend):
        // from the relation file's change log, if it has one.
        let persistence = (*(*rel).rd_rel).relpersistence;
        let loaded = if persistence == pg_sys::RELPERSISTENCE_TEMP as std::ffi::c_char {
            None
        } else {
            crate::durable::ensure_loaded(&key, (*rel).rd_node, persistence == pg_sys::RELPERSISTENCE_PERMANENT as std::ffi::c_char)
        };
        let t = match loaded {
            Some(t) => t,
            None => shmem::directory().get_or_create(arena, &key, &|| datum::specs_for(desc)).or_raise(),
        };
        let scratch = crate::tam::scan::Reader::scratch_bytes(desc, t);
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
        (*c).schema_gen = t.schema_gen();
        (*c).fetch_ready = false;
        (*c).columns_synced = false;
        t
    }
}

/// The engine table behind `rel` with a column for every attribute of the
/// relation's descriptor: for writers, and for plan nodes that read columns
/// directly. Never for the scan of a table being rewritten, which reads the
/// old storage with the old descriptor.
pub fn table_for_write(rel: pg_sys::Relation) -> &'static Table {
    let t = table_of(rel);
    // SAFETY: table_of set rd_amcache to an AmCache bound to `t` at its
    // current schema generation; the relcache frees it (and with it the
    // flag) whenever the descriptor changes.
    let c = unsafe { (*rel).rd_amcache as *mut AmCache };
    if unsafe { (*c).columns_synced } {
        return t;
    }
    // SAFETY: rel is open.
    let desc = unsafe { (*rel).rd_att };
    let gen = t.schema_gen();
    sync_columns(rel, t, desc);
    if t.schema_gen() != gen {
        table_of(rel) // rebinds the cached reader to the new columns
    } else {
        // SAFETY: as above; a later change of the columns bumps the
        // generation, and table_of then clears the flag.
        unsafe { (*c).columns_synced = true };
        t
    }
}

/// The reader cached with `rel`'s relcache entry, for single-row fetches
/// (its values stay valid until the next fetch from `rel`). `table` is
/// `table_of(rel)`, just called.
pub unsafe fn fetch_reader(rel: pg_sys::Relation, table: &Table) -> &'static mut crate::tam::scan::Reader {
    let c = (*rel).rd_amcache as *mut AmCache;
    debug_assert!(!c.is_null(), "table_of(rel) sets rd_amcache");
    let r = cached_reader(c, rel, table);
    r.reset(table);
    r
}

/// The reader of the `AmCache` chunk `c` (rel's), set up on first use.
unsafe fn cached_reader(c: *mut AmCache, rel: pg_sys::Relation, table: &Table) -> &'static mut crate::tam::scan::Reader {
    // SAFETY: table_of made the chunk for rel's descriptor, with
    // SCRATCH_AT + scratch_bytes(rd_att) bytes; the reader is re-made
    // whenever table_of rebinds the relation.
    if !(*c).fetch_ready {
        (*c).fetch.write(crate::tam::scan::Reader::new_in(rel, table, (c as *mut u8).add(SCRATCH_AT)));
        (*c).fetch_ready = true;
    }
    (*c).fetch.assume_init_mut()
}

/// The fetch reader cached with `rel`'s relcache entry and the bytes of its
/// scratch memory, as a template for new readers of `table`; None when the
/// entry is not bound to `table` as it is now (a rewrite's scan of the old
/// storage, a table replaced since).
pub unsafe fn reader_template(rel: pg_sys::Relation, table: &Table) -> Option<(&'static crate::tam::scan::Reader, usize)> {
    let c = (*rel).rd_amcache as *mut AmCache;
    let arena = shmem::arena();
    if c.is_null()
        || (*c).generation != arena.generation()
        || (*c).table != arena.off_of(table as *const Table)
        || (*c).schema_gen != table.schema_gen()
    {
        return None;
    }
    Some((cached_reader(c, rel, table), (*c).scratch))
}

/// Make the stored columns match the relation's attributes. ALTER TABLE
/// changes only the catalog when it adds a column without a rewrite:
///
/// * an attribute beyond the stored columns gets a new column holding its
///   "missing" value in every existing row;
/// * a [`ColumnState::Leftover`] column (its ALTER aborted) is replaced the
///   same way by the attribute now at its position;
/// * every other column is left alone, even when its layout no longer
///   matches the attribute: within the transaction that changed a column's
///   type, the old storage is still read (with the old descriptor) by the
///   rewrite that copies it. Dropped attributes keep their values too, for
///   a DROP COLUMN that rolls back.
///
/// A column added for an attribute the current transaction created is
/// [`ColumnState::Tentative`] until the transaction ends: a commit makes it
/// permanent, an abort a leftover.
fn sync_columns(rel: pg_sys::Relation, t: &Table, desc: pg_sys::TupleDesc) {
    let arena = shmem::arena();
    let atts = datum::attrs(desc);
    let needs_column =
        |i: usize| !atts[i].attisdropped && (i >= t.ncols() || t.column(arena, i).state() == ColumnState::Leftover);
    if t.ncols() >= atts.len() && !(0..atts.len()).any(needs_column) {
        return;
    }
    let _g = t.schema_lock.lock();
    for (i, att) in atts.iter().enumerate() {
        if i < t.ncols() && !needs_column(i) {
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
        unsafe { enc.encode(desc, &values, &nulls, None) };
        let v = enc.values()[i];
        // SAFETY: rel is open.
        let added_here = !att.attisdropped && unsafe { !attribute_predates_xact((*rel).rd_id, att.attnum) };
        let state = if added_here { ColumnState::Tentative } else { ColumnState::Permanent };
        // SAFETY: the ALTER that added the attribute has an xid.
        let owner_xid: u32 = if added_here { unsafe { pg_sys::GetCurrentTransactionId().into() } } else { 0 };
        let spec = datum::spec_for(att);
        crate::durable::write(rel, t, |log| {
            t.set_column(arena, i, spec, v, state).or_raise();
            t.column(arena, i).set_owner_xid(owner_xid);
            log.push(&anker_engine::change::Change::SetColumn {
                col: i,
                spec,
                fill: anker_engine::change::Val::from_value(&v),
                state,
                owner_xid,
            });
        });
        if added_here {
            pending().push(Pending { key: t.key, kind: PendingKind::TentativeColumn(i as u16) });
        }
    }
}

/// Did attribute `attnum` of relation `relid` exist before the current
/// transaction? Looks it up in `pg_attribute` with a snapshot that sees
/// none of this transaction's own changes (command id 0), so an attribute
/// merely updated here (defaults, statistics targets) counts as existing.
unsafe fn attribute_predates_xact(relid: pg_sys::Oid, attnum: i16) -> bool {
    let mut before = *pg_sys::GetLatestSnapshot();
    before.curcid = pg_sys::FirstCommandId;
    before.copied = false;
    let snap = pg_sys::RegisterSnapshot(&mut before);
    let attrel = pg_sys::table_open(pg_sys::AttributeRelationId, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    let mut keys: [pg_sys::ScanKeyData; 2] = std::mem::zeroed();
    pg_sys::ScanKeyInit(
        &mut keys[0],
        pg_sys::Anum_pg_attribute_attrelid as i16,
        pg_sys::BTEqualStrategyNumber as u16,
        pg_sys::Oid::from(pg_sys::F_OIDEQ),
        pg_sys::Datum::from(relid),
    );
    pg_sys::ScanKeyInit(
        &mut keys[1],
        pg_sys::Anum_pg_attribute_attnum as i16,
        pg_sys::BTEqualStrategyNumber as u16,
        pg_sys::Oid::from(pg_sys::F_INT2EQ),
        pg_sys::Datum::from(attnum),
    );
    let scan = pg_sys::systable_beginscan(attrel, pg_sys::Oid::from(pg_sys::AttributeRelidNumIndexId), true, snap, 2, keys.as_mut_ptr());
    let found = !pg_sys::systable_getnext(scan).is_null();
    pg_sys::systable_endscan(scan);
    pg_sys::table_close(attrel, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    pg_sys::UnregisterSnapshot(snap);
    found
}

/// End of the transaction (or subtransaction) that added column `col` of
/// the table under `key`: a commit keeps it, an abort leaves it behind.
fn settle_tentative_column(key: &TableKey, col: u16, committed: bool, removed: &[TableKey]) {
    let arena = shmem::arena();
    if let Some(t) = shmem::directory().lookup(arena, key) {
        if (col as usize) < t.ncols() {
            let state = if committed { ColumnState::Permanent } else { ColumnState::Leftover };
            crate::durable::set_column_state(t, col as usize, state, removed);
        }
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
    /// A column added for an attribute this transaction created.
    TentativeColumn(u16),
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
pub fn truncate_in_place(rel: pg_sys::Relation) -> &'static Table {
    let key = key_of(rel);
    free_storage(&key);
    // SAFETY: rel is open.
    let desc = unsafe { (*rel).rd_att };
    shmem::directory().get_or_create(shmem::arena(), &key, &|| datum::specs_for(desc)).or_raise()
}

/// SET TABLESPACE copied `rel`'s files to `new_node`: the table under the
/// new key loads from the copied log on first use; the old storage goes at
/// commit, the new one (if loaded) at abort.
pub fn adopt_copied_storage(rel: pg_sys::Relation, new_node: &pg_sys::RelFileNode) {
    // SAFETY: rel is open.
    let backend = unsafe { (*rel).rd_backend };
    let new_key = node_key(new_node, backend);
    let old_key = key_of(rel);
    if shmem::directory().lookup(shmem::arena(), &old_key).is_some() {
        pending().push(Pending { key: old_key, kind: PendingKind::Dropped });
    }
    free_storage(&new_key);
    pending().push(Pending { key: new_key, kind: PendingKind::Created });
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

/// Not guarded: PostgreSQL calls the hook for every function an
/// expression is set up to call, and a guard (a `sigsetjmp`) each time
/// cost more than the test below. Holds no value with a destructor (the
/// previous hook may `longjmp` through it); the work is guarded.
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
    if access == pg_sys::ObjectAccessType::OAT_DROP && sub_id == 0 {
        object_dropped(class_id, object_id);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn object_dropped(class_id: pg_sys::Oid, object_id: pg_sys::Oid) {
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

/// What an abort does with one record (`removed`: the files the abort
/// removes, `durable::files_removed_at_end`).
fn undo_pending(p: Pending, removed: &[TableKey]) {
    match p.kind {
        PendingKind::Created => free_storage(&p.key),
        PendingKind::TentativeColumn(col) => settle_tentative_column(&p.key, col, false, removed),
        PendingKind::Dropped | PendingKind::DroppedDatabase => {}
    }
}

/// PREPARE TRANSACTION: storage this transaction created or dropped is
/// marked with its xid; its fate is decided when COMMIT PREPARED or
/// ROLLBACK PREPARED (in any session) has finished it
/// ([`settle_prepared_tables`]). Storage both created and dropped here is
/// gone either way. Tentative columns stay tentative: treated as permanent,
/// never replaced.
fn prepare(list: &mut XactList<Pending>) {
    let arena = shmem::arena();
    // SAFETY: plain accessor; a transaction that wrote anything has an xid.
    let xid: u32 = unsafe { pg_sys::GetTopTransactionIdIfAny() }.into();
    let records = list.take_all();
    let created = |k: &TableKey| records.iter().any(|p| p.kind == PendingKind::Created && p.key == *k);
    for p in &records {
        match p.kind {
            PendingKind::Dropped if created(&p.key) => free_storage(&p.key),
            PendingKind::Dropped => {
                shmem::directory().mark_prepared(arena, &p.key, xid, true);
            }
            PendingKind::Created if !records.iter().any(|q| q.kind == PendingKind::Dropped && q.key == p.key) => {
                shmem::directory().mark_prepared(arena, &p.key, xid, false);
            }
            PendingKind::DroppedDatabase => {
                // DROP DATABASE cannot run inside a transaction block.
                free_database(p.key[1]);
            }
            PendingKind::Created | PendingKind::TentativeColumn(_) => {}
        }
    }
}

/// Settle the storage of prepared transactions that have ended since.
fn settle_prepared_tables() {
    let arena = shmem::arena();
    let dir = shmem::directory();
    for (key, xid) in dir.prepared_tables(arena) {
        // SAFETY: clog lookups of a transaction id that has been assigned.
        unsafe {
            if pg_sys::TransactionIdIsInProgress(xid.into()) {
                continue;
            }
            let committed = pg_sys::TransactionIdDidCommit(xid.into());
            dir.settle_prepared(arena, &key, xid, committed);
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn xact_callback(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    use pg_sys::XactEvent::*;
    // COMMIT PREPARED and ROLLBACK PREPARED end a prepared transaction
    // within the statement; the next transaction end, here or anywhere,
    // settles what it created or dropped.
    if event == XACT_EVENT_COMMIT && shmem::is_loaded() {
        settle_prepared_tables();
    }
    let list = pending();
    if list.is_empty() {
        return;
    }
    match event {
        XACT_EVENT_PRE_PREPARE => prepare(list),
        XACT_EVENT_COMMIT | XACT_EVENT_PARALLEL_COMMIT => {
            let removed = crate::durable::files_removed_at_end(true);
            for p in list.take_all() {
                match p.kind {
                    PendingKind::Dropped => free_storage(&p.key),
                    PendingKind::DroppedDatabase => free_database(p.key[1]),
                    PendingKind::TentativeColumn(col) => settle_tentative_column(&p.key, col, true, &removed),
                    PendingKind::Created => {}
                }
            }
        }
        XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT => {
            let removed = crate::durable::files_removed_at_end(false);
            for p in list.take_all() {
                undo_pending(p, &removed);
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
            let removed = crate::durable::files_removed_at_end(false);
            for p in list.take_aborted() {
                undo_pending(p, &removed);
            }
        }
        _ => {}
    }
}
