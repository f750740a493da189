"""The layers contract of our own (config/import_contracts.py): it finds every import
cycle, however long and whatever the order, names one concrete loop, and passes a
graph without one. `lint-imports` runs it over the project in `make test`. And the
scheduler's public face to governance (pyproject.toml) leaves no module undecided."""

from importlinter.domain.contract import ContractCheck

from config.import_contracts import NoModuleCycles


class Graph:
    """The two questions the contract asks of grimp's import graph."""

    def __init__(self, imports: dict[str, set[str]]):
        self.imports = imports

    def find_descendants(self, package: str) -> set[str]:
        return {module for module in self.imports if module.startswith(f"{package}.")}

    def find_modules_directly_imported_by(self, module: str) -> set[str]:
        return set(self.imports.get(module, ()))


def check(imports: dict[str, set[str]], **options) -> ContractCheck:
    contract = NoModuleCycles(
        name="no cycles",
        session_options={},
        contract_options={"packages": ["app"], **options},
    )
    return contract.check(Graph(imports), verbose=False)


def test_a_graph_without_cycles_keeps_the_contract():
    found = check({"app": set(), "app.a": {"app.b", "app.c"}, "app.b": {"app.c"}, "app.c": set()})
    assert found.kept


def test_a_long_cycle_is_found_and_one_loop_named():
    found = check(
        {
            "app": set(),
            "app.tasks": {"app.services.passes"},
            "app.services.passes": {"app.executors"},
            "app.executors": {"app.tasks", "app.models"},
            "app.models": set(),
        }
    )
    assert not found.kept
    assert found.metadata["loops"] == [
        ["app.executors", "app.tasks", "app.services.passes", "app.executors"]
    ]


def test_separate_cycles_are_each_reported_and_skipped_packages_ignored():
    imports = {
        "app": set(),
        "app.a": {"app.b"},
        "app.b": {"app.a"},
        "app.c": {"app.d"},
        "app.d": {"app.c"},
        "app.migrations.m1": {"app.migrations.m2"},
        "app.migrations.m2": {"app.migrations.m1"},
    }
    found = check(imports, skip=["migrations"])
    assert found.metadata["loops"] == [["app.a", "app.b", "app.a"], ["app.c", "app.d", "app.c"]]


# The scheduler's public face to governance (pyproject.toml's forbidden contract).
SCHEDULER_PUBLIC = {
    "scheduler.services",
    "scheduler.selectors",
    "scheduler.models",
    "scheduler.metrics",
}


def test_every_scheduler_module_is_public_or_forbidden_to_governance():
    """A new top-level module of the scheduler is decided: public (and listed here) or
    kept from governance by the contract; otherwise the contract would let it through."""
    import pkgutil
    import tomllib
    from pathlib import Path

    import scheduler

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    contracts = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c["name"].startswith("Governance uses the scheduler")]
    forbidden = set(contract["forbidden_modules"])
    modules = {f"scheduler.{info.name}" for info in pkgutil.iter_modules(scheduler.__path__)}
    assert not forbidden & SCHEDULER_PUBLIC
    assert modules - SCHEDULER_PUBLIC == forbidden
