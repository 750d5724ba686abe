//! The Hessian tiles of the linear family's kernel: the upper triangle of
//! `B B^T` for a feature-major block `B`, in register-tiled `f32` (4 x 4
//! outputs per tile), with AVX-512 and AVX2 copies chosen at run time.

use crate::data::layout::LANES;
use crate::math::simd::{level, Level};

/// Tile edge of the Hessian kernel (4 x 4 outputs per tile).
pub(super) const TILE: usize = 4;

/// Upper-triangle tiles of `B B^T` for `B` = `pp` rows of `bt` of `mp`
/// columns each (row stride `mp`, a multiple of [`LANES`]; `pp` a multiple of
/// the tile edge), in `f32`, written into `hc` (`pp x pp`, row-major).
/// Diagonal tiles are written whole.
#[inline(always)]
pub(super) fn syrk_upper(bt: &[f32], mp: usize, pp: usize, hc: &mut [f32]) {
    assert!(bt.len() >= pp * mp && hc.len() >= pp * pp && mp % LANES == 0 && pp % TILE == 0);
    #[cfg(target_arch = "x86_64")]
    match level() {
        // SAFETY: the level has the copy's features; indices stay within
        // `bt` and `hc` (asserted above).
        Level::Avx512 | Level::Avx512Vbmi2 => return unsafe { syrk_avx512(bt, pp, mp, hc) },
        // SAFETY: as above.
        Level::Avx2 => return unsafe { syrk_avx2(bt, pp, mp, hc) },
        Level::Scalar => {}
    }
    syrk_scalar(bt, pp, mp, hc)
}

