//! `groupfit inspect`: what a model file holds — as JSON, or as a text
//! header, a table of the largest groups and the fallback groups.

use std::io::Write;
use std::path::Path;

use anyhow::Result;
use groupfit::data::categorical::{Dictionary, NULL_CODE};
use groupfit::data::keys::display_key;
use groupfit::linear::model::OneHotCoef;
use groupfit::store::{FittedModel, GlobalEntry, GroupEntry, GroupPool, ModelBundle, Route};

use crate::emit;

/// Prints the bundle at `model`: the whole description as JSON, or text
/// listing `top` groups (0: all).
pub fn inspect(model: &Path, json: bool, top: usize) -> Result<()> {
    let b = ModelBundle::load(model)?;
    if json {
        emit(&serde_json::to_string_pretty(&bundle_json(&b))?);
        return Ok(());
    }
    let mut buf: Vec<u8> = Vec::new();
    write_header(&mut buf, &b, model)?;
    write_groups(&mut buf, &b, top)?;
    write_categories(&mut buf, &b, top)?;
    write_fallbacks(&mut buf, &b, top)?;
    let _ = std::io::stdout().lock().write_all(&buf);
    Ok(())
}

/// Per-feature gain importance of a tree model, largest first (None for other families).
fn importance(features: &[String], m: Option<&FittedModel>) -> Option<Vec<(String, f64)>> {
    match m? {
        FittedModel::Gbdt(g) => {
            let mut v: Vec<(String, f64)> = features
                .iter()
                .cloned()
                .zip(g.importance.iter().copied())
                .collect();
            v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            Some(v)
        }
        _ => None,
    }
}

