//! The report's plots, drawn with `plotters` into SVG strings: points or
//! lines on linear or log axes, histograms, panels of horizontal bars and
//! panels of box plots.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{GroupfitError, Result};

/// A plot's size in pixels.
pub type Size = (u32, u32);

/// Route and series colours: own, fallback, then the rest.
pub const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(127, 127, 127),
    RGBColor(214, 39, 40),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
    RGBColor(227, 119, 194),
];

const FONT: &str = "sans-serif";

/// How an axis maps its values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scale {
    /// As they are.
    Linear,
    /// Base-10 logarithm; values at or below 0 are left out.
    Log,
}

impl Scale {
    fn map(self, v: f64) -> Option<f64> {
        match self {
            Scale::Linear => v.is_finite().then_some(v),
            Scale::Log => (v > 0.0 && v.is_finite()).then(|| v.log10()),
        }
    }

    fn label(self, v: f64) -> String {
        match self {
            Scale::Linear => short(v),
            Scale::Log => short(10f64.powf(v)),
        }
    }
}

/// An axis: its title and scale.
#[derive(Debug, Clone, Copy)]
pub struct Axis<'a> {
    /// The axis title.
    pub title: &'a str,
    /// Its scale.
    pub scale: Scale,
}

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mark {
    /// A dot per point.
    Dots,
    /// A line through the points in order.
    Line,
}

/// A named series of points in data units.
#[derive(Debug, Clone)]
pub struct Series {
    /// Its legend entry.
    pub label: String,
    /// Its colour.
    pub color: RGBColor,
    /// `(x, y)` points.
    pub points: Vec<(f64, f64)>,
}

/// A horizontal reference line with its legend entry.
#[derive(Debug, Clone)]
pub struct Level {
    /// Its legend entry.
    pub label: String,
    /// Its height in data units.
    pub y: f64,
}

/// 3 significant digits, with `k`, `M`, `G` or `T` from 10,000 up:
/// `0.123`, `1234`, `12.3k`, `2.5M`.
pub fn short(v: f64) -> String {
    let a = v.abs();
    let (scaled, suffix) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e4, "k")]
        .iter()
        .find(|(at, _)| a >= *at)
        .map_or((v, ""), |&(at, s)| (v / if s == "k" { 1e3 } else { at }, s));
    if scaled == 0.0 || !scaled.is_finite() {
        return format!("{scaled}{suffix}");
    }
    let digits = (2 - scaled.abs().log10().floor() as i32).clamp(0, 6) as usize;
    let s = format!("{scaled:.digits$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    format!("{s}{suffix}")
}

/// `lo..hi` padded by 5% each side (a point widened to a unit range).
fn padded(lo: f64, hi: f64) -> std::ops::Range<f64> {
    if !(lo.is_finite() && hi.is_finite()) {
        return 0.0..1.0;
    }
    let pad = if hi > lo {
        0.05 * (hi - lo)
    } else {
        0.5f64.max(lo.abs() * 0.05)
    };
    (lo - pad)..(hi + pad)
}

fn extent(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    })
}

/// What drawing on a canvas returns.
type Drawn = std::result::Result<(), Box<dyn std::error::Error>>;

fn failed(title: &str, e: impl std::fmt::Display) -> GroupfitError {
    GroupfitError::arg(format!("cannot draw the plot '{title}': {e}"))
}

/// Runs `draw` on a white canvas of `size` and returns the SVG.
fn canvas(
    title: &str,
    size: Size,
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Drawn,
) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| failed(title, e))?;
        draw(&root).map_err(|e| failed(title, e))?;
        root.present().map_err(|e| failed(title, e))?;
    }
    Ok(svg)
}

