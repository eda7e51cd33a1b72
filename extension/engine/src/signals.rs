//! Signals, as a PostgreSQL backend receives them: constantly (latches,
//! sinval catch-up, cancel and terminate requests), to whichever thread of
//! the process does not block them.

/// Run `f` with every signal blocked in this thread; handlers of signals
/// that arrived meanwhile run when the mask is restored. Two uses:
/// threads started meanwhile (DuckDB's) inherit the full mask, so that
/// PostgreSQL's signals always reach the backend's own thread, whose handlers
/// expect to run there; and a system call that gives up with `EINTR`, undoing
/// its work, whenever a signal is pending (tmpfs's `fallocate`) completes.
pub fn with_signals_blocked<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: sigset_t is plain data, filled by sigfillset; the mask is this
    // thread's and is restored before returning.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        let r = f();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        r
    }
}
