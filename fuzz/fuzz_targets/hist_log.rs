//! `bundle-relay hist` reading whatever a log file holds (a killed writer's last line, a full
//! disk, a file that is not a log): an error or a report, then the printed percentiles and both
//! pictures drawn, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bundle_relay::hist::fuzz_log(data);
});
