//! JSON-RPC errors that render their precise message without allocating. This file says what
//! each error is and how it reads; it is NOT where errors are found (`parse.rs`, `scan.rs`)
//! or written into a response (`write.rs`).

use core::fmt;

use super::json_str::JsonStr;
use super::limits::{DEPTH_MAX, ID_LEN_MAX, MEMBERS_MAX, STATUS_IDS_MAX};
use super::request::{Id, Method};
use crate::jito::code;
use crate::wire::{BUNDLE_TXS_MAX, Encoding};

/// Longest wire-layer cause kept inside an [`RpcError`], in bytes of UTF-8. The wire layer's
/// messages are one sentence with a number or two, the widest 117 bytes with every number at
/// 65,535 (a test renders each), so a bot is told the whole reason; the error stays within
/// 160 bytes (asserted below), so returning it by value stays cheap and needs no box. A
/// longer cause (none today) is cut at a character boundary and marked `…`.
pub const ERROR_CAUSE_LEN_MAX: usize = 120;

/// Most characters of a user-supplied name (method, member) quoted in a message: enough to
/// recognise a typo, short enough that the error response fits
/// [`ERROR_RESPONSE_LEN_MAX`](super::write::ERROR_RESPONSE_LEN_MAX).
pub const QUOTED_CHARS_MAX: usize = 64;

/// What the JSON scanner expected at the offset where the document went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expected {
    /// Any JSON value (also: an empty body).
    Value,
    /// A string as an object key.
    Key,
    /// `:` after an object key.
    Colon,
    /// `,` or `}` after an object member.
    CommaOrObjectEnd,
    /// `,` or `]` after an array element.
    CommaOrArrayEnd,
    /// A digit in a number.
    Digit,
    /// One of JSON's escapes after `\`.
    Escape,
    /// A hex digit of a `\u` escape.
    HexDigit,
    /// A `\u` low surrogate after a high surrogate, or a low surrogate without a high one.
    SurrogatePair,
    /// The closing quote of a string (the input ended inside it).
    StringEnd,
    /// Valid UTF-8 inside a string.
    Utf8,
    /// A raw control character (U+0000..U+001F) inside a string: JSON requires it escaped.
    EscapedControl,
    /// One of the literals `true`, `false`, `null`.
    Literal(&'static str),
    /// Only whitespace after the top-level value.
    End,
    /// Nesting deeper than [`DEPTH_MAX`].
    ShallowerNesting,
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expected::Value => f.write_str("a JSON value"),
            Expected::Key => f.write_str("a string key"),
            Expected::Colon => f.write_str("':' after the key"),
            Expected::CommaOrObjectEnd => f.write_str("',' or '}'"),
            Expected::CommaOrArrayEnd => f.write_str("',' or ']'"),
            Expected::Digit => f.write_str("a digit"),
            Expected::Escape => {
                f.write_str("an escape: \\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\uXXXX")
            }
            Expected::HexDigit => f.write_str("a hex digit in a \\u escape"),
            Expected::SurrogatePair => {
                f.write_str("a surrogate pair: \\uD800-\\uDBFF followed by \\uDC00-\\uDFFF")
            }
            Expected::StringEnd => f.write_str("'\"' to close the string"),
            Expected::Utf8 => f.write_str("valid UTF-8"),
            Expected::EscapedControl => {
                f.write_str("no raw control characters in a string (escape them)")
            }
            Expected::Literal(word) => write!(f, "'{word}'"),
            Expected::End => f.write_str("end of input after the request"),
            Expected::ShallowerNesting => write!(f, "nesting at most {DEPTH_MAX} deep"),
        }
    }
}

/// Which list a count or element error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListOf {
    Transactions,
    BundleIds,
}

