//! A tenant's global rate across two relays sharing one Redis (Debian's `redis-server`, started
//! here on a free loopback port), each owning half of one egress list, bench-engine behind and
//! one bench-load per relay in front, each at several times the global rate. Counted: what
//! both relays admitted while Redis answers stays within the documented bound (k seconds ×
//! the rate + a chunk per relay), the rest answered 429 with -32097; Redis stopped mid-run
//! (SIGSTOP: it accepts and never answers, so every lease times out), both keep admitting at
//! about their last lease, every answer still fast, the outage said once per relay and shown
//! in /metrics; Redis continued, leasing resumes.
//!
//! Needs `redis-server` (.ci/run installs it; elsewhere the test says so and passes) and the
//! bench tools built beside the relay (`cargo test --workspace` builds them).

mod process_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use process_support::{Reaped, RelayProc, free_port, http_get, installed, json_u64, tool};

/// The tenant's global rate (requests per second across both relays) and its lease chunk.
const RATE: u64 = 100;
const CHUNK: u64 = 5;
const RELAYS: u64 = 2;
/// Each relay's load: three times the global rate on its own, six times together.
const LOAD_PER_RELAY: u64 = 300;
/// `[quota] timeout_ms`: long enough that a lease thread that waited out each try of a
/// stopped store, granting nothing meanwhile, would starve the tenant.
const TIMEOUT_MS: u64 = 500;

