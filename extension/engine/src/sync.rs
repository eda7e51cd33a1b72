//! Process-shared locks built on atomics.
//!
//! The arena is mapped by many PostgreSQL backends (processes), so the usual
//! `std::sync` primitives do not apply: their futexes are process-private.
//! These locks are plain words in shared memory. They are held only for short,
//! non-blocking critical sections: code holding one never calls into
//! PostgreSQL (which could raise an error or process an interrupt), never
//! allocates from PostgreSQL, and never waits on a transaction.

use std::sync::atomic::{AtomicU32, Ordering};

/// Spin, then yield the CPU. On a 2-core machine with many backends a pure
/// spin would burn the holder's time slice, so we back off to `sched_yield`.
#[inline]
fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins < 64 {
        std::hint::spin_loop();
    } else if *spins < 10_000 {
        std::thread::yield_now();
    } else {
        // Somebody holds the lock for long (preempted); sleep a little.
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
}

/// A test-and-test-and-set mutex.
#[repr(C)]
pub struct SpinLock {
    word: AtomicU32,
}

impl SpinLock {
    pub const fn new() -> Self {
        SpinLock { word: AtomicU32::new(0) }
    }

    pub fn init(&self) {
        self.word.store(0, Ordering::Release);
    }

    pub fn lock(&self) -> SpinGuard<'_> {
        let mut spins = 0;
        loop {
            if self.word.load(Ordering::Relaxed) == 0
                && self
                    .word
                    .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return SpinGuard { lock: self };
            }
            backoff(&mut spins);
        }
    }
}

impl Default for SpinLock {
    fn default() -> Self {
        Self::new()
    }
}

pub struct SpinGuard<'a> {
    lock: &'a SpinLock,
}

impl Drop for SpinGuard<'_> {
    fn drop(&mut self) {
        self.lock.word.store(0, Ordering::Release);
    }
}

/// A reader/writer latch that prefers the exclusive side.
///
/// Writers of table rows take it shared; creating a column snapshot takes it
/// exclusively, so a snapshot never sees a half-written row. Exclusive
/// requests block new shared holders, so a stream of writers cannot starve
/// snapshot creation.
#[repr(C)]
pub struct RwLatch {
    /// bit 31: exclusive held; bit 30: exclusive waiting; bits 0..30: shared count.
    word: AtomicU32,
}

const EXCL_HELD: u32 = 1 << 31;
const EXCL_WAIT: u32 = 1 << 30;
const SHARED_MASK: u32 = EXCL_WAIT - 1;

impl RwLatch {
    pub const fn new() -> Self {
        RwLatch { word: AtomicU32::new(0) }
    }

    pub fn init(&self) {
        self.word.store(0, Ordering::Release);
    }

    pub fn shared(&self) -> SharedGuard<'_> {
        let mut spins = 0;
        loop {
            let w = self.word.load(Ordering::Relaxed);
            if w & (EXCL_HELD | EXCL_WAIT) == 0
                && self
                    .word
                    .compare_exchange_weak(w, w + 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return SharedGuard { latch: self };
            }
            backoff(&mut spins);
        }
    }

    pub fn exclusive(&self) -> ExclusiveGuard<'_> {
        let mut spins = 0;
        loop {
            let w = self.word.load(Ordering::Relaxed);
            if w & EXCL_HELD == 0 && w & SHARED_MASK == 0 {
                if self
                    .word
                    .compare_exchange_weak(w, EXCL_HELD, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return ExclusiveGuard { latch: self };
                }
            } else if w & EXCL_WAIT == 0 {
                // Announce ourselves so that new shared holders queue behind us.
                let _ = self.word.compare_exchange_weak(
                    w,
                    w | EXCL_WAIT,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
            backoff(&mut spins);
        }
    }
}

impl Default for RwLatch {
    fn default() -> Self {
        Self::new()
    }
}

pub struct SharedGuard<'a> {
    latch: &'a RwLatch,
}

impl Drop for SharedGuard<'_> {
    fn drop(&mut self) {
        self.latch.word.fetch_sub(1, Ordering::Release);
    }
}

pub struct ExclusiveGuard<'a> {
    latch: &'a RwLatch,
}

impl Drop for ExclusiveGuard<'_> {
    fn drop(&mut self) {
        // Clears EXCL_HELD and any EXCL_WAIT a second exclusive waiter set;
        // that waiter re-announces itself on its next spin.
        self.latch.word.store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn spinlock_counts() {
        struct Counter(SpinLock, std::cell::UnsafeCell<u64>);
        // SAFETY: the spin lock serialises access to the cell.
        unsafe impl Sync for Counter {}
        let lock = Arc::new(Counter(SpinLock::new(), std::cell::UnsafeCell::new(0u64)));
        struct S(Arc<Counter>);
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let s = S(lock.clone());
                std::thread::spawn(move || {
                    let s = s;
                    for _ in 0..10_000 {
                        let _g = s.0 .0.lock();
                        // SAFETY: the spin lock serialises access to the cell.
                        unsafe { *s.0 .1.get() += 1 };
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(unsafe { *lock.1.get() }, 40_000);
    }

    #[test]
    fn latch_excludes() {
        let latch = Arc::new(RwLatch::new());
        let counter = Arc::new(AtomicU32::new(0));
        let mut handles = vec![];
        for i in 0..4 {
            let latch = latch.clone();
            let counter = counter.clone();
            handles.push(std::thread::spawn(move || {
                for _ in 0..2000 {
                    if i == 0 {
                        let _g = latch.exclusive();
                        assert_eq!(counter.load(Ordering::SeqCst), 0);
                    } else {
                        let _g = latch.shared();
                        counter.fetch_add(1, Ordering::SeqCst);
                        counter.fetch_sub(1, Ordering::SeqCst);
                    }
                }
            }));
        }
        for h in handles {
            h.join().unwrap();
        }
    }
}
