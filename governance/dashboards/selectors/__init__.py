"""The signals (design.md, "The signals"): computed here and nowhere else.

`month_signals` reads the raw record of one month (jobs, job events, policy changes,
exception requests) and returns the figures of every scope: the organisation (`all`),
each queue (`q<id>`), each share (`q<id>/s<id>`), each team across queues (`t<id>`)
and each team within a queue (`q<id>/t<id>`). Rollups (governance.dashboards.rollups)
store them; the dashboard, the signals API and the monthly pack read only the rollups.

The formulas and their definitions live in governance.dashboards.formulas; the month
rule is `formulas.MONTH_RULE` (a figure counts in the month it was settled). The job
record is replayed in time order by governance.dashboards.timeline; `signals` gathers
its rows and counts the policy record (edits, exceptions, reviews).

Weeks start on Monday (UTC); the month's first week starts on its first day.

The modules: `calendar` (months and weeks), `scopes` (scope keys, and the sums of a
scope's figures), `signals` (the computation: `month_signals`) and `reads` (what the
dashboard, the API and the pack read of the stored rollups, and the policy in force
at an instant).
"""
