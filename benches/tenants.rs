//! What tenants cost: a request's lookup (by key, by source block) and its whole tenant check
//! (lookup, rate, share taken and given back) with 1 tenant and with 10,000, side by side in
//! one run; and a reload of 10,000 tenants off the request path (parse and check the file,
//! build the table). Run: `cargo bench --bench tenants -- --warm-up-time 1 --measurement-time 3`
//! (one group at a time: `-- '^check/'`).

use std::hint::black_box;
use std::net::IpAddr;
use std::sync::Arc;

use bundle_relay::clock::{Instant, TickRate};
use bundle_relay::config::{Config, Resolve, TENANTS_MAX_LIMIT};
use bundle_relay::metrics::tenants::TenantStats;
use bundle_relay::relay::Port;
use bundle_relay::relay::tenancy::{Claim, Tenancy};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

/// A relay's config with `n` tenants, each with a key, a /24 block and a generous rate.
fn config(n: usize) -> String {
    let mut s = format!(
        "tenants_max = {TENANTS_MAX_LIMIT}\narena_slots = 65536\n[[region]]\nname = \"a\"\n\
         host = \"127.0.0.1\"\nport = 9\ntls = false\n[egress]\naddresses = [\"127.0.0.1\"]\n\
         [admin]\nlisten = \"off\"\n"
    );
    for i in 0..n {
        s.push_str(&format!(
            "[[tenant]]\nname = \"t{i}\"\nkeys = [\"0b7c6f2e-{i:04x}-4c1e-9d3a-8f6b2a1c{i:04x}\"]\n\
             cidrs = [\"10.{}.{}.0/24\"]\nrate = 1000000\n",
            i / 256,
            i % 256
        ));
    }
    s
}

fn key(i: usize) -> String {
    format!("0b7c6f2e-{i:04x}-4c1e-9d3a-8f6b2a1c{i:04x}")
}

fn tenancy(cfg: &Config) -> Tenancy {
    let stats = Arc::new(TenantStats::new(cfg.tenants.max));
    let table = Arc::new(cfg.tenant_table(cfg, None, &stats).expect("builds"));
    Tenancy::new(table, stats, TickRate::NANOS)
}

fn lookups(c: &mut Criterion) {
    let mut g = c.benchmark_group("identify");
    for n in [1usize, 10_000] {
        let cfg = Config::parse(&config(n), "bench", Resolve::Deferred).expect("parses");
        let t = tenancy(&cfg);
        let k = key(n / 2);
        let peer: IpAddr = format!("10.{}.{}.7", (n / 2) / 256, (n / 2) % 256)
            .parse()
            .expect("address");
        g.bench_with_input(BenchmarkId::new("key", n), &n, |b, _| {
            b.iter(|| black_box(t.table().identify(Some(black_box(k.as_bytes())), peer, 0)))
        });
        g.bench_with_input(BenchmarkId::new("cidr", n), &n, |b, _| {
            b.iter(|| black_box(t.table().identify(None, black_box(peer), 0)))
        });
    }
    g.finish();
}

fn checks(c: &mut Criterion) {
    let mut g = c.benchmark_group("check");
    for n in [1usize, 10_000] {
        let cfg = Config::parse(&config(n), "bench", Resolve::Deferred).expect("parses");
        let t = tenancy(&cfg);
        let k = key(n / 2);
        let mut now = 1_000_000_000u64;
        g.bench_with_input(BenchmarkId::new("key", n), &n, |b, _| {
            b.iter(|| {
                now += 1_000;
                let claim = Claim {
                    key: Some(k.as_bytes()),
                    ..Claim::LOOPBACK
                };
                let pass = t
                    .check(claim, Port::Rotating, Instant(now))
                    .expect("passes");
                t.release(&pass);
            })
        });
    }
    g.finish();
}

fn reloads(c: &mut Criterion) {
    let mut g = c.benchmark_group("reload");
    g.sample_size(10);
    let text = config(10_000);
    let cfg = Config::parse(&text, "bench", Resolve::Deferred).expect("parses");
    let stats = TenantStats::new(cfg.tenants.max);
    let previous = cfg.tenant_table(&cfg, None, &stats).expect("builds");
    g.bench_function("parse_and_check/10000", |b| {
        b.iter(|| black_box(Config::parse(black_box(&text), "bench", Resolve::Deferred)))
    });
    g.bench_function("build_table/10000", |b| {
        b.iter(|| black_box(cfg.tenant_table(&cfg, Some(&previous), &stats)))
    });
    g.finish();
}

criterion_group!(benches, lookups, checks, reloads);
criterion_main!(benches);
