from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from ovsite import views

handler404 = "core.envelope.django_not_found"
handler500 = "core.envelope.django_server_error"
handler400 = "core.envelope.django_bad_request"

urlpatterns = [
    path("health", views.health),
    path("ready", views.ready),
    path("metrics", views.metrics),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/v1/admin/", include("ovsite.admin_urls")),
    path("api/v1/", include("sessions_app.urls")),
    path("api/v1/", include("assembly.urls")),
    path("api/v1/", include("retrieval.urls")),
    path("admin/dashboards/", include("profiles.urls")),
    path("admin/", admin.site.urls),
]
