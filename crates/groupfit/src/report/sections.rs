//! What the report shows, section by section: each evaluation's scores
//! against group size, their spread, the gain over the global model, the
//! routes and the best and worst groups; then the chosen configs, the
//! training cost and each family's own plot.

use std::collections::BTreeMap;

use super::charts::{
    bars, boxes, histogram, points, short, Axis, BarPanel, BoxPanel, Level, Mark, Scale, Series,
    Size, PALETTE,
};
use super::evaluation::{Evaluation, GroupScore};
use super::page::{Figure, Table};
use crate::data::keys::display_key;
use crate::error::Result;
use crate::store::{FittedModel, ModelBundle};
use crate::util::text::thousands;

/// At most this many points a scatter plot; more groups are sampled.
pub const MAX_POINTS: usize = 1_500;
/// Rows of the best and of the worst groups' tables.
pub const TABLE_ROWS: usize = 20;
/// Box plots of linear coefficients: at most this many features.
const MAX_BOXES: usize = 12;
/// Bars of gbdt importance: the top features.
const TOP_FEATURES: usize = 15;
/// Loss curves of the largest MLP groups.
const CURVES: usize = 10;

/// At most `max` of `items`, evenly spaced over their order (the first
/// and the last kept).
pub fn spread<T: Copy>(items: &[T], max: usize) -> Vec<T> {
    if items.len() <= max || max < 2 {
        return items.iter().copied().take(max).collect();
    }
    (0..max)
        .map(|i| items[(i * (items.len() - 1) + (max - 1) / 2) / (max - 1)])
        .collect()
}

/// ", 1,500 of 20,000 groups shown, evenly spaced by size" when sampled.
fn sampled_note(shown: usize, all: usize) -> String {
    if shown < all {
        format!(
            " {} of {} groups are shown, evenly spaced by training rows.",
            thousands(shown),
            thousands(all)
        )
    } else {
        String::new()
    }
}

/// The colour of each route label, in the order they first appear.
fn route_colors(e: &Evaluation) -> BTreeMap<String, usize> {
    e.routes
        .iter()
        .enumerate()
        .map(|(i, r)| (r.route.clone(), i % PALETTE.len()))
        .collect()
}

