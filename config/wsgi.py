import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

application = get_wsgi_application()

# Django imports the URLconf (and with it every view, DRF and the schema) at the first
# request, half a second of a worker's first answer on an idle machine and over two
# with Celery starting beside it: gunicorn loads this module before forking
# (preload_app), so importing it here starts every worker, and every replacement
# worker, warm. It opens no database connection.
get_resolver().url_patterns  # noqa: B018 - evaluated for its imports
