"""A WSGI app that takes a second per request: test_gunicorn fills gunicorn with it."""

import time

SECONDS = 1.0


def app(environ, start_response):
    time.sleep(SECONDS)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]
