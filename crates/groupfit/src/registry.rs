//! The families `train` knows, by `--model` name.
//!
//! A family implements [`Family`] with its own model type; [`AnyFamily`]
//! is the same family with its models wrapped as the model file's
//! [`FittedModel`], which is what `job` and the runners work with. Adding
//! a family: a folder, a line in [`family`] and [`MODELS`], and a variant
//! of [`FittedModel`].

use crate::data::Task;
use crate::error::{GroupfitError, Result};
use crate::exec::{Explain, OnProgress};
use crate::family::{Family, FamilyFit, MemoryShape, MemoryTerm, ShardNeeds, TrainData};
use crate::plan::LoadShape;
use crate::shard::{ShardSpec, Sharded};
use crate::store::FittedModel;
use crate::tune::{ConfigEntry, ParamWords};

/// Model families `train` knows, as named by `--model`.
pub const MODELS: &[&str] = &["linear", "gbdt", "mlp"];

/// The family called `name`.
pub fn family(name: &str) -> Result<Box<dyn AnyFamily>> {
    match name {
        "linear" => Ok(Box::new(crate::linear::Linear)),
        "gbdt" => Ok(Box::new(crate::gbdt::Gbdt)),
        "mlp" => Ok(Box::new(crate::mlp::Mlp)),
        _ => Err(GroupfitError::arg(format!(
            "unknown model '{name}' (available: {})",
            MODELS.join(", ")
        ))),
    }
}

/// What [`with_sharded`] calls with the family a shard spec names.
pub trait ShardedVisitor {
    /// What the visit returns.
    type Out;
    /// Called with the family's remote part.
    fn visit<S>(self, family: S) -> Self::Out
    where
        S: Sharded + Send + 'static,
        FittedModel: From<S::Model>;
}

/// Calls `visitor` with the remote part of the family `spec` names.
pub fn with_sharded<V: ShardedVisitor>(spec: &ShardSpec, visitor: V) -> Result<V::Out> {
    match spec.model.as_str() {
        "linear" => Ok(visitor.visit(crate::linear::remote::LinearShards::new(spec)?)),
        "gbdt" => Ok(visitor.visit(crate::gbdt::remote::GbdtShards::new(spec)?)),
        "mlp" => Ok(visitor.visit(crate::mlp::remote::MlpShards::new(spec)?)),
        name => Err(GroupfitError::arg(format!(
            "the {name} family cannot be cut over remote workers"
        ))),
    }
}

/// Every registered family's word-valued parameters: the grid is parsed
/// with these, so a family's word given to another family is still read as
/// a word (and then refused by that family's check, naming the parameter).
pub struct AllWords;

impl AllWords {
    fn first<T>(&self, f: impl Fn(&dyn ParamWords) -> Option<T>) -> Option<T> {
        MODELS
            .iter()
            .filter_map(|name| family(name).ok())
            .find_map(|fam| f(fam.words()))
    }
}

impl ParamWords for AllWords {
    fn encode(&self, name: &str, text: &str) -> Option<f64> {
        self.first(|w| w.encode(name, text))
    }
    fn form(&self, name: &str) -> Option<String> {
        self.first(|w| w.form(name))
    }
    fn display(&self, name: &str, value: f64) -> Option<String> {
        self.first(|w| w.display(name, value))
    }
}