/// Each group's metric against its training rows (log), coloured by route,
/// with the global model's pooled metric as a line.
pub fn metric_vs_rows(b: &ModelBundle, e: &Evaluation, size: Size) -> Result<Figure> {
    let metric = b.task.metric_name();
    let mut scored: Vec<&GroupScore> = e.groups.iter().filter(|g| g.metric.is_some()).collect();
    if scored.is_empty() {
        return Ok(Figure::Note(format!("No group has rows in {}.", e.source)));
    }
    scored.sort_by_key(|g| (b.groups[g.group].n_train, g.group));
    let shown = spread(&scored, MAX_POINTS);
    let colors = route_colors(e);
    let series: Vec<Series> = e
        .routes
        .iter()
        .map(|r| Series {
            label: r.route.clone(),
            color: PALETTE[colors[&r.route]],
            points: shown
                .iter()
                .filter(|g| g.route == r.route)
                .map(|g| (b.groups[g.group].n_train.max(1) as f64, g.metric.unwrap()))
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    let level = e.global.map(|y| Level {
        label: format!("global model {}", short(y)),
        y,
    });
    let svg = points(
        &format!("Validation {metric} by group size"),
        size,
        (
            Axis {
                title: "training rows (log)",
                scale: Scale::Log,
            },
            Axis {
                title: metric,
                scale: Scale::Linear,
            },
        ),
        Mark::Dots,
        &series,
        level.as_ref(),
    )?;
    Ok(Figure::Plot {
        svg,
        caption: format!(
            "One point per group with rows in {}, coloured by the model that serves it.{}",
            e.source,
            sampled_note(shown.len(), scored.len())
        ),
    })
}

/// The spread of the per-group metric.
pub fn metric_spread(b: &ModelBundle, e: &Evaluation, size: Size) -> Result<Figure> {
    let metric = b.task.metric_name();
    let values: Vec<f64> = e.groups.iter().filter_map(|g| g.metric).collect();
    if values.is_empty() {
        return Ok(Figure::Note(format!("No group has rows in {}.", e.source)));
    }
    let svg = histogram(
        &format!("Per-group {metric}"),
        size,
        metric,
        &values,
        30,
        e.global.map(|y| ("global model", y)),
    )?;
    Ok(Figure::Plot {
        svg,
        caption: format!(
            "{} groups; the 1st to 99th percentile, the rest in the end bins.",
            thousands(values.len())
        ),
    })
}

/// Each own-model group's gain over the global model on its own rows:
/// the global model's metric less its own (positive: its own is better).
pub fn gain_over_global(b: &ModelBundle, e: &Evaluation, size: Size) -> Result<Figure> {
    let metric = b.task.metric_name();
    let gains: Vec<f64> = e
        .groups
        .iter()
        .filter_map(|g| Some(g.global? - g.metric?))
        .collect();
    if gains.is_empty() {
        return Ok(Figure::Note(
            "No gain over the global model to show: no global model, or no own-model group with rows."
                .into(),
        ));
    }
    let better = gains.iter().filter(|&&g| g > 0.0).count();
    let worse = gains.iter().filter(|&&g| g < 0.0).count();
    let svg = histogram(
        "Gain over the global model on each group's rows",
        size,
        &format!("global {metric} - own {metric}"),
        &gains,
        30,
        Some(("no gain", 0.0)),
    )?;
    Ok(Figure::Plot {
        svg,
        caption: format!(
            "Positive: the group's own model beats the global model on its rows. {} groups better, {} worse.",
            thousands(better),
            thousands(worse)
        ),
    })
}

/// Rows and groups served by each route.
pub fn routes(e: &Evaluation, width: u32) -> Result<Figure> {
    let panel = |title: &str, f: &dyn Fn(&super::evaluation::RouteCount) -> usize| BarPanel {
        title: title.into(),
        bars: e
            .routes
            .iter()
            .map(|r| (r.route.clone(), f(r) as f64))
            .collect(),
    };
    let svg = bars(
        "Routes",
        width,
        &[panel("rows", &|r| r.rows), panel("groups", &|r| r.groups)],
        2,
    )?;
    let rows: usize = e.routes.iter().map(|r| r.rows).sum();
    let unseen = e
        .routes
        .iter()
        .find(|r| r.route == "unseen")
        .map_or(0, |r| r.rows);
    Ok(Figure::Plot {
        svg,
        caption: format!(
            "{} rows in {}; {} of them from groups not seen in training.",
            thousands(rows),
            e.source,
            thousands(unseen)
        ),
    })
}

/// The worst and the best groups by metric, `TABLE_ROWS` each.
pub fn extremes(b: &ModelBundle, e: &Evaluation) -> (Table, Table) {
    let metric = b.task.metric_name();
    let mut scored: Vec<&GroupScore> = e.groups.iter().filter(|g| g.metric.is_some()).collect();
    scored.sort_by(|x, y| {
        x.metric
            .unwrap()
            .total_cmp(&y.metric.unwrap())
            .then(x.group.cmp(&y.group))
    });
    let head = || -> Vec<String> {
        [
            "group",
            "training rows",
            "rows scored",
            metric,
            &format!("global {metric}"),
            "config",
            "route",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let row = |g: &&GroupScore| -> Vec<String> {
        let entry = &b.groups[g.group];
        vec![
            display_key(&entry.key),
            thousands(entry.n_train),
            thousands(g.rows),
            format!("{:.4}", g.metric.unwrap()),
            g.global.map_or("-".into(), |v| format!("{v:.4}")),
            entry
                .config
                .map_or("-".into(), |k| b.configs[k].name.clone()),
            g.route.clone(),
        ]
    };
    let worst = Table {
        head: head(),
        rows: scored.iter().rev().take(TABLE_ROWS).map(row).collect(),
    };
    let best = Table {
        head: head(),
        rows: scored.iter().take(TABLE_ROWS).map(row).collect(),
    };
    (worst, best)
}

/// The chosen configs: per grid parameter, how many groups chose each value.
pub fn configs(b: &ModelBundle, width: u32) -> Result<Figure> {
    // Parameter -> value text -> groups, in the grid's order of values.
    let mut params: Vec<(String, Vec<(String, f64)>)> = Vec::new();
    for c in &b.configs {
        for part in c.name.split(',') {
            let (name, value) = part.split_once('=').unwrap_or(("config", part));
            let i = match params.iter().position(|p| p.0 == name) {
                Some(i) => i,
                None => {
                    params.push((name.to_string(), Vec::new()));
                    params.len() - 1
                }
            };
            if !params[i].1.iter().any(|v| v.0 == value) {
                params[i].1.push((value.to_string(), 0.0));
            }
        }
    }
    let mut chosen = 0;
    for k in b.groups.iter().filter_map(|g| g.config) {
        chosen += 1;
        for part in b.configs[k].name.split(',') {
            let (name, value) = part.split_once('=').unwrap_or(("config", part));
            if let Some(p) = params.iter_mut().find(|p| p.0 == name) {
                if let Some(v) = p.1.iter_mut().find(|v| v.0 == value) {
                    v.1 += 1.0;
                }
            }
        }
    }
    if b.configs.len() < 2 {
        return Ok(Figure::Note(format!(
            "One config ({}): nothing was chosen.",
            b.configs.first().map_or("default", |c| c.name.as_str())
        )));
    }
    let panels: Vec<BarPanel> = params
        .into_iter()
        .map(|(title, bars)| BarPanel { title, bars })
        .collect();
    let svg = bars("Chosen configs", width, &panels, 3)?;
    Ok(Figure::Plot {
        svg,
        caption: format!(
            "Groups choosing each value, per grid parameter ({} groups with a model of their own).",
            thousands(chosen)
        ),
    })
}

/// Training thread-seconds against group size.
pub fn cost(b: &ModelBundle, size: Size) -> Result<Figure> {
    let mut timed: Vec<(usize, f64)> = b
        .groups
        .iter()
        .filter_map(|g| Some((g.n_train, g.train_s?)))
        .collect();
    if timed.is_empty() {
        return Ok(Figure::Note(
            "No per-group training time in this model file (trained before format 9, or on Ray)."
                .into(),
        ));
    }
    timed.sort_by(|x, y| x.0.cmp(&y.0).then(x.1.total_cmp(&y.1)));
    let shown = spread(&timed, MAX_POINTS);
    let total: f64 = timed.iter().map(|t| t.1).sum();
    let series = [Series {
        label: "own model".into(),
        color: PALETTE[0],
        points: shown
            .iter()
            .map(|&(n, s)| (n.max(1) as f64, s * 1e3))
            .collect(),
    }];
    let svg = points(
        "Training cost by group size",
        size,
        (
            Axis {
                title: "training rows (log)",
                scale: Scale::Log,
            },
            Axis {
                title: "milliseconds, every config (log)",
                scale: Scale::Log,
            },
        ),
        Mark::Dots,
        &series,
        None,
    )?;
    Ok(Figure::Plot {
        svg,
        caption: format!(
            "Thread-time of each group's scans and updates, all its configs: {:.2} s in all.{}",
            total,
            sampled_note(shown.len(), timed.len())
        ),
    })
}

/// The family's own plot: linear coefficients over groups, gbdt's top
/// features by summed gain, MLP loss curves of the largest groups.
pub fn family(b: &ModelBundle, width: u32, size: Size) -> Result<Figure> {
    let models: Vec<(usize, &FittedModel)> = b
        .groups
        .iter()
        .filter_map(|g| Some((g.n_train, g.model.as_ref()?)))
        .collect();
    if models.is_empty() {
        return Ok(Figure::Note("No group has a model of its own.".into()));
    }
    match models[0].1 {
        FittedModel::Linear(_) => linear_boxes(b, &models, width),
        FittedModel::Gbdt(_) => gbdt_gain(b, &models, width),
        FittedModel::Mlp(_) => mlp_curves(&models, b, size),
    }
}

fn linear_boxes(b: &ModelBundle, models: &[(usize, &FittedModel)], width: u32) -> Result<Figure> {
    let numeric: Vec<usize> = (0..b.features.len())
        .filter(|&j| !b.categorical.iter().any(|d| d.feature == b.features[j]))
        .collect();
    let panels: Vec<BoxPanel> = numeric
        .iter()
        .take(MAX_BOXES)
        .map(|&j| BoxPanel {
            title: b.features[j].clone(),
            values: models
                .iter()
                .filter_map(|(_, m)| match m {
                    FittedModel::Linear(l) => l.coef.get(j).copied(),
                    _ => None,
                })
                .collect(),
        })
        .collect();
    if panels.is_empty() {
        return Ok(Figure::Note(
            "No numeric feature: no coefficients to plot.".into(),
        ));
    }
    let svg = boxes("Coefficients over groups", width, &panels, 3)?;
    let more = if numeric.len() > MAX_BOXES {
        format!(
            " The first {MAX_BOXES} of {} numeric features.",
            numeric.len()
        )
    } else {
        String::new()
    };
    Ok(Figure::Plot {
        svg,
        caption: format!(
            "Each numeric feature's coefficient (in its own units) over the {} own models: box from the 1st to the 3rd quartile, whiskers at 1.5 IQR.{more}",
            thousands(models.len())
        ),
    })
}

fn gbdt_gain(b: &ModelBundle, models: &[(usize, &FittedModel)], width: u32) -> Result<Figure> {
    let mut gain = vec![0.0; b.features.len()];
    for (_, m) in models {
        if let FittedModel::Gbdt(g) = m {
            for (t, v) in gain.iter_mut().zip(&g.importance) {
                *t += v;
            }
        }
    }
    let total: f64 = gain.iter().sum();
    let mut top: Vec<(String, f64)> = b.features.iter().cloned().zip(gain).collect();
    top.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
    top.truncate(TOP_FEATURES);
    let svg = bars(
        "Top features by summed gain",
        width,
        &[BarPanel {
            title: "gain, summed over the own models".into(),
            bars: top,
        }],
        1,
    )?;
    Ok(Figure::Plot {
        svg,
        caption: format!(
            "Split gain per feature, summed over {} own models ({} in all).",
            thousands(models.len()),
            short(total)
        ),
    })
}

fn mlp_curves(models: &[(usize, &FittedModel)], b: &ModelBundle, size: Size) -> Result<Figure> {
    let mut largest: Vec<(usize, usize)> = b
        .groups
        .iter()
        .enumerate()
        .filter(|(_, g)| g.model.is_some())
        .map(|(i, g)| (g.n_train, i))
        .collect();
    largest.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
    let series: Vec<Series> = largest
        .iter()
        .take(CURVES)
        .enumerate()
        .filter_map(|(c, &(n, i))| match b.groups[i].model.as_ref()? {
            FittedModel::Mlp(m) => Some(Series {
                label: format!("{} ({})", display_key(&b.groups[i].key), short(n as f64)),
                color: PALETTE[c % PALETTE.len()],
                points: m
                    .epoch_loss
                    .iter()
                    .enumerate()
                    .map(|(e, &l)| ((e + 1) as f64, l))
                    .collect(),
            }),
            _ => None,
        })
        .collect();
    let svg = points(
        "Training loss per epoch, largest groups",
        size,
        (
            Axis {
                title: "epoch",
                scale: Scale::Linear,
            },
            Axis {
                title: "training loss",
                scale: Scale::Linear,
            },
        ),
        Mark::Line,
        &series,
        None,
    )?;
    Ok(Figure::Plot {
        svg,
        caption: format!(
            "Mean training loss of each epoch's mini-batches, the {} largest of {} own models.",
            series.len(),
            thousands(models.len())
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_keeps_both_ends_and_the_count() {
        let v: Vec<usize> = (0..10).collect();
        assert_eq!(spread(&v, 4), vec![0, 3, 6, 9]);
        assert_eq!(spread(&v, 20), v);
        assert_eq!(spread(&v, 2), vec![0, 9]);
        let big: Vec<usize> = (0..20_000).collect();
        let s = spread(&big, MAX_POINTS);
        assert_eq!((s.len(), s[0], *s.last().unwrap()), (MAX_POINTS, 0, 19_999));
    }
}
