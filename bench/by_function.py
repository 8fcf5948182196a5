#!/usr/bin/env python3
"""Self instructions per request, function by function, from callgrind's
output files: one run's largest, or what run A adds over run B.

Usage: by_function.py TOP A.callgrind REQUESTS_A [B.callgrind REQUESTS_B]

With one run, prints its TOP functions by self instructions per request;
with two, the TOP functions by |A - B| per request, A's and B's beside,
and the totals. Used by bench/limit_cost.sh and bench/layer_cost.sh.
"""
import sys, re, collections

def self_costs(path):
    names = {}
    costs = collections.Counter()
    inclusive_calls = collections.Counter()
    fn = None
    skip_next = False
    def name_of(text):
        m = re.match(r'\((\d+)\)(?: (.*))?', text)
        if not m:
            return text
        if m.group(2) is not None:
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), text)
    with open(path) as f:
        for line in f:
            if line.startswith('fn='):
                fn = name_of(line[3:].strip())
                continue
            if line.startswith(('cfn=', 'cfi=', 'cfl=')):
                if line.startswith('cfn='):
                    name_of(line[4:].strip())
                continue
            if line.startswith('calls='):
                skip_next = True
                continue
            if line[:1] in '0123456789+-*' and fn is not None:
                parts = line.split()
                if len(parts) >= 2:
                    value = int(parts[1])
                    if skip_next:
                        inclusive_calls[fn] += value
                        skip_next = False
                    else:
                        costs[fn] += value
    return costs

def main():
    # by_function.py TOP A.callgrind REQUESTS_A [B.callgrind REQUESTS_B]
    top = int(sys.argv[1])
    a = self_costs(sys.argv[2]); na = int(sys.argv[3])
    if len(sys.argv) > 4:
        b = self_costs(sys.argv[4]); nb = int(sys.argv[5])
        keys = set(a) | set(b)
        diff = {k: a[k] / na - b[k] / nb for k in keys}
        total = sum(diff.values())
        print(f"{'added':>9} {'with':>9} {'without':>9}  function (self instructions per request)")
        for k in sorted(keys, key=lambda k: -abs(diff[k]))[:top]:
            print(f"{diff[k]:9.0f} {a[k]/na:9.0f} {b[k]/nb:9.0f}  {k}")
        print(f"{total:9.0f} {sum(a.values())/na:9.0f} {sum(b.values())/nb:9.0f}  total")
    else:
        total = sum(a.values())
        print(f"{'self':>9}  function (self instructions per request)")
        for k, v in a.most_common(top):
            print(f"{v/na:9.0f}  {k}")
        print(f"{total/na:9.0f}  total")

main()
