//! SOCKS5 CONNECT client (RFC 1928) with no-auth or username/password (RFC 1929), sans-IO:
//! bytes in, bytes out, fixed buffers, no allocation.
//!
//! Driving it: send [`Socks5::poll_transmit`] and report it with [`Socks5::advance_transmit`];
//! give every received byte to [`Socks5::handle_bytes`] until it returns
//! [`Progress::Done`]; then the tunnel is up and the last `leftover` bytes of that call's input
//! already belong to the next layer (TLS or HTTP/2). A socket EOF before then goes to
//! [`Socks5::handle_transport_closed`].
//!
//! All three requests are laid out once in [`Socks5::new`] and never move, so an in-flight send
//! may point at them; each is offered only after the reply to the one before arrives. With
//! credentials only username/password is offered (and without them only no-auth), so a proxy
//! that does not enforce the configured method is an error, not a silent downgrade.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

const VERSION: u8 = 0x05;
const AUTH_VERSION: u8 = 0x01;
const CMD_CONNECT: u8 = 0x01;
const ATYP_IPV4: u8 = 0x01;
const ATYP_DOMAIN: u8 = 0x03;
const ATYP_IPV6: u8 = 0x04;
const NO_ACCEPTABLE_METHOD: u8 = 0xff;

/// RFC 1929: each credential is 1 to 255 bytes.
pub const CREDENTIAL_BYTES_MAX: usize = 255;

/// Greeting (4) + username/password request (3 + 255 + 255) + CONNECT for IPv6 (22).
const TRANSMIT_BYTES: usize = 4 + 3 + 2 * CREDENTIAL_BYTES_MAX + 22;

/// The longest reply: 4-byte head, a 255-byte domain with its length byte, 2-byte port.
const REPLY_BYTES_MAX: usize = 4 + 1 + 255 + 2;

/// An authentication method (RFC 1928 section 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    NoAuth = 0x00,
    UsernamePassword = 0x02,
}

/// Where the handshake was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for the method selection.
    Greeting,
    /// Waiting for the username/password verdict.
    Auth,
    /// Waiting for the CONNECT reply.
    Connect,
    /// The tunnel is up.
    Done,
}

/// A CONNECT reply's failure code, by its RFC 1928 section 6 name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyCode {
    GeneralFailure,
    NotAllowedByRuleset,
    NetworkUnreachable,
    HostUnreachable,
    ConnectionRefused,
    TtlExpired,
    CommandNotSupported,
    AddressTypeNotSupported,
    Unassigned(u8),
}

impl ReplyCode {
    /// The code for a non-zero REP byte.
    pub fn from_byte(b: u8) -> ReplyCode {
        match b {
            1 => ReplyCode::GeneralFailure,
            2 => ReplyCode::NotAllowedByRuleset,
            3 => ReplyCode::NetworkUnreachable,
            4 => ReplyCode::HostUnreachable,
            5 => ReplyCode::ConnectionRefused,
            6 => ReplyCode::TtlExpired,
            7 => ReplyCode::CommandNotSupported,
            8 => ReplyCode::AddressTypeNotSupported,
            other => ReplyCode::Unassigned(other),
        }
    }

    /// The REP byte.
    pub fn byte(self) -> u8 {
        match self {
            ReplyCode::GeneralFailure => 1,
            ReplyCode::NotAllowedByRuleset => 2,
            ReplyCode::NetworkUnreachable => 3,
            ReplyCode::HostUnreachable => 4,
            ReplyCode::ConnectionRefused => 5,
            ReplyCode::TtlExpired => 6,
            ReplyCode::CommandNotSupported => 7,
            ReplyCode::AddressTypeNotSupported => 8,
            ReplyCode::Unassigned(b) => b,
        }
    }

    /// RFC 1928's wording.
    pub fn name(self) -> &'static str {
        match self {
            ReplyCode::GeneralFailure => "general SOCKS server failure",
            ReplyCode::NotAllowedByRuleset => "connection not allowed by ruleset",
            ReplyCode::NetworkUnreachable => "network unreachable",
            ReplyCode::HostUnreachable => "host unreachable",
            ReplyCode::ConnectionRefused => "connection refused",
            ReplyCode::TtlExpired => "TTL expired",
            ReplyCode::CommandNotSupported => "command not supported",
            ReplyCode::AddressTypeNotSupported => "address type not supported",
            ReplyCode::Unassigned(_) => "unassigned reply code",
        }
    }
}

