"""The engine's layer picture in docs/architecture.md holds in the code.

Each top-level module of crates/groupfit/src imports (``crate::...``) only
modules of its own layer or below, as the table at the top of
docs/architecture.md says, and no two source files import each other in a
circle. Comments and inline test modules do not count.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "crates" / "groupfit" / "src"


def strip(text):
    cut = text.find("#[cfg(test)]\nmod tests")
    if cut >= 0:
        text = text[:cut]
    return re.sub(r"//[^\n]*", "", text)


def layers():
    """Module name -> layer number, from the architecture page's table."""
    out = {}
    doc = (ROOT / "docs" / "architecture.md").read_text()
    for m in re.finditer(r"^\| (\d+) \| ([^|]+) \|", doc, re.M):
        for name in re.findall(r"`(\w+)/?`", m.group(2)):
            out[name] = int(m.group(1))
    return out


def files():
    """Module path ('a::b') -> source file."""
    out = {}
    for p in SRC.rglob("*.rs"):
        parts = list(p.relative_to(SRC).with_suffix("").parts)
        if parts[-1] in ("mod", "lib"):
            parts = parts[:-1]
        out["::".join(parts)] = p
    return out


def use_paths(text):
    """Every `crate::`, `super::` or `self::` path, braces of `use` expanded."""
    paths = set(re.findall(r"\b((?:crate|super|self)(?:::\w+)+)", text))
    for m in re.finditer(r"use\s+((?:crate|super|self)(?:::\w+)*)::\{", text):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        body = re.sub(r"\{[^{}]*\}", "", text[m.end():i - 1])
        for item in body.split(","):
            item = item.split(" as ")[0].strip()
            if item:
                paths.add(m.group(1) + "::" + item)
    return paths


def file_edges():
    mods = files()
    edges = {}
    for name, path in mods.items():
        here = name.split("::") if name else []
        text = strip(path.read_text())
        found = set()
        for p in use_paths(text):
            segs = p.split("::")
            if segs[0] == "crate":
                full = segs[1:]
            else:
                base = list(here)
                while segs and segs[0] in ("super", "self"):
                    if segs[0] == "super":
                        base = base[:-1]
                    segs = segs[1:]
                full = base + segs
            for n in range(len(full), 0, -1):
                target = "::".join(full[:n])
                if target in mods:
                    if target != name:
                        found.add(target)
                    break
        # A child module named without a prefix (`use child::X`, `child::f()`).
        for m in re.finditer(r"(?<![:\w])(\w+)::\w", text):
            child = "::".join(here + [m.group(1)])
            if child in mods and child != name:
                found.add(child)
        edges[name] = found
    return edges


def test_every_module_is_in_the_layer_table():
    table = layers()
    tops = {name.split("::")[0] for name in files() if name}
    assert tops <= set(table), f"modules missing from docs/architecture.md: {sorted(tops - set(table))}"


def test_no_module_imports_a_layer_above_it():
    table = layers()
    wrong = []
    for name, targets in file_edges().items():
        if not name:
            continue
        top = name.split("::")[0]
        for t in targets:
            other = t.split("::")[0]
            if other != top and table[other] > table[top]:
                wrong.append(f"{name} (layer {table[top]}) imports {t} (layer {table[other]})")
    assert not wrong, "\n".join(sorted(wrong))


def test_no_import_circle_among_files():
    edges = file_edges()
    state = {}

    def visit(v, stack):
        state[v] = 1
        stack.append(v)
        for w in edges[v]:
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in state:
                found = visit(w, stack)
                if found:
                    return found
        stack.pop()
        state[v] = 2
        return None

    for v in edges:
        if v not in state:
            cycle = visit(v, [])
            assert cycle is None, " -> ".join(cycle)


def test_the_checker_sees_an_upward_import_and_a_circle(tmp_path, monkeypatch):
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    (src / "lib.rs").write_text("pub mod a;\npub mod error;\n")
    (src / "error.rs").write_text("use crate::a::X;\n")
    (src / "a" / "mod.rs").write_text("pub mod b;\nuse crate::error::E;\npub use b::Y;\n")
    (src / "a" / "b.rs").write_text("use super::Z;\n")
    monkeypatch.setattr(__import__(__name__), "SRC", src)
    edges = file_edges()
    assert "a" in edges["error"]
    assert "a::b" in edges["a"] and "a" in edges["a::b"]
