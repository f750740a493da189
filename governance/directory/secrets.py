"""Secrets the product keeps for the directory (the OIDC provider's refresh tokens),
encrypted at rest with Fernet (AES-128-CBC and HMAC-SHA256, from `cryptography`) under a
key derived from SECRET_KEY (HKDF-SHA256, its own context). A database dump alone gives
no usable refresh token. A SECRET_KEY rotated since makes a stored token unreadable:
`reveal` returns "" and the account is treated as one without a refresh token (the idle
expiry applies) until its next login stores a new one."""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

_CONTEXT = b"gpuq directory refresh tokens v1"


def _fernet() -> Fernet:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_CONTEXT).derive(
        settings.SECRET_KEY.encode()
    )
    return Fernet(base64.urlsafe_b64encode(key))


def seal(secret: str) -> str:
    """`secret` encrypted (empty stays empty)."""
    return _fernet().encrypt(secret.encode()).decode() if secret else ""


def reveal(sealed: str) -> str:
    """The secret `seal` encrypted, or "" (none stored, or another SECRET_KEY's)."""
    if not sealed:
        return ""
    try:
        return _fernet().decrypt(sealed.encode()).decode()
    except InvalidToken:
        return ""
