//! `bench --plot`, `--plot-data` and `bench plot`: every claim's time to Bound against the time
//! its creation was requested, as an SVG scatter chart, one colour per run.
//!
//! The chart is drawn with `plotters`' SVG backend and no font library: an SVG names its font
//! family (`sans-serif`) and the viewer draws the text, so nothing here reads a font file.
//! Text widths are estimated from the number of characters, which is all the layout needs.

use super::*;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;
use serde::Deserialize;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Width and height of the chart, pixels.
const SIZE: (u32, u32) = (1000, 620);

/// Colours of the series, in order (Okabe and Ito's palette, readable with colour blindness);
/// a chart with more series than colours uses them again.
const COLOURS: [RGBColor; 7] = [
    RGBColor(0x00, 0x72, 0xB2),
    RGBColor(0xD5, 0x5E, 0x00),
    RGBColor(0x00, 0x9E, 0x73),
    RGBColor(0xCC, 0x79, 0xA7),
    RGBColor(0xE6, 0x9F, 0x00),
    RGBColor(0x56, 0xB4, 0xE9),
    RGBColor(0x00, 0x00, 0x00),
];

/// Radius of a point's marker, pixels.
const MARKER_RADIUS: i32 = 2;

/// Margin around the chart, pixels.
const MARGIN: u32 = 16;
/// Height of the area under the x axis (tick labels and the axis title), pixels.
const X_LABEL_AREA: u32 = 52;
/// Height of the title, pixels (its font size, plus space).
const CAPTION: u32 = 34;
/// Height of one legend entry, and of the legend box's padding, pixels (as plotters draws a
/// 15 px label font).
const LEGEND_ROW: u32 = 20;
const LEGEND_PAD: u32 = 28;

/// Arguments of `bench plot`.
#[derive(Args, Debug)]
pub struct PlotArgs {
    /// Files written by `bench --plot-data`, one series each; the order gives the colours and
    /// the legend's order.
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// The SVG file to write.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Title of the chart (default: "Time to Bound per claim", with the workload when every
    /// file has the same).
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,
    /// Time to Bound on a logarithmic scale (for runs that differ by orders of magnitude).
    #[arg(long)]
    pub log_y: bool,
}

/// Subcommands of `bench`.
#[derive(clap::Subcommand, Debug)]
pub enum BenchCommand {
    /// Draw the points of several runs (`bench --plot-data FILE`) on one SVG chart, one colour
    /// per run, e.g. `bench plot --out chart.svg upstream.json ours.json`.
    Plot(PlotArgs),
}

/// One claim seen Bound.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Point {
    /// When its creation was requested (for a pair, the later of its two create requests),
    /// seconds since the run's start. In `--simulate` every claim exists at the start: 0.
    pub created_seconds: f64,
    /// Its time to Bound, seconds.
    pub seconds_to_bound: f64,
}

/// The points of one run: what `bench --plot-data` writes and `bench plot` reads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Series {
    /// The run's name in the legend.
    pub label: String,
    /// What the run created, e.g. `1000 static PV/PVC pairs`.
    #[serde(default)]
    pub workload: String,
    /// Claims created.
    pub n: usize,
    /// One per claim seen Bound, in creation order.
    pub points: Vec<Point>,
}

impl Series {
    /// The series of a run's report.
    pub fn from_report(label: String, workload: String, r: &Report) -> Self {
        let points = r
            .claims
            .iter()
            .map(|c| Point { created_seconds: c.created.as_secs_f64(), seconds_to_bound: c.to_bound.as_secs_f64() })
            .collect();
        Series { label, workload, n: r.n, points }
    }

    /// The legend's text: the label, and how many claims never became Bound if any.
    fn legend(&self) -> String {
        match self.n.saturating_sub(self.points.len()) {
            0 => self.label.clone(),
            k => format!("{} ({k} of {} not bound)", self.label, self.n),
        }
    }
}

