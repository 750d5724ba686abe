//! The CLI's integration tests (one test binary for the crate), snapshot style.
//!
//! Each test runs the real `groupfit` binary on a small deterministic dataset
//! (a plain LCG, no RNG crate) and compares what it prints with a file in
//! `tests/snapshots/`. Before comparing, the temporary directory is replaced
//! by `<tmp>`, the crate version by `<version>`, timings such as `0.13s`
//! by `<t>s`, and the machine's memory figures (the peak and the limit of
//! the `memory:` line) by `<m>`.
//!
//! To accept new output after a deliberate change, run
//!
//! ```text
//! UPDATE_SNAPSHOTS=1 cargo test --release -p groupfit-cli --test cli
//! ```
//!
//! and review the diff of `tests/snapshots/` before committing it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array, Float64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use groupfit::job::write_parquet;

const BIN: &str = env!("CARGO_BIN_EXE_groupfit");
const VERSION: &str = env!("CARGO_PKG_VERSION");

// ---------------------------------------------------------------------------
// Data
// ---------------------------------------------------------------------------

/// Knuth's MMIX linear congruential generator.
struct Lcg(u64);

impl Lcg {
    /// Uniform in [0, 1) from the top 53 bits of the next state.
    fn unit(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A binary dataset: groups `AA` (300 rows), `BB` (200), `CC` (120) with
/// their own coefficients, `DD` (6 rows: below --min-rows 10) and `EE`
/// (40 rows, target always 0: one class). Rows of the groups interleave.
/// Only arithmetic (no `exp`), so the file is the same on every platform.
fn dataset(seed: u64, groups: &[(&str, usize)]) -> RecordBatch {
    let mut rng = Lcg(seed);
    let coef = |g: usize| -> [f64; 4] {
        [
            [0.5, 1.5, -1.0, 0.3],
            [-0.4, -0.7, 0.0, 1.2],
            [0.2, 0.4, 2.0, -0.8],
            [0.0, 1.0, 1.0, 1.0],
            [0.0, 0.0, 0.0, 0.0],
        ][g % 5]
    };
    let mut left: Vec<usize> = groups.iter().map(|g| g.1).collect();
    let (mut keys, mut f0, mut f1, mut f2, mut y) = (vec![], vec![], vec![], vec![], vec![]);
    while left.iter().any(|&n| n > 0) {
        for (g, (name, _)) in groups.iter().enumerate() {
            if left[g] == 0 {
                continue;
            }
            left[g] -= 1;
            let x: Vec<f32> = (0..3).map(|_| (rng.unit() * 4.0 - 2.0) as f32).collect();
            let w = coef(g);
            let margin = w[0] + (0..3).map(|j| w[j + 1] * x[j] as f64).sum::<f64>();
            let noise = (rng.unit() - 0.5) * 3.0;
            let label = if *name == "EE" {
                0.0
            } else {
                f64::from(u8::from(margin + noise > 0.0))
            };
            keys.push(name.to_string());
            f0.push(x[0]);
            f1.push(x[1]);
            f2.push(x[2]);
            y.push(label);
        }
    }
    let schema = Schema::new(vec![
        Field::new("g", DataType::Utf8, false),
        Field::new("f0", DataType::Float32, false),
        Field::new("f1", DataType::Float32, false),
        Field::new("f2", DataType::Float32, false),
        Field::new("y", DataType::Float64, false),
    ]);
    let cols: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(keys)),
        Arc::new(Float32Array::from(f0)),
        Arc::new(Float32Array::from(f1)),
        Arc::new(Float32Array::from(f2)),
        Arc::new(Float64Array::from(y)),
    ];
    RecordBatch::try_new(Arc::new(schema), cols).unwrap()
}

const TRAIN_GROUPS: &[(&str, usize)] =
    &[("AA", 300), ("BB", 200), ("CC", 120), ("DD", 6), ("EE", 40)];

