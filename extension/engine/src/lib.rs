//! anker's storage engine, free of PostgreSQL.
pub mod arena;
pub mod sync;
pub mod signals;
pub mod column;
pub mod decimal;
pub mod table;
pub mod version;
pub mod change;
pub mod chunk;
pub mod stats;
pub mod agg;
pub mod snapshot;
pub mod image;
pub mod sql_text;
