//! Instructions per bundle through the whole sans-IO request path, counted by callgrind: a
//! figure a shared, noisy machine cannot blur, so a change of a few percent shows.
//!
//! One bundle is: a bot's HTTP/1.1 `sendBundle` request bytes into the intake connection
//! (`http1::conn::Conn`), `relay::intake::handle` on a `Dispatcher` (JSON-RPC, decode and
//! validate really signed transactions, bundle id, admission, the answer written), the answer
//! sent, the bundle dispatched and framed as a gRPC SendBundle call on the pair's HTTP/2
//! connection, the engine's HTTP/2 reply fed back and the bundle settled. A scripted engine
//! (`tests/relay_path_support`) stands at the other end, indexing its header fields as the
//! `h2` crate does (after the first answer each is one byte); no socket, no clock read.
//!
//! Run: `cargo bench --bench request_path`. Without arguments the binary runs itself once per
//! scenario under `valgrind --tool=callgrind --collect-atstart=no
//! --toggle-collect=request_path_measured`, so only the bundles after the warm-up count, and
//! prints a table. Without valgrind it says so, runs the path once natively as a check, and
//! exits 0 (1 with `CI` set: CI installs valgrind).
//!
//! Beside the count it reports the code the measured bundles ran: distinct 64-byte lines of
//! machine code with instructions counted (callgrind's `--dump-instr=yes`), the lines a core
//! whose caches other work emptied fetches again for each bundle. It is as exact and as
//! repeatable as the count. Under valgrind SHA-256 runs its portable code (valgrind hides
//! SHA-NI): 175 of the lines, where the SHA-NI code the relay runs natively spans 15.
//!
//! Flags: `--record FILE` appends the figures to a record (`benches/request_path.figures`,
//! which CI compares with), `--out FILE` writes them alone; `--baseline FILE
//! --baseline-label TEXT` prints the last figures of such a file beside these (the ratio and
//! the change in %); `--label TEXT` names this build's column. `--measure SCENARIO` is the run
//! valgrind watches.
//!
//! The counts repeat exactly for one binary at one path (the child runs with an empty
//! environment); the same binary at a path of another length moved them by up to 8
//! instructions per bundle (0.01%), and another compiler moves them more: the record names
//! its compiler.
//!
//! | scenario (rustc 1.95.0, valgrind 3.19.0) | instructions per bundle | code lines |
//! |---|---:|---:|
//! | 1 transaction, base64 | 37,863 | 1,371 |
//! | 5 transactions, base64 | 101,476 | 1,402 |
//! | 5 transactions, base58 | 154,383 | 1,414 |

#[path = "../tests/h2_support/mod.rs"]
mod h2_support;
#[path = "../tests/relay_path_support/mod.rs"]
mod relay_path_support;
#[path = "../tests/wire_support/mod.rs"]
mod wire_support;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use base64::Engine as _;
use bundle_relay::clock::{Instant, Ticks};
use bundle_relay::http1::Limits;
use bundle_relay::http1::conn::{Conn, ConnConfig};
use bundle_relay::reactor::INTAKE_OUT_BYTES;
use bundle_relay::relay::intake::{self, Port, Verdict};
use bundle_relay::relay::queries::ConnRef;
use bundle_relay::relay::tenancy::Claim;
use rand::SeedableRng;
use rand::rngs::StdRng;
use relay_path_support::{EngineOk, MS, OnePair};
use wire_support::{Shape, serialize, signed_tx};

/// Bundles counted per scenario: enough that the per-bundle figure is stable to well under
/// 0.1%, few enough that three runs under callgrind take seconds.
const BUNDLES: u32 = 2_000;
/// Bundles sent before counting starts (buffers touched, rings and tables in steady state).
const WARM_UP: u32 = 200;
/// Distinct bundles cycled through per scenario (each signed once, outside the count).
const DISTINCT: usize = 16;
/// The function callgrind counts inside (`--toggle-collect`): one bundle's whole path.
const MEASURED_SYMBOL: &str = "request_path_measured";