/// What can go wrong reading points or writing a chart.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A file is not a series of points: which field, and why.
    #[error("{path}: {field}{message}")]
    Invalid {
        /// The file.
        path: String,
        /// The field (`points[3].secondsToBound: `), or nothing when the file as a whole is wrong.
        field: String,
        /// Why.
        message: String,
    },
    /// A file could not be written.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The chart could not be drawn.
    #[error("drawing the chart: {0}")]
    Draw(String),
}

/// Reads a file written by `bench --plot-data`, checking every point.
pub fn read_series(path: &Path) -> Result<Series, PlotError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| PlotError::Read { path: shown.clone(), source })?;
    let invalid = |field: String, message: String| PlotError::Invalid { path: shown.clone(), field, message };
    let mut de = serde_json::Deserializer::from_str(&text);
    let s: Series = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = e.path().to_string();
        let field = if field == "." { String::new() } else { format!("{field}: ") };
        invalid(field, e.into_inner().to_string())
    })?;
    de.end().map_err(|e| invalid(String::new(), e.to_string()))?;
    if s.label.trim().is_empty() {
        return Err(invalid("label: ".into(), "empty: the legend needs a name for the run".into()));
    }
    for (i, p) in s.points.iter().enumerate() {
        for (name, v) in [("createdSeconds", p.created_seconds), ("secondsToBound", p.seconds_to_bound)] {
            if v < 0.0 {
                return Err(invalid(format!("points[{i}].{name}: "), format!("{v} is negative")));
            }
        }
    }
    if s.points.len() > s.n {
        return Err(invalid("n: ".into(), format!("{} claims, fewer than the {} points", s.n, s.points.len())));
    }
    Ok(s)
}

/// Writes `text` to `path`.
pub fn write_file(path: &Path, text: &str) -> Result<(), PlotError> {
    std::fs::write(path, text).map_err(|source| PlotError::Write { path: path.display().to_string(), source })
}

/// The default title: the workload when every series has the same one.
pub fn default_title(series: &[Series]) -> String {
    let first = series.first().map(|s| s.workload.as_str()).unwrap_or_default();
    if !first.is_empty() && series.iter().all(|s| s.workload == first) {
        format!("Time to Bound per claim: {first}")
    } else {
        "Time to Bound per claim".into()
    }
}

/// Axis label text for a number of seconds: about three significant digits, no trailing zeros.
fn seconds(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return "0".into();
    }
    let decimals = (2 - v.abs().log10().floor() as i32).clamp(0, 6) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// `lo..hi` widened by 3 % of its span on each side (so that no marker sits on the frame), and
/// made at least `min_span` wide.
fn padded(lo: f64, hi: f64, min_span: f64) -> Range<f64> {
    let span = (hi - lo).max(min_span);
    lo - span * 0.03..lo + span * 1.03
}

/// The share of the plotting area's height that the legend of `series` series takes at its
/// top: the time axis goes that much higher than the slowest claim, so that the legend covers
/// no point.
fn legend_share(series: usize) -> f64 {
    let plot_height = SIZE.1.saturating_sub(2 * MARGIN + CAPTION + X_LABEL_AREA).max(1);
    (f64::from(LEGEND_ROW * series as u32 + LEGEND_PAD) / f64::from(plot_height)).min(0.6)
}

/// The top of an axis from `lo` whose values reach `hi`, leaving the top `share` of it empty.
fn with_headroom(lo: f64, hi: f64, share: f64) -> f64 {
    (hi - share * lo) / (1.0 - share)
}

