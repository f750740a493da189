"""Serve browser assets that ship inside installed Python packages, and serve every
static file compressed and cached once collected.

plotly.js is exposed as `vendor/plotly.min.js` so pages load it from our own server:
plotly's own partial bundle of the trace types our charts draw (`bar`, `box`,
`scatter`: the npm package plotly.js-cartesian-dist-min, pinned in package.json and
installed into node_modules/ by `make install`), 1.3 MB where the full bundle is
4.7 MB, so Chromium compiles and runs a third of it before the first chart. Without
node_modules (no npm), or when the installed bundle is not the version of plotly.js
inside the Python `plotly` package, the full bundle of that package is served instead.
Nothing third-party is copied into the repo.
"""

import json
import re
from importlib.util import find_spec
from pathlib import Path

from django.conf import settings
from django.contrib.staticfiles import finders
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage
from whitenoise.storage import CompressedManifestStaticFilesStorage


class CollectedStaticFilesStorage(CompressedManifestStaticFilesStorage):
    """Once collectstatic has run (the image's build), pages name each static file by
    a hash of its content and WhiteNoise serves the gzip (and brotli) copies it wrote,
    cached for a year: plotly.js goes from 4.7 MB to about a third, once per version.
    Before that (development, tests), in DEBUG, and when a source file is newer than
    the collection (a working tree where collectstatic once ran), names are plain and
    the files come from the finders as they are: an old collection never shadows an
    edit."""

    manifest_strict = False
    _current: bool | None = None

    def stored_name(self, name):
        if settings.DEBUG or not self.hashed_files or not self._collection_is_current():
            return name
        return super().stored_name(name)

    def _collection_is_current(self) -> bool:
        if self._current is None:
            manifest = Path(self.location) / self.manifest_name
            collected = manifest.stat().st_mtime if manifest.exists() else 0
            self._current = collected > 0 and all(
                Path(storage.path(path)).stat().st_mtime <= collected
                for finder in finders.get_finders()
                for path, storage in finder.list([])
            )
        return self._current


def _package_file(package: str, *parts: str) -> Path:
    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"package {package!r} is not installed")
    return Path(next(iter(spec.submodule_search_locations))).joinpath(*parts)


PACKAGE_ASSETS = {
    "vendor/plotly.min.js": ("plotly", "package_data", "plotly.min.js"),
}

# Served instead of a PACKAGE_ASSETS entry when npm installed it (node_modules/, a
# path under settings.BASE_DIR) at the version of plotly.js in the Python package.
NODE_ASSETS = {
    "vendor/plotly.min.js": (
        "node_modules/plotly.js-cartesian-dist-min",
        "plotly-cartesian.min.js",
    ),
}


def plotlyjs_version() -> str:
    """The version of plotly.js inside the Python `plotly` package (read from its
    generated version file, without importing plotly)."""
    text = _package_file("plotly", "offline", "_plotlyjs_version.py").read_text()
    return re.search(r"__plotlyjs_version__\s*=\s*[\"']([^\"']+)", text).group(1)


def node_asset(name: str) -> Path | None:
    """The npm-installed file served as `name`, or None when it is not installed or
    not the Python package's plotly.js version."""
    if name not in NODE_ASSETS:
        return None
    package, filename = NODE_ASSETS[name]
    folder = Path(settings.BASE_DIR) / package
    try:
        version = json.loads((folder / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None
    location = folder / filename
    if version != plotlyjs_version() or not location.exists():
        return None
    return location


class PackageAssetFinder(BaseFinder):
    def _assets(self):
        for name, (package, *parts) in PACKAGE_ASSETS.items():
            yield name, node_asset(name) or _package_file(package, *parts)

    def find(self, path, find_all=False, **kwargs):
        for name, location in self._assets():
            if name == path and location.exists():
                return [str(location)] if find_all else str(location)
        # Not here: [] as Django's own finders answer, whatever find_all. The module's
        # find() lists every finder's answer, and a None in that list made it answer
        # [None] for a missing file, which the static files view (runserver --insecure
        # with DEBUG off) took for a path: a 500 (TypeError) instead of a 404.
        return []

    def list(self, ignore_patterns):
        for name, location in self._assets():
            yield name, _RenamedStorage(location, name)


class _RenamedStorage(FileSystemStorage):
    """A storage holding one file under another name, for collectstatic."""

    def __init__(self, location: Path, name: str):
        super().__init__(location=str(location.parent))
        self._real = location.name
        self._name = name

    def path(self, name):
        return super().path(self._real)

    def open(self, name, mode="rb"):
        return super().open(self._real, mode)

    def get_modified_time(self, name):
        return super().get_modified_time(self._real)