#[derive(Clone, Copy)]
enum Encoding {
    Base64,
    Base58,
}

struct Scenario {
    name: &'static str,
    txs: usize,
    encoding: Encoding,
}

const SCENARIOS: [Scenario; 3] = [
    Scenario {
        name: "bundle1_base64",
        txs: 1,
        encoding: Encoding::Base64,
    },
    Scenario {
        name: "bundle5_base64",
        txs: 5,
        encoding: Encoding::Base64,
    },
    Scenario {
        name: "bundle5_base58",
        txs: 5,
        encoding: Encoding::Base58,
    },
];

/// One bot request: its HTTP bytes, the bundle id its answer must carry, its raw size.
struct Request {
    http: Vec<u8>,
    id_hex: [u8; 64],
    tx_bytes: usize,
}

/// `DISTINCT` sendBundle requests of `s.txs` really signed transactions, as python-requests
/// sends them.
fn requests(s: &Scenario) -> Vec<Request> {
    let mut rng = StdRng::seed_from_u64(0x7e1a);
    (0..DISTINCT)
        .map(|_| {
            // The first legacy, the rest v0 with lookup tables; 250 to 500 bytes each.
            let txs: Vec<Vec<u8>> = (0..s.txs)
                .map(|i| {
                    let shape = Shape {
                        signers: 1 + i % 2,
                        instructions: 2,
                        accounts_per_ix: 3,
                        data_len_max: 40,
                        v0_tables: if i == 0 { None } else { Some(2) },
                    };
                    serialize(&signed_tx(&mut rng, shape))
                })
                .collect();
            let (texts, name): (Vec<String>, _) = match s.encoding {
                Encoding::Base64 => (
                    txs.iter()
                        .map(|t| base64::engine::general_purpose::STANDARD.encode(t))
                        .collect(),
                    "base64",
                ),
                Encoding::Base58 => (
                    txs.iter().map(|t| bs58::encode(t).into_string()).collect(),
                    "base58",
                ),
            };
            let quoted: Vec<String> = texts.iter().map(|t| format!("\"{t}\"")).collect();
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"sendBundle","params":[[{}],{{"encoding":"{name}"}}]}}"#,
                quoted.join(",")
            );
            let http = format!(
                "POST /api/v1/bundles HTTP/1.1\r\nHost: ny.mainnet.block-engine.jito.wtf\r\n\
                 User-Agent: python-requests/2.31.0\r\nAccept-Encoding: gzip, deflate\r\n\
                 Accept: */*\r\nConnection: keep-alive\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes();
            let first_signatures: Vec<[u8; 64]> =
                txs.iter().map(|t| t[1..65].try_into().unwrap()).collect();
            Request {
                http,
                id_hex: bundle_relay::wire::bundle_id(first_signatures.iter()).to_hex(),
                tx_bytes: txs.iter().map(Vec::len).sum(),
            }
        })
        .collect()
}

/// The relay thread's side of one bot connection and one engine connection.
struct PathState {
    pair: OnePair,
    conn: Conn,
    cfg: ConnConfig,
    reply: EngineOk,
}

/// Bytes of the answer's end kept for the check: the bundle id's 64 and what follows it.
const ANSWER_TAIL: usize = 96;

/// What one bundle's trip left behind, checked outside the count.
struct Step {
    requests: u32,
    verdict: Option<Verdict>,
    answer_len: usize,
    /// The answer's last bytes: its JSON body ends with the bundle id and the echoed `id`.
    answer_tail: [u8; ANSWER_TAIL],
    frame_len: usize,
    settled: bool,
}

