//! The memory budget: every fixed allocation the process makes, computed in one function from
//! the sizing inputs and printed at startup. Nothing on the request path allocates, so this
//! table is the ceiling: memory stays flat under any load.
//!
//! Each layer adds its terms to [`Budget::new`], one line per term, and exposes its per-item
//! sizes as constants so the budget and the allocation cannot disagree: tests check each
//! layer's `allocated_bytes()` against its terms, and a relay started under a counting
//! allocator, its whole pool up, holds within 1% of the total (0.2% measured, metrics on and
//! off; `bench/tests/budget_counts_what_the_relay_allocates.rs`). What is left out: thread
//! stacks (mapped, not allocated), the io_uring rings (kernel memory), and what rustls holds
//! per TLS connection beyond the session buffers.

use std::fmt;

use crate::metrics::accounting::Stats;
use crate::metrics::{self, HISTS_PER_THREAD, RegionMetrics, ThreadMetrics};
use crate::{arena, limiter, reactor, relay};

/// What an `Arc<T>` holds on the heap: its two counts, then `T` at its alignment.
const fn arc_bytes<T>() -> usize {
    (2 * std::mem::size_of::<usize>()).next_multiple_of(std::mem::align_of::<T>())
        + std::mem::size_of::<T>()
}

/// What the process is sized from (all from the config).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetInputs {
    /// Request slots in all arenas: the in-flight cap.
    pub arena_slots: u64,
    /// Egress addresses in all limiters.
    pub addresses: u64,
    /// Egress addresses the pool lists in all, every relay's slice (the pacing ledger has
    /// room for all of their pairs); `addresses` without a slice.
    pub pool_addresses: u64,
    /// Block-engine regions each address pairs with.
    pub regions: u64,
    /// Egress groups, the shared addresses counted (each region has a lane per group).
    pub egress_groups: u64,
    /// Reactor threads: each owns one limiter (its own region wheels and list heads).
    pub threads: u64,
    /// Intake connections each thread can hold.
    pub intake_conns_per_thread: u64,
    /// The largest request an intake connection buffers (head + body limits).
    pub intake_request_bytes: u64,
    /// Pairs whose region speaks TLS (each connection holds a TLS session's buffers).
    pub tls_pairs: u64,
    /// Pairs whose source is a SOCKS5 proxy (each connection holds a handshake's buffers).
    pub socks5_pairs: u64,
    /// Pairs whose connections go through a tunnel or TLS (each holds the layers' record).
    pub layered_pairs: u64,
    /// Metrics are recorded (histograms are allocated only then).
    pub metrics: bool,
    /// Tenants the relay keeps state for (`tenants_max`), besides the default.
    pub tenants_max: u64,
    /// Heap bytes of every thread's record of recent bundles (rings and indexes).
    pub record_bytes: u64,
    /// Heap bytes of a thread's gRPC header blocks encoded once (every region's methods).
    pub call_heads_bytes: u64,
    /// Bundles may leave through another thread's pairs (each thread then holds its handoff
    /// records).
    pub handoffs: bool,
}

impl BudgetInputs {
    /// What a running relay of `spec` is sized from.
    pub fn of(spec: &crate::relay::Spec) -> BudgetInputs {
        let sources = spec.sources.len() as u64;
        let regions = spec.regions.len() as u64;
        let socks5_sources = spec
            .sources
            .iter()
            .filter(|s| matches!(s, crate::config::Source::Socks5 { .. }))
            .count() as u64;
        let tls_regions = spec.regions.iter().filter(|r| r.tls.is_some()).count() as u64;
        BudgetInputs {
            arena_slots: spec.arena_slots as u64,
            addresses: sources,
            pool_addresses: spec.pool_sources.max(spec.sources.len()) as u64,
            regions,
            egress_groups: spec.egress_groups.len() as u64 + 1,
            threads: spec.threads.max(1) as u64,
            intake_conns_per_thread: spec.intake_conns_max as u64,
            intake_request_bytes: (spec.http.head_bytes_max + spec.http.body_bytes_max) as u64,
            tls_pairs: tls_regions * sources,
            socks5_pairs: socks5_sources * regions,
            layered_pairs: sources * regions - (sources - socks5_sources) * (regions - tls_regions),
            metrics: spec.metrics,
            tenants_max: u64::from(spec.tenant_stats.tenants_max()),
            record_bytes: (0..spec.threads.max(1))
                .map(|t| crate::journal::Ring::bytes_for(spec.thread(t).records) as u64)
                .sum(),
            call_heads_bytes: spec
                .regions
                .iter()
                .map(|r| {
                    let scheme = if r.tls.is_some() { "https" } else { "http" };
                    crate::grpc::CallConfig::new(scheme, r.authority.clone()).heap_bytes() as u64
                })
                .sum(),
            handoffs: spec.handoffs,
        }
    }

