//! The plan a relay starts from: the config (a file with its command-line overrides, or the
//! embedded default), the relay's spec, the host checked against both, and the memory budget,
//! each printed. `run --check` stops here.
//!
//! What it is NOT: the start. Nothing is spawned, and nothing stays bound (addresses are
//! checked with a bind to port 0); every error is one the operator
//! fixes in the config, the flags or the host.

use std::path::Path;

use crate::budget::{Budget, BudgetInputs};
use crate::config::{Config, Overrides, Resolve};
use crate::probe;
use crate::relay::Spec;

/// The checked config and the spec derived from it.
pub struct Plan {
    pub cfg: Config,
    pub spec: Spec,
    /// The `[tenants_from]` document the tenants came from.
    pub tenants_doc: Option<String>,
    /// The config file and the files it names, as they were when read: an edit saved while
    /// the relay starts (a fetch, the host's checks and the pool's connects take seconds) is
    /// a change once it serves.
    pub watch: Option<super::watch::Watch>,
}

/// Why the relay does not start: what, and whether a later start of the same config may
/// pass (the host or the network said no for now) or not (the config or a flag must change).
pub struct Refusal {
    pub why: String,
    pub for_now: bool,
}

impl From<String> for Refusal {
    fn from(why: String) -> Refusal {
        Refusal {
            why,
            for_now: false,
        }
    }
}

impl Refusal {
    fn for_now(why: String) -> Refusal {
        Refusal { why, for_now: true }
    }
}

/// Loads, checks and prints the plan. `no_metrics` turns the metrics off whatever the config
/// says; `hlog` is whether the histograms are to be written, which needs them on.
pub fn plan(
    path: Option<&Path>,
    overrides: &Overrides,
    no_metrics: bool,
    hlog: bool,
) -> Result<Plan, Refusal> {
    let mut watch = path.map(|p| super::watch::Watch::new(p.to_path_buf()));
    let mut cfg = load_config(path, overrides)?;
    if let Some(w) = &mut watch {
        w.also(cfg.admin_token_file.clone());
    }
    // Tenants from an endpoint: no valid document, no start (the relay would not know whom to
    // serve). An endpoint that does not answer may later; a document it serves wrong will not.
    let tenants_doc = match cfg.tenants_from.clone() {
        Some(from) => {
            let doc = super::fetch::get(&from).map_err(|e| {
                Refusal::for_now(format!("tenants_from: {e}; no tenants, so not starting"))
            })?;
            // The endpoint's to mend, not the config's: a later start may pass.
            cfg = cfg
                .with_tenants_json(&doc, &from.url)
                .map_err(|e| Refusal::for_now(e.to_string()))?;
            println!(
                "tenants from {}: {} listed{}, polled every {} ms",
                from.url,
                cfg.tenants.list.len(),
                if cfg.tenants.default.is_some() {
                    " and a default"
                } else {
                    ""
                },
                from.every_ms
            );
            Some(doc)
        }
        None => None,
    };
    for w in &cfg.warnings {
        println!("warning: {w}");
    }
    let spec = Spec::from_config(&cfg).map_err(|e| e.to_string())?;
    let spec = Spec {
        metrics: spec.metrics && !no_metrics,
        ..spec
    };
    crate::runtime::check_spec(&spec).map_err(|e| e.to_string())?;
    print_regions(&cfg);
    if !spec.metrics && hlog {
        return Err("--hlog-dir writes the metrics' histograms, which are off \
                    (--no-metrics or [admin] metrics = false)"
            .to_string()
            .into());
    }
    let report = probe::check(&cfg).map_err(|e| {
        if e.for_now() {
            Refusal::for_now(e.to_string())
        } else {
            Refusal::from(e.to_string())
        }
    })?;
    println!("{report}");
    // Addresses networking may still be bringing up (or a boot that has not put the egress
    // routes back yet).
    check_addresses(&cfg).map_err(Refusal::for_now)?;
    println!("{}", super::quota_store::check_line(&cfg));
    if !cfg.intake.trusted_proxies.is_empty() {
        // Whose word on the client the relay takes: worth an operator's look at every start.
        let list: Vec<String> = cfg
            .intake
            .trusted_proxies
            .iter()
            .map(|c| c.to_string())
            .collect();
        println!(
            "intake: trusted proxies {}: a request from one is from the address its last \
             X-Forwarded-For ends in",
            list.join(", ")
        );
    }
    print_budget(&cfg, &spec);
    Ok(Plan {
        cfg,
        spec,
        tenants_doc,
        watch,
    })
}

