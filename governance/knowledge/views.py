"""Knowledge base pages: search (one box, filters, ranked results), an article with its
history, and the editor. Thin: rules in core.rules and the knowledge services;
reads through governance.knowledge.selectors."""

from __future__ import annotations

from dataclasses import replace

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render

from core import rules
from core.errors import InvalidInput
from core.filters import page_query
from core.form_errors import apply_errors
from governance.exceptions.forms import ArticleForm
from governance.exceptions.permissions import who_may_change
from governance.knowledge.filters import KnowledgeSearchFilter
from governance.knowledge.selectors import (
    article_get,
    article_history,
    article_search,
    tag_choices,
)
from governance.knowledge.services import article_create, article_update
from governance.models import KnowledgeArticle
from governance.policy.services import VersionConflict


def knowledge_search(request):
    rules.require(request.user, "knowledge.view")
    filters = KnowledgeSearchFilter(request.GET or None, tags=tag_choices(user=request.user))
    values = page_query(filters)
    query = values.get("q", "")
    hits = article_search(
        user=request.user,
        query=query,
        tag=values.get("tag"),
        share_id=values.get("share"),
    )
    context = {
        "form": filters.form,
        "hits": hits,
        "query": query,
        "filtered": bool(values.get("tag") or values.get("share")),
    }
    if request.htmx:
        return render(request, "governance/knowledge/_results.html", context)
    return render(request, "governance/knowledge/search.html", context)


def _article(request, slug: str) -> KnowledgeArticle:
    """The article, or 404 when it does not exist or the user may not see it (a decision
    record of a request they may not see is not admitted to exist)."""
    try:
        article = article_get(slug=slug)
    except KnowledgeArticle.DoesNotExist:
        raise Http404("No such article") from None
    if not rules.allowed(request.user, "article.view", article):
        raise Http404("No such article")
    return article


def article_detail(request, slug: str):
    rules.require(request.user, "knowledge.view")
    article = _article(request, slug)
    return render(
        request,
        "governance/knowledge/detail.html",
        {
            "article": article,
            "revisions": article_history(article=article),
            "who_may_change": who_may_change(article),
        },
    )


def article_new(request):
    rules.require(request.user, "knowledge.write")
    form = ArticleForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            article = article_create(
                actor=request.user, data=form.article_data(), reason=form.cleaned_data["reason"]
            )
        except InvalidInput as error:
            apply_errors(form, error)
        else:
            messages.success(request, "Article published.")
            return redirect("knowledge-article", slug=article.slug)
    return render(
        request,
        "governance/knowledge/edit.html",
        {"form": form, "article": None},
        status=400 if form.errors else 200,
    )


def article_edit(request, slug: str):
    article = _article(request, slug)
    rules.require(request.user, "article.edit", article)
    if request.method == "POST":
        form = ArticleForm(request.POST)
        if form.is_valid():
            try:
                data = form.article_data(exception_requests=article.exception_requests.all())
                if not rules.allowed(request.user, "article.editors", article):
                    # The field is not shown to them: the editor list stays as it is.
                    data = replace(data, editors=list(article.editors.all()))
                article = article_update(
                    actor=request.user,
                    article=article,
                    data=data,
                    expected_version=form.cleaned_data.get("version") or article.version,
                    reason=form.cleaned_data["reason"],
                )
            except VersionConflict as conflict:
                form.add_error(
                    None,
                    f"{conflict} Your text is kept below; the saved version is "
                    f"{conflict.current_version}.",
                )
                data = request.POST.copy()
                data["version"] = str(conflict.current_version)
                form = _rebound(data, form)
            except InvalidInput as error:
                apply_errors(form, error)
            else:
                messages.success(request, f"Article saved (version {article.version}).")
                return redirect("knowledge-article", slug=article.slug)
    else:
        form = ArticleForm(initial=ArticleForm.initial_for(article))
    return render(
        request,
        "governance/knowledge/edit.html",
        {"form": form, "article": article},
        status=400 if form.errors else 200,
    )


def _rebound(data, old_form) -> ArticleForm:
    """The editor's input on top of the newer version, with the conflict message kept."""
    form = ArticleForm(data)
    form.is_valid()
    for error in old_form.non_field_errors():
        form.add_error(None, error)
    return form
