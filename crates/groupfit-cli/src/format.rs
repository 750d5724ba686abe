//! Number and score formatting shared by the commands' text output.

/// `1234567` as `1,234,567`.
pub use groupfit::util::text::thousands as fmt_int;

/// A byte count in B, KiB, MiB or GiB.
pub fn fmt_bytes(b: usize) -> String {
    match b {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}
