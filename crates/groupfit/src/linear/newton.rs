//! The batched Newton solve of the linear family: the systems `h x = -g` of
//! up to [`BATCH`] units solved together by Cholesky, one unit per vector
//! lane, with a growing ridge in a lane whose `h` is not numerically positive
//! definite; a portable copy and an AVX-512 factorisation and solve.
//!
//! A range of unknowns whose block of `h` is diagonal (the one-hot columns
//! of one categorical feature: a row is in one of them) can be eliminated
//! first ([`BatchScratch::with_diagonal`]): the factorisation then runs on
//! the Schur complement of the other unknowns, and the eliminated ones follow
//! from it. With 65 of 134 unknowns eliminated, that halves the work.

use crate::math::simd::{level, simd_copy, Level};

/// Units whose Newton systems are solved together (vector lanes of `f64`).
pub const BATCH: usize = 4;

/// One value of each unit of a batch.
type Lanes = [f64; BATCH];

/// Buffers of the batched Newton solve: the systems `h x = -g` of up to
/// [`BATCH`] units, interleaved (element `i` of every unit side by side).
#[derive(Debug, Clone)]
pub(super) struct BatchScratch {
    pub(super) p: usize,
    /// The Hessians (upper triangle, row-major `p x p`).
    h: Vec<Lanes>,
    /// The Cholesky factors.
    u: Vec<Lanes>,
    /// The inverses of the factors' diagonals (the AVX-512 solve multiplies
    /// by them).
    dinv: Vec<Lanes>,
    /// The gradients.
    g: Vec<Lanes>,
    /// The solution of the last factorisation tried.
    y: Vec<Lanes>,
    /// The directions.
    x: Vec<Lanes>,
    /// The elimination of a diagonal block, when there is one.
    reduced: Option<Box<Reduced>>,
}

/// The unknowns `diag` eliminated: `h = [[D, B], [B^T, A]]` (reordered)
/// with `D` diagonal gives `(A - B^T D^-1 B) z = -(g_A - B^T D^-1 g_D)` for
/// the others, `z`, and `y = D^-1 (-g_D - B z)` for the eliminated ones.
#[derive(Debug, Clone)]
struct Reduced {
    diag: std::ops::Range<usize>,
    /// The other unknowns' system (`p - diag.len()` of them, in order).
    rest: BatchScratch,
    /// Per other unknown `i`, its entries `B[c][i]` (`diag.len()` each).
    bt: Vec<Lanes>,
    /// `bt` times `D^-1`.
    bts: Vec<Lanes>,
    /// `D^-1`.
    dinv: Vec<Lanes>,
}

impl Reduced {
    /// The other unknown `i`'s index in the whole system.
    #[inline(always)]
    fn whole(&self, i: usize) -> usize {
        if i < self.diag.start {
            i
        } else {
            i + self.diag.len()
        }
    }

    /// Writes the Schur complement system of the loaded `b` into `rest`.
    #[inline(always)]
    fn reduce(&mut self, b: &BatchScratch) {
        let p = b.p;
        let (d0, nd) = (self.diag.start, self.diag.len());
        let q = p - nd;
        for c in 0..nd {
            let dc = b.h[(d0 + c) * p + d0 + c];
            self.dinv[c] = std::array::from_fn(|l| if dc[l] > 0.0 { 1.0 / dc[l] } else { 0.0 });
        }
        for i in 0..q {
            let o = self.whole(i);
            for c in 0..nd {
                let e = if o < d0 {
                    b.h[o * p + d0 + c]
                } else {
                    b.h[(d0 + c) * p + o]
                };
                self.bt[i * nd + c] = e;
                self.bts[i * nd + c] = std::array::from_fn(|l| e[l] * self.dinv[c][l]);
            }
        }
        for i in 0..q {
            let oi = self.whole(i);
            let si = &self.bts[i * nd..(i + 1) * nd];
            let mut gi = b.g[oi];
            for (c, s) in si.iter().enumerate() {
                for l in 0..BATCH {
                    gi[l] -= s[l] * b.g[d0 + c][l];
                }
            }
            self.rest.g[i] = gi;
            // Four columns at a time: each load of `si` serves four dot
            // products (the loop is bound by loads).
            let mut j = i;
            while j < q {
                let w = (q - j).min(4);
                let col = |k: usize| {
                    let jk = j + k.min(w - 1);
                    &self.bt[jk * nd..(jk + 1) * nd]
                };
                let dots = dots_1x4(si, [col(0), col(1), col(2), col(3)]);
                for (k, dot) in dots.iter().enumerate().take(w) {
                    let a = b.h[oi * p + self.whole(j + k)];
                    self.rest.h[i * q + j + k] = std::array::from_fn(|l| a[l] - dot[l]);
                }
                j += w;
            }
        }
    }

