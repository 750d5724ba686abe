//! Group encoding: key tuples to dense group ids.
//!
//! Key columns of any Arrow type are compared by their string rendering (an
//! integer key `7` and a string key `"7"` are the same key), so a model trained
//! on one file routes the rows of another even if a writer changed the type.
//! A float key with an integral value renders as that integer (`7.0` is the
//! key `7`), so a key column read as floats (a Parquet writer that made an
//! integer column nullable, a pandas round trip) still finds its groups. A
//! model file that stores such a key as `7.0` is still found too.
//! A null in a key column is a value of its own: rows with a null key form their
//! own group, shown as `null`.

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;

use crate::error::{GroupfitError, Result};
use crate::math::stable_hash;

/// One group's key: one entry per key column, `None` for null.
pub type GroupKey = Vec<Option<String>>;

/// A group's RNG stream id: a stable hash of its key (the global model's
/// stream is a fixed tag), so it does not depend on which other groups exist.
/// The empty key is `--hierarchy`'s root, all rows: the global model's tag,
/// so the root's model is the global model of a run without levels.
pub fn group_stream(key: Option<&GroupKey>) -> u64 {
    match key {
        Some(k) if !k.is_empty() => stable_hash(
            serde_json::to_string(k)
                .expect("a key serialises")
                .as_bytes(),
        ),
        _ => stable_hash(b"<groupfit global model>"),
    }
}

