//! The `bench-baseline` binary as a process: it relays bundles to a rate-limiting engine, serves
//! `/stats`, and on SIGTERM drains, prints its final stats as JSON and exits 0. It also prints
//! the bundle rate and the relay process's CPU per delivered bundle (figures, not assertions).
//!
//! Measure with more bundles: `N=10000 cargo test --workspace --test baseline_process -- --nocapture`
//! (`ENC=base64` sends base64 instead of base58; `W` sets the relay's worker threads, default 1).

mod support;

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::baseline::*;

/// Loopback connections the load side keeps, each with one request outstanding.
const CONNECTIONS: u64 = 16;

fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// utime + stime of a process in clock ticks (100 per second on Linux).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

fn body(b: u64, base64: bool) -> String {
    let txs = bundle(b + 1_000_000, 3);
    if !base64 {
        return send_bundle_body(b, &txs);
    }
    use base64::Engine as _;
    let encoded: Vec<String> = txs
        .iter()
        .map(|t| base64::engine::general_purpose::STANDARD.encode(t))
        .collect();
    serde_json::json!({"jsonrpc":"2.0","id":b,"method":"sendBundle","params":[encoded, {"encoding":"base64"}]})
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn the_binary_relays_every_bundle_and_exits_cleanly_on_sigterm() {
    let n: u64 = std::env::var("N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let base64 = std::env::var("ENC").is_ok_and(|e| e == "base64");
    let rules = EngineRules {
        interval: Duration::from_millis(10),
        slack: Duration::from_millis(5),
        crossing: Duration::from_secs(1),
        backoff_every: 0,
        backoff: Duration::ZERO,
        reject_all: None,
    };
    let (engines, log) = start_engine(8, rules).await;
    let (rotating, admin) = (free_addr(), free_addr());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bench-baseline"));
    cmd.args([
        "--rotating",
        &rotating.to_string(),
        "--pinned-base",
        "127.0.0.1:0",
        "--admin",
        &admin.to_string(),
    ]);
    cmd.args([
        "--interval-ms",
        "10",
        "--egress",
        "127.1.0.0/26",
        "--connect-at-startup",
    ]);
    cmd.args([
        "--worker-threads",
        &std::env::var("W").unwrap_or_else(|_| "1".into()),
    ]);
    for (i, a) in engines.iter().enumerate() {
        cmd.arg("--engine").arg(format!("region{i}={a}"));
    }
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let pid = child.id();

    let started = eventually(Duration::from_secs(20), || {
        std::net::TcpStream::connect(admin).is_ok()
    })
    .await;
    assert!(started, "the relay never opened its admin port");
    let bodies: std::sync::Arc<Vec<String>> =
        std::sync::Arc::new((0..n).map(|b| body(b, base64)).collect());

    let cpu_start = cpu_ticks(pid);
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..CONNECTIONS {
        let bodies = bodies.clone();
        tasks.push(tokio::spawn(async move {
            let mut http = Http::connect(rotating).await;
            for b in (c..n).step_by(CONNECTIONS as usize) {
                let r = http.post("/api/v1/bundles", &bodies[b as usize]).await;
                assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let intake = t0.elapsed();
    let mut http = Http::connect(admin).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = http.get("/stats").await.json();
        if s["delivered"].as_u64() == Some(n) || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let all = t0.elapsed();
    let cpu_s = (cpu_ticks(pid) - cpu_start) as f64 / 100.0;
    eprintln!(
        "bench-baseline: {n} bundles x 3 txs ({}), intake {:.0}/s, delivered {:.0}/s, relay CPU {:.1} us/bundle",
        if base64 { "base64" } else { "base58" },
        n as f64 / intake.as_secs_f64(),
        n as f64 / all.as_secs_f64(),
        cpu_s * 1e6 / n as f64
    );

    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGTERM) }, 0);
    let status = tokio::task::spawn_blocking(move || {
        let status = child.wait().unwrap();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        (status, out)
    })
    .await
    .unwrap();
    assert!(status.0.success(), "exit status {:?}", status.0);
    let last = status.1.lines().last().expect("final stats printed");
    let stats: serde_json::Value = serde_json::from_str(last).unwrap();
    assert_eq!(stats["admitted"], n);
    assert_eq!(stats["delivered"], n);
    assert_eq!(stats["in_flight"], 0);
    let log = log.lock().unwrap();
    assert_eq!((log.delivered.len() as u64, log.duplicates), (n, 0));
}

#[test]
fn the_binary_refuses_a_pool_beyond_the_open_file_limit_with_one_clear_message() {
    let out = Command::new(env!("CARGO_BIN_EXE_bench-baseline"))
        .args([
            "--egress",
            "127.2.0.0/18",
            "--rotating",
            "127.0.0.1:0",
            "--admin",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("131072 upstream connections = 16384 egress addresses x 8 regions")
            && stderr.contains("RLIMIT_NOFILE"),
        "{stderr}"
    );
}