    /// Writes the whole direction into `b.x` from `rest`'s.
    #[inline(always)]
    fn expand(&self, b: &mut BatchScratch) {
        let (d0, nd) = (self.diag.start, self.diag.len());
        let q = b.p - nd;
        for i in 0..q {
            b.x[self.whole(i)] = self.rest.x[i];
        }
        for c in 0..nd {
            let mut y: Lanes = std::array::from_fn(|l| -b.g[d0 + c][l]);
            for i in 0..q {
                let (e, z) = (self.bt[i * nd + c], self.rest.x[i]);
                for l in 0..BATCH {
                    y[l] -= e[l] * z[l];
                }
            }
            b.x[d0 + c] = std::array::from_fn(|l| y[l] * self.dinv[c][l]);
        }
    }
}

impl BatchScratch {
    /// Buffers for systems of `p` unknowns (each solve loads its own,
    /// [`BatchScratch::load`]).
    pub(super) fn new(p: usize) -> Self {
        BatchScratch {
            p,
            h: vec![[0.0; BATCH]; p * p],
            u: vec![[0.0; BATCH]; p * p],
            dinv: vec![[0.0; BATCH]; p],
            g: vec![[0.0; BATCH]; p],
            y: vec![[0.0; BATCH]; p],
            x: vec![[0.0; BATCH]; p],
            reduced: None,
        }
    }

    /// Buffers that eliminate the unknowns `diag` first (see [`Reduced`]):
    /// the caller vouches that their block of every `h` is diagonal, and
    /// that its diagonal is positive (a penalised column).
    pub(super) fn with_diagonal(p: usize, diag: std::ops::Range<usize>) -> Self {
        assert!(diag.end < p && !diag.is_empty());
        let (q, nd) = (p - diag.len(), diag.len());
        let mut b = BatchScratch::new(p);
        b.reduced = Some(Box::new(Reduced {
            diag,
            rest: BatchScratch::new(q),
            bt: vec![[0.0; BATCH]; q * nd],
            bts: vec![[0.0; BATCH]; q * nd],
            dinv: vec![[0.0; BATCH]; nd],
        }));
        b
    }

    /// Copies each lane's gradient and Hessian (upper triangle) from the
    /// statistics `src[lane]`: one value of every lane at a time, so each
    /// entry is written whole.
    #[inline(always)]
    fn load(&mut self, src: &[&[f64]; BATCH]) {
        let p = self.p;
        let g: [&[f64]; BATCH] = std::array::from_fn(|l| &src[l][1..1 + p]);
        for (j, gl) in self.g.iter_mut().enumerate() {
            *gl = std::array::from_fn(|l| g[l][j]);
        }
        for i in 0..p {
            let at = 1 + p + i * p;
            let rows: [&[f64]; BATCH] = std::array::from_fn(|l| &src[l][at + i..at + p]);
            for (q, h) in self.h[i * p + i..(i + 1) * p].iter_mut().enumerate() {
                *h = std::array::from_fn(|l| rows[l][q]);
            }
        }
    }

    /// Copies the direction of `lane` into `dir`.
    pub(super) fn store(&self, lane: usize, dir: &mut [f64]) {
        for (d, x) in dir.iter_mut().zip(&self.x) {
            *d = x[lane];
        }
    }
}

/// Loads the systems of the statistics `src` (see [`BatchScratch::load`])
/// and solves `h x = -g` in every used lane of `b` by Cholesky, adding a
/// growing ridge in a lane whose `h` is not numerically positive definite.
/// Compiled for the widest vector unit present.
pub(super) fn newton_batch(used: usize, src: &[&[f64]; BATCH], b: &mut BatchScratch) {
    #[cfg(target_arch = "x86_64")]
    match level() {
        // SAFETY: the CPU has the level the copy was compiled for.
        Level::Avx512 | Level::Avx512Vbmi2 => return unsafe { newton_batch_avx512(used, src, b) },
        // SAFETY: as above.
        Level::Avx2 => return unsafe { newton_batch_avx2(used, src, b) },
        Level::Scalar => {}
    }
    newton_batch_impl::<false>(used, src, b)
}

simd_copy!(
    [
        Avx2 newton_batch_avx2 => newton_batch_impl::<false>(used, src, b),
        Avx512 newton_batch_avx512 => newton_batch_impl::<true>(used, src, b),
    ]
    fn(used: usize, src: &[&[f64]; BATCH], b: &mut BatchScratch)
);

/// The solve of [`newton_batch`]; `WIDE`: the AVX-512 factorisation and
/// solve (see [`factor_and_solve`]).
#[inline(always)]
fn newton_batch_impl<const WIDE: bool>(used: usize, src: &[&[f64]; BATCH], b: &mut BatchScratch) {
    b.load(src);
    match b.reduced.take() {
        None => solve_loaded::<WIDE>(used, b),
        Some(mut r) => {
            r.reduce(b);
            solve_loaded::<WIDE>(used, &mut r.rest);
            r.expand(b);
            b.reduced = Some(r);
        }
    }
}

