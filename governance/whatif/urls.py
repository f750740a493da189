"""What-if pages (include from governance/urls.py, next to the other pages); its API is
governance.whatif.api, routed by governance.api.urls."""

from django.urls import path

from governance.whatif import views as whatif

urlpatterns = [
    path("what-if/", whatif.whatif_list, name="whatif-list"),
    path("what-if/new/", whatif.whatif_create, name="whatif-create"),
    path("what-if/<int:pk>/", whatif.whatif_detail, name="whatif-detail"),
    path("what-if/<int:pk>/progress/", whatif.whatif_progress, name="whatif-progress"),
    path(
        "what-if/<int:pk>/shares/<int:index>/", whatif.whatif_share_edit, name="whatif-share-edit"
    ),
    path("what-if/<int:pk>/reset/", whatif.whatif_reset, name="whatif-reset"),
    path("what-if/<int:pk>/workload/", whatif.whatif_workload, name="whatif-workload"),
    path("what-if/<int:pk>/mapping/", whatif.whatif_mapping, name="whatif-mapping"),
    path("what-if/<int:pk>/contracts/", whatif.whatif_contracts, name="whatif-contracts"),
    path("what-if/<int:pk>/run/", whatif.whatif_run, name="whatif-run"),
    path("what-if/<int:pk>/cancel/", whatif.whatif_cancel, name="whatif-cancel"),
    path("what-if/<int:pk>/save/", whatif.whatif_save, name="whatif-save"),
    path("what-if/<int:pk>/propose/", whatif.whatif_propose, name="whatif-propose"),
    path("what-if/<int:pk>/review/", whatif.whatif_review, name="whatif-review"),
    path("what-if/<int:pk>/apply/", whatif.whatif_apply, name="whatif-apply"),
]
