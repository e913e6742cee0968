"""The package's layers, read from its source: the engine imports nothing of the harness, and no
module imports itself back through others (imports inside functions count)."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "nbsupport"
# data, models, training loop, decoding, search, losses, metrics, kernels, and what they stand on
ENGINE = ("data", "models", "kernels", "train", "decode", "search", "losses", "metrics", "ibm", "cache",
          "registry", "runtime", "paths")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(path: Path, known: dict) -> set[str]:
    """The package's modules that ``path`` imports, anywhere in it (a name imported from a package
    counts as that submodule when it is one)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "nbsupport"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "nbsupport":
                continue
            subs = {f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known}
            found |= subs or {target}
            if subs and len(subs) < len(node.names):
                found.add(target)
    return {m for m in found if m in known} - {name}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(path, known) for name, path in known.items()}


def reachable(g: dict, start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in g[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def cycles(g: dict) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))
    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_every_engine_name_is_a_module_of_the_package():
    known = {m.split(".")[1] for m in modules() if "." in m}
    assert set(ENGINE) <= known, sorted(set(ENGINE) - known)


def is_engine(name: str) -> bool:
    rest = name.split(".", 1)[1] if "." in name else ""
    return rest.split(".")[0] in ENGINE


def test_the_graph_sees_imports_inside_functions_and_relative_ones():
    g = graph()
    assert "nbsupport.harness.run_notebooks" in g["nbsupport.harness.smoke"]      # inside main()
    assert "nbsupport.train" in g["nbsupport.harness.smoke"]                      # `from .. import train`
    assert "nbsupport.models.protocol" in g["nbsupport.train"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_itself_back():
    g = graph()
    facade = "nbsupport"                    # `import nbsupport as nbs`: it imports everything, nothing imports it
    assert not any(facade in deps for deps in g.values()), [m for m, d in g.items() if facade in d]
    assert cycles(g) == []


@pytest.mark.parametrize("name", sorted(m for m in modules() if is_engine(m)))
def test_the_engine_imports_nothing_of_the_harness(name):
    harness = sorted(m for m in reachable(graph(), name) if m.startswith("nbsupport.harness"))
    assert harness == [], f"{name} reaches the harness through its imports: {harness}"
