//! Errors raised to PostgreSQL.

use anker_engine::arena::AllocError;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

/// Report an arena allocation failure: SQLSTATE 53200, naming the GUC.
pub fn out_of_memory(e: AllocError) -> ! {
    let AllocError::OutOfMemory { requested } = e;
    let stats = crate::shmem::arena().stats();
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
        "anker: out of memory for table data",
        function_name!(),
    )
    .set_detail(format!(
        "Failed to allocate {} bytes; {} of the {} bytes allowed by anker.memory_limit are in use.",
        requested, stats.used_bytes, stats.limit_bytes
    ))
    .set_hint("Raise anker.memory_limit (takes effect after a restart), or free memory by dropping, truncating or vacuuming anker tables.")
    .report(PgLogLevel::ERROR);
    unreachable!()
}

/// Raise ERRCODE_FEATURE_NOT_SUPPORTED for an operation anker does not do.
pub fn not_supported(what: &str) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        format!("anker tables do not support {what}")
    );
}

pub trait OrRaise<T> {
    /// Unwrap, or raise the PostgreSQL error for an allocation failure.
    fn or_raise(self) -> T;
}

impl<T> OrRaise<T> for Result<T, AllocError> {
    #[inline]
    fn or_raise(self) -> T {
        match self {
            Ok(v) => v,
            Err(e) => out_of_memory(e),
        }
    }
}

/// pgrx appends a Rust backtrace to the DETAIL of every error it converts
/// when the server's environment sets RUST_BACKTRACE; error messages are
/// for users, and a backtrace there changes what clients see. For
/// `Backtrace::capture`, RUST_LIB_BACKTRACE takes precedence over
/// RUST_BACKTRACE (panics on other threads still print theirs to the log).
pub fn keep_backtraces_out_of_errors() {
    // SAFETY: called from _PG_init, before this process starts any thread.
    unsafe { std::env::set_var("RUST_LIB_BACKTRACE", "0") };
}
