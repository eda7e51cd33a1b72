//! Warnings for publications that include anker tables.
//!
//! Logical decoding does not see anker's changes: its resource manager has
//! no `rm_decode` (docs/durability.md, "Logical decoding"). A publication
//! that includes an anker table would have its subscribers copy the rows at
//! their initial sync and then receive none of the table's changes, without
//! a word. So whenever a statement may have put a permanent anker table into
//! a publication, the statement ends with a WARNING naming the tables and
//! publications, as PostgreSQL warns at CREATE PUBLICATION when `wal_level`
//! is too low to publish anything. A warning, not an error: the publication
//! still publishes its other tables, and its initial copy of anker tables
//! is right.
//!
//! PostgreSQL 15 calls an object-access hook only when ALTER PUBLICATION …
//! ADD TABLE puts a table into a publication, not for CREATE PUBLICATION,
//! `FOR ALL TABLES`, `TABLES IN SCHEMA`, a new partition or a move to
//! another schema, so the check runs after the statements that can do so,
//! in a ProcessUtility hook:
//! CREATE/ALTER PUBLICATION (the publication's anker tables), and CREATE
//! TABLE, CREATE TABLE AS, ALTER TABLE … ATTACH PARTITION / SET ACCESS
//! METHOD / SET LOGGED and ALTER TABLE … SET SCHEMA (the publications of
//! the table and of its partitions).

use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use std::ffi::CStr;

// catalog/pg_inherits.h and catalog/partition.h are not in pgrx's bindings;
// calls go through `pg_guard_ffi_boundary`, like pgrx's own.
extern "C-unwind" {
    fn find_all_inheritors(parent: pg_sys::Oid, lockmode: pg_sys::LOCKMODE, parents: *mut *mut pg_sys::List) -> *mut pg_sys::List;
    fn get_partition_ancestors(relid: pg_sys::Oid) -> *mut pg_sys::List;
}
use pg_sys::ffi::pg_guard_ffi_boundary as guarded;

static mut PREV_PROCESS_UTILITY: pg_sys::ProcessUtility_hook_type = None;

pub fn install_hook() {
    // SAFETY: hook chaining during postmaster start-up; children inherit it.
    unsafe {
        PREV_PROCESS_UTILITY = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(process_utility);
    }
}

/// Not guarded: every utility statement passes through here, and its
/// errors must reach the client as PostgreSQL raised them (with their
/// CONTEXT lines), which pgrx's conversion would not keep. Holds no value
/// with a destructor across the call; the check is guarded.
#[allow(clippy::too_many_arguments)]
unsafe extern "C-unwind" fn process_utility(
    pstmt: *mut pg_sys::PlannedStmt,
    query: *const std::ffi::c_char,
    read_only_tree: bool,
    context: pg_sys::ProcessUtilityContext::Type,
    params: pg_sys::ParamListInfo,
    query_env: *mut pg_sys::QueryEnvironment,
    dest: *mut pg_sys::DestReceiver,
    qc: *mut pg_sys::QueryCompletion,
) {
    match PREV_PROCESS_UTILITY {
        Some(prev) => prev(pstmt, query, read_only_tree, context, params, query_env, dest, qc),
        None => crate::pg_raw::standard_process_utility(pstmt, query, read_only_tree, context, params, query_env, dest, qc),
    }
    let node = (*pstmt).utilityStmt;
    if !node.is_null() && may_publish(node) {
        warn_after(node);
    }
}

/// Can a statement of this kind put a table into a publication?
unsafe fn may_publish(node: *mut pg_sys::Node) -> bool {
    use pg_sys::NodeTag::*;
    matches!(
        (*node).type_,
        T_CreatePublicationStmt | T_AlterPublicationStmt | T_CreateStmt | T_CreateTableAsStmt | T_AlterTableStmt | T_AlterObjectSchemaStmt
    )
}

