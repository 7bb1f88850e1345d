//! Tenants: the decision table of `relay::tenancy`, one test per row, and what each policy
//! does (regions, rate, share, max age), driven through one thread's dispatcher without
//! sockets; then slots across reloads, and a seeded race of reloads against requests.

use crate::dispatcher_support;

use std::sync::Arc;

use bundle_relay::clock::{Instant, TickRate};
use bundle_relay::config::{Config, Found, Resolve, Shared, TenantWriter};
use bundle_relay::metrics::tenants::{Refused, TenantStats};
use bundle_relay::relay::Spec;
use bundle_relay::relay::intake::{Port, Verdict};
use bundle_relay::relay::tenancy::{Claim, Tenancy, Via};
use bundle_relay::relay::tuning::Tuning;

use dispatcher_support::{MS, Sim, body};

/// Two regions, `a` (pinned 18081) and `b` (pinned 18082), the rotating port 18080, one
/// source, and `tenants` (TOML) after them (`tenants_max` lines, and lines ending ` # root`, go first).
fn config(tenants: &str) -> String {
    let (root, tables): (Vec<&str>, Vec<&str>) = tenants
        .lines()
        .partition(|l| l.starts_with("tenants_max") || l.ends_with(" # root"));
    let (root, tenants) = (root.join("\n"), tables.join("\n"));
    format!(
        r#"
{root}
threads = 1
arena_slots = 16
[intake]
rotating = "127.0.0.1:18080"
[[region]]
name = "a"
host = "127.0.0.1"
port = 9
tls = false
pinned = "127.0.0.1:18081"
[[region]]
name = "b"
host = "127.0.0.2"
port = 9
tls = false
pinned = "127.0.0.1:18082"
[egress]
addresses = ["127.0.0.1"]
[admin]
listen = "off"
{tenants}
"#
    )
}

/// A scratch folder of its own for a test named `name`, and `relay.toml` in it holding `text`.
fn config_file(name: &str, text: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("br-tenants-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("relay.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

fn parse(tenants: &str) -> Result<Config, String> {
    Config::parse(&config(tenants), "tenants.toml", Resolve::Now).map_err(|e| e.to_string())
}

fn sim(tenants: &str) -> Sim {
    let cfg = parse(tenants).unwrap();
    let spec = Spec::from_config(&cfg).unwrap();
    Sim::connected(&spec, 0, None, Instant(1_000 * MS))
}

fn key(k: &'static str) -> Claim<'static> {
    Claim {
        key: Some(k.as_bytes()),
        ..Claim::LOOPBACK
    }
}

fn from(ip: &str) -> Claim<'static> {
    Claim {
        key: None,
        peer: ip.parse().unwrap(),
        via: Via::Direct,
        arrived_on: None,
    }
}

const NOW: Instant = Instant(1_000 * MS);

/// Bundles kept a minute, so a region's one pair, paced at a second, can send a whole
/// arena of them within their max age (for tests of room, not of pace: a bundle the pool
/// cannot send in time is refused, `backlog`).
const KEPT: &str = "bundle_max_age_ms = 60000 # root\n";

const ALPHA: &str = r#"
[[tenant]]
name = "alpha"
keys = ["alpha-key"]
regions = ["a"]
in_flight_max = 1
"#;

// ---- the decision table ----

/// A relay whose default tenant routes by leader (pairs at 50 ms, `more` after the tenant),
/// its first call (the tip accounts) sent and answered at `start`: the sim, its spec, `start`.
fn leader_routed(more: &str) -> (Sim, Spec, Instant) {
    let text = config(&format!("[default_tenant]\nrotating = \"leader\"{more}"))
        .replace("port = 9\n", "port = 9\ninterval_ms = 50\n");
    let cfg = Config::parse(&text, "tenants.toml", Resolve::Now).unwrap();
    let spec = Spec::from_config(&cfg).unwrap();
    let start = Instant(1_000 * MS);
    let mut t = Sim::connected(&spec, 0, None, start);
    assert!(t.send(start));
    t.answer(start);
    (t, spec, start)
}

/// A leader poll that comes due while every pair is paced waits for the soonest pair to be
/// ready, not a whole poll period: meanwhile every bundle routed by leader falls back to the
/// soonest region.
#[test]
fn a_leader_poll_that_finds_every_pair_paced_goes_when_the_soonest_is_ready() {
    // The pair's first call is the tip accounts; the first poll finds no pair free.
    let (mut t, _, start) = leader_routed("");
    // A bundle takes the pair just before the poll comes due 400 ms on: paced for 50 ms.
    let busy = Instant(start.0 + 399 * MS);
    assert_eq!(t.post_bundle(1, busy), Verdict::Admitted);
    assert!(t.send(busy));
    t.answer(busy);
    let due = Instant(start.0 + 400 * MS);
    assert!(!t.send(due), "the pair is paced");
    let ready = Instant(busy.0 + 51 * MS);
    assert!(
        t.send(ready),
        "the poll goes once the pair is ready, not 400 ms on"
    );
    assert_eq!(t.totals().leader_polls, 1);
}

/// A reload to a shorter leader poll period applies from now, not from the poll the old
/// period scheduled: 60 s to 400 ms polls within 400 ms, not a minute on.
#[test]
fn a_reload_to_a_shorter_leader_poll_polls_within_the_new_period() {
    // The tip accounts take the pair; the first poll finds none free and is due a minute on.
    let (mut t, spec, start) = leader_routed("\n[leader]\npoll_ms = 60000");
    let later = Instant(start.0 + 100 * MS);
    assert!(!t.send(later), "nothing due for a minute");
    let mut tuning = Tuning::of_spec(&spec);
    tuning.leader.poll_ms = 400;
    t.d.retune(&tuning, later);
    assert!(!t.send(Instant(later.0 + 399 * MS)));
    assert!(
        t.send(Instant(later.0 + 401 * MS)),
        "a poll within the new period"
    );
    assert_eq!(t.totals().leader_polls, 1);
}

#[test]
fn tenant_found_and_enabled_gets_its_policy() {
    let mut s = sim(ALPHA);
    let v = s.post_as(Port::Pinned(0), key("alpha-key"), "", &body(1), NOW);
    assert_eq!(v, Verdict::Admitted, "{}", s.response());
    // Its policy: one bundle in flight at most.
    let v = s.post_as(Port::Pinned(0), key("alpha-key"), "", &body(2), NOW);
    assert_eq!(v, Verdict::RefusedTenant);
    let r = s.response();
    assert!(r.starts_with("HTTP/1.1 429"), "{r}");
    assert!(r.contains("Retry-After: 1"), "{r}");
    assert!(
        r.contains("-32097")
            && r.contains("in-flight ceiling is reached: 1 bundles in flight, in_flight_max 1"),
        "{r}"
    );
    let t = s.d.tenancy();
    let slot = t.table().entries()[0].slot;
    let c = t.stats().counts(slot);
    assert_eq!((c.admitted, c.in_flight), (1, 1));
    assert_eq!(c.refused[Refused::Share as usize], 1);
}

#[test]
fn tenant_not_found_with_a_default_enabled_gets_the_default() {
    let mut s = sim(&format!("{ALPHA}\n[default_tenant]\nregions = [\"b\"]\n"));
    let v = s.post_as(Port::Rotating, from("10.9.9.9"), "", &body(1), NOW);
    assert_eq!(v, Verdict::Admitted, "{}", s.response());
    let t = s.d.tenancy();
    assert_eq!(t.stats().counts(0).admitted, 1, "counted under the default");
    // The default's own policy: its regions, not alpha's.
    let v = s.post_as(Port::Pinned(0), from("10.9.9.9"), "", &body(2), NOW);
    assert_eq!(v, Verdict::RefusedTenant);
    assert!(
        s.response()
            .contains("region a is not one of this tenant's regions")
    );
}

#[test]
fn tenant_not_found_without_a_default_is_401_naming_the_missing_key() {
    let mut s = sim(ALPHA);
    let v = s.post_as(Port::Pinned(0), Claim::LOOPBACK, "", &body(1), NOW);
    assert_eq!(v, Verdict::RefusedTenant);
    let r = s.response();
    assert!(r.starts_with("HTTP/1.1 401"), "{r}");
    assert!(r.contains("-32001"), "{r}");
    assert!(
        r.contains("x-jito-auth header or the uuid query parameter"),
        "{r}"
    );
    // A key that names no tenant says so, without echoing it.
    s.post_as(Port::Pinned(0), key("who-am-i"), "", &body(2), NOW);
    let r = s.response();
    assert!(
        r.starts_with("HTTP/1.1 401") && r.contains("unknown key"),
        "{r}"
    );
    assert!(!r.contains("who-am-i"), "{r}");
    assert_eq!(s.d.tenancy().stats().unknown_count(), 2);
    assert_eq!(s.totals().admitted, 0);
}

#[test]
fn tenant_disabled_is_403_even_when_a_default_exists() {
    let mut s =
        sim("[[tenant]]\nname = \"off\"\nkeys = [\"k\"]\nenabled = false\n\n[default_tenant]\n");
    let v = s.post_as(Port::Pinned(0), key("k"), "", &body(1), NOW);
    assert_eq!(v, Verdict::RefusedTenant);
    let r = s.response();
    assert!(r.starts_with("HTTP/1.1 403"), "{r}");
    assert!(r.contains("tenant off is disabled"), "{r}");
    // Anyone else is the default's.
    let v = s.post_as(Port::Pinned(0), Claim::LOOPBACK, "", &body(2), NOW);
    assert_eq!(v, Verdict::Admitted, "{}", s.response());
}

#[test]
fn pinned_port_outside_the_tenants_regions_is_403_naming_the_region() {
    let mut s = sim(ALPHA);
    let v = s.post_as(Port::Pinned(1), key("alpha-key"), "", &body(1), NOW);
    assert_eq!(v, Verdict::RefusedTenant);
    let r = s.response();
    assert!(r.starts_with("HTTP/1.1 403"), "{r}");
    assert!(
        r.contains("region b is not one of this tenant's regions"),
        "{r}"
    );
    let t = s.d.tenancy();
    let slot = t.table().entries()[0].slot;
    assert_eq!(t.stats().counts(slot).refused[Refused::Region as usize], 1);
}

#[test]
fn a_region_named_in_the_path_is_as_that_regions_pinned_port() {
    let mut s = sim(&format!(
        "{KEPT}[[tenant]]\nname = \"alpha\"\nkeys = [\"alpha-key\"]\nregions = [\"a\"]\n"
    ));
    let alpha = key("alpha-key");
    // The name as the config gives it, or in capitals (a URL typed by hand).
    for (i, path) in [
        "/a/api/v1/bundles",
        "/a/api/v1/sendBundle",
        "/A/api/v1/bundles",
    ]
    .iter()
    .enumerate()
    {
        let v = s.post_to(Port::Rotating, path, alpha, "", &body(1 + i as u64), NOW);
        assert_eq!(v, Verdict::Admitted, "{path}: {}", s.response());
    }
    // Region b by path: refused as on b's pinned port, naming b.
    let v = s.post_to(
        Port::Rotating,
        "/b/api/v1/bundles",
        alpha,
        "",
        &body(13),
        NOW,
    );
    assert_eq!(v, Verdict::RefusedTenant);
    let r = s.response();
    assert!(
        r.starts_with("HTTP/1.1 403") && r.contains("region b is not one of this tenant's regions"),
        "{r}"
    );
    // A region's own pinned port takes its own name in the path.
    let v = s.post_to(
        Port::Pinned(0),
        "/a/api/v1/bundles",
        alpha,
        "",
        &body(4),
        NOW,
    );
    assert_eq!(v, Verdict::Admitted, "{}", s.response());
}

#[test]
fn a_path_naming_no_region_of_the_relay_or_another_ports_region_is_404_saying_which() {
    let mut s = sim(ALPHA);
    let alpha = key("alpha-key");
    let v = s.post_to(
        Port::Rotating,
        "/tokyo/api/v1/bundles",
        alpha,
        "",
        &body(1),
        NOW,
    );
    assert_eq!(v, Verdict::Invalid);
    let r = s.response();
    assert!(
        r.starts_with("HTTP/1.1 404")
            && r.contains("no region \"tokyo\" among the regions this relay runs (a, b)"),
        "{r}"
    );
    let v = s.post_to(
        Port::Pinned(0),
        "/b/api/v1/bundles",
        alpha,
        "",
        &body(2),
        NOW,
    );
    assert_eq!(v, Verdict::Invalid);
    let r = s.response();
    assert!(
        r.starts_with("HTTP/1.1 404")
            && r.contains("this port is region a's; send to region b through its own pinned port, or the rotating port with its name in the path"),
        "{r}"
    );
    // Not a JSON-RPC path under a region either: the plain 404, which names the region form.
    let v = s.post_to(
        Port::Rotating,
        "/a/api/v2/bundles",
        alpha,
        "",
        &body(3),
        NOW,
    );
    assert_eq!(v, Verdict::Invalid);
    let r = s.response();
    assert!(
        r.starts_with("HTTP/1.1 404") && r.contains("/<region>/api/v1/"),
        "{r}"
    );
    assert_eq!(s.totals().admitted, 0);
}

#[test]
fn a_tenant_by_port_is_told_by_the_port_a_request_came_to_not_the_region_in_its_path() {
    // vip is region b's pinned port (18082); rot is the rotating port; no default.
    let mut s = sim(
        "[[tenant]]\nname = \"vip\"\nports = [18082]\n[[tenant]]\nname = \"rot\"\nports = [18080]\n",
    );
    let anyone = Claim::LOOPBACK;
    // Naming b in the path on the rotating port is rot's request for region b, not vip's.
    let v = s.post_to(
        Port::Rotating,
        "/b/api/v1/bundles",
        anyone,
        "",
        &body(1),
        NOW,
    );
    assert_eq!(v, Verdict::Admitted, "{}", s.response());
    let admitted = |s: &Sim, n: &str| {
        let t = s.d.tenancy();
        let e = t.table().entries().iter().find(|e| e.name == n).unwrap();
        t.stats().counts(e.slot).admitted
    };
    assert_eq!((admitted(&s, "rot"), admitted(&s, "vip")), (1, 0));
    // On b's own port it is vip's, path or not.
    let v = s.post_to(
        Port::Pinned(1),
        "/b/api/v1/bundles",
        anyone,
        "",
        &body(2),
        NOW,
    );
    assert_eq!(v, Verdict::Admitted, "{}", s.response());
    assert_eq!((admitted(&s, "rot"), admitted(&s, "vip")), (1, 1));
}

#[test]
fn transactions_and_other_calls_take_a_region_path_too() {
    let mut s = sim("[[tenant]]\nname = \"alpha\"\nkeys = [\"alpha-key\"]\nregions = [\"a\"]\n");
    let alpha = key("alpha-key");
    let (txs, _, _) = crate::intake_support::bundle(7, 1);
    let tx = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"sendTransaction","params":["{}",{{"encoding":"base64"}}]}}"#,
        txs[0]
    );
    let v = s.post_to(
        Port::Rotating,
        "/a/api/v1/transactions",
        alpha,
        "",
        &tx,
        NOW,
    );
    assert_eq!(v, Verdict::Admitted, "{}", s.response());
    let v = s.post_to(
        Port::Rotating,
        "/b/api/v1/transactions",
        alpha,
        "",
        &tx,
        NOW,
    );
    assert_eq!(v, Verdict::RefusedTenant, "{}", s.response());
    let ask = r#"{"jsonrpc":"2.0","id":2,"method":"getTipAccounts","params":[]}"#;
    let v = s.post_to(
        Port::Rotating,
        "/a/api/v1/getTipAccounts",
        alpha,
        "",
        ask,
        NOW,
    );
    assert_eq!(v, Verdict::Answered, "{}", s.response());
}

