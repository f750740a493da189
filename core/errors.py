"""The domain's errors: one hierarchy, raised by services, mapped once.

Every error carries `errors`, a field name -> messages mapping (NON_FIELD when no
field is at fault), so a page puts them on its form (core.form_errors.apply_errors)
and the API answers them in its one shape (core.api.errors.exception_handler)
without reading the text. The kinds and their HTTP statuses:

- InvalidInput, 400: the input breaks a rule; the fields say which.
- Refused, 403: the actor may not take this action (the rules table's sentence).
  It is a PermissionDenied, so Django's own handling also answers 403.
- NotFound, 404: the object named does not exist (or is not the caller's to see).
- Conflict, 409: the object changed since the client read it, or a client token was
  used for another body; `current`/`submitted` carry both sides so nothing is lost.
- WrongState, 400: the object is not in a state that allows this step (a request
  already decided, a draft approved). 400 and not 409, kept from before: the API's 409
  means "reload and reapply" and always carries both documents (current/submitted);
  a wrong state has nothing to reapply, so it is reported as an error of the field
  `state`, which pages and clients handle like any other invalid input.

This module imports no model, service or view, so any layer of any app imports it.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.core.exceptions import PermissionDenied

NON_FIELD = "non_field_errors"


def _errors(errors: Mapping[str, list[str]] | str) -> dict[str, list[str]]:
    if isinstance(errors, str):
        return {NON_FIELD: [errors]}
    return {key: [str(message) for message in messages] for key, messages in errors.items()}


class DomainError(Exception):
    """A service refuses a request. `errors` maps a field name to its messages."""

    status = 400

    def __init__(self, errors: Mapping[str, list[str]] | str):
        self.errors = _errors(errors) or {NON_FIELD: ["invalid request"]}
        first_field, first_messages = next(iter(self.errors.items()))
        super().__init__(
            first_messages[0] if first_field == NON_FIELD else f"{first_field}: {first_messages[0]}"
        )

    def details(self) -> dict:
        """What the API adds to the error shape beyond `detail` and `errors`."""
        return {}

    def messages(self) -> list[str]:
        """Every message, in order, for a page that shows them as notices."""
        return [message for messages in self.errors.values() for message in messages]

    def sentence(self) -> str:
        """The messages as one sentence, for a notice."""
        return "; ".join(self.messages())


class InvalidInput(DomainError):
    """The input breaks a rule; `errors` names the fields at fault."""


class Refused(DomainError, PermissionDenied):
    """The actor may not take this action; the message (the rules table's) says why."""

    status = 403

    def __init__(self, message: str = "you may not do this"):
        super().__init__({NON_FIELD: [message]})


class NotFound(DomainError):
    status = 404

    def __init__(self, message: str = "not found"):
        super().__init__({NON_FIELD: [message]})


class Conflict(DomainError):
    """The object changed since the client read it. `current`, `current_version` and
    `submitted` carry both sides (None when the conflict has no document)."""

    status = 409

    def __init__(
        self,
        errors: Mapping[str, list[str]] | str,
        *,
        current=None,
        current_version: int | None = None,
        submitted=None,
        submitted_version: int | None = None,
    ):
        super().__init__(errors)
        self.current = current
        self.current_version = current_version
        self.submitted = submitted
        self.submitted_version = submitted_version

    def __str__(self) -> str:
        # The sentence alone: pages show it above both versions.
        return self.messages()[0]

    def details(self) -> dict:
        """What the API adds to the error shape so the client loses nothing."""
        return {
            "current": self.current,
            "current_version": self.current_version,
            "submitted": self.submitted,
            "submitted_version": self.submitted_version,
        }


class WrongState(DomainError):
    """The object is not in a state that allows this step (reported on `field`)."""

    def __init__(self, message: str, *, field: str = "state"):
        super().__init__({field: [message]})
