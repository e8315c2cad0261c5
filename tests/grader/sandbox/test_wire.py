"""The data-only wire: exact round trips, and caps enforced before anything is allocated."""

from __future__ import annotations

import contextlib
import json
import math
import socket
import struct
import threading
import time
import tracemalloc

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.sandbox import WireClosed, WireError, WireTimeout
from grader.sandbox.remote import DTYPES, Channel, WireLimits, encode, with_fields

SMALL = WireLimits(
    max_message_bytes=1 << 20, max_elements=1 << 16, max_header_bytes=1 << 16, max_str_chars=1000
)


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    yield Channel(a), Channel(b)
    a.close()
    b.close()


def round_trip(value, limits: WireLimits | None = None):
    """Send from a thread (a big frame fills the socket buffer) and receive here."""
    a, b = socket.socketpair()
    with a, b:
        sender = threading.Thread(target=Channel(a, limits).send, args=(value,))
        sender.start()
        try:
            return Channel(b, limits).recv(time.monotonic() + 10)
        finally:
            sender.join(timeout=10)


def forge(header: object, payload: bytes = b"", *, raw: bytes | None = None) -> bytes:
    body = raw if raw is not None else json.dumps(header).encode()
    return struct.pack(">I", len(body)) + body + payload


def recv_forged(data: bytes, limits: WireLimits = SMALL, timeout: float = 2.0):
    a, b = socket.socketpair()
    with a, b:
        a.settimeout(timeout)
        sender = threading.Thread(target=_send_quietly, args=(a, data))
        sender.start()
        try:
            return Channel(b, limits).recv(time.monotonic() + timeout)
        finally:
            b.shutdown(socket.SHUT_RDWR)  # unblock a sender the receiver stopped reading
            sender.join(timeout=timeout)


def _send_quietly(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):  # the receiver refused the frame and shut the socket
        sock.sendall(data)


def spec(dtype="float32", shape=(2,), device="cpu", requires_grad=False, nbytes=None):
    numel = math.prod(shape)
    if nbytes is None:
        nbytes = 0 if device == "meta" else numel * DTYPES.get(dtype, torch.uint8).itemsize
    shape = list(shape)
    return {"dtype": dtype, "shape": shape, "device": device, "requires_grad": requires_grad,
            "nbytes": nbytes}  # fmt: skip


def sample(dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, dtype=dtype)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, shape, dtype=dtype)


# -- round trips -------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(DTYPES))
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3), (1, 2, 1, 2)])
def test_every_allowed_dtype_round_trips_bitwise(name, shape):
    sent = sample(DTYPES[name], shape)
    frame = round_trip({"x": sent})
    got = frame.value["x"]
    assert type(got) is torch.Tensor
    assert got.dtype == sent.dtype and got.shape == sent.shape and got.device.type == "cpu"
    as_bytes = (lambda t: t.reshape(-1).view(torch.uint8)) if sent.numel() else (lambda t: t)
    assert torch.equal(as_bytes(got.contiguous()), as_bytes(sent.contiguous()))


@pytest.mark.parametrize("name", ["bfloat16", "float32", "int64", "bool"])
def test_meta_tensors_travel_as_metadata_only(name):
    sent = torch.empty(4, 5, dtype=DTYPES[name], device="meta")
    frame = round_trip([sent])
    got = frame.value[0]
    assert got.device.type == "meta" and got.shape == (4, 5) and got.dtype == sent.dtype
    assert frame.specs[0].nbytes == 0


def test_special_values_and_structure_survive():
    value = {
        "none": None,
        "flags": [True, False],
        "ints": [0, -3, 2**62],
        "floats": [1.5, -0.0, math.inf, -math.inf],
        "text": "grad ∇ \udc80",
        "tuple": (1, (2.5, "x"), []),
        "dtype": torch.bfloat16,
    }
    got = round_trip(value).value
    assert got["none"] is None and got["flags"] == [True, False] and got["ints"] == [0, -3, 2**62]
    assert got["floats"] == [1.5, 0.0, math.inf, -math.inf]
    assert math.copysign(1, got["floats"][1]) == -1
    assert got["text"] == value["text"] and got["tuple"] == (1, (2.5, "x"), [])
    assert isinstance(got["tuple"], tuple) and got["dtype"] is torch.bfloat16
    assert math.isnan(round_trip(float("nan")).value)


def test_requires_grad_leafness_and_identity_are_carried(pair):
    leaf = torch.randn(3, requires_grad=True)
    nonleaf = leaf * 2
    plain = torch.ones(2)
    sent = pair[0].send({"args": [leaf, nonleaf, plain, leaf]})
    frame = pair[1].recv(time.monotonic() + 5)
    assert sent == [leaf, nonleaf, plain]  # deduplicated by identity, in index order
    a, b, _, d = frame.value["args"]
    assert a is d and len(frame.tensors) == 3
    assert [s.requires_grad for s in frame.specs] == [True, True, False]
    assert [s.leaf for s in frame.specs] == [True, False, True]
    assert not any(t.requires_grad for t in frame.tensors)  # the receiver decides
    assert torch.equal(b, nonleaf.detach())


