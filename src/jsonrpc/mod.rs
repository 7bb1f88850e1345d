//! Jito's JSON-RPC, read and answered without a DOM and without allocating.
//!
//! [`parse_request`] takes one HTTP body. One strict RFC 8259 pass checks the whole document
//! (any invalid JSON is -32700 with the byte offset and what was expected) while it notes the
//! top-level members `jsonrpc`, `id`, `method` and `params`; a second, structure-only walk over
//! the already-checked `params` shape-checks them for the method (-32602 naming the problem and
//! the index, counting from 0). Strings stay in the body as [`JsonStr`]; up to five of them
//! sit in a fixed array ([`StrList`]). Errors ([`RpcError`]) carry kinds, numbers and borrowed
//! slices, and render their message only when written.
//!
//! Request rules beyond JSON-RPC 2.0:
//! - `id` may be a number, string or null and is echoed byte for byte (its raw JSON text, at
//!   most [`ID_LEN_MAX`] bytes). A request **without an id is answered with `"id":null`**:
//!   JSON-RPC would call it a notification and answer nothing, but a bot sending a bundle
//!   always wants its bundle id back.
//! - A batch (top-level array) is refused with -32600: one request per HTTP request.
//! - A top-level member given twice is -32600 naming it; unknown top-level members are ignored,
//!   as are unknown option keys (Solana's `skipPreflight` and friends).
//!
//! Responses are written by [`write_result_str`], [`write_result_raw`] and [`write_error`] into
//! the caller's buffer in Solana's field order, `{"jsonrpc":"2.0","result":…,"id":…}`.
//!
//! Measured cost: `cargo bench --bench jsonrpc -- --warm-up-time 1 --measurement-time 3`
//! (benches/jsonrpc.rs), a 3-transaction base64 sendBundle of 1.6 KB, all three paths in the
//! same run; criterion point estimates in µs. The build machine had 2 cores at a load average
//! of 12 during every run, so run-to-run noise is ±40%: the runs are listed, not averaged.
//!
//! | run | `parse_request` | serde_json typed structs (owned `String`s) | serde_json `Value` | typed / ours |
//! |---|---|---|---|---|
//! | 1 | 2.62 | 3.39 | 5.39 | 1.29 |
//! | 2 | 4.25 | 3.21 | 3.34 | 0.75 |
//! | 3 | 2.20 | 3.00 | 3.98 | 1.36 |
//! | 4 | 2.45 | 2.12 | 3.13 | 0.87 |
//!
//! What the table supports: on this machine the scanner is on par with serde_json's typed path
//! while allocating nothing (tests/jsonrpc_alloc.rs), where the typed path allocates a string
//! per member and transaction and a `Vec` per request. It reads the params twice (a checking
//! pass over the whole body, then a structure-only walk over `params`); a clean speed ratio
//! needs a quiet machine, so rerun there before drawing more from it.

mod error;
mod json_str;
mod scan;
mod write;

pub use error::{
    ERROR_CAUSE_LEN_MAX, ErrorKind, Expected, InlineText, JsonType, ListOf, QUOTED_CHARS_MAX,
    RpcError,
};
pub use json_str::{BufferTooSmall, Bytes, JsonStr};
pub use write::{
    ERROR_RESPONSE_LEN_MAX, Escaping, Overflow, Writer, write_error, write_result_raw,
    write_result_str,
};

use crate::wire::{Encoding, MAX_BUNDLE_TXS};
use scan::{Scanner, Walk};

/// Deepest nesting accepted. A Jito request needs 3 (request object, params, transaction
/// list); 64 leaves room for nested unknown options while the scanner keeps its container
/// stack in one `u64`.
pub const MAX_DEPTH: usize = 64;

/// Most top-level members accepted. A request has 4; the cap keeps duplicate detection a
/// fixed array and a bounded number of comparisons.
pub const MAX_MEMBERS: usize = 16;

/// Longest `id` accepted, in bytes of its JSON text. The id is echoed in every answer, which
/// is written into a fixed buffer ([`ERROR_RESPONSE_LEN_MAX`]); bots use counters or UUIDs.
pub const ID_LEN_MAX: usize = 128;

/// Most bundle ids one getBundleStatuses / getInflightBundleStatuses call may ask about (Jito's limit).
pub const MAX_STATUS_IDS: usize = 5;

/// Capacity of a [`StrList`]: the longer of the two lists it holds.
pub const STR_LIST_LEN_MAX: usize = if MAX_BUNDLE_TXS > MAX_STATUS_IDS {
    MAX_BUNDLE_TXS
} else {
    MAX_STATUS_IDS
};

/// A request's id as its raw JSON text (a number, a string with its quotes, or `null`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Id<'a> {
    raw: &'a [u8],
}

