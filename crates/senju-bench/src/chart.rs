//! SVG line charts for the lab's results: one or more panels side by side, each with titled
//! axes (units in the label), one line with markers per series, and a legend.
//!
//! ```
//! use senju_bench::chart::{Chart, Panel, Series};
//!
//! let chart = Chart {
//!     title: "Example".into(),
//!     x_label: "threads".into(),
//!     panels: vec![Panel {
//!         subtitle: String::new(),
//!         y_label: "operations per second (millions)".into(),
//!         log_y: false,
//!         series: vec![Series { name: "a".into(), points: vec![(1.0, 2.0), (2.0, 3.5)] }],
//!     }],
//!     y_from_zero: true,
//! };
//! let svg = chart.to_svg().unwrap();
//! assert!(svg.contains("<svg") && svg.contains("threads"));
//! ```

use plotters::prelude::*;

/// One line on a panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Its name in the legend.
    pub name: String,
    /// (x, y) points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// One plotting area.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// Shown above the panel (may be empty when there is one panel).
    pub subtitle: String,
    /// The y axis's label, with its unit.
    pub y_label: String,
    /// A logarithmic y axis (values below 1 are drawn at 1).
    pub log_y: bool,
    /// Its lines.
    pub series: Vec<Series>,
}

/// A whole chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// The title at the top.
    pub title: String,
    /// The x axis's label, with its unit (the same on every panel).
    pub x_label: String,
    /// Panels, drawn left to right.
    pub panels: Vec<Panel>,
    /// Start the y axis at 0 (otherwise at the smallest value).
    pub y_from_zero: bool,
}

/// Distinct, readable line colours (blue, orange, green, red, purple, brown, pink, grey,
/// olive, cyan), then repeated.
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

const PANEL_WIDTH: u32 = 760;
const LEGEND_WIDTH: u32 = 400;
const HEIGHT: u32 = 560;