#[pg_guard]
unsafe extern "C-unwind" fn warn_after(node: *mut pg_sys::Node) {
    use pg_sys::NodeTag::*;
    // The statement's catalog changes, visible to the lookups below.
    pg_sys::CommandCounterIncrement();
    match (*node).type_ {
        T_CreatePublicationStmt => warn_for_publication((*(node as *mut pg_sys::CreatePublicationStmt)).pubname),
        T_AlterPublicationStmt => {
            let stmt = node as *mut pg_sys::AlterPublicationStmt;
            if !(*stmt).pubobjects.is_null() && (*stmt).action != pg_sys::AlterPublicationAction::AP_DropObjects {
                warn_for_publication((*stmt).pubname);
            }
        }
        T_CreateStmt => warn_for_table(relid_of((*(node as *mut pg_sys::CreateStmt)).relation)),
        T_CreateTableAsStmt => {
            let stmt = node as *mut pg_sys::CreateTableAsStmt;
            if (*stmt).objtype == pg_sys::ObjectType::OBJECT_TABLE {
                warn_for_table(relid_of((*(*stmt).into).rel));
            }
        }
        T_AlterTableStmt => {
            let stmt = node as *mut pg_sys::AlterTableStmt;
            if (*stmt).objtype != pg_sys::ObjectType::OBJECT_TABLE {
                return;
            }
            let cmds = pgrx::PgList::<pg_sys::AlterTableCmd>::from_pg((*stmt).cmds);
            for cmd in cmds.iter_ptr() {
                use pg_sys::AlterTableType::{AT_AttachPartition, AT_SetAccessMethod, AT_SetLogged};
                let subtype = (*cmd).subtype;
                if subtype == AT_AttachPartition {
                    warn_for_table(relid_of((*((*cmd).def as *mut pg_sys::PartitionCmd)).name));
                } else if subtype == AT_SetAccessMethod || subtype == AT_SetLogged {
                    warn_for_table(relid_of((*stmt).relation));
                }
            }
        }
        T_AlterObjectSchemaStmt => {
            let stmt = node as *mut pg_sys::AlterObjectSchemaStmt;
            if (*stmt).objectType == pg_sys::ObjectType::OBJECT_TABLE && !(*stmt).relation.is_null() {
                let moved = pg_sys::makeRangeVar((*stmt).newschema, (*(*stmt).relation).relname, -1);
                warn_for_table(relid_of(moved));
            }
        }
        _ => {}
    }
}

/// The table a statement named, now (None: gone, or IF NOT EXISTS found
/// another object; nothing to say then).
unsafe fn relid_of(rv: *mut pg_sys::RangeVar) -> Option<pg_sys::Oid> {
    if rv.is_null() {
        return None;
    }
    let relid = pg_sys::RangeVarGetRelidExtended(rv, pg_sys::NoLock as pg_sys::LOCKMODE, pg_sys::RVROption::RVR_MISSING_OK, None, std::ptr::null_mut());
    (relid != pg_sys::InvalidOid).then_some(relid)
}

/// A permanent anker table: one whose changes a publication would lose.
unsafe fn is_permanent_anker(relid: pg_sys::Oid) -> bool {
    let rel = pg_sys::RelationIdGetRelation(relid);
    if rel.is_null() {
        return false;
    }
    let yes = crate::tam::is_anker(rel) && (*(*rel).rd_rel).relpersistence == pg_sys::RELPERSISTENCE_PERMANENT as std::ffi::c_char;
    pg_sys::RelationClose(rel);
    yes
}

unsafe fn oids(list: *mut pg_sys::List) -> Vec<pg_sys::Oid> {
    pgrx::PgList::<std::ffi::c_void>::from_pg(list).iter_oid().collect()
}