/// Rows to predict: 2 per trained group, 3 of an unseen group `ZZ`.
const PREDICT_GROUPS: &[(&str, usize)] = &[
    ("AA", 2),
    ("BB", 2),
    ("CC", 2),
    ("DD", 2),
    ("EE", 2),
    ("ZZ", 3),
];

/// A temporary directory with `train.parquet` and `rows.parquet`.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        write_parquet(
            &dir.path().join("train.parquet"),
            &dataset(42, TRAIN_GROUPS),
        )
        .unwrap();
        write_parquet(
            &dir.path().join("rows.parquet"),
            &dataset(7, PREDICT_GROUPS),
        )
        .unwrap();
        Fixture { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn p(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }

    /// `train` with fixed threads and strategy, so the output is reproducible.
    fn train_args(&self, out: &str) -> Vec<String> {
        [
            "train",
            "--data",
            &self.p("train.parquet"),
            "--by",
            "g",
            "--target",
            "y",
            "--param",
            "C=0.1,1",
            "--threads",
            "2",
            "--strategy",
            "tp",
            "--out",
            &self.p(out),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    /// Trains `model.gfm` (text mode) and returns the run.
    fn trained(&self) -> Output {
        let out = run(&self.train_args("model.gfm"));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// Runs the binary and renders the run (command, exit code, stdout,
    /// stderr) with paths, version and timings masked.
    fn transcript(&self, args: &[String], out: &Output) -> String {
        let mask = |s: &str| -> String {
            mask_memory(&mask_timings(
                &s.replace(&self.dir.path().display().to_string(), "<tmp>")
                    .replace(&format!("groupfit {VERSION}"), "groupfit <version>"),
            ))
        };
        let mut t = format!("$ groupfit {}\n", mask(&args.join(" ")));
        t += &format!("exit: {}\n", out.status.code().unwrap_or(-1));
        t += "--- stdout\n";
        t += &mask(&String::from_utf8_lossy(&out.stdout));
        t += "--- stderr\n";
        t += &mask(&String::from_utf8_lossy(&out.stderr));
        t
    }
}

fn run(args: &[String]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("GROUPFIT_TRACE")
        .output()
        .expect("run groupfit")
}

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------------------
// Snapshots
// ---------------------------------------------------------------------------

/// Replaces every float immediately followed by `s` (a timing like `0.13s`,
/// not part of a longer word) with `<t>s`.
fn mask_timings(s: &str) -> String {
    let c: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < c.len() {
        let starts_number =
            c[i].is_ascii_digit() && (i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '.'));
        if starts_number {
            let mut j = i;
            while j < c.len() && (c[j].is_ascii_digit() || c[j] == '.') {
                j += 1;
            }
            let is_float = c[i..j].contains(&'.');
            let unit_s = j < c.len() && c[j] == 's';
            let word_ends = j + 1 >= c.len() || !c[j + 1].is_alphanumeric();
            if is_float && unit_s && word_ends {
                out.push_str("<t>");
            } else {
                out.extend(&c[i..j]);
            }
            i = j;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// In a `memory: peak X, estimated Y (limit Z, SOURCE)` line, replaces
/// the peak and the limit (this machine's) with `<m>`; the estimate stays.
fn mask_memory(s: &str) -> String {
    let line = |l: &str| -> String {
        let Some(rest) = l.strip_prefix("memory: ") else {
            return l.to_string();
        };
        let estimate = rest.find("estimated").map_or(rest, |i| &rest[i..]);
        let estimate = estimate
            .find(" (limit")
            .map_or(estimate, |i| &estimate[..i]);
        format!("memory: peak <m>, {estimate} (limit <m>)")
    };
    let mut out: Vec<String> = s.lines().map(line).collect();
    if s.ends_with('\n') {
        out.push(String::new());
    }
    out.join("\n")
}

fn snapshot_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots")
}

/// Compares `actual` with `tests/snapshots/<name>`, or rewrites the file when
/// `UPDATE_SNAPSHOTS=1`.
fn assert_snapshot(name: &str, actual: &str) {
    let path = snapshot_dir().join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(snapshot_dir()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "snapshot {} is missing; run with UPDATE_SNAPSHOTS=1 to create it\n--- actual\n{actual}",
            path.display()
        )
    });
    if expected != actual {
        let mut diff = String::new();
        let (e, a): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
        for i in 0..e.len().max(a.len()) {
            let (x, y) = (e.get(i).copied(), a.get(i).copied());
            if x != y {
                diff += &format!(
                    "line {}:\n  snapshot: {}\n  actual:   {}\n",
                    i + 1,
                    x.unwrap_or("<none>"),
                    y.unwrap_or("<none>")
                );
            }
        }
        panic!(
            "output differs from snapshot {} (UPDATE_SNAPSHOTS=1 accepts it)\n{diff}--- actual\n{actual}",
            path.display()
        );
    }
}

#[test]
fn masking_replaces_the_machines_memory_figures() {
    assert_eq!(
        mask_memory("a\nmemory: peak 10 MB, estimated 16 MB (limit 22.8 GB, MemAvailable)\nb\n"),
        "a\nmemory: peak <m>, estimated 16 MB (limit <m>)\nb\n"
    );
}

#[test]
fn masking_replaces_timings_only() {
    assert_eq!(
        mask_timings("in 0.13s (load 12.50s, train 0.05s), 3 passes, 2 threads, 1.5 x, v0.1s"),
        "in <t>s (load <t>s, train <t>s), 3 passes, 2 threads, 1.5 x, v0.1s"
    );
    assert_eq!(
        mask_timings("mean 0.6931  10s 1.0s"),
        "mean 0.6931  10s <t>s"
    );
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[test]
fn train_summary_snapshot() {
    let f = Fixture::new();
    let a = f.train_args("model.gfm");
    let out = f.trained();
    assert!(
        out.stdout.is_empty(),
        "text mode prints the summary on stderr"
    );
    assert!(f.path("model.gfm").exists());
    assert_snapshot("train_summary.txt", &f.transcript(&a, &out));
}

#[test]
fn inspect_snapshot() {
    let f = Fixture::new();
    f.trained();
    let a = args(&["inspect", &f.p("model.gfm")]);
    let out = run(&a);
    assert!(out.status.success());
    assert!(out.stderr.is_empty());
    assert_snapshot("inspect.txt", &f.transcript(&a, &out));
}

#[test]
fn train_help_snapshot() {
    let f = Fixture::new();
    let a = args(&["train", "--help"]);
    let out = run(&a);
    assert!(out.status.success());
    assert_snapshot("train_help.txt", &f.transcript(&a, &out));
}

#[test]
fn missing_column_error_snapshot() {
    let f = Fixture::new();
    let mut a = f.train_args("never.gfm");
    let t = a.iter().position(|s| s == "--target").unwrap();
    a[t + 1] = "delay".into();
    let out = run(&a);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert_eq!(
        out.stderr.iter().filter(|&&b| b == b'\n').count(),
        1,
        "one line"
    );
    assert!(!f.path("never.gfm").exists(), "no model file on error");
    assert_snapshot("error_missing_column.txt", &f.transcript(&a, &out));
}

#[test]
fn corrupt_model_error_snapshot() {
    let f = Fixture::new();
    // Fixed bytes, so the messages do not depend on a trained model's size:
    // a header announcing 100 payload bytes followed by 10, and a file that
    // is not a model at all.
    let mut truncated = b"GROUPFIT".to_vec();
    truncated.extend_from_slice(&1u32.to_le_bytes());
    truncated.extend_from_slice(&100u64.to_le_bytes());
    truncated.extend_from_slice(&0u32.to_le_bytes());
    truncated.extend_from_slice(b"{\"format_v");
    std::fs::write(f.path("truncated.gfm"), &truncated).unwrap();
    std::fs::write(
        f.path("notes.gfm"),
        b"these are not the bytes of a model file",
    )
    .unwrap();
    let predict = |model: &str| {
        args(&[
            "predict",
            "--model",
            &f.p(model),
            "--data",
            &f.p("rows.parquet"),
            "--out",
            &f.p("p.parquet"),
        ])
    };
    let mut t = String::new();
    for a in [
        args(&["inspect", &f.p("truncated.gfm")]),
        predict("truncated.gfm"),
        predict("notes.gfm"),
        args(&["report", &f.p("truncated.gfm"), "--out", &f.p("r.html")]),
    ] {
        let out = run(&a);
        assert_eq!(out.status.code(), Some(1));
        assert!(out.stdout.is_empty());
        t += &f.transcript(&a, &out);
    }
    assert!(!f.path("p.parquet").exists(), "no predictions on error");
    assert!(!f.path("r.html").exists(), "no report on error");
    assert_snapshot("error_corrupt_model.txt", &t);
}

#[test]
fn predict_text_snapshot_and_json_report() {
    let f = Fixture::new();
    f.trained();
    let predict = |out: &str, json: bool| {
        let mut a = args(&[
            "predict",
            "--model",
            &f.p("model.gfm"),
            "--data",
            &f.p("rows.parquet"),
            "--out",
            &f.p(out),
        ]);
        if json {
            a.push("--json".into());
        }
        (run(&a), a)
    };
    let (text, a) = predict("p.parquet", false);
    assert!(text.status.success());
    assert_snapshot("predict.txt", &f.transcript(&a, &text));

    let (out, _) = predict("pj.parquet", true);
    assert!(out.status.success());
    assert!(out.stderr.is_empty(), "--json: nothing on stderr");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.ends_with('\n') && stdout.matches('\n').count() == 1,
        "{stdout:?}"
    );
    let v: serde_json::Value = serde_json::from_str(stdout.trim_end()).unwrap();
    // AA, BB, CC: own models; DD (few rows), EE (one class) fall back; ZZ unseen.
    assert_eq!(
        v,
        serde_json::json!({"rows": 13, "own": 6, "global": 7, "unseen": 3})
    );
    let batch = groupfit::data::read_parquet(
        &f.path("pj.parquet"),
        &["g".to_string(), "prediction".to_string()],
        1,
    )
    .unwrap();
    assert_eq!(batch.num_rows(), 13);
    let p = batch
        .column(1)
        .as_any()
        .downcast_ref::<Float64Array>()
        .unwrap();
    assert!(p.values().iter().all(|&x| (0.0..=1.0).contains(&x)));
}

#[test]
fn train_json_is_one_object_line() {
    let f = Fixture::new();
    let mut a = f.train_args("model.gfm");
    a.push("--json".into());
    let out = run(&a);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stderr.is_empty(), "--json: nothing on stderr");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.ends_with('\n'), "{stdout:?}");
    assert_eq!(stdout.matches('\n').count(), 1, "{stdout:?}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim_end()).unwrap();
    let o = v.as_object().expect("a JSON object");
    assert_eq!(o["groups"], 5);
    assert_eq!(o["configs"], 2);
    assert_eq!(o["models"], 8, "(3 own + global) x 2 configs");
    assert_eq!(o["strategy"], "tp");
    assert_eq!(o["threads"], 2);
    assert_eq!(o["task"], "binary");
    assert_eq!(
        o["rows_train"].as_u64().unwrap() + o["rows_valid"].as_u64().unwrap(),
        666
    );
    assert_eq!(o["fallback"]["few_rows"], 1);
    assert_eq!(o["fallback"]["one_class"], 1);
    for k in ["load_s", "train_s", "wall_s", "valid_logloss", "valid_auc"] {
        assert!(o[k].is_number(), "{k}");
    }
    assert!(f.path("model.gfm").exists());
}
