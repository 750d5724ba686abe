//! The HTML report: every committed golden model file gets one, whatever
//! its format version, and a report follows the model it describes.

use groupfit::report::Report;
use groupfit::store::ModelBundle;

use crate::common::{golden_dir, load_golden};

/// The plots of a report: each `<figure class="plot">`'s SVG.
fn plots(html: &str) -> Vec<&str> {
    html.split("<figure class=\"plot\">")
        .skip(1)
        .map(|f| &f[..f.find("</figure>").unwrap()])
        .collect()
}

#[test]
fn every_golden_file_gets_a_self_contained_report() {
    let mut seen = 0;
    for entry in std::fs::read_dir(golden_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "gfm") {
            continue;
        }
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let bundle = load_golden(&path, &stem);
        let html = Report::new(&bundle, &stem).html().unwrap();
        assert!(html.starts_with("<!DOCTYPE html>"), "{stem}");
        assert!(
            !html.contains("<script") && !html.contains("<img"),
            "{stem}"
        );
        let plots = plots(&html);
        // Metric by size, its spread, the routes, the configs (a grid of 2
        // or more), the family's plot; from format 9 on, the gain over the
        // global model and the training cost too.
        // A file without validation rows has the routes and the family's
        // plot only.
        let scored = bundle.groups.iter().any(|g| g.n_valid > 0);
        let want = if scored {
            4 + usize::from(bundle.configs.len() >= 2)
                + if bundle.format_version >= 9 { 2 } else { 0 }
        } else {
            2
        };
        assert!(plots.len() >= want, "{stem}: {} plots", plots.len());
        for p in &plots {
            assert!(p.starts_with("<svg") && p.contains("</svg>"), "{stem}");
            let marks = ["<circle", "<rect", "<polyline", "<path", "<line"]
                .iter()
                .map(|m| p.matches(m).count())
                .sum::<usize>();
            assert!(marks > 5, "{stem}: a plot with {marks} marks");
        }
        assert!(html.contains(&bundle.family), "{stem}");
        for g in bundle.groups.iter().filter(|g| g.n_valid > 0) {
            let key = groupfit::data::keys::display_key(&g.key);
            assert!(
                html.contains(&format!("<td>{key}</td>")),
                "{stem}: group {key} in the tables"
            );
        }
        seen += 1;
    }
    assert!(seen >= 12, "{seen} golden files");
}

#[test]
fn a_report_shows_the_training_cost_only_when_the_file_has_it() {
    let old = load_golden(&golden_dir().join("gbdt_v5.gfm"), "gbdt_v5");
    let html = Report::new(&old, "old").html().unwrap();
    assert!(html.contains("No per-group training time in this model file"));
    let new = load_golden(&golden_dir().join("mlp_v9.gfm"), "mlp_v9");
    let html = Report::new(&new, "new").html().unwrap();
    assert!(html.contains("Training cost by group size"));
    assert!(html.contains("Training loss per epoch, largest groups"));
}

#[test]
fn the_inline_view_is_a_fragment_with_its_own_styles() {
    let b: ModelBundle = load_golden(&golden_dir().join("linear_v5.gfm"), "linear_v5");
    let html = Report::new(&b, "m").inline_html().unwrap();
    assert!(html.starts_with("<style>") && !html.contains("<html"));
    assert_eq!(plots(&html).len(), 2);
}
