# SPDX-License-Identifier: BSD-3-Clause
"""batchwire's Python client: protocol v1 (docs/protocol.md) over a UDP socket, numpy in and out.

The same rules as the C library (client/): requests larger than a datagram go in segments, every
segment with the full header; replies in segments are put back together by request_id; a signed
request carries a trailer (key id, HMAC-SHA256 over the addresses and the datagram before the tag)
and a request_id that is the client's clock in ns; an unsigned INFER pads itself with zeros to its
reply's size, which MODEL_INFO tells (the server sends no reply larger than its request).
"""
import hashlib
import hmac
import os
import select
import socket
import stat
import struct
import time

import numpy as np

__all__ = ["Client", "Pool", "BatchwireError", "ModelInfo", "TensorInfo", "read_key_file", "STATUS_NAMES"]
__version__ = "0.1.0"

MAGIC = 0x52495742
VERSION = 1
PORT = 7878
OP_PING, OP_INFER, OP_MODEL_INFO, OP_REPLY = 1, 2, 3, 0x80
FLAG_AUTH, FLAG_PADDED, FLAG_DRAINING = 0x01, 0x02, 0x04
MODEL_ID_ANY = 0xFFFFFFFF
BY_NAME = 0xFFFF
MAX_RANK = 8
SLICE_MIN = 256
SEG_COUNT_MAX = 65535

HDR = struct.Struct("<IBBHQIIBBHIHHI")       # struct bw_hdr, 40 bytes
DESC = struct.Struct("<HBBHHII8I")           # struct bw_tensor_desc, 48 bytes
MODEL = struct.Struct("<IHHHHHHII")          # struct bw_model_info, 24 bytes
TRAILER_LEN = 40                             # key_id, reserved, a 32-byte tag
assert HDR.size == 40 and DESC.size == 48 and MODEL.size == 24

STATUS_NAMES = ["OK", "INVALID_ARGUMENT", "NOT_FOUND", "RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED", "UNAVAILABLE",
                "INTERNAL", "UNAUTHENTICATED", "UNIMPLEMENTED"]
RESOURCE_EXHAUSTED = 3

# enum bw_dtype (ONNX's TensorProto numbers) <-> numpy; bfloat16 travels as its 16-bit patterns
_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
           9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64, 16: "bfloat16"}
_CODES = {np.dtype(v): k for k, v in _DTYPES.items() if v != "bfloat16"}
DTYPE_NAMES = {1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
               10: "float16", 11: "double", 12: "uint32", 13: "uint64", 16: "bfloat16"}


def _pad8(n):
    return (n + 7) & ~7


class BatchwireError(Exception):
    """The server refused a request: status (an int, STATUS_NAMES[status]) and its message."""

    def __init__(self, status, message):
        self.status = status
        self.status_name = STATUS_NAMES[status] if status < len(STATUS_NAMES) else "STATUS_%d" % status
        self.message = message
        super().__init__("%s: %s" % (self.status_name, message))


class TensorInfo:
    def __init__(self, name, dtype, dims):
        self.name, self.dtype, self.dims = name, dtype, dims  # dims: 0 is dynamic (the batch's)

    @property
    def dtype_name(self):
        return DTYPE_NAMES.get(self.dtype, "dtype %d" % self.dtype)

    def __repr__(self):
        return "TensorInfo(%r, %s, %r)" % (self.name, self.dtype_name, self.dims)


class ModelInfo:
    def __init__(self, model_id, name, flags, batch_sizes, max_batch_size, priority_levels, inputs, outputs,
                 version=0):
        self.model_id, self.name, self.flags = model_id, name, flags
        self.version = version  # the version serving; 0: none (echo)
        self.batch_sizes, self.max_batch_size, self.priority_levels = batch_sizes, max_batch_size, priority_levels
        self.inputs, self.outputs = inputs, outputs

    @property
    def any_tensors(self):
        return bool(self.flags & 1)  # the echo model: any tensors, outputs are the inputs

    def reply_body_bytes(self, rows):
        """The size of an OK INFER reply's body for rows rows, or None when a dimension is dynamic."""
        total = 0
        for t in self.outputs:
            elems = 1
            for d, n in enumerate(t.dims):
                if n == 0 and d > 0:
                    return None
                elems *= n if n != 0 else rows
            total += DESC.size + _pad8(len(t.name.encode())) + elems * _itemsize(t.dtype)
        return total

    def __repr__(self):
        return "ModelInfo(%r, id %d, inputs %r, outputs %r, batch sizes %r)" % (
            self.name, self.model_id, self.inputs, self.outputs, self.batch_sizes)


def _itemsize(code):
    dt = _DTYPES.get(code)
    if dt is None:
        raise ValueError("unknown dtype %d" % code)
    return 2 if dt == "bfloat16" else np.dtype(dt).itemsize


