//! The gbdt family behind the [`Family`] interface: the grid's configs, the
//! cost of a booster for whole-group placement, and the grouped fit.

use super::model::GbdtModel;
use super::params::{GbdtConfig, GbdtParams, BOOL_PARAMS};
use crate::data::Task;
use crate::error::Result;
use crate::exec::{Explain, OnProgress};
use crate::family::{Family, FamilyFit, MemoryShape, MemoryTerm, ShardNeeds, TrainData, UnitFit};
use crate::plan::LoadShape;
use crate::tune::{Builder, ConfigEntry, ParamWords};

/// Histogram gradient-boosted trees (LightGBM's parameters and defaults);
/// missing values are handled natively, so there is no imputation.
pub struct Gbdt;

/// The gbdt family's word-valued parameters: its switches take `true` and
/// `false` (any case) as well as `1` and `0`.
pub struct GbdtWords;

impl ParamWords for GbdtWords {
    fn encode(&self, name: &str, text: &str) -> Option<f64> {
        if !BOOL_PARAMS.contains(&name) {
            return None;
        }
        match text.to_ascii_lowercase().as_str() {
            "true" => Some(1.0),
            "false" => Some(0.0),
            _ => None,
        }
    }
    fn form(&self, name: &str) -> Option<String> {
        BOOL_PARAMS
            .contains(&name)
            .then(|| "true, false, 1 or 0".to_string())
    }
    fn display(&self, name: &str, value: f64) -> Option<String> {
        match value {
            1.0 if BOOL_PARAMS.contains(&name) => Some("true".to_string()),
            0.0 if BOOL_PARAMS.contains(&name) => Some("false".to_string()),
            _ => None,
        }
    }
}

/// The gbdt family's checked configuration of every grid point.
pub fn configs(points: &[ConfigEntry]) -> Result<Vec<GbdtConfig>> {
    Builder {
        new: GbdtParams::new,
        set: GbdtParams::set,
        check: GbdtParams::check,
    }
    .configs(points)
}

impl Family for Gbdt {
    type Model = GbdtModel;

