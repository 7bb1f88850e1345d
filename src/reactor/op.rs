//! Operation lifecycles: every operation's `user_data` carries its kind, the index of the
//! socket it belongs to and that socket's generation, and each socket counts its operations in
//! flight. A socket's index is reused only after its last operation completed, and a
//! completion whose generation is stale is recognised and dropped (its buffer still goes back
//! to the ring).

use std::os::fd::RawFd;

use io_uring::{opcode, squeue, types};

// user_data: kind in the top 8 bits, index in the next 24, generation in the low 32.
pub const OP_ACCEPT: u64 = 1;
pub const OP_IN_RECV: u64 = 2;
pub const OP_IN_SEND: u64 = 3;
pub const OP_UP_CONNECT: u64 = 4;
pub const OP_UP_RECV: u64 = 5;
pub const OP_UP_SEND: u64 = 6;
pub const OP_CANCEL: u64 = 7;
/// Another thread's `MSG_RING`: handoffs are waiting.
pub const OP_WAKE: u64 = 8;
/// A client connection's shutdown, ending its receive and send.
pub const OP_IN_SHUTDOWN: u64 = 9;
/// An upstream socket's shutdown, ending its receive and send.
pub const OP_UP_SHUTDOWN: u64 = 10;
/// A close through the ring; completes here only if it failed (nothing to do then).
pub const OP_CLOSE: u64 = 11;
/// A socket option set on an open upstream socket; completes here only if it failed.
pub const OP_UP_SOCKOPT: u64 = 12;

pub fn ud(kind: u64, index: u32, generation: u32) -> u64 {
    (kind << 56) | ((index as u64 & 0xFF_FFFF) << 32) | generation as u64
}

/// A `MSG_RING` to the ring `ring_fd` of another thread, which completes there as
/// [`OP_WAKE`]; its own completion here is skipped on success.
pub fn wake(ring_fd: RawFd) -> squeue::Entry {
    opcode::MsgRingData::new(types::Fd(ring_fd), 0, ud(OP_WAKE, 0, 0), None)
        .build()
        .flags(squeue::Flags::SKIP_SUCCESS)
        .user_data(ud(OP_WAKE, 0, 0))
}

/// Closes `fd` through the ring, with the iteration's other submissions: no system call of
/// its own. The caller forgets the fd now; no operation may refer to it any more.
pub fn close(fd: RawFd) -> squeue::Entry {
    opcode::Close::new(types::Fd(fd))
        .build()
        .flags(squeue::Flags::SKIP_SUCCESS)
        .user_data(ud(OP_CLOSE, 0, 0))
}

/// Sets the integer option (`level`, `name`) of `fd` to `*value` through the ring (a socket
/// command, Linux 6.7+): no system call of its own. Completes only if it failed, as
/// `user_data`. The kernel reads `*value` when it issues the command, during the iteration's
/// submit, so `value` must outlive that; a later close of `fd` is issued after it.
pub fn set_int(
    fd: RawFd,
    level: i32,
    name: i32,
    value: &libc::c_int,
    user_data: u64,
) -> squeue::Entry {
    opcode::SetSockOpt::new(
        types::Fd(fd),
        level as u32,
        name as u32,
        (value as *const libc::c_int).cast(),
        std::mem::size_of::<libc::c_int>() as u32,
    )
    .build()
    .flags(squeue::Flags::SKIP_SUCCESS)
    .user_data(user_data)
}

/// (kind, index, generation) of a completion's `user_data`.
pub fn ud_parts(u: u64) -> (u64, u32, u32) {
    (u >> 56, ((u >> 32) & 0xFF_FFFF) as u32, u as u32)
}

/// What every socket the ring works on keeps: its fd, the generation stamped into each
/// operation's `user_data`, and which operations are in flight (the fd is closed only when
/// none is).
pub struct Sock {
    pub fd: RawFd,
    pub generation: u32,
    /// Operations in flight on `fd`.
    pub ops: u32,
    pub sending: bool,
    pub recv_armed: bool,
    pub closing: bool,
}

impl Sock {
    pub const fn new() -> Sock {
        Sock {
            fd: -1,
            generation: 0,
            ops: 0,
            sending: false,
            recv_armed: false,
            closing: false,
        }
    }

    /// A fresh socket in this slot: `fd`, nothing in flight.
    pub fn open(&mut self, fd: RawFd) {
        self.fd = fd;
        self.ops = 0;
        self.sending = false;
        self.recv_armed = false;
        self.closing = false;
    }

    /// The fd is closed (no operation refers to it any more): the slot's next socket gets a
    /// new generation, so a late completion for this one is known as stale.
    pub fn closed(&mut self) {
        self.fd = -1;
        self.closing = false;
        self.generation = self.generation.wrapping_add(1);
    }

    /// A multishot receive from buffer group `group`, counted in flight.
    pub fn recv(&mut self, kind: u64, index: u32, group: u16) -> squeue::Entry {
        self.recv_armed = true;
        self.ops += 1;
        opcode::RecvMulti::new(types::Fd(self.fd), group)
            .build()
            .user_data(ud(kind, index, self.generation))
    }

    /// `shutdown(SHUT_RDWR)` through the ring, counted in flight: it ends the socket's
    /// receive and send, and the fd is closed once their completions and its own are in.
    pub fn shutdown(&mut self, kind: u64, index: u32) -> squeue::Entry {
        self.ops += 1;
        opcode::Shutdown::new(types::Fd(self.fd), libc::SHUT_RDWR)
            .build()
            .user_data(ud(kind, index, self.generation))
    }

    /// A send of `len` bytes at `ptr`, which must stay put until it completes; counted in
    /// flight.
    pub fn send(&mut self, kind: u64, index: u32, ptr: *const u8, len: u32) -> squeue::Entry {
        self.sending = true;
        self.ops += 1;
        opcode::Send::new(types::Fd(self.fd), ptr, len)
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(ud(kind, index, self.generation))
    }
}
