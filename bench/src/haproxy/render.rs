//! `--relays N --haproxy`'s report: one row per rate and shape (answers, delivery, early
//! sends, CPU, CPU per delivered bundle and its ratio to one relay's at that rate), HAProxy's
//! requests per relay, each step's CPU by process, and the per-core figures a sizing on paper
//! starts from.

use std::fmt::Write as _;

use super::HaproxyReport;
use super::step::{Shape, ShapeStep};
use crate::report::{Align, Table, ratio, times, us};

pub fn render(r: &HaproxyReport) -> String {
    let mut o = format!(
        "one relay ({n} reactor threads, the whole egress list) against HAProxy + {n} relays (1 \
         reactor thread and --egress-slice K/{n} each): {} egress x 8 regions at {} ms; CPU is \
         utime + stime from /proc over each step's load; {} cores shared by every process\n\n",
        r.egress_addresses,
        r.interval_ms,
        r.cores,
        n = r.relays
    );
    o.push_str(&main_table(r).render());
    let _ = write!(
        o,
        "\nHAProxy's requests per relay (show stat req_tot, backend relays: the load's and the \
         one /ping that found HAProxy serving):\n{}",
        spread_table(r).render()
    );
    let _ = write!(o, "\nper-core figures:\n{}", per_core_table(r).render());
    o.push_str("\nCPU by process (cores over the step):\n");
    for s in &r.steps {
        let c = &s.cpu;
        let each: Vec<String> = c
            .relay_us
            .iter()
            .map(|&u| format!("{:.2}", c.cores(u)))
            .collect();
        let total = c.cores(c.haproxy_us + c.relays_us + c.engine_us + c.load_us);
        let _ = writeln!(
            o,
            "  {:>6}/s {:<20} haproxy {}, relays {:.2} ({}), engine {:.2}, load {:.2}: {total:.2} of {} cores",
            s.rate_per_s,
            s.shape.label(),
            match s.shape {
                Shape::OneRelay => "—".to_string(),
                Shape::Haproxy { .. } => format!("{:.2}", c.cores(c.haproxy_us)),
            },
            c.cores(c.relays_us),
            each.join(" + "),
            c.cores(c.engine_us),
            c.cores(c.load_us),
            r.cores
        );
    }
    o
}

/// One relay's step at the same rate as `s`.
fn one_relay_at<'a>(r: &'a HaproxyReport, s: &ShapeStep) -> Option<&'a ShapeStep> {
    r.steps
        .iter()
        .find(|o| o.shape == Shape::OneRelay && o.rate_per_s == s.rate_per_s)
}

fn main_table(r: &HaproxyReport) -> Table {
    let mut t = Table::aligned(&[
        ("rate/s", Align::Right),
        ("shape", Align::Left),
        ("offered", Align::Right),
        ("answered OK", Align::Right),
        ("delivered", Align::Right),
        ("errors", Align::Right),
        ("answer p50", Align::Right),
        ("answer p99", Align::Right),
        ("delivery p99", Align::Right),
        ("early sends", Align::Right),
        ("HAProxy cores", Align::Right),
        ("relays cores", Align::Right),
        ("HAProxy + relays CPU µs/delivered", Align::Right),
        ("vs 1 relay", Align::Right),
    ]);
    for s in &r.steps {
        let per = s.front_us_per_delivered();
        let vs = match s.shape {
            Shape::OneRelay => "1.00×".to_string(),
            Shape::Haproxy { .. } => {
                times(one_relay_at(r, s).and_then(|o| ratio(per, o.front_us_per_delivered())))
            }
        };
        t.push(vec![
            format!("{:.0}", s.rate_per_s),
            s.shape.label(),
            s.load.scheduled.to_string(),
            s.answered_ok().to_string(),
            s.engine.accepted.to_string(),
            s.errors().to_string(),
            us(s.load.latency.p50_us),
            us(s.load.latency.p99_us),
            us(s.engine.latency.percentiles.p99_us),
            s.engine.early_sends.to_string(),
            match s.shape {
                Shape::OneRelay => "—".into(),
                Shape::Haproxy { .. } => format!("{:.2}", s.cpu.cores(s.cpu.haproxy_us)),
            },
            format!("{:.2}", s.cpu.cores(s.cpu.relays_us)),
            format!("{per:.1}"),
            vs,
        ]);
    }
    t
}

fn spread_table(r: &HaproxyReport) -> Table {
    let names: Vec<String> = (1..=r.relays).map(|i| format!("relay{i}")).collect();
    let mut columns = vec![("rate/s", Align::Right)];
    columns.extend(names.iter().map(|n| (n.as_str(), Align::Right)));
    columns.push(("status", Align::Left));
    let mut t = Table::aligned(&columns);
    for s in r.steps.iter().filter(|s| !s.servers.is_empty()) {
        let sum = s.servers.iter().map(|v| v.requests).sum::<u64>().max(1);
        let mut row = vec![format!("{:.0}", s.rate_per_s)];
        row.extend(names.iter().map(|n| {
            s.servers
                .iter()
                .find(|v| &v.name == n)
                .map_or("—".into(), |v| {
                    format!(
                        "{} ({:.1}%)",
                        v.requests,
                        100.0 * v.requests as f64 / sum as f64
                    )
                })
        }));
        let status: Vec<&str> = s.servers.iter().map(|v| v.status.as_str()).collect();
        row.push(status.join(" "));
        t.push(row);
    }
    t
}

/// What one core carries of each: the relay's bundles alone and behind HAProxy, and
/// HAProxy's requests.
fn per_core_table(r: &HaproxyReport) -> Table {
    let mut t = Table::aligned(&[
        ("rate/s", Align::Right),
        ("1 relay µs/bundle", Align::Right),
        ("bundles/s a relay core", Align::Right),
        ("relays behind HAProxy µs/bundle", Align::Right),
        ("bundles/s a relay core", Align::Right),
        ("HAProxy µs/request", Align::Right),
        ("requests/s a HAProxy core", Align::Right),
    ]);
    let per_core = |us: f64| {
        if us > 0.0 {
            format!("{:.0}", 1e6 / us)
        } else {
            "—".into()
        }
    };
    for s in r.steps.iter().filter(|s| s.shape != Shape::OneRelay) {
        let Some(one) = one_relay_at(r, s) else {
            continue;
        };
        let one_us = one.cpu.relays_us as f64 / one.relay_totals().delivered.max(1) as f64;
        let behind_us = s.cpu.relays_us as f64 / s.relay_totals().delivered.max(1) as f64;
        let requests = s.servers.iter().map(|v| v.requests).sum::<u64>();
        let haproxy_us = s.cpu.haproxy_us as f64 / requests.max(1) as f64;
        t.push(vec![
            format!("{:.0}", s.rate_per_s),
            format!("{one_us:.1}"),
            per_core(one_us),
            format!("{behind_us:.1}"),
            per_core(behind_us),
            format!("{haproxy_us:.1}"),
            per_core(haproxy_us),
        ]);
    }
    t
}
