//! One PNG per experiment, drawn with `plotters` (bitmap backend, text in DejaVu Sans
//! embedded through the `dejavu` crate and rendered by `ab_glyph`, so no system fonts or C
//! libraries are needed). Tables of the paper become bars (one panel per unit, a bar per
//! system with a whisker from the smallest to the largest repetition); line figures become
//! lines against the cores doing the work, from the largest VM (`Lines`) or a point per VM
//! size (`Scaling`: the Corey figures, whose every boot uses all its cores). Values are
//! drawn on a log axis when they span more than a factor of 30.

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::records::{number, text, variant, Record};
use super::registry::{Experiment, Plot};
use super::report::{median, num};
use crate::Result;

/// Size of one PNG.
const SIZE: (u32, u32) = (1000, 560);
/// Bar colour per system.
const SYSTEMS: [(&str, RGBColor); 3] = [
    ("atoll", RGBColor(31, 119, 180)),
    ("linux", RGBColor(214, 39, 40)),
    ("host", RGBColor(44, 160, 44)),
];
/// Line colours, one per series value.
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Registers the embedded font once.
fn font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

/// Draws `e`'s plot from `records` into `path`; false if it has no records.
pub fn draw(e: &Experiment, records: &[Record], path: &Path) -> Result<bool> {
    let mine: Vec<&Record> = records
        .iter()
        .filter(|r| {
            if e.host {
                text(r, "system") == "host"
            } else {
                text(r, "experiment") == e.name && text(r, "system") != "host"
            }
        })
        .filter(|r| number(r, "value").is_some())
        // The plot shows the headline: Linux with mitigations off (the report's table has
        // the guest as booted too).
        .filter(|r| text(r, "mitigations") != "as-booted")
        .collect();
    if mine.is_empty() {
        return Ok(false);
    }
    font();
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    match e.plot {
        Plot::Bars => bars(&root, e.name, e.rows_by, &mine)?,
        Plot::Lines { series } => lines(&root, e.name, series, &mine, Points::LargestVm)?,
        Plot::Scaling { series, metric } => {
            let drawn: Vec<&Record> =
                mine.iter().copied().filter(|r| text(r, "metric") == metric).collect();
            lines(&root, e.name, series, &drawn, Points::EveryVm { metric })?
        }
    }
    root.present().map_err(|e| e.to_string())?;
    Ok(true)
}

/// A y axis: linear from 0, or log10 of the values when they span a wide range.
#[derive(Clone, Copy)]
struct Axis {
    log: bool,
    lo: f64,
    hi: f64,
}

impl Axis {
    fn new(values: impl Iterator<Item = f64>) -> Axis {
        let v: Vec<f64> = values.filter(|x| x.is_finite() && *x > 0.0).collect();
        let (min, max) = v.iter().fold((f64::MAX, 0f64), |(a, b), &x| (a.min(x), b.max(x)));
        if v.is_empty() {
            return Axis { log: false, lo: 0.0, hi: 1.0 };
        }
        if max / min > 30.0 {
            Axis { log: true, lo: (min / 2.0).log10().floor(), hi: (max * 2.0).log10().ceil() }
        } else {
            Axis { log: false, lo: 0.0, hi: max * 1.2 }
        }
    }
    fn to(&self, x: f64) -> f64 {
        if self.log {
            x.max(1e-9).log10()
        } else {
            x
        }
    }
    /// How many labels: one per power of ten on a log axis.
    fn labels(&self) -> usize {
        if self.log {
            (self.hi - self.lo) as usize + 1
        } else {
            10
        }
    }
    fn label(&self, y: f64) -> String {
        if !self.log {
            num(y)
        } else if (y - y.round()).abs() < 1e-9 {
            num(10f64.powf(y.round()))
        } else {
            String::new()
        }
    }
}

/// A metric without its unit suffix: `latency_cycles` → `latency`.
fn short(metric: &str) -> String {
    let cut = ["_msgs_per_kcycle", "_cycles", "_per_call"];
    cut.iter().find_map(|c| metric.strip_suffix(c)).unwrap_or(metric).to_string()
}

/// A variant part in few characters: `impl=pipe` → `pipe`, `active_cores=1` → `1 active`.
fn short_part(part: &str) -> String {
    match part.split_once('=') {
        Some(("active_cores", n)) => format!("{n} active"),
        Some(("pair", p)) => format!("pair {p}"),
        Some((_, v)) => v.to_string(),
        None => part.to_string(),
    }
}

/// A bar group: (metric, variant, VM cores).
type Category = (String, String, u64);

type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;

