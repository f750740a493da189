"""plotly.js served compressed and cached once collected (the image's build), and plain
files straight from the finders before, or when a source is newer than the collection."""

from __future__ import annotations

import json
import os
from importlib.util import find_spec
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.templatetags.static import static
from django.test import Client

from config.staticfiles import plotlyjs_version
from tests.conftest import REQUIRE_SERVICES


@pytest.fixture
def collected(settings, tmp_path):
    settings.STATIC_ROOT = tmp_path / "static"
    call_command("collectstatic", "--noinput", verbosity=0)
    return tmp_path / "static"


def test_once_collected_plotly_is_hashed_gzipped_and_cached_for_a_year(collected, db):
    url = static("vendor/plotly.min.js")
    assert url != "/static/vendor/plotly.min.js"  # a content hash in the name
    response = Client().get(url, HTTP_ACCEPT_ENCODING="gzip")
    assert response.status_code == 200
    assert response["Content-Encoding"] == "gzip"
    assert int(response["Content-Length"]) < 2_000_000  # 4.7 MB uncompressed
    assert "immutable" in response["Cache-Control"]
    assert "max-age=315360000" in response["Cache-Control"]


def test_a_source_newer_than_the_collection_is_served_as_it_is(collected, settings, db):
    manifest = collected / "staticfiles.json"
    # Older than every source file, whenever this checkout was made.
    past = 86_400  # 2 January 1970
    os.utime(manifest, (past, past))
    settings.STATIC_ROOT = collected  # a fresh storage reads the older manifest
    assert static("js/app.js") == "/static/js/app.js"


def test_before_collectstatic_names_are_plain(settings, tmp_path):
    settings.STATIC_ROOT = tmp_path / "empty"
    assert static("vendor/plotly.min.js") == "/static/vendor/plotly.min.js"


# plotly.js's partial bundle from npm (package.json), or the Python package's full one.

ROOT = Path(__file__).resolve().parents[3]
PARTIAL = "node_modules/plotly.js-cartesian-dist-min/plotly-cartesian.min.js"


def fake_partial(base: Path, version: str) -> Path:
    folder = base / "node_modules" / "plotly.js-cartesian-dist-min"
    folder.mkdir(parents=True)
    (folder / "package.json").write_text(json.dumps({"version": version}))
    (folder / "plotly-cartesian.min.js").write_text("/* partial */")
    return folder / "plotly-cartesian.min.js"


def test_package_json_pins_the_partial_bundle_of_the_python_packages_plotlyjs():
    version = plotlyjs_version()
    pinned = json.loads((ROOT / "package.json").read_text())["dependencies"]
    assert pinned == {"plotly.js-cartesian-dist-min": version}  # exact, no range
    locked = json.loads((ROOT / "package-lock.json").read_text())["packages"]
    assert locked["node_modules/plotly.js-cartesian-dist-min"]["version"] == version


def test_the_partial_bundle_is_served_when_installed_at_the_same_version(settings, tmp_path):
    settings.BASE_DIR = tmp_path
    partial = fake_partial(tmp_path, plotlyjs_version())
    assert finders.find("vendor/plotly.min.js") == str(partial)


def test_without_node_modules_or_at_another_version_the_full_bundle_is_served(settings, tmp_path):
    full = Path(find_spec("plotly").submodule_search_locations[0]) / "package_data"
    settings.BASE_DIR = tmp_path
    assert finders.find("vendor/plotly.min.js") == str(full / "plotly.min.js")
    fake_partial(tmp_path, "2.0.0")  # left over from before a plotly upgrade
    assert finders.find("vendor/plotly.min.js") == str(full / "plotly.min.js")


def test_the_served_plotly_is_the_installed_partial_bundle(db):
    """`make install` runs npm ci; this checkout's server then sends the partial bundle."""
    partial = ROOT / PARTIAL
    if not partial.exists():
        message = "node_modules lacks plotly.js's partial bundle: run make install (npm ci)"
        if REQUIRE_SERVICES:
            pytest.fail(f"REQUIRE_SERVICES=1 but {message}", pytrace=False)
        pytest.skip(message)
    response = Client().get("/static/vendor/plotly.min.js")
    assert response.status_code == 200
    body = b"".join(response.streaming_content)
    assert body == partial.read_bytes()
    assert len(body) < 2_000_000  # the full bundle is 4.7 MB
