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
/// The no-op linked behind a quiet send ([`Sock::send`]); completes here only when the send
/// did not take every byte, and then only to wake the loop.
pub const OP_SEND_GUARD: u64 = 13;
/// The answer sent to a connection refused at accept ([`refusal`]); completes here only if it
/// failed (the client was gone: its close follows anyway).
pub const OP_REFUSAL: u64 = 14;

/// Where `optlen` sits in an `io_uring_sqe` (after opcode, flags, ioprio, fd, off, addr, len,
/// the op's flags, user_data, buf_index and personality).
const SQE_OPTLEN_OFFSET: usize = 44;

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

/// Sends `answer` to a connection refused at accept, hard-linked to [`close`] of `fd` (queue
/// both with [`super::ring::Ring::push_linked`]): the close follows whether the send took the
/// answer or not. The send never waits for room (a fresh socket has it all); an `answer`
/// that is `'static` outlives it.
pub fn refusal(fd: RawFd, answer: &'static [u8]) -> squeue::Entry {
    opcode::Send::new(types::Fd(fd), answer.as_ptr(), answer.len() as u32)
        .flags(libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT)
        .build()
        .flags(squeue::Flags::IO_HARDLINK | squeue::Flags::SKIP_SUCCESS)
        .user_data(ud(OP_REFUSAL, 0, 0))
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
    /// The send in flight is quiet (see [`Sock::send`]) and counted as such in this
    /// iteration's wait: the loop does not wake for its completion alone.
    pub quiet: bool,
    /// The last send found the socket full, or took only part: the next send waits for room.
    pub congested: bool,
    /// Bytes the send in flight asked to send.
    pub len: u32,
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
            quiet: false,
            congested: false,
            len: 0,
            recv_armed: false,
            closing: false,
        }
    }

    /// A fresh socket in this slot: `fd`, nothing in flight.
    pub fn open(&mut self, fd: RawFd) {
        self.fd = fd;
        self.ops = 0;
        self.sending = false;
        self.quiet = false;
        self.congested = false;
        self.len = 0;
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

    /// [`Sock::recv`] that ends (its last completion without `IORING_CQE_F_MORE`) once it has
    /// brought `limit` bytes (`sqe->optlen`; a kernel without the limit refuses the entry
    /// with EINVAL). One receive may still go past the limit by up to a buffer: the kernel
    /// counts the limit down after each.
    pub fn recv_limited(&mut self, kind: u64, index: u32, group: u16, limit: u32) -> squeue::Entry {
        let mut e = self.recv(kind, index, group);
        // SAFETY: an entry is the kernel's 64-byte `io_uring_sqe` (`repr(C)`), whose 32-bit
        // `optlen` (shared with `file_index`) is at byte 44; this writes it in place.
        const _: () = assert!(std::mem::size_of::<squeue::Entry>() == 64);
        unsafe {
            std::ptr::from_mut(&mut e)
                .cast::<u8>()
                .add(SQE_OPTLEN_OFFSET)
                .cast::<u32>()
                .write_unaligned(limit);
        }
        e
    }

    /// One receive of at most `len` bytes into a buffer from buffer group `group`, counted in
    /// flight: it completes once (without `IORING_CQE_F_MORE`), with what was there up to
    /// `len`.
    pub fn recv_once(&mut self, kind: u64, index: u32, group: u16, len: u32) -> squeue::Entry {
        self.recv_armed = true;
        self.ops += 1;
        opcode::Recv::new(types::Fd(self.fd), std::ptr::null_mut(), len)
            .buf_group(group)
            .build()
            .flags(squeue::Flags::BUFFER_SELECT)
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

    /// `shutdown(SHUT_WR)` through the ring, counted in flight: the peer reads end-of-stream
    /// after what was sent, and the socket can still receive.
    pub fn shutdown_write(&mut self, kind: u64, index: u32) -> squeue::Entry {
        self.ops += 1;
        opcode::Shutdown::new(types::Fd(self.fd), libc::SHUT_WR)
            .build()
            .user_data(ud(kind, index, self.generation))
    }

    /// A send of `len` bytes at `ptr`, which must stay put until it completes; counted in
    /// flight.
    ///
    /// A quiet send never waits for room in the socket (`MSG_DONTWAIT`: it completes within
    /// the `io_uring_enter` that submits it, with every byte, some, or `EAGAIN`) and is linked
    /// to [`send_guard`], which the kernel cancels, and so completes, exactly when the send
    /// did not take every byte (`MSG_WAITALL` makes a short send a failed one). The loop can
    /// then sleep through a quiet send's own completion: it is already posted when the wait
    /// begins, and any send that needs more work comes with a second completion that wakes it.
    /// A loud send waits in the kernel for room as long as it takes, and its completion
    /// wakes the loop.
    pub fn send(
        &mut self,
        kind: u64,
        index: u32,
        ptr: *const u8,
        len: u32,
        quiet: bool,
    ) -> squeue::Entry {
        self.sending = true;
        self.quiet = quiet;
        self.len = len;
        self.ops += 1;
        let e = opcode::Send::new(types::Fd(self.fd), ptr, len);
        if quiet {
            e.flags(libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT | libc::MSG_WAITALL)
                .build()
                .flags(squeue::Flags::IO_LINK)
                .user_data(ud(kind, index, self.generation))
        } else {
            e.flags(libc::MSG_NOSIGNAL)
                .build()
                .user_data(ud(kind, index, self.generation))
        }
    }

    /// A send completed with `res`: whether the loop slept through it (a quiet send nothing
    /// waited on), and its result with `EAGAIN` (only a quiet send meets it) read as nothing
    /// sent. A full socket or a short send makes the next send loud, waiting for room (a
    /// quiet one would only meet `EAGAIN`); a whole one makes sends quiet again.
    pub fn sent(&mut self, res: i32) -> (bool, i32) {
        self.sending = false;
        self.ops -= 1;
        let quiet = std::mem::take(&mut self.quiet);
        let res = if res == -libc::EAGAIN { 0 } else { res };
        if res >= 0 {
            self.congested = (res as u32) < self.len;
        }
        (quiet, res)
    }
}

/// The entry a quiet send is linked to: a no-op that posts nothing when the send took every
/// byte, and is cancelled (posting its completion, [`OP_SEND_GUARD`]) when it did not.
pub fn send_guard() -> squeue::Entry {
    opcode::Nop::new()
        .build()
        .flags(squeue::Flags::SKIP_SUCCESS)
        .user_data(ud(OP_SEND_GUARD, 0, 0))
}