#[test]
fn policy_with_no_regions_is_refused_as_invalid_config() {
    let e = parse("[[tenant]]\nname = \"x\"\nkeys = [\"k\"]\nregions = []\n").unwrap_err();
    assert!(
        e.contains("tenant[0].regions") && e.contains("no regions"),
        "{e}"
    );
    let e = parse("[default_tenant]\nregions = []\n").unwrap_err();
    assert!(e.contains("default_tenant.regions"), "{e}");
}

#[test]
fn policy_naming_a_region_that_does_not_exist_is_refused_naming_the_regions() {
    let e = parse("[[tenant]]\nname = \"x\"\nkeys = [\"k\"]\nregions = [\"c\"]\n").unwrap_err();
    assert!(
        e.contains("tenant[0].regions[0]") && e.contains("a, b"),
        "{e}"
    );
}

#[test]
fn a_tenant_nothing_can_recognise_is_refused() {
    let e = parse("[[tenant]]\nname = \"x\"\n").unwrap_err();
    assert!(e.contains("cannot be recognised"), "{e}");
}

#[test]
fn two_tenants_of_one_name_are_refused_naming_the_first() {
    let e = parse(
        "[[tenant]]\nname = \"x\"\nkeys = [\"1\"]\n[[tenant]]\nname = \"y\"\nkeys = [\"2\"]\n\
         [[tenant]]\nname = \"x\"\nkeys = [\"3\"]\n",
    )
    .unwrap_err();
    assert!(
        e.contains("tenant[2].name: \"x\" is already the name of tenant[0]"),
        "{e}"
    );
}

#[test]
fn a_key_given_to_two_tenants_is_refused_naming_where_the_second_gives_it() {
    // sha256("test"), once as the key itself and once as its digest in capitals.
    let e = parse(
        "[[tenant]]\nname = \"x\"\nkeys = [\"test\"]\n[[tenant]]\nname = \"y\"\nkeys = [\"2\"]\n\
         key_sha256 = [\"9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08\"]\n",
    )
    .unwrap_err();
    assert!(
        e.contains("tenant[1].key_sha256[0]: key sha256:")
            && e.contains("is also given to tenant[0] (x)"),
        "{e}"
    );
}

#[test]
fn one_key_for_two_tenants_is_refused_without_showing_the_key() {
    let e = parse(
        "[[tenant]]\nname = \"x\"\nkeys = [\"secret-1\"]\n[[tenant]]\nname = \"y\"\nkeys = [\"secret-1\"]\n",
    )
    .unwrap_err();
    assert!(
        e.contains("tenant[1].keys") && e.contains("tenant[0] (x)"),
        "{e}"
    );
    assert!(!e.contains("secret-1"), "{e}");
}

