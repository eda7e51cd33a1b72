//! DuckDB's C API (duckdb.h of DuckDB 1.5.6): the declarations anker uses, and owners that
//! destroy what they hold. Every call into DuckDB goes through this module.
//!
//! Handles are opaque pointers (`struct { void *internal_ptr; } *` in duckdb.h); DuckDB's
//! "destroy" functions take a pointer to the handle and null it.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_void, CStr, CString};

pub type idx_t = u64;
pub type duckdb_database = *mut c_void;
pub type duckdb_connection = *mut c_void;
pub type duckdb_config = *mut c_void;
pub type duckdb_prepared_statement = *mut c_void;
pub type duckdb_pending_result = *mut c_void;
pub type duckdb_data_chunk = *mut c_void;
pub type duckdb_vector = *mut c_void;
pub type duckdb_logical_type = *mut c_void;
pub type duckdb_table_function = *mut c_void;
pub type duckdb_scalar_function = *mut c_void;
pub type duckdb_bind_info = *mut c_void;
pub type duckdb_init_info = *mut c_void;
pub type duckdb_function_info = *mut c_void;
pub type duckdb_replacement_scan_info = *mut c_void;
pub type duckdb_value = *mut c_void;
pub type duckdb_state = u32;
pub type duckdb_type = u32;
pub type duckdb_pending_state = u32;
pub type duckdb_error_type = u32;

pub const SUCCESS: duckdb_state = 0;

pub const PENDING_RESULT_READY: duckdb_pending_state = 0;
pub const PENDING_ERROR: duckdb_pending_state = 2;

pub const TYPE_BOOLEAN: duckdb_type = 1;
pub const TYPE_SMALLINT: duckdb_type = 3;
pub const TYPE_INTEGER: duckdb_type = 4;
pub const TYPE_BIGINT: duckdb_type = 5;
pub const TYPE_FLOAT: duckdb_type = 10;
pub const TYPE_DOUBLE: duckdb_type = 11;
pub const TYPE_TIMESTAMP: duckdb_type = 12;
pub const TYPE_DATE: duckdb_type = 13;
pub const TYPE_HUGEINT: duckdb_type = 16;
pub const TYPE_VARCHAR: duckdb_type = 17;
pub const TYPE_DECIMAL: duckdb_type = 19;

pub const ERROR_OUT_OF_RANGE: duckdb_error_type = 1;
pub const ERROR_CONVERSION: duckdb_error_type = 2;
pub const ERROR_DECIMAL: duckdb_error_type = 4;
pub const ERROR_DIVIDE_BY_ZERO: duckdb_error_type = 6;
pub const ERROR_INTERRUPT: duckdb_error_type = 29;
pub const ERROR_OUT_OF_MEMORY: duckdb_error_type = 33;

/// `duckdb_result`: six words, read only through functions. A handle: copies refer to
/// the same result (`duckdb_fetch_chunk` takes it by value).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct duckdb_result {
    deprecated: [usize; 5],
    internal_data: *mut c_void,
}

impl duckdb_result {
    pub const EMPTY: duckdb_result = duckdb_result { deprecated: [0; 5], internal_data: std::ptr::null_mut() };
}

/// `duckdb_string_t`: 16 bytes; up to 12 bytes inline after the length, longer strings
/// as a 4-byte prefix and a pointer.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct duckdb_string_t {
    pub length: u32,
    pub inlined: [u8; 12],
}

impl duckdb_string_t {
    /// A string of the bytes `s`, which it points at when they do not fit inline: they
    /// must stay where they are for as long as DuckDB may read the vector.
    pub fn borrowed(s: &[u8]) -> duckdb_string_t {
        let mut inlined = [0u8; 12];
        if s.len() <= 12 {
            inlined[..s.len()].copy_from_slice(s);
        } else {
            inlined[..4].copy_from_slice(&s[..4]);
            inlined[4..].copy_from_slice(&(s.as_ptr() as usize).to_ne_bytes());
        }
        duckdb_string_t { length: s.len() as u32, inlined }
    }

