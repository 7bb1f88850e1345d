//! HTTP/2 frame codec (RFC 9113 section 4 and 6): one frame at a time from a byte slice into a
//! borrowed, validated [`Frame`], and writers for the frames a client sends. No allocation; a
//! frame parse is a handful of bounds checks.

/// Every frame starts with a 9-byte header.
pub const HEADER_LEN: usize = 9;
/// RFC 9113 section 4.2: SETTINGS_MAX_FRAME_SIZE may not be set below this.
pub const FRAME_SIZE_MIN: u32 = 16_384;
/// RFC 9113 section 4.2: ... nor above this.
pub const FRAME_SIZE_MAX: u32 = (1 << 24) - 1;
/// RFC 9113 section 6.9.1: windows may not exceed 2^31 - 1.
pub const WINDOW_MAX: i64 = (1 << 31) - 1;
/// RFC 9113 section 6.9.2: both windows start at this.
pub const WINDOW_DEFAULT: u32 = 65_535;

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PRIORITY: u8 = 0x2;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

pub const FLAG_END_STREAM: u8 = 0x1;
pub const FLAG_ACK: u8 = 0x1;
pub const FLAG_END_HEADERS: u8 = 0x4;
pub const FLAG_PADDED: u8 = 0x8;
pub const FLAG_PRIORITY: u8 = 0x20;

pub const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
pub const SETTINGS_ENABLE_PUSH: u16 = 0x2;
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;
pub const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;

/// The client connection preface (RFC 9113 section 3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// HTTP/2 error codes (RFC 9113 section 7). Unknown codes are kept as received.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Reason(pub u32);

impl Reason {
    pub const NO_ERROR: Reason = Reason(0x0);
    pub const PROTOCOL_ERROR: Reason = Reason(0x1);
    pub const INTERNAL_ERROR: Reason = Reason(0x2);
    pub const FLOW_CONTROL_ERROR: Reason = Reason(0x3);
    pub const SETTINGS_TIMEOUT: Reason = Reason(0x4);
    pub const STREAM_CLOSED: Reason = Reason(0x5);
    pub const FRAME_SIZE_ERROR: Reason = Reason(0x6);
    pub const REFUSED_STREAM: Reason = Reason(0x7);
    pub const CANCEL: Reason = Reason(0x8);
    pub const COMPRESSION_ERROR: Reason = Reason(0x9);
    pub const CONNECT_ERROR: Reason = Reason(0xa);
    pub const ENHANCE_YOUR_CALM: Reason = Reason(0xb);
    pub const INADEQUATE_SECURITY: Reason = Reason(0xc);
    pub const HTTP_1_1_REQUIRED: Reason = Reason(0xd);
}

impl core::fmt::Display for Reason {
    /// The code's RFC 9113 name, or its number when it has none.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        const NAMES: [&str; 14] = [
            "NO_ERROR",
            "PROTOCOL_ERROR",
            "INTERNAL_ERROR",
            "FLOW_CONTROL_ERROR",
            "SETTINGS_TIMEOUT",
            "STREAM_CLOSED",
            "FRAME_SIZE_ERROR",
            "REFUSED_STREAM",
            "CANCEL",
            "COMPRESSION_ERROR",
            "CONNECT_ERROR",
            "ENHANCE_YOUR_CALM",
            "INADEQUATE_SECURITY",
            "HTTP_1_1_REQUIRED",
        ];
        match NAMES.get(self.0 as usize) {
            Some(name) => f.write_str(name),
            None => write!(f, "error code {:#x}", self.0),
        }
    }
}

/// A frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    pub len: u32,
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
}

impl Head {
    pub fn parse(b: &[u8; HEADER_LEN]) -> Head {
        Head {
            len: u32::from_be_bytes([0, b[0], b[1], b[2]]),
            kind: b[3],
            flags: b[4],
            // The reserved bit is ignored on receipt (RFC 9113 section 4.1).
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
        }
    }

    pub fn write(&self, out: &mut [u8]) {
        let l = self.len.to_be_bytes();
        out[..3].copy_from_slice(&l[1..]);
        out[3] = self.kind;
        out[4] = self.flags;
        out[5..9].copy_from_slice(&self.stream.to_be_bytes());
    }
}