/// One bundle's whole path at `now`; the engine's reply must already name the call's stream.
#[inline(never)]
fn one_bundle(p: &mut PathState, request: &[u8], now: Instant) -> Step {
    let mut step = Step {
        requests: 0,
        verdict: None,
        answer_len: 0,
        answer_tail: [0; ANSWER_TAIL],
        frame_len: 0,
        settled: false,
    };
    let d = &mut p.pair.d;
    p.conn.handle_bytes(request, now);
    let served = p.conn.serve(&p.cfg, now, |req, out| {
        let claim = Claim {
            key: req.header("x-jito-auth"),
            ..Claim::LOOPBACK
        };
        let (n, verdict, _) = intake::handle(
            d,
            Port::Pinned(0),
            ConnRef::DETACHED,
            claim,
            req.method,
            req.path,
            req.query,
            req.body,
            req.keep_alive,
            now,
            out,
        );
        step.verdict = Some(verdict);
        n
    });
    step.requests = served.requests;
    let answer = p.conn.poll_transmit();
    step.answer_len = answer.len();
    if answer.len() >= ANSWER_TAIL {
        step.answer_tail
            .copy_from_slice(&answer[answer.len() - ANSWER_TAIL..]);
    }
    p.conn.handle_sent(step.answer_len, now);

    d.dispatch(now);
    let Some(pair) = d.poll_dirty() else {
        return step;
    };
    step.frame_len = d.transmit(pair, now).len();
    d.transmitted(pair, step.frame_len, now);
    d.received(pair, p.reply.next(), now);
    while let Some(pair) = d.poll_dirty() {
        let n = d.transmit(pair, now).len();
        d.transmitted(pair, n, now);
    }
    step.settled = true;
    step
}

/// Callgrind counts instructions only while this runs (`--toggle-collect`). Its own cost is a
/// call and a copy of the step.
#[unsafe(no_mangle)]
#[inline(never)]
fn request_path_measured(p: &mut PathState, request: &[u8], now: Instant) -> Step {
    one_bundle(p, request, now)
}

/// Runs `WARM_UP` bundles, then `bundles` through [`request_path_measured`], checking each.
fn drive(s: &Scenario, bundles: u32) {
    let reqs = requests(s);
    let mut now = Instant(MS);
    let cfg = ConnConfig {
        limits: Limits::default(),
        // As the reactor sizes it: room for the largest answer.
        response_bytes_max: intake::BODY_BYTES_MAX + 512,
        out_bytes: INTAKE_OUT_BYTES,
        head_timeout: Ticks(10_000 * MS),
        idle_timeout: Ticks(60_000 * MS),
        send_timeout: Ticks(10_000 * MS),
        linger: Ticks(2_000 * MS),
    };
    let mut p = PathState {
        pair: OnePair::connect(now),
        conn: Conn::new(&cfg),
        cfg,
        reply: EngineOk::new(),
    };
    p.conn.reset(now);
    let mut stream = 1u32;
    for i in 0..WARM_UP + bundles {
        // Paced at 1 ms: 2 ms later the pair may send again.
        now = Instant(now.0 + 2 * MS);
        p.reply.set_stream(stream);
        stream += 2;
        let r = &reqs[i as usize % reqs.len()];
        let step = if i < WARM_UP {
            one_bundle(&mut p, &r.http, now)
        } else {
            request_path_measured(&mut p, &r.http, now)
        };
        let tail = String::from_utf8_lossy(&step.answer_tail);
        assert_eq!(step.requests, 1, "{}: bundle {i} not served", s.name);
        assert_eq!(
            step.verdict,
            Some(Verdict::Admitted),
            "{}: bundle {i}: {tail}",
            s.name
        );
        assert!(
            step.answer_tail.windows(64).any(|w| w == r.id_hex),
            "{}: bundle {i}'s answer lacks its id: {tail}",
            s.name
        );
        assert!(
            step.frame_len > r.tx_bytes,
            "{}: bundle {i}: a {}-byte frame for {} bytes of transactions",
            s.name,
            step.frame_len,
            r.tx_bytes
        );
        assert!(step.settled, "{}: bundle {i} not settled", s.name);
    }
    let total = u64::from(WARM_UP + bundles);
    assert_eq!(p.pair.stats.totals().delivered, total, "{}", s.name);
    assert_eq!(p.pair.metrics.check_accounting(), Ok(()));
    assert!(p.pair.d.check_accounting());
}

