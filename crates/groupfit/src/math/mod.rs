//! Shared math of the kernels: the logistic function, branch-free `exp` and
//! `log1p` that vectorise, and the one CPU-feature dispatch mechanism
//! ([`simd`]).

pub mod simd;

/// SplitMix64 step: a well-mixed 64-bit hash of `z`.
pub fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A 64-bit FNV-1a hash (stable across builds): group keys and
/// architectures become RNG stream ids with it.
pub fn stable_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The logistic function, stable for large |z|.
pub fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// `ln 2` split in two: a high part with trailing zero bits (so `k * LN2_HI`
/// is exact for the `k` of [`exp_neg`]) and the rest.
const LN2_HI: f64 = 6.931_471_803_691_238_2e-1;
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;

/// `e^{-a}` for `a >= 0`, to about 1 ulp, branch-free (vectorisable).
#[inline(always)]
pub fn exp_neg(a: f64) -> f64 {
    const LOG2E: f64 = std::f64::consts::LOG2_E;
    const SHIFTER: f64 = 6_755_399_441_055_744.0; // 1.5 * 2^52: rounds to integer
    let x = (-a).max(-700.0);
    // `t`'s low mantissa bits hold the integer `k` (two's complement, below
    // the shifter's bit 51): its bits give `2^k` with integer adds and a
    // shift, which vectorise, where `kf as i64` (a saturating cast) is eight
    // scalar conversions per vector.
    let t = x * LOG2E + SHIFTER;
    let kf = t - SHIFTER;
    let r = (x - kf * LN2_HI) - kf * LN2_LO;
    // Taylor polynomial of e^r on |r| <= ln2/2, degree 12, evaluated by
    // Estrin's scheme (pairs, then powers r^2, r^4, r^8): a chain of four
    // multiply-adds instead of Horner's twelve, which left the vectorised
    // loop waiting on latency.
    let r2 = r * r;
    let r4 = r2 * r2;
    let r8 = r4 * r4;
    let a0 = 1.0 + r;
    let a1 = 0.5 + r * (1.0 / 6.0);
    let a2 = 1.0 / 24.0 + r * (1.0 / 120.0);
    let a3 = 1.0 / 720.0 + r * (1.0 / 5_040.0);
    let a4 = 1.0 / 40_320.0 + r * (1.0 / 362_880.0);
    let a5 = 1.0 / 3_628_800.0 + r * (1.0 / 39_916_800.0);
    let a6 = 1.0 / 479_001_600.0;
    let b0 = a0 + r2 * a1;
    let b1 = a2 + r2 * a3;
    let b2 = a4 + r2 * a5;
    let pz = (b0 + r4 * b1) + r8 * (b2 + r4 * a6);
    // -1010 <= k <= 0: `k + 1023` is a normal exponent.
    let scale = f64::from_bits(t.to_bits().wrapping_add(1023) << 52);
    pz * scale
}

/// `ln(1 + e)` for `e` in `[0, 1]`, to about 1 ulp, branch-free: `2 atanh(s)`
/// with `s = e / (2 + e)` up to `e = sqrt(2) - 1`, above it `ln 2 + 2
/// atanh(s)` with `s = (e - 1) / (e + 3)` (`(1 + e) / 2` in place of `1 + e`),
/// so `|s| <= 3 - 2 sqrt(2) < 0.1716` and the odd series stops at `s^19`.
#[inline(always)]
pub fn log1p_unit(e: f64) -> f64 {
    let big = e > std::f64::consts::SQRT_2 - 1.0;
    let (num, den) = if big {
        (e - 1.0, e + 3.0)
    } else {
        (e, 2.0 + e)
    };
    let s = num / den;
    // sum_{j=0..9} q^j / (2j + 1), q = s^2, by Estrin's scheme (see `exp_neg`).
    let q = s * s;
    let q2 = q * q;
    let q4 = q2 * q2;
    let a0 = 1.0 + q * (1.0 / 3.0);
    let a1 = 1.0 / 5.0 + q * (1.0 / 7.0);
    let a2 = 1.0 / 9.0 + q * (1.0 / 11.0);
    let a3 = 1.0 / 13.0 + q * (1.0 / 15.0);
    let a4 = 1.0 / 17.0 + q * (1.0 / 19.0);
    let acc = (a0 + q2 * a1) + q4 * ((a2 + q2 * a3) + q4 * a4);
    let r = 2.0 * s * acc;
    if big {
        LN2_HI + (LN2_LO + r)
    } else {
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigmoid_is_stable() {
        assert_eq!(sigmoid(0.0), 0.5);
        assert!(sigmoid(-800.0) >= 0.0 && sigmoid(-800.0) < 1e-300);
        assert_eq!(sigmoid(800.0), 1.0);
    }

    #[test]
    fn exp_and_log1p_match_libm() {
        for i in 0..1890 {
            let a = i as f64 * 0.37;
            let e = exp_neg(a);
            let want = (-a).exp();
            assert!(
                (e - want).abs() <= 4.0 * f64::EPSILON * want,
                "exp(-{a}): {e} vs {want}"
            );
        }
        assert!(exp_neg(1e6) < 1e-300);
        let edge = std::f64::consts::SQRT_2 - 1.0;
        let near = (-50..=50).map(|k| edge + k as f64 * f64::EPSILON);
        for e in (0..=1000).map(|i| i as f64 / 1000.0).chain(near) {
            let v = log1p_unit(e);
            assert!(
                (v - e.ln_1p()).abs() <= 4.0 * f64::EPSILON * e.ln_1p().max(1e-300),
                "{e}"
            );
        }
    }
}
