//! What a reload applies and what it keeps until a restart, read from the config before and
//! after: one test per kind of key, each naming the key and both values as the log line does.

use bundle_relay::config::{Changes, Config, Resolve};

fn config(body: &str) -> Config {
    Config::parse(body, "config.toml", Resolve::Deferred).unwrap()
}

const BASE: &str = r#"
threads = 2
arena_slots = 1024
bundle_max_age_ms = 2000
[intake]
rotating = "127.0.0.1:8080"
[[region]]
name = "ny"
host = "127.0.0.11"
port = 10000
interval_ms = 1000
[[region]]
name = "tokyo"
host = "127.0.0.12"
port = 10000
[egress]
addresses = ["127.1.0.1-127.1.0.4"]
"#;

fn with(from: &str, to: &str) -> Config {
    assert!(BASE.contains(from), "{from}");
    config(&BASE.replacen(from, to, 1))
}

fn changes(next: &Config) -> Changes {
    let base = config(BASE);
    Changes::between(&base, &base, next)
}

#[test]
fn the_same_config_changes_nothing() {
    assert_eq!(changes(&config(BASE)), Changes::default());
}

#[test]
fn timeouts_ages_and_rates_are_applied_naming_both_values() {
    let next = with("bundle_max_age_ms = 2000", "bundle_max_age_ms = 5000");
    let next_rate = with("interval_ms = 1000", "interval_ms = 2000\nburst = 2");
    assert_eq!(changes(&next).applied, ["bundle_max_age_ms 2000 → 5000"]);
    assert_eq!(
        changes(&next_rate).applied,
        ["region ny.interval_ms 1000 → 2000", "region ny.burst 1 → 2"]
    );
    assert!(changes(&next_rate).kept.is_empty());
    let leader = config(&format!("{BASE}[leader]\npoll_ms = 200\nwait_ms = 5\n"));
    assert_eq!(
        changes(&leader).applied,
        ["leader.poll_ms 400 → 200", "leader.wait_ms 20 → 5"]
    );
}

/// A shorter interval is applied, and the record of recent bundles, sized at start for the
/// sends a second the intervals then allowed, fills sooner: the reload says how little of
/// `record_keep_s` it may now hold (two regions at 1/s, one going to 2/s: 300 s × 2/3). A
/// longer interval says nothing of it.
#[test]
fn a_shorter_interval_says_the_record_may_hold_less_than_record_keep_s_until_a_restart() {
    let faster = changes(&with("interval_ms = 1000", "interval_ms = 500"));
    assert_eq!(faster.applied, ["region ny.interval_ms 1000 → 500"]);
    assert_eq!(
        faster.kept,
        [
            "record: sized at start for the regions' intervals then; at the shorter ones it \
             may hold as little as 200 s of bundles, not record_keep_s's 300 s"
        ]
    );
    let slower = changes(&with("interval_ms = 1000", "interval_ms = 2000"));
    assert!(slower.kept.is_empty(), "{:?}", slower.kept);
    // Capped by record_bundles_max (1,200, for the 4 sources' 8 sends a second over 300 s),
    // it held 150 s; at 12 a second, 100 s.
    let capped = |c: &str| config(&format!("record_bundles_max = 1200\n{c}"));
    let base = capped(BASE);
    let faster = Changes::between(
        &base,
        &base,
        &capped(&BASE.replacen("interval_ms = 1000", "interval_ms = 500", 1)),
    );
    assert_eq!(
        faster.kept,
        [
            "record: sized at start for the regions' intervals then; at the shorter ones it \
             may hold as little as 100 s of bundles, not record_keep_s's 300 s"
        ]
    );
}

