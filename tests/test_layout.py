"""The structure the README's layout section describes, read from the imports of every module:
a config layer at the bottom that imports nothing of the project, data/ and model/ beside each other,
nothing importing train.py, and no import cycle, between modules or between folders (a folder's modules
may import each other; two folders never import each other both ways, even through other modules)."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("config", "checkpoint", "device", "data", "model", "hf", "convert", "eval", "speed", "train", "generate",
            "visualize", "studies")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_imports() -> dict[str, set[str]]:
    """{module: the project modules it imports}, relative imports resolved, at any depth of the file."""
    files = [p for p in ROOT.glob("*.py")] + [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    modules = {module_name(p): p for p in files if module_name(p).split(".")[0] in PACKAGES}
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            found |= {t for t in targets if t in modules and t != name}
        graph[name] = found
    return graph


def test_the_config_layer_imports_nothing_of_the_project():
    assert project_imports()["config"] == set()


def test_nothing_imports_train_and_data_does_not_import_model():
    graph = project_imports()
    assert [m for m, deps in graph.items() if "train" in deps] == []
    assert {(m, d) for m, deps in graph.items() if m.startswith("data") for d in deps if d.startswith("model")} == set()


def test_model_holds_the_network_only():
    graph = project_imports()
    outside = {(m, d) for m, deps in graph.items() if m.startswith("model") for d in deps
               if not d.startswith("model") and d != "config"}
    assert outside == set()


def assert_acyclic(graph: dict[str, set[str]]) -> None:
    state = {}

    def visit(node, path):
        state[node] = "open"
        for dep in graph[node]:
            assert state.get(dep) != "open", " -> ".join(path + [dep])
            if dep not in state:
                visit(dep, path + [dep])
        state[node] = "done"
    for node in graph:
        if node not in state:
            visit(node, [node])


def test_no_import_cycle():
    graph = project_imports()
    assert_acyclic(graph)
    assert {m.split(".")[0] for m in graph} == set(PACKAGES)  # every part was read


def test_no_import_runs_back_up_between_folders():
    """Folders (and top-level modules) as single nodes: checkpoint.py -> hf/ -> checkpoint.py would be a
    loop here even though no module imports itself back."""
    folders: dict[str, set[str]] = {}
    for module, deps in project_imports().items():
        top = module.split(".")[0]
        folders.setdefault(top, set()).update(d.split(".")[0] for d in deps if d.split(".")[0] != top)
    assert_acyclic(folders)


def test_transformers_checkpoints_are_read_below_the_run_directory_layer():
    graph = project_imports()
    assert "hf.checkpoints" in graph["checkpoint"]
    assert {d for m, deps in graph.items() if m.startswith("hf") for d in deps
            if d.split(".")[0] in ("checkpoint", "convert", "eval", "train", "generate")} == set()


def test_no_core_module_imports_a_study():
    """studies/ import the core (config, data, model, train's run directories, eval, speed, the transformers bridge);
    nothing of the core imports a study, so a study can be deleted without touching the tool."""
    graph = project_imports()
    assert {(m, d) for m, deps in graph.items() if not m.startswith("studies") for d in deps
            if d.startswith("studies")} == set()
    assert any(d.startswith("eval") for m, deps in graph.items() if m.startswith("studies") for d in deps)
