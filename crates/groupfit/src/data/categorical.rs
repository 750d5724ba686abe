//! Categorical features: which Arrow types a feature may have, the
//! dictionary of a categorical column, and its rows as codes.
//!
//! A categorical column reaches the families as an ordinary [`Column`] of
//! codes: `0..levels` for the dictionary's levels, [`NULL_CODE`] for a null
//! and [`UNSEEN_CODE`] for a value the training data did not have. The
//! families learn only the number of levels ([`FeatureKind`]); the strings
//! stay in the [`Dictionary`], which the model file keeps for `predict`.

use std::collections::HashMap;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;
use serde::{Deserialize, Serialize};

use super::Column;
use crate::error::{GroupfitError, Result};

/// The code of a null value.
pub const NULL_CODE: f64 = -1.0;
/// The code of a value that is not in the dictionary.
pub const UNSEEN_CODE: f64 = -2.0;
/// The default cap on a categorical column's distinct training values.
pub const DEFAULT_MAX_CATEGORIES: usize = 10_000;

/// What a family is told about one feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FeatureKind {
    /// Numbers (NaN: missing).
    Numeric,
    /// Codes `0..levels`, or [`NULL_CODE`] / [`UNSEEN_CODE`].
    Categorical {
        /// Levels in the dictionary.
        levels: u32,
    },
}

impl FeatureKind {
    /// The level count of a categorical feature.
    pub fn levels(self) -> Option<usize> {
        match self {
            FeatureKind::Numeric => None,
            FeatureKind::Categorical { levels } => Some(levels as usize),
        }
    }
}

/// What a column of a given Arrow type is, as a feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Numbers (booleans are 0/1).
    Numeric,
    /// Integers: numeric unless named categorical.
    Integer,
    /// Text or a dictionary of text: categorical.
    Text,
    /// Not usable as a feature; the reason.
    Unusable(&'static str),
}

/// The role of a column of type `dt`.
pub fn role(dt: &DataType) -> Role {
    use DataType::*;
    match dt {
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 => Role::Integer,
        Boolean => Role::Numeric,
        dt if dt.is_numeric() => Role::Numeric,
        Utf8 | LargeUtf8 | Utf8View => Role::Text,
        Dictionary(_, v) if matches!(**v, Utf8 | LargeUtf8 | Utf8View) => Role::Text,
        Date32 | Date64 | Timestamp(..) | Time32(_) | Time64(_) | Duration(_) | Interval(_) => {
            Role::Unusable("a date or time")
        }
        List(_) | LargeList(_) | FixedSizeList(..) | ListView(_) | LargeListView(_) | Struct(_)
        | Map(..) | Union(..) => Role::Unusable("a nested type"),
        Null => Role::Unusable("all null"),
        _ => Role::Unusable("not numbers or text"),
    }
}

/// The error for a date or time column named as a feature.
pub fn temporal_feature(column: &str, path: &Path, dt: &DataType) -> GroupfitError {
    GroupfitError::arg(format!(
        "column '{column}' in '{}' is a date or time ({dt}); turn it into numbers first \
         (hour, day of week, or seconds since an epoch)",
        path.display()
    ))
}

/// Where a categorical column's values come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ValueKind {
    /// Text (or a dictionary of text).
    Text,
    /// Integers named categorical.
    Integer,
}

/// The levels of one categorical feature, in code order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dictionary {
    /// The feature's column name.
    pub feature: String,
    /// Text or integers.
    pub values: ValueKind,
    /// The levels: sorted text, or integers in ascending order written out.
    pub levels: Vec<String>,
}

