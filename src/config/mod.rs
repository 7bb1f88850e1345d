//! The relay's configuration: the schema, its validation, and one immutable snapshot behind an
//! atomic pointer ([`Shared`]) that reactor threads load once per loop iteration.
//!
//! A config is built whole and checked whole before anyone sees it; a reload that fails keeps the
//! last good snapshot serving (availability over freshness), while a bad config at startup refuses
//! to start. Reading the current snapshot is one atomic load (`arc_swap::ArcSwap::load`), no lock.
//!
//! # TOML schema
//!
//! Every key is optional unless marked *required*; unknown keys are errors. Key paths in errors
//! count array indexes from 0 (`region[2].interval_ms`). A listen address may be `"off"`.
//!
//! ```toml
//! threads = 8                  # reactor threads; default: available cores, at most one per
//!                              # egress source (fewer sources than threads is refused; with
//!                              # handoffs = false, so is a group with fewer sources than threads)
//! pin_threads = true           # pin thread i to the i-th CPU the process may run on (a unit's
//!                              # CPUAffinity=2-15 puts thread 0 on CPU 2)
//! handoffs = true              # a bundle may leave through another thread's pairs (the one that
//!                              # sends it soonest), so any connection reaches the whole pool
//! arena_slots = 65536          # total in-flight bundles, split evenly across threads
//! bundle_max_age_ms = 2000     # older undelivered bundles are dropped as expired
//! upstream_timeout_ms = 1000   # one SendBundle call
//! record_keep_s = 300          # the record of recent bundles (getInflightBundleStatuses,
//!                              # getBundleDelivery) covers this long at the pool's full rate; 0: off
//! record_bundles_max = 1048576 # ... in at most this many records (about 320 B each with their
//!                              # index) over all threads
//! tenants_max = 1024           # tenants the relay keeps state for; read at start only
//!
//! [intake]
//! rotating = "127.0.0.1:8080"  # bundles go to the region whose pool can send soonest; or "off"
//! head_bytes_max = 8192
//! body_bytes_max = 65536
//! head_timeout_ms = 5000       # a request head must arrive within this (else 408)
//! idle_timeout_ms = 60000      # a keep-alive connection with nothing to do is closed after it
//! send_timeout_ms = 10000      # answers that make no progress into the socket this long: closed
//! connections_max = 1024       # intake connections per thread
//! connections_per_source_max = 256  # per client address per thread; default connections_max / 4
//! unready_ms = 0               # at SIGTERM /ping answers 503 this long before listeners close (<= 9000)
//! trusted_proxies = []         # proxies whose last X-Forwarded-For names the client (addresses or
//!                              # blocks, <= 64); they have no per-address share. Live
//!
//! [[region]]                   # 1 to 16 tables
//! name = "frankfurt"           # required; a-z, 0-9, '-', '_'; unique
//! host = "frankfurt.mainnet.block-engine.jito.wtf"   # required
//! port = 443
//! connect = "127.0.0.11:10000" # literal address(es) instead of resolving host (string or array)
//! tls = true                   # default: port == 443
//! sni = "..."                  # TLS server name; default: host
//! ca_file = "ca.pem"           # the only CA (PEM) it trusts, instead of the bundled web
//!                              # roots; relative to the config file's folder
//! authority = "..."            # HTTP/2 :authority; default: host, plus ":port" unless 443
//! interval_ms = 1000           # one send per (source, region) per interval ...
//! burst = 1                    # ... with this many back to back
//! pinned = "127.0.0.1:8081"    # intake port whose bundles all go to this region
//! transactions_path = "/api/v1/transactions"  # the engine's JSON-RPC sendTransaction (a
//!                              # transaction without bundleOnly=true), same host and connections
//! bundles_path = "/api/v1/bundles"  # the engine's JSON-RPC getBundleStatuses and
//!                              # getInflightBundleStatuses, which the relay forwards
//!
//! [auth]                       # optional: searcher authentication to every region's engine
//! keypair_file = "searcher.json"  # required; Solana CLI keypair (relative to this file); its access
//!                              # token goes as `authorization: Bearer` on every call
//!
//! [reactor]                    # how reactor threads wait; fixed until a restart
//! mode = "sleep"               # "sleep": in io_uring_enter until work or a deadline; "poll":
//!                              # never sleeps, each thread keeps its (isolated) core busy
//! napi_busy_poll_us = 0        # poll mode only: wait this long in the kernel with NAPI busy
//!                              # polling of the NIC (real NICs only; loopback has no NAPI)
//!
//! [egress]                     # required: at least one source
//! addresses = ["127.1.0.0/24", "10.0.0.5", "127.1.1.1-127.1.1.9"]
//! socks5 = [{ proxy = "127.0.0.1:1080", username = "u", password = "p" }]  # proxy required
//! ledger = "/run/bundle-relay/pacing.ledger"  # the pacing ledger the relays of a host share:
//!                              # an absolute path on tmpfs; default pacing.ledger in
//!                              # $RUNTIME_DIRECTORY (the units set it), else the process's
//!                              # own memory; read at start only
//! slice = "2/4"                # optional: this relay's part K of N of the sources listed
//!                              # (contiguous, near-equal; N relays, one list, disjoint parts)
//! connect = "eager"            # "eager": open every pair at startup; "lazy": on first use
//! reconnect_min_ms = 100       # jittered exponential backoff bounds
//! reconnect_max_ms = 30000
//! connect_timeout_ms = 5000
//! handshakes_max = 256         # concurrent connects and TLS handshakes per thread (at
//!                              # startup, and every reconnect after)
//! ping_idle_ms = 30000         # HTTP/2 PING after this long without a frame (0: off, the
//!                              # kernel's keepalive probes idle connections instead)
//! ping_timeout_ms = 2000       # a PING unanswered this long closes its connection
//! tcp_user_timeout_ms = 5000   # sent data unacknowledged this long ends the connection
//!                              # (at least 13000 with ping_idle_ms = 0: 10 s + 3 probes)
//!
//! [[egress.group]]             # addresses dedicated to the tenants naming the group; those
//!                              # in no group (and every SOCKS5 proxy) are the "shared" ones
//! name = "alpha"               # required; a-z, A-Z, 0-9, '-', '_', '.'; unique; not "shared"
//! addresses = ["127.1.0.0/28", "127.1.0.20"]  # required, some of egress.addresses (entries as
//!                              # there, checked before `slice`; a slice keeps its members);
//!                              # one group per address; (groups + 1) × regions ≤ 256
//!
//! [leader]                     # for tenants (or [default_tenant]) with rotating = "leader"
//! poll_ms = 400                # GetNextScheduledLeader asked of one engine this often (a
//!                              # call on a pair, paced like any), only while some tenant uses it
//! wait_ms = 20                 # the leader's region takes a bundle when a pair there is ready
//!                              # within this; else the soonest region does (< bundle_max_age_ms)
//!
//! [admin]
//! listen = "127.0.0.1:9464"    # admin/metrics listener; or "off"; beyond loopback, a warning
//! token_file = "admin.token"   # bearer token required on all but /ping, relative to the
//!                              # config file's folder; read at every load and reload,
//!                              # and watched: an edit reloads as the config file's does
//! metrics = true               # record histograms and per-region/method series; false: the
//!                              # request path skips them (and their clock reads), /metrics
//!                              # serves only the accounting counters; read at start only
//!
//! # Tenants: without any [[tenant]] or [default_tenant], everyone may do everything. With
//! # [[tenant]] tables and no [default_tenant], a request no tenant matches is refused (401).
//! # (`tenants_max`, with the top-level keys above, says how many.)
//!
//! [[tenant]]                   # recognised by key, else source address, else intake port
//! name = "alpha"               # required; a-z, A-Z, 0-9, '-', '_', '.'; unique; a metric label
//! keys = ["…uuid…"]            # x-jito-auth header or uuid query parameter (kept as SHA-256)
//! key_sha256 = ["64 hex"]      # the same, given as digests, so the file holds no secret
//! cidrs = ["10.0.0.0/8"]       # source blocks; the longest matching block wins
//! ports = [8081]               # intake listener ports whose requests are this tenant's
//! enabled = true               # false: 403, even when a [default_tenant] exists
//! regions = ["frankfurt"]      # default: all; [] is refused (nowhere to send)
//! rotating = "soonest"         # rotating port: "soonest" region, "ordered" (first in
//!                              # `regions` that sends it within its max age), or "leader"
//!                              # (the region whose engine holds the next Jito leader, see
//!                              # [leader])
//! fan_out = 1                  # rotating port: each bundle to this many regions at once (≤ 4
//!                              # and ≤ its regions), the strategy's pick first; counted once
//! in_flight_min = 0            # arena slots reserved for the tenant (floors add up ≤ arena)
//! in_flight_max = 65536        # arena slots it may never exceed; default arena_slots
//! rate = 50                    # sendBundle/sendTransaction per second (429 with Retry-After)
//! rate_burst = 50              # back to back; default rate
//! global_rate = 500            # per second across every relay sharing [quota]'s store (429
//!                              # in the same words); needs [quota]
//! bundle_max_age_ms = 2000     # default: the relay's
//! egress = "alpha"             # the [[egress.group]] its bundles leave through; default (or
//!                              # "shared"): the shared addresses; either must hold a source of
//!                              # this relay (refused otherwise, unless enabled = false)
//!
//! [default_tenant]             # for requests no tenant matches: the same policy keys
//!
//! [tenants_from]               # instead of [[tenant]]/[default_tenant] (one provider only;
//!                              # `run --tenants JSON` is the third)
//! url = "http://127.0.0.1:9300/tenants"  # required; serves {"tenant": [...], "default_tenant": {...}}
//! every_ms = 5000              # polled this often; a changed document is applied as a reload
//! timeout_ms = 1000            # one poll's limit; a failed poll keeps the last good tenants
//!
//! [quota]                      # tenants' global_rate across relays, leased from Redis
//! redis = "127.0.0.1:6379"     # required; host:port
//! key_prefix = "bundle-relay:quota:"  # keys: PREFIX + tenant + ":" + unix second
//! lease_chunk = 25             # requests per lease; default a twentieth of the global rate
//! timeout_ms = 100             # one round trip's limit; past it the relay runs on its last lease
//! ```
//!
//! Sources are the addresses (in order, each entry expanded) followed by the SOCKS5 proxies. A
//! CIDR block lists every address in it; one address listed twice (in any two entries) is an
//! error, as is a block or range of more than [`SOURCES_MAX`] addresses. A proxy, or a proxy
//! and username, is one source ([`SourceId`]): listed twice it is an error, whatever the
//! passwords, and a reload that changes only its password keeps it (new connections present
//! the new one).
//!
//! Egress groups sell address capacity: a tenant naming a group sends only through its
//! addresses, every other tenant only through the shared ones ([`Egress::source_group`], group
//! id `i + 1` for `egress.group[i]`, 0 for shared). Each group is split over the threads on its
//! own ([`Egress::thread_share`]). Groups are sized into the relay at start: a reload that
//! changes them is kept until a restart, while which group a tenant names applies live.
//!
//! Region hosts are resolved at load with the system resolver ([`Resolve::Now`]) unless `connect`
//! gives literal addresses or the host is an IP literal. With [`Resolve::Deferred`] (and in
//! [`Config::embedded_default`]) they are left unresolved — empty [`Region::addrs`] — so a config
//! loads with no network, and [`Region::resolve`] fills them in later.
//!
//! # Costs
//!
//! Loading (parse, expand, validate, and DNS when resolving) is startup and reload work on the
//! admin thread, not benchmarked. The hot path only ever does [`Shared::load`]: one atomic load
//! plus arc-swap's debt-slot bookkeeping, no lock, and no allocation after a thread's first load.

