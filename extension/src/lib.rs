//! anker: an in-memory columnar table access method for PostgreSQL 15.
//!
//! This crate is the PostgreSQL boundary. The storage engine itself lives in
//! the PostgreSQL-free `anker-engine` crate; here we translate between
//! PostgreSQL's world (relations, slots, datums, snapshots, transactions)
//! and the engine. See `docs/architecture.md` for the tour.

// Statics are reached through `&raw` pointers (`&*(&raw const X)`), which
// clippy reads as a needless round trip.
#![allow(clippy::deref_addrof)]

use pgrx::prelude::*;

mod agg_node;
mod analytics;
mod datum;
mod durable;
mod error;
mod guc;
mod pg_leaf;
mod pg_raw;
mod scan_node;
mod shmem;
mod snapshots;
mod sql;
mod storage;
mod tam;
mod undo;
mod visibility;
mod xact_list;

::pgrx::pg_module_magic!();

/// Called when the library is loaded: by the postmaster when anker is in
/// `shared_preload_libraries` (the supported way), or by a backend that
/// touches the extension otherwise.
#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // SAFETY: reading a postmaster-set global.
    let preloading = unsafe { pg_sys::process_shared_preload_libraries_in_progress };
    error::keep_backtraces_out_of_errors();
    guc::define(preloading);
    snapshots::define_guc();
    if !preloading {
        guc::reserve_prefix();
        // Without the shared arena nothing can work; every entry point
        // raises a clear error (see `shmem::arena`).
        return;
    }
    guc::apply_malloc_settings();
    durable::redo::register();
    tam::slot::init_ops();
    shmem::reserve_arena();
    shmem::install_hooks();
    storage::install_hooks();
    undo::install_hooks();
    snapshots::install_hooks();
    tam::projection::install();
    tam::assigned::install();
    scan_node::install();
    agg_node::install();
    analytics::install();
    guc::reserve_prefix();
}