def read_key_file(path, key_id=None):
    """(key_id, secret) from a key file of 'KEY_ID HEX_SECRET' lines (the server's format), which only
    its owner may read or write; the first key, or key_id's."""
    st = os.stat(path)
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise PermissionError("%s: a key file must be readable and writable by its owner only (chmod 600)" % path)
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 2 or not parts[0].isdigit():
                raise ValueError("%s:%d: expected 'KEY_ID HEX_SECRET'" % (path, n))
            kid, secret = int(parts[0]), bytes.fromhex(parts[1])
            if not 16 <= len(secret) <= 64:
                raise ValueError("%s:%d: the secret must be 16..64 bytes" % (path, n))
            if key_id is None or kid == key_id:
                return kid, secret
    raise KeyError("%s: no key%s" % (path, "" if key_id is None else " with id %d" % key_id))


class Client:
    """One server. host: its IPv4 address; mtu: the path's (1500 by default, 9000 for jumbo frames);
    timeout: seconds to wait for a reply before resending (retries times); key_file (and key_id) or
    key_id and key: sign every request."""

    def __init__(self, host, port=PORT, mtu=1500, timeout=1.0, retries=2, key_file=None, key_id=None, key=None,
                 pace_us=0):
        self.host, self.port, self.timeout, self.retries, self.pace_us = host, port, timeout, retries, pace_us
        if key_file is not None:
            key_id, key = read_key_file(key_file, key_id)
        self.key_id, self.key = key_id, key
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.connect((host, port))
        self._dgram = mtu - 20 - 8
        self.slice = self._dgram - HDR.size - (TRAILER_LEN if key is not None else 0)
        if self.slice < SLICE_MIN:
            raise ValueError("MTU %d leaves %d bytes a datagram for a body, below %d" % (mtu, self.slice, SLICE_MIN))
        src, sport = self.sock.getsockname()
        self._pseudo = socket.inet_aton(src) + socket.inet_aton(host) + struct.pack("!HH", sport, port)
        self._last_id = 0
        self.next_request_id = None  # the next unsigned INFER's request_id (Pool), then random again
        self._models = {}       # name -> ModelInfo
        self.draining = False   # the last PING's reply said the server is draining

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- the calls ----------------------------------------------------------------------------------

    def ping(self, payload=b""):
        """Round trip in seconds; sets self.draining from the reply's DRAINING flag."""
        t0 = time.perf_counter()
        flags, _, body = self._transact(OP_PING, 0, payload, 0)
        if body != payload:
            raise BatchwireError(6, "the PING reply's body differs from the request's")
        self.draining = bool(flags & FLAG_DRAINING)
        return time.perf_counter() - t0

    def model_info(self, model):
        """A model's description, by name (str) or id (int). Remembered for the infer calls."""
        name = b"" if isinstance(model, int) else model.encode()
        body = name + bytes(self.slice - len(name))  # a whole datagram: the reply may be that large
        _, _, reply = self._transact(OP_MODEL_INFO, model if isinstance(model, int) else MODEL_ID_ANY, body, 0)
        info = _model_info_decode(reply)
        self._models[info.name] = info
        return info

    def infer(self, model, inputs, deadline_us=0, priority=0):
        """Runs a model. inputs: {name: array} (by name) or a list of arrays (by index), every one with
        the batch dimension first; returns {output name: array}."""
        info = self._models.get(model)
        if info is None:
            info = self.model_info(model)
            self._models[model] = info
        tensors = _tensors(inputs)
        body = _body(tensors)
        rows = tensors[0][2].shape[0] if tensors and tensors[0][2].ndim > 0 else 1
        pad = 0
        if self.key is None:  # an unsigned reply may not outgrow its request: pad to its size
            want = len(body) if info.any_tensors else info.reply_body_bytes(rows)
            if want is not None and len(body) < want <= self.slice:
                pad = want
        _, ntensors, reply = self._transact(OP_INFER, info.model_id, body, pad, deadline_us, priority, len(tensors))
        return _outputs(reply, ntensors)

    # ---- the wire ------------------------------------------------------------------------------------

    def _request_id(self, opcode=None):
        if self.key is not None:  # the server's replay window: our clock, in ns, always increasing
            rid = max(time.time_ns(), self._last_id + 1)
        elif self.next_request_id is not None and opcode == OP_INFER:  # a Pool's failover: the same id
            rid, self.next_request_id = self.next_request_id, None
        else:
            rid = int.from_bytes(os.urandom(8), "little")
        self._last_id = rid
        return rid

    def _datagrams(self, opcode, model_id, body, pad, deadline_us, priority, rid, num_tensors):
        total = len(body)
        count = max(1, -(-total // self.slice))
        if count > SEG_COUNT_MAX:
            raise ValueError("a body of %d bytes needs more than %d segments" % (total, SEG_COUNT_MAX))
        flags = FLAG_AUTH if self.key is not None else 0
        out = []
        for k in range(count):
            piece = body[k * self.slice:(k + 1) * self.slice]
            f = flags
            tail = b""
            if count == 1 and pad > len(piece):
                f |= FLAG_PADDED
                tail = bytes(pad - len(piece))
            hdr = HDR.pack(MAGIC, VERSION, opcode, 0, rid, model_id, deadline_us, priority, f, num_tensors, len(piece),
                           k, count, total)
            d = hdr + piece + tail
            if self.key is not None:
                d += struct.pack("<II", self.key_id, 0)
                d += hmac.new(self.key, self._pseudo + d, hashlib.sha256).digest()
            out.append(d)
        return out

    def _transact(self, opcode, model_id, body, pad, deadline_us=0, priority=0, num_tensors=0):
        """Sends a request (in segments when it must) and waits for its reply, resending on a timeout
        (the same request_id; a signed request a new one, as the replay window wants).
        \return (flags, num_tensors, body) of an OK reply; raises BatchwireError for an error reply."""
        rid = None
        for attempt in range(self.retries + 1):
            if rid is None or self.key is not None:
                rid = self._request_id(opcode)
            self.last_request_id = rid
            for d in self._datagrams(opcode, model_id, body, pad, deadline_us, priority, rid, num_tensors):
                self.sock.send(d)
                if self.pace_us:
                    time.sleep(self.pace_us / 1e6)
            got = self._receive(rid, opcode)
            if got is None:
                continue
            status, flags, ntensors, reply = got
            if status != 0:
                raise BatchwireError(status, reply.decode("utf-8", "replace"))
            return flags, ntensors, reply
        raise TimeoutError("no reply from %s:%d after %d tries" % (self.host, self.port, self.retries + 1))

    def _receive(self, rid, opcode):
        deadline = time.monotonic() + self.timeout
        pieces, count, status, flags, ntensors = {}, None, None, 0, 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.sock], [], [], left)
            if not ready:
                return None
            d = self.sock.recv(65536)
            if len(d) < HDR.size:
                continue
            (magic, version, op, st, r, _, _, _, fl, nt, body_len, seg_index, seg_count,
             total) = HDR.unpack_from(d)
            if magic != MAGIC or r != rid or op != (opcode | OP_REPLY) or seg_count == 0 or seg_index >= seg_count:
                continue  # not ours: a late reply to an earlier try, or noise
            body = d[HDR.size:HDR.size + body_len]
            if len(body) != body_len:
                continue
            if seg_count == 1:
                return st, fl, nt, body
            count, status, flags, ntensors = seg_count, st, fl, nt
            pieces[seg_index] = body
            if len(pieces) == count:
                reply = b"".join(pieces[i] for i in range(count))
                if len(reply) != total:
                    raise BatchwireError(6, "a segmented reply's pieces do not add up to its total_body_len")
                return status, flags, ntensors, reply