/// One panel per unit; per row (`rows_by`: the experiment's own row fields) and core count
/// a group of bars, one per system.
fn bars(root: &Area, name: &str, rows_by: &[&str], records: &[&Record]) -> Result {
    let (title, body) = root.split_vertically(40);
    let style = ("sans-serif", 22).into_font();
    title
        .titled(&format!("{name}: median, whiskers min–max over repetitions"), style)
        .map_err(|e| e.to_string())?;
    let groups = unit_groups(records, rows_by);
    let panels = side_by_side(body, &groups);
    for (panel, (unit, mine, cats)) in panels.iter().zip(&groups) {
        bar_panel(root, panel, unit, mine, cats, rows_by)?;
    }
    Ok(())
}

/// Per unit (in order of appearance), its records and its categories: (metric, variant,
/// cores), in order of appearance.
fn unit_groups<'r>(
    records: &[&'r Record],
    rows_by: &[&str],
) -> Vec<(&'r str, Vec<&'r Record>, Vec<Category>)> {
    let mut units: Vec<&str> = Vec::new();
    for r in records {
        if !units.contains(&text(r, "unit")) {
            units.push(text(r, "unit"));
        }
    }
    units
        .iter()
        .map(|unit| {
            let mine: Vec<&Record> =
                records.iter().copied().filter(|r| text(r, "unit") == *unit).collect();
            let mut cats = Vec::new();
            for r in &mine {
                let cores = number(r, "cores").unwrap_or(0.0) as u64;
                let key = (text(r, "metric").to_string(), variant(r, rows_by), cores);
                if !cats.contains(&key) {
                    cats.push(key);
                }
            }
            (*unit, mine, cats)
        })
        .collect()
}

/// `body` cut into panels side by side, one per group, as wide as its number of
/// categories.
fn side_by_side<'a, G>(mut body: Area<'a>, groups: &[(&str, G, Vec<Category>)]) -> Vec<Area<'a>> {
    let total: usize = groups.iter().map(|g| g.2.len() + 1).sum();
    let mut panels = Vec::new();
    for (i, group) in groups.iter().enumerate() {
        if i + 1 == groups.len() {
            panels.push(body.clone());
            break;
        }
        let width = SIZE.0 as usize * (group.2.len() + 1) / total;
        let (left, right) = body.split_horizontally(width as u32);
        panels.push(left);
        body = right;
    }
    panels
}

/// One unit's panel: per category a bar per system (the median) with a whisker (min to
/// max), the categories labelled under the axis.
fn bar_panel(
    root: &Area,
    panel: &Area,
    unit: &str,
    mine: &[&Record],
    cats: &[Category],
    rows_by: &[&str],
) -> Result {
    let systems: Vec<(&str, RGBColor)> = SYSTEMS
        .iter()
        .copied()
        .filter(|(s, _)| mine.iter().any(|r| text(r, "system") == *s))
        .collect();
    let axis = Axis::new(mine.iter().filter_map(|r| number(r, "value")));
    let mut chart = ChartBuilder::on(panel)
        .margin(8)
        .x_label_area_size(110)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..cats.len() as f64, axis.lo..axis.hi)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(unit.to_string())
        .y_labels(axis.labels())
        .y_label_formatter(&|y| axis.label(*y))
        .draw()
        .map_err(|e| e.to_string())?;
    let width = 0.8 / systems.len().max(1) as f64;
    for (s, (system, color)) in systems.iter().enumerate() {
        let mut boxes = Vec::new();
        for (c, key) in cats.iter().enumerate() {
            let values = category_values(mine, system, key, rows_by);
            let Some(mid) = median(&values) else { continue };
            let x0 = c as f64 + 0.1 + s as f64 * width;
            let base = if axis.log { axis.lo } else { 0.0 };
            boxes.push(Rectangle::new(
                [(x0, base), (x0 + width * 0.9, axis.to(mid))],
                color.filled(),
            ));
            let (lo, hi) =
                values.iter().fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
            let xm = x0 + width * 0.45;
            boxes.push(Rectangle::new(
                [(xm, axis.to(lo)), (xm, axis.to(hi))],
                BLACK.stroke_width(2),
            ));
        }
        chart
            .draw_series(boxes)
            .map_err(|e| e.to_string())?
            .label(system.to_string())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    }
    // Category labels under the axis: where each category's middle is on the image.
    let at: Vec<(i32, i32)> =
        (0..cats.len()).map(|c| chart.backend_coord(&(c as f64 + 0.5, axis.lo))).collect();
    label_categories(root, cats, &at)?;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// The values of `system`'s records in category `key`.
fn category_values(mine: &[&Record], system: &str, key: &Category, rows_by: &[&str]) -> Vec<f64> {
    mine.iter()
        .filter(|r| {
            text(r, "system") == system
                && text(r, "metric") == key.0
                && variant(r, rows_by) == key.1
        })
        .filter(|r| number(r, "cores").unwrap_or(0.0) as u64 == key.2)
        .filter_map(|r| number(r, "value"))
        .collect()
}