impl Dictionary {
    /// Builds the dictionary of a training column and codes its rows. More
    /// than `max_categories` distinct values is an error naming the column.
    pub fn build(
        array: &ArrayRef,
        feature: &str,
        path: &Path,
        values: ValueKind,
        max_categories: usize,
    ) -> Result<(Dictionary, Column)> {
        let too_many = |count: usize| GroupfitError::TooManyCategories {
            column: feature.to_string(),
            path: path.display().to_string(),
            count,
            max: max_categories,
        };
        let levels: Vec<String> = match values {
            ValueKind::Text => {
                let text = as_text(array, feature, path)?;
                let text = text.as_string::<i32>();
                let mut seen: HashMap<&str, ()> = HashMap::new();
                for v in text.iter().flatten() {
                    seen.insert(v, ());
                    if seen.len() > max_categories {
                        let all: std::collections::HashSet<&str> = text.iter().flatten().collect();
                        return Err(too_many(all.len()));
                    }
                }
                let mut levels: Vec<String> = seen.into_keys().map(str::to_string).collect();
                levels.sort_unstable();
                levels
            }
            ValueKind::Integer => {
                let ints = as_integers(array, feature, path)?;
                let mut distinct: Vec<i64> = ints.iter().flatten().collect();
                distinct.sort_unstable();
                distinct.dedup();
                if distinct.len() > max_categories {
                    return Err(too_many(distinct.len()));
                }
                distinct.iter().map(i64::to_string).collect()
            }
        };
        let dict = Dictionary {
            feature: feature.to_string(),
            values,
            levels,
        };
        let codes = dict.encode(array, path)?;
        Ok((dict, codes))
    }

    /// Codes the rows of a column through the dictionary. A column whose
    /// type does not match the training column's is an error naming it.
    pub fn encode(&self, array: &ArrayRef, path: &Path) -> Result<Column> {
        let codes = match self.values {
            ValueKind::Text => {
                let index: HashMap<&str, f64> = self
                    .levels
                    .iter()
                    .enumerate()
                    .map(|(i, l)| (l.as_str(), i as f64))
                    .collect();
                let text = as_text(array, &self.feature, path)?;
                text.as_string::<i32>()
                    .iter()
                    .map(|v| match v {
                        None => NULL_CODE,
                        Some(s) => index.get(s).copied().unwrap_or(UNSEEN_CODE),
                    })
                    .collect()
            }
            ValueKind::Integer => {
                let index: HashMap<i64, f64> = self
                    .levels
                    .iter()
                    .enumerate()
                    .map(|(i, l)| (l.parse().expect("an integer level"), i as f64))
                    .collect();
                as_integers(array, &self.feature, path)?
                    .iter()
                    .map(|v| match v {
                        None => NULL_CODE,
                        Some(x) => index.get(&x).copied().unwrap_or(UNSEEN_CODE),
                    })
                    .collect()
            }
        };
        Ok(Column::Owned(codes))
    }

    /// The text of the level of `code` (`null` for [`NULL_CODE`]).
    pub fn level(&self, code: f64) -> &str {
        if code == NULL_CODE {
            "null"
        } else if code < 0.0 {
            "unseen"
        } else {
            &self.levels[code as usize]
        }
    }
}

/// The error for a column whose type differs from the training column's.
fn type_mismatch(column: &str, path: &Path, expected: &str, dt: &DataType) -> GroupfitError {
    GroupfitError::ColumnType {
        column: column.to_string(),
        path: path.display().to_string(),
        expected: expected.to_string(),
        found: match role(dt) {
            Role::Text => format!("text ({dt})"),
            Role::Integer => format!("integers ({dt})"),
            Role::Numeric => format!("numbers ({dt})"),
            Role::Unusable(_) => dt.to_string(),
        },
    }
}

/// A text (or dictionary of text) column as one `Utf8` array.
fn as_text(array: &ArrayRef, column: &str, path: &Path) -> Result<ArrayRef> {
    if role(array.data_type()) != Role::Text {
        return Err(type_mismatch(column, path, "text", array.data_type()));
    }
    if *array.data_type() == DataType::Utf8 {
        return Ok(array.clone());
    }
    arrow_cast::cast(array, &DataType::Utf8).map_err(|e| GroupfitError::Parquet {
        path: path.display().to_string(),
        reason: format!("column '{column}': {e}"),
    })
}

/// An integer column as one `Int64` array.
fn as_integers(
    array: &ArrayRef,
    column: &str,
    path: &Path,
) -> Result<arrow_array::PrimitiveArray<Int64Type>> {
    if role(array.data_type()) != Role::Integer {
        return Err(type_mismatch(column, path, "integers", array.data_type()));
    }
    let cast = arrow_cast::cast(array, &DataType::Int64).map_err(|e| GroupfitError::Parquet {
        path: path.display().to_string(),
        reason: format!("column '{column}': {e}"),
    })?;
    Ok(cast.as_primitive::<Int64Type>().clone())
}

/// How to read one feature column: as numbers, or through a dictionary.
#[derive(Debug, Clone, Copy)]
pub enum Encoding<'a> {
    /// Numbers (see [`Column::from_array`]).
    Numeric,
    /// Codes of this dictionary.
    Categorical(&'a Dictionary),
}