/// The listeners' addresses and the local egress addresses are this host's: a bind to port 0
/// of each (nothing is left bound). A listener elsewhere would fail the start; an egress
/// address elsewhere would leave its every pair failing to connect.
pub(super) fn check_addresses(cfg: &Config) -> Result<(), String> {
    check_new_addresses(None, cfg)
}

/// As [`check_addresses`] for a reload of `running` to `next` (through
/// [`Shared::with_host_check`](crate::config::Shared::with_host_check)): only the addresses
/// `next` adds, so an address gone from the host since the start does not block every later
/// reload, and a large pool is not bound again each time.
pub(super) fn check_reload_addresses(running: &Config, next: &Config) -> Result<(), String> {
    check_new_addresses(Some(running), next)
}

fn listeners(cfg: &Config) -> Vec<(String, std::net::SocketAddr)> {
    cfg.intake
        .rotating
        .map(|a| ("intake.rotating".to_string(), a))
        .into_iter()
        .chain(
            cfg.regions
                .iter()
                .enumerate()
                .filter_map(|(i, r)| r.pinned.map(|a| (format!("region[{i}].pinned"), a))),
        )
        .chain(cfg.admin.map(|a| ("admin.listen".to_string(), a)))
        .collect()
}

fn check_new_addresses(running: Option<&Config>, cfg: &Config) -> Result<(), String> {
    let had: Vec<std::net::SocketAddr> = running
        .map(|r| listeners(r).into_iter().map(|(_, a)| a).collect())
        .unwrap_or_default();
    for (key, addr) in listeners(cfg) {
        if had.iter().any(|a| a.ip() == addr.ip()) {
            continue;
        }
        if let Some((_, e)) = probe::unbindable_sockets(&[addr]).pop() {
            return Err(format!(
                "{key}: {} is not an address of this host ({e}); listen on one of its \
                 addresses, or a wildcard (0.0.0.0, [::])",
                addr.ip()
            ));
        }
    }
    let old: std::collections::HashSet<std::net::IpAddr> = running
        .map(|r| r.egress.local_addresses().into_iter().collect())
        .unwrap_or_default();
    let local: Vec<std::net::IpAddr> = cfg
        .egress
        .local_addresses()
        .into_iter()
        .filter(|ip| !old.contains(ip))
        .collect();
    let bad = probe::unbindable(&local);
    if !bad.is_empty() {
        let shown: Vec<String> = bad
            .iter()
            .take(3)
            .map(|(ip, e)| format!("{ip} ({e})"))
            .collect();
        return Err(format!(
            "{} of {} {}egress addresses are not local: {}{}; make them this host's with \
             `bundle-relay egress-ip --config FILE | sh` (as root)",
            bad.len(),
            local.len(),
            if running.is_some() { "new " } else { "" },
            shown.join(", "),
            if bad.len() > 3 { ", ..." } else { "" }
        ));
    }
    Ok(())
}

/// The embedded default, unresolved, with the overrides that hold without a file: a stop's
/// `--unready-ms` is not the file's shape.
fn embedded(overrides: &Overrides) -> Config {
    let mut cfg = Config::embedded_default();
    if let Some(ms) = overrides.unready_ms {
        cfg.intake.unready_ms = ms;
    }
    cfg
}

/// The config at `path` with `overrides`, or without a path the embedded default (which the
/// overrides made to change a file may not touch; `--tenants` and `--unready-ms` may).
fn load_config(path: Option<&Path>, overrides: &Overrides) -> Result<Config, Refusal> {
    let cfg = match path {
        Some(p) => Config::load_overridden(p, Resolve::Now, overrides),
        None if (
            overrides.resolve.len(),
            &overrides.ca_file,
            &overrides.egress,
            &overrides.egress_slice,
        ) != (0, &None, &None, &None) =>
        {
            return Err(
                "--resolve, --ca-file, --egress and --egress-slice change a --config file; give one"
                    .to_string()
                    .into(),
            );
        }
        None => {
            println!("no --config: using the embedded default (Jito mainnet, 8 regions)");
            let mut cfg = embedded(overrides);
            cfg.regions
                .iter_mut()
                .try_for_each(|r| r.resolve())
                .and_then(|()| match &overrides.tenants {
                    Some(doc) => cfg.with_tenants_json(doc, "--tenants"),
                    None => Ok(cfg),
                })
        }
    };
    cfg.map_err(|e| Refusal {
        why: e.to_string(),
        for_now: e.transient,
    })
}

