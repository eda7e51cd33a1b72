//! The shared arena under signals. PostgreSQL signals its backends all the
//! time (latches, sinval catch-up, ...); tmpfs's fallocate, which commits the
//! arena's pages, gives up with EINTR when a signal is pending (Linux 6.1
//! does; some later kernels do not, and there this test passes either way),
//! and that must not surface as "out of memory". `kernel-patch/run-tests.sh`
//! runs this file in its 6.1 guest too.

use anker_engine::arena::{Arena, PageOwner, PAGE_SIZE};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

extern "C" fn ignore(_: libc::c_int) {}

#[test]
fn signals_during_commit_are_not_out_of_memory() {
    // SAFETY: a handler that does nothing, installed without SA_RESTART as
    // PostgreSQL's are; the struct is fully initialised.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = ignore as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut()), 0);
    }
    let a = Arena::create_shared(256 << 20).unwrap();
    a.format(8).unwrap();
    let owner = PageOwner::new();
    // SAFETY: this thread outlives the signaller, which is joined below.
    let me = unsafe { libc::pthread_self() } as usize;
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let signaller = {
        let (stop, sent) = (stop.clone(), sent.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: the target thread is alive until `stop` is set.
                unsafe { libc::pthread_kill(me as libc::pthread_t, libc::SIGUSR2) };
                sent.fetch_add(1, Ordering::Relaxed);
                std::thread::yield_now();
            }
        })
    };
    // At least 50 rounds, and on until the signaller has had its share of
    // the CPU: on a busy machine it may get few time slices at first.
    let pages = ((8 << 20) / PAGE_SIZE) as u32;
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut result = Ok(());
    for round in 0.. {
        if round >= 50 && (sent.load(Ordering::Relaxed) > 200 || std::time::Instant::now() > until) {
            break;
        }
        result = a.alloc_pages(&owner, pages).map(|o| a.free_pages(&owner, o));
        if result.is_err() {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    signaller.join().unwrap();
    let sent = sent.load(Ordering::Relaxed);
    assert!(sent > 50, "the signaller sent only {sent} signals in 20 s");
    result.unwrap();
}