impl Chart {
    /// Every series name in the order of first appearance; a name keeps its colour across
    /// panels.
    fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for s in self.panels.iter().flat_map(|p| &p.series) {
            if !names.contains(&s.name.as_str()) {
                names.push(&s.name);
            }
        }
        names
    }

    /// Renders the chart as an SVG document: the panels side by side, the legend in a column
    /// on the right (so it never hides a line).
    pub fn to_svg(&self) -> Result<String, String> {
        let mut svg = String::new();
        let panels = self.panels.len().max(1) as u32;
        let names = self.names();
        {
            let root =
                SVGBackend::with_string(&mut svg, (PANEL_WIDTH * panels + LEGEND_WIDTH, HEIGHT))
                    .into_drawing_area();
            root.fill(&WHITE).map_err(err)?;
            let root = root.titled(&self.title, ("sans-serif", 26)).map_err(err)?;
            let (plots, legend) = root.split_horizontally(PANEL_WIDTH * panels);
            let areas = plots.split_evenly((1, panels as usize));
            for (panel, area) in self.panels.iter().zip(areas.iter()) {
                self.draw_panel(panel, area, &names)?;
            }
            for (i, name) in names.iter().enumerate() {
                let color = COLORS[i % COLORS.len()];
                let y = 60 + 26 * i as i32;
                legend
                    .draw(&PathElement::new(vec![(8, y), (40, y)], color.stroke_width(3)))
                    .map_err(err)?;
                legend.draw(&Circle::new((24, y), 4, color.filled())).map_err(err)?;
                legend
                    .draw(&Text::new(name.to_string(), (48, y - 8), ("sans-serif", 15)))
                    .map_err(err)?;
            }
            root.present().map_err(err)?;
        }
        Ok(svg)
    }

    /// Renders the chart and writes it to `path`.
    pub fn write(&self, path: &std::path::Path) -> Result<(), String> {
        let svg = self.to_svg()?;
        std::fs::write(path, svg).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    fn draw_panel(
        &self,
        panel: &Panel,
        area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
        names: &[&str],
    ) -> Result<(), String> {
        // A log axis is drawn as a linear axis over log10 values, labelled with the powers.
        let ty = |y: f64| if panel.log_y { y.max(1.0).log10() } else { y };
        let series: Vec<Vec<(f64, f64)>> = panel
            .series
            .iter()
            .map(|s| s.points.iter().map(|&(x, y)| (x, ty(y))).collect())
            .collect();
        let points = || series.iter().flat_map(|s| s.iter());
        let (mut x0, mut x1) = (f64::INFINITY, f64::NEG_INFINITY);
        let (mut y0, mut y1) = (f64::INFINITY, f64::NEG_INFINITY);
        for &(x, y) in points() {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
        if !x0.is_finite() {
            (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
        }
        if self.y_from_zero || panel.log_y {
            y0 = y0.min(0.0);
        }
        if panel.log_y {
            y1 = y1.ceil().max(1.0);
        }
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        let pad = ((y1 - y0) * 0.08).max(1e-9);
        let (y0, y1) = (if self.y_from_zero { y0 } else { y0 - pad }, y1 + pad);
        let xpad = (x1 - x0) * 0.03;
        let mut chart = ChartBuilder::on(area)
            .caption(&panel.subtitle, ("sans-serif", 20))
            .margin(14)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d((x0 - xpad)..(x1 + xpad), y0..y1)
            .map_err(err)?;
        let xs: Vec<f64> = {
            let mut v: Vec<f64> = points().map(|p| p.0).collect();
            v.sort_by(f64::total_cmp);
            v.dedup();
            v
        };
        let integral = xs.iter().all(|x| x.fract() == 0.0) && xs.len() <= 20;
        let mut mesh = chart.configure_mesh();
        if integral {
            // Vertical grid lines only at the measured x values would need custom ticks;
            // none is clearer than lines between them.
            mesh.disable_x_mesh();
        }
        mesh.x_desc(&self.x_label)
            .y_desc(&panel.y_label)
            .axis_desc_style(("sans-serif", 18))
            .label_style(("sans-serif", 15))
            .x_labels(if integral { xs.len().max(2) * 4 } else { 10 })
            .x_label_formatter(&|x| {
                if integral {
                    // Label only the measured x values (thread counts).
                    if xs.iter().any(|v| (v - x).abs() < 1e-6) {
                        format!("{x:.0}")
                    } else {
                        String::new()
                    }
                } else {
                    format!("{x}")
                }
            })
            .y_labels(if panel.log_y { (y1 - y0).ceil() as usize + 1 } else { 10 })
            .y_label_formatter(&|y| if panel.log_y { whole(10f64.powf(*y)) } else { short(*y) })
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(err)?;
        for (s, points) in panel.series.iter().zip(&series) {
            let i = names.iter().position(|n| *n == s.name).unwrap_or(0);
            let color = COLORS[i % COLORS.len()];
            chart
                .draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))
                .map_err(err)?;
            chart
                .draw_series(points.iter().map(|&(x, y)| Circle::new((x, y), 4, color.filled())))
                .map_err(err)?;
        }
        Ok(())
    }
}

/// A y-axis label: compact, without trailing noise.
fn short(y: f64) -> String {
    let a = y.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{:.0}M", y / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", y / 1e3)
    } else if a >= 100.0 {
        format!("{y:.0}")
    } else if a >= 10.0 {
        format!("{y:.1}")
    } else if a >= 0.1 {
        format!("{y:.2}")
    } else {
        format!("{y:.3}")
    }
}

/// A log-axis label: a whole number with a k or M suffix.
fn whole(y: f64) -> String {
    if y >= 1e6 {
        format!("{:.0}M", y / 1e6)
    } else if y >= 1e3 {
        format!("{:.0}k", y / 1e3)
    } else {
        format!("{y:.0}")
    }
}

fn err(e: impl std::fmt::Display) -> String {
    format!("cannot draw the chart: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_every_series_and_label() {
        let chart = Chart {
            title: "T".into(),
            x_label: "threads".into(),
            panels: vec![
                Panel {
                    subtitle: "left".into(),
                    y_label: "Mops/s".into(),
                    log_y: false,
                    series: vec![
                        Series { name: "alpha".into(), points: vec![(1.0, 1.0), (2.0, 4.0)] },
                        Series { name: "beta".into(), points: vec![(1.0, 0.0), (2.0, 0.0)] },
                    ],
                },
                Panel {
                    subtitle: "right".into(),
                    y_label: "share".into(),
                    log_y: true,
                    series: vec![],
                },
            ],
            y_from_zero: true,
        };
        let svg = chart.to_svg().unwrap();
        for word in ["alpha", "beta", "left", "right", "threads", "Mops/s"] {
            assert!(svg.contains(word), "{word} missing");
        }
    }
}
