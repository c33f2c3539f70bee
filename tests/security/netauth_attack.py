#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Net admission probed by a stranger (issue 11, docs/security.md
"Net admission").

  netauth_attack.py run [options]     the whole scenario: the legitimate
                                      RC pair (netauth_peer), the attacks,
                                      the pair's second round, the counters
  netauth_attack.py attack [options]  the attacks only, from this process
                                      (run calls it inside the attacker's
                                      network namespace when there is one)

The attacker is a plain Python socket: it knows the victim's QPN, R_Key,
buffer address and the PSN its QP expects (the victim prints them: the
worst case), and the slot of the victim's legitimate peer.  It tries:

  raw_write        an RDMA WRITE frame on a new connection, no handshake
  claim_peer       a HELLO claiming the peer's slot, then WRITE and READ
                   frames at once
  claim_peer_wait  a HELLO claiming the peer's slot, a PROOF with a
                   guessed nonce, then a WRITE
  own_slot         a complete handshake as itself (its own slot, answered
                   from its own UDP port), then WRITE, READ, a READ from
                   the duplicate window, WRITEs at later PSNs (NAK
                   probing), a wrong R_Key, UC and SEND frames, a WRITE
                   whose middle packets come in a run frame
  bad_run          run frames (net/net.h) no softhca sends: no packets,
                   too many, payloads empty, unaligned or too long
  unused_addr      connecting to the victim's slot port on an address the
                   victim does not use
  rc_datagram      an RC WRITE in a UDP datagram to the victim's slot
  secret_*         (--secret-mode) HELLO without the secret's flag; a
                   complete handshake with a wrong MAC