/// Renders a key for messages: `JFK/LAX`, `null` for a null part. A part
/// that could be misread (empty, the text `null`, or holding `/` or `"`) is
/// quoted as a JSON string, so two keys never render alike: `"a/b"` is one
/// part, `a/b` two.
pub fn display_key(key: &[Option<String>]) -> String {
    key.iter()
        .map(|p| match p.as_deref() {
            None => "null".to_string(),
            Some(s) if s.is_empty() || s == "null" || s.contains(['/', '"']) => {
                serde_json::to_string(s).expect("a string serialises")
            }
            Some(s) => s.to_string(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Maps key tuples to dense ids `0..n_groups`, in order of first appearance.
#[derive(Debug, Default, Clone)]
pub struct GroupEncoder {
    n_cols: usize,
    /// Per key column: value -> column-local id (null has its own id).
    values: Vec<ColumnDict>,
    /// Tuple of column-local ids -> group id (only used with several key columns).
    tuples: FastMap<Vec<u32>, u32>,
    /// With one key column: column-local id -> group id (no tuple lookup).
    single: Vec<u32>,
    keys: Vec<GroupKey>,
}

impl GroupEncoder {
    /// An encoder for `n_cols` key columns.
    pub fn new(n_cols: usize) -> Self {
        GroupEncoder {
            n_cols,
            values: vec![ColumnDict::default(); n_cols],
            tuples: FastMap::default(),
            single: Vec::new(),
            keys: Vec::new(),
        }
    }

    /// An encoder that already knows `keys` (ids in that order), for routing new data.
    pub fn from_keys(keys: &[GroupKey]) -> Self {
        let n_cols = keys.first().map_or(0, |k| k.len());
        let mut enc = GroupEncoder::new(n_cols);
        for k in keys {
            enc.insert(k.clone());
        }
        enc
    }

    /// The number of groups seen.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether no group has been seen.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The keys, indexed by group id.
    pub fn keys(&self) -> &[GroupKey] {
        &self.keys
    }

    fn insert(&mut self, key: GroupKey) -> u32 {
        let mut local = Vec::with_capacity(self.n_cols);
        for (c, part) in key.iter().enumerate() {
            local.push(self.values[c].insert(part.as_deref()));
        }
        let next = self.keys.len() as u32;
        let id = if self.n_cols == 1 {
            // Column-local ids are dense and given in order of first appearance.
            let l = local[0] as usize;
            if l == self.single.len() {
                self.single.push(next);
            }
            self.single[l]
        } else {
            *self.tuples.entry(local).or_insert(next)
        };
        if id == next {
            self.keys.push(key);
        }
        id
    }

    /// The group id of a tuple of column-local ids, if the tuple was seen.
    #[inline]
    fn group_of(&self, local: &[u32]) -> Option<u32> {
        if self.n_cols == 1 {
            self.single.get(local[0] as usize).copied()
        } else {
            self.tuples.get(local).copied()
        }
    }

    /// Encodes every row of the key columns, adding unseen keys.
    pub fn encode(&mut self, columns: &[ArrayRef]) -> Result<Vec<u32>> {
        let cols = as_strings(columns)?;
        let rows = cols.first().map_or(0, |c| c.len());
        let mut out = Vec::with_capacity(rows);
        let mut local = vec![0u32; self.n_cols];
        for i in 0..rows {
            let mut all_known = true;
            for (c, col) in cols.iter().enumerate() {
                let v = value_at(col, i);
                match self.values[c].get(v) {
                    Some(id) => local[c] = id,
                    None => {
                        all_known = false;
                        break;
                    }
                }
            }
            let id = if all_known {
                self.group_of(&local)
            } else {
                None
            };
            let id = match id {
                Some(id) => id,
                None => {
                    let key: GroupKey = cols
                        .iter()
                        .map(|col| value_at(col, i).map(String::from))
                        .collect();
                    self.insert(key)
                }
            };
            out.push(id);
        }
        Ok(out)
    }

    /// Looks up every row without adding keys: `None` for a key not seen before.
    pub fn lookup(&self, columns: &[ArrayRef]) -> Result<Vec<Option<u32>>> {
        let cols = key_texts(columns)?;
        let rows = cols.first().map_or(0, |c| c.key.len());
        if self.values.len() < cols.len() {
            // Fewer key columns known than given (an encoder of no
            // groups): no row's key is known.
            return Ok(vec![None; rows]);
        }
        let mut out = Vec::with_capacity(rows);
        let mut local = vec![0u32; self.n_cols];
        'rows: for i in 0..rows {
            for (c, col) in cols.iter().enumerate() {
                // A float column's key is also tried as Arrow renders it
                // (`7.0`): the keys of model files written before integral
                // floats rendered as integers.
                let found = self.values[c].get(value_at(&col.key, i)).or_else(|| {
                    col.arrow
                        .as_ref()
                        .and_then(|a| self.values[c].get(value_at(a, i)))
                });
                match found {
                    Some(id) => local[c] = id,
                    None => {
                        out.push(None);
                        continue 'rows;
                    }
                }
            }
            out.push(self.group_of(&local));
        }
        Ok(out)
    }
}

/// The distinct values of one key column.
#[derive(Debug, Default, Clone)]
struct ColumnDict {
    map: FastMap<String, u32>,
    null: Option<u32>,
    next: u32,
}

impl ColumnDict {
    fn get(&self, v: Option<&str>) -> Option<u32> {
        match v {
            None => self.null,
            Some(s) => self.map.get(s).copied(),
        }
    }

    fn insert(&mut self, v: Option<&str>) -> u32 {
        if let Some(id) = self.get(v) {
            return id;
        }
        let id = self.next;
        self.next += 1;
        match v {
            None => self.null = Some(id),
            Some(s) => {
                self.map.insert(s.to_string(), id);
            }
        }
        id
    }
}

/// A hash map with a fast non-cryptographic hash (`ahash`, which Arrow
/// already builds): encoding hashes every row's key.
type FastMap<K, V> = HashMap<K, V, ahash::RandomState>;

/// The key of row `i` of key columns (as [`GroupEncoder::lookup`] reads it).
pub fn key_at(columns: &[ArrayRef], i: usize) -> Result<GroupKey> {
    Ok(as_strings(columns)?
        .iter()
        .map(|c| value_at(c, i).map(str::to_string))
        .collect())
}

/// One key column rendered as strings.
struct KeyText {
    /// The keys: the column's text, an integral float as the integer.
    key: ArrayRef,
    /// For a float column, Arrow's own rendering (`7.0`).
    arrow: Option<ArrayRef>,
}

/// Key columns rendered as strings.
fn as_strings(columns: &[ArrayRef]) -> Result<Vec<ArrayRef>> {
    Ok(key_texts(columns)?.into_iter().map(|t| t.key).collect())
}

fn key_texts(columns: &[ArrayRef]) -> Result<Vec<KeyText>> {
    columns
        .iter()
        .map(|c| {
            let bad = |e: arrow_schema::ArrowError| {
                GroupfitError::arg(format!(
                    "key column of type {} cannot be used as a group key: {e}",
                    c.data_type()
                ))
            };
            let text = |c: &ArrayRef| -> Result<ArrayRef> {
                match c.data_type() {
                    DataType::Utf8 => Ok(c.clone()),
                    _ => arrow_cast::cast(c, &DataType::Utf8).map_err(bad),
                }
            };
            if !matches!(
                c.data_type(),
                DataType::Float16 | DataType::Float32 | DataType::Float64
            ) {
                return Ok(KeyText {
                    key: text(c)?,
                    arrow: None,
                });
            }
            let arrow = text(c)?;
            let shown = arrow.as_string::<i32>();
            let x = arrow_cast::cast(c, &DataType::Float64).map_err(bad)?;
            let x = x.as_primitive::<arrow_array::types::Float64Type>();
            // Integral values (exact in f64) as integers: `7.0` is `7`.
            let key: arrow_array::StringArray = (0..c.len())
                .map(|i| {
                    (!c.is_null(i)).then(|| {
                        let v = x.value(i);
                        if v.fract() == 0.0 && v.abs() < 9.0e15 {
                            (v as i64).to_string()
                        } else {
                            shown.value(i).to_string()
                        }
                    })
                })
                .collect();
            Ok(KeyText {
                key: std::sync::Arc::new(key),
                arrow: Some(arrow),
            })
        })
        .collect()
}

fn value_at(col: &ArrayRef, i: usize) -> Option<&str> {
    let s = col.as_string::<i32>();
    if s.is_null(i) {
        None
    } else {
        Some(s.value(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_encoder_of_no_groups_finds_no_row() {
        let col: ArrayRef = Arc::new(arrow_array::StringArray::from(vec!["a", "b"]));
        let enc = GroupEncoder::from_keys(&[]);
        assert_eq!(enc.lookup(&[col]).unwrap(), vec![None, None]);
    }
    use arrow_array::{Float32Array, Float64Array, Int64Array, StringArray};
    use std::sync::Arc;

    #[test]
    fn encodes_in_order_of_first_appearance_with_null_group() {
        let a: ArrayRef = Arc::new(StringArray::from(vec![
            Some("b"),
            Some("a"),
            None,
            Some("b"),
            None,
        ]));
        let mut enc = GroupEncoder::new(1);
        let ids = enc.encode(&[a]).unwrap();
        assert_eq!(ids, vec![0, 1, 2, 0, 2]);
        assert_eq!(display_key(&enc.keys()[2]), "null");
    }

    #[test]
    fn several_key_columns_and_lookup_of_unseen() {
        let a: ArrayRef = Arc::new(StringArray::from(vec!["JFK", "JFK", "LGA"]));
        let b: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 1]));
        let mut enc = GroupEncoder::new(2);
        assert_eq!(enc.encode(&[a, b]).unwrap(), vec![0, 1, 2]);
        assert_eq!(display_key(&enc.keys()[1]), "JFK/2");
        let a2: ArrayRef = Arc::new(StringArray::from(vec!["LGA", "LGA", "EWR"]));
        let b2: ArrayRef = Arc::new(StringArray::from(vec!["1", "2", "1"]));
        let enc2 = GroupEncoder::from_keys(enc.keys());
        assert_eq!(enc2.lookup(&[a2, b2]).unwrap(), vec![Some(2), None, None]);
    }

    #[test]
    fn integral_float_keys_are_the_integer_keys() {
        let ints: ArrayRef = Arc::new(Int64Array::from(vec![3, 5, -2]));
        let mut enc = GroupEncoder::new(1);
        assert_eq!(enc.encode(&[ints]).unwrap(), vec![0, 1, 2]);
        let floats: ArrayRef = Arc::new(Float64Array::from(vec![
            Some(5.0),
            Some(3.0),
            Some(2.5),
            None,
            Some(-2.0),
        ]));
        let enc2 = GroupEncoder::from_keys(enc.keys());
        assert_eq!(
            enc2.lookup(&[floats.clone()]).unwrap(),
            vec![Some(1), Some(0), None, None, Some(2)]
        );
        // Trained on floats: keys `3`, `2.5`, null.
        let mut enc3 = GroupEncoder::new(1);
        enc3.encode(&[floats]).unwrap();
        let shown: Vec<String> = enc3.keys().iter().map(|k| display_key(k)).collect();
        assert_eq!(shown, ["5", "3", "2.5", "null", "-2"]);
        // A key stored as `3.0` (older model files) is still found.
        let old = GroupEncoder::from_keys(&[vec![Some("3.0".to_string())]]);
        let f32s: ArrayRef = Arc::new(Float32Array::from(vec![3.0f32, 4.0]));
        assert_eq!(old.lookup(&[f32s]).unwrap(), vec![Some(0), None]);
    }

    #[test]
    fn displayed_keys_quote_parts_that_could_be_misread() {
        let k = |parts: &[Option<&str>]| -> GroupKey {
            parts.iter().map(|p| p.map(String::from)).collect()
        };
        assert_eq!(display_key(&k(&[Some("JFK"), Some("LAX")])), "JFK/LAX");
        assert_eq!(display_key(&k(&[Some("a/b")])), "\"a/b\"");
        assert_eq!(display_key(&k(&[Some("a"), Some("b")])), "a/b");
        assert_eq!(display_key(&k(&[None])), "null");
        assert_eq!(display_key(&k(&[Some("null")])), "\"null\"");
        assert_eq!(display_key(&k(&[Some("")])), "\"\"");
    }
}