#[test]
fn trusted_proxies_are_applied_naming_both_lists() {
    let rotating = "rotating = \"127.0.0.1:8080\"";
    let one = with(
        rotating,
        &format!("{rotating}\ntrusted_proxies = [\"127.0.0.1\"]"),
    );
    let two = with(
        rotating,
        &format!("{rotating}\ntrusted_proxies = [\"127.0.0.1\", \"10.8.0.0/16\"]"),
    );
    assert_eq!(
        changes(&one).applied,
        ["intake.trusted_proxies none → 127.0.0.1/32"]
    );
    assert_eq!(
        Changes::between(&config(BASE), &one, &two).applied,
        ["intake.trusted_proxies 127.0.0.1/32 → 127.0.0.1/32,10.8.0.0/16"]
    );
    assert!(changes(&two).kept.is_empty());
}

#[test]
fn threads_arena_and_listeners_are_kept_until_a_restart() {
    let next = with(
        "threads = 2\narena_slots = 1024",
        "threads = 4\narena_slots = 2048",
    );
    let c = changes(&next);
    assert_eq!(c.kept, ["threads 2 → 4", "arena_slots 1024 → 2048"]);
    assert!(c.applied.is_empty());
    let polling = config(&format!("{BASE}[reactor]\nmode = \"poll\"\n"));
    assert_eq!(changes(&polling).kept, ["reactor.mode sleep → poll"]);
    let moved = with("127.0.0.1:8080", "127.0.0.1:9090");
    assert_eq!(
        changes(&moved).kept,
        ["intake.rotating 127.0.0.1:8080 → 127.0.0.1:9090"]
    );
}

#[test]
fn a_removed_region_is_applied_and_a_new_one_waits_for_a_restart() {
    let without_tokyo = config(&BASE.replace(
        "[[region]]\nname = \"tokyo\"\nhost = \"127.0.0.12\"\nport = 10000\n",
        "",
    ));
    let c = changes(&without_tokyo);
    assert_eq!(c.applied.len(), 1, "{c:?}");
    assert!(c.applied[0].starts_with("region tokyo removed"), "{c:?}");
    let with_amsterdam = config(&BASE.replace(
        "[egress]",
        "[[region]]\nname = \"amsterdam\"\nhost = \"127.0.0.13\"\nport = 10000\n[egress]",
    ));
    assert_eq!(changes(&with_amsterdam).kept, ["region amsterdam added"]);
    // Listed again after a reload that removed it: it ran since start, so it comes back live.
    let base = config(BASE);
    let back = Changes::between(&base, &without_tokyo, &base);
    assert_eq!(back.applied, ["region tokyo back: its pairs connect again"]);
    assert!(back.kept.is_empty());
}

#[test]
fn where_a_region_connects_is_kept_until_a_restart() {
    let next = with("host = \"127.0.0.11\"", "host = \"127.0.0.21\"");
    assert_eq!(
        changes(&next).kept,
        [
            "region ny.host 127.0.0.11 → 127.0.0.21",
            "region ny.connect 127.0.0.11:10000 → 127.0.0.21:10000",
            "region ny.authority 127.0.0.11:10000 → 127.0.0.21:10000"
        ]
    );
}

#[test]
fn removed_sources_are_drained_and_new_ones_wait_for_a_restart() {
    let fewer = with("127.1.0.1-127.1.0.4", "127.1.0.1-127.1.0.2");
    let c = changes(&fewer);
    assert_eq!(c.applied.len(), 1, "{c:?}");
    assert!(
        c.applied[0].starts_with("egress: 2 sources removed"),
        "{c:?}"
    );
    assert!(c.kept.is_empty());
    let more = with("127.1.0.1-127.1.0.4", "127.1.0.1-127.1.0.5");
    assert_eq!(
        changes(&more).kept,
        ["egress: 1 source added (first 127.1.0.5)"]
    );
    let base = config(BASE);
    let back = Changes::between(&base, &fewer, &base);
    assert_eq!(
        back.applied,
        ["egress: 2 sources listed again: their pairs connect again"]
    );
}

