//! Which columns are features: numeric ones, categorical ones, and the
//! columns left out with the reason. The plan is made from the schema
//! ([`plan_columns`]); the categorical levels and the all-null columns are
//! known once the data is read ([`ColumnAccount`]).

use std::collections::BTreeMap;
use std::path::Path;

use arrow_schema::Schema;
use serde::{Deserialize, Serialize};

use super::arguments::TrainSpec;
use crate::data::categorical::{role, temporal_feature, Role, ValueKind};
use crate::data::missing_column;
use crate::error::{GroupfitError, Result};

/// How one feature column is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Declared {
    /// As numbers.
    Numeric,
    /// Through a dictionary built from its training values.
    Categorical(ValueKind),
}

/// The features and how to read them, with the columns left out so far.
#[derive(Debug, Clone)]
pub(super) struct ColumnPlan {
    /// Feature columns, in model order.
    pub features: Vec<String>,
    /// How each feature is read.
    pub declared: Vec<Declared>,
    /// Whether the features were chosen by default (all-null ones are then
    /// left out once read).
    pub defaulted: bool,
    /// Columns left out, with the reason.
    pub ignored: Vec<(String, String)>,
}

/// What `train` did with each column of its input.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ColumnAccount {
    /// Numeric features.
    pub numeric: Vec<String>,
    /// Categorical features and their number of categories.
    pub categorical: BTreeMap<String, usize>,
    /// Columns left out, and why.
    pub ignored: BTreeMap<String, String>,
}

/// The features of `schema` for `spec` (given or defaulted), checked.
pub(super) fn plan_columns(spec: &TrainSpec, schema: &Schema, path: &Path) -> Result<ColumnPlan> {
    let named_categorical = spec.categorical.clone().unwrap_or_default();
    for column in &named_categorical {
        let field = schema
            .field_with_name(column)
            .map_err(|_| missing_column(column, path, schema))?;
        if !matches!(role(field.data_type()), Role::Integer | Role::Text) {
            return Err(GroupfitError::arg(format!(
                "--categorical names '{column}', of type {}; only text and integer columns can be categorical",
                field.data_type()
            )));
        }
    }
    let is_key_or_target = |c: &str| spec.by.iter().any(|k| k == c) || c == spec.target;
    let mut plan = ColumnPlan {
        features: Vec::new(),
        declared: Vec::new(),
        defaulted: spec.features.is_none(),
        ignored: Vec::new(),
    };
    match &spec.features {
        Some(features) if features.is_empty() => {
            return Err(GroupfitError::arg(
                "--features names no column; name at least one (or leave it out for every usable column)",
            ))
        }
        Some(features) => {
            let mut wanted = features.clone();
            for c in &named_categorical {
                if !wanted.contains(c) {
                    wanted.push(c.clone());
                }
            }
            for column in wanted {
                let field = schema
                    .field_with_name(&column)
                    .map_err(|_| missing_column(&column, path, schema))?;
                if is_key_or_target(&column) {
                    return Err(GroupfitError::arg(format!(
                        "column '{column}' cannot be both a feature and a key or the target"
                    )));
                }
                let declared = match role(field.data_type()) {
                    Role::Unusable("a date or time") => {
                        return Err(temporal_feature(&column, path, field.data_type()))
                    }
                    Role::Unusable(_) => {
                        return Err(GroupfitError::NonNumericColumn {
                            column,
                            path: path.display().to_string(),
                            dtype: field.data_type().to_string(),
                        })
                    }
                    r => declare(r, named_categorical.contains(&column)),
                };
                plan.features.push(column);
                plan.declared.push(declared);
            }
        }
        None => {
            for field in schema.fields() {
                let column = field.name();
                if spec.by.contains(column) {
                    plan.ignored.push((column.clone(), "a key".into()));
                    continue;
                }
                if *column == spec.target {
                    continue;
                }
                match role(field.data_type()) {
                    Role::Unusable(why) => plan.ignored.push((column.clone(), why.into())),
                    r => {
                        plan.features.push(column.clone());
                        plan.declared
                            .push(declare(r, named_categorical.contains(column)));
                    }
                }
            }
        }
    }
    if plan.features.is_empty() {
        return Err(GroupfitError::arg(format!(
            "'{}' has no feature columns besides the keys and the target",
            path.display()
        )));
    }
    Ok(plan)
}

