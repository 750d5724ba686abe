//! The one CPU-feature dispatch mechanism of the kernels.
//!
//! [`level`] is the widest SIMD level the CPU has, detected once. A kernel
//! writes its body once as an `#[inline(always)]` function and lets
//! [`simd_copy!`](crate::math::simd::simd_copy) compile a copy of it per
//! level; its entry point matches on [`level`] and calls the copy. Rust
//! never fuses a multiply and an add on its own, so every copy computes the
//! baseline's results bit for bit: only the vector width changes.

use std::sync::OnceLock;

/// SIMD levels, each a superset of the one before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// The baseline target.
    Scalar,
    /// AVX2, FMA and SSE4.1.
    Avx2,
    /// Also AVX-512 F, BW, VL and DQ.
    Avx512,
    /// Also AVX-512 VBMI2 (byte compress), BMI2 and POPCNT.
    Avx512Vbmi2,
}

/// The widest level this CPU has (detected on the first call).
pub fn level() -> Level {
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(detect)
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Level {
    use std::arch::is_x86_feature_detected as has;
    if !(has!("avx2") && has!("fma") && has!("sse4.1")) {
        return Level::Scalar;
    }
    if !(has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("avx512dq")) {
        return Level::Avx2;
    }
    if !(has!("avx512vbmi2") && has!("bmi2") && has!("popcnt")) {
        return Level::Avx512;
    }
    Level::Avx512Vbmi2
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Level {
    Level::Scalar
}

/// Compiles a copy of a kernel for one [`Level`]:
///
/// ```ignore
/// simd_copy!(Avx512 fn sum_avx512(v: &[f64]) -> f64 => sum_impl(v));
/// ```
///
/// defines `unsafe fn sum_avx512` with the level's target features, whose
/// body is the expression after `=>` (usually a call of an
/// `#[inline(always)]` function, which is then compiled for those
/// features). Call it only when [`level`] is at least that level.
macro_rules! simd_copy {
    ($(#[$m:meta])* Avx2 $($rest:tt)*) => {
        $crate::math::simd::simd_copy!(@emit "avx2,fma,sse4.1", $(#[$m])* $($rest)*);
    };
    ($(#[$m:meta])* Avx512 $($rest:tt)*) => {
        $crate::math::simd::simd_copy!(
            @emit "avx2,fma,sse4.1,avx512f,avx512bw,avx512vl,avx512dq",
            $(#[$m])* $($rest)*
        );
    };
    ($(#[$m:meta])* Avx512Vbmi2 $($rest:tt)*) => {
        $crate::math::simd::simd_copy!(
            @emit "avx2,fma,sse4.1,avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi2,bmi2,popcnt",
            $(#[$m])* $($rest)*
        );
    };
    (@emit $features:literal, $(#[$m:meta])*
        fn $name:ident $(<$($lt:lifetime),*>)? ($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)?
        => $body:expr) => {
        $(#[$m])*
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        #[allow(clippy::too_many_arguments)]
        unsafe fn $name $(<$($lt),*>)? ($($arg: $ty),*) $(-> $ret)? {
            $body
        }
    };
}
pub(crate) use simd_copy;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_ordered_and_detected_once() {
        assert!(Level::Scalar < Level::Avx2 && Level::Avx512 < Level::Avx512Vbmi2);
        assert_eq!(level(), level());
    }
}
