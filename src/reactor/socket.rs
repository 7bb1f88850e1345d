//! Socket setup for upstream connections and intake listeners. Only setup: connecting,
//! accepting, sending and receiving happen in the ring.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{IntoRawFd, RawFd};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// Pending connections a listener queues before the kernel refuses more: deep enough for a
/// burst of bots reconnecting at once.
pub const LISTEN_BACKLOG: i32 = 4096;

/// A TCP socket bound to `local` (port chosen at connect time; unbound when `None`, for a
/// connection to a SOCKS5 proxy), ready for the ring to connect to `remote`. `IP_BIND_ADDRESS_NO_PORT` defers the port choice to `connect`, so thousands of
/// sockets bound to one address do not exhaust its ephemeral ports at bind time (the kernel
/// then picks a port unique per 4-tuple). Nagle is off: a bundle is one write and waits for
/// nothing. Data the engine's kernel does not acknowledge within `user_timeout_ms` ends the
/// connection (`TCP_USER_TIMEOUT`; TCP would otherwise retransmit into a black hole for many
/// minutes). With `keepalive` (HTTP/2 PINGs off) the kernel probes idle connections
/// ([`crate::config::KEEPALIVE_IDLE_S`]); without, PINGs do and the kernel sends nothing.
pub fn upstream(
    local: Option<IpAddr>,
    remote: SocketAddr,
    user_timeout_ms: u64,
    keepalive: bool,
) -> io::Result<RawFd> {
    let domain = Domain::for_address(remote);
    let socket = Socket::new(
        domain,
        Type::STREAM.nonblocking().cloexec(),
        Some(Protocol::TCP),
    )?;
    if let Some(local) = local {
        if local.is_ipv4() {
            set_bind_address_no_port(&socket)?;
        }
        socket.bind(&SockAddr::from(SocketAddr::new(local, 0)))?;
    }
    socket.set_tcp_nodelay(true)?;
    socket.set_tcp_user_timeout(Some(std::time::Duration::from_millis(user_timeout_ms)))?;
    if keepalive {
        socket.set_tcp_keepalive(&keepalive_params())?;
    }
    Ok(socket.into_raw_fd())
}

/// The kernel keepalive's timing (see [`crate::config::KEEPALIVE_IDLE_S`]).
fn keepalive_params() -> socket2::TcpKeepalive {
    use crate::config::{KEEPALIVE_IDLE_S, KEEPALIVE_INTERVAL_S, KEEPALIVE_PROBES};
    socket2::TcpKeepalive::new()
        .with_time(std::time::Duration::from_secs(KEEPALIVE_IDLE_S))
        .with_interval(std::time::Duration::from_secs(KEEPALIVE_INTERVAL_S))
        .with_retries(KEEPALIVE_PROBES)
}

fn set_bind_address_no_port(socket: &Socket) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let one: libc::c_int = 1;
    // SAFETY: a valid socket fd and a c_int option value of the right size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Kernel send buffer of an intake connection (the kernel doubles it for its bookkeeping).
/// A bot's answers are a few hundred bytes each, so this holds hundreds of unread answers;
/// without a bound, autotuning lets each connection pin up to `tcp_wmem`'s maximum (4 MiB by
/// default) of kernel memory for a client that does not read, before the send deadline can
/// even start to run.
pub const INTAKE_SNDBUF_BYTES: usize = 64 * 1024;

/// A listening socket with `SO_REUSEPORT`, so each reactor thread binds its own on the same
/// address and the kernel spreads connections across them. Accepted connections inherit its
/// `TCP_NODELAY` and its send buffer ([`INTAKE_SNDBUF_BYTES`]).
pub fn listener(addr: SocketAddr) -> io::Result<RawFd> {
    let fd = bound_listener(addr)?;
    if let Err(e) = listen(fd) {
        // SAFETY: the fd we just made, not handed out.
        unsafe { libc::close(fd) };
        return Err(e);
    }
    Ok(fd)
}

