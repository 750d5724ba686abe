//! What a report scores: each group's validation metric, the global
//! model's on the same rows, and the rows and groups each route serves.
//! From the model file (the rows held out in training) or from a file of
//! new rows (`--valid`).

use std::collections::HashMap;
use std::path::Path;

use arrow_array::{Array, ArrayRef, Float64Array, RecordBatch};
use arrow_schema::DataType;

use crate::data::{column_indices, missing_column, read_table, table_schema, Task};
use crate::error::{GroupfitError, Result};
use crate::metrics;
use crate::store::{ModelBundle, Route, RowRoute};

/// One group's scores on one evaluation's rows.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupScore {
    /// Index into the bundle's groups.
    pub group: usize,
    /// Rows scored.
    pub rows: usize,
    /// The route that serves it (`own`, `fallback`, `none`, `level:a`).
    pub route: String,
    /// The serving model's metric (`None`: no rows).
    pub metric: Option<f64>,
    /// The global model's metric on the same rows (own route only).
    pub global: Option<f64>,
}

/// Rows and groups one route serves.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteCount {
    /// The route's label.
    pub route: String,
    /// Rows it serves.
    pub rows: usize,
    /// Groups it serves.
    pub groups: usize,
}

/// One set of rows scored, group by group.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// Where the rows come from, for headings.
    pub source: String,
    /// The global model's metric on every row pooled (`None`: no global model).
    pub global: Option<f64>,
    /// Every training group, in the bundle's order.
    pub groups: Vec<GroupScore>,
    /// Per route, in order of first appearance (own first).
    pub routes: Vec<RouteCount>,
}

fn metric(task: Task, y: &[f64], p: &[f64]) -> f64 {
    match task {
        Task::Binary => metrics::logloss(y, p),
        Task::Regression => metrics::rmse(y, p),
    }
}

/// Each finest group's route label: its own model, the level above that
/// serves it (`level:origin`), the global model (`fallback`) or none.
pub fn group_routes(b: &ModelBundle) -> Vec<String> {
    let depth = b.depth();
    // Per level above the groups: key prefix -> whether it has a model.
    let levels: Vec<HashMap<&[Option<String>], bool>> = (1..depth)
        .map(|d| {
            b.entries(d)
                .iter()
                .map(|e| (&e.key[..], e.route == Route::Own))
                .collect()
        })
        .collect();
    b.groups
        .iter()
        .map(|e| match e.route {
            Route::Own => "own".to_string(),
            _ => {
                let ancestor = (1..depth)
                    .rev()
                    .find(|&d| levels[d - 1].get(&e.key[..d]) == Some(&true));
                match (ancestor, e.route) {
                    (Some(d), _) => b.route_label(RowRoute::Ancestor(d as u16 - 1)),
                    (None, Route::None) => "none".to_string(),
                    (None, _) => "fallback".to_string(),
                }
            }
        })
        .collect()
}

/// Adds one group of `rows` rows on `route` to `counts`.
fn count(counts: &mut Vec<RouteCount>, route: &str, rows: usize, groups: usize) {
    match counts.iter_mut().find(|c| c.route == route) {
        Some(c) => {
            c.rows += rows;
            c.groups += groups;
        }
        None => counts.push(RouteCount {
            route: route.to_string(),
            rows,
            groups,
        }),
    }
}

/// Own first, then the others by their first appearance.
fn own_first(mut counts: Vec<RouteCount>) -> Vec<RouteCount> {
    counts.sort_by_key(|c| c.route != "own");
    counts
}

impl Evaluation {
    /// The scores the model file holds: each group's rows held out in training.
    pub fn from_bundle(b: &ModelBundle) -> Evaluation {
        let routes = group_routes(b);
        let mut counts = vec![RouteCount {
            route: "own".into(),
            rows: 0,
            groups: 0,
        }];
        let groups = b
            .groups
            .iter()
            .zip(routes)
            .enumerate()
            .map(|(g, (e, route))| {
                count(&mut counts, &route, e.n_valid, 1);
                GroupScore {
                    group: g,
                    rows: e.n_valid,
                    metric: (e.n_valid > 0).then(|| e.valid.primary(b.task)).flatten(),
                    global: e.valid_global,
                    route,
                }
            })
            .collect();
        let unseen = b.summary["routes"]["valid_rows_unseen"]
            .as_u64()
            .unwrap_or(0) as usize;
        if unseen > 0 {
            count(&mut counts, "unseen", unseen, 0);
        }
        Evaluation {
            source: "the rows held out in training".into(),
            global: b.global.as_ref().and_then(|g| g.valid.primary(b.task)),
            groups,
            routes: own_first(counts),
        }
    }

