//! The wire layer's size limits, Solana's and Jito's, one home each.

/// Largest serialized transaction Solana accepts (Solana's own name, `PACKET_DATA_SIZE`): one
/// IPv6 MTU minus headers.
pub const PACKET_DATA_SIZE: usize = 1232;
/// Most transactions a Jito bundle may hold.
pub const BUNDLE_TXS_MAX: usize = 5;
/// Longest base58 string Solana RPC accepts for one transaction (encodes 1232 bytes).
pub const BASE58_LEN_MAX: usize = 1683;
/// Longest base64 string Solana RPC accepts for one transaction (encodes 1232 bytes).
pub const BASE64_LEN_MAX: usize = 1644;