def _tensors(inputs):
    """[(index, name bytes, array)] in request order."""
    items = list(inputs.items()) if isinstance(inputs, dict) else list(enumerate(inputs))
    out = []
    for key, a in items:
        a = np.ascontiguousarray(a)
        if a.dtype not in _CODES:
            raise TypeError("input %r: dtype %s is not one protocol v1 carries" % (key, a.dtype))
        if a.ndim > MAX_RANK:
            raise ValueError("input %r: rank %d above %d" % (key, a.ndim, MAX_RANK))
        if isinstance(key, str):
            out.append((BY_NAME, key.encode(), a))
        else:
            out.append((key, b"", a))
    return out


def _body(tensors):
    descs, data = [], []
    for index, name, a in tensors:
        dims = list(a.shape) + [0] * (MAX_RANK - a.ndim)
        descs.append(DESC.pack(index, _CODES[a.dtype], a.ndim, len(name), 0, a.nbytes, 0, *dims) + name
                     + bytes(_pad8(len(name)) - len(name)))
        data.append(a.tobytes())
    return b"".join(descs) + b"".join(data)


def _outputs(body, num_tensors):
    """{name: array} of an OK INFER reply's body: num_tensors descriptors, then the payloads in order."""
    off, descs = 0, []
    for _ in range(num_tensors):
        if off + DESC.size > len(body):
            raise BatchwireError(6, "the reply's descriptors run past its body")
        index, dtype, rank, name_len, _, data_len, _, *dims = DESC.unpack_from(body, off)
        if dtype not in _DTYPES or rank > MAX_RANK:
            raise BatchwireError(6, "the reply has a tensor of dtype %d, rank %d" % (dtype, rank))
        name = body[off + DESC.size:off + DESC.size + name_len].decode("utf-8", "replace")
        off += DESC.size + _pad8(name_len)
        descs.append((index, dtype, name, data_len, dims[:rank]))
    out = {}
    for index, dtype, name, data_len, dims in descs:
        raw = body[off:off + data_len]
        off += data_len
        if _DTYPES[dtype] == "bfloat16":
            a = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(raw, _DTYPES[dtype])
        out[name or "output_%d" % index] = a.reshape(dims).copy()
    if off != len(body):
        raise BatchwireError(6, "the reply's tensors do not fill its body")
    return out