/// Draws the series as an SVG scatter chart: time to Bound (y, seconds; logarithmic with
/// `log_y`) against creation time (x, seconds since the run's start), one colour per series,
/// with a legend. Each point is one `<circle>`, as is each legend entry's marker.
pub fn render_svg(series: &[Series], title: &str, log_y: bool) -> Result<String, PlotError> {
    let all = || series.iter().flat_map(|s| s.points.iter());
    let x_max = all().map(|p| p.created_seconds).fold(0.0, f64::max);
    let y_max = all().map(|p| p.seconds_to_bound).fold(0.0, f64::max);
    // With --simulate every claim is created at 0: the axis is then a second wide.
    let x = padded(0.0, x_max, if x_max > 0.0 { 1e-3 } else { 1.0 });
    let share = legend_share(series.len());
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| PlotError::Draw(e.to_string()))?;
        if log_y {
            // A logarithmic axis has no 0: it starts a little below the power of ten below the
            // smallest positive time (so that the lowest points have a labelled tick under
            // them), and a time of 0 is drawn there.
            let y_min = all().map(|p| p.seconds_to_bound).filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
            let y_min = if y_min.is_finite() { 10f64.powf((y_min / 1.2).log10().floor()) / 1.25 } else { 1e-3 };
            let top = with_headroom(y_min.ln(), (y_max * 1.15).max(y_min * 10.0).ln(), share).exp();
            draw(&root, series, title, x, (y_min..top).log_scale(), "time to Bound (s, logarithmic scale)", y_min)?;
        } else {
            let y = padded(0.0, y_max, 1e-3);
            let y = y.start..with_headroom(y.start, y.end, share);
            draw(&root, series, title, x, y, "time to Bound (s)", f64::NEG_INFINITY)?;
        }
        root.present().map_err(|e| PlotError::Draw(e.to_string()))?;
    }
    Ok(svg)
}

/// The chart on `root`, with `y` as the time axis; times below `y_floor` are drawn at it.
fn draw<Y>(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    series: &[Series],
    title: &str,
    x: Range<f64>,
    y: Y,
    y_desc: &str,
    y_floor: f64,
) -> Result<(), PlotError>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let err = |e: DrawingAreaErrorKind<std::io::Error>| PlotError::Draw(e.to_string());
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 22))
        .margin(MARGIN)
        .x_label_area_size(X_LABEL_AREA)
        .y_label_area_size(72)
        .build_cartesian_2d(x, y)
        .map_err(err)?;
    let fmt = |v: &f64| seconds(*v);
    chart
        .configure_mesh()
        .x_desc("claim created (s since the start of the run)")
        .y_desc(y_desc)
        .x_label_formatter(&fmt)
        .y_label_formatter(&fmt)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .light_line_style(RGBColor(0xEE, 0xEE, 0xEE))
        .bold_line_style(RGBColor(0xCC, 0xCC, 0xCC))
        .draw()
        .map_err(err)?;
    for (i, s) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let markers = s.points.iter().map(move |p| {
            Circle::new((p.created_seconds, p.seconds_to_bound.max(y_floor)), MARKER_RADIUS, colour.mix(0.6).filled())
        });
        chart
            .draw_series(markers)
            .map_err(err)?
            .label(s.legend())
            .legend(move |(lx, ly)| Circle::new((lx + 8, ly), 5, colour.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(0x99, 0x99, 0x99))
        .draw()
        .map_err(err)?;
    Ok(())
}

/// Runs `bench plot`: reads every file, then writes the chart.
pub fn run_plot(a: PlotArgs) -> anyhow::Result<ExitCode> {
    let series = a.files.iter().map(|f| read_series(f)).collect::<Result<Vec<_>, _>>().map_err(plot_error)?;
    let title = a.title.clone().unwrap_or_else(|| default_title(&series));
    let svg = render_svg(&series, &title, a.log_y).map_err(plot_error)?;
    write_file(&a.out, &svg).map_err(plot_error)?;
    eprintln!(
        "wrote {}: {} runs, {} points",
        a.out.display(),
        series.len(),
        series.iter().map(|s| s.points.len()).sum::<usize>()
    );
    Ok(ExitCode::SUCCESS)
}

/// A plot error as the command reports it: bad input and unwritable files are the user's to
/// fix; a chart that cannot be drawn is a bug.
pub fn plot_error(e: PlotError) -> anyhow::Error {
    match e {
        PlotError::Draw(_) => anyhow::Error::new(e),
        e => user(e.to_string()),
    }
}