/// A validated frame borrowing its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// `data` excludes padding; `flow_len` is the whole payload, which counts against flow
    /// control (RFC 9113 section 6.1).
    Data {
        stream: u32,
        data: &'a [u8],
        end_stream: bool,
        flow_len: u32,
    },
    /// `fragment` excludes padding and the priority fields.
    Headers {
        stream: u32,
        fragment: &'a [u8],
        end_stream: bool,
        end_headers: bool,
        /// Its priority makes the stream depend on itself: a stream error (RFC 9113 section
        /// 5.3.1), after its block is decoded all the same (section 4.3: the HPACK table).
        self_dependent: bool,
    },
    Priority {
        stream: u32,
    },
    RstStream {
        stream: u32,
        reason: Reason,
    },
    /// `payload` is a whole number of 6-byte settings; iterate with [`settings`].
    Settings {
        ack: bool,
        payload: &'a [u8],
    },
    PushPromise {
        stream: u32,
    },
    Ping {
        ack: bool,
        data: [u8; 8],
    },
    GoAway {
        last_stream: u32,
        reason: Reason,
        debug: &'a [u8],
    },
    WindowUpdate {
        stream: u32,
        increment: u32,
    },
    Continuation {
        stream: u32,
        fragment: &'a [u8],
        end_headers: bool,
    },
    /// Unknown frame types are ignored (RFC 9113 section 4.1).
    Unknown {
        kind: u8,
        stream: u32,
    },
}

/// A frame that breaks RFC 9113: the code to send and whether only its stream is affected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameError {
    pub reason: Reason,
    /// `Some(stream)` for a stream error (RST_STREAM), `None` for a connection error (GOAWAY).
    pub stream: Option<u32>,
    pub what: &'static str,
}

fn conn_err(reason: Reason, what: &'static str) -> FrameError {
    FrameError {
        reason,
        stream: None,
        what,
    }
}

/// Strips padding from a PADDED payload.
fn unpad(flags: u8, payload: &[u8]) -> Result<&[u8], FrameError> {
    if flags & FLAG_PADDED == 0 {
        return Ok(payload);
    }
    let pad = *payload.first().ok_or(conn_err(
        Reason::FRAME_SIZE_ERROR,
        "padded frame without pad length",
    ))? as usize;
    if pad >= payload.len() {
        return Err(conn_err(
            Reason::PROTOCOL_ERROR,
            "padding as long as the payload",
        ));
    }
    Ok(&payload[1..payload.len() - pad])
}

/// Validates one frame whose payload is complete. Stream-state rules (idle, closed) are the
/// connection's job; this checks lengths, flags, padding and stream-id zero/non-zero rules.
pub fn decode<'a>(head: Head, payload: &'a [u8]) -> Result<Frame<'a>, FrameError> {
    debug_assert_eq!(payload.len(), head.len as usize);
    let s = head.stream;
    let need_stream = |what| {
        if s == 0 {
            Err(conn_err(Reason::PROTOCOL_ERROR, what))
        } else {
            Ok(())
        }
    };
    let need_zero = |what| {
        if s != 0 {
            Err(conn_err(Reason::PROTOCOL_ERROR, what))
        } else {
            Ok(())
        }
    };
    match head.kind {
        DATA => {
            need_stream("DATA on stream 0")?;
            let data = unpad(head.flags, payload)?;
            Ok(Frame::Data {
                stream: s,
                data,
                end_stream: head.flags & FLAG_END_STREAM != 0,
                flow_len: head.len,
            })
        }
        HEADERS => {
            need_stream("HEADERS on stream 0")?;
            let mut fragment = unpad(head.flags, payload)?;
            let mut self_dependent = false;
            if head.flags & FLAG_PRIORITY != 0 {
                if fragment.len() < 5 {
                    return Err(conn_err(
                        Reason::FRAME_SIZE_ERROR,
                        "HEADERS priority fields cut short",
                    ));
                }
                let dep = u32::from_be_bytes([fragment[0], fragment[1], fragment[2], fragment[3]])
                    & 0x7fff_ffff;
                self_dependent = dep == s;
                fragment = &fragment[5..];
            }
            Ok(Frame::Headers {
                stream: s,
                fragment,
                end_stream: head.flags & FLAG_END_STREAM != 0,
                end_headers: head.flags & FLAG_END_HEADERS != 0,
                self_dependent,
            })
        }
        PRIORITY => {
            need_stream("PRIORITY on stream 0")?;
            if head.len != 5 {
                return Err(FrameError {
                    reason: Reason::FRAME_SIZE_ERROR,
                    stream: Some(s),
                    what: "PRIORITY length is not 5",
                });
            }
            Ok(Frame::Priority { stream: s })
        }
        RST_STREAM => {
            need_stream("RST_STREAM on stream 0")?;
            if head.len != 4 {
                return Err(conn_err(
                    Reason::FRAME_SIZE_ERROR,
                    "RST_STREAM length is not 4",
                ));
            }
            let code = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
            Ok(Frame::RstStream {
                stream: s,
                reason: Reason(code),
            })
        }
        SETTINGS => {
            need_zero("SETTINGS on a stream")?;
            let ack = head.flags & FLAG_ACK != 0;
            if ack && head.len != 0 {
                return Err(conn_err(
                    Reason::FRAME_SIZE_ERROR,
                    "SETTINGS ACK with a payload",
                ));
            }
            if head.len % 6 != 0 {
                return Err(conn_err(
                    Reason::FRAME_SIZE_ERROR,
                    "SETTINGS length not a multiple of 6",
                ));
            }
            Ok(Frame::Settings { ack, payload })
        }
        PUSH_PROMISE => {
            need_stream("PUSH_PROMISE on stream 0")?;
            Ok(Frame::PushPromise { stream: s })
        }
        PING => {
            need_zero("PING on a stream")?;
            if head.len != 8 {
                return Err(conn_err(Reason::FRAME_SIZE_ERROR, "PING length is not 8"));
            }
            let mut data = [0; 8];
            data.copy_from_slice(payload);
            Ok(Frame::Ping {
                ack: head.flags & FLAG_ACK != 0,
                data,
            })
        }
        GOAWAY => {
            need_zero("GOAWAY on a stream")?;
            if head.len < 8 {
                return Err(conn_err(Reason::FRAME_SIZE_ERROR, "GOAWAY shorter than 8"));
            }
            let last =
                u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & 0x7fff_ffff;
            let code = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
            Ok(Frame::GoAway {
                last_stream: last,
                reason: Reason(code),
                debug: &payload[8..],
            })
        }
        WINDOW_UPDATE => {
            if head.len != 4 {
                return Err(conn_err(
                    Reason::FRAME_SIZE_ERROR,
                    "WINDOW_UPDATE length is not 4",
                ));
            }
            let inc =
                u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & 0x7fff_ffff;
            if inc == 0 {
                return Err(FrameError {
                    reason: Reason::PROTOCOL_ERROR,
                    stream: if s == 0 { None } else { Some(s) },
                    what: "WINDOW_UPDATE with increment 0",
                });
            }
            Ok(Frame::WindowUpdate {
                stream: s,
                increment: inc,
            })
        }
        CONTINUATION => {
            need_stream("CONTINUATION on stream 0")?;
            Ok(Frame::Continuation {
                stream: s,
                fragment: payload,
                end_headers: head.flags & FLAG_END_HEADERS != 0,
            })
        }
        kind => Ok(Frame::Unknown { kind, stream: s }),
    }
}

