"""/api/v1/tokens/: a signed-in user's own API tokens.

A token is issued only to a browser session (a person who just logged in, e.g. from
the API docs page), never to another token, so a leaked token cannot renew itself.
Listing and revoking work with either.
"""

from django.conf import settings
from django.http import Http404
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
