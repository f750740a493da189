"""The policy knowledge base: articles that say why a policy exists and who may change it.

The body is Markdown; `body_html` (rendered and sanitised) and `body_text` (plain
text, what search indexes and snippets quote) are derived from it by
governance.knowledge.services on every save. Full-text search lives in
governance.knowledge.search: a GIN expression index on PostgreSQL, an FTS5 table on SQLite,
both created by migration 0004.
"""

from django.conf import settings
from django.core.validators import MaxLengthValidator
from django.db import models

from core.bounds import MAX_ARTICLE_BODY, MAX_TEXT
from fleet.models import QuotaShare, UrgencyDefinition
from governance.exceptions.models import ExceptionRequest


class Tag(models.Model):
    name = models.SlugField(max_length=50, unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class KnowledgeArticle(models.Model):
    class Kind(models.TextChoices):
        ALLOCATION = "ALLOCATION", "Allocation decision"
        RECLAIM = "RECLAIM", "Reclaim assumption"
        INTERRUPTION = "INTERRUPTION", "Interruption contract"
        EXCEPTION = "EXCEPTION", "Exception decision"
        URGENCY = "URGENCY", "Urgency policy"
        REFERENCE = "REFERENCE", "Reference"

    title = models.CharField(max_length=200)
    slug = models.SlugField(max_length=200, unique=True)
    kind = models.CharField(max_length=16, choices=Kind, default=Kind.REFERENCE)
    body = models.TextField(
        max_length=MAX_ARTICLE_BODY,
        validators=[MaxLengthValidator(MAX_ARTICLE_BODY)],
        help_text="Markdown.",
    )
    body_html = models.TextField(editable=False, default="")
    body_text = models.TextField(editable=False, default="")
    tags = models.ManyToManyField(Tag, blank=True, related_name="articles")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="owned_articles",
    )
    editors = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="editable_articles",
        help_text="Besides the owner and platform admins, who may change this article.",
    )
    shares = models.ManyToManyField(QuotaShare, blank=True, related_name="articles")
    urgencies = models.ManyToManyField(UrgencyDefinition, blank=True, related_name="articles")
    exception_requests = models.ManyToManyField(
        ExceptionRequest, blank=True, related_name="articles"
    )
    # Set on the decision record of a decided request: append-only, and seen only by
    # those who may see the request (core.rules, "article.view").
    decision_for = models.OneToOneField(
        ExceptionRequest,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="decision_record",
    )
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["title", "id"]

    def __str__(self):
        return self.title


class ArticleRevision(models.Model):
    """The article as one save left it. Append-only: the article's history."""

    article = models.ForeignKey(
        KnowledgeArticle, on_delete=models.CASCADE, related_name="revisions"
    )
    version = models.PositiveIntegerField()
    title = models.CharField(max_length=200)
    body = models.TextField(
        max_length=MAX_ARTICLE_BODY, validators=[MaxLengthValidator(MAX_ARTICLE_BODY)]
    )
    tags = models.JSONField(default=list)
    editor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reason = models.TextField(
        max_length=MAX_TEXT, validators=[MaxLengthValidator(MAX_TEXT)], blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-version"]
        constraints = [
            models.UniqueConstraint(fields=["article", "version"], name="articlerevision_unique")
        ]

    def __str__(self):
        return f"{self.article} v{self.version}"