/// The solve of [`newton_batch`] on the systems loaded in `b`.
#[inline(always)]
fn solve_loaded<const WIDE: bool>(used: usize, b: &mut BatchScratch) {
    let p = b.p;
    let mut max_diag = [0.0f64; BATCH];
    for j in 0..p {
        for l in 0..BATCH {
            max_diag[l] = max_diag[l].max(b.h[j * p + j][l]);
        }
    }
    for m in &mut max_diag {
        *m = m.max(1e-300);
    }
    let mut ridge = [0.0f64; BATCH];
    let mut pending = [false; BATCH];
    pending[..used].fill(true);
    for _ in 0..12 {
        let ok = factor_and_solve::<WIDE>(b, &ridge);
        let mut left = false;
        for l in 0..used {
            if !pending[l] {
                continue;
            }
            if ok[l] {
                for (x, y) in b.x.iter_mut().zip(&b.y) {
                    x[l] = y[l];
                }
                pending[l] = false;
            } else {
                ridge[l] = if ridge[l] == 0.0 {
                    1e-10 * max_diag[l]
                } else {
                    ridge[l] * 100.0
                };
                left = true;
            }
        }
        if !left {
            return;
        }
    }
    for l in 0..used {
        if pending[l] {
            for (x, g) in b.x.iter_mut().zip(&b.g) {
                x[l] = -g[l] / max_diag[l];
            }
        }
    }
}

/// Factors every lane of `b` with `ridge` added and solves for the
/// direction into `b.y`; per lane, false if not positive definite. The
/// AVX-512 pair ([`cholesky_batch_avx512`], [`solve_batch_avx512`]) when
/// `WIDE` (which only a caller compiled for AVX-512 and FMA passes), else
/// [`cholesky_batch`] and [`solve_batch`].
#[inline(always)]
fn factor_and_solve<const WIDE: bool>(b: &mut BatchScratch, ridge: &Lanes) -> [bool; BATCH] {
    let p = b.p;
    #[cfg(target_arch = "x86_64")]
    {
        if WIDE {
            // SAFETY: `WIDE` is only set in `newton_batch_avx512`, which runs
            // on a CPU with AVX-512F and FMA.
            return unsafe {
                let ok = cholesky_batch_avx512(p, &b.h, ridge, &mut b.u, &mut b.dinv);
                solve_batch_avx512(p, &b.u, &b.dinv, &b.g, &mut b.y);
                ok
            };
        }
    }
    let ok = cholesky_batch(p, &b.h, ridge, &mut b.u);
    solve_batch(p, &b.u, &b.g, &mut b.y);
    ok
}

/// [`solve_batch`] with AVX-512 and FMA, from the factors and the inverses
/// of their diagonals that [`cholesky_batch_avx512`] wrote: forward by rows
/// of `U`, two entries of the four systems per register; backward by
/// columns of `U` (each `x[i]`, once known, is taken out of every `x[j]`,
/// `j < i`, independently), so neither half waits on a division or a dot
/// product per unknown.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn solve_batch_avx512(p: usize, u: &[Lanes], dinv: &[Lanes], g: &[Lanes], x: &mut [Lanes]) {
    use std::arch::x86_64::*;
    assert!(u.len() >= p * p && dinv.len() >= p && g.len() >= p && x.len() >= p);
    let (up, xp) = (u.as_ptr().cast::<f64>(), x.as_mut_ptr().cast::<f64>());
    let at = |i: usize| i * BATCH;
    for (xi, gi) in x.iter_mut().zip(g) {
        for l in 0..BATCH {
            xi[l] = -gi[l];
        }
    }
    // U^T y = -g.
    for k in 0..p {
        let yk = _mm256_mul_pd(
            _mm256_loadu_pd(xp.add(at(k))),
            _mm256_loadu_pd(dinv.as_ptr().add(k).cast()),
        );
        _mm256_storeu_pd(xp.add(at(k)), yk);
        let y2 = _mm512_broadcast_f64x4(yk);
        let row = up.add(at(k * p));
        let mut j = k + 1;
        while j + 2 <= p {
            let v = _mm512_fnmadd_pd(
                _mm512_loadu_pd(row.add(at(j))),
                y2,
                _mm512_loadu_pd(xp.add(at(j))),
            );
            _mm512_storeu_pd(xp.add(at(j)), v);
            j += 2;
        }
        if j < p {
            let v = _mm256_fnmadd_pd(
                _mm256_loadu_pd(row.add(at(j))),
                yk,
                _mm256_loadu_pd(xp.add(at(j))),
            );
            _mm256_storeu_pd(xp.add(at(j)), v);
        }
    }
    // U x = y.
    for i in (0..p).rev() {
        let xi = _mm256_mul_pd(
            _mm256_loadu_pd(xp.add(at(i))),
            _mm256_loadu_pd(dinv.as_ptr().add(i).cast()),
        );
        _mm256_storeu_pd(xp.add(at(i)), xi);
        for j in 0..i {
            let v = _mm256_fnmadd_pd(
                _mm256_loadu_pd(up.add(at(j * p + i))),
                xi,
                _mm256_loadu_pd(xp.add(at(j))),
            );
            _mm256_storeu_pd(xp.add(at(j)), v);
        }
    }
}