impl<'a> Id<'a> {
    /// The id answered when the request had none or it could not be read.
    pub const NULL: Id<'static> = Id { raw: b"null" };

    /// The JSON text to echo.
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }
}

/// The methods the relay answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    SendBundle,
    SendTransaction,
    GetTipAccounts,
    GetBundleStatuses,
    GetInflightBundleStatuses,
}

impl Method {
    pub const ALL: [Method; 5] = [
        Method::SendBundle,
        Method::SendTransaction,
        Method::GetTipAccounts,
        Method::GetBundleStatuses,
        Method::GetInflightBundleStatuses,
    ];

    /// The method's JSON-RPC name.
    pub const fn name(self) -> &'static str {
        match self {
            Method::SendBundle => "sendBundle",
            Method::SendTransaction => "sendTransaction",
            Method::GetTipAccounts => "getTipAccounts",
            Method::GetBundleStatuses => "getBundleStatuses",
            Method::GetInflightBundleStatuses => "getInflightBundleStatuses",
        }
    }

    /// The method named `name` (exact, case-sensitive, as Jito matches).
    pub fn from_name(name: &JsonStr<'_>) -> Option<Method> {
        Method::ALL.into_iter().find(|m| name.eq_str(m.name()))
    }

    /// The params this method takes, as shown in messages.
    pub const fn params_shape(self) -> &'static str {
        match self {
            Method::SendBundle => "[[transaction, ...], options]",
            Method::SendTransaction => "[transaction, options]",
            Method::GetTipAccounts => "[]",
            Method::GetBundleStatuses | Method::GetInflightBundleStatuses => "[[bundle id, ...]]",
        }
    }

    /// Least and most elements of the params array.
    const fn param_count(self) -> (usize, usize) {
        match self {
            Method::SendBundle | Method::SendTransaction => (1, 2),
            Method::GetTipAccounts => (0, 0),
            Method::GetBundleStatuses | Method::GetInflightBundleStatuses => (1, 1),
        }
    }
}

/// Up to [`STR_LIST_LEN_MAX`] strings in a fixed array: a bundle's transactions or a list of
/// bundle ids.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct StrList<'a> {
    items: [JsonStr<'a>; STR_LIST_LEN_MAX],
    len: u8,
}

impl<'a> StrList<'a> {
    const fn new() -> Self {
        StrList {
            items: [JsonStr::EMPTY; STR_LIST_LEN_MAX],
            len: 0,
        }
    }

    pub fn as_slice(&self) -> &[JsonStr<'a>] {
        &self.items[..usize::from(self.len)]
    }

    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> core::slice::Iter<'_, JsonStr<'a>> {
        self.as_slice().iter()
    }
}

impl core::fmt::Debug for StrList<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl<'s, 'a> IntoIterator for &'s StrList<'a> {
    type Item = &'s JsonStr<'a>;
    type IntoIter = core::slice::Iter<'s, JsonStr<'a>>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// A method with its checked params.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call<'a> {
    /// 1 to [`MAX_BUNDLE_TXS`] transaction strings, each within its encoding's length cap.
    SendBundle {
        transactions: StrList<'a>,
        encoding: Encoding,
    },
    /// One transaction string within its encoding's length cap.
    SendTransaction {
        transaction: JsonStr<'a>,
        encoding: Encoding,
    },
    GetTipAccounts,
    /// 1 to [`MAX_STATUS_IDS`] bundle id strings (not otherwise checked).
    GetBundleStatuses {
        bundle_ids: StrList<'a>,
    },
    /// 1 to [`MAX_STATUS_IDS`] bundle id strings (not otherwise checked).
    GetInflightBundleStatuses {
        bundle_ids: StrList<'a>,
    },
}

impl Call<'_> {
    pub const fn method(&self) -> Method {
        match self {
            Call::SendBundle { .. } => Method::SendBundle,
            Call::SendTransaction { .. } => Method::SendTransaction,
            Call::GetTipAccounts => Method::GetTipAccounts,
            Call::GetBundleStatuses { .. } => Method::GetBundleStatuses,
            Call::GetInflightBundleStatuses { .. } => Method::GetInflightBundleStatuses,
        }
    }
}

/// A valid request: the id to answer with and the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub id: Id<'a>,
    pub call: Call<'a>,
}

impl Request<'_> {
    pub const fn method(&self) -> Method {
        self.call.method()
    }
}

fn parse_error<'a>((offset, expected): (usize, Expected)) -> RpcError<'a> {
    RpcError::new(ErrorKind::Parse { offset, expected })
}