/// Why the tunnel could not be set up. `Copy`, so reporting it never allocates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Socks5Error {
    /// A configured username or password is empty or longer than 255 bytes.
    CredentialLength { field: &'static str, len: usize },
    /// The proxy accepted none of the methods offered (it answered 0xFF).
    MethodRefused { offered: Method },
    /// The proxy chose a method that was not offered.
    UnofferedMethod { offered: Method, chosen: u8 },
    /// Username/password rejected (RFC 1929 status, non-zero).
    AuthFailed { status: u8 },
    /// The CONNECT reply carried a failure code.
    ConnectFailed(ReplyCode),
    /// A reply broke the protocol; `what` names the field, `byte` is what came.
    Malformed {
        phase: Phase,
        what: &'static str,
        byte: u8,
    },
    /// The proxy closed the connection before the tunnel was up.
    ProxyClosed { phase: Phase },
}

impl fmt::Display for Socks5Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Socks5Error::CredentialLength { field, len } => {
                write!(f, "SOCKS5 {field} must be 1 to 255 bytes, not {len}")
            }
            Socks5Error::MethodRefused { offered } => write!(
                f,
                "SOCKS5 proxy refused the offered authentication method ({})",
                method_name(offered)
            ),
            Socks5Error::UnofferedMethod { offered, chosen } => write!(
                f,
                "SOCKS5 proxy chose method {chosen:#04x}, but only {} was offered",
                method_name(offered)
            ),
            Socks5Error::AuthFailed { status } => write!(
                f,
                "SOCKS5 proxy rejected the username/password (status {status:#04x})"
            ),
            Socks5Error::ConnectFailed(code) => write!(
                f,
                "SOCKS5 CONNECT failed: {} (reply {:#04x})",
                code.name(),
                code.byte()
            ),
            Socks5Error::Malformed { phase, what, byte } => write!(
                f,
                "malformed SOCKS5 reply while waiting for {}: {what} (got {byte:#04x})",
                phase_name(phase)
            ),
            Socks5Error::ProxyClosed { phase } => write!(
                f,
                "SOCKS5 proxy closed the connection while we waited for {}",
                phase_name(phase)
            ),
        }
    }
}

impl std::error::Error for Socks5Error {}

fn method_name(m: Method) -> &'static str {
    match m {
        Method::NoAuth => "no authentication",
        Method::UsernamePassword => "username/password",
    }
}

fn phase_name(p: Phase) -> &'static str {
    match p {
        Phase::Greeting => "the method selection",
        Phase::Auth => "the username/password verdict",
        Phase::Connect => "the CONNECT reply",
        Phase::Done => "nothing (the tunnel was up)",
    }
}

/// What [`Socks5::handle_bytes`] achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// More bytes needed (and perhaps a request to send).
    NeedMore,
    /// The tunnel is up; the last `leftover` bytes of the input belong to the next layer.
    Done { leftover: usize },
}

/// One CONNECT handshake.
pub struct Socks5 {
    method: Method,
    tx: [u8; TRANSMIT_BYTES],
    /// Each request's end in `tx`: greeting, auth (equal to greeting's without credentials),
    /// CONNECT.
    ends: [usize; 3],
    /// Bytes reported sent.
    sent: usize,
    /// Bytes of `tx` offered so far: the requests whose turn has come.
    offered: usize,
    rx: [u8; REPLY_BYTES_MAX],
    rx_len: usize,
    phase: Phase,
    failed: Option<Socks5Error>,
    bound: Option<SocketAddr>,
}

