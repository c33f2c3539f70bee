# SPDX-License-Identifier: MIT
"""
Per-test evidence that a gated pyverbs test took the net path
(scripts/pyverbs.sh --net, SOFTHCA_NET=1).  Used by pyverbs_suite.py.

Two sources, read around each test:

  counters  softhca's per-QP counters (`softhca stat --pid P`), which count
            what each QP sent and received on either path (the same-host
            path counts each message as the packets it would be).  A QP
            whose counts moved during the test took part in traffic,
            whichever path carried it.  That is what makes a test a traffic
            test: no list to keep, the test's own QPs say so.
  traces    the SOFTHCA_PCAP files (one per process) that the net path
            writes, one record per IB packet sent and per IB packet
            received, before the packet is counted.  The same-host path
            writes none.

A traffic test is proved to have used the net path when every QP that
received packets during it is the destination QP (BTH) of at least as many
frames of the traces written during it as it counted (each packet on the
net path is traced when sent, and again when received unless placed
straight into memory), and every UD QP that sent is the source QP (DETH)
of at least as many frames as it sent: a QP that took the same-host path
for its traffic has too few (none).  The counters are read while the QPs
are alive (see NetWatch), also in the processes the test forks
(test_rdmacm's two sides).  What the check cannot see: a QP that took the
same-host path for at most half of the packets it received (the two traced
copies of each of the rest make up the count), and the sender of a
connected QP whose peer was never read (a peer in a process the test did
not fork, or one the test killed).
"""
import functools
import glob
import json
import os
import struct
import subprocess
import sys

PCAP_FILE_HDR = 24
PCAP_REC_HDR = 16


# ---------------------------------------------------------------------------
# Counters

