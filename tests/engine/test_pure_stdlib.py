"""The engine imports only the standard library (and itself): no Django, no Celery.

One exception: the command line (`engine/cli.py`) reads and writes JSON with orjson
when it is installed, and falls back to the standard library when it is not.
"""

import ast
import sys
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "engine"
# Packages outside the standard library that one module, and only it, may import.
ALLOWED_ELSEWHERE = {"cli.py": {"orjson"}}


def imported_packages(path: Path) -> set[str]:
    packages = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            packages.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            packages.add(node.module)
    return packages


def test_engine_modules_import_only_the_standard_library():
    modules = sorted(ENGINE.rglob("*.py"))
    assert len(modules) >= 8
    for path in modules:
        for package in imported_packages(path):
            top = package.split(".")[0]
            allowed = (
                top in sys.stdlib_module_names
                or package.startswith("engine")
                or package in ALLOWED_ELSEWHERE.get(str(path.relative_to(ENGINE)), set())
            )
            assert allowed, f"{path.name} imports {package}"


def test_only_the_command_line_imports_orjson_and_it_falls_back():
    importers = [path.name for path in ENGINE.rglob("*.py") if "orjson" in imported_packages(path)]
    assert importers == ["cli.py"]
    tree = ast.parse((ENGINE / "cli.py").read_text())
    guarded = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Try)
        and any(isinstance(s, ast.Import) and s.names[0].name == "orjson" for s in node.body)
        and any(getattr(h.type, "id", None) == "ImportError" for h in node.handlers)
    ]
    assert guarded, "cli.py must import orjson under try/except ImportError"
