//! The process's memory: what the machine has available for it, sizes as
//! people write them (`4G`), and handing freed heap pages back to the system.

/// Returns the heap's free pages to the system (glibc's `malloc_trim`).
/// glibc keeps freed buffers for reuse, so the resident set of a process
/// that freed a stage's data stays as high as it was. A driver that holds
/// little between stages (the Ray runner's) calls this before its next one.
/// Elsewhere it does nothing.
pub fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory; it is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The process's peak resident set so far (`VmHWM`), in bytes; `None`
/// where `/proc/self/status` cannot be read.
pub fn peak_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    kib_field(&status, "VmHWM:").map(|kib| kib * 1024)
}

/// The value of the `NAME:  123 kB` line of a `/proc` text, in KiB.
pub fn kib_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    line[name.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// Memory a new job may use, in bytes, and where the figure comes from:
/// the smaller of the system's `MemAvailable` and the control group's limit
/// less its usage (cgroup v2 `memory.max`, v1 `memory.limit_in_bytes`).
/// `None` where neither can be read.
pub fn available() -> Option<(u64, &'static str)> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let system = meminfo.as_deref().and_then(mem_available);
    let group = cgroup_room();
    match (system, group) {
        (Some(s), Some(g)) if g < s => Some((g, "the control group's limit")),
        (Some(s), _) => Some((s, "MemAvailable")),
        (None, Some(g)) => Some((g, "the control group's limit")),
        (None, None) => None,
    }
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    kib_field(meminfo, "MemAvailable:").map(|kib| kib * 1024)
}

/// The control group's limit less its usage (`None`: no limit).
fn cgroup_room() -> Option<u64> {
    let read = |p: &str| -> Option<u64> { std::fs::read_to_string(p).ok()?.trim().parse().ok() };
    let pairs = [
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        (
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "/sys/fs/cgroup/memory/memory.usage_in_bytes",
        ),
    ];
    pairs.iter().find_map(|(limit, usage)| {
        // "max" (v2) does not parse; v1's "no limit" is near 2^63.
        let limit = read(limit).filter(|&l| l < 1 << 60)?;
        Some(limit.saturating_sub(read(usage).unwrap_or(0)))
    })
}

/// A size as people write it: `4G`, `512M`, `1.5GB`, `800MiB`, `1000000`
/// (bytes). K, M, G and T are powers of 1,024, with or without `B` or `iB`.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number.parse().ok()?;
    let unit = unit.trim().to_ascii_uppercase();
    let unit = unit
        .strip_suffix("IB")
        .or_else(|| unit.strip_suffix('B'))
        .unwrap_or(&unit);
    let scale = match unit {
        "" => 1u64,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return None,
    };
    let bytes = value * scale as f64;
    (value.is_finite() && bytes >= 1.0 && bytes < 1.8e19).then_some(bytes as u64)
}

/// A size for people: `812 MB`, `3.2 GB` (powers of 1,024).
pub fn show_size(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.1} GB", b / (1u64 << 30) as f64)
    } else {
        format!("{:.0} MB", (b / (1u64 << 20) as f64).max(1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_as_written() {
        assert_eq!(parse_size("4G"), Some(4 << 30));
        assert_eq!(parse_size("4GB"), Some(4 << 30));
        assert_eq!(parse_size("1.5gib"), Some(3 << 29));
        assert_eq!(parse_size("512M"), Some(512 << 20));
        assert_eq!(parse_size("1000000"), Some(1_000_000));
        assert_eq!(parse_size(" 2 T "), Some(2 << 40));
        for bad in ["", "G", "4X", "-1G", "0", "1e3G", "4 GBs"] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
        assert_eq!(show_size(4 << 30), "4.0 GB");
        assert_eq!(show_size(300 << 20), "300 MB");
    }

    #[test]
    fn mem_available_is_read_from_meminfo() {
        let text = "MemTotal:       24000000 kB\nMemAvailable:   22702124 kB\n";
        assert_eq!(mem_available(text), Some(22_702_124 * 1024));
        assert_eq!(mem_available("MemTotal: 1 kB\n"), None);
        if std::path::Path::new("/proc/meminfo").exists() {
            assert!(available().is_some_and(|(b, _)| b > 0));
        }
    }
}
