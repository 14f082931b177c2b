"""A real three-node Kvasir cluster on free loopback ports, for client tests.

Each node is a `kvasir server` process started with the same
`--initial-cluster` list in Redis's `id=ip:port@cport` form (client port and
cluster bus port), so every node knows every client address from the start.
`wait_ok()` waits until every node answers CLUSTER INFO with
`cluster_state:ok`, the readiness a Redis Cluster client expects.
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time


def kvasir_bin():
    path = os.environ.get("KVASIR_BIN")
    if not path:
        target = os.environ.get(
            "CARGO_TARGET_DIR",
            os.path.join(os.path.dirname(__file__), "..", "..", "target"),
        )
        path = os.path.join(target, "debug", "kvasir")
    if not os.path.exists(path):
        raise RuntimeError(f"kvasir binary not found at {path}: build it with `cargo build -p kvasir`")
    return path


def free_ports(n):
    """n distinct free loopback ports (all held open while picking)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def encode_command(*args):
    """One command as a RESP array of bulk strings."""
    payload = f"*{len(args)}\r\n".encode()
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        payload += f"${len(b)}\r\n".encode() + b + b"\r\n"
    return payload


class RespError(Exception):
    """An error reply (`-...`), with the exact text after the dash."""


class RespConn:
    """A persistent raw RESP connection with a small RESP2/RESP3 reader, for
    checks where the exact reply matters (error text, MOVED targets) or where
    a client library would hide it. Error replies are returned as RespError
    instances, not raised."""

    def __init__(self, port, host="127.0.0.1", timeout=5.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, *args):
        self.sock.sendall(encode_command(*args))

    def call(self, *args):
        self.send(*args)
        return self.read()

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed by the server")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed by the server")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        """The next reply: bytes, int, None, list, dict, RespError; a RESP3
        push (`>`) is returned as a list like a RESP2 array."""
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest
        if kind == b"-":
            return RespError(rest.decode(errors="replace"))
        if kind in (b":", b"("):
            return int(rest)
        if kind == b",":
            return float(rest)
        if kind == b"#":
            return rest == b"t"
        if kind == b"_":
            return None
        if kind in (b"$", b"=", b"!"):
            n = int(rest)
            if n < 0:
                return None
            data = self._exact(n)
            if kind == b"!":
                return RespError(data.decode(errors="replace"))
            return data
        if kind in (b"*", b">", b"~"):
            n = int(rest)
            if n < 0:
                return None
            return [self.read() for _ in range(n)]
        if kind in (b"%", b"|"):
            n = int(rest)
            out = {}
            for _ in range(n):
                k = self.read()
                out[k if not isinstance(k, list) else tuple(k)] = self.read()
            if kind == b"|":  # attributes precede the real reply
                return self.read()
            return out
        raise ValueError(f"unexpected RESP line {line!r}")


def raw_command(port, *args, timeout=2.0):
    """One RESP command over a fresh socket; returns the raw reply bytes."""
    payload = f"*{len(args)}\r\n".encode()
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        payload += f"${len(b)}\r\n".encode() + b + b"\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(payload)
        data = b""
        deadline = time.time() + timeout
        while time.time() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            if data.endswith(b"\r\n") and (data[:1] != b"$" or data.count(b"\r\n") >= 2):
                break
        return data


