//! The levels of a key hierarchy: with key columns `a, b, c`, the groups of
//! every prefix (`a`, then `a/b`) above the finest groups (`a/b/c`), each
//! with its parent one level up; level 0 is the root (every row, the global
//! model).

use std::collections::HashMap;

use super::keys::GroupKey;

/// The prefix levels of a set of finest groups.
#[derive(Debug, Clone, PartialEq)]
pub struct Hierarchy {
    /// `levels[l]`: the groups of level `l + 1` (keys of `l + 1` parts), in
    /// order of first appearance among the finest groups; the last level is
    /// the finest groups themselves, in their own order.
    levels: Vec<Vec<GroupKey>>,
    /// `of_finest[l][g]`: the level-`l + 1` group of finest group `g`.
    of_finest: Vec<Vec<u32>>,
    /// `parents[l][g]`: the level-`l` group of level-`l + 1` group `g` (level
    /// 0 is the root: all zeros).
    parents: Vec<Vec<u32>>,
}

impl Hierarchy {
    /// The levels above `finest` (keys of equal length, at least 1).
    pub fn new(finest: &[GroupKey]) -> Hierarchy {
        let depth = finest.first().map_or(0, Vec::len);
        let mut levels = Vec::with_capacity(depth);
        let mut of_finest: Vec<Vec<u32>> = Vec::with_capacity(depth);
        let mut parents: Vec<Vec<u32>> = Vec::with_capacity(depth);
        for len in 1..=depth {
            let mut ids: HashMap<&[Option<String>], u32> = HashMap::new();
            let mut keys: Vec<GroupKey> = Vec::new();
            let mut parent: Vec<u32> = Vec::new();
            let map: Vec<u32> = finest
                .iter()
                .enumerate()
                .map(|(g, k)| {
                    let prefix = &k[..len];
                    *ids.entry(prefix).or_insert_with(|| {
                        keys.push(prefix.to_vec());
                        parent.push(if len == 1 { 0 } else { of_finest[len - 2][g] });
                        (keys.len() - 1) as u32
                    })
                })
                .collect();
            levels.push(keys);
            of_finest.push(map);
            parents.push(parent);
        }
        Hierarchy {
            levels,
            of_finest,
            parents,
        }
    }

    /// Levels below the root (the key columns).
    pub fn depth(&self) -> usize {
        self.levels.len()
    }

    /// The groups of `level` (1 to [`Hierarchy::depth`]).
    pub fn keys(&self, level: usize) -> &[GroupKey] {
        &self.levels[level - 1]
    }

    /// The group at `level` of finest group `g`.
    pub fn at(&self, level: usize, g: u32) -> u32 {
        self.of_finest[level - 1][g as usize]
    }

    /// The parent (at `level - 1`; level 0: the root, 0) of group `g` of `level`.
    pub fn parent(&self, level: usize, g: u32) -> u32 {
        self.parents[level - 1][g as usize]
    }

    /// The groups of `level` by key.
    pub fn prefix_ids(&self, level: usize) -> HashMap<&[Option<String>], u32> {
        self.keys(level)
            .iter()
            .enumerate()
            .map(|(g, k)| (&k[..], g as u32))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(parts: &[Option<&str>]) -> GroupKey {
        parts.iter().map(|p| p.map(String::from)).collect()
    }

    #[test]
    fn prefixes_form_levels_with_parents() {
        // region/store/till: two regions, a null store of its own.
        let finest = vec![
            key(&[Some("n"), Some("s1"), Some("t1")]),
            key(&[Some("s"), Some("s2"), Some("t1")]),
            key(&[Some("n"), Some("s1"), Some("t2")]),
            key(&[Some("n"), None, Some("t1")]),
            key(&[Some("s"), Some("s1"), Some("t1")]),
        ];
        let h = Hierarchy::new(&finest);
        assert_eq!(h.depth(), 3);
        assert_eq!(h.keys(1), &[key(&[Some("n")]), key(&[Some("s")])]);
        assert_eq!(
            h.keys(2),
            &[
                key(&[Some("n"), Some("s1")]),
                key(&[Some("s"), Some("s2")]),
                key(&[Some("n"), None]),
                key(&[Some("s"), Some("s1")]),
            ]
        );
        assert_eq!(h.keys(3), &finest[..]);
        // Finest groups to their regions and stores.
        let regions: Vec<u32> = (0..5).map(|g| h.at(1, g)).collect();
        let stores: Vec<u32> = (0..5).map(|g| h.at(2, g)).collect();
        assert_eq!(regions, [0, 1, 0, 0, 1]);
        assert_eq!(stores, [0, 1, 0, 2, 3]);
        assert_eq!(
            (0..5).map(|g| h.at(3, g)).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4]
        );
        // Parents: regions under the root; stores under their regions; the
        // same store name in two regions is two stores.
        assert_eq!((0..2).map(|g| h.parent(1, g)).collect::<Vec<_>>(), [0, 0]);
        assert_eq!(
            (0..4).map(|g| h.parent(2, g)).collect::<Vec<_>>(),
            [0, 1, 0, 1]
        );
        assert_eq!(
            (0..5).map(|g| h.parent(3, g)).collect::<Vec<_>>(),
            [0, 1, 0, 2, 3]
        );
    }

    #[test]
    fn no_groups_no_levels() {
        assert_eq!(Hierarchy::new(&[]).depth(), 0);
    }
}
