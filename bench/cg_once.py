#!/usr/bin/env python3
"""bench/cg_once.py: instructions per call of a function whose call waits in a loop compiled into
it, with the loop counted as one turn.

  python3 bench/cg_once.py <callgrind file, N calls> <file, 2N calls> <function> <N> [leave-out ...]

Both files come from callgrind runs with --dump-instr=yes and --separate-callers=<deep enough>
(every context names its callers), collection toggled on inside <function>. Callgrind's Ir at an
instruction address is how often that instruction ran. Between the two runs each instruction
under <function> ran N more times if it runs once per call, many more if it belongs to the wait
loop, and no more if it ran once per run (lazy set-up). Counting each instruction's increase up
to N, and dividing by N, gives one call in which every instruction ran at most once: the wait's
loop as one turn, the turn that finds the answer included. Calls made under a function named in
leave-out (a progress call the loop makes only every so many turns) are not counted at all.
Prints the count per call."""
import collections
import re
import sys


def parse(path):
    """{context: {address: Ir}} of one callgrind file (self costs; call costs are skipped)."""
    names = {}

    def name(tok):
        m = re.match(r'\((\d+)\)\s*(.*)', tok)
        if not m:
            return tok
        if m.group(2):
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), tok)

    cost = collections.defaultdict(lambda: collections.defaultdict(int))
    fn, npos, last, call_line = None, 1, [0, 0], False
    with open(path) as f:
        for line in f:
            line = line.rstrip('\n')
            if not line:
                continue
            if line.startswith('positions:'):
                npos = len(line.split()) - 1
            elif line.startswith('fn='):
                fn = name(line[3:])
            elif line.startswith('cfn='):
                name(line[4:])  # may define the id a later fn= line uses
            elif line.startswith('calls='):
                call_line = True  # the next cost line is the call's inclusive cost
            elif line[0].isdigit() or line[0] in '+-*':
                toks = line.split()
                for k in range(npos):  # positions: absolute, +/- relative, or * (the same)
                    t = toks[k]
                    if t[0] in '+-':
                        last[k] += int(t, 0)
                    elif t != '*':
                        last[k] = int(t, 0)
                if call_line:
                    call_line = False
                elif len(toks) > npos:
                    cost[fn][last[0]] += int(toks[npos])
    return cost


def under(cost, root, leave_out):
    """{(context, address): Ir} of the instructions run under root, none under leave_out."""
    out = {}
    for ctx, addrs in cost.items():
        chain = ctx.split("'")  # the function, then its callers
        if root not in chain:
            continue
        if any(c in leave_out for c in chain[:chain.index(root)]):
            continue
        for a, n in addrs.items():
            out[(ctx, a)] = n
    return out


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    f1, f2, root, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    leave_out = set(sys.argv[5:])
    a = under(parse(f1), root, leave_out)
    b = under(parse(f2), root, leave_out)
    if not b:
        sys.exit('cg_once: %s ran nothing under %s' % (f2, root))
    once = sum(min(max(b.get(k, 0) - a.get(k, 0), 0), n) for k in set(a) | set(b))
    print('%.1f' % (once / n))


if __name__ == '__main__':
    main()
