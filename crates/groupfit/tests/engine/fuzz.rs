//! Mutated model files: over 20,000 damaged copies of the golden files,
//! each with its header mended so that the parser sees the damage (bit
//! flips, truncations, section lengths set to extremes, JSON values of
//! other types or removed). Each must load or fail with a model-file error,
//! with no panic and no allocation larger than a small multiple of the
//! file's size; a loaded one must predict the golden rows or fail cleanly.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::{Path, PathBuf};

use groupfit::error::GroupfitError;
use groupfit::store::ModelBundle;

/// The system allocator, noting the largest single allocation of a thread
/// while it watches ([`largest_while`]).
struct Largest;

thread_local! {
    static WATCHING: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = WATCHING.try_with(|w| {
        if w.get() {
            let _ = LARGEST.try_with(|m| m.set(m.get().max(size)));
        }
    });
}

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Largest = Largest;

/// `f()`'s result and the largest allocation this thread made in it.
fn largest_while<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|m| m.set(0));
    WATCHING.with(|w| w.set(true));
    let out = f();
    WATCHING.with(|w| w.set(false));
    (out, LARGEST.with(Cell::get))
}

const HEADER: usize = 24;

/// splitmix64: the mutations are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// `payload` behind a header that matches it (length and checksum), with
/// the version of `original`.
fn with_header(original: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut out = original[..12].to_vec();
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// The payload's binary section (format 4 on) and JSON.
fn split_payload(version: u32, payload: &[u8]) -> (Vec<u8>, Vec<u8>) {
    if version < 4 {
        return (Vec::new(), payload.to_vec());
    }
    let n = u64::from_le_bytes(payload[..8].try_into().unwrap()) as usize;
    (payload[..8 + n].to_vec(), payload[8 + n..].to_vec())
}

/// Values a JSON value is replaced with: other types, extremes.
fn replacement(rng: &mut Rng) -> serde_json::Value {
    use serde_json::json;
    match rng.below(12) {
        0 => json!(null),
        1 => json!(true),
        2 => json!(-1),
        3 => json!(0),
        4 => json!(4294967295u64),
        5 => json!(18446744073709551615u64),
        6 => json!(1e308),
        7 => json!("x"),
        8 => json!([]),
        9 => json!({}),
        10 => json!([1, 2, 3]),
        _ => json!(1_000_000_000),
    }
}

/// A random node of `v` (a mutable reference), found by walking down.
fn random_node<'a>(v: &'a mut serde_json::Value, rng: &mut Rng) -> &'a mut serde_json::Value {
    let depth = rng.below(8);
    let mut node = v;
    for _ in 0..depth {
        let n = match node {
            serde_json::Value::Array(a) if !a.is_empty() => a.len(),
            serde_json::Value::Object(o) if !o.is_empty() => o.len(),
            _ => break,
        };
        let i = rng.below(n);
        node = match node {
            serde_json::Value::Array(a) => &mut a[i],
            serde_json::Value::Object(o) => o.values_mut().nth(i).unwrap(),
            _ => unreachable!(),
        };
    }
    node
}

/// One damaged copy of `file` (of format `version`), by mutation `kind`.
fn mutate(file: &[u8], version: u32, kind: usize, rng: &mut Rng) -> Vec<u8> {
    let payload = &file[HEADER..];
    match kind {
        // bit flips anywhere in the payload
        0 => {
            let mut p = payload.to_vec();
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(p.len());
                p[i] ^= 1 << rng.below(8);
            }
            with_header(file, &p)
        }
        // truncation
        1 => with_header(file, &payload[..rng.below(payload.len())]),
        // the binary section's length set to an extreme
        2 => {
            let mut p = payload.to_vec();
            let n = p.len() as u64;
            let len: u64 = match rng.below(6) {
                0 => 0,
                1 => u64::MAX,
                2 => n.saturating_sub(8),
                3 => n,
                4 => 1 << 40,
                _ => rng.next() % (n + 16),
            };
            p[..8].copy_from_slice(&len.to_le_bytes());
            with_header(file, &p)
        }
        // a JSON value replaced by one of another type or an extreme,
        // or an object's member removed
        3 | 4 => {
            let (section, json) = split_payload(version, payload);
            let mut v: serde_json::Value = serde_json::from_slice(&json).unwrap();
            let node = random_node(&mut v, rng);
            if kind == 4 {
                if let serde_json::Value::Object(o) = node {
                    if let Some(k) = o.keys().nth(rng.below(o.len())).cloned() {
                        o.remove(&k);
                    }
                }
            } else {
                *node = replacement(rng);
            }
            let mut p = section;
            p.extend_from_slice(&serde_json::to_vec(&v).unwrap());
            with_header(file, &p)
        }
        // header damage, left unmended
        _ => {
            let mut f = file.to_vec();
            let i = rng.below(HEADER);
            f[i] = rng.next() as u8;
            f
        }
    }
}

/// The golden directory's files ending in `.{ext}`, sorted.
fn golden(ext: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    files.sort();
    files
}

#[test]
fn twenty_thousand_damaged_model_files_load_or_fail_cleanly() {
    let files: Vec<(PathBuf, Vec<u8>)> = golden("gfm")
        .into_iter()
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    let rows = golden("parquet");
    assert!(files.len() >= 10 && !rows.is_empty());
    let per_file = 20_000usize.div_ceil(files.len());
    let (mut loaded, mut refused, mut predicted) = (0usize, 0usize, 0usize);
    for (f, (path, bytes)) in files.iter().enumerate() {
        let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
        let mut rng = Rng(0x5EED ^ f as u64);
        for i in 0..per_file {
            let kind = i % 6;
            let damaged = mutate(bytes, version, kind, &mut rng);
            let what = format!("{} mutation {i} (kind {kind})", path.display());
            let (result, largest) = largest_while(|| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    ModelBundle::from_bytes(&damaged, path)
                }))
            });
            let result = result.unwrap_or_else(|_| panic!("{what}: loading panicked"));
            // a small multiple of the file's size (and of the golden
            // model's own needs), never what a damaged length asks for
            assert!(
                largest <= 64 * bytes.len().max(damaged.len()) + (1 << 20),
                "{what}: allocated {largest} bytes for a {}-byte file",
                damaged.len()
            );
            match result {
                Ok(bundle) => {
                    loaded += 1;
                    for r in &rows {
                        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            groupfit::job::predict_batch(&bundle, r, true)
                        }));
                        match out {
                            Ok(Ok(_)) => predicted += 1,
                            Ok(Err(_)) => {}
                            Err(_) => panic!("{what}: predicting {} panicked", r.display()),
                        }
                    }
                }
                Err(
                    GroupfitError::CorruptModel { .. } | GroupfitError::UnsupportedVersion { .. },
                ) => refused += 1,
                Err(e) => panic!("{what}: not a model-file error: {e}"),
            }
        }
    }
    assert!(loaded + refused >= 20_000);
    // Some damage is harmless (a flipped bit in a weight) and some is not.
    assert!(
        loaded > 0 && refused > 0 && predicted > 0,
        "{loaded} {refused} {predicted}"
    );
}
