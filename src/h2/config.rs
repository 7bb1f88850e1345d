//! A connection's limits: every buffer, window and deadline [`Config`] sizes, each default a
//! named constant with its reason beside it. [`super::conn::Connection::new`] allocates from
//! these and nothing afterwards.
//!
//! This is NOT where the relay's own upstream sizes live (`relay::upstream_h2_config` shrinks
//! them to what one call per connection carries); these are the defaults for any client.

use super::frame::FRAME_SIZE_MIN;
use super::hpack::ENTRY_OVERHEAD;

/// Requests in flight per connection. The relay sends about one bundle per second per
/// (source, region) pair, so a handful suffices; 16 leaves room for GetTipAccounts and leader
/// queries beside bundles.
pub const STREAM_SLOTS_DEFAULT: usize = 16;
/// A SendBundle of five 1232-byte transactions is 6,240 bytes of packet data plus about 60
/// bytes of protobuf framing and the 5-byte gRPC prefix; 8 KiB holds it with room to spare.
pub const REQUEST_BODY_BYTES_MAX_DEFAULT: usize = 8 * 1024;
/// The largest searcher response (GetTipAccounts: 8 base58 keys) is under 512 bytes; 16 KiB
/// also holds one full default-size DATA frame.
pub const RESPONSE_BODY_BYTES_MAX_DEFAULT: usize = 16 * 1024;
/// Decoded response header or trailer lists: gRPC replies carry a few short fields; Envoy adds
/// a few more. Advertised as SETTINGS_MAX_HEADER_LIST_SIZE.
pub const HEADER_LIST_BYTES_MAX_DEFAULT: usize = 8 * 1024;
/// Fields per decoded list at most; 64 is far beyond any gRPC reply and bounds the field table.
/// A smaller list limit bounds it lower ([`Config::header_fields_max`]).
pub const HEADER_FIELDS_MAX: usize = 64;
/// A compressed header block (HEADERS plus CONTINUATIONs) can never usefully exceed the
/// decoded list it expands to, so it gets the same cap.
pub const HEADER_BLOCK_BYTES_MAX_DEFAULT: usize = HEADER_LIST_BYTES_MAX_DEFAULT;
/// Frames in one header block: a CONTINUATION flood of empty frames would otherwise hold the
/// connection forever within the byte cap.
pub const HEADER_BLOCK_FRAMES_MAX: u32 = 16;
/// A header block must complete within this: peers send a block in one write.
pub const HEADER_BLOCK_OPEN_MS_DEFAULT: u64 = 1_000;
/// Our encoded request header block: the fields are about 200 bytes, an authorization token
/// about 1 KiB.
pub const REQUEST_HEADER_BLOCK_BYTES_MAX: usize = 4 * 1024;
/// What a request header block takes in practice (the fields and a token): the transmit
/// buffer room a connection makes resident for each call when it connects. A larger block
/// touches a page the first time it is sent.
pub const REQUEST_HEADER_BLOCK_BYTES_USUAL: usize = 1280;
/// What a response body takes in practice (a SendBundleResponse, the tip accounts, an error
/// in JSON): the room a connection makes resident for each call when it connects. A larger
/// body (a status query's answer, an error page) touches its pages the first time one comes.
pub const RESPONSE_BODY_BYTES_USUAL: usize = 1024;
/// Our connection receive window: responses are small, but many may arrive at once.
pub const CONN_WINDOW_BYTES_DEFAULT: u32 = 1 << 20;
/// Our stream receive window; the stream is credited as data is copied out, so a response
/// larger than this still flows, up to the response body cap.
pub const STREAM_WINDOW_BYTES_DEFAULT: u32 = 64 * 1024;
/// HPACK dynamic table we offer the peer (the RFC default).
pub const HEADER_TABLE_BYTES_DEFAULT: u32 = 4_096;
/// Our SETTINGS must be acknowledged within this (RFC 9113 section 6.5.3 SETTINGS_TIMEOUT).
pub const SETTINGS_ACK_TIMEOUT_MS_DEFAULT: u64 = 10_000;
/// gRPC servers' default policy: a client that PINGs a connection without calls more often
/// than this may be told GOAWAY ENHANCE_YOUR_CALM "too_many_pings". The owner of a connection
/// chooses its keepalive (and backs it off when told so); this is the figure to back off to.
pub const KEEPALIVE_INTERVAL_MS_POLICY: u64 = 300_000;
/// How long a keepalive PING may stay unanswered before the connection counts as dead.
pub const KEEPALIVE_TIMEOUT_MS_DEFAULT: u64 = 20_000;
/// Bytes waiting to be sent: several full DATA frames plus control frames; when the socket
/// cannot take them the reactor stops feeding requests.
pub const TRANSMIT_BYTES_MAX_DEFAULT: usize = 64 * 1024;
/// PINGs and SETTINGS from the peer per second before we call it a flood (each costs us an
/// ACK); legitimate peers send a few.
pub const CONTROL_FRAMES_PER_SECOND_MAX: u32 = 128;

