#!/usr/bin/env python3
"""The shape of the source tree: the include graph between folders, the rules
it must keep, and the longest functions.

    python3 scripts/code_shape.py [--check] [--max-function-lines 80] [--root DIR]

Folders are the build's targets (src/base, layers, comm, cuda, src/cli) and
the core's stages (src/model, plan, run, sync, multiplex, io); include/
holds the public headers. Rules (--check makes a broken one exit 1):

  - no "../" in an include: every private header is named by its folder
    ("layers/kernels.hpp"), which the build resolves through the views of
    the targets a file's target links (cmake/burstpool_targets.cmake);
  - a qualified include must not also resolve beside the including file
    (a subfolder named like a view would shadow it);
  - a folder includes only the folders its target may use (ALLOWED below,
    the same graph as the CMake link lines and docs/architecture.md);
  - no cycle between folders through private headers;
  - no function in src/, layers/, comm/ or cuda/ longer than the limit.
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # --root changes it
STAGES = ["job", "model", "plan", "run", "sync", "multiplex", "io"]
CORE = set(STAGES)
# What each folder may include besides the public headers (include/) and itself.
ALLOWED = {
    "base": set(),
    "layers": set(),
    "comm": set(),
    "cuda": {"layers", "comm"},
    "cli": set(),
}
for s in STAGES:
    ALLOWED[s] = {"layers", "comm", "cuda"} | (CORE - {s})
# Where a qualified include's first component points.
VIEWS = {"layers": "layers", "comm": "comm", "cuda": "cuda", **{s: f"src/{s}" for s in STAGES}}
SOURCE_EXT = (".cpp", ".hpp", ".cu", ".hpp.in")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(rel):
    parts = rel.split("/")
    if parts[0] == "src":
        return parts[1] if len(parts) > 2 else "src"
    return parts[0]


def sources():
    for top in ("src", "layers", "comm", "cuda", "include"):
        for dirpath, _, names in os.walk(os.path.join(ROOT, top)):
            for n in sorted(names):
                if n.endswith(SOURCE_EXT):
                    yield os.path.relpath(os.path.join(dirpath, n), ROOT)


def include_edges(files, problems):
    edges = {}
    for rel in files:
        here = folder_of(rel)
        text = open(os.path.join(ROOT, rel), encoding="utf-8").read()
        for inc in INCLUDE.findall(text):
            if inc.startswith("burstpool/") or inc == "build_info.hpp":
                continue
            if ".." in inc.split("/"):
                problems.append(f"{rel}: includes \"{inc}\": name the folder instead of stepping up")
                continue
            first = inc.split("/")[0]
            if "/" not in inc:
                if here != "cli":
                    problems.append(f"{rel}: includes \"{inc}\" unqualified (write \"{here}/{inc}\")")
                continue
            if first not in VIEWS:
                problems.append(f"{rel}: includes \"{inc}\": '{first}' is no folder with includable headers")
                continue
            if os.path.exists(os.path.join(ROOT, os.path.dirname(rel), inc)):
                problems.append(f"{rel}: \"{inc}\" also resolves beside the file, shadowing the folder")
            target = os.path.join(ROOT, VIEWS[first], inc[len(first) + 1:])
            if not os.path.exists(target):
                problems.append(f"{rel}: \"{inc}\" does not exist")
            if first != here:
                if here in ALLOWED and first not in ALLOWED[here]:
                    problems.append(f"{rel}: folder '{here}' may not include '{first}' (\"{inc}\")")
                edges.setdefault(here, {}).setdefault(first, 0)
                edges[here][first] += 1
    return edges


def file_graph(files):
    """Each file's includes resolved to files of the tree: beside the file
    first, then the public headers, the views' folders, and (for trees laid
    out before the views) src/ and the top level."""
    known = set(files)
    graph = {}
    for rel in files:
        text = open(os.path.join(ROOT, rel), encoding="utf-8").read()
        out = set()
        for inc in INCLUDE.findall(text):
            first = inc.split("/")[0]
            candidates = [os.path.normpath(os.path.join(os.path.dirname(rel), inc)), "include/" + inc]
            if first in VIEWS:
                candidates.append(os.path.normpath(os.path.join(VIEWS[first], inc[len(first) + 1:])))
            candidates += ["src/" + inc, inc]
            hit = next((c for c in candidates if c in known), None)
            if hit:
                out.add(hit)
        graph[rel] = out
    return graph


def file_depth(graph):
    """The longest include chain (files on it), cycles cut where met, and
    the number of includes that close a cycle (run back up the chain)."""
    depth, state, back = {}, {}, [0]

    def visit(f):
        state[f] = 1
        d = 1
        for g in graph.get(f, ()):
            if state.get(g) == 1:
                back[0] += 1
                continue
            if g not in state:
                visit(g)
            d = max(d, 1 + depth[g])
        depth[f] = d
        state[f] = 2

    for f in sorted(graph):
        if f not in state:
            visit(f)
    return max(depth.values(), default=0), back[0]


def cycles(edges):
    found, state = [], {}

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(edges.get(node, {})):
            if state.get(nxt) == 1:
                found.append(path[path.index(nxt):] + [nxt] if nxt in path else path + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    return found


def levels(edges):
    memo = {}

    def depth(node, seen=()):
        if node in memo:
            return memo[node]
        if node in seen:
            return 0
        d = 1 + max((depth(n, seen + (node,)) for n in edges.get(node, {})), default=0)
        memo[node] = d
        return d

    nodes = set(edges) | {n for e in edges.values() for n in e}
    return {n: depth(n) for n in nodes}


def strip_code(text):
    """Comments, strings and character literals blanked, newlines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j]) + c); i = j + 1
        else:
            out.append(c); i += 1
    # Preprocessor lines (with their continuations) are not code either.
    return re.sub(r"(?m)^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", lambda m: re.sub(r"[^\n]", " ", m.group(0)), "".join(out))