/// One scenario's count: callgrind's `Ir` over the measured bundles, and the distinct lines of
/// machine code they executed (absent from records made before it was counted).
struct Figure {
    name: String,
    ir: u64,
    bundles: u64,
    code_lines: Option<u64>,
}

impl Figure {
    fn per_bundle(&self) -> f64 {
        self.ir as f64 / self.bundles as f64
    }
}

/// Bytes in a cache line of x86-64 (and of the figure's unit).
const CACHE_LINE: u64 = 64;

/// Distinct 64-byte lines of machine code with instructions counted in a callgrind profile
/// dumped with `--dump-instr=yes`: the code a core fetches to carry a bundle through the path,
/// what it fetches again from L2 or L3 when other work evicted it between bundles.
///
/// The format (valgrind's "Callgrind Format Specification"): with `positions: instr line`
/// every cost line is `ADDRESS LINE COSTS`; an address is absolute (`0x…`), relative to the
/// previous cost line's (`+N`, `-N`) or the same (`*`). A `calls=` line names the callee's
/// address, which does not move that reference; the cost line after it is the call
/// instruction's. Addresses are per object (`ob=`), so lines are kept per object.
fn code_lines(text: &str) -> Result<u64, String> {
    let mut lines = std::collections::HashSet::new();
    let mut object = "";
    let mut address: u64 = 0;
    let mut positions = false;
    for l in text.lines() {
        if let Some(p) = l.strip_prefix("positions:") {
            if p.split_whitespace().ne(["instr", "line"]) {
                return Err(format!("`positions:{p}`, not `instr line`"));
            }
            positions = true;
            continue;
        }
        if let Some(o) = l.strip_prefix("ob=") {
            object = o.split_whitespace().next().unwrap_or("");
            continue;
        }
        let mut w = l.split_whitespace();
        let Some(first) = w.next() else { continue };
        address = if first == "*" {
            address
        } else if let Some(hex) = first.strip_prefix("0x") {
            u64::from_str_radix(hex, 16).map_err(|e| format!("`{l}`: {e}"))?
        } else if let Some(n) = first.strip_prefix('+') {
            address + n.parse::<u64>().map_err(|e| format!("`{l}`: {e}"))?
        } else if let Some(n) = first.strip_prefix('-') {
            address - n.parse::<u64>().map_err(|e| format!("`{l}`: {e}"))?
        } else {
            // Headers (`key:`), names (`fn=`, `calls=`, …) and comments.
            continue;
        };
        let _line = w.next();
        let ir: u64 = w
            .next()
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| format!("`{l}`: no Ir"))?;
        if ir > 0 {
            lines.insert((object, address / CACHE_LINE));
        }
    }
    if !positions {
        return Err("no `positions:` header (was --dump-instr=yes given?)".into());
    }
    if lines.is_empty() {
        return Err("instructions were counted but no cost line was read".into());
    }
    Ok(lines.len() as u64)
}

