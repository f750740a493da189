"""/api/v1/tokens/: a signed-in user's own API tokens.

A token is issued only to a browser session (a person who just logged in, e.g. from
the API docs page), never to another token, so a leaked token cannot renew itself.
Listing and revoking work with either.

A browser that opens /api/v1/tokens/ (a GET that prefers HTML to JSON, without a token
and without `?format=`) is sent to the tokens page, /accounts/tokens/, which does the
same with forms (issue, shown once; list with last use and expiry; revoke) and is
checked with axe; the raw JSON was the only thing there, and DRF's browsable API is
off outside debugging. Every other client gets the JSON as before; the answer varies
on Accept.
"""

from django.conf import settings
from django.http import Http404, HttpResponseRedirect
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from accounts import tokens
from accounts.models import ApiToken
from core.api.base import BaseApiViewSet
from core.api.serializers import ErrorSerializer

ERRORS = {code: ErrorSerializer for code in (400, 401, 403, 404)}


class TokenOutput(serializers.ModelSerializer):
    state = serializers.SerializerMethodField(
        help_text="active, expired or revoked: only an active token authenticates."
    )

    class Meta:
        model = ApiToken
        fields = [
            "id",
            "name",
            "prefix",
            "created_at",
            "expires_at",
            "revoked_at",
            "last_used_at",
            "state",
        ]

    def get_state(self, token) -> str:
        return token.state()


class TokenIssued(TokenOutput):
    token = serializers.CharField(
        help_text="Send as `Authorization: Token <token>`. Shown only in this response."
    )

    class Meta(TokenOutput.Meta):
        fields = [*TokenOutput.Meta.fields, "token"]


class TokenInput(serializers.Serializer):
    name = serializers.CharField(max_length=100, help_text="What the token is for.")
    days = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=settings.API_TOKEN_MAX_DAYS,
        help_text=f"Days until it expires (default {settings.API_TOKEN_DAYS}).",
    )


def wants_page(request) -> bool:
    """A person's browser, not an API client: a GET preferring text/html to JSON (a
    browser's Accept names text/html; `*/*` or none is an API client's), with no
    Authorization header and no `?format=` asking for the JSON."""
    return (
        request.method == "GET"
        and "HTTP_AUTHORIZATION" not in request.META
        and "format" not in request.GET
        and request.get_preferred_type(["application/json", "text/html"]) == "text/html"
    )


@extend_schema_view(
    list=extend_schema(summary="List your API tokens", responses={200: TokenOutput(many=True)}),
    create=extend_schema(
        summary="Issue an API token to the signed-in session",
        request=TokenInput,
        responses={201: TokenIssued, **ERRORS},
    ),
    destroy=extend_schema(summary="Revoke one of your API tokens", responses={204: None, **ERRORS}),
)
class TokenViewSet(BaseApiViewSet):
    permission_classes = [IsAuthenticated]
    serializer_class = TokenOutput

    def dispatch(self, request, *args, **kwargs):
        if self.action_map.get("get") == "list" and wants_page(request):
            response = HttpResponseRedirect(reverse("tokens"))
        else:
            response = super().dispatch(request, *args, **kwargs)
        patch_vary_headers(response, ["Accept"])
        return response

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # the schema: types only, no user
            return ApiToken.objects.none()
        return tokens.token_list(user=self.request.user)

    def list(self, request):
        return self.paginated(self.get_queryset(), TokenOutput)

    def create(self, request):
        if not isinstance(request.successful_authenticator, SessionAuthentication):
            raise PermissionDenied(
                "tokens are issued to a signed-in browser session, not to another token"
            )
        data = self.parse(TokenInput)
        token, key = tokens.token_issue(user=request.user, name=data["name"], days=data.get("days"))
        token.token = key
        return Response(TokenIssued(token).data, status=status.HTTP_201_CREATED)

    def destroy(self, request, pk=None):
        token_id = int(pk) if pk.isdigit() and len(pk) <= 18 else None
        if token_id is None or tokens.token_revoke(user=request.user, token_id=token_id) is None:
            raise Http404
        return Response(status=status.HTTP_204_NO_CONTENT)