/// Connection limits, each sized once here. Sizes are bytes and times milliseconds unless the
/// name says otherwise.
#[derive(Clone, Debug)]
pub struct Config {
    pub stream_slots: usize,
    pub request_body_bytes_max: usize,
    pub response_body_bytes_max: usize,
    pub header_list_bytes_max: usize,
    pub header_block_bytes_max: usize,
    pub header_block_open_ms: u64,
    /// Our connection receive window, bytes.
    pub conn_window: u32,
    /// Our stream receive window (SETTINGS_INITIAL_WINDOW_SIZE), bytes.
    pub stream_window: u32,
    /// Our SETTINGS_MAX_FRAME_SIZE, bytes; also sizes the receive buffer.
    pub frame_size_max: u32,
    /// Our SETTINGS_HEADER_TABLE_SIZE, bytes: the HPACK decoder's dynamic table.
    pub header_table_size: u32,
    pub settings_ack_timeout_ms: u64,
    /// A PING after this long without a frame from the peer (`None`: no keepalive PINGs, the
    /// default); see [`KEEPALIVE_INTERVAL_MS_POLICY`].
    pub keepalive_interval_ms: Option<u64>,
    pub keepalive_timeout_ms: u64,
    pub transmit_bytes_max: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            stream_slots: STREAM_SLOTS_DEFAULT,
            request_body_bytes_max: REQUEST_BODY_BYTES_MAX_DEFAULT,
            response_body_bytes_max: RESPONSE_BODY_BYTES_MAX_DEFAULT,
            header_list_bytes_max: HEADER_LIST_BYTES_MAX_DEFAULT,
            header_block_bytes_max: HEADER_BLOCK_BYTES_MAX_DEFAULT,
            header_block_open_ms: HEADER_BLOCK_OPEN_MS_DEFAULT,
            conn_window: CONN_WINDOW_BYTES_DEFAULT,
            stream_window: STREAM_WINDOW_BYTES_DEFAULT,
            frame_size_max: FRAME_SIZE_MIN,
            header_table_size: HEADER_TABLE_BYTES_DEFAULT,
            settings_ack_timeout_ms: SETTINGS_ACK_TIMEOUT_MS_DEFAULT,
            keepalive_interval_ms: None,
            keepalive_timeout_ms: KEEPALIVE_TIMEOUT_MS_DEFAULT,
            transmit_bytes_max: TRANSMIT_BYTES_MAX_DEFAULT,
        }
    }
}

impl Config {
    /// Rows of a decoded list's field table: as many fields as a list within our
    /// SETTINGS_MAX_HEADER_LIST_SIZE can hold (each field counts its name, its value and 32
    /// bytes there, so a peer that keeps to the limit sends no more), at most
    /// [`HEADER_FIELDS_MAX`]. A list of more fields is refused as too large, as one of more
    /// name and value bytes than the limit is.
    pub fn header_fields_max(&self) -> usize {
        (self.header_list_bytes_max / ENTRY_OVERHEAD).clamp(1, HEADER_FIELDS_MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lists_field_rows_are_what_its_limit_holds_at_32_bytes_a_field_within_1_to_64() {
        for (list_bytes_max, rows) in [(1024, 32), (1055, 32), (1056, 33), (8192, 64), (16, 1)] {
            let cfg = Config {
                header_list_bytes_max: list_bytes_max,
                ..Config::default()
            };
            assert_eq!(cfg.header_fields_max(), rows, "{list_bytes_max}");
        }
    }
}