#[test]
fn floors_that_add_up_past_the_arena_are_refused() {
    let e = parse(
        "[[tenant]]\nname = \"x\"\nkeys = [\"1\"]\nin_flight_min = 10\n[[tenant]]\nname = \"y\"\nkeys = [\"2\"]\nin_flight_min = 10\n",
    )
    .unwrap_err();
    assert!(e.contains("add up to 20") && e.contains("16"), "{e}");
}

#[test]
fn a_port_that_is_no_listener_is_refused_naming_the_listeners() {
    let e = parse("[[tenant]]\nname = \"x\"\nports = [9999]\n").unwrap_err();
    assert!(e.contains("18080 (intake.rotating)"), "{e}");
}

#[test]
fn tenants_from_an_endpoint_and_from_the_file_together_are_refused() {
    let e = parse(
        "[[tenant]]\nname = \"x\"\nkeys = [\"k\"]\n[tenants_from]\nurl = \"http://127.0.0.1:9300/t\"\n",
    )
    .unwrap_err();
    assert!(
        e.contains("tenants_from") && e.contains("one provider"),
        "{e}"
    );
}

#[test]
fn a_tenants_document_is_checked_by_the_files_rules_naming_the_key() {
    let cfg = parse("[tenants_from]\nurl = \"http://127.0.0.1:9300/t\"\n").unwrap();
    let ok = cfg
        .with_tenants_json(r#"{"tenant": [{"name": "a", "keys": ["k"]}]}"#, "doc")
        .unwrap();
    assert_eq!(ok.tenants.list[0].name, "a");
    let e = cfg
        .with_tenants_json(
            r#"{"tenant": [{"name": "a", "keys": ["k"], "rate": "x"}]}"#,
            "doc",
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("1:52: tenant[0].rate: invalid type: string \"x\", expected u32"),
        "{e}"
    );
    assert!(!e.contains("at line"), "{e}");
    let e = cfg
        .with_tenants_json(r#"{"tenant": [{"name": "a", "regions": []}]}"#, "doc")
        .unwrap_err()
        .to_string();
    assert!(e.contains("tenant[0]"), "{e}");
}

// ---- what a policy does ----

#[test]
fn a_tenant_past_its_rate_is_429_with_jitos_wording_and_the_wait() {
    let mut s = sim("[[tenant]]\nname = \"r\"\nkeys = [\"k\"]\nrate = 2\nrate_burst = 1\n");
    assert_eq!(
        s.post_as(Port::Rotating, key("k"), "", &body(1), NOW),
        Verdict::Admitted
    );
    let later = Instant(NOW.0 + 100 * MS);
    assert_eq!(
        s.post_as(Port::Rotating, key("k"), "", &body(2), later),
        Verdict::RefusedTenant
    );
    let r = s.response();
    assert!(r.starts_with("HTTP/1.1 429"), "{r}");
    assert!(r.contains("Retry-After: 1\r\n"), "{r}");
    assert!(
        r.contains(
            "Rate limit exceeded. Limit: 2 per second for txn requests. Back-off triggered: Retry after 400ms"
        ),
        "{r}"
    );
    // Half a second after the first, the rate allows the next.
    let v = s.post_as(
        Port::Rotating,
        key("k"),
        "",
        &body(3),
        Instant(NOW.0 + 500 * MS),
    );
    assert_eq!(v, Verdict::Admitted, "{}", s.response());
}

#[test]
fn a_tenant_with_nothing_left_on_lease_of_its_global_rate_is_429_with_jitos_wording() {
    let mut s = sim(
        "[[tenant]]\nname = \"g\"\nkeys = [\"k\"]\nglobal_rate = 40\n\
         [quota]\nredis = \"127.0.0.1:6379\"\n",
    );
    let slot = s.d.tenancy().table().entries()[0].slot;
    // Nothing leased yet: refused, in the per-relay rate's words, naming the global rate.
    assert_eq!(
        s.post_as(Port::Rotating, key("k"), "", &body(1), NOW),
        Verdict::RefusedTenant
    );
    let r = s.response();
    assert!(r.starts_with("HTTP/1.1 429"), "{r}");
    assert!(r.contains("Retry-After: 1\r\n"), "{r}");
    assert!(
        r.contains("Rate limit exceeded. Limit: 40 per second for txn requests."),
        "{r}"
    );
    // Two leased: two admitted, then refused again until the lease is topped up.
    s.d.tenancy().stats().add_leased(slot, 2);
    for n in 2..4 {
        let v = s.post_as(Port::Rotating, key("k"), "", &body(n), NOW);
        assert_eq!(v, Verdict::Admitted, "{}", s.response());
    }
    assert_eq!(
        s.post_as(Port::Rotating, key("k"), "", &body(4), NOW),
        Verdict::RefusedTenant
    );
    let c = s.d.tenancy().stats().counts(slot);
    assert_eq!(c.refused[Refused::Global as usize], 2);
    assert_eq!((c.admitted, c.leased), (2, 0));
    // More is coming this second (the lease thread asks as soon as the balance runs low): a
    // wait of a lease's round trip, not to the next second.
    let wait = |r: &str| -> u64 {
        r.split("Retry after ")
            .nth(1)
            .unwrap()
            .split("ms")
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(wait(&s.response()) <= 10, "{}", s.response());
    // The tenant's share of this second is spent: to the next second.
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
    };
    let before = now_ms();
    s.d.tenancy().stats().set_lease_spent(slot, before / 1000);
    s.post_as(Port::Rotating, key("k"), "", &body(5), NOW);
    let after = now_ms();
    let w = wait(&s.response());
    if before / 1000 == after / 1000 {
        let (most, least) = (1000 - before % 1000, 1000 - after % 1000);
        assert!(
            (least..=most).contains(&w),
            "{w} ms, not to the next second"
        );
    }
}

#[test]
fn a_tenant_is_recognised_by_key_else_source_block_else_port() {
    let tenants = r#"
[[tenant]]
name = "by-key"
keys = ["k1"]
[[tenant]]
name = "by-block"
cidrs = ["10.0.0.0/8"]
[[tenant]]
name = "by-longer-block"
cidrs = ["10.1.0.0/16"]
[[tenant]]
name = "by-port"
ports = [18082]
[[tenant]]
name = "by-mapped-block"
cidrs = ["::ffff:172.16.0.0/108"]
"#;
    let cfg = parse(tenants).unwrap();
    let spec = Spec::from_config(&cfg).unwrap();
    let name = |claim: Claim<'_>, listener: usize| match spec
        .tenants
        .identify(claim.key, claim.peer, listener)
    {
        Found::Tenant(e) => e.name.clone(),
        Found::Default(_) => "default".into(),
        Found::Unknown { .. } => "unknown".into(),
    };
    let k1 = Claim {
        key: Some(b"k1"),
        ..from("10.1.2.3")
    };
    assert_eq!(name(k1, 2), "by-key", "a key wins over block and port");
    assert_eq!(name(from("10.1.2.3"), 2), "by-longer-block");
    assert_eq!(name(from("10.2.0.1"), 2), "by-block");
    assert_eq!(name(from("::ffff:10.2.0.1"), 0), "by-block", "v4-mapped");
    assert_eq!(name(from("192.168.0.1"), 2), "by-port");
    assert_eq!(name(from("192.168.0.1"), 1), "unknown");
    assert_eq!(
        name(from("172.16.9.9"), 1),
        "by-mapped-block",
        "an IPv4-mapped block is the IPv4 block"
    );
    // A key no tenant has is as no key: a bot that only changed its URL still sends its own
    // Jito UUID, which is no key of the relay's.
    let jito_uuid = Claim {
        key: Some(b"5b6f1c7e-0000-4000-8000-000000000000"),
        ..from("10.2.0.1")
    };
    assert_eq!(name(jito_uuid, 2), "by-block");
}

/// `desk` is 203.0.113.0/24; no default, so anyone else is 401. 127.0.0.1 is a trusted proxy.
const BEHIND_PROXY: &str = r#"
bundle_max_age_ms = 60000 # root
[[tenant]]
name = "desk"
cidrs = ["203.0.113.0/24"]
"#;

fn sim_behind_proxy() -> Sim {
    let text = config(BEHIND_PROXY).replace(
        "rotating = \"127.0.0.1:18080\"",
        "rotating = \"127.0.0.1:18080\"\ntrusted_proxies = [\"127.0.0.1\", \"10.8.0.0/16\"]",
    );
    let cfg = Config::parse(&text, "tenants.toml", Resolve::Now).unwrap();
    let spec = Spec::from_config(&cfg).unwrap();
    Sim::connected(&spec, 0, None, NOW)
}

/// A request from `peer` carrying `forwarded` as its last `X-Forwarded-For`, marked as the
/// reactor marks it: through a proxy when the relay trusts `peer`.
fn through<'a>(s: &Sim, peer: &str, forwarded: Option<&'a str>) -> Claim<'a> {
    let peer = peer.parse().unwrap();
    Claim {
        key: None,
        peer,
        via: if s.d.tenancy().trusts(peer) {
            Via::Proxy {
                forwarded_for: forwarded.map(str::as_bytes),
            }
        } else {
            Via::Direct
        },
        arrived_on: None,
    }
}

