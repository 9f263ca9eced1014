//! Output: aligned tables for people, JSON for scripts.

mod render;

use serde::Serialize;

pub(crate) use render::workers_table;
pub use render::{human, kind_name};

/// How a column's cells line up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text.
    Left,
    /// Numbers.
    Right,
}

/// A table with aligned columns, two spaces apart; the last column is not padded.
#[derive(Debug, Clone)]
pub struct Table {
    headers: Option<Vec<String>>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers and alignments.
    pub fn new(columns: &[(&str, Align)]) -> Table {
        Table {
            headers: Some(columns.iter().map(|c| c.0.to_string()).collect()),
            align: columns.iter().map(|c| c.1).collect(),
            rows: Vec::new(),
        }
    }

    /// A table without a header line (key/value lists).
    pub fn bare(align: &[Align]) -> Table {
        Table {
            headers: None,
            align: align.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells are blank, extra cells are kept.
    pub fn row<I, S>(&mut self, cells: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// Whether it has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table, each line indented by `indent`.
    pub fn render_indented(&self, indent: &str) -> String {
        let lines: Vec<&Vec<String>> = self.headers.iter().chain(self.rows.iter()).collect();
        let columns = lines.iter().map(|l| l.len()).max().unwrap_or(0);
        let mut widths = vec![0; columns];
        for line in &lines {
            for (i, cell) in line.iter().enumerate() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for line in lines {
            let mut text = String::from(indent);
            for (i, width) in widths.iter().enumerate() {
                let cell = line.get(i).map_or("", String::as_str);
                let pad = width - cell.chars().count();
                let last = i + 1 == columns;
                if i > 0 {
                    text.push_str("  ");
                }
                match self.align.get(i).copied().unwrap_or(Align::Left) {
                    Align::Right => {
                        text.push_str(&" ".repeat(pad));
                        text.push_str(cell);
                    }
                    Align::Left => {
                        text.push_str(cell);
                        if !last {
                            text.push_str(&" ".repeat(pad));
                        }
                    }
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        }
        out
    }

    /// The table.
    pub fn render(&self) -> String {
        self.render_indented("")
    }
}

/// Pretty JSON with a final newline.
pub fn json<T: Serialize>(value: &T) -> String {
    // Serializing protocol types and plain structs cannot fail (string keys only).
    let mut s = serde_json::to_string_pretty(value).unwrap_or_default();
    s.push('\n');
    s
}

/// A rate or count with an SI suffix: `999`, `1.50k`, `12.3M`, `1.00G`.
pub fn si(value: f64) -> String {
    const UNITS: [(f64, &str); 4] = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];
    if !value.is_finite() || value < 0.0 {
        return "-".into();
    }
    for (scale, unit) in UNITS {
        if value >= scale {
            let v = value / scale;
            return if v >= 100.0 {
                format!("{v:.0}{unit}")
            } else if v >= 10.0 {
                format!("{v:.1}{unit}")
            } else {
                format!("{v:.2}{unit}")
            };
        }
    }
    if value >= 10.0 || value == value.trunc() {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_numbers_go_right() {
        let mut t = Table::new(&[
            ("NAME", Align::Left),
            ("PORTS", Align::Right),
            ("X", Align::Left),
        ]);
        t.row(["br0", "2", "a"]);
        t.row(["bridge-long", "12345", ""]);
        assert_eq!(
            t.render(),
            "NAME         PORTS  X\nbr0              2  a\nbridge-long  12345\n"
        );
    }

    #[test]
    fn bare_tables_have_no_header_and_indent() {
        let mut t = Table::bare(&[Align::Left, Align::Left]);
        t.row(["type", "tap"]);
        t.row(["mtu", "1500"]);
        assert_eq!(t.render_indented("  "), "  type  tap\n  mtu   1500\n");
    }

    #[test]
    fn short_rows_leave_blank_cells() {
        let mut t = Table::new(&[("A", Align::Left), ("B", Align::Right)]);
        t.row(["x"]);
        assert_eq!(t.render(), "A  B\nx\n");
    }

    #[test]
    fn si_suffixes() {
        assert_eq!(si(0.0), "0");
        assert_eq!(si(999.0), "999");
        assert_eq!(si(2.5), "2.5");
        assert_eq!(si(1500.0), "1.50k");
        assert_eq!(si(12_345_678.0), "12.3M");
        assert_eq!(si(250e9), "250G");
        assert_eq!(si(f64::NAN), "-");
        assert_eq!(si(-1.0), "-");
    }
}
