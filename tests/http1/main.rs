//! The HTTP/1.1 intake layer's tests in one binary: the request rules, splits at every byte, the
//! connection state machine, responses, and the fuzz body as a property test. One module per subject.

mod conn;
mod fuzz_body;
mod response;
mod rules;
mod splits;