def test_views_subclasses_and_conj_send_their_values():
    base = torch.arange(12.0).reshape(3, 4)
    param = torch.nn.Parameter(torch.randn(2))
    z = torch.randn(3, dtype=torch.complex64)
    got = round_trip([base.t(), base[:, 1], param, z.conj()]).value
    assert torch.equal(got[0], base.t()) and torch.equal(got[1], base[:, 1])
    assert type(got[2]) is torch.Tensor and torch.equal(got[2], param.detach())
    assert torch.equal(got[3], z.conj().resolve_conj())


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), max_size=16))
def test_float_payloads_round_trip_bitwise(values):
    sent = torch.tensor(values, dtype=torch.float32)
    got = round_trip(sent).value
    assert torch.equal(got.view(torch.int32), sent.view(torch.int32))


def test_large_frame_round_trips_in_parts():
    sent = torch.randn(600_000)  # 2.4 MB: sent part by part, not joined
    assert torch.equal(round_trip(sent).value, sent)


STREAM = [  # small frames, one whose payload straddles the read-ahead, one far larger
    {"seq": 1, "x": torch.arange(6.0).reshape(2, 3)},
    {"seq": 2, "ok": True, "n": [1, 2, 3]},
    {"seq": 3, "big": torch.arange(20_000, dtype=torch.float32), "flag": torch.tensor([True])},
    {"seq": 4, "huge": torch.arange(20_000, dtype=torch.float64)},  # 160 kB
    {"seq": 5, "tail": (torch.zeros(0), torch.ones(2, dtype=torch.int8))},
]


@settings(max_examples=30, deadline=None)
@given(chunk=st.one_of(st.integers(16, 64), st.integers(65, 300_000)))
def test_frames_arriving_in_pieces_of_any_size_are_read_exactly(chunk):
    """Frames sent back to back and delivered `chunk` bytes at a time: each frame comes out
    whole and in order, whatever a read brings (part of a header, several frames)."""
    data = b"".join(bytes(part) for value in STREAM for part in encode(value, SMALL).parts)
    a, b = socket.socketpair()

    def send_in_pieces() -> None:
        with contextlib.suppress(OSError):
            for start in range(0, len(data), chunk):
                a.sendall(data[start : start + chunk])

    with a, b:
        sender = threading.Thread(target=send_in_pieces)
        sender.start()
        channel = Channel(b, SMALL)
        try:
            for sent in STREAM:
                got = channel.recv(time.monotonic() + 10).value
                assert got.keys() == sent.keys()
                for key, value in sent.items():
                    if isinstance(value, tuple):
                        assert all(map(torch.equal, got[key], value))
                    elif isinstance(value, torch.Tensor):
                        assert torch.equal(got[key], value)
                    else:
                        assert got[key] == value
        finally:
            sender.join(timeout=10)


def test_fields_added_to_an_encoded_dict_arrive_with_its_tensors(pair):
    x = torch.randn(2, 3, requires_grad=True)
    body = encode({"op": "call", "args": [x, x * 2], "kwargs": {}}, SMALL)
    pair[0].send_frame(with_fields(body, {"seq": 7, "release": [1, 2]}, SMALL))
    frame = pair[1].recv(time.monotonic() + 5)
    assert set(frame.value) == {"op", "args", "kwargs", "seq", "release"}
    assert frame.value["seq"] == 7 and frame.value["release"] == [1, 2]
    assert torch.equal(frame.value["args"][0], x.detach())
    assert torch.equal(frame.value["args"][1], x.detach() * 2)
    assert [s.leaf for s in frame.specs] == [True, False]


def test_fields_are_added_only_to_a_dict_and_within_the_caps():
    with pytest.raises(ValueError, match="non-empty dict"):
        with_fields(encode([1, 2], SMALL), {"seq": 1}, SMALL)
    with pytest.raises(ValueError, match="non-empty dict"):
        with_fields(encode({}, SMALL), {"seq": 1}, SMALL)
    with pytest.raises(ValueError, match="no tensors"):
        with_fields(encode({"a": 1}, SMALL), {"t": torch.ones(1)}, SMALL)
    with pytest.raises(WireError, match="header"):
        with_fields(encode({"a": 1}, SMALL), {"ids": list(range(20_000))}, SMALL)


# -- refused on the way out ---------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        torch.zeros(2, dtype=torch.float8_e4m3fn),
        torch.zeros(2, dtype=torch.uint16),
        torch.zeros(2).to_sparse(),
        object(),
        {1: "non-str key"},
        {"s"},
        "x" * (SMALL.max_str_chars + 1),
        torch.zeros(SMALL.max_elements + 1, dtype=torch.uint8),
        torch.zeros([1] * 9),
    ],
    ids=["float8", "uint16", "sparse", "object", "int-key", "set", "long-str", "elems", "dims"],
)
def test_encoder_refuses_what_the_wire_does_not_carry(value, pair):
    with pytest.raises(WireError):
        Channel(pair[0].sock, SMALL).send(value)


