//! PostgreSQL functions that run user code (WHERE clauses, index
//! expressions and predicates), called without pgrx's error conversion.
//!
//! pgrx turns an error raised under one of its FFI calls into a Rust panic
//! and raises a new error from it at the callback's boundary, keeping only
//! the message, detail, hint and SQLSTATE: the CONTEXT lines ("SQL function
//! … statement 1") and the error's fields are lost, so the same failing
//! query would report differently on anker and on heap tables. Through
//! these calls an error travels as PostgreSQL raised it, by `longjmp`, to
//! the handler below our callback.
//!
//! # Safety
//! `longjmp` runs no destructors: callers keep no value with a destructor
//! (or a lock, or an epoch guard) live in their frames across these calls,
//! up to the PostgreSQL frame that called them.

use pgrx::pg_sys;

unsafe extern "C-unwind" {
    #[link_name = "ExecScan"]
    fn exec_scan_unconverted(
        node: *mut pg_sys::ScanState,
        access: pg_sys::ExecScanAccessMtd,
        recheck: pg_sys::ExecScanRecheckMtd,
    ) -> *mut pg_sys::TupleTableSlot;
    #[link_name = "FormIndexDatum"]
    fn form_index_datum_unconverted(
        index_info: *mut pg_sys::IndexInfo,
        slot: *mut pg_sys::TupleTableSlot,
        estate: *mut pg_sys::EState,
        values: *mut pg_sys::Datum,
        isnull: *mut bool,
    );
}

/// `ExecScan`: runs the node's quals and projection.
pub unsafe fn exec_scan(
    node: *mut pg_sys::ScanState,
    access: pg_sys::ExecScanAccessMtd,
    recheck: pg_sys::ExecScanRecheckMtd,
) -> *mut pg_sys::TupleTableSlot {
    exec_scan_unconverted(node, access, recheck)
}

/// `FormIndexDatum`: evaluates an index's expressions.
pub unsafe fn form_index_datum(
    index_info: *mut pg_sys::IndexInfo,
    slot: *mut pg_sys::TupleTableSlot,
    estate: *mut pg_sys::EState,
    values: *mut pg_sys::Datum,
    isnull: *mut bool,
) {
    form_index_datum_unconverted(index_info, slot, estate, values, isnull)
}

/// PostgreSQL's inline `ExecQual`: true when `state` (a compiled qual, or
/// NULL) holds for the row in `econtext`.
pub unsafe fn exec_qual(state: *mut pg_sys::ExprState, econtext: *mut pg_sys::ExprContext) -> bool {
    if state.is_null() {
        return true;
    }
    let eval = (*state).evalfunc.expect("compiled expression");
    let old = pg_sys::CurrentMemoryContext;
    pg_sys::CurrentMemoryContext = (*econtext).ecxt_per_tuple_memory;
    let mut isnull = false;
    let d = eval(state, econtext, &mut isnull);
    pg_sys::CurrentMemoryContext = old;
    !isnull && d.value() != 0
}

unsafe extern "C-unwind" {
    #[link_name = "ReThrowError"]
    fn rethrow_error_unconverted(edata: *mut pg_sys::ErrorData) -> !;
}

/// A PostgreSQL error caught whole by [`catching`]: the `ErrorData`,
/// copied into the memory context of the code that made the call.
struct CaughtPgError(*mut pg_sys::ErrorData);

// SAFETY: only ever created and consumed on the backend's one thread; the
// panic machinery merely requires the bound.
unsafe impl Send for CaughtPgError {}

/// PostgreSQL's inline `ExecProcNode`.
pub unsafe fn exec_proc_node(node: *mut pg_sys::PlanState) -> *mut pg_sys::TupleTableSlot {
    if !(*node).chgParam.is_null() {
        pg_sys::ExecReScan(node);
    }
    (*node).ExecProcNode.expect("initialised plan node")(node)
}

/// Call `f`, one call into PostgreSQL that may run user code, from Rust
/// code that holds values with destructors. Should PostgreSQL raise an
/// ERROR, our frames unwind as a Rust panic carrying the whole `ErrorData`,
/// which [`rethrowing`] at the callback's boundary raises again, unchanged.
/// (pgrx's own catch keeps only the message, detail, hint and SQLSTATE.)
///
/// # Safety
/// `f` must be a single call into PostgreSQL (no Rust values of its own).
pub unsafe fn catching<T>(f: impl FnOnce() -> T) -> T {
    let caller_context = pg_sys::CurrentMemoryContext;
    let saved_exception_stack = pg_sys::PG_exception_stack;
    let saved_context_stack = pg_sys::error_context_stack;
    let mut result = std::mem::MaybeUninit::<T>::uninit();
    let jumped = cee_scape::call_with_sigsetjmp(false, |jump_buffer| {
        pg_sys::PG_exception_stack = jump_buffer as *const cee_scape::SigJmpBufFields as *mut pg_sys::sigjmp_buf;
        result.write(f());
        0
    });
    pg_sys::PG_exception_stack = saved_exception_stack;
    pg_sys::error_context_stack = saved_context_stack;
    if jumped == 0 {
        return result.assume_init();
    }
    // As PG_CATCH: copy the error out of ErrorContext, then forget it there.
    pg_sys::CurrentMemoryContext = caller_context;
    let edata = copy_error_data();
    pg_sys::FlushErrorState();
    std::panic::resume_unwind(Box::new(CaughtPgError(edata)))
}