/// `f3 41%, f0 22%, f7 9%`: the `k` features with the largest share of the gain.
fn top_importance(imp: &[(String, f64)], k: usize) -> String {
    let total: f64 = imp.iter().map(|(_, g)| g).sum();
    if total <= 0.0 {
        return "-".into();
    }
    imp.iter()
        .take(k)
        .filter(|(_, g)| *g > 0.0)
        .map(|(f, g)| format!("{f} {:.0}%", 100.0 * g / total))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The whole bundle description.
fn bundle_json(b: &ModelBundle) -> serde_json::Value {
    let pools = b.pool_info();
    let entries = |d: usize| -> Vec<serde_json::Value> {
        b.entries(d)
            .iter()
            .zip(&pools[d - 1])
            .map(|(g, p)| {
                let mut v = group_json(b, g);
                if pooled(b) {
                    v["level"] = p.level.clone().into();
                    v["parent"] = p
                        .parent
                        .as_deref()
                        .map_or("global".into(), display_key)
                        .into();
                    v["weight"] = p.weight.into();
                }
                v
            })
            .collect()
    };
    let groups = entries(b.depth());
    let levels: Vec<serde_json::Value> = (1..b.depth())
        .map(|d| serde_json::json!({"key_columns": b.levels[d - 1].key_columns, "groups": entries(d)}))
        .collect();
    let global = b.global.as_ref().map(|gl| global_json(b, gl));
    serde_json::json!({
        "format_version": b.format_version,
        "groupfit_version": b.groupfit_version,
        "family": b.family,
        "task": b.task,
        "key_columns": b.key_columns,
        "features": b.features,
        "categorical": b.categorical,
        "target": b.target,
        "configs": b.configs.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
        "impute": b.impute,
        "global": global,
        "groups": groups,
        "levels": levels,
        "pooling": b.pooling.as_ref().map(|p| serde_json::json!({"mode": p.mode.name(), "k": p.k})),
        "summary": b.summary,
    })
}

/// Whether the bundle has a path of models above its groups to show: levels or pooling.
fn pooled(b: &ModelBundle) -> bool {
    !b.levels.is_empty() || b.pooling.is_some()
}

/// The dictionary of feature `j` (a categorical feature's).
fn dictionary(b: &ModelBundle, j: usize) -> Option<&Dictionary> {
    b.categorical.iter().find(|d| d.feature == b.features[j])
}

/// The name of a category's level: its text (`None` for null).
fn level_name(dict: Option<&Dictionary>, code: f64) -> Option<String> {
    if code == NULL_CODE {
        return None;
    }
    Some(dict.map_or_else(|| format!("code {code}"), |d| d.level(code).to_string()))
}

/// A linear model's category coefficients: one entry per column of each
/// categorical feature, `{"feature", "level" (null for null), "coef"}`,
/// and for the "other" column `{"feature", "other": [levels], "coef"}`.
fn categories_json(b: &ModelBundle, onehot: &[OneHotCoef]) -> serde_json::Value {
    let mut out = Vec::new();
    for o in onehot {
        let (j, dict) = (o.map.feature, dictionary(b, o.map.feature));
        for (&code, &coef) in o.map.codes.iter().zip(&o.coef) {
            out.push(serde_json::json!({
                "feature": b.features[j], "level": level_name(dict, code), "coef": coef,
            }));
        }
        if !o.map.other.is_empty() {
            let levels: Vec<Option<String>> =
                o.map.other.iter().map(|&c| level_name(dict, c)).collect();
            out.push(serde_json::json!({
                "feature": b.features[j], "other": levels, "coef": o.coef[o.map.codes.len()],
            }));
        }
    }
    out.into()
}

/// Adds `categories` (see [`categories_json`]) to a model's entry when it
/// is a linear model with categorical features.
fn add_categories(v: &mut serde_json::Value, b: &ModelBundle, m: Option<&FittedModel>) {
    if let Some(FittedModel::Linear(l)) = m {
        if !l.onehot.is_empty() {
            v["categories"] = categories_json(b, &l.onehot);
        }
    }
}

/// One group's entry, with its model's feature importance (trees).
fn group_json(b: &ModelBundle, g: &GroupEntry) -> serde_json::Value {
    let mut v = serde_json::json!({
        "key": display_key(&g.key),
        // One part per key column (null for a null key): for
        // scripts, with nothing to unquote.
        "key_parts": g.key,
        "n_train": g.n_train,
        "n_valid": g.n_valid,
        "route": g.route,
        "config": g.config.map(|k| b.configs[k].name.clone()),
        "valid": g.valid,
        "valid_by_config": g.valid_by_config,
        "fallback": g.fallback,
        "iterations": g.iterations,
        "valid_global": g.valid_global,
        "train_s": g.train_s,
        "model": g.model.as_ref().map(FittedModel::to_json),
    });
    if let Some(imp) = importance(&b.features, g.model.as_ref()) {
        v["importance"] = importance_json(imp);
    }
    add_categories(&mut v, b, g.model.as_ref());
    v
}

/// The global model's entry, with its feature importance (trees).
fn global_json(b: &ModelBundle, gl: &GlobalEntry) -> serde_json::Value {
    let mut v = serde_json::json!({"config": b.configs[gl.config].name, "valid": gl.valid, "model": gl.model.to_json()});
    if let Some(imp) = importance(&b.features, Some(&gl.model)) {
        v["importance"] = importance_json(imp);
    }
    add_categories(&mut v, b, Some(&gl.model));
    v
}

/// `{"feature": gain, ...}`.
fn importance_json(imp: Vec<(String, f64)>) -> serde_json::Value {
    imp.into_iter()
        .map(|(f, g)| (f, serde_json::json!(g)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// The file, family, keys, features, configs, group counts and global model.
fn write_header(o: &mut Vec<u8>, b: &ModelBundle, model: &Path) -> Result<()> {
    writeln!(
        o,
        "model file   {} (format v{}, groupfit {})",
        model.display(),
        b.format_version,
        b.groupfit_version
    )?;
    writeln!(
        o,
        "family       {} ({}), target '{}'",
        b.family,
        b.task.name(),
        b.target
    )?;
    writeln!(o, "keys         {}", b.key_columns.join(", "))?;
    let features: Vec<String> = b
        .features
        .iter()
        .map(|f| match b.categorical.iter().find(|d| d.feature == *f) {
            Some(d) => format!("{f} [categorical, {} levels]", d.levels.len()),
            None => f.clone(),
        })
        .collect();
    writeln!(
        o,
        "features     {} ({})",
        b.features.len(),
        features.join(", ")
    )?;
    writeln!(
        o,
        "configs      {}",
        b.configs
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(" | ")
    )?;
    let own = b.groups.iter().filter(|g| g.route == Route::Own).count();
    writeln!(
        o,
        "groups       {} ({} own model, {} {})",
        b.groups.len(),
        own,
        b.groups.len() - own,
        if b.global.is_some() {
            "global fallback"
        } else {
            "no model"
        }
    )?;
    match &b.global {
        Some(gl) => writeln!(
            o,
            "global       config {}, validation {} {}",
            b.configs[gl.config].name,
            b.task.metric_name(),
            gl.valid
                .primary(b.task)
                .map_or("-".into(), |v| format!("{v:.4}"))
        )?,
        None => writeln!(o, "global       none (trained with --no-global)")?,
    }
    for (d, l) in b.levels.iter().enumerate() {
        let own = l.groups.iter().filter(|g| g.route == Route::Own).count();
        writeln!(
            o,
            "level {}      {} ({} groups, {} own model)",
            d + 1,
            l.key_columns.join("/"),
            l.groups.len(),
            own
        )?;
    }
    if let Some(p) = &b.pooling {
        let ks: Vec<String> = (1..=b.depth())
            .map(|d| format!("{} {}", b.key_columns[..d].join("/"), p.k[d - 1]))
            .collect();
        writeln!(o, "pooling      {}, k: {}", p.mode.name(), ks.join(", "))?;
    }
    Ok(())
}

/// The `top` largest groups (0: all), one line each.
fn write_groups(o: &mut Vec<u8>, b: &ModelBundle, top: usize) -> Result<()> {
    let mut order: Vec<usize> = (0..b.groups.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(b.groups[i].n_train));
    let shown = if top == 0 {
        order.len()
    } else {
        top.min(order.len())
    };
    writeln!(o)?;
    let trees = b.family == "gbdt";
    let pools = pooled(b).then(|| b.pool_info().pop().unwrap_or_default());
    writeln!(
        o,
        "{:<24} {:>9} {:>9}  {:<7} {:<18} {:>10}{}{}",
        "group",
        "n_train",
        "n_valid",
        "route",
        "config",
        b.task.metric_name(),
        if pools.is_some() {
            format!(" {:>7}  {:<16}", "weight", "parent")
        } else {
            String::new()
        },
        if trees {
            "  top features (share of gain)"
        } else {
            ""
        }
    )?;
    for &i in &order[..shown] {
        let pool = pools.as_ref().map(|p| &p[i]);
        write_group(o, b, &b.groups[i], pool, trees)?;
    }
    if shown < order.len() {
        writeln!(
            o,
            "... {} more groups (--top 0 lists all)",
            order.len() - shown
        )?;
    }
    Ok(())
}

/// One group's line of the table (with its top features when `trees`).
fn write_group(
    o: &mut Vec<u8>,
    b: &ModelBundle,
    g: &GroupEntry,
    pool: Option<&GroupPool>,
    trees: bool,
) -> Result<()> {
    let pool = pool.map_or_else(String::new, |p| {
        format!(
            " {:>7}  {:<16}",
            p.weight.map_or("-".into(), |w| format!("{w:.3}")),
            p.parent.as_deref().map_or("global".into(), display_key)
        )
    });
    let imp = if trees {
        let m = g.model.as_ref().or(b.global.as_ref().map(|gl| &gl.model));
        format!(
            "  {}",
            importance(&b.features, m).map_or("-".into(), |v| top_importance(&v, 3))
        )
    } else {
        String::new()
    };
    writeln!(
        o,
        "{:<24} {:>9} {:>9}  {:<7} {:<18} {:>10}{pool}{imp}",
        display_key(&g.key),
        g.n_train,
        g.n_valid,
        g.route.name(),
        g.config
            .map_or_else(|| "-".to_string(), |k| b.configs[k].name.clone()),
        g.valid
            .primary(b.task)
            .map_or("-".into(), |v| format!("{v:.4}"))
    )?;
    Ok(())
}

/// Linear models' category coefficients: the global model's, then those of
/// the `top` largest groups with their own models (0: all), one line per
/// categorical feature: `level coef, ...`, then `other (n levels) coef`.
fn write_categories(o: &mut Vec<u8>, b: &ModelBundle, top: usize) -> Result<()> {
    if b.family != "linear" || b.categorical.is_empty() {
        return Ok(());
    }
    let mut order: Vec<&GroupEntry> = b.groups.iter().filter(|g| g.model.is_some()).collect();
    order.sort_by_key(|g| std::cmp::Reverse(g.n_train));
    let shown = if top == 0 {
        order.len()
    } else {
        top.min(order.len())
    };
    let models = b
        .global
        .as_ref()
        .map(|gl| ("global model".to_string(), &gl.model))
        .into_iter()
        .chain(order[..shown].iter().map(|g| {
            (
                format!("group {}", display_key(&g.key)),
                g.model.as_ref().unwrap(),
            )
        }));
    for (name, m) in models {
        let FittedModel::Linear(l) = m else { continue };
        writeln!(o)?;
        writeln!(o, "category coefficients, {name}:")?;
        for c in &l.onehot {
            let (j, dict) = (c.map.feature, dictionary(b, c.map.feature));
            let mut parts: Vec<String> = c
                .map
                .codes
                .iter()
                .zip(&c.coef)
                .map(|(&code, coef)| {
                    format!(
                        "{} {coef:.4}",
                        level_name(dict, code).unwrap_or("null".into())
                    )
                })
                .collect();
            if !c.map.other.is_empty() {
                parts.push(format!(
                    "other ({} levels) {:.4}",
                    c.map.other.len(),
                    c.coef[c.map.codes.len()]
                ));
            }
            writeln!(o, "  {:<12} {}", b.features[j], parts.join(", "))?;
        }
    }
    Ok(())
}

/// The groups served by the global model and why (at most `top`; 0: all).
fn write_fallbacks(o: &mut Vec<u8>, b: &ModelBundle, top: usize) -> Result<()> {
    let fallbacks: Vec<String> = b
        .groups
        .iter()
        .filter(|g| g.route == Route::Global)
        .map(|g| {
            format!(
                "{}: {}",
                display_key(&g.key),
                g.fallback.as_deref().unwrap_or("")
            )
        })
        .collect();
    if !fallbacks.is_empty() {
        writeln!(o)?;
        writeln!(o, "fallback groups ({}):", fallbacks.len())?;
        for f in fallbacks
            .iter()
            .take(if top == 0 { usize::MAX } else { top })
        {
            writeln!(o, "  {f}")?;
        }
    }
    Ok(())
}
