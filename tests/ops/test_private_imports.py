"""A leading underscore says "used only in this module". Another module reaching for
such a name couples itself to what its owner may change at will: what a second module
needs is made public (as the policy-write kit was: governance.policy.reviewable).
The number of such reaches in the product's code (tests and migrations aside) may only
fall; lower RECORDED when you remove some."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("accounts", "config", "core", "demo", "engine", "fleet", "governance", "scheduler")
# Left (issue 33): engine.cli's _ANNOTATIONS, two view helpers of governance.policy.views
# (_problem twice, _parse_problems) and two parsers of governance.policy_code.aws_batch.
RECORDED = 6


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported_from(node: ast.ImportFrom, here: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = here.split(".") if is_package else here.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _is_module(root: Path, dotted: str) -> bool:
    path = root.joinpath(*dotted.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def private_reaches(root: Path, packages=PACKAGES) -> list[str]:
    """Every `from x import _name` and every `module._name` (module an imported module
    of the project) in the packages' code, as "path:line what"."""
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" in path.relative_to(root).parts:
                continue
            tree = ast.parse(path.read_text(), filename=str(path))
            here = _module_name(root, path)
            modules: dict[str, str] = {}  # a local name -> the project module it is
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.asname and alias.name.split(".")[0] in packages:
                            modules[alias.asname] = alias.name
                elif isinstance(node, ast.ImportFrom):
                    source = _imported_from(node, here, path.name == "__init__.py")
                    for alias in node.names:
                        if _private(alias.name):
                            found.append((path, node.lineno, alias.name))
                        elif _is_module(root, f"{source}.{alias.name}"):
                            modules[alias.asname or alias.name] = f"{source}.{alias.name}"
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Attribute)
                    and _private(node.attr)
                    and isinstance(node.value, ast.Name)
                    and node.value.id in modules
                ):
                    found.append((path, node.lineno, f"{modules[node.value.id]}.{node.attr}"))
    return [f"{path.relative_to(root)}:{line} {what}" for path, line, what in sorted(found)]


def test_private_names_reached_from_other_modules_only_fall():
    found = private_reaches(ROOT)
    assert len(found) <= RECORDED, "\n".join(found)


def test_the_count_finds_each_way_of_reaching_a_private_name(tmp_path):
    package = tmp_path / "app"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "kit.py").write_text("_secret = 1\n\ndef _helper():\n    return _secret\n")
    (package / "user.py").write_text(
        "from app.kit import _secret\n"
        "from app import kit\n"
        "from . import kit as k\n"
        "from .kit import _helper, __name__ as name\n"
        "x = kit._helper() + k._secret + kit.public + _secret + _helper()\n"
    )
    (package / "migrations").mkdir()
    (package / "migrations" / "m.py").write_text("from app.kit import _secret\n")
    found = private_reaches(tmp_path, packages=("app",))
    assert found == [
        "app/user.py:1 _secret",
        "app/user.py:4 _helper",
        "app/user.py:5 app.kit._helper",
        "app/user.py:5 app.kit._secret",
    ]
