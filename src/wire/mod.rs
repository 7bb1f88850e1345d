//! Transaction wire layer: encoded strings to bytes, the zero-copy transaction validator,
//! and Jito's bundle id.

/// Largest serialized transaction Solana accepts (`PACKET_DATA_SIZE`): one IPv6 MTU minus headers.
pub const PACKET_DATA_SIZE: usize = 1232;
/// Most transactions a Jito bundle may hold.
pub const MAX_BUNDLE_TXS: usize = 5;
/// Longest base58 string Solana RPC accepts for one transaction (encodes 1232 bytes).
pub const MAX_BASE58_LEN: usize = 1683;
/// Longest base64 string Solana RPC accepts for one transaction (encodes 1232 bytes).
pub const MAX_BASE64_LEN: usize = 1644;

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
            Encoding::Base58 => MAX_BASE58_LEN,
            Encoding::Base64 => MAX_BASE64_LEN,
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
