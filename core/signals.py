"""Signals other apps listen to. The live scheduler connects to policy_changed."""

from django.dispatch import Signal

# Sent after commit when a queue's policy changed; kwargs: queue_id.
policy_changed = Signal()

# Sent when an executor's binding of a queue or of an instance type was written outside
# the policy editor (its commands, the demo, the benchmarks); kwargs: instance (the
# JobQueue or InstanceType), before, after (documents).
# The policy history records it as a direct change.
executor_binding_written = Signal()

# Sent (inside the transaction) when the organisation's directory no longer lists a user
# (governance.directory); kwargs: user. accounts revokes the user's API tokens and
# ends their open sessions.
directory_user_unlisted = Signal()

# Sent when an OIDC account without a refresh token has not signed in for
# OIDC_MAX_IDLE_HOURS (governance.directory.tasks); kwargs: user, why. accounts revokes
# the user's API tokens (roles and teams stay until their next login).
directory_tokens_expired = Signal()
