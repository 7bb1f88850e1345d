//! How a transaction string is encoded in a JSON-RPC request.

use super::limits::{BASE58_LEN_MAX, BASE64_LEN_MAX};

/// How a transaction is encoded in a JSON-RPC request. Jito's default is base58.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Encoding {
    #[default]
    Base58,
    Base64,
}

impl Encoding {
    /// The longest encoded string allowed for one transaction in this encoding.
    pub const fn max_encoded_len(self) -> usize {
        match self {
            Encoding::Base58 => BASE58_LEN_MAX,
            Encoding::Base64 => BASE64_LEN_MAX,
        }
    }

    /// The name used in JSON-RPC's `encoding` option.
    pub const fn name(self) -> &'static str {
        match self {
            Encoding::Base58 => "base58",
            Encoding::Base64 => "base64",
        }
    }
}
