"""The migration graph points down the layers, as the imports do: no app's migration
depends on a migration of an app above it (or beside it) in pyproject.toml's layers. The
fleet's migrations depend on nothing above the fleet: on a new database they run first
(fleet.migration_state.AdoptTables; tests/fleet/test_models_moved.py holds a database
built that way to the one the old order built)."""

from django.db.migrations.loader import MigrationLoader

# Higher is above; apps on one level are independent of each other. Apps that are not
# ours (django.contrib, axes) are below all of them.
LEVEL = {"governance": 3, "accounts": 3, "scheduler": 2, "fleet": 1}

# Dependencies from before the fleet's models moved out of governance (all applied on
# every deployed database): the scheduler's models pointed at governance's queues,
# shares and teams, so their state needs governance's. The scheduler's part of the move
# (0007) follows governance's first step of it. None may be added.
BEFORE_THE_MOVE = {
    (("scheduler", "0001_initial"), ("governance", "0001_initial")),
    (("scheduler", "0002_live_scheduler"), ("governance", "0001_initial")),
    (("scheduler", "0003_job_definitions_leases_runners"), ("governance", "0006_whatif")),
    (("scheduler", "0005_lazy_pass"), ("governance", "0007_rules_and_duties")),
    (("scheduler", "0006_job_share_newest"), ("governance", "0009_monthlyrollup_version")),
    (("scheduler", "0007_fleet_models_moved"), ("governance", "0010_fleet_models_referenced")),
}


def upward_dependencies() -> set[tuple[tuple[str, str], tuple[str, str]]]:
    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    upward = set()
    for key, node in graph.node_map.items():
        if key[0] not in LEVEL:
            continue
        for parent in node.parents:
            app = parent.key[0]
            if app != key[0] and LEVEL.get(app, 0) >= LEVEL[key[0]]:
                upward.add((key, parent.key))
    return upward


def test_no_migration_depends_on_an_app_above_it():
    assert upward_dependencies() - BEFORE_THE_MOVE == set()


def test_the_history_from_before_the_move_is_still_what_it_was():
    """Each recorded exception is still in the graph: one gone is taken off the list."""
    assert upward_dependencies() >= BEFORE_THE_MOVE
