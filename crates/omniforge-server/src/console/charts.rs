//! Charts of the last 24 hours, drawn on the server as inline SVG (no script, no chart library):
//! calls per hour (errors stacked on top) and p50/p99 duration per hour. Colours come from the
//! stylesheet (classes), never from style attributes, so the CSP needs no 'unsafe-inline'. Each
//! chart has a text alternative and its numbers in a table.

use maud::{Markup, html};

use crate::console::widgets::{duration, scroll_table, utc};
use omniforge_store::HourStats;

/// One hour of a chart: its start and, when it had calls, their numbers.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Hour {
    start_ms: i64,
    calls: u64,
    errors: u64,
    p50_ms: Option<u64>,
    p99_ms: Option<u64>,
}

const HOUR_MS: i64 = 3_600_000;

/// The 24 hours ending with the one holding `now_ms`, filled from the hourly statistics
/// (hours without calls are empty).
pub(crate) fn last_day(now_ms: i64, stats: &[HourStats]) -> Vec<Hour> {
    let first = (now_ms.div_euclid(HOUR_MS) - 23) * HOUR_MS;
    (0..24)
        .map(|i| {
            let start_ms = first + i * HOUR_MS;
            match stats.iter().find(|s| s.hour_start_ms == start_ms) {
                Some(s) if s.calls > 0 => Hour {
                    start_ms,
                    calls: s.calls,
                    errors: s.errors.min(s.calls),
                    p50_ms: Some(s.p50_ms),
                    p99_ms: Some(s.p99_ms),
                },
                _ => Hour {
                    start_ms,
                    ..Hour::default()
                },
            }
        })
        .collect()
}

const W: f64 = 720.0;
const H: f64 = 190.0;
const LEFT: f64 = 52.0;
const RIGHT: f64 = 10.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 26.0;

/// The top of a chart's scale: four equal steps, each a "nice" number (1, 2, 2.5 or 5 × 10^n;
/// whole numbers only for counts), so every grid line has a round label.
fn scale_max(peak: f64, whole: bool) -> f64 {
    let quarter = (peak / 4.0).max(if whole { 1.0 } else { 0.001 });
    let p = 10f64.powf(quarter.log10().floor());
    let steps: &[f64] = if whole && p < 10.0 {
        &[1.0, 2.0, 5.0, 10.0]
    } else {
        &[1.0, 2.0, 2.5, 5.0, 10.0]
    };
    4.0 * steps
        .iter()
        .map(|m| m * p)
        .find(|c| *c >= quarter)
        .unwrap_or(10.0 * p)
}

fn x_of(i: usize) -> f64 {
    LEFT + (W - LEFT - RIGHT) * (i as f64 + 0.5) / 24.0
}

fn y_of(v: f64, max: f64) -> f64 {
    H - BOTTOM - (H - TOP - BOTTOM) * (v / max)
}

/// Axes, grid lines and labels shared by both charts.
fn frame(hours: &[Hour], max: f64, label: impl Fn(f64) -> String) -> Markup {
    html! {
        @for step in 0..=4 {
            @let v = max * f64::from(step) / 4.0;
            @let y = y_of(v, max);
            line.grid x1=(LEFT) x2=(W - RIGHT) y1=(y) y2=(y) {}
            text.axis x=(LEFT - 6.0) y=(y + 4.0) text-anchor="end" { (label(v)) }
        }
        @for (i, h) in hours.iter().enumerate() {
            @if i % 6 == 0 || i == 23 {
                text.axis x=(x_of(i)) y=(H - 8.0) text-anchor="middle" { (utc(h.start_ms).get(11..16).unwrap_or_default()) }
            }
        }
    }
}

/// Calls per hour, errors stacked on top.
pub(crate) fn calls(id: &str, what: &str, hours: &[Hour]) -> Markup {
    let total: u64 = hours.iter().map(|h| h.calls).sum();
    let errors: u64 = hours.iter().map(|h| h.errors).sum();
    let peak = hours.iter().map(|h| h.calls).max().unwrap_or(0);
    if total == 0 {
        return html! { p.muted { "No calls of " (what) " in the last 24 hours." } };
    }
    let max = scale_max(peak as f64, true);
    let slot = (W - LEFT - RIGHT) / 24.0;
    let bar = slot * 0.7;
    let title = format!("Calls per hour of {what}, last 24 hours");
    let desc = format!("{total} calls, {errors} of them errors; busiest hour {peak} calls.");
    html! {
        figure.chart {
            svg viewBox=(format!("0 0 {W} {H}")) role="img" aria-labelledby=(format!("{id}-t {id}-d")) {
                title id=(format!("{id}-t")) { (title) }
                desc id=(format!("{id}-d")) { (desc) }
                (frame(hours, max, |v| format!("{v:.0}")))
                @for (i, h) in hours.iter().enumerate() {
                    @let ok = (h.calls - h.errors) as f64;
                    @let x = x_of(i) - bar / 2.0;
                    rect.bar-ok x=(x) width=(bar) y=(y_of(ok, max)) height=(y_of(0.0, max) - y_of(ok, max)) {}
                    @if h.errors > 0 {
                        rect.bar-err x=(x) width=(bar) y=(y_of(h.calls as f64, max)) height=(y_of(ok, max) - y_of(h.calls as f64, max)) {}
                    }
                }
            }
            figcaption {
                (title) ". " (desc) " "
                span.key.key-ok { "■" } " successful " span.key.key-err { "■" } " errors"
            }
            (data_table(&format!("{id}-table"), hours))
        }
    }
}

