"""The rules of exception requests and knowledge articles the API asks under these
names (pages ask core.rules itself). Each is the answer of core.rules, the one table.
"""

from __future__ import annotations

from core import rules


def can_view_exceptions(user) -> bool:
    return rules.allowed(user, "exception.list")


def can_file_requests(user) -> bool:
    return rules.allowed(user, "exception.file")


def can_view_exception_counts(user) -> bool:
    return rules.allowed(user, "exception.counts")


def can_view_request(user, request) -> bool:
    return rules.allowed(user, "exception.view", request)


def can_view_knowledge(user) -> bool:
    return rules.allowed(user, "knowledge.view")


def can_write_articles(user) -> bool:
    return rules.allowed(user, "knowledge.write")


def who_may_change(article) -> list[str]:
    """The people who may change `article`, in words, for its page."""
    if getattr(article, "decision_for_id", None) is not None:
        return ["nobody: a decision record is append-only"]
    names = []
    if article.owner is not None:
        names.append(f"{_name(article.owner)} (owner)")
    names += [_name(editor) for editor in article.editors.all() if editor != article.owner]
    names.append("platform admins")
    return names


def _name(user) -> str:
    return user.get_full_name() or user.get_username()
