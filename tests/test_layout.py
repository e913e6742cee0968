"""The package's layers, read from its source: every top-level module and package is placed in one
layer (engine, settings, lessons, views, harness), each layer imports only the layers below it, and no
module imports itself back through others (imports inside functions count)."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "nbsupport"
# data, models, training loop, decoding, search, losses, metrics, kernels, and what they stand on
ENGINE = ("data", "models", "kernels", "train", "decode", "strategies", "translation", "search", "losses", "metrics", "ibm", "cache",
          "registry", "runtime", "paths", "pipeline", "batched", "stats", "speed", "results", "_version")
SETTINGS = ("profiles",)
VIEWS = ("views",)                       # tables, plots, widgets and the live render functions
LESSONS = ("lessons", "claims")          # what the notebooks teach and test with: the lesson helpers, the claims
HARNESS = ("harness",)
LAYERS = {"settings": SETTINGS, "engine": ENGINE, "views": VIEWS, "lessons": LESSONS, "harness": HARNESS}
# what each layer may import besides itself, from the bottom up; the facade nbsupport/__init__ imports everything
MAY_IMPORT = {"settings": set(), "engine": {"settings"}, "views": {"settings", "engine"},
              "lessons": {"settings", "engine", "views"}, "harness": {"settings", "engine", "views", "lessons"}}


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
    assert "nbsupport.pipeline" in g["nbsupport.harness.smoke"]                   # `from .. import pipeline`
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


def layer_of(name: str) -> str | None:
    """The layer of a module ``nbsupport.<top>[...]`` (None for the facade ``nbsupport`` itself)."""
    if "." not in name:
        return None
    top = name.split(".")[1]
    found = [layer for layer, tops in LAYERS.items() if top in tops]
    assert found, f"nbsupport.{top} is in no layer: add it to one of {', '.join(LAYERS)} in tests/test_layout.py"
    return found[0]


def leaks(g: dict) -> list[str]:
    """Every import that goes against MAY_IMPORT, as 'importer -> imported (layer -> layer)'."""
    out = []
    for name, deps in sorted(g.items()):
        mine = layer_of(name)
        for dep in sorted(deps):
            theirs = layer_of(dep)
            if mine is not None and theirs is not None and theirs != mine and theirs not in MAY_IMPORT[mine]:
                out.append(f"{name} -> {dep} ({mine} -> {theirs})")
    return out


def test_every_module_is_placed_in_one_layer():
    tops = {m.split(".")[1] for m in modules() if "." in m}
    placed = [t for tops_ in LAYERS.values() for t in tops_]
    assert len(placed) == len(set(placed)), "a module placed in two layers"
    assert tops == set(placed), {"not placed": sorted(tops - set(placed)), "placed but missing": sorted(set(placed) - tops)}


def test_each_layer_imports_only_the_layers_below_it():
    assert leaks(graph()) == []


def test_a_planted_leak_is_caught():
    """The engine's pipeline importing the harness (as it once did), and a view importing a lesson helper."""
    g = {name: set(deps) for name, deps in graph().items()}
    g["nbsupport.pipeline"].add("nbsupport.harness.workers")
    g["nbsupport.views.plots"].add("nbsupport.lessons.analysis")
    assert leaks(g) == ["nbsupport.pipeline -> nbsupport.harness.workers (engine -> harness)",
                        "nbsupport.views.plots -> nbsupport.lessons.analysis (views -> lessons)"]
    with pytest.raises(AssertionError, match="in no layer"):
        layer_of("nbsupport.newthing")