/// Fails before a run when `path` cannot be written for a lack of its directory (`flag` names
/// the option): a run of many minutes should not end with no chart for a typo.
pub fn check_writable(flag: &str, path: &Path) -> Result<(), String> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if path.is_dir() {
        return Err(format!("{flag} {}: is a directory; give a file name", path.display()));
    }
    if !dir.is_dir() {
        return Err(format!("{flag} {}: no directory {}", path.display(), dir.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(label: &str, points: &[(f64, f64)], n: usize) -> Series {
        Series {
            label: label.into(),
            workload: "3 static PV/PVC pairs".into(),
            n,
            points: points.iter().map(|&(c, b)| Point { created_seconds: c, seconds_to_bound: b }).collect(),
        }
    }

    /// `<circle` elements filled with `colour`.
    fn circles(svg: &str, colour: RGBColor) -> usize {
        let fill = format!("fill=\"#{:02X}{:02X}{:02X}\"", colour.0, colour.1, colour.2);
        svg.split("<circle").skip(1).filter(|c| c[..c.find("/>").unwrap_or(c.len())].contains(&fill)).count()
    }

    /// The text of every `<text>` element, unescaped as far as the tests need.
    fn texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| Some(t[t.find('>')? + 1..t.find("</text>")?].trim().replace("&apos;", "'")))
            .collect()
    }

    #[test]
    fn one_marker_per_point_per_series_and_a_legend() {
        let up = series("upstream", &[(0.0, 4.5), (0.5, 9.0), (1.0, 12.25)], 3);
        let ours = series("ours", &[(0.0, 0.1), (0.5, 0.2)], 3);
        for log_y in [false, true] {
            let svg = render_svg(&[up.clone(), ours.clone()], "Time to Bound per claim: 3 pairs", log_y).unwrap();
            assert!(svg.starts_with("<svg"), "{svg}");
            // One per point, and one more for the series' entry in the legend.
            assert_eq!(circles(&svg, COLOURS[0]), 3 + 1, "{svg}");
            assert_eq!(circles(&svg, COLOURS[1]), 2 + 1, "{svg}");
            assert_eq!(svg.matches("<circle").count(), 3 + 2 + 2, "no other circle");
            let texts = texts(&svg);
            for text in [
                "Time to Bound per claim: 3 pairs",
                "upstream",
                "ours (1 of 3 not bound)",
                "claim created (s since the start of the run)",
                if log_y { "time to Bound (s, logarithmic scale)" } else { "time to Bound (s)" },
            ] {
                assert!(texts.iter().any(|t| t == text), "{text:?} not among {texts:?}");
            }
        }
    }

    #[test]
    fn axes_are_labelled_in_seconds() {
        let svg = render_svg(&[series("ours", &[(0.0, 1.0), (10.0, 20.0)], 2)], "t", false).unwrap();
        // Tick labels: numbers of seconds along both axes.
        let texts = texts(&svg);
        for tick in ["0", "10", "20"] {
            assert!(texts.iter().any(|t| t == tick), "{tick} not among {texts:?}");
        }
        // On a logarithmic scale, the powers of ten from below the fastest claim.
        let svg = render_svg(&[series("ours", &[(0.0, 0.13), (0.05, 12.0)], 2)], "t", true).unwrap();
        let texts = super::tests::texts(&svg);
        for tick in ["0.1", "1", "10"] {
            assert!(texts.iter().any(|t| t == tick), "{tick} not among {texts:?}");
        }
        assert!(texts.iter().any(|t| t == "0.05"), "x ticks within a short run: {texts:?}");
        assert_eq!(seconds(0.05), "0.05");
        assert_eq!(seconds(2.5), "2.5");
        assert_eq!(seconds(150.0), "150");
        assert_eq!(seconds(0.001), "0.001");
        assert_eq!(seconds(1.0), "1");
    }

    #[test]
    fn empty_and_degenerate_series_still_draw() {
        // No claim bound; every claim created at 0 (--simulate); one point.
        let none = series("nothing bound", &[], 5);
        let simulated = series("simulated", &[(0.0, 0.5), (0.0, 0.7)], 2);
        for log_y in [false, true] {
            let svg = render_svg(&[none.clone(), simulated.clone()], "t", log_y).unwrap();
            assert_eq!(circles(&svg, COLOURS[0]), 1, "the legend's only");
            assert_eq!(circles(&svg, COLOURS[1]), 3);
            assert!(texts(&svg).iter().any(|t| t == "nothing bound (5 of 5 not bound)"), "{svg}");
        }
        let svg = render_svg(&[series("zero", &[(0.0, 0.0)], 1)], "t", true).unwrap();
        assert_eq!(circles(&svg, COLOURS[0]), 2);
    }

    #[test]
    fn the_legend_covers_no_point() {
        // The legend's share of the height stays empty above the slowest claim.
        let share = legend_share(3);
        assert!(share > 0.05 && share < 0.3, "{share}");
        let top = with_headroom(-1.0, 100.0, share);
        assert!(((top - 100.0) / (top + 1.0) - share).abs() < 1e-9);
        assert_eq!(legend_share(1000), 0.6);
    }

    #[test]
    fn colours_differ_between_series() {
        let many: Vec<Series> = (0..COLOURS.len()).map(|i| series(&format!("run {i}"), &[(0.0, 1.0)], 1)).collect();
        let svg = render_svg(&many, "t", false).unwrap();
        for c in COLOURS {
            assert_eq!(circles(&svg, c), 2, "{c:?}");
        }
    }

    #[test]
    fn series_files_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ours.json");
        let s = series("ours", &[(0.0, 0.25), (0.125, 0.5)], 2);
        write_file(&path, &serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(read_series(&path).unwrap(), s);
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["points"][1]["createdSeconds"], 0.125);
        assert_eq!(v["points"][1]["secondsToBound"], 0.5);
    }

    #[test]
    fn bad_files_name_the_file_and_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let err = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            let e = read_series(&path).unwrap_err().to_string();
            assert!(e.starts_with(&path.display().to_string()), "{e}");
            e
        };
        let e = err("nopoints.json", r#"{"label": "ours", "n": 3}"#);
        assert!(e.contains("missing field `points`"), "{e}");
        let e =
            err("type.json", r#"{"label": "ours", "n": 1, "points": [{"createdSeconds": 0, "secondsToBound": "1s"}]}"#);
        assert!(e.contains(": points[0].secondsToBound: invalid type"), "{e}");
        let e = err(
            "neg.json",
            r#"{"label": "ours", "n": 2, "points": [{"createdSeconds": 0, "secondsToBound": 1}, {"createdSeconds": -1, "secondsToBound": 1}]}"#,
        );
        assert!(e.contains(": points[1].createdSeconds: -1 is negative"), "{e}");
        let e = err("n.json", r#"{"label": "ours", "n": 0, "points": [{"createdSeconds": 0, "secondsToBound": 1}]}"#);
        assert!(e.contains(": n: 0 claims, fewer than the 1 points"), "{e}");
        let e = err("label.json", r#"{"label": " ", "n": 0, "points": []}"#);
        assert!(e.contains(": label: empty"), "{e}");
        let e = err("notjson.json", "points");
        assert!(e.contains("expected"), "{e}");
        let missing = dir.path().join("absent.json");
        assert!(read_series(&missing).unwrap_err().to_string().starts_with(&missing.display().to_string()));
    }

    #[test]
    fn outputs_are_checked_before_a_run() {
        let dir = tempfile::tempdir().unwrap();
        assert!(check_writable("--plot", &dir.path().join("a.svg")).is_ok());
        assert!(check_writable("--plot", Path::new("a.svg")).is_ok());
        let e = check_writable("--plot", &dir.path().join("nodir/a.svg")).unwrap_err();
        assert!(e.starts_with("--plot ") && e.contains("no directory"), "{e}");
        assert!(check_writable("--plot-data", dir.path()).unwrap_err().contains("is a directory"));
    }

    #[test]
    fn title_names_a_shared_workload() {
        let a = series("a", &[], 1);
        let mut b = series("b", &[], 1);
        assert_eq!(default_title(&[a.clone(), b.clone()]), "Time to Bound per claim: 3 static PV/PVC pairs");
        b.workload = "3 claims of class x".into();
        assert_eq!(default_title(&[a, b]), "Time to Bound per claim");
    }
}