/// A chart with `title` and room for both axes' labels: the frame of
/// [`points`] and [`histogram`].
fn framed<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    title: &str,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut b = ChartBuilder::on(root);
    b.caption(title, (FONT, 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(56);
    b
}

/// Points (or lines) of `series` on axes `x` and `y`, with an optional
/// reference line.
pub fn points(
    title: &str,
    size: Size,
    (x, y): (Axis, Axis),
    mark: Mark,
    series: &[Series],
    level: Option<&Level>,
) -> Result<String> {
    let mapped: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|s| {
            s.points
                .iter()
                .filter_map(|&(a, b)| Some((x.scale.map(a)?, y.scale.map(b)?)))
                .collect()
        })
        .collect();
    let all = || mapped.iter().flatten();
    let (x0, x1) = extent(all().map(|p| p.0));
    let level_y = level.and_then(|l| y.scale.map(l.y));
    let (y0, y1) = extent(all().map(|p| p.1).chain(level_y));
    let (xr, yr) = (padded(x0, x1), padded(y0, y1));
    canvas(title, size, |root| {
        let mut chart = framed(root, title).build_cartesian_2d(xr.clone(), yr)?;
        chart
            .configure_mesh()
            .x_desc(x.title)
            .y_desc(y.title)
            .x_label_formatter(&|v| x.scale.label(*v))
            .y_label_formatter(&|v| y.scale.label(*v))
            .light_line_style(WHITE)
            .draw()?;
        for (s, pts) in series.iter().zip(&mapped) {
            let color = s.color;
            if pts.is_empty() {
                continue;
            }
            let drawn = match mark {
                Mark::Dots => chart.draw_series(
                    pts.iter()
                        .map(|&p| Circle::new(p, 2, color.mix(0.55).filled())),
                )?,
                Mark::Line => chart
                    .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?,
            };
            drawn.label(s.label.clone()).legend(move |(a, b)| {
                Rectangle::new([(a, b - 4), (a + 12, b + 4)], color.filled())
            });
        }
        if let (Some(l), Some(v)) = (level, level_y) {
            chart
                .draw_series(LineSeries::new(
                    [(xr.start, v), (xr.end, v)],
                    BLACK.stroke_width(2),
                ))?
                .label(l.label.clone())
                .legend(|(a, b)| PathElement::new([(a, b), (a + 12, b)], BLACK.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;
        Ok(())
    })
}

/// A histogram of `values` in `bins` equal bins over their 1st to 99th
/// percentile (values beyond fall in the end bins), with an optional
/// vertical marker (`label`, `x`).
pub fn histogram(
    title: &str,
    size: Size,
    x_title: &str,
    values: &[f64],
    bins: usize,
    marker: Option<(&str, f64)>,
) -> Result<String> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    let (lo, hi) = if v.is_empty() {
        (0.0, 1.0)
    } else {
        (q(0.01), q(0.99))
    };
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        (lo - 0.5, lo + 0.5)
    };
    let width = (hi - lo) / bins as f64;
    let mut counts = vec![0usize; bins];
    for &x in &v {
        let b = ((x - lo) / width).floor().clamp(0.0, (bins - 1) as f64) as usize;
        counts[b] += 1;
    }
    let top = counts.iter().copied().max().unwrap_or(0).max(1) as f64 * 1.1;
    canvas(title, size, |root| {
        let mut chart = framed(root, title).build_cartesian_2d(lo..hi, 0f64..top)?;
        chart
            .configure_mesh()
            .x_desc(x_title)
            .y_desc("groups")
            .x_label_formatter(&|v| short(*v))
            .y_label_formatter(&|v| short(*v))
            .light_line_style(WHITE)
            .draw()?;
        chart.draw_series(counts.iter().enumerate().map(|(i, &c)| {
            let a = lo + i as f64 * width;
            Rectangle::new(
                [(a, 0.0), (a + width, c as f64)],
                PALETTE[0].mix(0.8).filled(),
            )
        }))?;
        if let Some((label, at)) = marker.filter(|m| m.1 >= lo && m.1 <= hi) {
            chart
                .draw_series(LineSeries::new(
                    [(at, 0.0), (at, top)],
                    BLACK.stroke_width(2),
                ))?
                .label(label)
                .legend(|(a, b)| PathElement::new([(a, b), (a + 12, b)], BLACK.stroke_width(2)));
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.3))
                .draw()?;
        }
        Ok(())
    })
}