#[test]
fn a_client_behind_a_trusted_proxy_is_the_tenant_its_forwarded_address_names() {
    let mut s = sim_behind_proxy();
    for (peer, forwarded) in [
        ("127.0.0.1", "203.0.113.9"),
        ("127.0.0.1", "198.51.100.1, 203.0.113.9"),
        ("10.8.3.4", "203.0.113.9:40123"),
        ("::ffff:127.0.0.1", "::ffff:203.0.113.9"),
    ] {
        let claim = through(&s, peer, Some(forwarded));
        let v = s.post_as(Port::Rotating, claim, "", &body(1), NOW);
        assert_eq!(
            v,
            Verdict::Admitted,
            "{peer} for {forwarded}: {}",
            s.response()
        );
    }
    // The proxy's own address is no tenant's: a client it forwards from elsewhere is 401.
    let claim = through(&s, "127.0.0.1", Some("198.51.100.1"));
    let v = s.post_as(Port::Rotating, claim, "", &body(2), NOW);
    assert_eq!(v, Verdict::RefusedTenant, "{}", s.response());
    assert!(s.response().starts_with("HTTP/1.1 401"), "{}", s.response());
}

#[test]
fn a_forwarded_address_from_a_peer_not_trusted_is_ignored() {
    let mut s = sim_behind_proxy();
    // A client claiming desk's address from its own: still itself, so 401.
    let claim = through(&s, "198.51.100.1", Some("203.0.113.9"));
    let v = s.post_as(Port::Rotating, claim, "", &body(1), NOW);
    assert_eq!(v, Verdict::RefusedTenant, "{}", s.response());
    // A relay that trusts no proxy ignores the header from anyone, loopback included.
    let s = sim(BEHIND_PROXY);
    assert!(!s.d.tenancy().trusts("127.0.0.1".parse().unwrap()));
}

#[test]
fn a_trusted_proxy_that_names_no_client_is_400_saying_how_to_fix_it() {
    let mut s = sim_behind_proxy();
    let claim = through(&s, "127.0.0.1", None);
    let v = s.post_as(Port::Rotating, claim, "", &body(1), NOW);
    assert_eq!(v, Verdict::Invalid);
    let r = s.response();
    assert!(r.starts_with("HTTP/1.1 400"), "{r}");
    assert!(r.contains("-32600"), "{r}");
    assert!(
        r.contains(
            "127.0.0.1, a trusted proxy (intake.trusted_proxies), without an X-Forwarded-For"
        ) && r.contains("option forwardfor"),
        "{r}"
    );
    assert_eq!(s.totals().admitted, 0);
}

#[test]
fn a_trusted_proxy_naming_no_client_is_logged_for_the_operator_once_every_10_s() {
    let mut s = sim_behind_proxy();
    let logged = |s: &Sim| {
        let mut lines = Vec::new();
        s.d.log().drain(|l| lines.push(l.to_string()));
        lines
    };
    for i in 0..3 {
        let claim = through(&s, "127.0.0.1", None);
        s.post_as(Port::Rotating, claim, "", &body(i), NOW);
    }
    let lines = logged(&s);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains(
            "through trusted proxy 127.0.0.1 named no client (no X-Forwarded-For): answered 400"
        ) && lines[0].contains("option forwardfor")
            && lines[0].contains("intake.trusted_proxies"),
        "{lines:?}"
    );
    let later = Instant(NOW.0 + 10_000 * MS);
    let claim = through(&s, "10.8.0.1", Some("unknown"));
    s.post_as(Port::Rotating, claim, "", &body(9), later);
    let lines = logged(&s);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("through trusted proxy 10.8.0.1 named no client (an X-Forwarded-For not ending in an address), and 2 more since the last line"),
        "{lines:?}"
    );
}

#[test]
fn a_trusted_proxy_whose_forwarded_value_is_no_address_is_400_naming_the_value() {
    let mut s = sim_behind_proxy();
    for (value, shown) in [
        ("unknown", "\\\"unknown\\\""),
        ("203.0.113.9, ", "\\\"203.0.113.9, \\\""),
        ("\"x\"", "\\\"\\\"x\\\"\\\""),
    ] {
        let claim = through(&s, "10.8.0.1", Some(value));
        let v = s.post_as(Port::Rotating, claim, "", &body(1), NOW);
        assert_eq!(v, Verdict::Invalid, "{value}");
        let r = s.response();
        assert!(r.starts_with("HTTP/1.1 400"), "{r}");
        assert!(
            r.contains("X-Forwarded-For header from trusted proxy 10.8.0.1 does not end in the client's address: ")
                && r.contains(shown),
            "{value}: {r}"
        );
    }
}

