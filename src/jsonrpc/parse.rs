//! [`parse_request`]: one strict RFC 8259 pass over the whole body that notes the top-level
//! members, then a structure-only walk over the already-checked `params` for the method.

use super::error::{ErrorKind, Expected, JsonType, ListOf, RpcError};
use super::json_str::JsonStr;
use super::limits::{ID_LEN_MAX, MEMBERS_MAX};
use super::request::{Call, Id, Method, Request, StrList};
use super::scan::{Scanner, Walk};
use crate::wire::Encoding;

fn parse_error<'a>((offset, expected): (usize, Expected)) -> RpcError<'a> {
    RpcError::new(ErrorKind::Parse { offset, expected })
}

/// Parses one JSON-RPC request body. On error, the [`RpcError`] says what to answer, including
/// the id (`err.id`): the request's own once it was found valid, else `null`.
///
/// Precedence: invalid JSON anywhere (-32700) first; then the first request-level problem in
/// document order (-32600); then an unknown method (-32601); then the params (-32602).
pub fn parse_request(body: &[u8]) -> Result<Request<'_>, RpcError<'_>> {
    parse_request_named(body).0
}

/// [`parse_request`], and the method the request named when it is one the relay serves and
/// the request itself checked out (version, id, members), whether or not its parameters did:
/// a `sendBundle` with bad parameters is still counted as a `sendBundle`.
pub fn parse_request_named(body: &[u8]) -> (Result<Request<'_>, RpcError<'_>>, Option<Method>) {
    let mut named = None;
    let request = parse(body, &mut named);
    (request, named)
}

fn parse<'b>(body: &'b [u8], named: &mut Option<Method>) -> Result<Request<'b>, RpcError<'b>> {
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

    let mut keys = [JsonStr::EMPTY; MEMBERS_MAX];
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
            if key_count == MEMBERS_MAX {
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
                id = Some(Id::from_raw(raw));
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
    *named = Some(method);
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
    // `null` is params left out (JSON-RPC 2.0 lets a method without params omit them, and
    // Jito's Go SDK sends its none as `null`).
    let Some(raw) = params.filter(|raw| *raw != b"null") else {
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
    let mut given: Option<Encoding> = None;
    let mut count = 0usize;
    let mut nulls = 0usize;
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
                (Method::GetBundleDelivery, 0) => {
                    if w.peek() != b'"' {
                        return Err(ErrorKind::NotAString {
                            of: ListOf::BundleIds,
                            index: 0,
                        });
                    }
                    single = w.string();
                }
                (Method::SendBundle | Method::SendTransaction, 1) => given = options(&mut w, 1)?,
                // Nothing, as Jito's own Python SDK sends a call without parameters: `[null]`.
                (Method::GetTipAccounts, _) if w.peek() == b'n' => {
                    w.skip();
                    nulls += 1;
                }
                _ => w.skip(),
            }
            count += 1;
            if !w.next() {
                break;
            }
        }
    }
    let count = count - nulls;
    if !(min..=max).contains(&count) {
        return Err(count_error(count));
    }

    let encoding = given.unwrap_or_default();
    let encoding_given = given.is_some();
    Ok(match method {
        Method::SendBundle => {
            for (index, tx) in list.iter().enumerate() {
                check_len(index, tx, encoding)?;
            }
            Call::SendBundle {
                transactions: list,
                encoding,
                encoding_given,
            }
        }
        Method::SendTransaction => {
            check_len(0, &single, encoding)?;
            Call::SendTransaction {
                transaction: single,
                encoding,
                encoding_given,
            }
        }
        Method::GetTipAccounts => Call::GetTipAccounts,
        Method::GetBundleStatuses => Call::GetBundleStatuses { bundle_ids: list },
        Method::GetInflightBundleStatuses => {
            for (index, id) in list.iter().enumerate() {
                check_bundle_id(index, id)?;
            }
            Call::GetInflightBundleStatuses { bundle_ids: list }
        }
        Method::GetBundleDelivery => {
            check_bundle_id(0, &single)?;
            Call::GetBundleDelivery { bundle_id: single }
        }
    })
}

/// A bundle id is Jito's: 64 hex characters (the SHA-256 the relay answered sendBundle with).
fn check_bundle_id<'a>(index: usize, id: &JsonStr<'a>) -> Result<(), ErrorKind<'a>> {
    let raw = id.raw();
    if id.has_escapes() || raw.len() != 64 || !raw.iter().all(u8::is_ascii_hexdigit) {
        return Err(ErrorKind::NotABundleId { index, id: *id });
    }
    Ok(())
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
                    list.push(s);
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

/// `params[index]`: an options object (or null); only `encoding` is read, `None` when it is
/// not there.
fn options<'a>(w: &mut Walk<'a>, index: usize) -> Result<Option<Encoding>, ErrorKind<'a>> {
    match w.peek() {
        b'n' => {
            w.skip();
            return Ok(None);
        }
        b'{' => {}
        other => {
            return Err(ErrorKind::OptionsNotObject {
                index,
                found: JsonType::of_first_byte(other),
            });
        }
    }
    let mut encoding = None;
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
                    Some(Encoding::Base58)
                } else if name.eq_str(Encoding::Base64.name()) {
                    Some(Encoding::Base64)
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