/// [`cholesky_batch`] with AVX-512 and fused multiply-adds: each 512-bit
/// register holds two neighbouring entries of a row of `U` in all four
/// lanes. Rows are factored [`ROWS`] at a time: each entry of a row `k`
/// above them is loaded once for all of them (a large system's rows do not
/// fit in cache, so this cuts its memory traffic by [`ROWS`]), and up to
/// sixteen registers are updated per `k`, so the factorisation runs at the
/// FMA units' throughput rather than the latency of one chain. Every entry
/// still takes the same operations in the same order as in a row-by-row
/// factorisation, and every lane computes exactly what a lone system
/// computes; only each `a - c * v` is rounded once. Also writes
/// `1 / U[i][i]` into `dinv` for [`solve_batch_avx512`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn cholesky_batch_avx512(
    p: usize,
    h: &[Lanes],
    ridge: &Lanes,
    u: &mut [Lanes],
    dinv: &mut [Lanes],
) -> [bool; BATCH] {
    use std::arch::x86_64::*;

    /// Row `i` of `U`, entries `j .. j + 2 N`: `(h[i][j..] - sum_k U[k][i]
    /// U[k][j..]) / U[i][i]`, `N` registers of two entries each.
    #[inline(always)]
    unsafe fn entries<const N: usize>(
        p: usize,
        i: usize,
        j: usize,
        h: *const f64,
        u: *mut f64,
        inv: __m512d,
    ) {
        let mut acc = [_mm512_setzero_pd(); N];
        for (q, a) in acc.iter_mut().enumerate() {
            *a = _mm512_loadu_pd(h.add((i * p + j + 2 * q) * BATCH));
        }
        for k in 0..i {
            let c = _mm512_broadcast_f64x4(_mm256_loadu_pd(u.add((k * p + i) * BATCH)));
            let row = u.add((k * p + j) * BATCH);
            for (q, a) in acc.iter_mut().enumerate() {
                *a = _mm512_fnmadd_pd(c, _mm512_loadu_pd(row.add(2 * q * BATCH)), *a);
            }
        }
        for (q, a) in acc.iter().enumerate() {
            _mm512_storeu_pd(u.add((i * p + j + 2 * q) * BATCH), _mm512_mul_pd(*a, inv));
        }
    }

    /// [`entries`] of the [`ROWS`] rows from `i0` at once, all right of
    /// them (`j >= i0 + ROWS`): the sums over the rows `k < i0` in
    /// registers, each `U[k][j..]` loaded once; then, row by row, the rows
    /// of the block above it, from the registers of the rows just finished.
    #[inline(always)]
    unsafe fn block<const N: usize>(
        p: usize,
        i0: usize,
        j: usize,
        h: *const f64,
        u: *mut f64,
        inv: &[__m512d; ROWS],
    ) {
        let mut acc = [[_mm512_setzero_pd(); N]; ROWS];
        for (r, row) in acc.iter_mut().enumerate() {
            for (q, a) in row.iter_mut().enumerate() {
                *a = _mm512_loadu_pd(h.add(((i0 + r) * p + j + 2 * q) * BATCH));
            }
        }
        for k in 0..i0 {
            let above = u.add((k * p + j) * BATCH);
            // Rows `k` are `p` entries apart, too far for the hardware
            // prefetcher: ask for the entries `AHEAD` rows down now.
            let ahead = above.wrapping_add(AHEAD * p * BATCH);
            for q in 0..N {
                _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(2 * q * BATCH).cast::<i8>());
            }
            let mut v = [_mm512_setzero_pd(); N];
            for (q, v) in v.iter_mut().enumerate() {
                *v = _mm512_loadu_pd(above.add(2 * q * BATCH));
            }
            for (r, row) in acc.iter_mut().enumerate() {
                let c = _mm512_broadcast_f64x4(_mm256_loadu_pd(u.add((k * p + i0 + r) * BATCH)));
                for (a, &v) in row.iter_mut().zip(&v) {
                    *a = _mm512_fnmadd_pd(c, v, *a);
                }
            }
        }
        for (r, &inv) in inv.iter().enumerate() {
            let (done, rest) = acc.split_at_mut(r);
            let row = &mut rest[0];
            for (k, above) in done.iter().enumerate() {
                let c =
                    _mm512_broadcast_f64x4(_mm256_loadu_pd(u.add(((i0 + k) * p + i0 + r) * BATCH)));
                for (a, &v) in row.iter_mut().zip(above) {
                    *a = _mm512_fnmadd_pd(c, v, *a);
                }
            }
            for (q, a) in row.iter_mut().enumerate() {
                *a = _mm512_mul_pd(*a, inv);
                _mm512_storeu_pd(u.add(((i0 + r) * p + j + 2 * q) * BATCH), *a);
            }
        }
    }

    /// Row `i` of `U`, the one entry `j`, with 256-bit registers.
    #[inline(always)]
    unsafe fn entry(p: usize, i: usize, j: usize, h: *const f64, u: *mut f64, inv: __m256d) {
        let mut a = _mm256_loadu_pd(h.add((i * p + j) * BATCH));
        for k in 0..i {
            let c = _mm256_loadu_pd(u.add((k * p + i) * BATCH));
            a = _mm256_fnmadd_pd(c, _mm256_loadu_pd(u.add((k * p + j) * BATCH)), a);
        }
        _mm256_storeu_pd(u.add((i * p + j) * BATCH), _mm256_mul_pd(a, inv));
    }

    assert!(h.len() >= p * p && u.len() >= p * p && dinv.len() >= p);
    let (hp, up) = (h.as_ptr().cast::<f64>(), u.as_mut_ptr().cast::<f64>());
    let mut ok = [true; BATCH];
    let r = _mm256_loadu_pd(ridge.as_ptr());
    // `U[j][j]` holds `h[j][j] - sum_{k<i} U[k][j]^2` until row `j` is
    // reached: each row's entries update the diagonals below them, in order
    // of `k`, instead of one chain of `j` dependent steps each.
    for j in 0..p {
        let at = (j * p + j) * BATCH;
        _mm256_storeu_pd(up.add(at), _mm256_loadu_pd(hp.add(at)));
    }
    let mut i0 = 0;
    while i0 < p {
        let end = (i0 + ROWS).min(p);
        // The block's diagonals and the entries among its own columns, row
        // by row.
        let mut inv2 = [_mm512_setzero_pd(); ROWS];
        let mut inv4 = [_mm256_setzero_pd(); ROWS];
        for i in i0..end {
            let d = _mm256_add_pd(_mm256_loadu_pd(up.add((i * p + i) * BATCH)), r);
            let mut dl = [0.0f64; BATCH];
            _mm256_storeu_pd(dl.as_mut_ptr(), d);
            for (o, v) in ok.iter_mut().zip(dl) {
                *o &= v > 0.0 && v.is_finite();
            }
            let root = _mm256_sqrt_pd(d);
            let inv = _mm256_div_pd(_mm256_set1_pd(1.0), root);
            _mm256_storeu_pd(up.add((i * p + i) * BATCH), root);
            _mm256_storeu_pd(dinv.as_mut_ptr().add(i).cast(), inv);
            (inv2[i - i0], inv4[i - i0]) = (_mm512_broadcast_f64x4(inv), inv);
            for j in i + 1..end {
                entry(p, i, j, hp, up, inv);
                let c = _mm256_loadu_pd(up.add((i * p + j) * BATCH));
                let at = up.add((j * p + j) * BATCH);
                _mm256_storeu_pd(at, _mm256_fnmadd_pd(c, c, _mm256_loadu_pd(at)));
            }
        }
        // The entries right of the block: a full block's rows together,
        // in blocks of 8, 4 and 2 entries (`N` registers of two), the last
        // odd one and a short block's rows one by one.
        let mut j = end;
        if end - i0 == ROWS {
            macro_rules! blocks {
                ($n:literal) => {
                    while p - j >= 2 * $n {
                        block::<$n>(p, i0, j, hp, up, &inv2);
                        j += 2 * $n;
                    }
                };
            }
            blocks!(4);
            blocks!(2);
            blocks!(1);
        }
        for i in i0..end {
            let mut j = j;
            while p - j >= 16 {
                entries::<8>(p, i, j, hp, up, inv2[i - i0]);
                j += 16;
            }
            while p - j >= 2 {
                entries::<1>(p, i, j, hp, up, inv2[i - i0]);
                j += 2;
            }
            if j < p {
                entry(p, i, j, hp, up, inv4[i - i0]);
            }
        }
        // The diagonals right of the block, in order of the block's rows.
        for i in i0..end {
            for j in end..p {
                let c = _mm256_loadu_pd(up.add((i * p + j) * BATCH));
                let at = up.add((j * p + j) * BATCH);
                _mm256_storeu_pd(at, _mm256_fnmadd_pd(c, c, _mm256_loadu_pd(at)));
            }
        }
        i0 = end;
    }
    ok
}

