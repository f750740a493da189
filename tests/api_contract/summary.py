"""What the Schemathesis run answered, counted per identity and operation, for the
summary line pytest prints at the end (tests/api_contract/conftest.py)."""

from collections import Counter, defaultdict

# (username, "METHOD /path") -> status code -> responses.
RESPONSES: dict[tuple[str, str], Counter] = defaultdict(Counter)
