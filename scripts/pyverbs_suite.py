#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""
Run rdma-core's own pyverbs test suite against softhca's libibverbs.

Called by scripts/pyverbs.sh, which prepares a copy of the suite (the
Debian package ships it gzipped) and sets the environment of `softhca run`
(LD_LIBRARY_PATH, and LD_PRELOAD with the path shim, through which the
RDMA-CM tests find a device's interface in /sys/class/infiniband/<dev>/
device/net/, as they do on a kernel device).  Must run under
/usr/bin/python3: pyverbs exists only for Debian's python.

Every test runs in a child process (one per module, restarted after the
test that crashed or hung), so a segfault or a blocking read in the library
costs one test, not the run.  A child reports each test on a private pipe;
its own stdout/stderr (tests print) go to a log kept for the report.

Two verdicts:
  gate          the tests listed by the gate file (tests/external/
                pyverbs-gate.conf, read by pyverbs_gate.py) must pass, or
                skip for a reason the file accepts for them, at least as
                many per module as it records, and none of its modules may
                be missing.  With --net-evidence (pyverbs.sh --net), each
                gated traffic test must also show in the SOFTHCA_PCAP traces
                that its QPs used the net path (pyverbs_net.py).  This is
                what `make check` enforces.
  informational every other test runs too; its counts are printed and do not
                change the exit status.
