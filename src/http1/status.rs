//! The reason phrases of the statuses the relay sends, shared by the response writer and the
//! errors' `Display`. NOT a table of every status: others get an empty phrase, which RFC 9112
//! allows.

/// The reason phrase for the statuses the relay sends; empty for others (RFC 9112 allows an
/// empty reason, and clients ignore it).
pub const fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}
