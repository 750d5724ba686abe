//! The driver's barrier between passes: spins, then yields, then sleeps,
//! since a pass of mini-batch steps is as short as a kernel wake-up.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

/// A barrier for `n` threads that spins a while before it sleeps: a pass of
/// mini-batch steps takes tens of microseconds, about what waking a thread
/// parked in the kernel costs on a virtual machine. A waiter checks `SPINS`
/// times (tens of microseconds), then yields its core `YIELDS` times (so a
/// busy machine, e.g. tests running side by side, gets it back), then sleeps
/// on a condition variable: a worker with nothing to do for long does not
/// burn its core.
pub(crate) struct SpinBarrier {
    n: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
}

impl SpinBarrier {
    const SPINS: usize = 1 << 10;
    const YIELDS: usize = 64;

    pub(crate) fn new(n: usize) -> Self {
        SpinBarrier {
            n,
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        }
    }

    /// Waits until all `n` threads have arrived; returns `true` on exactly
    /// one of them (the last to arrive), like [`std::sync::BarrierWaitResult::is_leader`].
    pub(crate) fn wait(&self) -> bool {
        let gen = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            // Reset before the new generation is published: a waiter that
            // sees it may arrive at the next barrier at once.
            self.arrived.store(0, Ordering::Relaxed);
            {
                let _guard = self.lock.lock().unwrap();
                self.generation
                    .store(gen.wrapping_add(1), Ordering::Release);
            }
            if self.sleepers.load(Ordering::Acquire) > 0 {
                self.wake.notify_all();
            }
            return true;
        }
        for i in 0..Self::SPINS + Self::YIELDS {
            if self.generation.load(Ordering::Acquire) != gen {
                return false;
            }
            if i < Self::SPINS {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        let mut guard = self.lock.lock().unwrap();
        self.sleepers.fetch_add(1, Ordering::AcqRel);
        while self.generation.load(Ordering::Acquire) == gen {
            guard = self.wake.wait(guard).unwrap();
        }
        self.sleepers.fetch_sub(1, Ordering::AcqRel);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_barrier_has_one_leader_per_generation() {
        let (n, rounds) = (3, 2000);
        let barrier = SpinBarrier::new(n);
        let (leaders, arrived) = (AtomicUsize::new(0), AtomicUsize::new(0));
        std::thread::scope(|s| {
            for _ in 0..n {
                s.spawn(|| {
                    for r in 0..rounds {
                        arrived.fetch_add(1, Ordering::SeqCst);
                        if barrier.wait() {
                            leaders.fetch_add(1, Ordering::SeqCst);
                        }
                        // nobody leaves before everybody has arrived
                        assert!(arrived.load(Ordering::SeqCst) >= (r + 1) * n);
                        barrier.wait();
                    }
                });
            }
        });
        assert_eq!(leaders.load(Ordering::SeqCst), rounds);
    }
}