/// Parses one JSON-RPC request body. On error, the [`RpcError`] says what to answer, including
/// the id (`err.id`): the request's own once it was found valid, else `null`.
///
/// Precedence: invalid JSON anywhere (-32700) first; then the first request-level problem in
/// document order (-32600); then an unknown method (-32601); then the params (-32602).
pub fn parse_request(body: &[u8]) -> Result<Request<'_>, RpcError<'_>> {
    let mut s = Scanner::new(body);
    s.ws();
    let first = s.peek();
    if first != b'{' {
        s.value(0).map_err(parse_error)?;
        s.end().map_err(parse_error)?;
        return Err(RpcError::new(if first == b'[' {
            ErrorKind::Batch
        } else {
            ErrorKind::NotAnObject(JsonType::of_first_byte(first))
        }));
    }
    s.pos += 1;
    s.ws();

    let mut keys = [JsonStr::EMPTY; MAX_MEMBERS];
    let mut key_count = 0usize;
    // The first request-level problem; reported only once the whole body proved to be JSON.
    let mut problem: Option<ErrorKind<'_>> = None;
    let mut version: Option<bool> = None;
    let mut id: Option<Id<'_>> = None;
    let mut id_ok = false;
    let mut id_count = 0usize;
    let mut method: Option<JsonStr<'_>> = None;
    let mut params: Option<&[u8]> = None;

    if s.peek() == b'}' {
        s.pos += 1;
    } else {
        loop {
            let key = s.key().map_err(parse_error)?;
            if key_count == MAX_MEMBERS {
                problem.get_or_insert(ErrorKind::TooManyMembers);
            } else if keys[..key_count].iter().any(|k| k.content_eq(&key)) {
                problem.get_or_insert(ErrorKind::DuplicateMember(key));
            } else {
                keys[key_count] = key;
                key_count += 1;
            }

            let start = s.pos;
            let first = s.peek();
            let string = if first == b'"' {
                Some(s.string().map_err(parse_error)?)
            } else {
                s.value(1).map_err(parse_error)?;
                None
            };
            let raw = &body[start..s.pos];

            if key.eq_str("jsonrpc") {
                let ok = string.is_some_and(|v| v.eq_str("2.0"));
                if !ok {
                    problem.get_or_insert(ErrorKind::WrongVersion);
                }
                version = Some(ok);
            } else if key.eq_str("id") {
                let ty = JsonType::of_first_byte(first);
                id_count += 1;
                id_ok = false;
                if matches!(ty, JsonType::Object | JsonType::Array | JsonType::Bool) {
                    problem.get_or_insert(ErrorKind::IdType(ty));
                } else if raw.len() > ID_LEN_MAX {
                    problem.get_or_insert(ErrorKind::IdTooLong { len: raw.len() });
                } else {
                    id_ok = true;
                }
                id = Some(Id { raw });
            } else if key.eq_str("method") {
                match string {
                    Some(name) => method = Some(name),
                    None => {
                        problem.get_or_insert(ErrorKind::MethodNotString(JsonType::of_first_byte(
                            first,
                        )));
                    }
                }
            } else if key.eq_str("params") {
                params = Some(raw);
            }

            s.ws();
            match s.peek() {
                b',' => {
                    s.pos += 1;
                    s.ws();
                }
                b'}' => {
                    s.pos += 1;
                    break;
                }
                _ => return Err(parse_error((s.pos, Expected::CommaOrObjectEnd))),
            }
        }
    }
    s.end().map_err(parse_error)?;

    // A duplicated id is answered with null: which one the client meant is unknowable.
    let answer_id = match id {
        Some(id) if id_ok && id_count == 1 => id,
        _ => Id::NULL,
    };
    let fail = |kind| Err(RpcError::new(kind).with_id(answer_id));
    if let Some(kind) = problem {
        return fail(kind);
    }
    if version.is_none() {
        return fail(ErrorKind::MissingMember("jsonrpc"));
    }
    let Some(name) = method else {
        return fail(ErrorKind::MissingMember("method"));
    };
    let Some(method) = Method::from_name(&name) else {
        return fail(ErrorKind::MethodNotFound(name));
    };
    match parse_params(method, params) {
        Ok(call) => Ok(Request {
            id: answer_id,
            call,
        }),
        Err(kind) => fail(kind),
    }
}