def test_encoder_refuses_deep_nesting_and_big_totals(pair):
    deep: list = []
    for _ in range(SMALL.max_depth + 2):
        deep = [deep]
    with pytest.raises(WireError, match="nested"):
        Channel(pair[0].sock, SMALL).send(deep)
    half = torch.zeros(SMALL.max_elements // 2 + 8, dtype=torch.float32)  # 2 x 131 KB
    with pytest.raises(WireError, match="exceeds"):
        Channel(pair[0].sock, WireLimits(max_message_bytes=200_000)).send([half, half + 1])


# -- refused on the way in, before allocating ----------------------------------------------


def test_forged_three_billion_elements_rejected_before_allocation():
    header = {"v": {"tensor": 0}, "t": [spec(shape=(3_000_000_000,), nbytes=12_000_000_000)]}
    tracemalloc.start()
    try:
        with pytest.raises(WireError, match="elements") as info:
            recv_forged(forge(header), limits=WireLimits())  # default caps
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not isinstance(info.value, WireTimeout | WireClosed)  # refused, not waited for
    assert peak < 1 << 20


def test_forged_total_bytes_over_cap_rejected_before_payload():
    each = spec(dtype="uint8", shape=(SMALL.max_elements,))  # 64 KiB, allowed alone
    header = {"v": [{"tensor": i} for i in range(20)], "t": [each] * 20}  # 1.3 MB in all
    with pytest.raises(WireError, match="exceeds") as info:
        recv_forged(forge(header))
    assert not isinstance(info.value, WireTimeout)


def test_forged_huge_header_length_rejected():
    with pytest.raises(WireError, match="header") as info:
        recv_forged(struct.pack(">I", 2**31) + b"{")
    assert not isinstance(info.value, WireTimeout)


@pytest.mark.parametrize(
    "header",
    [
        {"v": {"tensor": 0}, "t": [spec(dtype="float128")]},
        {"v": {"tensor": 0}, "t": [spec(dtype="object")]},
        {"v": {"tensor": 0}, "t": [spec(dtype="complex32")]},
        {"v": {"tensor": 0}, "t": [spec(nbytes=7)]},
        {"v": {"tensor": 0}, "t": [spec(shape=(1,) * 9)]},
        {"v": {"tensor": 0}, "t": [spec(shape=(-1,), nbytes=0)]},
        {"v": {"tensor": 0}, "t": [spec(shape=(True, 2), nbytes=8)]},
        {"v": {"tensor": 0}, "t": [spec(device="cuda")]},
        {"v": {"tensor": 0}, "t": [spec(dtype="int64", requires_grad=True)]},
        {"v": {"tensor": 0}, "t": [{**spec(), "extra": 1}]},
        {"v": {"tensor": 1}, "t": [spec()]},
        {"v": {"pickle": "gASV"}, "t": []},
        {"v": {"float": "1e999"}, "t": []},
        {"v": {"tuple": 1, "dict": {}}, "t": []},
        {"v": 1, "t": [], "x": 0},
        {"v": "x" * (SMALL.max_str_chars + 1), "t": []},
        [1, 2],
    ],
    ids=lambda h: json.dumps(h)[:40],
)
def test_malformed_headers_are_rejected(header):
    payload = b"\0" * 8
    with pytest.raises(WireError) as info:
        recv_forged(forge(header, payload))
    assert not isinstance(info.value, WireTimeout | WireClosed)


@pytest.mark.parametrize("raw", [b"{not json", b'{"v": NaN, "t": []}', b"\xff\xfe", b"[" * 50_000])
def test_garbage_headers_are_rejected(raw):
    with pytest.raises(WireError) as info:
        recv_forged(forge(None, raw=raw))
    assert not isinstance(info.value, WireTimeout | WireClosed)


def test_deeply_nested_value_rejected():
    value: object = 1
    for _ in range(SMALL.max_depth + 2):
        value = [value]
    with pytest.raises(WireError, match="nested"):
        recv_forged(forge({"v": value, "t": []}))


def test_raw_bool_bytes_are_normalised():
    header = {"v": {"tensor": 0}, "t": [spec(dtype="bool", shape=(3,))]}
    got = recv_forged(forge(header, b"\x00\x02\xff")).value
    assert got.tolist() == [False, True, True]
    assert torch.equal(got.view(torch.uint8), torch.tensor([0, 1, 1], dtype=torch.uint8))


def test_truncated_frame_is_closed_and_silence_times_out():
    header = {"v": {"tensor": 0}, "t": [spec(shape=(4,))]}
    a, b = socket.socketpair()
    with b:
        a.sendall(forge(header, b"\0" * 5))  # 5 of 16 payload bytes, then EOF
        a.close()
        with pytest.raises(WireClosed):
            Channel(b).recv(time.monotonic() + 2)
    a, b = socket.socketpair()
    with a, b:
        start = time.monotonic()
        with pytest.raises(WireTimeout):
            Channel(b).recv(start + 0.2)
        assert time.monotonic() - start < 2