"""
import argparse
import concurrent.futures
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time

from pyverbs_gate import Gate, GateError, verdict

OUTCOMES = ('passed', 'failed', 'errors', 'skipped', 'notrun')


# ---------------------------------------------------------------------------
# Child: list or run tests of the suite in this process.

def child_import_suite(args):
    """Import the suite as run_tests.py does; return the tests package."""
    sys.path[:0] = [args.tests_dir, os.path.dirname(args.tests_dir)]
    from args_parser import parser
    argv = ['run_tests.py']
    if args.dev:
        argv += ['--dev', args.dev]
    if args.port:
        argv += ['--port', str(args.port)]
    sys.argv = argv
    parser.parse_args()
    import tests                  # imports every test_*.py (tests/__init__.py)
    import tests.utils
    # Completions on a soft device are immediate or never: waiting 10 s for
    # each missing one (the suite's default, tuned for hardware) would make
    # a run with a broken data path take an hour.
    tests.utils.POLL_CQ_TIMEOUT = args.poll_timeout
    import tests.base
    cm_tests_off_loopback(tests.base)
    return tests


def cm_tests_off_loopback(base):
    """Run the RDMA-CM tests on a device whose address binds to it.

    Those tests bind the device's IP address and use the device the bind
    attaches (pyverbs' CMID.bind_addr opens id->verbs at once).  A loopback
    address attaches none, as in the kernel's rdma_cm (cma_any_addr counts
    127.0.0.0/8 and ::1 as wildcards), and no real device is a loopback
    one.  So when the suite runs on softhca_lo, the RDMA-CM tests run on
    the softhca device of the first other interface that is up with an IPv4
    address, as they would on hardware, and skip when there is none.
    """
    import unittest

    def loopback(ifname):
        try:
            with open(f'/sys/class/net/{ifname}/flags') as f:
                return int(f.read(), 16) & 0x8      # IFF_LOOPBACK
        except (OSError, ValueError):
            return False

    def other_device():
        out = subprocess.run(['ip', '-j', '-4', 'addr', 'show', 'up'],
                             capture_output=True, text=True).stdout
        for link in json.loads(out or '[]'):
            name = link.get('ifname', '')
            if link.get('addr_info') and not loopback(name):
                return 'softhca_' + name
        return None

    real_setup = base.RDMACMBaseTest.setUp

    def setup(self):
        if self.dev_name and self.dev_name.startswith('softhca_') and \
                loopback(self.dev_name[len('softhca_'):]):
            other = other_device()
            if other is None:
                raise unittest.SkipTest(
                    'RDMA-CM: no interface but loopback here (a loopback '
                    'address binds to no device)')
            self.dev_name = other
        real_setup(self)

    base.RDMACMBaseTest.setUp = setup


def flatten(suite):
    for t in suite:
        if hasattr(t, '__iter__'):
            yield from flatten(t)
        else:
            yield t


def short_id(test_id):
    """'tests.test_pd.PDTest.test_alloc_pd' -> 'test_pd.PDTest.test_alloc_pd'"""
    return test_id[len('tests.'):] if test_id.startswith('tests.') else test_id


def child_main(args):
    import faulthandler
    import traceback
    import unittest

    report = os.fdopen(args.report_fd, 'w', buffering=1)
    faulthandler.enable()         # a crash in the library prints where

    def emit(**rec):
        report.write(json.dumps(rec) + '\n')
        report.flush()

    try:
        tests = child_import_suite(args)
    except BaseException:
        emit(event='import_error', text=traceback.format_exc())
        return 3

    loader = unittest.TestLoader()
    if args.list:
        for mod in args.list:
            m = getattr(tests, mod, None)
            if m is None:
                emit(event='no_module', module=mod)
                continue
            for t in flatten(loader.loadTestsFromModule(m)):
                emit(event='test', id=short_id(t.id()))
        emit(event='end')
        return 0

    wanted = [l.strip() for l in sys.stdin if l.strip()]

    class Result(unittest.TestResult):
        def __init__(self):
            super().__init__()
            self.outcome = ('passed', '')

        def addError(self, test, err):
            super().addError(test, err)
            self.outcome = ('errors', self._exc_info_to_string(err, test))

        def addFailure(self, test, err):
            super().addFailure(test, err)
            self.outcome = ('failed', self._exc_info_to_string(err, test))

        def addSkip(self, test, reason):
            super().addSkip(test, reason)
            self.outcome = ('skipped', reason)

        def addExpectedFailure(self, test, err):
            super().addExpectedFailure(test, err)
            self.outcome = ('passed', 'expected failure')

        def addUnexpectedSuccess(self, test):
            super().addUnexpectedSuccess(test)
            self.outcome = ('failed', 'unexpected success')

        def addSubTest(self, test, subtest, err):
            super().addSubTest(test, subtest, err)
            if err is not None and self.outcome[0] == 'passed':
                kind = 'failed' if issubclass(err[0], test.failureException) \
                    else 'errors'
                self.outcome = (kind, self._exc_info_to_string(err, test))

    net = None
    if args.net_evidence:
        from pyverbs_net import NetWatch
        net = NetWatch(args)
    for tid in wanted:
        if args.deadline and time.time() > args.deadline:
            emit(event='done', id=tid, outcome='notrun',
                 text='informational time budget used up', secs=0)
            continue
        emit(event='start', id=tid)
        t0 = time.monotonic()
        result = Result()
        try:
            suite = loader.loadTestsFromName('tests.' + tid)
        except Exception:
            emit(event='done', id=tid, outcome='errors',
                 text=traceback.format_exc(), secs=0)
            continue
        # A test that blocks in C (a read() that never returns) or spins
        # is ended by faulthandler's watchdog thread, GIL or not; the parent
        # records the timeout and restarts the child after this test.
        faulthandler.dump_traceback_later(args.test_timeout, exit=True)
        try:
            if net:
                net.before(suite)
            suite.run(result)
        finally:
            faulthandler.cancel_dump_traceback_later()
        # setUpClass failures and the like land in errors without a test.
        if result.outcome[0] == 'passed' and (result.errors or result.failures):
            result.outcome = ('errors', (result.errors + result.failures)[0][1])
        if result.testsRun == 0 and result.outcome[0] == 'passed' \
                and not result.skipped:
            result.outcome = ('errors', 'test did not run')
        emit(event='done', id=tid, outcome=result.outcome[0],
             text=result.outcome[1], secs=round(time.monotonic() - t0, 2),
             net=net.after() if net else None)
    emit(event='end')
    return 0


# ---------------------------------------------------------------------------
# Parent: plan, run children, count, report.

class Runner:
    def __init__(self, args):
        self.args = args
        self.results = {}        # id -> (outcome, text, secs)
        self.logs = {}           # module -> child output (str)
        self.net = {}            # id -> net-path evidence (--net-evidence)
        self.import_error = None

    def child_cmd(self, extra):
        a = self.args
        cmd = [sys.executable, os.path.abspath(__file__), '--child',
               '--tests-dir', a.tests_dir, '--poll-timeout', str(a.poll_timeout),
               '--test-timeout', str(a.test_timeout)]
        if a.dev:
            cmd += ['--dev', a.dev]
        if a.port:
            cmd += ['--port', str(a.port)]
        if a.net_evidence:
            cmd += ['--net-evidence', a.net_evidence, '--softhca', a.softhca]
        return cmd + extra

    def spawn(self, extra, stdin_text, holder):
        """Start a child and yield its records; on return, holder['status']
        and holder['output'] hold its exit status and output."""
        rfd, wfd = os.pipe()
        log = tempfile.TemporaryFile(mode='w+')
        proc = subprocess.Popen(
            self.child_cmd(extra + ['--report-fd', str(wfd)]),
            stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
            pass_fds=(wfd,), cwd=os.path.dirname(self.args.tests_dir),
            text=True, start_new_session=True)
        os.close(wfd)
        try:
            proc.stdin.write(stdin_text)
            proc.stdin.close()
        except BrokenPipeError:
            pass
        buf = b''
        deadline_gap = self.args.test_timeout + 30
        with os.fdopen(rfd, 'rb') as rf:
            while True:
                r, _, _ = select.select([rf], [], [], deadline_gap)
                if not r:      # the child is stuck beyond its own watchdog
                    os.killpg(proc.pid, signal.SIGKILL)
                    break
                chunk = os.read(rf.fileno(), 65536)
                if not chunk:
                    break
                buf += chunk
                while b'\n' in buf:
                    line, buf = buf.split(b'\n', 1)
                    try:
                        yield json.loads(line)
                    except ValueError:
                        pass
        try:
            status = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            status = proc.wait()
        # Leftover grandchildren (multiprocessing tests) go with the group.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        log.seek(0)
        holder['status'], holder['output'] = status, log.read()
        log.close()

    def list_tests(self, modules):
        ids, missing, h = [], [], {}
        for rec in self.spawn(['--list'] + modules, '', h):
            if rec['event'] == 'test':
                ids.append(rec['id'])
            elif rec['event'] == 'no_module':
                missing.append(rec['module'])
            elif rec['event'] == 'import_error':
                self.import_error = rec['text']
        if self.import_error is None and h['status'] != 0:
            self.import_error = (f'listing the tests failed (exit status '
                                 f'{h["status"]}):\n{h["output"]}')
        return ids, missing

    def run_module(self, module, ids, deadline=None):
        """Run ids (all of one module); return the lines to print.
        Tests not started by deadline (time.time()) are not run."""
        todo = list(ids)
        out, lines, h = [], [], {}
        extra = ['--deadline', str(deadline)] if deadline else []
        while todo:
            current, done = None, set()
            for rec in self.spawn(['--run'] + extra, '\n'.join(todo) + '\n',
                                  h):
                ev = rec['event']
                if ev == 'start':
                    current = rec['id']
                elif ev == 'done':
                    self.results[rec['id']] = (rec['outcome'], rec['text'],
                                               rec.get('secs', 0))
                    if rec.get('net') is not None:
                        self.net[rec['id']] = rec['net']
                    done.add(rec['id'])
                    current = None
                    if self.args.verbose:
                        lines.append(f'    {rec["outcome"]:8} {rec["id"]} '
                                     f'({rec.get("secs", 0)} s)'
                                     + (f': {first_line(rec["text"])}'
                                        if rec['outcome'] == 'skipped'
                                        else '')
                                     + net_brief(rec.get('net')))
                elif ev == 'import_error':
                    self.import_error = rec['text']
            out.append(h['output'])
            if self.import_error:
                for tid in todo:
                    self.results.setdefault(tid, ('errors', 'import failed', 0))
                break
            if current is not None:
                st = h['status']
                if 'Timeout (' in h['output']:
                    why = f'timed out after {self.args.test_timeout:g} s'
                elif st < 0:
                    why = f'killed by signal {-st}'
                else:
                    why = f'exited with status {st}'
                self.results[current] = (
                    'errors', f'test process {why}\n'
                    + tail(h['output'], 40), 0)
                done.add(current)
                if self.args.verbose:
                    lines.append(f'    errors   {current}: {why}')
            remaining = [t for t in todo if t not in done]
            if len(remaining) == len(todo):        # no progress at all
                for tid in remaining:
                    self.results[tid] = (
                        'errors', 'child made no progress (exit status '
                        f'{h["status"]})\n' + tail(h['output'], 40), 0)
                break
            todo = remaining
        self.logs[module] = ''.join(out)
        return lines


def net_brief(ev):
    """' [net: ...]': a test's net-path evidence in a few words (-v)."""
    if not ev:
        return ''
    got = [q for q in ev['qps'] if q['rcvd_pkts'] or q['sent_pkts']]
    return (f' [net: {len(got)} QPs sent '
            f'{sum(q["sent_pkts"] for q in got)} and received '
            f'{sum(q["rcvd_pkts"] for q in got)} packets, '
            f'{ev["nframes"]} frames traced'
            + (f'; {len(ev["errors"])} errors' if ev['errors'] else '')
            + ']')


