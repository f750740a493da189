"""The governance product, one package per feature: policy, exceptions, knowledge,
proposals, dashboards, whatif and policy_code, each with its own models, services,
selectors, views, API, forms, tasks and URLs. What they share sits at the top: the
rules table (rules.py), roles (permissions.py), domain errors (errors.py), bounds,
filters, notifications, the glossary and the template tags. models.py only gathers the
features' models for Django's app registry."""
