"""Serve browser assets that ship inside installed Python packages, and serve every
static file compressed and cached once collected.

plotly.js comes with the `plotly` package; it is exposed as `vendor/plotly.min.js`
so pages load it from our own server. Nothing third-party is copied into the repo.
"""

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


class PackageAssetFinder(BaseFinder):
    def _assets(self):
        for name, (package, *parts) in PACKAGE_ASSETS.items():
            yield name, _package_file(package, *parts)

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