    /// The bytes of the string.
    ///
    /// # Safety
    /// `self` is an element of a live VARCHAR vector.
    pub unsafe fn bytes(&self) -> &[u8] {
        let n = self.length as usize;
        if n <= 12 {
            &self.inlined[..n]
        } else {
            let ptr = (self.inlined.as_ptr().add(4) as *const *const u8).read_unaligned();
            std::slice::from_raw_parts(ptr, n)
        }
    }
}

/// `duckdb_hugeint`: a 128-bit integer as two halves.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct duckdb_hugeint {
    pub lower: u64,
    pub upper: i64,
}

pub type scalar_callback = Option<unsafe extern "C" fn(duckdb_function_info, duckdb_data_chunk, duckdb_vector)>;
pub type delete_callback = Option<unsafe extern "C" fn(*mut c_void)>;
pub type bind_callback = Option<unsafe extern "C" fn(duckdb_bind_info)>;
pub type init_callback = Option<unsafe extern "C" fn(duckdb_init_info)>;
pub type scan_callback = Option<unsafe extern "C" fn(duckdb_function_info, duckdb_data_chunk)>;
pub type replacement_callback = Option<unsafe extern "C" fn(duckdb_replacement_scan_info, *const c_char, *mut c_void)>;

extern "C" {
    pub fn duckdb_library_version() -> *const c_char;
    pub fn duckdb_create_config(out: *mut duckdb_config) -> duckdb_state;
    pub fn duckdb_set_config(config: duckdb_config, name: *const c_char, option: *const c_char) -> duckdb_state;
    pub fn duckdb_destroy_config(config: *mut duckdb_config);
    pub fn duckdb_open_ext(path: *const c_char, out: *mut duckdb_database, config: duckdb_config, err: *mut *mut c_char) -> duckdb_state;
    pub fn duckdb_connect(db: duckdb_database, out: *mut duckdb_connection) -> duckdb_state;
    pub fn duckdb_disconnect(con: *mut duckdb_connection);
    pub fn duckdb_interrupt(con: duckdb_connection);
    pub fn duckdb_free(ptr: *mut c_void);

    pub fn duckdb_query(con: duckdb_connection, sql: *const c_char, out: *mut duckdb_result) -> duckdb_state;
    pub fn duckdb_prepare(con: duckdb_connection, sql: *const c_char, out: *mut duckdb_prepared_statement) -> duckdb_state;
    pub fn duckdb_prepare_error(p: duckdb_prepared_statement) -> *const c_char;
    pub fn duckdb_destroy_prepare(p: *mut duckdb_prepared_statement);
    pub fn duckdb_prepared_statement_column_count(p: duckdb_prepared_statement) -> idx_t;
    pub fn duckdb_prepared_statement_column_logical_type(p: duckdb_prepared_statement, col: idx_t) -> duckdb_logical_type;
    pub fn duckdb_pending_prepared_streaming(p: duckdb_prepared_statement, out: *mut duckdb_pending_result) -> duckdb_state;
    pub fn duckdb_pending_execute_task(p: duckdb_pending_result) -> duckdb_pending_state;
    pub fn duckdb_pending_error(p: duckdb_pending_result) -> *const c_char;
    pub fn duckdb_execute_pending(p: duckdb_pending_result, out: *mut duckdb_result) -> duckdb_state;
    pub fn duckdb_destroy_pending(p: *mut duckdb_pending_result);
    pub fn duckdb_result_error(r: *mut duckdb_result) -> *const c_char;
    pub fn duckdb_result_error_type(r: *mut duckdb_result) -> duckdb_error_type;
    pub fn duckdb_destroy_result(r: *mut duckdb_result);
    pub fn duckdb_fetch_chunk(r: duckdb_result) -> duckdb_data_chunk;

    pub fn duckdb_data_chunk_get_size(c: duckdb_data_chunk) -> idx_t;
    pub fn duckdb_data_chunk_get_column_count(c: duckdb_data_chunk) -> idx_t;
    pub fn duckdb_data_chunk_set_size(c: duckdb_data_chunk, n: idx_t);
    pub fn duckdb_data_chunk_get_vector(c: duckdb_data_chunk, col: idx_t) -> duckdb_vector;
    pub fn duckdb_destroy_data_chunk(c: *mut duckdb_data_chunk);
    pub fn duckdb_vector_get_data(v: duckdb_vector) -> *mut c_void;
    pub fn duckdb_vector_get_validity(v: duckdb_vector) -> *mut u64;
    pub fn duckdb_vector_ensure_validity_writable(v: duckdb_vector);

    pub fn duckdb_create_logical_type(t: duckdb_type) -> duckdb_logical_type;
    pub fn duckdb_create_decimal_type(width: u8, scale: u8) -> duckdb_logical_type;
    pub fn duckdb_get_type_id(t: duckdb_logical_type) -> duckdb_type;
    pub fn duckdb_decimal_width(t: duckdb_logical_type) -> u8;
    pub fn duckdb_decimal_scale(t: duckdb_logical_type) -> u8;
    pub fn duckdb_decimal_internal_type(t: duckdb_logical_type) -> duckdb_type;
    pub fn duckdb_destroy_logical_type(t: *mut duckdb_logical_type);

    pub fn duckdb_create_table_function() -> duckdb_table_function;
    pub fn duckdb_destroy_table_function(f: *mut duckdb_table_function);
    pub fn duckdb_table_function_set_name(f: duckdb_table_function, name: *const c_char);
    pub fn duckdb_table_function_add_parameter(f: duckdb_table_function, t: duckdb_logical_type);
    pub fn duckdb_table_function_set_bind(f: duckdb_table_function, cb: bind_callback);
    pub fn duckdb_table_function_set_init(f: duckdb_table_function, cb: init_callback);
    pub fn duckdb_table_function_set_local_init(f: duckdb_table_function, cb: init_callback);
    pub fn duckdb_table_function_set_function(f: duckdb_table_function, cb: scan_callback);
    pub fn duckdb_table_function_supports_projection_pushdown(f: duckdb_table_function, yes: bool);
    pub fn duckdb_register_table_function(con: duckdb_connection, f: duckdb_table_function) -> duckdb_state;
    pub fn duckdb_bind_get_parameter(info: duckdb_bind_info, i: idx_t) -> duckdb_value;
    pub fn duckdb_bind_add_result_column(info: duckdb_bind_info, name: *const c_char, t: duckdb_logical_type);
    pub fn duckdb_bind_set_bind_data(info: duckdb_bind_info, data: *mut c_void, destroy: delete_callback);
    pub fn duckdb_bind_set_cardinality(info: duckdb_bind_info, n: idx_t, exact: bool);
    pub fn duckdb_bind_set_error(info: duckdb_bind_info, msg: *const c_char);
    pub fn duckdb_init_get_bind_data(info: duckdb_init_info) -> *mut c_void;
    pub fn duckdb_init_set_init_data(info: duckdb_init_info, data: *mut c_void, destroy: delete_callback);
    pub fn duckdb_init_get_column_count(info: duckdb_init_info) -> idx_t;
    pub fn duckdb_init_get_column_index(info: duckdb_init_info, i: idx_t) -> idx_t;
    pub fn duckdb_init_set_max_threads(info: duckdb_init_info, n: idx_t);
    pub fn duckdb_init_set_error(info: duckdb_init_info, msg: *const c_char);
    pub fn duckdb_function_get_init_data(info: duckdb_function_info) -> *mut c_void;
    pub fn duckdb_function_get_local_init_data(info: duckdb_function_info) -> *mut c_void;
    pub fn duckdb_function_set_error(info: duckdb_function_info, msg: *const c_char);
    pub fn duckdb_create_scalar_function() -> duckdb_scalar_function;
    pub fn duckdb_destroy_scalar_function(f: *mut duckdb_scalar_function);
    pub fn duckdb_scalar_function_set_name(f: duckdb_scalar_function, name: *const c_char);
    pub fn duckdb_scalar_function_add_parameter(f: duckdb_scalar_function, t: duckdb_logical_type);
    pub fn duckdb_scalar_function_set_return_type(f: duckdb_scalar_function, t: duckdb_logical_type);
    pub fn duckdb_scalar_function_set_function(f: duckdb_scalar_function, cb: scalar_callback);
    pub fn duckdb_register_scalar_function(con: duckdb_connection, f: duckdb_scalar_function) -> duckdb_state;
    pub fn duckdb_scalar_function_set_error(info: duckdb_function_info, msg: *const c_char);
    pub fn duckdb_get_int64(v: duckdb_value) -> i64;
    pub fn duckdb_create_int64(v: i64) -> duckdb_value;
    pub fn duckdb_destroy_value(v: *mut duckdb_value);
    pub fn duckdb_add_replacement_scan(db: duckdb_database, cb: replacement_callback, extra: *mut c_void, destroy: delete_callback);
    pub fn duckdb_replacement_scan_set_function_name(info: duckdb_replacement_scan_info, name: *const c_char);
    pub fn duckdb_replacement_scan_add_parameter(info: duckdb_replacement_scan_info, v: duckdb_value);
}