/// Shape-checks already-validated `params` for `method`.
fn parse_params<'a>(method: Method, params: Option<&'a [u8]>) -> Result<Call<'a>, ErrorKind<'a>> {
    let (min, max) = method.param_count();
    let count_error = |got| ErrorKind::ParamCount {
        method,
        min,
        max,
        got,
    };
    let Some(raw) = params else {
        return if min == 0 {
            Ok(Call::GetTipAccounts)
        } else {
            Err(count_error(0))
        };
    };
    let mut w = Walk::new(raw);
    if w.peek() != b'[' {
        return Err(ErrorKind::ParamsNotArray {
            method,
            found: JsonType::of_first_byte(w.peek()),
        });
    }

    let mut list = StrList::new();
    let mut single = JsonStr::EMPTY;
    let mut encoding = Encoding::default();
    let mut count = 0usize;
    if w.enter() {
        loop {
            match (method, count) {
                (Method::SendBundle, 0) => list = str_list(&mut w, 0, ListOf::Transactions)?,
                (Method::GetBundleStatuses | Method::GetInflightBundleStatuses, 0) => {
                    list = str_list(&mut w, 0, ListOf::BundleIds)?
                }
                (Method::SendTransaction, 0) => {
                    if w.peek() != b'"' {
                        return Err(ErrorKind::NotAString {
                            of: ListOf::Transactions,
                            index: 0,
                        });
                    }
                    single = w.string();
                }
                (Method::SendBundle | Method::SendTransaction, 1) => encoding = options(&mut w, 1)?,
                _ => w.skip(),
            }
            count += 1;
            if !w.next() {
                break;
            }
        }
    }
    if !(min..=max).contains(&count) {
        return Err(count_error(count));
    }

    Ok(match method {
        Method::SendBundle => {
            for (index, tx) in list.iter().enumerate() {
                check_len(index, tx, encoding)?;
            }
            Call::SendBundle {
                transactions: list,
                encoding,
            }
        }
        Method::SendTransaction => {
            check_len(0, &single, encoding)?;
            Call::SendTransaction {
                transaction: single,
                encoding,
            }
        }
        Method::GetTipAccounts => Call::GetTipAccounts,
        Method::GetBundleStatuses => Call::GetBundleStatuses { bundle_ids: list },
        Method::GetInflightBundleStatuses => Call::GetInflightBundleStatuses { bundle_ids: list },
    })
}

/// `params[index]`: an array of 1 to `of.len_max()` strings.
fn str_list<'a>(w: &mut Walk<'a>, index: usize, of: ListOf) -> Result<StrList<'a>, ErrorKind<'a>> {
    if w.peek() != b'[' {
        return Err(ErrorKind::ListNotArray {
            index,
            of,
            found: JsonType::of_first_byte(w.peek()),
        });
    }
    let mut list = StrList::new();
    let mut count = 0usize;
    let mut first_non_string: Option<usize> = None;
    if w.enter() {
        loop {
            if w.peek() == b'"' {
                let s = w.string();
                if count < of.len_max() {
                    list.items[count] = s;
                    list.len += 1;
                }
            } else {
                w.skip();
                first_non_string.get_or_insert(count);
            }
            count += 1;
            if !w.next() {
                break;
            }
        }
    }
    if count == 0 || count > of.len_max() {
        return Err(ErrorKind::ListCount { of, got: count });
    }
    if let Some(index) = first_non_string {
        return Err(ErrorKind::NotAString { of, index });
    }
    Ok(list)
}

/// `params[index]`: an options object (or null); only `encoding` is read.
fn options<'a>(w: &mut Walk<'a>, index: usize) -> Result<Encoding, ErrorKind<'a>> {
    match w.peek() {
        b'n' => {
            w.skip();
            return Ok(Encoding::default());
        }
        b'{' => {}
        other => {
            return Err(ErrorKind::OptionsNotObject {
                index,
                found: JsonType::of_first_byte(other),
            });
        }
    }
    let mut encoding = Encoding::default();
    if w.enter() {
        loop {
            let key = w.key();
            if key.eq_str("encoding") {
                if w.peek() != b'"' {
                    return Err(ErrorKind::EncodingNotString(JsonType::of_first_byte(
                        w.peek(),
                    )));
                }
                let name = w.string();
                encoding = if name.eq_str(Encoding::Base58.name()) {
                    Encoding::Base58
                } else if name.eq_str(Encoding::Base64.name()) {
                    Encoding::Base64
                } else {
                    return Err(ErrorKind::UnsupportedEncoding(name));
                };
            } else {
                w.skip();
            }
            if !w.next() {
                break;
            }
        }
    }
    Ok(encoding)
}

/// Rejects a transaction string longer than its encoding allows, so the decoder never sees it.
fn check_len<'a>(index: usize, tx: &JsonStr<'a>, encoding: Encoding) -> Result<(), ErrorKind<'a>> {
    let max = encoding.max_encoded_len();
    // Every character takes at least one raw byte, so only a long raw string needs counting.
    if tx.raw().len() <= max {
        return Ok(());
    }
    let chars = tx.char_count();
    if chars > max {
        return Err(ErrorKind::TransactionTooLong {
            index,
            chars,
            encoding,
        });
    }
    Ok(())
}
