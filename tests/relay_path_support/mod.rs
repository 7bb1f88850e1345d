//! One relay thread's sans-IO request path with its one pair connected to a scripted engine:
//! what `tests/alloc/relay_steady_state.rs` and `benches/request_path.rs` both drive.
//! Needs `h2_support` beside it (`mod h2_support;` in the including crate).
#![allow(dead_code)]

use std::sync::Arc;

use bundle_relay::clock::{Instant, TickRate};
use bundle_relay::h2::frame;
use bundle_relay::metrics::Metrics;
use bundle_relay::metrics::accounting::Stats;
use bundle_relay::relay::dispatch::Dispatcher;
use bundle_relay::relay::{RegionSpec, Spec};

use super::h2_support::{engine_hello, push_frame};

/// Ticks are nanoseconds here.
pub const MS: u64 = 1_000_000;

/// A dispatcher for region `ny` (paced at 1 ms) with one egress address, its pair connected
/// and through the HTTP/2 handshake with a generous window, ready for bundles.
pub struct OnePair {
    pub d: Dispatcher,
    pub stats: Arc<Stats>,
    pub metrics: Metrics,
}

impl OnePair {
    pub fn connect(now: Instant) -> OnePair {
        let region = RegionSpec {
            authority: "ny.mainnet.block-engine.jito.wtf".into(),
            interval_ms: 1,
            ..RegionSpec::plain("ny", "127.0.0.1:10000".parse().unwrap())
        };
        let spec = Spec::local(vec![region], vec!["127.1.0.1".parse().unwrap()]).thread(0);
        let stats = Arc::new(Stats::default());
        let metrics = Metrics::new(&["ny".to_string()], 1);
        let mut d = Dispatcher::new(
            &spec,
            TickRate::NANOS,
            now,
            stats.clone(),
            metrics.thread(0),
        );
        let order = d.poll_connect(now).expect("the pair connects at start");
        d.connected(order.pair, now);
        let n = d.transmit(order.pair, now).len();
        d.transmitted(order.pair, n, now);
        d.received(order.pair, &engine_hello(), now);
        while let Some(p) = d.poll_dirty() {
            let n = d.transmit(p, now).len();
            d.transmitted(p, n, now);
        }
        OnePair { d, stats, metrics }
    }
}

/// The engine's OK answer to a SendBundle call (headers, the bundle's uuid, trailers), whose
/// stream id is set per call. Its header fields are encoded as an indexing HPACK encoder
/// encodes them (the `h2` crate under tonic does): the first answer on the connection adds
/// `content-type: application/grpc` and `grpc-status: 0` to the dynamic table, every later one
/// names them by index, one byte each (the relay's decoder does no Huffman work for them).
pub struct EngineOk {
    pub bytes: Vec<u8>,
    stream_id_at: Vec<usize>,
    /// The later answers, once the first has gone.
    indexed: Vec<u8>,
    indexed_stream_id_at: Vec<usize>,
    first_sent: bool,
}

/// `:status: 200` (static entry 8), then `content-type` (static name 31) added to the table.
const FIRST_HEADERS: &[u8] = b"\x88\x5f\x10application/grpc";
/// `grpc-status: 0`, a new name, added to the table.
const FIRST_TRAILERS: &[u8] = b"\x40\x0bgrpc-status\x010";
/// After both: `grpc-status: 0` is dynamic entry 62, `content-type` 63.
const INDEXED_HEADERS: &[u8] = b"\x88\xbf";
const INDEXED_TRAILERS: &[u8] = b"\xbe";

impl EngineOk {
    pub fn new() -> EngineOk {
        let (bytes, stream_id_at) = Self::answer(FIRST_HEADERS, FIRST_TRAILERS);
        let (indexed, indexed_stream_id_at) = Self::answer(INDEXED_HEADERS, INDEXED_TRAILERS);
        EngineOk {
            bytes,
            stream_id_at,
            indexed,
            indexed_stream_id_at,
            first_sent: false,
        }
    }

    fn answer(headers: &[u8], trailers: &[u8]) -> (Vec<u8>, Vec<usize>) {
        let uuid = b"\x0a\x24123e4567-e89b-12d3-a456-426614174000";
        let mut bytes = Vec::new();
        let mut stream_id_at = vec![push_frame(
            &mut bytes,
            frame::HEADERS,
            frame::FLAG_END_HEADERS,
            headers,
        )];
        let mut msg = vec![0, 0, 0, 0, uuid.len() as u8];
        msg.extend_from_slice(uuid);
        stream_id_at.push(push_frame(&mut bytes, frame::DATA, 0, &msg));
        stream_id_at.push(push_frame(
            &mut bytes,
            frame::HEADERS,
            frame::FLAG_END_HEADERS | frame::FLAG_END_STREAM,
            trailers,
        ));
        (bytes, stream_id_at)
    }

    /// The next answer's bytes, addressed with [`EngineOk::set_stream`]: the indexing one the
    /// first time, the indexed one after.
    pub fn next(&mut self) -> &[u8] {
        if std::mem::replace(&mut self.first_sent, true) {
            &self.indexed
        } else {
            &self.bytes
        }
    }

    /// Addresses the answer to `stream` (the relay's calls go on 1, 3, 5, … of the connection).
    pub fn set_stream(&mut self, stream: u32) {
        for &at in &self.stream_id_at {
            self.bytes[at..at + 4].copy_from_slice(&stream.to_be_bytes());
        }
        for &at in &self.indexed_stream_id_at {
            self.indexed[at..at + 4].copy_from_slice(&stream.to_be_bytes());
        }
    }
}