impl ListOf {
    fn plural(self) -> &'static str {
        match self {
            ListOf::Transactions => "transactions",
            ListOf::BundleIds => "bundle ids",
        }
    }

    /// Most elements the list may hold.
    pub const fn len_max(self) -> usize {
        match self {
            ListOf::Transactions => BUNDLE_TXS_MAX,
            ListOf::BundleIds => STATUS_IDS_MAX,
        }
    }

    fn singular(self) -> &'static str {
        match self {
            ListOf::Transactions => "transaction",
            ListOf::BundleIds => "bundle id",
        }
    }
}

/// The JSON type of a value, named in messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonType {
    Object,
    Array,
    String,
    Number,
    Bool,
    Null,
}

impl JsonType {
    /// The type of the value starting with `first` (a valid value's first byte).
    pub(crate) fn of_first_byte(first: u8) -> JsonType {
        match first {
            b'{' => JsonType::Object,
            b'[' => JsonType::Array,
            b'"' => JsonType::String,
            b't' | b'f' => JsonType::Bool,
            b'n' => JsonType::Null,
            _ => JsonType::Number,
        }
    }

    fn with_article(self) -> &'static str {
        match self {
            JsonType::Object => "an object",
            JsonType::Array => "an array",
            JsonType::String => "a string",
            JsonType::Number => "a number",
            JsonType::Bool => "a boolean",
            JsonType::Null => "null",
        }
    }
}

/// A wire-layer cause rendered into a fixed inline buffer, cut at a character boundary.
#[derive(Clone, Copy)]
pub struct InlineText {
    buf: [u8; ERROR_CAUSE_LEN_MAX],
    len: u8,
    truncated: bool,
}

const _: () = assert!(ERROR_CAUSE_LEN_MAX <= u8::MAX as usize);

impl InlineText {
    /// Renders `cause` with its `Display`, keeping the first [`ERROR_CAUSE_LEN_MAX`] bytes.
    pub fn render(cause: &dyn fmt::Display) -> InlineText {
        let mut text = InlineText {
            buf: [0; ERROR_CAUSE_LEN_MAX],
            len: 0,
            truncated: false,
        };
        // Our `write_str` never fails; a cause whose Display fails keeps what it wrote.
        let _ = fmt::write(&mut text, format_args!("{cause}"));
        text
    }

    /// The kept text.
    pub fn as_str(&self) -> &str {
        // Only whole characters are ever copied in, so this cannot fail.
        core::str::from_utf8(&self.buf[..usize::from(self.len)]).unwrap_or("")
    }

    /// Whether the cause was longer than the buffer.
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }
}

impl fmt::Write for InlineText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.truncated {
            return Ok(());
        }
        let at = usize::from(self.len);
        let room = ERROR_CAUSE_LEN_MAX - at;
        let mut take = s.len().min(room);
        while !s.is_char_boundary(take) {
            take -= 1;
        }
        self.buf[at..at + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len = (at + take) as u8;
        if take < s.len() {
            self.truncated = true;
        }
        Ok(())
    }
}

impl fmt::Debug for InlineText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PartialEq for InlineText {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str() && self.truncated == other.truncated
    }
}

impl Eq for InlineText {}