Expected: no byte of an IB packet comes back (no NAK, no READ response,
no ACK), handshake frames only where the handshake itself runs; the
connections that break the protocol are closed.  run then checks that
the pair still passes traffic, the victim's buffer holds only what its
peer wrote, its QP is RTS with no async event, and `softhca stat` counts
the attempts (net_admission_drops, net_handshake_refused).
"""
import argparse
import os
import random
import re
import select
import socket
import struct
import subprocess
import sys
import time

CTL = 0x80000000
VERSION = 3             # net/handshake.h SHCA_HS_VERSION
HELLO, PROOF, WELCOME = 1, 2, 3
NONCE = 16
MAC = 32
SLOTS = 1024

OP_RC_SEND_ONLY = 0x04
OP_RC_WRITE_FIRST = 0x06
OP_RC_WRITE_MIDDLE = 0x07
OP_RC_WRITE_LAST = 0x08
OP_RC_WRITE_ONLY = 0x0a
OP_RC_READ_REQUEST = 0x0c
OP_UC_WRITE_ONLY = 0x2a

results = []


def ok(name, cond, why=""):
    results.append((name, bool(cond), why))
    print(("PASS " if cond else "FAIL ") + name + ("" if cond else ": " + why),
          flush=True)


# ---------------------------------------------------------------- frames
def bth(op, qpn, psn, ackreq=False):
    return (bytes([op, 0]) + struct.pack(">H", 0xffff) + bytes([0]) +
            qpn.to_bytes(3, "big") + bytes([0x80 if ackreq else 0]) +
            (psn & 0xffffff).to_bytes(3, "big"))


def reth(va, rkey, length):
    return struct.pack(">QII", va, rkey, length)


def frame(pkt):
    return struct.pack(">I", len(pkt)) + pkt


def write_pkt(a, psn, rkey=None, op=OP_RC_WRITE_ONLY, data=b"EVIL-WRITE-BYTES"):
    return bth(op, a.qpn, psn, True) + reth(a.addr, a.rkey if rkey is None
                                            else rkey, len(data)) + data


def read_pkt(a, psn):
    return bth(OP_RC_READ_REQUEST, a.qpn, psn, True) + reth(a.addr, a.rkey, 64)


def send_pkt(a, psn):
    return bth(OP_RC_SEND_ONLY, a.qpn, psn, True) + b"EVIL-SEND-BYTES!"


RUN = 0x40000000         # net/net.h SHCA_NET_RUN: n packets in one frame


def run_frame(n, plen, first_bth, body=None):
    """A run frame (net/net.h): n packets of plen bytes of payload."""
    return (struct.pack(">II", RUN | n, plen) + first_bth +
            (b"R" * (n * plen) if body is None else body))


def ctl(t, body):
    return struct.pack(">I", CTL | t << 16 | len(body)) + body


def hello(port, secret=False):
    return ctl(HELLO, bytes([VERSION, 1 if secret else 0]) +
               struct.pack(">H", port)
               + os.urandom(NONCE))


# ---------------------------------------------------------------- sockets
def family(ip):
    return socket.AF_INET6 if ":" in ip else socket.AF_INET


def connect(ip, port, src=None):
    s = socket.socket(family(ip), socket.SOCK_STREAM)
    s.settimeout(5)
    if src:
        s.bind((src, 0))
    s.connect((ip, port))
    return s


def collect(s, seconds):
    """Everything the victim sends within seconds: (bytes, closed)."""
    got = b""
    end = time.monotonic() + seconds
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return got, False
        r, _, _ = select.select([s], [], [], left)
        if not r:
            continue
        try:
            b = s.recv(65536)
        except (ConnectionResetError, OSError):
            return got, True
        if not b:
            return got, True
        got += b


def free_slot_udp(src, base, avoid):
    """A UDP socket on a free port of the slot range at address src."""
    for p in random.sample(range(base, base + SLOTS), SLOTS):
        if p in avoid:
            continue
        u = socket.socket(family(src), socket.SOCK_DGRAM)
        try:
            u.bind((src, p))
            return u, p
        except OSError:
            u.close()
    raise RuntimeError("no free port in the slot range")


def handshake_own(a, secret_flag=False, mac=bytes(MAC)):
    """A complete handshake as ourselves: (socket, reply bytes after
    PROOF, closed?), or raises."""
    s = connect(a.target, a.port, a.source)
    src = s.getsockname()[0]
    u, port = free_slot_udp(src, a.base, {a.port, a.legit_port})
    s.sendall(hello(port, secret_flag))
    u.settimeout(5)
    d, frm = u.recvfrom(256)
    ok("own_slot: a CHALLENGE came to our slot port",
       len(d) == 26 and d[:4] == b"SHCH", "datagram %r" % d[:8])
    ok("own_slot: the CHALLENGE speaks our version (else every attack "
       "below fails at the HELLO)", d[4] == VERSION, "version %d" % d[4])
    acc, srcport = struct.unpack(">HH", d[6:10])
    ok("own_slot: the CHALLENGE names our connection",
       acc == a.port and srcport == s.getsockname()[1],
       "acc %d src %d" % (acc, srcport))
    s.sendall(ctl(PROOF, d[10:26] + mac))
    got, closed = collect(s, 1.5)
    u.close()
    return s, got, closed


# ---------------------------------------------------------------- attacks
def attack(a):
    e = a.epsn
    ib_frames = [write_pkt(a, e), read_pkt(a, e),
                 read_pkt(a, e - 1),                 # duplicate window
                 read_pkt(a, e - 5)]
    ib_frames += [write_pkt(a, e + k) for k in range(1, 9)]   # PSN probing
    ib_frames += [write_pkt(a, e, rkey=a.rkey ^ 0x100),       # wrong R_Key
                  write_pkt(a, e, op=OP_UC_WRITE_ONLY),
                  send_pkt(a, e)]
    stream = b"".join(frame(p) for p in ib_frames)

    # no handshake at all
    s = connect(a.target, a.port, a.source)
    s.sendall(stream)
    got, closed = collect(s, 2)
    ok("raw_write: nothing comes back", got == b"", "%d bytes" % len(got))
    ok("raw_write: the connection is closed", closed)
    s.close()

    # the legitimate peer's slot claimed, frames at once
    s = connect(a.target, a.port, a.source)
    s.sendall(hello(a.legit_port, a.secret_mode) + stream)
    got, closed = collect(s, 2)
    ok("claim_peer: nothing comes back", got == b"", "%d bytes" % len(got))
    ok("claim_peer: the connection is closed", closed)
    s.close()

    # the peer's slot claimed, a guessed PROOF, then a WRITE
    s = connect(a.target, a.port, a.source)
    s.sendall(hello(a.legit_port, a.secret_mode))
    time.sleep(0.3)
    s.sendall(ctl(PROOF, bytes(NONCE) + bytes(MAC)) + frame(ib_frames[0]))
    got, closed = collect(s, 2)
    ok("claim_peer_wait: nothing comes back", got == b"",
       "%d bytes" % len(got))
    ok("claim_peer_wait: the connection is closed", closed)
    s.close()

    if not a.secret_mode:
        # a stranger proven as itself: admitted to nothing
        s, got, closed = handshake_own(a)
        ok("own_slot: WELCOME (36 bytes) and nothing else",
           len(got) == 36 and struct.unpack(">I", got[:4])[0] ==
           CTL | WELCOME << 16 | 32 and not closed,
           "%d bytes, closed %s" % (len(got), closed))
        # ... and a WRITE whose middle packets come as a run frame
        first = (bth(OP_RC_WRITE_FIRST, a.qpn, e) +
                 reth(a.addr, a.rkey, 6 * 256) + b"F" * 256)
        last = bth(OP_RC_WRITE_LAST, a.qpn, e + 5, True) + b"L" * 256
        s.sendall(stream + frame(first) +
                  run_frame(4, 256, bth(OP_RC_WRITE_MIDDLE, a.qpn, e + 1)) +
                  frame(last))
        got, closed = collect(s, 2)
        ok("own_slot: no NAK, no READ response, no ACK", got == b"",
           "%d bytes: %r" % (len(got), got[:32]))
        ok("own_slot: the connection stays (nothing broke the protocol)",
           not closed)
        s.close()
        # run frames no softhca sends break the stream: closed at once
        mid = bth(OP_RC_WRITE_MIDDLE, a.qpn, e + 1)
        for what, n, plen in (("no packets", 0, 256),
                              ("more than 64 packets", 65, 256),
                              ("an empty payload", 4, 0),
                              ("a payload of 6 bytes", 4, 6),
                              ("a payload over 4096", 2, 8192)):
            s, got, closed = handshake_own(a)
            s.sendall(run_frame(n, plen, mid))
            got, closed = collect(s, 1)
            ok("bad_run (%s): nothing comes back, closed" % what,
               got == b"" and closed,
               "%d bytes, closed %s" % (len(got), closed))
            s.close()
    else:
        # without the secret's flag
        s = connect(a.target, a.port, a.source)
        s.sendall(hello(a.legit_port, False))
        got, closed = collect(s, 2)
        ok("secret_noflag: refused, nothing comes back",
           got == b"" and closed, "%d bytes, closed %s" % (len(got), closed))
        s.close()
        # a handshake as ourselves with a MAC that is not the secret's
        s, got, closed = handshake_own(a, True, os.urandom(MAC))
        ok("secret_wrong_mac: no WELCOME, the connection is closed",
           got == b"" and closed, "%d bytes, closed %s" % (len(got), closed))
        s.close()

    for ip in a.unused:
        try:
            s = connect(ip, a.port)
            got, closed = collect(s, 1)
            s.close()
            ok("unused_addr %s: refused" % ip, False,
               "connected (%d bytes)" % len(got))
        except ConnectionRefusedError:
            ok("unused_addr %s: refused" % ip, True)
        except OSError as ex:
            ok("unused_addr %s: refused" % ip, False, str(ex))
        # a datagram there is dropped (counted)
        u = socket.socket(family(ip), socket.SOCK_DGRAM)
        u.sendto(ib_frames[0], (ip, a.port))
        u.close()

    # RC in a datagram (and a way to provoke an answer by UDP)
    u = socket.socket(family(a.target), socket.SOCK_DGRAM)
    if a.source:
        u.bind((a.source, 0))
    u.settimeout(1)
    for p in ib_frames:
        u.sendto(p, (a.target, a.port))
    try:
        d = u.recv(65536)
        ok("rc_datagram: nothing comes back", False, "%d bytes" % len(d))
    except socket.timeout:
        ok("rc_datagram: nothing comes back", True)
    u.close()
    return all(r[1] for r in results)


# ---------------------------------------------------------------- scenario
def ns_cmd(ns, cmd):
    return (["ip", "netns", "exec", ns] if ns else []) + cmd


def read_until(p, pat, seconds, what):
    end = time.monotonic() + seconds
    lines = []
    while time.monotonic() < end:
        r, _, _ = select.select([p.stdout], [], [], end - time.monotonic())
        if not r:
            break
        line = p.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip())
        m = re.search(pat, line)
        if m:
            return m
    raise RuntimeError("%s: no %r in %r" % (what, pat, lines))


def counters(a, pid):
    out = subprocess.run(ns_cmd(a.server_ns, [a.tool, "stat", "--pid",
                                              str(pid), "--all"]),
                         capture_output=True, text=True, timeout=30).stdout
    first = out.splitlines()[0] if out else ""
    c = dict(re.findall(r" ([a-z_]+) (\d+)", first))
    return {k: int(v) for k, v in c.items()}, out


def run(a):
    peer = os.path.join(a.build, "tests", "netauth_peer")
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(a.build, "lib"),
               SOFTHCA_NET="1")
    env.pop("SOFTHCA_NET_SECRET", None)
    senv, cenv = dict(env), dict(env)
    if a.secret:
        senv["SOFTHCA_NET_SECRET"] = a.secret
        cenv["SOFTHCA_NET_SECRET"] = a.client_secret or a.secret
    srv = subprocess.Popen(ns_cmd(a.server_ns, [peer, "server", a.server_dev,
                                                str(a.ctl_port)]),
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           text=True, env=senv)
    cli = None
    try:
        read_until(srv, r"LISTENING", 20, "server")
        cli = subprocess.Popen(ns_cmd(a.client_ns, [peer, "client",
                                                    a.client_dev, a.target,
                                                    str(a.ctl_port)]),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True, env=cenv)
        if a.client_secret:
            # the wrong secret: the client never gets through
            try:
                read_until(cli, r"ROUND1_OK", 30, "client")
                ok("wrong_secret: the client is refused", False,
                   "its WRITE and READ went through")
            except RuntimeError:
                ok("wrong_secret: the client is refused", True)
            read_until(srv, r"NO_ROUND1", 120, "server")
            c, out = counters(a, srv.pid)
            srv.stdin.write("bye\n")
            srv.stdin.flush()
            print("# victim counters: net_handshake_refused %d"
                  % c.get("net_handshake_refused", 0))
            ok("wrong_secret: the victim counts refused handshakes",
               c.get("net_handshake_refused", 0) >= 1, out)
            return all(r[1] for r in results)
        read_until(cli, r"ROUND1_OK", 60, "client")
        m = read_until(srv, r"INFO qpn=0x(\w+) rkey=0x(\w+) addr=0x(\w+) "
                       r"epsn=0x(\w+) peer_qpn=0x(\w+) pid=(\d+)", 20,
                       "server")
        qpn, rkey, addr, epsn, pqpn, pid = [int(x, 16) for x in m.groups()[:5]] \
            + [int(m.group(6))]
        base = a.base
        args = ["attack", "--target", a.target, "--base", str(base),
                "--qpn", str(qpn), "--rkey", str(rkey), "--addr", str(addr),
                "--epsn", str(epsn),
                "--legit-port", str(base + (pqpn >> 14 & (SLOTS - 1)))]
        if a.secret:
            args += ["--secret-mode"]
        before, _ = counters(a, pid)
        # each attacker position: NS=UNUSED,... (no NS: this one)
        for spec in a.attacker or ["=" + ",".join(a.unused)]:
            ns, _, unused = spec.partition("=")
            more = []
            for u in filter(None, unused.split(",")):
                more += ["--unused", u]
            if a.source and not ns:
                more += ["--source", a.source]
            print("# attacker in %s" % (ns or "this namespace"), flush=True)
            att = subprocess.run(ns_cmd(ns, [sys.executable,
                                             os.path.abspath(__file__)]
                                        + args + more),
                                 capture_output=True, text=True, timeout=120)
            sys.stdout.write(att.stdout)
            sys.stderr.write(att.stderr)
            ok("the attacks from %s got nothing" % (ns or "here"),
               att.returncode == 0, "exit %d" % att.returncode)
            a.nattackers = getattr(a, "nattackers", 0) + 1
        cli.stdin.write("go\n")
        cli.stdin.flush()
        read_until(cli, r"ROUND2_OK", 60, "client")
        ok("the pair still passes traffic, the buffer holds its bytes only",
           True)
        read_until(srv, r"SERVER_OK", 30, "server")
        ok("the victim's buffer is untouched, its QP RTS, no async event",
           True)
        after, out = counters(a, pid)
        drops = after.get("net_admission_drops", 0) - \
            before.get("net_admission_drops", 0)
        refused = after.get("net_handshake_refused", 0) - \
            before.get("net_handshake_refused", 0)
        print("# victim counters: net_admission_drops +%d "
              "net_handshake_refused +%d" % (drops, refused))
        # own_slot: 15 IB frames dropped (without a secret); the
        # unused-address datagrams; the protocol breakers refused
        ok("net_admission_drops counts the attempts",
           drops >= a.nattackers * (15 if not a.secret else 0),
           "+%d\n%s" % (drops, out))
        ok("net_handshake_refused counts the refused connections",
           refused >= a.nattackers * (3 if not a.secret else 5),
           "+%d\n%s" % (refused, out))
        srv.stdin.write("bye\n")
        srv.stdin.flush()
        cli.wait(timeout=30)
        srv.wait(timeout=30)
        ok("the pair exits cleanly", cli.returncode == 0 and
           srv.returncode == 0, "client %s server %s" % (cli.returncode,
                                                         srv.returncode))
    except (RuntimeError, subprocess.TimeoutExpired, OSError) as ex:
        ok("scenario", False, str(ex))
    finally:
        for p in (cli, srv):
            if p and p.poll() is None:
                p.kill()
                p.wait()
    return all(r[1] for r in results)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["run", "attack"])
    ap.add_argument("--target", required=True, help="the victim's address")
    ap.add_argument("--source", default=None,
                    help="the attacker's own address (bind)")
    ap.add_argument("--base", type=int, default=24000)
    ap.add_argument("--unused", action="append", default=[],
                    help="an address of the victim's host it does not use")
    ap.add_argument("--secret-mode", action="store_true")
    # attack
    ap.add_argument("--qpn", type=int)
    ap.add_argument("--rkey", type=int)
    ap.add_argument("--addr", type=int)
    ap.add_argument("--epsn", type=int)
    ap.add_argument("--legit-port", type=int)
    # run
    ap.add_argument("--build")
    ap.add_argument("--tool")
    ap.add_argument("--server-ns", default="")
    ap.add_argument("--client-ns", default="")
    ap.add_argument("--attacker", action="append", default=[],
                    help="NS=UNUSED,...: attack from network namespace NS "
                    "(empty: this one), trying the unused addresses there")
    ap.add_argument("--server-dev", default="softhca_lo")
    ap.add_argument("--client-dev", default="softhca_lo")
    ap.add_argument("--ctl-port", type=int, default=31001)
    ap.add_argument("--secret", default=None)
    ap.add_argument("--client-secret", default=None)
    a = ap.parse_args()
    if a.mode == "attack":
        a.port = a.base + (a.qpn >> 14 & (SLOTS - 1))
        good = attack(a)
    else:
        good = run(a)
    bad = [r for r in results if not r[1]]
    print("# %d checks, %d failed" % (len(results), len(bad)))
    return 0 if good and not bad else 1


if __name__ == "__main__":
    sys.exit(main())