#[test]
fn a_reload_that_trusts_a_proxy_applies_to_the_next_table_and_one_that_drops_it_too() {
    let plain = config(BEHIND_PROXY);
    let trusting = plain.replace(
        "rotating = \"127.0.0.1:18080\"",
        "rotating = \"127.0.0.1:18080\"\ntrusted_proxies = [\"127.0.0.1\"]",
    );
    let (dir, path) = config_file("proxies", &plain);
    let shared = Shared::from_file(&path, Resolve::Now).unwrap();
    let proxy = "127.0.0.1".parse().unwrap();
    assert!(!shared.load().tenants.trusts(proxy));
    std::fs::write(&path, &trusting).unwrap();
    assert_eq!(shared.reload().unwrap(), 2);
    assert!(shared.load().tenants.trusts(proxy));
    std::fs::write(&path, &plain).unwrap();
    assert_eq!(shared.reload().unwrap(), 3);
    assert!(!shared.load().tenants.trusts(proxy));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_uuid_query_parameter_is_a_key_like_the_header() {
    let mut s = sim(ALPHA);
    let v = s.post_as(
        Port::Pinned(0),
        Claim::LOOPBACK,
        "bundleOnly=true&uuid=alpha-key",
        &body(1),
        NOW,
    );
    assert_eq!(v, Verdict::Admitted, "{}", s.response());
}

#[test]
fn a_floor_stays_free_for_its_tenant_while_another_tenant_floods() {
    // 16 slots: b reserves 6, so a (no floor) can hold at most the other 10.
    let mut s = sim(&format!(
        "{KEPT}[[tenant]]\nname = \"a\"\nkeys = [\"ka\"]\n[[tenant]]\nname = \"b\"\nkeys = [\"kb\"]\nin_flight_min = 6\n",
    ));
    let mut admitted = 0;
    for i in 0..40 {
        if s.post_as(Port::Rotating, key("ka"), "", &body(i), NOW) == Verdict::Admitted {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 10);
    for i in 0..6 {
        let v = s.post_as(Port::Rotating, key("kb"), "", &body(100 + i), NOW);
        assert_eq!(v, Verdict::Admitted, "b's bundle {i}: {}", s.response());
    }
    assert_eq!(
        s.post_as(Port::Rotating, key("kb"), "", &body(200), NOW),
        Verdict::RefusedTenant,
        "past its floor, b shares what a holds"
    );
    assert!(
        s.response().contains(
            "in-flight room that tenants share past their floors is taken: this tenant holds 6 \
             bundles in flight, its floor in_flight_min 6"
        ),
        "{}",
        s.response()
    );
    assert!(s.d.check_accounting());
}

#[test]
fn a_tenant_back_within_its_floor_holds_nothing_of_the_pool_whichever_bundles_ended_first() {
    // 16 slots, a reserves 8: the pool is the other 8. Region b has no pair up, so a's bundles
    // wait and the oldest expire first.
    let mut s = sim(
        "[[tenant]]\nname = \"a\"\nkeys = [\"ka\"]\nregions = [\"b\"]\nin_flight_min = 8\nbundle_max_age_ms = 50\n\
         [[tenant]]\nname = \"b\"\nkeys = [\"kb\"]\nregions = [\"b\"]\n",
    );
    for i in 0..8 {
        assert_eq!(
            s.post_as(Port::Rotating, key("ka"), "", &body(i), NOW),
            Verdict::Admitted
        );
    }
    let later = Instant(NOW.0 + 40 * MS);
    assert_eq!(
        s.post_as(Port::Rotating, key("ka"), "", &body(8), later),
        Verdict::Admitted,
        "the ninth, past a's floor, from the pool"
    );
    // The eight inside the floor expire; the ninth, now within it, waits on.
    let now = Instant(NOW.0 + 60 * MS);
    s.d.dispatch(now);
    assert_eq!(s.totals().expired, 8);
    let stats = s.d.tenancy().stats().clone();
    assert_eq!(
        stats.beyond_floor(),
        0,
        "a holds 1 bundle, inside its floor of 8"
    );
    let mut admitted = 0;
    for i in 0..20 {
        if s.post_as(Port::Rotating, key("kb"), "", &body(100 + i), now) == Verdict::Admitted {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 8, "b holds the whole pool: {}", s.response());
    assert!(s.d.check_accounting());
}

#[test]
fn a_disabled_tenant_reserves_no_floor() {
    let mut s = sim(
        "[[tenant]]\nname = \"a\"\nkeys = [\"ka\"]\nregions = [\"b\"]\n\
         [[tenant]]\nname = \"off\"\nkeys = [\"koff\"]\nenabled = false\nin_flight_min = 10\n",
    );
    let mut admitted = 0;
    for i in 0..20 {
        if s.post_as(Port::Rotating, key("ka"), "", &body(i), NOW) == Verdict::Admitted {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 16, "a holds the whole arena: {}", s.response());
}

/// With no tenants (and with a tenant whose ceiling is the whole arena), the request that
/// finds the arena full meets the relay's in-flight cap: it is refused and counted as the
/// cap, not as a tenant ceiling naming an `in_flight_max` no config set.
#[test]
fn a_full_arena_is_the_in_flight_cap_not_a_tenants_ceiling_however_the_tenants_are_set() {
    for tenants in ["", "[[tenant]]\nname = \"r\"\nkeys = [\"k\"]\n"] {
        let mut s = sim(&format!("{KEPT}{tenants}"));
        let claim = if tenants.is_empty() {
            Claim::LOOPBACK
        } else {
            key("k")
        };
        for seed in 0..16 {
            assert_eq!(
                s.post_as(Port::Rotating, claim, "", &body(seed), NOW),
                Verdict::Admitted,
                "{}",
                s.response()
            );
        }
        assert_eq!(
            s.post_as(Port::Rotating, claim, "", &body(16), NOW),
            Verdict::RefusedCap,
            "{tenants:?}: {}",
            s.response()
        );
        let answer = s.response();
        assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
        assert!(!answer.contains("in_flight_max"), "{answer}");
    }
}

/// A request the relay refuses for want of room (the tenant's share full, the in-flight cap
/// reached) took nothing of the tenant's rate: the next one that finds room is not refused
/// for a rate it never used.
#[test]
fn a_request_refused_for_room_spends_none_of_the_tenants_rate() {
    let mut s = sim(
        "[[tenant]]\nname = \"r\"\nkeys = [\"k\"]\nregions = [\"a\"]\nrate = 2\nrate_burst = 2\nin_flight_max = 1\n",
    );
    assert_eq!(
        s.post_as(Port::Rotating, key("k"), "", &body(1), NOW),
        Verdict::Admitted
    );
    // Its share (one in flight) is full: refused, its rate untouched.
    assert_eq!(
        s.post_as(Port::Rotating, key("k"), "", &body(2), NOW),
        Verdict::RefusedTenant
    );
    assert!(
        s.response().contains("in-flight ceiling"),
        "{}",
        s.response()
    );
    // Its first bundle is delivered: its share is free again.
    assert!(s.send(NOW));
    s.answer(NOW);
    assert_eq!(s.totals().delivered, 1);
    let v = s.post_as(Port::Rotating, key("k"), "", &body(3), NOW);
    assert_eq!(
        v,
        Verdict::Admitted,
        "the second of its 2: {}",
        s.response()
    );
}

#[test]
fn a_tenants_own_max_age_expires_its_bundles_and_not_the_others() {
    let mut s = sim(
        "[[tenant]]\nname = \"short\"\nkeys = [\"ks\"]\nregions = [\"b\"]\nbundle_max_age_ms = 50\n[default_tenant]\nregions = [\"b\"]\n",
    );
    // Region b has no pair up: both bundles wait.
    assert_eq!(
        s.post_as(Port::Pinned(1), key("ks"), "", &body(1), NOW),
        Verdict::Admitted
    );
    assert_eq!(
        s.post_as(Port::Pinned(1), Claim::LOOPBACK, "", &body(2), NOW),
        Verdict::Admitted
    );
    s.d.dispatch(Instant(NOW.0 + 100 * MS));
    let t = s.totals();
    assert_eq!((t.expired, t.in_flight), (1, 1), "{t:?}");
    let tenancy = s.d.tenancy();
    let short = tenancy.table().entries()[0].slot;
    assert_eq!(tenancy.stats().counts(short).expired, 1);
    assert_eq!(tenancy.stats().in_flight(short), 0, "its share is back");
    assert_eq!(tenancy.stats().counts(0).expired, 0);
}

#[test]
fn a_bad_request_gives_its_share_back() {
    let mut s = sim(ALPHA);
    let bad = r#"{"jsonrpc":"2.0","id":1,"method":"sendBundle","params":[["AAAA"]]}"#;
    assert_eq!(
        s.post_as(Port::Pinned(0), key("alpha-key"), "", bad, NOW),
        Verdict::Invalid
    );
    let v = s.post_as(Port::Pinned(0), key("alpha-key"), "", &body(1), NOW);
    assert_eq!(v, Verdict::Admitted, "{}", s.response());
}

#[test]
fn a_key_is_shown_only_as_its_short_hash() {
    let cfg = parse(ALPHA).unwrap();
    let spec = Spec::from_config(&cfg).unwrap();
    let e = &spec.tenants.entries()[0];
    let line = e.describe(&["a".into(), "b".into()]);
    assert!(!line.contains("alpha-key"), "{line}");
    assert!(
        line.contains("keys sha256:") && line.contains("regions a"),
        "{line}"
    );
    assert!(!format!("{cfg:?}").contains("alpha-key"));
}

// ---- reloads ----

#[test]
fn a_tenant_keeps_its_slot_across_reloads_and_a_removed_ones_waits_for_its_bundles() {
    let two =
        "[[tenant]]\nname = \"x\"\nkeys = [\"1\"]\n[[tenant]]\nname = \"y\"\nkeys = [\"2\"]\n";
    let started = parse(&format!("tenants_max = 2\n{two}")).unwrap();
    let stats = TenantStats::new(2);
    let t1 = started.tenant_table(&started, None, &stats).unwrap();
    let slot = |t: &bundle_relay::config::TenantTable, n: &str| {
        t.entries().iter().find(|e| e.name == n).map(|e| e.slot)
    };
    let (x, y) = (slot(&t1, "x").unwrap(), slot(&t1, "y").unwrap());
    // y holds a bundle and is removed; z comes: no fresh slot is left, and y's is busy.
    assert!(stats.take_share(y, 0, 10, 10).is_ok());
    let next = parse(
        "tenants_max = 2\n[[tenant]]\nname = \"x\"\nkeys = [\"1\"]\n[[tenant]]\nname = \"z\"\nkeys = [\"3\"]\n",
    )
    .unwrap();
    let e = next.tenant_table(&started, Some(&t1), &stats).unwrap_err();
    assert!(e.contains("no tenant slot free for z"), "{e}");
    // Without z first: y's slot is retired while its bundle is in flight.
    let only_x = parse("tenants_max = 2\n[[tenant]]\nname = \"x\"\nkeys = [\"1\"]\n").unwrap();
    let t2 = only_x.tenant_table(&started, Some(&t1), &stats).unwrap();
    assert_eq!(slot(&t2, "x"), Some(x), "x keeps its slot");
    stats.release(y);
    let t3 = next.tenant_table(&started, Some(&t2), &stats).unwrap();
    assert_eq!(slot(&t3, "x"), Some(x));
    assert_eq!(
        slot(&t3, "z"),
        Some(y),
        "once y's bundle ended, z takes its slot"
    );
    assert_eq!(stats.counts(y).admitted, 0, "zeroed for z");
}

/// One tenant swapped for another in one reload while every slot is in use: the new tenant
/// gets the removed one's slot only once no thread can count into it any more. A thread still
/// on the table before (a reactor between two loops, a lease pass) counts the removed
/// tenant's request into that slot; the reload applies the removal first, waits for every
/// writer of the older tables to move on, then the addition, so none of those counts are the
/// new tenant's.
#[test]
fn a_removed_tenants_slot_goes_to_a_new_one_only_once_no_thread_can_count_into_it() {
    let (dir, path) = config_file(
        "swap",
        &config("tenants_max = 1\n[[tenant]]\nname = \"x\"\nkeys = [\"1\"]\n"),
    );
    let shared = Arc::new(Shared::from_file(&path, Resolve::Now).unwrap());
    let stats = shared.tenant_stats().clone();
    // A reactor admitting by generation 1's table.
    let reactor = TenantWriter::new(shared.load().tenants.clone());
    let x = reactor.entries()[0].slot;
    std::fs::write(
        &path,
        config("tenants_max = 1\n[[tenant]]\nname = \"y\"\nkeys = [\"2\"]\n"),
    )
    .unwrap();
    let reload = {
        let shared = shared.clone();
        std::thread::spawn(move || shared.reload().map_err(|e| e.to_string()))
    };
    // The reload is under way; the reactor has not applied it yet and counts one of x's.
    std::thread::sleep(std::time::Duration::from_millis(30));
    stats.admitted(x);
    drop(reactor);
    let generation = reload.join().unwrap().unwrap();
    let now = shared.load();
    let y = now.tenants.entries()[0].slot;
    assert_eq!(
        (now.tenants.entries()[0].name.as_str(), y),
        ("y", x),
        "y takes x's slot"
    );
    assert_eq!(stats.counts(y).admitted, 0, "none of x's counts are y's");
    assert_eq!(generation, 3, "x's removal, then y");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A swap that could not fit even once the removed tenants' slots are free (two new tenants,
/// one removed slot free and one holding a bundle) is refused whole: nothing is published,
/// not even the removals, and the tenants in force stay as they were.
#[test]
fn a_swap_that_cannot_fit_once_slots_free_is_refused_whole() {
    let three = "tenants_max = 3\n[[tenant]]\nname = \"x\"\nkeys = [\"1\"]\n[[tenant]]\nname = \"v\"\nkeys = [\"4\"]\n[[tenant]]\nname = \"w\"\nkeys = [\"0\"]\n";
    let (dir, path) = config_file("swap-too-many", &config(three));
    let shared = Shared::from_file(&path, Resolve::Now).unwrap();
    let _reactor = TenantWriter::new(shared.load().tenants.clone());
    let v = shared.load().tenants.entries()[1].slot;
    assert!(
        shared.tenant_stats().take_share(v, 0, 10, 10).is_ok(),
        "v holds a bundle"
    );
    std::fs::write(
        &path,
        config("tenants_max = 3\n[[tenant]]\nname = \"w\"\nkeys = [\"0\"]\n[[tenant]]\nname = \"y\"\nkeys = [\"2\"]\n[[tenant]]\nname = \"z\"\nkeys = [\"3\"]\n"),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let e = shared.reload().unwrap_err().to_string();
    assert!(e.contains("no tenant slot free"), "{e}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(1),
        "refused at once"
    );
    assert_eq!(shared.load().generation, 1, "nothing published");
    let names: Vec<String> = shared
        .load()
        .tenants
        .entries()
        .iter()
        .map(|e| e.name.clone())
        .collect();
    assert_eq!(names, ["x", "v", "w"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A dispatcher's thread is a writer of the table it admits by, so that table's tenants' slots
/// are not reused while it may count into them.
#[test]
fn a_dispatcher_is_a_writer_of_the_table_it_admits_by() {
    let s = sim(ALPHA);
    let table = s.d.tenancy().table().clone();
    assert!(table.is_written());
}

/// A relay started from config text `before` (in a scratch folder named `name`), whose file
/// then reads `after`: the reload is refused and the last good config stays; its error.
fn refused_reload(name: &str, before: &str, after: &str) -> String {
    let (dir, path) = config_file(name, before);
    let shared = Shared::from_file(&path, Resolve::Now).unwrap();
    std::fs::write(&path, after).unwrap();
    let e = shared.reload().unwrap_err().to_string();
    assert_eq!(shared.load().generation, 1, "the last good config stays");
    std::fs::remove_dir_all(&dir).unwrap();
    e
}

#[test]
fn a_reload_to_more_tenants_than_the_relay_started_with_room_for_is_refused() {
    let e = refused_reload(
        "max",
        &config("tenants_max = 1\n"),
        &config(
            "tenants_max = 1\n[[tenant]]\nname = \"x\"\nkeys = [\"1\"]\n[[tenant]]\nname = \"y\"\nkeys = [\"2\"]\n",
        ),
    );
    assert!(e.contains("tenants_max is 1"), "{e}");
}

/// `arena_slots` changes on restart: a reload's floors are held to the arena the relay runs,
/// not to the one its file asks for, or every tenant without a floor would find a shared pool
/// of nothing ("pool full") right after a "reloaded".
#[test]
fn a_reload_whose_floors_fit_only_the_arena_its_file_asks_for_is_refused_naming_both() {
    let two = "[[tenant]]\nname = \"x\"\nkeys = [\"1\"]\nin_flight_min = 12\n[[tenant]]\nname = \"y\"\nkeys = [\"2\"]\nin_flight_min = 12\n";
    let e = refused_reload(
        "floors-arena",
        &config(""),
        &config(two).replace("arena_slots = 16", "arena_slots = 64"),
    );
    assert!(
        e.contains("add up to 24") && e.contains("16 the relay started with"),
        "{e}"
    );
}

/// Listeners change on restart: a tenant told by a port the reload moves a listener to would
/// be told by no port at all while the old listener serves on.
#[test]
fn a_reload_naming_a_tenant_port_the_relay_does_not_listen_on_yet_is_refused_naming_it() {
    let by_port = "[[tenant]]\nname = \"x\"\nports = [18080]\n";
    let e = refused_reload(
        "port-moved",
        &config(by_port),
        &config(&by_port.replace("18080", "18090")).replace("127.0.0.1:18080", "127.0.0.1:18090"),
    );
    assert!(e.contains("tenant x") && e.contains("18090"), "{e}");
}

/// `tenants_max` changes on restart like the other sizes: a reload that raises it keeps the
/// running one and applies the rest of the edit, as every other restart-only key does.
#[test]
fn a_reload_that_raises_tenants_max_applies_the_rest_of_the_edit() {
    let one = "tenants_max = 2\n[[tenant]]\nname = \"x\"\nkeys = [\"1\"]\n";
    let (dir, path) = config_file("max-raised", &config(one));
    let shared = Shared::from_file(&path, Resolve::Now).unwrap();
    std::fs::write(
        &path,
        config(&format!(
            "{}bundle_max_age_ms = 900 # root\n",
            one.replace("tenants_max = 2", "tenants_max = 4")
        )),
    )
    .unwrap();
    assert_eq!(shared.reload().unwrap(), 2);
    let now = shared.load();
    assert_eq!(now.config.bundle_max_age_ms, 900);
    assert_eq!(now.tenants.entries().len(), 1);
    assert_eq!(
        shared.tenant_stats().tenants_max(),
        2,
        "the running table's size"
    );
    // More tenants than the running table holds: refused saying a restart applies the size.
    let three = (1..=3)
        .map(|i| format!("[[tenant]]\nname = \"t{i}\"\nkeys = [\"k{i}\"]\n"))
        .collect::<String>();
    std::fs::write(&path, config(&format!("tenants_max = 4\n{three}"))).unwrap();
    let e = shared.reload().unwrap_err().to_string();
    assert!(
        e.contains("3 tenants listed, more than the 2 of tenants_max the relay started with")
            && e.contains("its 4 applies at a restart"),
        "{e}"
    );
    assert_eq!(shared.load().generation, 2, "the last good config stays");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tenants_from_the_command_line_stay_across_a_reload_of_the_file() {
    let (dir, path) = config_file("static", &config(""));
    let overrides = bundle_relay::config::Overrides {
        tenants: Some(r#"{"tenant": [{"name": "cli", "keys": ["k"], "regions": ["b"]}]}"#.into()),
        ..Default::default()
    };
    let cfg = Config::load_overridden(&path, Resolve::Now, &overrides).unwrap();
    assert_eq!(cfg.tenants.list[0].name, "cli");
    let shared = Shared::new(cfg, Some(path.clone()), Resolve::Now).with_overrides(overrides);
    // The file changes (a longer max age); the tenants stay the command line's.
    std::fs::write(&path, config("bundle_max_age_ms = 900 # root")).unwrap();
    assert_eq!(shared.reload().unwrap(), 2);
    let now = shared.load();
    assert_eq!(now.config.bundle_max_age_ms, 900);
    assert_eq!(now.config.tenants.list.len(), 1);
    assert_eq!(now.config.tenants.list[0].name, "cli");
    assert!(now.config.tenants.default.is_none(), "no default crept in");
    // The file gains tenants of its own: two providers, refused, generation 2 kept.
    std::fs::write(&path, config("[default_tenant]\n")).unwrap();
    let e = shared.reload().unwrap_err().to_string();
    assert!(e.contains("one provider"), "{e}");
    assert_eq!(shared.load().generation, 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_old_tenant_table_is_freed_by_the_reloading_side_not_by_the_reactor_that_lets_go_last() {
    let (dir, path) = config_file("retired", &config(ALPHA));
    let shared = Shared::from_file(&path, Resolve::Now).unwrap();
    // A reactor applies generation 1's table, as Tenancy holds it.
    let applied = shared.load_full().tenants.clone();
    let old = Arc::downgrade(&applied);
    std::fs::write(&path, config("[default_tenant]\n")).unwrap();
    assert_eq!(shared.reload().unwrap(), 2);
    assert_eq!(
        shared.free_retired(),
        1,
        "the reactor still applies generation 1"
    );
    // It applies generation 2 and lets go: that drop frees nothing.
    drop(applied);
    assert!(old.upgrade().is_some(), "not freed by the reactor's drop");
    assert_eq!(shared.free_retired(), 0);
    assert!(old.upgrade().is_none(), "freed by the reloading side");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Reload workers swap two configs while request workers identify, check and release, each
/// on its own [`Tenancy`] following the snapshot as a reactor does. Seeded: the order of
/// claims and the pauses come from the seed. No torn read (a tenant's policy always is one
/// generation's whole), no share leaked, and the old snapshots are freed once no one reads.
#[test]
fn reloads_racing_requests_tear_nothing_lose_nothing_and_free_old_snapshots() {
    use rand::{Rng, SeedableRng, rngs::StdRng};
    use std::sync::atomic::{AtomicBool, Ordering};
    const SEED: u64 = 0x007e_4a47;
    // Each config gives every tenant one ceiling: 3 in a.toml, 5 in b.toml.
    let tenants = |ceiling: u32| {
        (0..50)
            .map(|i| {
                format!(
                    "[[tenant]]\nname = \"t{i}\"\nkeys = [\"key-{i}\"]\nin_flight_max = {ceiling}\n"
                )
            })
            .collect::<String>()
    };
    let dir = std::env::temp_dir().join(format!("br-tenants-race-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a.toml"), dir.join("b.toml"));
    std::fs::write(&a, config(&tenants(3))).unwrap();
    std::fs::write(&b, config(&tenants(5))).unwrap();
    let shared = Arc::new(Shared::from_file(&a, Resolve::Now).unwrap());
    let first = Arc::downgrade(&shared.load_full());
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for w in 0..3u64 {
        let (shared, stop) = (shared.clone(), stop.clone());
        workers.push(std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(SEED + w);
            let snap = shared.load_full();
            let mut generation = snap.generation;
            let mut tenancy = Tenancy::new(
                snap.tenants.clone(),
                shared.tenant_stats().clone(),
                TickRate::NANOS,
            );
            drop(snap);
            let (mut passed, mut checks) = (0u64, 0u64);
            while !stop.load(Ordering::Relaxed) || checks < 2_000 {
                let snap = shared.load();
                if snap.generation != generation {
                    generation = snap.generation;
                    tenancy.retune(snap.tenants.clone());
                }
                drop(snap);
                let keys: Vec<String> = (0..50).map(|i| format!("key-{i}")).collect();
                let k = &keys[rng.random_range(0..50)];
                let claim = Claim {
                    key: Some(k.as_bytes()),
                    ..Claim::LOOPBACK
                };
                // The table this thread applies is its generation's whole: generation 1 and
                // every odd one are a.toml (ceiling 3), the even ones b.toml (ceiling 5).
                let want = if generation % 2 == 1 { 3 } else { 5 };
                match tenancy.table().identify(claim.key, claim.peer, 0) {
                    Found::Tenant(e) => assert_eq!(
                        e.in_flight_max, want,
                        "{} in generation {generation}",
                        e.name
                    ),
                    other => panic!("{k} not found: {other:?}"),
                }
                checks += 1;
                if let Ok(pass) = tenancy.check(claim, Port::Rotating, Instant(checks)) {
                    passed += 1;
                    if rng.random_bool(0.5) {
                        std::thread::yield_now();
                    }
                    tenancy.release(&pass);
                }
            }
            (passed, checks)
        }));
    }
    let reloader = {
        let (shared, stop) = (shared.clone(), stop.clone());
        std::thread::spawn(move || {
            for i in 0..200 {
                shared
                    .reload_from(if i % 2 == 0 { &b } else { &a })
                    .unwrap();
            }
            stop.store(true, Ordering::Relaxed);
        })
    };
    reloader.join().unwrap();
    let mut passed = 0;
    for w in workers {
        passed += w.join().unwrap().0;
    }
    assert!(passed > 0);
    let stats = shared.tenant_stats();
    let snap = shared.load_full();
    for e in snap.tenants.entries() {
        assert_eq!(stats.in_flight(e.slot), 0, "{} leaked a share", e.name);
    }
    assert_eq!(stats.beyond_floor(), 0);
    assert_eq!(snap.generation, 201);
    // The readers are gone: the reloading side frees every snapshot it replaced, and none
    // was freed by a reader (each reader's drop of its table left the list holding one).
    assert_eq!(shared.free_retired(), 0, "no reader holds an old snapshot");
    drop(snap);
    assert!(
        first.upgrade().is_none(),
        "the first snapshot is freed once no reader holds it"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- bundle statuses, per tenant ----

const TWO: &str = r#"
[[tenant]]
name = "alpha"
keys = ["alpha-key"]
[[tenant]]
name = "beta"
keys = ["beta-key"]
"#;

fn status_of(s: &mut Sim, who: Claim<'_>, id: &str) -> String {
    let q = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"getInflightBundleStatuses","params":[["{id}"]]}}"#
    );
    s.post_as(Port::Pinned(0), who, "", &q, NOW);
    s.response()
}

#[test]
fn a_tenant_asking_for_another_tenants_bundle_gets_what_an_id_never_sent_here_gets() {
    let mut s = sim(TWO);
    let v = s.post_as(Port::Pinned(0), key("alpha-key"), "", &body(1), NOW);
    assert_eq!(v, Verdict::Admitted, "{}", s.response());
    let r = s.response();
    let id = r.split("\"result\":\"").nth(1).unwrap()[..64].to_string();
    assert!(status_of(&mut s, key("alpha-key"), &id).contains("\"status\":\"Pending\""));
    // Never the record's word: asked of an engine, as an id nobody sent here is, so neither
    // the answer nor its way says that another tenant sent it.
    let inflight = |id: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"getInflightBundleStatuses","params":[["{id}"]]}}"#
        )
    };
    for asked in [id.clone(), "cd".repeat(32)] {
        let v = s.post_as(Port::Pinned(0), key("beta-key"), "", &inflight(&asked), NOW);
        assert_eq!(v, Verdict::Deferred, "{asked}: {}", s.response());
    }
    let q = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"getBundleDelivery","params":["{id}"]}}"#);
    s.post_as(Port::Pinned(0), key("beta-key"), "", &q, NOW);
    assert!(s.response().contains("\"result\":null"), "{}", s.response());
    s.post_as(Port::Pinned(0), key("alpha-key"), "", &q, NOW);
    assert!(
        s.response().contains("\"tenant\":\"alpha\""),
        "{}",
        s.response()
    );
}

#[test]
fn a_status_query_from_no_tenant_is_401_as_a_bundle_is() {
    let mut s = sim(TWO);
    let r = status_of(&mut s, key("nobody"), &"ab".repeat(32));
    assert!(r.starts_with("HTTP/1.1 401"), "{r}");
    assert!(r.contains("-32001"), "{r}");
    assert_eq!(
        s.d.tenancy().stats().unknown_count(),
        1,
        "counted as a bundle's 401 is"
    );
}

#[test]
fn a_status_query_from_a_disabled_tenant_is_403_and_counted_as_a_bundle_is() {
    let mut s = sim("[[tenant]]\nname = \"off\"\nkeys = [\"off-key\"]\nenabled = false\n");
    let r = status_of(&mut s, key("off-key"), &"ab".repeat(32));
    assert!(r.starts_with("HTTP/1.1 403"), "{r}");
    let slot = match s
        .d
        .tenancy()
        .table()
        .identify(Some(b"off-key"), Claim::LOOPBACK.peer, 0)
    {
        Found::Tenant(e) => e.slot,
        _ => panic!("the tenant is listed"),
    };
    let c = s.d.tenancy().stats().counts(slot);
    assert_eq!(c.refused[Refused::Disabled as usize], 1, "{c:?}");
}

#[test]
fn a_reload_that_gives_a_tenant_a_global_rate_makes_it_take_from_its_lease() {
    let tenant = |global: &str| {
        config(&format!(
            "[[tenant]]\nname = \"g\"\nkeys = [\"k\"]\n{global}\n[quota]\nredis = \"127.0.0.1:6379\"\n"
        ))
    };
    let (dir, path) = config_file("global", &tenant(""));
    let shared = Shared::from_file(&path, Resolve::Now).unwrap();
    let mut t = Tenancy::new(
        shared.load().tenants.clone(),
        shared.tenant_stats().clone(),
        TickRate::NANOS,
    );
    // No global rate: nothing leased, and still admitted.
    let pass = t.check(key("k"), Port::Rotating, NOW).unwrap();
    t.release(&pass);
    std::fs::write(&path, tenant("global_rate = 50")).unwrap();
    shared.reload().unwrap();
    t.retune(shared.load().tenants.clone());
    let slot = t.table().entries()[0].slot;
    assert!(t.check(key("k"), Port::Rotating, NOW).is_err());
    t.stats().add_leased(slot, 1);
    let pass = t.check(key("k"), Port::Rotating, NOW).unwrap();
    t.release(&pass);
    // And taken away again: the lease is no longer asked.
    std::fs::write(&path, tenant("")).unwrap();
    shared.reload().unwrap();
    t.retune(shared.load().tenants.clone());
    assert!(t.check(key("k"), Port::Rotating, NOW).is_ok());
    let _ = std::fs::remove_dir_all(dir);
}

/// The bundle records a slot's earlier tenant left are not the next tenant's: a tenant that
/// takes a removed tenant's slot asks for that tenant's bundle and gets what an id never sent
/// here gets.
#[test]
fn a_tenant_given_a_removed_tenants_slot_cannot_read_that_tenants_bundles() {
    let one = |name: &str| {
        parse(&format!(
            "tenants_max = 1\n[[tenant]]\nname = \"{name}\"\nkeys = [\"k{name}\"]\n"
        ))
        .unwrap()
    };
    let started = one("x");
    let spec = Spec::from_config(&started).unwrap();
    let mut s = Sim::connected(&spec, 0, None, NOW);
    let v = s.post_as(Port::Pinned(0), key("kx"), "", &body(1), NOW);
    assert_eq!(v, Verdict::Admitted, "{}", s.response());
    let id = s.response().split("\"result\":\"").nth(1).unwrap()[..64].to_string();
    assert!(s.send(NOW));
    s.answer(NOW);
    assert_eq!(s.totals().delivered, 1);
    // x removed, then y added: y takes x's slot.
    let none = parse("tenants_max = 1\n").unwrap();
    let stats = &spec.tenant_stats;
    let t2 = none
        .tenant_table(&started, Some(&spec.tenants), stats)
        .unwrap();
    let t3 = one("y").tenant_table(&started, Some(&t2), stats).unwrap();
    assert_eq!(t3.entries()[0].slot, spec.tenants.entries()[0].slot);
    let mut tuning = Tuning::of_spec(&spec);
    tuning.tenants = Some(Arc::new(t3));
    s.d.retune(&tuning, NOW);
    let q = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"getBundleDelivery","params":["{id}"]}}"#);
    s.post_as(Port::Pinned(0), key("ky"), "", &q, NOW);
    assert!(s.response().contains("\"result\":null"), "{}", s.response());
    let v = s.post_as(
        Port::Pinned(0),
        key("ky"),
        "",
        &format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"getInflightBundleStatuses","params":[["{id}"]]}}"#
        ),
        NOW,
    );
    assert_eq!(v, Verdict::Deferred, "asked of an engine: {}", s.response());
}