/// The base config with alice's and bob's accounts on a SOCKS5 proxy added to its sources.
fn with_proxies(alice: &str, bob: &str) -> Config {
    config(&format!(
        "{BASE}socks5 = [\
         {{ proxy = \"127.0.0.1:27221\", username = \"alice\", password = \"{alice}\" }}, \
         {{ proxy = \"127.0.0.1:27221\", username = \"bob\", password = \"{bob}\" }}]\n"
    ))
}

/// A proxy + username is one source whatever its password: a new password is applied (new
/// connections through the proxy present it), nothing is removed or added, and the log line
/// names the source without the password.
#[test]
fn a_proxy_password_change_is_applied_to_new_connections_not_a_new_source() {
    let base = with_proxies("wrong", "b0b");
    let corrected = with_proxies("right", "b0b");
    let c = Changes::between(&base, &base, &corrected);
    assert_eq!(
        c.applied,
        [
            "egress: socks5://alice@127.0.0.1:27221 password changed: new connections through it \
          use the new one, those open stay open"
        ]
    );
    assert!(c.kept.is_empty(), "{c:?}");
    assert_eq!(Changes::refusal(&base, &corrected), None);
    let both = Changes::between(&base, &corrected, &with_proxies("again", "b0b2"));
    assert_eq!(
        both.applied,
        [
            "egress: 2 passwords changed (first socks5://alice@127.0.0.1:27221): new connections \
          through their proxies use the new ones, those open stay open"
        ]
    );
    assert!(both.kept.is_empty(), "{both:?}");
    // Another username on the proxy is another source.
    let carol = config(&format!(
        "{BASE}socks5 = [\
         {{ proxy = \"127.0.0.1:27221\", username = \"carol\", password = \"wrong\" }}, \
         {{ proxy = \"127.0.0.1:27221\", username = \"bob\", password = \"b0b\" }}]\n"
    ));
    let c = changes_from(&base, &carol);
    assert_eq!(
        c.applied,
        ["egress: 1 source removed: their calls in flight finish, then their connections close"]
    );
    assert_eq!(
        c.kept,
        ["egress: 1 source added (first socks5://carol@127.0.0.1:27221)"]
    );
}

fn changes_from(base: &Config, next: &Config) -> Changes {
    Changes::between(base, base, next)
}

#[test]
fn a_reload_that_lists_none_of_the_running_regions_is_refused() {
    let renamed = config(
        &BASE
            .replace("\"ny\"", "\"dublin\"")
            .replace("\"tokyo\"", "\"slc\""),
    );
    let (key, why) = Changes::refusal(&config(BASE), &renamed).unwrap();
    assert_eq!(key, "region");
    assert!(
        why.contains("none of the regions the relay runs (ny, tokyo)"),
        "{why}"
    );
}

#[test]
fn a_reload_that_lists_none_of_the_running_sources_is_refused() {
    let moved = with("127.1.0.1-127.1.0.4", "127.1.9.1-127.1.9.4");
    let (key, why) = Changes::refusal(&config(BASE), &moved).unwrap();
    assert_eq!(key, "egress");
    assert!(
        why.contains("none of the 4 sources the relay runs"),
        "{why}"
    );
}

#[test]
fn without_handoffs_a_reload_may_not_leave_a_thread_without_its_sources() {
    let base = config(&BASE.replace("threads = 2", "threads = 2\nhandoffs = false"));
    // Thread 0 runs 127.1.0.1-2, thread 1 127.1.0.3-4.
    let first_half = config(
        &BASE
            .replace("threads = 2", "threads = 2\nhandoffs = false")
            .replace("127.1.0.1-127.1.0.4", "127.1.0.1-127.1.0.2"),
    );
    let (key, why) = Changes::refusal(&base, &first_half).unwrap();
    assert_eq!(key, "egress");
    assert!(
        why.starts_with("thread 1 would keep none of its 2 sources (127.1.0.3 …)"),
        "{why}"
    );
    // With handoffs on, the other thread's pairs send its bundles: allowed.
    assert_eq!(
        Changes::refusal(
            &config(BASE),
            &with("127.1.0.1-127.1.0.4", "127.1.0.1-127.1.0.2")
        ),
        None
    );
    // One of each thread's sources is enough.
    let one_each = config(
        &BASE
            .replace("threads = 2", "threads = 2\nhandoffs = false")
            .replace("127.1.0.1-127.1.0.4", "127.1.0.2-127.1.0.3"),
    );
    assert_eq!(Changes::refusal(&base, &one_each), None);
}