/// What went wrong, with everything needed to say it precisely. Indexes count from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind<'a> {
    // -32700
    /// The body is not JSON: the byte offset where it went wrong and what was expected there.
    Parse { offset: usize, expected: Expected },

    // -32600
    /// The body is a JSON array (a JSON-RPC batch).
    Batch,
    /// The body is JSON but not an object.
    NotAnObject(JsonType),
    /// A top-level member appears twice.
    DuplicateMember(JsonStr<'a>),
    /// More top-level members than [`MEMBERS_MAX`].
    TooManyMembers,
    /// `jsonrpc` or `method` is absent.
    MissingMember(&'static str),
    /// `jsonrpc` is not the string `"2.0"`.
    WrongVersion,
    /// `method` is not a string.
    MethodNotString(JsonType),
    /// `id` is an object, array or boolean.
    IdType(JsonType),
    /// `id` is longer than [`ID_LEN_MAX`] bytes of JSON.
    IdTooLong { len: usize },

    // -32601
    /// No such method.
    MethodNotFound(JsonStr<'a>),

    // -32602
    /// `params` is not an array.
    ParamsNotArray { method: Method, found: JsonType },
    /// The params array has the wrong number of elements.
    ParamCount {
        method: Method,
        min: usize,
        max: usize,
        got: usize,
    },
    /// `params[index]` should have been an array of transactions or bundle ids.
    ListNotArray {
        index: usize,
        of: ListOf,
        found: JsonType,
    },
    /// The list holds too few or too many elements.
    ListCount { of: ListOf, got: usize },
    /// An element of the list is not a string.
    NotAString { of: ListOf, index: usize },
    /// A transaction string is longer than its encoding allows.
    TransactionTooLong {
        index: usize,
        chars: usize,
        encoding: Encoding,
    },
    /// `params[index]` should have been an options object.
    OptionsNotObject { index: usize, found: JsonType },
    /// The `encoding` option is not a string.
    EncodingNotString(JsonType),
    /// The `encoding` option names an encoding other than base58 or base64.
    UnsupportedEncoding(JsonStr<'a>),
    /// The wire layer rejected transaction `index`.
    InvalidTransaction { index: usize, cause: InlineText },
    /// Bundle id `index` is not 64 hex characters.
    NotABundleId { index: usize, id: JsonStr<'a> },

    /// A trusted proxy's request names no client: no `X-Forwarded-For` (`forwarded_for`
    /// `None`), or its last element is not an address.
    Unforwarded {
        proxy: core::net::IpAddr,
        forwarded_for: Option<&'a [u8]>,
    },

    // -32001
    /// No tenant matched and the relay admits only tenants; `key_given`: a key was sent (and
    /// names no tenant), else none was.
    Unauthorized { key_given: bool },

    // -32003
    /// The tenant is disabled in the relay's config; its name.
    TenantDisabled(&'a str),
    /// A pinned port whose region (its name) the tenant may not use.
    RegionNotAllowed(&'a str),

    // -32097
    /// The relay (or the engine behind it) is full; retry after the given time.
    RateLimited { retry_after_ms: u64 },
    /// The tenant's request rate (`limit` per second) is used up; retry after the given time.
    TenantRateLimited { limit: u32, retry_after_ms: u64 },
    /// The pairs the bundle may leave through (region `region`'s) would send it `next_ms`
    /// from now, behind the bundles waiting already: past its max age (`max_age_ms`), or too
    /// close to it; sent again `retry_ms` from now, it would be in time.
    Backlog {
        region: &'a str,
        next_ms: u64,
        max_age_ms: u64,
        retry_ms: u64,
    },
    /// The tenant holds its in-flight ceiling (`in_flight_max`).
    TenantCeiling { in_flight: u32, ceiling: u32 },
    /// The tenant holds its floor (`in_flight_min`) or more, and the in-flight room tenants
    /// share past their floors is taken.
    ShareFull { in_flight: u32, floor: u32 },

    // -32603
    /// Something failed inside the relay.
    Internal(&'static str),
    /// The pinned port's region left the relay's config (a reload); its name.
    RegionRemoved(&'a str),
    /// The relay is stopping, and no pool of it can send the bundle before it exits.
    Stopping,
    /// An engine's own error to a call the relay forwarded for the client: its code and words.
    FromEngine { code: i32, message: &'a str },
    /// A call only an engine can answer (`method`) got no answer from one, and `why`.
    EngineUnanswered {
        method: &'static str,
        why: &'static str,
    },
}

impl ErrorKind<'_> {
    /// The JSON-RPC code this kind is answered with.
    pub const fn code(&self) -> i32 {
        match self {
            ErrorKind::Parse { .. } => code::PARSE_ERROR,
            ErrorKind::Batch
            | ErrorKind::NotAnObject(_)
            | ErrorKind::DuplicateMember(_)
            | ErrorKind::TooManyMembers
            | ErrorKind::MissingMember(_)
            | ErrorKind::WrongVersion
            | ErrorKind::MethodNotString(_)
            | ErrorKind::IdType(_)
            | ErrorKind::IdTooLong { .. }
            | ErrorKind::Unforwarded { .. } => code::INVALID_REQUEST,
            ErrorKind::MethodNotFound(_) => code::METHOD_NOT_FOUND,
            ErrorKind::ParamsNotArray { .. }
            | ErrorKind::ParamCount { .. }
            | ErrorKind::ListNotArray { .. }
            | ErrorKind::ListCount { .. }
            | ErrorKind::NotAString { .. }
            | ErrorKind::TransactionTooLong { .. }
            | ErrorKind::OptionsNotObject { .. }
            | ErrorKind::EncodingNotString(_)
            | ErrorKind::UnsupportedEncoding(_)
            | ErrorKind::InvalidTransaction { .. }
            | ErrorKind::NotABundleId { .. } => code::INVALID_PARAMS,
            ErrorKind::Unauthorized { .. } => code::UNAUTHORIZED,
            ErrorKind::TenantDisabled(_) | ErrorKind::RegionNotAllowed(_) => code::FORBIDDEN,
            ErrorKind::RateLimited { .. }
            | ErrorKind::Backlog { .. }
            | ErrorKind::TenantRateLimited { .. }
            | ErrorKind::TenantCeiling { .. }
            | ErrorKind::ShareFull { .. } => code::RATE_LIMITED,
            ErrorKind::FromEngine { code, .. } => *code,
            ErrorKind::Internal(_)
            | ErrorKind::RegionRemoved(_)
            | ErrorKind::Stopping
            | ErrorKind::EngineUnanswered { .. } => code::INTERNAL,
        }
    }
}

/// A JSON-RPC error: its `code`, what went wrong (`kind`), and the request `id` to answer
/// with (the raw id when the request's id was found and valid, otherwise `null`).
///
/// `Display` renders the message; [`write_error`](super::write::write_error) renders the whole
/// response. Neither allocates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RpcError<'a> {
    pub code: i32,
    pub kind: ErrorKind<'a>,
    pub id: Id<'a>,
}

impl<'a> RpcError<'a> {
    /// An error of `kind` answered with a `null` id.
    pub const fn new(kind: ErrorKind<'a>) -> RpcError<'a> {
        RpcError {
            code: kind.code(),
            kind,
            id: Id::NULL,
        }
    }

    /// The same error answered with `id`.
    pub const fn with_id(mut self, id: Id<'a>) -> RpcError<'a> {
        self.id = id;
        self
    }

    /// -32602 "transaction {index}: {cause}" for a transaction the wire layer rejected.
    /// The cause is rendered now into an inline buffer of [`ERROR_CAUSE_LEN_MAX`] bytes, so the
    /// error borrows nothing from the wire layer.
    pub fn invalid_transaction(index: usize, cause: &dyn fmt::Display) -> RpcError<'a> {
        RpcError::new(ErrorKind::InvalidTransaction {
            index,
            cause: InlineText::render(cause),
        })
    }

    /// -32097 in Jito's wording, so bots that parse `"Retry after <N>ms"` keep working.
    pub const fn rate_limited(retry_after_ms: u64) -> RpcError<'a> {
        RpcError::new(ErrorKind::RateLimited { retry_after_ms })
    }

    /// -32603 with a fixed message.
    pub const fn internal(message: &'static str) -> RpcError<'a> {
        RpcError::new(ErrorKind::Internal(message))
    }
}

/// Size budget of an error returned by value (clippy's `result_large_err` threshold is raised
/// to just past this in `clippy.toml`): the wire layer's widest cause kept whole.
const RPC_ERROR_SIZE_MAX: usize = 160;
const _: () = assert!(core::mem::size_of::<RpcError<'static>>() <= RPC_ERROR_SIZE_MAX);

impl fmt::Display for RpcError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.kind, f)
    }
}

impl fmt::Display for ErrorKind<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ErrorKind::Parse { offset, expected } => {
                write!(f, "parse error at byte {offset}: expected {expected}")
            }
            ErrorKind::Batch => f.write_str(
                "batch requests are not supported: send one JSON-RPC request per HTTP request",
            ),
            ErrorKind::NotAnObject(found) => write!(
                f,
                "request must be a JSON object, not {}",
                found.with_article()
            ),
            ErrorKind::DuplicateMember(key) => {
                f.write_str("duplicate member ")?;
                key.write_quoted(f, QUOTED_CHARS_MAX)?;
                f.write_str(" in request")
            }
            ErrorKind::TooManyMembers => {
                write!(f, "request has more than {} members", MEMBERS_MAX)
            }
            ErrorKind::MissingMember(name) => write!(f, "missing member \"{name}\""),
            ErrorKind::WrongVersion => f.write_str("\"jsonrpc\" must be \"2.0\""),
            ErrorKind::MethodNotString(found) => write!(
                f,
                "\"method\" must be a string, not {}",
                found.with_article()
            ),
            ErrorKind::IdType(found) => write!(
                f,
                "\"id\" must be a number, string or null, not {}",
                found.with_article()
            ),
            ErrorKind::IdTooLong { len } => write!(
                f,
                "\"id\" is {len} bytes of JSON; at most {} allowed",
                ID_LEN_MAX
            ),
            ErrorKind::MethodNotFound(name) => {
                f.write_str("method not found: ")?;
                name.write_quoted(f, QUOTED_CHARS_MAX)
            }
            ErrorKind::ParamsNotArray { method, found } => write!(
                f,
                "{} params must be an array, not {}",
                method.name(),
                found.with_article()
            ),
            ErrorKind::ParamCount {
                method,
                min,
                max,
                got,
            } => {
                let shape = method.params_shape();
                if min == max {
                    write!(f, "{} expects {shape}, got {got} params", method.name())
                } else {
                    write!(
                        f,
                        "{} expects {shape} ({min} to {max} params), got {got}",
                        method.name()
                    )
                }
            }
            ErrorKind::ListNotArray { index, of, found } => write!(
                f,
                "params[{index}] must be an array of {}, not {}",
                of.plural(),
                found.with_article()
            ),
            ErrorKind::ListCount { of, got } => write!(
                f,
                "expected 1 to {} {}, got {got}",
                of.len_max(),
                of.plural()
            ),
            ErrorKind::NotAString { of, index } => {
                write!(f, "{} {index} is not a string", of.singular())
            }
            ErrorKind::NotABundleId { index, id } => {
                write!(f, "bundle id {index} is ")?;
                id.write_quoted(f, QUOTED_CHARS_MAX)?;
                f.write_str(": a bundle id is the 64 hex characters sendBundle answered")
            }
            ErrorKind::TransactionTooLong {
                index,
                chars,
                encoding,
            } => write!(
                f,
                "transaction {index} is {chars} characters; {} allows at most {}",
                encoding.name(),
                encoding.max_encoded_len()
            ),
            ErrorKind::OptionsNotObject { index, found } => write!(
                f,
                "params[{index}] must be an options object, not {}",
                found.with_article()
            ),
            ErrorKind::EncodingNotString(found) => write!(
                f,
                "\"encoding\" must be a string, not {}",
                found.with_article()
            ),
            ErrorKind::UnsupportedEncoding(name) => {
                f.write_str("unsupported encoding ")?;
                name.write_quoted(f, QUOTED_CHARS_MAX)?;
                f.write_str(": use base58 or base64")
            }
            ErrorKind::InvalidTransaction { index, ref cause } => {
                write!(f, "transaction {index}: {}", cause.as_str())?;
                if cause.is_truncated() {
                    f.write_str("…")?;
                }
                Ok(())
            }
            ErrorKind::RateLimited { retry_after_ms } => write!(
                f,
                "Rate limit exceeded. Back-off triggered: Retry after {retry_after_ms}ms"
            ),
            ErrorKind::Unforwarded {
                proxy,
                forwarded_for: None,
            } => write!(
                f,
                "the request came through {proxy}, a trusted proxy (intake.trusted_proxies), \
                 without an X-Forwarded-For header naming the client: set the proxy to add it \
                 (HAProxy: option forwardfor)"
            ),
            ErrorKind::Unforwarded {
                proxy,
                forwarded_for: Some(value),
            } => {
                write!(
                    f,
                    "the X-Forwarded-For header from trusted proxy {proxy} does not end in the \
                     client's address: \""
                )?;
                write_visible(f, value, QUOTED_CHARS_MAX)?;
                f.write_str("\"")
            }
            ErrorKind::Unauthorized { key_given: false } => f.write_str(
                "authentication required: send your key in the x-jito-auth header or the uuid \
                 query parameter",
            ),
            ErrorKind::Unauthorized { key_given: true } => f.write_str(
                "unknown key: the x-jito-auth header or uuid query parameter names no tenant of \
                 this relay",
            ),
            ErrorKind::TenantDisabled(name) => {
                write!(f, "tenant {name} is disabled on this relay")
            }
            ErrorKind::RegionNotAllowed(name) => write!(
                f,
                "region {name} is not one of this tenant's regions: send to the rotating port \
                 without a region in the path, or to one of them (its pinned port, or /<region>/ \
                 in the path)"
            ),
            ErrorKind::TenantRateLimited {
                limit,
                retry_after_ms,
            } => write!(
                f,
                "Rate limit exceeded. Limit: {limit} per second for txn requests. Back-off \
                 triggered: Retry after {retry_after_ms}ms"
            ),
            ErrorKind::TenantCeiling { in_flight, ceiling } => write!(
                f,
                "Rate limit exceeded. Back-off triggered: Retry after 1000ms (this tenant's \
                 in-flight ceiling is reached: {in_flight} bundles in flight, in_flight_max \
                 {ceiling})"
            ),
            ErrorKind::Backlog {
                region,
                next_ms,
                max_age_ms,
                retry_ms,
            } => write!(
                f,
                "Rate limit exceeded. Back-off triggered: Retry after {retry_ms}ms (the relay's \
                 egress addresses for {region} cannot send this bundle within its max age of \
                 {max_age_ms} ms: it would leave {next_ms} ms from now, behind the bundles \
                 already waiting)"
            ),
            ErrorKind::ShareFull { in_flight, floor } => write!(
                f,
                "Rate limit exceeded. Back-off triggered: Retry after 1000ms (the relay's \
                 in-flight room that tenants share past their floors is taken: this tenant \
                 holds {in_flight} bundles in flight, its floor in_flight_min {floor})"
            ),
            ErrorKind::Internal(message) => f.write_str(message),
            ErrorKind::FromEngine { message, .. } => f.write_str(message),
            ErrorKind::EngineUnanswered { method, why } => write!(
                f,
                "{method} is answered by a block engine, and none answered the relay: {why}; \
                 ask again"
            ),
            ErrorKind::RegionRemoved(name) => write!(
                f,
                "region {name} is no longer in the relay's config: send to the rotating port \
                 without it in the path, or to another region"
            ),
            ErrorKind::Stopping => f.write_str(
                "the relay is stopping and cannot send this bundle before it exits: send it \
                 to another relay, or again in a moment",
            ),
        }
    }
}

/// `bytes` as text, at most `max` of them (then `…`), each byte outside printable ASCII as `?`:
/// a header value is not JSON, and may hold anything.
fn write_visible(f: &mut fmt::Formatter<'_>, bytes: &[u8], max: usize) -> fmt::Result {
    use fmt::Write as _;
    for &b in bytes.iter().take(max) {
        f.write_char(if (0x20..0x7f).contains(&b) {
            b as char
        } else {
            '?'
        })?;
    }
    if bytes.len() > max {
        f.write_str("…")?;
    }
    Ok(())
}