/// A tenant removed and listed again before its slot went to another gets that slot back:
/// its bundles still in flight count against its ceiling, its rate goes on where it was, and
/// its counts and records are its own still.
#[test]
fn a_tenant_removed_and_listed_again_gets_its_slot_back_with_what_it_holds() {
    let a = "tenants_max = 4\n[[tenant]]\nname = \"a\"\nkeys = [\"1\"]\nin_flight_max = 4\n";
    let started = parse(a).unwrap();
    let stats = TenantStats::new(4);
    let t1 = started.tenant_table(&started, None, &stats).unwrap();
    let slot = t1.entries()[0].slot;
    for _ in 0..4 {
        assert!(stats.take_share(slot, 0, 4, 16).is_ok());
    }
    stats.admitted(slot);
    let t2 = parse("tenants_max = 4\n")
        .unwrap()
        .tenant_table(&started, Some(&t1), &stats)
        .unwrap();
    assert_eq!(
        t2.removed_holding(&stats).collect::<Vec<_>>(),
        [("a", slot)],
        "shown, while its bundles finish, as its"
    );
    let t3 = started.tenant_table(&started, Some(&t2), &stats).unwrap();
    assert_eq!(t3.entries()[0].slot, slot, "its own slot again");
    assert_eq!(t3.removed_holding(&stats).count(), 0);
    assert_eq!(
        stats.in_flight(slot),
        4,
        "its bundles in flight count still"
    );
    assert_eq!(stats.counts(slot).admitted, 1, "its counts are kept");
    assert!(
        stats.take_share(slot, 0, 4, 16).is_err(),
        "its ceiling holds what it had in flight"
    );
}

