from django.urls import path

from assembly import views

urlpatterns = [
    path("search/search", views.search_view),
    path("search/recall", views.recall_view),
]