class Cluster:
    NODES = 3

    def __init__(self, extra_args=()):
        self.dir = tempfile.mkdtemp(prefix="kvasir-pycluster-")
        ports = free_ports(2 * self.NODES)
        self.ports = ports[: self.NODES]
        self.bus_ports = ports[self.NODES:]
        self.initial = ",".join(
            f"{i + 1}=127.0.0.1:{self.ports[i]}@{self.bus_ports[i]}" for i in range(self.NODES)
        )
        self.extra_args = list(extra_args)
        # KVASIR_TEST_THREADS=N: every node runs with --threads N (shard
        # and I/O threads), as in the Rust harness, unless the test chose.
        threads = os.environ.get("KVASIR_TEST_THREADS")
        if threads and "--threads" not in self.extra_args:
            self.extra_args += ["--threads", threads]
        self.procs = [None] * self.NODES
        self.logs = [None] * self.NODES

    def start_node(self, i):
        data = os.path.join(self.dir, f"node{i + 1}")
        os.makedirs(data, exist_ok=True)
        log = open(os.path.join(self.dir, f"node{i + 1}.log"), "ab")
        self.logs[i] = log
        self.procs[i] = subprocess.Popen(
            [
                kvasir_bin(), "server",
                "--node-id", str(i + 1),
                "--port", str(self.ports[i]),
                "--bind", "127.0.0.1",
                "--dir", data,
                "--initial-cluster", self.initial,
                *self.extra_args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def start(self):
        for i in range(self.NODES):
            self.start_node(i)
        return self

    def state_ok(self, i):
        try:
            return b"cluster_state:ok" in raw_command(self.ports[i], "CLUSTER", "INFO")
        except OSError:
            return False

    def wait_ok(self, timeout=30, nodes=None):
        nodes = range(self.NODES) if nodes is None else nodes
        deadline = time.time() + timeout
        while time.time() < deadline:
            if all(self.state_ok(i) for i in nodes):
                return
            time.sleep(0.05)
        raise RuntimeError(f"cluster not ready after {timeout}s; logs in {self.dir}")

    def kill(self, i):
        """kill -9 node i (0-based)."""
        p = self.procs[i]
        if p and p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=10)
        self.procs[i] = None

    def stop(self):
        for i in range(self.NODES):
            self.kill(i)
            if self.logs[i]:
                self.logs[i].close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def node_index(self, port):
        """0-based index of the node whose client port is `port`."""
        return self.ports.index(int(port))

    def slot_masters(self, i, timeout=2.0):
        """Node i's view of slot ownership from CLUSTER SLOTS, as a sorted
        list of (first slot, last slot, master client port)."""
        with RespConn(self.ports[i], timeout=timeout) as c:
            reply = c.call("CLUSTER", "SLOTS")
        if isinstance(reply, RespError):
            raise RuntimeError(f"CLUSTER SLOTS on node {i + 1}: {reply}")
        return sorted((int(r[0]), int(r[1]), int(r[2][1])) for r in reply)

    def wait_stable(self, timeout=20, quiet=1.0, nodes=None):
        """Waits until every given node reports the same slot -> master map
        from CLUSTER SLOTS, covering all 16384 slots, unchanged for `quiet`
        seconds (leaders may still move right after `cluster_state:ok`).
        Returns the map; raises RuntimeError after `timeout` seconds."""
        nodes = range(self.NODES) if nodes is None else list(nodes)
        deadline = time.time() + timeout
        last, since, seen = None, None, None
        while time.time() < deadline:
            try:
                views = [self.slot_masters(i) for i in nodes]
            except (OSError, RuntimeError, ValueError) as e:
                seen, last = repr(e), None
                time.sleep(0.05)
                continue
            seen = views
            covered = sum(b - a + 1 for a, b, _ in views[0])
            if all(v == views[0] for v in views) and covered == 16384:
                if views[0] != last:
                    last, since = views[0], time.time()
                elif time.time() - since >= quiet:
                    return last
            else:
                last = None
            time.sleep(0.05)
        raise RuntimeError(
            f"slot map not stable/agreed after {timeout}s (last views: {seen}); logs in {self.dir}"
        )

    def leader_ports(self):
        """Client ports of the nodes that master slots, per CLUSTER NODES."""
        out = set()
        reply = raw_command(self.ports[0], "CLUSTER", "NODES").decode(errors="replace")
        for line in reply.splitlines():
            parts = line.split()
            if len(parts) >= 9 and "master" in parts[2]:
                out.add(int(parts[1].split("@")[0].rsplit(":", 1)[1]))
        return out