/// As [`listener`], bound but not yet listening: it joins its SO_REUSEPORT group (and gets
/// connections) only at [`listen`]. A process taking over from another binds its ports at
/// start, so a port it cannot have is an error then, and listens once its pool is up.
pub fn bound_listener(addr: SocketAddr) -> io::Result<RawFd> {
    let socket = Socket::new(
        Domain::for_address(addr),
        Type::STREAM.nonblocking().cloexec(),
        Some(Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_tcp_nodelay(true)?;
    socket.set_send_buffer_size(INTAKE_SNDBUF_BYTES)?;
    socket.bind(&SockAddr::from(addr))?;
    Ok(socket.into_raw_fd())
}

/// Whether `addr` (a fixed port) is free of every other listener: a socket without
/// `SO_REUSEPORT` binds it only if no socket listens there, whatever its options. A relay
/// that is not taking over asks this before joining the port with `SO_REUSEPORT`, which would
/// otherwise silently share it with another process's listeners (another relay's), splitting
/// the connections between them. `SO_REUSEADDR` lets connections of a process gone by (in
/// TIME_WAIT) not count.
pub fn no_other_listener(addr: SocketAddr) -> io::Result<()> {
    if addr.port() == 0 {
        return Ok(());
    }
    let socket = Socket::new(
        Domain::for_address(addr),
        Type::STREAM.cloexec(),
        Some(Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    socket.bind(&SockAddr::from(addr)).map_err(|e| {
        if e.kind() == io::ErrorKind::AddrInUse {
            io::Error::new(
                io::ErrorKind::AddrInUse,
                "already in use: another process listens on this port (two relays on one \
                 port would split its connections; a takeover names the old one with \
                 --takeover)",
            )
        } else {
            e
        }
    })
}

/// `listen(2)` on a socket from [`bound_listener`], with [`LISTEN_BACKLOG`].
pub fn listen(fd: RawFd) -> io::Result<()> {
    // SAFETY: listen on a socket fd we own.
    if unsafe { libc::listen(fd, LISTEN_BACKLOG) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The address a listening fd is bound to (its port when it was bound to port 0).
pub fn local_addr(fd: RawFd) -> io::Result<SocketAddr> {
    use std::os::fd::FromRawFd;
    // SAFETY: borrowed only for the call; ManuallyDrop keeps the fd open.
    let s = std::mem::ManuallyDrop::new(unsafe { Socket::from_raw_fd(fd) });
    s.local_addr()?
        .as_socket()
        .ok_or_else(|| io::Error::other("not an IP socket"))
}

/// The C form of `addr` for the ring's connect, which reads it until the connect completes.
pub fn sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    let sa = SockAddr::from(addr);
    // SAFETY: SockAddr holds a sockaddr_storage-compatible value of `len` bytes.
    let storage = unsafe { *sa.as_ptr().cast::<libc::sockaddr_storage>() };
    (storage, sa.len())
}

/// The peer address of an accepted socket (`None` if it is already gone).
pub fn peer_ip(fd: RawFd) -> Option<IpAddr> {
    use std::os::fd::FromRawFd;
    // SAFETY: borrowed only for the call; ManuallyDrop keeps the fd open.
    let s = std::mem::ManuallyDrop::new(unsafe { Socket::from_raw_fd(fd) });
    s.peer_addr().ok()?.as_socket().map(|a| a.ip())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::FromRawFd;

    #[test]
    fn accepted_connections_inherit_nodelay_and_the_send_buffer_from_the_listener() {
        let fd = listener("127.0.0.1:0".parse().unwrap()).unwrap();
        // SAFETY: a fresh fd we own, closed when `l` drops.
        let l = unsafe { Socket::from_raw_fd(fd) };
        l.set_nonblocking(false).unwrap();
        let addr = l.local_addr().unwrap();
        let client = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        client.connect(&addr).unwrap();
        let (accepted, _) = l.accept().unwrap();
        assert!(
            accepted.tcp_nodelay().unwrap(),
            "no per-connection setsockopt needed"
        );
        // The kernel doubles what was asked for its bookkeeping.
        assert_eq!(
            accepted.send_buffer_size().unwrap(),
            2 * INTAKE_SNDBUF_BYTES
        );
    }

    #[test]
    fn upstream_sockets_carry_a_user_timeout_and_kernel_keepalive_only_when_asked() {
        use crate::config::{KEEPALIVE_IDLE_S, KEEPALIVE_INTERVAL_S, KEEPALIVE_PROBES};
        for keepalive in [true, false] {
            let fd = upstream(
                Some("127.0.0.1".parse().unwrap()),
                "127.0.0.1:9".parse().unwrap(),
                4_321,
                keepalive,
            )
            .unwrap();
            // SAFETY: a fresh fd we own, closed when `s` drops.
            let s = unsafe { Socket::from_raw_fd(fd) };
            assert_eq!(
                s.tcp_user_timeout().unwrap(),
                Some(std::time::Duration::from_millis(4_321))
            );
            assert_eq!(s.keepalive().unwrap(), keepalive);
            if keepalive {
                assert_eq!(
                    s.tcp_keepalive_time().unwrap(),
                    std::time::Duration::from_secs(KEEPALIVE_IDLE_S)
                );
                assert_eq!(
                    s.tcp_keepalive_interval().unwrap(),
                    std::time::Duration::from_secs(KEEPALIVE_INTERVAL_S)
                );
                assert_eq!(s.tcp_keepalive_retries().unwrap(), KEEPALIVE_PROBES);
            }
        }
    }
}