impl fmt::Debug for Socks5 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Socks5")
            .field("method", &self.method)
            .field("phase", &self.phase)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl Socks5 {
    /// A handshake asking the proxy to CONNECT to `target`, authenticating with
    /// `(username, password)` when given.
    pub fn new(target: SocketAddr, auth: Option<(&str, &str)>) -> Result<Socks5, Socks5Error> {
        let mut tx = [0u8; TRANSMIT_BYTES];
        let method = if auth.is_some() {
            Method::UsernamePassword
        } else {
            Method::NoAuth
        };
        tx[..3].copy_from_slice(&[VERSION, 1, method as u8]);
        let greeting_end = 3;
        let mut pos = greeting_end;
        if let Some((user, pass)) = auth {
            for (field, v) in [("username", user), ("password", pass)] {
                if v.is_empty() || v.len() > CREDENTIAL_BYTES_MAX {
                    return Err(Socks5Error::CredentialLength {
                        field,
                        len: v.len(),
                    });
                }
            }
            tx[pos] = AUTH_VERSION;
            pos += 1;
            for v in [user, pass] {
                tx[pos] = v.len() as u8;
                tx[pos + 1..pos + 1 + v.len()].copy_from_slice(v.as_bytes());
                pos += 1 + v.len();
            }
        }
        let auth_end = pos;
        tx[pos..pos + 3].copy_from_slice(&[VERSION, CMD_CONNECT, 0]);
        pos += 3;
        match target.ip() {
            IpAddr::V4(ip) => {
                tx[pos] = ATYP_IPV4;
                tx[pos + 1..pos + 5].copy_from_slice(&ip.octets());
                pos += 5;
            }
            IpAddr::V6(ip) => {
                tx[pos] = ATYP_IPV6;
                tx[pos + 1..pos + 17].copy_from_slice(&ip.octets());
                pos += 17;
            }
        }
        tx[pos..pos + 2].copy_from_slice(&target.port().to_be_bytes());
        pos += 2;
        Ok(Socks5 {
            method,
            tx,
            ends: [greeting_end, auth_end, pos],
            sent: 0,
            offered: greeting_end,
            rx: [0; REPLY_BYTES_MAX],
            rx_len: 0,
            phase: Phase::Greeting,
            failed: None,
            bound: None,
        })
    }

    /// The request bytes due now (empty while waiting for a reply).
    pub fn poll_transmit(&self) -> &[u8] {
        &self.tx[self.sent..self.offered]
    }

    /// Reports `n` bytes of [`Socks5::poll_transmit`] as sent.
    pub fn advance_transmit(&mut self, n: usize) {
        debug_assert!(self.sent + n <= self.offered);
        self.sent = (self.sent + n).min(self.offered);
    }

    /// Where the handshake stands.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The address the proxy reports it bound for the tunnel (IP replies only).
    pub fn bound_addr(&self) -> Option<SocketAddr> {
        self.bound
    }

    /// The proxy's connection ended: an error unless the tunnel was already up.
    pub fn handle_transport_closed(&mut self) -> Option<Socks5Error> {
        if self.phase == Phase::Done {
            return None;
        }
        Some(
            *self
                .failed
                .get_or_insert(Socks5Error::ProxyClosed { phase: self.phase }),
        )
    }

    /// Takes bytes from the proxy. After [`Progress::Done`] further calls return `Done` with
    /// all of their input left over; after an error, the same error.
    pub fn handle_bytes(&mut self, input: &[u8]) -> Result<Progress, Socks5Error> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let mut at = 0;
        while self.phase != Phase::Done {
            let need = match self.reply_len() {
                Ok(n) => n,
                Err(e) => return Err(self.fail(e)),
            };
            if self.rx_len < need {
                let take = (need - self.rx_len).min(input.len() - at);
                self.rx[self.rx_len..self.rx_len + take].copy_from_slice(&input[at..at + take]);
                self.rx_len += take;
                at += take;
                if take == 0 {
                    return Ok(Progress::NeedMore);
                }
                continue; // the length may depend on what just came (the address type)
            }
            if let Err(e) = self.finish_reply() {
                return Err(self.fail(e));
            }
            self.rx_len = 0;
        }
        Ok(Progress::Done {
            leftover: input.len() - at,
        })
    }

    fn fail(&mut self, e: Socks5Error) -> Socks5Error {
        self.failed = Some(e);
        e
    }

    fn malformed(&self, what: &'static str, byte: u8) -> Socks5Error {
        Socks5Error::Malformed {
            phase: self.phase,
            what,
            byte,
        }
    }

    /// The current reply's full length, as far as the bytes so far tell (at least what is
    /// needed to learn more).
    fn reply_len(&self) -> Result<usize, Socks5Error> {
        match self.phase {
            Phase::Greeting | Phase::Auth => Ok(2),
            Phase::Connect => {
                if self.rx_len < 2 {
                    return Ok(2);
                }
                if self.rx[0] != VERSION {
                    return Err(self.malformed("version is not 5", self.rx[0]));
                }
                if self.rx[1] != 0 {
                    // Known at once; some proxies close without sending the address.
                    return Err(Socks5Error::ConnectFailed(ReplyCode::from_byte(self.rx[1])));
                }
                if self.rx_len < 5 {
                    return Ok(5);
                }
                match self.rx[3] {
                    ATYP_IPV4 => Ok(4 + 4 + 2),
                    ATYP_IPV6 => Ok(4 + 16 + 2),
                    ATYP_DOMAIN => Ok(4 + 1 + self.rx[4] as usize + 2),
                    other => Err(self.malformed("unknown address type", other)),
                }
            }
            Phase::Done => Ok(0),
        }
    }

    /// Acts on a complete reply in `rx`.
    fn finish_reply(&mut self) -> Result<(), Socks5Error> {
        let r = &self.rx[..self.rx_len];
        match self.phase {
            Phase::Greeting => {
                if r[0] != VERSION {
                    return Err(self.malformed("version is not 5", r[0]));
                }
                if r[1] == NO_ACCEPTABLE_METHOD {
                    return Err(Socks5Error::MethodRefused {
                        offered: self.method,
                    });
                }
                if r[1] != self.method as u8 {
                    return Err(Socks5Error::UnofferedMethod {
                        offered: self.method,
                        chosen: r[1],
                    });
                }
                if self.method == Method::UsernamePassword {
                    self.phase = Phase::Auth;
                    self.offered = self.ends[1];
                } else {
                    self.phase = Phase::Connect;
                    self.offered = self.ends[2];
                }
            }
            Phase::Auth => {
                if r[0] != AUTH_VERSION {
                    return Err(self.malformed("auth version is not 1", r[0]));
                }
                if r[1] != 0 {
                    return Err(Socks5Error::AuthFailed { status: r[1] });
                }
                self.phase = Phase::Connect;
                self.offered = self.ends[2];
            }
            Phase::Connect => {
                if r[2] != 0 {
                    return Err(self.malformed("reserved byte is not 0", r[2]));
                }
                let port = u16::from_be_bytes([r[r.len() - 2], r[r.len() - 1]]);
                self.bound = match r[3] {
                    ATYP_IPV4 => {
                        let ip: [u8; 4] = r[4..8].try_into().expect("4 bytes");
                        Some(SocketAddr::from((ip, port)))
                    }
                    ATYP_IPV6 => {
                        let ip: [u8; 16] = r[4..20].try_into().expect("16 bytes");
                        Some(SocketAddr::from((ip, port)))
                    }
                    _ => None,
                };
                self.phase = Phase::Done;
            }
            Phase::Done => {}
        }
        Ok(())
    }
}

