//! The linear family behind the [`Family`] interface: the grid's configs,
//! the layout, and the grouped Newton fit.

use super::grouped::{explain_grouped, fit_grouped};
use super::model::LinearModel;
use super::params::{LinearConfig, LinearParams};
use crate::data::layout::{GroupedMatrix, LayoutInput};
use crate::error::Result;
use crate::exec::{Explain, PassProgress};
use crate::family::{Family, FamilyFit, TrainData, UnitFit};
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
/// pseudo-group when the global model is fitted.
fn layout(data: &TrainData<'_>) -> Result<GroupedMatrix> {
    GroupedMatrix::build(LayoutInput {
        columns: data.columns,
        target: data.target,
        rows: data.rows,
        group_of: data.group_of,
        n_groups: data.n_groups,
        with_global: data.fit[data.n_groups],
        threads: data.threads,
    })
}

impl Family for Linear {
    type Model = LinearModel;

    fn name(&self) -> &'static str {
        "linear"
    }

    fn check(&self, points: &[ConfigEntry]) -> Result<()> {
        configs(points).map(|_| ())
    }

    fn fit(
        &self,
        data: &TrainData<'_>,
        points: &[ConfigEntry],
        on: &mut dyn FnMut(PassProgress),
    ) -> Result<FamilyFit<LinearModel>> {
        let configs = configs(points)?;
        let matrix = layout(data)?;
        if crate::util::trace::trace() {
            eprintln!("[groupfit] linear layout built");
        }
        let (fitted, report) = fit_grouped(
            &matrix,
            data.task,
            &configs,
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

    fn explain(&self, data: &TrainData<'_>, points: &[ConfigEntry]) -> Result<Explain> {
        let configs = configs(points)?;
        let matrix = layout(data)?;
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
}