fn syrk_scalar(bt: &[f32], pp: usize, mp: usize, hc: &mut [f32]) {
    for j in (0..pp).step_by(TILE) {
        for k in (j..pp).step_by(TILE) {
            for u in 0..TILE {
                for v in 0..TILE {
                    let a = &bt[(j + u) * mp..(j + u) * mp + mp];
                    let b = &bt[(k + v) * mp..(k + v) * mp + mp];
                    hc[(j + u) * pp + k + v] = a.iter().zip(b).map(|(x, y)| x * y).sum();
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn syrk_avx512(bt: &[f32], pp: usize, mp: usize, hc: &mut [f32]) {
    use std::arch::x86_64::*;
    let base = bt.as_ptr();
    for jt in (0..pp).step_by(TILE) {
        for kt in (jt..pp).step_by(TILE) {
            let mut acc = [_mm512_setzero_ps(); TILE * TILE];
            let mut l = 0;
            while l < mp {
                let a = [
                    _mm512_loadu_ps(base.add(jt * mp + l)),
                    _mm512_loadu_ps(base.add((jt + 1) * mp + l)),
                    _mm512_loadu_ps(base.add((jt + 2) * mp + l)),
                    _mm512_loadu_ps(base.add((jt + 3) * mp + l)),
                ];
                let b = [
                    _mm512_loadu_ps(base.add(kt * mp + l)),
                    _mm512_loadu_ps(base.add((kt + 1) * mp + l)),
                    _mm512_loadu_ps(base.add((kt + 2) * mp + l)),
                    _mm512_loadu_ps(base.add((kt + 3) * mp + l)),
                ];
                for u in 0..TILE {
                    for v in 0..TILE {
                        acc[u * TILE + v] = _mm512_fmadd_ps(a[u], b[v], acc[u * TILE + v]);
                    }
                }
                l += 16;
            }
            let sums = hsum16(&acc);
            // Row `u` of the tile: 4 values inside `hc` (pp x pp, kt + 4 <= pp).
            let out = hc.as_mut_ptr();
            let row = |u: usize| out.add((jt + u) * pp + kt);
            _mm_storeu_ps(row(0), _mm512_extractf32x4_ps::<0>(sums));
            _mm_storeu_ps(row(1), _mm512_extractf32x4_ps::<1>(sums));
            _mm_storeu_ps(row(2), _mm512_extractf32x4_ps::<2>(sums));
            _mm_storeu_ps(row(3), _mm512_extractf32x4_ps::<3>(sums));
        }
    }
}

/// The sums of 16 vectors, lane `i` holding the sum of `acc[i]`: a tree of
/// 15 additions of whole vectors (with shuffles pairing their halves, then
/// quarters, then lanes) instead of 16 separate horizontal sums, which cost
/// more than the tile's products when blocks are short.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn hsum16(acc: &[std::arch::x86_64::__m512; 16]) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;
    // Where each accumulator enters the tree so that lane `i` comes out
    // holding `acc[i]`'s sum: lane `4q + e` of the result sums input
    // `[0, 8, 4, 12][q] + [0, 2, 1, 3][e]`.
    const AT: [usize; 16] = [0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15];
    let mut a = [_mm512_setzero_ps(); 16];
    for (i, &at) in AT.iter().enumerate() {
        a[at] = acc[i];
    }
    // Halves: s1[i] holds a[i]'s sum in quarters 0-1, a[i + 8]'s in 2-3.
    let s1: [__m512; 8] = std::array::from_fn(|i| {
        let lo = _mm512_shuffle_f32x4::<0x44>(a[i], a[i + 8]);
        let hi = _mm512_shuffle_f32x4::<0xEE>(a[i], a[i + 8]);
        _mm512_add_ps(lo, hi)
    });
    // Quarters: s2[i] holds, per quarter, a[i], a[i + 8], a[i + 4], a[i + 12].
    let s2: [__m512; 4] = std::array::from_fn(|i| {
        let lo = _mm512_shuffle_f32x4::<0x88>(s1[i], s1[i + 4]);
        let hi = _mm512_shuffle_f32x4::<0xDD>(s1[i], s1[i + 4]);
        _mm512_add_ps(lo, hi)
    });
    // Lane pairs, then lanes, inside each quarter.
    let s3: [__m512; 2] = std::array::from_fn(|i| {
        let lo = _mm512_shuffle_ps::<0x44>(s2[i], s2[i + 2]);
        let hi = _mm512_shuffle_ps::<0xEE>(s2[i], s2[i + 2]);
        _mm512_add_ps(lo, hi)
    });
    let lo = _mm512_shuffle_ps::<0x88>(s3[0], s3[1]);
    let hi = _mm512_shuffle_ps::<0xDD>(s3[0], s3[1]);
    _mm512_add_ps(lo, hi)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn syrk_avx2(bt: &[f32], pp: usize, mp: usize, hc: &mut [f32]) {
    use std::arch::x86_64::*;
    let base = bt.as_ptr();
    for jt in (0..pp).step_by(TILE) {
        for kt in (jt..pp).step_by(TILE) {
            let mut acc = [_mm256_setzero_ps(); TILE * TILE];
            let mut l = 0;
            while l < mp {
                for u in 0..TILE {
                    let a = _mm256_loadu_ps(base.add((jt + u) * mp + l));
                    for v in 0..TILE {
                        let b = _mm256_loadu_ps(base.add((kt + v) * mp + l));
                        acc[u * TILE + v] = _mm256_fmadd_ps(a, b, acc[u * TILE + v]);
                    }
                }
                l += 8;
            }
            for u in 0..TILE {
                for v in 0..TILE {
                    let mut lanes = [0.0f32; 8];
                    _mm256_storeu_ps(lanes.as_mut_ptr(), acc[u * TILE + v]);
                    hc[(jt + u) * pp + kt + v] = lanes.iter().sum();
                }
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A feature-major block of `m` rows (`x[i][j]` given row-major), padded.
    pub(in crate::linear) fn block_of(x: &[f32], d: usize, m: usize) -> (Vec<f32>, usize, usize) {
        let dp = d.div_ceil(TILE) * TILE;
        let wd = m.div_ceil(LANES) * LANES;
        let mut b = vec![0.0; dp * wd];
        for i in 0..m {
            for j in 0..d {
                b[j * wd + i] = x[i * d + j];
            }
        }
        (b, dp, wd)
    }

    #[test]
    fn hessian_tiles_match_naive_product() {
        let (d, m) = (6, 37);
        let x: Vec<f32> = (0..m * d)
            .map(|i| ((i * 31) % 17) as f32 / 8.0 - 1.0)
            .collect();
        let (b, dp, wd) = block_of(&x, d, m);
        let mut hc = vec![0.0; dp * dp];
        syrk_upper(&b, wd, dp, &mut hc);
        let mut hs = vec![0.0; dp * dp];
        syrk_scalar(&b, dp, wd, &mut hs);
        for j in 0..d {
            for k in j..d {
                let want: f64 = (0..m)
                    .map(|i| x[i * d + j] as f64 * x[i * d + k] as f64)
                    .sum();
                assert!((hc[j * dp + k] as f64 - want).abs() < 1e-4, "{j},{k}");
                assert!((hs[j * dp + k] as f64 - want).abs() < 1e-4, "{j},{k}");
            }
        }
    }
}
