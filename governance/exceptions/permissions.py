"""The rules of exception requests and knowledge articles, under the names pages and
the API already use. Each is the answer of core.rules, the one table; the
`*_refusal` functions return None when the action is allowed and otherwise the
sentence that tells the user why not.
"""

from __future__ import annotations

from core import rules


def can_view_exceptions(user) -> bool:
    return rules.allowed(user, "exception.list")


def can_file_requests(user) -> bool:
    return rules.allowed(user, "exception.file")


def can_decide_requests(user) -> bool:
    return rules.allowed(user, "exception.decide")


def can_view_decision_queue(user) -> bool:
    return rules.allowed(user, "exception.decision_queue")


def can_view_exception_counts(user) -> bool:
    return rules.allowed(user, "exception.counts")


def can_view_request(user, request) -> bool:
    return rules.allowed(user, "exception.view", request)


def file_refusal(user, team) -> str | None:
    return rules.refusal(user, "exception.file", team)


def submit_refusal(user, request) -> str | None:
    return rules.refusal(user, "exception.submit", request)


def decide_refusal(user, request) -> str | None:
    return rules.refusal(user, "exception.decide", request)


def revoke_refusal(user, request) -> str | None:
    return rules.refusal(user, "exception.revoke", request)


def can_view_knowledge(user) -> bool:
    return rules.allowed(user, "knowledge.view")


def can_write_articles(user) -> bool:
    return rules.allowed(user, "knowledge.write")


def can_edit_article(user, article) -> bool:
    return rules.allowed(user, "article.edit", article)


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
