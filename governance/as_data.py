"""One object as data: "View as JSON / YAML" on the queue, share, job, job definition,
exception request and knowledge article pages (templates/components/as_data.html).

The data is what the API answers at the object's detail URL, for this user: the view
asks the API view itself (a GET of `/api/v1/<resource>/<id>/` with the page's session),
so the fields, the permissions (a lead does not see another team's exception request
here either) and what is shown to whom (a job definition's environment, admins only)
are the API's by construction, not a second copy of them. The API's JSON renderer
writes it; JSON and YAML are made from that same JSON.

GET /data/<kind>/<id>/             the panel (an htmx request) or a page with it
GET /data/<kind>/<id>/?format=json the JSON, to read or save
GET /data/<kind>/<id>/?format=yaml the YAML, as a download
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass

import yaml
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import render
from django.urls import resolve, reverse
from rest_framework.renderers import JSONRenderer

# Kind in the page's URL -> (the API's detail route, what a person calls it).
KINDS: dict[str, tuple[str, str]] = {
    "queue": ("api-queue-detail", "Queue"),
    "share": ("api-share-detail", "Share"),
    "job": ("api-job-detail", "Job"),
    "definition": ("api-job-definition-detail", "Job definition"),
    "exception": ("api-exception-request-detail", "Exception request"),
    "article": ("api-knowledge-article-detail", "Knowledge article"),
}
FORMATS = ("json", "yaml")


@dataclass(frozen=True)
class ApiAnswer:
    status: int
    data: object  # the JSON the API answered, as Python values
    path: str  # the API's detail URL

    @property
    def ok(self) -> bool:
        return self.status == 200

    @property
    def message(self) -> str:
        """The API's refusal, in its one error shape (core.api.errors)."""
        if isinstance(self.data, dict):
            return str(self.data.get("detail") or self.data.get("message") or "")
        return ""


def api_answer(request, kind: str, pk: int) -> ApiAnswer:
    """What GET on the object's API detail URL answers `request`'s user: the API's own
    view, called with the page's session, no query string and JSON asked for."""
    if kind not in KINDS:
        raise Http404("no such kind of object")
    path = reverse(KINDS[kind][0], kwargs={"pk": pk})
    match = resolve(path)
    inner = copy.copy(request)
    inner.method = "GET"
    inner.path = inner.path_info = path
    inner.GET = QueryDict()
    inner.META = {**request.META, "HTTP_ACCEPT": "application/json", "QUERY_STRING": ""}
    response = match.func(inner, *match.args, **match.kwargs)
    # Through the API's renderer, so every value (times, decimals) is the API's JSON.
    data = json.loads(JSONRenderer().render(response.data)) if response.data is not None else None
    return ApiAnswer(status=response.status_code, data=data, path=path)


def as_json(data) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False)


def as_yaml(data) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)


def _label(kind: str, pk: int, data) -> str:
    name = ""
    if isinstance(data, dict):
        name = data.get("name") or data.get("title") or ""
    return f"{KINDS[kind][1]} {name or f'#{pk}'}"


def object_data(request, kind: str, pk: int):
    """The object as JSON and YAML, as the API shows it to this user; refused as the API
    refuses (404 or 403, with its sentence)."""
    if kind not in KINDS:
        raise Http404("no such kind of object")
    fmt = request.GET.get("format", "")
    if fmt and fmt not in FORMATS:
        return HttpResponse(
            f"format: must be one of {', '.join(FORMATS)}, not {fmt[:20]!r}",
            status=400,
            content_type="text/plain; charset=utf-8",
        )
    answer = api_answer(request, kind, pk)
    if not answer.ok:
        if request.htmx:
            # The panel says why in place (htmx swaps no error answer).
            return render(request, "components/_as_data_panel.html", {"refused": answer.message})
        if answer.status == 403:
            raise PermissionDenied(answer.message)
        raise Http404(answer.message)
    filename = f"{kind}-{pk}"
    if fmt == "json":
        response = HttpResponse(as_json(answer.data), content_type="application/json")
        response["Content-Disposition"] = f'inline; filename="{filename}.json"'
        return response
    if fmt == "yaml":
        response = HttpResponse(
            as_yaml(answer.data), content_type="application/yaml; charset=utf-8"
        )
        response["Content-Disposition"] = f'attachment; filename="{filename}.yaml"'
        return response
    context = {
        "label": _label(kind, pk, answer.data),
        "json_text": as_json(answer.data),
        "yaml_text": as_yaml(answer.data),
        "api_path": answer.path,
        "data_url": request.path,
        "filename": filename,
        "dom_id": f"as-data-{kind}-{pk}",
        "kind": kind,
        "pk": pk,
    }
    if request.htmx:
        return render(request, "components/_as_data_panel.html", context)
    return render(request, "components/as_data_page.html", context)
