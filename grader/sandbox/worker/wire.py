"""The data-only wire between the judge and the worker: both ends import this module.

`Channel` moves frames (see codec.py for their format) over a connected stream socket, with
an absolute deadline per frame, so the judge can bound every wait on an untrusted worker.
Both ends import the same code: the judge as `grader.sandbox.worker.wire`, the worker from
the folder bind-mounted into its sandbox.
"""

from __future__ import annotations

import socket
import struct
import time

import torch

from .codec import (
    Decoder,
    Encoded,
    Frame,
    TensorSpec,
    encode,
    parse_header,
)
from .contract import WireClosed, WireError, WireLimits, WireTimeout

_JOIN_BELOW = 1 << 20  # frames smaller than this go out in one sendall
_READ_AHEAD = 1 << 16  # a short read asks for this much: a small frame costs one recv


class Channel:
    """Frames over a connected stream socket, with an optional absolute deadline per frame."""

    def __init__(self, sock: socket.socket, limits: WireLimits | None = None) -> None:
        self.sock = sock
        self.limits = limits or WireLimits()
        self._timeout: float | None = -1.0  # unknown until first set
        # bytes read ahead of the current frame: self._ahead[self._start:self._end]
        self._ahead = memoryview(bytearray(_READ_AHEAD))
        self._start = self._end = 0
        self._discard = bytearray(_READ_AHEAD)  # where skipped payloads are read

    def _set_deadline(self, deadline: float | None) -> None:
        timeout = None if deadline is None else max(deadline - time.monotonic(), 1e-6)
        if deadline is None and self._timeout is None:
            return
        self.sock.settimeout(timeout)
        self._timeout = timeout

    def send(self, value: object, deadline: float | None = None) -> list[torch.Tensor]:
        """Send one frame; returns the original tensors in the frame's index order."""
        frame = encode(value, self.limits)
        self.send_frame(frame, deadline)
        return frame.originals

    def send_frame(self, frame: Encoded, deadline: float | None = None) -> None:
        """Send a frame encoded beforehand (so an encoding error leaves the channel in step)."""
        self._set_deadline(deadline)
        try:
            if frame.nbytes < _JOIN_BELOW:
                self.sock.sendall(b"".join(frame.parts))
            else:
                for part in frame.parts:
                    self.sock.sendall(part)
        except TimeoutError:
            raise WireTimeout("deadline passed while sending") from None
        except OSError as e:
            raise WireClosed(f"channel closed while sending: {e}") from None

    def send_frames(self, frames: list[Encoded], deadline: float | None = None) -> None:
        """Send several small frames encoded beforehand in one write (calls sent ahead)."""
        self._set_deadline(deadline)
        try:
            self.sock.sendall(b"".join(part for frame in frames for part in frame.parts))
        except TimeoutError:
            raise WireTimeout("deadline passed while sending") from None
        except OSError as e:
            raise WireClosed(f"channel closed while sending: {e}") from None

    def _take(self, n: int, deadline: float | None) -> bytearray:
        """The next `n` bytes of the stream, as a new buffer of their own."""
        if self._end - self._start >= n:  # a small frame: all of it was read ahead
            taken = bytearray(self._ahead[self._start : self._start + n])
            self._start += n
            return taken
        taken = bytearray(n)
        self._read_into(memoryview(taken), deadline)
        return taken

    def _read_into(self, view: memoryview, deadline: float | None) -> None:
        """Fill `view`: bytes read ahead first, then the socket. A short read asks for up to
        _READ_AHEAD bytes, so a whole small frame (header and payloads) costs one recv; what
        goes past `view` stays read ahead for the next read. A long read goes straight into
        `view`, so no header can make this side buffer more than _READ_AHEAD bytes."""
        got = min(self._end - self._start, len(view))
        view[:got] = self._ahead[self._start : self._start + got]
        self._start += got
        while got < len(view):
            want = len(view) - got
            if want >= _READ_AHEAD:
                got += self._recv(view[got:], deadline)
                continue
            n = self._recv(self._ahead, deadline)  # everything read ahead was taken
            take = min(n, want)
            view[got : got + take] = self._ahead[:take]
            self._start, self._end = take, n
            got += take

    def _recv(self, view: memoryview, deadline: float | None) -> int:
        self._set_deadline(deadline)
        try:
            n = self.sock.recv_into(view)
        except TimeoutError:
            raise WireTimeout("deadline passed while receiving") from None
        except OSError as e:
            raise WireClosed(f"channel closed while receiving: {e}") from None
        if n == 0:
            raise WireClosed("channel closed by the other end")
        return n

    def _read_tensor(self, spec: TensorSpec, deadline: float | None) -> torch.Tensor:
        if spec.device == "meta" or spec.nbytes == 0:
            return torch.empty(spec.shape, dtype=spec.dtype, device=spec.device)
        buf = self._take(spec.nbytes, deadline)
        if spec.dtype == torch.bool:  # any nonzero byte is True: never trust raw bool bytes
            return torch.frombuffer(buf, dtype=torch.uint8).ne(0).reshape(spec.shape)
        return torch.frombuffer(buf, dtype=spec.dtype).reshape(spec.shape)

    def _skip_tensor(self, spec: TensorSpec, deadline: float | None) -> torch.Tensor:
        left = spec.nbytes if spec.device != "meta" else 0
        discard = memoryview(self._discard)
        while left:
            chunk = min(left, len(discard))
            self._read_into(discard[:chunk], deadline)
            left -= chunk
        return torch.empty(spec.shape, dtype=spec.dtype, device="meta")

    def recv(self, deadline: float | None = None, *, skip_payloads: bool = False) -> Frame:
        """Receive one frame; every cap is checked before the bytes it governs are read.
        `skip_payloads`: the tensors' bytes are read and dropped, and each tensor comes back
        as a meta tensor of its shape and dtype (a reply nobody will use, read cheaply)."""
        (size,) = struct.unpack(">I", self._take(4, deadline))
        if size > self.limits.max_header_bytes:
            raise WireError(f"header of {size} bytes; the cap is {self.limits.max_header_bytes}")
        doc, specs = parse_header(self._take(size, deadline), self.limits)
        read = self._skip_tensor if skip_payloads else self._read_tensor
        tensors = [read(spec, deadline) for spec in specs]
        return Frame(Decoder(tensors, self.limits).value(doc), tensors, specs)