/// p50 (solid) and p99 (dashed) duration per hour; hours without calls leave a gap.
pub(crate) fn latency(id: &str, what: &str, hours: &[Hour]) -> Markup {
    let Some(peak) = hours.iter().filter_map(|h| h.p99_ms).max() else {
        return html! {};
    };
    let max = scale_max(peak as f64, false);
    let line = |pick: fn(&Hour) -> Option<u64>| -> Vec<String> {
        // One polyline per run of hours with data.
        let mut runs = vec![String::new()];
        for (i, h) in hours.iter().enumerate() {
            match pick(h) {
                Some(v) => {
                    if let Some(run) = runs.last_mut() {
                        run.push_str(&format!("{:.1},{:.1} ", x_of(i), y_of(v as f64, max)));
                    }
                }
                None => runs.push(String::new()),
            }
        }
        runs.retain(|r| !r.is_empty());
        runs
    };
    let p50s: Vec<u64> = hours.iter().filter_map(|h| h.p50_ms).collect();
    let median_of_p50 = {
        let mut s = p50s.clone();
        s.sort_unstable();
        s.get(s.len() / 2).copied().unwrap_or(0)
    };
    let title = format!("Duration per hour of {what}, p50 and p99, last 24 hours");
    let desc = format!(
        "Typical hourly p50 {}; highest hourly p99 {}.",
        duration(median_of_p50),
        duration(peak)
    );
    html! {
        figure.chart {
            svg viewBox=(format!("0 0 {W} {H}")) role="img" aria-labelledby=(format!("{id}-t {id}-d")) {
                title id=(format!("{id}-t")) { (title) }
                desc id=(format!("{id}-d")) { (desc) }
                (frame(hours, max, |v| duration(v as u64)))
                @for points in line(|h| h.p99_ms) {
                    polyline.line-p99 points=(points) fill="none" stroke-dasharray="6 4" {}
                }
                @for points in line(|h| h.p50_ms) {
                    polyline.line-p50 points=(points) fill="none" {}
                }
                // A dot per hour, so an hour between two without calls still shows.
                @for (i, h) in hours.iter().enumerate() {
                    @if let (Some(p50), Some(p99)) = (h.p50_ms, h.p99_ms) {
                        circle.dot-p99 cx=(x_of(i)) cy=(y_of(p99 as f64, max)) r="3" {}
                        circle.dot-p50 cx=(x_of(i)) cy=(y_of(p50 as f64, max)) r="3" {}
                    }
                }
            }
            figcaption {
                (title) ". " (desc) " "
                span.key.key-p50 { "━" } " p50 " span.key.key-p99 { "╍" } " p99 (dashed)"
            }
        }
    }
}

fn data_table(id: &str, hours: &[Hour]) -> Markup {
    html! {
        details {
            summary { "The numbers per hour" }
            (scroll_table("Calls and durations per hour", html! {
                table id=(id) {
                    thead { tr { th scope="col" { "Hour (UTC)" } th scope="col" { "Calls" } th scope="col" { "Errors" } th scope="col" { "p50" } th scope="col" { "p99" } } }
                    tbody {
                        @for h in hours {
                            tr {
                                th scope="row" { (utc(h.start_ms)) }
                                td { (h.calls) } td { (h.errors) }
                                td { (h.p50_ms.map(duration).unwrap_or_else(|| "–".into())) }
                                td { (h.p99_ms.map(duration).unwrap_or_else(|| "–".into())) }
                            }
                        }
                    }
                }
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::scale_max;

    #[test]
    fn scales_have_round_steps() {
        assert_eq!(scale_max(34.0, true), 40.0);
        assert_eq!(scale_max(3.0, true), 4.0);
        assert_eq!(scale_max(0.0, true), 4.0);
        assert_eq!(scale_max(990.0, false), 1000.0);
        assert_eq!(scale_max(6100.0, false), 8000.0);
    }
}