    /// Scores every row of `path` (Parquet or CSV with the bundle's key,
    /// feature and target columns) with the model that serves it, and with
    /// the global model. Rows with a missing target are left out.
    pub fn from_file(b: &ModelBundle, path: &Path, threads: usize) -> Result<Evaluation> {
        let schema = table_schema(path)?;
        let wanted = wanted_columns(b);
        for column in &wanted {
            if schema.index_of(column).is_err() {
                return Err(missing_column(column, path, &schema));
            }
        }
        let batch = read_table(path, &wanted, threads)?;
        Evaluation::from_batch(b, &batch, path, threads)
    }

    /// [`Evaluation::from_file`] for rows in memory; `label` names them.
    pub fn from_batch(
        b: &ModelBundle,
        batch: &RecordBatch,
        label: &Path,
        threads: usize,
    ) -> Result<Evaluation> {
        let indices = column_indices(&batch.schema(), &wanted_columns(b), label)?;
        let batch = batch
            .project(&indices)
            .map_err(|e| GroupfitError::arg(format!("cannot select columns: {e}")))?;
        let k = b.key_columns.len();
        let d = b.features.len();
        let keys: Vec<ArrayRef> = batch.columns()[..k].to_vec();
        let features: Vec<ArrayRef> = batch.columns()[k..k + d].to_vec();
        let target = target_values(batch.column(k + d), &b.target, label)?;
        let index = b.key_index();
        let predictions = b.predict_indexed(&index, &keys, &features, label, threads)?;
        let global = b.predict_global(&features, label, threads)?;
        let nodes = b.row_nodes(&index, &keys)?;
        let group_of = &nodes[b.depth() - 1];
        // Rows by group (unseen rows last), targets present only.
        let n_groups = b.groups.len();
        let slot = (0..target.len()).map(|i| match (target[i].is_nan(), group_of[i]) {
            (true, _) => n_groups + 1,
            (false, Some(g)) => g as usize,
            (false, None) => n_groups,
        });
        let (order, start) = crate::data::bucket(slot, n_groups + 2);
        let rows_of = |s: usize| &order[start[s]..start[s + 1]];
        let gather =
            |v: &[f64], rows: &[u32]| -> Vec<f64> { rows.iter().map(|&i| v[i as usize]).collect() };
        let labels = group_routes(b);
        let mut counts = vec![RouteCount {
            route: "own".into(),
            rows: 0,
            groups: 0,
        }];
        let mut groups = Vec::with_capacity(n_groups);
        for (g, stored) in labels.into_iter().enumerate() {
            let rows = rows_of(g);
            let route = match rows.first() {
                Some(&i) => match predictions.routes[i as usize] {
                    RowRoute::Own => "own".to_string(),
                    r => b.route_label(r),
                },
                None => stored,
            };
            count(
                &mut counts,
                &route,
                rows.len(),
                usize::from(!rows.is_empty()),
            );
            let (y, p) = (gather(&target, rows), gather(&predictions.values, rows));
            let scored = !rows.is_empty();
            groups.push(GroupScore {
                group: g,
                rows: rows.len(),
                metric: scored.then(|| metric(b.task, &y, &p)),
                global: match (&global, route.as_str()) {
                    (Some(gp), "own") if scored => Some(metric(b.task, &y, &gather(gp, rows))),
                    _ => None,
                },
                route,
            });
        }
        let unseen = rows_of(n_groups).len();
        if unseen > 0 {
            count(&mut counts, "unseen", unseen, 0);
        }
        let scored: Vec<u32> = order[..start[n_groups + 1]].to_vec();
        let pooled = global
            .as_ref()
            .filter(|_| !scored.is_empty())
            .map(|gp| metric(b.task, &gather(&target, &scored), &gather(gp, &scored)));
        let source = label.file_name().map_or_else(
            || label.display().to_string(),
            |f| f.to_string_lossy().into_owned(),
        );
        Ok(Evaluation {
            source,
            global: pooled,
            groups,
            routes: own_first(counts),
        })
    }
}

