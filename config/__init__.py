"""The project: settings, URLs, the Celery app's wiring and the WSGI entry point, apart
from the features (governance/, scheduler/, accounts/, demo/). The top of the layers: it
names the apps, none imports it (the Celery app itself, which they use, is core.celery's).
`celery -A config` finds the app here."""

from config.celery import app as celery_app

__all__ = ["celery_app"]
