"""A WSGI app that takes half a second per request: test_gunicorn fills gunicorn with it."""

import time


def app(environ, start_response):
    time.sleep(0.5)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]