def _model_info_decode(body):
    if len(body) < MODEL.size:
        raise BatchwireError(6, "MODEL_INFO reply shorter than its fixed part")
    model_id, name_len, flags, n_in, n_out, n_sizes, levels, max_batch, version = MODEL.unpack_from(body)
    off = MODEL.size
    name = body[off:off + name_len].decode()
    off += _pad8(name_len)
    sizes = list(struct.unpack_from("<%dI" % n_sizes, body, off))
    off += _pad8(4 * n_sizes)
    tensors = []
    for _ in range(n_in + n_out):
        index, dtype, rank, tlen, _, _, _, *dims = DESC.unpack_from(body, off)
        tname = body[off + DESC.size:off + DESC.size + tlen].decode()
        off += DESC.size + _pad8(tlen)
        tensors.append(TensorInfo(tname, dtype, dims[:rank]))
    return ModelInfo(model_id, name, flags, sizes, max_batch, levels, tensors[:n_in], tensors[n_in:], version)


class Pool:
    """Several servers serving the same models. Each request goes to the healthy server with the fewest
    requests outstanding from this pool (threads may share it); a server that times out (after
    `timeout`, without resends), refuses with UNAVAILABLE, or whose PING says DRAINING (check()) is
    set aside for `holdoff` seconds, and the request goes to the next one. Another status is the
    request's own answer and is raised.
    hosts: a list of addresses ("10.0.0.1" or "10.0.0.1:7878"); the other arguments are Client's."""

    def __init__(self, hosts, holdoff=2.0, **client_args):
        import threading

        if not hosts:
            raise ValueError("a pool needs at least one server")
        self._lock = threading.Lock()
        self._local = threading.local()
        self.holdoff = holdoff
        self._client_args = client_args
        self.servers = []
        for h in hosts:
            host, _, port = h.partition(":")
            self.servers.append({"host": host, "port": int(port) if port else PORT, "outstanding": 0,
                                 "down_until": 0.0, "answered": 0, "failed": 0})

    def _client(self, i):
        # one socket per server and thread: a Client is not shared between threads
        clients = getattr(self._local, "clients", None)
        if clients is None:
            clients = self._local.clients = {}
        if i not in clients:
            s = self.servers[i]
            clients[i] = Client(s["host"], port=s["port"], retries=0, **self._client_args)
        return clients[i]

    def _order(self):
        now = time.monotonic()
        with self._lock:
            idx = sorted(range(len(self.servers)), key=lambda i: (self.servers[i]["down_until"] > now,
                                                                  self.servers[i]["outstanding"], i))
        return idx

    def _call(self, fn):
        last = None
        rid = int.from_bytes(os.urandom(8), "little")  # every server tried sees the same request_id
        for i in self._order():
            s = self.servers[i]
            with self._lock:
                s["outstanding"] += 1
            try:
                c = self._client(i)
                c.next_request_id = rid
                out = fn(c)
                with self._lock:
                    s["answered"] += 1
                return out
            except (TimeoutError, OSError) as e:
                last = e
            except BatchwireError as e:
                if e.status_name != "UNAVAILABLE":
                    raise  # the request's own fault: another server would say the same
                last = e
            finally:
                with self._lock:
                    s["outstanding"] -= 1
            with self._lock:
                s["failed"] += 1
                s["down_until"] = time.monotonic() + self.holdoff
        raise last if last is not None else TimeoutError("no server answered")

    def check(self):
        """PINGs every server now; one that does not answer, or says DRAINING, is set aside.
        \\return [(host, healthy)]."""
        out = []
        for i, s in enumerate(self.servers):
            try:
                c = self._client(i)
                c.ping()
                healthy = not c.draining
            except (TimeoutError, OSError, BatchwireError):
                healthy = False
            with self._lock:
                s["down_until"] = 0.0 if healthy else time.monotonic() + self.holdoff
            out.append(("%s:%d" % (s["host"], s["port"]), healthy))
        return out

    def infer(self, model, inputs, deadline_us=0, priority=0):
        return self._call(lambda c: c.infer(model, inputs, deadline_us, priority))

    def model_info(self, model):
        return self._call(lambda c: c.model_info(model))

    def ping(self, payload=b""):
        return self._call(lambda c: c.ping(payload))
