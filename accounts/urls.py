from django.urls import path
from rest_framework.routers import SimpleRouter

from accounts import views
from accounts.api import TokenViewSet

router = SimpleRouter()
router.register("api/v1/tokens", TokenViewSet, basename="api-token")

urlpatterns = [
    *router.urls,
    path("accounts/lockouts/", views.lockouts, name="lockouts"),
]
