//! The linear family behind the [`Family`] interface: the grid's configs,
//! the layout, and the grouped Newton fit.

use super::grouped::{explain_grouped, fit_grouped};
use super::model::LinearModel;
use super::params::{LinearConfig, LinearParams};
use crate::data::layout::{GroupedMatrix, LayoutInput};
use crate::data::onehot::{self, Cap, OneHotPlan, PlanInput};
use crate::data::Task;
use crate::error::Result;
use crate::exec::{Explain, OnProgress};
use crate::family::{
    fit_parts, Family, FamilyFit, MemoryShape, MemoryTerm, ShardNeeds, TrainData, UnitFit,
};
use crate::plan::LoadShape;
use crate::tune::{Builder, ConfigEntry};

/// Regularised linear and logistic regression (sklearn's objective).
pub struct Linear;

/// The linear family's checked configuration of every grid point.
pub fn configs(points: &[ConfigEntry]) -> Result<Vec<LinearConfig>> {
    Builder {
        new: LinearParams::new,
        set: LinearParams::set,
        check: LinearParams::check,
    }
    .configs(points)
}

/// The linear family's layout: group-sorted, standardised, with the global
/// pseudo-group when the global model is fitted; with a `cap` (there are
/// categorical features), their one-hot columns per group.
fn layout(data: &TrainData<'_>, cap: Option<Cap>) -> Result<GroupedMatrix> {
    let input = LayoutInput {
        columns: data.columns,
        target: data.target,
        rows: data.rows,
        group_of: data.group_of,
        n_groups: data.n_groups,
        with_global: data.fit[data.n_groups],
        impute: data.impute,
        threads: data.threads,
    };
    match cap {
        None => GroupedMatrix::build(input),
        Some(cap) => {
            let t = std::time::Instant::now();
            let plan = OneHotPlan::build(PlanInput {
                columns: data.columns,
                kinds: data.kinds,
                rows: data.rows,
                group_of: data.group_of,
                n_groups: data.n_groups,
                cap,
                threads: data.threads,
            });
            if crate::util::trace::trace() {
                eprintln!(
                    "[groupfit] one-hot encodings: {} columns for {} features, {:.1} ms",
                    plan.width(),
                    data.kinds.len(),
                    t.elapsed().as_secs_f64() * 1e3
                );
            }
            GroupedMatrix::build_encoded(input, plan)
        }
    }
}

/// Fits the grid `configs` on one layout.
fn fit_layout(
    data: &TrainData<'_>,
    configs: &[LinearConfig],
    cap: Option<Cap>,
    on: &mut OnProgress<'_>,
) -> Result<FamilyFit<LinearModel>> {
    let matrix = layout(data, cap)?;
    if crate::util::trace::trace() {
        eprintln!("[groupfit] linear layout built");
    }
    let (fitted, report) = fit_grouped(
        &matrix,
        data.task,
        configs,
        data.fit,
        data.strategy,
        data.threads,
        on,
    );
    let mut units: Vec<Vec<UnitFit<LinearModel>>> = fitted
        .into_iter()
        .map(|us| {
            us.into_iter()
                .map(|u| UnitFit {
                    model: u.model,
                    iterations: u.iterations,
                    converged: u.converged,
                })
                .collect()
        })
        .collect();
    // Without the global pseudo-group, its (empty) entry.
    units.resize_with(data.n_groups + 1, Vec::new);
    Ok(FamilyFit {
        units,
        impute: matrix.impute().to_vec(),
        report,
    })
}

impl Family for Linear {
    type Model = LinearModel;