/// Runs `--measure <scenario>` under callgrind and reads its total.
fn count(valgrind: &Path, exe: &Path, s: &Scenario, dir: &Path) -> Result<Figure, String> {
    let out_file = dir.join(format!("callgrind.{}.{}.out", s.name, std::process::id()));
    // A bare environment: the stack's start moves with the environment's size, and with it
    // the alignment memcpy meets, which moves the count by a few instructions per bundle.
    let output = Command::new(valgrind)
        .env_clear()
        .arg("--tool=callgrind")
        .arg("--collect-atstart=no")
        .arg(format!("--toggle-collect={MEASURED_SYMBOL}"))
        .arg("--dump-instr=yes")
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg(exe)
        .args(["--measure", s.name])
        .output()
        .map_err(|e| format!("valgrind: {e}"))?;
    let text = std::fs::read_to_string(&out_file);
    let _ = std::fs::remove_file(&out_file);
    if !output.status.success() {
        return Err(format!(
            "{} under callgrind failed ({}):\n{}{}",
            s.name,
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let text = text.map_err(|e| format!("{}: {}: {e}", s.name, out_file.display()))?;
    // `totals:` (or `summary:`) lists the events in order; Ir is the first and only one here.
    let ir = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .ok_or_else(|| format!("{}: no totals in {}", s.name, out_file.display()))?;
    if ir == 0 {
        return Err(format!(
            "{}: callgrind counted nothing: is {MEASURED_SYMBOL} still a symbol of its own?",
            s.name
        ));
    }
    let code_lines = code_lines(&text).map_err(|e| format!("{}: {e}", s.name))?;
    Ok(Figure {
        name: s.name.to_string(),
        ir,
        bundles: u64::from(BUNDLES),
        code_lines: Some(code_lines),
    })
}

/// The tools that made the figures: instruction counts move with the compiler too.
fn toolchain() -> String {
    let version = |tool: &str| {
        Command::new(tool)
            .arg("--version")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|| format!("{tool} unknown"))
    };
    format!("{}, {}", version("rustc"), version("valgrind"))
}

/// A block of figures: a `recorded: TOOLCHAIN` line, then `scenario ir bundles code_lines`
/// lines.
fn block(figures: &[Figure]) -> String {
    let mut text = format!("recorded: {}\n", toolchain());
    for f in figures {
        write!(text, "{} {} {}", f.name, f.ir, f.bundles).unwrap();
        if let Some(n) = f.code_lines {
            write!(text, " {n}").unwrap();
        }
        text.push('\n');
    }
    text
}

/// The last block of a figures file (`--out` writes one, `--record` appends one), and the
/// toolchain it names.
fn read_last_block(path: &Path) -> Result<(String, Vec<Figure>), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let Some(start) = text.rfind("recorded: ") else {
        return Err(format!("{}: no `recorded:` block", path.display()));
    };
    let mut lines = text[start..].lines();
    let toolchain = lines.next().unwrap()["recorded: ".len()..].to_string();
    let figures = lines
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut w = l.split_whitespace();
            let bad = || {
                format!(
                    "{}: not `scenario ir bundles [code_lines]`: {l}",
                    path.display()
                )
            };
            let name = w.next().ok_or_else(bad)?.to_string();
            let ir = w.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
            let bundles = w.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
            let code_lines = match w.next() {
                Some(v) => Some(v.parse().map_err(|_| bad())?),
                None => None,
            };
            Ok(Figure {
                name,
                ir,
                bundles,
                code_lines,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok((toolchain, figures))
}

/// Thousands separated by commas, one decimal.
fn grouped(v: f64) -> String {
    let whole = format!("{:.1}", v);
    let (int, frac) = whole.split_once('.').unwrap();
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    format!("{out}.{frac}")
}

fn table(label: &str, figures: &[Figure], baseline: Option<(&str, &[Figure])>) -> String {
    let mut t = format!(
        "request path, instructions per bundle (callgrind Ir over {BUNDLES} bundles after {WARM_UP})\n"
    );
    measure_table(&mut t, label, figures, baseline, grouped, |f| {
        Some(f.per_bundle())
    });
    t.push_str(
        "\nrequest path, code executed: distinct 64-byte lines of machine code (what a core whose \
         caches other work emptied fetches again for a bundle)\n",
    );
    let whole = |v: f64| grouped(v).trim_end_matches(".0").to_string();
    measure_table(&mut t, label, figures, baseline, whole, |f| {
        f.code_lines.map(|n| n as f64)
    });
    t
}

/// One figure per scenario, beside the baseline's when there is one (the ratio and the change
/// in %); `-` where a side lacks the figure.
fn measure_table(
    t: &mut String,
    label: &str,
    figures: &[Figure],
    baseline: Option<(&str, &[Figure])>,
    format: impl Fn(f64) -> String,
    value: impl Fn(&Figure) -> Option<f64>,
) {
    let show = |v: Option<f64>| v.map_or("-".to_string(), &format);
    let Some((base_label, base)) = baseline else {
        writeln!(t, "{:<16} {:>16}", "scenario", label).unwrap();
        for f in figures {
            writeln!(t, "{:<16} {:>16}", f.name, show(value(f))).unwrap();
        }
        return;
    };
    writeln!(
        t,
        "{:<16} {:>16} {:>16} {:>8} {:>9}",
        "scenario", label, base_label, "ratio", "change"
    )
    .unwrap();
    for f in figures {
        let now = value(f);
        let before = base.iter().find(|b| b.name == f.name).and_then(&value);
        match (now, before) {
            (Some(now), Some(before)) => writeln!(
                t,
                "{:<16} {:>16} {:>16} {:>8.4} {:>+8.2}%",
                f.name,
                format(now),
                format(before),
                now / before,
                (now / before - 1.0) * 100.0
            ),
            _ => writeln!(
                t,
                "{:<16} {:>16} {:>16} {:>8} {:>9}",
                f.name,
                show(now),
                show(before),
                "-",
                "-"
            ),
        }
        .unwrap();
    }
}

/// valgrind's path, from `PATH`.
fn valgrind() -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("valgrind"))
        .find(|p| {
            Command::new(p)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

#[derive(Default)]
struct Args {
    measure: Option<String>,
    out: Option<PathBuf>,
    record: Option<PathBuf>,
    baseline: Option<PathBuf>,
    baseline_label: Option<String>,
    label: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args::default();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            // What `cargo bench` passes to every bench binary.
            "--bench" => {}
            "--measure" => a.measure = Some(value()?),
            "--out" => a.out = Some(value()?.into()),
            "--record" => a.record = Some(value()?.into()),
            "--baseline" => a.baseline = Some(value()?.into()),
            "--baseline-label" => a.baseline_label = Some(value()?),
            "--label" => a.label = Some(value()?),
            _ => {
                return Err(format!(
                    "unknown argument {arg} (see benches/request_path.rs)"
                ));
            }
        }
    }
    Ok(a)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("request_path: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(name) = &args.measure {
        let Some(s) = SCENARIOS.iter().find(|s| s.name == name) else {
            eprintln!("request_path: no scenario {name}");
            return ExitCode::from(2);
        };
        drive(s, BUNDLES);
        return ExitCode::SUCCESS;
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("request_path: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), String> {
    // Read first: a baseline that cannot be read fails before minutes under valgrind.
    let baseline = match &args.baseline {
        Some(path) => Some(read_last_block(path).map_err(|e| format!("baseline {e}"))?),
        None => None,
    };
    let Some(valgrind) = valgrind() else {
        // The path still runs, natively, so a broken bench shows even here.
        for s in &SCENARIOS {
            drive(s, BUNDLES);
        }
        println!(
            "request_path: valgrind is not installed (apt-get install valgrind): the path ran, \
             no instructions counted"
        );
        if std::env::var_os("CI").is_some() {
            return Err("CI is set but valgrind is missing: .ci/run installs it".into());
        }
        return Ok(());
    };
    let exe = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    let dir = std::env::temp_dir();
    let figures = SCENARIOS
        .iter()
        .map(|s| count(&valgrind, &exe, s, &dir))
        .collect::<Result<Vec<_>, String>>()?;
    if let Some(path) = &args.out {
        std::fs::write(path, block(&figures)).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if let Some(path) = &args.record {
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        std::io::Write::write_all(&mut file, format!("\n{}", block(&figures)).as_bytes())
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let label = args.label.as_deref().unwrap_or("this build");
    let base_label = args.baseline_label.as_deref().unwrap_or("baseline");
    print!(
        "{}",
        table(
            label,
            &figures,
            baseline.as_ref().map(|(_, b)| (base_label, b.as_slice()))
        )
    );
    if let Some((tools, _)) = &baseline {
        let now = toolchain();
        if *tools != now {
            println!("note: {base_label} was counted with {tools}; this build with {now}");
        }
    }
    Ok(())
}
