//! Event counters kept in the arena header, shared by all processes.
//! Counted per event, or per block where per-row counting would cost.

pub const IN_PLACE_UPDATES: usize = 0;
pub const NEW_ROW_UPDATES: usize = 1;
pub const UNDO_RECORDS_PRUNED: usize = 2;
pub const CHAIN_WALKS: usize = 3;
pub const BLOCKS_FAST: usize = 4;
pub const BLOCKS_CHECKED: usize = 5;
pub const UNDONE_UPDATES: usize = 6;
pub const SNAPSHOTS_CREATED: usize = 7;
pub const SNAPSHOTS_REUSED: usize = 8;
pub const COW_PAGE_COPIES: usize = 9;
pub const SNAPSHOT_PAGES_SHARED: usize = 10;
pub const CHAIN_WALKS_AVOIDED: usize = 11;
/// Nanoseconds spent creating snapshots (divide by `SNAPSHOTS_CREATED`).
pub const SNAPSHOT_CREATE_NS: usize = 12;
/// Scans restricted to the columns their query reads.
pub const COLUMN_RESTRICTED_SCANS: usize = 13;
/// Switches of a table's log to a new image that redo (on a hot standby)
/// applied only after a backend's load of the table was over.
pub const SWITCHES_AFTER_LOADS: usize = 14;

/// Names, in order, as shown by `anker.stats`.
pub const NAMES: [(&str, usize); 15] = [
    ("in_place_updates", IN_PLACE_UPDATES),
    ("new_row_id_updates", NEW_ROW_UPDATES),
    ("undo_records_pruned", UNDO_RECORDS_PRUNED),
    ("undone_updates", UNDONE_UPDATES),
    ("chain_walks", CHAIN_WALKS),
    ("chain_walks_avoided", CHAIN_WALKS_AVOIDED),
    ("blocks_read_without_checks", BLOCKS_FAST),
    ("blocks_read_with_checks", BLOCKS_CHECKED),
    ("snapshots_created", SNAPSHOTS_CREATED),
    ("snapshots_reused", SNAPSHOTS_REUSED),
    ("snapshot_create_ns", SNAPSHOT_CREATE_NS),
    ("cow_page_copies", COW_PAGE_COPIES),
    ("snapshot_pages_shared", SNAPSHOT_PAGES_SHARED),
    ("column_restricted_scans", COLUMN_RESTRICTED_SCANS),
    ("log_switches_after_standby_loads", SWITCHES_AFTER_LOADS),
];
