#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The layers of service/ point down only (docs/architecture.md): this reads
# every quoted #include in DIR and fails on any cycle. vd-foo.c and vd-foo.h
# are one node, so a file including its own header is no edge.
#
#   check-include-cycles.py DIR     (TAP on stdout; exit status 1 on a cycle)

import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def read_graph(directory):
    files = [f for f in os.listdir(directory) if f.endswith(('.c', '.h'))]
    nodes = {os.path.splitext(f)[0] for f in files}
    graph = {n: set() for n in nodes}
    for f in files:
        with open(os.path.join(directory, f), encoding='utf-8', errors='replace') as fh:
            text = fh.read()
        here = os.path.splitext(f)[0]
        for target in INCLUDE.findall(text):
            base = os.path.splitext(os.path.basename(target))[0]
            if target.endswith('.h') and base in nodes and base != here:
                graph[here].add(base)
    return graph


def strongly_connected(graph):
    """Tarjan's algorithm, iterative: every component of more than one node is a cycle."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    n = stack.pop()
                    on_stack.discard(n)
                    component.append(n)
                    if n == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print('Bail out! usage: check-include-cycles.py DIR')
        return 2
    graph = read_graph(sys.argv[1])
    cycles = strongly_connected(graph)
    print('1..1')
    if not cycles:
        print('ok 1 - no include cycle among %d files of %s' % (len(graph), sys.argv[1]))
        return 0
    print('not ok 1 - include cycles in %s' % sys.argv[1])
    for c in cycles:
        edges = ['%s -> %s' % (a, b) for a in c for b in sorted(graph[a]) if b in c]
        print('# cycle: %s (%s)' % (' '.join(c), ', '.join(edges)))
    return 1


if __name__ == '__main__':
    sys.exit(main())
