"""The demo calls the domain's services; the domain never imports the demo."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_domain_module_imports_the_demo():
    offenders = []
    for package in ("accounts", "governance", "scheduler"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    names = [node.module or ""]
                else:
                    continue
                if any(name == "demo" or name.startswith("demo.") for name in names):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []
