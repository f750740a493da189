from django.urls import path

from governance.directory import views

urlpatterns = [
    path("directory/", views.directory, name="directory"),
    path(
        "directory/mappings/<int:pk>/delete/",
        views.mapping_delete,
        name="directory-mapping-delete",
    ),
]