    fn name(&self) -> &'static str {
        "gbdt"
    }

    fn words(&self) -> &dyn ParamWords {
        &GbdtWords
    }

    fn sharded(&self) -> bool {
        true
    }

    fn shard_needs(&self, points: &[ConfigEntry]) -> ShardNeeds {
        // Early stopping watches each group's validation rows; quantized
        // gradients are scaled by all of a group's rows.
        let cs = configs(points).unwrap_or_default();
        ShardNeeds {
            validation: cs.iter().any(|c| c.early_stopping_rounds() > 0),
            global_rows: false,
            global_in_table_order: false,
            whole_groups: cs.iter().any(|c| c.quantization().is_some()),
        }
    }

    fn memory(&self, shape: &MemoryShape<'_>, points: &[ConfigEntry]) -> Result<Vec<MemoryTerm>> {
        let configs = configs(points)?;
        let d = shape.features as u64;
        // The rows binned, and as many validation rows (the global model's
        // copy included).
        let n = shape.model_rows().sum::<usize>() as u64;
        let v = (shape.valid_rows * (1 + usize::from(shape.global))) as u64;
        let term = |name, bytes| MemoryTerm { name, bytes };
        let max_bin = configs.iter().map(|c| c.max_bin()).max().unwrap_or(255) as usize;
        let per_bin = configs.first().map_or(3, |c| c.min_data_in_bin().max(1)) as usize;
        // One mapper per (model, feature): its bins' upper bounds (`f64`),
        // a power of two of them.
        let mappers: u64 = shape
            .model_rows()
            .map(|n| 64 + 8 * (n / per_bin).clamp(1, max_bin + 1).next_power_of_two() as u64)
            .sum::<u64>()
            * d;
        let threads = shape.threads.min(shape.features).max(1) as u64;
        // While binning: each feature's bins, then the column-major and
        // row-major matrices (`u8`), the row lists, and per thread a
        // feature's values (`f64`).
        let binning = d * (3 * n + 2 * v) + 4 * (n + v) + mappers + 8 * n * threads;
        // While boosting: the two matrices and the targets; each booster's
        // scores, gradients and row order (20 bytes a row, 28 with quantized
        // gradients: the true ones too), made up front;
        // its trees (about 48 bytes a leaf a round, as many leaves as its
        // rows allow); per thread, its histograms (two `f64` per bin of
        // every feature, a pool of `num_leaves + 2`) and a leaf's row list.
        let layout = d * (2 * n + v) + 8 * (n + v) + mappers;
        let per_row: u64 = configs
            .iter()
            .map(|c| if c.quantization().is_some() { 28 } else { 20 })
            .sum();
        let boosters = per_row * n;
        let trees: u64 = configs
            .iter()
            .map(|c| {
                let leaf_rows = 2 * c.min_data_in_leaf().max(1) as usize;
                shape
                    .model_rows()
                    .map(|n| {
                        let leaves = (n / leaf_rows).clamp(1, c.num_leaves() as usize) as u64;
                        1_024 + u64::from(c.rounds()) * (64 + 48 * leaves)
                    })
                    .sum::<u64>()
            })
            .sum();
        let widest = configs.iter().map(|c| c.num_leaves()).max().unwrap_or(31) as u64;
        let bins = max_bin as u64 + 1;
        let largest = shape.model_rows().max().unwrap_or(0) as u64;
        let histograms = shape.threads as u64 * (16 * bins * d * (widest + 2) + 4 * largest);
        Ok(if binning > layout + boosters + trees + histograms {
            vec![term("binning", binning)]
        } else {
            vec![
                term("binned rows", layout),
                term("boosters", boosters),
                term("trees", trees),
                term("histograms", histograms),
            ]
        })
    }

    fn check(&self, points: &[ConfigEntry]) -> Result<()> {
        configs(points).map(|_| ())
    }

    fn model_overhead_rows(&self, points: &[ConfigEntry]) -> usize {
        // A tree's split searches (about two per leaf) each visit every bin
        // of every feature, where a row is visited by about two or three
        // histograms per tree: a booster costs about `num_leaves * max_bin`
        // rows beyond its own (docs/benchmarks.md has the Ray placement this
        // was measured on).
        configs(points).map_or(0, |cs| {
            let total: usize = cs
                .iter()
                .map(|c| c.num_leaves() as usize * c.max_bin() as usize)
                .sum();
            total / cs.len().max(1)
        })
    }

    fn load_shapes(&self, _task: Task, points: &[ConfigEntry], rows: &[usize]) -> Vec<LoadShape> {
        // A booster cut over remote workers reduces a leaf's histogram per
        // pass: about one meeting per leaf of every round's tree.
        let leaves = configs(points).map_or(1, |cs| {
            cs.iter()
                .map(|c| c.num_leaves() as usize)
                .max()
                .unwrap_or(1)
        });
        let shape = LoadShape {
            syncs: leaves.max(1),
            ..LoadShape::default()
        };
        vec![shape; rows.len()]
    }

    fn fit(
        &self,
        data: &TrainData<'_>,
        points: &[ConfigEntry],
        on: &mut OnProgress<'_>,
    ) -> Result<FamilyFit<GbdtModel>> {
        let configs = configs(points)?;
        let (fitted, report) = super::run::fit_grouped(data, &configs, on);
        let units = fitted
            .into_iter()
            .map(|us| {
                us.into_iter()
                    .map(|u| UnitFit {
                        model: u.model,
                        iterations: u.rounds as u32,
                        converged: true,
                    })
                    .collect()
            })
            .collect();
        Ok(FamilyFit {
            units,
            impute: Vec::new(),
            report,
        })
    }

    fn explain(&self, data: &TrainData<'_>, points: &[ConfigEntry]) -> Result<Explain> {
        let configs = configs(points)?;
        Ok(super::grouped::explain_grouped(data, &configs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::{Grid, NoWords};

    #[test]
    fn switches_take_true_false_one_and_zero() {
        let specs = [
            "use_quantized_grad=TRUE,0".to_string(),
            "stochastic_rounding=false".to_string(),
        ];
        let pts = Grid::parse(&specs, &GbdtWords).unwrap().points();
        let names: Vec<&str> = pts.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "use_quantized_grad=true,stochastic_rounding=false",
                "use_quantized_grad=false,stochastic_rounding=false"
            ]
        );
        let cs = configs(&pts).unwrap();
        assert!(cs[0].quantization().is_some_and(|q| !q.stochastic));
        assert_eq!(cs[1].quantization(), None);
        let bad = Grid::parse(&["quant_train_renew_leaf=yes".to_string()], &GbdtWords);
        assert_eq!(
            bad.unwrap_err().to_string(),
            "invalid parameter 'quant_train_renew_leaf': 'yes' is not valid: expected true, false, 1 or 0"
        );
        // Numeric parameters take no words.
        assert!(Grid::parse(&["num_leaves=true".to_string()], &GbdtWords).is_err());
    }

    #[test]
    fn a_cut_booster_meets_once_per_leaf() {
        let specs = ["num_leaves=15,31".to_string()];
        let pts = Grid::parse(&specs, &NoWords).unwrap().points();
        let shapes = Gbdt.load_shapes(Task::Binary, &pts, &[5000, 10]);
        assert!(shapes
            .iter()
            .all(|s| (s.steps, s.syncs, s.heavy, s.scan) == (1, 31, 0, 1.0)));
    }

    #[test]
    fn trees_weigh_num_leaves_times_max_bin_per_model() {
        let grid = |specs: &[&str]| {
            Grid::parse(
                &specs.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                &NoWords,
            )
            .unwrap()
            .points()
        };
        // The mean over the grid: (15 + 31) / 2 * 255.
        let trees = grid(&["num_leaves=15,31"]);
        assert_eq!(Gbdt.model_overhead_rows(&trees), 23 * 255);
        assert_eq!(Gbdt.model_overhead_rows(&grid(&["max_bin=63"])), 31 * 63);
        assert_eq!(
            crate::linear::Linear.model_overhead_rows(&grid(&["C=0.1,1"])),
            0
        );
    }
}
