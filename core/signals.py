"""Signals other apps listen to. The live scheduler connects to policy_changed."""

from django.dispatch import Signal

# Sent after commit when a queue's policy changed; kwargs: queue_id.
policy_changed = Signal()
# Sent (inside the transaction) when the organisation's directory no longer lists a user
# (governance.directory); kwargs: user. accounts revokes the user's API tokens.
directory_user_unlisted = Signal()