impl Encoding<'_> {
    /// Reads `array` this way. A numeric feature given as text (or the
    /// reverse) is an error naming the column.
    pub fn read(self, array: &ArrayRef, name: &str, path: &Path) -> Result<Column> {
        match self {
            Encoding::Numeric => {
                if role(array.data_type()) == Role::Text {
                    return Err(type_mismatch(name, path, "numbers", array.data_type()));
                }
                Column::from_array(array, name, path, true)
            }
            Encoding::Categorical(dict) => dict.encode(array, path),
        }
    }
}

/// Whether every value of the column is null.
pub fn all_null(array: &dyn Array) -> bool {
    array.null_count() == array.len() || *array.data_type() == DataType::Null
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{DictionaryArray, Int32Array, StringArray};

    use super::*;

    fn codes(c: &Column) -> Vec<f64> {
        (0..c.len()).map(|i| c.get(i)).collect()
    }

    #[test]
    fn text_levels_are_sorted_and_null_and_unseen_have_codes_of_their_own() {
        let a: ArrayRef = Arc::new(StringArray::from(vec![
            Some("b"),
            None,
            Some("a"),
            Some("b"),
        ]));
        let path = Path::new("t.parquet");
        let (dict, col) = Dictionary::build(&a, "c", path, ValueKind::Text, 10).unwrap();
        assert_eq!(dict.levels, vec!["a", "b"]);
        assert_eq!(codes(&col), vec![1.0, NULL_CODE, 0.0, 1.0]);
        let new: ArrayRef = Arc::new(StringArray::from(vec![Some("z"), Some("a"), None]));
        assert_eq!(
            codes(&dict.encode(&new, path).unwrap()),
            vec![UNSEEN_CODE, 0.0, NULL_CODE]
        );
    }

    #[test]
    fn a_dictionary_column_codes_like_its_text() {
        let keys = Int32Array::from(vec![Some(1), Some(0), None, Some(1)]);
        let values = Arc::new(StringArray::from(vec!["x", "w"]));
        let a: ArrayRef = Arc::new(DictionaryArray::try_new(keys, values).unwrap());
        let (dict, col) = Dictionary::build(&a, "c", Path::new("t"), ValueKind::Text, 10).unwrap();
        assert_eq!(dict.levels, vec!["w", "x"]);
        assert_eq!(codes(&col), vec![0.0, 1.0, NULL_CODE, 0.0]);
    }

    #[test]
    fn integer_levels_sort_as_numbers() {
        let a: ArrayRef = Arc::new(arrow_array::Int64Array::from(vec![10, 2, -1, 2]));
        let (dict, col) =
            Dictionary::build(&a, "n", Path::new("t"), ValueKind::Integer, 10).unwrap();
        assert_eq!(dict.levels, vec!["-1", "2", "10"]);
        assert_eq!(codes(&col), vec![2.0, 1.0, 0.0, 1.0]);
    }

    #[test]
    fn too_many_categories_names_the_column_and_the_count() {
        let a: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "c", "a"]));
        let e = Dictionary::build(&a, "sku", Path::new("t.parquet"), ValueKind::Text, 2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("'sku'") && e.contains("3 distinct"), "{e}");
    }

    #[test]
    fn numbers_where_text_was_is_an_error_naming_the_column() {
        let a: ArrayRef = Arc::new(StringArray::from(vec!["a"]));
        let (dict, _) = Dictionary::build(&a, "c", Path::new("t"), ValueKind::Text, 5).unwrap();
        let n: ArrayRef = Arc::new(arrow_array::Float64Array::from(vec![1.0]));
        let e = dict
            .encode(&n, Path::new("new.parquet"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("'c'") && e.contains("new.parquet"), "{e}");
        let e = Encoding::Numeric
            .read(&a, "x", Path::new("v.parquet"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("'x'") && e.contains("text"), "{e}");
    }

    #[test]
    fn roles_of_types() {
        assert_eq!(role(&DataType::Float32), Role::Numeric);
        assert_eq!(role(&DataType::Boolean), Role::Numeric);
        assert_eq!(role(&DataType::Int32), Role::Integer);
        assert_eq!(role(&DataType::LargeUtf8), Role::Text);
        assert_eq!(role(&DataType::Date32), Role::Unusable("a date or time"));
    }
}