/// A panel of horizontal bars: its title and `(label, value)` bars.
#[derive(Debug, Clone)]
pub struct BarPanel {
    /// The panel's title.
    pub title: String,
    /// The bars, top first.
    pub bars: Vec<(String, f64)>,
}

/// Panels of horizontal bars side by side, `per_row` a row.
pub fn bars(title: &str, width: u32, panels: &[BarPanel], per_row: usize) -> Result<String> {
    let rows = panels.len().div_ceil(per_row.max(1)).max(1);
    let tallest = panels.iter().map(|p| p.bars.len()).max().unwrap_or(1);
    let panel_h = (60 + 24 * tallest as u32).max(140);
    let size = (width, 30 + rows as u32 * panel_h);
    canvas(title, size, |root| {
        let root = root.titled(title, (FONT, 18))?;
        let cols = per_row.max(1).min(panels.len().max(1));
        let areas = root.split_evenly((rows, cols));
        for (panel, area) in panels.iter().zip(&areas) {
            let n = panel.bars.len().max(1);
            let top = panel
                .bars
                .iter()
                .map(|b| b.1)
                .fold(0.0, f64::max)
                .max(1e-12)
                * 1.15;
            let label_w = panel
                .bars
                .iter()
                .map(|b| b.0.chars().count().min(28))
                .max()
                .unwrap_or(4) as u32
                * 7
                + 12;
            let mut chart = ChartBuilder::on(area)
                .caption(&panel.title, (FONT, 14))
                .margin(8)
                .x_label_area_size(24)
                .y_label_area_size(label_w.min(width / cols as u32 / 2))
                .build_cartesian_2d(0f64..top, (0..n).into_segmented())?;
            let names = &panel.bars;
            chart
                .configure_mesh()
                .disable_y_mesh()
                .light_line_style(WHITE)
                .y_labels(n)
                .x_labels(4)
                .x_label_formatter(&|v| short(*v))
                .y_label_formatter(&|v| match v {
                    SegmentValue::CenterOf(i) => names
                        .get(n - 1 - *i)
                        .map(|b| b.0.chars().take(28).collect())
                        .unwrap_or_default(),
                    _ => String::new(),
                })
                .draw()?;
            chart.draw_series(names.iter().enumerate().map(|(i, b)| {
                let row = n - 1 - i;
                let mut r = Rectangle::new(
                    [
                        (0.0, SegmentValue::Exact(row)),
                        (b.1, SegmentValue::Exact(row + 1)),
                    ],
                    PALETTE[i % PALETTE.len()].mix(0.85).filled(),
                );
                r.set_margin(3, 3, 0, 0);
                r
            }))?;
            chart.draw_series(names.iter().enumerate().map(|(i, b)| {
                Text::new(
                    short(b.1),
                    (b.1, SegmentValue::CenterOf(n - 1 - i)),
                    (FONT, 11).into_font().color(&BLACK),
                )
            }))?;
        }
        Ok(())
    })
}

/// One box of a box-plot panel: its title and the values it summarises.
#[derive(Debug, Clone)]
pub struct BoxPanel {
    /// The panel's title (a feature's name).
    pub title: String,
    /// The values (one per group).
    pub values: Vec<f64>,
}

