//! Socket setup for upstream connections and intake listeners. Only setup: connecting,
//! sending and receiving happen in the reactor's ring.

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
/// nothing.
pub fn upstream(local: Option<IpAddr>, remote: SocketAddr) -> io::Result<RawFd> {
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
    Ok(socket.into_raw_fd())
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

/// A listening socket with `SO_REUSEPORT`, so each reactor thread binds its own on the same
/// address and the kernel spreads connections across them.
pub fn listener(addr: SocketAddr) -> io::Result<RawFd> {
    let socket = Socket::new(
        Domain::for_address(addr),
        Type::STREAM.nonblocking().cloexec(),
        Some(Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_tcp_nodelay(true)?;
    socket.bind(&SockAddr::from(addr))?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(socket.into_raw_fd())
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

/// `TCP_NODELAY` on an accepted socket (not inherited from the listener on every kernel).
pub fn set_nodelay(fd: RawFd) {
    let one: libc::c_int = 1;
    // SAFETY: a valid socket fd; failure only costs latency.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}
