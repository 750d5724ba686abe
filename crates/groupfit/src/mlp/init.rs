//! Seeded randomness of the MLP family: the generator, PyTorch-default
//! initial weights, and each epoch's batch order.

use super::params::param_count;
use crate::math::stable_hash;

/// SplitMix64: the seeded generator behind initial weights and batch order.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for a stream identified by `parts` (mixed in order).
    pub fn new(parts: &[u64]) -> Rng {
        let mut r = Rng(0x6a09_e667_f3bc_c908);
        for &p in parts {
            r.0 ^= p;
            r.0 = r.next_u64();
        }
        r
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `[0, 1)` with 53 bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    /// Uniform integer in `0..n` (n > 0), without modulo bias.
    pub fn below(&mut self, n: u64) -> u64 {
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let v = self.next_u64();
            if v < zone {
                return v % n;
            }
        }
    }
}

/// PyTorch's default initialisation of every layer: weights and biases
/// uniform in `±1/sqrt(fan_in)`, drawn layer by layer (weights row-major
/// `n_in × n_out`, then biases) from the stream `(seed, group_stream,
/// architecture)`. Configs that differ only in optimizer settings start from
/// the same weights.
pub fn init_params(widths: &[usize], seed: u64, group_stream: u64) -> Vec<f32> {
    let arch: Vec<u8> = widths
        .iter()
        .flat_map(|w| (*w as u64).to_le_bytes())
        .collect();
    let mut rng = Rng::new(&[seed, group_stream, stable_hash(&arch), 1]);
    let mut p = Vec::with_capacity(param_count(widths));
    for win in widths.windows(2) {
        let bound = 1.0 / (win[0] as f64).sqrt();
        for _ in 0..win[0] * win[1] + win[1] {
            p.push(((rng.uniform() * 2.0 - 1.0) * bound) as f32);
        }
    }
    p
}

/// The permutation of a group's `n` rows for `epoch` (Fisher-Yates from the
/// stream `(seed, group_stream, epoch)`), written into `out`.
pub fn epoch_permutation(n: usize, seed: u64, group_stream: u64, epoch: u32, out: &mut Vec<u32>) {
    out.clear();
    out.extend(0..n as u32);
    let mut rng = Rng::new(&[seed, group_stream, epoch as u64, 2]);
    for i in (1..n).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        out.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_is_bounded_and_seeded() {
        let w = [4, 3, 1];
        let a = init_params(&w, 0, 7);
        assert_eq!(a.len(), 4 * 3 + 3 + 3 + 1);
        assert!(a[..15].iter().all(|v| v.abs() <= 0.5));
        assert!(a[15..].iter().all(|v| v.abs() <= 1.0 / 3f32.sqrt()));
        assert_eq!(a, init_params(&w, 0, 7));
        assert_ne!(a, init_params(&w, 1, 7));
        assert_ne!(a, init_params(&w, 0, 8));
        let mut p = Vec::new();
        epoch_permutation(10, 0, 7, 0, &mut p);
        let mut s = p.clone();
        s.sort();
        assert_eq!(s, (0..10).collect::<Vec<u32>>());
        let mut q = Vec::new();
        epoch_permutation(10, 0, 7, 1, &mut q);
        assert_ne!(p, q);
    }
}
