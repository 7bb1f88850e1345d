//! The baseline's pure pieces in one binary: its units and its seed limiter.

mod limiter;
mod units;
