"""The engine imports only the standard library (and itself): no Django, no Celery."""

import ast
import sys
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "engine"


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
            allowed = top in sys.stdlib_module_names or package.startswith("engine")
            assert allowed, f"{path.name} imports {package}"