    fn name(&self) -> &'static str {
        "linear"
    }

    fn sharded(&self) -> bool {
        true
    }

    fn load_shapes(&self, task: Task, _configs: &[ConfigEntry], rows: &[usize]) -> Vec<LoadShape> {
        rows.iter()
            .map(|&n| LoadShape {
                heavy: super::solver::hessian_rows(task, n),
                ..LoadShape::default()
            })
            .collect()
    }

    fn shard_needs(&self, _configs: &[ConfigEntry]) -> ShardNeeds {
        // The imputation values are the global pseudo-group's moments.
        ShardNeeds {
            validation: false,
            global_rows: true,
            global_in_table_order: false,
            whole_groups: false,
        }
    }

    fn memory(&self, shape: &MemoryShape<'_>, points: &[ConfigEntry]) -> Result<Vec<MemoryTerm>> {
        let configs = configs(points)?;
        let d = shape.features as u64;
        let dp = shape.features.next_multiple_of(4) as u64;
        // A group's blocks: full ones of BLOCK rows, the last one's rows
        // rounded up to LANES.
        let padded = |n: usize| {
            use crate::data::layout::{BLOCK, LANES};
            (n / BLOCK * BLOCK + (n % BLOCK).next_multiple_of(LANES)) as u64
        };
        let slots: u64 = shape.model_rows().map(padded).sum();
        let rows = shape.model_rows().sum::<usize>() as u64;
        let units = shape.model_rows().count() * configs.len();
        Ok(vec![
            // `f32` features, `f64` targets, and while it is built each
            // training row's source (`u32`).
            MemoryTerm {
                name: "layout",
                bytes: 4 * slots * dp + 8 * rows + 4 * shape.train_rows as u64,
            },
            // Each group's mean and scale per feature (`f64`) and penalties.
            MemoryTerm {
                name: "statistics",
                bytes: 24 * (shape.groups as u64 + 1) * d,
            },
            // Weights, the accepted point and the direction; per thread,
            // the Newton solve's two batched `p x p` systems (`[f64; 4]`),
            // a block's `f32` cross products, and the statistics (a
            // Hessian) of each config of the group it scans.
            MemoryTerm {
                name: "units",
                bytes: units as u64 * (64 + 24 * (d + 1))
                    + shape.threads as u64
                        * (64 * (d + 1) * (d + 1)
                            + 4 * dp * dp
                            + 8 * configs.len() as u64 * (d + 1) * (d + 2)),
            },
        ])
    }

    fn check(&self, points: &[ConfigEntry]) -> Result<()> {
        configs(points).map(|_| ())
    }

    fn fit(
        &self,
        data: &TrainData<'_>,
        points: &[ConfigEntry],
        on: &mut OnProgress<'_>,
    ) -> Result<FamilyFit<LinearModel>> {
        let configs = configs(points)?;
        let parts = onehot::layout_parts(data.kinds, configs.iter().map(LinearConfig::cap));
        let ks: Vec<Vec<usize>> = parts.iter().map(|p| p.1.clone()).collect();
        fit_parts(data, &ks, on, |i, ks, on| {
            let sub: Vec<LinearConfig> = ks.iter().map(|&k| configs[k]).collect();
            fit_layout(data, &sub, parts[i].0, on)
        })
    }

    fn explain(&self, data: &TrainData<'_>, points: &[ConfigEntry]) -> Result<Explain> {
        let configs = configs(points)?;
        // The first part's layout (the grid's first config's encoding) for
        // every config.
        let matrix = layout(
            data,
            onehot::layout_parts(data.kinds, configs.iter().map(LinearConfig::cap))[0].0,
        )?;
        Ok(explain_grouped(
            &matrix,
            data.task,
            &configs,
            data.fit,
            data.threads,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::{Grid, NoWords};

    #[test]
    fn grid_points_become_checked_configs() {
        let grid = |s: &str| Grid::parse(&[s.to_string()], &NoWords).unwrap().points();
        assert_eq!(configs(&grid("max_iter=5,6,7")).unwrap()[1].max_iter(), 6);
        assert!(configs(&grid("C=-1")).is_err());
    }

    fn grid_points(spec: &str) -> Vec<ConfigEntry> {
        Grid::parse(&[spec.to_string()], &NoWords).unwrap().points()
    }

    #[test]
    fn memory_counts_padded_blocks_of_every_group_and_the_global_copy() {
        // Groups of 300 and 10 rows, 5 features (4 stored as 8), the global
        // copy of all 310: blocks padded to 256 + 48, 16 and 256 + 64 rows.
        let shape = MemoryShape {
            group_rows: &[300, 10],
            train_rows: 310,
            valid_rows: 0,
            features: 5,
            groups: 2,
            global: true,
            threads: 1,
        };
        let terms = Linear.memory(&shape, &grid_points("C=1")).unwrap();
        let bytes = |name| terms.iter().find(|t| t.name == name).unwrap().bytes;
        // 4 * 640 * 8 (x) + 8 * 620 (y) + 4 * 310 (sources)
        assert_eq!(bytes("layout"), 20_480 + 4_960 + 1_240);
        assert_eq!(bytes("statistics"), 24 * 3 * 5);
        // 3 units of 64 + 24 * 6 bytes; one thread's two 6 x 6 systems of
        // 4 lanes, 8 x 8 cross products and one config's 6 x 7 statistics.
        assert_eq!(bytes("units"), 3 * 208 + 64 * 36 + 4 * 64 + 8 * 42);
    }
}