/// The `socks5_reply` fuzz target's body (also run as a seeded proptest): arbitrary proxy
/// bytes, split at points chosen by the input, against a handshake with or without
/// credentials. Never panics; checks the invariants a caller relies on.
pub fn fuzz_handle_bytes(data: &[u8]) {
    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    let auth = (ctl & 1 == 1).then_some(("user", "pass"));
    let target = if ctl & 2 == 0 {
        SocketAddr::from(([127, 0, 0, 1], 443))
    } else {
        SocketAddr::from(([0u16, 0, 0, 0, 0, 0, 0, 1], 443))
    };
    let mut s = Socks5::new(target, auth).expect("valid credentials");
    let chunk = (ctl >> 2) as usize + 1;
    for piece in rest.chunks(chunk) {
        let n = s.poll_transmit().len();
        s.advance_transmit(n);
        match s.handle_bytes(piece) {
            Ok(Progress::Done { leftover }) => {
                assert!(leftover <= piece.len());
                assert_eq!(s.phase(), Phase::Done);
            }
            Ok(Progress::NeedMore) => assert_ne!(s.phase(), Phase::Done),
            Err(e) => {
                assert_eq!(s.handle_bytes(piece), Err(e), "errors are final");
                return;
            }
        }
    }
    let _ = s.handle_transport_closed();
}