unsafe fn copy_error_data() -> *mut pg_sys::ErrorData {
    unsafe extern "C-unwind" {
        #[link_name = "CopyErrorData"]
        fn copy_error_data_unconverted() -> *mut pg_sys::ErrorData;
    }
    copy_error_data_unconverted()
}

/// Run the body of a callback that uses [`catching`]: an error caught
/// there is raised again as PostgreSQL raised it, once the body's frames
/// (and their destructors) are gone; other panics go on to pgrx's guard.
pub unsafe fn rethrowing<T>(body: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(payload) => match payload.downcast::<CaughtPgError>() {
            Ok(caught) => {
                let edata = caught.0;
                drop(caught);
                rethrow_error_unconverted(edata)
            }
            Err(other) => std::panic::resume_unwind(other),
        },
    }
}

unsafe extern "C-unwind" {
    /// `standard_planner`: plans a query (stable functions are evaluated
    /// for estimates, SQL functions inlined).
    pub fn standard_planner(
        parse: *mut pg_sys::Query,
        query_string: *const std::ffi::c_char,
        cursor_options: std::ffi::c_int,
        bound_params: pg_sys::ParamListInfo,
    ) -> *mut pg_sys::PlannedStmt;
    /// `pg_plan_query`: the planner through its hooks.
    pub fn pg_plan_query(
        query: *mut pg_sys::Query,
        query_string: *const std::ffi::c_char,
        cursor_options: std::ffi::c_int,
        bound_params: pg_sys::ParamListInfo,
    ) -> *mut pg_sys::PlannedStmt;
    /// `ExplainOnePlan`: explains a plan, and runs it for EXPLAIN ANALYZE.
    #[link_name = "ExplainOnePlan"]
    pub fn explain_one_plan(
        stmt: *mut pg_sys::PlannedStmt,
        into: *mut pg_sys::IntoClause,
        es: *mut pg_sys::ExplainState,
        query_string: *const std::ffi::c_char,
        params: pg_sys::ParamListInfo,
        query_env: *mut pg_sys::QueryEnvironment,
        planduration: *const pg_sys::instr_time,
        bufusage: *const pg_sys::BufferUsage,
    );
    /// `standard_ExecutorStart`: sets the plan's nodes up (initial
    /// partition pruning runs user code).
    #[link_name = "standard_ExecutorStart"]
    pub fn standard_executor_start(query: *mut pg_sys::QueryDesc, eflags: std::ffi::c_int);
    /// `standard_ExecutorRun`: runs the query's plan, and all user code in it.
    #[link_name = "standard_ExecutorRun"]
    pub fn standard_executor_run(
        query: *mut pg_sys::QueryDesc,
        direction: pg_sys::ScanDirection::Type,
        count: u64,
        execute_once: bool,
    );
    /// `standard_ExecutorFinish`: runs what the plan left, and AFTER triggers.
    #[link_name = "standard_ExecutorFinish"]
    pub fn standard_executor_finish(query: *mut pg_sys::QueryDesc);
    #[link_name = "pg_re_throw"]
    fn re_throw_unconverted() -> !;
}

/// `PG_TRY { run } PG_FINALLY { finally } PG_END_TRY`: `finally` runs
/// however `run` ends, then an ERROR goes on as PostgreSQL raised it.
///
/// # Safety
/// `run` makes calls into PostgreSQL through this module or raw function
/// pointers only (a pgrx-guarded call would turn an ERROR into a panic),
/// and holds nothing that needs dropping: an ERROR leaves it by `longjmp`.
pub unsafe fn try_finally(run: impl FnOnce(), finally: impl FnOnce()) {
    let saved_exception_stack = pg_sys::PG_exception_stack;
    let saved_context_stack = pg_sys::error_context_stack;
    let jumped = cee_scape::call_with_sigsetjmp(false, |jump_buffer| {
        pg_sys::PG_exception_stack = jump_buffer as *const cee_scape::SigJmpBufFields as *mut pg_sys::sigjmp_buf;
        run();
        0
    });
    pg_sys::PG_exception_stack = saved_exception_stack;
    pg_sys::error_context_stack = saved_context_stack;
    finally();
    if jumped != 0 {
        re_throw_unconverted();
    }
}
