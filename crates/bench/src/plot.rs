//! PNG charts with plotters (bitmap backend, no system fonts: text is drawn
//! with the DejaVu Sans font embedded by the `dejavu` crate):
//! throughput and p99 latency over time, or ops/s against thread count for
//! `sweep`.

use crate::report::RunReport;
use plotters::prelude::*;
use plotters::style::FontStyle;
use std::path::Path;
use std::sync::Once;

fn register_font() -> Result<(), String> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        result = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        )
        .map_err(|_| "the embedded font could not be loaded".to_string());
    });
    result
}

fn err<E: std::fmt::Display>(e: E) -> String {
    format!("plot: {e}")
}

fn nice_max(v: f64) -> f64 {
    if v <= 0.0 {
        1.0
    } else {
        v * 1.1
    }
}

/// Throughput (upper) and p99 latency (lower) over time, one line per run.
pub fn timeline(path: &Path, title: &str, runs: &[RunReport]) -> Result<(), String> {
    register_font()?;
    let root = BitMapBackend::new(path, (1000, 720)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, ("sans-serif", 22)).map_err(err)?;
    let (upper, lower) = root.split_vertically(340);
    let t_max = runs
        .iter()
        .flat_map(|r| r.timeline.iter().map(|p| p.t))
        .fold(1.0f64, f64::max);
    let ops_max = runs
        .iter()
        .flat_map(|r| r.timeline.iter().map(|p| p.ops_per_sec))
        .fold(0.0f64, f64::max);
    let p99_max = runs
        .iter()
        .flat_map(|r| r.timeline.iter().map(|p| p.p99_us / 1000.0))
        .fold(0.0f64, f64::max);
    for (area, what, y_max) in [
        (&upper, "throughput, ops/sec", nice_max(ops_max)),
        (&lower, "p99 latency, ms", nice_max(p99_max)),
    ] {
        let mut chart = ChartBuilder::on(area)
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(80)
            .build_cartesian_2d(0f64..t_max, 0f64..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc(what)
            .y_label_formatter(&|v| {
                if y_max >= 100.0 {
                    format!("{v:.0}")
                } else {
                    format!("{v:.2}")
                }
            })
            .label_style(("sans-serif", 13))
            .draw()
            .map_err(err)?;
        for (i, run) in runs.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let points: Vec<(f64, f64)> = run
                .timeline
                .iter()
                .map(|p| {
                    let y = if what.starts_with("throughput") {
                        p.ops_per_sec
                    } else {
                        p.p99_us / 1000.0
                    };
                    (p.t, y)
                })
                .collect();
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))
                .map_err(err)?
                .label(run.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .label_font(("sans-serif", 13))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

/// Ops/s against thread count (one point per sweep run).
pub fn sweep(path: &Path, title: &str, points: &[(usize, f64)]) -> Result<(), String> {
    register_font()?;
    let root = BitMapBackend::new(path, (1000, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let n = points.len().max(1);
    let y_max = nice_max(points.iter().map(|p| p.1).fold(0.0, f64::max));
    let labels: Vec<usize> = points.iter().map(|p| p.0).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(90)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..y_max)
        .map_err(err)?;
    let fmt_x = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 {
            labels
                .get(i as usize)
                .map(|t| t.to_string())
                .unwrap_or_default()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .x_labels(n)
        .x_label_formatter(&fmt_x)
        .x_desc("threads (connections)")
        .y_desc("ops/sec")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .label_style(("sans-serif", 13))
        .draw()
        .map_err(err)?;
    let color = Palette99::pick(0).to_rgba();
    let series: Vec<(f64, f64)> = points
        .iter()
        .enumerate()
        .map(|(i, p)| (i as f64, p.1))
        .collect();
    chart
        .draw_series(LineSeries::new(series.clone(), color.stroke_width(2)))
        .map_err(err)?;
    chart
        .draw_series(
            series
                .iter()
                .map(|&(x, y)| Circle::new((x, y), 4, color.filled())),
        )
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::TimePoint;

    fn run(name: &str) -> RunReport {
        RunReport {
            name: name.into(),
            duration_s: 3.0,
            ops_per_sec: 10.0,
            ops_total: 30,
            ops: vec![],
            errors: Default::default(),
            latency_us: vec![],
            per_second: vec![],
            timeline: (1..=3)
                .map(|t| TimePoint {
                    t: t as f64,
                    ops_per_sec: 1000.0 * t as f64,
                    p99_us: 250.0,
                })
                .collect(),
            params: serde_json::json!({}),
            first_error: None,
            samples: vec![],
        }
    }

    #[test]
    fn draws_png_files_without_system_fonts() {
        let dir = std::env::temp_dir().join(format!("kvasir-bench-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = dir.join("timeline.png");
        timeline(&a, "kv", &[run("kv"), run("other")]).unwrap();
        let b = dir.join("sweep.png");
        sweep(&b, "sweep GET", &[(1, 1000.0), (2, 1800.0), (4, 2500.0)]).unwrap();
        for p in [&a, &b] {
            let bytes = std::fs::read(p).unwrap();
            assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
            assert!(bytes.len() > 5000);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