    /// The relay's defaults for the intake (1,024 connections per thread, 8 KiB heads and
    /// 64 KiB bodies), every region over TLS as Jito's are, no SOCKS5 sources.
    pub fn with_default_intake(
        arena_slots: u64,
        addresses: u64,
        regions: u64,
        threads: u64,
    ) -> Self {
        BudgetInputs {
            arena_slots,
            addresses,
            pool_addresses: addresses,
            regions,
            egress_groups: 1,
            threads,
            intake_conns_per_thread: 1024,
            intake_request_bytes: (crate::http1::HEAD_BYTES_MAX_DEFAULT
                + crate::http1::BODY_BYTES_MAX_DEFAULT) as u64,
            tls_pairs: addresses * regions,
            socks5_pairs: 0,
            layered_pairs: addresses * regions,
            metrics: true,
            tenants_max: u64::from(crate::config::TENANTS_MAX_DEFAULT),
            // Each thread's share of the pool at Jito's 1 s interval, over the default span.
            record_bytes: (0..threads.max(1) as usize)
                .map(|t| {
                    let own = crate::config::even_share(addresses as usize, threads as usize, t);
                    let cap = crate::journal::capacity_for(
                        (own.len() as u64 * regions) as f64,
                        crate::journal::KEEP_S_DEFAULT,
                        crate::journal::RECORDS_MAX_DEFAULT,
                        threads as usize,
                        crate::config::even_share(arena_slots as usize, threads as usize, t).len(),
                    );
                    crate::journal::Ring::bytes_for(cap) as u64
                })
                .sum(),
            // Jito's host names, the longest region's for every one.
            call_heads_bytes: regions
                * crate::grpc::CallConfig::new(
                    "https",
                    format!("frankfurt.{}", crate::jito::MAINNET_DOMAIN),
                )
                .heap_bytes() as u64,
            handoffs: true,
        }
    }
}

/// One term: `count × bytes_each`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Term {
    pub name: &'static str,
    pub count: u64,
    pub bytes_each: u64,
}

impl Term {
    pub fn bytes(&self) -> u64 {
        self.count * self.bytes_each
    }
}

/// The whole budget, one [`Term`] per fixed allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    pub inputs: BudgetInputs,
    pub terms: Vec<Term>,
}

