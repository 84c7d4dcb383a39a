#!/usr/bin/env python3
"""Import circles between the source files of a crate: the strongly connected components of
"file A names a module of file B" (`crate::x::y`, `super::z`, `self::w`), largest first.

Usage: import-circles.py CRATE_DIR[=MAX]...  (e.g. crates/core=0 crates/store)
Prints per crate `CRATE: N files, largest circle M files` and the files of every circle; exits 1
when a crate's largest circle is larger than the MAX given for it (0: no circle at all).

A `pub use` is a crate's facade, not a use; a `mod x;` declaration is ownership, not a use; test
modules (`#[cfg(test)]` onwards) are left out."""
import os, re, sys

def modules(src):
    """module path (tuple) -> file, for every .rs under src."""
    out = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith('.rs'):
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(path, src)[:-3].split(os.sep)
            if rel[-1] in ('lib', 'main') and len(rel) == 1:
                mod = ()
            elif rel[-1] == 'mod':
                mod = tuple(rel[:-1])
            else:
                mod = tuple(rel)
            out[mod] = path
    return out

REF = re.compile(r'\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)')
GROUP = re.compile(r'\b(crate|super|self)::\{([^;]*?)\}', re.S)

def refs(text, mod, mods):
    """Files (module paths) this module's text names."""
    text = re.sub(r'//[^\n]*', '', text)
    # Re-exports are the crate's facade, not a use of what they name.
    text = re.sub(r'pub use [^;]*;', '', text)
    # Test modules are not part of the crate's structure.
    cut = text.find('#[cfg(test)]')
    if cut >= 0:
        text = text[:cut]
    found = set()
    reexports = REEXPORTS
    def resolve(kind, parts):
        if kind == 'crate' and len(parts) >= 1 and parts[0] in reexports:
            parts = list(reexports[parts[0]]) + parts[1:]
        if kind == 'crate':
            base = ()
        elif kind == 'super':
            base = mod[:-1]
            while parts and parts[0] == 'super':
                base, parts = base[:-1], parts[1:]
        else:
            base = mod
        path = base + tuple(parts)
        # The longest prefix that is a file.
        for n in range(len(path), -1, -1):
            if path[:n] in mods:
                if path[:n] != mod:
                    found.add(path[:n])
                return
    for m in REF.finditer(text):
        resolve(m.group(1), [p for p in m.group(2).split('::') if p])
    for m in GROUP.finditer(text):
        for item in re.split(r',', m.group(2)):
            item = item.strip().split(' as ')[0].strip()
            if item:
                resolve(m.group(1), [p for p in re.split(r'::|\{', item) if p and p.isidentifier()])
    # A child module named by a bare path (`commit::apply`), or imported (`use commit::X`). A
    # `mod x;` declaration alone is ownership, not use: no edge.
    for m in re.finditer(r'(?<![:\w])([a-z_][a-z0-9_]*)::', text):
        child = mod + (m.group(1),)
        if child in mods and child != mod:
            found.add(child)
    return found

def sccs(nodes, edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)
    def strong(v):
        index[v] = low[v] = counter[0]; counter[0] += 1
        stack.append(v); on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strong(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            out.append(comp)
    for v in nodes:
        if v not in index:
            strong(v)
    return out

REEXPORTS = {}

def reexports_of(lib_text, mods):
    """`pub use x::{A, B}` / `pub use x::A` in lib.rs: crate::A names module x."""
    out = {}
    for m in re.finditer(r'pub use (?:crate::)?([a-z_][a-z0-9_]*(?:::[a-z_][a-z0-9_]*)*)::(\{[^;]*\}|[A-Za-z_][A-Za-z0-9_]*)\s*;', lib_text, re.S):
        path = tuple(m.group(1).split('::'))
        if path[:1] and path[:1] not in mods:
            continue
        items = m.group(2).strip('{}')
        for item in items.split(','):
            item = item.strip().split(' as ')[-1].strip()
            if item.isidentifier():
                out[item] = path
    return out

def main():
    global REEXPORTS
    failed = False
    for arg in sys.argv[1:]:
        crate, _, limit = arg.partition('=')
        src = os.path.join(crate, 'src')
        if not os.path.isdir(src):
            sys.exit(f"import-circles: {src}: no such directory")
        mods = modules(src)
        lib = mods.get(())
        REEXPORTS = reexports_of(open(lib).read(), mods) if lib else {}
        edges = {m: refs(open(p).read(), m, mods) for m, p in mods.items()}
        circles = sorted((c for c in sccs(list(mods), edges) if len(c) > 1), key=len, reverse=True)
        largest = len(circles[0]) if circles else 0
        print(f"{crate}: {len(mods)} files, largest circle {largest} files")
        for c in circles:
            print("  " + " ".join(sorted(os.path.relpath(mods[m], src) for m in c)))
        if limit and largest > int(limit):
            print(f"FAIL: {crate}: a circle of {largest} files, more than {limit}", file=sys.stderr)
            failed = True
    sys.exit(1 if failed else 0)

main()
