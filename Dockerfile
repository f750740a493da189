# One image for web, worker, runner and beat (see docker-compose.yml).

# The browser assets npm installs (package.json, pinned by package-lock.json): plotly.js's
# partial bundle, which collectstatic below serves as vendor/plotly.min.js.
FROM node:20-slim AS browser-assets
WORKDIR /assets
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --loglevel=error

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 VAR_DIR=/app/var
WORKDIR /app
# python-ldap (the LDAP login) builds from source against OpenLDAP's and SASL's headers.
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libldap2-dev libsasl2-dev \
    && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml ./
COPY . .
COPY --from=browser-assets /assets/node_modules ./node_modules
RUN pip install --no-cache-dir . && python manage.py collectstatic --noinput
# `app` runs the web server, the scheduling worker and beat. `runner` is the account
# the runner (started as root) runs jobs as: it owns nothing of the application, so a
# job can read neither its files under /app/var nor its processes' environment.
RUN useradd --create-home app \
    && useradd --system --create-home --home-dir /home/runner --shell /usr/sbin/nologin runner \
    && mkdir -p /app/var && chown -R app /app/var && chmod 0750 /app/var
USER app
EXPOSE 8000
CMD ["gunicorn", "-c", "gunicorn.conf.py", "config.wsgi"]