/// Rows of `U` that [`cholesky_batch_avx512`] factors together.
#[cfg(target_arch = "x86_64")]
const ROWS: usize = 4;

/// How many rows of `U` ahead [`cholesky_batch_avx512`] prefetches.
#[cfg(target_arch = "x86_64")]
const AHEAD: usize = 8;

/// Upper Cholesky factors `U` (`U^T U = h + ridge I`) of every lane into `u`
/// (row-major `p x p`, upper triangle); per lane, false if not positive
/// definite. Left-looking: `U[i][j] = (h[i][j] - sum_{k<i} U[k][i] U[k][j]) /
/// U[i][i]`, the sum taken in order of `k` (the order a right-looking
/// update would subtract in), four `j` at a time held in registers; every
/// operation is one vector operation over the lanes.
#[inline(always)]
fn cholesky_batch(p: usize, h: &[Lanes], ridge: &Lanes, u: &mut [Lanes]) -> [bool; BATCH] {
    const J: usize = 4;
    let mut ok = [true; BATCH];
    for i in 0..p {
        let mut s = h[i * p + i];
        for k in 0..i {
            let c = u[k * p + i];
            for l in 0..BATCH {
                s[l] -= c[l] * c[l];
            }
        }
        let mut inv = [0.0f64; BATCH];
        for l in 0..BATCH {
            let d = s[l] + ridge[l];
            ok[l] &= d > 0.0 && d.is_finite();
            s[l] = d.sqrt();
            inv[l] = 1.0 / s[l];
        }
        u[i * p + i] = s;
        let mut j = i + 1;
        while j + J <= p {
            let mut acc: [Lanes; J] = h[i * p + j..i * p + j + J].try_into().unwrap();
            for k in 0..i {
                let c = u[k * p + i];
                let row: &[Lanes; J] = u[k * p + j..k * p + j + J].try_into().unwrap();
                for q in 0..J {
                    for l in 0..BATCH {
                        acc[q][l] -= c[l] * row[q][l];
                    }
                }
            }
            for (q, a) in acc.iter().enumerate() {
                for l in 0..BATCH {
                    u[i * p + j + q][l] = a[l] * inv[l];
                }
            }
            j += J;
        }
        for j in j..p {
            let mut a = h[i * p + j];
            for k in 0..i {
                let (c, v) = (u[k * p + i], u[k * p + j]);
                for l in 0..BATCH {
                    a[l] -= c[l] * v[l];
                }
            }
            for l in 0..BATCH {
                u[i * p + j][l] = a[l] * inv[l];
            }
        }
    }
    ok
}