#[test]
fn the_quota_store_and_tenants_global_rates_are_applied_live() {
    let quota = |redis: &str, chunk: &str, rate: u32| {
        config(&format!(
            "{BASE}[quota]\nredis = \"{redis}\"\n{chunk}\n\
             [[tenant]]\nname = \"g\"\nkeys = [\"k\"]\nglobal_rate = {rate}\n"
        ))
    };
    let a = quota("10.0.0.1:6379", "", 500);
    assert_eq!(
        changes(&a).applied,
        [
            "tenants: 1 added (g), 0 removed, 0 changed; 1 listed",
            "default_tenant: none; requests no tenant matches are refused (401)",
            "quota: tenants' global_rate leased from redis 10.0.0.1:6379"
        ]
    );
    let b = quota("10.0.0.2:6379", "lease_chunk = 10", 800);
    let c = Changes::between(&config(BASE), &a, &b);
    assert_eq!(
        c.applied,
        [
            "tenants: 0 added, 0 removed, 1 changed (g: global_rate); 1 listed",
            "quota.redis 10.0.0.1:6379 → 10.0.0.2:6379",
            "quota.lease_chunk (default) → 10"
        ]
    );
    assert!(c.kept.is_empty());
    let none = Changes::between(&config(BASE), &a, &config(BASE));
    assert!(
        none.applied
            .contains(&"quota: none; no store to lease global rates from".to_string()),
        "{none:?}"
    );
}

/// A region or source a reload added (kept until a restart, so it never ran) and the next one
/// removes again changes nothing that runs: it is not said to be removed as if it had run.
#[test]
fn withdrawing_an_addition_that_waits_for_a_restart_applies_nothing() {
    let base = config(BASE);
    let added = config(&BASE.replace(
        "[egress]\naddresses = [\"127.1.0.1-127.1.0.4\"]",
        "[[region]]\nname = \"amsterdam\"\nhost = \"127.0.0.13\"\nport = 10000\n\
         [egress]\naddresses = [\"127.1.0.1-127.1.0.5\"]",
    ));
    let c = Changes::between(&base, &added, &base);
    assert!(c.applied.is_empty(), "{c:?}");
    assert_eq!(
        c.kept,
        [
            "region amsterdam: no longer added (never ran)",
            "egress: 1 source no longer added (never ran)"
        ]
    );
}

/// Tenants all removed, with no `[default_tenant]`: every request is served without a tenant
/// check, which the log says in those words, not as a default policy applied.
#[test]
fn removing_every_tenant_says_that_everyone_may_send() {
    let keyed = format!("{BASE}[[tenant]]\nname = \"a\"\nkeys = [\"k\"]\n");
    let c = Changes::between(&config(BASE), &config(&keyed), &config(BASE));
    assert_eq!(
        c.applied,
        [
            "tenants: 0 added, 1 removed (a; their bundles in flight finish), 0 changed; 0 listed",
            "default_tenant: none and no tenant listed: every request is served, no tenant checks"
        ]
    );
}

