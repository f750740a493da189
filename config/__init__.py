"""The project: settings, URLs, the Celery app and the WSGI entry point, apart from the
features (governance/, scheduler/, accounts/, demo/)."""

from config.celery import app as celery_app

__all__ = ["celery_app"]
