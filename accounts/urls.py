from django.urls import path
from rest_framework.routers import SimpleRouter

from accounts import views
from accounts.api import TokenViewSet

router = SimpleRouter()
router.register("api/v1/tokens", TokenViewSet, basename="api-token")

urlpatterns = [
    *router.urls,
    path("accounts/lockouts/", views.lockouts, name="lockouts"),
    path("accounts/profile/", views.profile, name="profile"),
    path("accounts/profile/time-zone/", views.time_zone_detect, name="time-zone-detect"),
    path("accounts/tokens/", views.token_list, name="tokens"),
    path("accounts/tokens/<int:pk>/revoke/", views.token_revoke, name="token-revoke"),
]