/// A tenant's regions are told apart by name, not by where the config lists them: regions
/// listed in another order with a tenant moved to the other one is a change the log names,
/// and the same order change with the tenant left alone is none.
#[test]
fn a_tenants_regions_are_compared_by_name_not_by_their_place_in_the_list() {
    let swapped = BASE
        .replacen("name = \"ny\"", "name = \"TMP\"", 1)
        .replacen("name = \"tokyo\"", "name = \"ny\"", 1)
        .replacen("name = \"TMP\"", "name = \"tokyo\"", 1);
    let tenant = |body: &str, region: &str| {
        config(&format!(
            "{body}[[tenant]]\nname = \"a\"\nkeys = [\"k\"]\nregions = [\"{region}\"]\n"
        ))
    };
    let before = tenant(BASE, "ny");
    let moved = Changes::between(&before, &before, &tenant(&swapped, "tokyo"));
    assert!(
        moved
            .applied
            .iter()
            .any(|l| l == "tenants: 0 added, 0 removed, 1 changed (a: regions); 1 listed"),
        "{:?}",
        moved.applied
    );
    let stayed = Changes::between(&before, &before, &tenant(&swapped, "ny"));
    assert!(
        !stayed.applied.iter().any(|l| l.starts_with("tenants:")),
        "{:?}",
        stayed.applied
    );
}

/// A CA file rewritten in place (a rotated private CA, same path) is a change the reload names
/// and keeps until a restart, as a new path is: the running connections' TLS was set up from
/// the certificates read at start, and a reload that said nothing left the operator believing
/// the new CA was trusted.
#[test]
fn a_ca_file_rewritten_in_place_is_named_and_kept_until_a_restart() {
    let dir = std::env::temp_dir().join(format!("br-ca-rewrite-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    let path = dir.join("relay.toml");
    let text = BASE.replacen(
        "port = 10000\ninterval_ms = 1000",
        "port = 10000\ninterval_ms = 1000\ntls = true\nca_file = \"ca.pem\"",
        1,
    );
    std::fs::write(&path, &text).unwrap();
    std::fs::write(&ca, crate::tls_support::pki(&[]).ca_pem).unwrap();
    let running = Config::load_with(&path, Resolve::Deferred).unwrap();
    let same = Config::load_with(&path, Resolve::Deferred).unwrap();
    std::fs::write(&ca, crate::tls_support::pki(&[]).ca_pem).unwrap();
    let rotated = Config::load_with(&path, Resolve::Deferred).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(Changes::between(&running, &running, &same).kept.is_empty());
    assert_eq!(
        Changes::between(&running, &running, &rotated).kept,
        [format!(
            "region ny.ca_file: the certificates in {} changed",
            ca.display()
        )]
    );
}

/// A reload's summary names the tenants it added, removed and changed, and for a changed one
/// the keys that changed, as it names every other key; a long list names the first eight and
/// counts the rest.
#[test]
fn a_reload_names_each_tenant_it_added_removed_or_changed_and_what_changed() {
    let tenants = |list: &[(&str, &str)]| {
        let mut text = BASE.to_string();
        for (name, extra) in list {
            text.push_str(&format!(
                "[[tenant]]\nname = \"{name}\"\nkeys = [\"k-{name}\"]\n{extra}"
            ));
        }
        config(&text)
    };
    let before = tenants(&[("alice", "rate = 5\n"), ("bob", "")]);
    let after = tenants(&[
        ("alice", "rate = 10\nregions = [\"ny\"]\nenabled = false\n"),
        ("carol", ""),
    ]);
    let c = Changes::between(&before, &before, &after);
    assert_eq!(
        c.applied[0],
        "tenants: 1 added (carol), 1 removed (bob; their bundles in flight finish), 1 changed \
         (alice: enabled, regions, rate); 2 listed"
    );
    let many: Vec<(String, &str)> = (0..10).map(|i| (format!("t{i}"), "")).collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(n, e)| (n.as_str(), *e)).collect();
    let c = Changes::between(&before, &before, &tenants(&many));
    assert!(
        c.applied[0].starts_with(
            "tenants: 10 added (t0; t1; t2; t3; t4; t5; t6; t7; and 2 more), 2 removed (alice; bob;"
        ),
        "{:?}",
        c.applied
    );
}