impl Budget {
    /// Every term, one line each. Layers append theirs here.
    pub fn new(inputs: BudgetInputs) -> Budget {
        let BudgetInputs {
            arena_slots,
            addresses,
            pool_addresses,
            regions,
            egress_groups,
            threads,
            intake_conns_per_thread,
            intake_request_bytes,
            tls_pairs,
            socks5_pairs,
            layered_pairs,
            metrics,
            tenants_max,
            record_bytes,
            call_heads_bytes,
            handoffs,
        } = inputs;
        let conns = threads * intake_conns_per_thread;
        let h2_config = crate::relay::upstream_h2_config();
        let h2 = crate::h2::conn::Connection::allocation_bytes(&h2_config);
        let h2_buffers = crate::h2::conn::Connection::buffer_bytes(&h2_config);
        let h2_slab = crate::h2::conn::Connection::slab_bytes_per_connection(&h2_config);
        let pairs = addresses * regions;
        let lanes = regions * egress_groups.max(1);
        let term = |name, count, bytes_each: usize| Term {
            name,
            count,
            bytes_each: bytes_each as u64,
        };
        let terms = vec![
            // Per admitted bundle: tx count, lengths, id, region, admission time, attempts.
            term("arena slot metadata", arena_slots, arena::SLOT_META_BYTES),
            // Per admitted bundle: its whole upstream DATA frame (h2 header + gRPC prefix + proto),
            // which carries its transactions.
            term("arena frame bytes", arena_slots, arena::FRAME_BYTES_MAX),
            // Per thread: five fixed 1232-byte transaction regions the bundle being admitted is
            // decoded into, then encoded into its slot's frame.
            term("arena decode rooms", threads, arena::TX_BYTES_PER_SLOT),
            // One record per (egress address, region): pacing, cooldown, connection, place.
            term("limiter pair records", pairs, limiter::PAIR_RECORD_BYTES),
            // Per thread and lane (a region's pairs of one egress group): every wheel slot's
            // list head.
            term(
                "limiter list heads",
                threads * lanes * limiter::LISTS_PER_REGION as u64,
                limiter::LIST_HEAD_BYTES,
            ),
            // Per thread and lane: wheel time, occupancy bitmaps, rate, counts.
            term(
                "limiter lane wheels",
                threads * lanes,
                limiter::REGION_BYTES,
            ),
            // Per thread and lane: the FIFO of bundles waiting for a pair, room for every slot.
            term(
                "lane FIFOs",
                lanes * arena_slots,
                std::mem::size_of::<arena::SlotHandle>(),
            ),
            // Per thread: whether each region and each of its sources is still in the config
            // (a reload retires them), and whether a retired region's pairs were drained.
            term("reload flags", threads * regions * 2 + addresses, 1),
            // Per thread: each source's place among the sources of its kind (IPv4, IPv6,
            // proxy), which spreads its pairs over a region name's addresses.
            term(
                "source places",
                threads * addresses,
                std::mem::size_of::<u32>(),
            ),
            // The pacing ledger a successor (and every relay of a sliced pool, in a ledger
            // file) shares: one mapping a process, room for the whole pool's pairs twice over at
            // a quarter full; and each pair's entry number in it, with what this process last
            // booked there and whether that counts another process's sends.
            term(
                "pacing ledger",
                crate::limiter::ledger::entries_for((pool_addresses * regions) as usize) as u64,
                crate::limiter::ledger::ENTRY_BYTES,
            ),
            term(
                "pair ledger entries",
                pairs,
                std::mem::size_of::<u32>()
                    + std::mem::size_of::<u64>()
                    + std::mem::size_of::<bool>(),
            ),
            // Per tenant and the default: its share, rate state and counts, shared by threads.
            term(
                "tenant cells",
                tenants_max + 1,
                crate::metrics::tenants::CELL_BYTES,
            ),
            // Per tenant and the default: the lease thread's lease of its global rate, the
            // name it is of (the name's bytes are the tenant table's size, not counted here)
            // and until when a lease the store refused runs on the last one.
            term(
                "quota leases",
                tenants_max + 1,
                crate::quota::LEASE_BYTES
                    + std::mem::size_of::<String>()
                    + std::mem::size_of::<Option<std::time::Instant>>(),
            ),
            // Per thread, per tenant: its rate and max age in clock ticks.
            term(
                "tenant rules per thread",
                threads * (tenants_max + 1),
                relay::tenancy::PER_SLOT_BYTES,
            ),
            // Per pair: the dispatcher's record (link, call in flight, back-off).
            term("pair states", pairs, relay::dispatch::PAIR_STATE_BYTES),
            // Per thread and region: the kinds of error it logged lately, when, and how many
            // came since, so pairs failing by the thousand log a bounded number of lines.
            term(
                "logged error kinds",
                threads * regions,
                relay::dispatch::ERROR_LOG_BYTES,
            ),
            // Per thread: each region's gRPC header blocks, encoded once.
            term("call header blocks", threads, call_heads_bytes as usize),
            // Per pair: its room in the queues to connect, to send, to close, of ended calls.
            term("pair queues", pairs, relay::dispatch::PAIR_QUEUE_BYTES),
            // Per pair: its place in the connection timers' wheel and its room in the due list;
            // per thread, the wheel's list heads.
            term("pair timers", pairs, limiter::timers::TIMER_BYTES_PER_PAIR),
            term(
                "pair timer lists",
                threads,
                limiter::timers::TIMER_LIST_BYTES,
            ),
            // Per pair: the reactor's socket record (fd, generation, operations, address).
            term("pair sockets", pairs, reactor::PAIR_SOCKET_BYTES),
            // Per pair: the HTTP/2 transmit buffer and the receive buffer for a split frame, in
            // one zeroed slab per thread (allocated at startup, resident only as written), each
            // pair's in whole pages; per thread, the slab's record and a page of slack to start
            // the first pair's touched pages on a page.
            term("upstream h2 buffers", pairs, h2_slab),
            term(
                "upstream h2 buffer slabs",
                threads,
                crate::h2::storage::SLAB_RECORD_BYTES + crate::h2::storage::SLAB_SLACK_BYTES,
            ),
            // Per pair, once connected: the HTTP/2 connection's record, streams and HPACK table.
            term("upstream h2 connections", pairs, h2 - h2_buffers),
            // Per thread: the list its connections decode a gone stream's header block into.
            term(
                "upstream h2 discard lists",
                threads,
                crate::h2::discard::allocation_bytes(&h2_config),
            ),
            // Per pair through a tunnel or TLS: the layers' record.
            term(
                "upstream transports",
                layered_pairs,
                std::mem::size_of::<crate::egress::transport::Transport>(),
            ),
            // Per TLS pair, while connected: the session's record and its ciphertext in,
            // plaintext, ciphertext out (rustls' own connection state comes on top, a few KiB).
            term(
                "upstream TLS sessions",
                tls_pairs,
                std::mem::size_of::<crate::tls::TlsSession>() + crate::tls::SESSION_BUFFER_BYTES,
            ),
            // Per SOCKS5 pair, while connecting: the CONNECT handshake's requests and reply.
            term(
                "SOCKS5 handshakes",
                socks5_pairs,
                std::mem::size_of::<crate::egress::socks5::Socks5>(),
            ),
            // Per intake connection: its record, its input (the largest request) and output.
            term("intake records", conns, reactor::INTAKE_RECORD_BYTES),
            term("intake input buffers", conns, intake_request_bytes as usize),
            term("intake output buffers", conns, reactor::INTAKE_OUT_BYTES),
            // Per thread: a client-address table sized for every intake connection (the
            // per-source cap), the log queue, and the submission backlog's room.
            term(
                "intake client tables",
                threads,
                reactor::Clients::allocation_bytes(intake_conns_per_thread as usize),
            ),
            term(
                "log queues",
                threads,
                crate::log::LogQueue::allocation_bytes(),
            ),
            // Per thread: bots' bundle-status queries waiting on an engine, each with room for
            // the engine's answer.
            term(
                "status query tables",
                threads,
                crate::relay::queries::Queries::allocation_bytes(),
            ),
            term(
                "submission backlogs",
                threads,
                reactor::sq_entries_max(
                    intake_conns_per_thread as usize,
                    pairs.div_ceil(threads.max(1)) as usize,
                    regions as usize + 1,
                ) * std::mem::size_of::<io_uring::squeue::Entry>(),
            ),
            // Per thread: room for every completion of one iteration.
            term(
                "completion batches",
                threads * reactor::CQ_ENTRIES as u64,
                std::mem::size_of::<reactor::Completion>(),
            ),
            // Per thread: its accounting counters and its metrics' records (each on lines of
            // its own), and with metrics on one histogram per measure (3 + one per region).
            term("accounting counters", threads, arc_bytes::<Stats>()),
            term(
                "metric records",
                threads,
                arc_bytes::<ThreadMetrics>()
                    + regions as usize * std::mem::size_of::<RegionMetrics>(),
            ),
            term(
                "metric histograms",
                if metrics {
                    threads * (HISTS_PER_THREAD as u64 + regions)
                } else {
                    0
                },
                metrics::atomic_hist::ALLOCATION_BYTES,
            ),
            // The threads' mesh: per ordered pair of threads a ring of slots lent and one of
            // slots handed back, and each thread's published lines; each thread's side of it.
            term(
                "thread mesh",
                1,
                arc_bytes::<crate::mesh::Mesh>()
                    + crate::mesh::Mesh::allocation_bytes(
                        threads as usize,
                        (arena_slots / threads.max(1)) as u32,
                    ),
            ),
            term(
                "handoff records",
                if threads > 1 && handoffs { threads } else { 0 },
                relay::dispatch::handoff_allocation_bytes(threads as usize, lanes as usize),
            ),
            // Per thread: its record of recent bundles (36 words each, 4 index words each
            // rounded up to a power of two), allocated zeroed; the index is touched at startup
            // (ids hash all over it), the records only as bundles come.
            Term {
                name: "bundle record",
                count: 1,
                bytes_each: record_bytes
                    + (arc_bytes::<crate::journal::Journals>()
                        + threads as usize * size_of::<crate::journal::Ring>())
                        as u64,
            },
            // Per thread: the provided-buffer rings receives land in, one for clients' requests
            // and one for engines' replies: each buffer and its ring entry.
            term(
                "intake receive buffers",
                threads * reactor::INTAKE_RECV_BUFFERS as u64,
                reactor::INTAKE_RECV_BUFFER_BYTES + reactor::RECV_RING_ENTRY_BYTES,
            ),
            term(
                "upstream receive buffers",
                threads * reactor::UPSTREAM_RECV_BUFFERS as u64,
                reactor::UPSTREAM_RECV_BUFFER_BYTES + reactor::RECV_RING_ENTRY_BYTES,
            ),
        ];
        Budget { inputs, terms }
    }

    pub fn total_bytes(&self) -> u64 {
        self.terms.iter().map(Term::bytes).sum()
    }

    /// The bytes of the term named `name` (0 if there is none).
    pub fn term_bytes(&self, name: &str) -> u64 {
        self.terms
            .iter()
            .filter(|t| t.name == name)
            .map(Term::bytes)
            .sum()
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inputs;
        writeln!(
            f,
            "memory budget: {} arena slots, {} addresses x {} regions, {} threads",
            i.arena_slots, i.addresses, i.regions, i.threads
        )?;
        writeln!(
            f,
            "{:<26} {:>12} {:>10} {:>15}",
            "term", "count", "bytes each", "bytes"
        )?;
        for t in &self.terms {
            writeln!(
                f,
                "{:<26} {:>12} {:>10} {:>15}",
                t.name,
                t.count,
                t.bytes_each,
                t.bytes()
            )?;
        }
        let total = self.total_bytes();
        write!(
            f,
            "{:<26} {:>12} {:>10} {:>15} ({:.1} MiB)",
            "total",
            "",
            "",
            total,
            total as f64 / (1024.0 * 1024.0)
        )
    }
}
