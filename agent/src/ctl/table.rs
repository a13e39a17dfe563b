//! Table layout for the human outputs: columns aligned left or right,
//! padded to their widest cell.

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Align {
    Left,
    Right,
}
pub(super) use Align::{Left as L, Right as R};

/// Columns padded to their widest cell, two spaces apart, no trailing
/// blanks.
pub(super) struct Table {
    header: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(super) fn new(header: &[(&str, Align)]) -> Table {
        Table {
            header: header.iter().map(|&(h, a)| (h.to_string(), a)).collect(),
            rows: Vec::new(),
        }
    }

    pub(super) fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.header.len());
        self.rows.push(cells);
    }

    pub(super) fn render(&self, indent: &str) -> String {
        let mut widths: Vec<usize> = self.header.iter().map(|(h, _)| h.chars().count()).collect();
        for row in &self.rows {
            for (w, c) in widths.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count());
            }
        }
        let header: Vec<String> = self.header.iter().map(|(h, _)| h.clone()).collect();
        let mut out = String::new();
        for row in std::iter::once(&header).chain(&self.rows) {
            let mut line = indent.to_string();
            for (i, cell) in row.iter().enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = widths[i] - cell.chars().count();
                if self.header[i].1 == R {
                    line.extend(std::iter::repeat_n(' ', pad));
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    /// The table, or `(none)` when it has no rows.
    pub(super) fn render_or_none(&self, indent: &str) -> String {
        if self.rows.is_empty() {
            format!("{indent}(none)\n")
        } else {
            self.render(indent)
        }
    }
}
