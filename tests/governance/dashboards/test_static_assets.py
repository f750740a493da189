"""plotly.js served compressed and cached once collected (the image's build), and plain
files straight from the finders before, or when a source is newer than the collection."""

from __future__ import annotations

import os

import pytest
from django.core.management import call_command
from django.templatetags.static import static
from django.test import Client


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