/// The key columns, the features, then the target.
fn wanted_columns(b: &ModelBundle) -> Vec<String> {
    let mut wanted = b.key_columns.clone();
    wanted.extend(b.features.iter().cloned());
    wanted.push(b.target.clone());
    wanted
}

/// The target column as `f64`, a null as NaN; a column that is not numeric
/// or boolean is an error naming it.
fn target_values(array: &ArrayRef, name: &str, path: &Path) -> Result<Vec<f64>> {
    let cast = arrow_cast::cast(array, &DataType::Float64)
        .ok()
        .filter(|_| crate::data::is_numeric(array.data_type()))
        .ok_or_else(|| GroupfitError::NonNumericColumn {
            column: name.to_string(),
            path: path.display().to_string(),
            dtype: array.data_type().to_string(),
        })?;
    let values = cast.as_any().downcast_ref::<Float64Array>().unwrap();
    Ok((0..values.len())
        .map(|i| {
            if values.is_null(i) {
                f64::NAN
            } else {
                values.value(i)
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Float64Array, StringArray};
    use arrow_schema::{Field, Schema};

    use super::*;
    use crate::store::fixtures::{bundle, entry, linear};

    /// Group `a` (own model `2 x + 1`), `b` falling back to the global `-x`.
    fn model() -> ModelBundle {
        let mut b = bundle(
            &["g"],
            Some(linear(-1.0, 0.0)),
            vec![
                entry(&["a"], 10, Some(linear(2.0, 1.0))),
                entry(&["b"], 10, None),
            ],
        );
        b.task = Task::Regression;
        b.target = "y".into();
        b.impute = vec![0.0];
        b
    }

    #[test]
    fn a_file_is_scored_per_group_with_the_global_model_beside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.parquet");
        let schema = Arc::new(Schema::new(vec![
            Field::new("g", DataType::Utf8, false),
            Field::new("x", DataType::Float64, true),
            Field::new("y", DataType::Float64, true),
        ]));
        // a: x = 1, 2 -> own 3, 5 against y 3, 7 (RMSE sqrt(2)); global -1, -2
        // (errors 4, 9: RMSE sqrt(48.5)). b: -x = -1 against y 0 (RMSE 1).
        // c is unseen: -3 against -3. The null target row is left out.
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec!["a", "a", "b", "c", "a"])),
                Arc::new(Float64Array::from(vec![1.0, 2.0, 1.0, 3.0, 5.0])),
                Arc::new(Float64Array::from(vec![
                    Some(3.0),
                    Some(7.0),
                    Some(0.0),
                    Some(-3.0),
                    None,
                ])),
            ],
        )
        .unwrap();
        crate::job::write_parquet(&path, &batch).unwrap();
        let e = Evaluation::from_file(&model(), &path, 1).unwrap();
        assert_eq!(e.source, "v.parquet");
        let a = &e.groups[0];
        assert_eq!((a.rows, a.route.as_str()), (2, "own"));
        assert!((a.metric.unwrap() - 2f64.sqrt()).abs() < 1e-12);
        assert!((a.global.unwrap() - 48.5f64.sqrt()).abs() < 1e-12);
        let b = &e.groups[1];
        assert_eq!(
            (b.rows, b.route.as_str(), b.metric, b.global),
            (1, "fallback", Some(1.0), None)
        );
        // Pooled global: errors 4, 9, 1, 0 -> sqrt(98 / 4).
        assert!((e.global.unwrap() - (98.0f64 / 4.0).sqrt()).abs() < 1e-12);
        let routes: Vec<(&str, usize, usize)> = e
            .routes
            .iter()
            .map(|c| (c.route.as_str(), c.rows, c.groups))
            .collect();
        assert_eq!(
            routes,
            vec![("own", 2, 1), ("fallback", 1, 1), ("unseen", 1, 0)]
        );
    }

    #[test]
    fn a_file_without_the_target_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.parquet");
        let schema = Arc::new(Schema::new(vec![
            Field::new("g", DataType::Utf8, false),
            Field::new("x", DataType::Float64, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec!["a"])),
                Arc::new(Float64Array::from(vec![1.0])),
            ],
        )
        .unwrap();
        crate::job::write_parquet(&path, &batch).unwrap();
        let err = Evaluation::from_file(&model(), &path, 1).unwrap_err();
        assert!(
            matches!(err, GroupfitError::MissingColumn { ref column, .. } if column == "y"),
            "{err}"
        );
    }
}
