"""Monthly rollups of the signals: derived data, rebuilt from job events and the policy
record by governance.dashboards.rollups, so the dashboard never scans raw events.

One row per month and *scope*: the whole organisation (`all`), a queue (`q<id>`), a
share of a queue (`q<id>/s<id>`) or a team across queues (`t<id>`). `data` holds the
figures of governance.dashboards.selectors.signals.month_signals (plain JSON: counts,
GPU-seconds, duration statistics, weekly series, the repeated yielders); `version` the
version of those figures (signals.SIGNALS_VERSION) that computed them, so a release
that adds a figure recomputes older months instead of reading a figure they lack.
"""

from django.db import models


class MonthlyRollup(models.Model):
    month = models.DateField(help_text="The first day of the month (UTC).")
    scope = models.CharField(max_length=64)
    queue = models.ForeignKey(
        "fleet.JobQueue", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    share = models.ForeignKey(
        "fleet.QuotaShare",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
    )
    team = models.ForeignKey(
        "fleet.Team", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    data = models.JSONField(default=dict)
    version = models.PositiveSmallIntegerField(
        default=0,
        help_text="The version of the signals that computed `data`; 0: unknown (stale).",
    )
    computed_at = models.DateTimeField()

    class Meta:
        ordering = ["month", "scope"]
        constraints = [
            models.UniqueConstraint(fields=["month", "scope"], name="monthlyrollup_unique_scope")
        ]

    def __str__(self):
        return f"{self.month:%Y-%m} {self.scope}"