CONTROL = {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "alignof"}
FUNCTION_HEAD = re.compile(r"(~?[A-Za-z_][\w:<>~]*)\s*\([^;{}]*\)\s*[\w\s:,&*()<>{}\[\].\->]*$", re.S)


def functions(rel):
    """(name, first line, lines) of each function defined at namespace or class level."""
    code = strip_code(open(os.path.join(ROOT, rel), encoding="utf-8").read())
    stack, result, last_stop = [], [], 0
    for i, c in enumerate(code):
        if c in ";{}":
            if c == "{":
                head = code[last_stop:i]
                is_function = False
                if not stack or stack[-1][0] == "scope":
                    m = re.search(r"(~?[A-Za-z_][\w:~]*)\s*(<[^;{}]*>)?\s*\(", head)
                    if m and m.group(1).split("::")[-1] not in CONTROL and ")" in head \
                            and not re.match(r"\s*(namespace|class|struct|enum|union)\b", head) \
                            and "=" not in head.split("(")[0]:
                        is_function = True
                        start = code.count("\n", 0, last_stop + len(head) - len(head.lstrip())) + 1
                        stack.append(("function", m.group(1), start))
                if not is_function:
                    kind = "scope" if (not stack or stack[-1][0] == "scope") and \
                        re.match(r"\s*(namespace|class|struct|union|extern|template)\b|\s*$", head) else "block"
                    stack.append((kind, None, 0))
            elif c == "}" and stack:
                kind, name, start = stack.pop()
                if kind == "function":
                    end = code.count("\n", 0, i) + 1
                    result.append((name, start, end - start + 1))
            last_stop = i + 1
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 when a rule is broken")
    ap.add_argument("--max-function-lines", type=int, default=80)
    ap.add_argument("--top", type=int, default=8, help="how many of the longest functions to list")
    ap.add_argument("--root", help="the source tree to read (default: the one holding this script)")
    args = ap.parse_args()
    global ROOT
    if args.root:
        ROOT = os.path.abspath(args.root)

    files = list(sources())
    problems = []
    edges = include_edges(files, problems)
    for cyc in cycles(edges):
        problems.append("folders include each other: " + " -> ".join(cyc))

    print("include graph between folders (private headers; every folder also uses include/):")
    lv = levels(edges)
    for here in sorted(edges, key=lambda n: (-lv[n], n)):
        print(f"  {here:10s} (level {lv[here]}) -> " +
              ", ".join(f"{t} ({k})" for t, k in sorted(edges[here].items())))
    print(f"levels: {max(lv.values(), default=0)}")
    graph = file_graph(files)
    chain, back = file_depth(graph)
    print(f"files: the longest include chain is {chain} files; {back} include(s) close a cycle between files")
    # The same resolved includes between directories, public headers included:
    # a pair of directories that include each other either way is a cycle.
    dirs = {}
    for f, incs in graph.items():
        for g in incs:
            a, b = os.path.dirname(f), os.path.dirname(g)
            if a != b:
                dirs.setdefault(a, set()).add(b)
    pairs = sorted({tuple(sorted((a, b))) for a in dirs for b in dirs[a] if a in dirs.get(b, set())})
    print(f"directories: {sum(len(v) for v in dirs.values())} include edges between them; "
          f"{len(pairs)} pair(s) include each other" + (": " + ", ".join(" <-> ".join(p) for p in pairs) if pairs else ""))

    longest = []
    for rel in files:
        if rel.startswith("include/"):
            continue
        for name, start, lines in functions(rel):
            longest.append((lines, f"{rel}:{start}", name))
    longest.sort(reverse=True)
    print(f"longest functions (of {len(longest)}):")
    for lines, where, name in longest[:args.top]:
        print(f"  {lines:4d} lines  {name}  {where}")
    for lines, where, name in longest:
        if lines > args.max_function_lines:
            problems.append(f"{where}: {name} is {lines} lines (the limit is {args.max_function_lines})")

    for p in problems:
        print("PROBLEM: " + p)
    print(f"{len(problems)} problem(s)")
    return 1 if args.check and problems else 0


if __name__ == "__main__":
    sys.exit(main())
