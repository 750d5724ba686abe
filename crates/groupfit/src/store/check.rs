//! Validity checks of a bundle read from a file: what its JSON types cannot
//! express.

use crate::data::keys::display_key;

use super::{ModelBundle, Route};

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
        if let Some(g) = &self.global {
            if g.config >= nc {
                return Err(format!("global model: config {} of {nc} configs", g.config));
            }
            g.model.check(d).map_err(|e| format!("global model: {e}"))?;
        }
        for g in &self.groups {
            let at = || display_key(&g.key);
            if g.key.len() != self.key_columns.len() {
                return Err(format!(
                    "group {}: {} key parts for {} key columns",
                    at(),
                    g.key.len(),
                    self.key_columns.len()
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
                (Some(m), _) => m.check(d).map_err(|e| format!("group {}: {e}", at()))?,
                (None, Route::Own) => {
                    return Err(format!("group {}: route own without a model", at()))
                }
                (None, _) => {}
            }
        }
        Ok(())
    }
}