/// A C string DuckDB returned, copied (null: empty).
pub fn text(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: DuckDB returns NUL-terminated strings that live as long as their owner.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// A C string for DuckDB; SQL and names never hold NUL bytes (PostgreSQL strings cannot).
pub fn cstring(s: &str) -> CString {
    CString::new(s.replace('\0', "")).expect("NUL removed")
}

/// An owned logical type.
pub struct LogicalType(pub duckdb_logical_type);

impl LogicalType {
    pub fn new(t: duckdb_type) -> LogicalType {
        // SAFETY: creates a new object.
        LogicalType(unsafe { duckdb_create_logical_type(t) })
    }

    pub fn decimal(width: u8, scale: u8) -> LogicalType {
        // SAFETY: creates a new object.
        LogicalType(unsafe { duckdb_create_decimal_type(width, scale) })
    }

    pub fn id(&self) -> duckdb_type {
        // SAFETY: a live type.
        unsafe { duckdb_get_type_id(self.0) }
    }

    /// Width and scale of a DECIMAL.
    pub fn decimal_shape(&self) -> (u8, u8) {
        // SAFETY: a live type.
        unsafe { (duckdb_decimal_width(self.0), duckdb_decimal_scale(self.0)) }
    }

    /// The physical type a DECIMAL is stored as (SMALLINT .. HUGEINT).
    pub fn decimal_storage(&self) -> duckdb_type {
        // SAFETY: a live type.
        unsafe { duckdb_decimal_internal_type(self.0) }
    }
}

impl Drop for LogicalType {
    fn drop(&mut self) {
        // SAFETY: we own the type.
        unsafe { duckdb_destroy_logical_type(&mut self.0) }
    }
}

/// An owned prepared statement.
pub struct Prepared(pub duckdb_prepared_statement);

impl Prepared {
    /// Prepare `sql`, or DuckDB's error message.
    pub fn new(con: duckdb_connection, sql: &str) -> Result<Prepared, String> {
        let sql = cstring(sql);
        let mut p = std::ptr::null_mut();
        // SAFETY: a live connection; p receives a statement we own even on failure.
        let ok = unsafe { duckdb_prepare(con, sql.as_ptr(), &mut p) } == SUCCESS;
        let p = Prepared(p);
        if ok {
            Ok(p)
        } else {
            // SAFETY: a statement that failed to prepare holds its error.
            Err(text(unsafe { duckdb_prepare_error(p.0) }))
        }
    }

    /// The types of the result's columns.
    pub fn column_types(&self) -> Vec<LogicalType> {
        // SAFETY: a prepared statement without error.
        let n = unsafe { duckdb_prepared_statement_column_count(self.0) };
        (0..n).map(|i| LogicalType(unsafe { duckdb_prepared_statement_column_logical_type(self.0, i) })).collect()
    }
}

impl Drop for Prepared {
    fn drop(&mut self) {
        // SAFETY: we own the statement.
        unsafe { duckdb_destroy_prepare(&mut self.0) }
    }
}

/// An owned pending (not yet finished) execution.
pub struct Pending(pub duckdb_pending_result);

impl Drop for Pending {
    fn drop(&mut self) {
        // SAFETY: we own it.
        unsafe { duckdb_destroy_pending(&mut self.0) }
    }
}

/// An owned query result.
pub struct QueryResult(pub duckdb_result);

impl QueryResult {
    pub fn error(&mut self) -> (duckdb_error_type, String) {
        // SAFETY: a live result.
        unsafe { (duckdb_result_error_type(&mut self.0), text(duckdb_result_error(&mut self.0))) }
    }
}

impl Drop for QueryResult {
    fn drop(&mut self) {
        // SAFETY: we own the result; destroying an empty one is a no-op.
        unsafe { duckdb_destroy_result(&mut self.0) }
    }
}

/// An owned data chunk.
pub struct Chunk(pub duckdb_data_chunk);

impl Chunk {
    pub fn len(&self) -> usize {
        // SAFETY: a live chunk.
        unsafe { duckdb_data_chunk_get_size(self.0) as usize }
    }

    pub fn vector(&self, col: usize) -> duckdb_vector {
        // SAFETY: a live chunk; col is below its column count (caller).
        unsafe { duckdb_data_chunk_get_vector(self.0, col as idx_t) }
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: we own the chunk.
        unsafe { duckdb_destroy_data_chunk(&mut self.0) }
    }
}

/// An owned connection.
pub struct Connection(pub duckdb_connection);

impl Connection {
    /// Run a statement whose result does not matter (settings); DuckDB's error if it fails.
    pub fn execute(&self, sql: &str) -> Result<(), String> {
        let sql = cstring(sql);
        let mut r = QueryResult(duckdb_result::EMPTY);
        // SAFETY: a live connection; r is destroyed by its owner.
        if unsafe { duckdb_query(self.0, sql.as_ptr(), &mut r.0) } == SUCCESS {
            Ok(())
        } else {
            Err(r.error().1)
        }
    }
}

impl Connection {
    /// Run a query whose columns are all VARCHAR (EXPLAIN's); its rows.
    pub fn strings(&self, sql: &str) -> Result<Vec<Vec<String>>, String> {
        let csql = cstring(sql);
        let mut r = QueryResult(duckdb_result::EMPTY);
        // SAFETY: a live connection; r and the chunks are destroyed by their owners.
        unsafe {
            if duckdb_query(self.0, csql.as_ptr(), &mut r.0) != SUCCESS {
                return Err(r.error().1);
            }
            let mut rows = vec![];
            loop {
                let c = duckdb_fetch_chunk(r.0);
                if c.is_null() {
                    break;
                }
                let chunk = Chunk(c);
                let ncols = duckdb_data_chunk_get_column_count(chunk.0) as usize;
                for row in 0..chunk.len() {
                    let mut values = vec![];
                    for col in 0..ncols {
                        let v = chunk.vector(col);
                        let s = &*(duckdb_vector_get_data(v) as *const duckdb_string_t).add(row);
                        values.push(String::from_utf8_lossy(s.bytes()).into_owned());
                    }
                    rows.push(values);
                }
            }
            Ok(rows)
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // SAFETY: we own the connection.
        unsafe { duckdb_disconnect(&mut self.0) }
    }
}