unsafe fn rel_name(relid: pg_sys::Oid) -> String {
    let name = pg_sys::get_rel_name(relid);
    if name.is_null() {
        return format!("{}", relid.to_u32());
    }
    let nsp = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(relid));
    let name = CStr::from_ptr(name).to_string_lossy();
    if nsp.is_null() {
        return format!("\"{name}\"");
    }
    format!("\"{}\".\"{name}\"", CStr::from_ptr(nsp).to_string_lossy())
}

/// At most this many names in a message; the rest are counted.
const NAMES_SHOWN: usize = 5;

fn listed(names: &[String]) -> String {
    let mut s = names.iter().take(NAMES_SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > NAMES_SHOWN {
        s.push_str(&format!(" and {} more", names.len() - NAMES_SHOWN));
    }
    s
}

/// Raise `message` as a WARNING, with why and what to do instead.
fn warn(message: String) {
    pgrx::pg_sys::panic::ErrorReport::new(PgSqlErrorCode::ERRCODE_WARNING, message, function_name!())
        .set_detail("Logical decoding does not see changes of anker tables: a subscriber copies their rows when it starts, then receives none of their inserts, updates or deletes.")
        .set_hint("Keep anker tables out of publications; a physical standby (pg_basebackup) replicates them.")
        .report(PgLogLevel::WARNING);
}

/// After CREATE/ALTER PUBLICATION `pubname`: its permanent anker tables.
unsafe fn warn_for_publication(pubname: *const std::ffi::c_char) {
    let publication = pg_sys::GetPublicationByName(pubname, true);
    if publication.is_null() {
        return;
    }
    use pg_sys::PublicationPartOpt::PUBLICATION_PART_LEAF;
    let mut tables = if (*publication).alltables {
        oids(pg_sys::GetAllTablesPublicationRelations(false))
    } else {
        let mut t = oids(pg_sys::GetPublicationRelations((*publication).oid, PUBLICATION_PART_LEAF));
        t.extend(oids(pg_sys::GetAllSchemaPublicationRelations((*publication).oid, PUBLICATION_PART_LEAF)));
        t
    };
    tables.sort_unstable_by_key(|o| o.to_u32());
    tables.dedup();
    let names: Vec<String> = tables.into_iter().filter(|&t| is_permanent_anker(t)).map(|t| rel_name(t)).collect();
    if names.is_empty() {
        return;
    }
    let publication = CStr::from_ptr(pubname).to_string_lossy();
    warn(format!("publication \"{publication}\" will not send changes of its anker tables: {}", listed(&names)));
}

/// After a statement that created, attached, moved or converted `relid`:
/// the publications that now include it or one of its partitions.
unsafe fn warn_for_table(relid: Option<pg_sys::Oid>) {
    let Some(relid) = relid else { return };
    let mut leaves = oids(guarded(|| find_all_inheritors(relid, pg_sys::NoLock as pg_sys::LOCKMODE, std::ptr::null_mut())));
    leaves.retain(|&leaf| is_permanent_anker(leaf));
    if leaves.is_empty() {
        return;
    }
    let all_tables = oids(pg_sys::GetAllTablesPublications());
    for leaf in leaves {
        let mut publications = all_tables.clone();
        let mut published = vec![leaf];
        published.extend(oids(guarded(|| get_partition_ancestors(leaf))));
        for &r in &published {
            publications.extend(oids(pg_sys::GetRelationPublications(r)));
            publications.extend(oids(pg_sys::GetSchemaPublications(pg_sys::get_rel_namespace(r))));
        }
        publications.sort_unstable_by_key(|o| o.to_u32());
        publications.dedup();
        let names: Vec<String> = publications
            .into_iter()
            .filter_map(|p| {
                let name = pg_sys::get_publication_name(p, true);
                (!name.is_null()).then(|| format!("\"{}\"", CStr::from_ptr(name).to_string_lossy()))
            })
            .collect();
        if names.is_empty() {
            continue;
        }
        warn(format!("anker table {} is in publications that will not send its changes: {}", rel_name(leaf), listed(&names)));
    }
}