/// `U^T U x = -g` in every lane: forward `U^T y = -g` column by column of
/// `U^T` (rows of `U`), then backward `U x = y`, a dot product over row `i`
/// of `U` in four partial sums.
#[inline(always)]
fn solve_batch(p: usize, u: &[Lanes], g: &[Lanes], x: &mut [Lanes]) {
    for (xi, gi) in x.iter_mut().zip(g) {
        for l in 0..BATCH {
            xi[l] = -gi[l];
        }
    }
    for k in 0..p {
        let row = &u[k * p..(k + 1) * p];
        let mut yk = [0.0f64; BATCH];
        for l in 0..BATCH {
            yk[l] = x[k][l] / row[k][l];
        }
        x[k] = yk;
        for (xj, ukj) in x[k + 1..].iter_mut().zip(&row[k + 1..]) {
            for l in 0..BATCH {
                xj[l] -= ukj[l] * yk[l];
            }
        }
    }
    for i in (0..p).rev() {
        let row = &u[i * p..(i + 1) * p];
        let dot = dot4_lanes(&row[i + 1..], &x[i + 1..]);
        for l in 0..BATCH {
            x[i][l] = (x[i][l] - dot[l]) / row[i][l];
        }
    }
}

/// The dot products of `a` with each of `b` in every lane, each summed in
/// order.
#[inline(always)]
fn dots_1x4(a: &[Lanes], b: [&[Lanes]; 4]) -> [Lanes; 4] {
    let mut acc = [[0.0f64; BATCH]; 4];
    for (c, x) in a.iter().enumerate() {
        for (k, bk) in b.iter().enumerate() {
            let y = &bk[c];
            for l in 0..BATCH {
                acc[k][l] += x[l] * y[l];
            }
        }
    }
    acc
}