def qp_counters(softhca, pid):
    """{qpn: {'type': T, 'sent_pkts': n, 'rcvd_pkts': n}} of pid's live QPs,
    from `softhca stat --pid pid`; {} when pid has no softhca arena yet."""
    r = subprocess.run([softhca, 'stat', '--pid', str(pid)],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        if 'no softhca process' in r.stderr:
            return {}
        raise RuntimeError(f'softhca stat --pid {pid}: status '
                           f'{r.returncode}: {r.stderr.strip()}')
    qps = {}
    for line in r.stdout.splitlines():
        w = line.split()
        # pid P device softhca_D qp 0xQPN type T state S key value ...
        if len(w) < 10 or w[4] != 'qp':
            continue
        kv = dict(zip(w[10::2], w[11::2]))
        qps[int(w[5], 16)] = {
            'type': w[7],
            'sent_pkts': int(kv.get('sent_pkts', 0)),
            'rcvd_pkts': int(kv.get('rcvd_pkts', 0)),
        }
    return qps


def qp_delta(before, after):
    """What each QP of after counted since before (a QPN new or reused
    since counts from 0)."""
    out = {}
    for qpn, a in after.items():
        b = before.get(qpn)
        if b is None or b['type'] != a['type'] or \
                a['rcvd_pkts'] < b['rcvd_pkts'] or \
                a['sent_pkts'] < b['sent_pkts']:
            b = {'sent_pkts': 0, 'rcvd_pkts': 0}
        out[qpn] = dict(a, sent_pkts=a['sent_pkts'] - b['sent_pkts'],
                        rcvd_pkts=a['rcvd_pkts'] - b['rcvd_pkts'])
    return out


def take_process_records(out_dir):
    """The records the test's processes left (and remove them)."""
    recs = []
    paths = glob.glob(os.path.join(out_dir, 'qps.*.json'))
    # in the order written: a process's later reading replaces its earlier
    paths.sort(key=lambda p: [int(x) for x in p.split('.')[-3:-1]])
    for path in paths:
        try:
            with open(path) as f:
                recs.append(json.load(f))
        except (OSError, ValueError) as ex:
            recs.append({'pid': 0, 'error': f'{path}: {ex}'})
        os.unlink(path)
    return recs


# ---------------------------------------------------------------------------
# Traces

class Traces:
    """The pcap files of a directory, read as they grow: frames() gives the
    frames written since its last call."""

    def __init__(self, directory):
        self.dir = directory
        self.off = {}

    def _files(self):
        return sorted(glob.glob(os.path.join(self.dir, '*.pcap')))

    def _read(self, path, start):
        with open(path, 'rb') as f:
            data = f.read()
        if len(data) < PCAP_FILE_HDR:
            return start, []
        e = '<' if data[:4] in (b'\xd4\xc3\xb2\xa1', b'\x4d\x3c\xb2\xa1') \
            else '>'
        off = max(start, PCAP_FILE_HDR)
        frames = []
        while off + PCAP_REC_HDR <= len(data):
            incl = struct.unpack_from(e + 'I', data, off + 8)[0]
            if off + PCAP_REC_HDR + incl > len(data):
                break                    # a record being written
            frames.append(data[off + PCAP_REC_HDR:off + PCAP_REC_HDR + incl])
            off += PCAP_REC_HDR + incl
        return off, frames

    def frames(self):
        out = []
        for path in self._files():
            off, frames = self._read(path, self.off.get(path, 0))
            self.off[path] = off
            out += frames
        return out


def frame_qpns(frame):
    """(destination QP, source QP or None) of a RoCE v2 frame: Ethernet,
    IPv4 (IHL) or IPv6, UDP, then the BTH (destination QP in its bytes
    5..7) and, for UD opcodes (0x60..0x7f), the DETH (source QP in its
    bytes 5..7).  None for a frame too short to hold a BTH."""
    if frame[12:14] == b'\x08\x00':
        bth = 14 + (frame[14] & 15) * 4 + 8
    else:
        bth = 14 + 40 + 8
    if len(frame) < bth + 12:
        return None
    dqpn = int.from_bytes(frame[bth + 5:bth + 8], 'big')
    sqpn = None
    if frame[bth] >> 5 == 3 and len(frame) >= bth + 20:
        sqpn = int.from_bytes(frame[bth + 17:bth + 20], 'big')
    return dqpn, sqpn


def frames_by_qpn(frames):
    """({destination QPN: frames}, {UD source QPN: frames})"""
    to, frm = {}, {}
    for fr in frames:
        q = frame_qpns(fr)
        if q is None:
            continue
        to[q[0]] = to.get(q[0], 0) + 1
        if q[1] is not None:
            frm[q[1]] = frm.get(q[1], 0) + 1
    return to, frm


# ---------------------------------------------------------------------------
# The runner's child: the evidence of each test, collected around it

class NetWatch:
    """One test at a time: before(suite) just before it runs, after() just
    after; after() returns the evidence for judge().

    The QPs of a test die with the objects that hold them, often a local of
    the test method or of a helper (`client, server = ...`), freed when its
    frame returns, before anything after the test could look.  So while a
    test runs, a trace function (sys.settrace: call and return events of
    the suite's own frames only) reads the counters of the process's QPs
    whenever a frame of the suite returns whose local is the last reference
    to an object with QPs: at that moment they are still alive; and at the
    end of the test method, before tearDown frees what the test case holds.
    Processes the test forks (multiprocessing: test_rdmacm's two sides)
    inherit the trace function and leave their readings in
    DIR/qps.<pid>.<n>.json.  Each QP's last reading counts.
    """

    def __init__(self, args):
        self.softhca = args.softhca
        self.dir = args.net_evidence
        self.traces = Traces(self.dir)
        self.suite_dir = os.path.dirname(args.tests_dir) + os.sep
        self.pid = os.getpid()
        self.nrec = 0
        from pyverbs.qp import QP
        from pyverbs.cmid import CMID
        self.qp_types = (QP, CMID)
        self.alone = self._calibrate()

    def _counters(self):
        try:
            return qp_counters(self.softhca, os.getpid())
        except Exception as ex:
            self._error(f'counters: {ex}')
            return {}

    def _leave(self, rec):
        """In a forked process: leave rec for the runner."""
        self.nrec += 1
        path = os.path.join(self.dir, f'qps.{rec["pid"]}.{self.nrec}.json')
        with open(path + '.tmp', 'w') as f:
            json.dump(rec, f)
        os.rename(path + '.tmp', path)

    def _error(self, text):
        if os.getpid() == self.pid:
            self.errors.append(text)
        else:
            self._leave({'pid': os.getpid(), 'error': text})

    def _holds(self, v, depth=2):
        """Whether v is, or holds (in its attributes, lists, dicts), QPs."""
        if isinstance(v, self.qp_types):
            return True
        if depth == 0:
            return False
        if isinstance(v, (list, tuple)):
            vals = v[:16]
        elif isinstance(v, dict):
            vals = list(v.values())[:16]
        else:
            d = getattr(v, '__dict__', None)
            if not isinstance(d, dict):
                return False
            if 'qps' in d or 'qp' in d:
                return True
            vals = list(d.values())[:32]
        return any(self._holds(x, depth - 1) for x in vals)

    def _read(self):
        """Read the counters now (in a forked process: leave them in a
        file for the runner)."""
        if os.getpid() == self.pid:
            for qpn, q in self._counters().items():
                self.seen[qpn] = q
            return
        pid = os.getpid()
        try:
            rec = {'pid': pid, 'qps': qp_counters(self.softhca, pid)}
        except Exception as ex:                     # reported, not hidden
            rec = {'pid': pid, 'error': str(ex)}
        self._leave(rec)

    @staticmethod
    def _refcounts(frame):
        """{local name: its reference count, as seen from here}"""
        return {k: sys.getrefcount(v) for k, v in frame.f_locals.items()}

    def _calibrate(self):
        """The count _refcounts() gives for a local that only its frame
        holds (the frame's slot, f_locals, the iteration, the call)."""
        seen = []

        def probe():
            mine = object()      # noqa: F841 (held by this frame only)

        def local(frame, event, arg):
            if event == 'return':
                seen.append(self._refcounts(frame)['mine'])
            return local

        sys.settrace(lambda f, e, a: local if f.f_code is probe.__code__
                     else None)
        try:
            probe()
        finally:
            sys.settrace(None)
        return seen[0]

    def _on_return(self, frame):
        """A frame of the suite returns: if a local that holds QPs dies
        with it (this frame is its only holder), read the counters now."""
        counts = self._refcounts(frame)
        for k, v in list(frame.f_locals.items()):
            if counts[k] == self.alone and self._holds(v):
                self._read()
                return

    def _trace(self, frame, event, arg):
        if not frame.f_code.co_filename.startswith(self.suite_dir):
            return None
        frame.f_trace_lines = False

        def local(frame, event, arg):
            if event == 'return':
                try:
                    self._on_return(frame)
                except Exception as ex:
                    self._error(f'reading the counters: {ex!r}')
            return local
        return local

    def before(self, suite):
        self.errors, self.seen = [], {}
        self.traces.frames()                # what earlier tests left
        take_process_records(self.dir)
        self.pre = self._counters()
        for t in flatten(suite):
            name = getattr(t, '_testMethodName', None)
            method = getattr(t, name, None) if name else None
            if method is None:
                continue

            # and at the end of the test method, before tearDown frees
            # what the test case holds
            @functools.wraps(method)
            def run(*a, _method=method, **kw):
                try:
                    return _method(*a, **kw)
                finally:
                    self._read()
            setattr(t, name, run)
        sys.settrace(self._trace)

    def after(self):
        sys.settrace(None)
        pid = os.getpid()
        qps = [dict(q, pid=pid, qpn=qpn) for qpn, q in
               qp_delta(self.pre, self.seen).items()]
        last = {}
        for rec in take_process_records(self.dir):
            if 'error' in rec:
                self.errors.append(f'pid {rec["pid"]}: {rec["error"]}')
                continue
            for qpn, q in rec['qps'].items():
                last[rec['pid'], int(qpn)] = q
        qps += [dict(q, pid=p, qpn=n) for (p, n), q in last.items()]
        frames = self.traces.frames()       # after the counters: see judge()
        to, frm = frames_by_qpn(frames)
        return {'qps': qps, 'frames': to, 'from': frm,
                'nframes': len(frames), 'errors': self.errors}


def flatten(suite):
    for t in suite:
        if hasattr(t, '__iter__'):
            yield from flatten(t)
        else:
            yield t


# ---------------------------------------------------------------------------
# Verdict (in the runner's parent)

def judge(ev):
    """From one test's evidence (what the child recorded), return
    (is_traffic, problems): problems is a list of strings, empty when every
    QP that received packets during the test got them over the net path,
    and every UD QP that sent packets sent them over it.

    A QP that received is checked against the frames addressed to it; a
    sender of a connected QP (RC, UC) through its peer, which received; a
    UD sender against the frames whose DETH names it as the source (also
    multicast ones: a multicast send goes out over IP under SOFTHCA_NET=1,
    while this host's members get their copy through the same-host path,
    as README says)."""
    problems = list(ev.get('errors', []))
    to = {int(k): v for k, v in ev.get('frames', {}).items()}
    frm = {int(k): v for k, v in ev.get('from', {}).items()}
    traffic = False
    for q in ev.get('qps', []):
        if q['rcvd_pkts'] <= 0 and q['sent_pkts'] <= 0:
            continue
        traffic = True
        name = f'pid {q["pid"]} {q["type"]} QP 0x{q["qpn"]:06x}'
        seen = to.get(q['qpn'], 0)
        if q['rcvd_pkts'] > seen:
            problems.append(
                f'{name} received {q["rcvd_pkts"]} packets (softhca stat) '
                f'but the SOFTHCA_PCAP traces hold {seen} frames to it: '
                f'{q["rcvd_pkts"] - seen} came another way than the net path')
        seen = frm.get(q['qpn'], 0)
        if q['type'] == 'UD' and q['sent_pkts'] > seen:
            problems.append(
                f'{name} sent {q["sent_pkts"]} packets (softhca stat) but '
                f'the SOFTHCA_PCAP traces hold {seen} frames from it: '
                f'{q["sent_pkts"] - seen} went another way than the net path')
    return traffic, problems