fn print_regions(cfg: &Config) {
    if let Some(s) = cfg.egress.slice {
        println!(
            "egress slice {}/{}: sources {} to {} of the {} listed",
            s.k,
            s.n,
            s.first + 1,
            s.first + cfg.egress.sources.len(),
            s.pool
        );
    }
    for line in egress_groups(cfg) {
        println!("{line}");
    }
    for r in &cfg.regions {
        let how = if r.tls {
            format!("TLS, SNI {}", r.server_name())
        } else {
            "plaintext".to_string()
        };
        println!(
            "region {}: {}:{} -> {:?} ({how}, {} ms per pair)",
            r.name, r.host, r.port, r.addrs, r.interval_ms
        );
    }
    if let Some(key) = &cfg.auth {
        println!(
            "searcher authentication: as {} to every region's engine (nothing but the auth calls goes to a region until it holds a token)",
            key.pubkey_b58()
        );
    }
}

/// Tenants named per group line, before "and N more": the plan is read by a person.
const GROUP_TENANTS_SHOWN: usize = 8;

/// One line per egress group, then the shared addresses: this relay's sources in it (first …
/// last, in list order) and the tenants that send through it. Nothing without groups.
fn egress_groups(cfg: &Config) -> Vec<String> {
    let e = &cfg.egress;
    if e.groups.is_empty() {
        return Vec::new();
    }
    let mut tenants: Vec<Vec<&str>> = vec![Vec::new(); e.groups.len() + 1];
    let policies = cfg
        .tenants
        .default
        .iter()
        .map(|p| (crate::config::DEFAULT_TENANT_NAME, p))
        .chain(
            cfg.tenants
                .list
                .iter()
                .map(|t| (t.name.as_str(), &t.policy)),
        );
    for (name, p) in policies {
        let id = match &p.egress {
            None => Some(0),
            Some(g) => e.groups.iter().position(|x| x == g).map(|i| i + 1),
        };
        if let Some(id) = id {
            tenants[id].push(name);
        }
    }
    let mut first_last: Vec<Option<(usize, usize)>> = vec![None; e.groups.len() + 1];
    for i in 0..e.sources.len() {
        let g = usize::from(e.group_of(i));
        first_last[g] = Some(first_last[g].map_or((i, i), |(f, _)| (f, i)));
    }
    let counts = e.group_counts();
    let ids = (1..=e.groups.len()).chain(std::iter::once(0));
    ids.map(|id| {
        let sources = match first_last[id] {
            Some((f, l)) if f == l => format!("1 source ({})", e.sources[f]),
            Some((f, l)) => format!(
                "{} sources ({} … {})",
                counts[id], e.sources[f], e.sources[l]
            ),
            None if e.slice.is_some() => "0 sources in this relay's slice".to_string(),
            None => "0 sources".to_string(),
        };
        let names = &tenants[id];
        let who = match names.len() {
            0 => "no tenant".to_string(),
            n if n <= GROUP_TENANTS_SHOWN => format!("tenants {}", names.join(", ")),
            n => format!(
                "tenants {} and {} more",
                names[..GROUP_TENANTS_SHOWN].join(", "),
                n - GROUP_TENANTS_SHOWN
            ),
        };
        if id == 0 {
            format!("egress shared (in no group): {sources}, {who}")
        } else {
            format!("egress group {}: {sources}, {who}", e.group_name(id as u8))
        }
    })
    .collect()
}

fn print_budget(cfg: &Config, spec: &Spec) {
    let budget = Budget::new(BudgetInputs::of(spec));
    println!("{budget}");
    println!(
        "{} threads, {} sources x {} regions = {} pairs, {} open files needed",
        spec.threads,
        spec.sources.len(),
        spec.regions.len(),
        spec.sources.len() * spec.regions.len(),
        cfg.fds_needed()
    );
    println!("{}", reactor_line(spec));
}

