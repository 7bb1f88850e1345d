//! The bundle-status calls answered from the record of recent bundles (`journal`): Jito's
//! `getInflightBundleStatuses` and the relay's own `getBundleDelivery`. Sans-IO. A tenant sees
//! only its own bundles: another tenant's id is `Invalid` to it, as an unknown one is.

use crate::journal::Found;
use crate::journal::answer::{self, Names};
use crate::jsonrpc::{Call, Overflow, STATUS_IDS_MAX, Writer};

use super::dispatch::Dispatcher;

/// The result of a status `call` for tenant slot `tenant`, written into `out`.
pub fn answer<'b>(
    d: &Dispatcher,
    call: &Call<'_>,
    tenant: u16,
    out: &'b mut [u8],
) -> Result<&'b [u8], Overflow> {
    let mut w = Writer::new(out);
    match call {
        Call::GetInflightBundleStatuses { bundle_ids } => {
            let mut found = [([0u8; 32], None::<Found>); STATUS_IDS_MAX];
            let n = bundle_ids.len().min(found.len());
            for (slot, s) in found.iter_mut().zip(bundle_ids.iter()) {
                // The parser checked each is 64 hex characters.
                let id = answer::parse_id(s.raw()).unwrap_or([0; 32]);
                *slot = (id, d.find_bundle(&id, tenant));
            }
            // The relay follows no chain: 0 says it has no slot of its own to report.
            answer::write_inflight(&mut w, 0, &found[..n]);
        }
        Call::GetBundleDelivery { bundle_id } => {
            let id = answer::parse_id(bundle_id.raw()).unwrap_or([0; 32]);
            match d.find_bundle(&id, tenant) {
                None => w.bytes(b"null"),
                Some(f) => {
                    let ring = d.journals().ring(f.thread);
                    let region = |r: u8| -> &str {
                        if usize::from(r) < d.region_count() {
                            d.region_name(usize::from(r))
                        } else {
                            "?"
                        }
                    };
                    let names = Names {
                        region: &region,
                        tenant: d.tenancy().name(f.latest.tenant),
                    };
                    answer::write_delivery(&mut w, &f, ring.rate(), |t| ring.unix_ns(t), &names);
                }
            }
        }
        _ => w.bytes(b"null"),
    }
    w.finish()
}
