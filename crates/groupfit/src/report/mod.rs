//! `groupfit report`: what thousands of models did, as one self-contained
//! HTML file. Its plots are SVG drawn with `plotters`, its styles inline;
//! it needs no script and no network. [`Report::inline_html`] is the
//! compact view a notebook shows.

mod charts;
mod evaluation;
mod page;
mod sections;

use std::io::Write;
use std::path::Path;
use std::time::Instant;

pub use evaluation::{Evaluation, GroupScore, RouteCount};
use page::Block;

use crate::error::{GroupfitError, Result};
use crate::store::ModelBundle;
use crate::util::fs::write_atomic;
use crate::util::text::thousands;

/// A wide plot's size; the notebook view's.
const WIDE: (u32, u32) = (880, 400);
const NARROW: (u32, u32) = (600, 320);

/// A report of one model bundle: the scores it holds and, with
/// [`Report::with_valid`], the scores on a file of new rows.
#[derive(Debug)]
pub struct Report<'a> {
    bundle: &'a ModelBundle,
    /// The model's name in the title (its file name).
    name: String,
    evaluations: Vec<Evaluation>,
}

/// What [`Report::write`] wrote.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ReportInfo {
    /// Bytes of HTML.
    pub bytes: usize,
    /// Plots drawn.
    pub plots: usize,
    /// Groups in the model.
    pub groups: usize,
    /// Seconds drawing and writing ([`write_report`]: loading and scoring too).
    pub seconds: f64,
}

impl<'a> Report<'a> {
    /// A report of `bundle`, titled with `name`, from the scores in the file.
    pub fn new(bundle: &'a ModelBundle, name: impl Into<String>) -> Self {
        Report {
            bundle,
            name: name.into(),
            evaluations: vec![Evaluation::from_bundle(bundle)],
        }
    }

    /// Adds the scores on the rows of `valid` (Parquet or CSV with the
    /// model's key, feature and target columns).
    pub fn with_valid(mut self, valid: &Path, threads: usize) -> Result<Self> {
        let threads = crate::util::par::resolve_threads(threads);
        self.evaluations
            .push(Evaluation::from_file(self.bundle, valid, threads)?);
        Ok(self)
    }

    /// [`Report::with_valid`] for rows in memory; `label` names them.
    pub fn with_valid_batch(
        mut self,
        valid: &arrow_array::RecordBatch,
        label: &Path,
        threads: usize,
    ) -> Result<Self> {
        let threads = crate::util::par::resolve_threads(threads);
        self.evaluations
            .push(Evaluation::from_batch(self.bundle, valid, label, threads)?);
        Ok(self)
    }

    /// The evaluations: the model file's, then `--valid`'s.
    pub fn evaluations(&self) -> &[Evaluation] {
        &self.evaluations
    }

    /// The whole report as an HTML document.
    pub fn html(&self) -> Result<String> {
        Ok(page::document(&self.title(), &self.blocks()?))
    }

    /// The compact view for a notebook: the header, then the metric
    /// against group size and the routes, from the model file's scores.
    pub fn inline_html(&self) -> Result<String> {
        let (b, e) = (self.bundle, &self.evaluations[0]);
        let blocks = vec![
            self.header(),
            Block::Figure(sections::metric_vs_rows(b, e, NARROW)?),
            Block::Figure(sections::routes(e, NARROW.0)?),
        ];
        Ok(page::body(&self.title(), &blocks))
    }

