//! The MLP family behind the [`Family`] interface: the grid's configs and
//! word-valued parameters, the layout, and the grouped fit.

use super::grouped::{fit_grouped, FitOptions, MlpData, MlpInput, MlpPass};
use super::model::MlpModel;
use super::params::{display_param, encode_param, word_form, MlpConfig, MlpParams, Optimizer};
use crate::data::keys::group_stream;
use crate::data::onehot::{self, Cap, OneHotPlan, PlanInput};
use crate::data::Task;
use crate::error::{GroupfitError, Result};
use crate::exec::{explain, Explain, OnProgress};
use crate::family::{
    fit_parts, Family, FamilyFit, MemoryShape, MemoryTerm, ShardNeeds, TrainData, UnitFit,
};
use crate::plan::LoadShape;
use crate::tune::{Builder, ConfigEntry, ParamWords};

/// The MLP family behind `--model mlp`.
pub struct Mlp;

/// The MLP family's words: `layers=64x32`, `optimizer=adam|sgd`.
pub struct MlpWords;

impl ParamWords for MlpWords {
    fn encode(&self, name: &str, text: &str) -> Option<f64> {
        encode_param(name, text)
    }
    fn form(&self, name: &str) -> Option<String> {
        word_form(name)
    }
    fn display(&self, name: &str, value: f64) -> Option<String> {
        display_param(name, value)
    }
}

/// The MLP family's checked configuration of every grid point.
pub fn configs(points: &[ConfigEntry]) -> Result<Vec<MlpConfig>> {
    Builder {
        new: MlpParams::new,
        set: MlpParams::set,
        check: MlpParams::check,
    }
    .configs(points)
}

/// Imputation values (0 for a categorical feature), the layout (with a
/// `cap`: one-hot columns for the categorical features) and every group's
/// RNG stream.
fn prepare(data: &TrainData<'_>, cap: Option<Cap>) -> (Vec<f64>, MlpData, Vec<u64>) {
    let mut impute = data.impute.map_or_else(
        || crate::data::training_means(data.columns, data.rows),
        <[f64]>::to_vec,
    );
    for (v, k) in impute.iter_mut().zip(data.kinds) {
        if k.levels().is_some() {
            *v = 0.0;
        }
    }
    let input = MlpInput {
        columns: data.columns,
        target: data.target,
        rows: data.rows,
        group_of: data.group_of,
        n_groups: data.n_groups,
        fit: data.fit,
        impute: &impute,
        threads: data.threads,
    };
    let layout = match cap {
        None => MlpData::build(input),
        Some(cap) => {
            let plan = OneHotPlan::build(PlanInput {
                columns: data.columns,
                kinds: data.kinds,
                rows: data.rows,
                group_of: data.group_of,
                n_groups: data.n_groups,
                cap,
                threads: data.threads,
            });
            MlpData::build_encoded(input, plan)
        }
    };
    let streams: Vec<u64> = (0..=data.n_groups)
        .map(|g| group_stream(data.keys.get(g)))
        .collect();
    (impute, layout, streams)
}

impl Family for Mlp {
    type Model = MlpModel;

