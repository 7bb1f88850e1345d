//! The JSON-RPC layer's limits, each with its reason.

use crate::wire::BUNDLE_TXS_MAX;

/// Deepest nesting accepted. A Jito request needs 3 (request object, params, transaction
/// list); 64 leaves room for nested unknown options while the scanner keeps its container
/// stack in one `u64`.
pub const DEPTH_MAX: usize = 64;

/// Most top-level members accepted. A request has 4; the cap keeps duplicate detection a
/// fixed array and a bounded number of comparisons.
pub const MEMBERS_MAX: usize = 16;

/// Longest `id` accepted, in bytes of its JSON text. The id is echoed in every answer, which
/// is written into a fixed buffer ([`ERROR_RESPONSE_LEN_MAX`](super::write::ERROR_RESPONSE_LEN_MAX)); bots use counters or UUIDs.
pub const ID_LEN_MAX: usize = 128;

/// Most bundle ids one getBundleStatuses / getInflightBundleStatuses call may ask about (Jito's limit).
pub const STATUS_IDS_MAX: usize = 5;

/// Capacity of a [`StrList`](super::request::StrList): the longer of the two lists it holds.
pub const STR_LIST_LEN_MAX: usize = if BUNDLE_TXS_MAX > STATUS_IDS_MAX {
    BUNDLE_TXS_MAX
} else {
    STATUS_IDS_MAX
};
