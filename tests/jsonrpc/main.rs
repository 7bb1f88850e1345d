//! The JSON-RPC layer's tests in one binary: requests, answers, and the differential runs against
//! serde_json. One module per subject.

mod differential;
mod request;
mod response;