mod diff;
mod egress;
mod error;
mod host;
mod keypair;
mod load;
mod model;
mod quota;
mod schema;
mod snapshot;
mod tenant_table;
mod tenants;
mod tenants_doc;
mod token;

pub use diff::Changes;
pub use egress::SOURCES_MAX;
pub use error::ConfigError;
pub use host::{
    HostAddresses, choose as choose_host_addresses, default_route_interfaces_v4,
    default_route_interfaces_v6, host_addresses,
};
pub use keypair::{KEYPAIR_FILE_BYTES_MAX, SearcherKey};
pub use model::{
    ADMIN_PORT, Config, ConnectMode, Egress, EgressSlice, FD_SLACK, FdBudget, Intake,
    KEEPALIVE_IDLE_S, KEEPALIVE_INTERVAL_S, KEEPALIVE_PROBES, KEEPALIVE_USER_TIMEOUT_MS_MIN,
    Leader, Overrides, PING_IDLE_MS_DEFAULT, PING_TIMEOUT_MS_DEFAULT, PINNED_PORT_FIRST,
    ROTATING_PORT, Reactor, ReactorMode, Region, Resolve, SHARED_GROUP, Source, SourceId,
    TCP_USER_TIMEOUT_MS_DEFAULT, even_share, group_shortfall, keepalive_timeout_conflict,
    thread_share, too_few_sources,
};
pub use quota::Quota;
pub use schema::{ARENA_SLOTS_MAX, REGION_NAME_BYTES_MAX, THREADS_MAX, stranded_sources};
pub use snapshot::{Shared, Snapshot};
pub use tenant_table::{
    Entry as TenantEntry, Found, LISTENERS_MAX, TableError, TenantTable, Writer as TenantWriter,
};
pub use tenants::{
    Cidr, DEFAULT_NAME as DEFAULT_TENANT_NAME, FAN_OUT_MAX, KeyDigest, Policy, Strategy,
    TENANTS_MAX_DEFAULT, TENANTS_MAX_LIMIT, Tenant, Tenants,
};
pub use tenants_doc::TenantsFrom;
pub use token::{TOKEN_BYTES_MAX, Token};