    /// Writes [`Report::html`] to `out` atomically: an error leaves nothing.
    pub fn write(&self, out: &Path) -> Result<ReportInfo> {
        let started = Instant::now();
        crate::util::fs::check_writable(out)?;
        let html = self.html()?;
        write_atomic(out, |f| {
            f.write_all(html.as_bytes())
                .map_err(|e| GroupfitError::io("write", out, e))
        })?;
        Ok(ReportInfo {
            bytes: html.len(),
            plots: html.matches("<figure class=\"plot\">").count(),
            groups: self.bundle.groups.len(),
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    fn title(&self) -> String {
        format!("groupfit report: {}", self.name)
    }

    /// The header: what was trained, on what, and how long it took.
    fn header(&self) -> Block {
        let b = self.bundle;
        let s = &b.summary;
        let num = |k: &str| s[k].as_u64().map(|n| thousands(n as usize));
        let own = b.groups.iter().filter(|g| g.model.is_some()).count();
        let mut rows = vec![
            ("family", b.family.clone()),
            ("task", format!("{:?}", b.task).to_lowercase()),
            ("key columns", b.key_columns.join(", ")),
            ("target", b.target.clone()),
            ("features", b.features.len().to_string()),
            (
                "groups",
                format!(
                    "{} ({} with a model of their own)",
                    thousands(b.groups.len()),
                    thousands(own)
                ),
            ),
            (
                "models trained",
                num("models").unwrap_or_else(|| "-".into()),
            ),
            (
                "configs",
                b.configs
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            (
                "global model",
                b.global.as_ref().map_or("none (--no-global)".into(), |g| {
                    b.configs[g.config].name.clone()
                }),
            ),
        ];
        if !b.levels.is_empty() {
            let levels: Vec<String> = b.levels.iter().map(|l| l.key_columns.join("/")).collect();
            rows.push(("levels", levels.join(", ")));
        }
        if let (Some(t), Some(v)) = (num("rows_train"), num("rows_valid")) {
            rows.push(("rows", format!("{t} training, {v} validation")));
        }
        if let Some(w) = s["wall_s"].as_f64() {
            let passes = match s["passes"].as_u64() {
                Some(1) => "1 pass".to_string(),
                Some(n) => format!("{} passes", thousands(n as usize)),
                None => "-".into(),
            };
            let strategy = s["strategy"].as_str().unwrap_or("-");
            let threads = num("threads").unwrap_or_default();
            rows.push((
                "training time",
                format!("{w:.2} s ({passes}, strategy {strategy}, {threads} threads)"),
            ));
        }
        rows.push((
            "command",
            s["command"].as_str().unwrap_or("not recorded").to_string(),
        ));
        rows.push(("groupfit", b.groupfit_version.clone()));
        Block::Facts(rows.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    /// Every block of the full report.
    fn blocks(&self) -> Result<Vec<Block>> {
        let b = self.bundle;
        let mut out = vec![self.header()];
        for e in &self.evaluations {
            out.push(Block::Heading(format!("Scores on {}", e.source)));
            if let Some(g) = e.global {
                out.push(Block::Text(format!(
                    "The global model's {} on every row: {g:.4}.",
                    b.task.metric_name()
                )));
            }
            out.push(Block::Figure(sections::metric_vs_rows(b, e, WIDE)?));
            out.push(Block::Figure(sections::metric_spread(b, e, WIDE)?));
            out.push(Block::Figure(sections::gain_over_global(b, e, WIDE)?));
            out.push(Block::Figure(sections::routes(e, WIDE.0)?));
            let (worst, best) = sections::extremes(b, e);
            out.push(Block::Table(
                format!("The {} worst groups", worst.rows.len()),
                worst,
            ));
            out.push(Block::Table(
                format!("The {} best groups", best.rows.len()),
                best,
            ));
        }
        out.push(Block::Heading("Configs".into()));
        out.push(Block::Figure(sections::configs(b, WIDE.0)?));
        out.push(Block::Heading("Training cost".into()));
        out.push(Block::Figure(sections::cost(b, WIDE)?));
        out.push(Block::Heading(format!("The {} models", b.family)));
        out.push(Block::Figure(sections::family(b, WIDE.0, WIDE)?));
        Ok(out)
    }
}

/// Loads `model`, adds `valid`'s scores if given, and writes the report to
/// `out` (`threads`: 0 for one per core).
pub fn write_report(
    model: &Path,
    valid: Option<&Path>,
    out: &Path,
    threads: usize,
) -> Result<ReportInfo> {
    let started = Instant::now();
    crate::util::fs::check_writable(out)?;
    let bundle = ModelBundle::load(model)?;
    let name = model.file_name().map_or_else(
        || model.display().to_string(),
        |f| f.to_string_lossy().into_owned(),
    );
    let mut report = Report::new(&bundle, name);
    if let Some(v) = valid {
        report = report.with_valid(v, threads)?;
    }
    let info = report.write(out)?;
    Ok(ReportInfo {
        seconds: started.elapsed().as_secs_f64(),
        ..info
    })
}
