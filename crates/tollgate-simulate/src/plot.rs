//! Pictures of runs, drawn with `plotters`: one panel per policy, stacked
//! on one time axis; in each, the requests allowed (green) and refused
//! (red) per step as stacked bars, and the remaining budget (blue line,
//! right axis). SVG as text, PNG to a file. The text is DejaVu Sans, which
//! the binary carries (the `dejavu` crate), so no system font is needed.

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

use crate::run::Bucket;

/// One panel: a title over its steps.
#[derive(Clone, Copy, Debug)]
pub struct Panel<'a> {
    /// Its title (a policy's name and what it did).
    pub title: &'a str,
    /// Its steps.
    pub buckets: &'a [Bucket],
    /// Whether to draw the remaining budget.
    pub remaining: bool,
}

/// What the axes count: the time axis's unit (in milliseconds) and name,
/// and the requests axis's name.
#[derive(Clone, Copy, Debug)]
pub struct Axes<'a> {
    /// Milliseconds in one unit of the time axis.
    pub unit_ms: u64,
    /// The time axis's name.
    pub time: &'a str,
    /// The requests axis's name.
    pub requests: &'a str,
}

impl Axes<'_> {
    /// Seconds from the start, requests per step: a simulation's.
    pub const SECONDS: Axes<'static> = Axes {
        unit_ms: 1000,
        time: "seconds",
        requests: "requests per step",
    };
}

/// A picture that could not be drawn or written.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw the picture: {0}")]
pub struct PlotError(String);

/// The size of a picture: 1000 pixels wide, 260 per panel and 50 for the
/// title.
fn size(panels: usize) -> (u32, u32) {
    let panels = u32::try_from(panels.max(1)).unwrap_or(u32::MAX);
    (1000, 50u32.saturating_add(panels.saturating_mul(260)))
}

/// `panels` under `title`, as an SVG document; `step_ms` is each step's
/// length.
///
/// # Errors
///
/// [`PlotError`] when plotters fails.
pub fn svg(title: &str, panels: &[Panel<'_>], step_ms: u64) -> Result<String, PlotError> {
    svg_on(title, panels, step_ms, Axes::SECONDS)
}

/// [`svg`] with `axes` of its own (a replay's minutes, say).
///
/// # Errors
///
/// [`PlotError`] when plotters fails.
pub fn svg_on(
    title: &str,
    panels: &[Panel<'_>],
    step_ms: u64,
    axes: Axes<'_>,
) -> Result<String, PlotError> {
    fonts()?;
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, size(panels.len())).into_drawing_area();
        draw(&root, title, panels, step_ms, axes)?;
        root.present()
            .map_err(|error| PlotError(error.to_string()))?;
    }
    Ok(text)
}

/// `panels` under `title`, written as a PNG to `path`.
///
/// # Errors
///
/// [`PlotError`] when plotters fails or the file cannot be written.
pub fn png(title: &str, panels: &[Panel<'_>], step_ms: u64, path: &Path) -> Result<(), PlotError> {
    png_on(title, panels, step_ms, path, Axes::SECONDS)
}

/// [`png`] with `axes` of its own.
///
/// # Errors
///
/// [`PlotError`] when plotters fails or the file cannot be written.
pub fn png_on(
    title: &str,
    panels: &[Panel<'_>],
    step_ms: u64,
    path: &Path,
    axes: Axes<'_>,
) -> Result<(), PlotError> {
    fonts()?;
    let root = BitMapBackend::new(path, size(panels.len())).into_drawing_area();
    draw(&root, title, panels, step_ms, axes)?;
    root.present().map_err(|error| PlotError(error.to_string()))
}

/// Registers DejaVu Sans as plotters' `sans-serif`, once.
fn fonts() -> Result<(), PlotError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let registered = *REGISTERED.get_or_init(|| {
        register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular()).is_ok()
    });
    if registered {
        Ok(())
    } else {
        Err(PlotError("the embedded font could not be read".into()))
    }
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    panels: &[Panel<'_>],
    step_ms: u64,
    axes: Axes<'_>,
) -> Result<(), PlotError> {
    let failed = |error: DrawingAreaErrorKind<DB::ErrorType>| PlotError(error.to_string());
    root.fill(&WHITE).map_err(failed)?;
    let root = root.titled(title, ("sans-serif", 22)).map_err(failed)?;
    let areas = root.split_evenly((panels.len().max(1), 1));
    let seconds = |ms: u64| ms as f64 / axes.unit_ms.max(1) as f64;
    let end = panels
        .iter()
        .filter_map(|panel| panel.buckets.last())
        .map(|bucket| seconds(bucket.start_ms + step_ms))
        .fold(1.0_f64, f64::max);
    for (area, panel) in areas.iter().zip(panels) {
        let most = panel
            .buckets
            .iter()
            .map(|bucket| bucket.allowed + bucket.refused)
            .max()
            .unwrap_or(0)
            .max(1) as f64;
        let most_remaining = panel
            .buckets
            .iter()
            .map(|bucket| bucket.remaining)
            .max()
            .unwrap_or(0)
            .max(1) as f64;
        let mut chart = ChartBuilder::on(area)
            .caption(panel.title, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(32)
            .y_label_area_size(56)
            .right_y_label_area_size(if panel.remaining { 56 } else { 0 })
            .build_cartesian_2d(0.0..end, 0.0..most * 1.15)
            .map_err(failed)?
            .set_secondary_coord(0.0..end, 0.0..most_remaining * 1.15);
        chart
            .configure_mesh()
            .x_desc(axes.time)
            .y_desc(axes.requests)
            .x_label_formatter(&|seconds| format_number(*seconds))
            .y_label_formatter(&|count| format_number(*count))
            .light_line_style(WHITE)
            .draw()
            .map_err(failed)?;
        let span = |bucket: &Bucket| (seconds(bucket.start_ms), seconds(bucket.start_ms + step_ms));
        let allowed_color = RGBColor(46, 160, 67);
        let refused_color = RGBColor(214, 39, 40);
        chart
            .draw_series(panel.buckets.iter().map(|bucket| {
                let (from, to) = span(bucket);
                Rectangle::new(
                    [(from, 0.0), (to, bucket.allowed as f64)],
                    allowed_color.filled(),
                )
            }))
            .map_err(failed)?
            .label("allowed")
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 12, y + 5)], allowed_color.filled())
            });
        chart
            .draw_series(panel.buckets.iter().map(|bucket| {
                let (from, to) = span(bucket);
                let allowed = bucket.allowed as f64;
                Rectangle::new(
                    [(from, allowed), (to, allowed + bucket.refused as f64)],
                    refused_color.filled(),
                )
            }))
            .map_err(failed)?
            .label("refused")
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 12, y + 5)], refused_color.filled())
            });
        if panel.remaining {
            chart
                .configure_secondary_axes()
                .y_desc("remaining")
                .y_label_formatter(&|count| format_number(*count))
                .draw()
                .map_err(failed)?;
            let blue = RGBColor(31, 119, 180);
            chart
                .draw_secondary_series(LineSeries::new(
                    panel
                        .buckets
                        .iter()
                        .map(|bucket| (span(bucket).1, bucket.remaining as f64)),
                    blue.stroke_width(2),
                ))
                .map_err(failed)?
                .label("remaining")
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 12, y)], blue.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(failed)?;
    }
    Ok(())
}

/// An axis label: whole numbers without a fraction, others with one digit.
fn format_number(value: f64) -> String {
    if (value - value.round()).abs() < 1e-9 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}
