//! What a valid request is: its id, its method and the method's checked params ([`Call`]),
//! strings borrowed from the body. [`super::parse::parse_request`] builds them; this file holds the types.

use super::json_str::JsonStr;
use super::limits::STR_LIST_LEN_MAX;
use crate::wire::Encoding;

/// A request's id as its raw JSON text (a number, a string with its quotes, or `null`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Id<'a> {
    raw: &'a [u8],
}

impl<'a> Id<'a> {
    /// The id answered when the request had none or it could not be read.
    pub const NULL: Id<'static> = Id { raw: b"null" };

    /// The id whose JSON text is `raw` (already checked by the scanner).
    pub(super) fn from_raw(raw: &'a [u8]) -> Id<'a> {
        Id { raw }
    }

    /// An id kept from an earlier request ([`Id::raw`]'s text, copied), to answer it later.
    pub fn kept(raw: &'a [u8]) -> Id<'a> {
        Id { raw }
    }

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
    /// The relay's own: the full record of one bundle it admitted.
    GetBundleDelivery,
}

impl Method {
    pub const ALL: [Method; 6] = [
        Method::SendBundle,
        Method::SendTransaction,
        Method::GetTipAccounts,
        Method::GetBundleStatuses,
        Method::GetInflightBundleStatuses,
        Method::GetBundleDelivery,
    ];

    /// The method's JSON-RPC name.
    pub const fn name(self) -> &'static str {
        match self {
            Method::SendBundle => "sendBundle",
            Method::SendTransaction => "sendTransaction",
            Method::GetTipAccounts => "getTipAccounts",
            Method::GetBundleStatuses => "getBundleStatuses",
            Method::GetInflightBundleStatuses => "getInflightBundleStatuses",
            Method::GetBundleDelivery => "getBundleDelivery",
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
            Method::GetBundleDelivery => "[bundle id]",
        }
    }

    /// Least and most elements of the params array.
    pub(super) const fn param_count(self) -> (usize, usize) {
        match self {
            Method::SendBundle | Method::SendTransaction => (1, 2),
            Method::GetTipAccounts => (0, 0),
            Method::GetBundleStatuses
            | Method::GetInflightBundleStatuses
            | Method::GetBundleDelivery => (1, 1),
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
    pub(super) const fn new() -> Self {
        StrList {
            items: [JsonStr::EMPTY; STR_LIST_LEN_MAX],
            len: 0,
        }
    }

    /// Appends `s`; the caller keeps within [`STR_LIST_LEN_MAX`].
    pub(super) fn push(&mut self, s: JsonStr<'a>) {
        self.items[usize::from(self.len)] = s;
        self.len += 1;
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
    /// 1 to [`BUNDLE_TXS_MAX`](crate::wire::BUNDLE_TXS_MAX) transaction strings, each within its encoding's length cap.
    SendBundle {
        transactions: StrList<'a>,
        encoding: Encoding,
        /// The request named its encoding (else it is base58, Jito's default).
        encoding_given: bool,
    },
    /// One transaction string within its encoding's length cap.
    SendTransaction {
        transaction: JsonStr<'a>,
        encoding: Encoding,
        encoding_given: bool,
    },
    GetTipAccounts,
    /// 1 to [`STATUS_IDS_MAX`](super::limits::STATUS_IDS_MAX) bundle id strings (not otherwise checked).
    GetBundleStatuses {
        bundle_ids: StrList<'a>,
    },
    /// 1 to [`STATUS_IDS_MAX`](super::limits::STATUS_IDS_MAX) bundle ids, each 64 hex
    /// characters.
    GetInflightBundleStatuses {
        bundle_ids: StrList<'a>,
    },
    /// One bundle id of 64 hex characters.
    GetBundleDelivery {
        bundle_id: JsonStr<'a>,
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
            Call::GetBundleDelivery { .. } => Method::GetBundleDelivery,
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