#[test]
fn a_tenant_named_by_a_pinned_port_of_a_region_it_may_not_use_is_refused() {
    // 18082 is region b's pinned port.
    let e = parse("[[tenant]]\nname = \"p\"\nports = [18082]\nregions = [\"a\"]\n").unwrap_err();
    assert!(
        e.contains("tenant[0].ports[0]: 18082 is region b's pinned port, which is not one of tenant \"p\"'s regions"),
        "{e}"
    );
    assert!(parse("[[tenant]]\nname = \"p\"\nports = [18082]\nregions = [\"b\"]\n").is_ok());
    assert!(parse("[[tenant]]\nname = \"p\"\nports = [18080]\nregions = [\"a\"]\n").is_ok());
}

/// A reload whose table is built but never published (refused after a new tenant took a
/// removed one's slot) leaves that slot as it was: its old tenant, listed again later, gets it
/// back with its counts.
#[test]
fn a_table_built_for_a_refused_reload_zeroes_no_slot() {
    let two = "tenants_max = 2\n[[tenant]]\nname = \"x\"\nkeys = [\"1\"]\n[[tenant]]\nname = \"y\"\nkeys = [\"2\"]\n";
    let started = parse(two).unwrap();
    let stats = TenantStats::new(2);
    let t1 = started.tenant_table(&started, None, &stats).unwrap();
    let x = t1.entries().iter().find(|e| e.name == "x").unwrap().slot;
    stats.admitted(x);
    let only_y = parse("tenants_max = 2\n[[tenant]]\nname = \"y\"\nkeys = [\"2\"]\n").unwrap();
    let t2 = only_y.tenant_table(&started, Some(&t1), &stats).unwrap();
    // z takes x's slot, then is refused: its region is one the relay did not start with.
    let with_z = config(
        "tenants_max = 2\n[[tenant]]\nname = \"y\"\nkeys = [\"2\"]\n[[tenant]]\nname = \"z\"\nkeys = [\"3\"]\nregions = [\"c\"]\n",
    )
    .replace(
        "[egress]",
        "[[region]]\nname = \"c\"\nhost = \"127.0.0.3\"\nport = 9\ntls = false\n[egress]",
    );
    let with_z = Config::parse(&with_z, "tenants.toml", Resolve::Now).unwrap();
    let e = with_z
        .next_tenant_table(&started, Some((&t2, u64::MAX)), &stats)
        .unwrap_err();
    assert!(
        e.why.contains("none of its regions is running"),
        "{}",
        e.why
    );
    assert_eq!(stats.counts(x).admitted, 1, "still x's");
    let t3 = started.tenant_table(&started, Some(&t2), &stats).unwrap();
    let back = t3.entries().iter().find(|e| e.name == "x").unwrap().slot;
    assert_eq!((back, stats.counts(x).admitted), (x, 1));
}

