//! Thread helpers for the work outside the pass driver: how many threads a
//! run uses, and maps over contiguous ranges of equal weight.

/// The most worker threads a run may ask for (results never depend on the
/// count; more threads than this only fail to spawn).
pub const MAX_THREADS: usize = 1024;

/// Number of worker threads for a `threads` argument (0: one per core).
pub fn resolve_threads(threads: usize) -> usize {
    if threads > 0 {
        threads
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

/// Runs `f(i)` for `i in 0..n` on up to `threads` threads (contiguous ranges
/// of equal total `weight`), returning the results in order. For work
/// outside the pass driver (layouts, scoring); the driver owns its threads.
pub fn par_map<T: Send>(
    n: usize,
    threads: usize,
    weight: &(dyn Fn(usize) -> usize + Sync),
    f: &(dyn Fn(usize) -> T + Sync),
) -> Vec<T> {
    par_map_with(n, threads, weight, &|| (), &|_, i| f(i))
}

/// [`par_map`] with a scratch value per thread (`init` makes it), passed to
/// every `f` of that thread: buffers that would otherwise be allocated, and
/// touched fresh, once per item.
pub fn par_map_with<S, T: Send>(
    n: usize,
    threads: usize,
    weight: &(dyn Fn(usize) -> usize + Sync),
    init: &(dyn Fn() -> S + Sync),
    f: &(dyn Fn(&mut S, usize) -> T + Sync),
) -> Vec<T> {
    let run = |a: usize, b: usize| {
        let mut scratch = init();
        (a..b).map(|i| f(&mut scratch, i)).collect::<Vec<T>>()
    };
    if threads <= 1 || n < 2 {
        return run(0, n);
    }
    let total: usize = (0..n).map(weight).sum::<usize>().max(1);
    let mut cuts = vec![0];
    let mut acc = 0;
    for i in 0..n {
        acc += weight(i);
        if acc * threads >= total * cuts.len() && cuts.len() < threads {
            cuts.push(i + 1);
        }
    }
    cuts.push(n);
    cuts.dedup();
    // The first range runs on the calling thread (its allocator arena
    // holds memory freed by earlier stages, already touched).
    std::thread::scope(|s| {
        let hs: Vec<_> = cuts
            .windows(2)
            .skip(1)
            .map(|w| {
                let (a, b, run) = (w[0], w[1], &run);
                s.spawn(move || run(a, b))
            })
            .collect();
        let mut out = run(cuts[0], cuts[1]);
        for h in hs {
            out.extend(h.join().expect("worker thread panicked"));
        }
        out
    })
}
