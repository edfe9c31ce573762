//! Markdown tables with padded columns: readable in a terminal, pasteable into a README.

use senju_bench::stats::Spread;

/// A table being built row by row.
pub(crate) struct Table {
    headers: Vec<String>,
    /// Per column: right-align (numbers) or not.
    right: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these headers; a header that starts with `>` is right-aligned (the `>`
    /// is dropped).
    pub(crate) fn new(headers: &[&str]) -> Self {
        Self {
            headers: headers.iter().map(|h| h.trim_start_matches('>').to_string()).collect(),
            right: headers.iter().map(|h| h.starts_with('>')).collect(),
            rows: Vec::new(),
        }
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as Markdown, ending with a newline.
    pub(crate) fn render(&self) -> String {
        let n = self.headers.len();
        let width = |i: usize| {
            self.rows
                .iter()
                .filter_map(|r| r.get(i))
                .chain(std::iter::once(&self.headers[i]))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
                .max(3)
        };
        let widths: Vec<usize> = (0..n).map(width).collect();
        let line = |cells: &[String]| {
            let mut s = String::from("|");
            for (i, w) in widths.iter().enumerate() {
                let c = cells.get(i).map_or("", String::as_str);
                let pad = w.saturating_sub(c.chars().count());
                if self.right[i] {
                    s += &format!(" {}{c} |", " ".repeat(pad));
                } else {
                    s += &format!(" {c}{} |", " ".repeat(pad));
                }
            }
            s + "\n"
        };
        let mut out = line(&self.headers);
        out += "|";
        for (i, w) in widths.iter().enumerate() {
            if self.right[i] {
                out += &format!("{}:|", "-".repeat(w + 1));
            } else {
                out += &format!("{}|", "-".repeat(w + 2));
            }
        }
        out += "\n";
        for r in &self.rows {
            out += &line(r);
        }
        out
    }
}

/// `median [min–max]` with `f` formatting each number; just the median for one round.
pub(crate) fn spread(s: &Spread, f: impl Fn(f64) -> String) -> String {
    if s.min == s.max {
        f(s.median)
    } else {
        format!("{} [{}–{}]", f(s.median), f(s.min), f(s.max))
    }
}

/// A duration in nanoseconds as µs or ms.
pub(crate) fn ns(v: f64) -> String {
    if v >= 1e6 { format!("{:.1} ms", v / 1e6) } else { format!("{:.1} µs", v / 1e3) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up() {
        let mut t = Table::new(&["lock", ">ops"]);
        t.row(vec!["a".into(), "1".into()]);
        t.row(vec!["longer name".into(), "12345".into()]);
        let text = t.render();
        let lens: Vec<usize> = text.lines().map(|l| l.chars().count()).collect();
        assert!(lens.iter().all(|&l| l == lens[0]), "{text}");
        assert!(text.contains("----:|"));
    }

    #[test]
    fn spreads_and_durations() {
        let s = Spread { median: 2.0, min: 1.0, max: 3.0 };
        assert_eq!(spread(&s, |v| format!("{v:.0}")), "2 [1–3]");
        assert_eq!(ns(1500.0), "1.5 µs");
        assert_eq!(ns(2_500_000.0), "2.5 ms");
    }
}