/// Iterates (identifier, value) pairs of a SETTINGS payload.
pub fn settings(payload: &[u8]) -> impl Iterator<Item = (u16, u32)> + '_ {
    payload.chunks_exact(6).map(|c| {
        (
            u16::from_be_bytes([c[0], c[1]]),
            u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
        )
    })
}

/// Writes a whole frame `head` + `payload` into `out`; returns the bytes written or `None`
/// when `out` is too short.
pub fn write(out: &mut [u8], kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Option<usize> {
    let n = HEADER_LEN + payload.len();
    let out = out.get_mut(..n)?;
    Head {
        len: payload.len() as u32,
        kind,
        flags,
        stream,
    }
    .write(out);
    out[HEADER_LEN..].copy_from_slice(payload);
    Some(n)
}

pub fn write_ping(out: &mut [u8], ack: bool, data: [u8; 8]) -> Option<usize> {
    write(out, PING, if ack { FLAG_ACK } else { 0 }, 0, &data)
}

pub fn write_window_update(out: &mut [u8], stream: u32, increment: u32) -> Option<usize> {
    write(out, WINDOW_UPDATE, 0, stream, &increment.to_be_bytes())
}

pub fn write_rst_stream(out: &mut [u8], stream: u32, reason: Reason) -> Option<usize> {
    write(out, RST_STREAM, 0, stream, &reason.0.to_be_bytes())
}

pub fn write_goaway(out: &mut [u8], last_stream: u32, reason: Reason) -> Option<usize> {
    let mut p = [0; 8];
    p[..4].copy_from_slice(&last_stream.to_be_bytes());
    p[4..].copy_from_slice(&reason.0.to_be_bytes());
    write(out, GOAWAY, 0, 0, &p)
}

pub fn write_settings(out: &mut [u8], values: &[(u16, u32)]) -> Option<usize> {
    let n = HEADER_LEN + 6 * values.len();
    let out = out.get_mut(..n)?;
    Head {
        len: 6 * values.len() as u32,
        kind: SETTINGS,
        flags: 0,
        stream: 0,
    }
    .write(out);
    for (i, (id, v)) in values.iter().enumerate() {
        let o = HEADER_LEN + 6 * i;
        out[o..o + 2].copy_from_slice(&id.to_be_bytes());
        out[o + 2..o + 6].copy_from_slice(&v.to_be_bytes());
    }
    Some(n)
}

pub fn write_settings_ack(out: &mut [u8]) -> Option<usize> {
    write(out, SETTINGS, FLAG_ACK, 0, &[])
}