// ---- the ordered strategy against the pool's pace ----

/// Tenant `o`, rotating "ordered" over b then a, every pair up and idle at the returned
/// instant (the tip-account calls answered, an interval passed).
fn ordered() -> (Sim, Instant) {
    ordered_over(
        "[[tenant]]\nname = \"o\"\nkeys = [\"ko\"]\nregions = [\"b\", \"a\"]\nrotating = \"ordered\"\n",
        "",
    )
}

/// [`ordered`] for `tenants`, with `regions` ([[region]] tables) after the relay's two.
fn ordered_over(tenants: &str, regions: &str) -> (Sim, Instant) {
    use dispatcher_support::{answer_calls, connect_due, flush_calls};
    let text = config(tenants).replace("[egress]", &format!("{regions}[egress]"));
    let cfg = Config::parse(&text, "tenants.toml", Resolve::Now).unwrap();
    let spec = Spec::from_config(&cfg).unwrap();
    let mut s = Sim::connected(&spec, 0, None, NOW);
    connect_due(&mut s, NOW);
    let mut calls = Vec::new();
    s.d.dispatch(NOW);
    flush_calls(&mut s.d, NOW, &mut calls);
    answer_calls(&mut s.d, NOW, &mut calls);
    let now = Instant(NOW.0 + 1_001 * MS);
    s.d.run_timers(now);
    s.d.dispatch(now);
    (s, now)
}

/// (bundles admitted for a, for b).
fn admitted_by_region(s: &Sim) -> (u64, u64) {
    (
        s.stats.region(0).admitted.get(),
        s.stats.region(1).admitted.get(),
    )
}

#[test]
fn an_ordered_tenants_bundles_go_to_the_first_of_its_regions_while_it_sends_them_in_time() {
    let (mut s, now) = ordered();
    // b's one pair, paced at 1 s, sends two well within the 2 s max age: at once and at 1 s
    // (a third would leave at 2 s, in the last 1/64 of it: late).
    for seed in 0..2 {
        let v = s.post_as(Port::Rotating, key("ko"), "", &body(seed), now);
        assert_eq!(v, Verdict::Admitted, "{}", s.response());
    }
    assert_eq!(admitted_by_region(&s), (0, 2));
}

#[test]
fn an_ordered_tenants_bundle_goes_to_the_next_region_when_the_first_cannot_send_it_in_time() {
    let (mut s, now) = ordered();
    for seed in 0..4 {
        let v = s.post_as(Port::Rotating, key("ko"), "", &body(seed), now);
        assert_eq!(v, Verdict::Admitted, "{}", s.response());
    }
    assert_eq!(admitted_by_region(&s), (2, 2), "b's two, then a's");
    // Neither sends a fifth within its max age.
    let v = s.post_as(Port::Rotating, key("ko"), "", &body(4), now);
    assert_eq!(v, Verdict::RefusedBacklog, "{}", s.response());
    assert!(s.d.check_accounting());
}

/// The order decides among the regions in time: over b, c, a, the bundle b cannot send in time
/// goes to c, though a would send it as soon.
#[test]
fn an_ordered_tenants_late_bundle_goes_to_the_next_region_in_its_order_not_the_soonest() {
    let (mut s, now) = ordered_over(
        "[[tenant]]\nname = \"o\"\nkeys = [\"ko\"]\nregions = [\"b\", \"c\", \"a\"]\nrotating = \"ordered\"\n",
        "[[region]]\nname = \"c\"\nhost = \"127.0.0.3\"\nport = 9\ntls = false\n",
    );
    for seed in 0..3 {
        let v = s.post_as(Port::Rotating, key("ko"), "", &body(seed), now);
        assert_eq!(v, Verdict::Admitted, "{}", s.response());
    }
    let by_region = |r: usize| s.stats.region(r).admitted.get();
    assert_eq!(
        (by_region(1), by_region(2), by_region(0)),
        (2, 1, 0),
        "b's two, then c"
    );
}
