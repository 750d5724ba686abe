//! The engine's integration tests (one test binary for the crate, one
//! module per family: `linear`, `mlp`, `gbdt`; `onehot` for categorical
//! features; `hierarchy` for `--hierarchy`; `store` for the model file;
//! `fuzz` for over 20,000 damaged model files; `report` for the HTML report;
//! `common` for the synthetic
//! data and the helpers they share).
//!
//! * grouped == looped: groups trained together give the models each group
//!   gets when trained alone from its own file;
//! * every strategy and thread count gives the same models, also under a
//!   proptest over group-size distributions (one dominant group, thousands of
//!   3-row groups, ...);
//! * the model file round-trips bit for bit (serde_json with `float_roundtrip`)
//!   and damage is reported as `GroupfitError::CorruptModel`;
//! * golden files: committed model files (format v1: linear; v2: MLP,
//!   weights as base64 text; v3: GBDT; v4: MLP, weights in the binary
//!   section; v5: linear and GBDT, `f64` arrays in the binary section too)
//!   must keep loading and predicting the committed rows as recorded.
//!
//! Golden files live in `tests/golden/` at the workspace root. To (re)generate
//! the current format version's files deliberately, run
//!
//! ```text
//! GROUPFIT_BLESS=1 cargo test --release -p groupfit --test engine golden
//! ```
//!
//! which trains fresh models and overwrites the current version's files
//! (`linear_v5.*`, `gbdt_v5.*`) and `rows.parquet` instead of comparing (older versions' files are
//! frozen). Do that only when a change of the file format or of the
//! predictions is intended (see `tests/golden/README.md`): if the golden test
//! fails after a format change, either keep old files loadable or bump
//! `FORMAT_VERSION` deliberately and add files for the new version.

mod common;
mod fuzz;
mod gbdt;
mod hierarchy;
mod linear;
mod mlp;
mod onehot;
mod report;
mod store;