/// Each category's label, one short line per part, under its point `at` (the image's
/// coordinates, so drawn on the root).
fn label_categories(root: &Area, cats: &[Category], at: &[(i32, i32)]) -> Result {
    for ((metric, variant, cores), &(px, py)) in cats.iter().zip(at) {
        let mut parts = vec![short(metric)];
        parts.extend(variant.split(' ').filter(|p| !p.is_empty()).map(short_part));
        parts.push(format!("{cores} cores"));
        let style =
            TextStyle::from(("sans-serif", 11).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
        for (i, part) in parts.iter().enumerate() {
            root.draw_text(part, &style, (px, py + 6 + 13 * i as i32))
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Which records a line plot draws.
#[derive(Clone, Copy, Debug)]
enum Points<'a> {
    /// Each system's largest VM, whose records span the active cores (a figure measured in
    /// one boot).
    LargestVm,
    /// Every VM, one point each (`metric`'s records only): each boot used all its cores.
    EveryVm { metric: &'a str },
}

/// Value against active cores, a line per series value and system.
fn lines(root: &Area, name: &str, series: &str, records: &[&Record], points: Points) -> Result {
    let (mine, caption) = line_records(name, records, points);
    let axis = Axis::new(mine.iter().filter_map(|r| number(r, "value")));
    let max_x = mine.iter().map(|r| x_of(r)).fold(1f64, f64::max);
    let unit = mine.first().map(|r| text(r, "unit")).unwrap_or("");
    let mut chart = ChartBuilder::on(root)
        .caption(caption, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.5f64..max_x + 0.5, axis.lo..axis.hi)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("cores doing the work")
        .y_desc(unit.to_string())
        .y_labels(axis.labels())
        .x_labels(max_x as usize + 1)
        .x_label_formatter(&|x| if x.fract() == 0.0 { num(*x) } else { String::new() })
        .y_label_formatter(&|y| axis.label(*y))
        .draw()
        .map_err(|e| e.to_string())?;
    // A record with an `impl` (the kernel's own multicast) draws a line of its own.
    let line_of = |r: &Record| match text(r, "impl") {
        "" => text(r, series).to_string(),
        how => format!("{} ({how})", text(r, series)),
    };
    let mut names: Vec<String> = Vec::new();
    for r in &mine {
        let n = line_of(r);
        if !names.contains(&n) {
            names.push(n);
        }
    }
    for (i, n) in names.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        for system in ["atoll", "linux"] {
            let of_line: Vec<&Record> = mine
                .iter()
                .copied()
                .filter(|r| text(r, "system") == system && line_of(r) == *n)
                .collect();
            let points = line_points(&of_line, &axis);
            if points.is_empty() {
                continue;
            }
            let width = if system == "atoll" { 3 } else { 1 };
            let style = color.stroke_width(width);
            chart
                .draw_series(LineSeries::new(points.clone(), style))
                .map_err(|e| e.to_string())?
                .label(format!("{system} {n}"))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(width))
                });
            if system == "atoll" {
                chart
                    .draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))
                    .map_err(|e| e.to_string())?;
            } else {
                chart
                    .draw_series(points.iter().map(|&p| TriangleMarker::new(p, 5, color.filled())))
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Where a record sits on a line plot's x axis: its active cores, or its VM's cores.
fn x_of(r: &Record) -> f64 {
    number(r, "active_cores").or_else(|| number(r, "cores")).unwrap_or(0.0)
}

/// The records a line plot draws (as `points` says), and its caption.
fn line_records<'r>(
    name: &str,
    records: &[&'r Record],
    points: Points,
) -> (Vec<&'r Record>, String) {
    let largest = |system: &str| {
        records
            .iter()
            .filter(|r| text(r, "system") == system)
            .filter_map(|r| number(r, "cores"))
            .fold(0f64, f64::max)
    };
    match points {
        Points::LargestVm => (
            records
                .iter()
                .copied()
                .filter(|r| number(r, "cores") == Some(largest(text(r, "system"))))
                .collect(),
            format!("{name}: median over repetitions, largest VM"),
        ),
        Points::EveryVm { metric } => (
            records.to_vec(),
            format!("{name}: {metric}, median over repetitions, a point per VM size"),
        ),
    }
}

/// One line's points: per x (in order), the median of its records' values there.
fn line_points(of_line: &[&Record], axis: &Axis) -> Vec<(f64, f64)> {
    let mut xs: Vec<f64> = Vec::new();
    for r in of_line {
        if !xs.contains(&x_of(r)) {
            xs.push(x_of(r));
        }
    }
    xs.sort_by(f64::total_cmp);
    xs.iter()
        .filter_map(|&x| {
            let values: Vec<f64> = of_line
                .iter()
                .filter(|r| x_of(r) == x)
                .filter_map(|r| number(r, "value"))
                .collect();
            median(&values).map(|m| (x, axis.to(m)))
        })
        .collect()
}