/// A Redis server of its own, nothing saved.
fn start_redis(port: u16) -> Reaped {
    // Reaped at once: a failed wait below leaves nothing running.
    let child = Reaped(
        Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pong = TcpStream::connect(("127.0.0.1", port)).and_then(|mut c| {
            c.set_read_timeout(Some(Duration::from_secs(1)))?;
            c.write_all(b"PING\r\n")?;
            let mut b = [0u8; 7];
            c.read_exact(&mut b)?;
            Ok(b == *b"+PONG\r\n")
        });
        if pong.is_ok_and(|p| p) {
            return child;
        }
        assert!(Instant::now() < deadline, "redis-server did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// bench-engine's region `amsterdam` on `ip`:`port` pacing at 10 ms (its stats on a port of
/// its own), once it accepts connections.
fn start_engine(bin: &Path, ip: &str, port: u16) -> Reaped {
    let engine = Reaped(
        Command::new(bin)
            .args(["--regions", "amsterdam", "--base-ip", ip])
            .args(["--interval-ms", "10", "--port", &port.to_string()])
            .args(["--stats-addr", &format!("127.0.0.1:{}", free_port())])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect((ip, port)).is_err() {
        assert!(Instant::now() < deadline, "bench-engine did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    engine
}

/// The value of the series `series` (name and labels, as exposed) in a scrape.
fn metric(scrape: &str, series: &str) -> u64 {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("{series} in {scrape}"))
        .trim()
        .parse()
        .unwrap()
}

fn scrape(admin: u16) -> String {
    http_get(format!("127.0.0.1:{admin}").parse().unwrap(), "/metrics").unwrap()
}

const ADMITTED: &str = "bundle_relay_tenant_bundles_admitted_total{tenant=\"alpha\"}";

fn admitted(admins: &[u16]) -> Vec<u64> {
    admins
        .iter()
        .map(|&a| metric(&scrape(a), ADMITTED))
        .collect()
}

fn unix_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The number after `"key":` inside the JSON object that follows `"within":`.
fn json_in(text: &str, within: &str, key: &str) -> u64 {
    let at = text
        .find(&format!("\"{within}\":"))
        .unwrap_or_else(|| panic!("{within} in {text}"));
    let rest = &text[at..];
    let end = rest.find('}').unwrap();
    let obj = &rest[..end];
    if !obj.contains(&format!("\"{key}\":")) {
        return 0;
    }
    json_u64(obj, key)
}

fn load(bin: &Path, target: u16, seconds: f64, json: &Path) -> Child {
    Command::new(bin)
        .args(["--target", &format!("127.0.0.1:{target}")])
        .args(["--rate", &LOAD_PER_RELAY.to_string()])
        .args(["--duration-s", &seconds.to_string()])
        .args(["--connections", "4", "--quiet", "--json"])
        .arg(json)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn two_relays_hold_a_tenants_global_rate_through_redis_and_run_on_their_last_lease_without_it() {
    if !installed("redis-server", "--version", "redis-server") {
        return;
    }
    let (engine_bin, load_bin) = (tool("bench-engine"), tool("bench-load"));
    let dir = std::env::temp_dir().join(format!("br-redis-quota-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (redis_port, engine_port) = (free_port(), free_port());
    let intakes = [free_port(), free_port()];
    let admins = [free_port(), free_port()];
    let configs: Vec<PathBuf> = (0..2)
        .map(|i| {
            let path = dir.join(format!("relay{}.toml", i + 1));
            std::fs::write(
                &path,
                format!(
                    "threads = 1\npin_threads = false\narena_slots = 4096\n\
                     [intake]\nrotating = \"127.0.0.1:{}\"\n\
                     [[region]]\nname = \"amsterdam\"\nhost = \"127.0.0.42\"\nport = {engine_port}\n\
                     tls = false\ninterval_ms = 10\n\
                     [egress]\naddresses = [\"127.1.97.0/28\"]\n\
                     [admin]\nlisten = \"127.0.0.1:{}\"\n\
                     [quota]\nredis = \"127.0.0.1:{redis_port}\"\nlease_chunk = {CHUNK}\n\
                     timeout_ms = {TIMEOUT_MS}\n\
                     [[tenant]]\nname = \"alpha\"\ncidrs = [\"127.0.0.0/8\"]\n\
                     global_rate = {RATE}\n",
                    intakes[i], admins[i]
                ),
            )
            .unwrap();
            path
        })
        .collect();
    let redis = start_redis(redis_port);
    let _engine = start_engine(&engine_bin, "127.0.0.42", engine_port);
    let mut relays = [
        RelayProc::start(&configs[0], &["--egress-slice", "1/2"], "ready: listening"),
        RelayProc::start(&configs[1], &["--egress-slice", "2/2"], "ready: listening"),
    ];
    let check = Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
        .args(["run", "--check", "--config"])
        .arg(&configs[0])
        .output()
        .unwrap();
    let check_out = String::from_utf8_lossy(&check.stdout);
    assert!(
        check_out.contains(&format!(
            "quota store: redis 127.0.0.1:{redis_port} answers"
        )),
        "{check_out}"
    );

    // Phase 1, Redis answering; phase 2 from its stop to the end of the load.
    let jsons = [dir.join("load1.json"), dir.join("load2.json")];
    let first_s = unix_s();
    let loads: Vec<Child> = (0..2)
        .map(|i| load(&load_bin, intakes[i], 5.0, &jsons[i]))
        .collect();
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(2_500));
    let before = admitted(&admins);
    let kill_s = unix_s();
    // Stopped, not killed: connections still open and requests still sent, never answered,
    // so each lease runs into the relay's timeout.
    // SAFETY: signalling our own child.
    unsafe { libc::kill(redis.0.id() as i32, libc::SIGSTOP) };
    let killed_at = started.elapsed();
    let mut outs = Vec::new();
    for l in loads {
        outs.push(l.wait_with_output().unwrap());
    }
    let end_s = unix_s();
    let after = admitted(&admins);
    let scrapes: Vec<String> = admins.iter().map(|&a| scrape(a)).collect();
    let debug = http_get(
        format!("127.0.0.1:{}", admins[0]).parse().unwrap(),
        "/debug/tenants",
    )
    .unwrap();
    let summaries: Vec<String> = jsons
        .iter()
        .zip(&outs)
        .map(|(j, o)| {
            std::fs::read_to_string(j).unwrap_or_else(|_| {
                panic!(
                    "bench-load wrote no summary: {}",
                    String::from_utf8_lossy(&o.stderr)
                )
            })
        })
        .collect();

    // Redis back: leasing resumes.
    // SAFETY: signalling our own child.
    unsafe { libc::kill(redis.0.id() as i32, libc::SIGCONT) };
    for r in &relays {
        r.wait_line("answers again after", Duration::from_secs(3));
    }
    let back: Vec<String> = admins.iter().map(|&a| scrape(a)).collect();
    // Redis stopped again while no load runs: an idle relay finds out too (its PING a second
    // goes unanswered), and a stop then is not held up by the round trip waiting on it.
    // SAFETY: signalling our own child.
    unsafe { libc::kill(redis.0.id() as i32, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(1_000 + TIMEOUT_MS + 300));
    let idle_up = metric(&scrape(admins[1]), "bundle_relay_quota_store_up");
    let asked = Instant::now();
    relays[0].signal(libc::SIGTERM);
    let stopped = relays[0].wait_exit(Duration::from_secs(10));
    let stop_took = asked.elapsed();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(redis.0.id() as i32, libc::SIGCONT) };
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(idle_up, 0, "an idle relay sees the store down");
    assert_eq!(stopped, Some(0));
    assert!(
        stop_took < Duration::from_millis(TIMEOUT_MS),
        "the stop waited {stop_took:?} on the store"
    );

    let phase1: u64 = before.iter().sum();
    let phase2: u64 = after.iter().zip(&before).map(|(a, b)| a - b).sum();
    let (k1, k2) = (kill_s - first_s + 1, end_s - kill_s + 1);
    eprintln!(
        "admitted with Redis {before:?} over {k1} seconds (stopped after {killed_at:?}), \
         without it {:?} over {k2} seconds",
        after
            .iter()
            .zip(&before)
            .map(|(a, b)| a - b)
            .collect::<Vec<_>>()
    );
    // The bound: over k seconds at most k × the rate plus a chunk per relay. Without the
    // store shared, each relay alone would admit the whole rate: twice this.
    let bound1 = k1 * RATE + RELAYS * CHUNK;
    assert!(phase1 <= bound1, "{phase1} admitted > {bound1}");
    assert!(
        phase1 >= (k1 - 2) * RATE * 9 / 10,
        "{phase1} admitted in {k1} seconds at a rate of {RATE}"
    );
    assert!(before.iter().all(|&b| b > 0), "{before:?}");
    // Without Redis: each relay its last second's grant (their sum the rate), at least a
    // chunk, plus the chunk it carries.
    let bound2 = k2 * (RATE + RELAYS * CHUNK) + RELAYS * CHUNK;
    assert!(
        phase2 <= bound2,
        "{phase2} admitted without Redis > {bound2}"
    );
    assert!(
        phase2 >= (k2 - 2) * RATE * 6 / 10,
        "{phase2} admitted without Redis in {k2} seconds"
    );
    assert!(
        after.iter().zip(&before).all(|(a, b)| a > b),
        "{before:?} → {after:?}"
    );

    // Every request answered, fast: admitted 200, the rest 429 with Jito's -32097.
    let mut ok = 0;
    for s in &summaries {
        let scheduled = json_u64(s, "scheduled");
        for (key, want) in [("answered", scheduled), ("errors", 0), ("timeouts", 0)] {
            assert_eq!(json_u64(s, key), want, "{key}: {s}");
        }
        let (s200, s429) = (
            json_in(s, "by_status", "200"),
            json_in(s, "by_status", "429"),
        );
        assert_eq!(s200 + s429, scheduled, "{s}");
        assert_eq!(json_in(s, "by_rpc_error", "-32097"), s429, "{s}");
        assert!(s429 > scheduled / 2, "{s}");
        let p99_us = json_f64(s, "p99_us");
        // A request that waited on Redis would wait its timeout while it is stopped.
        let p50_us = json_f64(s, "p50_us");
        eprintln!("latency p50 {p50_us} µs, p99 {p99_us} µs");
        assert!(p50_us < 10_000.0, "p50 {p50_us} µs: {s}");
        assert!(p99_us < 100_000.0, "p99 {p99_us} µs: {s}");
        ok += s200;
    }
    assert_eq!(ok, after.iter().sum::<u64>(), "200s against admitted");

    // The outage, said once per relay and shown by /metrics; then over.
    for (r, m) in relays.iter().zip(&scrapes) {
        assert_eq!(r.count_lines("does not answer"), 1);
        assert_eq!(metric(m, "bundle_relay_quota_store_up"), 0, "{m}");
        assert_eq!(metric(m, "bundle_relay_quota_tenants_on_last_lease"), 1);
        assert_eq!(metric(m, "bundle_relay_quota_store_outages_total"), 1);
        assert!(metric(m, "bundle_relay_quota_store_errors_total") >= 1);
        assert!(metric(m, "bundle_relay_quota_leases_granted_total") >= 1);
        assert!(metric(m, "bundle_relay_quota_leases_refused_total") >= 1);
        assert!(
            metric(
                m,
                "bundle_relay_tenant_refused_total{tenant=\"alpha\",reason=\"global\"}"
            ) > 0
        );
    }
    assert!(
        debug.contains("global rate 100/s")
            && debug.contains("(its last lease: the store is down)"),
        "{debug}"
    );
    for m in &back {
        assert_eq!(metric(m, "bundle_relay_quota_store_up"), 1, "{m}");
        assert_eq!(metric(m, "bundle_relay_quota_tenants_on_last_lease"), 0);
    }
}

/// The number after `"key":` in a JSON text (the load's summary).
fn json_f64(text: &str, key: &str) -> f64 {
    let pattern = format!("\"{key}\":");
    let at = text.find(&pattern).expect("the key is in the text") + pattern.len();
    text[at..]
        .trim_start()
        .split(|c: char| c != '.' && !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// One tenant's lease answered with an error (its key of another type) fails that lease, not
/// the round trip: the other tenants' grants in it, which the store counted, are theirs, and
/// the store is not down for them; that tenant runs on its last lease, and the log says why.
#[test]
fn a_lease_the_store_answers_with_an_error_leaves_the_other_tenants_grants() {
    if !installed("redis-server", "--version", "redis-server") {
        return;
    }
    let (engine_bin, load_bin) = (tool("bench-engine"), tool("bench-load"));
    let dir = std::env::temp_dir().join(format!("br-redis-error-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (redis_port, engine_port, intake, admin) =
        (free_port(), free_port(), free_port(), free_port());
    let config = dir.join("relay.toml");
    std::fs::write(
        &config,
        format!(
            "threads = 1\npin_threads = false\narena_slots = 4096\n\
             [intake]\nrotating = \"127.0.0.1:{intake}\"\n\
             [[region]]\nname = \"amsterdam\"\nhost = \"127.0.0.47\"\nport = {engine_port}\n\
             tls = false\ninterval_ms = 10\n\
             [egress]\naddresses = [\"127.1.105.0/28\"]\n\
             [admin]\nlisten = \"127.0.0.1:{admin}\"\n\
             [quota]\nredis = \"127.0.0.1:{redis_port}\"\nlease_chunk = {CHUNK}\n\
             [[tenant]]\nname = \"alpha\"\ncidrs = [\"127.0.0.0/8\"]\nglobal_rate = {RATE}\n\
             [[tenant]]\nname = \"beta\"\nkeys = [\"kb\"]\nglobal_rate = {RATE}\n"
        ),
    )
    .unwrap();
    let _redis = start_redis(redis_port);
    // beta's keys for the next minute hold a hash: its lease script fails on them.
    let now = unix_s();
    for s in now..now + 60 {
        let out = Command::new("redis-cli")
            .args(["-p", &redis_port.to_string()])
            .args(["HSET", &format!("bundle-relay:quota:beta:{s}"), "x", "1"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let _engine = start_engine(&engine_bin, "127.0.0.47", engine_port);
    let relay = RelayProc::start(&config, &[], "ready: listening");
    // Both tenants sending: each round trip asks for both.
    let beta = Command::new(&load_bin)
        .args(["--target", &format!("127.0.0.1:{intake}"), "--auth", "kb"])
        .args(["--rate", &LOAD_PER_RELAY.to_string(), "--duration-s", "3"])
        .args(["--connections", "4", "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let json = dir.join("load.json");
    let out = load(&load_bin, intake, 3.0, &json)
        .wait_with_output()
        .unwrap();
    let _ = beta.wait_with_output();
    let m = scrape(admin);
    let said = relay.wait_line(
        "answered tenant beta's lease with an error",
        Duration::from_secs(1),
    );
    drop(relay);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "{out:?}");
    assert!(
        metric(&m, "bundle_relay_quota_leases_granted_total") >= 1,
        "alpha's grants in the round trips beta's error was in: {m}"
    );
    assert!(said.contains("WRONGTYPE"), "{said}");
    assert_eq!(
        metric(&m, "bundle_relay_quota_store_outages_total"),
        0,
        "{m}"
    );
    assert_eq!(metric(&m, "bundle_relay_quota_store_up"), 1, "{m}");
    // Every lease asked ends granted, refused or failed: beta's errors are asked and failed.
    let failed = metric(&m, "bundle_relay_quota_leases_failed_total");
    assert!(failed >= 1, "beta's leases the store failed: {m}");
    assert_eq!(
        metric(&m, "bundle_relay_quota_leases_asked_total"),
        metric(&m, "bundle_relay_quota_leases_granted_total")
            + metric(&m, "bundle_relay_quota_leases_refused_total")
            + failed,
        "asked = granted + refused + failed: {m}"
    );
}

/// The ports these tests give their redis, engine and relay lie below the kernel's ephemeral
/// range, where no connection a test opens meanwhile can take one before its listener binds
/// it (once, an admin port was a load connection's own first); and differ from call to call
/// within the binary, whose tests run at once.
#[test]
fn free_ports_lie_below_the_ephemeral_range_and_differ_from_call_to_call() {
    let low = process_support::ephemeral_ports_start();
    if low < 11_000 {
        // No room below the range: the kernel picks, as before.
        return;
    }
    let ports: Vec<u16> = (0..50).map(|_| free_port()).collect();
    assert!(
        ports.iter().all(|&p| (10_000..low).contains(&p)),
        "{ports:?}"
    );
    let mut distinct = ports.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), ports.len(), "{ports:?}");
}