/// How a column of role `r` is read (`named`: listed in `--categorical`).
fn declare(r: Role, named: bool) -> Declared {
    match r {
        Role::Text => Declared::Categorical(ValueKind::Text),
        Role::Integer if named => Declared::Categorical(ValueKind::Integer),
        _ => Declared::Numeric,
    }
}

/// Checks that `schema` (a validation table's) has the key, target and
/// feature columns.
pub(super) fn check_present(
    spec: &TrainSpec,
    features: &[String],
    schema: &Schema,
    path: &Path,
) -> Result<()> {
    for column in spec
        .by
        .iter()
        .chain(std::iter::once(&spec.target))
        .chain(features)
    {
        if schema.index_of(column).is_err() {
            return Err(missing_column(column, path, schema));
        }
    }
    let dtype = schema
        .field_with_name(&spec.target)
        .expect("checked above")
        .data_type();
    if !crate::data::is_numeric(dtype) {
        return Err(GroupfitError::NonNumericColumn {
            column: spec.target.clone(),
            path: path.display().to_string(),
            dtype: dtype.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use arrow_schema::{DataType, Field, TimeUnit};

    use super::*;

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("store", DataType::Utf8, true),
            Field::new("y", DataType::Float64, true),
            Field::new("x", DataType::Float32, true),
            Field::new("carrier", DataType::Utf8, true),
            Field::new("fl_num", DataType::Int64, true),
            Field::new(
                "when",
                DataType::Timestamp(TimeUnit::Microsecond, None),
                true,
            ),
            Field::new(
                "tags",
                DataType::List(std::sync::Arc::new(Field::new(
                    "item",
                    DataType::Utf8,
                    true,
                ))),
                true,
            ),
        ])
    }

    fn spec() -> TrainSpec {
        TrainSpec::new("t.parquet", vec!["store".into()], "y")
    }

    #[test]
    fn by_default_text_is_categorical_and_dates_and_nested_types_are_left_out() {
        let plan = plan_columns(&spec(), &schema(), Path::new("t.parquet")).unwrap();
        assert_eq!(plan.features, vec!["x", "carrier", "fl_num"]);
        assert_eq!(
            plan.declared,
            vec![
                Declared::Numeric,
                Declared::Categorical(ValueKind::Text),
                Declared::Numeric
            ]
        );
        assert_eq!(
            plan.ignored,
            vec![
                ("store".to_string(), "a key".to_string()),
                ("when".to_string(), "a date or time".to_string()),
                ("tags".to_string(), "a nested type".to_string()),
            ]
        );
    }

    #[test]
    fn categorical_makes_integers_categorical_and_adds_them_to_the_features() {
        let named = TrainSpec {
            features: Some(vec!["x".into()]),
            categorical: Some(vec!["fl_num".into()]),
            ..spec()
        };
        let plan = plan_columns(&named, &schema(), Path::new("t.parquet")).unwrap();
        assert_eq!(plan.features, vec!["x", "fl_num"]);
        assert_eq!(plan.declared[1], Declared::Categorical(ValueKind::Integer));
    }

    #[test]
    fn a_date_feature_says_how_to_make_numbers_of_it() {
        let dated = TrainSpec {
            features: Some(vec!["when".into()]),
            ..spec()
        };
        let e = plan_columns(&dated, &schema(), Path::new("t.parquet"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("'when'") && e.contains("day of week"), "{e}");
        let named_float = TrainSpec {
            categorical: Some(vec!["x".into()]),
            ..spec()
        };
        let e = plan_columns(&named_float, &schema(), Path::new("t.parquet"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("'x'") && e.contains("text and integer"), "{e}");
    }
}
