//! How things end, by layer, each tagged with who caused it and whether a retry is safe.
//!
//! | layer | type | caused by | retry |
//! |---|---|---|---|
//! | one frame's bytes | [`super::frame::FrameError`] | the peer | becomes a stream or a connection error |
//! | a header block | [`super::hpack::HpackError`] | the peer | becomes a connection error (COMPRESSION_ERROR) |
//! | a request that could not start | [`StartError`] | us (a full table or buffer) or the peer's state | always safe: nothing was sent |
//! | one stream | [`StreamEnd`] | the peer, the transport or our deadline | [`StreamEnd::retry_safe`]: only if the peer cannot have processed it |
//! | the connection | [`ConnError`] | [`ConnError::blame`]: peer, peer shutdown, transport, us | per stream, by each [`StreamEnd`] |
//!
//! This file holds the types only, NOT the decisions: the connection ([`super::conn`]) decides
//! which one an event becomes, and the layer above folds a [`StreamEnd`] into its own outcome.

use super::frame::Reason;

/// Who ended a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blame {
    /// The peer broke the protocol or stopped answering.
    Peer,
    /// The peer ended it politely (GOAWAY).
    PeerShutdown,
    /// The network or TLS layer.
    Transport,
    /// We did.
    Local,
}

/// Who broke the connection, and how. Whether each request on it may be retried is carried
/// by its own [`StreamEnd`], since that depends on how far the request got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnError {
    /// The peer broke RFC 9113 or HPACK; we sent GOAWAY with `reason`.
    PeerProtocol { reason: Reason, what: &'static str },
    /// The peer sent GOAWAY and every stream it accepted has finished.
    GoAway { reason: Reason },
    /// The peer did not acknowledge our SETTINGS or keepalive PING in time.
    Timeout { what: &'static str },
    /// The transport (TCP or TLS) ended.
    TransportClosed,
    /// We closed it.
    Local,
}

impl ConnError {
    pub fn blame(&self) -> Blame {
        match self {
            ConnError::PeerProtocol { .. } | ConnError::Timeout { .. } => Blame::Peer,
            ConnError::GoAway { .. } => Blame::PeerShutdown,
            ConnError::TransportClosed => Blame::Transport,
            ConnError::Local => Blame::Local,
        }
    }
}

/// How a stream ended. `request_sent` says whether our END_STREAM was queued, i.e. whether
/// the peer may have received and processed the whole request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamEnd {
    /// END_STREAM received: the response (headers, body, trailers) is complete.
    Complete,
    /// The peer reset the stream.
    Reset { reason: Reason, request_sent: bool },
    /// Above GOAWAY's last-stream-id: the peer never processed it.
    NotProcessed,
    /// The connection ended first.
    ConnectionLost {
        error: ConnError,
        request_sent: bool,
    },
    /// Its deadline passed; we reset it with CANCEL.
    TimedOut { request_sent: bool },
    /// Flow control still held part of the request at its send-by
    /// ([`super::Connection::send_by`]); we reset it with CANCEL. Never sent whole, so never
    /// processed; and no sign of a connection gone quiet, as a deadline passing is.
    Withheld,
    /// The peer broke the protocol on this stream; we reset it with `reason`.
    PeerError {
        reason: Reason,
        what: &'static str,
        request_sent: bool,
    },
}

impl StreamEnd {
    /// Whether sending the request again cannot duplicate it.
    pub fn retry_safe(&self) -> bool {
        match *self {
            StreamEnd::Complete => false,
            StreamEnd::NotProcessed | StreamEnd::Withheld => true,
            StreamEnd::Reset {
                reason,
                request_sent,
            } => reason == Reason::REFUSED_STREAM || !request_sent,
            StreamEnd::ConnectionLost { request_sent, .. }
            | StreamEnd::TimedOut { request_sent }
            | StreamEnd::PeerError { request_sent, .. } => !request_sent,
        }
    }
}

/// Why a request could not start. Every variant is safe to retry (nothing was sent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartError {
    /// Closed or draining after GOAWAY: use another connection.
    NotAccepting,
    /// The peer's MAX_CONCURRENT_STREAMS or our slot table is full: wait for a stream to end.
    ConcurrencyLimit,
    /// The transmit buffer cannot take the HEADERS now: send first, then retry.
    TransmitFull,
    /// Stream ids are exhausted: use a new connection.
    StreamIdsExhausted,
    /// The request headers exceed our encoder buffer or the peer's MAX_HEADER_LIST_SIZE.
    HeadersTooLarge,
    /// The body writer found the request body buffer too small.
    BodyTooLarge,
}

impl StartError {
    /// Always true: a request that did not start sent nothing.
    pub fn retry_safe(&self) -> bool {
        true
    }

    /// Whether this connection can take the request later (as opposed to needing another).
    pub fn wait_here(&self) -> bool {
        matches!(
            self,
            StartError::ConcurrencyLimit | StartError::TransmitFull
        )
    }
}