def first_line(text):
    return (text or '').strip().splitlines()[0] if (text or '').strip() else ''


def tail(text, n):
    lines = (text or '').rstrip().splitlines()
    return '\n'.join(lines[-n:])


def count(results, ids):
    c = dict.fromkeys(OUTCOMES, 0)
    for tid in ids:
        c[results[tid][0]] += 1
    return c


def fmt(c):
    return (f'{c["passed"]} passed, {c["failed"]} failed, {c["errors"]} errors, '
            f'{c["skipped"]} skipped'
            + (f', {c["notrun"]} not run' if c['notrun'] else ''))


def parent_main(args):
    try:
        gate = Gate(args.gate, net=bool(args.net_evidence))
    except (OSError, GateError) as ex:
        print(f'pyverbs: gate file: {ex}')
        write_summary(args, dict.fromkeys(OUTCOMES, 0) | {'failed': 1},
                      None, 'bad gate file')
        return 1
    in_suite = sorted(f[:-3] for f in os.listdir(args.tests_dir)
                      if f.startswith('test_') and f.endswith('.py'))
    modules = args.modules or in_suite
    # the gated modules this run covers; one the suite lacks fails the gate
    selected = [m for m in gate.modules if m in modules or not args.modules]
    if args.gate_only:
        modules = [m for m in modules if m in gate.modules]
    missing = [m for m in modules if m not in in_suite]
    modules = [m for m in modules if m in in_suite]
    missing += [m for m in selected if m not in in_suite + missing]

    runner = Runner(args)
    ids, unlisted = runner.list_tests(modules)
    missing += [m for m in unlisted if m not in missing]
    if runner.import_error:
        print('pyverbs: the suite does not import with this libibverbs:')
        print(tail(runner.import_error, 30))
        write_summary(args, dict.fromkeys(OUTCOMES, 0) | {'failed': 1},
                      None, 'import error')
        return 1
    for m in missing:
        print(f'pyverbs: no module {m} in the suite'
              + (' (a gated module: the gate fails)' if m in gate.modules
                 else ''))
    if args.gate_only:
        ids = [t for t in ids if gate.gated(t)]

    by_module = {}
    for tid in ids:
        by_module.setdefault(tid.split('.', 1)[0], []).append(tid)

    # Gated tests first, in their own children, so that an informational
    # test that corrupts process state cannot affect them.
    gated = [t for t in ids if gate.gated(t)]
    other = [t for t in ids if not gate.gated(t)]
    t0 = time.monotonic()
    info_start = [t0]

    def one_module(mod, mod_ids, phase):
        m0 = time.monotonic()
        # The informational run has a time budget, so that a data path that
        # hangs every test cannot stretch `make check` without end.
        if phase != 'gate' and m0 - info_start[0] > args.budget:
            for t in mod_ids:
                runner.results[t] = ('notrun', 'informational time budget '
                                     f'({args.budget:g} s) used up', 0)
            return [f'  {mod:28} not run: time budget used up']
        deadline = None
        if phase != 'gate':
            deadline = time.time() + args.budget - (m0 - info_start[0])
        lines = runner.run_module(mod, mod_ids, deadline)
        c = count(runner.results, mod_ids)
        return [f'  {mod:28} {fmt(c)}  ({time.monotonic() - m0:.1f} s)'] \
            + lines

    # The gate runs one module at a time; the informational run, which has
    # the slow (timing-out) tests, uses --jobs children at once.
    other_name = 'informational' if gate.modules else 'test'
    for phase, phase_ids, jobs in (('gate', gated, 1),
                                   (other_name, other, args.jobs)):
        if not phase_ids:
            continue
        print(f'pyverbs: {phase} run: {len(phase_ids)} tests'
              + (f', {jobs} modules at a time' if jobs > 1 else ''),
              flush=True)
        info_start[0] = time.monotonic()
        mods = sorted({t.split('.', 1)[0] for t in phase_ids})
        work = [(m, [t for t in phase_ids if t.split('.', 1)[0] == m])
                for m in mods]
        with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
            for lines in pool.map(lambda w: one_module(*w, phase), work):
                print('\n'.join(lines), flush=True)
        if runner.import_error:
            break

    res = runner.results
    for t in ids:
        res.setdefault(t, ('errors', 'not run', 0))

    # Gate verdict: failures, errors, unaccepted skips, missing modules,
    # passed counts below the gate file's, and under --net-evidence tests
    # whose traffic the traces do not show.
    bad, facts = verdict(gate, selected, gated, res,
                         [m for m in missing if m in gate.modules],
                         runner.net if args.net_evidence else None)
    gc = count(res, gated)
    gate_summary = {'passed': gc['passed'], 'failed': len(bad),
                    'skipped': facts['skipped']}

    # Skip reasons, grouped: what the suite could not exercise, and why.
    if args.skip_reasons:
        reasons = {}
        for t in ids:
            if res[t][0] == 'skipped':
                reasons.setdefault(first_line(res[t][1]), []).append(t)
        print('pyverbs: skip reasons (count, reason):')
        for r, ts in sorted(reasons.items(), key=lambda kv: -len(kv[1])):
            print(f'  {len(ts):4}  {r}')

    if bad:
        print(f'pyverbs: GATE FAILURES ({len(bad)}):')
        for t, what, text in bad:
            print(f'--- {t}: {what}')
            print('    ' + tail(text, args.fail_lines).replace('\n', '\n    '))

    oc = count(res, other)
    tc = count(res, ids)
    print(f'pyverbs: {"whole suite" if not args.modules else "total"} '
          f'({len(ids)} tests, '
          f'{time.monotonic() - t0:.0f} s): {fmt(tc)}')
    if other and gate.modules:
        print(f'pyverbs: informational (not gating, {len(other)} tests): '
              f'{fmt(oc)}')
    if args.net_evidence and gated:
        print(f'pyverbs: net path: {sum(facts["traffic"].values())} traffic '
              'tests (their QPs moved packets), '
              + ', '.join(f'{m} {n}' for m, n in facts['traffic'].items())
              + f'; {facts["frames"]} frames in the traces')
    for pat, _, where, uses in gate.skip_ok:
        if not uses and any(t.split('.', 1)[0] == pat.split('.', 1)[0]
                            for t in gated):
            print(f'pyverbs: note: {where}: skip-ok {pat} accepted no skip '
                  'in this run')
    if gated or selected:
        print(f'pyverbs: gate ({len(gated)} tests): {gate_summary["passed"]} '
              f'passed, {gate_summary["failed"]} failed, '
              f'{gate_summary["skipped"]} skipped')
    write_summary(args, gate_summary, tc, 'ok' if not bad else 'gate failed')
    if not gate.modules:          # no gate: every test counts
        return 1 if tc['failed'] or tc['errors'] or missing else 0
    return 1 if bad or missing else 0     # missing: also a module named


