//! Numerically sound running statistics for kernels.
//!
//! A sum and a sum of squares lose the variance of a row with a large mean
//! and a small spread (catastrophic cancellation). Kernels instead keep
//! [`Moments`] (count, mean, centred second moment) of values shifted by a
//! sample of the row, and merge partial moments with Chan's formula. The
//! shift keeps `x - shift` exact where a row's values are close together,
//! so the mean loses nothing to f32 rounding at magnitude 1e3.

use crate::device::{F32x4, shuffle_down, shuffle_idx};

/// Count, mean and centred second moment (sum of squared deviations).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Moments {
    pub n: f32,
    pub mean: f32,
    pub m2: f32,
}

impl Moments {
    pub const EMPTY: Moments = Moments { n: 0.0, mean: 0.0, m2: 0.0 };

    /// The moments of four values, centred exactly within the quad.
    #[inline(always)]
    pub fn of_quad(q: F32x4) -> Moments {
        let mean = q.sum() * 0.25;
        let d = q.map(|v| v - mean);
        Moments { n: 4.0, mean, m2: (d.x * d.x + d.y * d.y) + (d.z * d.z + d.w * d.w) }
    }

    /// Chan's merge of two disjoint sets' moments.
    #[inline(always)]
    pub fn merge(self, o: Moments) -> Moments {
        let n = self.n + o.n;
        if o.n == 0.0 {
            return self;
        }
        if self.n == 0.0 {
            return o;
        }
        let d = o.mean - self.mean;
        let f = o.n / n;
        Moments { n, mean: self.mean + d * f, m2: self.m2 + o.m2 + d * d * self.n * f }
    }

    /// Biased variance: `m2 / n`.
    #[inline(always)]
    pub fn variance(self) -> f32 {
        self.m2 / self.n
    }

    /// `shuffle_down` of all three fields.
    #[inline(always)]
    pub fn shuffle_down(self, delta: u32) -> Moments {
        Moments { n: shuffle_down(self.n, delta), mean: shuffle_down(self.mean, delta), m2: shuffle_down(self.m2, delta) }
    }

    /// Merges the moments of all 32 lanes into lane 0 (a shuffle-down tree;
    /// other lanes hold partial results).
    #[inline(always)]
    pub fn warp_reduce(self) -> Moments {
        let mut m = self;
        let mut delta = 16;
        while delta > 0 {
            m = m.merge(m.shuffle_down(delta));
            delta >>= 1;
        }
        m
    }

    /// [`warp_reduce`](Self::warp_reduce), then lane 0's result to every lane.
    #[inline(always)]
    pub fn warp_allreduce(self) -> Moments {
        let m = self.warp_reduce();
        Moments { n: shuffle_idx(m.n, 0), mean: shuffle_idx(m.mean, 0), m2: shuffle_idx(m.m2, 0) }
    }
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    fn of(values: &[f32]) -> Moments {
        values.chunks(4).map(|c| Moments::of_quad(F32x4::new(c[0], c[1], c[2], c[3]))).fold(Moments::EMPTY, Moments::merge)
    }

    #[test]
    fn merge_matches_two_pass_statistics() {
        let v: Vec<f32> = (0..64).map(|i| ((i * 37 % 17) as f32 - 8.0) * 0.3).collect();
        let m = of(&v);
        let mean = v.iter().map(|x| *x as f64).sum::<f64>() / 64.0;
        let var = v.iter().map(|x| (*x as f64 - mean).powi(2)).sum::<f64>() / 64.0;
        assert_eq!(m.n, 64.0);
        assert!((m.mean as f64 - mean).abs() < 1e-6, "{} vs {mean}", m.mean);
        assert!((m.variance() as f64 - var).abs() < 1e-5 * var, "{} vs {var}", m.variance());
    }

    #[test]
    fn empty_sides_are_identities() {
        let m = Moments { n: 4.0, mean: 2.0, m2: 1.0 };
        assert_eq!(m.merge(Moments::EMPTY), m);
        assert_eq!(Moments::EMPTY.merge(m), m);
    }

    #[test]
    fn constant_values_have_exact_mean_and_zero_spread() {
        let m = of(&[1000.1f32; 32]);
        assert_eq!(m.mean, 1000.1f32);
        assert_eq!(m.m2, 0.0);
    }
}