    fn name(&self) -> &'static str {
        "mlp"
    }

    fn sharded(&self) -> bool {
        true
    }

    fn load_shapes(&self, _task: Task, points: &[ConfigEntry], rows: &[usize]) -> Vec<LoadShape> {
        // Every unit starts with all of its epochs' mini-batch steps left;
        // a step scans a batch of the group's rows.
        let cs = configs(points).unwrap_or_default();
        rows.iter()
            .map(|&n| {
                let most = cs
                    .iter()
                    .max_by_key(|c| c.epochs() as usize * super::grouped::steps_per_epoch(n, c));
                most.map_or_else(LoadShape::default, |c| LoadShape {
                    steps: (c.epochs() as usize * super::grouped::steps_per_epoch(n, c)).max(1),
                    scan: if n == 0 {
                        1.0
                    } else {
                        c.batch_size().min(n) as f64 / n as f64
                    },
                    ..LoadShape::default()
                })
            })
            .collect()
    }

    fn shard_needs(&self, _configs: &[ConfigEntry]) -> ShardNeeds {
        // Imputation values from every row; the global model's batches
        // index its rows in table order.
        ShardNeeds {
            validation: false,
            global_rows: true,
            global_in_table_order: true,
            whole_groups: false,
        }
    }

    fn memory(&self, shape: &MemoryShape<'_>, points: &[ConfigEntry]) -> Result<Vec<MemoryTerm>> {
        let configs = configs(points)?;
        let d = shape.features;
        let rows = shape.model_rows().sum::<usize>() as u64;
        let units = shape.model_rows().count() as u64;
        let params: u64 = configs.iter().map(|c| c.n_params(d) as u64).sum();
        let adam: u64 = configs
            .iter()
            .filter(|c| c.optimizer() == Optimizer::Adam)
            .map(|c| c.n_params(d) as u64)
            .sum();
        Ok(vec![
            // `f32` features and target, and each row's table row.
            MemoryTerm {
                name: "layout",
                bytes: rows * (4 * d as u64 + 4 + 4),
            },
            // Every unit's shuffled row order (`u32`), made up front.
            MemoryTerm {
                name: "shuffles",
                bytes: rows * 4 * configs.len() as u64,
            },
            // Weights (`f32`), and Adam's two moments.
            MemoryTerm {
                name: "weights",
                bytes: units * 4 * (params + 2 * adam),
            },
            // Each group's mean and scale per feature (`f64`).
            MemoryTerm {
                name: "statistics",
                bytes: 16 * (shape.groups as u64 + 1) * d as u64,
            },
        ])
    }

    fn words(&self) -> &dyn ParamWords {
        &MlpWords
    }

    fn check(&self, points: &[ConfigEntry]) -> Result<()> {
        configs(points).map(|_| ())
    }

    fn explain(&self, data: &TrainData<'_>, points: &[ConfigEntry]) -> Result<Explain> {
        let configs = configs(points)?;
        // The first part's layout (the grid's first config's encoding) for
        // every config.
        let (_, layout, streams) = prepare(
            data,
            onehot::layout_parts(data.kinds, configs.iter().map(MlpConfig::cap))[0].0,
        );
        let family = MlpPass::new(&layout, data.task, &configs, &streams, data.seed);
        let units = family.initial_units(data.fit, data.threads);
        Ok(explain(&family, units, &family.slot_ranges(), data.threads))
    }

    fn fit(
        &self,
        data: &TrainData<'_>,
        points: &[ConfigEntry],
        on: &mut OnProgress<'_>,
    ) -> Result<FamilyFit<MlpModel>> {
        let configs = configs(points)?;
        // Targets are float32 in training: one past its range would be
        // infinite, and every prediction NaN.
        if let Some(&r) = data
            .rows
            .iter()
            .find(|&&r| data.target[r as usize].abs() > f32::MAX as f64)
        {
            return Err(GroupfitError::arg(format!(
                "the mlp family trains on float32 targets: row {r} has target {:e}, beyond +-{:e}; rescale the target",
                data.target[r as usize],
                f32::MAX
            )));
        }
        let parts = onehot::layout_parts(data.kinds, configs.iter().map(MlpConfig::cap));
        let ks: Vec<Vec<usize>> = parts.iter().map(|p| p.1.clone()).collect();
        fit_parts(data, &ks, on, |i, ks, on| {
            let sub: Vec<MlpConfig> = ks.iter().map(|&k| configs[k].clone()).collect();
            fit_layout(data, &sub, parts[i].0, on)
        })
    }
}

/// Fits the grid `configs` on one layout.
fn fit_layout(
    data: &TrainData<'_>,
    configs: &[MlpConfig],
    cap: Option<Cap>,
    on: &mut OnProgress<'_>,
) -> Result<FamilyFit<MlpModel>> {
    let t = std::time::Instant::now();
    let (impute, layout, streams) = prepare(data, cap);
    if crate::util::trace::trace() {
        eprintln!(
            "[groupfit] mlp layout: {:.1} ms",
            t.elapsed().as_secs_f64() * 1e3
        );
    }
    let (fitted, report, flops) = fit_grouped(
        &layout,
        configs,
        FitOptions {
            task: data.task,
            fit: data.fit,
            streams: &streams,
            seed: data.seed,
            strategy: data.strategy,
            workers: data.threads,
        },
        on,
    );
    if crate::util::trace::trace() {
        eprintln!(
            "[groupfit] mlp training steps: {:.3} GFLOP in {:.3} s of passes = {:.2} GFLOP/s",
            flops / 1e9,
            report.passes_s,
            flops / 1e9 / report.passes_s.max(1e-9)
        );
    }
    let units = fitted
        .into_iter()
        .map(|us| {
            us.into_iter()
                .map(|u| UnitFit {
                    model: u.model,
                    iterations: u.iterations,
                    converged: true,
                })
                .collect()
        })
        .collect();
    Ok(FamilyFit {
        units,
        impute,
        report,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::Grid;

    #[test]
    fn a_groups_load_is_its_mini_batch_steps() {
        // 1,000 rows, batches of 256: 4 steps an epoch; 3 epochs beat 2.
        let specs = ["batch_size=256".to_string(), "epochs=2,3".to_string()];
        let pts = Grid::parse(&specs, &MlpWords).unwrap().points();
        let shapes = Mlp.load_shapes(Task::Binary, &pts, &[1000, 100, 0]);
        assert_eq!((shapes[0].steps, shapes[0].scan), (12, 0.256));
        // a group smaller than a batch: one step an epoch over all of it
        assert_eq!((shapes[1].steps, shapes[1].scan), (3, 1.0));
        assert_eq!(
            (shapes[2].steps, shapes[2].heavy, shapes[2].syncs),
            (1, 0, 1)
        );
    }

    #[test]
    fn mlp_words_are_encoded_and_named() {
        let specs = ["layers=64x32,8".to_string(), "optimizer=sgd".to_string()];
        let pts = Grid::parse(&specs, &MlpWords).unwrap().points();
        assert_eq!(pts[0].name, "layers=64x32,optimizer=sgd");
        assert_eq!(pts[0].params["layers"], 640032.0);
        assert_eq!(pts[1].name, "layers=8,optimizer=sgd");
        assert!(Grid::parse(&["layers=64y32".to_string()], &MlpWords).is_err());
        assert_eq!(configs(&pts).unwrap().len(), 2);
    }
}
