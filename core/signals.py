"""Signals other apps listen to. The live scheduler connects to policy_changed."""

from django.dispatch import Signal

# Sent after commit when a queue's policy changed; kwargs: queue_id.
policy_changed = Signal()