/// Dot product in every lane, with four partial sums over chunks of four
/// and the remainder summed in order.
#[inline(always)]
fn dot4_lanes(a: &[Lanes], b: &[Lanes]) -> Lanes {
    let mut acc = [[0.0f64; BATCH]; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let mut tail = [-0.0f64; BATCH];
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        for l in 0..BATCH {
            tail[l] += x[l] * y[l];
        }
    }
    for (x, y) in ca.zip(cb) {
        for q in 0..4 {
            for l in 0..BATCH {
                acc[q][l] += x[q][l] * y[q][l];
            }
        }
    }
    let mut out = [0.0f64; BATCH];
    for l in 0..BATCH {
        out[l] = (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]) + tail[l];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linear::solver::stats_len;

    /// Statistics (`[loss, g, H, rows]`) of the system `H x = -g` with
    /// `H = A^T A + I`, `A` filled from `seed`.
    fn spd_stats(p: usize, seed: usize) -> Vec<f64> {
        let a: Vec<f64> = (0..p * p)
            .map(|i| (((i * 7919 + p + 13 * seed) % 31) as f64) / 15.0 - 1.0)
            .collect();
        let mut st = vec![0.0; stats_len(p - 1)];
        for j in 0..p {
            st[1 + j] = (j as f64 * 0.37 + seed as f64).sin();
            for k in 0..p {
                st[1 + p + j * p + k] = (0..p).map(|r| a[r * p + j] * a[r * p + k]).sum::<f64>()
                    + f64::from(u8::from(j == k));
            }
        }
        st
    }

    /// The directions of the systems in `stats`, solved as one batch.
    fn solve(p: usize, stats: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let mut b = BatchScratch::new(p);
        let src: [&[f64]; BATCH] = std::array::from_fn(|l| &stats[l.min(stats.len() - 1)][..]);
        newton_batch(stats.len(), &src, &mut b);
        (0..stats.len())
            .map(|lane| {
                let mut x = vec![0.0; p];
                b.store(lane, &mut x);
                x
            })
            .collect()
    }

    #[test]
    fn eliminating_a_diagonal_block_gives_the_whole_solve() {
        // Systems of 3 + 6 + 2 unknowns whose middle block (3..9) is
        // diagonal: the elimination's directions equal the plain solve's.
        let p = 11;
        let diag = 3..9;
        let stats: Vec<Vec<f64>> = (0..3)
            .map(|seed| {
                let mut st = spd_stats(p, seed);
                for j in diag.clone() {
                    for k in diag.clone() {
                        if j != k {
                            st[1 + p + j * p + k] = 0.0;
                        }
                    }
                    // Keeps H positive definite without the couplings.
                    st[1 + p + j * p + j] += 40.0;
                }
                st
            })
            .collect();
        let want = solve(p, &stats);
        let mut b = BatchScratch::with_diagonal(p, diag);
        let src: [&[f64]; BATCH] = std::array::from_fn(|l| &stats[l.min(2)][..]);
        newton_batch(3, &src, &mut b);
        for (lane, w) in want.iter().enumerate() {
            let mut x = vec![0.0; p];
            b.store(lane, &mut x);
            for (a, e) in x.iter().zip(w) {
                assert!(
                    (a - e).abs() < 1e-10 * (1.0 + e.abs()),
                    "lane {lane}: {a} vs {e}"
                );
            }
            // And it solves H x = -g (upper triangle given).
            let st = &stats[lane];
            for j in 0..p {
                let hx: f64 = (0..p)
                    .map(|k| st[1 + p + j.min(k) * p + j.max(k)] * x[k])
                    .sum();
                assert!((hx + st[1 + j]).abs() < 1e-9, "lane {lane} row {j}");
            }
        }
    }

    #[test]
    fn newton_batch_solves_spd_systems_in_every_lane_as_alone() {
        // H x = -g to rounding in every lane, for sizes from 1 to 33 and
        // batches of 1 to BATCH systems; each lane's solution is bit-equal
        // to the same system solved alone.
        for p in [1, 2, 7, 8, 9, 16, 17, 33] {
            for used in 1..=BATCH {
                let stats: Vec<Vec<f64>> = (0..used).map(|l| spd_stats(p, l)).collect();
                let xs = solve(p, &stats);
                for (l, (st, x)) in stats.iter().zip(&xs).enumerate() {
                    let (g, h) = (&st[1..1 + p], &st[1 + p..1 + p + p * p]);
                    for j in 0..p {
                        let hx: f64 = (0..p).map(|k| h[j * p + k] * x[k]).sum();
                        assert!(
                            (hx + g[j]).abs() < 1e-9 * (1.0 + g[j].abs()),
                            "p={p} lane {l} row {j}: {hx} vs {}",
                            -g[j]
                        );
                    }
                    assert_eq!(x, &solve(p, std::slice::from_ref(st))[0], "p={p} lane {l}");
                }
            }
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn avx512_factors_match_the_portable_factors() {
        // Every entry path (16, 8, 4, 2 entries a register block, and the
        // last odd one) for sizes 1 to 40: the FMA factors agree with the
        // portable ones to rounding, lane by lane, and flag the same lanes.
        if crate::math::simd::level() < crate::math::simd::Level::Avx512 {
            return;
        }
        for p in 1..=40 {
            let mut b = BatchScratch::new(p);
            let stats: Vec<Vec<f64>> = (0..BATCH).map(|l| spd_stats(p, l + 1)).collect();
            b.load(&std::array::from_fn(|l| &stats[l][..]));
            let ridge = [0.0, 1e-3, 0.0, 2.0];
            let mut wide = vec![[0.0; BATCH]; p * p];
            let ok_portable = cholesky_batch(p, &b.h, &ridge, &mut b.u);
            // SAFETY: the CPU has AVX-512F and FMA (checked above).
            let mut dinv = vec![[0.0; BATCH]; p];
            let ok_wide = unsafe { cholesky_batch_avx512(p, &b.h, &ridge, &mut wide, &mut dinv) };
            assert_eq!(ok_portable, ok_wide, "p={p}");
            for i in 0..p {
                for j in i..p {
                    for l in 0..BATCH {
                        let (a, w) = (b.u[i * p + j][l], wide[i * p + j][l]);
                        assert!(
                            (a - w).abs() <= 1e-12 * (1.0 + a.abs()),
                            "p={p} U[{i}][{j}] lane {l}: {a} vs {w}"
                        );
                    }
                }
            }
        }
    }

    /// The factors of a row-by-row left-looking factorisation with fused
    /// multiply-adds, lane by lane: `U[i][j] = (h[i][j] - sum_{k<i} U[k][i]
    /// U[k][j]) / U[i][i]`, the sum in order of `k`, each term fused.
    fn fused_reference(p: usize, h: &[Lanes], ridge: &Lanes) -> (Vec<Lanes>, [bool; BATCH]) {
        let mut u: Vec<Lanes> = vec![[0.0; BATCH]; p * p];
        let mut ok = [true; BATCH];
        for l in 0..BATCH {
            for i in 0..p {
                let mut d = h[i * p + i][l];
                for k in 0..i {
                    let c = u[k * p + i][l];
                    d = (-c).mul_add(c, d);
                }
                let d = d + ridge[l];
                ok[l] &= d > 0.0 && d.is_finite();
                let root = d.sqrt();
                let inv = 1.0 / root;
                u[i * p + i][l] = root;
                for j in i + 1..p {
                    let mut a = h[i * p + j][l];
                    for k in 0..i {
                        a = (-u[k * p + i][l]).mul_add(u[k * p + j][l], a);
                    }
                    u[i * p + j][l] = a * inv;
                }
            }
        }
        (u, ok)
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn avx512_factors_are_the_fused_row_by_row_factors_bit_for_bit() {
        // Blocks of 4 rows and a short last block, each register block size
        // (8, 4, 2 entries, the odd last one) right of a block, and one
        // lane that is not positive definite.
        if crate::math::simd::level() < crate::math::simd::Level::Avx512 {
            return;
        }
        for p in (1..=24).chain([37, 53, 70]) {
            let mut b = BatchScratch::new(p);
            let mut stats: Vec<Vec<f64>> = (0..BATCH).map(|l| spd_stats(p, l + 5)).collect();
            stats[2][1 + p + (p - 1) * p + (p - 1)] = -1e6;
            b.load(&std::array::from_fn(|l| &stats[l][..]));
            let ridge = [0.0, 1e-3, 0.0, 2.0];
            let (want, ok_want) = fused_reference(p, &b.h, &ridge);
            let mut u = vec![[0.0; BATCH]; p * p];
            let mut dinv = vec![[0.0; BATCH]; p];
            // SAFETY: the CPU has AVX-512F and FMA (checked above).
            let ok = unsafe { cholesky_batch_avx512(p, &b.h, &ridge, &mut u, &mut dinv) };
            assert_eq!(ok, ok_want, "p={p}");
            assert!(!ok[2], "p={p}");
            for i in 0..p {
                for j in i..p {
                    for l in [0, 1, 3] {
                        assert_eq!(
                            u[i * p + j][l].to_bits(),
                            want[i * p + j][l].to_bits(),
                            "p={p} U[{i}][{j}] lane {l}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn an_indefinite_lane_gets_a_ridge_and_leaves_its_neighbour_alone() {
        // Lane 1: H = diag(2, -1e-3), g = (1, 1). Ridges 1e-10 * 2, then x100:
        // 2e-10, 2e-8, 2e-6, 2e-4 fail, 2e-2 makes -1e-3 + 0.02 = 0.019 > 0:
        // x = (-1 / 2.02, -1 / 0.019).
        let p = 2;
        let mut bad = vec![0.0; stats_len(1)];
        bad[1..3].copy_from_slice(&[1.0, 1.0]);
        bad[3..7].copy_from_slice(&[2.0, 0.0, 0.0, -1e-3]);
        let good = spd_stats(p, 3);
        let xs = solve(p, &[good.clone(), bad]);
        assert!((xs[1][0] + 1.0 / 2.02).abs() < 1e-12, "{:?}", xs[1]);
        assert!((xs[1][1] + 1.0 / 0.019).abs() < 1e-9, "{:?}", xs[1]);
        assert_eq!(xs[0], solve(p, &[good])[0]);
    }
}
