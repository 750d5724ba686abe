//! The one CPU-feature dispatch mechanism of the kernels.
//!
//! [`level`] is the widest SIMD level the CPU has, detected once. A kernel
//! writes its body once as an `#[inline(always)]` function and lets
//! `simd_copy!` compile a copy of it per
//! level; its entry point matches on [`level`] and calls the copy. Rust
//! never fuses a multiply and an add on its own, so a copy that only widens
//! the vectors computes the baseline's results bit for bit (gbdt's kernels).
//! Kernels that fuse multiply-adds or sum in as many lanes as their level
//! has (linear's and mlp's) give results that agree to rounding.

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

/// The widest level this CPU has (detected on the first call), capped by
/// the environment variable `GROUPFIT_SIMD` when it names a level
/// (`scalar`, `avx2`, `avx512`, `avx512vbmi2`; see [`Level::parse`]; `train`
/// refuses an unknown name, [`unknown_cap`]). The cap changes the speed, and
/// the results only as the module docs say.
pub fn level() -> Level {
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        let cap = std::env::var("GROUPFIT_SIMD").ok();
        match cap.as_deref().and_then(Level::parse) {
            Some(cap) => detect().min(cap),
            None => detect(),
        }
    })
}

/// The value of `GROUPFIT_SIMD`, when it is set and names no level.
pub fn unknown_cap() -> Option<String> {
    let cap = std::env::var("GROUPFIT_SIMD").ok()?;
    Level::parse(&cap).is_none().then_some(cap)
}

impl Level {
    /// The level named `s` (case-insensitive), if any.
    pub fn parse(s: &str) -> Option<Level> {
        match s.to_ascii_lowercase().as_str() {
            "scalar" => Some(Level::Scalar),
            "avx2" => Some(Level::Avx2),
            "avx512" => Some(Level::Avx512),
            "avx512vbmi2" => Some(Level::Avx512Vbmi2),
            _ => None,
        }
    }
    /// The level's name, as [`Level::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Level::Scalar => "scalar",
            Level::Avx2 => "avx2",
            Level::Avx512 => "avx512",
            Level::Avx512Vbmi2 => "avx512vbmi2",
        }
    }
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

/// Compiles copies of a kernel, one per [`Level`]:
///
/// ```ignore
/// simd_copy!(
///     [Avx512 sum_avx512 => sum_impl(v, true), Avx2 sum_avx2 => sum_impl(v, false)]
///     fn(v: &[f64]) -> f64
/// );
/// ```
///
/// defines `unsafe fn sum_avx512` and `unsafe fn sum_avx2` with that
/// signature and their level's target features, each body the expression
/// after its `=>` (usually a call of an `#[inline(always)]` function, which
/// is then compiled for those features). Call a copy only when [`level`] is
/// at least its level.
macro_rules! simd_copy {
    ([$($copies:tt)*] fn $($signature:tt)*) => {
        $crate::math::simd::simd_copy!(@each [$($signature)*] $($copies)*);
    };
    (@each [$($signature:tt)*]) => {};
    (@each [$($signature:tt)*] $(#[$m:meta])* $level:ident $name:ident => $body:expr
        $(, $($rest:tt)*)?) => {
        $crate::math::simd::simd_copy!(@level $level, $(#[$m])* $name $($signature)* => $body);
        $crate::math::simd::simd_copy!(@each [$($signature)*] $($($rest)*)?);
    };
    (@level Avx2, $($copy:tt)*) => {
        $crate::math::simd::simd_copy!(@emit "avx2,fma,sse4.1", $($copy)*);
    };
    (@level Avx512, $($copy:tt)*) => {
        $crate::math::simd::simd_copy!(
            @emit "avx2,fma,sse4.1,avx512f,avx512bw,avx512vl,avx512dq",
            $($copy)*
        );
    };
    (@level Avx512Vbmi2, $($copy:tt)*) => {
        $crate::math::simd::simd_copy!(
            @emit "avx2,fma,sse4.1,avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi2,bmi2,popcnt",
            $($copy)*
        );
    };
    (@emit $features:literal, $(#[$m:meta])*
        $name:ident $(<$($lt:lifetime),*>)? ($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)?
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

    #[test]
    fn level_names_parse_back() {
        for l in [
            Level::Scalar,
            Level::Avx2,
            Level::Avx512,
            Level::Avx512Vbmi2,
        ] {
            assert_eq!(Level::parse(l.name()), Some(l));
        }
        assert_eq!(Level::parse("AVX2"), Some(Level::Avx2));
        assert_eq!(Level::parse("sse9"), None);
    }
}