/// One horizontal box plot per panel, each on its own scale, `per_row` a row.
pub fn boxes(title: &str, width: u32, panels: &[BoxPanel], per_row: usize) -> Result<String> {
    let cols = per_row.max(1).min(panels.len().max(1));
    let rows = panels.len().div_ceil(cols).max(1);
    let size = (width, 30 + 100 * rows as u32);
    canvas(title, size, |root| {
        let root = root.titled(title, (FONT, 18))?;
        let areas = root.split_evenly((rows, cols));
        for (panel, area) in panels.iter().zip(&areas) {
            let v: Vec<f64> = panel
                .values
                .iter()
                .copied()
                .filter(|x| x.is_finite())
                .collect();
            if v.is_empty() {
                continue;
            }
            let q = Quartiles::new(&v);
            let [lo_fence, _, _, _, hi_fence] = q.values();
            let (min, max) = extent(v.iter().copied());
            let r = padded(min.max(lo_fence as f64), max.min(hi_fence as f64));
            // plotters' box plots take f32 positions.
            let mut chart = ChartBuilder::on(area)
                .caption(&panel.title, (FONT, 13))
                .margin(6)
                .x_label_area_size(24)
                .y_label_area_size(4)
                .build_cartesian_2d(r.start as f32..r.end as f32, (0..1usize).into_segmented())?;
            chart
                .configure_mesh()
                .disable_y_mesh()
                .disable_y_axis()
                .light_line_style(WHITE)
                .x_labels(4)
                .x_label_style((FONT, 11))
                .x_label_formatter(&|v| short(*v as f64))
                .draw()?;
            chart.draw_series(std::iter::once(
                Boxplot::new_horizontal(SegmentValue::CenterOf(0), &q)
                    .width(24)
                    .style(PALETTE[0]),
            ))?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_numbers() {
        assert_eq!(short(0.0), "0");
        assert_eq!(short(1.0), "1");
        assert_eq!(short(0.12345), "0.123");
        assert_eq!(short(123.4), "123");
        assert_eq!(short(9_999.0), "9999");
        assert_eq!(short(12_345.0), "12.3k");
        assert_eq!(short(2_500_000.0), "2.5M");
        assert_eq!(short(3_834_638_000.0), "3.83G");
        assert_eq!(short(-3.5), "-3.5");
    }

    #[test]
    fn log_axes_drop_what_they_cannot_show() {
        assert_eq!(Scale::Log.map(100.0), Some(2.0));
        assert_eq!(Scale::Log.map(0.0), None);
        assert_eq!(Scale::Linear.map(f64::NAN), None);
        assert_eq!(Scale::Log.label(2.0), "100");
    }

    #[test]
    fn plots_are_svg_with_their_marks() {
        let s = Series {
            label: "own".into(),
            color: PALETTE[0],
            points: vec![(10.0, 0.5), (100.0, 0.4), (0.0, 0.3)],
        };
        let axes = (
            Axis {
                title: "rows",
                scale: Scale::Log,
            },
            Axis {
                title: "log-loss",
                scale: Scale::Linear,
            },
        );
        let level = Level {
            label: "global".into(),
            y: 0.45,
        };
        let svg = points("t", (400, 300), axes, Mark::Dots, &[s], Some(&level)).unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        // Two dots (the point at 0 rows cannot be shown on a log axis) and the legend's.
        assert_eq!(svg.matches("<circle").count(), 2, "{svg}");
        let h = histogram("h", (400, 300), "x", &[1.0, 2.0, 2.0, 3.0], 4, None).unwrap();
        // Four bars; the highest holds 2 of 4 values.
        assert!(h.matches("<rect").count() >= 5, "{h}");
        let b = bars(
            "b",
            600,
            &[BarPanel {
                title: "C".into(),
                bars: vec![("0.1".into(), 3.0), ("1".into(), 1.0)],
            }],
            2,
        )
        .unwrap();
        assert!(b.contains(">\n0.1\n</text>") || b.contains(">0.1<"), "{b}");
        let x = boxes(
            "x",
            600,
            &[BoxPanel {
                title: "f0".into(),
                values: vec![1.0, 2.0, 3.0, 4.0, 5.0],
            }],
            3,
        )
        .unwrap();
        assert!(x.contains("f0"), "{x}");
    }

    #[test]
    fn a_histogram_puts_outliers_in_its_end_bins_and_survives_one_value() {
        let h = histogram("h", (400, 300), "x", &[5.0; 3], 10, Some(("global", 5.0))).unwrap();
        assert!(h.contains("global"), "{h}");
        let e = histogram("h", (400, 300), "x", &[], 10, None).unwrap();
        assert!(e.starts_with("<svg"));
    }
}