/// A [`Family`] whose fitted models are the model file's [`FittedModel`]s;
/// every `Family` whose model converts into one is an `AnyFamily`.
pub trait AnyFamily: Send + Sync {
    /// See [`Family::name`].
    fn name(&self) -> &'static str;
    /// See [`Family::words`].
    fn words(&self) -> &dyn ParamWords;
    /// See [`Family::check`].
    fn check(&self, configs: &[ConfigEntry]) -> Result<()>;
    /// See [`Family::features_from_file`].
    fn features_from_file(&self, configs: &[ConfigEntry]) -> bool;
    /// See [`Family::model_overhead_rows`].
    fn model_overhead_rows(&self, configs: &[ConfigEntry]) -> usize;
    /// See [`Family::sharded`].
    fn sharded(&self) -> bool;
    /// See [`Family::shard_needs`].
    fn shard_needs(&self, configs: &[ConfigEntry]) -> ShardNeeds;
    /// See [`Family::load_shapes`].
    fn load_shapes(&self, task: Task, configs: &[ConfigEntry], rows: &[usize]) -> Vec<LoadShape>;
    /// See [`Family::memory`].
    fn memory(&self, shape: &MemoryShape<'_>, configs: &[ConfigEntry]) -> Result<Vec<MemoryTerm>>;
    /// See [`Family::fit`].
    fn fit(
        &self,
        data: &TrainData<'_>,
        configs: &[ConfigEntry],
        on: &mut OnProgress<'_>,
    ) -> Result<FamilyFit<FittedModel>>;
    /// See [`Family::explain`].
    fn explain(&self, data: &TrainData<'_>, configs: &[ConfigEntry]) -> Result<Explain>;
}

impl<F> AnyFamily for F
where
    F: Family + Send + Sync,
    F::Model: Into<FittedModel>,
{
    fn name(&self) -> &'static str {
        Family::name(self)
    }
    fn words(&self) -> &dyn ParamWords {
        Family::words(self)
    }
    fn check(&self, configs: &[ConfigEntry]) -> Result<()> {
        Family::check(self, configs)
    }
    fn features_from_file(&self, configs: &[ConfigEntry]) -> bool {
        Family::features_from_file(self, configs)
    }
    fn model_overhead_rows(&self, configs: &[ConfigEntry]) -> usize {
        Family::model_overhead_rows(self, configs)
    }
    fn sharded(&self) -> bool {
        Family::sharded(self)
    }
    fn memory(&self, shape: &MemoryShape<'_>, configs: &[ConfigEntry]) -> Result<Vec<MemoryTerm>> {
        Family::memory(self, shape, configs)
    }
    fn shard_needs(&self, configs: &[ConfigEntry]) -> ShardNeeds {
        Family::shard_needs(self, configs)
    }
    fn load_shapes(&self, task: Task, configs: &[ConfigEntry], rows: &[usize]) -> Vec<LoadShape> {
        Family::load_shapes(self, task, configs, rows)
    }
    fn fit(
        &self,
        data: &TrainData<'_>,
        configs: &[ConfigEntry],
        on: &mut OnProgress<'_>,
    ) -> Result<FamilyFit<FittedModel>> {
        Ok(Family::fit(self, data, configs, on)?.map_models(Into::into))
    }
    fn explain(&self, data: &TrainData<'_>, configs: &[ConfigEntry]) -> Result<Explain> {
        Family::explain(self, data, configs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::Grid;

    #[test]
    fn every_familys_words_are_read_whatever_the_family() {
        let specs = ["layers=64x32".to_string(), "optimizer=sgd".to_string()];
        let pts = Grid::parse(&specs, &AllWords).unwrap().points();
        assert_eq!(pts[0].name, "layers=64x32,optimizer=sgd");
        let e = Grid::parse(&["optimizer=rmsprop".to_string()], &AllWords).unwrap_err();
        assert!(e.to_string().contains("adam or sgd"), "{e}");
        // The linear family then refuses the MLP's parameter by name.
        let e = family("linear")
            .unwrap()
            .check(&pts)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("'layers'") && e.contains("unknown for model linear"),
            "{e}"
        );
    }

    #[test]
    fn every_listed_model_is_registered_under_its_name() {
        for name in MODELS {
            assert_eq!(family(name).unwrap().name(), *name);
        }
        let e = family("forest").err().unwrap().to_string();
        assert!(
            e.contains("unknown model 'forest'") && e.contains("linear, gbdt, mlp"),
            "{e}"
        );
    }
}
