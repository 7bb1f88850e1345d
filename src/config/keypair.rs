//! The searcher's keypair for authentication to the engines (`[auth] keypair_file`): a Solana
//! CLI keypair file, a JSON array of 64 numbers (the ed25519 secret, then its public key). The
//! secret lives with the config that read it; its `Debug` shows the public key only.

/// A keypair file is a few hundred bytes; anything much larger is the wrong file.
pub const KEYPAIR_FILE_BYTES_MAX: u64 = 4 * 1024;

/// The searcher's key (see the module docs).
#[derive(Clone, PartialEq, Eq)]
pub struct SearcherKey {
    seed: [u8; 32],
    pubkey_b58: String,
}

impl SearcherKey {
    /// The key whose 32-byte secret is `seed`.
    pub fn from_seed(seed: [u8; 32]) -> SearcherKey {
        let public = ed25519_dalek::SigningKey::from_bytes(&seed).verifying_key();
        SearcherKey {
            seed,
            pubkey_b58: bs58::encode(public.as_bytes()).into_string(),
        }
    }

    /// A keypair file's text; the error says what is wrong without showing any of it.
    pub fn from_json(text: &str) -> Result<SearcherKey, String> {
        let bytes: Vec<u8> = serde_json::from_str(text).map_err(|_| {
            "not a Solana keypair file: it must be a JSON array of 64 numbers 0-255 (as \
             `solana-keygen new` writes)"
                .to_string()
        })?;
        let Ok(pair) = <[u8; 64]>::try_from(bytes.as_slice()) else {
            return Err(format!(
                "a Solana keypair is 64 numbers (the secret, then the public key); this file has {}",
                bytes.len()
            ));
        };
        let key = SearcherKey::from_seed(pair[..32].try_into().expect("32 bytes"));
        let public = ed25519_dalek::SigningKey::from_bytes(&key.seed).verifying_key();
        if public.as_bytes()[..] != pair[32..] {
            return Err(
                "its last 32 numbers are not the public key of its first 32: a damaged keypair"
                    .into(),
            );
        }
        Ok(key)
    }

    /// The ed25519 secret (for the signer; never shown).
    pub fn seed(&self) -> [u8; 32] {
        self.seed
    }

    /// The public key in base58, as Solana writes it.
    pub fn pubkey_b58(&self) -> &str {
        &self.pubkey_b58
    }
}

impl core::fmt::Debug for SearcherKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "SearcherKey({})", self.pubkey_b58)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keypair_file_is_64_numbers_whose_end_is_the_public_key_of_its_start() {
        let k = SearcherKey::from_seed([7; 32]);
        let public = ed25519_dalek::SigningKey::from_bytes(&[7; 32]).verifying_key();
        let mut pair = vec![7u8; 32];
        pair.extend_from_slice(public.as_bytes());
        let text = serde_json::to_string(&pair).unwrap();
        assert_eq!(SearcherKey::from_json(&text).unwrap(), k);
        pair[40] ^= 1;
        let e = SearcherKey::from_json(&serde_json::to_string(&pair).unwrap()).unwrap_err();
        assert!(e.contains("damaged"), "{e}");
        let e = SearcherKey::from_json("[1,2,3]").unwrap_err();
        assert!(e.contains("has 3"), "{e}");
        let e = SearcherKey::from_json("secret").unwrap_err();
        assert!(!e.contains("secret"), "the text is not repeated: {e}");
        assert_eq!(format!("{k:?}"), format!("SearcherKey({})", k.pubkey_b58()));
    }
}
