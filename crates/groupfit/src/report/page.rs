//! The report's HTML: the page around the plots, tables and escaping. One
//! file with inline styles, no scripts and nothing fetched.

use std::fmt::Write;

/// `&`, `<`, `>`, `"` and `'` as entities.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// One plot and what it says, or a note why it is absent.
#[derive(Debug, Clone)]
pub enum Figure {
    /// An SVG plot and its caption.
    Plot {
        /// The SVG.
        svg: String,
        /// The caption (plain text).
        caption: String,
    },
    /// Why a plot is not shown (plain text).
    Note(String),
}

/// A table: header cells and rows of cells (plain text).
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// The header cells.
    pub head: Vec<String>,
    /// The rows.
    pub rows: Vec<Vec<String>>,
}

/// A part of the page: a heading and what follows it.
#[derive(Debug, Clone)]
pub enum Block {
    /// A section heading.
    Heading(String),
    /// A paragraph (plain text).
    Text(String),
    /// A plot or a note.
    Figure(Figure),
    /// A table with its caption.
    Table(String, Table),
    /// Names and their values, one a row.
    Facts(Vec<(String, String)>),
}

/// The page's styles; `.gf` scopes them for the inline (notebook) view.
const STYLE: &str = ".gf{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;color:#222;max-width:1000px;margin:0 auto;padding:12px}\
.gf h1{font-size:22px;margin:4px 0 12px}.gf h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}\
.gf table{border-collapse:collapse;font-size:13px;margin:8px 0}.gf td,.gf th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}\
.gf th{background:#f4f4f4}.gf table.facts th{white-space:nowrap}.gf td.num{text-align:right;font-variant-numeric:tabular-nums}\
.gf figure{margin:12px 0}.gf figcaption{font-size:13px;color:#555;margin-top:2px}.gf p.note{font-size:13px;color:#555;font-style:italic}\
.gf .pair{display:flex;flex-wrap:wrap;gap:12px}.gf .pair table{flex:1 1 440px}.gf code{font-size:12px;word-break:break-all}";

/// Whether a cell holds a number (right-aligned).
fn numeric(cell: &str) -> bool {
    !cell.is_empty()
        && cell.chars().all(|c| {
            c.is_ascii_digit() || matches!(c, '.' | ',' | '-' | '+' | 'e' | 'k' | 'M' | '%')
        })
        && cell.chars().any(|c| c.is_ascii_digit())
}

/// Writes `t` as an HTML table.
pub fn table_html(out: &mut String, t: &Table) {
    out.push_str("<table><thead><tr>");
    for h in &t.head {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr></thead><tbody>");
    for row in &t.rows {
        out.push_str("<tr>");
        for cell in row {
            let class = if numeric(cell) { " class=\"num\"" } else { "" };
            let _ = write!(out, "<td{class}>{}</td>", escape(cell));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
}

/// The blocks inside a `.gf` division, styles first.
pub fn body(title: &str, blocks: &[Block]) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<style>{STYLE}</style><div class=\"gf\"><h1>{}</h1>",
        escape(title)
    );
    for b in blocks {
        match b {
            Block::Heading(h) => {
                let _ = write!(out, "<h2>{}</h2>", escape(h));
            }
            Block::Text(t) => {
                let _ = write!(out, "<p>{}</p>", escape(t));
            }
            Block::Figure(Figure::Plot { svg, caption }) => {
                let _ = write!(
                    out,
                    "<figure class=\"plot\">{svg}<figcaption>{}</figcaption></figure>",
                    escape(caption)
                );
            }
            Block::Figure(Figure::Note(n)) => {
                let _ = write!(out, "<p class=\"note\">{}</p>", escape(n));
            }
            Block::Facts(facts) => {
                out.push_str("<table class=\"facts\"><tbody>");
                for (k, v) in facts {
                    let _ = write!(out, "<tr><th>{}</th><td>{}</td></tr>", escape(k), escape(v));
                }
                out.push_str("</tbody></table>");
            }
            Block::Table(caption, t) => {
                let _ = write!(out, "<p><b>{}</b></p>", escape(caption));
                table_html(&mut out, t);
            }
        }
    }
    out.push_str("</div>");
    out
}

/// A whole HTML document around [`body`].
pub fn document(title: &str, blocks: &[Block]) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title></head><body>{}</body></html>\n",
        escape(title),
        body(title, blocks)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_numbers_align_right() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        let t = Table {
            head: vec!["key".into(), "rows".into()],
            rows: vec![vec!["<b>".into(), "1,234".into()]],
        };
        let mut out = String::new();
        table_html(&mut out, &t);
        assert!(
            out.contains("<td>&lt;b&gt;</td><td class=\"num\">1,234</td>"),
            "{out}"
        );
        assert!(!numeric("JFK") && numeric("-0.25") && !numeric("-"));
    }

    #[test]
    fn a_document_has_no_script_and_no_link() {
        let d = document(
            "r <1>",
            &[
                Block::Heading("h".into()),
                Block::Figure(Figure::Plot {
                    svg: "<svg></svg>".into(),
                    caption: "c".into(),
                }),
                Block::Figure(Figure::Note("none".into())),
            ],
        );
        assert!(d.starts_with("<!DOCTYPE html>"));
        assert!(d.contains("<title>r &lt;1&gt;</title>"));
        assert!(d.contains("<figure class=\"plot\"><svg></svg><figcaption>c</figcaption></figure>"));
        assert!(!d.contains("<script") && !d.contains("<link") && !d.contains("http"));
    }
}
