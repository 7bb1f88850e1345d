//! gRPC status: the code, its name, and grpc-message as received, percent-decoded on demand.

/// gRPC status codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Code(pub u32);

/// The gRPC spec's names of codes 0 to 16, by code.
pub const CODE_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

impl Code {
    pub const OK: Code = Code(0);
    pub const CANCELLED: Code = Code(1);
    pub const UNKNOWN: Code = Code(2);
    pub const INVALID_ARGUMENT: Code = Code(3);
    pub const DEADLINE_EXCEEDED: Code = Code(4);
    pub const NOT_FOUND: Code = Code(5);
    pub const PERMISSION_DENIED: Code = Code(7);
    pub const RESOURCE_EXHAUSTED: Code = Code(8);
    pub const UNIMPLEMENTED: Code = Code(12);
    pub const INTERNAL: Code = Code(13);
    pub const UNAVAILABLE: Code = Code(14);
    pub const UNAUTHENTICATED: Code = Code(16);

    /// The name the gRPC spec gives the code (`PERMISSION_DENIED`); `OUT_OF_SPEC` beyond 16.
    pub fn name(self) -> &'static str {
        CODE_NAMES
            .get(self.0 as usize)
            .copied()
            .unwrap_or("OUT_OF_SPEC")
    }

    /// The gRPC spec's mapping for a reply without grpc-status (doc/http-grpc-status-mapping.md).
    pub fn from_http_status(status: u16) -> Code {
        match status {
            400 => Code::INTERNAL,
            401 => Code::UNAUTHENTICATED,
            403 => Code::PERMISSION_DENIED,
            404 => Code::UNIMPLEMENTED,
            429 | 502 | 503 | 504 => Code::UNAVAILABLE,
            _ => Code::UNKNOWN,
        }
    }
}

/// The message part of a status: grpc-message as received (percent-encoded), decoded on
/// demand so holding it costs nothing.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct StatusMessage<'a>(pub &'a [u8]);

impl StatusMessage<'_> {
    /// Percent-decodes into `out` (truncating); returns the decoded bytes.
    pub fn decode_into<'b>(&self, out: &'b mut [u8]) -> &'b [u8] {
        let n = percent_decode(self.0, out);
        &out[..n]
    }
}

impl std::fmt::Debug for StatusMessage<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl std::fmt::Display for StatusMessage<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut buf = [0u8; MESSAGE_SCAN_BYTES_MAX];
        f.write_str(&String::from_utf8_lossy(self.decode_into(&mut buf)))
    }
}

/// Percent-decodes grpc-message (gRPC spec: `%XX` for bytes outside 0x20..0x7e and `%`);
/// a malformed escape is kept as is, as the spec asks. Returns the length written.
pub fn percent_decode(input: &[u8], out: &mut [u8]) -> usize {
    let hex = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let (mut i, mut n) = (0, 0);
    while i < input.len() && n < out.len() {
        let c = input[i];
        if c == b'%' {
            if let (Some(h), Some(l)) = (
                input.get(i + 1).and_then(|&c| hex(c)),
                input.get(i + 2).and_then(|&c| hex(c)),
            ) {
                out[n] = h << 4 | l;
                n += 1;
                i += 3;
                continue;
            }
        }
        out[n] = c;
        n += 1;
        i += 1;
    }
    n
}

/// How much of grpc-message is examined for a retry hint; Jito's texts are about 120 bytes.
pub const MESSAGE_SCAN_BYTES_MAX: usize = 512;