def write_summary(args, gate, whole, status):
    if not args.summary:
        return
    with open(args.summary, 'w') as f:
        f.write(f'gate_passed={gate["passed"]}\ngate_failed={gate["failed"]}\n'
                f'gate_skipped={gate["skipped"]}\nstatus="{status}"\n')
        if whole:
            for k in OUTCOMES:
                f.write(f'suite_{k}={whole[k]}\n')


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument('--tests-dir', required=True,
                    help='the unpacked suite (a directory named tests)')
    ap.add_argument('--dev', default='softhca_lo',
                    help='device the suite runs on (default softhca_lo)')
    ap.add_argument('--port', type=int, default=1)
    ap.add_argument('--gate', help='gate file (tests/external/pyverbs-gate.conf)')
    ap.add_argument('--gate-only', action='store_true',
                    help='run only the gated tests')
    ap.add_argument('--poll-timeout', type=float, default=float(
        os.environ.get('SOFTHCA_PYVERBS_POLL_TIMEOUT', 2)),
        help='seconds the suite waits for a completion (suite default 10)')
    ap.add_argument('--test-timeout', type=float, default=float(
        os.environ.get('SOFTHCA_PYVERBS_TEST_TIMEOUT', 30)),
        help='seconds before a test counts as hung')
    ap.add_argument('-j', '--jobs', type=int, default=int(
        os.environ.get('SOFTHCA_PYVERBS_JOBS', os.cpu_count() or 1)),
        help='modules run at once in the informational run (default nproc)')
    ap.add_argument('--budget', type=float, default=float(
        os.environ.get('SOFTHCA_PYVERBS_BUDGET', 600)),
        help='seconds after which the informational run starts no more '
             'modules (default 600)')
    ap.add_argument('--net-evidence', metavar='DIR',
                    help='the net-path run (SOFTHCA_NET=1, SOFTHCA_PCAP='
                         'DIR/%%p.pcap): every gated traffic test must show '
                         'its packets in the traces (scripts/pyverbs_net.py)')
    ap.add_argument('--softhca', default='softhca',
                    help='the softhca tool (its stat command), for '
                         '--net-evidence')
    ap.add_argument('--summary', help='write key=value counts to this file')
    ap.add_argument('--skip-reasons', action='store_true',
                    help='print the skip reasons, grouped')
    ap.add_argument('--fail-lines', type=int, default=25,
                    help='lines of each gate failure to print')
    ap.add_argument('-v', '--verbose', action='store_true',
                    help='print every test as it finishes')
    ap.add_argument('modules', nargs='*',
                    help='modules to run (default: all test_*.py)')
    # child mode
    ap.add_argument('--child', action='store_true', help=argparse.SUPPRESS)
    ap.add_argument('--list', action='store_true', help=argparse.SUPPRESS)
    ap.add_argument('--run', action='store_true', help=argparse.SUPPRESS)
    ap.add_argument('--report-fd', type=int, help=argparse.SUPPRESS)
    ap.add_argument('--deadline', type=float, help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.tests_dir = os.path.abspath(args.tests_dir)
    if args.child:
        if args.list:
            args.list = args.modules
        return child_main(args)
    return parent_main(args)


if __name__ == '__main__':
    sys.exit(main())