/// How the reactor threads wait, and what poll mode costs, said where the operator reads the
/// plan: a polling thread keeps its core busy whether bundles come or not.
fn reactor_line(spec: &Spec) -> String {
    use crate::config::ReactorMode;
    let pinned = if spec.pin_threads {
        // Where the threads will land: the process's affinity (a unit's CPUAffinity=) as the
        // reactor reads it.
        let cpus: Vec<String> = (0..spec.threads)
            .map(|t| crate::reactor::pinned_cpu(t).map_or("?".into(), |c| c.to_string()))
            .collect();
        format!("thread i pinned to CPU {}", cpus.join(", "))
    } else {
        "not pinned".to_string()
    };
    match (spec.reactor.mode, spec.reactor.napi_busy_poll_us) {
        (ReactorMode::Sleep, _) => {
            format!("reactor: sleep mode (threads wait in io_uring_enter), {pinned}")
        }
        (ReactorMode::Poll, napi) => format!(
            "reactor: poll mode, {pinned}: each of the {} threads keeps its core 100% busy, \
             idle or not; NAPI busy polling {}",
            spec.threads,
            if napi == 0 {
                "off".to_string()
            } else {
                format!("{napi} µs")
            }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_shows_each_egress_groups_sources_and_tenants_then_the_shared_ones() {
        let text = "[[region]]\nname = \"ny\"\nhost = \"127.0.0.15\"\nport = 10000\n\
                    [egress]\naddresses = [\"127.1.0.0/24\"]\n\
                    [[egress.group]]\nname = \"alpha\"\naddresses = [\"127.1.0.0/28\"]\n\
                    [[egress.group]]\nname = \"beta\"\naddresses = [\"127.1.0.20\"]\n\
                    [[tenant]]\nname = \"alpha-bot\"\nkeys = [\"a\"]\negress = \"alpha\"\n\
                    [[tenant]]\nname = \"other\"\nkeys = [\"o\"]\n";
        let cfg = Config::parse(text, "plan.toml", Resolve::Deferred).unwrap();
        assert_eq!(
            egress_groups(&cfg),
            [
                "egress group alpha: 16 sources (127.1.0.0 … 127.1.0.15), tenants alpha-bot",
                "egress group beta: 1 source (127.1.0.20), no tenant",
                "egress shared (in no group): 239 sources (127.1.0.16 … 127.1.0.255), tenants \
                 other",
            ]
        );
        let plain = text.split("[[egress.group]]").next().unwrap();
        let cfg = Config::parse(plain, "plan.toml", Resolve::Deferred).unwrap();
        assert!(egress_groups(&cfg).is_empty());
    }

    #[test]
    fn the_unready_ms_flag_holds_without_a_config_file_too() {
        let flag = Overrides {
            unready_ms: Some(3_000),
            ..Overrides::default()
        };
        assert_eq!(embedded(&flag).intake.unready_ms, 3_000);
        assert_eq!(
            embedded(&Overrides::default()).intake.unready_ms,
            Config::embedded_default().intake.unready_ms
        );
    }

    #[test]
    fn pinned_threads_are_shown_on_the_cpus_the_process_affinity_gives_them() {
        let region = crate::relay::RegionSpec::plain("ny", "127.0.0.15:10000".parse().unwrap());
        let mut spec = Spec::local(vec![region], vec!["127.1.0.1".parse().unwrap()]);
        spec.threads = 3;
        spec.pin_threads = false;
        assert!(reactor_line(&spec).ends_with("not pinned"));
        spec.pin_threads = true;
        let last = (0..libc::CPU_SETSIZE as usize)
            .rev()
            .find(|&c| cpu_allowed(c))
            .expect("a CPU this test may run on");
        // As under a unit's CPUAffinity= of that one CPU: every thread lands on it.
        let line = std::thread::spawn(move || {
            confine_to(last);
            reactor_line(&spec)
        })
        .join()
        .unwrap();
        assert!(
            line.ends_with(&format!("thread i pinned to CPU {last}, {last}, {last}")),
            "{line}"
        );
    }

    fn cpu_allowed(cpu: usize) -> bool {
        // SAFETY: a zeroed set filled by the kernel for the calling thread, then read.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0
                && libc::CPU_ISSET(cpu, &set)
        }
    }

    fn confine_to(cpu: usize) {
        // SAFETY: a zeroed set with one bit, for the calling thread.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
                0
            );
        }
    }
}
