# SPDX-License-Identifier: MIT
"""
The pyverbs gate file (tests/external/pyverbs-gate.conf) and its verdict.
Used by pyverbs_suite.py; the format is described in the file's header.

  gate MODULE passed=N [traffic=M]
  exclude PATTERN
  exclude-net PATTERN  (excluded only in the net-path run)
  skip-ok PATTERN REGEX

PATTERN is an fnmatch pattern on MODULE.Class.test_name whose MODULE part
is the literal name of a gated module: an accepted skip belongs to the
tests it names, never to the whole suite.
"""
import fnmatch
import re

import pyverbs_net


class GateError(Exception):
    pass


class Gate:
    """The gate file: which tests `make check` requires to pass."""

    def __init__(self, path, net=False):
        self.modules = {}      # name -> {'passed': N, 'traffic': M|None}
        self.excludes = []     # fnmatch patterns
        self.skip_ok = []      # [pattern, compiled regex, 'file:line', uses]
        if not path:
            return
        with open(path) as f:
            lines = list(enumerate(f, 1))
        for n, line in lines:
            where = f'{path}:{n}'
            line = line.split('#', 1)[0].strip()
            if not line:
                continue
            word, _, rest = line.partition(' ')
            rest = rest.strip()
            if word == 'gate':
                self._gate(where, rest)
            elif word == 'exclude':
                if not rest or ' ' in rest:
                    raise GateError(f'{where}: exclude takes one pattern')
                self.excludes.append(rest)
            elif word == 'exclude-net':
                if not rest or ' ' in rest:
                    raise GateError(f'{where}: exclude-net takes one '
                                    'pattern')
                if net:
                    self.excludes.append(rest)
            elif word == 'skip-ok':
                self._skip_ok(where, rest)
            else:
                raise GateError(f'{where}: unknown directive {word!r}')
        # skip-ok lines may come before the gate lines they name
        for pat, _, where, _ in self.skip_ok:
            if pat.split('.', 1)[0] not in self.modules:
                raise GateError(f'{where}: {pat!r} names no gated module '
                                '(an accepted skip is anchored to the '
                                'tests of a gated module)')

    def _gate(self, where, rest):
        w = rest.split()
        if not w or w[0] in self.modules:
            raise GateError(f'{where}: gate MODULE passed=N [traffic=M]'
                            + (f': {w[0]} twice' if w else ''))
        floors = {'passed': None, 'traffic': None}
        for kv in w[1:]:
            k, _, v = kv.partition('=')
            if k not in floors or not v.isdigit():
                raise GateError(f'{where}: {kv!r}: expected passed=N or '
                                'traffic=M')
            floors[k] = int(v)
        if floors['passed'] is None:
            raise GateError(f'{where}: gate {w[0]}: passed=N is required '
                            '(the passed count measured for the module)')
        self.modules[w[0]] = floors

    def _skip_ok(self, where, rest):
        pat, _, regex = rest.partition(' ')
        regex = regex.strip()
        if not regex or '.' not in pat:
            raise GateError(f'{where}: skip-ok MODULE.Class.test_pattern '
                            'REGEX')
        try:
            self.skip_ok.append([pat, re.compile(regex), where, 0])
        except re.error as ex:
            raise GateError(f'{where}: {regex!r}: {ex}')

    def gated(self, tid):
        mod = tid.split('.', 1)[0]
        return mod in self.modules and \
            not any(fnmatch.fnmatchcase(tid, p) for p in self.excludes)

    def skip_accepted(self, tid, reason):
        """Whether tid may skip for reason; counts the skip-ok line used."""
        for ok in self.skip_ok:
            if fnmatch.fnmatchcase(tid, ok[0]) and ok[1].search(reason):
                ok[3] += 1
                return True
        return False


def verdict(gate, selected, gated, results, missing, net=None):
    """The gate's failures: a list of (what, kind, text).

    selected the gated modules this run covers (all, unless modules were
             named on the command line)
    gated    the gated test ids that ran
    results  id -> (outcome, text, secs)
    missing  gated modules (of those selected) absent from the suite
    net      id -> net-path evidence (pyverbs_net), or None: not a net run
    Also returns {'skipped': accepted skips, 'traffic': {module: n},
    'frames': n} for the report.
    """
    bad = []
    for m in missing:
        bad.append((m, 'gated module missing',
                    f'the suite has no module {m} (the gate file gates it: '
                    f'at least {gate.modules[m]["passed"]} of its tests '
                    'must pass)'))
    present = [m for m in selected if m not in missing]
    passed = dict.fromkeys(present, 0)
    traffic = dict.fromkeys(present, 0)
    frames = skipped = 0
    for t in gated:
        mod = t.split('.', 1)[0]
        outcome, text, _ = results[t]
        if outcome in ('failed', 'errors', 'notrun'):
            bad.append((t, outcome, text))
            continue
        if outcome == 'skipped':
            if not gate.skip_accepted(t, text):
                bad.append((t, 'skip not accepted', text))
            else:
                skipped += 1
            continue
        passed[mod] += 1
        if net is None:
            continue
        ev = net.get(t)
        if ev is None:
            bad.append((t, 'no net-path evidence', 'the test reported none'))
            continue
        frames += ev.get('nframes', 0)
        is_traffic, problems = pyverbs_net.judge(ev)
        traffic[mod] += is_traffic
        if problems:
            bad.append((t, 'not on the net path', '\n'.join(problems)))
    for mod in present:
        floors = gate.modules[mod]
        if passed[mod] < floors['passed']:
            bad.append((mod, 'fewer tests passed than the gate file records',
                        f'{passed[mod]} passed, passed={floors["passed"]} '
                        'in the gate file'))
        if net is not None and floors['traffic'] is not None and \
                traffic[mod] < floors['traffic']:
            bad.append((mod, 'fewer traffic tests than the gate file records',
                        f'{traffic[mod]} passed tests moved packets '
                        f'(softhca stat), traffic={floors["traffic"]} in '
                        'the gate file'))
    return bad, {'skipped': skipped, 'traffic': traffic, 'frames': frames}
