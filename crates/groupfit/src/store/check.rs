//! Validity checks of a bundle read from a file: what its JSON types cannot
//! express.

use crate::data::keys::display_key;

use super::{FittedModel, ModelBundle, Route};

impl ModelBundle {
    /// Checks what the JSON types cannot: indices in range and lengths that
    /// agree (a crafted file with a valid checksum must give an error, not
    /// a panic or an endless tree walk at predict time). The reason names
    /// the group when one is at fault.
    pub fn check(&self) -> std::result::Result<(), String> {
        let d = self.features.len();
        let nc = self.configs.len();
        if self.key_columns.is_empty() {
            return Err("no key columns".into());
        }
        if !self.impute.is_empty() && self.impute.len() != d {
            return Err(format!(
                "{} impute values for {d} features",
                self.impute.len()
            ));
        }
        // The level count of each categorical feature: one-hot codes
        // must be among them.
        let mut levels: Vec<Option<usize>> = vec![None; d];
        for dict in &self.categorical {
            if let Some(j) = self.features.iter().position(|f| *f == dict.feature) {
                levels[j] = Some(dict.levels.len());
            }
        }
        let check = |m: &FittedModel| -> std::result::Result<(), String> {
            m.check(d)?;
            for o in m.onehot() {
                let n = levels[o.feature]
                    .ok_or_else(|| format!("feature {}: one-hot but not categorical", o.feature))?;
                if o.codes.iter().chain(&o.other).any(|&c| c >= n as f64) {
                    return Err(format!(
                        "feature {}: a one-hot code past its {n} levels",
                        o.feature
                    ));
                }
            }
            Ok(())
        };
        if let Some(g) = &self.global {
            if g.config >= nc {
                return Err(format!("global model: config {} of {nc} configs", g.config));
            }
            check(&g.model).map_err(|e| format!("global model: {e}"))?;
        }
        for (i, level) in self.levels.iter().enumerate() {
            let n = level.key_columns.len();
            if n == 0
                || n >= self.key_columns.len()
                || level.key_columns[..] != self.key_columns[..n]
            {
                return Err(format!(
                    "level {i}: key columns {:?} are not a shorter prefix of {:?}",
                    level.key_columns, self.key_columns
                ));
            }
        }
        if let Some(p) = &self.pooling {
            if p.k.len() != self.levels.len() + 1 {
                return Err(format!(
                    "pooling: {} k values for {} levels below the root",
                    p.k.len(),
                    self.levels.len() + 1
                ));
            }
            if let Some(k) = p.k.iter().find(|k| !(k.is_finite() && **k >= 0.0)) {
                return Err(format!("pooling: k {k} is not a finite number >= 0"));
            }
        }
        let levels = self.levels.iter().map(|l| (l.key_columns.len(), &l.groups));
        for (n_keys, groups) in levels.chain([(self.key_columns.len(), &self.groups)]) {
            for g in groups {
                let at = || display_key(&g.key);
                if g.key.len() != n_keys {
                    return Err(format!(
                        "group {}: {} key parts for {} key columns",
                        at(),
                        g.key.len(),
                        n_keys
                    ));
                }
                if let Some(k) = g.config.filter(|&k| k >= nc) {
                    return Err(format!("group {}: config {k} of {nc} configs", at()));
                }
                if !g.valid_by_config.is_empty() && g.valid_by_config.len() != nc {
                    return Err(format!(
                        "group {}: {} validation scores for {nc} configs",
                        at(),
                        g.valid_by_config.len()
                    ));
                }
                match (&g.model, g.route) {
                    (Some(m), _) => check(m).map_err(|e| format!("group {}: {e}", at()))?,
                    (None, Route::Own) => {
                        return Err(format!("group {}: route own without a model", at()))
                    }
                    (None, _) => {}
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::linear::LinearModel;
    use crate::store::fixtures::{entry, linear};
    use crate::store::{FittedModel, ModelBundle};

    /// A bundle of one feature, one config and one group with its own model.
    fn bundle() -> ModelBundle {
        let mut a = entry(&["a"], 10, Some(linear(1.0, 0.0)));
        (a.n_valid, a.valid_by_config, a.iterations) = (2, vec![0.5], 1);
        crate::store::fixtures::bundle(&["g"], Some(linear(1.0, 0.0)), vec![a])
    }

    #[test]
    fn indices_and_lengths_out_of_range_name_the_group() {
        assert_eq!(bundle().check(), Ok(()));
        let pooling = |k: Vec<f64>| {
            Some(crate::store::Pooling {
                mode: crate::tune::shrinkage::Shrinkage::Auto,
                k,
            })
        };
        let broken: [(&dyn Fn(&mut ModelBundle), &str); 8] = [
            (
                &|b| b.pooling = pooling(vec![1.0, 2.0]),
                "pooling: 2 k values for 1 levels below the root",
            ),
            (
                &|b| b.pooling = pooling(vec![-1.0]),
                "pooling: k -1 is not a finite number >= 0",
            ),
            (&|b| b.key_columns.clear(), "no key columns"),
            (&|b| b.impute.push(1.0), "2 impute values for 1 features"),
            (
                &|b| b.global.as_mut().unwrap().config = 3,
                "global model: config 3 of 1 configs",
            ),
            (
                &|b| b.groups[0].config = Some(1),
                "group a: config 1 of 1 configs",
            ),
            (
                &|b| b.groups[0].valid_by_config.push(0.1),
                "group a: 2 validation scores for 1 configs",
            ),
            (
                &|b| b.groups[0].model = None,
                "group a: route own without a model",
            ),
        ];
        for (f, want) in broken {
            let mut b = bundle();
            f(&mut b);
            assert_eq!(b.check(), Err(want.to_string()));
        }
    }

    #[test]
    fn one_hot_codes_must_be_levels_of_a_categorical_feature() {
        use crate::data::categorical::{Dictionary, ValueKind};
        use crate::data::onehot::OneHot;
        use crate::linear::model::OneHotCoef;
        let with_codes = |codes: Vec<f64>| {
            let mut b = bundle();
            let n = codes.len();
            b.groups[0].model = Some(FittedModel::Linear(LinearModel {
                coef: vec![0.0],
                intercept: 0.0,
                onehot: vec![OneHotCoef {
                    map: OneHot {
                        feature: 0,
                        codes,
                        other: Vec::new(),
                    },
                    coef: vec![1.0; n],
                }],
            }));
            b
        };
        let e = with_codes(vec![0.0]).check().unwrap_err();
        assert_eq!(e, "group a: feature 0: one-hot but not categorical");
        let categorical = |mut b: ModelBundle| {
            b.categorical = vec![Dictionary {
                feature: "x".into(),
                values: ValueKind::Text,
                levels: vec!["p".into(), "q".into()],
            }];
            b
        };
        assert_eq!(categorical(with_codes(vec![-1.0, 1.0])).check(), Ok(()));
        let e = categorical(with_codes(vec![2.0])).check().unwrap_err();
        assert_eq!(e, "group a: feature 0: a one-hot code past its 2 levels");
    }
}
