//! Grids of hyper-parameters: `--param NAME=V1,V2 ...`, the grid being the
//! product of the lists, and the validation metric that chooses among them.

pub mod shrinkage;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{GroupfitError, Result};

/// A parsed grid: parameter names with their candidate values (and how
/// each is written in config names), in the order given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Grid {
    params: Vec<(String, Vec<(f64, String)>)>,
}

/// The parameters a family takes as words (`layers=64x32`, `optimizer=sgd`).
/// The grid stores numbers; the family says how its words map to them.
pub trait ParamWords {
    /// The number `text` stands for, when `name` takes words and `text` is one.
    fn encode(&self, name: &str, text: &str) -> Option<f64> {
        let _ = (name, text);
        None
    }
    /// What `name` takes, for the message on a value that is neither one of
    /// its words nor a number; `None` for numeric parameters.
    fn form(&self, name: &str) -> Option<String> {
        let _ = name;
        None
    }
    /// How `value` of `name` is written back in config names; `None` for
    /// plain numbers.
    fn display(&self, name: &str, value: f64) -> Option<String> {
        let _ = (name, value);
        None
    }
}

/// A family whose parameters are all numbers.
pub struct NoWords;

impl ParamWords for NoWords {}

/// One grid point as written in the model file and summaries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigEntry {
    /// Human-readable name, e.g. `C=0.1`.
    pub name: String,
    /// The values set by the grid (unset parameters keep their defaults).
    pub params: BTreeMap<String, f64>,
}

impl Grid {
    /// Parses specs like `C=0.01,0.1,1` (one name per spec; a name twice is
    /// an error), with the family's word-valued parameters.
    ///
    /// ```
    /// use groupfit::tune::{Grid, NoWords};
    /// let g = Grid::parse(&["C=0.1,1".into(), "max_iter=50".into()], &NoWords).unwrap();
    /// assert_eq!(g.points().len(), 2);
    /// assert_eq!(g.points()[1].name, "C=1,max_iter=50");
    /// ```
    pub fn parse(specs: &[String], words: &dyn ParamWords) -> Result<Grid> {
        let mut params: Vec<(String, Vec<(f64, String)>)> = Vec::new();
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
                let x: f64 = match words.encode(name, v) {
                    Some(x) => x,
                    None => v.parse().map_err(|_| {
                        GroupfitError::param(
                            name,
                            match words.form(name) {
                                Some(form) => format!("'{v}' is not valid: expected {form}"),
                                None if v.is_empty() => "an empty value; expected a number \
                                     (list values as NAME=V1,V2)"
                                    .to_string(),
                                None => format!("'{v}' is not a number"),
                            },
                        )
                    })?,
                };
                let label = words.display(name, x).unwrap_or_else(|| x.to_string());
                vals.push((x, label));
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
                for (i, &(v, _)) in vals.iter().enumerate() {
                    let mut m = base.clone();
                    m.insert(name.clone(), (v, i));
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
                        .map(|(n, vals)| format!("{n}={}", vals[m[n].1].1))
                        .collect::<Vec<_>>()
                        .join(",")
                },
                params: m.into_iter().map(|(n, (v, _))| (n, v)).collect(),
            })
            .collect()
    }
}

/// How a family turns grid points into checked configs: a fresh builder,
/// its `--param` setter and its check.
pub struct Builder<P, C> {
    /// A builder with the defaults.
    pub new: fn() -> P,
    /// Sets one parameter by its `--param` name.
    pub set: fn(P, &str, f64) -> Result<P>,
    /// Checks the builder once into a config.
    pub check: fn(P) -> Result<C>,
}

impl<P, C> Builder<P, C> {
    /// The checked config of every grid point.
    pub fn configs(&self, points: &[ConfigEntry]) -> Result<Vec<C>> {
        points
            .iter()
            .map(|p| {
                let mut b = (self.new)();
                for (name, &v) in &p.params {
                    b = (self.set)(b, name, v)?;
                }
                (self.check)(b)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(specs: &[&str]) -> Result<Grid> {
        let specs: Vec<String> = specs.iter().map(|s| s.to_string()).collect();
        Grid::parse(&specs, &NoWords)
    }

    #[test]
    fn product_of_lists() {
        let pts = parse(&["C=1,2", "max_iter=5,6,7"]).unwrap().points();
        assert_eq!(pts.len(), 6);
        assert_eq!(pts[0].name, "C=1,max_iter=5");
        assert_eq!(pts[5].name, "C=2,max_iter=7");
        assert_eq!(pts[4].params["max_iter"], 6.0);
    }

    #[test]
    fn bad_specs_are_named() {
        assert_eq!(
            parse(&["C=0.1,x"]).unwrap_err().to_string(),
            "invalid parameter 'C': 'x' is not a number"
        );
        assert!(parse(&["C"]).is_err());
        assert!(parse(&["C=1", "C=2"]).is_err());
    }

    /// A family with one word-valued parameter, `speed=slow|fast` (1, 2).
    struct Speed;

    impl ParamWords for Speed {
        fn encode(&self, name: &str, text: &str) -> Option<f64> {
            match (name, text) {
                ("speed", "slow") => Some(1.0),
                ("speed", "fast") => Some(2.0),
                _ => None,
            }
        }
        fn form(&self, name: &str) -> Option<String> {
            (name == "speed").then(|| "slow or fast".to_string())
        }
        fn display(&self, name: &str, value: f64) -> Option<String> {
            match (name, value) {
                ("speed", v) if v == 1.0 => Some("slow".into()),
                ("speed", v) if v == 2.0 => Some("fast".into()),
                _ => None,
            }
        }
    }

    #[test]
    fn a_familys_words_are_encoded_and_named() {
        let specs = ["speed=fast,1".to_string(), "C=0.5".to_string()];
        let pts = Grid::parse(&specs, &Speed).unwrap().points();
        assert_eq!(pts[0].name, "speed=fast,C=0.5");
        assert_eq!(pts[0].params["speed"], 2.0);
        assert_eq!(pts[1].name, "speed=slow,C=0.5");
        assert_eq!(
            Grid::parse(&["speed=warp".to_string()], &Speed)
                .unwrap_err()
                .to_string(),
            "invalid parameter 'speed': 'warp' is not valid: expected slow or fast"
        );
        // Without the family's words, a word is not a number.
        assert!(parse(&["speed=fast"]).is_err());
    }

    #[test]
    fn empty_grid_is_one_default_point() {
        let pts = parse(&[]).unwrap().points();
        assert_eq!(pts.len(), 1);
        assert_eq!(pts[0].name, "default");
    }
}
