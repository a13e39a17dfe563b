//! The one table helper of this crate: a header and rows of cells, drawn
//! as a markdown table (`report.md`) or as fixed-width text (what the
//! tools print). Cells are given formatted; the table only lays them out.

/// Where a cell sits in its column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

pub use Align::{Left as L, Right as R};

/// A table: per column a header, an alignment and a minimum width (text
/// only), and rows of cells.
#[derive(Debug, Clone, Default)]
pub struct Table {
    header: Vec<String>,
    columns: Vec<(Align, usize)>,
    rows: Vec<Vec<String>>,
    compact_rule: bool,
}

impl Table {
    /// A table with these column names, left-aligned, no minimum width
    /// (the markdown tables).
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        let header: Vec<String> = header.into_iter().map(Into::into).collect();
        Table {
            columns: vec![(Align::Left, 0); header.len()],
            header,
            ..Table::default()
        }
    }

    /// A text table: per column its name, alignment and minimum width.
    pub fn text(columns: &[(&str, Align, usize)]) -> Table {
        Table {
            header: columns.iter().map(|c| c.0.to_string()).collect(),
            columns: columns.iter().map(|&(_, a, w)| (a, w)).collect(),
            ..Table::default()
        }
    }

    /// A text table without a header line.
    pub fn headless(columns: &[(Align, usize)]) -> Table {
        Table {
            columns: columns.to_vec(),
            ..Table::default()
        }
    }

    /// Right-aligns these columns (by index; markdown: `---:`).
    pub fn right(mut self, columns: impl IntoIterator<Item = usize>) -> Table {
        for i in columns {
            self.columns[i].0 = Align::Right;
        }
        self
    }

    /// The markdown rule written `|---|---:|` instead of `| --- | ---: |`
    /// (the rotor report's, kept as it was).
    pub fn compact_rule(mut self) -> Table {
        self.compact_rule = true;
        self
    }

    /// Adds a row. In text, cells past the last column follow it as they
    /// are.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// As markdown: the header, the rule and one line a row.
    pub fn markdown(&self) -> String {
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        let mut out = line(&self.header);
        let rule: Vec<&str> = self
            .columns
            .iter()
            .map(|(a, _)| match a {
                Align::Left => "---",
                Align::Right => "---:",
            })
            .collect();
        if self.compact_rule {
            out += &format!("|{}|\n", rule.join("|"));
        } else {
            out += &format!("| {} |\n", rule.join(" | "));
        }
        for r in &self.rows {
            out += &line(r);
        }
        out
    }

    /// As text: each cell padded to its column's width (a wider cell
    /// pushes the rest of its line, as `format!`'s widths do), one space
    /// apart, one line a row after the header (none when headless).
    pub fn text_lines(&self) -> String {
        let mut out = String::new();
        if !self.header.is_empty() {
            out += &self.text_line(&self.header);
        }
        for r in &self.rows {
            out += &self.text_line(r);
        }
        out
    }

    fn text_line(&self, cells: &[String]) -> String {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let (align, width) = self.columns.get(i).copied().unwrap_or((Align::Left, 0));
                let pad = " ".repeat(width.saturating_sub(c.chars().count()));
                match align {
                    Align::Left => format!("{c}{pad}"),
                    Align::Right => format!("{pad}{c}"),
                }
            })
            .collect();
        padded.join(" ") + "\n"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_and_text_by_hand() {
        let mut t = Table::new(["a", "b|c"]);
        t.row(["1", "2"]);
        assert_eq!(t.markdown(), "| a | b|c |\n| --- | --- |\n| 1 | 2 |\n");
        let mut t = Table::new(["x", "y"]).right([1]).compact_rule();
        t.row(["1", "2"]);
        assert_eq!(t.markdown(), "| x | y |\n|---|---:|\n| 1 | 2 |\n");
        // As format!("{:<4} {:>3}") would: "ab  " + " " + " 12".
        let mut t = Table::text(&[("name", L, 4), ("n", R, 3)]);
        t.row(["ab", "12"]);
        t.row(["toolong", "1234", "extra"]);
        assert_eq!(t.text_lines(), "name   n\nab    12\ntoolong 1234 extra\n");
        let mut t = Table::headless(&[(R, 2)]);
        t.row(["é"]);
        assert_eq!(t.text_lines(), " é\n");
    }
}
