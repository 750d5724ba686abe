//! Grids of hyper-parameters: `--param NAME=V1,V2 ...`, the grid being the
//! product of the lists, and the validation metric that chooses among them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{GroupfitError, Result};
use crate::linear::{LinearConfig, LinearParams};

/// A parsed grid: parameter names with their candidate values, in the order given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Grid {
    params: Vec<(String, Vec<f64>)>,
}

/// One grid point as written in the model file and summaries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigEntry {
    /// Human-readable name, e.g. `C=0.1`.
    pub name: String,
    /// The values set by the grid (unset parameters keep their defaults).
    pub params: BTreeMap<String, f64>,
}

impl Grid {
    /// Parses specs like `C=0.01,0.1,1` (one name per spec; a name twice is an error).
    ///
    /// ```
    /// let g = groupfit::tune::Grid::parse(&["C=0.1,1".into(), "max_iter=50".into()]).unwrap();
    /// assert_eq!(g.points().len(), 2);
    /// assert_eq!(g.points()[1].name, "C=1,max_iter=50");
    /// ```
    pub fn parse(specs: &[String]) -> Result<Grid> {
        let mut params: Vec<(String, Vec<f64>)> = Vec::new();
        for spec in specs {
            let (name, values) = spec
                .split_once('=')
                .ok_or_else(|| GroupfitError::param(spec.clone(), "expected NAME=V1,V2,..."))?;
            let name = name.trim();
            if name.is_empty() {
                return Err(GroupfitError::param(
                    spec.clone(),
                    "expected NAME=V1,V2,...",
                ));
            }
            if params.iter().any(|(n, _)| n == name) {
                return Err(GroupfitError::param(
                    name,
                    "given twice; list its values in one --param",
                ));
            }
            let mut vals = Vec::new();
            for v in values.split(',') {
                let v = v.trim();
                // Word values of the MLP family (`layers=64x32`, `optimizer=sgd`)
                // are stored as the numbers `mlp::encode_param` gives.
                let x: f64 = match crate::mlp::encode_param(name, v) {
                    Some(x) => x,
                    None => v.parse().map_err(|_| {
                        GroupfitError::param(
                            name,
                            match crate::mlp::word_form(name) {
                                Some(form) => format!("'{v}' is not valid: expected {form}"),
                                None if v.is_empty() => "an empty value; expected a number \
                                     (list values as NAME=V1,V2)"
                                    .to_string(),
                                None => format!("'{v}' is not a number"),
                            },
                        )
                    })?,
                };
                vals.push(x);
            }
            params.push((name.to_string(), vals));
        }
        Ok(Grid { params })
    }

    /// Every grid point, the first parameter varying slowest.
    pub fn points(&self) -> Vec<ConfigEntry> {
        let mut out = vec![BTreeMap::new()];
        for (name, vals) in &self.params {
            let mut next = Vec::with_capacity(out.len() * vals.len());
            for base in &out {
                for &v in vals {
                    let mut m = base.clone();
                    m.insert(name.clone(), v);
                    next.push(m);
                }
            }
            out = next;
        }
        out.into_iter()
            .map(|m| ConfigEntry {
                name: if m.is_empty() {
                    "default".to_string()
                } else {
                    self.params
                        .iter()
                        .map(|(n, _)| match crate::mlp::display_param(n, m[n]) {
                            Some(word) => format!("{n}={word}"),
                            None => format!("{n}={}", m[n]),
                        })
                        .collect::<Vec<_>>()
                        .join(",")
                },
                params: m,
            })
            .collect()
    }
}

/// The linear family's checked configurations for every grid point.
pub fn linear_configs(points: &[ConfigEntry]) -> Result<Vec<LinearConfig>> {
    points
        .iter()
        .map(|p| {
            let mut b = LinearParams::new();
            for (name, &v) in &p.params {
                b = b.set(name, v)?;
            }
            b.check()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn product_of_lists() {
        let g = Grid::parse(&["C=1,2".into(), "max_iter=5,6,7".into()]).unwrap();
        let pts = g.points();
        assert_eq!(pts.len(), 6);
        assert_eq!(pts[0].name, "C=1,max_iter=5");
        assert_eq!(pts[5].name, "C=2,max_iter=7");
        assert_eq!(linear_configs(&pts).unwrap()[4].max_iter(), 6);
    }

    #[test]
    fn bad_specs_are_named() {
        assert_eq!(
            Grid::parse(&["C=0.1,x".into()]).unwrap_err().to_string(),
            "invalid parameter 'C': 'x' is not a number"
        );
        assert!(Grid::parse(&["C".into()]).is_err());
        assert!(Grid::parse(&["C=1".into(), "C=2".into()]).is_err());
        let pts = Grid::parse(&["C=-1".into()]).unwrap().points();
        assert!(linear_configs(&pts).is_err());
    }

    #[test]
    fn mlp_words_are_encoded_and_named() {
        let g = Grid::parse(&["layers=64x32,8".into(), "optimizer=sgd".into()]).unwrap();
        let pts = g.points();
        assert_eq!(pts[0].name, "layers=64x32,optimizer=sgd");
        assert_eq!(pts[0].params["layers"], 640032.0);
        assert_eq!(pts[1].name, "layers=8,optimizer=sgd");
        assert!(Grid::parse(&["layers=64y32".into()]).is_err());
    }

    #[test]
    fn empty_grid_is_one_default_point() {
        let pts = Grid::parse(&[]).unwrap().points();
        assert_eq!(pts.len(), 1);
        assert_eq!(pts[0].name, "default");
    }
}
